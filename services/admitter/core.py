"""The admitter's pure core: one Kueue scheduling cycle over the folded state.

``decide(state, now_ms=...)`` has no I/O, no clock and no randomness, so replay
can re-run it at any recorded basis and get the same bytes. The cycle follows
Kueue's scheduler (pkg/scheduler/scheduler.go, SEMANTICS §4), in phases:

1. release the quota of workloads that finished, were deleted or deactivated;
2. build the quota tree (cohorts, borrowing and lending limits, SEMANTICS §6);
3. heads: per active ClusterQueue, the first queued workload in Kueue's order
   (priority, creation time, UID; SEMANTICS §3.2); parked workloads wait until
   something that could let them fit happens (§3.6);
4. nominate: assign flavors to each head against the cycle's snapshot (§5);
5. order the entries (non-borrowing first, then priority, then time; §4.4.1) and
   admit each that still fits, counting earlier admissions of the cycle (§4.5).

Outputs: QuotaReleased, QuotaReserved + WorkloadAdmitted, WorkloadInadmissible
(always when a BestEffortFIFO head is parked; otherwise only when the message changes).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from events import models, types
from projections import quota
from projections.cluster import ClusterState, WorkloadState
from services.admitter import flavors, queues

LOGIC_VERSION = 2
ROLE = "admit"


@dataclass(frozen=True, kw_only=True)
class Entry:
    """A nominated head: the workload, its ClusterQueue and its flavor assignment."""

    workload: WorkloadState
    cq: models.ClusterQueue
    assignment: flavors.Assignment
    priority: int


def decide(state: ClusterState, *, now_ms: int) -> list[types.Decision]:
    """One scheduling cycle over ``state`` at ``now_ms`` (ms since the epoch).

    Returns decisions in a deterministic order; empty when nothing changes.
    """
    tree = quota.cached(state)
    tree.begin()  # the cycle's releases and admissions are what-ifs until they come back through the log
    try:
        return _cycle(state, tree=tree, now_ms=now_ms)
    finally:
        tree.rollback()


def _cycle(state: ClusterState, *, tree: quota.QuotaTree, now_ms: int) -> list[types.Decision]:
    decisions: list[types.Decision] = []
    for key in sorted(state.releasable):
        wl = state.workloads[key]
        assert wl.reservation is not None
        decisions.append(_release(wl, now_ms=now_ms))
        tree.shift_reservation(wl.reservation.cluster_queue, quota.reservation_usage(wl.reservation), sign=-1)
    plan = queues.plan(state, tree=tree)
    for wl, why in plan.unqueued:
        decisions.extend(_inadmissible(wl, why, parked=why.parked, now_ms=now_ms))
    entries: list[Entry] = []
    for cq_name, head in plan.heads:
        cq = state.cluster_queues[cq_name]
        requests = queues.cached_pod_set_requests(head, cq=cq, config=state.configuration)
        assignment = _assign_with_partial(head.workload, requests, cq=cq, tree=tree, state=state)
        if not assignment.fits:
            parked = cq.spec.queueing_strategy == "BestEffortFIFO"
            decisions.extend(
                _inadmissible(head, queues.Why("Pending", assignment.message), parked=parked, now_ms=now_ms)
            )
            continue
        entries.append(
            Entry(workload=head, cq=cq, assignment=assignment, priority=queues.priority_of(head.workload, state))
        )
    entries.sort(key=_entry_order)
    for entry in entries:
        usage = entry.assignment.usage()
        name = entry.cq.metadata.name
        if not tree.fits(name, usage):
            message = "Workload no longer fits after processing another workload"
            decisions.extend(_inadmissible(entry.workload, queues.Why("Pending", message), parked=False, now_ms=now_ms))
            continue
        tree.add_usage(name, usage)
        decisions.extend(_admit(entry, now_ms=now_ms))
    return decisions


def _entry_order(entry: Entry) -> tuple[int, int, int, str, str]:
    meta = entry.workload.workload.metadata
    return (
        entry.assignment.borrowing,
        -entry.priority,
        meta.creation_timestamp_ms,
        meta.uid,
        entry.workload.workload.key,
    )


def _assign_with_partial(
    workload: models.Workload,
    requests: list[flavors.PodSetRequest],
    *,
    cq: models.ClusterQueue,
    tree: quota.QuotaTree,
    state: ClusterState,
) -> flavors.Assignment:
    """Full counts first; then, with minCount, the largest counts that fit (SEMANTICS §5.9)."""
    full = flavors.assign(requests, cq=cq, tree=tree, flavors=state.flavors)
    deltas = [
        ps.count - (spec.min_count or ps.count) for ps, spec in zip(requests, workload.spec.pod_sets, strict=True)
    ]
    total = sum(deltas)
    if full.fits or total <= 0:
        return full

    def reduced(k: int) -> list[flavors.PodSetRequest]:
        return [
            dataclasses.replace(ps, count=ps.count - (d * k) // total) for ps, d in zip(requests, deltas, strict=True)
        ]

    low, high, best = 1, total, None
    while low <= high:  # the smallest reduction k that fits gives the largest counts
        k = (low + high) // 2
        attempt = flavors.assign(reduced(k), cq=cq, tree=tree, flavors=state.flavors)
        if attempt.fits:
            best, high = attempt, k - 1
        else:
            low = k + 1
    return best if best is not None else full


def _admit(entry: Entry, *, now_ms: int) -> list[types.Decision]:
    ref, cq = entry.workload.ref, entry.cq.metadata.name
    assignments = [
        types.PodSetAssignment(name=ps.name, flavors=ps.flavors, resource_usage=ps.usage, count=ps.count)
        for ps in entry.assignment.pod_sets
    ]
    reserved: list[types.Decision] = [
        types.QuotaReserved(workload=ref, cluster_queue=cq, pod_set_assignments=assignments, at_ms=now_ms)
    ]
    if queues.required_checks(entry.cq):
        return reserved  # admitted only once every admission check is Ready (SEMANTICS §9.5)
    return [*reserved, types.WorkloadAdmitted(workload=ref, cluster_queue=cq, at_ms=now_ms)]


def _inadmissible(wl: WorkloadState, why: queues.Why, *, parked: bool, now_ms: int) -> list[types.Decision]:
    if why.message == wl.pending_message and not parked:
        return []  # recorded when it changes, not every cycle
    event = types.WorkloadInadmissible(
        workload=wl.ref, reason=why.reason, message=why.message, at_ms=now_ms, parked=parked
    )
    return [event]


def _release(wl: WorkloadState, *, now_ms: int) -> types.QuotaReleased:
    assert wl.reservation is not None
    if wl.finished is not None:
        reason, cause = "Finished", wl.finished_seq
    elif wl.deleted_seq:
        reason, cause = "Deleted", wl.deleted_seq
    else:
        reason, cause = "Deactivated", wl.observed_seq
    return types.QuotaReleased(
        workload=wl.ref, cluster_queue=wl.reservation.cluster_queue, reason=reason, cause_seq=cause, at_ms=now_ms
    )
