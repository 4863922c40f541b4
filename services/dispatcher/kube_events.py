"""The Kubernetes Events Kueue records on a Workload for each decision, so that
``kubectl describe workload`` and ``kubectl events --for workload/NAME`` show the same
history on kueue-es as on Kueue (SEMANTICS §4.6-§4.7, §7.8).

Which decision gives which Event (type, reason: message), as Kueue words them:

- QuotaReserved: Normal ``QuotaReserved``: "Quota reserved in ClusterQueue CQ, wait time
  since queued was Ns" (scheduler.go recordQuotaReservationMetrics; queued = the Requeued
  condition's last transition, else the creation time, workload.go QueuedWaitTime);
- WorkloadAdmitted: Normal ``Admitted`` (after the QuotaReserved Event when it also reserved the
  quota): "Admitted by ClusterQueue CQ, wait time since
  reservation was 0s" (recordWorkloadAdmissionEvents);
- WorkloadInadmissible: Warning, the granular QuotaReserved=False reason (``Pending`` when
  none) and the pending message (scheduler.go requeueAndUpdate); none for a workload whose LocalQueue or
  ClusterQueue is missing or inactive (Kueue's workload controller sets only the condition), nor for one
  waiting for waitForPodsReady.blockAdmission (``WaitingForPodsReady``: waitForPodsReadyIfNeeded); reason
  ``SecondPassFailed`` for a failed second pass of a workload holding quota (Kueue: the same Event,
  no condition); none for one recorded ``Deactivated`` or back to ``PendingEvaluation`` after its
  reactivation (workload controller, and evict.go records no Event without an admission); Normal
  ``AdmissionGated`` "Workload admission is gated by: G" and ``AdmissionGateCleared`` "Admission gate
  cleared, workload is now admissible" from the workload controller for its admission-gated-by annotation
  (workload_controller.go mayUpdateConditionForAdmissionGatedBy);
- PreemptionRequired (the workload waits for the victims it nominated to go): Warning
  ``WaitingForPreemptedWorkloads`` (``Pending`` with UnadmittedWorkloadsObservability off), the condition's
  message "couldn't assign flavors ... . Pending the preemption of N workload(s)" (scheduler.go requeueAndUpdate,
  after issuePreemptions);
- RemoteAdmissionChosen: Normal ``MultiKueue``: "The workload was admitted on "W"", and MultiKueueCheckRetry
  for a copy evicted on its worker (Normal) or finished OutOfSync (Warning), with the Retry's message
  (multikueue/workload.go reconcileGroup, syncAdmittingRemoteState);
- EvictionRequested: Normal ``EvictedDueTo<reason>`` and the eviction message (evict.go
  reportEvictedWorkload; ``DeactivatedDueTo<cause>`` reasons give
  ``EvictedDueToDeactivatedDueTo<cause>``); for a preemption also Normal ``Preempted`` on the
  victim and ``PreemptedWorkload`` on the preemptor, with both effective priorities
  (preemption.go; kueue-es has no priority boost, so boost is 0); none for one ``observed`` (an Evicted
  condition someone else wrote, which Kueue's job reconciler only carries out: its Stopped Event on the job).

Pure: the decision and the cluster as folded in, Events out; the dispatcher writes them
(:mod:`kueue_es.services.dispatcher.recording`). Messages longer than Kueue's event limit (1024
characters, api.TruncateEventMessage) are cut the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kueue_es.events import job_owners, manifests, models, slices, types
from kueue_es.jobframework import integrations, pods, prebuilt, workloads
from kueue_es.projections.cluster import (
    ADMISSION_GATED_PREFIX,
    WAITING_FOR_PREEMPTED,
    ClusterState,
    WorkloadState,
    priority_boost,
    priority_of,
)
from kueue_es.scheduling import concurrent_admission as ca
from kueue_es.scheduling import cycle, multikueue
from kueue_es.services.dispatcher import status
from kueue_es.services.kube import resources

MAX_MESSAGE = 1024
"""Kueue's api.maxEventMsgSize."""


@dataclass(frozen=True, kw_only=True, slots=True)
class KubeEvent:
    """One Event about the Workload ``workload``: ``type`` Normal or Warning, Kueue's ``reason``
    and ``message``; ``at_ms`` the decision's time (ms since the epoch)."""

    workload: types.WorkloadRef
    type: str
    reason: str
    message: str
    at_ms: int
    job: tuple[str, str, str] | None = None  # (apiVersion, kind, uid): about the workload's job instead
    namespaced: bool = True  # False: about a cluster-scoped object (the Event lives in "default")
    action: str = ""  # the Event's action, when Kueue's is not its reason
    component: str = ""  # the recorder's name, when not the one its object implies (:func:`event_object`)


def truncate(message: str) -> str:
    """api.TruncateEventMessage: at most MAX_MESSAGE characters, the cut marked with "..."."""
    if len(message) <= MAX_MESSAGE:
        return message
    return message[: MAX_MESSAGE - 3] + "..."


def for_decision(
    state: ClusterState, event: types.Event, record: status.WorkloadRecord | None = None, *, reserved: bool = False
) -> list[KubeEvent]:
    """The Events Kueue records for ``event`` (others: none). ``record`` is the workload's status
    as the dispatcher keeps it (for the Requeued condition, and the Evicted condition a release of a workload
    deactivated by hand sets); ``state`` gives creation times and
    priorities. ``reserved``: ``event`` is a WorkloadAdmitted that also reserved the quota (one
    message for both, issue 18), so its QuotaReserved Event comes first, as Kueue records both."""
    match event:
        case types.RemoteAdmissionChosen(workload=ref, message=message, at_ms=at):
            return [_multikueue(ref, "Normal", message, at)]
        case types.MultiKueueCheckRetry(workload=ref, message=message, at_ms=at):
            # only a copy evicted on its worker (Normal) or out of sync with its job (Warning) is told: a lost or
            # vanished admitting worker resets the check without an Event (workload.go reconcileGroup)
            if message.startswith(multikueue.EVICTED_ON_WORKER):
                return [_multikueue(ref, "Normal", message, at)]
            if multikueue.OUT_OF_SYNC_ON_WORKER in message:
                return [_multikueue(ref, "Warning", message, at)]
            return []
        case types.QuotaReserved(workload=ref, cluster_queue=cq, at_ms=at):
            queued = _queued_ms(state, ref, record)
            wait = max(0, at - queued) / 1000 if queued else 0.0
            message = f"Quota reserved in ClusterQueue {cq}, wait time since queued was {wait:.0f}s"
            return [KubeEvent(workload=ref, type="Normal", reason="QuotaReserved", message=message, at_ms=at)]
        case types.WorkloadAdmitted(workload=ref, cluster_queue=cq, at_ms=at):
            reserved_at = record.admission.at_ms if record is not None and record.admission is not None else at
            if not reserved and reserved_at < at:
                # admitted after its reservation (its admission checks Ready): Kueue's workload controller
                # records it, with the wait since the reservation (workload_controller.go Reconcile)
                since_reservation = f"{(at - reserved_at) / 1000:.0f}s"
                component = WORKLOAD_CONTROLLER_COMPONENT
            else:  # reserved and admitted in one step: the scheduler's (scheduler.go admit)
                since_reservation, component = "0s", ""
            message = f"Admitted by ClusterQueue {cq}, wait time since reservation was {since_reservation}"
            admitted = KubeEvent(
                workload=ref, type="Normal", reason="Admitted", message=message, at_ms=at, component=component
            )
            if reserved and event.pod_set_assignments:
                return [*for_decision(state, types.reservation_of(event), record), admitted]
            return [admitted]
        case types.WorkloadInadmissible(workload=ref, reason=reason, message=message, at_ms=at):
            if reason == cycle.PENDING_EVALUATION and message == cycle.ADMISSION_GATE_CLEARED_MESSAGE:
                # its admission-gated-by annotation removed (workload_controller.go mayUpdateConditionForAdmissionGatedBy)
                cleared = "Admission gate cleared, workload is now admissible"
                return [_workload_controller_event(ref, "AdmissionGateCleared", cleared, at)]
            if reason == "AdmissionGated" and message.startswith(ADMISSION_GATED_PREFIX):
                # first seen gated by its annotation: the workload controller's Normal Event, not the scheduler's
                gated_by = message.removeprefix(ADMISSION_GATED_PREFIX)
                return [
                    _workload_controller_event(ref, "AdmissionGated", f"Workload admission is gated by: {gated_by}", at)
                ]
            if _workload_controller_reason(reason, message) or reason == WAITING_FOR_PODS_READY:
                return []
            if (wl := state.workloads.get(ref.key)) is not None and status.dra_refusal(state, wl, event) is not None:
                # refused for DRA reasons: the workload controller's conditions only, no scheduling cycle looks at
                # it (workload_controller.go handleDRA, markDRAInadmissible)
                return []
            return [
                KubeEvent(workload=ref, type="Warning", reason=reason or "Pending", message=truncate(message), at_ms=at)
            ]
        case types.PreemptionRequired(workload=ref, message=message, at_ms=at):
            # requeueAndUpdate of an entry that issued its preemptions: the Event of the QuotaReserved condition the
            # dispatcher sets (status.py), its reason and message
            reason = WAITING_FOR_PREEMPTED if status.granular_reasons(state) else "Pending"
            return [KubeEvent(workload=ref, type="Warning", reason=reason, message=truncate(message), at_ms=at)]
        case types.EvictionRequested(observed=True):
            return []  # an Evicted condition someone else wrote: only evict.go Evict records an Event (logic 45)
        case types.EvictionRequested(workload=ref, reason=reason, message=message, at_ms=at):
            out = [
                KubeEvent(
                    workload=ref,
                    type="Normal",
                    reason=f"EvictedDueTo{reason}",
                    message=truncate(message),
                    at_ms=at,
                    component=eviction_component(reason),
                )
            ]
            if reason == "Preempted" and event.preemptor is not None:
                out += _preemption(state, event)
            return out
        case types.WorkloadDeactivated(workload=ref, reason="AdmissionCheck", message=message, at_ms=at):
            # a Rejected check deactivates the workload: Kueue's workload controller warns so as it sets the
            # DeactivationTarget (workload_controller.go reconcileCheckBasedEviction), whether or not the
            # workload holds quota, before any eviction
            return [
                KubeEvent(
                    workload=ref,
                    type="Warning",
                    reason="AdmissionCheckRejected",
                    message=truncate(f"Deactivated due to {message}"),
                    at_ms=at,
                    component=WORKLOAD_CONTROLLER_COMPONENT,
                )
            ]
        case types.WorkloadDeactivated(workload=ref, reason="MaximumExecutionTimeExceeded", at_ms=at):
            # workload_controller.go reconcileMaxExecutionTime warns as it sets the DeactivationTarget
            wl = state.workloads.get(ref.key)
            limit = wl.workload.spec.maximum_execution_time_seconds if wl is not None else None
            return [
                KubeEvent(
                    workload=ref,
                    type="Warning",
                    reason="MaximumExecutionTimeExceeded",
                    message=f"The maximum execution time ({limit or 0}s) exceeded",
                    at_ms=at,
                    component=WORKLOAD_CONTROLLER_COMPONENT,
                )
            ]
        case types.QuotaReleased(workload=ref, reason="Deactivated", at_ms=at):
            # spec.active set false by hand: the release is its eviction (evict.go: EvictedDueToDeactivated);
            # after an eviction of Kueue's own (DeactivatedDueTo<cause>) that eviction had its Event already
            evicted = record.conditions.get("Evicted") if record is not None else None
            if evicted is not None and evicted.status and evicted.reason == "Deactivated" and evicted.since_ms == at:
                message = status.DEACTIVATED_MESSAGE
                return [
                    KubeEvent(
                        workload=ref,
                        type="Normal",
                        reason="EvictedDueToDeactivated",
                        message=message,
                        at_ms=at,
                        component=WORKLOAD_CONTROLLER_COMPONENT,
                    )
                ]
    return []


def _workload_controller_event(ref: types.WorkloadRef, reason: str, message: str, at_ms: int) -> KubeEvent:
    """A Normal Event of Kueue's workload controller on the Workload ``ref``."""
    return KubeEvent(
        workload=ref,
        type="Normal",
        reason=reason,
        message=truncate(message),
        at_ms=at_ms,
        component=WORKLOAD_CONTROLLER_COMPONENT,
    )


def _multikueue(ref: types.WorkloadRef, kind: str, message: str, at_ms: int) -> KubeEvent:
    """Kueue's MultiKueue workload reconciler's Event (reason ``MultiKueue``, its workload-controller recorder)."""
    return KubeEvent(
        workload=ref,
        type=kind,
        reason="MultiKueue",
        message=truncate(message),
        at_ms=at_ms,
        component=WORKLOAD_CONTROLLER_COMPONENT,
    )


_CORE_JOBS = {"Job": "batch/v1", "Pod": "v1"}
"""The job kinds Kueue integrates that are no registered integration's, and their apiVersion."""


def _job_api_version(kind: str) -> str | None:
    """The apiVersion of a job of ``kind`` (``Job``, ``Pod`` or a registered integration's); None for another."""
    integration = integrations.by_kind(kind)
    return _CORE_JOBS.get(kind) or (integration.api_version if integration is not None else None)


def for_job_write(
    kind: str,
    name: str,
    uid: str,
    *,
    started: bool,
    decision: types.Event,
    at_ms: int,
    not_matching: bool = False,
    variant: bool = False,
) -> KubeEvent | None:
    """The job framework's Event on the job itself once its start or stop write landed
    (jobframework/reconciler.go startJob / stopJob): Normal ``Started`` "Admitted by
    clusterQueue CQ", or Normal ``Stopped`` with the eviction message. ``kind`` is ``Job``, a
    registered integration's (``JobSet``, ``PyTorchJob``, ...) or ``Pod``: one Event on each pod
    ungated or deleted (pod_controller.go Run and Stop record them pod by pod, ``name`` and ``uid``
    the pod's); ``decision`` the WorkloadAdmitted,
    EvictionRequested or QuotaReleased (of a workload deactivated by hand, or deleted) carried out;
    ``not_matching``: the deleted workload was one the running job no longer matched (ensureOneWorkload's
    "No matching Workload" message, :data:`~kueue_es.services.dispatcher.status.NOT_MATCHING_STOP_MESSAGE`);
    ``variant``: the stop is for a ConcurrentAdmission variant's eviction, which Kueue's job reconciler carries out
    as its parent's ("Admitted variant was evicted")."""
    api_version = _job_api_version(kind)
    if api_version is None:
        return None
    ref = getattr(decision, "workload", None)
    if not isinstance(ref, types.WorkloadRef):
        return None
    job_ref = types.WorkloadRef(namespace=ref.namespace, name=name)
    if started and isinstance(decision, types.WorkloadAdmitted):
        message = started_message(decision.cluster_queue)
        return KubeEvent(
            workload=job_ref,
            type="Normal",
            reason="Started",
            message=message,
            at_ms=at_ms,
            job=(api_version, kind, uid),
        )
    if not started and isinstance(decision, types.EvictionRequested | types.QuotaReleased):
        # a release stops the job of a workload deactivated by hand (Kueue's eviction message for it) or deleted
        if isinstance(decision, types.EvictionRequested):
            message = ca.VARIANT_EVICTED_MESSAGE if variant else decision.message
        elif decision.reason == "Deleted":
            message = status.NOT_MATCHING_STOP_MESSAGE if not_matching else status.DELETED_STOP_MESSAGE
        else:
            message = status.DEACTIVATED_MESSAGE
        return KubeEvent(
            workload=job_ref,
            type="Normal",
            reason="Stopped",
            message=truncate(message),
            at_ms=at_ms,
            job=(api_version, kind, uid),
        )
    return None


def on_pod(namespace: str, name: str, uid: str, *, reason: str, message: str, at_ms: int) -> KubeEvent:
    """A Normal Event ``reason`` on pod ``namespace/name`` (``uid``), as Kueue's pod integration records them one
    pod at a time (pod_controller.go: ``Started`` on each pod it ungates, ``Stopped`` on each it deletes,
    ``ExcessPodDeleted``)."""
    return KubeEvent(
        workload=types.WorkloadRef(namespace=namespace, name=name),
        type="Normal",
        reason=reason,
        message=truncate(message),
        at_ms=at_ms,
        job=("v1", "Pod", uid),
    )


def started_message(cluster_queue: str) -> str:
    """The ``Started`` Event's message (jobframework/reconciler.go startJob)."""
    return f"Admitted by clusterQueue {cluster_queue}"


def _workload_controller_reason(reason: str, message: str) -> bool:
    """Whether a pending outcome is one Kueue's workload controller sets as a condition with no Event, for a
    workload no scheduling cycle looks at (workload_controller.go workloadQueueStatus: its LocalQueue or
    ClusterQueue missing or inactive; the queue manager gives no heads of an inactive ClusterQueue), rather
    than the scheduler's, which records a Warning for each head it could not admit (scheduler.go
    requeueAndUpdate). A DRA refusal is another such outcome, told by the fold (:func:`status.dra_refusal`)."""
    if reason in ("Suspended", "Deactivated"):
        return True  # a pending workload's eviction for deactivation has no Event either (evict.go: no admission)
    if reason == "PendingEvaluation" and message == cycle.PENDING_EVALUATION_MESSAGE:
        return True  # reactivated: back in its queue (resolveGranularUnadmittedQuotaReservedCondition)
    return reason == "Misconfigured" and (
        message.endswith("doesn't exist") or message.startswith("WorkloadPriorityClass ")
    )


def for_created_workload(workload: models.Workload) -> KubeEvent | None:
    """Normal ``CreatedWorkload`` "Created Workload: NS/NAME" on the Job, integration's job or Pod whose Workload
    object was just created (jobframework/reconciler.go handleJobWithNoWorkload; a pod group's on its first
    pod, the Workload's owner here, as Kueue records it on the group's job object, one of its pods). A
    StatefulSet's or LeaderWorkerSet's group gets it on that parent instead (:func:`~kueue_es.events.job_owners.
    job_of`), from its integration's recorder: their reconcilers build the Workload and record the Event on the
    object they reconcile (statefulset_reconciler.go createPrebuiltWorkload, leaderworkerset_reconciler.go
    createWorkload), and the pod group reconciler only adopts it. None for other owners."""
    meta = workload.metadata
    return _on_job(
        workload,
        reason="CreatedWorkload",
        message=f"Created Workload: {meta.namespace}/{meta.name}",
        at_ms=meta.creation_timestamp_ms,
        job=job_owners.job_of(workload),
    )


def for_deleted_not_matching(workload: models.Workload, *, at_ms: int) -> KubeEvent | None:
    """Normal ``DeletedWorkload`` "Deleted not matching Workload: NS/NAME" on the job whose old Workload, one
    the running job no longer matched, was just deleted (jobframework/reconciler.go ensureOneWorkload); None
    for other owners."""
    meta = workload.metadata
    message = f"Deleted not matching Workload: {meta.namespace}/{meta.name}"
    return _on_job(workload, reason="DeletedWorkload", message=message, at_ms=at_ms)


FINISHED_REASON = "FinishedWorkload"
"""Kueue's ReasonFinishedWorkload (jobframework/events.go)."""
_NO_FINISHED_EVENT = frozenset(
    {
        slices.REPLACED_REASON,
        prebuilt.OUT_OF_SYNC_REASON,
        slices.OUT_OF_SYNC_REASON,
        workloads.OWNER_NOT_FOUND_REASON,
    }
)
"""Finished reasons whose workload the job's reconciler never sees finished: an elastic job's slice replaced or
dropped (it goes on with the newest slice, workloadslicing.go), a prebuilt Workload out of sync (the job then has
no workload: ensurePrebuiltWorkloadInSync), an orphaned Workload (its job is gone: Kueue's workload reconciler
finishes it, FinalizeOrphanedWorkload, and records no Event)."""


def for_finished_workload(workload: models.Workload, *, reason: str, at_ms: int) -> KubeEvent | None:
    """Normal ``FinishedWorkload`` "Workload 'NS/NAME' is declared finished" on the job whose Workload object
    was just written Finished (jobframework/reconciler.go ReconcileGenericJob: a finished job's Workload is
    finished, then the Event; a Workload finished otherwise, ``FailedToStart``, gets it at the job's next
    reconcile, step 1). ``reason`` is the Finished condition's, ``at_ms`` when it was written (ms since the
    epoch). The job is a Job, an integration's job, the single Pod, or a pod group's first pod (the
    Workload's owner here; Kueue's job object for a group is the pod its cache lists first). None for
    other owners and for the reasons of :data:`_NO_FINISHED_EVENT`."""
    if reason in _NO_FINISHED_EVENT:
        return None
    meta = workload.metadata
    message = f"Workload '{meta.namespace}/{meta.name}' is declared finished"
    return _on_job(workload, reason=FINISHED_REASON, message=message, at_ms=at_ms)


UPDATED_REASON = "UpdatedWorkload"
"""Kueue's ReasonUpdatedWorkload (jobframework/events.go)."""
WORKLOAD_PRIORITY_CLASS = "WorkloadPriorityClass"


def for_priority_update(
    workload: models.Workload,
    *,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    reserved: bool,
    at_ms: int,
) -> KubeEvent | None:
    """Normal ``UpdatedWorkload`` "Updated workload priority class: NS/NAME" on the job whose Workload object was
    just written with another WorkloadPriorityClass (its ``kueue.x-k8s.io/priority-class`` label changed:
    jobframework/reconciler.go UpdateWorkloadPriority). ``before`` and ``after`` are the object's
    ``spec.priorityClassRef`` as stored and as written (``{"group", "kind", "name"}``, None without one);
    ``reserved``: the workload holds quota. None when the WorkloadPriorityClass named is the same, for a
    Workload whose priority is a pod PriorityClass's (it does not follow the label), for one that reserved
    quota with no class (one can no longer be added: classifyWorkloadsForPriorityUpdate), and for other
    owners."""
    if before is not None and before.get("kind") != WORKLOAD_PRIORITY_CLASS:
        return None
    if before is None and reserved:
        return None
    if _class_name(before) == _class_name(after):
        return None
    meta = workload.metadata
    message = f"Updated workload priority class: {meta.namespace}/{meta.name}"
    return _on_job(workload, reason=UPDATED_REASON, message=message, at_ms=at_ms)


NOT_MATCHING_UPDATE_MESSAGE = "Updated not matching Workload for suspended job: {key}"
"""Kueue's message when it rewrites a waiting job's Workload to the job's new shape (reconciler.go
updateWorkloadToMatchJob, ``%v`` of klog.KObj: ``NS/NAME``)."""


def for_workload_update(
    workload: models.Workload,
    *,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    reserved: bool,
    at_ms: int,
) -> KubeEvent | None:
    """The job framework's Normal ``UpdatedWorkload`` on the job whose Workload object was just written again over
    an older one of its own: ``before`` is the object's ``spec`` as the server had it, ``after`` the ``spec``
    written (API field names). When the pod sets (counts, templates) or ``maximumExecutionTimeSeconds`` differ and
    the workload holds no quota, the job changed while it waited: Kueue finds no matching Workload, rewrites the
    one it had (jobframework/reconciler.go ensureOneWorkload, updateWorkloadToMatchJob) and says "Updated not
    matching Workload for suspended job: NS/NAME". Not for an elastic job's slice (workloadslicing.go
    EnsureWorkloadSlices updates its count in place with no Event). Otherwise the priority class's Event, if any
    (:func:`for_priority_update`). None for other owners."""
    if not reserved and not slices.is_elastic(workload.metadata.annotations) and not _matches(before, after):
        meta = workload.metadata
        message = NOT_MATCHING_UPDATE_MESSAGE.format(key=f"{meta.namespace}/{meta.name}")
        return _on_job(workload, reason=UPDATED_REASON, message=message, at_ms=at_ms)
    return for_priority_update(
        workload,
        before=before.get("priorityClassRef"),
        after=after.get("priorityClassRef"),
        reserved=reserved,
        at_ms=at_ms,
    )


_MATCHED_FIELDS = ("podSets", "maximumExecutionTimeSeconds")
"""The parts of a Workload's spec Kueue compares with its job (reconciler.go EquivalentToWorkload)."""


def _matches(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether the spec written (``after``) asks for what the stored one (``before``) does: every field of
    :data:`_MATCHED_FIELDS` the same, a stored value allowed fields the server defaulted."""
    return all(_within(after.get(name), before.get(name)) for name in _MATCHED_FIELDS)


def _within(wanted: Any, stored: Any) -> bool:
    """``wanted`` as ``stored`` has it, ``stored`` allowed keys of its own (maps by key, lists item by item)."""
    if isinstance(wanted, Mapping):
        return isinstance(stored, Mapping) and all(k in stored and _within(v, stored[k]) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(stored, list) and len(stored) == len(wanted) and all(map(_within, wanted, stored))
    return bool(wanted == stored)


def _class_name(ref: Mapping[str, Any] | None) -> str:
    """The WorkloadPriorityClass a ``priorityClassRef`` names ("" for none, or a pod PriorityClass)."""
    return str(ref.get("name") or "") if ref is not None and ref.get("kind") == WORKLOAD_PRIORITY_CLASS else ""


def _on_job(
    workload: models.Workload, *, reason: str, message: str, at_ms: int, job: models.OwnerReference | None = None
) -> KubeEvent | None:
    """A Normal Event ``reason`` on the Job, Pod or integration's job that owns ``workload`` (``job`` when given);
    None for other owners."""
    owner, meta = job or workload.owner, workload.metadata
    if owner is None or _job_api_version(owner.kind) is None:
        return None
    return KubeEvent(
        workload=types.WorkloadRef(namespace=meta.namespace, name=owner.name),
        type="Normal",
        reason=reason,
        message=message,
        at_ms=at_ms,
        job=(owner.api_version, owner.kind, owner.uid),
    )


CHECK_UPDATE_REASON = "UpdatedAdmissionCheck"
"""Kueue's ReasonUpdatedAdmissionCheck (jobframework/events.go)."""


def pending_checks_message(record: status.WorkloadRecord | None) -> str:
    """What Kueue's job reconciler tells a suspended job whose Workload holds quota and waits for its admission
    checks (reconciler.go step 7, recordAdmissionCheckUpdate): ``"NAME: MESSAGE"`` of each Pending check whose
    controller left a message, in ``status.admissionChecks`` order, joined by ``"; "``. "" when there is none,
    or the workload holds no quota, is admitted (its job started), evicted (stopped first, step 6) or finished
    (step 3): Kueue records nothing then."""
    if record is None or not record.is_true("QuotaReserved"):
        return ""
    if any(record.is_true(kind) for kind in ("Admitted", "Evicted", "Finished")):
        return ""
    return "; ".join(
        f"{check.name}: {check.message}"
        for check in record.checks.values()
        if check.state == "Pending" and check.message
    )


def for_admission_check_update(
    workload: models.Workload, message: str, *, members: Sequence[tuple[str, str]] = (), at_ms: int
) -> list[KubeEvent]:
    """Normal ``UpdatedAdmissionCheck`` with ``message`` (:func:`pending_checks_message`, cut to Kueue's limit)
    on the job that owns ``workload``; for a pod group on each of its pods, ``members`` (``(name, uid)``), as
    Kueue records it on each object of a composable job. None for an empty message or other owners."""
    if not message:
        return []
    text = truncate(message)
    if members and workload.metadata.annotations.get(status.GROUP_WORKLOAD_ANNOTATION) == "true":
        namespace = workload.metadata.namespace
        return [
            on_pod(namespace, name, uid, reason=CHECK_UPDATE_REASON, message=text, at_ms=at_ms) for name, uid in members
        ]
    item = _on_job(workload, reason=CHECK_UPDATE_REASON, message=text, at_ms=at_ms)
    return [item] if item is not None else []


OWNERS_ADDED_REASON = "OwnerReferencesAdded"
"""Kueue's ReasonOwnerReferencesAdded (jobs/pod/pod_controller.go)."""


def for_owners_added(
    workload: models.Workload,
    *,
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    at_ms: int,
) -> KubeEvent | None:
    """Normal ``OwnerReferencesAdded`` "Added N owner reference(s)" on a pod group's Workload object once pods
    that joined the group (a failed pod's replacement; a prebuilt Workload's pods at its adoption) are made its
    owners (pod_controller.go EnsureWorkloadOwnedByAllMembers), from the pod integration's recorder. ``before``
    and ``after`` are the object's ``metadata.ownerReferences`` as stored and as written; N counts the pods
    ``after`` names that ``before`` did not. None when none was added, for a Workload of no pod group, and over
    references that named only the group's first pod as controller (written before the group's pods were known:
    Kueue names them all when it creates the Workload)."""
    if workload.metadata.annotations.get(status.GROUP_WORKLOAD_ANNOTATION) != "true":
        return None
    if any(ref.get("controller") is True for ref in before):
        return None
    present = {str(ref.get("uid") or "") for ref in before}
    added = sum(1 for ref in after if ref.get("kind") == "Pod" and str(ref.get("uid") or "") not in present)
    if not added:
        return None
    meta = workload.metadata
    return KubeEvent(
        workload=types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid),
        type="Normal",
        reason=OWNERS_ADDED_REASON,
        message=f"Added {added} owner reference(s)",
        at_ms=at_ms,
        component=job_component("Pod"),
    )


#: Kinds whose rejection is a job's: Kueue's job reconciler says ErrWorkloadCompose (jobframework/events.go).
JOB_KINDS = frozenset({"Job", "Pod", *integrations.registry()})


def for_rejection(fact: types.ObjectRejected) -> KubeEvent | None:
    """A Warning Event on an object kueue-es refused to read (ObjectRejected): the field and the problem,
    so ``kubectl describe`` and ``kubectl events`` show why nothing happens. Reason ``ErrWorkloadCompose``
    for a job (Kueue's reason when it cannot build a job's Workload), ``Invalid`` (the API server's
    word for a refused object) for the others. Kueue's own reason and message where Kueue words the refusal
    itself: ``WorkloadPriorityClassNotFound``, ``JobNestingTooDeep`` (a job's owner chain deeper than Kueue
    walks: :func:`~kueue_es.jobframework.workloads.managed_ancestor`), and for a pod group ``ErrWorkloadCompose`` "'G' group has fewer
    runnable pods than expected" and ``WorkloadNameConflict`` (:func:`~kueue_es.jobframework.pods.kueue_reason`).
    None for a kind kueue-es does not address, and for the pod group compose errors Kueue's pod reconciler only
    logs (:func:`~kueue_es.jobframework.pods.kueue_logs_only`: pods naming different queues or total counts, ...)."""
    if pods.kueue_logs_only(fact):
        return None
    ref = next((r for r in resources.RESOURCES.values() if r.kind == fact.kind), None)
    integration = integrations.by_kind(fact.kind)
    if ref is None and integration is not None:
        ref = resources.ref_for(integration.api_version, integration.kind)
    if ref is None:
        return None
    where = f"{fact.field}: " if fact.field else ""
    reason = "ErrWorkloadCompose" if fact.kind in JOB_KINDS else "Invalid"
    message = f"{fact.kind} {fact.name} is invalid: {where}{fact.problem}"
    action = ""
    if fact.kind in JOB_KINDS and fact.field == workloads.MISSING_WPC_FIELD:
        # Kueue's own reason and words (jobframework/reconciler.go ExtractPriority)
        reason, message = "WorkloadPriorityClassNotFound", fact.problem
    elif fact.kind in JOB_KINDS and fact.field == workloads.NESTING_FIELD and fact.problem == workloads.NESTING_MESSAGE:
        # an owner chain deeper than Kueue walks (reconciler.go ReconcileGenericJob), its own reason and words
        reason, message = workloads.NESTING_REASON, fact.problem
    elif (pod_reason := pods.kueue_reason(fact)) is not None:
        # a pod group short of pods, or whose name a Workload of something else holds (pod_controller.go)
        reason, message = pod_reason, fact.problem
        action = "Admission" if reason == pods.NAME_CONFLICT_REASON else ""  # Kueue's action for it
    return KubeEvent(
        workload=types.WorkloadRef(namespace=fact.namespace if ref.namespaced else "default", name=fact.name),
        type="Warning",
        reason=reason,
        message=truncate(message),
        at_ms=fact.at_ms,
        job=(ref.api_version, ref.kind, ""),
        namespaced=ref.namespaced,
        action=action,
    )


def _queued_ms(state: ClusterState, ref: types.WorkloadRef, record: status.WorkloadRecord | None) -> int:
    requeued = record.conditions.get("Requeued") if record is not None else None
    if requeued is not None:
        return requeued.since_ms
    wl = state.workloads.get(ref.key)
    return wl.workload.metadata.creation_timestamp_ms if wl is not None else 0


def _priority_info(state: ClusterState, wl: WorkloadState | None) -> str:
    """``<effective> (base: <priority>, boost: <boost>)`` as Kueue's preemption Events write a workload's
    priority (pkg/scheduler/preemption/preemption.go priorityInfo; the boost only with the gate PriorityBoost)."""
    if wl is None:
        return "0 (base: 0, boost: 0)"
    base = priority_of(wl.workload, state)
    boost = priority_boost(wl.workload, state.configuration)
    return f"{base + boost} (base: {base}, boost: {boost})"


def _preemption(state: ClusterState, event: types.EvictionRequested) -> list[KubeEvent]:
    """preemption.go: ``Preempted`` on the victim, ``PreemptedWorkload`` on the preemptor."""
    assert event.preemptor is not None
    victim = state.workloads.get(event.workload.key)
    preemptor = state.workloads.get(event.preemptor.key)
    priorities = (
        f"preemptor effective priority: {_priority_info(state, preemptor)}; "
        f"preemptee effective priority: {_priority_info(state, victim)}"
    )
    uid = event.workload.uid or (victim.workload.metadata.uid if victim is not None else "")
    return [
        KubeEvent(
            workload=event.workload,
            type="Normal",
            reason="Preempted",
            message=truncate(f"{event.message}; {priorities}"),
            at_ms=event.at_ms,
        ),
        KubeEvent(
            workload=event.preemptor,
            type="Normal",
            reason="PreemptedWorkload",
            message=truncate(
                f"Preempted workload {event.workload.key} (UID: {uid}) in ClusterQueue {event.cluster_queue}; "
                f"{priorities}"
            ),
            at_ms=event.at_ms,
        ),
    ]


WORKLOAD_CONTROLLER_COMPONENT = "kueue-workload-controller"
"""Kueue's workload controller's recorder (constants.WorkloadControllerName): the evictions it makes
(:func:`eviction_component`) and an admission its checks completed."""

_WORKLOAD_CONTROLLER_EVICTIONS = frozenset(
    {"Deactivated", "AdmissionCheck", "PodsReadyTimeout", "LocalQueueStopped", "ClusterQueueStopped"}
)


def eviction_component(reason: str) -> str:
    """The recorder of an ``EvictedDueTo<reason>`` Event: Kueue's workload controller evicts for a deactivation
    (``Deactivated``, ``DeactivatedDueTo<cause>``), a rejected admission check, the PodsReady timeout and a
    stopped queue (workload_controller.go, each through evict.Evict with its own recorder); the scheduler
    (``""``: :data:`REPORTING_COMPONENT`) for a preemption, a flavor migration or a node failure it finds
    (preemption.go, scheduler.go)."""
    if reason.startswith("Deactivated") or reason in _WORKLOAD_CONTROLLER_EVICTIONS:
        return WORKLOAD_CONTROLLER_COMPONENT
    return ""


WAITING_FOR_PODS_READY = "WaitingForPodsReady"
"""The reason of a workload that waits for waitForPodsReady.blockAdmission: Kueue's scheduler only sets the condition
(scheduler.go waitForPodsReadyIfNeeded), with no Event."""

REPORTING_COMPONENT = "kueue-admission"
"""Kueue's event source for these Events (constants.AdmissionName), kept so that tools filtering
Events by component see the same on kueue-es."""
_JOB_FRAMEWORKS = {"Job": "batch/job", "Pod": "pod"}


def job_component(kind: str) -> str:
    """The event source of the job framework's Events on a job of ``kind``: Kueue records them with its
    integration's recorder, ``<framework>-kueue-controller`` (jobframework/setup.go: ``batch/job-kueue-controller``,
    ``jobset.x-k8s.io/jobset-kueue-controller``, ...); :data:`REPORTING_COMPONENT` for a kind that is no job (a
    refused Kueue object)."""
    integration = integrations.by_kind(kind)
    framework = _JOB_FRAMEWORKS.get(kind) or (integration.framework if integration is not None else "")
    return f"{framework}-kueue-controller" if framework else REPORTING_COMPONENT


def micro_time(ms: int) -> str:
    """Milliseconds since the epoch as a ``metav1.MicroTime`` (``2026-01-01T00:00:00.000000Z``), the precision of
    an Event's ``eventTime`` and ``series.lastObservedTime``."""
    seconds = manifests.format_time_ms(ms - ms % 1000)[:-1]
    return f"{seconds}.{ms % 1000:03d}000Z"


def event_object(item: KubeEvent, *, name: str, uid: str = "") -> dict[str, object]:
    """``item`` as a core v1 Event about its Workload, or its job (what ``kubectl describe``
    lists): ``name`` is the Event's name, ``uid`` the Workload object's (left out when unknown). The source is
    Kueue's admission component, or for an Event on the job the job framework's (:func:`job_component`)."""
    involved: dict[str, object] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "namespace": item.workload.namespace,
        "name": item.workload.name,
    }
    if item.job is not None:  # about the job: its own UID, not the Workload's
        api_version, kind, uid = item.job
        involved.update(apiVersion=api_version, kind=kind)
    if not item.namespaced:
        del involved["namespace"]
    if uid:
        involved["uid"] = uid
    at = manifests.format_time_ms(item.at_ms)
    component = item.component or (job_component(item.job[1]) if item.job is not None else REPORTING_COMPONENT)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": item.workload.namespace},
        "involvedObject": involved,
        "type": item.type,
        "reason": item.reason,
        "message": item.message,
        "action": item.action or item.reason,
        "eventTime": micro_time(item.at_ms),  # Kueue's recorder's (events.k8s.io); kubectl describe ages from it
        "count": 1,
        "firstTimestamp": at,
        "lastTimestamp": at,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
    }
