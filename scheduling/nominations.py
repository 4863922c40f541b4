"""Checking a nomination against the log before anybody is evicted.

Why this module exists: the admitter nominates (PreemptionRequired) on the state it saw; the
preemptor evicts on the state it folds, later. Whether the nominated targets still make the
preemptor fit, and which targets do otherwise, are Kueue's rules (pkg/scheduler/preemption/
preemption.go IssuePreemptions and workloadFits; SEMANTICS §7.8, SEMANTICS-ADVANCED A.11),
so they live here; the preemptor service turns the answer into decisions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kueue_es.events import models, types
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.scheduling.search import Search
from kueue_es.scheduling.tas import cycle as tas_cycle


def usage_of(nomination: types.PreemptionRequired) -> dict[quota.FR, int]:
    """The quota the nominated assignment asks, per (flavor, resource)."""
    usage: dict[quota.FR, int] = {}
    for psa in nomination.pod_set_assignments:
        for resource, amount in psa.resource_usage.items():
            fr = (psa.flavors[resource], resource)
            usage[fr] = usage.get(fr, 0) + amount
    return usage


def recomputed_targets(
    search: Search,
    wl: WorkloadState,
    cq: models.ClusterQueue,
    *,
    usage: dict[quota.FR, int],
    topology_fits: Callable[[frozenset[str]], bool] | None,
) -> list[types.PreemptionTarget]:
    """The targets that make ``wl`` fit on the current state when the nominated ones no longer
    do (the FRs short of quota now, else all it asks); [] when none do."""
    tree = search.tree
    need = frozenset(fr for fr, amount in usage.items() if amount > tree.available(cq.metadata.name, fr))
    preemptor = search.preemptor(wl, cq, usage, need or frozenset(usage))
    if topology_fits is not None:
        preemptor = dataclasses.replace(preemptor, topology_fits=topology_fits)
    return [
        types.PreemptionTarget(
            workload=t.candidate.workload.ref, cluster_queue=t.candidate.cluster_queue, reason=t.reason
        )
        for t in search.targets(preemptor)
    ]


def topology_check(
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


def still_valid(
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
        tree.remove_usage(victim.reservation.cluster_queue, quota.reservation_usage(victim.held or victim.reservation))
    fits = tree.fits(name, usage)
    for victim in victims:
        assert victim.reservation is not None
        tree.add_usage(victim.reservation.cluster_queue, quota.reservation_usage(victim.held or victim.reservation))
    if fits and topology_fits is not None:
        fits = topology_fits(frozenset(victim.workload.key for victim in victims))
    return list(nomination.targets) if fits else None
