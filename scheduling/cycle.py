"""The admission cycle: one Kueue scheduling cycle over the folded state, as a pure function.

Why this module exists: the admitter service only wires :func:`run` to the log; the rules of
the cycle live here, next to the rest of Kueue's rules. No I/O, no clock and no randomness, so
replay can re-run it at any recorded basis and get the same bytes. The cycle follows Kueue's
scheduler (pkg/scheduler/scheduler.go, SEMANTICS §4), in phases:

1. release the quota of workloads that finished, were deleted or deactivated, or
   whose eviction completed; apply stop policies to workloads holding quota (§10.1);
2. build the quota tree (cohorts, borrowing and lending limits, SEMANTICS §6);
3. heads: per active ClusterQueue, the first queued workload in Kueue's order
   (priority, creation time, UID; SEMANTICS §3.2); parked workloads wait until
   something that could let them fit happens (§3.6);
4. nominate: assign flavors to each head against the cycle's snapshot (§5;
   :mod:`kueue_es.scheduling.search`);
5. order the entries (non-borrowing first, then priority, then time; §4.4.1;
   :mod:`kueue_es.scheduling.entries`) and admit each that still fits, counting earlier
   admissions of the cycle (§4.5).

TAS (SEMANTICS-ADVANCED A.5, A.9, A.10): the placement is committed as a TopologyAssigned with
the QuotaReserved; a pod set whose topology is delayed by a ProvisioningRequest check gets it in
the second pass, decided in the lifecycle phase before the first-pass entries.

Outputs: QuotaReleased (a finished workload's: a :class:`~kueue_es.events.types.FinishedRelease`,
which the cycle's DecisionRecord carries, issue 18), QuotaReserved (+ TopologyAssigned) + WorkloadAdmitted (a WorkloadAdmitted alone
when neither a check nor a TAS placement comes between), WorkloadInadmissible
(always when a BestEffortFIFO head is parked; otherwise only when the message changes). A pending
workload's reason is recorded on its own subject only when it changes (issue 15): a
WorkloadInadmissible whose reason is the one the log already holds for the workload (a head tried
again and parked again, a new "N more needed") is a :class:`~kueue_es.events.types.PendingOutcome`,
which the cycle's DecisionRecord carries and every reader folds as that WorkloadInadmissible.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence

import msgspec

from kueue_es.events import models, types
from kueue_es.projections import quota
from kueue_es.projections.cluster import (
    ON_HOLD_REASON,
    PRIORITIZE_PREEMPTORS_GATE,
    ClusterState,
    WorkloadState,
    pods_ready_enabled,
)
from kueue_es.scheduling import concurrent_admission as ca
from kueue_es.scheduling import flavors, lifecycle, preemption, queues, slices
from kueue_es.scheduling.entries import Entry, ordered, pod_set_assignments
from kueue_es.scheduling.search import Search
from kueue_es.scheduling.tas import cycle as tas_cycle


def run(
    state: ClusterState,
    *,
    tree: quota.QuotaTree,
    now_ms: int,
    released_are_candidates: bool = False,
    workload_slices: bool = True,
    elastic_tas: bool = True,
    deactivation_evicts: bool = True,
    kueue_multiple_preemptions: bool = True,
    lq_usage_in_every_cq: bool = True,
    recompute_overlapping: bool = True,
    whole_tree_triggers: bool = True,
    deferred_sticky: bool = True,
    fair_rerun_after_own: bool = True,
    priority_triggers: bool = True,
    inactive_clears_requeue: bool = True,
    second_pass_failed: bool = True,
    balanced_slice_size: bool = True,
    preferred_affinity: bool = True,
    allowed_flavors: bool = True,
    tas_recompute: bool = True,
    preemption_gates: bool = True,
    needs_tas_flavors: bool = True,
    reads_tas_gate: bool = True,
    afs_pending: bool = True,
    admission_gated_by: bool = True,
    keep_spent_bookmark: bool = True,
    multikueue_delays_topology: bool = True,
    replacement_annotation: bool = True,
    jobless_deactivation_evicts: bool = True,
    multikueue_placed_topology: bool = True,
    kueue_misconfigured: bool = True,
    unqueued_releases: bool = True,
    concurrent_admission: bool = True,
    pending_deactivation: bool = True,
    evicted_by_others: bool = True,
    fit_clears_reasons: bool = True,
    kueue_no_fit: bool = True,
    victims_once: bool = True,
    tas_topologies: bool = True,
    release_requeues: bool = True,
    kueue_namespace_message: bool = True,
) -> list[types.Output]:
    """One scheduling cycle over ``state`` at ``now_ms`` (ms since the epoch), booking its
    releases and admissions in ``tree`` (the caller rolls them back: they are what-ifs until
    they come back through the log). Decisions in a deterministic order; empty when nothing
    changes.

    A workload the cycle releases holds nothing in Kueue's cache (SEMANTICS §6.4): it is no
    preemption candidate and its topology usage is left out of TAS placement.
    ``released_are_candidates`` keeps admitter logic 10's behaviour for replay, which still
    offered an evicted, stopped workload as a candidate (so counting its quota as freed
    twice) and placed around its topology usage.

    Elastic slices (SEMANTICS-ADVANCED D.3, when the Configuration turns
    ElasticJobsViaWorkloadSlices on; ``workload_slices`` False: admitter logic 11, before them):
    a head that replaces a slice holding quota in its ClusterQueue is tried with that slice's
    usage out of the tree, that slice out of the candidates and its flavors pinned; admitted, it
    releases that slice (``WorkloadSliceReplaced``) in the same batch. With the gate
    ElasticJobsViaWorkloadSlicesWithTAS (``elastic_tas`` False: admitter logic 13, before it;
    SEMANTICS-ADVANCED A.14) its TAS pod sets keep that slice's topology assignment and only the
    pods it grew by are placed.

    ``preferred_affinity`` (admitter logic 25; False: 24 and earlier, for replay): under the alpha
    gate TASRespectNodeAffinityPreferred, TAS placement orders domains by the pod set's preferred
    node affinity scores first (SEMANTICS-ADVANCED A.3.4); False ignores the gate.

    ``kueue_misconfigured`` (admitter logic 41; False: 40 and earlier, for replay): a workload failing
    Kueue's admissibility checks is pending Misconfigured with Kueue's message, every pod set's errors
    aggregated (:func:`queues.misconfigured_message`); False writes its first pod set's, after ``pod set
    <name>: ``.

    ``needs_tas_flavors`` (admitter logic 29; False: 28 and earlier, for replay): a pod set asking for
    TAS in a ClusterQueue without TAS flavors stays pending (Kueue's ErrNoTASCacheInformation,
    :meth:`~kueue_es.scheduling.tas.cycle.CycleTopology.wanted`); False admits it without a placement.

    ``reads_tas_gate`` (admitter logic 50; False: 49 and earlier, for replay): with the gate
    TopologyAwareScheduling off, no flavor is a TAS flavor and no topology request is checked or placed
    (:class:`~kueue_es.scheduling.tas.cycle.CycleTopology`); False treated a flavor naming a topology as a
    TAS flavor whatever the gate said.

    A workload whose ``spec.active`` was set false by hand while its job runs is evicted first
    (``Deactivated``, "The workload is deactivated"), and keeps its quota until its job stops
    (workload_controller.go evicts it; the job reconciler clears the reservation once the job is
    stopped); ``deactivation_evicts`` False (admitter logic 15 and earlier, for replay) released it
    at once, before its job was stopped. A Workload of no job deactivated while it holds quota (admitted
    or waiting for its checks) is evicted the same way and keeps its quota until whoever plays its job
    clears its QuotaReserved condition (a WorkloadStopped), as Kueue's workload controller evicts any
    inactive workload and no job reconciler releases a jobless one; ``jobless_deactivation_evicts``
    False (admitter logic 38 and earlier, for replay) released it at once, with no eviction.

    ``fit_clears_reasons`` (admitter logic 46; False: 45 and earlier, for replay): a pending message leaves
    out the reasons of the flavors tried before one that fits its resource, a resource no resource group
    covers names every member of its pod set group, and a NoFit message keeps the lines of the pod sets before it
    that need preemption, as Kueue's flavorassigner.go findFlavorForPodSets (a nil status on Fit), assignFlavors
    (the group's status on each member) and Assignment.Message (:class:`~kueue_es.scheduling.flavors.Picker`).

    ``kueue_no_fit`` (admitter logic 55; False: 54 and earlier, for replay): a flavor's resources are all checked,
    and each one's reasons written in the pending message, even after one does not fit (Kueue's
    findFlavorForPodSets returns from its per-resource closure only), and a NoFit pod set's QuotaReserved reason
    is Kueue's resolveNoFitReason: per flavor the most severe of its resources', none for a resource preemption
    could still serve; per resource group the least severe of its flavors'; the most severe of the groups'
    (:class:`~kueue_es.scheduling.flavors.Picker`). False stopped at a flavor's first resource that did not fit
    and took the least severe reason of every problem of the failing group, so a ClusterQueue with cpu to preempt
    for and too little memory ever gave WaitingForQuota (Kueue: ExceedsMaxQuota).

    ``victims_once`` (admitter logic 47; False: 46 and earlier, for replay): the TAS staleness check of a
    preempting entry (:func:`_placement_stale`) takes a victim out of the tree once when it is both one of the
    entry's targets and one of the cycle's earlier victims, as Kueue's scheduler.go fits does since PR #14269
    (PreemptedWorkloads.MergeWithTargets); False took it out twice, so the victim's ClusterQueue showed more
    room than there is and an entry whose quota did not fit was taken for stale and assigned again.
    ``kueue_multiple_preemptions`` (admitter logic 17; False: 16 and earlier, for replay): a preempting
    entry's fit check takes the victims of the cycle's earlier preemptions out too, as Kueue's
    scheduler.go fits does, so two preemptors in a cohort may both preempt in one cycle; the
    Configuration's PartialAdmission gate, off, stops the search for smaller counts (scheduler.go
    getInitialAssignments); and pending messages are Kueue's (a pod set's reasons sorted and joined
    with ", ", flavors.Picker).

    ``lq_usage_in_every_cq`` (admitter logic 18; False: 17 and earlier, for replay): with admission fair
    sharing, LocalQueue usage orders the preemption candidates of every ClusterQueue, as Kueue's
    CandidatesOrdering, not only those of the preemptor's own (``preemption.ordered``).

    ``recompute_overlapping`` (admitter logic 19; False: 18 and earlier, for replay): an entry whose
    preemption targets overlap the victims of the cycle's earlier preemptions has its assignment computed
    again with those victims gone, on its nominated flavors, as Kueue's scheduler.go
    updateAssignmentIfNeeded does under the gate RecomputeAssignmentUponPreemptionTargetsOverlap (on by
    default; the Configuration may turn it off): new targets that do not overlap are preempted in the same
    cycle, and an entry that then fits waits for those preemptions with its quota set aside for the rest of
    the cycle (DeferredFit, :func:`_process`).

    ``whole_tree_triggers`` (admitter logic 19; False: 18 and earlier, for replay): a requeue trigger on
    any cohort of a tree, also one with no ClusterQueue under it, brings back the parked workloads of the
    whole tree, as Kueue requeues a Cohort's whole tree (18 and earlier: only a trigger on a cohort above
    one of the tree's ClusterQueues; ``queues.plan``).

    ``priority_triggers`` (admitter logic 30; False: 29 and earlier, for replay): a workload holding quota
    whose WorkloadPriorityClass or priority changes brings back the parked workloads of its cohort tree, as
    Kueue's workload controller does on workload.PriorityChanged (``queues.plan``): it may now be a
    preemption candidate.

    ``deferred_sticky`` (admitter logic 20; False: 19 and earlier, for replay): a workload left waiting for
    the cycle's preemptions (DeferredFit, ``state.deferred``) is its ClusterQueue's sticky head in later
    cycles, as Kueue's requeue with reason PendingPreemption makes it (``queues.sticky_preemptors``).

    ``fair_rerun_after_own`` (admitter logic 21; False: 20 and earlier, for replay): with fair sharing, a
    target search that took workloads of the preemptor's own ClusterQueue without making it fit runs the
    first strategy again over the candidates it set aside, as Kueue does since PR #14128
    (``fairsharing.fair_targets``).

    ``inactive_clears_requeue`` (admitter logic 22; False: 21 and earlier, for replay): a workload set
    inactive by hand drops its requeue state, as Kueue does since PR #7734 (``lifecycle.decide``).

    ``second_pass_failed`` (admitter logic 23; False: 22 and earlier, for replay): a second pass that finds
    no placement is recorded, a WorkloadInadmissible with reason ``SecondPassFailed`` when its message
    changes (:func:`_second_pass_failed`).

    ``balanced_slice_size`` (admitter logic 24; False: 23 and earlier, for replay): balanced placement
    (gate TASBalancedPlacement) picks its domains above the slice level by whole slices, as Kueue's
    applyBalancedPlacementAlgorithm (``scheduling.tas.balanced``).

    ``allowed_flavors`` (admitter logic 26; False: 25 and earlier, for replay): with the gate
    ConcurrentAdmission on, a workload annotated kueue.x-k8s.io/workload-allowed-resource-flavors is
    assigned only the flavors it names, as Kueue's flavor assigner skips the others
    (``flavors.allowed_by_annotation``).

    ``tas_recompute`` (admitter logic 27; False: 26 and earlier, for replay): an entry whose nominated
    topology placement no longer fits after the cycle's earlier entries, its quota still fitting, has its
    assignment computed again on its nominated flavors, as Kueue's scheduler.go updateAssignmentIfNeeded
    does under the gate TASRecomputeAssignmentWithinSchedulingCycle (on by default): it may then fit
    elsewhere, or preempt; with the gate off it is skipped (:func:`_process`). A preempting entry's
    placement is the one found at nomination with its targets gone (scheduler.go updateAssignmentForTAS)
    and is what it reserves (26 and earlier placed it again when processed, and never skipped it).

    ``preemption_gates`` (admitter logic 28; False: 27 and earlier, for replay): under the gate
    MultiKueueOrchestratedPreemption or ConcurrentAdmission, an entry that would preempt while one of its
    preemption gates is closed preempts nothing and waits (:func:`_process`).

    ``afs_pending`` (admitter logic 32; False: 31 and earlier, for replay): under admission fair sharing, a
    LocalQueue's usage in the queue order and in the order of preemption candidates counts the entry penalties
    of its workloads that reserved quota and wait for their admission checks, as Kueue's pending penalty
    records do (``queues.lq_usage``, ``preemption.CandidatePool``).

    ``keep_spent_bookmark`` (admitter logic 34; False: 33 and earlier, for replay): a NoFit head whose
    bookmark left nothing pending (the scan-exhausted marker) keeps it when that bookmark expires and the
    new scan again leaves nothing pending: both start the next scan at the first flavor, so no pending
    outcome is recorded for the change (33 and earlier recorded one, a cycle or two after the run had
    otherwise settled).

    ``multikueue_delays_topology`` (admitter logic 35; False: 34 and earlier, for replay): in a ClusterQueue
    with a MultiKueue check every TAS pod set's topology request is delayed (``Pending``) and never placed
    on the manager; the workload is admitted once its checks are Ready, the MultiKueue check marking the
    delayed requests Ready (tas_flavorassigner.go podSetTopologyRequest, multikueue/workload.go
    updateDelayedTopologyRequest). 34 and earlier placed them on the manager's own nodes.

    ``multikueue_placed_topology`` (admitter logic 40; False: 39 and earlier, for replay): the MultiKueue
    check Ready marks Ready only the delayed requests of the pod sets the admitting worker placed, and the
    workload waits for the others (:func:`lifecycle.decide`); 35 to 39 admitted it with them all Ready.

    ``replacement_annotation`` (admitter logic 36; False: 35 and earlier, for replay): with
    ElasticJobsViaWorkloadSlices on, a head whose ``kueue.x-k8s.io/workload-slice-replacement-for``
    annotation names a slice replaces it whether or not it also carries ``elastic-job: "true"``, as
    Kueue's scheduler reads the annotation alone (workloadslicing.go ReplacementForKey); 35 and earlier
    scheduled such a Workload made by hand as a workload of its own (:func:`slices.replaced_slice`).

    ``unqueued_releases`` (admitter logic 42; False: 41 and earlier, for replay): a reservation not yet admitted
    (its checks not all Ready) whose LocalQueue is gone, or whose ClusterQueue is terminating or gone, is
    given back (:func:`_unqueued_reservations`), as Kueue's workload controller does; 41 and earlier kept it,
    so a deleted ClusterQueue stayed Terminating until the workload finished.

    ``concurrent_admission`` (admitter logic 43; False: 42 and earlier, for replay): with the gate
    ConcurrentAdmission on, a parent Workload is not queued (``queues.plan``), a variant is skipped while a
    sibling on a more preferred flavor is admitted (PendingEvaluation, "A more favorable variant is already
    admitted", parked), and a variant that fits while a sibling on a less preferred flavor is admitted does
    not reserve: that sibling is evicted, reason ``FlavorMigration`` (once), and the variant waits
    (WaitingForPreemptedWorkloads) until its quota is released (scheduler.go processEntry,
    issueMigration; :mod:`kueue_es.scheduling.concurrent_admission`).

    ``tas_topologies`` (admitter logic 51; False: 50 and earlier, for replay): a ClusterQueue with a TAS flavor
    whose Topology does not exist is inactive (``TopologyNotFound``) and admits nothing, as Kueue's cache
    (clusterqueue.go isTASViolated; :func:`kueue_es.scheduling.queues.missing_tas_topologies`); 50 and earlier
    admitted into it.

    ``pending_deactivation`` (admitter logic 44; False: 43 and earlier, for replay): a workload set inactive while
    it holds no quota (created with ``spec.active: false``, deactivated while pending, or released after its
    deactivation) gets a WorkloadInadmissible ``Deactivated`` "The workload is deactivated", as Kueue's workload
    controller evicts every inactive workload and writes that QuotaReserved reason (workload_controller.go
    Reconcile, resolveGranularUnadmittedQuotaReservedCondition); once active again, one with that reason still
    in force and decided on by nothing else in the cycle gets ``PendingEvaluation``, as Kueue writes before its
    scheduler looks at it again; one pending ``AdmissionGated`` whose annotation was removed gets
    ``PendingEvaluation`` "AdmissionGatedBy cleared, waiting for quota reservation" before the next cycle tries it,
    for Kueue's Event ``AdmissionGateCleared`` (:func:`_activation_outcomes`). 43 and earlier recorded nothing,
    so such a workload kept the status it had until the scheduler's next verdict, if any.

    ``evicted_by_others`` (admitter logic 45; False: 44 and earlier, for replay): a workload holding quota whose
    Evicted condition someone other than kueue-es set True (a WorkloadEvictionObserved, ``state.evicted_by_others``)
    is evicted with that condition's reason, message and time, ``observed`` (:func:`_observed_evictions`), and keeps
    its quota until its job stops, as Kueue's job reconciler carries out an Evicted condition whoever wrote it
    (jobframework/reconciler.go "6. handle eviction"); 44 and earlier ignored the condition.

    ``kueue_namespace_message`` (admitter logic 53; False: 52 and earlier, for replay): see
    :func:`kueue_es.scheduling.queues.plan`.
    ``release_requeues`` (admitter logic 52; False: 51 and earlier, for replay): the quota the cycle gives back
    first (finished, deleted and drained workloads) requeues the workloads parked in those ClusterQueues' cohort
    trees for this very cycle (:func:`kueue_es.scheduling.queues.with_releases`), as Kueue requeues them while
    the workload leaves its cache, before its next cycle; 51 and earlier left them parked until the release's
    record was folded, so a workload that happened to be ready (requeued earlier, not tried since) took the
    freed quota ahead of them, whatever the queue order (admission fair sharing, priority) said."""
    decisions: list[types.Output] = []
    released: list[str] = []
    for key in sorted(state.releasable):
        wl = state.workloads[key]
        assert wl.reservation is not None
        if deactivation_evicts and _stops_before_release(wl, jobless=jobless_deactivation_evicts):
            if wl.eviction is None:
                decisions.append(
                    types.EvictionRequested(
                        workload=wl.ref,
                        cluster_queue=wl.reservation.cluster_queue,
                        reason=DEACTIVATED,
                        message=DEACTIVATED_MESSAGE,
                        at_ms=now_ms,
                    )
                )
            continue  # its quota stays held until its job is stopped (a WorkloadStopped)
        decisions.append(_release(wl, now_ms=now_ms))
        released.append(key)
        tree.shift_reservation(
            wl.reservation.cluster_queue, quota.reservation_usage(wl.held or wl.reservation), sign=-1
        )
    touched: set[str] = set()  # workloads already decided on in this cycle's first phases
    drained: list[types.Decision] = [*_unqueued_reservations(state, now_ms=now_ms)] if unqueued_releases else []
    drained_keys = {_workload_key(d) for d in drained}
    drained += [d for d in _drain_stopped_queues(state, now_ms=now_ms) if _workload_key(d) not in drained_keys]
    if pending_deactivation and state.activation_due:
        drained += _activation_outcomes(state, early=True, now_ms=now_ms)
    if evicted_by_others and state.evicted_by_others:
        drained_keys = {_workload_key(d) for d in (*decisions, *drained)}
        drained += [d for d in _observed_evictions(state) if _workload_key(d) not in drained_keys]
    for decision in drained:
        decisions.append(decision)
        touched.add(_workload_key(decision))
        if isinstance(decision, types.QuotaReleased):
            wl = state.workloads[decision.workload.key]
            assert wl.reservation is not None
            released.append(decision.workload.key)
            tree.shift_reservation(decision.cluster_queue, quota.reservation_usage(wl.held or wl.reservation), sign=-1)
    cycle = tas_cycle.CycleTopology(
        state,
        released=() if released_are_candidates else released,
        elastic_slices=elastic_tas,
        balanced_slice_size=balanced_slice_size,
        preferred_affinity=preferred_affinity,
        needs_tas_flavors=needs_tas_flavors,
        reads_tas_gate=reads_tas_gate,
    )
    if state.checks_due or state.timed or state.backoffs:
        failed_passes: list[types.Decision] = []

        def second_pass(wl: WorkloadState) -> types.TopologyAssigned | None:
            """SEMANTICS-ADVANCED A.9: placed before the cycle's first-pass entries (Kueue
            processes second-pass entries first), so later entries see its usage."""
            result = tas_cycle.second_pass(cycle, wl, now_ms=now_ms)
            if isinstance(result, tas_cycle.PlacementFailure) and second_pass_failed:
                failed_passes.extend(_second_pass_failed(wl, result, now_ms=now_ms))
            return result if isinstance(result, types.TopologyAssigned) else None

        for decision in [
            *lifecycle.decide(
                state,
                now_ms=now_ms,
                second_pass=second_pass,
                inactive_clears_requeue=inactive_clears_requeue,
                multikueue_delays_topology=multikueue_delays_topology,
                multikueue_placed_topology=multikueue_placed_topology,
            ),
            *failed_passes,
        ]:
            if _workload_key(decision) not in touched:
                decisions.append(decision)
        touched.update(_workload_key(d) for d in decisions)
    plan = queues.plan(
        state,
        tree=tree,
        now_ms=now_ms,
        whole_tree_triggers=whole_tree_triggers,
        deferred_sticky=deferred_sticky,
        priority_triggers=priority_triggers,
        afs_pending=afs_pending,
        admission_gated_by=admission_gated_by,
        kueue_misconfigured=kueue_misconfigured,
        concurrent_admission=concurrent_admission,
        tas_topologies=tas_topologies,
        released_in=_cluster_queues_of(state, released) if release_requeues else (),
        kueue_namespace_message=kueue_namespace_message,
    )
    for wl, why in plan.unqueued:
        if why is queues.PARENT:
            continue  # ConcurrentAdmission: its variants are queued, the controller writes its status
        decisions.extend(_inadmissible(wl, why.reason, why.message, parked=why.parked, now_ms=now_ms))
    search = Search(
        state,
        tree,
        now_ms=now_ms,
        tas=cycle,
        released=() if released_are_candidates else released,
        kueue_reasons=kueue_multiple_preemptions,
        fit_clears_reasons=fit_clears_reasons,
        kueue_no_fit=kueue_no_fit,
        lq_usage_in_every_cq=lq_usage_in_every_cq,
        fair_rerun_after_own=fair_rerun_after_own,
        allowed_flavors=allowed_flavors,
        afs_pending=afs_pending,
    )
    search.partial_admission = not kueue_multiple_preemptions or state.configuration.feature_gates.get(
        "PartialAdmission", True
    )
    search.multikueue_delays_topology = multikueue_delays_topology
    cycle_no = state.admit_cycles + 1  # this cycle's number, should it commit anything (SEMANTICS §5.3)
    entries: list[Entry] = []
    orders = plan.orders
    shared = state.caches.get("admitter.requests")
    if shared is None:
        shared = state.caches["admitter.requests"] = {}
    cluster_queues, config, preemptors, nominations = (
        state.cluster_queues,
        state.configuration,
        state.preemptors,
        state.nominations,
    )
    # PrioritizePreemptorWorkloads (alpha): Kueue's preemptors, the deferred ones too, go first and keep capacity
    kueue_preemptors = bool(config.feature_gates.get(PRIORITIZE_PREEMPTORS_GATE, False))
    deferred = state.deferred
    # replacement head key -> the slice it replaces and the head's requests (per pod, pinned)
    replacing: dict[str, tuple[WorkloadState, list[flavors.PodSetRequest]]] = {}
    requests_of: dict[str, list[flavors.PodSetRequest]] = {}  # head key -> its requests, for a recomputation
    elastic = workload_slices and slices.enabled(state)
    for cq_name, head in plan.heads.items():
        if touched and head.key in touched:
            continue  # deactivated or requeued just now: decided again next cycle
        old = (
            # a slice names the one it replaces by an annotation: a workload with none replaces nothing
            slices.replaced_slice(state, head, cq_name, annotation_alone=replacement_annotation)
            if elastic and head.workload.metadata.annotations
            else None
        )
        cq = cluster_queues[cq_name]
        if head.checks and lifecycle.failed_checks(head, cq):
            # SEMANTICS §4.3 step 2: not nominated while a check is in Retry or Rejected.
            message = lifecycle.FAILED_CHECKS_MESSAGE
            decisions.extend(_inadmissible(head, "PendingEvaluation", message, parked=True, now_ms=now_ms))
            continue
        requests = head.requests_memo  # queues.cached_pod_set_requests, its memo checked here first
        if (
            requests is None
            or head.requests_memo_workload is not head.workload
            or head.requests_memo_cq is not cq
            or head.requests_memo_config is not config
            or head.requests_memo_devices != state.devices_version
        ):
            requests = queues.cached_pod_set_requests(head, cq=cq, config=config, shared=shared, state=state)
        if old is not None:
            requests = slices.pinned(requests, old)
            replacing[head.key] = (old, requests)
        requests_of[head.key] = requests
        with search.excluding(old.key, replaced=old) if old is not None else _NOTHING_EXCLUDED:
            if head.bookmark is None:
                assignment, victims = search.assignments(head, requests, cq=cq)
                bookmark = (
                    _bookmark(assignment, cq_name, state=state, cycle=cycle_no) if assignment.pending_flavors else None
                )
            else:
                start = bookmark_in_force(head, cq_name, state=state, cycle=cycle_no)
                exhausted = start is not None and not start.tried
                assignment, victims = search.assignments(head, requests, cq=cq, start=None if exhausted else start)
                bookmark = _bookmark(assignment, cq_name, state=state, cycle=cycle_no)
                if exhausted:
                    bookmark = start  # ours: no progress until the generation moves (note above bookmark_in_force)
                elif start is not None:
                    bookmark = _resumed(bookmark, start, cq, state=state, cycle=cycle_no)
        if assignment.mode == "NoFit":
            if keep_spent_bookmark and bookmark is None and head.bookmark is not None and not head.bookmark.pending:
                bookmark = head.bookmark  # spent either way: the next scan starts at the first flavor
            # SEMANTICS §3.5: a BestEffortFIFO head is parked unless flavors remain to be tried.
            parked = cq.spec.queueing_strategy == "BestEffortFIFO" and (bookmark is None or not bookmark.pending)
            reason = assignment.reason or "NoMatchingFlavor"
            decisions.extend(
                _inadmissible(head, reason, assignment.message, parked=parked, now_ms=now_ms, bookmark=bookmark)
            )
            continue
        nominated = (head.key in preemptors or head.key in nominations) if preemptors or nominations else False
        if kueue_preemptors and not nominated and deferred:
            # Kueue's IsPreemptor: a workload requeued PendingPreemption, DeferredFit too (queues.sticky_preemptors)
            nominated = deferred.get(head.key) == cq_name
        # The fold keeps the queue order key in step with the priority and queue time (cluster._place), and the
        # plan puts a workload an ordering gate moves in its place (queues._in_effective_order), so it is the
        # entry's too: -order[0] is cluster.effective_order's, the priority boost included.
        order = orders[cq_name]
        # Positional (workload, cq, assignment, priority, order, targets, nominated, bookmark): one per head.
        targets = tuple(victims) if victims else ()
        if tas_recompute and targets:
            assignment = _with_nominated_placement(assignment, targets, cycle=search.tas)
        entries.append(Entry(head, cq, assignment, -order[0], order, targets, nominated, bookmark))
    # The victims of the cycle's preemptions so far (a replaced elastic slice: None, it is gone already)
    chosen: dict[str, preemption.Candidate | None] = {}
    recompute: Callable[[Entry], Entry] | None = None
    if recompute_overlapping and config.feature_gates.get("RecomputeAssignmentUponPreemptionTargetsOverlap", True):

        def recompute(entry: Entry) -> Entry:
            """The entry assigned again with the cycle's earlier victims gone (see :func:`run`)."""
            head, cq = entry.workload, entry.cq
            nominated = {ps.name: ps.flavors for ps in entry.assignment.pod_sets}
            pinned = [
                dataclasses.replace(ps, nominated_flavors=dict(nominated.get(ps.name, {})))
                for ps in requests_of[head.key]
            ]
            earlier = [key for key, candidate in chosen.items() if candidate is not None]
            replaced = replacing.get(head.key)
            with (
                search.excluding(replaced[0].key, replaced=replaced[0]) if replaced is not None else _NOTHING_EXCLUDED,
                search.without(earlier),
            ):
                assignment, victims = search.assignments(head, pinned, cq=cq)
                if tas_recompute and victims:
                    assignment = _with_nominated_placement(
                        assignment, victims, cycle=search.tas, gone=frozenset(earlier)
                    )
            bookmark = _bookmark(assignment, cq.metadata.name, state=state, cycle=cycle_no)
            return msgspec.structs.replace(entry, assignment=assignment, targets=tuple(victims), bookmark=bookmark)

    recompute_tas: Callable[[Entry], Entry] | None = None
    if tas_recompute and config.feature_gates.get("TASRecomputeAssignmentWithinSchedulingCycle", True):

        def recompute_tas(entry: Entry) -> Entry:
            """The entry assigned again on its nominated flavors, the cycle's earlier admissions and
            reservations counted (Kueue's TAS recomputation, see :func:`_process`)."""
            head, cq = entry.workload, entry.cq
            nominated = {ps.name: ps.flavors for ps in entry.assignment.pod_sets}
            pinned = [
                dataclasses.replace(ps, nominated_flavors=dict(nominated.get(ps.name, {})))
                for ps in requests_of[head.key]
            ]
            replaced = replacing.get(head.key)
            with search.excluding(replaced[0].key, replaced=replaced[0]) if replaced is not None else _NOTHING_EXCLUDED:
                assignment, victims = search.assignments(head, pinned, cq=cq)
                if victims:
                    assignment = _with_nominated_placement(assignment, victims, cycle=search.tas)
            bookmark = _bookmark(assignment, cq.metadata.name, state=state, cycle=cycle_no)
            return msgspec.structs.replace(entry, assignment=assignment, targets=tuple(victims), bookmark=bookmark)

    gate = _PodsReadyGate(state)
    gated = preemption_gates and preemption_gates_enforced(config)
    migrate: Callable[[Entry], list[types.Output] | None] | None = None
    families: dict[str, list[ca.Sibling]] = {}
    if concurrent_admission and ca.enabled(config.feature_gates):
        families = ca.families(
            (k, w.workload, w.admitted) for k, w in state.workloads.items() if ca.parent_uid(w.workload)
        )

        def migrate(entry: Entry) -> list[types.Output] | None:
            """The migration of a variant that fits (see above), None when it has no admitted less preferred sibling."""
            wl = entry.workload
            family = families.get(ca.parent_uid(wl.workload))
            if not family:
                return None
            sibling = ca.less_favorable_admitted(wl.key, wl.workload, family, ca.flavor_order(entry.cq))
            if sibling is None:
                return None
            out: list[types.Output] = []
            victim = state.workloads[sibling.key]
            if victim.eviction is None and victim.reservation is not None:
                message = (
                    f"Evicted to accommodate a workload (UID: {wl.workload.metadata.uid}) due to migration to more "
                    "favorable resource flavor"
                )
                out.append(
                    types.EvictionRequested(
                        workload=victim.ref,
                        cluster_queue=victim.reservation.cluster_queue,
                        reason=ca.FLAVOR_MIGRATION,
                        message=message,
                        at_ms=now_ms,
                    )
                )
            message = "Pending the migration of 1 workload(s)"
            out.extend(_inadmissible(wl, "WaitingForPreemptedWorkloads", message, parked=False, now_ms=now_ms))
            return out

    for entry in ordered(entries, state=state, tree=tree):
        if families and (family := families.get(ca.parent_uid(entry.workload.workload))):
            if ca.more_favorable_admitted(
                entry.workload.key, entry.workload.workload, family, ca.flavor_order(entry.cq)
            ):
                decisions.extend(
                    _inadmissible(
                        entry.workload, "PendingEvaluation", ca.MORE_FAVORABLE_MESSAGE, parked=True, now_ms=now_ms
                    )
                )
                continue
        replaced = replacing.get(entry.workload.key) if replacing else None
        if replaced is not None:
            decisions.extend(
                _process_replacement(
                    entry,
                    *replaced,
                    state=state,
                    tree=tree,
                    chosen=chosen,
                    gate=gate,
                    cycle=search.tas,
                    now_ms=now_ms,
                    earlier_victims_gone=kueue_multiple_preemptions,
                    recompute=recompute,
                    tas_recompute=tas_recompute,
                    recompute_tas=recompute_tas,
                    preemption_gates=gated,
                    reserve_for_preemptors=kueue_preemptors,
                    victims_once=victims_once,
                )
            )
            continue
        decisions.extend(
            _process(
                entry,
                state=state,
                tree=tree,
                chosen=chosen,
                gate=gate,
                cycle=search.tas,
                now_ms=now_ms,
                earlier_victims_gone=kueue_multiple_preemptions,
                recompute=recompute,
                tas_recompute=tas_recompute,
                recompute_tas=recompute_tas,
                preemption_gates=gated,
                reserve_for_preemptors=kueue_preemptors,
                migrate=migrate,
                victims_once=victims_once,
            )
        )
    if pending_deactivation and state.activation_due:
        decided = {_workload_key(d) for d in decisions}
        decisions += [
            d for d in _activation_outcomes(state, early=False, now_ms=now_ms) if _workload_key(d) not in decided
        ]
    return decisions


PENDING_EVALUATION = "PendingEvaluation"
"""Kueue's QuotaReserved=False reason of a workload waiting for its scheduler (WorkloadQuotaReservedReasonPendingEvaluation)."""
ADMISSION_GATE_CLEARED_MESSAGE = "AdmissionGatedBy cleared, waiting for quota reservation"
"""Kueue's QuotaReserved=False message once a workload's admission-gated-by annotation is removed
(workload_controller.go mayUpdateConditionForAdmissionGatedBy)."""
PENDING_EVALUATION_MESSAGE = "Workload is pending evaluation in the scheduling queue"
"""Kueue's QuotaReserved=False message for a workload back in its queue, not yet looked at by the scheduler
(workload_controller.go resolveGranularUnadmittedQuotaReservedCondition)."""


def _activation_outcomes(state: ClusterState, *, early: bool, now_ms: int) -> list[types.Decision]:
    """The pending outcomes of the workloads of ``state.activation_due``, in the index's order (the fold's).

    ``early`` (before the cycle's heads): an inactive one is evicted ``Deactivated`` "The workload is deactivated"
    (Kueue's workload controller evicts every inactive workload, workload_controller.go Reconcile); one whose
    admission-gated-by annotation is gone gets ``PendingEvaluation`` "AdmissionGatedBy cleared, waiting for quota
    reservation" and is left to the next cycle's heads, as Kueue writes it before its scheduler looks at it
    (mayUpdateConditionForAdmissionGatedBy). Otherwise (after the heads, for those no verdict reached): an active
    one whose pending reason is still ``Deactivated`` goes back to ``PendingEvaluation`` (Kueue's
    resolveGranularUnadmittedQuotaReservedCondition)."""
    out: list[types.Decision] = []
    for key in state.activation_due:
        wl = state.workloads.get(key)
        if wl is None or wl.reservation is not None:
            continue
        if not wl.workload.spec.active:
            reason, message = DEACTIVATED, DEACTIVATED_MESSAGE
            if not early:
                continue
        elif wl.pending_reason == DEACTIVATED:
            reason, message = PENDING_EVALUATION, PENDING_EVALUATION_MESSAGE
            if early:
                continue
        else:  # its admission gate cleared (ClusterState.activation_due)
            reason, message = PENDING_EVALUATION, ADMISSION_GATE_CLEARED_MESSAGE
            if not early:
                continue
        out.append(
            types.WorkloadInadmissible(
                workload=wl.ref, reason=reason, message=message, at_ms=now_ms, parked=False, bookmark=wl.bookmark
            )
        )
    return out


def preemption_gates_enforced(config: models.Configuration) -> bool:
    """Whether a closed preemption gate stops a workload from preempting: under the feature gate
    MultiKueueOrchestratedPreemption or ConcurrentAdmission, both alpha and off by default (Kueue
    pkg/scheduler/scheduler.go processEntry)."""
    gates = config.feature_gates
    return gates.get("MultiKueueOrchestratedPreemption", False) or gates.get("ConcurrentAdmission", False)


_NOTHING_EXCLUDED = contextlib.nullcontext()
"""The head loop's context when the head replaces no elastic slice (one object, reused: a
nullcontext holds nothing)."""


def _process_replacement(
    entry: Entry,
    old: WorkloadState,
    requests: list[flavors.PodSetRequest],
    *,
    state: ClusterState,
    tree: quota.QuotaTree,
    chosen: dict[str, preemption.Candidate | None],
    gate: _PodsReadyGate,
    cycle: tas_cycle.CycleTopology,
    now_ms: int,
    earlier_victims_gone: bool = True,
    recompute: Callable[[Entry], Entry] | None = None,
    tas_recompute: bool = False,
    recompute_tas: Callable[[Entry], Entry] | None = None,
    preemption_gates: bool = False,
    reserve_for_preemptors: bool = False,
    victims_once: bool = True,
) -> list[types.Output]:
    """:func:`_process` for a replacement slice (SEMANTICS-ADVANCED D.3): it asks the delta, checked
    against usage that still counts the slice it replaces, so once booked the tree holds the new
    slice's full counts for the rest of the cycle; a replacement that gets quota reserves its full
    counts and releases that slice, finished ``WorkloadSliceReplaced``, in the same batch."""
    out = _process(
        entry,
        state=state,
        tree=tree,
        chosen=chosen,
        gate=gate,
        cycle=cycle,
        now_ms=now_ms,
        replaced=old.key,
        earlier_victims_gone=earlier_victims_gone,
        recompute=recompute,
        tas_recompute=tas_recompute,
        recompute_tas=recompute_tas,
        preemption_gates=preemption_gates,
        reserve_for_preemptors=reserve_for_preemptors,
        victims_once=victims_once,
    )
    reserved = next((o for o in out if isinstance(o, types.QuotaReserved)), None)
    if reserved is None:  # reserved and admitted at once: one WorkloadAdmitted stands for both (_admit)
        admitted = next((o for o in out if isinstance(o, types.WorkloadAdmitted)), None)
        if admitted is None:
            return out
        reserved = types.reservation_of(admitted)
    chosen[old.key] = None  # not a victim of a later entry of this cycle: it is gone
    full = slices.full_usage(reserved, requests)
    replaced: list[types.Output] = []
    for o in out:
        if isinstance(o, types.QuotaReserved):
            o = full
        elif isinstance(o, types.WorkloadAdmitted):
            o = types.admitted(full, at_ms=now_ms)
        replaced.append(o)
    return [*replaced, slices.replaced(old, cause_seq=entry.workload.observed_seq, now_ms=now_ms)]


def _workload_key(decision: types.Output) -> str:
    """The key of the workload a decision of this cycle is about (every one names one)."""
    assert not isinstance(decision, types.DecisionRecord)
    return decision.workload.key


class _PodsReadyGate:
    """waitForPodsReady.blockAdmission (SEMANTICS §4.5 step 10, SEMANTICS-ADVANCED C.4): no
    admission while any workload holding quota, in any ClusterQueue, is not PodsReady. Kueue
    blocks its scheduler until they are; here the entry waits (reason WaitingForPodsReady)
    and is tried again in a later cycle, and one admission closes the gate for the rest of
    the cycle (its pods are not ready yet either)."""

    MESSAGE = "waiting for all admitted workloads to be in PodsReady condition"

    def __init__(self, state: ClusterState) -> None:
        config = state.configuration
        wait = config.wait_for_pods_ready
        self.enabled = wait is not None and wait.block_admission and pods_ready_enabled(config)
        self.closed = self.enabled and bool(state.not_ready)

    def admitted(self) -> None:
        """An entry was admitted in this cycle."""
        self.closed = self.enabled


UNQUEUED_REASONS = ("LocalQueueMissing", "ClusterQueueTerminating")
"""The QuotaReleased reasons of :func:`_unqueued_reservations`: the workload's LocalQueue is gone, its
ClusterQueue terminating or gone (the dispatcher writes Kueue's "<kind> <name> is terminating or missing")."""


def _unqueued_reservations(state: ClusterState, *, now_ms: int) -> list[types.QuotaReleased]:
    """The reservations to give back because the workload's queue is going (admitter logic 42).

    Kueue's workload controller (pkg/controller/core/workload_controller.go reconcileOnLocalQueueActiveState,
    reconcileOnClusterQueueActiveState) unsets the quota reservation of a workload that holds quota but is not
    admitted when its LocalQueue is terminating or missing, or its ClusterQueue is: nothing would admit it
    there, and the reservation would keep the ClusterQueue's resource-in-use finalizer on. An admitted workload
    keeps its quota (the ClusterQueue stays Terminating until it ends). The LocalQueue is checked first, as
    Kueue does. Returns QuotaReleased decisions (reason one of :data:`UNQUEUED_REASONS`) in workload order.

    The workloads are found once per change of the queue objects (``state.objects_version``): a workload is
    never reserved into a ClusterQueue that is terminating or through a LocalQueue that is gone, so only a
    change of those objects makes new ones.
    """
    kept = state.caches.get("admitter.unqueued")
    if kept is not None and kept[0] == state.objects_version:
        found: list[tuple[str, str]] = kept[1]
    else:
        found = []
        for cq_name in sorted(state.reserved):
            cq = state.cluster_queues.get(cq_name)
            cq_going = cq is None or cq.terminating
            for key in sorted(state.reserved[cq_name]):
                held = state.workloads[key]
                lq_key = (held.workload.metadata.namespace, held.workload.spec.queue_name)
                if lq_key not in state.local_queues:
                    found.append((key, "LocalQueueMissing"))
                elif cq_going:
                    found.append((key, "ClusterQueueTerminating"))
        state.caches["admitter.unqueued"] = (state.objects_version, found)
    out: list[types.QuotaReleased] = []
    for key, reason in found:
        wl = state.workloads.get(key)
        if wl is None or wl.reservation is None or wl.admitted or wl.gone or wl.eviction is not None:
            continue
        if key in state.releasable:
            continue
        cq_name = wl.reservation.cluster_queue
        cause_seq = max(state.requeue_triggers.get(f"cq:{cq_name}", 0), state.requeue_triggers.get("*", 0))
        out.append(
            types.QuotaReleased(
                workload=wl.ref, cluster_queue=cq_name, reason=reason, cause_seq=cause_seq, at_ms=now_ms
            )
        )
    return out


def _observed_evictions(state: ClusterState) -> list[types.Decision]:
    """An EvictionRequested, ``observed``, for each workload holding quota and not evicted whose Evicted condition
    someone other than kueue-es set True (``state.evicted_by_others``, in key order): with that condition's reason,
    message and time, so the status keeps the condition as it was written. Kueue acts on the condition whoever wrote
    it (Kueue's tests and users evict so: test/util SetEvictedCondition): its job reconciler stops the job and, once
    it no longer runs, clears the reservation, QuotaReserved=False ``PendingEvaluation`` (``Pending`` with the gate
    UnadmittedWorkloadsObservability off) with the condition's message and Requeued as SetRequeuedCondition says
    (jobframework/reconciler.go "6. handle eviction"); a Workload of no job keeps its quota until whoever plays
    its job clears QuotaReserved (a WorkloadStopped). No eviction is counted: only evict.go Evict counts one."""
    out: list[types.Decision] = []
    for key in sorted(state.evicted_by_others):
        seen = state.evicted_by_others[key]
        wl = state.workloads.get(key)
        if wl is None or wl.reservation is None or wl.eviction is not None or wl.finished is not None or wl.gone:
            continue
        out.append(
            types.EvictionRequested(
                workload=wl.ref,
                cluster_queue=wl.reservation.cluster_queue,
                reason=seen.reason,
                message=seen.message,
                at_ms=seen.at_ms,
                observed=True,
            )
        )
    return out


def _drain_stopped_queues(state: ClusterState, *, now_ms: int) -> list[types.Decision]:
    """Stop policies on workloads that hold quota (SEMANTICS §10.1): under Hold or
    HoldAndDrain a reservation not yet admitted is given back; under HoldAndDrain an
    admitted workload is evicted (reason ClusterQueueStopped or LocalQueueStopped, not a
    preemption), keeping its quota until its job stops."""
    out: list[types.Decision] = []
    stopped_cqs, stopped_lqs = _stopped(state)
    if not stopped_cqs and not stopped_lqs:
        return out
    for cq_name in sorted(state.reserved):
        if cq_name not in stopped_cqs and not any(cq == cq_name for _, cq in stopped_lqs):
            continue
        cq = state.cluster_queues.get(cq_name)
        for key in state.reserved[cq_name]:
            wl = state.workloads[key]
            if wl.reservation is None or wl.gone or wl.eviction is not None or key in state.releasable:
                continue
            lq = state.local_queues.get((wl.workload.metadata.namespace, wl.workload.spec.queue_name))
            if cq is not None and cq.spec.stop_policy != "None":
                policy, reason, what, cause = (
                    cq.spec.stop_policy,
                    "ClusterQueueStopped",
                    "ClusterQueue",
                    f"cq:{cq_name}",
                )
            elif lq is not None and lq.spec.stop_policy != "None":
                policy, reason, what, cause = lq.spec.stop_policy, "LocalQueueStopped", "LocalQueue", f"cq:{cq_name}"
            else:
                continue
            if not wl.admitted:
                cause_seq = state.requeue_triggers.get(cause, 0)
                out.append(
                    types.QuotaReleased(
                        workload=wl.ref, cluster_queue=cq_name, reason=reason, cause_seq=cause_seq, at_ms=now_ms
                    )
                )
            elif policy == "HoldAndDrain":
                out.append(
                    types.EvictionRequested(
                        workload=wl.ref,
                        cluster_queue=cq_name,
                        reason=reason,
                        message=f"The {what} is stopped",
                        at_ms=now_ms,
                    )
                )
    return out


def _stopped(state: ClusterState) -> tuple[set[str], set[tuple[str, str]]]:
    """The ClusterQueues with a stop policy, and (namespace, ClusterQueue) of the LocalQueues
    with one; remembered in ``state.caches`` until an object changes (``state.objects_version``:
    every ClusterQueue or LocalQueue fact or deletion advances it)."""
    kept = state.caches.get("admitter.stopped")
    if kept is not None and kept[0] == state.objects_version:
        return kept[1], kept[2]
    stopped_cqs = {name for name, cq in state.cluster_queues.items() if cq.spec.stop_policy != "None"}
    stopped_lqs = {
        (lq.metadata.namespace, lq.spec.cluster_queue)
        for lq in state.local_queues.values()
        if lq.spec.stop_policy != "None"
    }
    state.caches["admitter.stopped"] = (state.objects_version, stopped_cqs, stopped_lqs)
    return stopped_cqs, stopped_lqs


def _process(
    entry: Entry,
    *,
    state: ClusterState,
    tree: quota.QuotaTree,
    chosen: dict[str, preemption.Candidate | None],
    gate: _PodsReadyGate,
    cycle: tas_cycle.CycleTopology,
    now_ms: int,
    replaced: str | None = None,
    earlier_victims_gone: bool = True,
    recompute: Callable[[Entry], Entry] | None = None,
    tas_recompute: bool = False,
    recompute_tas: Callable[[Entry], Entry] | None = None,
    preemption_gates: bool = False,
    reserve_for_preemptors: bool = False,
    migrate: Callable[[Entry], list[types.Output] | None] | None = None,
    victims_once: bool = True,
) -> list[types.Output]:
    """Kueue's processEntry (SEMANTICS §4.5), one entry against the cycle's snapshot.
    ``replaced``: the elastic slice the entry replaces (its TAS usage is left out of the
    re-check, as Kueue counts it among the entry's targets; D.3, A.14).

    ``recompute`` (None: no recomputation, overlapping targets skip the entry): for an entry whose
    targets overlap the victims chosen earlier in the cycle, its assignment made again with those
    victims gone (:func:`run`); then it goes on as Kueue's does with the new assignment: NoFit
    waits, Preempt without targets reserves capacity, a Fit waits for the earlier preemptions with
    its usage booked in the tree (DeferredFit: no later entry of the cycle takes that quota), new
    targets are preempted unless they overlap too.

    A preempting entry's fit check takes out its own victims and, with ``earlier_victims_gone`` (admitter
    logic 17), those chosen earlier in the cycle (Kueue's scheduler.go fits): it only nominates, so nothing is booked on the victims' quota. Unlike
    Kueue, an entry that fits without preemption still counts those victims until their quota is
    released, so quota is never booked twice.

    TAS (SEMANTICS-ADVANCED A.10): a Fit entry's placement must still fit after the cycle's
    earlier admissions, else it is placed again on the same flavors (no fit: skipped); a
    Preempt entry reserves the domains it would take (with its targets removed, or on an
    empty tree when it has none) against later entries of the cycle.

    ``tas_recompute`` (admitter logic 27): a Fit entry, or a preempting one with targets, whose quota
    still fits but whose nominated placement (a preempting entry's: with its targets gone) no longer
    does, is Kueue's FitsCheckNoTAS (scheduler.go updateAssignmentIfNeeded): with ``recompute_tas``
    (the gate TASRecomputeAssignmentWithinSchedulingCycle on) it is assigned again on its nominated
    flavors and goes on with that assignment, which may place it elsewhere or preempt; without, it is
    skipped. A preempting entry reserves its nominated placement.

    ``preemption_gates`` (the feature gates of :func:`preemption_gates_enforced` on, admitter logic 28):
    an entry with targets whose workload has a closed preemption gate preempts nothing, books no quota
    and waits, reason AdmissionGated (Kueue's markPreemptionGated, which also drops its flavor scan
    progress; parked under BestEffortFIFO, as requeue reason PreemptionGated is not immediate there).

    ``reserve_for_preemptors`` (the gate PrioritizePreemptorWorkloads on): a preempting entry that finds no
    candidates reserves capacity when it is waiting for its preemptions (``Entry.nominated``) even if its
    ClusterQueue reclaims within its cohort with ``Any`` (Kueue's reserveCapacityForUnreclaimablePreempt).

    ``migrate`` (ConcurrentAdmission, :func:`run`): asked about an entry about to be admitted; its decisions,
    when it returns some, replace the admission (the entry's usage stays booked for the cycle, as Kueue's).

    ``victims_once`` (admitter logic 47, :func:`run`): the staleness check takes each victim out once.
    """
    if recompute is not None and entry.targets and any(t.key in chosen for t in entry.targets):
        entry = recompute(entry)
        if entry.assignment.mode == "NoFit":
            return _no_fit(entry, now_ms=now_ms)
        if entry.assignment.mode == "Fit":
            return _defer(entry, tree=tree, cycle=cycle, now_ms=now_ms)
    if tas_recompute and _placement_stale(
        entry,
        tree=tree,
        chosen=chosen,
        cycle=cycle,
        replaced=replaced,
        earlier_victims_gone=earlier_victims_gone,
        victims_once=victims_once,
    ):
        if recompute_tas is None:
            message = "Workload no longer fits after processing another workload"
            return _inadmissible(
                entry.workload, "WaitingForQuota", message, parked=False, now_ms=now_ms, bookmark=entry.bookmark
            )
        entry = recompute_tas(entry)
        if entry.assignment.mode == "NoFit":
            return _no_fit(entry, now_ms=now_ms)
    cq = entry.cq
    name = cq.metadata.name
    assignment = entry.assignment
    usage = assignment.usage()
    victims = entry.targets
    part: tas_cycle.TASPart | None = assignment.tas
    if not victims and assignment.mode == "Preempt":
        spec = cq.spec
        if spec.preemption.reclaim_within_cohort != "Any" or (reserve_for_preemptors and entry.nominated):
            tree.reserve_capacity(name, usage, borrowing=assignment.borrowing > 0)  # SEMANTICS §7.12
            if part is not None:
                reserved = cycle.place(part.wanted, simulate_empty=True)
                if isinstance(reserved, tas_cycle.Placed):
                    cycle.add(reserved.usage)
        # PreemptionNoCandidates: parked under BestEffortFIFO unless flavors remain (SEMANTICS §3.5).
        bookmark = entry.bookmark
        parked = spec.queueing_strategy == "BestEffortFIFO" and (bookmark is None or not bookmark.pending)
        return _inadmissible(
            entry.workload, "WaitingForQuota", assignment.message, parked=parked, now_ms=now_ms, bookmark=bookmark
        )
    if preemption_gates and assignment.mode == "Preempt" and entry.workload.workload.has_closed_preemption_gate:
        # Checked before the overlap with earlier victims, as Kueue does: the entry claims no target.
        parked = cq.spec.queueing_strategy == "BestEffortFIFO"
        return _inadmissible(
            entry.workload,
            PREEMPTION_GATED_REASON,
            PREEMPTION_GATED_MESSAGE,
            parked=parked,
            now_ms=now_ms,
            bookmark=None,
        )
    # Skipped entries keep this cycle's bookmark (PreserveScanProgress, SEMANTICS §4.5).
    if victims and any(t.key in chosen for t in victims):
        message = "Workload has overlapping preemption targets with another workload"
        return _inadmissible(
            entry.workload, "WaitingForQuota", message, parked=False, now_ms=now_ms, bookmark=entry.bookmark
        )
    taken_out = [target.candidate for target in victims]
    if victims and earlier_victims_gone:
        taken_out += [c for c in chosen.values() if c is not None]  # earlier victims (none is this entry's: above)
    for candidate in taken_out:
        preemption.remove(tree, candidate)
    fits = tree.fits(name, usage)
    for candidate in taken_out:
        preemption.restore(tree, candidate)
    placed: tas_cycle.Placed | None = None
    if fits and part is not None and entry.assignment.mode == "Fit":
        placed = part.placed
        gone = frozenset((replaced,)) if replaced is not None and cycle.elastic else frozenset()
        if placed is None or not cycle.still_fits(placed, removed=gone):
            again = cycle.place(part.wanted)
            placed = again if isinstance(again, tas_cycle.Placed) else None
            fits = placed is not None
    if not fits:
        message = "Workload no longer fits after processing another workload"
        return _inadmissible(
            entry.workload, "WaitingForQuota", message, parked=False, now_ms=now_ms, bookmark=entry.bookmark
        )
    if entry.assignment.mode != "Preempt" and gate.closed:
        # Kueue blocks the cycle here and then admits this assignment; this entry waits for a
        # later cycle instead, so it keeps the bookmark it was nominated with (no progress).
        return _inadmissible(entry.workload, "WaitingForPodsReady", gate.MESSAGE, parked=False, now_ms=now_ms)
    for target in victims:
        chosen[target.key] = target.candidate
    tree.add_usage(name, usage)
    if entry.assignment.mode == "Preempt":
        if part is not None:
            if tas_recompute:
                nominated_placement = part.placed
            else:
                again = cycle.place(part.wanted, removed=frozenset(t.key for t in victims))
                nominated_placement = again if isinstance(again, tas_cycle.Placed) else None
            if nominated_placement is not None:
                cycle.add(nominated_placement.usage)
        return _nominate(entry, state=state, now_ms=now_ms)
    if migrate is not None and (migrating := migrate(entry)) is not None:
        return migrating
    gate.admitted()
    if placed is not None:
        cycle.add(placed.usage)
    return _admit(entry, placed=placed, now_ms=now_ms)


def _with_nominated_placement(
    assignment: flavors.Assignment,
    targets: Sequence[preemption.Target],
    *,
    cycle: tas_cycle.CycleTopology,
    gone: frozenset[str] = frozenset(),
) -> flavors.Assignment:
    """``assignment`` (mode Preempt, with ``targets``) with the placement of its TAS pod sets found
    with the targets' (and ``gone``'s) topology usage removed: Kueue's scheduler.go
    updateAssignmentForTAS, the placement the entry is checked and reserved with (admitter logic 27)."""
    part: tas_cycle.TASPart | None = assignment.tas
    if part is None or not part.wanted:
        return assignment
    placed = cycle.place(part.wanted, removed=gone | {t.key for t in targets})
    if not isinstance(placed, tas_cycle.Placed):
        return assignment
    return msgspec.structs.replace(assignment, tas=msgspec.structs.replace(part, placed=placed))


def _placement_stale(
    entry: Entry,
    *,
    tree: quota.QuotaTree,
    chosen: dict[str, preemption.Candidate | None],
    cycle: tas_cycle.CycleTopology,
    replaced: str | None,
    earlier_victims_gone: bool,
    victims_once: bool = True,
) -> bool:
    """Kueue's FitsCheckNoTAS (clusterqueue_snapshot.go Fits, scheduler.go fits) for an entry that is
    Fit, or Preempt with targets: its quota fits (a preempting entry's with its targets and, with
    ``earlier_victims_gone``, the cycle's earlier victims taken out) and its nominated placement does
    not, given the cycle's earlier admissions and reservations. An entry without TAS pod sets, or whose
    quota does not fit, is not stale (the quota check decides it). ``victims_once`` (admitter logic 47): a
    target that is also an earlier victim is taken out once (Kueue PR #14269, PreemptedWorkloads.MergeWithTargets;
    False: twice, as 46 and earlier did)."""
    assignment = entry.assignment
    part: tas_cycle.TASPart | None = assignment.tas
    if part is None or not part.wanted:
        return False
    victims = entry.targets
    if assignment.mode == "Fit":
        removed = frozenset((replaced,)) if replaced is not None and cycle.elastic else frozenset()
        taken_out: list[preemption.Candidate] = []
    elif assignment.mode == "Preempt" and victims:
        taken_out = [t.candidate for t in victims]
        if earlier_victims_gone:
            own = {c.key for c in taken_out} if victims_once else set()
            taken_out += [c for c in chosen.values() if c is not None and c.key not in own]
        removed = frozenset(c.key for c in taken_out)
    else:
        return False
    for candidate in taken_out:
        preemption.remove(tree, candidate)
    try:
        quota_fits = tree.fits(entry.cq.metadata.name, assignment.usage())
    finally:
        for candidate in taken_out:
            preemption.restore(tree, candidate)
    if not quota_fits:
        return False
    placed = part.placed
    return placed is None or not cycle.still_fits(placed, removed=removed)


PREEMPTION_GATED_REASON = "AdmissionGated"
"""The QuotaReserved reason of an entry that would preempt with a closed preemption gate (Kueue's
WorkloadAdmissionGated, scheduler.go processEntry)."""
PREEMPTION_GATED_MESSAGE = "Workload requires preemption, but it's gated"
"""Kueue's message for it, on QuotaReserved and on the BlockedOnPreemptionGates condition (scheduler.go)."""

DEFERRED_MESSAGE = (
    "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete"
)
"""Kueue's message for an entry that fits once the cycle's earlier preemptions complete (scheduler.go)."""


def _defer(entry: Entry, *, tree: quota.QuotaTree, cycle: tas_cycle.CycleTopology, now_ms: int) -> list[types.Output]:
    """Kueue's DeferredFit (scheduler.go processEntry): the entry, recomputed, fits once the victims
    of the cycle's earlier preemptions are gone. It is not admitted now; its quota (and placement) is
    booked for the rest of the cycle, so no later entry takes what those preemptions free for it, and
    it waits, WaitingForPreemptedWorkloads, with no bookmark: the next cycle scans every flavor again."""
    tree.add_usage(entry.cq.metadata.name, entry.assignment.usage())
    part: tas_cycle.TASPart | None = entry.assignment.tas
    if part is not None and part.placed is not None:
        cycle.add(part.placed.usage)
    return _inadmissible(
        entry.workload, "WaitingForPreemptedWorkloads", DEFERRED_MESSAGE, parked=False, now_ms=now_ms, bookmark=None
    )


def _nominate(entry: Entry, *, state: ClusterState, now_ms: int) -> list[types.Output]:
    """A PreemptionRequired for the preemptor, unless one is already waiting for the
    preemptor or every target is already being evicted (recorded when it changes)."""
    wl = entry.workload
    key = wl.workload.key
    fresh = [t for t in entry.targets if t.candidate.workload.eviction is None]
    if key in state.nominations or (not fresh and key in state.preemptors):
        return []
    message = f"{entry.assignment.message}. Pending the preemption of {len(entry.targets)} workload(s)"
    return [
        types.PreemptionRequired(
            workload=wl.ref,
            cluster_queue=entry.cq.metadata.name,
            pod_set_assignments=pod_set_assignments(entry),
            targets=[
                types.PreemptionTarget(
                    workload=t.candidate.workload.ref, cluster_queue=t.candidate.cluster_queue, reason=t.reason
                )
                for t in entry.targets
            ],
            message=message,
            at_ms=now_ms,
        )
    ]


def _admit(entry: Entry, *, placed: tas_cycle.Placed | None = None, now_ms: int) -> list[types.Output]:
    ref, cq = entry.workload.ref, entry.cq.metadata.name
    assignments = pod_set_assignments(entry)
    reservation = types.QuotaReserved(workload=ref, cluster_queue=cq, pod_set_assignments=assignments, at_ms=now_ms)
    reserved: list[types.Output] = [reservation]
    if placed is not None and placed.assignments:  # the placement is committed with the reservation (A.5)
        reserved.append(tas_cycle.topology_assigned(entry.workload, cq, placed, now_ms=now_ms))
    if any(a.delayed_topology_request for a in assignments):
        return reserved  # admitted by the second pass, once the checks are Ready (A.9)
    required = (
        lifecycle.required_checks(entry.cq, {f for a in assignments for f in a.flavors.values()})
        if entry.cq.spec.admission_checks_strategy is not None
        else []  # required_checks' answer without a strategy, without gathering the flavors
    )
    if required and not lifecycle.checks_ready(entry.workload, required):
        return reserved  # admitted once every check required for its flavors is Ready (SEMANTICS §9.5)
    if len(reserved) == 1:
        # Reserved and admitted at once: ONE WorkloadAdmitted stands for both (issue 18; the fold takes
        # it as its reservation then its admission, types.reservation_of), as Kueue's admit writes the
        # reservation and the Admitted condition in one status update (scheduler.go admit). A TAS
        # placement keeps the pair: its TopologyAssigned needs the reservation before it.
        return [types.admitted(reservation, at_ms=now_ms)]
    return [*reserved, types.admitted(reservation, at_ms=now_ms)]


_KEEP: types.FlavorBookmark = types.FlavorBookmark(tried=(), cycle=-1, generation=-1)
"""``_inadmissible``'s default: the workload keeps the bookmark it has (not nominated)."""


def _no_fit(entry: Entry, *, now_ms: int) -> list[types.Output]:
    """An entry found NoFit when it was assigned again in the cycle: inadmissible with the assignment's
    reason and message, parked under BestEffortFIFO unless flavors remain to be tried (SEMANTICS §3.5)."""
    bookmark = entry.bookmark
    parked = entry.cq.spec.queueing_strategy == "BestEffortFIFO" and (bookmark is None or not bookmark.pending)
    reason = entry.assignment.reason or "NoMatchingFlavor"
    return _inadmissible(
        entry.workload, reason, entry.assignment.message, parked=parked, now_ms=now_ms, bookmark=bookmark
    )


def _inadmissible(
    wl: WorkloadState,
    reason: str,
    message: str,
    *,
    parked: bool,
    now_ms: int,
    bookmark: types.FlavorBookmark | None = _KEEP,
) -> list[types.Output]:
    """A WorkloadInadmissible, unless nothing it records changed: the message, the parking,
    or the flavor-scan bookmark (``bookmark``: the one after this cycle; default: unchanged).
    When ``reason`` is the workload's pending reason already (``WorkloadState.pending_reason``),
    a PendingOutcome for the cycle's DecisionRecord instead of a message of its own (issue 15)."""
    if bookmark is _KEEP:
        bookmark = wl.bookmark
    if message == wl.pending_message and not parked and bookmark == wl.bookmark:
        return []  # recorded when it changes, not every cycle
    if reason == wl.pending_reason:
        return [types.PendingOutcome(workload=wl.ref, reason=reason, message=message, parked=parked, bookmark=bookmark)]
    return [
        types.WorkloadInadmissible(
            workload=wl.ref, reason=reason, message=message, at_ms=now_ms, parked=parked, bookmark=bookmark
        )
    ]


SECOND_PASS_FAILED = "SecondPassFailed"
"""The reason of the WorkloadInadmissible recording a failed second pass (Kueue's Event reason)."""


def _second_pass_failed(wl: WorkloadState, failure: tas_cycle.PlacementFailure, *, now_ms: int) -> list[types.Decision]:
    """A second pass that found no placement for ``wl`` (holding quota, its checks Ready): Kueue's
    scheduler requeues it for another second pass and records a Warning Event ``SecondPassFailed``
    with the flavor assigner's message, changing nothing on the Workload (scheduler.go
    requeueAndUpdate, QueueSecondPassIfNeeded). Here a WorkloadInadmissible with that reason and
    message, which the fold keeps as the pending reason and message of a workload that holds quota
    (no condition changes, the dispatcher writes the Event); written when the message changes, not on
    every cycle's retry (Kueue: one per retry, backoff 1 s·2^(n-1), at most 30 s)."""
    message = f"couldn't assign flavors to pod set {failure.pod_set}: {failure.message}"
    if wl.pending_reason == SECOND_PASS_FAILED and wl.pending_message == message:
        return []
    return [
        types.WorkloadInadmissible(
            workload=wl.ref, reason=SECOND_PASS_FAILED, message=message, at_ms=now_ms, bookmark=wl.bookmark
        )
    ]


# Ours, not Kueue's (SEMANTICS §5.3): while nothing changes, Kueue's resumed scans can cycle
# for ever: a StrictFIFO head whose resumed scan reached the last flavor starts over, stops
# where it stopped before, resumes after it, and so on; with two pod sets, each can in turn
# leave a pending index while the other wraps (BestEffortFIFO heads too, as they stay in the
# queue while flavors are pending). Kueue re-writes the condition every cycle. Here a head
# gets an "exhausted" bookmark (no indices) once a resumed StrictFIFO scan wraps, or once it
# has resumed more times in a row than its ClusterQueue lists flavors (real progress through
# the flavors never needs more): while that is in force, scans start at the first flavor and
# record no progress, and a BestEffortFIFO head is parked, so the decisions stop changing. It
# expires like any bookmark, once the ClusterQueue's generation moves.


def _resumed(
    bookmark: types.FlavorBookmark | None,
    start: types.FlavorBookmark,
    cq: models.ClusterQueue,
    *,
    state: ClusterState,
    cycle: int,
) -> types.FlavorBookmark | None:
    """The bookmark a scan that resumed from ``start`` leaves: ``bookmark`` with the count of
    resumes, or the exhausted one (see the note above)."""
    if bookmark is None:
        if cq.spec.queueing_strategy != "StrictFIFO":
            return None
    else:
        resumes = start.resumes + 1
        if resumes <= sum(len(group.flavors) for group in cq.spec.resource_groups):
            return types.FlavorBookmark(
                tried=bookmark.tried, cycle=bookmark.cycle, generation=bookmark.generation, resumes=resumes
            )
    return types.FlavorBookmark(tried=(), cycle=cycle, generation=state.generation(cq.metadata.name))


def bookmark_in_force(
    wl: WorkloadState, cq_name: str, *, state: ClusterState, cycle: int
) -> types.FlavorBookmark | None:
    """The workload's flavor-scan bookmark unless it is outdated (scheduler.go
    lastAssignmentOutdated, FlavorFungibilityPreserveScanProgress on; SEMANTICS §5.3): one
    computed in this or the previous admitter cycle stands; an older one stands only while
    the ClusterQueue's allocatable-resource generation has not advanced since. (A change of
    the workload's scheduling shape already dropped it in the fold.)"""
    bookmark = wl.bookmark
    if bookmark is None or cycle - bookmark.cycle <= 1:
        return bookmark
    return None if state.generation(cq_name) > bookmark.generation else bookmark


def _bookmark(
    assignment: flavors.Assignment, cq_name: str, *, state: ClusterState, cycle: int
) -> types.FlavorBookmark | None:
    """The bookmark this cycle's scan leaves (Kueue's Assignment.LastState), None when it has
    no pending flavor (the next scan starts at the first flavor either way)."""
    if not assignment.pending_flavors:
        return None
    assert assignment.tried is not None
    return types.FlavorBookmark(tried=assignment.tried, cycle=cycle, generation=state.generation(cq_name))


DEACTIVATED = "Deactivated"
"""Kueue's eviction reason for a workload whose ``spec.active`` was set false (kueue.WorkloadDeactivated)."""
DEACTIVATED_MESSAGE = "The workload is deactivated"
"""Its message (workload_controller.go)."""


def _stops_before_release(wl: WorkloadState, *, jobless: bool) -> bool:
    """Whether ``wl``, in ``state.releasable``, is a workload deactivated by hand that is evicted first and
    keeps its quota until it is stopped: not finished or deleted, not an evicted one stopped already, and
    either of a job and admitted (its job may be running), or (``jobless``, admitter logic 35) of no job at
    all (workload_controller.go evicts every inactive workload; with no job reconciler to clear the
    reservation, whoever plays the job clears QuotaReserved, as Kueue's tests do). A job's reservation
    waiting for its checks never started its job: it is released at once, as Kueue's reconciler clears the
    reservation of a suspended job's evicted workload."""
    if wl.workload.spec.active or wl.finished is not None or wl.deleted_seq:
        return False
    if wl.stopped_seq and wl.eviction is not None:
        return False
    if wl.workload.owner is None:
        return jobless
    return wl.admitted


def _release(wl: WorkloadState, *, now_ms: int) -> types.QuotaReleased | types.FinishedRelease:
    """The release of ``wl``'s quota: a finished workload's is a FinishedRelease, carried in the
    cycle's DecisionRecord (issue 18: it restates the WorkloadFinished fact at ``finished_seq``)."""
    assert wl.reservation is not None
    if wl.finished is not None:
        return types.FinishedRelease(
            workload=wl.ref, cluster_queue=wl.reservation.cluster_queue, cause_seq=wl.finished_seq, at_ms=now_ms
        )
    if wl.deleted_seq:
        reason, cause = "Deleted", wl.deleted_seq
    elif wl.workload.on_hold:
        # its job holds it (a StatefulSet scaled to zero): released at once, no eviction, not requeued
        # (statefulset_reconciler.go releaseScaleDownReservation)
        reason, cause = ON_HOLD_REASON, wl.observed_seq
    elif wl.stopped_seq and wl.eviction is not None and wl.workload.spec.active:
        reason, cause = wl.eviction.reason, wl.stopped_seq  # the evicted job stopped (SEMANTICS §7.8)
    else:
        reason, cause = "Deactivated", wl.observed_seq
    return types.QuotaReleased(
        workload=wl.ref, cluster_queue=wl.reservation.cluster_queue, reason=reason, cause_seq=cause, at_ms=now_ms
    )


def _cluster_queues_of(state: ClusterState, keys: list[str]) -> set[str]:
    """The ClusterQueues the workloads of ``keys`` hold their reservations in."""
    out = set()
    for key in keys:
        reservation = state.workloads[key].reservation
        if reservation is not None:
            out.add(reservation.cluster_queue)
    return out
