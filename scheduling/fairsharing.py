"""Fair sharing: dominant resource shares, the admission tournament and fair preemption.

Pure, like the classical target search (:mod:`kueue_es.scheduling.preemption`):

- :func:`share` is Kueue's DominantResourceShare of a ClusterQueue or cohort
  (pkg/cache/scheduler/fair_sharing.go, SEMANTICS §7.9): per resource name, what
  the node borrows beyond its subtree quota, over what its parent could lend,
  times 1000; the largest ratio, divided by the node's fair-sharing weight. Floats
  as in Kueue (IEEE doubles give the same values in Go and Python).
- :func:`entry_order` orders a cycle's entries by Kueue's tournament
  (pkg/scheduler/fair_sharing_iterator.go, §4.4.2).
- :func:`fair_targets` is Kueue's fair preemption (preemption.go fairPreemptions
  and fairsharing/*, §7.10-§7.11), with both strategies.

Kueue visits a cohort's children in map order where it breaks no tie; here they
are visited by name, and a full tie is broken by UID, then ``namespace/name``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, cmp_to_key
from typing import TYPE_CHECKING, Any

from kueue_es.events import models, quantities
from kueue_es.projections.cluster import ClusterState, queue_order_ts
from kueue_es.projections.quota import FR, Node, QuotaTree, potential_of
from kueue_es.scheduling import preemption

if TYPE_CHECKING:
    from kueue_es.scheduling.entries import Entry

DEFAULT_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


@dataclass(frozen=True)
class Share:
    """A node's dominant resource share (Kueue's DRS).

    ``ratio`` is the unweighted share (borrowed x 1000 / lendable) of the
    ``dominant`` resource; ``borrowed`` the FRs the node borrows.
    """

    weight: float
    ratio: float = 0.0
    dominant: str = ""
    borrowed: tuple[FR, ...] = ()

    @property
    def borrowing(self) -> bool:
        """Whether the node uses more than its subtree quota of some FR."""
        return bool(self.borrowed)

    def borrowing_on(self, requested: dict[FR, int]) -> bool:
        """Borrowing on an FR that ``requested`` asks for (DRS.IsBorrowingOn)."""
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)

    @property
    def weighted(self) -> float:
        """The weighted share: 0 when not borrowing, +inf for a zero weight."""
        if self.ratio == 0:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight

    @property
    def zero_weight_borrows(self) -> bool:
        """A zero-weight node with a non-zero share: above everything else."""
        return self.weight == 0 and self.ratio != 0


NEGATIVE = Share(weight=1.0, ratio=-1.0)


def compare(a: Share, b: Share) -> int:
    """Kueue's CompareDRS: -1, 0 or 1."""
    if a.zero_weight_borrows and b.zero_weight_borrows:
        return _cmp(a.ratio, b.ratio)
    if a.zero_weight_borrows:
        return 1
    if b.zero_weight_borrows:
        return -1
    return _cmp(a.weighted, b.weighted)


def _cmp(a: float, b: float) -> int:
    return (a > b) - (a < b)


@dataclass
class Weights:
    """Fair-sharing weights of ClusterQueues and cohorts (``spec.fairSharing.weight``, default 1)."""

    state: ClusterState
    _cache: dict[tuple[bool, str], float] = field(default_factory=dict)

    def of(self, node: Node) -> float:
        """The weight of ``node`` as a float (Kueue's AsFloat64Slow)."""
        key = (node.is_cohort, node.name)
        if key not in self._cache:
            obj: Any = (self.state.cohorts if node.is_cohort else self.state.cluster_queues).get(node.name)
            spec = getattr(obj, "spec", None)
            fs = getattr(spec, "fair_sharing", None) if spec is not None else None
            self._cache[key] = float(quantities.parse_decimal(fs.weight)) if fs is not None else 1.0
        return self._cache[key]


def share(node: Node, weights: Weights, extra: dict[FR, int] | None = None) -> Share:
    """DominantResourceShare of ``node`` with ``extra`` usage added (SEMANTICS §7.9)."""
    weight = weights.of(node)
    if node.parent is None:
        return Share(weight=weight)
    extra = extra or {}
    by_resource: dict[str, int] = {}
    borrowed: list[FR] = []
    for fr, subtree_quota in node.subtree.items():
        amount = extra.get(fr, 0) + node.usage.get(fr, 0) - subtree_quota
        if amount > 0:
            by_resource[fr[1]] = by_resource.get(fr[1], 0) + amount
            borrowed.append(fr)
    if not by_resource:
        return Share(weight=weight)
    lendable = _lendable(node.parent)
    ratio, dominant = 0.0, ""
    for resource in sorted(by_resource):
        available = lendable.get(resource, 0)
        if available > 0:
            value = float(by_resource[resource]) * 1000.0 / float(available)
            if value > ratio or (value == ratio and resource < dominant):
                ratio, dominant = value, resource
    return Share(weight=weight, ratio=ratio, dominant=dominant, borrowed=tuple(sorted(borrowed)))


def _lendable(node: Node) -> dict[str, int]:
    """fair_sharing.go calculateLendable: per resource name, what ``node`` could lend."""
    out: dict[str, int] = {}
    for fr in node.root().subtree:
        out[fr[1]] = out.get(fr[1], 0) + potential_of(node, fr)
    return out


# --- the admission tournament (SEMANTICS §4.4.2) -------------------------------------------------


def entry_order(
    entries: Iterable[Entry],
    *,
    tree: QuotaTree,
    weights: Weights,
    by_priority: bool = True,
    preemptors_first: bool = False,
) -> Iterator[Entry]:
    """Yield ``entries`` in Kueue's fair-sharing order; shares are recomputed before every
    pick, so usage the caller adds between picks counts (the caller consumes lazily).
    ``by_priority`` False (gate PrioritySortingWithinCohort off): equal shares go by queue time, not
    priority first; ``preemptors_first`` (gate PrioritizePreemptorWorkloads on): an entry waiting for its
    preemptions (``Entry.nominated``) wins against one that is not, before shares are compared
    (pkg/scheduler/fair_sharing_iterator.go entryComparer.less)."""
    remaining = {e.cq.metadata.name: e for e in entries}
    while remaining:
        name = min(remaining)  # trees are independent: the order across them changes nothing
        node = tree.cluster_queues[name]
        if node.parent is None:
            yield remaining.pop(name)
            continue
        root = node.root()
        tournament = _Tournament(tree, weights, remaining, by_priority=by_priority, preemptors_first=preemptors_first)
        tournament.compute(root)
        winner = tournament.run(root)
        assert winner is not None
        yield remaining.pop(winner.cq.metadata.name)


class _Tournament:
    def __init__(
        self,
        tree: QuotaTree,
        weights: Weights,
        entries: dict[str, Entry],
        *,
        by_priority: bool = True,
        preemptors_first: bool = False,
    ) -> None:
        self.tree, self.weights, self.entries = tree, weights, entries
        self.by_priority, self.preemptors_first = by_priority, preemptors_first
        self.shares: dict[tuple[str, str], Share] = {}
        self.requested: dict[str, dict[FR, int]] = {}

    def compute(self, root: Node) -> None:
        """DRS "after admission" of every entry at every cohort on its path (computeDRS)."""
        for cq_node in _subtree_queues(root):
            entry = self.entries.get(cq_node.name)
            if entry is None:
                continue
            usage = entry.assignment.usage()
            key = entry.workload.workload.key
            self.requested[key] = usage
            self.tree.add_usage(cq_node.name, usage)
            current = share(cq_node, self.weights)
            ancestor = cq_node.parent
            while ancestor is not None:
                self.shares[(ancestor.name, key)] = current
                current = share(ancestor, self.weights)
                ancestor = ancestor.parent
            self.tree.remove_usage(cq_node.name, usage)

    def run(self, cohort: Node) -> Entry | None:
        candidates: list[Entry] = []
        for child in _children(cohort):
            if child.is_cohort:
                winner = self.run(child)
                if winner is not None:
                    candidates.append(winner)
            elif child.name in self.entries:
                candidates.append(self.entries[child.name])
        if not candidates:
            return None
        best = candidates[0]
        for current in candidates[1:]:
            if self._less(current, best, cohort.name):
                best = current
        return best

    def _less(self, a: Entry, b: Entry, cohort: str) -> bool:
        if self.preemptors_first and a.nominated != b.nominated:
            return a.nominated  # PrioritizePreemptorWorkloads
        key_a, key_b = a.workload.workload.key, b.workload.workload.key
        share_a, share_b = self.shares[(cohort, key_a)], self.shares[(cohort, key_b)]
        borrowing_a = share_a.borrowing_on(self.requested[key_a])
        borrowing_b = share_b.borrowing_on(self.requested[key_b])
        if borrowing_a != borrowing_b:
            return not borrowing_a  # FairSharingPrioritizeNonBorrowing
        order = compare(share_a, share_b)
        if order != 0:
            return order < 0
        if self.by_priority and a.priority != b.priority:
            return a.priority > b.priority  # PrioritySortingWithinCohort
        meta_a, meta_b = a.workload.workload.metadata, b.workload.workload.metadata
        config = self.weights.state.configuration
        ts_a, ts_b = queue_order_ts(a.workload, config), queue_order_ts(b.workload, config)
        if ts_a != ts_b:
            return ts_a < ts_b
        return (meta_a.uid, key_a) < (meta_b.uid, key_b)  # ours: Kueue keeps the first visited


def _children(cohort: Node) -> list[Node]:
    """Child cohorts, then child ClusterQueues, each by name (Kueue: map order)."""
    return sorted(cohort.children, key=lambda n: (not n.is_cohort, n.name))


def _subtree_queues(node: Node) -> Iterator[Node]:
    for child in _children(node):
        if child.is_cohort:
            yield from _subtree_queues(child)
        else:
            yield child


# --- fair preemption (SEMANTICS §7.10-§7.11) -----------------------------------------------------


def fair_targets(
    tree: QuotaTree,
    pool: preemption.CandidatePool,
    preemptor: preemption.Preemptor,
    config: models.FairSharingConfig,
    weights: Weights,
    *,
    rerun_after_own: bool = True,
) -> list[preemption.Target]:
    """Kueue's fairPreemptions (pkg/scheduler/preemption/preemption.go): victims chosen by
    dominant resource share; [] when none work.

    ``rerun_after_own`` (Kueue PR #14128, issue #14122; False: admitter logic 20 and preemptor logic
    9 and earlier, for replay): when the first strategy did not make the preemptor fit but took
    workloads of the preemptor's own ClusterQueue, it runs once more over the candidates it set
    aside before the second strategy gets them."""
    search = _FairSearch(tree, pool, preemptor, weights)
    candidates = search.candidates()
    if not candidates:
        return []
    strategies: list[str] = [*config.preemption_strategies] or [*DEFAULT_STRATEGIES]
    cq = preemptor.cq.metadata.name
    tree.add_usage(cq, preemptor.usage)  # shares below include the preemptor's request
    fits, chosen, retry = search.first_strategy(candidates, strategies[0])
    if rerun_after_own and not fits and retry and any(t.reason == preemption.IN_CLUSTER_QUEUE for t in chosen):
        # Taking its own workloads lowered the preemptor's share, so candidates that failed the
        # first strategy against the higher share may pass it now (the second one is coarser: one
        # victim per ClusterQueue). The own ClusterQueue's candidates are all taken by now, so
        # one more pass is enough.
        fits, chosen, retry = search.first_strategy(retry, strategies[0], chosen)
    if not fits and len(strategies) > 1:
        fits, chosen = search.second_strategy(retry, chosen)
    tree.remove_usage(cq, preemptor.usage)
    if not fits:
        for target in chosen:
            preemption.restore(tree, target.candidate)
        return []
    kept = list(chosen)
    for i in range(len(kept) - 2, -1, -1):  # fillBackWorkloads, borrowing allowed
        preemption.restore(tree, kept[i].candidate)
        if preemption.fits(tree, preemptor, allow_borrowing=True) and _topology_fits(
            preemptor, kept[:i] + kept[i + 1 :]
        ):
            del kept[i]
        else:
            preemption.remove(tree, kept[i].candidate)
    for target in kept:
        preemption.restore(tree, target.candidate)
    return kept


def _topology_fits(preemptor: preemption.Preemptor, removed: list[preemption.Target]) -> bool:
    """The placement part of workloadFits (SEMANTICS-ADVANCED A.11; Kueue preemption.go
    workloadFits calls FindTopologyAssignmentsForWorkload): the preemptor's TAS pod sets can be
    placed with the ``removed`` victims' TAS usage gone. True without TAS pod sets."""
    check = preemptor.topology_fits
    return check is None or check(frozenset(t.candidate.key for t in removed))


class _FairSearch:
    def __init__(
        self, tree: QuotaTree, pool: preemption.CandidatePool, preemptor: preemption.Preemptor, weights: Weights
    ) -> None:
        self.tree, self.pool, self.p, self.weights = tree, pool, preemptor, weights
        self.cq_name = preemptor.cq.metadata.name
        self.node = tree.cluster_queues[self.cq_name]

    @cached_property
    def ancestors(self) -> list[Node]:
        out, node = [], self.node.parent
        while node is not None:
            out.append(node)
            node = node.parent
        return out

    def candidates(self) -> list[preemption.Candidate]:
        """preemption.go findCandidates (SEMANTICS §7.10), in CandidatesOrdering."""
        policy = self.p.cq.spec.preemption
        found: list[preemption.Candidate] = []
        if policy.within_cluster_queue != "Never":
            found += [
                c
                for c in self.pool.of(self.cq_name)
                if preemption.satisfies(policy.within_cluster_queue, self.p, c) and c.flavored & self.p.frs_need
            ]
        if self.node.parent is not None and policy.reclaim_within_cohort != "Never":
            for other in _subtree_queues(self.node.root()):
                if other is self.node or not self._borrowing_on_needed(other):
                    continue
                found += [
                    c
                    for c in self.pool.of(other.name)
                    if preemption.satisfies(policy.reclaim_within_cohort, self.p, c) and c.flavored & self.p.frs_need
                ]
        return preemption.ordered(
            found, self.cq_name, of=lambda c: c, lq_usage_in_every_cq=self.pool.lq_usage_in_every_cq
        )

    def _borrowing_on_needed(self, node: Node) -> bool:
        return node.parent is not None and any(
            node.usage.get(fr, 0) > node.subtree.get(fr, 0) for fr in self.p.frs_need
        )

    def _fits(self, chosen: list[preemption.Target]) -> bool:
        """workloadFitsForFairSharing: the preemptor's own simulated usage taken out first,
        then quota and (TAS) the placement with the ``chosen`` victims removed (A.11)."""
        self.tree.remove_usage(self.cq_name, self.p.usage)
        try:
            if not preemption.fits(self.tree, self.p, allow_borrowing=True):
                return False
        finally:
            self.tree.add_usage(self.cq_name, self.p.usage)
        return _topology_fits(self.p, chosen)

    def _take(self, candidate: preemption.Candidate, reason: str, chosen: list[preemption.Target]) -> bool:
        preemption.remove(self.tree, candidate)
        chosen.append(preemption.Target(candidate=candidate, reason=reason))
        return self._fits(chosen)

    def first_strategy(
        self,
        candidates: list[preemption.Candidate],
        strategy: str,
        taken: Sequence[preemption.Target] = (),
    ) -> tuple[bool, list[preemption.Target], list[preemption.Candidate]]:
        """runFirstFsStrategy: (fits, targets, candidates to retry with the second strategy).
        ``taken``: victims of an earlier pass, already out of the tree; the targets returned
        start with them."""
        ordering = _TargetOrdering(self, candidates)
        chosen: list[preemption.Target] = list(taken)
        retry: list[preemption.Candidate] = []
        within_nominal = all(
            self.node.usage.get(fr, 0) <= self.node.subtree.get(fr, 0) for fr in self.p.frs_need
        )  # FairSharingPreemptWithinNominal (on by default)
        for target_cq in ordering:
            if target_cq is self.node:
                if self._take(ordering.pop(target_cq), preemption.IN_CLUSTER_QUEUE, chosen):
                    return True, chosen, []
                continue
            if within_nominal:
                if self._take(ordering.pop(target_cq), preemption.IN_COHORT_RECLAMATION, chosen):
                    return True, chosen, []
                continue
            preemptor_new, target_old = self._shares(target_cq)
            if math.isinf(preemptor_new.weighted) and not math.isinf(target_old.weighted):
                while ordering.has(target_cq):
                    retry.append(ordering.pop(target_cq))
                continue
            while ordering.has(target_cq):
                candidate = ordering.pop(target_cq)
                if strategy == "LessThanInitialShare":
                    passed = compare(preemptor_new, target_old) < 0
                else:
                    passed = compare(preemptor_new, self._target_share_without(target_cq, candidate)) <= 0
                if passed:
                    if self._take(candidate, preemption.IN_COHORT_FAIR_SHARING, chosen):
                        return True, chosen, []
                    break
                retry.append(candidate)
        return False, chosen, retry

    def second_strategy(
        self, retry: list[preemption.Candidate], chosen: list[preemption.Target]
    ) -> tuple[bool, list[preemption.Target]]:
        """runSecondFsStrategy: LessThanInitialShare, at most one candidate per ClusterQueue."""
        ordering = _TargetOrdering(self, retry)
        for target_cq in ordering:
            preemptor_new, target_old = self._shares(target_cq)
            passed = compare(preemptor_new, target_old) < 0
            candidate = ordering.pop(target_cq)
            if passed and self._take(candidate, preemption.IN_COHORT_FAIR_SHARING, chosen):
                return True, chosen
            ordering.drop(target_cq)
        return False, chosen

    def _almost_lcas(self, target_cq: Node) -> tuple[Node, Node]:
        on_path = set(map(id, self.ancestors))
        lca = target_cq.parent
        while lca is not None and id(lca) not in on_path:
            lca = lca.parent
        assert lca is not None, "a target ClusterQueue outside the preemptor's tree"
        return _below(self.node, lca), _below(target_cq, lca)

    def _shares(self, target_cq: Node) -> tuple[Share, Share]:
        mine, theirs = self._almost_lcas(target_cq)
        return share(mine, self.weights), share(theirs, self.weights)

    def _target_share_without(self, target_cq: Node, candidate: preemption.Candidate) -> Share:
        preemption.remove(self.tree, candidate)
        try:
            return share(self._almost_lcas(target_cq)[1], self.weights)
        finally:
            preemption.restore(self.tree, candidate)


def _below(node: Node, lca: Node) -> Node:
    """The ancestor of ``node`` (or itself) whose parent is ``lca``."""
    while node.parent is not lca:
        assert node.parent is not None
        node = node.parent
    return node


class _TargetOrdering:
    """fairsharing/ordering.go TargetClusterQueueOrdering: which ClusterQueue to take
    the next victim from, by highest share, descending from the root."""

    def __init__(self, search: _FairSearch, candidates: list[preemption.Candidate]) -> None:
        self.search = search
        self.queues: dict[str, list[preemption.Candidate]] = {}
        for candidate in candidates:
            self.queues.setdefault(candidate.cluster_queue, []).append(candidate)
        self.pruned: set[int] = set()
        self.on_path = {id(n) for n in search.ancestors}

    def has(self, node: Node) -> bool:
        return bool(self.queues.get(node.name))

    def pop(self, node: Node) -> preemption.Candidate:
        return self.queues[node.name].pop(0)

    def drop(self, node: Node) -> None:
        self.pruned.add(id(node))

    def __iter__(self) -> Iterator[Node]:
        own = self.search.node
        if own.parent is None:
            while id(own) not in self.pruned and self.has(own):
                yield own
            return
        root = own.root()
        while id(root) not in self.pruned:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: Node) -> Node | None:
        weights, own = self.search.weights, self.search.node
        best_cq: Node | None = None
        best_cq_share = NEGATIVE
        best_cohort: Node | None = None
        best_cohort_share = NEGATIVE
        for child in _children(cohort):
            if id(child) in self.pruned:
                continue
            child_share = share(child, weights)
            if not child.is_cohort:
                if (not child_share.borrowing and child is not own) or not self.has(child):
                    self.pruned.add(id(child))
                    continue
                order = compare(child_share, best_cq_share)
                if order == 0 and best_cq is not None:
                    mine = preemption.candidate_order(self.queues[child.name][0], own.name)
                    theirs = preemption.candidate_order(self.queues[best_cq.name][0], own.name)
                    if mine < theirs:
                        best_cq = child
                elif order > 0:
                    best_cq, best_cq_share = child, child_share
            elif not child_share.borrowing and id(child) not in self.on_path:
                self.pruned.add(id(child))
            elif compare(child_share, best_cohort_share) >= 0:
                best_cohort, best_cohort_share = child, child_share
        if best_cohort is None and best_cq is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and compare(best_cohort_share, best_cq_share) >= 0:
            return self._next(best_cohort)
        return best_cq


# --- what fair preemption would consider, for ``explain`` -----------------------------------------


@dataclass(frozen=True, kw_only=True)
class FairTargetQueue:
    """A ClusterQueue of the cohort as fair preemption weighs it against a preemptor: ``share`` its
    side's dominant resource share now (``side``: it, or its cohort just below ``common``, the lowest
    cohort both descend from, which Kueue's target.go ComputeShares compares), ``own_share`` the
    ClusterQueue's own share (what its status shows; the same as ``share`` when ``side`` is itself),
    ``preemptor_share`` the preemptor's side (``preemptor_side``: its ClusterQueue, or its cohort just
    below ``common``) with the request added; ``allowed`` its candidates that a strategy lets the
    preemptor take, each with the strategies that do (``("within nominal",)`` when
    FairSharingPreemptWithinNominal applies); ``refused`` those no strategy allows."""

    cluster_queue: str
    share: Share
    preemptor_share: Share
    allowed: tuple[tuple[preemption.Candidate, tuple[str, ...]], ...]
    refused: tuple[preemption.Candidate, ...]
    side: str = ""
    preemptor_side: str = ""
    common: str = ""
    own_share: Share | None = None


@dataclass(frozen=True, kw_only=True)
class FairView:
    """Fair preemption from a preemptor's side (SEMANTICS §7.10-§7.11): its ClusterQueue's share with
    the request added (``share``), whether it stays within its nominal quota so (``within_nominal``:
    then it reclaims from borrowers whatever their share), and the borrowing ClusterQueues holding
    candidates (``queues``), highest share first (fairsharing/ordering.go visits them so)."""

    share: Share
    within_nominal: bool
    queues: tuple[FairTargetQueue, ...]


def fair_view(
    tree: QuotaTree,
    pool: preemption.CandidatePool,
    preemptor: preemption.Preemptor,
    config: models.FairSharingConfig,
    weights: Weights,
) -> FairView:
    """Which workloads of other ClusterQueues fair preemption (:func:`fair_targets`, Kueue's
    fairPreemptions, findCandidates and runFirstFsStrategy / runSecondFsStrategy) could take for
    ``preemptor`` in ``tree`` as it is: its candidates, and per ClusterQueue the shares the strategies
    compare. LessThanOrEqualToFinalShare: the preemptor's share with the request at most the target's
    share without the candidate; LessThanInitialShare: below the target's share now. Evaluated before
    any victim is taken (a search re-evaluates as it takes them). The tree is left as found."""
    search = _FairSearch(tree, pool, preemptor, weights)
    candidates = [c for c in search.candidates() if c.cluster_queue != search.cq_name]
    strategies: list[str] = [*config.preemption_strategies] or [*DEFAULT_STRATEGIES]
    tree.add_usage(search.cq_name, preemptor.usage)
    try:
        own_share = share(search.node, weights)
        within_nominal = all(
            search.node.usage.get(fr, 0) <= search.node.subtree.get(fr, 0) for fr in preemptor.frs_need
        )
        by_cq: dict[str, list[preemption.Candidate]] = {}
        for candidate in candidates:
            by_cq.setdefault(candidate.cluster_queue, []).append(candidate)
        queues: list[FairTargetQueue] = []
        for name, found in by_cq.items():
            target_cq = tree.cluster_queues[name]
            mine, theirs = search._almost_lcas(target_cq)
            preemptor_new, target_old = share(mine, weights), share(theirs, weights)
            allowed: list[tuple[preemption.Candidate, tuple[str, ...]]] = []
            refused: list[preemption.Candidate] = []
            for candidate in found:
                if within_nominal:
                    allowed.append((candidate, ("within nominal",)))
                    continue
                passing: list[str] = []
                if not (math.isinf(preemptor_new.weighted) and not math.isinf(target_old.weighted)):
                    initial = compare(preemptor_new, target_old) < 0
                    if strategies[0] == "LessThanOrEqualToFinalShare":
                        after = search._target_share_without(target_cq, candidate)
                        if compare(preemptor_new, after) <= 0:
                            passing.append(strategies[0])
                    elif initial:
                        passing.append(strategies[0])
                    if len(strategies) > 1 and initial and "LessThanInitialShare" not in passing:
                        passing.append("LessThanInitialShare")  # runSecondFsStrategy's rule
                if passing:
                    allowed.append((candidate, tuple(passing)))
                else:
                    refused.append(candidate)
            queues.append(
                FairTargetQueue(
                    cluster_queue=name,
                    share=target_old,
                    preemptor_share=preemptor_new,
                    allowed=tuple(allowed),
                    refused=tuple(refused),
                    side=theirs.name,
                    preemptor_side=mine.name,
                    common=mine.parent.name if mine.parent is not None else "",
                    own_share=target_old if theirs is target_cq else share(target_cq, weights),
                )
            )
    finally:
        tree.remove_usage(search.cq_name, preemptor.usage)
    queues.sort(key=lambda q: q.cluster_queue)
    queues.sort(key=cmp_to_key(lambda a, b: compare(b.share, a.share)))
    return FairView(share=own_share, within_nominal=within_nominal, queues=tuple(queues))
