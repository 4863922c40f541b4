"""PATCH bodies as the Kubernetes API server applies them.

Why this module exists: kmock's own patching is a deep dict merge that cannot
delete keys the way clients expect, so the emulator applies patches here, by
content type:

* ``application/merge-patch+json`` -- RFC 7386 JSON merge patch: objects merge
  recursively, ``null`` deletes a key, any other value (lists included)
  replaces.
* ``application/strategic-merge-patch+json`` -- treated as a merge patch.  A
  real server merges some lists by key (containers by name, conditions by
  type); here every list is replaced.  Clients that patch lists should send
  the whole list, which is also what kueue-es does.
* ``application/json-patch+json`` -- RFC 6902 operations, via ``jsonpatch``.

Other content types (e.g. server-side apply) raise ``UnsupportedPatchType``.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class PatchError(ValueError):
    """The patch body is malformed for its content type or cannot be applied."""


class UnsupportedPatchType(PatchError):
    """The Content-Type is not a patch type this emulator applies."""


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


def apply_patch(target: dict[str, Any], patch: Any, *, content_type: str) -> dict[str, Any]:
    """Apply a PATCH body of the given Content-Type to an object; returns the new object.

    Raises ``UnsupportedPatchType`` for unknown content types and
    ``PatchError`` for bodies that do not fit the type or fail to apply.
    """
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        if not isinstance(patch, dict):
            raise PatchError(f"a {media_type} body must be a JSON object, got {type(patch).__name__}")
        merged: dict[str, Any] = merge_patch(target, patch)
        return merged
    if media_type == JSON_PATCH:
        if not isinstance(patch, list):
            raise PatchError(f"a {media_type} body must be a JSON array of operations")
        try:
            result: Any = jsonpatch.apply_patch(target, patch, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise PatchError(f"the JSON patch cannot be applied: {exc}") from exc
        if not isinstance(result, dict):
            raise PatchError("the JSON patch replaced the object with a non-object")
        patched: dict[str, Any] = result
        return patched
    raise UnsupportedPatchType(f"the patch content type {content_type!r} is not supported")
