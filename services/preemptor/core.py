"""The preemptor's pure core: answer the admitter's nominations with evictions.

The admitter's cycle finds that a head fits only if some workloads are evicted and
logs a PreemptionRequired with those targets (it runs the same target search as
Kueue's scheduler does inline, :mod:`kueue_es.scheduling.preemption`). The preemptor,
folding the same log, owns the evictions: for each open nomination it checks that
the preemptor still waits and that every target still holds quota, recomputing the
targets on the current state when they do not (the log moved since the
nomination), and commits a PreemptionIssued plus one EvictionRequested per victim
not already being evicted, with Kueue's Preempted reason and message (SEMANTICS
§7.8; pkg/scheduler/preemption/preemption.go IssuePreemptions). Its batch is
committed under the same partition head as the admitter's, so the two can never
decide on different views of the quota.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kueue_es.events import types
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.scheduling import preemption as targets
from kueue_es.scheduling.search import Search
from kueue_es.scheduling.tas import cycle as tas_cycle

LOGIC_VERSION = 4
ROLE = "preempt"


def decide(state: ClusterState, *, now_ms: int) -> list[types.Decision]:
    """Answer every open nomination of ``state`` (oldest first) at ``now_ms`` (ms since the epoch).

    Returns PreemptionIssued and EvictionRequested decisions; empty when no
    nomination waits.
    """
    if not state.nominations:
        return []
    tree = quota.cached(state)
    tree.begin()
    try:
        out: list[types.Decision] = []
        search = Search(state, tree, now_ms=now_ms)
        evicting: set[str] = set()
        for _key, (seq, nomination) in sorted(state.nominations.items(), key=lambda item: item[1][0]):
            out.extend(_answer(state, tree, search, nomination, seq=seq, evicting=evicting, now_ms=now_ms))
        return out
    finally:
        tree.rollback()


def _answer(
    state: ClusterState,
    tree: quota.QuotaTree,
    search: Search,
    nomination: types.PreemptionRequired,
    *,
    seq: int,
    evicting: set[str],
    now_ms: int,
) -> list[types.Decision]:
    wl = state.workloads[nomination.workload.key]
    cq = state.cluster_queues.get(nomination.cluster_queue)
    issued = types.PreemptionIssued(
        workload=nomination.workload,
        cluster_queue=nomination.cluster_queue,
        nomination_seq=seq,
        targets=[],
        at_ms=now_ms,
    )
    if cq is None:
        return [_with(issued, message=f"ClusterQueue {nomination.cluster_queue} doesn't exist")]
    usage: dict[quota.FR, int] = {}
    for psa in nomination.pod_set_assignments:
        for resource, amount in psa.resource_usage.items():
            fr = (psa.flavors[resource], resource)
            usage[fr] = usage.get(fr, 0) + amount
    topology_fits = _topology_check(state, search, wl, nomination)
    chosen = _still_valid(state, tree, nomination, usage=usage, topology_fits=topology_fits)
    if chosen is None:
        need = frozenset(fr for fr, amount in usage.items() if amount > tree.available(cq.metadata.name, fr))
        preemptor = search.preemptor(wl, cq, usage, need or frozenset(usage))
        if topology_fits is not None:
            preemptor = dataclasses.replace(preemptor, topology_fits=topology_fits)
        chosen = [
            types.PreemptionTarget(
                workload=t.candidate.workload.ref, cluster_queue=t.candidate.cluster_queue, reason=t.reason
            )
            for t in search.targets(preemptor)
        ]
        if not chosen:
            return [_with(issued, message="the nomination is no longer current: no targets make the workload fit")]
    if any(t.workload.key in evicting for t in chosen):
        return [_with(issued, message="the targets overlap another preemption decided in this cycle")]
    evictions: list[types.Decision] = []
    preemptor_path = targets.cq_path(tree, cq.metadata.name)
    for target in chosen:
        evicting.add(target.workload.key)
        victim = state.workloads[target.workload.key]
        if victim.eviction is not None:
            continue  # already being evicted: counts as done (SEMANTICS §7.8)
        evictions.append(
            types.EvictionRequested(
                workload=victim.ref,
                cluster_queue=target.cluster_queue,
                preemptor=nomination.workload,
                preemption_reason=target.reason,
                message=targets.preemption_message(
                    wl, target.reason, preemptor_path, targets.cq_path(tree, target.cluster_queue)
                ),
                at_ms=now_ms,
            )
        )
    return [_with(issued, targets=chosen), *evictions]


def _topology_check(
    state: ClusterState, search: Search, wl: WorkloadState, nomination: types.PreemptionRequired
) -> Callable[[frozenset[str]], bool] | None:
    """The placement part of the fit test for the nominated assignment (SEMANTICS-ADVANCED
    A.11; Kueue preemption.go workloadFits): whether its TAS pod sets can be placed on their
    flavors with the given workloads' TAS usage removed. None when it has no TAS pod set."""
    if not search.tas.active:
        return None
    wanted = tas_cycle.reserved_wanted(state, wl, nomination.pod_set_assignments)
    if not wanted:
        return None
    cycle = search.tas

    def topology_fits(removed: frozenset[str]) -> bool:
        return isinstance(cycle.place(wanted, removed=removed), tas_cycle.Placed)

    return topology_fits


def _still_valid(
    state: ClusterState,
    tree: quota.QuotaTree,
    nomination: types.PreemptionRequired,
    *,
    usage: dict[quota.FR, int],
    topology_fits: Callable[[frozenset[str]], bool] | None,
) -> list[types.PreemptionTarget] | None:
    """The nominated targets when they still hold quota where the admitter saw them and
    evicting them still makes the preemptor fit (quota and, for TAS pod sets, the placement,
    A.11); else None (recompute)."""
    victims = []
    for target in nomination.targets:
        victim = state.workloads.get(target.workload.key)
        if (
            victim is None
            or victim.gone
            or victim.reservation is None
            or victim.reservation.cluster_queue != target.cluster_queue
            or (target.workload.uid and victim.workload.metadata.uid != target.workload.uid)
        ):
            return None
        victims.append(victim)
    if not victims:
        return None
    name = nomination.cluster_queue
    for victim in victims:
        assert victim.reservation is not None
        tree.remove_usage(victim.reservation.cluster_queue, quota.reservation_usage(victim.reservation))
    fits = tree.fits(name, usage)
    for victim in victims:
        assert victim.reservation is not None
        tree.add_usage(victim.reservation.cluster_queue, quota.reservation_usage(victim.reservation))
    if fits and topology_fits is not None:
        fits = topology_fits(frozenset(victim.workload.key for victim in victims))
    return list(nomination.targets) if fits else None


def _with(issued: types.PreemptionIssued, **changes: object) -> types.PreemptionIssued:
    import msgspec

    return msgspec.structs.replace(issued, **changes)
