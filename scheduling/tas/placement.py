"""Topology-Aware placement: the pure core deciding which domains a workload's pods go to.

One call places the TAS pod sets of one workload on one TAS flavor (SEMANTICS-ADVANCED A.6, A.7;
Kueue pkg/cache/scheduler/tas_flavor_snapshot.go FindTopologyAssignmentsForFlavor,
findTopologyAssignment, fillInCounts*, findLevelWithFitDomains, updateCountsToMinimumGeneric,
consumeWithLeadersGeneric, prioritizeLeaderDomain, sortedDomains*, buildAssignment, notFitMessage;
per-node filters from scheduling_simulator_default.go). Deterministic: every sort ends on the
domain's level values, so equal inputs give equal outputs, byte for byte.

Entry points:

- :func:`find_assignments` (``topology``, ``pod_sets``, TAS usage, ...) → :class:`Placement` or
  :class:`PlacementFailure` (Kueue's message, and whether it would fit on an empty tree, A.5).
- :func:`assignment_usage`: the TAS usage an assignment takes per leaf (A.2.2, A.5.8).

Balanced placement (A.6.9, alpha gate TASBalancedPlacement, off by default) spreads a preferred
request evenly over the fewest domains (Kueue tas_balanced_placement.go). Node replacement
(A.13) calls :func:`find_assignments` on the tree limited to the required domain
(:mod:`kueue_es.services.tas_placer.core`). Not done: preferred node affinity scoring (A.3.4, alpha off),
elastic slices (A.14).

Speed (Kueue's TASCacheNodeMatchResults / TASCachingRemainingResources / TASCacheTopologyTree,
caches without a semantic effect): the domain tree is built once per tree object; with a
:class:`UsageToken` the phase-1 counts (A.6.2) are kept with the tree per token key and inputs,
and a later call updates only the leaves whose usage changed (and their ancestors) and restores
only the domains the previous run's phase 2 changed. Results are identical with or without it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kueue_es.events import models
from kueue_es.events.tas import Assignment, DomainAssignment, domain_id, slice_layers
from kueue_es.projections.topology import FlavorTopology

Requests = dict[str, int]
_MAX_INT32 = 2**31 - 1
_PHASE_ONE_ENTRIES = 64  # phase-1 results kept per tree (the cache is emptied when full)


@dataclass(frozen=True)
class TASGates:
    """The feature gates that change placement (A.0), with Kueue's defaults."""

    profile_mixed: bool = True  # TASProfileMixed: unconstrained uses LeastFreeCapacity
    balanced_placement: bool = False  # TASBalancedPlacement (alpha): balanced preferred (A.6.9)

    @classmethod
    def from_feature_gates(cls, gates: Mapping[str, bool]) -> TASGates:
        """The placement gates from a Configuration's ``featureGates`` (missing ⇒ Kueue default)."""
        return cls(
            profile_mixed=gates.get("TASProfileMixed", True),
            balanced_placement=gates.get("TASBalancedPlacement", False),
        )


@dataclass(frozen=True, eq=False)
class UsageToken:
    """Names the contents of a ``tas_usage`` mapping that changes in steps (one admission
    cycle's, :class:`kueue_es.scheduling.tas.cycle.CycleTopology`): equal ``key`` and ``version``
    ⇒ equal contents. ``changes[v - 1]`` holds the leaf IDs whose usage changed from version
    ``v - 1`` to ``v`` (a superset is fine; the sequence may grow later, never change)."""

    key: Hashable
    version: int = 0
    changes: Sequence[Collection[str]] = ()


@dataclass(eq=False)
class _PhaseOne:
    """Phase-1 counts kept with a tree (per domain of ``_Run.domains``: pods, slices, pods
    with leader, slices with leader, leaders), for one token key at ``version``."""

    version: int
    counts: list[tuple[int, int, int, int, int]]
    limiting: dict[_Domain, str]
    stats: _Stats


@dataclass(frozen=True)
class PodSetPlacementRequest:
    """One pod set to place: ``count`` pods each requesting ``requests`` (raw pod-template
    requests, integer amounts, without ``pods``; A.2.2), its topology request (None with
    ``implied`` for a pod set of a TAS-only ClusterQueue without a request, A.4.3), its template's
    node selector / tolerations / required node affinity, and the podSetUpdates of Ready
    admission checks (A.3)."""

    name: str
    count: int
    requests: Mapping[str, int]
    topology_request: models.PodSetTopologyRequest | None = None
    implied: bool = False
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[models.Toleration, ...] = ()
    required_node_affinity: tuple[models.NodeSelectorTerm, ...] = ()
    pod_set_updates: tuple[models.PodSetUpdate, ...] = ()

    @classmethod
    def from_pod_set(
        cls,
        pod_set: models.PodSet,
        *,
        count: int | None = None,
        implied: bool = False,
        pod_set_updates: Sequence[models.PodSetUpdate] = (),
    ) -> PodSetPlacementRequest:
        """The request for a Workload pod set, with ``count`` (default the pod set's; partial
        admission passes a smaller one) and the Ready checks' updates for this pod set."""
        return cls(
            name=pod_set.name,
            count=pod_set.count if count is None else count,
            requests=dict(pod_set.requests),
            topology_request=pod_set.topology_request,
            implied=implied,
            node_selector=dict(pod_set.node_selector),
            tolerations=tuple(pod_set.tolerations),
            required_node_affinity=tuple(pod_set.required_node_affinity),
            pod_set_updates=tuple(u for u in pod_set_updates if u.name == pod_set.name),
        )


def request_key(request: PodSetPlacementRequest) -> Hashable:
    """A hashable equal for equal requests (the memo key of a placement's inputs)."""
    return (
        request.name,
        request.count,
        request.implied,
        tuple(sorted(request.requests.items())),
        repr(request.topology_request),
        tuple(sorted(request.node_selector.items())),
        repr(request.tolerations),
        repr(request.required_node_affinity),
        repr(request.pod_set_updates),
    )


@dataclass(frozen=True)
class Placement:
    """A successful placement: per pod set name its assignment, and the TAS usage it adds per
    leaf ID (sum of :func:`assignment_usage` over the pod sets)."""

    assignments: dict[str, Assignment]
    usage: dict[str, Requests]


@dataclass(frozen=True)
class PlacementFailure:
    """Placement failed for ``pod_set`` (the first pod set of the failing group) with Kueue's
    ``message`` (e.g. ``topology "default" allows to fit only 3 out of 4 pod(s)``).
    ``fits_when_empty``: whether the same request fits with all TAS usage removed (A.5.6: True ⇒
    Preempt, False ⇒ NoFit / TopologyPlacementFailed); None when the run was already on an empty
    tree or the empty check was not asked for."""

    pod_set: str
    message: str
    fits_when_empty: bool | None = None


def assignment_usage(assignment: Assignment, requests: Mapping[str, int]) -> dict[str, Requests]:
    """TAS usage of ``assignment`` per leaf ID: per-pod ``requests`` × count plus ``pods: count``
    (Kueue utiltas.ComputeUsagePerDomain). Zero requests are left out."""
    usage: dict[str, Requests] = {}
    for domain in assignment.domains:
        bucket = usage.setdefault(domain_id(domain.values), {})
        for res, amount in requests.items():
            if amount and res != "pods":
                bucket[res] = bucket.get(res, 0) + amount * domain.count
        bucket["pods"] = bucket.get("pods", 0) + domain.count
    return usage


def add_usage(into: dict[str, Requests], extra: Mapping[str, Mapping[str, int]]) -> None:
    """Add per-leaf usage ``extra`` into ``into`` in place."""
    for leaf, requests in extra.items():
        bucket = into.setdefault(leaf, {})
        for res, amount in requests.items():
            bucket[res] = bucket.get(res, 0) + amount


def find_assignments(
    topology: FlavorTopology,
    pod_sets: Sequence[PodSetPlacementRequest],
    *,
    tas_usage: Mapping[str, Mapping[str, int]] | None = None,
    assumed_usage: Mapping[str, Mapping[str, int]] | None = None,
    simulate_empty: bool = False,
    check_empty: bool = True,
    gates: TASGates = TASGates(),
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
        # Only the first group sees no usage of this call: later ones see the earlier groups'.
        run = _Run(topology, tas_usage or {}, assumed, simulate_empty, gates, token if not assignments else None)
        found = run.place(workers, leader)
        if isinstance(found, str):
            return PlacementFailure(pod_set=members[0].name, message=found)
        for ps in members:
            usage = assignment_usage(found[ps.name], ps.requests)
            add_usage(assumed, usage)
            add_usage(added, usage)
        assignments.update(found)
    return Placement(assignments=assignments, usage=added)


# --- the domain tree and one run's state -------------------------------------------------------


class _Domain:
    """A domain of the working tree with this run's counts (Kueue domain + domainState)."""

    __slots__ = (
        "id", "values", "level", "parent", "children", "leaf",
        "pod_count", "slice_count", "pcwl", "scwl", "leader_count", "idx",
    )  # fmt: skip

    def __init__(self, id: str, values: tuple[str, ...], level: int) -> None:
        self.id, self.values, self.level = id, values, level
        self.parent: _Domain | None = None
        self.children: list[_Domain] = []
        self.leaf = None
        self.pod_count = self.slice_count = self.pcwl = self.scwl = self.leader_count = 0
        self.idx = -1  # position in _Skeleton.domains (clones keep their original's)


def _count_in(requests: Mapping[str, int], capacity: Mapping[str, int]) -> tuple[int, str]:
    """How many times ``requests`` fit in ``capacity`` and the limiting resource (ties: the
    alphabetically first), clamped at 0 (Kueue resources.CountInWithLimitingResource)."""
    best, limiting = None, ""
    for res in sorted(requests):
        value = requests[res]
        count = _MAX_INT32 if value == 0 else max(0, min(capacity.get(res, 0) // value, _MAX_INT32))
        if best is None or count < best:
            best, limiting = count, res
    return (_MAX_INT32 if best is None else best), limiting


def _tolerates(toleration: models.Toleration, taint: models.Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == taint.value


def _taint_string(taint: models.Taint) -> str:
    head = f"{taint.key}={taint.value}" if taint.value else taint.key
    return f"{head}:{taint.effect}"


def _matches_term(term: models.NodeSelectorTerm, labels: Mapping[str, str]) -> bool:
    if not term.match_expressions:
        return False
    for expr in term.match_expressions:
        value = labels.get(expr.key)
        match expr.operator:
            case "In":
                ok = value is not None and value in expr.values
            case "NotIn":
                ok = value is None or value not in expr.values
            case "Exists":
                ok = value is not None
            case "DoesNotExist":
                ok = value is None
            case "Gt" | "Lt":
                try:
                    left, right = int(value or ""), int(expr.values[0])
                except (ValueError, IndexError):
                    ok = False
                else:
                    ok = left > right if expr.operator == "Gt" else left < right
        if not ok:
            return False
    return True


def _clone(dom: _Domain, parent: _Domain | None) -> _Domain:
    """A deep copy of ``dom``'s subtree with its counts, for speculative pruning (Kueue cloneDomains)."""
    copy = _Domain(dom.id, dom.values, dom.level)
    copy.parent, copy.leaf = parent, dom.leaf
    copy.pod_count, copy.slice_count, copy.pcwl, copy.scwl = dom.pod_count, dom.slice_count, dom.pcwl, dom.scwl
    copy.leader_count, copy.idx = dom.leader_count, dom.idx
    copy.children = [_clone(c, copy) for c in dom.children]
    return copy


def _clear(dom: _Domain, *, leader_only: bool) -> None:
    if leader_only:
        dom.pcwl = dom.scwl = dom.leader_count = 0
    else:
        dom.pod_count = dom.slice_count = dom.pcwl = dom.scwl = dom.leader_count = 0
    for child in dom.children:
        _clear(child, leader_only=leader_only)


def _prune_node(dom: _Domain, threshold: int, leader: bool) -> None:
    """Kueue pruneDomainNodeBelowThreshold."""
    if dom.slice_count < threshold:
        _clear(dom, leader_only=False)
    elif leader and dom.leader_count > 0 and dom.scwl < threshold:
        _clear(dom, leader_only=True)


def _entropy(domains: Sequence[_Domain]) -> float:
    """Shannon entropy (bits) of the pod counts of ``domains`` (Kueue calculateDomainsEntropy)."""
    total = sum(d.pod_count for d in domains)
    if total <= 0:
        return 0.0
    return -sum(d.pod_count / total * math.log2(d.pod_count / total) for d in domains if d.pod_count > 0)


class _Stats:
    """Why leaves were excluded, for the failure message (Kueue tasExclusionStats)."""

    def __init__(self) -> None:
        self.total = self.node_selector = self.affinity = 0
        self.taints: dict[str, int] = {}
        self.resources: dict[str, int] = {}

    def copy(self) -> _Stats:
        """An independent copy."""
        out = _Stats()
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


def _tree(topology: FlavorTopology) -> _Skeleton:
    """The domain tree of ``topology``: domains per level (by ID), the leaves, the roots, and
    every domain (leaves first, then level by level upwards: children before parents)."""
    levels = topology.levels
    per_level: list[dict[str, _Domain]] = [{} for _ in levels]
    leaves: list[_Domain] = []
    last = len(levels) - 1
    for leaf in topology.leaves:
        dom = _Domain(leaf.id, leaf.values, last)
        dom.leaf = leaf
        per_level[last][leaf.id] = dom
        leaves.append(dom)
        child = dom
        for level, pid, values in topology.ancestors[leaf.id]:
            parent = per_level[level].get(pid)
            created = parent is None
            if parent is None:
                parent = per_level[level][pid] = _Domain(pid, values, level)
            child.parent = parent
            parent.children.append(child)
            if not created:
                break
            child = parent
    every = [dom for level_domains in reversed(per_level) for dom in level_domains.values()]
    for idx, dom in enumerate(every):
        dom.idx = idx
    return _Skeleton(per_level, leaves, (list(per_level[0].values()) if levels else []), every)


class _Skeleton:
    """A flavor tree's working domains (kept with its FlavorTopology) and which phase-1 entry
    their counts hold: ``live`` (None: unknown), except on the ``dirty`` domains that a run's
    phase 2 changed since."""

    def __init__(
        self,
        per_level: list[dict[str, _Domain]],
        leaves: list[_Domain],
        roots: list[_Domain],
        domains: list[_Domain],
    ) -> None:
        self.per_level, self.leaves, self.roots, self.domains = per_level, leaves, roots, domains
        self.live: _PhaseOne | None = None
        self.dirty: list[_Domain] = []


class _Run:
    """One findTopologyAssignment run over the flavor's domain tree (its counts reset)."""

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
            skeleton = topology.__dict__["_placement_tree"] = _tree(topology)
        self.skeleton: _Skeleton = skeleton
        self.per_level, self.leaves, self.roots, self.domains = (
            skeleton.per_level, skeleton.leaves, skeleton.roots, skeleton.domains
        )  # fmt: skip
        self.stats = _Stats()
        self.limiting: dict[_Domain, str] = {}  # leaves fitting no pod -> the limiting resource

    # -- parameters and counts --

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
            for key, value in update.node_selector.items():
                if node_selector.get(key, value) != value:
                    return (
                        f"invalid podSetUpdate for PodSet {workers.name}, error: conflict for nodeSelector "
                        f"{key}: {node_selector[key]} != {value}"
                    )
                node_selector[key] = value
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
            next_chosen: list[_Domain] = []
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

    def _phase_one(
        self,
        requests: Requests,
        leader_requests: Requests | None,
        node_selector: Mapping[str, str],
        tolerations: Sequence[models.Toleration],
        affinity: Sequence[models.NodeSelectorTerm],
    ) -> None:
        """Phase 1 (A.6.2): every domain's counts. With a usage token they come from the cache
        kept with the tree when a run with the same token key and the same inputs filled them:
        as they are for the same version, else (no leader, one slice layer) updated on the
        leaves the later versions changed and on their ancestors only. The tree's domains keep
        the last entry's counts: a run restores only what the previous run's phase 2 changed."""
        token, skeleton = self.token, self.skeleton
        if token is None:
            skeleton.live = None
            self._fill(requests, leader_requests, node_selector, tolerations, affinity)
            return
        key = (
            token.key,
            self.simulate_empty,
            tuple(sorted(requests.items())),
            tuple(sorted(leader_requests.items())) if leader_requests is not None else None,
            tuple(sorted(node_selector.items())),
            repr(tolerations),
            repr(affinity),
            self.slice_level,
            self.slice_size,
            tuple(sorted(self.size_at_level.items())),
        )
        cache: dict = self.topology.__dict__.setdefault("_phase_one", {})
        entry: _PhaseOne | None = cache.get(key)
        plain = not self.leader_total and not self.size_at_level
        changed: set[str] | None = None
        if entry is not None and entry.version != token.version:
            if plain and entry.version < token.version <= len(token.changes):
                changed = set()
                for leaves in token.changes[entry.version : token.version]:
                    changed.update(leaves)
                if len(changed) * 4 > len(self.leaves):
                    changed = None  # most leaves changed: fill afresh
            if changed is None:
                entry = None
        if entry is None:
            skeleton.live = None
            self._fill(requests, leader_requests, node_selector, tolerations, affinity)
            if len(cache) >= _PHASE_ONE_ENTRIES:
                cache.clear()
            counts = [(d.pod_count, d.slice_count, d.pcwl, d.scwl, d.leader_count) for d in self.domains]
            entry = cache[key] = _PhaseOne(token.version, counts, self.limiting, self.stats)
            skeleton.live, skeleton.dirty = entry, []
            return
        counts = entry.counts
        restore = skeleton.dirty if skeleton.live is entry else self.domains
        for dom in restore:
            dom.pod_count, dom.slice_count, dom.pcwl, dom.scwl, dom.leader_count = counts[dom.idx]
        skeleton.live, skeleton.dirty = entry, []
        self.limiting, self.stats = entry.limiting, entry.stats
        if changed is None:
            return
        entry.version = token.version
        by_id = self.per_level[-1]
        leaves = [dom for leaf_id in changed if (dom := by_id.get(leaf_id)) is not None]
        if not leaves:
            return
        stats = self.stats
        for dom in leaves:
            res = self.limiting.pop(dom, None)
            if res is not None:
                stats.resources[res] -= 1
                if not stats.resources[res]:
                    del stats.resources[res]
        filtered = _Stats()  # the filters do not depend on usage: their exclusions are counted already
        self._fill_leaves(requests, leader_requests, node_selector, tolerations, affinity, leaves, filtered)
        for res, n in filtered.resources.items():
            stats.resources[res] = stats.resources.get(res, 0) + n
        for dom in self._fill_inner_plain(leaves):
            counts[dom.idx] = (dom.pod_count, dom.slice_count, dom.pcwl, dom.scwl, dom.leader_count)

    def _fill(
        self,
        requests: Requests,
        leader_requests: Requests | None,
        node_selector: Mapping[str, str],
        tolerations: Sequence[models.Toleration],
        affinity: Sequence[models.NodeSelectorTerm],
    ) -> None:
        """Phase 1 from scratch: counts reset, leaves, then the inner domains bottom-up."""
        for dom in self.domains:
            dom.pod_count = dom.slice_count = dom.pcwl = dom.scwl = dom.leader_count = 0
        self._fill_leaves(requests, leader_requests, node_selector, tolerations, affinity, self.leaves, self.stats)
        if self.leader_total or self.size_at_level:
            for root in self.roots:
                self._fill_inner(root, 0)
        else:
            self._fill_inner_plain(None)

    def _fill_inner_plain(self, changed: list[_Domain] | None) -> list[_Domain]:
        """:meth:`_fill_inner` without a leader and without inner slice layers, level by level
        upwards: a domain's pods (and pods with leader) are its children's sum; its slices are
        pods // slice size at the slice level, the children's sum above it, 0 below. With
        ``changed`` (leaves), only those leaves' slices and their ancestors are recomputed, and
        returned with the leaves ([] without ``changed``)."""
        last = len(self.levels) - 1
        slice_level, size = self.slice_level, self.slice_size
        leaves = self.leaves if changed is None else changed
        if last == slice_level:
            for dom in leaves:
                dom.slice_count = dom.scwl = dom.pod_count // size
        if changed is None:
            levels: list[Iterable[_Domain]] = [self.per_level[level].values() for level in range(last)]
        else:
            per_level: list[dict[int, _Domain]] = [{} for _ in range(last)]
            for dom in changed:
                parent = dom.parent
                while parent is not None:
                    bucket = per_level[parent.level]
                    if id(parent) in bucket:
                        break
                    bucket[id(parent)] = parent
                    parent = parent.parent
            levels = [bucket.values() for bucket in per_level]
        for level in range(last - 1, -1, -1):
            for dom in levels[level]:
                children = dom.children
                pods = 0
                for child in children:
                    pods += child.pod_count
                dom.pod_count = dom.pcwl = pods
                if level == slice_level:
                    slices = pods // size
                elif level < slice_level:
                    slices = 0
                    for child in children:
                        slices += child.slice_count
                else:
                    slices = 0
                dom.slice_count = dom.scwl = slices
        if changed is None:
            return []
        return [*changed, *(dom for bucket in levels for dom in bucket)]

    def _remaining(self, leaf_id: str, free: Mapping[str, int]) -> Requests:
        remaining = dict(free)
        sources = [self.assumed.get(leaf_id, {})]
        if not self.simulate_empty:
            sources.append(self.tas_usage.get(leaf_id, {}))
        for usage in sources:
            for res, amount in usage.items():
                remaining[res] = remaining.get(res, 0) - amount
        return remaining

    def _fill_leaves(
        self,
        requests: Requests,
        leader_requests: Requests | None,
        node_selector: Mapping[str, str],
        tolerations: Sequence[models.Toleration],
        affinity: Sequence[models.NodeSelectorTerm],
        leaves: Sequence[_Domain],
        stats: _Stats,
    ) -> None:
        """Phase 1 at ``leaves`` (A.3 filters, A.6.2 counts), exclusions counted in ``stats``
        (leaves fitting no pod also in ``self.limiting``); Kueue fillInCounts/fillLeafCounts.
        A leaf the filters exclude keeps its counts (0 after a reset).

        The hot loop of a placement (every leaf, every run): only the requested resources are
        looked at, and without a leader the count with the leader is the count itself."""
        all_tolerations = [*tolerations, *self.topology.tolerations]
        items = sorted(requests.items())
        assumed = self.assumed
        usage: Mapping[str, Mapping[str, int]] = {} if self.simulate_empty else self.tas_usage
        limited = self.limiting
        if leaves is self.leaves:
            stats.total += len(leaves)
        for dom in leaves:
            leaf = dom.leaf
            node = leaf.node
            if node is not None and (node.spec.taints or node_selector or affinity):
                untolerated = next(
                    (
                        t
                        for t in node.spec.taints
                        if t.effect in ("NoSchedule", "NoExecute")
                        and not any(_tolerates(x, t) for x in all_tolerations)
                    ),
                    None,
                )
                if untolerated is not None:
                    name = _taint_string(untolerated)
                    stats.taints[name] = stats.taints.get(name, 0) + 1
                    continue
                labels = node.metadata.labels
                if any(labels.get(k) != v for k, v in node_selector.items()):
                    stats.node_selector += 1
                    continue
                if affinity and not any(_matches_term(term, labels) for term in affinity):
                    stats.affinity += 1
                    continue
            if leader_requests is not None:
                remaining = self._remaining(leaf.id, leaf.free)
                dom.pod_count, limiting = _count_in(requests, remaining)
                if dom.pod_count == 0 and limiting:
                    stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
                    limited[dom] = limiting
                dom.leader_count = 0
                if _count_in(leader_requests, remaining)[0] > 0:
                    dom.leader_count = 1
                    for res, amount in leader_requests.items():
                        remaining[res] = remaining.get(res, 0) - amount
                dom.pcwl = _count_in(requests, remaining)[0]
                continue
            free = leaf.free
            taken_a = assumed.get(leaf.id)
            taken_u = usage.get(leaf.id)
            best, limiting = -1, ""
            for res, value in items:
                if value == 0:
                    count = _MAX_INT32
                else:
                    cap = free.get(res, 0)
                    if taken_a:
                        cap -= taken_a.get(res, 0)
                    if taken_u:
                        cap -= taken_u.get(res, 0)
                    count = min(cap // value, _MAX_INT32) if cap > 0 else 0
                if best < 0 or count < best:
                    best, limiting = count, res
            if best < 0:
                best = _MAX_INT32
            dom.pod_count = dom.pcwl = best
            dom.leader_count = 0
            if best == 0 and limiting:
                stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
                limited[dom] = limiting

    def _fill_inner(self, dom: _Domain, level: int) -> None:
        """Phase 1 bottom-up (A.6.2); Kueue fillInCountsHelper."""
        if not dom.children:
            if level == self.slice_level:
                dom.slice_count = dom.pod_count // self.slice_size
                dom.scwl = dom.pcwl // self.slice_size
            return
        pods = slices = leader = 0
        contributor = False
        min_pod_diff = min_slice_diff = _MAX_INT32
        inner = self.size_at_level.get(level + 1)
        for child in dom.children:
            self._fill_inner(child, level + 1)
            child_pods, child_pcwl = child.pod_count, child.pcwl
            if inner is not None:
                child_pods, child_pcwl = (child_pods // inner) * inner, (child_pcwl // inner) * inner
            pods += child_pods
            slices += child.slice_count
            if not self.leader_total or child.leader_count > 0:
                contributor = True
                min_pod_diff = min(child_pods - child_pcwl, min_pod_diff)
                min_slice_diff = min(child.slice_count - child.scwl, min_slice_diff)
            leader = max(leader, child.leader_count)
        dom.pod_count = pods
        scwl = 0
        if contributor:
            dom.pcwl = pods - min_pod_diff
            scwl = slices - min_slice_diff
        else:
            dom.pcwl = 0
        dom.leader_count = leader
        if level == self.slice_level:
            slices = dom.pod_count // self.slice_size
            scwl = dom.pcwl // self.slice_size
        dom.slice_count, dom.scwl = slices, scwl

    # -- sort orders and best fit (A.6.3) --

    def _sorted(self, domains: Sequence[_Domain]) -> list[_Domain]:
        sign = 1 if self.lfc else -1
        return sorted(domains, key=lambda d: (sign * d.slice_count, d.pod_count, d.values))

    def _sorted_with_leader(self, domains: Sequence[_Domain]) -> list[_Domain]:
        sign = 1 if self.lfc else -1
        return sorted(domains, key=lambda d: (-d.leader_count, sign * d.scwl, d.pcwl, d.values))

    @staticmethod
    def _best_fit(domains: Sequence[_Domain], needed: int, leaders: int, attr: str) -> _Domain:
        best, best_count = None, _MAX_INT32
        for dom in domains:
            if dom.leader_count < leaders:
                continue
            value = getattr(dom, attr)
            if needed <= value < best_count:
                best, best_count = dom, value
        return best if best is not None else domains[0]

    def _best_fit_slices(self, domains: Sequence[_Domain], needed: int, leaders: int) -> _Domain:
        return self._best_fit(domains, needed, leaders, "scwl" if leaders > 0 else "slice_count")

    def _best_fit_pods(self, domains: Sequence[_Domain], needed: int, leaders: int) -> _Domain:
        return self._best_fit(domains, needed, leaders, "pcwl" if leaders > 0 else "pod_count")

    def _not_fit(self, fit: int, total: int, level: int) -> str:
        name = self.topology.topology_name
        if self.layers:
            text = f'topology "{name}" doesn\'t allow to fit'
            candidates = list(self.per_level[level].values())
            if candidates:
                best = min(candidates, key=lambda d: (-d.slice_count, d.id))
                for layer in self.layers:
                    target = self.levels.index(layer.topology)
                    fits = self._slices_in_subtree(best, level, target, layer.size)
                    text += f"; {fits}/{self.count // layer.size} slice(s) fit on level {layer.topology}"
            return text + self.stats.suffix()
        unit = "pod" if self.slice_size == 1 else "slice"
        if fit == 0:
            text = f'topology "{name}" doesn\'t allow to fit any of {total} {unit}(s)'
        else:
            text = f'topology "{name}" allows to fit only {fit} out of {total} {unit}(s)'
        return text + self.stats.suffix()

    def _slices_in_subtree(self, dom: _Domain, level: int, target: int, size: int) -> int:
        if level == target:
            return dom.pod_count // size
        return sum(self._slices_in_subtree(c, level + 1, target, size) for c in dom.children)

    # -- phase 2a: the level and the top domains (A.6.4) --

    def _level_with_fit_domains(self, level: int) -> tuple[int, list[_Domain]] | str:
        domains = list(self.per_level[level].values())
        if not domains:
            return f"no topology domains at level: {self.levels[level]}"
        if not self.leader_total:
            found = self._one_fit_domain(domains)
            if found is not None:
                return level, [found]
        ordered = self._sorted_with_leader(domains)
        top = ordered[0]
        slices = self.count // self.slice_size
        leaders = self.leader_total
        if not self.lfc and top.scwl >= slices and top.leader_count >= leaders:
            top = self._best_fit_slices(ordered, slices, leaders)
        if self.lfc:
            for cand in ordered:
                capacity = cand.slice_count
                if leaders > 0:
                    if cand.leader_count < leaders:
                        continue
                    capacity = cand.scwl
                if capacity >= slices:
                    return level, [cand]
            if self.required:
                return self._not_fit(ordered[-1].pod_count, slices, level)
        if top.scwl >= slices and top.leader_count >= leaders:
            return level, [top]
        if self.required:
            return self._not_fit(top.slice_count, slices, level)
        if level > 0 and not self.unconstrained:
            return self._level_with_fit_domains(level - 1)
        results: list[_Domain] = []
        remaining, remaining_leaders = slices, leaders
        ordered = self._prioritize_leader(ordered, self.count, leaders, self.slice_size, True)
        idx = 0
        while remaining_leaders > 0 and idx < len(ordered) and ordered[idx].leader_count > 0:
            dom = ordered[idx]
            if not self.lfc and dom.scwl >= remaining:
                dom = self._best_fit_slices(ordered[idx:], remaining, remaining_leaders)
            results.append(dom)
            remaining_leaders -= dom.leader_count
            remaining -= dom.scwl
            idx += 1
        if remaining_leaders > 0:
            return self._not_fit(leaders - remaining_leaders, slices, level)
        rest = self._sorted(ordered[idx:])
        for i, dom in enumerate(rest):
            if remaining <= 0:
                break
            if not self.lfc and dom.slice_count >= remaining:
                dom = self._best_fit_slices(rest[i:], remaining, 0)
            results.append(dom)
            remaining -= dom.slice_count
        if remaining > 0:
            return self._not_fit(slices - remaining, slices, level)
        return level, results

    def _one_fit_domain(self, domains: list[_Domain]) -> _Domain | None:
        """Without a leader: the single domain the first steps of
        :meth:`_level_with_fit_domains` pick when one domain holds all slices, found without
        sorting (the first fitting domain in LeastFreeCapacity order; under BestFit, the
        fitting domain with the fewest slices, ties in BestFit order); None otherwise."""
        slices = self.count // self.slice_size
        if self.lfc:
            fitting = [d for d in domains if d.slice_count >= slices]
            if not fitting:
                return None
            return min(fitting, key=lambda d: (-d.leader_count, d.scwl, d.pcwl, d.values))
        order = lambda d: (-d.leader_count, -d.scwl, d.pcwl, d.values)  # noqa: E731
        top = min(domains, key=order)
        if top.scwl < slices:
            return None
        fitting = [d for d in domains if slices <= d.slice_count < _MAX_INT32]  # as _best_fit
        best = min(fitting, key=lambda d: (d.slice_count, order(d))) if fitting else top
        return best if best.scwl >= slices else None

    def _prioritize_leader(
        self, domains: list[_Domain], count: int, leaders: int, size: int, slices: bool
    ) -> list[_Domain]:
        """Move to the front the first leader-capable domain whose leader penalty still leaves
        enough capacity (Kueue prioritizeLeaderDomain)."""
        if leaders == 0 or len(domains) < 2:
            return domains
        required = count // size if slices else count
        available = sum(d.slice_count if slices else d.pod_count for d in domains)
        for i, dom in enumerate(domains):
            if dom.leader_count < leaders:
                continue
            penalty = dom.slice_count - dom.scwl if slices else dom.pod_count - dom.pcwl
            if available - penalty < required:
                continue
            if i == 0:
                return domains
            return [dom, *domains[:i], *domains[i + 1 :]]
        return domains

    # -- balanced placement (A.6.9; Kueue tas_balanced_placement.go) --

    def _balanced(self, requested_level: int) -> tuple[int, list[_Domain]] | None:
        """Balanced placement for a preferred request: the level and the domains (working copies
        carrying their share), or None to fall back to A.6.4. Kueue
        findBestDomainsForBalancedPlacement + applyBalancedPlacementAlgorithm."""
        slices = self.count // self.slice_size
        leaders = self.leader_total
        if requested_level == 0:
            groups = [list(self.per_level[0].values())]
        else:
            parents = sorted(self.per_level[requested_level - 1].values(), key=lambda d: d.values)
            groups = [p.children for p in parents]
        best_threshold, best_count, best = 0, 0, None
        for group in groups:
            candidates = [_clone(d, None) for d in group]
            lower = self._lower(candidates, requested_level)
            greedy = self._evaluate_greedy(lower, slices, leaders)
            if greedy is None or greedy[0] == 0:
                continue
            used, last_leader, last = greedy
            threshold = slices // used
            if last_leader is not None:
                threshold = min(threshold, last_leader.scwl)
            if last is not None:
                threshold = min(threshold, last.slice_count)
            reserved = threshold
            if leaders > 0 and last is not None:
                reserved = min(threshold, last.scwl)
            if threshold < best_threshold:
                continue
            self._prune(candidates, threshold)
            after = self._evaluate_greedy(candidates, slices, leaders)
            if after is None and reserved < threshold:
                # retry with a lower threshold that keeps room for the leader
                if reserved <= 0 or reserved < best_threshold:
                    continue
                threshold = reserved
                candidates = [_clone(d, None) for d in group]
                self._prune(candidates, threshold)
                after = self._evaluate_greedy(candidates, slices, leaders)
            if after is None:
                continue
            if threshold > best_threshold or (threshold == best_threshold and after[0] < best_count):
                best_threshold, best_count, best = threshold, after[0], candidates
        if best_threshold <= 0 or best is None:
            return None
        fit_level = requested_level
        if requested_level < self.slice_level:
            chosen = self._optimal_set(best, slices, leaders, 1, by_entropy=True)
            if chosen is None:
                return None
            best = [c for d in chosen for c in d.children]
            fit_level = requested_level + 1
        placed = self._place_balanced(best, slices, leaders, best_threshold)
        return None if placed is None else (fit_level, placed)

    def _lower(self, domains: list[_Domain], level: int) -> list[_Domain]:
        if level < self.slice_level:
            return [c for d in domains for c in d.children]
        return domains

    def _evaluate_greedy(
        self, domains: Sequence[_Domain], slices: int, leaders: int
    ) -> tuple[int, _Domain | None, _Domain | None] | None:
        """Simulate the greedy take-whole walk: (domains used, last leader domain, last domain),
        or None when the request does not fit (Kueue evaluateGreedyAssignment)."""
        used = 0
        last_leader = last = None
        remaining, remaining_leaders = slices, leaders
        if leaders > 0:
            ordered = self._sorted_with_leader(domains)
            idx = 0
            while remaining_leaders > 0 and idx < len(ordered) and ordered[idx].leader_count > 0:
                dom = ordered[idx]
                used += 1
                last_leader = dom
                remaining_leaders -= dom.leader_count
                remaining -= dom.scwl
                idx += 1
            rest = self._sorted(ordered[idx:])
        else:
            rest = self._sorted(domains)
        if remaining_leaders > 0:
            return None
        for dom in rest:
            if remaining <= 0 or dom.slice_count <= 0:
                break
            used += 1
            last = dom
            remaining -= dom.slice_count
        if remaining > 0:
            return None
        return used, last_leader, last

    def _prune(self, domains: list[_Domain], threshold: int) -> None:
        """Drop children (then domains) holding fewer than ``threshold`` slices; a domain that
        can no longer hold the leader at the threshold loses its leader capacity (Kueue
        pruneDomainsBelowThreshold)."""
        leader = self.leader_total > 0
        for dom in domains:
            for child in dom.children:
                _prune_node(child, threshold, leader)
        for dom in domains:
            self._fill_inner(dom, dom.level)
            _prune_node(dom, threshold, leader)

    def _optimal_set(
        self, domains: Sequence[_Domain], slices: int, leaders: int, size: int, *, by_entropy: bool
    ) -> list[_Domain] | None:
        """The domains, as few as greedy would use, holding the leaders and ``slices`` slices
        with the least excess capacity, found by dynamic programming over (leaders left, pods
        left); None when greedy does not fit (Kueue selectOptimalDomainSetToFit)."""
        greedy = self._evaluate_greedy(domains, slices, leaders)
        if greedy is None:
            return None
        k = greedy[0]
        if by_entropy:
            ordered = sorted(domains, key=lambda d: (-d.leader_count, -d.scwl, -_entropy(d.children), d.values))
        else:
            ordered = sorted(domains, key=lambda d: d.values)
        states: list[dict[tuple[int, int], list[_Domain]]] = [{} for _ in range(k + 1)]
        states[0][(leaders, slices * size)] = []
        for dom in ordered:
            for i in range(k, 0, -1):
                target = states[i]
                for before in sorted(states[i - 1]):
                    b_leaders, b_pods = before
                    if b_leaders <= 0 and b_pods <= 0:
                        continue
                    taken = [*states[i - 1][before], dom]
                    if b_leaders > 0 and dom.leader_count > 0:
                        target.setdefault((b_leaders - dom.leader_count, b_pods - dom.pcwl), taken)
                    if dom.slice_count > 0:
                        target.setdefault((b_leaders, b_pods - dom.pod_count), taken)
        done = [key for key in states[k] if key[0] == 0 and key[1] <= 0]
        if not done:
            return None
        return states[k][max(done)]

    def _place_balanced(
        self, domains: list[_Domain], slices: int, leaders: int, threshold: int
    ) -> list[_Domain] | None:
        """Give each domain of the optimal set ``threshold`` slices, then the extras in sorted
        order (leader domains first); None on failure (Kueue placeSlicesOnDomainsBalanced)."""
        chosen = self._optimal_set(domains, slices, leaders, self.slice_size, by_entropy=False)
        if chosen is None or slices < len(chosen) * threshold:
            return None
        chosen = self._sorted_with_leader(chosen)
        extra = slices - len(chosen) * threshold
        leaders_left = leaders
        for dom in chosen:
            if leaders_left > 0:
                take = min(dom.scwl - threshold, extra)
                dom.leader_count = 1
                leaders_left -= 1
            elif extra > 0:
                take = min(dom.slice_count - threshold, extra)
                dom.leader_count = 0
            else:
                take = dom.leader_count = 0
            dom.slice_count = dom.scwl = threshold + take
            dom.pod_count = dom.slice_count * self.slice_size
            dom.pcwl = dom.pod_count - dom.leader_count
            extra -= take
        if extra > 0 or leaders_left > 0:
            return None
        return chosen

    # -- phase 2b: trim and descend (A.6.5) --

    def _update_counts(
        self, domains: list[_Domain], count: int, leaders: int, size: int, slices: bool
    ) -> list[_Domain]:
        """Assign ``count`` pods (in units of ``size`` when ``slices``) over ``domains`` greedily:
        whole domains in order, best fit for the last (Kueue updateCountsToMinimumGeneric)."""
        self.skeleton.dirty.extend(domains)  # restored from the phase-1 entry by the next run
        domains = self._prioritize_leader(domains, count, leaders, size, slices)
        result: list[_Domain] = []
        remaining = count // size if slices else count
        remaining_leaders = leaders
        primary, with_leader = ("slice_count", "scwl") if slices else ("pod_count", "pcwl")
        unit = size if slices else 1
        for i, dom in enumerate(domains):
            if remaining_leaders > 0:
                if not self.lfc and getattr(dom, with_leader) >= remaining and dom.leader_count >= remaining_leaders:
                    if slices:
                        dom = self._best_fit_slices(domains[i:], remaining, remaining_leaders)
                    else:
                        dom = self._best_fit_pods(domains[i:], remaining, remaining_leaders)
                result.append(dom)
                available = getattr(dom, with_leader)
                if available >= remaining and dom.leader_count >= remaining_leaders:
                    setattr(dom, primary, remaining)
                    dom.leader_count = remaining_leaders
                    dom.pod_count = remaining * unit
                    return result
                if available > remaining:
                    available = remaining
                    setattr(dom, with_leader, remaining)
                if dom.leader_count > remaining_leaders:
                    dom.leader_count = remaining_leaders
                setattr(dom, primary, available)
                dom.pod_count = available * unit
                remaining_leaders -= dom.leader_count
                remaining -= available
                continue
            if not self.lfc and getattr(dom, primary) >= remaining:
                dom = (
                    self._best_fit_slices(domains[i:], remaining, 0)
                    if slices
                    else self._best_fit_pods(domains[i:], remaining, 0)
                )
            dom.leader_count = 0
            result.append(dom)
            if getattr(dom, primary) >= remaining:
                dom.pod_count = remaining * unit
                if slices:
                    dom.slice_count = remaining
                return result
            if slices:
                dom.pod_count = dom.slice_count * unit
            remaining -= getattr(dom, primary)
        return []  # Kueue logs "unexpected remainingCount" and places nothing

    def _build(self, placed: list[tuple[_Domain, int]]) -> Assignment:
        """Leaves with pods, sorted by level values; hostname only when it is the lowest level
        (A.6.10, Kueue buildAssignment)."""
        first = len(self.levels) - 1 if self.topology.lowest_is_hostname else 0
        domains = tuple(
            DomainAssignment(values=d.values[first:], count=n)
            for d, n in sorted(placed, key=lambda p: p[0].values)
            if n > 0
        )
        return Assignment(levels=tuple(self.levels[first:]), domains=domains)
