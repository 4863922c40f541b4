"""Checking a nomination against the log before anybody is evicted.

Why this module exists: the admitter nominates (PreemptionRequired) on the state it saw; the
preemptor evicts on the state it folds, later. Kueue computes the targets and issues them on one
snapshot (pkg/scheduler/scheduler.go processEntry, preemption.go IssuePreemptions); here the log
may have moved in between (workloads finished, victims stopped), so the preemptor applies Kueue's
rules again to the state it evicts on: quota as Kueue's cache holds it (:func:`release_ended`),
no eviction when the workload fits (:func:`fits_without_preemption`), else the targets Kueue's
search finds now (:func:`recomputed_targets`; SEMANTICS §4.3.1, §6.4, §7, SEMANTICS-ADVANCED
A.11). The preemptor service turns the answer into decisions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence

from kueue_es.events import models, types
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.scheduling import flavors
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
    topology_frs: frozenset[quota.FR] = frozenset(),
) -> list[types.PreemptionTarget]:
    """The targets Kueue's search finds for ``wl`` asking ``usage`` on the current state (the FRs
    short of quota now and ``topology_frs``, else all it asks); [] when none make it fit.

    ``topology_frs``: the FRs of the nomination's TAS pod sets (:func:`topology_frs`), which need
    preemption even where their quota is free, as the topology may be fragmented (Kueue's
    flavorassigner.go assignFlavors, updateModeForTASRequests; preemptor logic 11)."""
    tree = search.tree
    short = frozenset(fr for fr, amount in usage.items() if amount > tree.available(cq.metadata.name, fr))
    need = short | topology_frs
    preemptor = search.preemptor(wl, cq, usage, need or frozenset(usage))
    if topology_fits is not None:
        preemptor = dataclasses.replace(preemptor, topology_fits=topology_fits)
    return [
        types.PreemptionTarget(
            workload=t.candidate.workload.ref, cluster_queue=t.candidate.cluster_queue, reason=t.reason
        )
        for t in search.targets(preemptor)
    ]


Waiting = tuple[WorkloadState, models.ClusterQueue, list[flavors.PodSetRequest]]
"""A workload waiting for the preemptions of the cycle that deferred it: its state, its ClusterQueue and
its pod set requests (:func:`targets_after`)."""


def targets_after(
    search: Search,
    wl: WorkloadState,
    cq: models.ClusterQueue,
    *,
    usage: dict[quota.FR, int],
    topology_fits: Callable[[frozenset[str]], bool] | None,
    gone: Collection[str],
    booked: Collection[tuple[str, dict[quota.FR, int]]],
    waiting: Sequence[Waiting] = (),
    topology_frs: frozenset[quota.FR] = frozenset(),
    fitting_topology: bool = False,
) -> list[types.PreemptionTarget] | None:
    """:func:`recomputed_targets` on the cluster as it will be once the workloads ``gone`` are
    evicted, with the quota ``booked`` (ClusterQueue, usage) taken: Kueue's scheduler.go
    updateAssignmentIfNeeded for a preempting workload whose targets overlap the victims of
    preemptions decided before it (SEMANTICS §4.5 step 1). None when the workload fits then
    without evicting anybody else (Kueue's DeferredFit); [] when no targets make it fit.

    ``waiting``: workloads the admitter left waiting for preemptions (DeferredFit,
    ``ClusterState.deferred``), in order; each that fits on that cluster takes its quota first,
    as Kueue's scheduler adds a DeferredFit entry's usage to the cycle's snapshot (processEntry,
    ``cq.AddUsage``), so the later entry it overlaps with is searched with that quota taken
    (preemptor logic 9). ``fitting_topology`` (preemptor logic 19): each also takes the TAS domains
    its placement on that cluster takes, as that usage is the entry's ``netUsage``, TAS included
    (scheduler.go netUsage, flavorassigner.go ComputeTASNetUsage); without it (18 and earlier) a later
    entry could be placed on the domains such a workload waits for. ``topology_frs`` as for
    :func:`recomputed_targets`. Everything taken is given back before returning."""
    tree = search.tree
    for cq_name, taken in booked:
        tree.add_usage(cq_name, taken)
    removed = frozenset(gone)
    fits = None if topology_fits is None else (lambda more: topology_fits(more | removed))
    claimed: list[tuple[str, dict[quota.FR, int]]] = []
    claimed_domains: list[tas_cycle.Usage] = []
    try:
        with search.without(sorted(gone)):
            for other, other_cq, requests in waiting:
                assignment, _ = search.assignments(other, requests, cq=other_cq)
                if assignment.mode == "Fit":
                    taken = assignment.usage()
                    tree.add_usage(other_cq.metadata.name, taken)
                    claimed.append((other_cq.metadata.name, taken))
                    part: tas_cycle.TASPart | None = assignment.tas
                    if fitting_topology and part is not None and part.placed is not None and part.placed.usage:
                        search.tas.add(part.placed.usage)
                        claimed_domains.append(part.placed.usage)
            if tree.fits(cq.metadata.name, usage) and (fits is None or fits(frozenset())):
                return None
            return recomputed_targets(search, wl, cq, usage=usage, topology_fits=fits, topology_frs=topology_frs)
    finally:
        for domains in reversed(claimed_domains):
            search.tas.remove(domains)
        for cq_name, taken in [*claimed, *booked]:
            tree.remove_usage(cq_name, taken)


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


def topology_frs(state: ClusterState, wl: WorkloadState, nomination: types.PreemptionRequired) -> frozenset[quota.FR]:
    """Every (flavor, resource) that the nomination's TAS pod sets (those
    :func:`~kueue_es.scheduling.tas.cycle.reserved_wanted` places) ask. Kueue marks all of them
    Preempt once a workload with a topology request needs preemption (flavorassigner.go
    assignFlavors, updateModeForTASRequests: the quota may be free but the nodes fragmented), so
    the target search takes candidates using any of them, not only those short of quota."""
    names = {w.request.name for w in tas_cycle.reserved_wanted(state, wl, nomination.pod_set_assignments)}
    return frozenset(
        (psa.flavors[resource], resource)
        for psa in nomination.pod_set_assignments
        if psa.name in names
        for resource in psa.resource_usage
    )


def release_ended(state: ClusterState, tree: quota.QuotaTree) -> frozenset[str]:
    """Take out of ``tree`` the quota of every workload that must give it back (finished,
    deleted, deactivated, or evicted with its job stopped: ``state.releasable``), and return
    their keys.

    The admitter logs their QuotaReleased in its next cycle, but Kueue's cache holds nothing for
    them by then: finishing or deactivating releases quota in the cache at once, and a victim's
    as soon as its job stops (pkg/cache/scheduler/cache.go; SEMANTICS §6.4, §7.8). The preemptor
    checks a nomination against this view, so it never evicts for quota that is already free.
    ``tree`` must be inside ``begin()``/``rollback()``."""
    released = []
    for key in state.releasable:
        wl = state.workloads[key]
        if wl.reservation is not None:
            tree.shift_reservation(
                wl.reservation.cluster_queue, quota.reservation_usage(wl.held or wl.reservation), sign=-1
            )
            released.append(key)
    return frozenset(released)


def fits_without_preemption(
    tree: quota.QuotaTree,
    nomination: types.PreemptionRequired,
    *,
    usage: dict[quota.FR, int],
    topology_fits: Callable[[frozenset[str]], bool] | None,
) -> bool:
    """Whether the nominated assignment fits as things stand, nobody evicted (quota and, for TAS
    pod sets, the placement). Kueue computes targets only for an assignment that needs
    preemption (scheduler.go getAssignments, SEMANTICS §4.3.1): one that fits is admitted."""
    if not tree.fits(nomination.cluster_queue, usage):
        return False
    return topology_fits is None or topology_fits(frozenset())
