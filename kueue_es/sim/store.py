"""The object store behind the emulated API server: what etcd plus the apiserver's registry do.

Why this module exists: ``kmock.KubernetesEmulator`` stores dicts but has no
resourceVersions, no uid/creationTimestamp/generation, no generateName, no
status subresource and no watch history.  ``ObjectStore`` adds them, as plain
synchronous code (no awaits), so that each write is atomic in the event loop
and can be tested without HTTP.  ``emulator.ClusterEmulator`` puts HTTP in
front of it.

Semantics, as a real API server has them:

* one global ``resourceVersion`` counter, bumped by every create, update and
  delete, stamped into ``metadata.resourceVersion`` (as a string);
* create sets ``uid`` (uuid4), ``creationTimestamp`` (RFC 3339, UTC, whole
  seconds) and ``generation`` 1, honours ``generateName`` (prefix + 5 random
  chars), drops ``.status`` for kinds with a status subresource (except a Node's:
  :data:`STATUS_KEPT_ON_CREATE`), and applies
  defaults (Job: parallelism, completions, suspend, ...; Namespace: phase), as
  replaces and patches do too (a PUT without ``suspend`` gets the default, false);
  after the create hooks, what the kind's create strategy writes (:mod:`.strategies`: a Pod's
  Pending status, QoS class and SchedulingGated condition, a Job's generated selector and labels);
* updates keep name/namespace/uid/creationTimestamp, bump ``generation`` when
  anything outside metadata (and status, for kinds with the subresource)
  changes, check a given ``metadata.resourceVersion`` (409 on mismatch), and
  are no-ops (no new resourceVersion, no event) when nothing changed;
* writes to ``status`` change only ``.status``; other writes never do;
* empty labels, annotations, finalizers and owner references are not stored (ObjectMeta's ``omitempty``);
* delete with finalizers sets ``deletionTimestamp`` and bumps ``generation`` (MODIFIED); the write that
  takes off the last one (any update, patch or apply, also by the garbage collector)
  is not stored: the object is removed as last stored (only DELETED, still carrying
  those finalizers) and the writer is answered with the object it asked for;
* a delete's propagation policy Orphan or Foreground is a finalizer on the object (``orphan``,
  ``foregroundDeletion``), which the garbage collector's part (:mod:`.garbage`) acts on after every write:
  Orphan takes the object's references off its dependents, Foreground deletes them first and the object
  once none blocks it (Background, the default: the object goes and its dependents are left to the
  simulated controllers);
* a deleted Namespace turns Terminating, what is in it is deleted, and it goes once empty; nothing
  may be created in it meanwhile (403, as the NamespaceLifecycle admission plugin);
* every change is appended to a per-kind event log of ``history_limit``
  entries; reading from a resourceVersion older than the log is "expired".

Deleted objects are removed from memory (kmock would keep a soft-deleted
history); object histories are not kept (one version per object).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import dataclasses
import datetime
import functools
import json
import re
import secrets
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

import kmock

from kueue_es import validation
from kueue_es.services.kube import resources
from kueue_es.sim import defaulting, garbage, priority_admission, selectors, strategies

#: Called on every create after defaulting, may mutate the object (a mutating admission webhook).
CreateHook = Callable[[resources.ResourceRef, dict[str, Any]], None]
#: Called with (the object before or None, the object about to be stored) to record the write in its
#: ``metadata.managedFields`` (:mod:`.managed_fields`); may raise StoreError.
Track = Callable[[dict[str, Any] | None, dict[str, Any]], None]

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's: no vowels, no look-alikes
_IMMUTABLE_METADATA = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "generateName",
)
#: Seconds between a Namespace's deletion and the deletion of what is in it (the namespace controller's lag).
NAMESPACE_CLEANUP_SECONDS = 0.5
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
#: Kinds with a status subresource whose create keeps the ``status`` sent: a Node's, as a kubelet registers
#: its Node with its capacity, allocatable and conditions in the POST (Kubernetes
#: pkg/registry/core/node/strategy.go PrepareForCreate: "Nodes allow *all* fields, including status, to be
#: set on create"). Every other kind's create strategy resets it.
STATUS_KEPT_ON_CREATE = frozenset({resources.NODES})
INITIAL_PRIORITY_CLASSES = tuple(priority_admission.SYSTEM_CLASSES.items())
"""The PriorityClasses every Kubernetes API server makes at start-up (pkg/apis/scheduling SystemPriorityClasses)."""


class StoreError(Exception):
    """A request the API server would refuse; carries the HTTP status and Status reason."""

    def __init__(self, *, status: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details or {}


@dataclasses.dataclass(frozen=True, kw_only=True)
class LoggedEvent:
    """One change in a kind's event log; ``previous`` is the object before a MODIFIED."""

    resource_version: int
    type: str
    object: dict[str, Any]
    previous: dict[str, Any] | None = None


class EventLog:
    """The bounded watch history of one kind, and the wake-up signal for its watchers.

    Every event with a resourceVersion above ``floor`` is still in the log;
    a reader asking for changes after an older resourceVersion is expired.
    """

    def __init__(self, *, limit: int, floor: int) -> None:
        self.limit = limit
        self.floor = floor
        self.events: collections.deque[LoggedEvent] = collections.deque()
        self.wakeup = asyncio.Event()

    def append(self, event: LoggedEvent) -> None:
        """Add an event, drop the oldest beyond the limit, wake every waiting watcher."""
        self.events.append(event)
        while len(self.events) > self.limit:
            self.floor = self.events.popleft().resource_version
        self.notify()

    def since(self, resource_version: int) -> list[LoggedEvent] | None:
        """Events after ``resource_version`` (oldest first), or None if that is older than the log."""
        if resource_version < self.floor:
            return None
        newer: list[LoggedEvent] = []
        for event in reversed(self.events):
            if event.resource_version <= resource_version:
                break
            newer.append(event)
        newer.reverse()
        return newer

    def reset(self, *, floor: int) -> None:
        """Forget every event; reads from before ``floor`` become expired."""
        self.events.clear()
        self.floor = floor
        self.notify()

    def notify(self) -> None:
        """Wake the watchers waiting on the current signal and arm a fresh one."""
        self.wakeup.set()
        self.wakeup = asyncio.Event()


def utc_now() -> datetime.datetime:
    """The default clock: the current time in UTC."""
    return datetime.datetime.now(tz=datetime.UTC)


def format_timestamp(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC with whole seconds, as Kubernetes writes metav1.Time: ``2024-01-02T03:04:05Z``."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_P = ParamSpec("_P")
_R = TypeVar("_R")


_ATOMS = frozenset({str, int, float, bool, type(None)})


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON-like value: dicts, lists and scalars are walked directly (several times as fast as
    ``copy.deepcopy``, which the store copies every object it writes with); any other value (a tuple, a datetime
    from YAML) through ``copy.deepcopy``. Two places holding one dict get a copy each, as a JSON round trip
    gives them."""
    kind = type(value)
    if kind is dict:
        return {key: json_copy(item) for key, item in value.items()}
    if kind is list:
        return [json_copy(item) for item in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def _then_collect_garbage(
    method: Callable[Concatenate[ObjectStore, _P], _R],
) -> Callable[Concatenate[ObjectStore, _P], _R]:
    """A write of the store, followed by the garbage collector's part (:meth:`ObjectStore._collect_garbage`),
    so an owner deleted in the foreground goes in the same request as the last dependent that held it."""

    @functools.wraps(method)
    def write(self: ObjectStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        result = method(self, *args, **kwargs)
        self._collect_garbage()
        return result

    return write


class ObjectStore:
    """Objects of the registered kinds, their resourceVersions and their watch history.

    ``objects`` is the kmock ObjectsArray to keep objects in (the emulator's
    ``objects``), keyed by (kmock.resource, namespace or None, name).
    ``history_limit`` is the number of events kept per kind.  ``clock`` gives
    the time for timestamps.  With ``enforce_namespaces`` a namespaced object
    can only be created in an existing Namespace (the default namespaces
    exist from the start).  ``create_hooks`` run on every new object.
    """

    def __init__(
        self,
        *,
        objects: kmock.ObjectsArray,
        refs: Iterable[resources.ResourceRef] = resources.RESOURCES.values(),
        history_limit: int = 1000,
        clock: Callable[[], datetime.datetime] = utc_now,
        enforce_namespaces: bool = True,
        create_hooks: Iterable[CreateHook] = (),
    ) -> None:
        self._objects = objects
        self._history_limit = history_limit
        self._clock = clock
        self._enforce_namespaces = enforce_namespaces
        self._create_hooks = tuple(create_hooks)
        self._resource_version = 0
        self._keys: dict[resources.ResourceRef, kmock.resource] = {}
        self._stored_as: dict[resources.ResourceRef, resources.ResourceRef] = {}
        self._logs: dict[kmock.resource, EventLog] = {}
        # the objects being deleted with an ``orphan`` or ``foregroundDeletion`` finalizer (an ordered set)
        self._gc_owners: dict[Any, None] = {}
        self._collecting = False
        # the stored PriorityClasses, for the Priority admission of each Pod created (None: to be listed again)
        self._priority_classes: list[dict[str, Any]] | None = None
        for ref in (resources.NAMESPACES, *refs):
            self.register(ref)
        for namespace in INITIAL_NAMESPACES:
            self.create(resources.NAMESPACES, namespace=None, body={"metadata": {"name": namespace}})
        self.create_system_priority_classes()

    def create_system_priority_classes(self) -> None:
        """Create :data:`INITIAL_PRIORITY_CLASSES`, as every API server does at start-up, once PriorityClass
        is stored (a no-op before, and for those that exist)."""
        ref = resources.RESOURCES.get(("scheduling.k8s.io/v1", "PriorityClass"))
        if ref is None or ref not in self._keys:
            return
        descriptions = {
            "system-cluster-critical": "Used for system critical pods that must run in the cluster, but can be "
            "moved to another node if necessary.",
            "system-node-critical": "Used for system critical pods that must not be moved from their current node.",
        }
        for name, value in INITIAL_PRIORITY_CLASSES:
            body = {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "description": descriptions[name],
                "preemptionPolicy": "PreemptLowerPriority",
            }
            with contextlib.suppress(StoreError):  # made already
                self.create(ref, namespace=None, body=body)

    def _admit_priority(self, pod: dict[str, Any], name: str) -> None:
        """The Priority admission plugin on a Pod about to be created (:func:`priority_admission.admit_pod`);
        raises StoreError 403 as the plugin refuses a pod."""
        if self._priority_classes is None:
            served = resources.PRIORITY_CLASSES in self._keys
            self._priority_classes = self.select(resources.PRIORITY_CLASSES) if served else []
        try:
            priority_admission.admit_pod(pod, self._priority_classes)
        except priority_admission.PriorityRefused as err:
            raise StoreError(
                status=403,
                reason="Forbidden",
                message=f'pods "{name}" is forbidden: {err}',
                details={"name": name, "kind": "pods"},
            ) from err

    def _check_priority_class(self, priority_class: dict[str, Any], *, old: dict[str, Any] | None) -> None:
        """kube-apiserver's validation (422) and Priority plugin (403: a second global default) of a PriorityClass
        about to be stored (:mod:`~kueue_es.sim.priority_admission`); ``old``: the stored one it updates."""
        name = str(priority_class["metadata"].get("name") or "")
        causes = priority_admission.priority_class_causes(priority_class, old)
        if causes:
            raise invalid_causes(resources.PRIORITY_CLASSES, name, causes)
        refusal = priority_admission.second_default(priority_class, self.select(resources.PRIORITY_CLASSES))
        if refusal:
            raise _forbidden(resources.PRIORITY_CLASSES, name, refusal)

    def _priority_classes_changed(self, key: Any) -> None:
        """Forget the PriorityClasses listed when ``key`` (an object just written or removed) is one: listing
        them for each Pod created would read every stored object."""
        if self._priority_classes is not None and key[0] == self._keys.get(resources.PRIORITY_CLASSES):
            self._priority_classes = None

    @property
    def resource_version(self) -> int:
        """The latest resourceVersion handed out (0 before the first write)."""
        return self._resource_version

    def register(self, ref: resources.ResourceRef, *, storage: resources.ResourceRef | None = None) -> None:
        """Start storing a kind (idempotent).

        ``storage``: the version objects of this kind are kept in (a CRD's storage version), when
        ``ref`` is another served version of the same kind: both then share objects and watch
        history, and objects are stamped with the storage version's apiVersion (readers convert).
        """
        storage = storage or ref
        key = kmock.resource(storage.group, storage.version, storage.plural)
        self._keys[ref] = key
        self._stored_as[ref] = storage
        if key not in self._logs:
            # A new kind has no past events, so no resourceVersion is too old for it yet.
            self._logs[key] = EventLog(limit=self._history_limit, floor=0)

    @_then_collect_garbage
    def unregister(self, ref: resources.ResourceRef) -> list[dict[str, Any]]:
        """Stop storing a kind. When no other registered version shares its storage, its objects are
        removed (a DELETED event each, finalizers ignored) and its watch history ends; returns the
        removed objects."""
        key = self._keys.get(ref)
        if key is None:
            return []
        if any(other != ref and other_key == key for other, other_key in self._keys.items()):
            del self._keys[ref], self._stored_as[ref]
            return []
        removed = [
            self._remove(ref, stored_key, obj.raw)
            for stored_key, obj in list(self._objects.items())
            if stored_key[0] == key
        ]
        del self._keys[ref], self._stored_as[ref]
        self._logs.pop(key).notify()
        return removed

    def storage_of(self, ref: resources.ResourceRef) -> resources.ResourceRef | None:
        """The version objects of ``ref`` are kept in (``ref`` itself unless it shares one); None if not served."""
        return self._stored_as.get(ref)

    def serves(self, ref: resources.ResourceRef) -> bool:
        """Whether ``ref`` is registered (its event log is live)."""
        return ref in self._keys

    def log(self, ref: resources.ResourceRef) -> EventLog:
        """The event log of a kind (shared by the versions of one storage)."""
        return self._logs[self._keys[ref]]

    def reset_history(self) -> None:
        """Forget every kind's event history, so watches from any resourceVersion handed out so far expire.

        Like a compaction, this uses up one resourceVersion: lists made
        afterwards carry a version that can be watched from.
        """
        self._resource_version += 1
        for log in self._logs.values():
            log.reset(floor=self._resource_version)

    def get(self, ref: resources.ResourceRef, *, namespace: str | None, name: str) -> dict[str, Any]:
        """The stored object; raises StoreError 404 if absent."""
        key = self._key(ref, namespace=namespace, name=name)
        if key not in self._objects:
            raise _not_found(ref, name)
        return self._objects[key].raw

    def select(
        self,
        ref: resources.ResourceRef,
        *,
        namespace: str | None = None,
        name: str | None = None,
        labels: selectors.LabelSelector = selectors.EVERYTHING,
        fields: selectors.FieldSelector = selectors.ANY_FIELDS,
    ) -> list[dict[str, Any]]:
        """Live objects of a kind matching the filters, sorted by (namespace, name)."""
        wanted = self._keys[ref]
        found = []
        for (resource, obj_namespace, obj_name), obj in self._objects.items():
            if resource != wanted or (name is not None and obj_name != name):
                continue
            if ref.namespaced and namespace is not None and obj_namespace != namespace:
                continue
            raw = obj.raw
            if labels.matches(raw.get("metadata", {}).get("labels")) and fields.matches(raw):
                found.append(((obj_namespace or "", obj_name), raw))
        return [raw for _, raw in sorted(found, key=lambda pair: pair[0])]

    @_then_collect_garbage
    def create(
        self,
        ref: resources.ResourceRef,
        *,
        namespace: str | None,
        body: Any,
        dry_run: bool = False,
        check: Callable[[dict[str, Any]], None] | None = None,
        track: Track | None = None,
    ) -> dict[str, Any]:
        """Create an object from a POST body; ``namespace`` is the one in the URL.

        ``track`` records the write in its managedFields; ``check`` then sees the object after
        defaulting and the create hooks, before it is stored, and may raise StoreError (the API server's validation). With
        ``dry_run`` (``?dryRun=All``) everything happens but the write: the object
        is returned as it would be stored, without a resourceVersion, and nothing
        is stored or logged.

        Raises StoreError: 400 (bad body, namespace mismatch), 404 (namespace
        missing), 405 (namespaced kind without a namespace), 409 (exists),
        422 (no name and no generateName, or an invalid name).
        """
        obj = _as_object(body)
        metadata = obj["metadata"]
        namespace = self._namespace_for_create(ref, url_namespace=namespace, metadata=metadata)
        # what admission errors name: the name sent, else its generateName (apiserver admission extractResourceName)
        named = str(metadata.get("name") or metadata.get("generateName") or "")
        name = metadata.get("name") or self._generated_name(ref, namespace=namespace, metadata=metadata)
        _check_name(ref, name)
        key = self._key(ref, namespace=namespace, name=name)
        if key in self._objects:
            raise StoreError(
                status=409,
                reason="AlreadyExists",
                message=f'{ref.qualified_plural} "{name}" already exists',
                details=_details(ref, name),
            )
        if ref.status_subresource and ref not in STATUS_KEPT_ON_CREATE:
            obj.pop("status", None)
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion", "managedFields"):
            metadata.pop(field, None)
        stored_as = self._stored_as[ref]
        obj["apiVersion"], obj["kind"] = stored_as.api_version, stored_as.kind
        metadata.update(
            name=name, uid=str(uuid.uuid4()), creationTimestamp=format_timestamp(self._clock()), generation=1
        )
        if namespace is not None:
            metadata["namespace"] = namespace
        apply_defaults(ref, obj)
        if ref == resources.PODS:  # kube-apiserver's Priority admission plugin runs before the mutating webhooks
            self._admit_priority(obj, named or name)
        for hook in self._create_hooks:
            hook(ref, obj)
        _omit_empty_metadata(obj)
        _check_annotations(ref, obj)
        if track is not None:
            track(None, obj)
        # after the webhooks (the scheduling gates they add) and the managedFields: the create strategy's fields
        # are no request's, as kube-apiserver's field manager runs before PrepareForCreate
        strategies.prepare_for_create(ref, obj, now=metadata["creationTimestamp"])
        if check is not None:
            check(obj)
        if ref == resources.PRIORITY_CLASSES:
            self._check_priority_class(obj, old=None)
        if dry_run:
            return obj
        self._write(ref, key, obj, event_type="ADDED")
        return obj

    @_then_collect_garbage
    def update(
        self,
        ref: resources.ResourceRef,
        *,
        namespace: str | None,
        name: str,
        subresource: str | None,
        change: Callable[[dict[str, Any]], Any],
        dry_run: bool = False,
        check: Callable[[dict[str, Any]], None] | None = None,
        track: Track | None = None,
    ) -> dict[str, Any]:
        """Replace or patch an object (or its ``status``): ``change`` maps the current object to the new one.

        ``change`` may raise StoreError (e.g. a patch that does not apply).
        ``check`` sees the object as it would be stored and may raise StoreError.
        With ``dry_run`` the updated object is returned and nothing is stored or logged.
        Raises StoreError: 404 (absent, or an unknown subresource), 409
        (resourceVersion mismatch), 422 (an immutable field changed).
        """
        key = self._key(ref, namespace=namespace, name=name)
        if key not in self._objects:
            raise _not_found(ref, name)
        if subresource not in (None, "status") or (subresource == "status" and not ref.status_subresource):
            raise StoreError(
                status=404,
                reason="NotFound",
                message="the server could not find the requested resource",
                details=_details(ref, name),
            )
        current = self._objects[key].raw
        desired = _as_object(change(json_copy(current)))
        _check_preconditions(ref, name, current=current, desired=desired)
        if subresource == "status":
            updated = _with_status_of(current, source=desired)
            if ref == resources.PODS:
                _check_pod_status_update(name, current=current, updated=updated)
        else:
            updated = _merged_main(self._stored_as[ref], current=current, desired=desired)
            if ref == resources.PODS:  # the Priority plugin keeps the priority it set when an update leaves it out
                _keep_pod_priority(current, updated)
            if ref != resources.NAMESPACES:  # every write is defaulted as it is decoded, not only a create
                apply_defaults(ref, updated)
            _omit_empty_metadata(updated)
            _check_annotations(ref, updated)
        if track is not None:
            track(current, updated)
        if check is not None:
            check(updated)
        if ref == resources.PRIORITY_CLASSES and subresource is None:
            self._check_priority_class(updated, old=current)
        if _same_content(updated, current):
            return current
        if _spec_of(ref, updated) != _spec_of(ref, current):
            updated["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        if self._deletes_during_update(ref, key, current=current, updated=updated):
            # the update is never stored: the object goes as it was last stored (the watch sees only DELETED,
            # carrying the finalizers just removed) and the writer is answered with the object it asked for
            updated["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
            if not dry_run:
                self._remove(ref, key, current)
            return updated
        if dry_run:
            return updated
        self._write(ref, key, updated, event_type="MODIFIED", previous=current)
        return updated

    @_then_collect_garbage
    def delete(
        self,
        ref: resources.ResourceRef,
        *,
        namespace: str | None,
        name: str,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        propagation: str | None = None,
    ) -> dict[str, Any]:
        """Delete an object, or mark it deleting while it has finalizers; returns its last state.

        ``preconditions`` is DeleteOptions.preconditions (uid, resourceVersion). ``propagation`` is its
        propagation policy (:func:`garbage.propagation_policy`): Orphan and Foreground add their finalizer
        (``orphan``, ``foregroundDeletion``; a policy given to an object already being deleted changes it), for
        the garbage collector's part that follows every write; None or Background deletes the object alone.
        With ``dry_run`` the object is returned as the delete would leave it; nothing changes.
        Raises StoreError 404 (absent) or 409 (a precondition fails).
        """
        key = self._key(ref, namespace=namespace, name=name)
        if key not in self._objects:
            raise _not_found(ref, name)
        current = self._objects[key].raw
        for field, expected in (preconditions or {}).items():
            if expected is not None and current["metadata"].get(field) != expected:
                raise _conflict(ref, name, f"precondition failed: {field} is not {expected}")
        if ref == resources.PRIORITY_CLASSES and (refusal := priority_admission.system_class_deletion(name)):
            raise _forbidden(ref, name, refusal)
        metadata = current["metadata"]
        finalizers = garbage.deletion_finalizers(metadata.get("finalizers") or [], propagation)
        if dry_run:
            return current
        if metadata.get("deletionTimestamp"):
            if finalizers == (metadata.get("finalizers") or []):
                return current
            return self._set_finalizers(ref, key, finalizers)
        if ref == resources.NAMESPACES:
            return self._delete_namespace(key, current)
        if finalizers:
            deleting = json_copy(current)
            deleting["metadata"].update(
                deletionTimestamp=format_timestamp(self._clock()), deletionGracePeriodSeconds=0, finalizers=finalizers
            )
            if isinstance(generation := metadata.get("generation"), int) and generation > 0:
                # registry/store.go markAsDeleting: the first deletion bumps the generation (controllers of an
                # object being deleted change what they do)
                deleting["metadata"]["generation"] = generation + 1
            self._write(ref, key, deleting, event_type="MODIFIED", previous=current)
            return deleting
        return self._remove(ref, key, current)

    # -- the garbage collector's part ----------------------------------------------------------

    def _collect_garbage(self) -> None:
        """Act on every object being deleted with an ``orphan`` or ``foregroundDeletion`` finalizer until
        nothing changes (:mod:`.garbage`): orphan its dependents, or delete them and let it go once none
        blocks it. Runs after every write of the store (never within another run)."""
        if not self._gc_owners or self._collecting:
            return
        self._collecting = True
        try:
            while any([self._collect_dependents_of(key) for key in list(self._gc_owners)]):
                pass
        finally:
            self._collecting = False

    def _collect_dependents_of(self, key: Any) -> bool:
        """One pass of the garbage collector over one owner being deleted; returns whether it changed anything."""
        if key not in self._objects:
            self._gc_owners.pop(key, None)
            return False
        owner = self._objects[key].raw
        uid = str(owner["metadata"].get("uid") or "")
        dependents = self._dependents(key, uid)
        if garbage.orphans_dependents(owner):
            for dependent_key, dependent in dependents:
                self._write_metadata(dependent_key, garbage.without_owners(dependent, {uid}))
            finalizers = [f for f in owner["metadata"]["finalizers"] if f != garbage.ORPHAN_FINALIZER]
            self._set_finalizers(self._ref_of(key), key, finalizers)
            return True
        changed = False
        by_uid = {str(obj.raw["metadata"].get("uid")): obj.raw for obj in self._objects.values()}
        for dependent_key, dependent in dependents:
            if dependent["metadata"].get("deletionTimestamp"):
                continue  # deleted already, held by its finalizers
            owners = {owner_uid: by_uid.get(owner_uid) for owner_uid in garbage.owner_uids(dependent)}
            if drop := garbage.references_to_drop(dependent, owners):
                self._write_metadata(dependent_key, garbage.without_owners(dependent, set(drop)))
            else:
                # as attemptToDeleteItem: in the foreground when it has dependents of its own
                own = self._dependents(dependent_key, str(dependent["metadata"].get("uid") or ""))
                self.delete(
                    self._ref_of(dependent_key),
                    namespace=dependent_key[1],
                    name=dependent_key[2],
                    propagation=garbage.FOREGROUND if own else None,
                )
            changed = True
        if not any(garbage.blocks(dependent, uid) for _, dependent in self._dependents(key, uid)):
            finalizers = [f for f in owner["metadata"]["finalizers"] if f != garbage.FOREGROUND_FINALIZER]
            self._set_finalizers(self._ref_of(key), key, finalizers)
            changed = True
        return changed

    def _dependents(self, owner_key: Any, uid: str) -> list[tuple[Any, dict[str, Any]]]:
        """The stored objects whose owner references name ``uid``: in the owner's namespace when it has one
        (a reference across namespaces names nothing), anywhere for a cluster-scoped owner."""
        return [
            (key, obj.raw)
            for key, obj in self._objects.items()
            if (owner_key[1] is None or key[1] == owner_key[1]) and uid in garbage.owner_uids(obj.raw)
        ]

    def _ref_of(self, key: Any) -> resources.ResourceRef:
        return next(ref for ref, stored in self._keys.items() if stored == key[0] and self._stored_as[ref] == ref)

    def _write_metadata(self, key: Any, desired: dict[str, Any]) -> None:
        """Store a new version of an object whose metadata the garbage collector changed (no other field)."""
        current = self._objects[key].raw
        updated = {**json_copy(current), "metadata": json_copy(desired["metadata"])}
        self._write(self._ref_of(key), key, updated, event_type="MODIFIED", previous=current)

    def _set_finalizers(self, ref: resources.ResourceRef, key: Any, finalizers: list[str]) -> dict[str, Any]:
        """Store ``finalizers`` on an object being deleted; it goes when none is left. Returns its last state.

        As the API server's delete (errDeleteNow) and the garbage collector's patch taking off its finalizer
        (an update, see :meth:`_deletes_during_update`): emptied finalizers are never stored, the object is
        removed as it was (one DELETED, with the finalizers it still had)."""
        current = self._objects[key].raw
        if not finalizers and not (ref == resources.NAMESPACES and self._holds_objects(key[2])):
            return self._remove(ref, key, current)
        updated = json_copy(current)
        updated["metadata"]["finalizers"] = finalizers
        _omit_empty_metadata(updated)
        self._write(ref, key, updated, event_type="MODIFIED", previous=current)
        return updated

    def _deletes_during_update(
        self, ref: resources.ResourceRef, key: Any, *, current: dict[str, Any], updated: dict[str, Any]
    ) -> bool:
        """Whether an update deletes the object instead of storing it: it leaves no finalizer on an object
        already being deleted (k8s.io/apiserver pkg/registry/generic/registry/store.go, Update and
        ShouldDeleteDuringUpdate; every deletion here has a grace period of 0). A Namespace also waits for
        everything in it to be gone (the namespace controller's ``kubernetes`` finalizer in its spec,
        pkg/registry/core/namespace/storage ShouldDeleteNamespaceDuringUpdate)."""
        if not current["metadata"].get("deletionTimestamp") or updated["metadata"].get("finalizers"):
            return False
        return ref != resources.NAMESPACES or not self._holds_objects(key[2])

    def _holds_objects(self, namespace: str) -> bool:
        """Whether anything is stored in Namespace ``namespace``."""
        return any(obj_namespace == namespace for _, obj_namespace, _ in self._objects.keys())

    # -- internals -------------------------------------------------------------------------

    def _key(
        self, ref: resources.ResourceRef, *, namespace: str | None, name: str
    ) -> tuple[kmock.resource, str | None, str]:
        return self._keys[ref], (namespace if ref.namespaced else None), name

    def _write(
        self,
        ref: resources.ResourceRef,
        key: Any,
        obj: dict[str, Any],
        *,
        event_type: str,
        previous: dict[str, Any] | None = None,
    ) -> None:
        self._resource_version += 1
        obj["metadata"]["resourceVersion"] = str(self._resource_version)
        self._objects[key] = obj
        self._priority_classes_changed(key)
        if garbage.orphans_dependents(obj) or garbage.waits_for_dependents(obj):
            self._gc_owners[key] = None
        else:
            self._gc_owners.pop(key, None)
        self.log(ref).append(
            LoggedEvent(resource_version=self._resource_version, type=event_type, object=obj, previous=previous)
        )

    def _remove(self, ref: resources.ResourceRef, key: Any, obj: dict[str, Any]) -> dict[str, Any]:
        self._resource_version += 1
        gone = json_copy(obj)
        gone["metadata"]["resourceVersion"] = str(self._resource_version)
        del self._objects[key]
        self._gc_owners.pop(key, None)
        self._priority_classes_changed(key)
        self.log(ref).append(LoggedEvent(resource_version=self._resource_version, type="DELETED", object=gone))
        if key[1] is not None:  # the last object of a terminating namespace lets it go
            self._finalize_namespace(key[1])
        return gone

    def _delete_namespace(self, key: Any, current: dict[str, Any]) -> dict[str, Any]:
        """What a deleted Namespace goes through: it turns Terminating at once; a moment later (as the
        namespace controller, :data:`NAMESPACE_CLEANUP_SECONDS`; at once without a running event loop)
        everything in it is deleted (objects with finalizers wait for them), and it goes once it is empty.
        Its objects can still be deleted one by one meanwhile (``kubectl delete -f`` of a file that starts
        with its Namespace)."""
        name = current["metadata"]["name"]
        deleting = json_copy(current)
        deleting["metadata"].update(deletionTimestamp=format_timestamp(self._clock()), deletionGracePeriodSeconds=0)
        deleting.setdefault("status", {})["phase"] = "Terminating"
        self._write(resources.NAMESPACES, key, deleting, event_type="MODIFIED", previous=current)
        try:
            asyncio.get_running_loop().call_later(NAMESPACE_CLEANUP_SECONDS, self._empty_namespace, name)
        except RuntimeError:  # no event loop: a synchronous test of the store
            self._empty_namespace(name)
        return self._objects[key].raw if key in self._objects else deleting

    def _empty_namespace(self, name: str) -> None:
        """The namespace controller's sweep of a terminating Namespace: delete what is in it, then it."""
        storage = {self._keys[ref]: ref for ref in self._keys if self._stored_as[ref] == ref}
        for resource, namespace, obj_name in list(self._objects.keys()):
            if namespace == name and resource in storage:
                with contextlib.suppress(StoreError):
                    self.delete(storage[resource], namespace=name, name=obj_name)
        self._finalize_namespace(name)

    def _finalize_namespace(self, name: str) -> dict[str, Any] | None:
        """Remove Namespace ``name`` if it is terminating and nothing is left in it; returns it when removed."""
        key = self._key(resources.NAMESPACES, namespace=None, name=name)
        if key not in self._objects:
            return None
        namespace = self._objects[key].raw
        if not namespace["metadata"].get("deletionTimestamp") or namespace["metadata"].get("finalizers"):
            return None
        if self._holds_objects(name):
            return None
        return self._remove(resources.NAMESPACES, key, namespace)

    def _namespace_for_create(
        self, ref: resources.ResourceRef, *, url_namespace: str | None, metadata: dict[str, Any]
    ) -> str | None:
        if not ref.namespaced:
            metadata.pop("namespace", None)
            return None
        body_namespace = metadata.get("namespace")
        if not url_namespace:
            raise StoreError(
                status=405,
                reason="MethodNotAllowed",
                message="the server does not allow this method on the requested resource",
                details=_details(ref, metadata.get("name")),
            )
        if body_namespace and body_namespace != url_namespace:
            raise StoreError(
                status=400,
                reason="BadRequest",
                message="the namespace of the provided object does not match the namespace sent on the request",
                details=_details(ref, metadata.get("name")),
            )
        namespace_key = self._key(resources.NAMESPACES, namespace=None, name=url_namespace)
        if self._enforce_namespaces and namespace_key not in self._objects:
            raise StoreError(
                status=404,
                reason="NotFound",
                message=f'namespaces "{url_namespace}" not found',
                details={"name": url_namespace, "kind": "namespaces"},
            )
        if namespace_key in self._objects and self._objects[namespace_key].raw["metadata"].get("deletionTimestamp"):
            name = metadata.get("name") or metadata.get("generateName") or ""
            raise StoreError(  # the NamespaceLifecycle admission plugin
                status=403,
                reason="Forbidden",
                message=f'{ref.qualified_plural} "{name}" is forbidden: unable to create new content in namespace '
                f"{url_namespace} because it is being terminated",
                details={
                    **_details(ref, name),
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {url_namespace} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )
        return url_namespace

    def _generated_name(self, ref: resources.ResourceRef, *, namespace: str | None, metadata: dict[str, Any]) -> str:
        prefix = metadata.get("generateName")
        if not prefix:
            raise invalid(
                ref, "", "metadata.name", validation.REQUIRED, "Required value: name or generateName is required"
            )
        while True:
            name: str = prefix + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
            if self._key(ref, namespace=namespace, name=name) not in self._objects:
                return name


def _as_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
        raise StoreError(
            status=400,
            reason="BadRequest",
            message="the request body is not a Kubernetes object (a JSON object with an object metadata)",
        )
    obj = json_copy(body)
    obj.setdefault("metadata", {})
    return obj


#: apimachinery's DNS-1123 subdomain message (IsDNS1123Subdomain), as a real API server words a bad name.
_NAME_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


#: Kinds whose names are path segments, not DNS subdomains (RBAC's: ``system:discovery``; Kubernetes'
#: ValidateRBACName is path.IsValidPathSegmentName).
_PATH_SEGMENT_NAMED = frozenset({"rbac.authorization.k8s.io"})


def _check_name(ref: resources.ResourceRef, name: Any) -> None:
    if ref.group in _PATH_SEGMENT_NAMED and isinstance(name, str):
        if name in (".", "..") or not name or "/" in name or "%" in name:
            shown = json.dumps(name)
            why = "may not be '.' or '..'" if name in (".", "..") else "may not contain '/' or '%'"
            raise invalid(ref, name, "metadata.name", validation.INVALID, f"Invalid value: {shown}: {why}")
        return
    if not isinstance(name, str) or len(name) > 253 or not _NAME.match(name):
        shown = json.dumps(name if isinstance(name, str) else str(name))
        why = "must be no more than 253 characters" if isinstance(name, str) and len(name) > 253 else _NAME_MESSAGE
        raise invalid(ref, str(name), "metadata.name", validation.INVALID, f"Invalid value: {shown}: {why}")


def invalid(ref: resources.ResourceRef, name: str, field: str, cause_type: str, message: str) -> StoreError:
    """422 Invalid as apimachinery's ``errors.NewInvalid`` words it: ``Kind.group "name" is invalid: field:
    message``, with details naming the kind (not the plural) and the cause, which kubectl prints (without
    a cause it prints only ``The <kind> "<name>" is invalid``)."""
    return invalid_causes(ref, name, [(field, cause_type, message)])


def invalid_causes(ref: resources.ResourceRef, name: str, causes: Iterable[tuple[str, str, str]]) -> StoreError:
    """:func:`invalid` with several causes, ``(field, cause type, message)`` each (``[a, b]`` in the message)."""
    error = validation.Invalid(
        kind=ref.kind, group=ref.group, name=name, causes=[validation.Cause(*cause) for cause in causes]
    )
    return StoreError(status=422, reason="Invalid", message=error.message, details=error.details())


#: The most bytes an object's annotations may hold, keys and values together (apimachinery's TotalAnnotationSizeLimitB).
ANNOTATIONS_LIMIT = 256 * 1024


def _check_annotations(ref: resources.ResourceRef, obj: dict[str, Any]) -> None:
    """422 when the annotations exceed 256 KiB: what a client-side ``kubectl apply`` of a large CRD
    meets (its last-applied-configuration annotation), hence ``kubectl apply --server-side``."""
    annotations = obj["metadata"].get("annotations") or {}
    if not isinstance(annotations, dict):
        return
    size = sum(len(str(key).encode()) + len(str(value).encode()) for key, value in annotations.items())
    if size > ANNOTATIONS_LIMIT:
        name = obj["metadata"].get("name", "")
        kind = f"{ref.kind}.{ref.group}" if ref.group else ref.kind
        raise StoreError(
            status=422,
            reason="Invalid",
            message=f'{kind} "{name}" is invalid: metadata.annotations: Too long: must have at most '
            f"{ANNOTATIONS_LIMIT} bytes",
            details={
                "group": ref.group,
                "kind": ref.kind,
                "name": name,
                "causes": [
                    {
                        "reason": "FieldValueTooLong",
                        "message": f"Too long: must have at most {ANNOTATIONS_LIMIT} bytes",
                        "field": "metadata.annotations",
                    }
                ],
            },
        )


def _forbidden(ref: resources.ResourceRef, name: str, why: str) -> StoreError:
    """403 as admission.NewForbidden and apierrors.NewForbidden word it: ``<plural.group> "<name>" is forbidden:
    <why>``."""
    return StoreError(
        status=403,
        reason="Forbidden",
        message=f'{ref.qualified_plural} "{name}" is forbidden: {why}',
        details=_details(ref, name),
    )


def _keep_pod_priority(current: dict[str, Any], updated: dict[str, Any]) -> None:
    """A Pod update without ``spec.priority`` keeps the stored one (the Priority plugin's admitPod on update)."""
    spec = updated.get("spec")
    before = (current.get("spec") or {}).get("priority")
    if isinstance(spec, dict) and spec.get("priority") is None and before is not None:
        spec["priority"] = before


def _check_pod_status_update(name: str, *, current: dict[str, Any], updated: dict[str, Any]) -> None:
    """422 for a ``pods/status`` write that has a container which may not restart leave ``terminated``
    (:func:`~kueue_es.sim.strategies.pod_status_transition_errors`)."""
    wrong = strategies.pod_status_transition_errors(current, updated)
    if wrong:
        causes = [(field, validation.FORBIDDEN, f"Forbidden: {message}") for field, message in wrong]
        raise invalid_causes(resources.PODS, name, causes)


def _check_preconditions(
    ref: resources.ResourceRef, name: str, *, current: dict[str, Any], desired: dict[str, Any]
) -> None:
    wanted_version = desired["metadata"].get("resourceVersion")
    if wanted_version and wanted_version != current["metadata"].get("resourceVersion"):
        raise _conflict(
            ref, name, "the object has been modified; please apply your changes to the latest version and try again"
        )
    metadata, stored = desired["metadata"], current["metadata"]
    for field, where in (("name", "the URL"), ("namespace", "the request")):
        if metadata.get(field) and metadata[field] != stored.get(field):
            raise StoreError(  # as the API server's update and patch handlers (checkName) refuse it
                status=400,
                reason="BadRequest",
                message=f"the {field} of the object ({metadata[field]}) does not match the {field} on {where} "
                f"({stored.get(field)})",
            )
    if metadata.get("uid") and metadata["uid"] != stored.get("uid"):  # the object's UID is a precondition
        raise _conflict(
            ref,
            name,
            f"Precondition failed: UID in precondition: {metadata['uid']}, UID in object meta: {stored.get('uid')}",
        )


#: ObjectMeta's maps and lists, all ``omitempty``: the API server stores (and answers) none of them empty.
_OMITTED_WHEN_EMPTY = ("labels", "annotations", "finalizers", "ownerReferences", "managedFields")


def _omit_empty_metadata(obj: dict[str, Any]) -> None:
    """Drop the empty (or null) labels, annotations, finalizers, owner references of an object about to be
    stored, as Go's JSON encoding of ObjectMeta leaves them out: ``labels: {}`` written (a client-side apply
    sends ``annotations: {}``) is read back as no field, and ``kubectl diff`` shows no ``annotations: {}``."""
    metadata = obj["metadata"]
    for field in _OMITTED_WHEN_EMPTY:
        if field in metadata and not metadata[field]:
            del metadata[field]


def _with_status_of(current: dict[str, Any], *, source: dict[str, Any]) -> dict[str, Any]:
    updated = json_copy(current)
    if source.get("status") is None:
        updated.pop("status", None)
    else:
        updated["status"] = source["status"]
    return updated


def _merged_main(ref: resources.ResourceRef, *, current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    updated = desired
    updated["apiVersion"], updated["kind"] = ref.api_version, ref.kind
    for field in _IMMUTABLE_METADATA:
        if field in current["metadata"]:
            updated["metadata"][field] = current["metadata"][field]
        else:
            updated["metadata"].pop(field, None)
    if ref.status_subresource:
        updated = _with_status_of(updated, source=current)
    return updated


def _same_content(left: dict[str, Any], right: dict[str, Any]) -> bool:
    def strip(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}}

    return strip(left) == strip(right)


def _spec_of(ref: resources.ResourceRef, obj: dict[str, Any]) -> dict[str, Any]:
    ignored = {"metadata", "apiVersion", "kind"} | ({"status"} if ref.status_subresource else set())
    return {key: value for key, value in obj.items() if key not in ignored}


#: Where the pod template of each other built-in kind with one is (the zz_generated.defaults.go of
#: batch/v1, apps/v1 and core/v1 default a PodTemplateSpec's spec there).
_POD_TEMPLATE_PATHS: dict[resources.ResourceRef, tuple[str, ...]] = {
    resources.CRON_JOBS: ("spec", "jobTemplate", "spec", "template"),
    resources.DEPLOYMENTS: ("spec", "template"),
    resources.REPLICA_SETS: ("spec", "template"),
    resources.STATEFUL_SETS: ("spec", "template"),
    resources.POD_TEMPLATES: ("template",),
}


def apply_defaults(ref: resources.ResourceRef, obj: dict[str, Any]) -> None:
    """Server-side defaulting for the kinds where clients rely on it (and kubectl users see it): pod specs and
    Jobs as :mod:`kueue_es.sim.defaulting` has them, for pod templates of built-in kinds only, and what the
    simulated JobSet controller's mutating webhook defaults on a JobSet."""
    if ref == resources.JOBS:
        defaulting.default_job(obj)
    elif ref == resources.PODS:
        defaulting.default_pod(obj)
    elif ref in _POD_TEMPLATE_PATHS:
        defaulting.default_pod_template(obj, *_POD_TEMPLATE_PATHS[ref])
    if ref == resources.CRON_JOBS:  # SetDefaults_CronJob
        spec = obj.setdefault("spec", {})
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
    elif ref == resources.JOBSETS:
        defaulting.default_jobset(obj)
    elif ref == resources.PRIORITY_CLASSES:  # SetDefaults_PriorityClass
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif ref == resources.NAMESPACES:
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        obj["status"] = {"phase": "Active"}


def _details(ref: resources.ResourceRef, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"group": ref.group, "kind": ref.plural}
    if name:
        details["name"] = name
    return details


def _not_found(ref: resources.ResourceRef, name: str) -> StoreError:
    return StoreError(
        status=404, reason="NotFound", message=f'{ref.qualified_plural} "{name}" not found', details=_details(ref, name)
    )


def _conflict(ref: resources.ResourceRef, name: str, why: str) -> StoreError:
    return StoreError(
        status=409,
        reason="Conflict",
        message=f'Operation cannot be fulfilled on {ref.qualified_plural} "{name}": {why}',
        details=_details(ref, name),
    )
