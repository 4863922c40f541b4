"""Elastic workload slices in the admission cycle (SEMANTICS-ADVANCED D.3).

Why this module exists: a replacement slice of an elastic job (gate
ElasticJobsViaWorkloadSlices) asks only for what its job grew by, on the flavors the slice it
replaces already holds, and that slice is never its victim. Kueue does this inside its flavor
assigner and scheduler (pkg/scheduler/scheduler.go getInitialAssignments, admit,
replaceWorkloadSlice; flavorassigner.go; pkg/workloadslicing/workloadslicing.go
ReplacedWorkloadSlice). Here the cycle and the preemptor ask this module which slice a
workload replaces, take that slice's usage out of the cycle's quota tree while the
replacement is tried (so the full new request is checked against usage without the old slice:
the delta against usage with it), keep it out of the candidates, and pin the flavors.
"""

from __future__ import annotations

import dataclasses

import msgspec

from kueue_es.events import slices, types
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.scheduling import flavors


def enabled(state: ClusterState) -> bool:
    """Whether ElasticJobsViaWorkloadSlices is on in ``state``'s Configuration (beta, on unless set
    ``false``, as Kueue v0.18+: :func:`kueue_es.events.slices.gate_enabled`)."""
    return slices.gate_enabled(state.configuration.feature_gates)


def with_gate_off_unless_set(state: ClusterState) -> ClusterState:
    """``state`` as the deciders saw it while kueue-es took ElasticJobsViaWorkloadSlices as off unless
    set (Kueue v0.13 to v0.17's alpha default; admitter logic 48 and preemptor logic 20 and earlier, for
    replay): a view whose Configuration sets the gate ``false`` when it does not set it, so
    :func:`enabled` and :func:`kueue_es.events.slices.tas_gate_enabled` answer as they did; ``state``
    itself when the Configuration sets the gate. The view's Configuration object is kept in
    ``state.caches`` while the fold's stays the same (request memos compare it by identity)."""
    config = state.configuration
    if slices.GATE in config.feature_gates:
        return state
    kept = state.caches.get("slices.gate_off_unless_set")
    if not isinstance(kept, tuple) or kept[0] is not config:
        before = msgspec.structs.replace(config, feature_gates={**config.feature_gates, slices.GATE: False})
        kept = state.caches["slices.gate_off_unless_set"] = (config, before)
    return dataclasses.replace(state, configuration=kept[1])


def replaced_slice(
    state: ClusterState, wl: WorkloadState, cluster_queue: str, *, annotation_alone: bool = True
) -> WorkloadState | None:
    """The slice ``wl`` replaces when that slice holds quota in ``cluster_queue``, is not being
    evicted and has not finished; else None, and ``wl`` is scheduled as any other workload
    (workloadslicing.ReplacedWorkloadSlice: only a slice in the snapshot's ClusterQueue counts).

    ``annotation_alone`` (admitter logic 36, preemptor 16): the ``workload-slice-replacement-for``
    annotation names the slice whatever ``elastic-job`` says, as Kueue's ReplacementForKey reads it
    (:func:`kueue_es.events.slices.replacement_key`), and only a slice of ``wl``'s own namespace is
    replaced (Kueue PR #13082: a hand-made Workload naming another namespace's workload would have it
    finished as the replaced slice); False (earlier logic, for replay): only with ``elastic-job: "true"``
    too (:func:`kueue_es.events.slices.replacement_for`), in any namespace. The caller checks the gate
    ElasticJobsViaWorkloadSlices (:func:`enabled`)."""
    key = slices.replacement_key(wl.workload) if annotation_alone else slices.replacement_for(wl.workload)
    if key is None:
        return None
    old = state.workloads.get(key)
    if old is None or old is wl or old.reservation is None or old.gone or old.eviction is not None:
        return None
    if annotation_alone and old.workload.metadata.namespace != wl.workload.metadata.namespace:
        return None
    if old.reservation.cluster_queue != cluster_queue:
        return None
    return old


def pinned(requests: list[flavors.PodSetRequest], old: WorkloadState) -> list[flavors.PodSetRequest]:
    """``requests`` with each pod set held to the flavors the replaced slice got for it and asking
    only what it grew by: less what that slice holds for the pod set now (flavorassigner.go)."""
    assert old.reservation is not None
    held = {psa.name: psa.flavors for psa in old.reservation.pod_set_assignments}
    holds = {psa.name: psa.resource_usage for psa in (old.held or old.reservation).pod_set_assignments}
    return [
        dataclasses.replace(ps, original_flavors=dict(held.get(ps.name, {})), released=dict(holds.get(ps.name, {})))
        for ps in requests
    ]


def full_usage(reserved: types.QuotaReserved, requests: list[flavors.PodSetRequest]) -> types.QuotaReserved:
    """The replacement's reservation as it holds quota: each pod set's per-pod request times its
    count (``requests``: the head's, per pod), not the delta it was admitted for (net reserved quota
    = the new slice's full counts, whatever the old slice held)."""
    per_pod = {ps.name: ps.requests for ps in requests}
    assignments = [
        msgspec.structs.replace(
            psa,
            resource_usage={r: per_pod.get(psa.name, {}).get(r, 0) * psa.count for r in sorted(psa.resource_usage)},
        )
        for psa in reserved.pod_set_assignments
    ]
    return msgspec.structs.replace(reserved, pod_set_assignments=assignments)


def replaced(old: WorkloadState, *, cause_seq: int, now_ms: int) -> types.QuotaReleased:
    """The release of the replaced slice, in the batch that reserves quota for its replacement:
    the fold finishes it ``WorkloadSliceReplaced`` (scheduler.go replaceWorkloadSlice)."""
    assert old.reservation is not None
    return types.QuotaReleased(
        workload=old.ref,
        cluster_queue=old.reservation.cluster_queue,
        reason=slices.REPLACED_REASON,
        cause_seq=cause_seq,
        at_ms=now_ms,
    )


def chain_of(state: ClusterState, key: str) -> list[WorkloadState]:
    """Every slice of the chain workload ``key`` belongs to (same namespace and first slice), oldest
    first by creation time and name; [] for a workload that is not elastic (``kueue-es explain``)."""
    wl = state.workloads.get(key)
    if wl is None or not slices.is_elastic(wl.workload.metadata.annotations):
        return []
    origin, namespace = slices.slice_name(wl.workload), wl.workload.metadata.namespace
    members = [
        other
        for other in state.workloads.values()
        if other.workload.metadata.namespace == namespace
        and slices.is_elastic(other.workload.metadata.annotations)
        and slices.slice_name(other.workload) == origin
    ]
    return sorted(members, key=lambda w: (w.workload.metadata.creation_timestamp_ms, w.workload.metadata.name))
