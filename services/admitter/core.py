"""The admitter's pure core: one Kueue scheduling cycle over the folded state.

``decide(state, now_ms=...)`` has no I/O, no clock and no randomness, so replay can re-run
it at any recorded basis and get the same bytes. The cycle itself, in Kueue's phases, is
:func:`kueue_es.scheduling.cycle.run`; this module gives it the cycle's quota tree as a
what-if (Kueue's per-cycle snapshot) and names the role and logic version the log records.

Outputs: QuotaReleased (a finished workload's as a FinishedRelease the record carries, logic 15),
QuotaReserved (+ TopologyAssigned) + WorkloadAdmitted or a WorkloadAdmitted alone
(reserved and admitted at once), WorkloadInadmissible,
PreemptionRequired, and the lifecycle's decisions (admission checks, PodsReady, backoff); and
PendingOutcomes, the WorkloadInadmissible decisions that keep a workload's pending reason, which
the cycle's DecisionRecord carries (``runtime.build_batch``, issue 15).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Collection

import msgspec

from kueue_es.events import types
from kueue_es.projections import partitions, quota
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling import cycle, queues, slices

LOGIC_VERSION = 57
ROLE = "admit"
EARLIER_LOGIC_VERSIONS = (
    9,
    10,
    11,
    12,
    13,
    14,
    15,
    16,
    17,
    18,
    19,
    20,
    21,
    22,
    23,
    24,
    25,
    26,
    27,
    28,
    29,
    30,
    31,
    32,
    33,
    34,
    35,
    36,
    37,
    38,
    39,
    40,
    41,
    42,
    43,
    44,
    45,
    46,
    47,
    48,
    49,
    50,
    51,
    52,
    53,
    54,
    55,
    56,
)
"""Logic versions :func:`decide_as` still re-runs, so replay re-checks their logs too. 56 and earlier queued a pod
group's workload whose group lacks pods (the watcher's ``Workload.waiting_for_replacement_pods``, Kueue's
WaitingForReplacementPods True), so one evicted or deactivated and active again was admitted with no pods and held
its quota; from the first record of logic 57 on the log, the fold keeps it out of its queue until its pods are back,
as Kueue's IsAdmissible (:func:`kueue_es.projections.cluster.waits_for_replacement_logic`): ``decide`` itself is
unchanged, a log of 56 and earlier folds and replays as it did. 55 and earlier reset no
admission check when a reservation deactivated by hand before it was admitted was released (one QuotaReleased
``Deactivated`` standing for Kueue's eviction), so a check Ready beside one still Pending stayed Ready and admitted
the workload, active again, once it reserved quota; from the first record of logic 56 on the log, the fold resets
them as Kueue's Evict does (:func:`kueue_es.projections.cluster.resets_checks_on_release`): ``decide`` itself is
unchanged, a log of 55 and earlier folds and replays as it did. 54 and earlier stopped checking
a flavor's resources at the first that did not fit, so a pending message named only that one (55 checks and writes
every resource, as Kueue's findFlavorForPodSets), and gave a NoFit pod set the least severe reason of every problem
of its failing resource group (55 follows Kueue's resolveNoFitReason: a flavor's reason is the most severe of its
resources', none for a resource preemption could serve, a group's the least severe of its flavors': one flavor with
cpu to preempt for and too little memory ever is ExceedsMaxQuota, not WaitingForQuota;
:class:`kueue_es.scheduling.flavors.Picker` ``kueue_no_fit``). 53 and earlier left a check
reported Retry while its workload's eviction was being carried out in Retry, so the workload, once released, was
never nominated again ("The workload has failed admission checks"); from the first record of logic 54 on the log,
the fold resets such a report as that eviction resets every check (Kueue's resetChecksOnEviction,
:func:`kueue_es.projections.cluster.resets_late_retry`): ``decide`` itself is unchanged, a log of 53 and earlier
folds and replays as it did. 52 and earlier wrote a
workload whose namespace its ClusterQueue does not select as "Workload namespace doesn't match ClusterQueue
selector" (53 writes Kueue's ``workload namespace ...``, pkg/workload/resources.go ErrNamespaceMismatch). 51 and earlier left the
workloads parked in a cohort tree parked through the cycle that gave back a finished or deleted workload's quota
there (52 requeues them for that cycle, as Kueue's workload controller does before its next cycle: the freed quota
goes to the queue order's first, not to a workload that happened to be ready; :func:`kueue_es.scheduling.queues.
with_releases`). 50 and earlier admitted into
a ClusterQueue with a TAS flavor whose Topology does not exist (51 takes it as inactive, TopologyNotFound, and
admits nothing there, as Kueue's cache: :func:`kueue_es.scheduling.queues.missing_tas_topologies`). 49 and earlier took a
flavor naming a topology as a TAS flavor with the gate TopologyAwareScheduling off (50 reads the gate: off, no
flavor is a TAS flavor and topology requests are neither checked nor placed, as Kueue's cache and flavor
assigner, :class:`kueue_es.scheduling.tas.cycle.CycleTopology` ``enabled``). 48 and earlier took the
gate ElasticJobsViaWorkloadSlices as off when the Configuration did not set it (49 as on, Kueue's default since
v0.18, beta: a replacement slice of a Configuration without featureGates asks only its delta and pins the
flavors its slice holds; :func:`kueue_es.scheduling.slices.with_gate_off_unless_set`). 47 and earlier kept the
admission-fair-sharing history and the pending entry penalties of a LocalQueue deleted and created again (48
orders it as a new one, its history and dropped penalty records left out, as Kueue drops its ledger entry on
deletion and seeds the new LocalQueue empty, PR #12891: :class:`kueue_es.projections.afs.Ledger` ``carried``). 46
and earlier took a victim
out of the quota tree twice in a preempting TAS entry's staleness check when it was both one of the entry's targets
and a victim of the cycle's earlier preemptions, so its ClusterQueue showed room it does not have and the entry was
assigned again rather than skipped for its overlapping targets (47 takes it out once, as Kueue's scheduler.go fits
since PR #14269). 45 and earlier wrote, in a
pending message, the reasons of the flavors tried before the one that fitted a resource (46 leaves them out, as
Kueue's findFlavorForPodSets returns no status once a flavor fits: "insufficient unused quota for cpu_credits in
flavor credits, 1 more needed" alone when cpu fits on a second flavor), and named only the first member of a pod
set group asking for a resource no resource group covers (46 gives every member its line), and wrote a NoFit
pod set's line alone (46 keeps the lines of the pod sets before it that need preemption, as Kueue's
Assignment.Message). 44 and earlier ignored an
Evicted condition someone other than kueue-es wrote on a Workload holding quota (45 carries out its
WorkloadEvictionObserved: an EvictionRequested ``observed`` with the condition's reason, message and time, the job
stopped and the quota released once it no longer runs, as Kueue's job reconciler, reconciler.go "6. handle
eviction"). 43 and earlier recorded
nothing for a workload set inactive while it held no quota, so it kept its old pending reason, or no status at all
when created inactive (44 records a WorkloadInadmissible ``Deactivated``, for Kueue's Evicted and QuotaReserved
``Deactivated`` on it, and ``PendingEvaluation`` once it is active again, as Kueue's workload controller). 42
and earlier queued a ConcurrentAdmission parent (the label kueue.x-k8s.io/concurrent-admission-parent) like any
workload and admitted a variant whatever its siblings held (43, with the gate ConcurrentAdmission on, never queues a parent, skips a variant
while a more preferred sibling is admitted and evicts a less preferred admitted sibling, reason FlavorMigration,
before admitting one: :mod:`kueue_es.scheduling.concurrent_admission`). 41 and earlier kept the
reservation of a workload not yet admitted whose LocalQueue was gone or whose ClusterQueue was terminating or gone
(42 gives it back, as Kueue's workload controller does, so a deleted ClusterQueue holding only such reservations
goes at once). 40 and earlier wrote the
Misconfigured message of a workload failing Kueue's admissibility checks as its first such pod set's, after ``pod
set <name>: `` (41 writes Kueue's: ``resources validation failed: ...`` or ``resources didn't satisfy LimitRange
constraints: ...``, every pod set's field errors aggregated, as pkg/workload/resources.go
ValidateAdmissibility). 39 and earlier admitted a
workload of a ClusterQueue with a MultiKueue check once the check was Ready, every delayed topology request Ready
with it (40 marks Ready only the pod sets the admitting worker placed, its copy's topologyAssigned, and leaves the
workload unadmitted while another is Pending, as Kueue's updateDelayedTopologyRequest). 38 and earlier released
the quota of a Workload of no job deactivated by hand at once, with no eviction (39 evicts it ``Deactivated``
and releases it once it is stopped, as Kueue's workload controller evicts every inactive workload). 37 and earlier applied
resources.transformations in whole amounts (an output factor rounded up to one unit, a CPU product rounded
down) and summed the generated outputs into the requests before flooring them (38 multiplies exact
quantities and floors a negative output total on its own, as Kueue #12953 and #14032). 36 and earlier read none of
the feature gates PriorityBoost, PrioritySortingWithinCohort and PrioritizePreemptorWorkloads (37 does, as Kueue:
the kueue.x-k8s.io/priority-boost annotation adds to the effective priority that orders queues, entries and
preemption candidates; with PrioritySortingWithinCohort off, entries go by queue time alone and a workload
preempted InCohortReclaimWhileBorrowing queues 1 ms after its preemption; with PrioritizePreemptorWorkloads on, a
workload waiting for its preemptions, a deferred one too, goes first, in the fair-sharing tournament too, and
keeps capacity when it finds no candidates). 35 and earlier took a
Workload for an elastic replacement slice only when it carried kueue.x-k8s.io/elastic-job: "true" beside its
kueue.x-k8s.io/workload-slice-replacement-for annotation (36 reads the replacement annotation alone under the gate
ElasticJobsViaWorkloadSlices, as Kueue's ReplacementForKey: a Workload made by hand with it asks only what the
slice it replaces does not hold, and replaces that slice). 34 and earlier placed the
TAS pod sets of a ClusterQueue with a MultiKueue check on the manager's own nodes (35 delays them all, Pending,
for the worker to place, and admits once the checks are Ready, as Kueue). 33 and earlier recorded a
pending outcome when a NoFit head's spent flavor-scan bookmark expired into none (34 keeps it: both start the
next scan at the first flavor). 32 and earlier ignored the
kueue.x-k8s.io/admission-gated-by annotation (33 keeps such a workload out of its queue, reason AdmissionGated,
while the gate AdmissionGatedBy is on, as Kueue's IsAdmissible). 31 and earlier left the
entry penalty of a workload that reserved quota but waits for its admission checks out of its LocalQueue's
admission-fair-sharing usage (32 counts it until the workload is admitted, as Kueue's pending penalty records
do: another LocalQueue's workload may go first meanwhile). 30 and earlier applied
resources.quotaCheckStrategy IgnoreUndeclared whatever the feature gate QuotaCheckStrategy said (31 applies it
only with the gate on, as Kueue's IgnoreUndeclaredResources). 29 and earlier left the
parked workloads of a cohort tree parked when a workload holding quota there changed priority (30 requeues them,
as Kueue's workload controller does on workload.PriorityChanged: that workload may now be a preemption
candidate). 28 and earlier admitted a
pod set asking for TAS in a ClusterQueue without TAS flavors (a grouped leader requesting nothing whose group
took a non-TAS flavor) without a topology assignment (29 leaves it pending, as Kueue's
tas_flavorassigner.go podSetTopologyRequest: ErrNoTASCacheInformation). 27 and earlier let a
workload with a closed preemption gate preempt (28 does not under the gate MultiKueueOrchestratedPreemption or
ConcurrentAdmission, as Kueue's processEntry: it waits, reason AdmissionGated). 26 and earlier placed
a Fit entry whose topology placement no longer fitted again on the same flavors (never preempting) and a
preempting entry anew when processed, whatever the gate TASRecomputeAssignmentWithinSchedulingCycle said (27
computes a stale entry's assignment again on its nominated flavors, or skips it with the gate off, as Kueue's
scheduler.go updateAssignmentIfNeeded; a preempting entry keeps the placement found at nomination). 25 and
earlier did not read the allowed-flavors annotation kueue.x-k8s.io/workload-allowed-resource-flavors (26 assigns
only the flavors it names when the gate ConcurrentAdmission is on, as Kueue's flavor assigner). 24 and earlier ignored
the alpha gate TASRespectNodeAffinityPreferred (25 orders TAS domains by the pod set's preferred node affinity
scores first, SEMANTICS-ADVANCED A.3.4). 23 and earlier chose
balanced placement's domains above the slice level (gate TASBalancedPlacement) counting single pods (24 counts
whole slices, as Kueue's applyBalancedPlacementAlgorithm: with host slices under a preferred sub-block, 23 could
fall back to BestFit in a sub-block too small for the slices). 22 and earlier wrote
nothing when a second pass (a delayed topology request, A.9) found no placement (23 records a WorkloadInadmissible
``SecondPassFailed`` when its message changes, for Kueue's Warning Event of that reason). 21 and earlier kept
the requeue state of a workload set inactive by hand (22 drops it, as Kueue's workload controller does since
PR #7734: once active again, its backoff is over and its next PodsReady timeout counts from 1). 20 and earlier, with
fair sharing, handed the candidates the first strategy set aside straight to the second strategy after
taking the preemptor's own ClusterQueue's workloads (21 runs the first strategy over them again, as Kueue
does since PR #14128: the preemptor's share has dropped, so they may pass it now). 19 and earlier did
not make a workload waiting for the cycle's preemptions (WaitingForPreemptedWorkloads, Kueue's DeferredFit)
its ClusterQueue's sticky head (20 does, as Kueue's requeue with reason PendingPreemption does: a
higher-priority arrival in its ClusterQueue is not tried before it). 18 and earlier
skipped an entry whose preemption targets overlapped the victims of the cycle's earlier preemptions (19
computes its assignment again with those victims gone, as Kueue's scheduler does under the gate
RecomputeAssignmentUponPreemptionTargetsOverlap, on by default: it preempts new targets in the same cycle,
or waits for those preemptions with its quota set aside) and requeued the parked workloads of a cohort
tree only on a trigger of a cohort above one of its ClusterQueues (19: on any cohort of the tree, as
Kueue requeues a Cohort's whole tree). 17 and earlier
ordered preemption candidates by LocalQueue usage (admission fair sharing) only in the preemptor's own
ClusterQueue (18 does in every ClusterQueue, as Kueue's CandidatesOrdering). 16 and earlier
counted the victims of a cycle's earlier preemptions in a later preempting entry's fit check (17 takes
them out, as Kueue's scheduler does, so two preemptors of a cohort may preempt in one cycle) and ignored
the Configuration's PartialAdmission gate (17: off, no smaller counts are tried). 15 and earlier
released the quota of a running workload deactivated by hand (``spec.active: false``) at once, before its
job was stopped (16 evicts it ``Deactivated`` and releases it once its job has stopped, as Kueue does). 14 and earlier
wrote a finished workload's release as a QuotaReleased message (15 carries it in the cycle's
DecisionRecord, a FinishedRelease: the same decision, folded the same way, issue 18). 13 knew no
elastic slices with TAS (gate ElasticJobsViaWorkloadSlicesWithTAS, issue 21: a replacement slice's TAS
pod sets were placed afresh; 14 keeps the replaced slice's assignment and places the difference). 9 to 12 wrote a
QuotaReserved before every WorkloadAdmitted of a workload they reserved and admitted in one cycle (13
writes the WorkloadAdmitted alone when no check or TAS placement comes between, issue 18). 11 knew no
elastic workload slices (issue 21: a replacement slice was scheduled as any workload). 10 offered a
workload released in the same cycle (evicted, its job stopped) as a preemption candidate, counting
its quota as freed twice in a nomination, and placed TAS pod sets around its topology usage (11
does not: Kueue's cache holds nothing for it, issue 18); it also wrote each WorkloadAdmitted
without its pod set assignments (schema version 1, issue 19). 9 decided as 10 and also wrote every
pending outcome as a WorkloadInadmissible message (issue 15); all of them wrote the pair."""


def decide(state: ClusterState, *, now_ms: int, partition: str = partitions.LEGACY) -> list[types.Output]:
    """One scheduling cycle over ``state`` at ``now_ms`` (ms since the epoch), for ``partition``
    (issue 18): its ClusterQueues, queues and workloads only (``state.partitions.view``), costing
    in proportion to the partition; nothing while it is blocked (an object in transit into it
    waits for its source's fence). ``partitions.LEGACY`` (``p0``, the default): the whole state,
    as every record before partitions decided.

    Returns decisions in a deterministic order; empty when nothing changes.
    """
    return _decide(
        state,
        now_ms=now_ms,
        partition=partition,
        released_are_candidates=False,
        workload_slices=True,
        elastic_tas=True,
        deactivation_evicts=True,
        kueue_multiple_preemptions=True,
        lq_usage_in_every_cq=True,
        recompute_overlapping=True,
        whole_tree_triggers=True,
        deferred_sticky=True,
        fair_rerun_after_own=True,
        inactive_clears_requeue=True,
        second_pass_failed=True,
        balanced_slice_size=True,
        preferred_affinity=True,
        allowed_flavors=True,
        tas_recompute=True,
        preemption_gates=True,
        needs_tas_flavors=True,
        reads_tas_gate=True,
        priority_triggers=True,
        quota_check_gate=True,
        afs_pending=True,
        admission_gated_by=True,
        keep_spent_bookmark=True,
        multikueue_delays_topology=True,
        replacement_annotation=True,
        ordering_gates=True,
        exact_transformations=True,
        jobless_deactivation_evicts=True,
        multikueue_placed_topology=True,
        kueue_misconfigured=True,
        unqueued_releases=True,
        concurrent_admission=True,
        pending_deactivation=True,
        evicted_by_others=True,
        fit_clears_reasons=True,
        kueue_no_fit=True,
        victims_once=True,
        afs_fresh=True,
        elastic_default_on=True,
        tas_topologies=True,
        release_requeues=True,
        kueue_namespace_message=True,
    )


def _decide(
    state: ClusterState,
    *,
    now_ms: int,
    partition: str,
    released_are_candidates: bool,
    workload_slices: bool,
    elastic_tas: bool,
    deactivation_evicts: bool,
    kueue_multiple_preemptions: bool,
    lq_usage_in_every_cq: bool,
    recompute_overlapping: bool,
    whole_tree_triggers: bool,
    deferred_sticky: bool,
    fair_rerun_after_own: bool,
    inactive_clears_requeue: bool,
    second_pass_failed: bool,
    balanced_slice_size: bool,
    preferred_affinity: bool,
    allowed_flavors: bool,
    tas_recompute: bool,
    preemption_gates: bool,
    needs_tas_flavors: bool,
    reads_tas_gate: bool,
    priority_triggers: bool,
    quota_check_gate: bool,
    afs_pending: bool,
    admission_gated_by: bool,
    keep_spent_bookmark: bool,
    multikueue_delays_topology: bool,
    replacement_annotation: bool,
    ordering_gates: bool,
    exact_transformations: bool,
    jobless_deactivation_evicts: bool,
    multikueue_placed_topology: bool,
    kueue_misconfigured: bool,
    unqueued_releases: bool,
    concurrent_admission: bool,
    pending_deactivation: bool,
    evicted_by_others: bool,
    fit_clears_reasons: bool,
    kueue_no_fit: bool,
    victims_once: bool,
    afs_fresh: bool,
    elastic_default_on: bool,
    tas_topologies: bool,
    release_requeues: bool,
    kueue_namespace_message: bool,
) -> list[types.Output]:
    if not elastic_default_on:  # 48 and earlier took ElasticJobsViaWorkloadSlices as off unless set
        state = slices.with_gate_off_unless_set(state)
    if not afs_fresh:  # 47 and earlier kept a LocalQueue's history when it was deleted and created again
        state = queues.with_afs_history_kept(state)
    if not ordering_gates:  # 36 and earlier read none of the gates PriorityBoost, PrioritySortingWithinCohort and
        state = queues.without_ordering_gates(state)  # PrioritizePreemptorWorkloads
    if not quota_check_gate:  # 30 and earlier applied IgnoreUndeclared whatever the gate QuotaCheckStrategy said
        state = queues.without_quota_check_gate(state)
    if not exact_transformations:  # 37 and earlier transformed requests in whole amounts
        state = queues.with_legacy_transformations(state)
    if partition != partitions.LEGACY:
        if state.partitions.blocked(partition):
            return []
        state = state.partitions.view(state, partition)
    tree = quota.cached(state)
    tree.begin()  # the cycle's releases and admissions are what-ifs until they come back through the log
    # A cycle's records are short-lived and make no reference cycles: the collector would only walk
    # the folded state, again and again (a fifth of the cycle's time in ``kueue-es bench core``).
    # It runs as usual once the cycle is over. Nothing a decision holds depends on it.
    collecting = gc.isenabled()
    if collecting:
        gc.disable()
    try:
        return cycle.run(
            state,
            tree=tree,
            now_ms=now_ms,
            released_are_candidates=released_are_candidates,
            workload_slices=workload_slices,
            elastic_tas=elastic_tas,
            deactivation_evicts=deactivation_evicts,
            kueue_multiple_preemptions=kueue_multiple_preemptions,
            lq_usage_in_every_cq=lq_usage_in_every_cq,
            recompute_overlapping=recompute_overlapping,
            whole_tree_triggers=whole_tree_triggers,
            deferred_sticky=deferred_sticky,
            fair_rerun_after_own=fair_rerun_after_own,
            inactive_clears_requeue=inactive_clears_requeue,
            second_pass_failed=second_pass_failed,
            balanced_slice_size=balanced_slice_size,
            preferred_affinity=preferred_affinity,
            allowed_flavors=allowed_flavors,
            tas_recompute=tas_recompute,
            preemption_gates=preemption_gates,
            needs_tas_flavors=needs_tas_flavors,
            reads_tas_gate=reads_tas_gate,
            priority_triggers=priority_triggers,
            afs_pending=afs_pending,
            admission_gated_by=admission_gated_by,
            keep_spent_bookmark=keep_spent_bookmark,
            multikueue_delays_topology=multikueue_delays_topology,
            replacement_annotation=replacement_annotation,
            jobless_deactivation_evicts=jobless_deactivation_evicts,
            multikueue_placed_topology=multikueue_placed_topology,
            kueue_misconfigured=kueue_misconfigured,
            unqueued_releases=unqueued_releases,
            concurrent_admission=concurrent_admission,
            pending_deactivation=pending_deactivation,
            evicted_by_others=evicted_by_others,
            fit_clears_reasons=fit_clears_reasons,
            kueue_no_fit=kueue_no_fit,
            victims_once=victims_once,
            tas_topologies=tas_topologies,
            release_requeues=release_requeues,
            kueue_namespace_message=kueue_namespace_message,
        )
    finally:
        tree.rollback()
        if collecting:
            gc.enable()


def answered_by_others(state: ClusterState) -> Collection[str]:
    """The workload keys of the open nominations in ``state``: the preemptor answers them next, so the
    admitter's runner holds its cycles briefly while one is new (``runtime.Decider.yields_to``)."""
    return state.nominations.keys()


def decide_as(version: int) -> Callable[..., list[types.Output]]:
    """The ``decide`` of logic ``version`` (one of :data:`EARLIER_LOGIC_VERSIONS`), for replay.

    Versions 9 to 56 decide as 57: what 57 changed is the fold's, keyed on the log's admitter logic (a pod group
    waiting for replacement pods kept out of its queue, :func:`kueue_es.projections.cluster.waits_for_replacement_logic`);
    so do 9 to 55 as 56 (:func:`kueue_es.projections.cluster.resets_checks_on_release`).
    Versions 9 to 54 stopped at a flavor's first resource that did not fit and took the least severe reason of every
    problem of a NoFit pod set's failing resource group (``kueue_no_fit`` False).
    Versions 9 to 53 decide as 54: what 54 changed is the fold's, keyed on the log's admitter logic (a check reported
    Retry during its workload's eviction reset with it, :func:`kueue_es.projections.cluster.resets_late_retry`).
    Versions 9 to 52 capitalised the namespace mismatch message (``Workload namespace doesn't match ...``).
    Versions 9 to 51 left a cohort tree's parked workloads parked through the cycle that released quota there.
    Versions 9 to 50 admitted into a ClusterQueue with a TAS flavor whose Topology does not exist.
    Versions 9 to 49 took a flavor naming a topology as a TAS flavor with the gate TopologyAwareScheduling off.
    Versions 9 to 48 took the gate ElasticJobsViaWorkloadSlices as off when the Configuration did not set it.
    Versions 9 to 47 kept the admission-fair-sharing history of a LocalQueue deleted and created again.
    Versions 9 to 46 took a victim that was both a target and an earlier victim of the cycle out twice in the
    TAS staleness check.
    Versions 9 to 45 kept the reasons of flavors tried before a fitting one in pending messages, named only
    a pod set group's first member for an uncovered resource and wrote a NoFit pod set's line alone.
    Versions 9 to 44 ignored an Evicted condition someone else wrote on a Workload holding quota.
    Versions 9 to 43 recorded nothing for a workload set inactive while it held no quota.
    Versions 9 to 41 kept a reservation not yet admitted whose LocalQueue was gone or ClusterQueue terminating.
    Versions 9 to 40 wrote a misconfigured workload's message as its first pod set's, after ``pod set <name>: ``.
    Versions 9 to 38 released a jobless Workload deactivated by hand at once, with no eviction.
    Versions 9 to 37 applied resource transformations in whole amounts.
    Versions 9 to 36 read none of the ordering gates (PriorityBoost, PrioritySortingWithinCohort and the rest).
    Versions 9 to 35 read the workload-slice-replacement-for annotation only beside elastic-job: "true".
    Versions 9 to 34 placed a MultiKueue ClusterQueue's TAS pod sets on the manager's nodes.
    Versions 9 to 33 recorded a pending outcome when a spent flavor-scan bookmark expired.
    Versions 9 to 32 ignored the admission-gated-by annotation.
    Versions 9 to 31 left pending entry penalties out of a LocalQueue's admission-fair-sharing usage.
    Versions 9 to 30 applied IgnoreUndeclared with the gate QuotaCheckStrategy off.
    Versions 9 to 29 did not requeue parked workloads when a workload holding quota changed priority.
    Versions 9 to 28 admitted a pod set asking for TAS in a ClusterQueue without TAS flavors.
    Versions 9 to 27 let a workload with a closed preemption gate preempt.
    Versions 9 to 26 placed a stale TAS entry again on its flavors rather than computing its assignment
    again (or skipping it with the gate TASRecomputeAssignmentWithinSchedulingCycle off).
    Versions 9 to 25 did not read the allowed-flavors annotation. Versions 9 to 24 ignored the gate TASRespectNodeAffinityPreferred. Versions 9 to 23 chose balanced placement's domains above the slice level in single pods. Versions 9 to 22 wrote nothing for a failed second pass. Versions 9 to 21 kept the requeue state of a workload set inactive by hand. Versions 9 to 20 did not run fair sharing's first strategy again after taking the preemptor's own
    ClusterQueue's workloads. Versions 9 to 19 did not make a workload waiting for the cycle's preemptions its ClusterQueue's sticky
    head. Versions 9 to 18 skipped an entry whose preemption targets overlapped earlier victims of the cycle, and
    requeued parked workloads only on triggers of cohorts above their ClusterQueues. Versions 9 to 17 ordered
    preemption candidates by LocalQueue usage in the preemptor's own ClusterQueue only. Versions 9 to 16
    counted earlier victims of the cycle in a preempting entry's fit check and ignored the PartialAdmission
    gate. Versions 9 to 15 released a workload deactivated by hand at once, its job still running (16 evicts
    it first). Versions 9 to 14 wrote a finished workload's release as a QuotaReleased message (15: a
    FinishedRelease in the record). Versions 9 to 12 wrote a QuotaReserved before the WorkloadAdmitted of a workload reserved and
    admitted in the same cycle (13 writes the WorkloadAdmitted alone). Version 13 decided as 14
    without elastic slices with TAS (A.14). Version 11 decided as 12
    without elastic workload slices. Versions 9 and 10 offered a workload the cycle releases as a
    preemption candidate and
    counted its topology usage (see :data:`EARLIER_LOGIC_VERSIONS`), and wrote each
    WorkloadAdmitted without its pod set assignments (schema version 1, before issue 19); 9
    also wrote each pending outcome as a WorkloadInadmissible message at the cycle's
    ``now_ms`` (before issue 15; the fold takes a PendingOutcome as the WorkloadInadmissible it
    stands for, so the state, and every later cycle, is the same). Raises ValueError for any
    other version.
    """
    if version not in EARLIER_LOGIC_VERSIONS:
        raise ValueError(f"admitter logic version {version} is not one this kueue-es re-runs: {EARLIER_LOGIC_VERSIONS}")
    inline_pending = version == 9
    inline_released = version < 15
    released_are_candidates = version < 11
    workload_slices = version >= 12
    elastic_tas = version >= 14
    deactivation_evicts = version >= 16
    kueue_multiple_preemptions = version >= 17
    lq_usage_in_every_cq = version >= 18
    recompute_overlapping = version >= 19
    deferred_sticky = version >= 20
    fair_rerun_after_own = version >= 21
    inactive_clears_requeue = version >= 22
    second_pass_failed = version >= 23
    balanced_slice_size = version >= 24
    allowed_flavors = version >= 26
    tas_recompute = version >= 27
    preemption_gates = version >= 28
    priority_triggers = version >= 30
    quota_check_gate = version >= 31
    afs_pending = version >= 32
    admission_gated_by = version >= 33
    keep_spent_bookmark = version >= 34
    multikueue_delays_topology = version >= 35
    replacement_annotation = version >= 36
    ordering_gates = version >= 37
    exact_transformations = version >= 38
    jobless_deactivation_evicts = version >= 39
    multikueue_placed_topology = version >= 40
    kueue_misconfigured = version >= 41
    unqueued_releases = version >= 42
    concurrent_admission = version >= 43
    pending_deactivation = version >= 44
    evicted_by_others = version >= 45
    fit_clears_reasons = version >= 46
    victims_once = version >= 47
    afs_fresh = version >= 48
    elastic_default_on = version >= 49
    tas_topologies = version >= 51
    release_requeues = version >= 52

    def decide_earlier(state: ClusterState, *, now_ms: int, partition: str = partitions.LEGACY) -> list[types.Output]:
        """:func:`decide` as logic ``version`` decided and wrote it."""
        outputs: list[types.Output] = []
        for out in _decide(
            state,
            now_ms=now_ms,
            partition=partition,
            released_are_candidates=released_are_candidates,
            workload_slices=workload_slices,
            elastic_tas=elastic_tas,
            deactivation_evicts=deactivation_evicts,
            kueue_multiple_preemptions=kueue_multiple_preemptions,
            lq_usage_in_every_cq=lq_usage_in_every_cq,
            recompute_overlapping=recompute_overlapping,
            whole_tree_triggers=recompute_overlapping,
            deferred_sticky=deferred_sticky,
            fair_rerun_after_own=fair_rerun_after_own,
            inactive_clears_requeue=inactive_clears_requeue,
            second_pass_failed=second_pass_failed,
            balanced_slice_size=balanced_slice_size,
            preferred_affinity=version >= 25,
            allowed_flavors=allowed_flavors,
            tas_recompute=tas_recompute,
            preemption_gates=preemption_gates,
            needs_tas_flavors=version >= 29,
            reads_tas_gate=version >= 50,
            priority_triggers=priority_triggers,
            quota_check_gate=quota_check_gate,
            afs_pending=afs_pending,
            admission_gated_by=admission_gated_by,
            keep_spent_bookmark=keep_spent_bookmark,
            multikueue_delays_topology=multikueue_delays_topology,
            replacement_annotation=replacement_annotation,
            ordering_gates=ordering_gates,
            exact_transformations=exact_transformations,
            jobless_deactivation_evicts=jobless_deactivation_evicts,
            multikueue_placed_topology=multikueue_placed_topology,
            kueue_misconfigured=kueue_misconfigured,
            unqueued_releases=unqueued_releases,
            concurrent_admission=concurrent_admission,
            pending_deactivation=pending_deactivation,
            evicted_by_others=evicted_by_others,
            fit_clears_reasons=fit_clears_reasons,
            kueue_no_fit=version >= 55,
            victims_once=victims_once,
            afs_fresh=afs_fresh,
            elastic_default_on=elastic_default_on,
            tas_topologies=tas_topologies,
            release_requeues=release_requeues,
            kueue_namespace_message=version >= 53,
        ):
            if version < 13 and isinstance(out, types.WorkloadAdmitted):
                held = state.workloads.get(out.workload.key)
                if types.reserves(out, held is not None and held.reservation is not None):
                    outputs.append(types.reservation_of(out))  # the pair, as these versions wrote it
            if version < 11 and isinstance(out, types.WorkloadAdmitted):
                out = msgspec.structs.replace(out, pod_set_assignments=msgspec.UNSET)
            elif inline_pending and isinstance(out, types.PendingOutcome):
                out = out.inadmissible(at_ms=now_ms)
            elif inline_released and isinstance(out, types.FinishedRelease):
                out = out.quota_released()
            outputs.append(out)
        return outputs

    return decide_earlier
