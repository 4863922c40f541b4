"""What Kueue writes on Workload, ClusterQueue and LocalQueue objects, derived from the log.

Pure: the dispatcher folds every event into a :class:`WorkloadRecord` per
workload with :func:`fold_record`, applying the condition transitions Kueue's
controllers apply (SEMANTICS §9; Kueue pkg/workload/workload.go
SetQuotaReservation, UnsetQuotaReservationWithCondition, SetRequeuedCondition,
admissionchecks.go SyncAdmittedCondition, evict/evict.go, finish/finish.go,
scheduler/scheduler.go requeueAndUpdate, preemption/preemption.go
IssuePreemptions, jobframework/reconciler.go step 6 "handle eviction",
core/workload_controller.go stop policies), with each event's own time as the
transition time. The fold is exhaustive: each event type is either handled
(:data:`STATUS_HANDLED`) or named as ignored (:data:`STATUS_IGNORED`), and any
other fails it. The runner renders the objects with :func:`workload_object`,
:func:`workload_status`, :func:`cluster_queue_status` and
:func:`local_queue_status` and server-side applies them, so the same log always
gives the same bytes and a redelivered decision writes nothing new.

Where this differs from Kueue, on purpose:

* The Workload's pod templates are the job's, as Kueue's, when the dispatcher
  could read them (:func:`workload_object`'s ``templates``; each container's
  repeated environment variables kept once, :func:`without_repeated_env`; each quantity as a typed
  client writes it, ``"1"`` for a custom resource's ``cpu: 1``); otherwise each is
  rebuilt from the folded workload: one container per pod set, named after it,
  carrying the effective per-pod requests (SEMANTICS §2.3), with the template's
  own nodeSelector, tolerations and required node affinity. The log keeps
  requests, not containers.
* Every condition carries the Workload's current ``metadata.generation`` as
  ``observedGeneration`` (Kueue stamps the generation of the moment it set each
  one), except Preempted, which Kueue writes without it.
* No finalizer (quota is accounted on the log, not held by the object).
  ``resourceRequests`` (:func:`total_requests`) counts the DRA device charge as
  Kueue's scheduler does. ``status.admissionChecks`` follows the checks the
  ClusterQueue requires of it, pending or holding quota (and the check states
  reported on the log), rewritten when that ClusterQueue changes, also once
  admitted (:func:`resync_checks`).
* DeactivationTarget is not shown: Kueue sets it and removes it again once the
  workload is evicted for it; the log carries the end state (WorkloadDeactivated
  and the eviction), so the status goes straight to ``spec.active: false`` and
  Evicted ``DeactivatedDueTo<cause>``.
* Requeued goes back to True (``BackoffFinished``) when the workload reserves quota
  again after its backoff, not at ``requeueAt`` itself: the dispatcher has no
  clock of its own, it renders the log.
* QuotaReserved=False on a pending workload has the reason the admitter gave
  (``Pending``, ``Inadmissible``, ``Misconfigured``, ``Deactivated`` for an inactive one,
  which also marks it Evicted as Kueue's workload controller does), with Kueue's message.
  The reasons the dispatcher chooses itself follow the feature gate
  UnadmittedWorkloadsObservability (on by default, as in Kueue; a Configuration's
  ``featureGates`` may turn it off): after an eviction the requeued workload gets
  ``PendingEvaluation`` (``Pending`` with the gate off).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal, localcontext
from typing import Any, assert_never

import msgspec

from kueue_es.events import manifests, models, quantities, slices, types
from kueue_es.events.quantities import Format, format_quantity, to_quantity
from kueue_es.jobframework import integrations, workloads
from kueue_es.jobframework.integrations import serving
from kueue_es.projections import afs, multikueue, quota
from kueue_es.projections.cluster import (
    ON_HOLD_CLEARED_MESSAGE,
    ON_HOLD_MESSAGE,
    ON_HOLD_REASON,
    ClusterState,
    WorkloadState,
    late_retry_reset,
    pods_ready_enabled,
    priority_of,
    replacement_of,
    resets_checks_on_release,
    resets_late_retry,
)
from kueue_es.scheduling import concurrent_admission as ca
from kueue_es.scheduling import cycle, dra, fairsharing, lifecycle, queues, readiness, visibility
from kueue_es.scheduling.tas import replacement

KUEUE_API = "kueue.x-k8s.io/v1beta2"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
KUEUE_LABEL_PREFIX = "kueue.x-k8s.io/"
GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
GRANULAR_REASONS_GATE = "UnadmittedWorkloadsObservability"
MAX_CONDITION_MESSAGE = 32 * 1024  # Kueue's api.TruncateConditionMessage

# Kueue's admissionManagedConditions order (pkg/workload/patching), the order the status lists them in.
CONDITION_ORDER = (
    "QuotaReserved",
    "BlockedOnPreemptionGates",
    "Evicted",
    "Admitted",
    "PodsReady",
    "Preempted",
    "Requeued",
    "Finished",
)
WORKLOAD_STATUS_FIELDS = (
    "conditions",
    "admission",
    "admissionChecks",
    "resourceRequests",
    "requeueState",
    "schedulingStats",
    "accumulatedPastExecutionTimeSeconds",
    "reclaimablePods",
    "unhealthyNodes",
    "clusterName",
    "nominatedClusterNames",
)
RESET_MESSAGE = "Reset to Pending after eviction. Previously: {state}"
DEACTIVATED_REASON = "Deactivated"  # kueue.WorkloadDeactivated: Evicted and Requeued of a deactivation by hand
DEACTIVATED_PREFIX = "DeactivatedDueTo"  # ... and of one of Kueue's own: DeactivatedDueTo<cause>
REQUEUED_EVICTIONS = ("Preempted", "NodeFailures")  # the Evicted reasons the job reconciler writes Requeued=True for
DEACTIVATED_MESSAGE = "The workload is deactivated"  # Kueue's eviction message (workload_controller.go)
DELETED_STOP_MESSAGE = (
    "Workload is deleted"  # Kueue's Stopped Event of a job whose Workload was deleted (reconciler.go)
)
# Kueue's Stopped Event of a running job whose workload no longer matches it (reconciler.go ensureOneWorkload)
NOT_MATCHING_STOP_MESSAGE = "No matching Workload; restoring pod templates according to existent Workload"
# generatePodsReadyCondition's messages (jobframework/reconciler.go)
PODS_READY_MESSAGES = {
    "Started": "All pods reached readiness and the workload is running",
    "Recovered": "All pods reached readiness and the workload is running",
    "WaitForStart": "Not all pods are ready or succeeded",
    "WaitForRecovery": "At least one pod has failed, waiting for recovery",
}
QUEUE_STATUS_FIELDS = (
    "conditions",
    "pendingWorkloads",
    "reservingWorkloads",
    "admittedWorkloads",
    "flavorsReservation",
    "flavorsUsage",
    "fairSharing",
)
COHORT_STATUS_FIELDS = ("conditions", "fairSharing")

ADMITTED_MESSAGE = "The workload is admitted"
PENDING_DELAYED_TOPOLOGY_MESSAGE = "There are pending delayed topology requests"
NO_RESERVATION_MESSAGE = "The workload has no reservation"


@dataclass
class Condition:
    """A metav1.Condition; ``generation`` False leaves observedGeneration out (Kueue's Preempted)."""

    type: str
    status: bool
    reason: str
    message: str
    since_ms: int
    generation: bool = True


@dataclass
class CheckEntry:
    """One ``status.admissionChecks[]`` entry (SEMANTICS-ADVANCED B.1): state, message, when it last changed
    (ms), the controller's ``requeueAfterSeconds``, Kueue's ``retryCount`` and the Ready check's podSetUpdates.

    Not rendered: ``reported_ms``, the lastTransitionTime of the last report folded (a report of the same state
    keeps ``since_ms``), and ``reset_from``, the (state, message, times) of the report an eviction reset, so a
    status write tells that report, still on the server, from a controller's newer answer
    (:func:`reset_reports`)."""

    name: str
    state: str
    message: str
    since_ms: int
    requeue_after_seconds: int | None = None
    retry_count: int | None = None
    pod_set_updates: list[models.PodSetUpdate] = field(default_factory=list)
    reported_ms: int | None = None
    reset_from: tuple[str, str, tuple[int, ...]] | None = None


@dataclass
class WorkloadRecord:
    """The Kueue status of one workload as the log has it so far.

    ``admission`` is the QuotaReserved whose assignment the status shows (Kueue keeps
    it after the workload finishes); ``topology`` the TopologyAssigned decisions of that admission
    merged per pod set (pod set name -> v1beta2 TopologyAssignment, SEMANTICS-ADVANCED A.8, A.9),
    empty without TAS;
    ``evictions`` counts evictions per (reason,
    underlying cause), Kueue's ``schedulingStats.evictions``, in the order each was first counted.
    """

    uid: str
    conditions: dict[str, Condition] = field(default_factory=dict)
    admission: types.QuotaReserved | None = None
    topology: dict[str, models.TopologyAssignment] = field(default_factory=dict)
    evictions: dict[tuple[str, str], int] = field(default_factory=dict)
    accumulated_seconds: int | None = None
    checks: dict[str, CheckEntry] = field(default_factory=dict)
    requeue_count: int | None = None
    requeue_at_ms: int | None = None
    deactivated: bool = False
    inactive_seen: bool = False
    deactivations: int = 0  # WorkloadDeactivated decisions folded: each one's ``spec.active: false`` written once
    reactivated: bool = False  # seen active again after Requeued=False Deactivated: Reactivated at the next decision
    reclaimable: tuple[tuple[str, int], ...] = ()  # (pod set, count) in pod set order: status.reclaimablePods
    cluster_name: str = ""  # MultiKueue: the worker that admitted it (status.clusterName)
    nominated: tuple[str, ...] = ()  # MultiKueue: the workers nominated (status.nominatedClusterNames)
    unhealthy_nodes: tuple[str, ...] = ()  # TAS: the failed node awaiting replacement (status.unhealthyNodes)
    # MultiKueue: the pod sets the admitting worker placed, whose delayed topology request its check's Ready marks
    # Ready (multikueue/workload.go updateDelayedTopologyRequest)
    worker_placed: tuple[str, ...] = ()
    # status.resourceRequests: (pod set, ((resource, total amount), ...)) as the last scheduling cycle that could
    # not admit it saw them; () once it reserves quota (its podSetAssignments' resourceUsage supersedes them)
    resource_requests: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()

    def set(self, kind: str, status: bool, reason: str, message: str, *, at_ms: int, generation: bool = True) -> None:
        """apimeta.SetStatusCondition: the transition time moves only when the status changes."""
        previous = self.conditions.get(kind)
        since = previous.since_ms if previous is not None and previous.status == status else at_ms
        self.conditions[kind] = Condition(
            type=kind,
            status=status,
            reason=reason,
            message=message[:MAX_CONDITION_MESSAGE],
            since_ms=since,
            generation=generation,
        )

    def is_true(self, kind: str) -> bool:
        """Whether condition ``kind`` is there and True."""
        condition = self.conditions.get(kind)
        return condition is not None and condition.status


@dataclass(frozen=True)
class Before:
    """What the cluster fold held for a workload just before an event (it folds in place)."""

    exists: bool = False
    uid: str = ""
    reservation: types.QuotaReserved | None = None
    admitted: bool = False
    eviction: types.EvictionRequested | None = None
    finished: bool = False
    on_hold: bool = False

    @classmethod
    def of(cls, wl: WorkloadState | None) -> Before:
        """Snapshot ``wl`` (None: unknown workload)."""
        if wl is None:
            return cls()
        return cls(
            exists=True,
            uid=wl.workload.metadata.uid,
            reservation=wl.reservation,
            admitted=wl.admitted,
            eviction=wl.eviction,
            finished=wl.finished is not None,
            on_hold=wl.on_hold,
        )


def workload_key(event: types.Event) -> str | None:
    """The ``namespace/name`` of the workload an event is about, if it is about one."""
    match event:
        case types.WorkloadObserved(workload=wl):
            return wl.key
        case types.ObjectDeleted(kind="Workload"):
            return f"{event.namespace}/{event.name}"
        case (
            types.WorkloadFinished()
            | types.WorkloadStopped()
            | types.QuotaReserved()
            | types.WorkloadAdmitted()
            | types.WorkloadInadmissible()
            | types.QuotaReleased()
            | types.PreemptionRequired()
            | types.EvictionRequested()
            | types.AdmissionCheckStateChanged()
            | types.WorkloadPodsReady()
            | types.WorkloadReclaimablePods()
            | types.WorkloadDeactivated()
            | types.TopologyAssigned()
            | types.WorkersNominated()
            | types.RemoteAdmissionChosen()
            | types.MultiKueueCheckRetry()
            | types.MultiKueueCheckRejected()
        ):
            return event.workload.key
    return None


def granular_reasons(state: ClusterState) -> bool:
    """Kueue's UnadmittedWorkloadsObservability gate (default on) in the Configuration in force."""
    return state.configuration.feature_gates.get(GRANULAR_REASONS_GATE, True)


STATUS_HANDLED = (
    types.FactBatch,  # as its facts, one by one: core.fold unpacks it before this fold sees any of them
    types.WorkloadObserved,
    types.QuotaReserved,
    types.WorkloadAdmitted,
    types.WorkloadInadmissible,
    types.PreemptionRequired,
    types.EvictionRequested,
    types.QuotaReleased,
    types.WorkloadFinished,
    types.AdmissionCheckStateChanged,
    types.WorkloadPodsReady,
    types.WorkloadReclaimablePods,
    types.WorkloadDeactivated,
    types.TopologyAssigned,
    types.WorkersNominated,
    types.RemoteAdmissionChosen,
    types.MultiKueueCheckRetry,
    types.MultiKueueCheckRejected,
)
"""The events :func:`fold_record` folds into a workload's record (its Kueue status)."""

STATUS_IGNORED = (
    # about a workload, but no condition of their own: a stop is the job's (the eviction's Evicted
    # condition came before), a deletion removes the record once the workload is gone
    types.WorkloadStopped,
    types.ObjectDeleted,
    # an Evicted condition someone else wrote: the admitter's EvictionRequested (observed) carries it out
    types.WorkloadEvictionObserved,
    # about no workload's status: the cluster's other objects (queue status is computed from the
    # folded cluster, not from records), the deciders' bookkeeping, the dispatcher's results
    types.ResourceFlavorObserved,
    types.ClusterQueueObserved,
    types.CohortObserved,
    types.LocalQueueObserved,
    types.WorkloadPriorityClassObserved,
    types.AdmissionCheckObserved,
    types.NamespaceObserved,
    types.ConfigurationObserved,
    types.SchedulingRequested,
    types.ObjectRejected,
    types.ChildJobObserved,
    types.TopologyObserved,
    types.NodeObserved,
    types.PodObserved,
    types.DeviceClassObserved,
    types.ResourceClaimTemplateObserved,
    types.ResourceSliceObserved,
    # MultiKueue's facts: the workers and the remote copies (the check states follow the decisions)
    types.MultiKueueClusterObserved,
    types.MultiKueueConfigObserved,
    types.RemoteWorkloadObserved,
    types.WorkerClusterConnectivity,
    types.DecisionRecord,
    types.PreemptionIssued,
    types.WorkloadRequeued,
    types.DispatchApplied,
    types.DispatchFailed,
    types.DispatchBatchApplied,
)
"""The events :func:`fold_record` ignores, named: an event type in neither tuple fails the fold (and the
unit test that walks the event union), so a new one is classified before it is folded."""


def fold_record(
    records: dict[str, WorkloadRecord],
    event: types.Event,
    *,
    key: str,
    before: Before,
    state: ClusterState,
    compare: bool = True,
) -> bool:
    """Fold ``event`` about workload ``key`` into ``records``, given the cluster ``state`` already folded past it
    and ``before``, the workload as it was just before. Returns whether the record changed (``compare``
    False: not compared, True)."""
    wl = state.workloads.get(key)
    if wl is None:
        return records.pop(key, None) is not None
    uid = wl.workload.metadata.uid
    record = records.get(key)
    if record is None or (record.uid and uid and record.uid != uid):
        record = records[key] = WorkloadRecord(uid=uid)
    old = _fingerprint(record) if compare else None
    _fold_into(record, event, wl=wl, before=before, state=state)
    return not compare or _fingerprint(record) != old


def _fold_into(
    record: WorkloadRecord, event: types.Event, *, wl: WorkloadState, before: Before, state: ClusterState
) -> None:
    """Fold ``event`` into the ``record`` of workload ``wl`` (as it is after the event; ``before``: as it was).
    The events of :data:`STATUS_IGNORED` change no record; any other one not handled here raises
    AssertionError."""
    if isinstance(event, STATUS_IGNORED):
        return
    granular = granular_reasons(state)
    if isinstance(event, types.QuotaReserved | types.WorkloadAdmitted | types.WorkloadInadmissible):
        _restarted(record, wl, state, at_ms=event.at_ms)
        _reactivated(record, at_ms=event.at_ms)
    match event:
        case types.WorkloadObserved(workload=observed):
            _observed(record, observed, at_ms=observed.metadata.creation_timestamp_ms)
            if "PodsReady" not in record.conditions and is_job_workload(wl) and pods_ready_enabled(state.configuration):
                # the job reconciler's first PodsReady: not admitted yet (reconciler.go generatePodsReadyCondition)
                start = PODS_READY_MESSAGES["WaitForStart"]
                record.set("PodsReady", False, "WaitForStart", start, at_ms=observed.metadata.creation_timestamp_ms)
            if wl.reservation is None:
                _sync_checks(record, _pending_checks(state, wl), at_ms=observed.metadata.creation_timestamp_ms)
            if before.on_hold and not wl.on_hold and wl.reservation is None:
                # its StatefulSet scaled up again: QuotaReserved leaves OnHold (statefulset_reconciler.go
                # clearOnHold), the workload waits for quota again; when, the fact does not say: its creation
                reason = "PendingEvaluation" if granular else "Pending"
                at_ms = record.conditions["QuotaReserved"].since_ms if "QuotaReserved" in record.conditions else 0
                _unreserve(record, reason, ON_HOLD_CLEARED_MESSAGE, at_ms=at_ms, granular=granular)
        case types.QuotaReserved() | types.WorkloadAdmitted() if before.finished:
            # decided on a basis before its workload finished and landed after the finish (a cycle run between
            # a Workload's observation and its finish: one made by hand without its owner, a job finishing): the
            # quota comes back with the next record and no job starts; the object shows no admission, as Kueue
            # never admits a finished Workload (its scheduler skips them: workload.IsFinished)
            pass
        case types.QuotaReserved():
            if before.reservation is None and wl.reservation is event:
                _reserve(record, event, state=state, granular=granular)
        case types.WorkloadAdmitted():
            if before.reservation is None and wl.reservation is not None:
                _reserve(record, wl.reservation, state=state, granular=granular)  # one message for both (issue 18)
            if wl.admitted and not before.admitted:
                record.set("Admitted", True, "Admitted", ADMITTED_MESSAGE, at_ms=event.at_ms)
        case types.WorkloadInadmissible():
            if wl.reservation is None and not wl.gone:
                refused = dra_refusal(state, wl, event)
                if refused is not None:
                    _refused_for_devices(record, event, requeued_message=refused, granular=granular)
                elif event.reason == cycle.DEACTIVATED or (
                    event.reason == "PendingEvaluation" and event.message == cycle.PENDING_EVALUATION_MESSAGE
                ):
                    _activation_changed(record, event, granular=granular)
                else:
                    _forget_device_refusal(record)
                    # The admitter gives Kueue's granular reason; with the gate off Kueue falls back to Pending.
                    reason = event.reason if granular else "Pending"
                    _unreserve(record, reason, event.message, at_ms=event.at_ms, granular=granular)
                    if scheduler_pending(event.reason, event.message):
                        record.resource_requests = total_requests(wl, state)
                    if (
                        event.reason == cycle.PREEMPTION_GATED_REASON
                        and event.message == cycle.PREEMPTION_GATED_MESSAGE
                    ):
                        # requeueAndUpdate of a preemptionGated entry (scheduler.go)
                        record.set(
                            BLOCKED_ON_PREEMPTION_GATES, True, "PreemptionGated", event.message, at_ms=event.at_ms
                        )
        case types.PreemptionRequired():
            if wl.reservation is None and not wl.gone:
                reason = "WaitingForPreemptedWorkloads" if granular else "Pending"
                _unreserve(record, reason, event.message, at_ms=event.at_ms, granular=granular)
                record.resource_requests = total_requests(wl, state)
        case types.EvictionRequested():
            if before.eviction is None and wl.eviction is event:
                _evicted(record, event)
        case types.QuotaReleased():
            if before.reservation is not None and wl.reservation is None:
                _release(record, event, before=before, wl=wl, granular=granular)
                if resets_checks_on_release(state, event, reservation=before.reservation, eviction=before.eviction):
                    _reset_checks(record, at_ms=event.at_ms)
        case types.WorkloadFinished():
            if not before.finished and wl.finished is event:
                record.set("Finished", True, event.reason, event.message, at_ms=event.at_ms)
        case types.AdmissionCheckStateChanged():
            _check_changed(record, event)
            late_reset(record, state, wl, event)
            if record.admission is not None and wl.reservation is not None and not wl.admitted:
                _checks_moved(record, state, at_ms=event.at_ms, granular=granular)
        case types.WorkloadPodsReady() if before.finished:
            pass  # Kueue's job reconciler writes no PodsReady once the job finished (reconciler.go step 3, then 5)
        case types.WorkloadPodsReady() if not wl.admitted and not ca.variant_admitted(
            state.workloads, wl.workload, state.configuration.feature_gates
        ):
            # a job started by hand with no admission (stopped again: suspension.py): Kueue's
            # generatePodsReadyCondition says WaitForStart for a workload that is not admitted, whatever runs (a
            # ConcurrentAdmission parent is admitted while a variant of it is: its job runs with that admission)
            record.set("PodsReady", False, "WaitForStart", PODS_READY_MESSAGES["WaitForStart"], at_ms=event.at_ms)
        case types.WorkloadPodsReady():
            message = PODS_READY_MESSAGES.get(event.reason, "")
            record.set(
                "PodsReady",
                event.ready,
                event.reason or ("Started" if event.ready else "WaitForStart"),
                message,
                at_ms=event.at_ms,
            )
        case types.WorkloadReclaimablePods():
            # The counts the cluster fold took (Kueue's webhook refuses a lowered count while the
            # workload holds quota), in pod set order, as the job reconciler writes them.
            record.reclaimable = tuple(
                (ps.name, wl.reclaimable[ps.name]) for ps in wl.workload.spec.pod_sets if ps.name in wl.reclaimable
            )
        case types.WorkloadDeactivated():
            _deactivate(record, event, holds_quota=wl.reservation is not None)
        case types.TopologyAssigned():
            # It comes in the batch of the QuotaReserved (before or after it), before WorkloadAdmitted (A.12).
            # Merged per pod set, as the cluster fold merges it: a second pass (A.9) names only the pod
            # sets it placed, and those placed with the reservation keep their assignment.
            record.topology = merged_topology(record.topology, event)
        case types.WorkersNominated():
            record.nominated = tuple(event.clusters)
        case types.RemoteAdmissionChosen() | types.MultiKueueCheckRetry() | types.MultiKueueCheckRejected():
            # SEMANTICS-ADVANCED E.2 step 5: Ready sets clusterName (immutable) and clears the nominations
            if isinstance(event, types.RemoteAdmissionChosen):
                record.cluster_name = record.cluster_name or event.cluster
                record.worker_placed = tuple(sorted(lifecycle.worker_placed(state, wl)))
            record.nominated = ()
            outcome = multikueue.check_outcome(event)
            if outcome is not None:
                _check_changed(record, outcome)
                if record.admission is not None and wl.reservation is not None and not wl.admitted:
                    # a delayed topology request the worker did not place: Admitted=False
                    # PendingDelayedTopologyRequests (SyncAdmittedCondition), not admitted
                    _checks_moved(record, state, at_ms=outcome.at_ms, granular=granular)
        case types.FactBatch():
            raise AssertionError("a FactBatch is folded fact by fact (dispatcher.core.fold unpacks it)")
        case _:
            assert_never(event)


def refresh_unhealthy_nodes(records: dict[str, WorkloadRecord], state: ClusterState, key: str) -> bool:
    """Set the ``status.unhealthyNodes`` of workload ``key``'s record from the folded cluster ``state``
    (:func:`kueue_es.scheduling.tas.replacement.unhealthy_nodes`: the failed node of an admitted TAS workload
    until its replacement or eviction; Kueue's node controller writes it, its scheduler and evictions clear it);
    returns whether it changed. A workload without a record is left alone."""
    record, wl = records.get(key), state.workloads.get(key)
    if record is None:
        return False
    nodes = replacement.unhealthy_nodes(state, wl) if wl is not None and wl.topology else ()
    if nodes == record.unhealthy_nodes:
        return False
    record.unhealthy_nodes = nodes
    return True


def resync_checks(records: dict[str, WorkloadRecord], state: ClusterState, key: str) -> bool:
    """After a change of its ClusterQueue: make the ``status.admissionChecks`` of workload ``key``'s record the
    checks that ClusterQueue now requires of it (those of its assigned flavors once it holds quota, else those
    that apply to every flavor of the ClusterQueue), keeping the entries of checks still required, as Kueue's
    workload controller does on every reconcile of a workload it is asked to look at when a ClusterQueue changes
    (workload_controller.go reconcileSyncAdmissionChecks, syncAdmissionCheckConditions, AdmissionChecksForWorkload),
    an admitted one too: it stays admitted (Kueue syncs the Admitted condition of workloads not admitted only) and
    is not evicted, a check added just waits Pending beside Admitted=True. Returns whether the record changed. A
    finished or deleted workload, or one without a record, is left alone.

    A check added gets ``Pending`` at the record's latest transition time: the log carries no time for a
    ClusterQueue edit, and the status must come from the log alone (Kueue stamps its reconcile's clock)."""
    record, wl = records.get(key), state.workloads.get(key)
    if record is None or wl is None or wl.gone:
        return False
    required = _required_checks(state, wl.reservation) if wl.reservation is not None else _pending_checks(state, wl)
    if list(record.checks) == sorted(required):
        return False
    times = [c.since_ms for c in record.conditions.values()] + [c.since_ms for c in record.checks.values()]
    _sync_checks(record, required, at_ms=max(times, default=wl.workload.metadata.creation_timestamp_ms))
    return True


def merged_topology(
    current: Mapping[str, models.TopologyAssignment], event: types.TopologyAssigned
) -> dict[str, models.TopologyAssignment]:
    """The topology assignments of a reservation after ``event``: per pod set name, the event's
    assignment over ``current`` (the earlier ones of the same reservation; empty once the quota
    is given back). A second pass (SEMANTICS-ADVANCED A.9) names only the delayed pod sets and a
    node replacement (A.13) names them all, so a pod set the event leaves out keeps what it had
    (kueue_es.projections.cluster ``_apply_topology_assigned`` folds it the same way)."""
    return {**current, **event.assignments}


def _evicted(record: WorkloadRecord, event: types.EvictionRequested) -> None:
    """The Evicted (and Preempted) conditions of a new eviction; the admission checks reset, the requeue state.

    One ``observed`` (an Evicted condition someone else wrote, admitter logic 45) is that condition as written and
    nothing more: no eviction counted in schedulingStats, no Preempted, checks and clusterName kept (only Kueue's
    evict.go Evict does those; its job reconciler just carries the condition out)."""
    if event.observed is True:
        record.set("Evicted", True, event.reason, event.message, at_ms=event.at_ms)
        return
    _evict(record, event.reason, event.message, at_ms=event.at_ms)
    if event.preemption_reason:
        record.set("Preempted", True, event.preemption_reason, event.message, at_ms=event.at_ms, generation=False)
    _reset_checks(record, at_ms=event.at_ms)
    record.cluster_name, record.nominated, record.worker_placed = "", (), ()  # evict.go resetClusterNomination
    # Kueue's SetRequeueState: requeueAt from the checks' retry times (workload_controller.go NeedsRequeueAtUpdate,
    # the count left as it is) or the PodsReady backoff (UpdateRequeueState, the count incremented): only the
    # PodsReady timeout counts, so an AdmissionCheck eviction leaves count out (nil, omitempty)
    if event.requeue_at_ms or event.requeue_count:
        record.requeue_at_ms = event.requeue_at_ms or None
        if event.requeue_count:
            record.requeue_count = event.requeue_count


DRA_REQUEUED_REASON = "Inadmissible"
"""The Requeued=False reason on a workload refused for DRA reasons (kueue.WorkloadInadmissible)."""

DRA_CLAIMS_REQUEUED_MESSAGE = "DRA resource claims not supported"
"""The Requeued=False message when a pod names a ResourceClaim (workload_controller.go handleDRA)."""


def dra_refusal(state: ClusterState, wl: WorkloadState, event: types.WorkloadInadmissible) -> str | None:
    """The Requeued=False message Kueue writes beside ``event``'s QuotaReserved=False when the admitter
    refused ``wl`` for DRA reasons (its message is the device charge's problem, scheduling/dra.py), else None:
    "DRA resource claims not supported" for a pod naming a ResourceClaim, the refusal's own message otherwise
    (workload_controller.go handleDRA, markDRAInadmissible, and the KueueDRAIntegration-off rejection)."""
    if event.reason != "Misconfigured":
        return None
    problem = dra.charge_in(state, wl.workload).problem
    if not problem or problem != event.message:
        return None
    return DRA_CLAIMS_REQUEUED_MESSAGE if problem == dra.CLAIMS_MESSAGE else problem


RESTARTED = {
    "ClusterQueueStopped": ("ClusterQueueRestarted", "The ClusterQueue was restarted after being stopped"),
    "LocalQueueStopped": ("LocalQueueRestarted", "The LocalQueue was restarted after being stopped"),
}
"""Requeued=False reason -> the Requeued=True reason and message once that queue runs again (workload_controller.go)."""


def _restarted(record: WorkloadRecord, wl: WorkloadState, state: ClusterState, *, at_ms: int) -> None:
    """Requeued=True ``ClusterQueueRestarted`` / ``LocalQueueRestarted`` for a workload drained by a stop policy
    (Requeued=False ``ClusterQueueStopped`` / ``LocalQueueStopped``) whose queue has no stop policy any more, at
    the admitter's first decision about it since (``at_ms``): Kueue's workload controller sets it when it sees
    the queue resumed, just before the workload is queued and decided again; the log has no time of its own
    for that moment."""
    requeued = record.conditions.get("Requeued")
    if requeued is None or requeued.status or requeued.reason not in RESTARTED:
        return
    spec = wl.workload.spec
    lq = state.local_queues.get((wl.workload.metadata.namespace, spec.queue_name))
    if lq is None or lq.spec.stop_policy != "None":
        return
    if requeued.reason == "ClusterQueueStopped":
        cq = state.cluster_queues.get(lq.spec.cluster_queue)
        if cq is None or cq.spec.stop_policy != "None":
            return
    reason, message = RESTARTED[requeued.reason]
    record.set("Requeued", True, reason, message, at_ms=at_ms)


def _refused_for_devices(
    record: WorkloadRecord, event: types.WorkloadInadmissible, *, requeued_message: str, granular: bool
) -> None:
    """A DRA refusal: QuotaReserved=False ``Misconfigured`` (``Inadmissible`` with the gate
    UnadmittedWorkloadsObservability off: UnadmittedWorkloadReasonWithFallback) with the refusal's message, and
    Requeued=False ``Inadmissible`` (SetRequeuedCondition), as Kueue's workload controller writes them."""
    reason = event.reason if granular else DRA_REQUEUED_REASON
    _unreserve(record, reason, event.message, at_ms=event.at_ms, granular=granular)
    record.set("Requeued", False, DRA_REQUEUED_REASON, requeued_message, at_ms=event.at_ms)


def _forget_device_refusal(record: WorkloadRecord) -> None:
    """The workload's devices are charged now: Kueue removes the Requeued=False and QuotaReserved=False its DRA
    refusal wrote (workload_controller.go handleDRA, "Cleared previous inadmissible conditions"), so the next
    QuotaReserved=False is a new transition."""
    requeued = record.conditions.get("Requeued")
    if requeued is None or requeued.status or requeued.reason != DRA_REQUEUED_REASON:
        return
    del record.conditions["Requeued"]
    reserved = record.conditions.get("QuotaReserved")
    if reserved is not None and not reserved.status:
        del record.conditions["QuotaReserved"]


def _reserve(record: WorkloadRecord, event: types.QuotaReserved, *, state: ClusterState, granular: bool) -> None:
    """SetQuotaReservation, then SyncAdmittedCondition as the scheduler's admit does (scheduler.go prepareWorkload)."""
    _forget_device_refusal(record)
    record.admission = event
    record.resource_requests = ()  # patching.go admissionStatusPatch clears them once admission is set
    record.set(
        "QuotaReserved",
        True,
        "QuotaReserved",
        f"Quota reserved in ClusterQueue {event.cluster_queue}",
        at_ms=event.at_ms,
    )
    for kind in ("Evicted", "Preempted", BLOCKED_ON_PREEMPTION_GATES):  # resetActiveCondition
        previous = record.conditions.get(kind)
        if previous is not None and previous.status:
            record.set(kind, False, "QuotaReserved", f"Previously: {previous.message}", at_ms=event.at_ms)
    previous = record.conditions.get("Requeued")
    if previous is not None and not previous.status and previous.reason in ("PodsReadyTimeout", "AdmissionCheck"):
        # the backoff is over, or the workload could not have reserved quota (workload_controller.go)
        finished_at = min(record.requeue_at_ms or event.at_ms, event.at_ms)
        record.set("Requeued", True, "BackoffFinished", "The workload backoff was finished", at_ms=finished_at)
    record.requeue_at_ms = None
    required = _required_checks(state, event)
    _sync_checks(record, required, at_ms=event.at_ms)
    checks_ready = all(record.checks[name].state == "Ready" for name in required)
    _sync_admitted(
        record,
        reserved=True,
        checks_ready=checks_ready,
        topology_ready=not _topology_pending(record),
        at_ms=event.at_ms,
        granular=granular,
    )


#: The pending reasons Kueue's workload controller writes for a workload no scheduling cycle looks at
#: (workload_controller.go: an admission gate), besides those :func:`scheduler_pending` tells by message.
_WORKLOAD_CONTROLLER_REASONS = frozenset({"Suspended", queues.ADMISSION_GATED_REASON})


def scheduler_pending(reason: str, message: str) -> bool:
    """Whether a pending outcome (QuotaReserved=False ``reason`` and ``message``) is one Kueue's scheduler writes
    after trying the workload (scheduler.go requeueAndUpdate, which also writes ``status.resourceRequests``),
    rather than its workload controller's for a workload no cycle looks at (workload_controller.go
    workloadQueueStatus: its LocalQueue or ClusterQueue missing or inactive, a missing WorkloadPriorityClass,
    an admission gate; the queue manager gives no heads of an inactive ClusterQueue)."""
    if reason in _WORKLOAD_CONTROLLER_REASONS:
        return False
    return not (
        reason == "Misconfigured"
        and (message.endswith("doesn't exist") or message.startswith("WorkloadPriorityClass "))
    )


def total_requests(wl: WorkloadState, state: ClusterState) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """What Kueue's scheduler writes as ``status.resourceRequests`` of a workload it could not admit (pkg/workload
    workload.go PropagateResourceRequests of Info.TotalRequests, totalRequestsFromPodSets): per pod set, in pod
    set order, each resource's per-pod request (excluded prefixes dropped, transformations applied, negatives as
    0: SEMANTICS §2.3, §10.4), with its DRA device charge (the extended resources it replaces dropped, the
    mapped resources added: Kueue's WithPreprocessedDRAResources, :func:`kueue_es.scheduling.dra.charge_in`),
    times the pods left after the reclaimable ones, as amounts (CPU in millicores). Unlike the quota check, no
    ``pods`` resource and nothing left out as undeclared: the ClusterQueue plays no part."""
    config = state.configuration
    if config.resources is not None and config.resources.quota_check_strategy != "BlockUndeclared":
        config = msgspec.structs.replace(
            config, resources=msgspec.structs.replace(config.resources, quota_check_strategy="BlockUndeclared")
        )
    devices = dra.charge_in(state, wl.workload)
    if devices.problem:  # refused: nothing charged (and no scheduler looks at it to write this)
        devices = dra.NO_CHARGE
    requests = queues.pod_set_requests(
        wl.workload, cq=_NO_CLUSTER_QUEUE, config=config, reclaimable=wl.reclaimable, devices=devices
    )
    return tuple(
        (ps.name, tuple((resource, amount * ps.count) for resource, amount in sorted(ps.requests.items())))
        for ps in requests
    )


#: A ClusterQueue covering nothing: :func:`total_requests` asks :func:`queues.pod_set_requests` for no ``pods``.
_NO_CLUSTER_QUEUE = models.ClusterQueue(metadata=models.ObjectMeta(name=""), spec=models.ClusterQueueSpec())


def _topology_pending(record: WorkloadRecord) -> bool:
    """Kueue's HasTopologyAssignmentsPending (workload.go): a pod set of the admission whose topology
    request was delayed (``delayedTopologyRequest: Pending``, SEMANTICS-ADVANCED A.9) and is not placed yet."""
    if record.admission is None:
        return False
    return any(
        a.delayed_topology_request == "Pending" and a.name not in record.topology and a.name not in record.worker_placed
        for a in record.admission.pod_set_assignments
    )


def _checks_moved(record: WorkloadRecord, state: ClusterState, *, at_ms: int, granular: bool) -> None:
    """A check of a workload holding quota, not admitted, changed state: the workload controller's
    SyncAdmittedCondition (workload_controller.go, for every workload not admitted). With every check
    Ready and a delayed topology request still unplaced, Admitted=False ``PendingDelayedTopologyRequests``
    (admissionchecks.go, granular reasons only: gate UnadmittedWorkloadsObservability). With every check
    Ready and nothing pending Kueue's controller admits it; here the admitter's WorkloadAdmitted does, so
    the condition waits for it rather than showing an admission the log has not recorded."""
    assert record.admission is not None
    required = _required_checks(state, record.admission)
    checks_ready = all(name in record.checks and record.checks[name].state == "Ready" for name in required)
    topology_ready = not _topology_pending(record)
    if checks_ready and topology_ready:
        return
    _sync_admitted(
        record, reserved=True, checks_ready=checks_ready, topology_ready=topology_ready, at_ms=at_ms, granular=granular
    )


BLOCKED_ON_PREEMPTION_GATES = "BlockedOnPreemptionGates"
"""The condition of a workload that would preempt but has a closed preemption gate (Kueue workload_types.go):
True, reason PreemptionGated, while it waits so; False, reason QuotaReserved, once it reserves quota."""


def _unreserve(record: WorkloadRecord, reason: str, message: str, *, at_ms: int, granular: bool) -> None:
    """UnsetQuotaReservationWithCondition: QuotaReserved=False, no admission, Admitted synced."""
    record.set("QuotaReserved", False, reason, message, at_ms=at_ms)
    record.admission = None
    record.topology = {}
    record.worker_placed = ()
    _sync_admitted(record, reserved=False, checks_ready=True, at_ms=at_ms, granular=granular)


def _sync_admitted(
    record: WorkloadRecord,
    *,
    reserved: bool,
    checks_ready: bool,
    at_ms: int,
    granular: bool,
    topology_ready: bool = True,
) -> None:
    """Kueue's SyncAdmittedCondition (admissionchecks.go; admission checks count as Ready when none is
    required; ``topology_ready`` False: a delayed topology request is still to be placed)."""
    admitted = record.is_true("Admitted")
    if granular:
        if "QuotaReserved" not in record.conditions and "Admitted" not in record.conditions:
            return  # UnadmittedWorkloadsExplicitStatus is off
    elif admitted == (reserved and checks_ready and topology_ready):
        return
    if not reserved and not checks_ready:
        status, reason = False, "NoReservation" if granular else "NoReservationUnsatisfiedChecks"
        message = NO_RESERVATION_MESSAGE if granular else "The workload has no reservation and not all checks ready"
    elif not reserved:
        status, reason, message = False, "NoReservation", NO_RESERVATION_MESSAGE
    elif not checks_ready:
        status, reason = False, "UnsatisfiedAdmissionChecks" if granular else "UnsatisfiedChecks"
        message = "The workload has not all checks ready"
    elif not topology_ready:
        status, reason, message = False, lifecycle.PENDING_DELAYED_TOPOLOGY, PENDING_DELAYED_TOPOLOGY_MESSAGE
    else:
        status, reason, message = True, "Admitted", ADMITTED_MESSAGE
    previous = record.conditions.get("Admitted")
    if admitted and not status and previous is not None:
        # the seconds since the condition's time as the object holds it, in whole seconds (admissionchecks.go)
        ran = max(0, (at_ms - previous.since_ms // 1000 * 1000) // 1000)
        record.accumulated_seconds = (record.accumulated_seconds or 0) + ran
    record.set("Admitted", status, reason, message, at_ms=at_ms)


def _evict(record: WorkloadRecord, reason: str, message: str, *, at_ms: int) -> None:
    """evict.Evict: Evicted=True and one more eviction of that reason in schedulingStats.

    ``DeactivatedDueTo<cause>`` counts as reason ``Deactivated`` with underlying cause
    ``<cause>``; ``PodsReadyTimeout`` has the cause ``WaitForStart`` or ``WaitForRecovery``
    (the PodsReady condition's reason then) (evict.go workloadEvictionStateInc).
    """
    record.set("Evicted", True, reason, message, at_ms=at_ms)
    stat, cause = reason, ""
    if reason.startswith(DEACTIVATED_PREFIX):
        stat, cause = "Deactivated", reason[len(DEACTIVATED_PREFIX) :]
    elif reason == "PodsReadyTimeout":
        ready = record.conditions.get("PodsReady")
        cause = "WaitForRecovery" if ready is not None and ready.reason == "WaitForRecovery" else "WaitForStart"
    record.evictions[(stat, cause)] = record.evictions.get((stat, cause), 0) + 1


def _observed(record: WorkloadRecord, workload: models.Workload, *, at_ms: int) -> None:
    """``spec.active`` as the log has it: an inactive workload has no requeueState (Kueue's workload controller
    clears it, set false by hand or by Kueue); a workload seen inactive and then active again is reactivated
    (workload_controller.go: Requeued=True ``Reactivated`` when it was False ``Deactivated`` or
    ``DeactivatedDueTo<cause>``), whether Kueue deactivated it (``record.deactivated``, then seen inactive) or
    someone set ``spec.active`` false by hand."""
    if not workload.spec.active:
        record.inactive_seen = True
        # an inactive workload's requeueState goes (workload_controller.go: cleared on deactivation, Kueue PR #7734)
        record.requeue_count = record.requeue_at_ms = None
        return
    if record.inactive_seen:
        record.deactivated = record.inactive_seen = False
        if _requeued_by_deactivation(record):
            record.reactivated = True  # set at the admitter's next decision: a fact carries no time of its own


def _reactivated(record: WorkloadRecord, *, at_ms: int) -> None:
    """Requeued=True ``Reactivated`` for a workload seen active again after Requeued=False ``Deactivated``, at
    the admitter's first decision about it since (``at_ms``): Kueue's workload controller sets it when it sees
    ``spec.active`` true again, just before the workload is queued again (workload_controller.go), so its
    QuotaReserved Event's "wait time since queued" counts from then. The fact of the change has no time of its
    own on the log (its creation time was used, which made that wait the workload's whole age)."""
    if not record.reactivated:
        return
    record.reactivated = False
    if _requeued_by_deactivation(record):
        record.set("Requeued", True, "Reactivated", "The workload was reactivated", at_ms=at_ms)


def _requeued_by_deactivation(record: WorkloadRecord) -> bool:
    """Whether the record's Requeued is False for a deactivation: ``Deactivated`` (by hand) or
    ``DeactivatedDueTo<cause>`` (by Kueue). Kueue's workload controller reactivates both (workload_controller.go,
    the reason matched by its prefix since Kueue PR #14874; before it, a workload Kueue had deactivated kept
    Requeued=False when set active again and was never queued)."""
    requeued = record.conditions.get("Requeued")
    return requeued is not None and not requeued.status and requeued.reason.startswith(DEACTIVATED_REASON)


def _requeued_deactivated(record: WorkloadRecord, wl: WorkloadState, reason: str, message: str, *, at_ms: int) -> None:
    """Requeued as the job reconciler writes it once the deactivated workload's job stopped (reconciler.go step 6,
    SetRequeuedCondition with the Evicted condition's reason and message, True only for ``Preempted`` and
    ``NodeFailures``): False ``Deactivated`` after a deactivation by hand, False ``DeactivatedDueTo<cause>``
    after one of Kueue's own (``DeactivatedDueToAdmissionCheck``, ``...RequeuingLimitExceeded``,
    ``...MaximumExecutionTimeExceeded``), the in-force eviction's reason when it was deactivated while being
    evicted for something else. A workload its owner set active again before that (the log has ``spec.active``
    true and no deactivation of Kueue's pending) is reactivated at the next decision, as Kueue's workload
    controller, reconciling that status write, finds it active with Requeued False for its deactivation and sets
    Requeued=True ``Reactivated`` (workload_controller.go). Before, only a reactivation seen after this write was,
    so a quick one left Requeued False on a Workload admitted again; and the reason was ``Deactivated`` for every
    deactivation."""
    record.set("Requeued", reason in REQUEUED_EVICTIONS, reason, message, at_ms=at_ms)
    if wl.workload.spec.active and not record.deactivated and _requeued_by_deactivation(record):
        record.reactivated = True


def _deactivate(record: WorkloadRecord, event: types.WorkloadDeactivated, *, holds_quota: bool) -> None:
    """WorkloadDeactivated: ``spec.active`` false; requeueState cleared (a reactivation counts from 0).

    A workload holding quota is evicted by the EvictionRequested of the same batch (or is being evicted already);
    the job reconciler writes its Requeued once its job stopped (:func:`_release`). One that holds none is marked
    evicted here, as Kueue's workload controller evicts every deactivated workload (Evicted
    ``DeactivatedDueTo<reason>``), and Requeued=False takes the Evicted condition's reason and message.
    """
    record.deactivated = True
    record.inactive_seen = False
    record.deactivations += 1
    record.requeue_count = record.requeue_at_ms = None
    if event.reason == "MaximumExecutionTimeExceeded":
        record.accumulated_seconds = None  # workload_controller.go reconcileMaxExecutionTime clears it
    if holds_quota:
        return
    message = f"{DEACTIVATED_MESSAGE} due to {event.message}" if event.message else DEACTIVATED_MESSAGE
    evicted = record.conditions.get("Evicted")
    if evicted is None or not evicted.status:
        _evict(record, f"{DEACTIVATED_PREFIX}{event.reason}", message, at_ms=event.at_ms)
        evicted = record.conditions["Evicted"]
    record.set("Requeued", False, evicted.reason, evicted.message, at_ms=event.at_ms)


def _activation_changed(record: WorkloadRecord, event: types.WorkloadInadmissible, *, granular: bool) -> None:
    """The admitter's outcome for a workload without quota whose ``spec.active`` changed (admitter logic 44):
    ``Deactivated``: Kueue's workload controller evicts it (Evicted=True ``Deactivated`` "The workload is
    deactivated" and one more such eviction in schedulingStats, unless an eviction is in force already:
    evict.go Evict via workload_controller.go Reconcile, ``!IsEvicted``) and, with UnadmittedWorkloadsObservability
    on, writes QuotaReserved=False ``Deactivated``; ``PendingEvaluation``: active again, QuotaReserved=False
    ``PendingEvaluation`` (gate on; resolveGranularUnadmittedQuotaReservedCondition). With the gate off Kueue
    leaves QuotaReserved as it was (resolveLegacyUnadmittedQuotaReservedCondition)."""
    if event.reason == cycle.DEACTIVATED and not record.is_true("Evicted"):
        _evict(record, cycle.DEACTIVATED, event.message, at_ms=event.at_ms)
    if granular:
        _unreserve(record, event.reason, event.message, at_ms=event.at_ms, granular=granular)


def _sync_checks(record: WorkloadRecord, required: list[str], *, at_ms: int) -> None:
    """syncAdmissionCheckConditions: the entries are exactly the required checks, missing ones added Pending."""
    if not required and not record.checks:
        return  # nothing required, nothing there (nearly every workload): nothing to rebuild
    kept = {name: record.checks[name] for name in required if name in record.checks}
    for name in required:
        kept.setdefault(name, CheckEntry(name=name, state="Pending", message="", since_ms=at_ms))
    record.checks = dict(sorted(kept.items()))


def _reset_checks(record: WorkloadRecord, *, at_ms: int) -> None:
    """On any eviction every check not Pending goes back to Pending; a Retry one counts a retry (B.2)."""
    for entry in record.checks.values():
        if entry.state != "Pending":
            _reset_entry(entry, at_ms=at_ms)


def _reset_entry(entry: CheckEntry, *, at_ms: int) -> None:
    times = (entry.since_ms,) if entry.reported_ms is None else (entry.since_ms, entry.reported_ms)
    entry.reset_from = (entry.state, entry.message, times)
    if entry.state == "Retry":
        entry.retry_count = (entry.retry_count or 0) + 1
    entry.message = RESET_MESSAGE.format(state=entry.state)
    entry.state = "Pending"
    entry.since_ms = at_ms
    entry.pod_set_updates = []


def late_reset(
    record: WorkloadRecord, state: ClusterState, wl: WorkloadState, event: types.AdmissionCheckStateChanged
) -> None:
    """A Retry reported while ``wl``'s eviction is carried out, which that eviction resets (the cluster fold's
    :func:`~kueue_es.projections.cluster.resets_late_retry`, ``state`` folded past it): its entry, just set, goes
    back to Pending with a retry counted, and its retry time moves requeueAt later, as the cluster fold has it."""
    entry = record.checks.get(event.check)
    if entry is None or entry.state != "Retry" or not resets_late_retry(state, wl, event):
        return
    _reset_entry(entry, at_ms=late_retry_reset(wl, event).at_ms)
    if event.requeue_after_seconds is not None:
        requeue_at = event.at_ms + event.requeue_after_seconds * 1000
        record.requeue_at_ms = max(record.requeue_at_ms or 0, requeue_at)


def _check_changed(record: WorkloadRecord, event: types.AdmissionCheckStateChanged) -> None:
    """A check controller's report: the entry takes the state, message, requeueAfterSeconds and
    podSetUpdates; its lastTransitionTime moves only when the state changes (SetAdmissionCheckState).

    A report about a check the record does not list (one the workload's ClusterQueue does not name for it, an entry
    written by hand) adds nothing: Kueue's workload controller drops such an entry again at its next reconcile
    (syncAdmissionCheckConditions keeps only the checks AdmissionChecksForWorkload names). Before, it was listed."""
    entry = record.checks.get(event.check)
    if entry is None:
        return
    if entry.state != event.state:
        entry.since_ms = event.at_ms
    entry.state = event.state
    entry.message = event.message[:MAX_CONDITION_MESSAGE]
    entry.requeue_after_seconds = event.requeue_after_seconds
    entry.pod_set_updates = list(event.pod_set_updates)
    entry.reported_ms = event.at_ms
    entry.reset_from = None


def reset_reports(record: WorkloadRecord | None) -> dict[str, tuple[str, str, frozenset[str]]]:
    """Check name -> the report an eviction reset (state, message, and the lastTransitionTimes, as the API writes
    them, the log saw it with), for each of ``record``'s entries the eviction left reset: the server may still
    hold that report (a write of the reset not made yet, or undone), which the reset replaces whatever its time,
    as Kueue's Evict does (evict.go resetChecksOnEviction)."""
    if record is None:
        return {}
    return {
        name: (
            entry.reset_from[0],
            entry.reset_from[1],
            frozenset(manifests.format_time_ms(ms) for ms in entry.reset_from[2]),
        )
        for name, entry in record.checks.items()
        if entry.reset_from is not None and entry.state == "Pending"
    }


def _release(
    record: WorkloadRecord, event: types.QuotaReleased, *, before: Before, wl: WorkloadState, granular: bool
) -> None:
    """The quota is given back: what Kueue writes depends on why."""
    if event.reason in ("Finished", "Deleted"):
        return  # a finished Workload keeps its admission; a deleted one is gone with its Job
    if event.reason == slices.REPLACED_REASON and wl.finished is not None:
        # An elastic slice replaced by a newer one (scheduler.go replaceWorkloadSlice): Finished, admission kept.
        record.set("Finished", True, wl.finished.reason, wl.finished.message, at_ms=event.at_ms)
        return
    if event.reason == ON_HOLD_REASON:
        # its job holds it (a StatefulSet scaled to zero, a RayJob KubeRay refused): the reservation is cleared
        # with no eviction and nothing requeued (statefulset_reconciler.go releaseScaleDownReservation,
        # reconciler.go JobWithOnHold: UnsetQuotaReservationWithCondition), with the job's message
        message = wl.workload.on_hold or ON_HOLD_MESSAGE
        _unreserve(record, ON_HOLD_REASON, message, at_ms=event.at_ms, granular=granular)
        if "PodsReady" in record.conditions:
            # no longer admitted: the job reconciler's PodsReady says so (reconciler.go generatePodsReadyCondition),
            # so the pods of the scale-up are Started again, not Recovered
            start = PODS_READY_MESSAGES["WaitForStart"]
            record.set("PodsReady", False, "WaitForStart", start, at_ms=event.at_ms)
        return
    pending = "PendingEvaluation" if granular else "Pending"
    if event.reason == "Deactivated" and before.eviction is None:
        message = DEACTIVATED_MESSAGE
        _evict(record, DEACTIVATED_REASON, message, at_ms=event.at_ms)
        _requeued_deactivated(record, wl, DEACTIVATED_REASON, message, at_ms=event.at_ms)
        _unreserve(record, pending, message, at_ms=event.at_ms, granular=granular)
        return
    if before.eviction is None and event.reason in ("ClusterQueueStopped", "LocalQueueStopped"):
        # A reservation not admitted yet, cancelled by a stop policy (workload_controller.go, SEMANTICS §9.3).
        what = "ClusterQueue" if event.reason == "ClusterQueueStopped" else "LocalQueue"
        name = event.cluster_queue if what == "ClusterQueue" else wl.workload.spec.queue_name
        reason = "Suspended" if granular else "Inadmissible"
        _unreserve(record, reason, f"{what} {name} is stopped", at_ms=event.at_ms, granular=granular)
        return
    if before.eviction is None and event.reason in ("LocalQueueMissing", "ClusterQueueTerminating"):
        # A reservation not admitted yet, given back as its queue is going (admitter logic 42; Kueue's
        # workload_controller.go reconcileOnLocalQueueActiveState / reconcileOnClusterQueueActiveState).
        if event.reason == "LocalQueueMissing":
            what, name = "LocalQueue", wl.workload.spec.queue_name
        else:
            what, name = "ClusterQueue", event.cluster_queue
        reason = "Misconfigured" if granular else "Inadmissible"
        _unreserve(record, reason, f"{what} {name} is terminating or missing", at_ms=event.at_ms, granular=granular)
        return
    evicted = record.conditions.get("Evicted")
    if evicted is not None and evicted.status:
        reason, message = evicted.reason, evicted.message
    elif before.eviction is not None:
        reason, message = before.eviction.reason, before.eviction.message
    else:
        reason, message = event.reason, f"The workload released its quota ({event.reason})"
    # jobframework/reconciler.go, the evicted job stopped: Requeued, then the reservation cleared.
    if reason.startswith(DEACTIVATED_REASON) or record.deactivated:
        _requeued_deactivated(record, wl, reason, message, at_ms=event.at_ms)
    elif reason in ("PodsReadyTimeout", "AdmissionCheck"):
        if record.requeue_at_ms and record.requeue_at_ms > event.at_ms:  # backoff (SEMANTICS §3.7)
            record.set("Requeued", False, reason, message, at_ms=event.at_ms)
        else:
            record.set("Requeued", True, "BackoffFinished", "The workload backoff was finished", at_ms=event.at_ms)
    else:
        record.set("Requeued", reason in REQUEUED_EVICTIONS, reason, message, at_ms=event.at_ms)
    _unreserve(record, pending, message, at_ms=event.at_ms, granular=granular)


def _pending_checks(state: ClusterState, wl: WorkloadState) -> list[str]:
    """The checks a workload without admission must pass: those of its ClusterQueue (through its
    LocalQueue) that apply to every flavor of the ClusterQueue (AdmissionChecksForWorkload)."""
    lq = state.local_queues.get((wl.workload.metadata.namespace, wl.workload.spec.queue_name))
    cq = state.cluster_queues.get(lq.spec.cluster_queue) if lq is not None else None
    if cq is None or cq.spec.admission_checks_strategy is None:
        return []
    flavors = {fq.name for group in cq.spec.resource_groups for fq in group.flavors}
    return sorted(
        rule.name
        for rule in cq.spec.admission_checks_strategy.admission_checks
        if not rule.on_flavors or set(rule.on_flavors) >= flavors
    )


def ready_pod_set_updates(record: WorkloadRecord | None) -> list[tuple[str, models.PodSetUpdate]]:
    """(check name, update) of every Ready check's podSetUpdates, checks in name order (status order)."""
    if record is None:
        return []
    return [
        (entry.name, update)
        for entry in record.checks.values()
        if entry.state == "Ready"
        for update in entry.pod_set_updates
    ]


def _required_checks(state: ClusterState, reservation: types.QuotaReserved) -> list[str]:
    """The admission checks the reservation's ClusterQueue requires on its assigned flavors (SEMANTICS §9.5), as
    the admitter reads them (:func:`lifecycle.required_checks`): a check without ``onFlavors`` stands for every
    flavor of the ClusterQueue, so a reservation assigning no flavor (a workload asking for nothing) requires
    none (pkg/workload/workload.go admissionChecksForAdmission)."""
    cq = state.cluster_queues.get(reservation.cluster_queue)
    if cq is None or cq.spec.admission_checks_strategy is None:
        return []
    return lifecycle.required_checks(cq, lifecycle.assigned_flavors(reservation))


def _fingerprint(record: WorkloadRecord) -> tuple[Any, ...]:
    return (
        tuple((c.type, c.status, c.reason, c.message, c.since_ms, c.generation) for c in record.conditions.values()),
        record.admission,
        tuple(sorted(record.topology.items())),
        tuple(record.evictions.items()),
        record.accumulated_seconds,
        tuple(
            (c.name, c.state, c.message, c.since_ms, c.requeue_after_seconds, c.retry_count, tuple(c.pod_set_updates))
            for c in record.checks.values()
        ),
        record.requeue_count,
        record.requeue_at_ms,
        record.deactivated,
        record.inactive_seen,
        record.deactivations,
        record.reactivated,
        record.reclaimable,
        record.cluster_name,
        record.nominated,
        record.unhealthy_nodes,
        record.worker_placed,
        record.resource_requests,
    )


# -- rendering -----------------------------------------------------------------------------------


def controller_reference(owner: models.OwnerReference) -> dict[str, Any]:
    """``owner`` as the controller owner reference of a Workload object (``blockOwnerDeletion``, as Kueue's
    controllerutil.SetControllerReference writes it)."""
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_job_workload(wl: WorkloadState) -> bool:
    """A workload the watcher made from a batch/v1 Job, Pods or a registered integration's job (a JobSet, a
    PyTorchJob, ...): the dispatcher owns its Workload object."""
    owner = wl.workload.owner
    if owner is None:
        return False
    if (owner.api_version, owner.kind) in (("batch/v1", "Job"), ("v1", "Pod")):
        return True
    integration = integrations.by_kind(owner.kind)
    return integration is not None and integration.api_version == owner.api_version


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def adoption_patch(
    current: Mapping[str, Any], wl: WorkloadState, *, members: Sequence[tuple[str, str]] = ()
) -> dict[str, Any]:
    """The JSON merge patch that makes the prebuilt Workload object ``current`` its job's, as the log has it
    (:func:`kueue_es.jobframework.prebuilt.is_adopted`); ``{}`` when it is so already.

    Kueue EnsurePrebuiltWorkloadOwnership: the job as its controller owner (``blockOwnerDeletion``; the other
    owner references kept, one to the job made the controller), the ``kueue.x-k8s.io/job-uid`` label when the
    UID is a valid label value; QueueNameChange: ``spec.queueName`` the job's while the workload holds no quota
    (the log's). The rest of the object, its spec above all, stays the user's: no finalizer, no templates of the
    job's (Kueue writes neither on a prebuilt Workload).

    A pod group's (the log's copy carries :data:`GROUP_WORKLOAD_ANNOTATION`): each of its pods ``members``
    (``(name, uid)``; none known: the pod the log names) an owner but not the controller, added to those there,
    and no label (pod_controller.go EnsureWorkloadOwnedByAllMembers: the Workload goes once its last pod went).
    """
    owner = wl.workload.owner
    assert owner is not None
    meta = current.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    refs = [ref for ref in meta.get("ownerReferences") or [] if isinstance(ref, dict)]
    patch_meta: dict[str, Any] = {}
    if owner.kind == "Pod" and wl.workload.metadata.annotations.get(GROUP_WORKLOAD_ANNOTATION) == "true":
        present = {str(ref.get("uid") or "") for ref in refs}
        pods = members or [(owner.name, owner.uid)]
        added = [
            {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid} for name, uid in pods if uid not in present
        ]
        if added:
            patch_meta["ownerReferences"] = refs + added
    else:
        if not any(ref.get("uid") == owner.uid and ref.get("controller") is True for ref in refs):
            patch_meta["ownerReferences"] = [ref for ref in refs if ref.get("uid") != owner.uid] + [
                controller_reference(owner)
            ]
        labels = meta.get("labels")
        labels = labels if isinstance(labels, dict) else {}
        if len(owner.uid) <= 63 and _LABEL_VALUE.fullmatch(owner.uid) and labels.get(JOB_UID_LABEL) != owner.uid:
            patch_meta["labels"] = {JOB_UID_LABEL: owner.uid}
    patch: dict[str, Any] = {"metadata": patch_meta} if patch_meta else {}
    queue = wl.workload.spec.queue_name
    spec = current.get("spec")
    if queue and (spec.get("queueName") if isinstance(spec, dict) else None) != queue:
        patch["spec"] = {"queueName": queue}
    return patch


RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
"""Kueue's finalizer (kueue.ResourceInUseFinalizerName): a job's Workload carries it until the workload finishes,
or until the job is stopped once the Workload is marked for deletion (or the job is gone); a ClusterQueue
stays, terminating, while any workload holds quota in it; a ResourceFlavor or AdmissionCheck while a
ClusterQueue names it; a Topology while a ResourceFlavor names it."""


def workload_object(
    wl: WorkloadState,
    state: ClusterState,
    *,
    templates: Mapping[str, Mapping[str, Any]] | None = None,
    members: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """The Workload object Kueue's job reconciler creates for the job (metadata and spec; no status).

    ``members``: for a pod group, its pods as ``(name, uid)``: each is an owner (not the controller), as Kueue's
    ConstructComposableWorkload and EnsureWorkloadOwnedByAllMembers set them, so the garbage collector keeps the
    Workload while any of them remains; without them the group's first pod is its controller owner. A
    StatefulSet's or LeaderWorkerSet's group (:func:`~kueue_es.jobframework.integrations.serving.
    parent_owner_reference`) names that parent first, also with no pod left (a StatefulSet held while scaled to
    zero, a LeaderWorkerSet group whose pods are made again), and carries its UID as the
    ``kueue.x-k8s.io/job-uid`` label (statefulset_reconciler.go, leaderworkerset_reconciler.go
    constructWorkload).

    ``templates``: the job's pod templates by pod set name (:func:`kueue_es.jobframework.integrations.
    job_pod_templates`), each written whole as its pod set's ``template``, as Kueue's Workload carries it
    (image, command, env, resourceClaims, tolerations, nodeSelector, ...); a pod set without one gets
    the template the log knows (one container named for the pod set with its effective requests, the
    nodeSelector, tolerations and required node affinity).

    Owner reference to the job (controller; none once finished ``OwnerNotFound``, orphaned, but for the
    finish of a job being deleted, ``owner_deleting``: that Workload goes with its job), label
    ``kueue.x-k8s.io/job-uid`` (not for a
    pod group, which Kueue does not label) and ConcurrentAdmission's parent label when the log's has it, Kueue's :data:`RESOURCE_IN_USE_FINALIZER` until the
    workload finishes (jobframework utils.go NewWorkload, a Pod's and a pod group's too), annotations the watcher gave the workload
    (``kueue.x-k8s.io/is-group-workload``), spec from the folded workload (SEMANTICS
    §2.1; reconciler.go ConstructWorkload). Never ``spec.active``: once Kueue has set it false the field is
    its user's (workload_controller.go writes it once, with an Update, and the job reconciler keeps the value it
    reads, reconciler.go prepareWorkload), so a forced apply of the log's value, which may be older than a
    user's change, would undo it; the deactivation is written once on its own (:func:`deactivation_unwritten`).
    """
    workload, owner = wl.workload, wl.workload.owner
    assert owner is not None
    meta = workload.metadata
    metadata: dict[str, Any] = {"name": meta.name, "namespace": meta.namespace}
    parent = serving.parent_owner_reference(workload)
    # the job's labels the watcher copied (integrations.labelKeysToCopy; the log's other kueue.x-k8s.io/ labels,
    # which watchers before it copied, are none of Kueue's)
    labels = {k: v for k, v in meta.labels.items() if not k.startswith(KUEUE_LABEL_PREFIX)}
    if meta.labels.get(ca.PARENT_LABEL) == "true":
        labels[ca.PARENT_LABEL] = "true"  # ConcurrentAdmission: Kueue's workload controller labels a parent
    if owner.uid and meta.annotations.get(GROUP_WORKLOAD_ANNOTATION) != "true":
        labels[JOB_UID_LABEL] = owner.uid
    elif parent is not None:
        labels[JOB_UID_LABEL] = parent["uid"]  # the parent's reconciler's constructWorkload
    if labels:
        metadata["labels"] = dict(sorted(labels.items()))
    # the log's own list of a pod group's pods is no annotation of Kueue's; a priority boost is another
    # controller's, read off the object (services/watcher/job_tracking.py): writing it back could undo its change
    dropped = (models.POD_GROUP_MEMBERS_ANNOTATION, models.PRIORITY_BOOST_ANNOTATION)
    annotations = {k: v for k, v in meta.annotations.items() if k not in dropped}
    if annotations:
        metadata["annotations"] = dict(sorted(annotations.items()))
    if wl.finished is None:
        metadata["finalizers"] = [RESOURCE_IN_USE_FINALIZER]
    if (
        wl.finished is not None
        and wl.finished.reason == workloads.OWNER_NOT_FOUND_REASON
        and wl.finished.owner_deleting is not True
    ):
        pass  # orphaned: its job is gone and the garbage collector took the reference off (never put back)
    elif (members or parent is not None) and meta.annotations.get(GROUP_WORKLOAD_ANNOTATION) == "true":
        # a StatefulSet's or LeaderWorkerSet's group: the parent first, as Kueue's reconciler makes it, and kept
        # with its pods gone (the garbage collector keeps the Workload); then each pod
        # (EnsureWorkloadOwnedByAllMembers)
        metadata["ownerReferences"] = [parent] if parent is not None else []
        metadata["ownerReferences"] += [
            {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid} for name, uid in sorted(members)
        ]
    else:
        metadata["ownerReferences"] = [controller_reference(owner)]
    templates = templates or {}
    spec: dict[str, Any] = {"podSets": [_pod_set(ps, templates.get(ps.name)) for ps in workload.spec.pod_sets]}
    if workload.spec.queue_name:
        spec["queueName"] = workload.spec.queue_name
    ref = workload.spec.priority_class_ref
    if ref is not None:
        spec["priorityClassRef"] = {"group": ref.group, "kind": ref.kind, "name": ref.name}
    spec["priority"] = priority_of(workload, state)
    if workload.spec.maximum_execution_time_seconds:
        # the job's kueue.x-k8s.io/max-exec-time-seconds label (jobframework utils.go NewWorkload)
        spec["maximumExecutionTimeSeconds"] = workload.spec.maximum_execution_time_seconds
    return {"apiVersion": KUEUE_API, "kind": "Workload", "metadata": metadata, "spec": spec}


def deactivation_unwritten(record: WorkloadRecord | None) -> bool:
    """Whether the log deactivated the workload (WorkloadDeactivated: Kueue's decision) and the watcher has not yet
    seen ``spec.active`` false on its Workload object since: the one moment the dispatcher writes that field.

    Kueue's workload controller sets ``spec.active`` false once, with an Update of the object it read
    (workload_controller.go, the DeactivationTarget branch); from then on the field is its user's, who may set it
    true again (kubectl kueue resume). So the false is written as a decision, once per WorkloadDeactivated
    (:attr:`WorkloadRecord.deactivations` tells them apart), never re-asserted from the log: a value the log
    holds may be older than the user's last change.
    """
    return record is not None and record.deactivated and not record.inactive_seen


def _pod_set(pod_set: models.PodSet, template: Mapping[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": pod_set.name, "count": pod_set.count}
    if template is not None:
        out["template"] = without_repeated_env(template)
        spec = out["template"].get("spec")
        if isinstance(spec, dict):
            # Kueue's typed client writes each Quantity as resource.Quantity encodes it ("1", "500m"), whatever
            # the job's template had: a custom resource's (a JobSet's, ...) is stored as sent (cpu: 1)
            quantities.canonical_pod_spec(spec)
    else:
        out["template"] = {"spec": _pod_spec(pod_set)}
    if pod_set.min_count is not None:
        out["minCount"] = pod_set.min_count
    if pod_set.topology_request is not None:
        out["topologyRequest"] = msgspec.to_builtins(pod_set.topology_request)
    return out


def without_repeated_env(template: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of pod template ``template`` (``{"metadata": ..., "spec": {"containers": [...], ...}}``) in which each
    container and init container names each environment variable once: at the place of its first occurrence, with
    the value of its last, which is the one the kubelet gives the container (Kueue jobframework/utils.go
    SanitizePodSets, applied to every job's pod sets by JobPodSets before the Workload is built or compared).
    The job's own template keeps its repetitions; entries that are not mappings are left as they are."""
    out = copy.deepcopy(dict(template))
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    for group in ("containers", "initContainers"):
        for container in spec.get(group) or []:
            env = container.get("env") if isinstance(container, dict) else None
            if not isinstance(env, list) or not all(isinstance(var, dict) for var in env):
                continue
            # a dict keeps the first insertion's place and the last assignment's value: Kueue's ordered groups
            last = {var.get("name"): var for var in env}
            container["env"] = list(last.values())
    return out


def _pod_spec(pod_set: models.PodSet) -> dict[str, Any]:
    """The pod spec of a pod set as the log knows it (no job template to copy)."""
    container = {"name": pod_set.name, "resources": {"requests": _quantities(pod_set.requests)}}
    pod_spec: dict[str, Any] = {"containers": [container]}
    if pod_set.node_selector:
        pod_spec["nodeSelector"] = dict(pod_set.node_selector)
    if pod_set.tolerations:
        pod_spec["tolerations"] = [toleration_dict(t) for t in pod_set.tolerations]
    if pod_set.required_node_affinity:
        terms = [
            {
                "matchExpressions": [
                    {"key": e.key, "operator": e.operator, "values": list(e.values)} for e in term.match_expressions
                ]
            }
            for term in pod_set.required_node_affinity
        ]
        pod_spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    if pod_set.preferred_node_affinity:
        preferred = [
            {
                "weight": term.weight,
                "preference": {
                    "matchExpressions": [
                        {"key": e.key, "operator": e.operator, "values": list(e.values)}
                        for e in term.preference.match_expressions
                    ]
                },
            }
            for term in pod_set.preferred_node_affinity
        ]
        node_affinity = pod_spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return pod_spec


def toleration_dict(toleration: models.Toleration) -> dict[str, Any]:
    """A Toleration as the Kubernetes API writes it (empty fields left out)."""
    out: dict[str, Any] = {"key": toleration.key, "operator": toleration.operator}
    if toleration.value:
        out["value"] = toleration.value
    if toleration.effect:
        out["effect"] = toleration.effect
    if toleration.toleration_seconds is not None:
        out["tolerationSeconds"] = toleration.toleration_seconds
    return out


def workload_status(record: WorkloadRecord | None, *, generation: int) -> dict[str, Any]:
    """The Workload's ``status`` as Kueue writes it; ``generation`` is the object's ``metadata.generation``."""
    if record is None:
        return {}
    status: dict[str, Any] = {}
    conditions = [record.conditions[kind] for kind in CONDITION_ORDER if kind in record.conditions]
    if conditions:
        status["conditions"] = [_condition(c, generation=generation) for c in conditions]
    if record.admission is not None:
        assignments = []
        for a in record.admission.pod_set_assignments:
            entry: dict[str, Any] = {"name": a.name}
            # omitempty in Kueue's API (workload_types.go): a pod set that requests nothing has neither map
            if a.flavors:
                entry["flavors"] = dict(sorted(a.flavors.items()))
            usage = {r: v for r, v in a.resource_usage.items() if r in a.flavors}
            if usage:
                entry["resourceUsage"] = _quantities(usage)
            entry["count"] = a.count
            if a.name in record.topology:
                entry["topologyAssignment"] = topology_assignment_dict(record.topology[a.name])
            if a.delayed_topology_request:
                # SEMANTICS-ADVANCED A.9: Ready once the second pass placed it, or, under MultiKueue, once the
                # admitting worker's admission did (multikueue/workload.go updateDelayedTopologyRequest)
                ready = a.name in record.topology or a.name in record.worker_placed or record.is_true("Admitted")
                entry["delayedTopologyRequest"] = "Ready" if ready else a.delayed_topology_request
            assignments.append(entry)
        status["admission"] = {"clusterQueue": record.admission.cluster_queue, "podSetAssignments": assignments}
    if record.checks:
        status["admissionChecks"] = [_check_status(entry) for entry in record.checks.values()]
    if record.resource_requests:
        status["resourceRequests"] = [
            {"name": name, "resources": _quantities(dict(amounts))} for name, amounts in record.resource_requests
        ]
    if record.requeue_count is not None or record.requeue_at_ms:
        requeue: dict[str, Any] = {}
        if record.requeue_count is not None:
            requeue["count"] = record.requeue_count
        if record.requeue_at_ms:
            requeue["requeueAt"] = manifests.format_time_ms(record.requeue_at_ms)
        status["requeueState"] = requeue
    if record.evictions:
        # in the order each (reason, cause) was first counted: Kueue appends a new one (setSchedulingStatsEviction)
        status["schedulingStats"] = {
            "evictions": [
                {"reason": reason, "underlyingCause": cause, "count": count}
                for (reason, cause), count in record.evictions.items()
            ]
        }
    if record.accumulated_seconds is not None:
        status["accumulatedPastExecutionTimeSeconds"] = record.accumulated_seconds
    if record.reclaimable:
        status["reclaimablePods"] = [{"name": name, "count": count} for name, count in record.reclaimable]
    if record.unhealthy_nodes:
        status["unhealthyNodes"] = [{"name": name} for name in record.unhealthy_nodes]
    if record.cluster_name:
        status["clusterName"] = record.cluster_name
    if record.nominated:
        status["nominatedClusterNames"] = list(record.nominated)
    return status


def not_before(wanted: dict[str, Any], created_ms: int) -> dict[str, Any]:
    """``wanted`` (a Workload's status) with no condition's and no admission check's ``lastTransitionTime`` before
    ``created_ms``, its object's ``metadata.creationTimestamp`` (0: unknown, left as it is). The log may decide on
    a workload before the dispatcher made its object (the admitter reads the watcher's fact), while in Kueue the
    Workload exists before anything is set on it: a transition the log dates earlier is shown at the creation,
    what Kueue's controllers would have written once the object was there. The log's times stay as they are."""
    if created_ms <= 0:
        return wanted
    floor = manifests.format_time_ms(created_ms)

    def later(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**e, "lastTransitionTime": floor} if e["lastTransitionTime"] < floor else e for e in entries]

    out = wanted
    for name in ("conditions", "admissionChecks"):
        entries = wanted.get(name)
        if entries and any(e["lastTransitionTime"] < floor for e in entries):
            out = {**out, name: later(entries)}
    return out


def topology_assignment_dict(ta: models.TopologyAssignment) -> dict[str, Any]:
    """A TopologyAssignment as Kueue writes it in ``podSetAssignments[]`` (v1beta2, A.8.1; ``slices`` always
    present, ``[]`` when empty)."""
    out = msgspec.to_builtins(ta)
    out.setdefault("slices", [])
    return out


def _check_status(entry: CheckEntry) -> dict[str, Any]:
    """One ``status.admissionChecks[]`` entry as the API writes it (empty fields left out)."""
    out: dict[str, Any] = {
        "name": entry.name,
        "state": entry.state,
        "lastTransitionTime": manifests.format_time_ms(entry.since_ms),
        "message": entry.message,
    }
    if entry.requeue_after_seconds is not None:
        out["requeueAfterSeconds"] = entry.requeue_after_seconds
    if entry.retry_count is not None:
        out["retryCount"] = entry.retry_count
    if entry.pod_set_updates:
        out["podSetUpdates"] = [pod_set_update_dict(u) for u in entry.pod_set_updates]
    return out


def pod_set_update_dict(update: models.PodSetUpdate) -> dict[str, Any]:
    """A PodSetUpdate as the API writes it (empty maps and lists left out)."""
    out: dict[str, Any] = {"name": update.name}
    if update.labels:
        out["labels"] = dict(sorted(update.labels.items()))
    if update.annotations:
        out["annotations"] = dict(sorted(update.annotations.items()))
    if update.node_selector:
        out["nodeSelector"] = dict(sorted(update.node_selector.items()))
    if update.tolerations:
        out["tolerations"] = [toleration_dict(t) for t in update.tolerations]
    return out


def replaced_slice_status(
    wanted: dict[str, Any], *, key: str, state: ClusterState, workload_uid: Callable[[str, str], str]
) -> dict[str, Any]:
    """``wanted`` (a :func:`workload_status` of slice ``key``) with the message Kueue writes on a slice finished
    ``WorkloadSliceReplaced``: the new slice's Workload object UID (``workload_uid(namespace, name)``, the API
    server's, "" when not known) and its ``kueue.x-k8s.io/job-uid`` (scheduler.go replaceWorkloadSlice).
    ``wanted`` itself when the slice was not replaced, or its replacement or that UID is not known."""
    conditions = wanted.get("conditions") or []
    finished = next((c for c in conditions if c["type"] == "Finished" and c["reason"] == slices.REPLACED_REASON), None)
    new = replacement_of(state, key) if finished is not None else None
    if finished is None or new is None:
        return wanted
    meta = new.workload.metadata
    uid = workload_uid(meta.namespace, meta.name)
    if not uid:
        return wanted
    message = slices.replaced_message(uid=uid, job_uid=meta.labels.get(JOB_UID_LABEL, ""))
    rewritten = [{**c, "message": message} if c is finished else c for c in conditions]
    return {**wanted, "conditions": rewritten}


_NAMED_UID = re.compile(r"\(UID: ([^,)\s]+)")


def with_object_uid(message: str, object_uid: Callable[[str], str]) -> str:
    """``message`` with each workload UID it names as Kueue writes one, ``(UID: <uid>`` (the preemption
    messages of preemption.go, on the victim and on the preemptor), given as that workload's Workload object
    UID: ``object_uid(log_uid)`` ("" when not known, and then the UID is left as it is).

    A workload made from a job has the job's UID on the log (the watcher sees the job before any Workload
    object exists); the API server gives the Workload object the dispatcher creates another one, and Kueue's
    messages name that one."""
    if "(UID: " not in message:
        return message

    def named(match: re.Match[str]) -> str:
        return f"(UID: {object_uid(match.group(1)) or match.group(1)}"

    return _NAMED_UID.sub(named, message)


def with_object_uids(wanted: dict[str, Any], object_uid: Callable[[str], str]) -> dict[str, Any]:
    """``wanted`` (a :func:`workload_status`) with :func:`with_object_uid` applied to every condition's message;
    ``wanted`` itself when no message changes."""
    conditions = wanted.get("conditions") or []
    rewritten = [{**c, "message": with_object_uid(c["message"], object_uid)} for c in conditions]
    if all(new["message"] == old["message"] for new, old in zip(rewritten, conditions, strict=True)):
        return wanted
    return {**wanted, "conditions": rewritten}


def _condition(condition: Condition, *, generation: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": condition.type,
        "status": "True" if condition.status else "False",
        "reason": condition.reason,
        "message": condition.message,
        "lastTransitionTime": manifests.format_time_ms(condition.since_ms),
    }
    if condition.generation and generation:
        out["observedGeneration"] = generation
    return out


def _stopped(state: ClusterState, lq_key: tuple[str, str]) -> bool:
    lq = state.local_queues.get(lq_key)
    return lq is not None and lq.spec.stop_policy != "None"


def local_queues_by_cluster_queue(state: ClusterState) -> dict[str, list[tuple[str, str]]]:
    """The LocalQueues (namespace, name) that feed each ClusterQueue, for :func:`cluster_queue_status`."""
    out: dict[str, list[tuple[str, str]]] = {}
    for key, lq in state.local_queues.items():
        out.setdefault(lq.spec.cluster_queue, []).append(key)
    return out


def cluster_queue_status(
    state: ClusterState, name: str, *, feeding: dict[str, list[tuple[str, str]]] | None = None
) -> dict[str, Any]:
    """ClusterQueue ``status`` counts and usage (clusterqueue_controller.go updateCqStatusIfChanged, cache.Usage).

    ``pendingWorkloads``: active workloads without quota in the LocalQueues that feed
    it, but a stopped one's (``spec.stopPolicy`` not None: Kueue takes its workloads out of the
    ClusterQueue's queue); ``reservingWorkloads`` / ``admittedWorkloads``: those holding quota in it / also
    admitted; ``flavorsReservation`` / ``flavorsUsage``: their quota per flavor and
    covered resource, with the part above nominal quota as ``borrowed`` when the
    ClusterQueue is in a cohort; ``fairSharing.weightedShare`` while the Configuration turns
    fair sharing on (:func:`weighted_share`). ``feeding`` (:func:`local_queues_by_cluster_queue`)
    saves a scan of every LocalQueue when many ClusterQueues are written at once. The
    ``Active`` condition is :func:`active_condition`'s.
    """
    cq = state.cluster_queues[name]
    feeding = local_queues_by_cluster_queue(state) if feeding is None else feeding
    # a stopped LocalQueue's workloads are out of its ClusterQueue's queue (Kueue: manager.go DeleteLocalQueue)
    pending = sum(visibility.queued_count(state, key) for key in feeding.get(name, ()) if not _stopped(state, key))
    reserved, admitted, count, admitted_count = _usage(state, name)
    nominal = {
        (fq.name, rq.name): rq.nominal_quota
        for group in cq.spec.resource_groups
        for fq in group.flavors
        for rq in fq.resources
    }
    in_cohort = bool(cq.spec.cohort_name)

    def usage_list(usage: dict[tuple[str, str], int]) -> list[dict[str, Any]]:
        out = []
        for group in cq.spec.resource_groups:
            for fq in group.flavors:
                resources = []
                for resource in sorted(group.covered_resources):
                    used = usage.get((fq.name, resource), 0)
                    borrowed = max(0, used - nominal.get((fq.name, resource), 0)) if in_cohort else 0
                    resources.append(
                        {
                            "name": resource,
                            "total": to_quantity(resource, used),
                            "borrowed": to_quantity(resource, borrowed),
                        }
                    )
                out.append({"name": fq.name, "resources": resources})
        return out

    status: dict[str, Any] = {
        "pendingWorkloads": pending,
        "reservingWorkloads": count,
        "admittedWorkloads": admitted_count,
    }
    if cq.spec.resource_groups:
        status["flavorsReservation"] = usage_list(reserved)
        status["flavorsUsage"] = usage_list(admitted)
    if state.configuration.fair_sharing is not None:
        status["fairSharing"] = {"weightedShare": weighted_share(state, name, cohort=False)}
    return status


def weighted_share(state: ClusterState, name: str, *, cohort: bool) -> int:
    """``fairSharing.weightedShare`` of ClusterQueue (or, with ``cohort``, Cohort) ``name``: its dominant
    resource share over its weight, rounded up (Kueue cache.Usage / CohortStats, PreciseWeightedShare,
    helpers.go WeightedShare; SEMANTICS §7.9); 0 for a root, for a node that borrows nothing and for one
    outside the quota tree (a Cohort in a cycle)."""
    tree = quota.cached(state)
    node = (tree.cohorts if cohort else tree.cluster_queues).get(name)
    if node is None or node.in_cycle:
        return 0
    return readiness.weighted_share(fairsharing.share(node, fairsharing.Weights(state)).weighted)


def held_object(
    state: ClusterState, kind: str, name: str
) -> models.ResourceFlavor | models.AdmissionCheck | models.Topology | None:
    """The ResourceFlavor, AdmissionCheck or Topology ``name`` as the log has it (None: not there, or another
    kind)."""
    if kind == "ResourceFlavor":
        return state.flavors.get(name)
    if kind == "AdmissionCheck":
        return state.admission_checks.get(name)
    if kind == "Topology":
        return state.topology.topologies.get(name)
    return None


def in_use_by(state: ClusterState, kind: str, name: str) -> list[str]:
    """What keeps the ResourceFlavor, AdmissionCheck or Topology ``name`` in use, sorted: the ClusterQueues
    whose resource groups name the flavor, or whose admission checks strategy names the check (any flavor),
    or the ResourceFlavors whose ``topologyName`` is the Topology. Terminating ClusterQueues and flavors
    count: they are there until gone. Kueue's controllers take their ``resource-in-use`` finalizer off only
    when this is empty (resourceflavor_controller.go ``ClusterQueuesUsingFlavor``,
    admissioncheck_controller.go ``ClusterQueuesUsingAdmissionCheck``, tas topology_controller.go)."""
    if kind == "Topology":
        return sorted(n for n, f in state.flavors.items() if f.spec.topology_name == name)
    users = []
    for cq_name, cq in state.cluster_queues.items():
        if kind == "ResourceFlavor":
            named = any(fq.name == name for group in cq.spec.resource_groups for fq in group.flavors)
        else:
            strategy = cq.spec.admission_checks_strategy
            named = strategy is not None and any(rule.name == name for rule in strategy.admission_checks)
        if named:
            users.append(cq_name)
    return sorted(users)


def active_condition(
    state: ClusterState, kind: str, namespace: str, name: str, *, previous: Any, generation: int, now_ms: int
) -> dict[str, Any]:
    """The ``Active`` condition of ClusterQueue, LocalQueue (``namespace``/``name``), Cohort or MultiKueue
    AdmissionCheck ``name``
    (:mod:`kueue_es.scheduling.readiness`), with ``lastTransitionTime`` kept from ``previous`` (the stored
    condition) while its status stays, else ``now_ms``. Raises KeyError for an object not in ``state``."""
    if kind == "ClusterQueue":
        active = readiness.cluster_queue_active(state.cluster_queues[name], state=state)
    elif kind == "AdmissionCheck":  # MultiKueue's, from its workers (SEMANTICS-ADVANCED E.1)
        check = readiness.admission_check_active(state.multikueue.checks[name], state=state)
        if check is None:
            raise KeyError(f"AdmissionCheck {name} is not MultiKueue's: its condition is its controller's")
        active = check
    elif kind == "MultiKueueCluster":  # the connection as the MultiKueue edge reported it
        connected = readiness.multikueue_cluster_active(name, state=state)
        if connected is None:
            raise KeyError(f"MultiKueueCluster {name}: no connectivity reported yet")
        active = connected
    elif kind == "LocalQueue":
        active = readiness.local_queue_active(state.local_queues[(namespace, name)], state=state)
    else:
        active = readiness.cohort_active(name, state=state)
    return readiness.condition(active, previous=previous, generation=generation, now_ms=now_ms)


def cohort_status(state: ClusterState, name: str) -> dict[str, Any]:
    """A Cohort's ``status`` besides its condition: ``fairSharing.weightedShare`` while fair sharing is on
    (cohort_controller.go updateCohortStatusIfChanged), else nothing."""
    if state.configuration.fair_sharing is None:
        return {}
    return {"fairSharing": {"weightedShare": weighted_share(state, name, cohort=True)}}


def cohort_ancestors(state: ClusterState, cohort_name: str) -> list[str]:
    """The Cohort objects on the parent chain from ``cohort_name`` up (itself first), each once."""
    out: list[str] = []
    current = cohort_name
    while current and current not in out:
        if current in state.cohorts:
            out.append(current)
        obj = state.cohorts.get(current)
        current = (obj.spec.parent_name or "") if obj is not None else ""
    return out


def local_queue_status(
    state: ClusterState, namespace: str, name: str, *, previous_fair_sharing: Any = None, now_ms: int = 0
) -> dict[str, Any]:
    """LocalQueue ``status`` (localqueue_controller.go updateStatusIfChanged, cache.LocalQueueUsage): the same
    counts and usage for its own workloads, no ``borrowed``; no pending count while it is stopped; under
    admission fair sharing ``fairSharing`` (:func:`local_queue_fair_sharing`, which ``previous_fair_sharing``,
    the stored one, and ``now_ms`` are for)."""
    lq = state.local_queues[(namespace, name)]
    pending = visibility.pending_count_in_local_queue(state, namespace, name)
    fair = local_queue_fair_sharing(state, namespace, name, previous=previous_fair_sharing, now_ms=now_ms)
    with_fair = {"fairSharing": fair} if fair is not None else {}
    cq = state.cluster_queues.get(lq.spec.cluster_queue)
    if cq is None:
        return {"pendingWorkloads": pending, "reservingWorkloads": 0, "admittedWorkloads": 0, **with_fair}
    reserved, admitted, count, admitted_count = _usage(state, cq.metadata.name, local_queue=(namespace, name))

    def usage_list(usage: dict[tuple[str, str], int]) -> list[dict[str, Any]]:
        return [
            {
                "name": fq.name,
                "resources": [
                    {"name": r, "total": to_quantity(r, usage.get((fq.name, r), 0))}
                    for r in sorted(group.covered_resources)
                ],
            }
            for group in cq.spec.resource_groups
            for fq in group.flavors
        ]

    status: dict[str, Any] = {
        "pendingWorkloads": pending,
        "reservingWorkloads": count,
        "admittedWorkloads": admitted_count,
    }
    if cq.spec.resource_groups:
        status["flavorsReservation"] = usage_list(reserved)
        status["flavorsUsage"] = usage_list(admitted)
    return status | with_fair


def local_queue_fair_sharing(
    state: ClusterState, namespace: str, name: str, *, previous: Any, now_ms: int
) -> dict[str, Any] | None:
    """LocalQueue ``status.fairSharing`` under admission fair sharing (localqueue_controller.go Reconcile,
    initializeAfsIfNeeded, reconcileConsumedUsage; localqueue_types.go LocalQueueFairSharingStatus), or None
    when there is none to write.

    ``weightedShare`` is 0: Kueue computes it for ClusterQueues and Cohorts only and leaves a LocalQueue's at
    its zero value. ``admissionFairSharingStatus.consumedResources`` is the decayed usage of the LocalQueue's
    ledger (:class:`kueue_es.projections.afs.Ledger`), settled entry penalties included, pending ones not
    (Kueue's status leaves them out), decayed to :func:`afs_sample_ms` (the last sampling tick of
    ``usageSamplingInterval`` at ``now_ms``, or the ledger's last change when that is later: then exactly
    what the admitter folded; without what a LocalQueue deleted and created again carried over,
    :meth:`~kueue_es.projections.afs.Ledger.fresh`), each resource as :func:`consumed_quantity` writes it; ``lastUpdate`` that
    time, RFC 3339 seconds. Kueue samples it every ``usageSamplingInterval`` from its reconcile's clock; here
    the ticks are on the interval's grid, so one ledger renders the same bytes until the next tick or change,
    and the value is the one the admitter computes for that time from the same ledger (SEMANTICS §8). A
    LocalQueue without a ledger yet (nothing admitted) has ``consumedResources: {}`` and the ``lastUpdate``
    of ``previous`` (the stored ``fairSharing``), else ``now_ms`` (Kueue stamps its first reconcile). A zero
    ``usageHalfLifeTime`` keeps no history: ``{}``.

    Kueue writes it only past the early returns of its Reconcile: for a stopped LocalQueue, or one whose
    ClusterQueue is missing or inactive, the field stays as it was (``previous``, None when there is none).
    Written only for the LocalQueues of a ClusterQueue whose admission mode is
    ``UsageBasedAdmissionFairSharing``: the fold keeps ledgers for those only."""
    config = state.configuration
    if config.admission_fair_sharing is None or not config.feature_gates.get("AdmissionFairSharing", True):
        return None
    kept = previous if isinstance(previous, dict) else None
    lq = state.local_queues[(namespace, name)]
    cq = state.cluster_queues.get(lq.spec.cluster_queue)
    if lq.spec.stop_policy != "None" or cq is None or not readiness.cluster_queue_active(cq, state=state).status:
        return kept
    if not afs.active(cq, config):
        return kept
    ledger = state.afs_ledgers.get((namespace, name))
    consumed: dict[str, str] = {}
    if ledger is None:
        kept_afs = (kept or {}).get("admissionFairSharingStatus")
        last = kept_afs.get("lastUpdate") if isinstance(kept_afs, dict) else None
        last_update = last if isinstance(last, str) and last else manifests.format_time_ms(now_ms)
    else:
        at_ms = afs_sample_ms(state, ledger, now_ms=now_ms)
        half_life = afs.half_life_s(config)
        if half_life > 0:
            consumed = {r: consumed_quantity(v) for r, v in ledger.fresh(at_ms, half_life).items()}
        last_update = manifests.format_time_ms(at_ms)
    return {
        "weightedShare": 0,
        "admissionFairSharingStatus": {"consumedResources": consumed, "lastUpdate": last_update},
    }


def afs_sampling_ms(state: ClusterState) -> int:
    """The Configuration's ``admissionFairSharing.usageSamplingInterval`` in ms (0 without one)."""
    settings = state.configuration.admission_fair_sharing
    if settings is None:
        return 0
    return round(afs.go_duration_seconds(settings.usage_sampling_interval) * 1000)


def afs_sample_ms(state: ClusterState, ledger: afs.Ledger, *, now_ms: int) -> int:
    """The time a LocalQueue's consumed usage is shown at: the last multiple of the sampling interval at or
    before ``now_ms`` (ms since the epoch), or the ledger's last change when that is later (a zero interval:
    always the last change)."""
    interval = afs_sampling_ms(state)
    tick = now_ms - now_ms % interval if interval > 0 else 0
    return max(tick, ledger.last_ms)


def consumed_quantity(value: float) -> str:
    """A consumed amount in Kueue's float units (cpu in cores, the rest in their base unit) as Kueue writes it
    in ``consumedResources``: its decimal value rounded down to nano units and written DecimalSI, also memory
    (pkg/util/resource MulByFloat: ``0.5`` cpu is ``500m``, 2 GiB is ``2147483648``)."""
    with localcontext() as ctx:
        ctx.prec = 80
        exact = Decimal(repr(value)).quantize(Decimal("1e-9"), rounding=ROUND_DOWN)
    return format_quantity(exact, Format.DECIMAL_SI)


def _usage(
    state: ClusterState, cq_name: str, *, local_queue: tuple[str, str] | None = None
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int], int, int]:
    """(reserved usage, admitted usage, reserving count, admitted count) of the workloads holding quota in
    ``cq_name`` (only those of ``local_queue`` when given)."""
    reserved: dict[tuple[str, str], int] = {}
    admitted: dict[tuple[str, str], int] = {}
    count = admitted_count = 0
    for key in state.reserved.get(cq_name, {}):
        wl = state.workloads.get(key)
        if wl is None or wl.reservation is None:
            continue
        if local_queue is not None and (wl.workload.metadata.namespace, wl.workload.spec.queue_name) != local_queue:
            continue
        count += 1
        admitted_count += wl.admitted
        for assignment in (wl.held or wl.reservation).pod_set_assignments:  # after dynamic reclaim
            for resource, amount in assignment.resource_usage.items():
                flavor = assignment.flavors.get(resource)
                if flavor is None:
                    continue
                reserved[(flavor, resource)] = reserved.get((flavor, resource), 0) + amount
                if wl.admitted:
                    admitted[(flavor, resource)] = admitted.get((flavor, resource), 0) + amount
    return reserved, admitted, count, admitted_count


# -- quantities ----------------------------------------------------------------------------------


def _quantities(amounts: dict[str, int]) -> dict[str, str]:
    return {resource: to_quantity(resource, amount) for resource, amount in sorted(amounts.items())}
