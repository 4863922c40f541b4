"""Kueue's ConcurrentAdmission (alpha gate ``ConcurrentAdmission``): a Workload pursued on several flavors at once.

Why this module exists: with the gate on, a Workload queued to a ClusterQueue with
``spec.concurrentAdmissionPolicy`` is a *parent*: Kueue never queues it itself, but makes one *variant*
Workload per flavor of the ClusterQueue's (only) resource group, each restricted to its flavor by the
annotation ``kueue.x-k8s.io/workload-allowed-resource-flavors`` and owned by the parent. The scheduler
admits the variants as ordinary Workloads; the first admitted one's admission is copied onto the parent,
and a variant on a more preferred flavor (the order of the flavors in the ClusterQueue) may later
migrate the workload there (pkg/controller/concurrentadmission/controller.go; scheduler.go
findAdmittedMoreFavorableSibling, issueMigration).

Two sides, both pure:

- the deciders' part (:func:`families`, :func:`more_favorable_admitted`, :func:`less_favorable_admitted`):
  the admitter skips a parent, skips a variant while a more preferred sibling is admitted, and evicts an
  admitted less preferred sibling (reason ``FlavorMigration``) instead of admitting a variant that fits;
- the controller's part (:func:`reconcile`): what Kueue's concurrent-admission controller writes for one
  parent and its variants, as a list of :class:`Action` the dispatcher's edge applies through the
  Kubernetes API (:mod:`kueue_es.services.dispatcher.concurrent_admission`). A parent that stands for a job
  (:func:`stands_for_job`) never holds quota on the log: the dispatcher runs its job by the admitted variant's
  decisions (:func:`parent_key`), and the controller moves the parent's admission along as that job stops and
  starts again.

The log does not carry ``concurrentAdmissionPolicy`` (the ClusterQueue model has no such field), so the
deciders tell a parent by Kueue's label ``kueue.x-k8s.io/concurrent-admission-parent: "true"`` (the
controller puts it on a Workload of an opted-in ClusterQueue, as Kueue's workload controller does) and a
variant by the watcher's :data:`VARIANT_OF_ANNOTATION`; ``lastAcceptableFlavorName`` and the migration
mode are the controller's alone (it deactivates the variants the workload may not migrate to).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kueue_es.events import manifests, models

GATE = "ConcurrentAdmission"
PARENT_LABEL = "kueue.x-k8s.io/concurrent-admission-parent"
"""Kueue's ConcurrentAdmissionParentLabelKey (pkg/controller/constants): ``"true"`` on a parent Workload."""
ALLOWED_FLAVORS_ANNOTATION = "kueue.x-k8s.io/workload-allowed-resource-flavors"
"""Kueue's WorkloadAllowedResourceFlavorAnnotation: the one flavor a variant may be assigned."""
PREEMPTION_GATE = "kueue.x-k8s.io/concurrent-admission"
"""Kueue's ConcurrentAdmissionPreemptionGate: closed on every variant made, opened by the controller for
one variant at a time (:func:`reconcile`)."""
VARIANT_OF_ANNOTATION = "kueue-es.dev/variant-of"
"""Set by the watcher on the log's Workload of a variant (a Workload object owned by a kueue.x-k8s.io
Workload): the parent's UID. Not written on the object (Kueue has no such annotation); a value a user set
is dropped."""
VARIANT_OF_NAME_ANNOTATION = "kueue-es.dev/variant-of-name"
"""Set by the watcher beside :data:`VARIANT_OF_ANNOTATION`: the parent's name (same namespace), so the dispatcher
finds the job of a parent that stands for one (:func:`parent_key`). Log only, as that one."""
FLAVOR_MIGRATION = "FlavorMigration"
"""Kueue's WorkloadEvictedByFlavorMigration: the Evicted reason of a variant a more preferred one replaces."""
MORE_FAVORABLE_MESSAGE = "A more favorable variant is already admitted"
VARIANT_EVICTED_MESSAGE = "Admitted variant was evicted"
"""The parent's Evicted message when its admitted variant is evicted (reason ``VariantEvicted``), and so the
Stopped Event's on its job (Kueue's job reconciler stops the job with the parent's Evicted message)."""
PREEMPTION_TIMEOUT_MS = 5 * 60 * 1000
"""How long a variant's opened preemption gate is left to work before the next variant's is opened
(controller.go preemptionTimeout)."""
TRY_PREFERRED = "TryPreferredFlavors"
RETAIN_FIRST = "RetainFirstAdmission"
API_VERSION = "kueue.x-k8s.io/v1beta2"


def enabled(gates: Mapping[str, bool]) -> bool:
    """Whether the Configuration's feature gates turn ConcurrentAdmission on (alpha: off by default)."""
    return bool(gates.get(GATE, False))


def is_parent(workload: models.Workload) -> bool:
    """Whether the log's ``workload`` is a parent (Kueue's concurrentadmission.IsParent: the label)."""
    return workload.metadata.labels.get(PARENT_LABEL) == "true"


def queued_parent(workload: models.Workload, gates: Mapping[str, bool]) -> bool:
    """Whether ``workload``, queued in the fold, is a parent Kueue keeps out of its queues (the gate on): it counts
    in no pending count, metric or visibility list (its variants do; pkg/cache/queue/cluster_queue.go PushOrUpdate)."""
    return enabled(gates) and is_parent(workload)


def parent_uid(workload: models.Workload) -> str:
    """The UID of the parent of variant ``workload`` (:data:`VARIANT_OF_ANNOTATION`), "" when it is none."""
    return workload.metadata.annotations.get(VARIANT_OF_ANNOTATION, "")


def parent_key(workload: models.Workload) -> tuple[str, str] | None:
    """The (namespace, name) of the parent of variant ``workload`` (:data:`VARIANT_OF_NAME_ANNOTATION`), None when
    it is no variant or was logged before the watcher wrote the name."""
    name = workload.metadata.annotations.get(VARIANT_OF_NAME_ANNOTATION, "") if parent_uid(workload) else ""
    return (workload.metadata.namespace, name) if name else None


def variants_of(workloads: Mapping[str, Any], parent: models.Workload) -> Iterator[Any]:
    """The fold's states (``workloads``: key -> WorkloadState) of the variants of ``parent`` (by
    :data:`VARIANT_OF_NAME_ANNOTATION`): a scan of every workload, for a parent only."""
    key = (parent.metadata.namespace, parent.metadata.name)
    return (wl for wl in workloads.values() if parent_key(wl.workload) == key)


def variant_admitted(workloads: Mapping[str, Any], parent: models.Workload, gates: Mapping[str, bool]) -> bool:
    """Whether ``parent`` is a parent (the gate on) one of whose variants is admitted: its job then runs with that
    admission, as Kueue's controller copies it onto the parent (the log never admits the parent itself)."""
    return queued_parent(parent, gates) and any(
        wl.admitted and wl.reservation is not None for wl in variants_of(workloads, parent)
    )


def variant_flavor(annotations: Mapping[str, str]) -> str:
    """The flavor a variant is restricted to: the first name of its allowed-flavors annotation, "" when it has
    none (concurrentadmission.go GetVariantFlavor)."""
    names = [n.strip() for n in annotations.get(ALLOWED_FLAVORS_ANNOTATION, "").split(",") if n.strip()]
    return names[0] if names else ""


def flavor_order(cq: models.ClusterQueue) -> list[str]:
    """The flavors of the ClusterQueue's first resource group, most preferred first (Kueue reads only that
    group: its webhook allows exactly one with a concurrentAdmissionPolicy)."""
    groups = cq.spec.resource_groups
    return [f.name for f in groups[0].flavors] if groups else []


@dataclass(frozen=True)
class Sibling:
    """A variant as the deciders see it: its key, flavor and whether it is admitted."""

    key: str
    flavor: str
    admitted: bool


def families(workloads: Iterable[tuple[str, models.Workload, bool]]) -> dict[str, list[Sibling]]:
    """The variants by parent UID, from ``(key, workload, admitted)`` of every workload the fold holds."""
    out: dict[str, list[Sibling]] = {}
    for key, workload, admitted in workloads:
        uid = parent_uid(workload)
        if uid:
            out.setdefault(uid, []).append(Sibling(key, variant_flavor(workload.metadata.annotations), admitted))
    return out


def _rank(order: Sequence[str], flavor: str) -> int | None:
    return order.index(flavor) if flavor in order else None


def more_favorable_admitted(
    key: str, workload: models.Workload, family: Sequence[Sibling], order: Sequence[str]
) -> Sibling | None:
    """An admitted sibling of variant ``workload`` on a flavor preferred to its own, None when there is none
    (scheduler.go findAdmittedMoreFavorableSibling: the variant is then skipped)."""
    return _admitted_sibling(key, workload, family, order, lambda sibling, own: sibling < own)


def less_favorable_admitted(
    key: str, workload: models.Workload, family: Sequence[Sibling], order: Sequence[str]
) -> Sibling | None:
    """An admitted sibling of variant ``workload`` on a flavor less preferred than its own (the one it
    migrates from: scheduler.go findAdmittedLessFavorableSibling), None when there is none."""
    return _admitted_sibling(key, workload, family, order, lambda sibling, own: sibling > own)


def _admitted_sibling(
    key: str,
    workload: models.Workload,
    family: Sequence[Sibling],
    order: Sequence[str],
    better: Callable[[int, int], bool],
) -> Sibling | None:
    own = _rank(order, variant_flavor(workload.metadata.annotations))
    if own is None:
        return None
    for sibling in family:
        rank = _rank(order, sibling.flavor)
        if sibling.key != key and sibling.admitted and rank is not None and better(rank, own):
            return sibling
    return None


# -- the controller -------------------------------------------------------------------------------------------

RawObject = dict[str, Any]


@dataclass(frozen=True)
class Action:
    """One write of the controller. ``kind``: ``label-parent`` (``body``: the parent with the label), ``create``
    (``body``: the variant), ``delete``, ``set-active`` (``active``), ``status`` (``status``: the Workload's
    whole new status) on the Workload ``name``; ``event``: (reason, message) for a Kubernetes Event on the Workload
    ``event_on`` ("": ``name``; the parent for a variant created or deleted, as Kueue records them)."""

    kind: str
    name: str
    body: RawObject | None = None
    active: bool | None = None
    status: RawObject | None = None
    event: tuple[str, str] | None = None
    event_on: str = ""


def conditions(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A Workload object's status conditions by type."""
    return {c.get("type", ""): c for c in ((obj.get("status") or {}).get("conditions") or []) if isinstance(c, dict)}


def _true(obj: Mapping[str, Any], kind: str) -> bool:
    return conditions(obj).get(kind, {}).get("status") == "True"


def is_admitted(obj: Mapping[str, Any]) -> bool:
    """Kueue's workload.IsAdmitted: the Admitted condition True."""
    return _true(obj, "Admitted")


def has_quota(obj: Mapping[str, Any]) -> bool:
    """Kueue's HasQuotaReservation: the QuotaReserved condition True."""
    return _true(obj, "QuotaReserved")


def is_active(obj: Mapping[str, Any]) -> bool:
    """``spec.active``, true unless set false."""
    return (obj.get("spec") or {}).get("active") is not False


def variant_name(parent: Mapping[str, Any], flavor: str) -> str:
    """The name of the parent's variant for ``flavor``: ``<parent's name without its last "-" part>-variant-<flavor>-
    <5 hex of a hash of the parent's UID and the flavor>``, within the 253 characters of a name (jobframework
    GetWorkloadNameForVariant: a job's Workload ``job-sample-1a2b3`` gives ``job-sample-variant-spot-...``; it hashes
    the same inputs, the digits differ)."""
    meta = parent.get("metadata") or {}
    name = str(meta.get("name", ""))
    base = name[: name.rfind("-")] if "-" in name else name  # workload_names.go getWorkloadBaseName
    digest = hashlib.sha256(f"{meta.get('uid', '')}/{flavor}".encode()).hexdigest()[:5]
    prefix = f"{base}-variant-{flavor}"[: 253 - 6]
    return f"{prefix}-{digest}"


def make_variant(parent: Mapping[str, Any], flavor: str) -> RawObject:
    """The variant of ``parent`` for ``flavor`` (controller.go generateVariant): the parent's labels (but the
    parent label), annotations plus the allowed-flavors one, spec plus the closed preemption gate
    :data:`PREEMPTION_GATE`, owned by the parent (a controller reference)."""
    meta = parent.get("metadata") or {}
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != PARENT_LABEL}
    annotations = {**(meta.get("annotations") or {}), ALLOWED_FLAVORS_ANNOTATION: flavor}
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    spec = dict(parent.get("spec") or {})
    gates = [g for g in spec.get("preemptionGates") or [] if isinstance(g, dict)]
    if not any(g.get("name") == PREEMPTION_GATE for g in gates):
        gates.append({"name": PREEMPTION_GATE})
    spec["preemptionGates"] = gates
    owner = {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    body: RawObject = {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": variant_name(parent, flavor),
            "namespace": meta.get("namespace", ""),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner],
        },
        "spec": spec,
    }
    return body


def is_variant_of(obj: Mapping[str, Any], parent: Mapping[str, Any]) -> bool:
    """Whether Workload ``obj`` is owned by Workload ``parent`` (by UID)."""
    uid = (parent.get("metadata") or {}).get("uid")
    return any(
        ref.get("kind") == "Workload" and ref.get("uid") == uid
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []
    )


def is_variant(obj: Mapping[str, Any]) -> bool:
    """Whether Workload ``obj`` is a variant: owned by a kueue.x-k8s.io Workload (concurrentadmission.go IsVariant)."""
    return any(
        ref.get("kind") == "Workload" and str(ref.get("apiVersion", "")).startswith("kueue.x-k8s.io/")
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []
    )


@dataclass
class _Family:
    parent: RawObject
    variants: list[RawObject]
    order: list[str]
    mode: str
    last_acceptable: str | None
    now: str
    now_ms: int
    actions: list[Action] = field(default_factory=list)

    def rank(self, obj: Mapping[str, Any]) -> int:
        flavor = variant_flavor((obj.get("metadata") or {}).get("annotations") or {})
        return self.order.index(flavor) if flavor in self.order else len(self.order)


def _set_condition(status: RawObject, kind: str, value: bool, reason: str, message: str, now: str) -> None:
    conds = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    new = {"type": kind, "status": "True" if value else "False", "reason": reason, "message": message}
    for i, c in enumerate(conds):
        if c.get("type") == kind:
            if c.get("status") == new["status"] and c.get("reason") == reason and c.get("message") == message:
                return
            same = c.get("status") == new["status"]
            conds[i] = {**new, "lastTransitionTime": c.get("lastTransitionTime", now) if same else now}
            status["conditions"] = conds
            return
    conds.append({**new, "lastTransitionTime": now})
    status["conditions"] = conds


def policy_of(cq: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ClusterQueue's ``spec.concurrentAdmissionPolicy`` (None: it does not opt in)."""
    policy = (cq.get("spec") or {}).get("concurrentAdmissionPolicy")
    return policy if isinstance(policy, dict) else None


def reconcile(
    parent: Mapping[str, Any],
    variants: Sequence[Mapping[str, Any]],
    cq: Mapping[str, Any],
    *,
    now: str,
    now_ms: int,
) -> list[Action]:
    """What Kueue's concurrent-admission controller writes for ``parent`` (a Workload object labelled
    :data:`PARENT_LABEL`), ``variants`` (the Workloads it owns) in ClusterQueue ``cq`` (a raw object with a
    ``concurrentAdmissionPolicy``) at ``now`` (RFC 3339; ``now_ms`` the same in ms since the epoch), in the
    order of its Reconcile (pkg/controller/concurrentadmission/controller.go): variants created for the
    flavors that have none and deleted for flavors no longer in the ClusterQueue; an admitted variant's
    eviction passed to the parent; variants deactivated (``RetainFirstAdmission``: all but the admitted
    one; ``TryPreferredFlavors``: those less preferred than the admitted one or than
    ``lastAcceptableFlavorName``) and activated again (none admitted: all); the admitted variant's admission
    copied onto the parent, or the parent evicted when it is admitted with no variant admitted; a finished
    parent's variants finished; the preemption gate of the most preferred variant that waits on it opened,
    one at a time, the next only :data:`PREEMPTION_TIMEOUT_MS` after the last. Each write is one
    :class:`Action`; an action that needs the result of an earlier one comes in a later call."""
    policy = policy_of(cq) or {}
    migration = policy.get("migration") or {}
    constraints = migration.get("constraints") or {}
    groups = (cq.get("spec") or {}).get("resourceGroups") or []
    order = [f.get("name", "") for f in (groups[0].get("flavors") or [])] if groups else []
    fam = _Family(
        parent=dict(parent),
        variants=[dict(v) for v in variants],
        order=order,
        mode=migration.get("mode") or TRY_PREFERRED,
        last_acceptable=constraints.get("lastAcceptableFlavorName"),
        now=now,
        now_ms=now_ms,
    )
    fam.variants.sort(key=fam.rank)
    _create_and_delete(fam)
    if _sync_eviction(fam):
        return fam.actions
    if stands_for_job(fam.parent):
        _sync_job_parent(fam)
    _deactivate(fam)
    _activate(fam)
    _sync_admission(fam)
    _open_gate(fam)
    return fam.actions


def _create_and_delete(fam: _Family) -> None:
    have = {variant_flavor((v.get("metadata") or {}).get("annotations") or {}) for v in fam.variants}
    for flavor in fam.order:
        if flavor not in have:
            body = make_variant(fam.parent, flavor)
            fam.actions.append(
                Action(
                    "create",
                    body["metadata"]["name"],
                    body=body,
                    event=("CreatedVariant", f'Variant Workload "{_ref(body)}" created'),
                    event_on=fam.parent["metadata"]["name"],
                )
            )
    fresh = []
    for v in fam.variants:
        flavor = variant_flavor((v.get("metadata") or {}).get("annotations") or {})
        if flavor in fam.order:
            fresh.append(v)
            continue
        message = f'Variant Workload "{_ref(v)}" deleted; flavor "{flavor}" no longer in ClusterQueue'
        event_on = fam.parent["metadata"]["name"]
        fam.actions.append(
            Action("delete", v["metadata"]["name"], event=("DeletedVariant", message), event_on=event_on)
        )
    fam.variants = fresh


def _ref(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _evicted(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    cond = conditions(obj).get("Evicted")
    return cond if cond is not None and cond.get("status") == "True" else None


def stands_for_job(parent: Mapping[str, Any]) -> bool:
    """Whether parent Workload ``parent`` is a job's (an owner reference other than a Workload): its job runs with
    the admitted variant's admission, started and stopped by the dispatcher from that variant's decisions, and a
    variant's quota comes back when that job has stopped (the watcher reports the variant stopped)."""
    refs = (parent.get("metadata") or {}).get("ownerReferences") or []
    return any(isinstance(ref, dict) and ref.get("kind") != "Workload" for ref in refs)


def _sync_eviction(fam: _Family) -> bool:
    """controller.go syncVariantEvictionStatus: True when the parent is (being) evicted and nothing else is done. A
    job's parent waits for the evicted variant's quota to come back (its job's stop releases it), where Kueue's
    controller, once the job reconciler cleared the parent's reservation, clears the variant's."""
    for v in fam.variants:
        cond = _evicted(v)
        if cond is None or not has_quota(v):
            continue
        if has_quota(fam.parent):
            if _evicted(fam.parent) is None:
                status = dict(fam.parent.get("status") or {})
                _set_condition(status, "Evicted", True, "VariantEvicted", VARIANT_EVICTED_MESSAGE, fam.now)
                fam.actions.append(Action("status", fam.parent["metadata"]["name"], status=status))
            return True
        if stands_for_job(fam.parent):
            return True
        _clear_admission(fam, v, cond)
        return False
    return False


def _sync_job_parent(fam: _Family) -> None:
    """A job's parent evicted while it holds quota, no evicted variant holding any (:func:`_sync_eviction` waits
    for those): its reservation cleared, as Kueue's job reconciler unsets it once the job stopped (reconciler.go
    "handle eviction"); :func:`_sync_admission` then copies the admission of a variant admitted since, in a later
    write (Kueue's Workload webhook keeps ``status.admission`` while QuotaReserved stays True)."""
    evicted = _evicted(fam.parent)
    if evicted is not None and has_quota(fam.parent):
        _clear_admission(fam, fam.parent, evicted)


def _clear_admission(fam: _Family, v: RawObject, cond: Mapping[str, Any]) -> None:
    """controller.go clearWorkloadAdmission: the variant's reservation taken back (QuotaReserved False)."""
    status = dict(v.get("status") or {})
    reason, message = str(cond.get("reason", "")), str(cond.get("message", ""))
    requeue = reason in ("Preempted", "NodeFailures")
    _set_condition(status, "Requeued", requeue, reason, message, fam.now)
    _set_condition(status, "QuotaReserved", False, "PendingEvaluation", message, fam.now)
    if _true(v, "Admitted"):
        _set_condition(status, "Admitted", False, "NoReservation", "The workload has no reservation", fam.now)
    status["admission"] = None  # a merge patch's null: taken off
    fam.actions.append(Action("status", v["metadata"]["name"], status=status))
    v["status"] = status


def _admitted_variant(fam: _Family) -> RawObject | None:
    return next((v for v in fam.variants if is_admitted(v)), None)


def _set_active(fam: _Family, v: RawObject, active: bool, message: str) -> None:
    if is_active(v) == active:
        return
    v.setdefault("spec", {})["active"] = active
    reason = "ActivatedVariant" if active else "DeactivatedVariant"
    verb = "activated" if active else "deactivated"
    fam.actions.append(
        Action(
            "set-active",
            v["metadata"]["name"],
            active=active,
            event=(reason, f"Variant Workload {verb} due to {message}"),
        )
    )


def _deactivate(fam: _Family) -> None:
    if not is_active(fam.parent):
        for v in fam.variants:
            _set_active(fam, v, False, f'Parent Workload "{_ref(fam.parent)}" not active')
        return
    admitted = _admitted_variant(fam)
    if admitted is None:
        return
    if fam.mode == RETAIN_FIRST:
        for v in fam.variants:
            if v is not admitted:
                _set_active(fam, v, False, f'RetainFirstAdmission: another Variant "{_ref(admitted)}" is admitted')
        return
    if fam.last_acceptable is not None and fam.last_acceptable in fam.order:
        limit = fam.order.index(fam.last_acceptable)
        for v in fam.variants:
            if v is not admitted and fam.rank(v) > limit:
                message = (
                    f'being below lastAcceptableFlavor: "{fam.last_acceptable}" and another Variant admitted '
                    f'"{_ref(admitted)}"'
                )
                _set_active(fam, v, False, message)
    for v in fam.variants:
        if fam.rank(v) > fam.rank(admitted):
            _set_active(fam, v, False, f'being lower priority than admitted Variant "{_ref(admitted)}"')


def _activate(fam: _Family) -> None:
    if not is_active(fam.parent):
        return
    admitted = _admitted_variant(fam)
    if admitted is None:
        for v in fam.variants:
            _set_active(fam, v, True, "no other Variant being admitted")
        return
    if fam.mode == RETAIN_FIRST:
        return
    if fam.last_acceptable is not None and fam.last_acceptable in fam.order:
        limit = fam.order.index(fam.last_acceptable)
        for v in fam.variants:
            if fam.rank(v) <= limit and fam.rank(v) < fam.rank(admitted):
                message = (
                    f'being at least lastAcceptableFlavor: "{fam.last_acceptable}" and higher priority than '
                    f'admitted Variant "{_ref(admitted)}"'
                )
                _set_active(fam, v, True, message)
        return
    for v in fam.variants:
        if fam.rank(v) < fam.rank(admitted):
            _set_active(fam, v, True, f'being higher priority than admitted Variant "{_ref(admitted)}"')


def _sync_admission(fam: _Family) -> None:
    """controller.go syncAdmissionStatus."""
    finished = conditions(fam.parent).get("Finished")
    if finished is not None and finished.get("status") == "True":
        for v in fam.variants:
            if not _true(v, "Finished"):
                status = dict(v.get("status") or {})
                reason, message = str(finished.get("reason", "")), str(finished.get("message", ""))
                _set_condition(status, "Finished", True, reason, message, fam.now)
                fam.actions.append(Action("status", v["metadata"]["name"], status=status))
        return
    admitted = _admitted_variant(fam)
    parent_admitted = is_admitted(fam.parent)
    if admitted is None and parent_admitted:
        if _evicted(fam.parent) is None:
            status = dict(fam.parent.get("status") or {})
            _set_condition(status, "Evicted", True, "ConcurrentAdmission", "No variant is running", fam.now)
            fam.actions.append(Action("status", fam.parent["metadata"]["name"], status=status))
        return
    if admitted is not None and not parent_admitted:
        status = dict(fam.parent.get("status") or {})
        status["admission"] = (admitted.get("status") or {}).get("admission")
        cq = (status["admission"] or {}).get("clusterQueue", "")
        _set_condition(status, "QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", fam.now)
        name = admitted["metadata"]["name"]
        _set_condition(status, "Admitted", True, "Admitted", f"The variant {name} is admitted", fam.now)
        # workload.go SetQuotaReservation: resetActiveCondition of each of these that is True
        for kind in ("Evicted", "Preempted", "BlockedOnPreemptionGates"):
            if _true(fam.parent, kind):
                previous = str(conditions(fam.parent)[kind].get("message", ""))
                _set_condition(status, kind, False, "QuotaReserved", f"Previously: {previous}", fam.now)
        fam.actions.append(Action("status", fam.parent["metadata"]["name"], status=status))


def _open_gate(fam: _Family) -> None:
    """controller.go selectVariantToOpenPreemptionGate and openPreemptionGate."""
    admissible = [v for v in fam.variants if is_active(v) and not _true(v, "Finished") and not has_quota(v)]
    candidate = None
    for v in admissible:
        if _gate_open(v) is not None:
            continue
        blocked = conditions(v).get("BlockedOnPreemptionGates")
        if blocked is None or blocked.get("status") != "True":
            if "QuotaReserved" not in conditions(v):
                return  # not evaluated for admission yet
            continue
        candidate = v
        break
    if candidate is None:
        return
    opened = [t for v in admissible if (t := _gate_open(v)) is not None]
    if opened and fam.now_ms - max(opened) < PREEMPTION_TIMEOUT_MS:
        return
    status = dict(candidate.get("status") or {})
    gates = [g for g in status.get("preemptionGates") or [] if isinstance(g, dict) and g.get("name") != PREEMPTION_GATE]
    gates.append({"name": PREEMPTION_GATE, "position": "Open", "lastTransitionTime": fam.now})
    status["preemptionGates"] = gates
    fam.actions.append(
        Action(
            "status",
            candidate["metadata"]["name"],
            status=status,
            event=("PreemptionUngatedVariant", f'Opened preemption gate for variant workload "{_ref(candidate)}"'),
        )
    )


def _gate_open(v: Mapping[str, Any]) -> int | None:
    """The time (ms) the variant's gate :data:`PREEMPTION_GATE` was opened, None while it is closed."""
    for g in (v.get("status") or {}).get("preemptionGates") or []:
        if isinstance(g, dict) and g.get("name") == PREEMPTION_GATE and g.get("position") == "Open":
            stamp = str(g.get("lastTransitionTime") or "")
            try:
                return manifests.parse_time_ms(stamp)
            except manifests.ManifestError:
                return 0
    return None
