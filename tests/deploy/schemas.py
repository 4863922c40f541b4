"""Checking objects against a CRD's openAPIV3Schema as an API server would.

jsonschema does the validation (types, enums, patterns, required); what it does not
do is what Kubernetes adds: :func:`pruned` lists the fields an API server would drop
(not in ``properties``, no ``additionalProperties``, no
``x-kubernetes-preserve-unknown-fields`` above them), and
:func:`structural_problems` the rules of a structural schema that the CRD API
enforces when the CRD is created.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema

SERVER_SET_METADATA = ("metadata",)


def validation_errors(schema: Mapping[str, Any], obj: Mapping[str, Any]) -> list[str]:
    """jsonschema's complaints about ``obj``, each as ``path: message``."""
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'.'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"
        for err in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    ]


def pruned(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """Paths of the fields of ``value`` an API server would prune under ``schema``."""
    if schema.get("x-kubernetes-preserve-unknown-fields") or path == ".metadata":
        return []
    out: list[str] = []
    if isinstance(value, Mapping):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if properties is not None and key in properties:
                out += pruned(properties[key], item, f"{path}.{key}")
            elif isinstance(extra, Mapping):
                out += pruned(extra, item, f"{path}.{key}")
            else:
                out.append(f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            out += pruned(schema["items"], item, f"{path}[{index}]")
    return out


def nodes(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every schema node with its path (``.spec.x``, ``[]`` for items, ``{}`` for map values)."""
    yield path, schema
    for key, sub in (schema.get("properties") or {}).items():
        yield from nodes(sub, f"{path}.{key}")
    if isinstance(schema.get("items"), Mapping):
        yield from nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from nodes(schema["additionalProperties"], f"{path}{{}}")
    for index, sub in enumerate(schema.get("anyOf") or ()):
        yield from nodes(sub, f"{path}<anyOf {index}>")


def structural_problems(schema: Mapping[str, Any]) -> list[str]:
    """Where ``schema`` breaks the rules of a Kubernetes structural schema (apiextensions v1)."""
    problems = []
    for path, node in nodes(schema):
        if "$ref" in node:
            problems.append(f"{path}: $ref is not allowed")
        in_any_of = "<anyOf" in path.rsplit(".", 1)[-1]
        int_or_string = node.get("x-kubernetes-int-or-string")
        if (
            not in_any_of
            and "type" not in node
            and not int_or_string
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            problems.append(f"{path}: no type")
        if in_any_of and set(node) - {"type"}:
            problems.append(f"{path}: anyOf branches may only name a type here")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: properties and additionalProperties together")
        if (
            node.get("type") == "object"
            and not (
                "properties" in node
                or "additionalProperties" in node
                or node.get("x-kubernetes-preserve-unknown-fields")
            )
            and path not in ("", ".metadata")
        ):
            problems.append(f"{path}: an object with no fields would prune everything")
        if int_or_string and node.get("anyOf") != [{"type": "integer"}, {"type": "string"}]:
            problems.append(f"{path}: int-or-string needs anyOf integer, string")
        if "default" in node and not in_any_of:
            errors = validation_errors(node, node["default"])
            if errors:
                problems.append(f"{path}: default {node['default']!r} does not validate: {errors}")
            if pruned(node, node["default"]):
                problems.append(f"{path}: default {node['default']!r} would be pruned")
    metadata = (schema.get("properties") or {}).get("metadata")
    if metadata != {"type": "object"}:
        problems.append(f".metadata: must be just type object, got {metadata}")
    return problems
