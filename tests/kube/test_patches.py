"""PATCH bodies apply with RFC 7386 / RFC 6902 semantics."""

from __future__ import annotations

import pytest

from kueue_es.sim import patches


def test_merge_patch_merges_objects_deletes_nulls_and_replaces_lists() -> None:
    """Nested objects merge, null removes a key, lists are replaced whole, the target is not mutated."""
    target = {"spec": {"a": 1, "b": {"c": 2, "d": 3}, "items": [1, 2, 3]}, "keep": True}
    patched = patches.merge_patch(target, {"spec": {"a": None, "b": {"c": 20}, "items": [9]}})
    assert patched == {"spec": {"b": {"c": 20, "d": 3}, "items": [9]}, "keep": True}
    assert target["spec"]["a"] == 1


def test_strategic_merge_without_a_schema_replaces_lists() -> None:
    """application/strategic-merge-patch+json without a schema (a custom resource) replaces lists, as a merge patch."""
    patched = patches.apply_patch({"a": [1, 2]}, {"a": [3]}, content_type="application/strategic-merge-patch+json")
    assert patched == {"a": [3]}


def test_json_patch_operations_apply_and_failures_raise() -> None:
    """RFC 6902 operations apply; a failing `test` op raises PatchError."""
    target = {"metadata": {"labels": {"a": "1"}}}
    ops = [{"op": "add", "path": "/metadata/labels/b", "value": "2"}, {"op": "remove", "path": "/metadata/labels/a"}]
    assert patches.apply_patch(target, ops, content_type="application/json-patch+json") == {
        "metadata": {"labels": {"b": "2"}}
    }
    with pytest.raises(patches.PatchError):
        patches.apply_patch(
            target,
            [{"op": "test", "path": "/metadata/labels/a", "value": "x"}],
            content_type="application/json-patch+json",
        )


def test_unknown_patch_type_is_refused() -> None:
    """Server-side apply and other content types raise UnsupportedPatchType."""
    with pytest.raises(patches.UnsupportedPatchType):
        patches.apply_patch({}, {}, content_type="application/apply-patch+yaml")
