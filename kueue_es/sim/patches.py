"""PATCH bodies as the Kubernetes API server applies them.

Why this module exists: kmock's own patching is a deep dict merge that cannot
delete keys the way clients expect, so the emulator applies patches here, by
content type:

* ``application/merge-patch+json`` -- RFC 7386 JSON merge patch: objects merge
  recursively, ``null`` deletes a key, any other value (lists included)
  replaces.
* ``application/strategic-merge-patch+json`` -- Kubernetes' strategic merge
  patch: a merge patch whose lists merge as the kind's OpenAPI schema says
  (``x-kubernetes-patch-strategy: merge`` with ``x-kubernetes-patch-merge-key``:
  containers by name, conditions by type; primitive lists as sets), with the
  directives kubectl sends (``$patch: delete|replace|merge``,
  ``$setElementOrder/FIELD``, ``$deleteFromPrimitiveList/FIELD``,
  ``$retainKeys``).  Without a schema (custom resources) every list is replaced,
  as for a merge patch.
* ``application/json-patch+json`` -- RFC 6902 operations, via ``jsonpatch``.

Other content types (e.g. server-side apply) raise ``UnsupportedPatchType``.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

import jsonpatch

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class PatchError(ValueError):
    """The patch body is malformed for its content type or cannot be applied."""


class MalformedPatch(PatchError):
    """The body is not of its content type's shape (a merge patch that is not an object, a JSON patch that
    is not a list): the API server's 400 BadRequest, where a patch that fails to apply is 422."""


class UnsupportedPatchType(PatchError):
    """The Content-Type is not a patch type this emulator applies."""


class PatchSchema(Protocol):
    """What a strategic merge patch needs to know of a kind's schema at one place in an object."""

    def field(self, name: str) -> PatchSchema:
        """The schema of a map's field (an empty schema when unknown)."""

    def items(self) -> PatchSchema:
        """The schema of a list's items."""

    def list_merge(self) -> tuple[bool, str | None]:
        """(whether the list here merges rather than replaces, the merge key of its items or None)."""


class NoSchema:
    """A PatchSchema that knows nothing: every list is replaced."""

    def field(self, name: str) -> PatchSchema:
        return self

    def items(self) -> PatchSchema:
        return self

    def list_merge(self) -> tuple[bool, str | None]:
        return False, None


_DIRECTIVE_PREFIXES = ("$setElementOrder/", "$deleteFromPrimitiveList/")


def strategic_merge_patch(target: Any, patch: Any, schema: PatchSchema) -> Any:
    """Apply a strategic merge patch to ``target`` (returns a new value, never mutates it).

    Maps merge key by key and ``null`` deletes; a list the schema marks
    ``merge`` merges item by item (items with the merge key are matched by it
    and merged, ``{"$patch": "delete", KEY: v}`` removes one, others are
    appended; primitive items are added once); any other list is replaced.
    Raises PatchError for an unknown ``$patch`` value.
    (Kubernetes apimachinery pkg/util/strategicpatch.)
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch", "merge")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive != "merge":
        raise PatchError(f"unknown $patch directive {directive!r} in a map")
    result: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    orders: dict[str, list[Any]] = {}
    removals: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = list(value or [])
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            removals[key.split("/", 1)[1]] = list(value or [])
            continue
        field = schema.field(key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and value.get("$patch") == "delete":
            result.pop(key, None)
        elif isinstance(value, list) and isinstance(result.get(key), list) and field.list_merge()[0]:
            result[key] = _merge_list(result[key], value, field)
        elif isinstance(value, list):
            result[key] = [_strip(item) for item in value if not _deletes(item)]
        else:
            result[key] = strategic_merge_patch(result.get(key), value, field)
    for key, values in removals.items():
        if isinstance(result.get(key), list):
            result[key] = [item for item in result[key] if item not in values]
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _ordered(result[key], order, schema.field(key).list_merge()[1])
    if isinstance(patch.get("$retainKeys"), list):
        keep = set(patch["$retainKeys"])
        result = {k: v for k, v in result.items() if k in keep}
    return result


def _deletes(item: Any) -> bool:
    return isinstance(item, dict) and item.get("$patch") == "delete"


def _strip(item: Any) -> Any:
    """A patch value with its directives removed (what it means where nothing is merged into)."""
    if isinstance(item, dict):
        return {
            k: _strip(v)
            for k, v in item.items()
            if k not in ("$patch", "$retainKeys") and not k.startswith(_DIRECTIVE_PREFIXES) and v is not None
        }
    if isinstance(item, list):
        return [_strip(v) for v in item if not _deletes(v)]
    return copy.deepcopy(item)


def _merge_list(current: list[Any], patch: list[Any], schema: PatchSchema) -> list[Any]:
    _, key = schema.list_merge()
    result = copy.deepcopy(current)
    if key is None:
        for item in patch:
            if item not in result:
                result.append(copy.deepcopy(item))
        return result
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"a list item of a strategic merge patch has no merge key {key!r}: {item!r}")
        index = next((i for i, old in enumerate(result) if isinstance(old, dict) and old.get(key) == item[key]), None)
        if _deletes(item):
            if index is not None:
                del result[index]
        elif item.get("$patch") == "replace":
            replacement = {k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"}
            if index is None:
                result.append(replacement)
            else:
                result[index] = replacement
        elif index is None:
            result.append(_strip(item))
        else:
            result[index] = strategic_merge_patch(result[index], item, schema.items())
    return result


def _ordered(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    """``$setElementOrder``: the listed items first, in the listed order, then the others as they were."""

    def identity(item: Any) -> Any:
        return item.get(key) if key is not None and isinstance(item, dict) else item

    wanted = [identity(entry) for entry in order]
    first = sorted((item for item in items if identity(item) in wanted), key=lambda item: wanted.index(identity(item)))
    return first + [item for item in items if identity(item) not in wanted]


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch; returns a new value, never mutates ``target``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def apply_patch(
    target: dict[str, Any], patch: Any, *, content_type: str, schema: PatchSchema | None = None
) -> dict[str, Any]:
    """Apply a PATCH body of the given Content-Type to an object; returns the new object.

    ``schema`` tells a strategic merge patch which lists merge (none without it).

    Raises ``UnsupportedPatchType`` for unknown content types and
    ``MalformedPatch`` for bodies that do not fit the type, ``PatchError`` for ones that fail to apply.
    """
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        if not isinstance(patch, dict):
            raise MalformedPatch(f"a {media_type} body must be a JSON object, got {type(patch).__name__}")
        if media_type == STRATEGIC_MERGE_PATCH:
            strategic: dict[str, Any] = strategic_merge_patch(target, patch, schema or NoSchema())
            return strategic
        merged: dict[str, Any] = merge_patch(target, patch)
        return merged
    if media_type == JSON_PATCH:
        if not isinstance(patch, list):
            raise MalformedPatch(f"a {media_type} body must be a JSON array of operations")
        try:
            result: Any = jsonpatch.apply_patch(target, patch, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise PatchError(f"the JSON patch cannot be applied: {exc}") from exc
        if not isinstance(result, dict):
            raise PatchError("the JSON patch replaced the object with a non-object")
        patched: dict[str, Any] = result
        return patched
    raise UnsupportedPatchType(f"the patch content type {content_type!r} is not supported")
