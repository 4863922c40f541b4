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

Any kind the server serves is applied: each document's apiVersion and kind are mapped to a resource by
the server's discovery (:func:`kueue_es.services.kube.client.served_kinds`), as kubectl's RESTMapper maps
them, so Kueue's v1beta1 kinds, RBAC, CRDs and the kinds those CRDs add go as kubectl sends them; a kind
the server does not serve is refused as kubectl refuses it (``no matches for kind ... ensure CRDs are
installed first``). Errors are reported in document order, each naming the object as its scope names it
(a cluster-scoped object without a namespace, whatever its manifest says).

Exit codes, kubectl's but for one: 0 all applied; 1 some objects refused (by us or by the server), or an
input that cannot be read (a missing file, YAML that does not parse: nothing is applied), as kubectl exits 1;
2 when no server can be used at all (no kubeconfig, an unusable one, an unreachable server), which kubectl
also reports with 1.
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
from kueue_es.services.kube import resources

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
    #: Why kueue-es refuses it before sending it (:func:`problems`), each ``field: message``.
    problems: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """``file.yaml (document 2)`` — the index counted from 1, as an editor shows documents."""
        return f"{self.source} (document {self.index + 1})"

    @property
    def label(self) -> str:
        """``ClusterQueue cq`` (``Workload ns/name`` when namespaced), the scope as kueue-es knows the kind
        (:data:`kueue_es.services.kube.resources.RESOURCES`), else as the manifest says it."""
        ref = resources.RESOURCES.get((str(self.manifest.get("apiVersion") or ""), str(self.manifest.get("kind"))))
        return self.label_in(None if ref is None else ref.namespaced)

    def label_in(self, namespaced: bool | None) -> str:
        """:attr:`label` for a kind whose scope is known (``namespaced``; None: as the manifest says): a
        cluster-scoped object is named without the namespace its manifest may carry (the server drops it)."""
        kind, name = manifests.describe(self.manifest)
        if namespaced is False:
            metadata = self.manifest.get("metadata") or {}
            name = str(metadata.get("name") or metadata.get("generateName") or "")
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
    unset = [f"{key} not set" for key in ("apiVersion", "kind") if not manifest.get(key)]
    if unset:  # as kubectl's client-side check says it (error validating data: [apiVersion not set, ...])
        return unset
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


#: Kinds whose writes change what the server serves: discovery is read again after one is applied.
SERVING_KINDS = (("apiextensions.k8s.io/v1", "CustomResourceDefinition"), ("apiregistration.k8s.io/v1", "APIService"))


@dataclass
class KindMapper:
    """The server's kinds by apiVersion (:func:`kueue_es.services.kube.client.served_kinds`), each
    group-version's discovery read once, when a document first needs it; :meth:`forget` after a write that
    serves new kinds (a CRD), as kubectl's deferred RESTMapper resets."""

    api: Any
    served: dict[str, dict[str, resources.ResourceRef]] = field(default_factory=dict)

    async def ref(self, api_version: str, kind: str) -> resources.ResourceRef | None:
        """The kind ``kind`` of ``api_version`` as the server serves it, None when it does not."""
        from kueue_es.services.kube import client as kube

        if api_version not in self.served:
            self.served[api_version] = await kube.served_kinds(self.api, api_version)
        return self.served[api_version].get(kind)

    def forget(self) -> None:
        """Read discovery again for the next document."""
        self.served.clear()


async def apply_all(
    api: Any,
    docs: list[Document],
    *,
    printer: Printer,
    tally: Tally,
    advance: Callable[[], None] = lambda: None,
) -> None:
    """Send each document kueue-es does not refuse itself (create, or merge-patch the existing object), its kind
    mapped by the server's discovery (:class:`KindMapper`), and count the outcomes; report each document, applied
    or refused (:attr:`Document.problems`, a kind the server does not serve, the server's refusal), in document
    order.

    Consecutive documents of one kind go ``CONCURRENCY`` at a time; a new kind waits for the
    previous ones, so a Namespace listed before its LocalQueues exists when they are sent, and a CRD before
    the objects of its kind.
    Raises kube errors.ConnectionFailedError when the server cannot be reached (nothing more is tried).
    """
    from kueue_es.services.kube import client as kube
    from kueue_es.services.kube import errors as kube_errors

    gate = asyncio.Semaphore(CONCURRENCY)
    mapper = KindMapper(api)

    def refused(doc: Document, problems: Iterable[str], *, namespaced: bool | None) -> Callable[[], None]:
        tally.failed += 1
        lines = [f"{doc.where}: {doc.label_in(namespaced)}: {problem} (not applied)" for problem in problems]

        def report() -> None:
            for line in lines:
                printer.error(line)

        return report

    async def one(doc: Document, ref: resources.ResourceRef | None, unmapped: str) -> Callable[[], None]:
        """Apply one document; returns how to report it (reports are made in input order)."""
        if doc.problems:
            advance()
            return refused(doc, doc.problems, namespaced=None if ref is None else ref.namespaced)
        if ref is None:
            advance()
            api_version, kind = doc.manifest.get("apiVersion"), doc.manifest.get("kind")
            why = (
                unmapped or f'no matches for kind "{kind}" in version "{api_version}": ensure CRDs are installed first'
            )
            return refused(doc, [why], namespaced=None)
        async with gate:
            try:
                stored, outcome = await kube.apply_manifest_outcome(api, doc.manifest, ref=ref)
            except kube_errors.ConnectionFailedError:
                raise
            except kube_errors.KubeError as err:
                tally.failed += 1
                return functools.partial(printer.error, f"{doc.where}: {doc.label_in(ref.namespaced)}: {err}")
            else:
                tally.outcomes[outcome] = tally.outcomes.get(outcome, 0) + 1
                return functools.partial(printer.applied, f"{resource_name(doc.manifest, stored)} {outcome}")
            finally:
                advance()

    for run in _runs_of_one_kind(docs):
        api_version, kind = str(run[0].manifest.get("apiVersion") or ""), str(run[0].manifest.get("kind") or "")
        sent = any(not doc.problems for doc in run)
        ref, unmapped = None, ""
        try:
            ref = await mapper.ref(api_version, kind) if sent and api_version and kind else None
        except kube_errors.ConnectionFailedError:
            raise
        except kube_errors.KubeError as err:  # the discovery of its group-version refused (403, 500, ...)
            unmapped = f"the server's discovery of {api_version} failed: {err}"
        for report in await asyncio.gather(*(one(doc, ref, unmapped) for doc in run)):
            report()
        if sent and (api_version, kind) in SERVING_KINDS:
            mapper.forget()


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
