"""``kueue-es apply``: ``kubectl apply -f`` for the kinds kueue-es serves, at 30,000 objects.

Why this module exists: a user (or a benchmark) loads queues and jobs from files, a
directory tree or a pipe, and wants what kubectl gives: the same inputs (``-f FILE``,
``-f DIR``, ``-R``, ``-f -``, several ``-f``), one line per object (``clusterqueue.
kueue.x-k8s.io/cq created``), and refusals that name the file, the document, the object
and the field. On top: every object is validated before anything is sent, with the
same rules the API server applies (:mod:`kueue_es.validation`, and kueue-es's own
reading of Kueue objects, :func:`kueue_es.events.manifests.parse_object`); large inputs
show a progress bar instead of a line per object (``-v`` brings the lines back); and a
summary line ends every run: ``N created, M configured, K unchanged`` (and ``F failed``).

Exit codes: 0 all applied; 1 some objects refused (by us or by the server); 2 nothing
could be done (unreadable input, no kubeconfig, unreachable server).
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kueue_es import validation
from kueue_es.events import manifests

#: Files kubectl reads from a directory.
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
#: Above this many objects a run shows a progress bar, not a line per object (unless verbose).
QUIET_ABOVE = 100
#: Requests in flight within a run of objects of one kind (kinds apply in the order given).
CONCURRENCY = 16


class InputError(Exception):
    """An input that cannot be read at all (missing file, not YAML): nothing is applied."""


@dataclass(frozen=True)
class Document:
    """One object of the input: where it came from (``source``, 0-based ``index`` among the
    documents of that file) and the manifest."""

    source: str
    index: int
    manifest: dict[str, Any]

    @property
    def where(self) -> str:
        """``file.yaml (document 2)`` — the index counted from 1, as an editor shows documents."""
        return f"{self.source} (document {self.index + 1})"

    @property
    def label(self) -> str:
        """``ClusterQueue cq`` (``Workload ns/name`` when namespaced)."""
        kind, name = manifests.describe(self.manifest)
        return f"{kind or 'object'} {name or '<unnamed>'}"


@dataclass
class Tally:
    """What a run did, per outcome (``created``, ``configured``, ``unchanged``) and failures."""

    outcomes: dict[str, int] = field(default_factory=lambda: {"created": 0, "configured": 0, "unchanged": 0})
    failed: int = 0

    def summary(self) -> str:
        """``3 created, 1 configured, 0 unchanged`` (``, 2 failed`` when any failed)."""
        text = ", ".join(f"{count} {outcome}" for outcome, count in self.outcomes.items())
        return text + (f", {self.failed} failed" if self.failed else "")


def expand(paths: Iterable[str], *, recursive: bool, stdin: IO[str] | None = None) -> Iterator[tuple[str, str]]:
    """``(source, text)`` of every input: ``-`` is stdin, a directory gives its .yaml/.yml/.json files
    (sorted; subdirectories only with ``recursive``), anything else is a file.

    Raises InputError naming the path when it does not exist or cannot be read as UTF-8 text.
    """
    for raw in paths:
        if raw == "-":
            yield "<stdin>", (stdin or sys.stdin).read()
            continue
        path = Path(raw)
        if path.is_dir():
            pattern = path.rglob("*") if recursive else path.glob("*")
            files = sorted(p for p in pattern if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
            if not files:
                raise InputError(f"{path}: no {'/'.join(MANIFEST_SUFFIXES)} files in this directory")
            for file in files:
                yield str(file), _read(file)
        else:
            yield str(path), _read(path)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError as err:
        raise InputError(f"the path {str(path)!r} does not exist") from err
    except OSError as err:
        raise InputError(f"cannot read {path}: {err.strerror}") from err
    except UnicodeDecodeError as err:
        raise InputError(f"cannot read {path}: not UTF-8 text ({err.reason} at byte {err.start})") from err


def documents(inputs: Iterable[tuple[str, str]]) -> Iterator[Document]:
    """Every object of the inputs, ``kind: List`` expanded; raises InputError for YAML that does not parse."""
    for source, text in inputs:
        try:
            docs = manifests.load_documents(text, source=source)
        except manifests.ManifestError as err:
            raise InputError(f"{source}: {err.problem}") from err
        for index, doc in enumerate(docs):
            if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                for item in doc["items"]:
                    if isinstance(item, dict):
                        yield Document(source, index, item)
            else:
                yield Document(source, index, doc)


def problems(doc: Document) -> list[str]:
    """Why the API (or kueue-es) refuses ``doc``: ``field: message`` each; ``[]`` when it may be sent.

    Unknown fields (kubectl's strict field validation), the API server's validation
    (kueue_es.validation: CRD schema and Kueue's rules, pod resource requests), then, for the
    kueue.x-k8s.io kinds, kueue-es's own reading of the object.
    """
    manifest = doc.manifest
    unknown = validation.unknown_fields(manifest)
    if unknown:
        return [f'{path}: unknown field "{path.rsplit(".", 1)[-1]}"' for path in unknown]
    found = [str(cause) for cause in validation.validate(manifest)]
    if found:
        return found
    if manifest.get("apiVersion") == manifests.KUEUE_API:
        try:
            manifests.parse_object(manifest)
        except manifests.ManifestError as err:
            return [f"{err.field}: {err.problem}" if err.field else err.problem]
    return []


def resource_name(manifest: dict[str, Any], stored: dict[str, Any]) -> str:
    """``clusterqueue.kueue.x-k8s.io/cq`` as kubectl names an object in its output."""
    api_version = str(manifest.get("apiVersion") or "")
    group = api_version.rpartition("/")[0]
    kind = str(manifest.get("kind") or "").lower()
    name = (stored.get("metadata") or {}).get("name") or (manifest.get("metadata") or {}).get("name")
    return f"{kind}.{group}/{name}" if group else f"{kind}/{name}"


@dataclass
class Printer:
    """Where lines go: per-object lines on ``out`` (only when ``verbose``), errors on ``err``."""

    out: IO[str]
    err: IO[str]
    verbose: bool

    def applied(self, line: str) -> None:
        if self.verbose:
            print(line, file=self.out)

    def error(self, line: str) -> None:
        print(f"error: {line}", file=self.err)


async def apply_all(
    api: Any,
    docs: list[Document],
    *,
    printer: Printer,
    tally: Tally,
    advance: Callable[[], None] = lambda: None,
) -> None:
    """Send each valid document (create, or merge-patch the existing object) and count the outcomes.

    Consecutive documents of one kind go ``CONCURRENCY`` at a time; a new kind waits for the
    previous ones, so a Namespace listed before its LocalQueues exists when they are sent.
    Raises kube errors.ConnectionFailedError when the server cannot be reached (nothing more is tried).
    """
    from kueue_es.services.kube import client as kube
    from kueue_es.services.kube import errors as kube_errors

    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(doc: Document) -> Callable[[], None]:
        """Apply one document; returns how to report it (reports are made in input order)."""
        async with gate:
            try:
                stored, outcome = await kube.apply_manifest_outcome(api, doc.manifest)
            except kube_errors.ConnectionFailedError:
                raise
            except kube_errors.KubeError as err:
                tally.failed += 1
                return functools.partial(printer.error, f"{doc.where}: {doc.label}: {err}")
            else:
                tally.outcomes[outcome] = tally.outcomes.get(outcome, 0) + 1
                return functools.partial(printer.applied, f"{resource_name(doc.manifest, stored)} {outcome}")
            finally:
                advance()

    for run in _runs_of_one_kind(docs):
        for report in await asyncio.gather(*(one(doc) for doc in run)):
            report()


def _runs_of_one_kind(docs: list[Document]) -> Iterator[list[Document]]:
    run: list[Document] = []
    for doc in docs:
        if run and (doc.manifest.get("apiVersion"), doc.manifest.get("kind")) != (
            run[-1].manifest.get("apiVersion"),
            run[-1].manifest.get("kind"),
        ):
            yield run
            run = []
        run.append(doc)
    if run:
        yield run
