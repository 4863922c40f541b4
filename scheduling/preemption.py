"""Which workloads to preempt so a pending workload fits: Kueue's target search, pure.

The admitter calls it while it assigns flavors (the preemption oracle, SEMANTICS
§7.7) and for each head whose assignment needs preemption (§4.3.1); the preemptor
service calls it again to check a nomination against the log before it evicts
anybody (ARCHITECTURE.md §3). Same inputs, same answer: no clock, no I/O, and
every unordered choice in Kueue is given a documented tie-break here.

Classical preemption follows pkg/scheduler/preemption/preemption.go
(classicalPreemptions, fillBackWorkloads, workloadFits) and classical/
(hierarchical_preemption.go, candidate_generator.go); the candidate order is
common/ordering.go CandidatesOrdering. Fair-sharing preemption (§7.9-§7.11) is in
:mod:`kueue_es.scheduling.fairsharing`.

Amounts are integers per ``(flavor, resource)`` (cpu in millicores, memory in bytes).
The quota tree is changed while searching (victims taken out and put back) and
always left as it was found.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from kueue_es.events import models
from kueue_es.projections import afs, quota
from kueue_es.projections.cluster import ClusterState, WorkloadState, effective_priority
from kueue_es.projections.quota import FR, Node, QuotaTree

PREEMPTION_BUDGET = 3
"""Ours, against preemption loops (issue 4): a workload already evicted by preemption this
many times is no longer a preemption candidate; it keeps its quota until it finishes.
Kueue has no such bound, and some policy mixes make it evict in circles (Kueue issues
#3779, #7101, #14543: reclaimWithinCohort Any with borrowWithinCohort, priority preemption
that borrows, fair sharing). With the bound, evictions stop once arrivals stop: at most
this many per workload. A single scheduling decision is never affected before a workload
has been evicted that often."""

_T = TypeVar("_T")

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

HUMAN_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}

# Kueue's classical variants (hierarchical_preemption.go preemptionVariant)
_WITHIN_CQ, _HIERARCHICAL_RECLAIM, _RECLAIM_WITHOUT_BORROWING, _RECLAIM_WHILE_BORROWING = range(1, 5)
_VARIANT_REASON = {
    _WITHIN_CQ: IN_CLUSTER_QUEUE,
    _HIERARCHICAL_RECLAIM: IN_COHORT_RECLAMATION,
    _RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
    _RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A workload holding quota that preemption could evict.

    ``usage`` per FR is the quota it holds; ``flavored`` the FRs its admission
    names (zero amounts included); ``reserved_at_ms`` when its quota was reserved;
    ``lq_usage`` its LocalQueue's usage under admission fair sharing (0 when its
    ClusterQueue has none, :func:`ordered`).
    """

    key: str
    workload: WorkloadState
    cluster_queue: str
    usage: dict[FR, int]
    flavored: frozenset[FR]
    priority: int
    queue_ts_ms: int
    reserved_at_ms: int
    evicted: bool
    uid: str
    lq_usage: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Target:
    """A chosen victim and Kueue's preemption reason (``InClusterQueue``...)."""

    candidate: Candidate
    reason: str

    @property
    def key(self) -> str:
        """``namespace/name`` of the victim."""
        return self.candidate.key


@dataclass(frozen=True, kw_only=True)
class Preemptor:
    """The workload that needs room: its ClusterQueue, priority, queue-order time and
    the usage it would take (``usage``) with the FRs whose flavor needs preemption."""

    key: str
    cq: models.ClusterQueue
    priority: int
    queue_ts_ms: int
    usage: dict[FR, int]
    frs_need: frozenset[FR]
    # TAS (SEMANTICS-ADVANCED A.11): whether the preemptor's TAS pod sets can be placed with the
    # given candidates' (keys) TAS usage removed; None: no TAS pod set needs preemption.
    topology_fits: Callable[[frozenset[str]], bool] | None = None


@dataclass
class CandidatePool:
    """The quota-holding workloads of ``state`` as candidates, built once per cycle and
    per ClusterQueue on first use. ``released``: keys of workloads whose quota the caller
    has already taken out of its tree (they are no candidates: Kueue's cache holds nothing
    for them, SEMANTICS §6.4). ``lq_usage_in_every_cq``: how the searches order them
    (:func:`ordered`; False for admitter logic 17 and preemptor logic 6 and earlier). ``afs_pending``: a
    LocalQueue's usage that orders them counts the entry penalties of its workloads reserved but not admitted
    yet, as Kueue's snapshot does (CalcLocalQueueFSUsage; False for admitter logic 28 and preemptor logic 12
    and earlier)."""

    state: ClusterState
    now_ms: int = 0
    released: Collection[str] = ()
    lq_usage_in_every_cq: bool = True
    afs_pending: bool = False
    _by_cq: dict[str, list[Candidate]] = field(default_factory=dict)  # less ``released``, until forget()
    _every: dict[str, list[Candidate]] = field(default_factory=dict)  # ``released`` included
    _by_key: dict[str, Candidate] = field(default_factory=dict)  # those of _every

    def forget(self) -> None:
        """``released`` changed: the candidates are filtered again on use (each is built once per pool: what
        it reads of the state does not change while the pool is in use)."""
        self._by_cq.clear()

    def of(self, cluster_queue: str) -> list[Candidate]:
        """Candidates holding quota in ``cluster_queue`` (finished or deleted ones excluded)."""
        found = self._by_cq.get(cluster_queue)
        if found is None:
            every = self._holding(cluster_queue)
            released = self.released
            found = [c for c in every if c.key not in released] if released else every
            self._by_cq[cluster_queue] = found
        return found

    def candidate(self, key: str, cluster_queue: str) -> Candidate | None:
        """The candidate ``key`` of ``cluster_queue``, None when it is none (or is ``released``)."""
        self._holding(cluster_queue)
        found = self._by_key.get(key)
        if found is None or found.cluster_queue != cluster_queue or key in self.released:
            return None
        return found

    def _holding(self, cluster_queue: str) -> list[Candidate]:
        """Every workload holding quota in ``cluster_queue`` that may be a candidate, ``released`` or not."""
        found = self._every.get(cluster_queue)
        if found is None:
            found = []
            fair_admission = afs.active(self.state.cluster_queues.get(cluster_queue), self.state.configuration)
            for key in self.state.reserved.get(cluster_queue, {}):
                wl = self.state.workloads[key]
                if wl.reservation is None or wl.gone or not wl.workload.spec.active:
                    continue
                if wl.preempted_count >= PREEMPTION_BUDGET and wl.eviction is None:
                    continue  # evicted often enough: it keeps its quota now
                flavored = frozenset(
                    (flavor, resource)
                    for psa in wl.reservation.pod_set_assignments
                    for resource, flavor in psa.flavors.items()
                )
                candidate = Candidate(
                    key=key,
                    workload=wl,
                    cluster_queue=cluster_queue,
                    usage=quota.reservation_usage(wl.held or wl.reservation),  # after dynamic reclaim
                    flavored=flavored,
                    priority=effective_priority(wl.workload, self.state),  # boosted (gate PriorityBoost)
                    queue_ts_ms=wl.workload.metadata.creation_timestamp_ms,
                    reserved_at_ms=wl.reservation.at_ms,
                    evicted=wl.eviction is not None,
                    uid=wl.workload.metadata.uid,
                    lq_usage=self._lq_usage(wl) if fair_admission else 0.0,
                )
                found.append(candidate)
                self._by_key[key] = candidate
            self._every[cluster_queue] = found
        return found

    def _lq_usage(self, wl: WorkloadState) -> float:
        queue = (wl.workload.metadata.namespace, wl.workload.spec.queue_name)
        return afs.usage_value(
            self.state.afs_ledgers.get(queue),
            now_ms=self.now_ms,
            config=self.state.configuration,
            lq=self.state.local_queues.get(queue),
            pending=self.afs_pending,
        )


def satisfies(policy: str, preemptor: Preemptor, candidate: Candidate) -> bool:
    """Kueue's preemption policy predicate (common/preemption_policy.go, SEMANTICS §7.2)."""
    match policy:
        case "LowerPriority":
            return preemptor.priority > candidate.priority
        case "LowerOrNewerEqualPriority":
            if preemptor.priority != candidate.priority:
                return preemptor.priority > candidate.priority
            return preemptor.queue_ts_ms < candidate.queue_ts_ms
        case "Any":
            return True
    return False


def candidate_order(candidate: Candidate, preemptor_cq: str) -> tuple[bool, bool, int, int, str, str]:
    """Kueue's CandidatesOrdering (SEMANTICS §7.4) between candidates of different ClusterQueues,
    as a sort key: evicted first, other ClusterQueues first, lower priority, most recently
    reserved, then UID (our final tie-break: the key, for workloads without UID). LocalQueue
    usage never orders candidates of two ClusterQueues; :func:`ordered` adds it within one."""
    return (
        not candidate.evicted,
        candidate.cluster_queue == preemptor_cq,
        candidate.priority,
        -candidate.reserved_at_ms,
        candidate.uid,
        candidate.key,
    )


def _within_order(candidate: Candidate) -> tuple[bool, float, int, int, str, str]:
    """CandidatesOrdering between candidates of one ClusterQueue: with admission fair sharing
    (``lq_usage`` set, else 0 for all) the higher LocalQueue usage goes first, before priority.
    Workloads of one LocalQueue have the same usage, so only different LocalQueues (by
    namespace and name) are told apart by it."""
    return (
        not candidate.evicted,
        -candidate.lq_usage,
        candidate.priority,
        -candidate.reserved_at_ms,
        candidate.uid,
        candidate.key,
    )


def _order_before_lq_usage_everywhere(
    candidate: Candidate, preemptor_cq: str
) -> tuple[bool, bool, float, int, int, str, str]:
    """The order of admitter logic 17 and preemptor logic 6 and earlier, for replay: LocalQueue
    usage ordered the candidates of the preemptor's own ClusterQueue only."""
    own = candidate.cluster_queue == preemptor_cq
    return (
        not candidate.evicted,
        own,
        -candidate.lq_usage if own else 0.0,
        candidate.priority,
        -candidate.reserved_at_ms,
        candidate.uid,
        candidate.key,
    )


def ordered(
    items: Iterable[_T],
    preemptor_cq: str,
    *,
    of: Callable[[_T], Candidate],
    lq_usage_in_every_cq: bool = True,
) -> list[_T]:
    """``items`` in Kueue's CandidatesOrdering (common/ordering.go, SEMANTICS §7.4), ``of`` giving
    each one's candidate.

    Kueue compares two candidates by LocalQueue usage (admission fair sharing) only when they are
    in one ClusterQueue, in any ClusterQueue, and by priority and reservation time otherwise. That
    comparison is not transitive when one ClusterQueue's usage order goes against its priorities
    and another ClusterQueue's candidate sits between them; Go's sort then gives an order that
    depends on its input, a map's. Here each ClusterQueue's candidates are ordered among
    themselves (:func:`_within_order`) and those runs merged by :func:`candidate_order`: the same
    order as Kueue's whenever Kueue's is one, deterministic when it is not, and always each
    ClusterQueue's own order (which fair-sharing preemption takes its victims in).

    ``lq_usage_in_every_cq`` False: as admitter logic 17 and preemptor logic 6 and earlier ordered
    (usage only among the preemptor's own ClusterQueue's candidates), for replay."""
    items = list(items)
    if not lq_usage_in_every_cq:
        return sorted(items, key=lambda item: _order_before_lq_usage_everywhere(of(item), preemptor_cq))
    if not any(of(item).lq_usage for item in items):
        # no usage anywhere (admission fair sharing off, or nothing consumed): one sort does
        return sorted(items, key=lambda item: candidate_order(of(item), preemptor_cq))
    runs: dict[str, list[_T]] = {}
    for item in items:
        runs.setdefault(of(item).cluster_queue, []).append(item)
    if len(runs) == 1:
        return sorted(items, key=lambda item: _within_order(of(item)))
    return list(
        heapq.merge(
            *(sorted(run, key=lambda item: _within_order(of(item))) for run in runs.values()),
            key=lambda item: candidate_order(of(item), preemptor_cq),
        )
    )


def fits(tree: QuotaTree, preemptor: Preemptor, *, allow_borrowing: bool) -> bool:
    """preemption.go workloadFits: every FR of the request is available, and without
    borrowing the ClusterQueue stays within its nominal quota."""
    cq = preemptor.cq.metadata.name
    for fr, amount in preemptor.usage.items():
        if not allow_borrowing and tree.nominal(cq, fr) < tree.usage(cq, fr) + amount:
            return False
        if amount > tree.available(cq, fr):
            return False
    return True


def within_nominal(node: Node, frs: Iterable[FR]) -> bool:
    """Kueue's IsWithinNominalInResources: usage does not exceed the subtree quota."""
    return all(node.subtree.get(fr, 0) >= node.usage.get(fr, 0) for fr in frs)


def remove(tree: QuotaTree, candidate: Candidate) -> None:
    """Take ``candidate``'s usage out of the tree (a what-if)."""
    tree.remove_usage(candidate.cluster_queue, candidate.usage)


def restore(tree: QuotaTree, candidate: Candidate) -> None:
    """Put ``candidate``'s usage back."""
    tree.add_usage(candidate.cluster_queue, candidate.usage)


def classical_targets(tree: QuotaTree, pool: CandidatePool, preemptor: Preemptor) -> list[Target]:
    """Kueue's classical target search (SEMANTICS §7.3-§7.6); [] when nothing makes it fit."""
    search = _ClassicalSearch(tree, pool, preemptor)
    return search.run()


def classical_candidates(tree: QuotaTree, pool: CandidatePool, preemptor: Preemptor) -> list[Target]:
    """The workloads the classical search (:func:`classical_targets`) may take for ``preemptor`` in
    ``tree`` as it is, each with the reason it would be preempted for, in the order it tries them:
    those the candidate generator finds (classical/hierarchical_preemption.go: of other ClusterQueues
    only while the preemptor fits below their common cohort, or by priority under
    ``borrowWithinCohort``) and candidateIsValid (classical/candidate_generator.go) accepts in one of
    the attempts preemption.go classicalPreemptions makes. An attempt without borrowing counts only
    when the request could end within the ClusterQueue's nominal quota (workloadFits) with all its
    own candidates taken out; so a ClusterQueue that borrows to fit reclaims from its cohort only
    candidates that ``borrowWithinCohort`` (and its ``maxPriorityThreshold``) allows, or over which
    it has a hierarchical advantage. The victims a search picks are among these."""
    return _ClassicalSearch(tree, pool, preemptor).considered()


@dataclass
class _Elem:
    candidate: Candidate
    variant: int
    lca: Node | None  # for other-CQ candidates: the cohort whose subtree they were found in


class _ClassicalSearch:
    def __init__(self, tree: QuotaTree, pool: CandidatePool, preemptor: Preemptor) -> None:
        self.tree, self.pool, self.p = tree, pool, preemptor
        self.cq_name = preemptor.cq.metadata.name
        self.node = tree.cluster_queues[self.cq_name]
        policy = preemptor.cq.spec.preemption
        self.within = policy.within_cluster_queue
        self.reclaim = policy.reclaim_within_cohort
        borrow = policy.borrow_within_cohort
        self.borrow_forbidden = borrow.policy == "Never"
        self.threshold = borrow.max_priority_threshold

    def _plan(self) -> tuple[list[_Elem], list[bool]]:
        """The candidates in the order the search walks them, and its attempts (allowBorrowing
        values, in order: preemption.go classicalPreemptions)."""
        same = self._same_queue()
        hierarchy, by_priority = self._hierarchical()
        lists = [self._ordered(hierarchy), self._ordered(by_priority), self._ordered(same)]
        walk = [e for group in lists for e in group if e.candidate.evicted]
        walk += [e for group in lists for e in group if not e.candidate.evicted]
        no_other = not hierarchy and not by_priority
        if no_other or (self.borrow_forbidden and not self._under_nominal()):
            attempts = [True]
        elif self.borrow_forbidden and not hierarchy:
            attempts = [False, True]
        else:
            attempts = [True, False]
        return walk, attempts

    def considered(self) -> list[Target]:
        """See :func:`classical_candidates`."""
        walk, attempts = self._plan()
        if False in attempts and not self._may_fit_within_nominal(walk):
            attempts = [a for a in attempts if a]
        return [
            Target(candidate=e.candidate, reason=_VARIANT_REASON[e.variant])
            for e in walk
            if any(self._valid(e, allow_borrowing) for allow_borrowing in attempts)
        ]

    def _may_fit_within_nominal(self, walk: list[_Elem]) -> bool:
        """Whether an attempt without borrowing could end in workloadFits: the request within the
        ClusterQueue's nominal quota even with every candidate of its own taken out."""
        own = [e.candidate for e in walk if e.candidate.cluster_queue == self.cq_name]
        return all(
            self.tree.usage(self.cq_name, fr) - sum(c.usage.get(fr, 0) for c in own) + amount
            <= self.tree.nominal(self.cq_name, fr)
            for fr, amount in self.p.usage.items()
        )

    def run(self) -> list[Target]:
        walk, attempts = self._plan()
        for allow_borrowing in attempts:
            targets: list[_Elem] = []
            for elem in walk:
                if not self._valid(elem, allow_borrowing):
                    continue
                remove(self.tree, elem.candidate)
                targets.append(elem)
                if self._fits(targets, allow_borrowing):
                    kept = self._fill_back(targets, allow_borrowing)
                    for elem_kept in kept:
                        restore(self.tree, elem_kept.candidate)
                    return [Target(candidate=e.candidate, reason=_VARIANT_REASON[e.variant]) for e in kept]
            for elem_taken in targets:
                restore(self.tree, elem_taken.candidate)
        return []

    def _ordered(self, elems: list[_Elem]) -> list[_Elem]:
        return ordered(
            elems, self.cq_name, of=lambda e: e.candidate, lq_usage_in_every_cq=self.pool.lq_usage_in_every_cq
        )

    def _fill_back(self, targets: list[_Elem], allow_borrowing: bool) -> list[_Elem]:
        """Give back, from the second-to-last down, every victim not needed to fit."""
        kept = list(targets)
        for i in range(len(kept) - 2, -1, -1):
            restore(self.tree, kept[i].candidate)
            if self._fits(kept[:i] + kept[i + 1 :], allow_borrowing):
                del kept[i]
            else:
                remove(self.tree, kept[i].candidate)
        return kept

    def _fits(self, removed: list[_Elem], allow_borrowing: bool) -> bool:
        """workloadFits with ``removed`` out: quota, then (TAS) the placement (A.11)."""
        if not fits(self.tree, self.p, allow_borrowing=allow_borrowing):
            return False
        check = self.p.topology_fits
        return check is None or check(frozenset(e.candidate.key for e in removed))

    def _under_nominal(self) -> bool:
        """preemption.go queueUnderNominalInResourcesNeedingPreemption."""
        return all(self.tree.nominal(self.cq_name, fr) > self.tree.usage(self.cq_name, fr) for fr in self.p.frs_need)

    def _variant(self, candidate: Candidate, advantage: bool) -> int:
        """hierarchical_preemption.go classifyPreemptionVariant (0: never)."""
        if not (candidate.flavored & self.p.frs_need):
            return 0
        own = candidate.cluster_queue == self.cq_name
        if not satisfies(self.within if own else self.reclaim, self.p, candidate):
            return 0
        if own:
            return _WITHIN_CQ
        if advantage:
            return _HIERARCHICAL_RECLAIM
        if self.borrow_forbidden:
            return _RECLAIM_WITHOUT_BORROWING
        above = candidate.priority >= self.p.priority or (
            self.threshold is not None and candidate.priority > self.threshold
        )
        return _RECLAIM_WITHOUT_BORROWING if above else _RECLAIM_WHILE_BORROWING

    def _from_cq(self, cq_name: str, lca: Node | None, advantage: bool) -> list[_Elem]:
        out = []
        for candidate in self.pool.of(cq_name):
            variant = self._variant(candidate, advantage)
            if variant:
                out.append(_Elem(candidate=candidate, variant=variant, lca=lca))
        return out

    def _same_queue(self) -> list[_Elem]:
        if self.within == "Never":
            return []
        return self._from_cq(self.cq_name, None, False)

    def _hierarchical(self) -> tuple[list[_Elem], list[_Elem]]:
        """Walk from the ClusterQueue up to the root, collecting other ClusterQueues'
        workloads (SEMANTICS §7.3): found while the request fits below ⇒ hierarchy."""
        hierarchy: list[_Elem] = []
        by_priority: list[_Elem] = []
        if self.node.parent is None or self.reclaim == "Never":
            return hierarchy, by_priority
        # Borrowing forbidden and the ClusterQueue not under nominal: the search makes one attempt,
        # with borrowing allowed, in which no _RECLAIM_WITHOUT_BORROWING candidate is valid (run,
        # _valid), and that is every candidate found before the request fits below: leave them.
        # Most searches of a busy cohort are such (a borrowing ClusterQueue), and walking every
        # other ClusterQueue's workloads was half of their time.
        useless = self.borrow_forbidden and not self._under_nominal()
        advantage, remaining = self._fit_in_quota(self.node, self.p.usage)
        previous: Node | None = None
        ancestor: Node | None = self.node.parent
        while ancestor is not None:
            if advantage or not useless:
                into = hierarchy if advantage else by_priority
                self._collect(ancestor, subtree_root=ancestor, skip=previous, advantage=advantage, into=into)
            fits_here, remaining = self._fit_in_quota(ancestor, remaining)
            advantage = advantage or fits_here
            previous, ancestor = ancestor, ancestor.parent
        return hierarchy, by_priority

    def _fit_in_quota(self, node: Node, requests: dict[FR, int]) -> tuple[bool, dict[FR, int]]:
        """resource_node.go QuantitiesFitInQuota."""
        fits_all = True
        remaining: dict[FR, int] = {}
        for fr, amount in requests.items():
            if node.subtree.get(fr, 0) < node.usage.get(fr, 0) + amount:
                fits_all = False
            remaining[fr] = max(0, amount - node.local_available(fr))
        return fits_all, remaining

    def _collect(
        self, cohort: Node, *, subtree_root: Node, skip: Node | None, advantage: bool, into: list[_Elem]
    ) -> None:
        # Children are visited in name order (Kueue iterates maps; the final sort decides anyway).
        for child in sorted(cohort.children, key=lambda n: (not n.is_cohort, n.name)):
            if child.is_cohort:
                if child is skip or within_nominal(child, self.p.frs_need):
                    continue
                self._collect(child, subtree_root=subtree_root, skip=skip, advantage=advantage, into=into)
            elif child is not self.node and not within_nominal(child, self.p.frs_need):
                into.extend(self._from_cq(child.name, subtree_root, advantage))

    def _valid(self, elem: _Elem, allow_borrowing: bool) -> bool:
        """candidate_generator.go candidateIsValid, re-evaluated as victims are taken."""
        if elem.candidate.cluster_queue == self.cq_name:
            return True
        if allow_borrowing and elem.variant == _RECLAIM_WITHOUT_BORROWING:
            return False
        node = self.tree.cluster_queues[elem.candidate.cluster_queue]
        if within_nominal(node, self.p.frs_need):
            return False
        ancestor = node.parent
        while ancestor is not None and ancestor is not elem.lca:
            if within_nominal(ancestor, self.p.frs_need):
                return False
            ancestor = ancestor.parent
        return True


def preemption_message(preemptor: WorkloadState, reason: str, preemptor_path: str, victim_path: str) -> str:
    """The Evicted/Preempted condition message Kueue writes on a victim (preemption.go
    preemptionMessage)."""
    uid = preemptor.workload.metadata.uid or "UNKNOWN"
    job_uid = preemptor.workload.metadata.labels.get("kueue.x-k8s.io/job-uid", "") or "UNKNOWN"
    return (
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to "
        f"{HUMAN_REASONS.get(reason, 'UNKNOWN')}; preemptor path: {preemptor_path}; preemptee path: {victim_path}"
    )


def cq_path(tree: QuotaTree, cluster_queue: str) -> str:
    """``/root-cohort/.../cq`` as Kueue's buildCQPath writes it."""
    node = tree.cluster_queues.get(cluster_queue)
    parts: list[str] = []
    while node is not None:
        parts.append(node.name)
        node = node.parent
    return "/" + "/".join(reversed(parts)) if parts else f"/{cluster_queue}"
