"""kubectl's output, byte for byte where a script could read it: tables, names, YAML, JSON, ages.

Tables are laid out as Go's text/tabwriter does for kubectl (k8s.io/cli-runtime printers.GetNewTabWriter:
minimum cell width 6, padding 3, blanks; the last column unpadded), headers upper-cased, with a
NAMESPACE column first under ``-A``. ``-o name`` prints ``kind.group/name OPERATION`` (cli-runtime's
NamePrinter, with ``(client dry run)`` / ``(server dry run)`` after the operation as kueuectl's dryrun
package adds).

``-o yaml`` and ``-o json`` print what kueuectl prints: the object as its typed clientset decodes it
(:func:`typed`: Kueue's Go structs, so ``status`` with its zero counters even before a controller wrote
one), without ``metadata.managedFields`` unless ``--show-managed-fields`` (cli-runtime's
OmitManagedFieldsPrinter); YAML as sigs.k8s.io/yaml writes it (go-yaml v2: its key order, ``"..."`` around
strings that would read back as another type, ``|`` for several lines), JSON as Go's ``MarshalIndent``
(four spaces, the struct's key order for the object and its metadata, ``<``, ``>`` and ``&`` escaped).
Ages are apimachinery's ``duration.HumanDuration`` (:func:`kueue_es.sim.tables.human_duration`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import IO, Any

import yaml

from kueue_es.kueuectl.connect import Failure
from kueue_es.sim.tables import human_duration  # apimachinery's duration.HumanDuration, as the emulator prints ages

#: The ``-o`` formats printed here, in the order cli-runtime's PrintFlags lists its own (JSON/YAML, then name).
OUTPUT_FORMATS = ("json", "yaml", "name")
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
    """Refuse an ``-o`` kubectl kueue cannot print, with cli-runtime's message (NoCompatiblePrinterError: the
    formats joined by a bare comma; exit 1)."""
    if output and output not in OUTPUT_FORMATS:
        allowed = ",".join(OUTPUT_FORMATS)
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


#: metav1.TypeMeta and metav1.ObjectMeta's fields, in the order Go's encoding/json writes them.
TYPE_META = ("kind", "apiVersion")
OBJECT_META = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)
LIST_META = ("selfLink", "resourceVersion", "continue", "remainingItemCount")
#: The Kueue kinds kueuectl prints: their fields after the metadata (Go struct order), with the value a field
#: that is not ``omitempty`` takes when the server sent none (apis/kueue/v1beta2/*_types.go: the status
#: counters are plain int32s, the spec and status structs are always written).
_QUEUE_STATUS = {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0}
TYPED_FIELDS: dict[str, dict[str, dict[str, Any]]] = {
    "ClusterQueue": {"spec": {}, "status": _QUEUE_STATUS},
    "LocalQueue": {"spec": {}, "status": _QUEUE_STATUS},
    "ResourceFlavor": {"spec": {}},
    "Workload": {"spec": {}, "status": {}},
}


def _ordered(obj: dict[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """``obj`` with the keys of ``order`` first, in that order, then the others as they were."""
    head = {key: obj[key] for key in order if key in obj}
    return {**head, **{key: value for key, value in obj.items() if key not in head}}


def typed(obj: dict[str, Any], *, show_managed_fields: bool = False) -> dict[str, Any]:
    """An object as kueuectl's typed clientset holds it before printing: TypeMeta and ObjectMeta in Go's
    field order, a Kueue kind's fields not ``omitempty`` filled with their zero values (:data:`TYPED_FIELDS`),
    ``metadata.managedFields`` dropped unless ``show_managed_fields``. Returns a new dict; ``obj`` is
    untouched."""
    kind = str(obj.get("kind", ""))
    metadata = dict(obj.get("metadata") or {})
    if not show_managed_fields:
        metadata.pop("managedFields", None)
    result: dict[str, Any] = {key: obj[key] for key in TYPE_META if key in obj}
    result["metadata"] = _ordered(metadata, OBJECT_META)
    fields = TYPED_FIELDS.get(kind, {})
    for field, zeros in fields.items():
        given = obj.get(field)
        given = given if isinstance(given, dict) else {}
        # the server's fields in its order, then the zero values of those it did not send
        result[field] = {**given, **{k: v for k, v in zeros.items() if k not in given}}
    for key, value in obj.items():
        result.setdefault(key, value)
    return result


def typed_list(
    items: Sequence[dict[str, Any]],
    kind: str,
    api_version: str,
    list_meta: dict[str, Any] | None = None,
    *,
    show_managed_fields: bool = False,
) -> dict[str, Any]:
    """kueuectl's typed list of one page (``kind: LocalQueueList``): TypeMeta, the page's ListMeta
    (``resourceVersion``, ``continue``) and the items as :func:`typed` holds them."""
    return {
        "kind": f"{kind}List",
        "apiVersion": api_version,
        "metadata": _ordered({k: v for k, v in (list_meta or {}).items() if k in LIST_META and v}, LIST_META),
        "items": [typed(item, show_managed_fields=show_managed_fields) for item in items],
    }


# -- go-yaml v2 (sigs.k8s.io/yaml), as kubectl's YAMLPrinter writes ---------------------------------------------------

_GO_BOOLS = {"y", "Y", "n", "N"}  # YAML 1.1 booleans go-yaml v2 reads that PyYAML's resolver does not
_RESOLVER = yaml.resolver.Resolver()


def _reads_back_as_other_type(text: str) -> bool:
    """Whether go-yaml v2 would read ``text``, written plain, as something other than a string (a number, a
    boolean, null, a timestamp): it then writes it double-quoted (encode.go stringv)."""
    if text in _GO_BOOLS:
        return True
    tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))
    # PyYAML's "=" (value) and "!", "&", "*" (yaml) tags are strings to go-yaml v2
    if tag not in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:value", "tag:yaml.org,2002:yaml"):
        return True
    if text and text[0] in "0123456789+-." and text.strip() == text:  # Go's ParseFloat takes 1e3, which PyYAML does not
        try:
            float(text.replace("_", ""))
        except ValueError:
            return False
        return True
    return False


def _go_yaml_key_less(a: str, b: str) -> int:
    """go-yaml v2's map key order (sorter.go keyList.Less) as a cmp function: runs of digits compare as
    numbers, a non-letter sorts before a letter, letters by code point."""
    for i in range(min(len(a), len(b))):
        if a[i] == b[i]:
            continue
        a_letter, b_letter = a[i].isalpha(), b[i].isalpha()
        if a_letter and b_letter:
            return -1 if a[i] < b[i] else 1
        if a_letter or b_letter:
            return -1 if b_letter else 1
        a_num = b_num = 0
        if a[i] == "0" or b[i] == "0":
            j = i - 1
            while j >= 0 and a[j].isdigit():
                if a[j] != "0":
                    a_num = b_num = 1
                    break
                j -= 1
        a_end = i
        while a_end < len(a) and a[a_end].isdigit():
            a_num = a_num * 10 + int(a[a_end])
            a_end += 1
        b_end = i
        while b_end < len(b) and b[b_end].isdigit():
            b_num = b_num * 10 + int(b[b_end])
            b_end += 1
        if a_num != b_num:
            return -1 if a_num < b_num else 1
        if a_end != b_end:
            return -1 if a_end < b_end else 1
        return -1 if a[i] < b[i] else 1
    return (len(a) > len(b)) - (len(a) < len(b))


def _go_yaml_order(value: Any) -> Any:
    if isinstance(value, dict):
        keys = sorted(value, key=functools.cmp_to_key(lambda x, y: _go_yaml_key_less(str(x), str(y))))
        return {key: _go_yaml_order(value[key]) for key in keys}
    if isinstance(value, list):
        return [_go_yaml_order(item) for item in value]
    return value


class _GoYAMLDumper(yaml.SafeDumper):
    """PyYAML (a port of libyaml, as go-yaml v2 is) with go-yaml v2's choice of scalar style for strings."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else '"' if _reads_back_as_other_type(text) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_GoYAMLDumper.add_representer(str, _represent_str)


def to_yaml(obj: Any) -> str:
    """``obj`` as sigs.k8s.io/yaml's Marshal writes it (kubectl's ``-o yaml``)."""
    text: str = yaml.dump(
        _go_yaml_order(obj), Dumper=_GoYAMLDumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    )
    return text


_GO_HTML_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def to_json(obj: Any) -> str:
    """``obj`` as Go's json.MarshalIndent(obj, "", "    ") writes it (kubectl's ``-o json``): non-ASCII
    as is, ``<``, ``>``, ``&`` and the line and paragraph separators escaped; a newline after it."""
    text = json.dumps(obj, indent=4, ensure_ascii=False)
    # those characters only ever stand inside JSON strings, so replacing them everywhere is safe
    return re.sub("[<>&\u2028\u2029]", lambda m: _GO_HTML_ESCAPES[m.group()], text) + "\n"


def print_object(
    obj: dict[str, Any],
    output: str | None,
    out: IO[str],
    *,
    operation: str,
    dry_run: str,
    show_managed_fields: bool = False,
) -> None:
    """Print one object as ``-o`` asks: YAML, JSON (:func:`typed`), or (default, and ``name``) its name and the
    operation."""
    if output == "yaml":
        out.write(to_yaml(typed(obj, show_managed_fields=show_managed_fields)))
    elif output == "json":
        out.write(to_json(typed(obj, show_managed_fields=show_managed_fields)))
    else:
        words = operation_text(operation, dry_run)
        out.write(f"{resource_name(obj)} {words}\n" if words and output != "name" else f"{resource_name(obj)}\n")


def print_list(
    items: list[dict[str, Any]],
    kind: str,
    api_version: str,
    output: str,
    out: IO[str],
    *,
    list_meta: dict[str, Any] | None = None,
    first: bool = True,
    show_managed_fields: bool = False,
) -> None:
    """Print one page of a list as kueuectl does, its typed list (:func:`typed_list`) in YAML or JSON, or
    the names of its items. kueuectl prints each page it reads: a YAML page after the first starts with
    ``---`` (cli-runtime's YAMLPrinter), JSON pages follow each other."""
    if output == "name":
        for item in items:
            out.write(resource_name({"apiVersion": api_version, "kind": kind, **item}) + "\n")
        return
    body = typed_list(items, kind, api_version, list_meta, show_managed_fields=show_managed_fields)
    if output == "yaml":
        out.write(("" if first else "---\n") + to_yaml(body))
    else:
        out.write(to_json(body))
