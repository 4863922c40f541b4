"""kubectl's output, byte for byte where a script could read it: tables, names, YAML, JSON, ages.

Tables are laid out as Go's text/tabwriter does for kubectl (k8s.io/cli-runtime printers.GetNewTabWriter:
minimum cell width 6, padding 3, blanks; the last column unpadded), headers upper-cased, with a
NAMESPACE column first under ``-A``. ``-o name`` prints ``kind.group/name OPERATION`` (cli-runtime's
NamePrinter, with ``(client dry run)`` / ``(server dry run)`` after the operation as kueuectl's dryrun
package adds); ``-o yaml`` sorts keys as kubectl's YAML printer does; ``-o json`` indents by four.
Ages are apimachinery's ``duration.HumanDuration`` (:func:`kueue_es.sim.tables.human_duration`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import IO, Any

import yaml

from kueue_es.kueuectl.connect import Failure
from kueue_es.sim.tables import human_duration  # apimachinery's duration.HumanDuration, as the emulator prints ages

OUTPUT_FORMATS = ("json", "name", "yaml")
MIN_WIDTH = 6
PADDING = 3


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 timestamp (``2026-01-02T03:04:05Z``) as an aware datetime, or None when absent or bad."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def age(timestamp: str | None, now: datetime) -> str:
    """HumanDuration from ``timestamp`` (RFC 3339) to ``now``; ``<unknown>`` when there is none (kubectl)."""
    then = parse_time(timestamp)
    if then is None:
        return "<unknown>"
    return human_duration((now - then).total_seconds())


def cell(value: Any) -> str:
    """A table cell as Go's fmt prints it: booleans lower-case, None as ``<none>``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<none>"
    return str(value)


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    namespaces: Sequence[str] | None = None,
    no_headers: bool = False,
) -> str:
    """The table kubectl prints: ``headers`` upper-cased, each row's cells; ``namespaces`` (one per row)
    adds the NAMESPACE column first. Returns the text with a newline after every line ("" for no rows)."""
    if not rows:
        return ""
    lines: list[list[str]] = []
    head = [h.upper() for h in headers]
    body = [[cell(c) for c in row] for row in rows]
    if namespaces is not None:
        head = ["NAMESPACE", *head]
        body = [[ns, *row] for ns, row in zip(namespaces, body, strict=True)]
    if not no_headers:
        lines.append(head)
    lines.extend(body)
    columns = max(len(line) for line in lines)
    widths = [0] * columns
    for line in lines:
        for index, text in enumerate(line[:-1]):
            widths[index] = max(widths[index], len(text) + PADDING, MIN_WIDTH)
    out = []
    for line in lines:
        padded = [text.ljust(widths[index]) for index, text in enumerate(line[:-1])]
        out.append("".join(padded) + line[-1])
    return "\n".join(out) + "\n"


def check_output(output: str | None) -> None:
    """Refuse an ``-o`` kubectl kueue cannot print, with kubectl's message (exit 1)."""
    if output and output not in OUTPUT_FORMATS:
        allowed = ", ".join(OUTPUT_FORMATS)
        raise Failure(
            f'unable to match a printer suitable for the output format "{output}", allowed formats are: {allowed}'
        )


def resource_name(obj: dict[str, Any]) -> str:
    """``kind.group/name`` (``job.batch/sample``, ``clusterqueue.kueue.x-k8s.io/cq``; ``pod/p`` for core)."""
    api_version = str(obj.get("apiVersion", ""))
    group = api_version.rpartition("/")[0]
    kind = str(obj.get("kind", "")).lower()
    name = (obj.get("metadata") or {}).get("name", "")
    return f"{kind}.{group}/{name}" if group else f"{kind}/{name}"


def operation_text(operation: str, dry_run: str) -> str:
    """The words after the name: ``created``, ``created (server dry run)``, ``stopped (client dry run)``."""
    if dry_run in ("client", "server"):
        return f"{operation} ({dry_run} dry run)"
    return operation


def print_object(obj: dict[str, Any], output: str | None, out: IO[str], *, operation: str, dry_run: str) -> None:
    """Print one object as ``-o`` asks: YAML, JSON, or (default, and ``name``) its name and the operation."""
    if output == "yaml":
        out.write(yaml.safe_dump(obj, sort_keys=True, default_flow_style=False))
    elif output == "json":
        out.write(json.dumps(obj, indent=4) + "\n")
    else:
        words = operation_text(operation, dry_run)
        out.write(f"{resource_name(obj)} {words}\n" if words and output != "name" else f"{resource_name(obj)}\n")


def print_list(items: list[dict[str, Any]], kind: str, api_version: str, output: str, out: IO[str]) -> None:
    """Print a list result as kueuectl's typed list (``kind: WorkloadList``) in YAML or JSON, or names."""
    if output == "name":
        for item in items:
            out.write(resource_name({"apiVersion": api_version, "kind": kind, **item}) + "\n")
        return
    body = {"apiVersion": api_version, "kind": f"{kind}List", "items": items, "metadata": {"resourceVersion": ""}}
    if output == "yaml":
        out.write(yaml.safe_dump(body, sort_keys=True, default_flow_style=False))
    else:
        out.write(json.dumps(body, indent=4) + "\n")
