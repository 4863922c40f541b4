"""The domain tree of one TAS flavor, with the counts a placement run works on.

Why this module exists: every phase of a placement (capacity counting, greedy and balanced
placement) reads and writes the same per-domain counts; this module holds that tree, built once
per topology, its counts, the exclusion statistics of the failure message, and the state one run
shares across its phases (:class:`RunState`). Kueue: pkg/cache/scheduler/tas_flavor_snapshot.go
(domain, domainState, cloneDomains, pruneDomainNodeBelowThreshold, tasExclusionStats),
resources.CountInWithLimitingResource, tas_balanced_placement.go calculateDomainsEntropy;
SEMANTICS-ADVANCED A.6.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kueue_es.events import models
from kueue_es.projections.topology import FlavorTopology, Leaf
from kueue_es.scheduling.tas.requests import TASGates, UsageToken

MAX_INT32 = 2**31 - 1
PHASE_ONE_ENTRIES = 64  # phase-1 results kept per tree (the cache is emptied when full)


@dataclass(eq=False)
class PhaseOne:
    """Phase-1 counts kept with a tree (per domain of ``RunState.domains``: pods, slices, pods
    with leader, slices with leader, leaders), for one token key at ``version``."""

    version: int
    counts: list[tuple[int, int, int, int, int]]
    limiting: dict[Domain, str]
    stats: Stats


class Domain:
    """A domain of the working tree with this run's counts (Kueue domain + domainState)."""

    __slots__ = (
        "id", "values", "level", "parent", "children", "leaf",
        "pod_count", "slice_count", "pcwl", "scwl", "leader_count", "idx", "affinity",
    )  # fmt: skip

    def __init__(self, id: str, values: tuple[str, ...], level: int) -> None:
        self.id, self.values, self.level = id, values, level
        self.parent: Domain | None = None
        self.children: list[Domain] = []
        self.leaf: Leaf | None = None  # the topology leaf, on the lowest level only
        self.pod_count = self.slice_count = self.pcwl = self.scwl = self.leader_count = 0
        self.idx = -1  # position in Skeleton.domains (clones keep their original's)
        # preferred node affinity score (A.3.4): the matched terms' weights, summed over the subtree;
        # set and read only by a run that prefers affinity (RunState.prefer_affinity)
        self.affinity = 0


def count_in(requests: Mapping[str, int], capacity: Mapping[str, int]) -> tuple[int, str]:
    """How many times ``requests`` fit in ``capacity`` and the limiting resource (ties: the
    alphabetically first), clamped at 0 (Kueue resources.CountInWithLimitingResource)."""
    best, limiting = None, ""
    for res in sorted(requests):
        value = requests[res]
        count = MAX_INT32 if value == 0 else max(0, min(capacity.get(res, 0) // value, MAX_INT32))
        if best is None or count < best:
            best, limiting = count, res
    return (MAX_INT32 if best is None else best), limiting


def clone(dom: Domain, parent: Domain | None) -> Domain:
    """A deep copy of ``dom``'s subtree with its counts, for speculative pruning (Kueue cloneDomains)."""
    copy = Domain(dom.id, dom.values, dom.level)
    copy.parent, copy.leaf = parent, dom.leaf
    copy.pod_count, copy.slice_count, copy.pcwl, copy.scwl = dom.pod_count, dom.slice_count, dom.pcwl, dom.scwl
    copy.leader_count, copy.idx, copy.affinity = dom.leader_count, dom.idx, dom.affinity
    copy.children = [clone(c, copy) for c in dom.children]
    return copy


def clear_counts(dom: Domain, *, leader_only: bool) -> None:
    if leader_only:
        dom.pcwl = dom.scwl = dom.leader_count = 0
    else:
        dom.pod_count = dom.slice_count = dom.pcwl = dom.scwl = dom.leader_count = 0
    for child in dom.children:
        clear_counts(child, leader_only=leader_only)


def prune_node(dom: Domain, threshold: int, leader: bool) -> None:
    """Kueue pruneDomainNodeBelowThreshold."""
    if dom.slice_count < threshold:
        clear_counts(dom, leader_only=False)
    elif leader and dom.leader_count > 0 and dom.scwl < threshold:
        clear_counts(dom, leader_only=True)


def entropy(domains: Sequence[Domain]) -> float:
    """Shannon entropy (bits) of the pod counts of ``domains`` (Kueue calculateDomainsEntropy)."""
    total = sum(d.pod_count for d in domains)
    if total <= 0:
        return 0.0
    return -sum(d.pod_count / total * math.log2(d.pod_count / total) for d in domains if d.pod_count > 0)


class Stats:
    """Why leaves were excluded, for the failure message (Kueue tasExclusionStats)."""

    def __init__(self) -> None:
        self.total = self.node_selector = self.affinity = 0
        self.taints: dict[str, int] = {}
        self.resources: dict[str, int] = {}

    def copy(self) -> Stats:
        """An independent copy."""
        out = Stats()
        out.total, out.node_selector, out.affinity = self.total, self.node_selector, self.affinity
        out.taints, out.resources = dict(self.taints), dict(self.resources)
        return out

    def suffix(self) -> str:
        reasons = []
        if self.node_selector:
            reasons.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            reasons.append(f"affinity: {self.affinity}")
        reasons += [f'taint "{t}": {n}' for t, n in self.taints.items()]
        reasons += [f'resource "{r}": {n}' for r, n in self.resources.items()]
        if not reasons:
            return ""
        return f". Total nodes: {self.total}; excluded: {', '.join(sorted(reasons))}"


def build_tree(topology: FlavorTopology) -> Skeleton:
    """The domain tree of ``topology``: domains per level (by ID), the leaves, the roots, and
    every domain (leaves first, then level by level upwards: children before parents)."""
    levels = topology.levels
    per_level: list[dict[str, Domain]] = [{} for _ in levels]
    leaves: list[Domain] = []
    last = len(levels) - 1
    for leaf in topology.leaves:
        dom = Domain(leaf.id, leaf.values, last)
        dom.leaf = leaf
        per_level[last][leaf.id] = dom
        leaves.append(dom)
        child = dom
        for level, pid, values in topology.ancestors[leaf.id]:
            parent = per_level[level].get(pid)
            created = parent is None
            if parent is None:
                parent = per_level[level][pid] = Domain(pid, values, level)
            child.parent = parent
            parent.children.append(child)
            if not created:
                break
            child = parent
    every = [dom for level_domains in reversed(per_level) for dom in level_domains.values()]
    for idx, dom in enumerate(every):
        dom.idx = idx
    return Skeleton(per_level, leaves, (list(per_level[0].values()) if levels else []), every)


class Skeleton:
    """A flavor tree's working domains (kept with its FlavorTopology) and which phase-1 entry
    their counts hold: ``live`` (None: unknown), except on the ``dirty`` domains that a run's
    phase 2 changed since."""

    def __init__(
        self,
        per_level: list[dict[str, Domain]],
        leaves: list[Domain],
        roots: list[Domain],
        domains: list[Domain],
    ) -> None:
        self.per_level, self.leaves, self.roots, self.domains = per_level, leaves, roots, domains
        self.live: PhaseOne | None = None
        self.dirty: list[Domain] = []


class RunState:
    """What one placement run (Kueue findTopologyAssignment) shares across its phases: its
    inputs, the flavor's working tree, and the parameters resolved from the request. Set by the
    run (:mod:`kueue_es.scheduling.tas.placement`), read by the phases (capacity counting,
    greedy and balanced placement), which are mixins over it."""

    topology: FlavorTopology
    tas_usage: Mapping[str, Mapping[str, int]]
    assumed: Mapping[str, Mapping[str, int]]
    simulate_empty: bool
    gates: TASGates
    token: UsageToken | None
    levels: tuple[str, ...]
    skeleton: Skeleton
    per_level: list[dict[str, Domain]]
    leaves: list[Domain]
    roots: list[Domain]
    domains: list[Domain]
    stats: Stats
    limiting: dict[Domain, str]  # leaves fitting no pod -> the limiting resource
    # resolved from the request by the run's place()
    count: int
    leader_total: int
    slice_size: int
    slice_level: int
    size_at_level: dict[int, int]
    layers: Sequence[models.PodsetSliceRequiredTopologyConstraint]
    required: bool
    unconstrained: bool
    lfc: bool  # LeastFreeCapacity (unconstrained under TASProfileMixed), else BestFit
    prefer_affinity: bool  # preferred node affinity scores order the domains (TASRespectNodeAffinityPreferred)
