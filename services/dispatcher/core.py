"""The dispatcher's pure core: a logged decision in, the Kubernetes write it calls for out.

Kueue's job reconciler starts an admitted Job by unsuspending it and injecting the
assigned flavors' ``nodeLabels`` into the pod template's ``nodeSelector`` and the
flavors' ``tolerations`` into its tolerations (SEMANTICS §1.2, §2.1; Kueue
pkg/controller/jobframework/reconciler.go startJob, podset.go Merge). It stops an
evicted one by suspending it and restoring the pod template it had before
(SEMANTICS §7.8; reconciler.go step 6 "handle eviction", stopJob;
pkg/controller/jobs/job/job_controller.go Stop, RestorePodSetsInfo). This module
decides those writes from the folded state; the runner (``services.dispatcher.service``)
performs them and records the result on the log.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from events import types
from projections.cluster import ClusterState, WorkloadState, apply
from services.dispatcher import status

EVICTED_ANNOTATION = "kueue-es.dev/evicted"
"""Set on a Job the dispatcher stopped for an eviction; the value is the eviction's reason.

The watcher reads it to tell an eviction from a Job that is merely suspended, and
reports WorkloadStopped once the Job has no active pods; StartJob removes it. It
stands in for Kueue's Evicted condition on the Workload object, which kueue-es does
not write.
"""

EVICTION_SEQ_ANNOTATION = "kueue-es.dev/eviction-seq"
"""Set with :data:`EVICTED_ANNOTATION`: the log sequence of the EvictionRequested.

It names the eviction, so the watcher reports each one once (its WorkloadStopped
Msg-Id) however often it sees the stopped Job, and a second eviction of a Job that
is still stopped (evicted again before it was restarted) still changes the Job.
"""


@dataclass(frozen=True, kw_only=True)
class StartJob:
    """Unsuspend Job ``namespace/name`` with the flavors' node labels and tolerations added."""

    workload: types.WorkloadRef
    namespace: str
    name: str
    uid: str = ""
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)

    def patch(self, *, current_tolerations: list[dict[str, Any]]) -> dict[str, Any]:
        """The JSON merge patch for the Job: keeps the template's own tolerations, adds ours once,
        and removes the eviction marks of an earlier stop so a later eviction is seen afresh."""
        present = {_toleration_key(t) for t in current_tolerations}
        merged = list(current_tolerations) + [t for t in self.tolerations if _toleration_key(t) not in present]
        template_spec: dict[str, Any] = {"nodeSelector": self.node_selector}
        if merged != list(current_tolerations):
            template_spec["tolerations"] = merged
        return {
            "metadata": {"annotations": {EVICTED_ANNOTATION: None, EVICTION_SEQ_ANNOTATION: None}},
            "spec": {"suspend": False, "template": {"spec": template_spec}},
        }


@dataclass(frozen=True, kw_only=True)
class StopJob:
    """Suspend Job ``namespace/name`` (UID ``uid``) for an eviction and give its pod template back.

    Kueue's Job.Stop suspends the Job and restores the pod template from the
    Workload's pod sets (job_controller.go Stop, RestorePodSetsInfo; podset.go
    RestorePodSpec). Here the restore takes back exactly what StartJob added:
    ``node_selector`` maps each key the flavors injected to the template's own
    value (None: the template had none, remove it); ``tolerations`` are the flavors'
    tolerations, removed unless the template had them itself (``own_tolerations``,
    counted, so a toleration the template and a flavor share stays once).
    ``reason`` (the eviction's, e.g. ``Preempted``) goes into the
    :data:`EVICTED_ANNOTATION`, ``decision_seq`` (the EvictionRequested's log
    sequence) into the :data:`EVICTION_SEQ_ANNOTATION`.
    """

    workload: types.WorkloadRef
    namespace: str
    name: str
    uid: str = ""
    reason: str
    decision_seq: int
    node_selector: dict[str, str | None] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    own_tolerations: list[dict[str, Any]] = field(default_factory=list)

    def patch(self, *, current_pod_spec: dict[str, Any]) -> dict[str, Any]:
        """The JSON merge patch for the Job, given its pod template's current ``spec``.

        Suspends it, marks it evicted and restores nodeSelector and tolerations; the
        same patch applied twice changes nothing the second time. With ``uid`` the
        patch carries it as a precondition: a re-created namesake Job is refused.
        """
        selector = dict(current_pod_spec.get("nodeSelector") or {})
        for key, own in self.node_selector.items():
            if own is None:
                selector.pop(key, None)
            else:
                selector[key] = own
        current = list(current_pod_spec.get("tolerations") or [])
        added = {_toleration_key(t) for t in self.tolerations}
        budget = Counter(_toleration_key(t) for t in self.own_tolerations)
        kept: list[dict[str, Any]] = []
        for toleration in current:
            key = _toleration_key(toleration)
            if key in added and budget[key] <= 0:
                continue  # a copy StartJob added
            budget[key] -= 1
            kept.append(toleration)
        template_spec: dict[str, Any] = {}
        if self.node_selector:
            template_spec["nodeSelector"] = dict(self.node_selector) if selector else None
        if kept != current:
            template_spec["tolerations"] = kept or None
        annotations = {EVICTED_ANNOTATION: self.reason, EVICTION_SEQ_ANNOTATION: str(self.decision_seq)}
        metadata: dict[str, Any] = {"annotations": annotations}
        if self.uid:
            metadata["uid"] = self.uid
        spec: dict[str, Any] = {"suspend": True}
        if template_spec:
            spec["template"] = {"spec": template_spec}
        return {"metadata": metadata, "spec": spec}


Action = StartJob | StopJob


@dataclass
class DispatchState:
    """What the dispatcher folds: the cluster, as every service folds it, plus the log
    sequence at which each workload's live reservation was recorded, the Kueue status
    of each workload, and what changed since the runner last wrote.

    ``reserved_seq[workload key]`` lets :func:`plan` tell a redelivered eviction from
    a current one: an EvictionRequested logged before the workload's live
    reservation was about an earlier admission, long since stopped.
    ``records[workload key]`` is the workload's Kueue status (:mod:`.status`).
    ``dirty_workloads`` (workload key -> the last sequence that changed it) and
    ``dirty_queues`` (``("ClusterQueue", "", name)`` or ``("LocalQueue", namespace,
    name)``) are the objects whose Kubernetes state may have to change; the runner
    takes them (:meth:`take_dirty_workloads`, :meth:`take_dirty_queues`) when it writes.
    """

    cluster: ClusterState = field(default_factory=ClusterState)
    reserved_seq: dict[str, int] = field(default_factory=dict)
    records: dict[str, status.WorkloadRecord] = field(default_factory=dict)
    dirty_workloads: dict[str, int] = field(default_factory=dict)
    dirty_queues: dict[tuple[str, str, str], None] = field(default_factory=dict)

    def take_dirty_workloads(self) -> dict[str, int]:
        """The dirty workloads (key -> sequence), in the order they changed; the set is emptied."""
        taken, self.dirty_workloads = self.dirty_workloads, {}
        return taken

    def take_dirty_queues(self) -> list[tuple[str, str, str]]:
        """The dirty queues, in the order they changed; the set is emptied."""
        taken, self.dirty_queues = list(self.dirty_queues), {}
        return taken

    @property
    def last_seq(self) -> int:
        """The last sequence folded."""
        return self.cluster.last_seq


def fold(view: DispatchState, event: types.Event, *, seq: int) -> DispatchState:
    """Fold one event stored at ``seq`` into ``view`` (in place) and return it."""
    state = view.cluster
    key = status.workload_key(event)
    if key is None:
        queues = _queues_of_object_event(state, event)
        apply(state, event, seq=seq)
        queues += _queues_of_object_event(state, event)
        view.dirty_queues.update(dict.fromkeys(queues))
        for name in _priority_class_of(event):  # the Workloads' spec.priority follows the class's value
            for wl_key, wl in state.workloads.items():
                ref = wl.workload.spec.priority_class_ref
                if ref is not None and ref.kind == "WorkloadPriorityClass" and ref.name == name:
                    view.dirty_workloads[wl_key] = seq
        return view
    current = state.workloads.get(key)
    before = status.Before.of(current)
    queues_before, counted_before = _queues_of_workload(state, current), _queue_view(current)
    apply(state, event, seq=seq)
    after = state.workloads.get(key)
    if isinstance(event, types.QuotaReserved) and before.reservation is None:
        if after is not None and after.reservation is not None:
            view.reserved_seq[key] = seq  # a new reservation (a second copy of a live one changes nothing)
    changed = status.fold_record(view.records, event, key=key, before=before, state=state)
    if changed or isinstance(event, types.WorkloadObserved | types.ObjectDeleted):
        view.dirty_workloads.pop(key, None)
        view.dirty_workloads[key] = seq
    if counted_before != _queue_view(after):
        view.dirty_queues.update(dict.fromkeys(queues_before + _queues_of_workload(state, after)))
    return view


def _priority_class_of(event: types.Event) -> list[str]:
    match event:
        case types.WorkloadPriorityClassObserved(priority_class=obj):
            return [obj.metadata.name]
        case types.ObjectDeleted(kind="WorkloadPriorityClass"):
            return [event.name]
    return []


def _queues_of_workload(state: ClusterState, wl: WorkloadState | None) -> list[tuple[str, str, str]]:
    """The LocalQueue a workload names, the ClusterQueue behind it and the one it holds quota in."""
    if wl is None:
        return []
    namespace, queue = wl.workload.metadata.namespace, wl.workload.spec.queue_name
    out = [("LocalQueue", namespace, queue)]
    lq = state.local_queues.get((namespace, queue))
    if lq is not None:
        out.append(("ClusterQueue", "", lq.spec.cluster_queue))
    if wl.reservation is not None:
        out.append(("ClusterQueue", "", wl.reservation.cluster_queue))
    return out


def _queue_view(wl: WorkloadState | None) -> tuple[Any, ...]:
    """What of a workload the queues' status counts: where it queues, whether it waits, its quota, admitted."""
    if wl is None:
        return ()
    meta, spec = wl.workload.metadata, wl.workload.spec
    waiting = wl.reservation is None and not wl.gone and spec.active
    return (meta.uid, meta.namespace, spec.queue_name, waiting, wl.reservation, wl.admitted)


def _queues_of_object_event(state: ClusterState, event: types.Event) -> list[tuple[str, str, str]]:
    """The queues whose status a ClusterQueue or LocalQueue event can change (also their LocalQueues / ClusterQueue)."""
    match event:
        case types.ClusterQueueObserved(cluster_queue=obj):
            name = obj.metadata.name
        case types.ObjectDeleted(kind="ClusterQueue"):
            name = event.name
        case types.LocalQueueObserved(local_queue=obj):
            lq = state.local_queues.get((obj.metadata.namespace, obj.metadata.name))
            out = [
                ("LocalQueue", obj.metadata.namespace, obj.metadata.name),
                ("ClusterQueue", "", obj.spec.cluster_queue),
            ]
            return out + ([("ClusterQueue", "", lq.spec.cluster_queue)] if lq is not None else [])
        case types.ObjectDeleted(kind="LocalQueue"):
            lq = state.local_queues.get((event.namespace, event.name))
            return [("ClusterQueue", "", lq.spec.cluster_queue)] if lq is not None else []
        case _:
            return []
    lqs = [("LocalQueue", ns, n) for (ns, n), lq in state.local_queues.items() if lq.spec.cluster_queue == name]
    return [("ClusterQueue", "", name), *lqs]


def plan(view: DispatchState, event: types.Event, *, seq: int = 0) -> Action | None:
    """The write ``event`` (logged at ``seq``) calls for, given ``view`` folded at least up to it; None if none.

    WorkloadAdmitted of a workload made for a batch/v1 Job starts the Job;
    EvictionRequested of one that still holds quota stops it. Every other event
    is ignored by the dispatcher.
    """
    state = view.cluster
    if isinstance(event, types.EvictionRequested):
        return _plan_stop(state, event, seq=seq, reserved_seq=view.reserved_seq)
    if not isinstance(event, types.WorkloadAdmitted):
        return None
    current = state.workloads.get(event.workload.key)
    if current is None or current.reservation is None or current.gone:
        return None
    owner = current.workload.owner
    if owner is None or owner.kind != "Job":
        return None
    node_selector, tolerations = _flavor_injections(state, current.reservation)
    return StartJob(
        workload=event.workload,
        namespace=current.workload.metadata.namespace,
        name=owner.name,
        uid=owner.uid,
        node_selector=node_selector,
        tolerations=tolerations,
    )


def _plan_stop(
    state: ClusterState, event: types.EvictionRequested, *, seq: int, reserved_seq: dict[str, int]
) -> StopJob | None:
    """StopJob for an eviction of a Job's workload that still holds the quota it was evicted from.

    Nothing when the workload is unknown, finished or deleted (nothing runs), holds
    no quota (already stopped and released), is a namesake with another UID, holds a
    reservation recorded after the eviction (a redelivery of an old eviction), or is
    not a batch/v1 Job's.
    """
    current = state.workloads.get(event.workload.key)
    if current is None or current.reservation is None or current.gone:
        return None
    if event.workload.uid and current.workload.metadata.uid and event.workload.uid != current.workload.metadata.uid:
        return None
    if seq and reserved_seq.get(event.workload.key, 0) > seq:
        return None
    owner = current.workload.owner
    if owner is None or owner.kind != "Job" or owner.api_version != "batch/v1":
        return None
    injected_selector, injected_tolerations = _flavor_injections(state, current.reservation)
    own_selector: dict[str, str] = {}
    own_tolerations: list[dict[str, Any]] = []
    for pod_set in current.workload.spec.pod_sets:
        own_selector.update(pod_set.node_selector)
        own_tolerations.extend(status.toleration_dict(t) for t in pod_set.tolerations)
    return StopJob(
        workload=event.workload,
        namespace=current.workload.metadata.namespace,
        name=owner.name,
        uid=owner.uid,
        reason=event.reason,
        decision_seq=seq,
        node_selector={key: own_selector.get(key) for key in injected_selector},
        tolerations=injected_tolerations,
        own_tolerations=own_tolerations,
    )


def _flavor_injections(
    state: ClusterState, reservation: types.QuotaReserved
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The nodeSelector entries (sorted by key) and tolerations StartJob adds for ``reservation``'s flavors."""
    node_selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    for flavor_name in _assigned_flavors(reservation):
        flavor = state.flavors.get(flavor_name)
        if flavor is None:
            continue
        node_selector.update(flavor.spec.node_labels)
        tolerations.extend(status.toleration_dict(t) for t in flavor.spec.tolerations)
    return dict(sorted(node_selector.items())), tolerations


def _assigned_flavors(reservation: types.QuotaReserved) -> list[str]:
    names: list[str] = []
    for assignment in reservation.pod_set_assignments:
        for flavor in assignment.flavors.values():
            if flavor not in names:
                names.append(flavor)
    return names


def _toleration_key(raw: dict[str, Any]) -> tuple[str, str, str, str, int | None]:
    """A toleration as Kubernetes reads it (operator defaults to ``Equal``), for comparisons."""
    return (
        str(raw.get("key") or ""),
        str(raw.get("operator") or "Equal"),
        str(raw.get("value") or ""),
        str(raw.get("effect") or ""),
        raw.get("tolerationSeconds"),
    )
