"""Pending workloads in queue order, with their positions: Kueue's visibility API answers from this.

Kueue's ``ClusterQueue.Snapshot`` (pkg/cache/queue/cluster_queue.go; SEMANTICS-ADVANCED §G.2) lists a
ClusterQueue's pending workloads (its active heap and its inadmissible list together) sorted with the
heap's own order, and the visibility API (pkg/visibility/storage/*.go) numbers them:
``positionInClusterQueue`` is the index in that order, ``positionInLocalQueue`` the number of earlier
workloads of the same LocalQueue. Here the order is the admitter's (:mod:`kueue_es.scheduling.queues`):
a nominated preemptor first under BestEffortFIFO (SEMANTICS §3.9), then, with admission fair sharing, the
LocalQueue that consumed least (§8), then priority, queue-order time, UID and name (§3.2).

Pure: a folded :class:`ClusterState` in, a list out.
"""

from __future__ import annotations

from dataclasses import dataclass

from kueue_es.projections import afs
from kueue_es.projections.cluster import ClusterState, effective_order, order_gates_move, priority_of
from kueue_es.scheduling import concurrent_admission as ca
from kueue_es.scheduling import dra
from kueue_es.scheduling.queues import lq_usage, sticky_preemptors

LIMIT_DEFAULT = 1000
LIMIT_MAX = 100_000


@dataclass(frozen=True, kw_only=True)
class PendingWorkload:
    """One pending workload of a ClusterQueue: its effective priority and its 0-based positions."""

    namespace: str
    name: str
    local_queue: str
    cluster_queue: str
    priority: int
    creation_timestamp_ms: int
    position_in_cluster_queue: int
    position_in_local_queue: int
    parked: bool  # on Kueue's inadmissible list (waiting for a requeue trigger)


def pending_in_cluster_queue(state: ClusterState, cluster_queue: str, *, now_ms: int = 0) -> list[PendingWorkload]:
    """Every pending workload of ``cluster_queue`` in queue order, with positions, but those of a stopped
    LocalQueue (``spec.stopPolicy`` not None: Kueue's manager.go DeleteLocalQueue takes them out of the
    queue) and those :func:`counted` leaves out (ConcurrentAdmission's parents, workloads refused for DRA
    reasons); ``now_ms`` (ms since the epoch) ages the LocalQueue usage that admission fair sharing orders by.
    Raises KeyError naming the
    ClusterQueue when the fold has none of that name (the API answers 404)."""
    cq = state.cluster_queues.get(cluster_queue)
    if cq is None:
        raise KeyError(f"ClusterQueue {cluster_queue!r} not found")
    fair = afs.active(cq, state.configuration)
    sticky_order = (
        sticky_preemptors(state).get(cluster_queue) if cq.spec.queueing_strategy == "BestEffortFIFO" else None
    )
    sticky = sticky_order[-1] if sticky_order is not None else None
    entries: list[tuple[tuple[object, ...], str, str]] = []  # (sort key, workload key, local queue name)
    # the few workloads a feature gate moves (PriorityBoost, PrioritySortingWithinCohort) in their effective place
    moved = state.ordered_apart if state.ordered_apart and order_gates_move(state.configuration) else {}
    for (namespace, lq_name), queued in state.queued.items():
        lq = state.local_queues.get((namespace, lq_name))
        if lq is None or lq.spec.cluster_queue != cluster_queue or lq.spec.stop_policy != "None":
            continue  # a stopped LocalQueue's workloads are out of the ClusterQueue's queue (DeleteLocalQueue)
        usage = lq_usage(state, (namespace, lq_name), now_ms=now_ms) if fair else 0.0
        for order in queued:
            key = order[-1]
            if not counted(state, key):
                continue  # ConcurrentAdmission's parent (its variants are queued), or refused for DRA reasons
            if key in moved:
                order = effective_order(state.workloads[key], state)
            entries.append(((0 if key == sticky else 1, usage, order), key, lq_name))
    entries.sort(key=lambda entry: entry[0])
    parked = {key for queued in state.queued.values() for key in queued.parked}
    out: list[PendingWorkload] = []
    per_local_queue: dict[tuple[str, str], int] = {}
    for position, (_, key, lq_name) in enumerate(entries):
        wl = state.workloads[key]
        namespace, name = key.split("/", 1)
        in_lq = per_local_queue.get((namespace, lq_name), 0)
        per_local_queue[(namespace, lq_name)] = in_lq + 1
        out.append(
            PendingWorkload(
                namespace=namespace,
                name=name,
                local_queue=lq_name,
                cluster_queue=cluster_queue,
                priority=priority_of(wl.workload, state),
                creation_timestamp_ms=wl.workload.metadata.creation_timestamp_ms,
                position_in_cluster_queue=position,
                position_in_local_queue=in_lq,
                parked=key in parked,
            )
        )
    return out


def pending_in_local_queue(
    state: ClusterState, namespace: str, local_queue: str, *, now_ms: int = 0
) -> list[PendingWorkload]:
    """The pending workloads of LocalQueue ``namespace/local_queue``, in their ClusterQueue's order (their
    positions are the ClusterQueue's). Raises KeyError naming the LocalQueue when it does not exist or is
    stopped (pkg/visibility/storage/pending_workloads_lq.go: not in the queue manager); a LocalQueue whose ClusterQueue does not exist has none pending."""
    lq = state.local_queues.get((namespace, local_queue))
    if lq is None or lq.spec.stop_policy != "None":  # Kueue's queue manager forgets a stopped one: 404 too
        raise KeyError(f"LocalQueue {namespace}/{local_queue} not found")
    if lq.spec.cluster_queue not in state.cluster_queues:
        return []
    return [
        p
        for p in pending_in_cluster_queue(state, lq.spec.cluster_queue, now_ms=now_ms)
        if p.namespace == namespace and p.local_queue == local_queue
    ]


def counted(state: ClusterState, key: str) -> bool:
    """Whether the queued workload ``key`` counts as pending, as Kueue's queue manager holds it: not a
    ConcurrentAdmission parent, which Kueue never queues
    (:func:`kueue_es.scheduling.concurrent_admission.queued_parent`), nor a workload refused for DRA reasons,
    which Kueue's workload controller keeps out of the queue manager until its devices are charged
    (:func:`kueue_es.scheduling.dra.refused`). The admitter still looks at both (it parks the refused one)."""
    wl = state.workloads.get(key)
    if wl is None:
        return True
    return not ca.queued_parent(wl.workload, state.configuration.feature_gates) and not dra.refused(state, wl.workload)


def queued_count(state: ClusterState, queue: tuple[str, str]) -> int:
    """The workloads queued in LocalQueue ``queue`` (namespace, name) that count as pending (:func:`counted`,
    inlined: the queues' status counts every queued workload at each write), whether or not its ClusterQueue
    exists."""
    queued = state.queued.get(queue, ())
    parents = ca.enabled(state.configuration.feature_gates)
    devices = bool(state.device_classes)
    workloads = state.workloads
    count = 0
    for order in queued:
        wl = workloads.get(order[-1])
        if wl is not None:
            workload = wl.workload
            if parents and ca.is_parent(workload):
                continue
            if (devices or any(ps.resource_claims for ps in workload.spec.pod_sets)) and dra.refused(state, workload):
                continue
        count += 1
    return count


def pending_count_in_local_queue(state: ClusterState, namespace: str, name: str) -> int:
    """How many workloads LocalQueue ``namespace/name`` (of ``state.local_queues``) has pending, as its status'
    ``pendingWorkloads`` says: Kueue's queue manager PendingWorkloads, ``len(q.items)`` (pkg/cache/queue/manager.go),
    which holds a workload also while the LocalQueue's ClusterQueue does not exist (AddOrUpdateWorkloadWithoutLock
    adds it to the LocalQueue before it returns ErrClusterQueueDoesNotExist); 0 while the LocalQueue is stopped
    (manager.go DeleteLocalQueue takes its workloads out). :func:`queued_count` otherwise."""
    lq = state.local_queues[(namespace, name)]
    return queued_count(state, (namespace, name)) if lq.spec.stop_policy == "None" else 0


def page(items: list[PendingWorkload], *, offset: int = 0, limit: int = LIMIT_DEFAULT) -> list[PendingWorkload]:
    """The visibility API's window: ``limit`` items (negative: 0, at most :data:`LIMIT_MAX`) from ``offset``
    (negative: 0), as pkg/visibility/storage reads its query parameters."""
    offset = max(offset, 0)
    limit = min(max(limit, 0), LIMIT_MAX)
    return items[offset : offset + limit]


def position_of(state: ClusterState, namespace: str, name: str, *, now_ms: int = 0) -> PendingWorkload | None:
    """Workload ``namespace/name``'s entry among its ClusterQueue's pending workloads; None when it is not
    queued (admitted, finished, unknown, refused for DRA reasons, or its LocalQueue or ClusterQueue missing)."""
    wl = state.workloads.get(f"{namespace}/{name}")
    if wl is None or wl.queued_as is None:
        return None
    (lq_namespace, lq_name), _ = wl.queued_as
    lq = state.local_queues.get((lq_namespace, lq_name))
    if lq is None or lq.spec.cluster_queue not in state.cluster_queues:
        return None
    for entry in pending_in_cluster_queue(state, lq.spec.cluster_queue, now_ms=now_ms):
        if entry.namespace == namespace and entry.name == name:
            return entry
    return None
