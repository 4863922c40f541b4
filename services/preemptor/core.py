"""The preemptor's pure core: answer the admitter's nominations with evictions.

The admitter's cycle finds that a head fits only if some workloads are evicted and
logs a PreemptionRequired with those targets (it runs the same target search as
Kueue's scheduler does inline, :mod:`kueue_es.scheduling.preemption`). The preemptor,
folding the same log, owns the evictions: for each open nomination it applies Kueue's
rules again to the state it folds (the log may have moved since the nomination:
workloads finished, victims stopped): quota as Kueue's cache holds it, no eviction when
the workload fits now, else the targets Kueue's search finds now (all three are
:mod:`kueue_es.scheduling.nominations`), and commits a
PreemptionIssued plus one EvictionRequested per victim not already being evicted, with
Kueue's Preempted reason and message (SEMANTICS §7.8; pkg/scheduler/preemption/preemption.go
IssuePreemptions). Its batch is committed on its own head against the same token as the
admitter's (the last sequence on every head of the partition), so the two can never decide on
different views of the quota.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kueue_es.events import models, types
from kueue_es.projections import partitions, quota
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.scheduling import nominations, queues, slices
from kueue_es.scheduling import preemption as targets
from kueue_es.scheduling.search import Search
from kueue_es.scheduling.tas import cycle as tas_cycle

LOGIC_VERSION = 23
"""23: with the gate TopologyAwareScheduling off, no flavor is a TAS flavor: a nomination is checked and its
targets searched on quota alone, a flavor's ``topologyName`` notwithstanding, as Kueue's preemptor with the gate
off since PR #8167 (:class:`~kueue_es.scheduling.tas.cycle.CycleTopology` ``enabled``; admitter logic 50 assigns
flavors the same way). 22: a nomination whose search now finds only victims already being evicted, while the admitter nominated
some not evicted yet, all still holding quota, is answered with the nominated ones (:func:`_nominated_instead`):
the admitter decided it in its cycle's context, after entries that claim those evicted victims for themselves
(Kueue's cycle: their targets in ``preemptedWorkloads``, this entry searched again without them,
scheduler.go ``updateAssignmentIfNeeded``), which a nomination answered alone does not see. 21 and earlier
answered with the evicted victims, evicted nothing new, and the admitter nominated it again next cycle, round
after round until those victims stopped (11-19 answers a baseline run, 0-2 with 22; docs/benchmarks.md "Kueue's
rules in virtual time"). 21: the gate ElasticJobsViaWorkloadSlices is on unless the Configuration sets it false (beta, on by default
since Kueue v0.18), so a replacement slice's nomination asks only its delta with no gate set too; 20 and earlier
took it as off unless set (:func:`kueue_es.scheduling.slices.with_gate_off_unless_set`). 20: with admission fair sharing, a LocalQueue deleted and created again orders the candidates as a new one,
without its earlier history and dropped penalty records (Kueue PR #12891, as the admitter's since its logic 48;
19 and earlier kept them). 19: the TAS domains of the batch's workloads that take quota without evicting anybody are booked too, as Kueue's
scheduler adds such an entry's usage, TAS included, to its snapshot (scheduler.go processEntry cq.AddUsage, netUsage,
flavorassigner.go ComputeTASNetUsage): a nomination that fits now books the domains it takes for the rest of the
batch, and, searching overlapping targets again, each workload the admitter left waiting for the batch's
preemptions (DeferredFit) that fits once they complete takes its domains for that search. 18 and earlier took their
quota only, so a later nomination could be placed on those domains and evict too little. 18: resources.transformations multiply exact quantities and a negative output total counts as zero on its
own, as the admitter's since its logic 38 (Kueue #12953, #14032; 17 and earlier applied them in whole amounts
and summed the outputs into the requests). 17: with the feature gate PriorityBoost on, the kueue.x-k8s.io/priority-boost annotation adds to the effective
priority of the preemptor and its candidates (policies and candidate order, Kueue's EffectivePriority); with
PrioritySortingWithinCohort off, a preemptor preempted InCohortReclaimWhileBorrowing compares its queue time 1 ms
after that preemption (LowerOrNewerEqualPriority; 16 and earlier read neither gate). 16: with the gate ElasticJobsViaWorkloadSlices on, a nomination whose kueue.x-k8s.io/workload-slice-replacement-for
annotation names a slice holding quota asks only what that slice does not hold and never takes it as a victim,
whether or not it carries kueue.x-k8s.io/elastic-job: "true" too, as Kueue's FindReplacedSliceTarget reads the
annotation alone (15 and earlier: only with both; admitter logic 36 nominates such a workload). 15: with admission fair sharing, the LocalQueue usage that orders the candidates counts the entry penalties
of the workloads reserved but not admitted yet (waiting for their admission checks), as Kueue's snapshot does
(ComputeLocalQueueFSUsage; 14 and earlier left them out). 14: resources.quotaCheckStrategy IgnoreUndeclared counts only with the feature gate QuotaCheckStrategy on
(Kueue's IgnoreUndeclaredResources; 13 and earlier applied it whatever the gate said). 13: with the gate ConcurrentAdmission on, the flavors of a workload left waiting for preemptions
(DeferredFit), assigned again when overlapping targets are searched again, are only those its annotation
kueue.x-k8s.io/workload-allowed-resource-flavors names, as the admitter's since its logic 26 (Kueue's
flavorassigner.go findFlavorForPodSets); and a pod set asking for TAS in a ClusterQueue without TAS
flavors gets none, as the admitter's since its logic 29 (12 and earlier read no annotation and let such a
pod set fit without a placement). 12: the target search takes candidates using any flavor-resource of the nomination's TAS pod sets,
not only those short of quota (Kueue's updateModeForTASRequests), and a nomination answered with
targets or as DeferredFit books the domains its TAS pod sets take for the rest of the batch (11 and
earlier searched only the FRs short of quota and booked no topology). 11: under the alpha gate
TASRespectNodeAffinityPreferred, the topology check of a preemption orders TAS domains by the pod set's
preferred node affinity scores first (SEMANTICS-ADVANCED A.3.4; 10 and earlier ignored the gate).
10: with fair sharing, a search that took workloads of the preemptor's own ClusterQueue without
making it fit runs the first strategy again over the candidates it set aside, before the second
strategy (Kueue PR #14128; 9 and earlier went straight to the second strategy, which takes at most
one victim per ClusterQueue and could find no targets at all). 9: searching overlapping targets again, the quota of the workloads the admitter left waiting for
preemptions (DeferredFit, ``ClusterState.deferred``) is taken first, each that fits once the batch's
evictions complete, and so is that of a nomination this batch answers as DeferredFit, as Kueue's
scheduler adds a DeferredFit entry's usage to its snapshot (8 counted only the workloads it evicted for:
with three or more heads on the same victims in one admitter cycle, a later one could evict fewer
workloads than the admitter nominated, and preempt again a cycle later). 8: a nomination whose targets overlap those of a nomination answered before it in the batch is
searched again on the cluster as it will be once those evictions complete (the earlier preempting
workloads' quota counted), as Kueue's scheduler does under the gate
RecomputeAssignmentUponPreemptionTargetsOverlap (on by default): new targets that do not overlap are
evicted, one that then fits evicts nobody (7 and earlier: every overlap was refused). 7: with admission fair sharing, LocalQueue usage orders the candidates of every ClusterQueue, as
Kueue's CandidatesOrdering (6 and earlier: of the preemptor's own ClusterQueue only). 6: a workload that gives its quota back holds no TAS usage either. 5: a nomination is checked on quota as Kueue's cache holds it (finished, deactivated and
stopped workloads hold none), a workload that fits now evicts nobody, and the targets are always
the ones Kueue's search finds on the state evicted on (4 kept the nominated ones while they made
the workload fit, counting the quota of finished workloads not yet released; issue 18)."""
ROLE = "preempt"
EARLIER_LOGIC_VERSIONS = (5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22)
"""Logic versions :func:`decide_as` still re-runs: 22 and earlier took a flavor naming a topology as a TAS flavor
with the gate TopologyAwareScheduling off (23 reads the gate); 21 and earlier answered a nomination with victims all being
evicted already when the admitter nominated others (22 takes the nominated ones); 20 and earlier took the gate ElasticJobsViaWorkloadSlices as
off when the Configuration did not set it (21 as on, Kueue v0.18+'s default); 19 and earlier kept the admission-fair-sharing history of a
LocalQueue deleted and created again (20 leaves it out); 18 and earlier booked the quota of a nomination that fits now
and of the waiting DeferredFit workloads but not their TAS domains (19 books both); 17 and earlier applied resource transformations in whole
amounts (18 in exact quantities); 16 and earlier read neither PriorityBoost nor
PrioritySortingWithinCohort (17 does); 15 and earlier read the workload-slice-replacement-for
annotation only beside elastic-job: "true" (16 reads it alone); 14 and earlier ordered candidates by LocalQueue usage without
pending entry penalties (15 counts them); 13 and earlier applied IgnoreUndeclared with the gate
QuotaCheckStrategy off (14 does not); 12 and earlier ignored the allowed-flavors annotation and
a ClusterQueue's lack of TAS flavors when they assigned flavors again (13 reads both); 11 and earlier searched targets only among the
workloads using the FRs short of quota and booked no TAS domains in a batch (12 does both); 10 and earlier
ignored the gate TASRespectNodeAffinityPreferred (11 honours it); 9 and earlier did not run fair sharing's first
strategy again after taking the preemptor's own ClusterQueue's workloads (10 does); 8 and earlier took no DeferredFit workload's quota
when searching overlapping targets again (9 does, see :data:`LOGIC_VERSION`); 7 and earlier refused every nomination whose targets
overlapped an earlier answer of the batch (8 searches again, see :data:`LOGIC_VERSION`); 6 and 5 ordered
preemption candidates by LocalQueue usage only in the preemptor's own ClusterQueue (7 does in every
ClusterQueue, as Kueue does); 5 also
placed TAS pod sets counting the topology usage of workloads that had given their quota back (6 leaves
it out, as Kueue's cache does)."""


def decide(state: ClusterState, *, now_ms: int, partition: str = partitions.LEGACY) -> list[types.Decision]:
    """Answer every open nomination of ``state`` (oldest first) at ``now_ms`` (ms since the epoch),
    those of ``partition``'s workloads only (issue 18: ``state.partitions.view``; nothing while
    the partition is blocked by a hand-over; ``p0``, the default: every nomination).

    Returns PreemptionIssued and EvictionRequested decisions; empty when no
    nomination waits.
    """
    return _decide(
        state,
        now_ms=now_ms,
        partition=partition,
        released_hold_topology=False,
        lq_usage_in_every_cq=True,
        recompute_overlapping=True,
        deferred_claims=True,
        fair_rerun_after_own=True,
        preferred_affinity=True,
        tas_targets=True,
        allowed_flavors=True,
        needs_tas_flavors=True,
        quota_check_gate=True,
        afs_pending=True,
        replacement_annotation=True,
        ordering_gates=True,
        exact_transformations=True,
        fitting_topology=True,
        afs_fresh=True,
        elastic_default_on=True,
        nominated_when_search_evicts_nothing=True,
        reads_tas_gate=True,
    )


def decide_as(version: int) -> Callable[..., list[types.Decision]]:
    """The ``decide`` of logic ``version`` (one of :data:`EARLIER_LOGIC_VERSIONS`), for replay.
    Raises ValueError for any other version."""
    if version not in EARLIER_LOGIC_VERSIONS:
        raise ValueError(
            f"preemptor logic version {version} is not one this kueue-es re-runs: {EARLIER_LOGIC_VERSIONS}"
        )

    def decide_earlier(state: ClusterState, *, now_ms: int, partition: str = partitions.LEGACY) -> list[types.Decision]:
        """:func:`decide` as logic ``version`` decided: with 22 and earlier, a flavor naming a topology taken as a
        TAS flavor whatever the gate TopologyAwareScheduling said; with 21 and earlier, a nomination answered with victims
        all being evicted already when the admitter nominated others; with 20 and earlier, the gate
        ElasticJobsViaWorkloadSlices off unless the Configuration sets it; with 19 and earlier, a LocalQueue deleted and created
        again keeping its admission-fair-sharing history; with 18 and earlier, the TAS domains of a nomination
        that fits now and of the waiting DeferredFit workloads not booked; with 17 and earlier, resource transformations
        applied in whole amounts; with 16 and earlier, the gates PriorityBoost and
        PrioritySortingWithinCohort not read; with 15 and earlier, the replacement annotation read
        only beside elastic-job: "true"; with 14 and earlier, candidates ordered by LocalQueue
        usage without pending entry penalties; with 13 and earlier, IgnoreUndeclared applied with
        the gate QuotaCheckStrategy off; with 12 and earlier, the allowed-flavors annotation
        and a ClusterQueue's lack of TAS flavors ignored when flavors are assigned again; with 11 and earlier, targets searched only
        on the FRs short of quota and no TAS domains booked; with 10 and earlier, the gate
        TASRespectNodeAffinityPreferred ignored; with 9 and earlier, fair sharing's first
        strategy not run again after the preemptor's own workloads; with 8, overlapping targets searched again
        without the DeferredFit workloads' quota; with 7 and earlier, overlapping targets refused;
        with 6 and 5, LocalQueue usage ordering the preemptor's own ClusterQueue's candidates only;
        with 5, released workloads' TAS usage still counted."""
        return _decide(
            state,
            now_ms=now_ms,
            partition=partition,
            released_hold_topology=version < 6,
            lq_usage_in_every_cq=version >= 7,
            recompute_overlapping=version >= 8,
            deferred_claims=version >= 9,
            fair_rerun_after_own=version >= 10,
            preferred_affinity=version >= 11,
            tas_targets=version >= 12,
            allowed_flavors=version >= 13,
            needs_tas_flavors=version >= 13,
            quota_check_gate=version >= 14,
            afs_pending=version >= 15,
            replacement_annotation=version >= 16,
            ordering_gates=version >= 17,
            exact_transformations=version >= 18,
            fitting_topology=version >= 19,
            afs_fresh=version >= 20,
            elastic_default_on=version >= 21,
            nominated_when_search_evicts_nothing=version >= 22,
            reads_tas_gate=version >= 23,
        )

    return decide_earlier


def _decide(
    state: ClusterState,
    *,
    now_ms: int,
    partition: str,
    released_hold_topology: bool,
    lq_usage_in_every_cq: bool,
    recompute_overlapping: bool,
    deferred_claims: bool,
    fair_rerun_after_own: bool,
    preferred_affinity: bool,
    tas_targets: bool,
    allowed_flavors: bool,
    needs_tas_flavors: bool,
    quota_check_gate: bool,
    afs_pending: bool,
    replacement_annotation: bool,
    ordering_gates: bool,
    exact_transformations: bool,
    fitting_topology: bool,
    afs_fresh: bool,
    elastic_default_on: bool,
    nominated_when_search_evicts_nothing: bool,
    reads_tas_gate: bool,
) -> list[types.Decision]:
    if not state.nominations:
        return []
    if not elastic_default_on:  # 20 and earlier took ElasticJobsViaWorkloadSlices as off unless set
        state = slices.with_gate_off_unless_set(state)
    if not afs_fresh:  # 19 and earlier kept a LocalQueue's history when it was deleted and created again
        state = queues.with_afs_history_kept(state)
    if not ordering_gates:  # 16 and earlier read neither PriorityBoost nor PrioritySortingWithinCohort
        state = queues.without_ordering_gates(state)
    if not quota_check_gate:  # 12 and earlier applied IgnoreUndeclared whatever the gate QuotaCheckStrategy said
        state = queues.without_quota_check_gate(state)
    if not exact_transformations:  # 17 and earlier transformed requests in whole amounts
        state = queues.with_legacy_transformations(state)
    if partition != partitions.LEGACY:
        if state.partitions.blocked(partition):
            return []
        state = state.partitions.view(state, partition)
        if not state.nominations:
            return []
    tree = quota.cached(state)
    tree.begin()
    try:
        out: list[types.Decision] = []
        released = nominations.release_ended(state, tree)
        topology = tas_cycle.CycleTopology(
            state,
            released=() if released_hold_topology else released,
            preferred_affinity=preferred_affinity,
            needs_tas_flavors=needs_tas_flavors,
            reads_tas_gate=reads_tas_gate,
        )
        search = Search(
            state,
            tree,
            now_ms=now_ms,
            tas=topology,
            released=released,
            lq_usage_in_every_cq=lq_usage_in_every_cq,
            fair_rerun_after_own=fair_rerun_after_own,
            allowed_flavors=allowed_flavors,
            afs_pending=afs_pending,
        )
        batch = _Batch(
            recompute_overlapping=recompute_overlapping
            and state.configuration.feature_gates.get("RecomputeAssignmentUponPreemptionTargetsOverlap", True),
            deferred_claims=deferred_claims,
            tas_targets=tas_targets,
            topology_booked=tas_targets,
            replacement_annotation=replacement_annotation,
            fitting_topology=fitting_topology,
            nominated_when_search_evicts_nothing=nominated_when_search_evicts_nothing,
        )
        if batch.recompute_overlapping and deferred_claims:
            batch.waiting = _waiting(state)
        for _key, (seq, nomination) in sorted(state.nominations.items(), key=lambda item: item[1][0]):
            out.extend(_answer(state, tree, search, nomination, seq=seq, batch=batch, now_ms=now_ms))
        return out
    finally:
        tree.rollback()


@dataclass
class _Batch:
    """What the nominations answered so far in one batch leave for the next ones: the workloads
    being evicted (``evicting``: every target chosen, also one whose eviction was requested
    before) and the quota each preempting workload answered will take (``booked``: ClusterQueue
    and usage), as Kueue's scheduler adds a preempting entry's usage to its snapshot.
    ``recompute_overlapping``: targets that overlap ``evicting`` are searched again with those
    workloads gone (preemptor logic 8 under the gate RecomputeAssignmentUponPreemptionTargetsOverlap).
    ``deferred_claims`` (preemptor logic 9): that search takes the quota of the ``waiting`` workloads
    first (:func:`_waiting`), and a nomination answered as DeferredFit books its quota too.
    ``tas_targets`` (preemptor logic 12): the target searches take candidates using any FR of
    the nomination's TAS pod sets, not only those short of quota (:func:`nominations.topology_frs`);
    ``topology_booked`` (preemptor logic 12): a nomination answered with targets, or as DeferredFit,
    books the domains its TAS pod sets take for the rest of the batch (:func:`_book_topology`).
    ``replacement_annotation`` (preemptor logic 16): a nomination's ``workload-slice-replacement-for``
    annotation names the slice it replaces whatever ``elastic-job`` says, as Kueue's ReplacementForKey
    (:func:`slices.replaced_slice`). ``fitting_topology`` (preemptor logic 19): a nomination that fits
    without evictions books its TAS domains (:func:`_book_topology`), and the ``waiting`` workloads take
    theirs in the search again (:func:`nominations.targets_after`)."""

    recompute_overlapping: bool
    deferred_claims: bool = False
    tas_targets: bool = False
    topology_booked: bool = False
    replacement_annotation: bool = False
    fitting_topology: bool = False
    nominated_when_search_evicts_nothing: bool = False
    """Preemptor logic 22: see :func:`_nominated_instead`."""
    evicting: set[str] = field(default_factory=set)
    booked: list[tuple[str, dict[quota.FR, int]]] = field(default_factory=list)
    waiting: list[nominations.Waiting] = field(default_factory=list)


def _waiting(state: ClusterState) -> list[nominations.Waiting]:
    """The workloads the admitter left waiting for preemptions (``state.deferred``), with no open
    nomination of their own (those are answered, and booked, in turn), in key order: Kueue's cycle
    gives them their place among the entries, which the log does not keep."""
    out: list[nominations.Waiting] = []
    for key, cq_name in sorted(state.deferred.items()):
        wl = state.workloads.get(key)
        cq = state.cluster_queues.get(cq_name)
        if wl is None or cq is None or key in state.nominations or wl.reservation is not None:
            continue
        requests = queues.cached_pod_set_requests(wl, cq=cq, config=state.configuration, state=state)
        out.append((wl, cq, requests))
    return out


def _answer(
    state: ClusterState,
    tree: quota.QuotaTree,
    search: Search,
    nomination: types.PreemptionRequired,
    *,
    seq: int,
    batch: _Batch,
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
    old = (
        slices.replaced_slice(state, wl, cq.metadata.name, annotation_alone=batch.replacement_annotation)
        if slices.enabled(state)
        else None
    )
    if old is None:
        return _answer_usage(state, tree, search, nomination, wl, cq, issued, batch=batch, now_ms=now_ms)
    # An elastic replacement slice (SEMANTICS-ADVANCED D.3): its nomination asks the delta over the
    # slice it replaces, which is never its victim.
    with search.excluding(old.key):
        return _answer_usage(state, tree, search, nomination, wl, cq, issued, batch=batch, now_ms=now_ms)


def _answer_usage(
    state: ClusterState,
    tree: quota.QuotaTree,
    search: Search,
    nomination: types.PreemptionRequired,
    wl: WorkloadState,
    cq: models.ClusterQueue,
    issued: types.PreemptionIssued,
    *,
    batch: _Batch,
    now_ms: int,
) -> list[types.Decision]:
    usage = nominations.usage_of(nomination)
    topology_fits = nominations.topology_check(state, search, wl, nomination)
    if nominations.fits_without_preemption(tree, nomination, usage=usage, topology_fits=topology_fits):
        tree.add_usage(cq.metadata.name, usage)  # later nominations of this batch do not count on it
        if batch.fitting_topology:  # nor on its domains: Kueue adds a fitting entry's TAS usage too
            _book_topology(state, search, wl, nomination, removed=frozenset(), batch=batch)
        return [_with(issued, message="the nomination is no longer current: the workload fits without preemption")]
    frs = (
        nominations.topology_frs(state, wl, nomination)
        if batch.tas_targets and topology_fits is not None
        else frozenset()
    )
    chosen = nominations.recomputed_targets(search, wl, cq, usage=usage, topology_fits=topology_fits, topology_frs=frs)
    if not chosen:
        return [_with(issued, message="the nomination is no longer current: no targets make the workload fit")]
    evicting = batch.evicting
    if any(t.workload.key in evicting for t in chosen):
        if not batch.recompute_overlapping:
            return [_with(issued, message=OVERLAP_MESSAGE)]
        # Kueue's scheduler.go updateAssignmentIfNeeded: searched again on the cluster as it will be once
        # this batch's evictions complete, the quota of the workloads preempting for them counted.
        waiting = [w for w in batch.waiting if w[0].key != wl.key]
        again = nominations.targets_after(
            search,
            wl,
            cq,
            usage=usage,
            topology_fits=topology_fits,
            gone=evicting,
            booked=batch.booked,
            waiting=waiting,
            topology_frs=frs,
            fitting_topology=batch.fitting_topology,
        )
        if again is None:
            if batch.deferred_claims:
                batch.booked.append((cq.metadata.name, usage))  # Kueue's DeferredFit: cq.AddUsage
                _book_topology(state, search, wl, nomination, removed=evicting, batch=batch)
            return [_with(issued, message=DEFERRED_MESSAGE)]
        if not again or any(t.workload.key in evicting for t in again):
            return [_with(issued, message=OVERLAP_MESSAGE)]
        chosen = again
        removed = frozenset(evicting) | {t.workload.key for t in chosen}
    else:
        removed = frozenset(t.workload.key for t in chosen)
    if batch.nominated_when_search_evicts_nothing and topology_fits is None:
        nominated = _nominated_instead(state, search, nomination, chosen, claimed=frozenset(batch.evicting))
        if nominated is not None:
            chosen, removed = nominated, removed | {t.workload.key for t in nominated}
    batch.booked.append((cq.metadata.name, usage))
    _book_topology(state, search, wl, nomination, removed=removed, batch=batch)
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


def _nominated_instead(
    state: ClusterState,
    search: Search,
    nomination: types.PreemptionRequired,
    chosen: list[types.PreemptionTarget],
    *,
    claimed: frozenset[str],
) -> list[types.PreemptionTarget] | None:
    """Preemptor logic 22: the nomination's targets, when the search's ``chosen`` are all being evicted
    already (answering with them evicts nothing) while the nomination names some not evicted yet, every one
    of them still a candidate holding quota (not released, the same UID) and none taken by an earlier answer
    of the batch (``claimed``). None otherwise.

    The admitter chose them in its cycle's context: entries before this one took the evicted victims for
    themselves and booked their quota, and Kueue's cycle searches a later entry again with those victims gone
    and that quota taken (scheduler.go ``updateAssignmentIfNeeded``, ``fits``), which a nomination answered
    alone cannot see, so its fit is the admitter's to check, not re-checked here. The workload does not fit
    without preemption (checked before), and the search finds it still needs victims: only which ones is
    the cycle's question."""
    if not nomination.targets or any(state.workloads[t.workload.key].eviction is None for t in chosen):
        return None
    fresh = False
    for target in nomination.targets:
        key = target.workload.key
        candidate = search.pool.candidate(key, target.cluster_queue)
        if candidate is None or candidate.uid != target.workload.uid or key in claimed:
            return None
        fresh = fresh or candidate.workload.eviction is None
    return list(nomination.targets) if fresh else None


def _book_topology(
    state: ClusterState,
    search: Search,
    wl: WorkloadState,
    nomination: types.PreemptionRequired,
    *,
    removed: frozenset[str] | set[str],
    batch: _Batch,
) -> None:
    """Count, for the rest of the batch, the domains the nominated TAS pod sets take once the workloads
    ``removed`` are gone (preemptor logic 12, ``batch.topology_booked``): Kueue's scheduler adds a
    preempting (or DeferredFit) entry's usage to its snapshot, its TAS usage included (scheduler.go
    processEntry ``cq.AddUsage``, netUsage), so a later nomination of the batch whose targets overlap
    is searched again without those domains, as the admitter reserves them (cycle.py ``_process``)."""
    if not batch.topology_booked or not search.tas.active:
        return
    wanted = tas_cycle.reserved_wanted(state, wl, nomination.pod_set_assignments)
    if not wanted:
        return
    placed = search.tas.place(wanted, removed=frozenset(removed))
    if isinstance(placed, tas_cycle.Placed):
        search.tas.add(placed.usage)


OVERLAP_MESSAGE = "the targets overlap another preemption decided in this cycle"
"""A nomination refused because its targets are being evicted for another workload of the batch."""
DEFERRED_MESSAGE = "the workload fits once the preemptions decided in this cycle complete"
"""A nomination answered without evictions: the batch's other evictions make room for it (Kueue's DeferredFit)."""


def _with(issued: types.PreemptionIssued, **changes: object) -> types.PreemptionIssued:
    import msgspec

    return msgspec.structs.replace(issued, **changes)
