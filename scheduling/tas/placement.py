"""Topology-Aware placement: the pure core deciding which domains a workload's pods go to.

One call places the TAS pod sets of one workload on one TAS flavor (SEMANTICS-ADVANCED A.6, A.7;
Kueue pkg/cache/scheduler/tas_flavor_snapshot.go FindTopologyAssignmentsForFlavor,
findTopologyAssignment, fillInCounts*, findLevelWithFitDomains, updateCountsToMinimumGeneric,
consumeWithLeadersGeneric, prioritizeLeaderDomain, sortedDomains*, buildAssignment, notFitMessage;
per-node filters from scheduling_simulator_default.go). Deterministic: every sort ends on the
domain's level values, so equal inputs give equal outputs, byte for byte.

Entry point: :func:`find_assignments` (``topology``, ``pod_sets``, TAS usage, ...) →
:class:`~kueue_es.scheduling.tas.requests.Placement` or
:class:`~kueue_es.scheduling.tas.requests.PlacementFailure` (Kueue's message, and whether it would
fit on an empty tree, A.5). One run, along Kueue's own seams:

- the request and the result types, and the usage of an assignment (A.2.2, A.5.8):
  :mod:`kueue_es.scheduling.tas.requests`;
- the domain tree and its counts: :mod:`kueue_es.scheduling.tas.domains`;
- phase 1, capacity counting with the node filters (A.3, A.6.2): :mod:`kueue_es.scheduling.tas.capacity`;
- phase 2, the greedy choice of domains and the descent (A.6.3-A.6.5): :mod:`kueue_es.scheduling.tas.greedy`;
- balanced placement (A.6.9, alpha gate TASBalancedPlacement, off by default), spreading a
  preferred request evenly over the fewest domains: :mod:`kueue_es.scheduling.tas.balanced`;
- here: resolving the topology request (levels, slice layers), groups of pod sets placed in
  order (A.7), and building the assignment (A.6.10).

Node replacement (A.13) calls :func:`find_assignments` on the tree limited to the required
domain. A replacement elastic slice keeps the replaced slice's pods where they are (A.14,
:func:`_elastic`). Under the alpha gate TASRespectNodeAffinityPreferred (off by default) the
workers' preferred node affinity scores order the domains before their capacity (A.3.4).

Speed (Kueue's TASCacheNodeMatchResults / TASCachingRemainingResources / TASCacheTopologyTree,
caches without a semantic effect): the domain tree is built once per tree object; with a
:class:`~kueue_es.scheduling.tas.requests.UsageToken` the phase-1 counts (A.6.2) are kept with the
tree per token key and inputs, and a later call updates only the leaves whose usage changed (and
their ancestors) and restores only the domains the previous run's phase 2 changed. Results are
identical with or without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from kueue_es.events.tas import Assignment, DomainAssignment, domain_id, slice_layers
from kueue_es.projections.topology import FlavorTopology
from kueue_es.scheduling.tas.balanced import Balanced
from kueue_es.scheduling.tas.domains import Domain, Skeleton, Stats, build_tree
from kueue_es.scheduling.tas.requests import (
    DEFAULT_GATES,
    Placement,
    PlacementFailure,
    PodSetPlacementRequest,
    Requests,
    TASGates,
    UsageToken,
    add_usage,
    assignment_usage,
)


def find_assignments(
    topology: FlavorTopology,
    pod_sets: Sequence[PodSetPlacementRequest],
    *,
    tas_usage: Mapping[str, Mapping[str, int]] | None = None,
    assumed_usage: Mapping[str, Mapping[str, int]] | None = None,
    simulate_empty: bool = False,
    check_empty: bool = True,
    gates: TASGates = DEFAULT_GATES,
    usage_token: UsageToken | None = None,
) -> Placement | PlacementFailure:
    """Place ``pod_sets`` (all assigned to this TAS flavor, in pod-set order) on ``topology``.

    ``tas_usage``: per leaf ID, the TAS usage of workloads holding quota with an assignment on
    this flavor (for overlapping flavors, A.2.4, the sum over the flavors sharing the hostnames).
    ``assumed_usage``: usage already taken earlier in this placement run (other flavors' pod sets
    of the same workload on shared hostnames). ``simulate_empty`` ignores ``tas_usage`` (A.5.6).
    Groups (same ``podSetGroupName``, else each pod set alone) are placed in order, each seeing
    the previous groups' usage (A.7); the first failing group fails the call. On failure with
    ``check_empty`` the same request is retried on an empty tree to fill ``fits_when_empty``.
    Pod sets with count 0 get no assignment (A.5.3).

    ``usage_token``: names the contents of ``tas_usage`` (:class:`UsageToken`). With it, and
    no ``assumed_usage``, the per-domain capacities of phase 1 (A.6.2) are kept with the tree
    and reused by later calls with the same token key and the same per-pod requests, filters
    and slice parameters (updated on the leaves that changed since); the result is the same
    as without it.
    """
    token = usage_token if not assumed_usage else None
    result = _find(topology, pod_sets, tas_usage, assumed_usage, simulate_empty, gates, token)
    if isinstance(result, PlacementFailure) and check_empty and not simulate_empty:
        empty = _find(topology, pod_sets, tas_usage, assumed_usage, True, gates, token)
        return PlacementFailure(
            pod_set=result.pod_set, message=result.message, fits_when_empty=isinstance(empty, Placement)
        )
    return result


def _find(
    topology: FlavorTopology,
    pod_sets: Sequence[PodSetPlacementRequest],
    tas_usage: Mapping[str, Mapping[str, int]] | None,
    assumed_usage: Mapping[str, Mapping[str, int]] | None,
    simulate_empty: bool,
    gates: TASGates,
    token: UsageToken | None = None,
) -> Placement | PlacementFailure:
    assumed: dict[str, Requests] = {}
    add_usage(assumed, assumed_usage or {})
    added: dict[str, Requests] = {}
    groups: dict[str, list[PodSetPlacementRequest]] = {}
    for index, ps in enumerate(p for p in pod_sets if p.count > 0):
        group = ps.topology_request.pod_set_group_name if ps.topology_request else None
        groups.setdefault(group if group is not None else f"#{index}", []).append(ps)
    assignments: dict[str, Assignment] = {}
    for members in groups.values():
        workers, leader = members[0], None
        if len(members) > 1:
            leader = members[1]
            if leader.count > workers.count:
                workers, leader = members[1], members[0]
        # Only a Workload object can have a group of more than 2 pod sets (the job webhooks refuse
        # it, validate_pod_set_groups): as in Kueue (findLeaderAndWorkers), the first two are placed
        # and the others get no assignment.
        placed = [ps for ps in (workers, leader) if ps is not None]
        elastic = _elastic(topology, workers, leader, tas_usage or {}, assumed, simulate_empty, gates)
        if elastic is not None:
            if isinstance(elastic, str):
                return PlacementFailure(pod_set=workers.name, message=elastic)
            for ps in placed:  # ``assumed`` already holds them (:func:`_elastic`)
                add_usage(added, assignment_usage(elastic[ps.name], ps.requests))
            assignments.update(elastic)
            continue
        # Only the first group sees no usage of this call: later ones see the earlier groups'.
        run = _Run(topology, tas_usage or {}, assumed, simulate_empty, gates, token if not assignments else None)
        found = run.place(workers, leader)
        if isinstance(found, str):
            return PlacementFailure(pod_set=members[0].name, message=found)
        for ps in placed:
            usage = assignment_usage(found[ps.name], ps.requests)
            add_usage(assumed, usage)
            add_usage(added, usage)
        assignments.update(found)
    return Placement(assignments=assignments, usage=added)


def _elastic(
    topology: FlavorTopology,
    workers: PodSetPlacementRequest,
    leader: PodSetPlacementRequest | None,
    tas_usage: Mapping[str, Mapping[str, int]],
    assumed: dict[str, Requests],
    simulate_empty: bool,
    gates: TASGates,
) -> dict[str, Assignment] | str | None:
    """A group of a replacement elastic slice placed around the pods of the slice it replaces
    (A.14; Kueue tas_elastic_workloads.go handleElasticWorkload, gate
    ElasticJobsViaWorkloadSlicesWithTAS): None (placed afresh by the caller) when the workers have
    no ``previous`` assignment or a domain of it (or of the leader's) is no longer a leaf of the
    tree (a node gone, NotReady or unschedulable). Otherwise, by the workers' count against the
    previous one: more ⇒ the previous pods (and the leader's) are charged to ``assumed`` and only
    the difference is placed, then merged into the previous assignment in level-value order
    (a failure returns the placement's message); fewer ⇒ the previous assignment cut from its
    end; equal ⇒ the previous assignment. The leader keeps its previous assignment (placed with
    the difference when it has none). Adds the group's usage to ``assumed``.

    As in Kueue, ``tas_usage`` still counts the replaced slice (it holds quota until its
    replacement is admitted), so during the nomination its pods are charged twice in their domains.
    Ours: a leader without a previous assignment outside a scale-up is placed afresh with the
    workers (Kueue would give it no assignment)."""
    previous = workers.previous
    if previous is None:
        return None
    leader_previous = leader.previous if leader is not None else None
    leaves = topology.leaf_by_id
    for prior in (previous, leader_previous):
        if prior is not None and any(domain_id(d.values) not in leaves for d in prior.domains):
            return None  # stale: a fresh placement (IsTopologyAssignmentStale)
    out: dict[str, Assignment] = {}
    if workers.count > previous.pod_count:
        add_usage(assumed, assignment_usage(previous, workers.requests))
        placing_leader = leader
        if leader is not None and leader_previous is not None:
            add_usage(assumed, assignment_usage(leader_previous, leader.requests))
            placing_leader = None
        delta = replace(workers, count=workers.count - previous.pod_count, previous=None)
        if placing_leader is not None:
            placing_leader = replace(placing_leader, previous=None)
        run = _Run(topology, tas_usage, assumed, simulate_empty, gates, None)
        found = run.place(delta, placing_leader)
        if isinstance(found, str):
            return found
        out[workers.name] = _merged(topology, found[workers.name], previous)
        add_usage(assumed, assignment_usage(found[workers.name], workers.requests))
        if leader is not None:
            if leader_previous is not None:
                out[leader.name] = leader_previous
            else:
                out[leader.name] = found[leader.name]
                add_usage(assumed, assignment_usage(found[leader.name], leader.requests))
        return out
    if leader is not None and leader_previous is None:
        return None
    kept = _truncated(previous, workers.count) if workers.count < previous.pod_count else previous
    out[workers.name] = kept
    add_usage(assumed, assignment_usage(kept, workers.requests))
    if leader is not None and leader_previous is not None:
        out[leader.name] = leader_previous
        add_usage(assumed, assignment_usage(leader_previous, leader.requests))
    return out


def _merged(topology: FlavorTopology, first: Assignment, second: Assignment) -> Assignment:
    """Both assignments' domains in one, ordered by their leaves' level values, equal domains
    summed (Kueue mergeTopologyAssignments)."""
    leaves = topology.leaf_by_id
    counts: dict[str, int] = {}
    values: dict[str, tuple[str, ...]] = {}
    for d in (*first.domains, *second.domains):
        key = domain_id(d.values)
        counts[key] = counts.get(key, 0) + d.count
        values[key] = d.values
    order = sorted(counts, key=lambda k: domain_id(leaves[k].values))
    return Assignment(levels=first.levels, domains=tuple(DomainAssignment(values[k], counts[k]) for k in order))


def _truncated(assignment: Assignment, count: int) -> Assignment:
    """``assignment`` holding only its first ``count`` pods, domains dropped from the end
    (Kueue utiltas.TruncateAssignment)."""
    kept: list[DomainAssignment] = []
    left = count
    for d in assignment.domains:
        if left <= 0:
            break
        kept.append(d if d.count <= left else DomainAssignment(d.values, left))
        left -= d.count
    return Assignment(levels=assignment.levels, domains=tuple(kept))


class _Run(Balanced):
    """One findTopologyAssignment run over the flavor's domain tree (its counts reset): the
    request resolved, then phase 1 (:mod:`~kueue_es.scheduling.tas.capacity`), phase 2
    (:mod:`~kueue_es.scheduling.tas.balanced` or :mod:`~kueue_es.scheduling.tas.greedy`) and the
    assignment built."""

    def __init__(
        self,
        topology: FlavorTopology,
        tas_usage: Mapping[str, Mapping[str, int]],
        assumed: Mapping[str, Mapping[str, int]],
        simulate_empty: bool,
        gates: TASGates,
        token: UsageToken | None = None,
    ) -> None:
        self.topology = topology
        self.tas_usage, self.assumed, self.simulate_empty, self.gates = tas_usage, assumed, simulate_empty, gates
        self.token = token
        self.levels = topology.levels
        # The domain tree depends on the topology only: built once per FlavorTopology (kept in its
        # instance dict; the object is immutable) and its counts reset for every run.
        # Phase 1 (:meth:`_phase_one`) sets every domain's counts before anything reads them.
        skeleton = topology.__dict__.get("_placement_tree")
        if skeleton is None:
            skeleton = topology.__dict__["_placement_tree"] = build_tree(topology)
        self.skeleton: Skeleton = skeleton
        self.per_level, self.leaves, self.roots, self.domains = (
            skeleton.per_level, skeleton.leaves, skeleton.roots, skeleton.domains
        )  # fmt: skip
        self.stats = Stats()
        self.limiting: dict[Domain, str] = {}  # leaves fitting no pod -> the limiting resource

    def place(
        self, workers: PodSetPlacementRequest, leader: PodSetPlacementRequest | None
    ) -> dict[str, Assignment] | str:
        """Kueue findTopologyAssignment: the assignments of workers (and leader), or a reason."""
        tr = workers.topology_request
        requests: Requests = {**workers.requests, "pods": workers.requests.get("pods", 0) + 1}
        leader_requests = (
            {**leader.requests, "pods": leader.requests.get("pods", 0) + 1} if leader is not None else None
        )
        self.count = workers.count
        self.leader_total = 1 if leader is not None else 0
        node_selector = dict(workers.node_selector)
        tolerations = list(workers.tolerations)
        for update in workers.pod_set_updates:
            for label, value in update.node_selector.items():
                if node_selector.get(label, value) != value:
                    return (
                        f"invalid podSetUpdate for PodSet {workers.name}, error: conflict for nodeSelector "
                        f"{label}: {node_selector[label]} != {value}"
                    )
                node_selector[label] = value
            tolerations += update.tolerations
        layers = slice_layers(tr)
        self.slice_size = 1
        if layers:
            if layers[0].size <= 0:
                return "slice topology requested, but slice size not provided"
            self.slice_size = layers[0].size
        slice_only = tr is not None and tr.required is None and tr.preferred is None and bool(layers)
        self.required = tr is not None and tr.required is not None
        self.unconstrained = bool(tr is not None and tr.unconstrained) or workers.implied or slice_only
        self.lfc = self.unconstrained and self.gates.profile_mixed
        key: str | None = None
        if tr is not None and tr.required is not None:
            key = tr.required
        elif tr is not None and tr.preferred is not None:
            key = tr.preferred
        elif slice_only:
            key = self.levels[0]
        elif (tr is not None and tr.unconstrained) or workers.implied:
            key = self.levels[-1]
        if key is None:
            return "topology level not specified"
        if key not in self.levels:
            return f"no requested topology level: {key}"
        requested_level = self.levels.index(key)
        slice_key = layers[0].topology if layers else self.levels[-1]
        if slice_key not in self.levels:
            return f"no requested topology level for slices: {slice_key}"
        self.slice_level = self.levels.index(slice_key)
        if requested_level > self.slice_level:
            return f"podset slice topology {slice_key} is above the podset topology {key}"
        self.size_at_level: dict[int, int] = {}
        prev_size, prev_level = self.slice_size, self.slice_level
        for layer in layers[1:]:
            if layer.topology not in self.levels:
                return f"no requested topology level for additional slice layer: {layer.topology}"
            inner = self.levels.index(layer.topology)
            if inner <= prev_level:
                return (
                    f"additional slice layer topology {layer.topology} must be at a lower level than "
                    f"{self.levels[prev_level]}"
                )
            if prev_size % layer.size:
                return f"additional slice layer size {layer.size} must evenly divide parent layer size {prev_size}"
            for level in range(prev_level + 1, inner + 1):
                self.size_at_level[level] = layer.size
            prev_size, prev_level = layer.size, inner
        self.layers = layers if self.size_at_level else []

        self._phase_one(requests, leader_requests, node_selector, tolerations, workers.required_node_affinity)
        # Without preferred terms every score is 0 and the gate changes no order (Kueue sorts by
        # the score whenever the gate is on).
        self.prefer_affinity = self.gates.preferred_affinity and bool(workers.preferred_node_affinity)
        if self.prefer_affinity:
            self._fill_affinity(
                node_selector, tolerations, workers.required_node_affinity, workers.preferred_node_affinity
            )

        balanced = None
        if self.gates.balanced_placement and not self.required and not self.unconstrained:
            balanced = self._balanced(requested_level)
        if balanced is not None:
            fit_level, chosen = balanced
        else:
            fit = self._level_with_fit_domains(requested_level)
            if isinstance(fit, str):
                return fit
            fit_level, chosen = fit
        chosen = self._update_counts(chosen, self.count, self.leader_total, self.slice_size, True)
        level = fit_level
        while balanced is None and level < min(len(self.levels) - 1, self.slice_level):
            lower = self._sorted([c for d in chosen for c in d.children])
            chosen = self._update_counts(lower, self.count, self.leader_total, self.slice_size, True)
            level += 1
        while level < len(self.levels) - 1:
            # above the slice level only after a balanced placement (its chosen level may be there)
            size = self.slice_size if level < self.slice_level else self.size_at_level.get(level + 1, 1)
            next_chosen: list[Domain] = []
            for dom in chosen:
                lower = self._sorted(dom.children)
                if size > 1:
                    self.skeleton.dirty.extend(lower)
                    for child in lower:
                        child.slice_count = child.pod_count // size
                        child.scwl = child.pcwl // size
                next_chosen += self._update_counts(lower, dom.pod_count, dom.leader_count, size, size > 1)
            chosen = next_chosen
            level += 1

        out: dict[str, Assignment] = {}
        if leader is not None:
            out[leader.name] = self._build([(d, d.leader_count) for d in chosen if d.leader_count > 0])
            chosen = [d for d in chosen if d.pod_count > 0]
        out[workers.name] = self._build([(d, d.pod_count) for d in chosen])
        return out

    def _build(self, placed: list[tuple[Domain, int]]) -> Assignment:
        """Leaves with pods, sorted by level values; hostname only when it is the lowest level
        (A.6.10, Kueue buildAssignment)."""
        first = len(self.levels) - 1 if self.topology.lowest_is_hostname else 0
        domains = tuple(
            DomainAssignment(values=d.values[first:], count=n)
            for d, n in sorted(placed, key=lambda p: p[0].values)
            if n > 0
        )
        return Assignment(levels=tuple(self.levels[first:]), domains=domains)
