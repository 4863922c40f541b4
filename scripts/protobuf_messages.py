"""Write kueue_es/sim/protobuf_messages.json: the protobuf field numbers of the built-in kinds kubectl's
generators send as protobuf (``kubectl create job NAME --image=...``, ``create cronjob``, ``create
deployment``), read from Kubernetes' generated.proto files.

Usage (with clones of github.com/kubernetes/api and github.com/kubernetes/apimachinery)::

    python scripts/protobuf_messages.py --api ../api --apimachinery ../apimachinery

Each message is kept as ``{field number: [json name, type, repeated]}`` where type is a scalar
(``string``, ``int``, ``bool``, ``bytes``, ``double``), ``map:<value type>`` or another message's full
name; only the messages the roots reach are written. kueue_es/sim/protobuf.py reads the file.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

ROOTS = ("k8s.io.api.batch.v1.Job", "k8s.io.api.batch.v1.CronJob", "k8s.io.api.apps.v1.Deployment")
OUTPUT = Path(__file__).resolve().parent.parent / "kueue_es" / "sim" / "protobuf_messages.json"
PROTOS = {
    "api": ("core/v1", "batch/v1", "apps/v1"),
    "apimachinery": ("pkg/apis/meta/v1", "pkg/api/resource", "pkg/util/intstr", "pkg/runtime"),
}
_SCALARS = {
    "string": "string",
    "bytes": "bytes",
    "bool": "bool",
    "int32": "int",
    "int64": "int",
    "uint32": "int",
    "uint64": "int",
    "double": "double",
    "float": "double",
}
_FIELD = re.compile(r"^\s*(optional|repeated)\s+([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;")
_MAP = re.compile(r"^\s*map<\s*string\s*,\s*([\w.]+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;")


def parse(text: str) -> tuple[str, dict[str, dict[str, list[object]]]]:
    """(package, {message name: fields}) of one generated.proto (top-level messages, as Kubernetes writes them)."""
    package = re.search(r"^package\s+([\w.]+)\s*;", text, re.MULTILINE)
    assert package is not None
    messages: dict[str, dict[str, list[object]]] = {}
    current: dict[str, list[object]] | None = None
    for line in text.splitlines():
        if line.strip().startswith("//"):
            continue
        if found := re.match(r"^message\s+(\w+)\s*\{", line):
            current = messages.setdefault(found.group(1), {})
        elif line.startswith("}"):
            current = None
        elif current is not None and (field := _FIELD.match(line)):
            label, kind, name, number = field.groups()
            current[number] = [name, kind, label == "repeated"]
        elif current is not None and (entry := _MAP.match(line)):
            kind, name, number = entry.groups()
            current[number] = [name, f"map:{kind}", False]
    return package.group(1), messages


def resolve(kind: str, package: str, known: set[str]) -> str:
    """A field's type as a scalar name or a message's full name."""
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind.startswith("map:"):
        return "map:" + resolve(kind[4:], package, known)
    name = kind.lstrip(".")
    return name if name in known else f"{package}.{name}"


def build(api: Path, apimachinery: Path) -> dict[str, dict[str, list[object]]]:
    """The messages the roots reach, by full name, their field types resolved."""
    raw: dict[str, tuple[str, dict[str, list[object]]]] = {}
    for root, folders in ((api, PROTOS["api"]), (apimachinery, PROTOS["apimachinery"])):
        for folder in folders:
            package, messages = parse((root / folder / "generated.proto").read_text())
            for name, fields in messages.items():
                raw[f"{package}.{name}"] = (package, fields)
    known = set(raw)
    out: dict[str, dict[str, list[object]]] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        package, fields = raw[name]
        resolved = {}
        for number, (field, kind, repeated) in fields.items():
            target = resolve(str(kind), package, known)
            resolved[number] = [field, target, repeated]
            message = target[4:] if target.startswith("map:") else target
            if message in known:
                todo.append(message)
        out[name] = dict(sorted(resolved.items(), key=lambda item: int(item[0])))
    return dict(sorted(out.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", type=Path, required=True, help="a clone of kubernetes/api")
    parser.add_argument("--apimachinery", type=Path, required=True, help="a clone of kubernetes/apimachinery")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    messages = build(args.api, args.apimachinery)
    args.output.write_text(json.dumps(messages, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"wrote {len(messages)} messages to {args.output}")


if __name__ == "__main__":
    main()
