"""Field ownership (``metadata.managedFields``) and server-side apply conflicts, as the API server keeps them.

Why this module exists: a real API server records, for every write, which field manager set which fields
(``kubectl get -o yaml --show-managed-fields``), and refuses a server-side apply that would change a field
another manager owns (409 Conflict, ``Apply failed with 1 conflict: conflict with "kubectl-client-side-apply"
using batch/v1: .spec.parallelism``) unless it forces (``kubectl apply --server-side --force-conflicts``),
which takes the field over. An apply also removes the fields its manager applied before and no longer
applies, when no other manager owns them.

The model (pure functions over objects and ``managedFields`` lists): a field is a path of map keys; a
list is one field, owned whole, but for ``conditions`` lists (``listType=map`` keyed by ``type`` in every
Kubernetes and Kueue kind): each condition is a field of its own, ``k:{"type":"Evicted"}`` in FieldsV1 as the
API server writes it, so a controller's apply of its conditions leaves another writer's alone and removes only
the ones it applied before (the API server also merges the items of other ``listType=map`` and ``set`` lists
one by one; here those lists are atomic, so two managers applying different items of one conflict).
Of ``metadata`` only labels, annotations, finalizers and ownerReferences are fields; ``apiVersion`` and
``kind`` are none. Entries are kept per manager, operation (``Apply`` or ``Update``) and subresource, in
``FieldsV1`` form, and read back from the object, so what a client writes into ``managedFields``
(``kubectl apply --server-side`` moving fields from ``kubectl-client-side-apply``) is what counts.
A manager of an update is the request's ``fieldManager``, else its User-Agent's first word (kube-apiserver's
default: ``kubectl``, ``OpenAPI-Generator``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

Path = tuple[str, ...]

APPLY = "Apply"
#: kubectl's server-side apply manager, and the annotation its client-side apply keeps.
KUBECTL = "kubectl"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
UPDATE = "Update"
#: The metadata fields whose ownership is tracked (the others are the server's or immutable).
_METADATA_FIELDS = ("labels", "annotations", "finalizers", "ownerReferences")
_MISSING = object()


class Conflict(Exception):
    """A server-side apply would change fields other managers own: 409 Conflict with these causes."""

    def __init__(self, conflicts: list[tuple[dict[str, Any], Path]]) -> None:
        self.conflicts = conflicts
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """The API server's words (fieldmanager getConflictMessage)."""
        if len(self.conflicts) == 1:
            entry, path = self.conflicts[0]
            return f"Apply failed with 1 conflict: conflict with {_printed(entry)}: {dotted(path)}"
        by_manager: dict[str, list[Path]] = {}
        for entry, path in self.conflicts:
            by_manager.setdefault(_printed(entry), []).append(path)
        lines = []
        for manager in sorted(by_manager):
            lines.append(f"conflicts with {manager}:")
            lines.extend(f"- {dotted(path)}" for path in by_manager[manager])
        return f"Apply failed with {len(self.conflicts)} conflicts: " + "\n".join(lines)

    def causes(self) -> list[dict[str, str]]:
        """The Status ``details.causes``: one FieldManagerConflict per field."""
        return [
            {"reason": "FieldManagerConflict", "message": f"conflict with {_printed(entry)}", "field": dotted(path)}
            for entry, path in self.conflicts
        ]


def manager_of(field_manager: str, user_agent: str) -> str:
    """The manager of an update: ``fieldManager``, else the User-Agent up to its first ``/`` (kube-apiserver's
    prefixFromUserAgent), else ``unknown``."""
    if field_manager:
        return field_manager
    prefix = user_agent.split("/", 1)[0].strip()
    return prefix[:128] if prefix else "unknown"


def dotted(path: Path) -> str:
    """A field path as the API server prints it: ``.spec.cohortName``."""
    return "".join(f".{key}" for key in path)


def fields_of(obj: Mapping[str, Any], *, part: str) -> set[Path]:
    """Every field set in ``obj`` (maps descend, anything else, lists included, is one field) of the
    ``part`` a write may change: ``status`` (the status subresource), ``main`` (all but status: a kind
    with the subresource) or ``all``."""
    found: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if part == "status" and key != "status":
            continue
        if part == "main" and key == "status":
            continue
        if key == "metadata":
            if isinstance(value, Mapping):
                for field in _METADATA_FIELDS:
                    if field in value:
                        found.update(_leaves(value[field], ("metadata", field)))
            continue
        found.update(_leaves(value, (key,)))
    return found


#: The lists merged item by item, by the name of their field: the item's key field (``listType=map``).
MAP_LISTS = {"conditions": "type"}


def item_key(list_field: str, item: Mapping[str, Any]) -> str:
    """The path element of one item of a :data:`MAP_LISTS` list, as FieldsV1 writes it: ``k:{"type":"Evicted"}``."""
    field = MAP_LISTS[list_field]
    return "k:" + json.dumps({field: item.get(field)}, separators=(",", ":"))


def keyed_items(prefix: Path, value: Any) -> bool:
    """Whether ``value`` at ``prefix`` is a non-empty :data:`MAP_LISTS` list whose every item has its key."""
    field = MAP_LISTS.get(prefix[-1]) if prefix else None
    return (
        field is not None
        and isinstance(value, list)
        and bool(value)
        and all(isinstance(item, Mapping) and isinstance(item.get(field), str) for item in value)
    )


def _leaves(value: Any, prefix: Path) -> Iterator[Path]:
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            yield from _leaves(item, (*prefix, str(key)))
    elif keyed_items(prefix, value):
        for item in value:
            yield (*prefix, item_key(prefix[-1], item))
    else:
        yield prefix


def value_at(obj: Any, path: Path) -> Any:
    """The value at ``path`` (a ``k:`` element picks a :data:`MAP_LISTS` item), or ``_MISSING``."""
    for key in path:
        if key.startswith("k:") and isinstance(obj, list):
            wanted = json.loads(key[2:])
            found = [i for i in obj if isinstance(i, Mapping) and all(i.get(k) == v for k, v in wanted.items())]
            if not found:
                return _MISSING
            obj = found[0]
            continue
        if not isinstance(obj, Mapping) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """Paths as a FieldsV1 tree (``{"f:spec": {"f:cohortName": {}}}``; a list item's ``k:`` element as is)."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for key in path:
            node = node.setdefault(key if key.startswith("k:") else f"f:{key}", {})
    return tree


def from_fields_v1(tree: Any, prefix: Path = ()) -> set[Path]:
    """The paths of a FieldsV1 tree (its leaves; a ``k:`` entry of a :data:`MAP_LISTS` list is its item as a
    whole, other ``k:``/``v:``/``i:`` entries count for their list as a whole)."""
    found: set[Path] = set()
    if not isinstance(tree, Mapping) or not tree:
        return {prefix} if prefix else found
    for key, sub in tree.items():
        if key == ".":
            if prefix:
                found.add(prefix)
        elif isinstance(key, str) and key.startswith("f:"):
            found |= from_fields_v1(sub, (*prefix, key[2:]))
        elif isinstance(key, str) and key.startswith("k:") and prefix and prefix[-1] in MAP_LISTS:
            found.add((*prefix, key))
        elif prefix:
            found.add(prefix)  # a list item: the list is one field here
    return found


def entries_of(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The object's ``metadata.managedFields`` (a copy; malformed entries left out)."""
    entries = (obj.get("metadata") or {}).get("managedFields") or []
    return [copy.deepcopy(entry) for entry in entries if isinstance(entry, dict) and entry.get("manager")]


def _paths(entry: Mapping[str, Any]) -> set[Path]:
    return from_fields_v1(entry.get("fieldsV1") or {})


def _same_manager(entry: Mapping[str, Any], manager: str, operation: str, subresource: str) -> bool:
    return (
        entry.get("manager") == manager
        and entry.get("operation") == operation
        and (entry.get("subresource") or "") == subresource
    )


def _overlaps(path: Path, owned: set[Path]) -> bool:
    return any(other[: len(path)] == path or path[: len(other)] == other for other in owned)


def applied_before(obj: Mapping[str, Any], *, manager: str, subresource: str) -> set[Path]:
    """The fields ``manager`` owns by its last apply (through ``subresource``)."""
    for entry in entries_of(obj):
        if _same_manager(entry, manager, APPLY, subresource):
            return _paths(entry)
    return set()


def owned_by_others(obj: Mapping[str, Any], *, manager: str, subresource: str) -> set[Path]:
    """The fields managers other than ``manager``'s apply own (through ``subresource``)."""
    owned: set[Path] = set()
    for entry in entries_of(obj):
        if (entry.get("subresource") or "") == subresource and not _same_manager(entry, manager, APPLY, subresource):
            owned |= _paths(entry)
    return owned


def track_apply(
    previous: Mapping[str, Any] | None,
    new: dict[str, Any],
    *,
    applied: set[Path],
    manager: str,
    api_version: str,
    subresource: str,
    force: bool,
    now: str,
) -> None:
    """Record an apply of ``applied`` by ``manager`` in ``new``'s managedFields (``previous``: the object
    before, None for a create). Raises Conflict when it changes a field another manager owns, unless
    ``force``: those managers then lose the field."""
    entries = entries_of(previous) if previous is not None else []
    changed = {path for path in applied if previous is None or value_at(previous, path) != value_at(new, path)}
    conflicts: list[tuple[dict[str, Any], Path]] = []
    for entry in entries:
        if (entry.get("subresource") or "") != subresource or entry.get("manager") == manager:
            continue
        owned = _paths(entry)
        conflicts.extend((entry, path) for path in sorted(changed) if _overlaps(path, owned))
    if conflicts and not force and not (manager == KUBECTL and _client_side_applied(previous, conflicts)):
        raise Conflict(conflicts)
    taken = {path for _, path in conflicts}
    kept = []
    for entry in entries:
        if _same_manager(entry, manager, APPLY, subresource):
            continue
        if taken and (entry.get("subresource") or "") == subresource:
            entry = _without(entry, taken)
        kept.append(entry)
    mine = {
        "manager": manager,
        "operation": APPLY,
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(applied),
    }
    if subresource:
        mine["subresource"] = subresource
    before = next((e for e in entries if _same_manager(e, manager, APPLY, subresource)), None)
    if before is not None and _paths(before) == applied and not changed:
        mine["time"] = before.get("time", now)  # an apply that changes nothing leaves its entry as it was
    _store(new, [*kept, mine] if applied else kept, previous)


def _client_side_applied(previous: Mapping[str, Any] | None, conflicts: list[tuple[dict[str, Any], Path]]) -> bool:
    """Whether kubectl's apply may take the conflicting fields over because its client-side apply set them:
    each is in the object's last-applied-configuration with the value the object has (kube-apiserver's
    lastAppliedManager, which lets ``kubectl apply --server-side`` follow ``kubectl apply``)."""
    if previous is None:
        return False
    text = ((previous.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    try:
        last = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return False
    if not isinstance(last, dict):
        return False
    return all(
        value_at(last, path) is not _MISSING and value_at(last, path) == value_at(previous, path)
        for _, path in conflicts
    )


def update_last_applied(previous: Mapping[str, Any] | None, new: dict[str, Any], config: Mapping[str, Any]) -> None:
    """After kubectl's server-side apply, an object that has a last-applied-configuration gets the applied
    configuration there (kube-apiserver's lastAppliedUpdater), so a later client-side apply starts from it."""
    if previous is None or LAST_APPLIED not in ((previous.get("metadata") or {}).get("annotations") or {}):
        return
    applied = copy.deepcopy(dict(config))
    annotations = (applied.get("metadata") or {}).get("annotations") or {}
    annotations.pop(LAST_APPLIED, None)
    text = json.dumps(applied, separators=(",", ":"), sort_keys=True) + "\n"
    new.setdefault("metadata", {}).setdefault("annotations", {})[LAST_APPLIED] = text


def track_update(
    previous: Mapping[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    api_version: str,
    part: str,
    subresource: str,
    now: str,
) -> None:
    """Record a create or update by ``manager`` in ``new``'s managedFields: it owns what it set or changed
    (of ``part``), other managers lose what it changed or removed. managedFields the request itself
    changed are kept as written (how a client hands fields from one manager to another)."""
    if previous is not None:
        given = (new.get("metadata") or {}).get("managedFields")
        if given is not None and given != (previous.get("metadata") or {}).get("managedFields"):
            _store(new, [e for e in given if isinstance(e, dict) and e.get("manager")], previous)
            return
    entries = entries_of(previous) if previous is not None else []
    after = fields_of(new, part=part)
    if previous is None:
        changed, gone = after, set()
    else:
        before = fields_of(previous, part=part)
        changed = {path for path in after if value_at(previous, path) != value_at(new, path)}
        gone = before - after
    touched = changed | gone
    if not touched:
        _store(new, entries, previous)
        return
    kept, mine = [], None
    for entry in entries:
        if _same_manager(entry, manager, UPDATE, subresource) and entry.get("apiVersion") == api_version:
            mine = entry
            continue
        kept.append(_without(entry, touched) if (entry.get("subresource") or "") == subresource else entry)
    owned = (_paths(mine) if mine is not None else set()) - gone | changed
    if owned:
        entry = {
            "manager": manager,
            "operation": UPDATE,
            "apiVersion": api_version,
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(owned),
        }
        if subresource:
            entry["subresource"] = subresource
        kept.append(entry)
    _store(new, kept, previous)


def _without(entry: dict[str, Any], paths: set[Path]) -> dict[str, Any]:
    remaining = {
        path
        for path in _paths(entry)
        if not any(path[: len(gone)] == gone or gone[: len(path)] == path for gone in paths)
    }
    return {**entry, "fieldsV1": to_fields_v1(remaining)}


def _store(new: dict[str, Any], entries: list[dict[str, Any]], previous: Mapping[str, Any] | None) -> None:
    """Set ``new``'s managedFields: entries that still own something, the earlier ones first."""
    live = [entry for entry in entries if _paths(entry)]
    metadata = new.setdefault("metadata", {})
    if previous is not None and json.dumps(live, sort_keys=True) == json.dumps(entries_of(previous), sort_keys=True):
        live = copy.deepcopy((previous.get("metadata") or {}).get("managedFields") or [])
    if live:
        metadata["managedFields"] = live
    else:
        metadata.pop("managedFields", None)


def _printed(entry: Mapping[str, Any]) -> str:
    """A manager as a conflict names it (fieldmanager printManager)."""
    printed = json.dumps(entry.get("manager", ""))
    if entry.get("subresource"):
        printed += f" with subresource {json.dumps(entry['subresource'])}"
    if entry.get("operation") == UPDATE:
        printed += f" using {entry.get('apiVersion', '')}"
        if entry.get("time"):
            printed += f" at {entry['time']}"
    return printed
