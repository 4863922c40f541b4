"""The dispatcher's lean fold: only what :func:`~kueue_es.services.dispatcher.core.plan` reads.

A dispatcher that writes no Workload objects and no queue status (the bench's simulated
API, ``track_objects`` False) plans a Job write from a handful of facts per workload, so
it need not fold the log through the cluster fold every decider runs
(:func:`kueue_es.projections.cluster.apply`: queue order, quota usage, generations,
Kueue's metrics, TAS usage) nor build each workload's Kueue status record
(:mod:`.status`: conditions nobody writes here). :func:`fold` keeps:

* of each workload (a :class:`~kueue_es.projections.cluster.WorkloadState`, only these
  fields kept): the Workload object (owner, pod sets, annotations), its live reservation,
  the eviction in force, whether it finished or was deleted, and whether it was
  admitted; the transitions are the cluster fold's (cluster.py ``_apply_workload_fact``,
  ``_apply_deleted``, ``_apply_workload_decision``, ``_apply_preemption``), so plan
  sees the same values;
* the ResourceFlavors, ClusterQueues and LocalQueues (the flavors' node labels and
  tolerations; the admission checks a ClusterQueue requires);
* of each workload's record (:class:`~kueue_es.services.dispatcher.status.WorkloadRecord`)
  only the admission checks and the topology assignments, as :func:`status.fold_record`
  folds them, and only once one of them is set: a workload without checks or TAS has none.

What the batch verifier's partition rule reads (the partitions' heads, each workload's
partition: :func:`kueue_es.projections.partitions.record_problem`) is kept as the cluster
fold keeps it. Everything else (the deciders' open requests, the dispatcher's results, pods, nodes,
PodsReady, reclaimable pods, requeues) only moves ``last_seq``. Facts of the types in
:data:`SKIPPED_FACT_TYPES` need not even be decoded (:func:`skippable`).
``tests/unit/test_dispatch_lean_fold.py`` folds logs (a recorded demo log among them) through
this and the full fold and checks every decision plans the same write at every point.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kueue_es.events import codec, models, slices, types
from kueue_es.projections import multikueue
from kueue_es.projections.cluster import ADMITTER_ROLE, WorkloadState, resets_checks_on_release
from kueue_es.services.dispatcher import status

if TYPE_CHECKING:
    from kueue_es.services.dispatcher.core import DispatchState

SKIPPED_FACT_TYPES = frozenset(
    codec.tag_of(cls)
    for cls in (
        types.WorkloadPodsReady,
        types.WorkloadStopped,
        types.WorkloadEvictionObserved,
        types.WorkloadReclaimablePods,
        types.PodObserved,
        types.NodeObserved,
        types.TopologyObserved,
        types.NamespaceObserved,
        types.WorkloadPriorityClassObserved,
        types.AdmissionCheckObserved,
        types.DeviceClassObserved,
        types.ResourceClaimTemplateObserved,
        types.ResourceSliceObserved,
        types.ObjectRejected,
        types.MultiKueueClusterObserved,
        types.MultiKueueConfigObserved,
        types.RemoteWorkloadObserved,
        types.WorkerClusterConnectivity,
    )
)
"""The ``Kq-Type`` of the facts :func:`fold` only counts: nothing :func:`~.core.plan` reads comes from them."""

FACT_PREFIX = "kq.in."


def skippable(subject: str, headers: Mapping[str, str]) -> bool:
    """Whether a message on ``subject`` with ``headers`` is a fact the lean fold only counts, known without
    decoding it: on a fact subject, its ``Kq-Type`` one of :data:`SKIPPED_FACT_TYPES`. The caller still offers
    it to the batch verifier while a batch is open (a fact inside a batch breaks it)."""
    return subject.startswith(FACT_PREFIX) and headers.get("Kq-Type", "") in SKIPPED_FACT_TYPES


def fold(view: DispatchState, event: types.Event, *, seq: int) -> str | None:
    """Fold ``event`` (stored at ``seq``) into the lean ``view`` in place; return the key (``namespace/name``)
    of a workload this event admitted (the caller fixes its pod set information then), else None."""
    state = view.cluster
    state.last_seq = max(state.last_seq, seq)
    parts = state.partitions
    parts.seq = seq  # a workload moved by this event moves at ``seq`` (as cluster.apply)
    handler = _WORKLOAD_EVENTS.get(type(event))
    if handler is not None:
        return handler(view, event, seq)
    # The batch verifier's partition rule (partitions.record_problem) reads the heads and each
    # workload's partition: those are kept as the cluster fold keeps them.
    match event:
        case types.DecisionRecord():
            state.heads[event.partition] = seq
            parts.on_record(state, event.partition, event.basis_seq)
            if event.role == ADMITTER_ROLE and event.logic_version > state.admit_logic:
                state.admit_logic = event.logic_version  # what its evictions do to a late Retry (status.late_reset)
        case types.ResourceFlavorObserved(flavor=obj):
            old_flavor = state.flavors.get(obj.metadata.name)
            state.flavors[obj.metadata.name] = obj
            if old_flavor is None or old_flavor.spec.topology_name != obj.spec.topology_name:
                parts.on_flavor(state, seq)
        case types.ClusterQueueObserved(cluster_queue=obj):
            state.cluster_queues[obj.metadata.name] = obj
            parts.on_cluster_queue(state, obj.metadata.name, seq)
        case types.CohortObserved(cohort=obj):
            old_cohort = state.cohorts.get(obj.metadata.name)
            state.cohorts[obj.metadata.name] = obj
            if (old_cohort.spec.parent_name if old_cohort is not None else None) != obj.spec.parent_name:
                parts.on_cohort(state, seq)
        case types.LocalQueueObserved(local_queue=obj):
            state.local_queues[(obj.metadata.namespace, obj.metadata.name)] = obj
            parts.on_local_queue(state, (obj.metadata.namespace, obj.metadata.name), seq)
        case types.ConfigurationObserved(configuration=obj):
            state.configuration = obj
        case types.ObjectDeleted(reason=types.REJECTED_OBJECT_GONE):
            pass  # an object known only by its rejection (cluster.apply: only its rejection goes)
        case types.ObjectDeleted(kind="Workload"):
            _deleted(view, event, seq)
        case types.ObjectDeleted(kind="ResourceFlavor"):
            gone_flavor = state.flavors.pop(event.name, None)
            if gone_flavor is not None and gone_flavor.spec.topology_name:
                parts.on_flavor(state, seq)
        case types.ObjectDeleted(kind="ClusterQueue"):
            state.cluster_queues.pop(event.name, None)
            parts.on_cluster_queue(state, event.name, seq)
        case types.ObjectDeleted(kind="Cohort"):
            gone_cohort = state.cohorts.pop(event.name, None)
            if gone_cohort is not None and gone_cohort.spec.parent_name:
                parts.on_cohort(state, seq)
        case types.ObjectDeleted(kind="LocalQueue"):
            state.local_queues.pop((event.namespace, event.name), None)
            parts.on_local_queue(state, (event.namespace, event.name), seq)
        case types.ObjectDeleted(kind="Configuration"):
            state.configuration = models.Configuration()
    return None


def _same_uid(wl: WorkloadState, uid: str) -> bool:
    """cluster.py ``_same_uid``: an empty UID on either side matches."""
    own = wl.workload.metadata.uid
    return not uid or not own or uid == own


def _record(view: DispatchState, key: str, wl: WorkloadState, *, create: bool) -> status.WorkloadRecord | None:
    """The record of ``wl``, replaced when it was a namesake's (another UID), as :func:`status.fold_record`
    does; created only when ``create``."""
    uid = wl.workload.metadata.uid
    record = view.records.get(key)
    if record is not None and record.uid and uid and record.uid != uid:
        del view.records[key]
        record = None
    if record is None and create:
        record = view.records[key] = status.WorkloadRecord(uid=uid)
    return record


def _forget(view: DispatchState, key: str) -> None:
    """Workload ``key`` left the fold: its record and pod set information go with it."""
    view.records.pop(key, None)
    view.started.pop(key, None)


def _sync_checks(view: DispatchState, key: str, wl: WorkloadState, required: list[str], at_ms: int) -> None:
    """status ``_sync_checks`` on the record (made only when a check is required)."""
    record = _record(view, key, wl, create=bool(required))
    if record is not None:
        status._sync_checks(record, required, at_ms=at_ms)


def _observed(view: DispatchState, event: types.Event, seq: int) -> str | None:
    assert isinstance(event, types.WorkloadObserved)
    workload = event.workload
    key = workload.key
    state = view.cluster
    current = state.workloads.get(key)
    if current is None or (
        current.workload.metadata.uid != workload.metadata.uid and current.gone and current.reservation is None
    ):
        current = state.workloads[key] = WorkloadState(workload=workload, observed_seq=seq)
    elif current.gone and current.reservation is None:
        current.observed_seq = seq  # retired (same UID): it stays gone; only its queue may have moved
        current.workload = workload
        _retire(view, key, current)
        state.partitions.on_workload(state, key)
        return None
    else:
        current.workload = workload
        current.observed_seq = seq
    state.partitions.on_workload(state, key)
    if current.reservation is None:
        at_ms = workload.metadata.creation_timestamp_ms
        _sync_checks(view, key, current, status._pending_checks(state, current), at_ms)
    else:
        _record(view, key, current, create=False)
    return None


def _retire(view: DispatchState, key: str, wl: WorkloadState) -> None:
    """``wl`` is gone (finished or deleted) and holds no quota: :func:`~.core.plan` writes nothing for it any
    more, so only what tells a namesake apart is kept (its UID, name and queue), not its Workload object,
    record or pod set information. A namesake with another UID replaces it (as in the cluster fold)."""
    meta = wl.workload.metadata
    if len(wl.workload.spec.pod_sets) or meta.labels or meta.annotations:
        wl.workload = models.Workload(
            metadata=models.ObjectMeta(name=meta.name, namespace=meta.namespace, uid=meta.uid),
            spec=models.WorkloadSpec(queue_name=wl.workload.spec.queue_name, pod_sets=[]),
        )
    _forget(view, key)


def _finished(view: DispatchState, event: types.Event, seq: int) -> str | None:
    assert isinstance(event, types.WorkloadFinished)
    key = event.workload.key
    current = view.cluster.workloads.get(key)
    if current is None:
        return None
    if current.finished is None and _same_uid(current, event.workload.uid):
        current.finished = event
        current.finished_seq = seq
    if current.reservation is None and current.gone:
        _retire(view, key, current)
    else:
        _record(view, key, current, create=False)
    return None


def _deleted(view: DispatchState, event: types.ObjectDeleted, seq: int) -> None:
    key = f"{event.namespace}/{event.name}"
    workloads = view.cluster.workloads
    current = workloads.get(key)
    if current is None:
        return
    if current.deleted_seq == 0 and _same_uid(current, event.uid):
        current.deleted_seq = seq
        if current.reservation is None:
            del workloads[key]
            _forget(view, key)
            view.cluster.partitions.on_workload(view.cluster, key)
            return
    _record(view, key, current, create=False)


def _reserve(view: DispatchState, key: str, wl: WorkloadState, reservation: types.QuotaReserved, seq: int) -> None:
    """``wl`` (holding no quota) takes ``reservation``: the checks its ClusterQueue requires are synced."""
    wl.reservation = reservation
    view.reserved_seq[key] = seq
    view.cluster.partitions.on_workload(view.cluster, key)
    _sync_checks(view, key, wl, status._required_checks(view.cluster, reservation), reservation.at_ms)


def _reserved(view: DispatchState, event: types.Event, seq: int) -> str | None:
    assert isinstance(event, types.QuotaReserved)
    key = event.workload.key
    current = view.cluster.workloads.get(key)
    if current is None:
        return None
    if current.reservation is None:
        _reserve(view, key, current, event, seq)
    else:
        _record(view, key, current, create=False)
    return None


def _admitted(view: DispatchState, event: types.Event, seq: int) -> str | None:
    assert isinstance(event, types.WorkloadAdmitted)
    key = event.workload.key
    current = view.cluster.workloads.get(key)
    if current is None:
        return None
    if types.reserves(event, current.reservation is not None):
        _reserve(view, key, current, types.reservation_of(event), seq)
    else:
        _record(view, key, current, create=False)
    newly = current.reservation is not None and not current.admitted
    current.admitted = current.reservation is not None
    return key if newly else None


def _released(view: DispatchState, event: types.Event, seq: int) -> str | None:
    assert isinstance(event, types.QuotaReleased)
    key = event.workload.key
    workloads = view.cluster.workloads
    current = workloads.get(key)
    if current is None:
        return None
    if current.reservation is not None:
        resets = resets_checks_on_release(
            view.cluster, event, reservation=current.reservation, eviction=current.eviction
        )
        if event.reason == slices.REPLACED_REASON and current.finished is None:
            # cluster.py _slice_replaced: Finished WorkloadSliceReplaced (its message, naming the
            # replacement, is the status's; plan reads only that the slice is gone)
            current.finished = types.WorkloadFinished(
                workload=event.workload, succeeded=True, reason=slices.REPLACED_REASON, at_ms=event.at_ms
            )
            current.finished_seq = seq
        current.reservation = current.held = None
        current.admitted = False
        current.eviction = None
        current.stopped_seq = 0
        record = _record(view, key, current, create=False)
        kept = event.reason in ("Finished", "Deleted") or (
            event.reason == slices.REPLACED_REASON and current.finished is not None
        )
        if record is not None and not kept:
            record.topology = {}  # status _release: every other path unreserves
        if record is not None and resets:  # the release stands for the deactivation's eviction
            status._reset_checks(record, at_ms=event.at_ms)
    else:
        _record(view, key, current, create=False)
    if current.deleted_seq:
        del workloads[key]
        _forget(view, key)
        if current.observed_seq > current.deleted_seq:  # cluster.py _recreate: its job made a new Workload
            workloads[key] = WorkloadState(workload=current.workload, observed_seq=current.observed_seq)
            at_ms = current.workload.metadata.creation_timestamp_ms
            _sync_checks(view, key, workloads[key], status._pending_checks(view.cluster, workloads[key]), at_ms)
    elif current.gone and current.reservation is None:
        _retire(view, key, current)
    view.cluster.partitions.on_workload(view.cluster, key)
    return None


def _evicted(view: DispatchState, event: types.Event, seq: int) -> str | None:
    assert isinstance(event, types.EvictionRequested)
    key = event.workload.key
    current = view.cluster.workloads.get(key)
    if current is None:
        return None
    record = _record(view, key, current, create=False)
    if _same_uid(current, event.workload.uid) and current.reservation is not None and current.eviction is None:
        current.eviction = event
        if record is not None and event.observed is not True:  # one someone else wrote resets nothing
            status._reset_checks(record, at_ms=event.at_ms)
    return None


def _unreserved(view: DispatchState, event: types.Event, seq: int) -> str | None:
    """WorkloadInadmissible, PreemptionRequired: a waiting workload's record loses its topology (``_unreserve``)."""
    assert isinstance(event, types.WorkloadInadmissible | types.PreemptionRequired)
    key = event.workload.key
    current = view.cluster.workloads.get(key)
    if current is None:
        return None
    record = _record(view, key, current, create=False)
    if record is not None and current.reservation is None and not current.gone:
        record.topology = {}
    return None


def _check_changed(view: DispatchState, event: types.Event, seq: int) -> str | None:
    if isinstance(event, types.AdmissionCheckStateChanged):
        outcome: types.AdmissionCheckStateChanged | None = event
    else:
        assert isinstance(
            event, types.RemoteAdmissionChosen | types.MultiKueueCheckRetry | types.MultiKueueCheckRejected
        )
        outcome = multikueue.check_outcome(event)
    key = outcome.workload.key if outcome is not None else ""
    current = view.cluster.workloads.get(key)
    if current is None or outcome is None:
        return None
    record = _record(view, key, current, create=True)
    assert record is not None
    status._check_changed(record, outcome)
    if isinstance(event, types.AdmissionCheckStateChanged):  # a controller's report: its eviction may reset it
        status.late_reset(record, view.cluster, current, event)
    return None


def _topology(view: DispatchState, event: types.Event, seq: int) -> str | None:
    assert isinstance(event, types.TopologyAssigned)
    key = event.workload.key
    current = view.cluster.workloads.get(key)
    if current is None:
        return None
    record = _record(view, key, current, create=bool(event.assignments))
    if record is not None:
        record.topology = status.merged_topology(record.topology, event)
    return None


def _about(view: DispatchState, event: types.Event, seq: int) -> str | None:
    """An event about a workload that changes nothing plan reads but a namesake's record."""
    assert isinstance(
        event,
        types.WorkloadStopped
        | types.WorkloadPodsReady
        | types.WorkloadReclaimablePods
        | types.WorkloadDeactivated
        | types.WorkersNominated,
    )
    key = event.workload.key
    current = view.cluster.workloads.get(key)
    if current is not None:
        _record(view, key, current, create=False)
    return None


_WORKLOAD_EVENTS = {
    types.WorkloadObserved: _observed,
    types.WorkloadFinished: _finished,
    types.QuotaReserved: _reserved,
    types.WorkloadAdmitted: _admitted,
    types.QuotaReleased: _released,
    types.EvictionRequested: _evicted,
    types.WorkloadInadmissible: _unreserved,
    types.PreemptionRequired: _unreserved,
    types.AdmissionCheckStateChanged: _check_changed,
    types.RemoteAdmissionChosen: _check_changed,
    types.MultiKueueCheckRetry: _check_changed,
    types.MultiKueueCheckRejected: _check_changed,
    types.TopologyAssigned: _topology,
    types.WorkloadStopped: _about,
    types.WorkloadPodsReady: _about,
    types.WorkloadReclaimablePods: _about,
    types.WorkloadDeactivated: _about,
    types.WorkersNominated: _about,
}
