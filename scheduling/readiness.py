"""Whether a ClusterQueue, LocalQueue or Cohort can admit now: the ``Active`` condition Kueue writes on it.

Why this module exists: Kueue's controllers show on each queue object why it
admits nothing (SEMANTICS §1.3, §1.5, §10.1-§10.2): a ClusterQueue's ``Active``
condition names a missing ResourceFlavor, a missing or inactive AdmissionCheck, a
stop policy or a missing Topology of a TAS flavor; a LocalQueue's follows its
ClusterQueue's. The dispatcher writes these conditions; this module says what they
are, from the folded state alone (pure: no I/O, no clock; the caller gives the
time a condition changes at).

Sources: Kueue pkg/cache/scheduler/clusterqueue.go (updateQueueStatus,
inactiveReason: reasons in the order Stopped, FlavorNotFound,
AdmissionCheckNotFound, AdmissionCheckInactive, TopologyNotFound; the first is the
reason, every one is in the message), cache.go ClusterQueueReadiness,
pkg/controller/core/localqueue_controller.go (Reconcile: Stopped,
ClusterQueueDoesNotExist, Ready, ClusterQueueIsInactive) and
clusterqueue_controller.go / helpers.go WeightedShare.

Where kueue-es adds to Kueue, on purpose: a Cohort gets an ``Active`` condition
too (Kueue's CohortStatus has only ``fairSharing``), False with reason
:data:`COHORT_CYCLE_REASON` when its parent chain loops back (itself as parent,
or a longer loop), so a user can see why every ClusterQueue under it admits
nothing. Kueue accepts such a Cohort and only leaves its tree out of scheduling
(SEMANTICS §1.4, §4.2); the ClusterQueues' own condition stays as Kueue writes it
(a cycle is not among Kueue's ClusterQueue reasons). The MultiKueue reasons
(MultipleMultiKueueAdmissionChecks, MultiKueueAdmissionCheckAppliedPerFlavor,
MultiKueueWithProvisioningRequest) follow AdmissionCheckInactive, as in Kueue
(:func:`kueue_es.scheduling.queues.multikueue_problems`). ``Terminating`` (first,
as in Kueue) is a ClusterQueue marked for deletion while Kueue's finalizer, which the dispatcher
puts on each, holds it (``ClusterQueue.terminating``). An AdmissionCheck's ``Active``
belongs to the check's controller (Kueue's core writes none); the one controller
kueue-es has is MultiKueue's (:func:`admission_check_active`, computed by
:func:`kueue_es.projections.multikueue.check_condition`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kueue_es.events import manifests, models
from kueue_es.projections import multikueue, quota
from kueue_es.projections.cluster import ClusterState, Queued
from kueue_es.scheduling.queues import inactive_reason, missing_tas_topologies, multikueue_problems, required_checks

ACTIVE = "Active"
READY_REASON = "Ready"
CQ_READY_MESSAGE = "Can admit new workloads"
LQ_READY_MESSAGE = "Can submit new workloads to localQueue"
LQ_STOPPED_MESSAGE = "LocalQueue is stopped"
LQ_CQ_INACTIVE_MESSAGE = "Can't submit new workloads to clusterQueue"
COHORT_CYCLE_REASON = "CohortHasCycle"
MAX_INT64 = 2**63 - 1
MAX_CONDITION_MESSAGE = 32 * 1024  # Kueue's api.TruncateConditionMessage


@dataclass(frozen=True)
class Active:
    """The ``Active`` condition's status, reason and message."""

    status: bool
    reason: str
    message: str


def cluster_queue_active(cq: models.ClusterQueue, *, state: ClusterState) -> Active:
    """A ClusterQueue's ``Active`` condition (Kueue ClusterQueueReadiness, inactiveReason).

    False when it is stopped (``stopPolicy`` not None), names a ResourceFlavor that
    does not exist, an AdmissionCheck that does not exist or is not Active, or a TAS
    flavor whose Topology does not exist; the reason is the first of those, the
    message lists each, e.g. ``Can't admit new workloads: references missing
    ResourceFlavor(s): gpu.`` Names are listed in the ClusterQueue's own order for
    flavors and sorted for checks and TAS flavors, as Kueue sorts them (it walks a
    map for the TAS flavors; sorted here).
    """
    if cq.terminating:  # Kueue's inactiveReason puts it first (pkg/cache/scheduler/clusterqueue.go)
        return Active(False, "Terminating", "Can't admit new workloads; clusterQueue is terminating")
    reasons: list[str] = []
    messages: list[str] = []
    if cq.spec.stop_policy != "None":
        reasons.append("Stopped")
        messages.append("is stopped")
    flavor_names = [fq.name for group in cq.spec.resource_groups for fq in group.flavors]
    missing_flavors = [name for name in flavor_names if name not in state.flavors]
    if missing_flavors:
        reasons.append("FlavorNotFound")
        messages.append(f"references missing ResourceFlavor(s): {','.join(missing_flavors)}")
    checks = sorted(dict.fromkeys(required_checks(cq)))
    missing_checks = [name for name in checks if name not in state.admission_checks]
    inactive_checks = [
        name for name in checks if name in state.admission_checks and not state.admission_checks[name].active
    ]
    if missing_checks:
        reasons.append("AdmissionCheckNotFound")
        messages.append(f"references missing AdmissionCheck(s): {','.join(missing_checks)}")
    if inactive_checks:
        reasons.append("AdmissionCheckInactive")
        messages.append(f"references inactive AdmissionCheck(s): {','.join(inactive_checks)}")
    for reason, message in multikueue_problems(cq, state.admission_checks):
        reasons.append(reason)
        messages.append(message)
    # with the gate TopologyAwareScheduling off no flavor is a TAS flavor (Kueue's cache.go handleTASFlavor); with
    # a MultiKueue check the workers place the pods (clusterqueue.go isTASViolated)
    for name, topology in missing_tas_topologies(cq, state=state):
        reasons.append("TopologyNotFound")
        messages.append(f'there is no Topology "{topology}" for TAS flavor "{name}"')
    if not reasons:
        return Active(True, READY_REASON, CQ_READY_MESSAGE)
    message = f"Can't admit new workloads: {', '.join(messages)}."
    return Active(False, reasons[0], message[:MAX_CONDITION_MESSAGE])


def admits(state: ClusterState, tree: quota.QuotaTree, cq_name: str) -> bool:
    """Whether the ClusterQueue ``cq_name`` (of ``state.cluster_queues``) can admit now, for counting its pending
    workloads (``kueue_pending_workloads``, ``kueue-es status``): its Active condition is True
    (:func:`cluster_queue_active`: not stopped, no missing ResourceFlavor, AdmissionCheck or Topology, no inactive
    AdmissionCheck; Kueue's ``ClusterQueueActive``, which ``kueue_cluster_queue_status`` reports too) and the
    admitter does not hold it inactive (:func:`kueue_es.scheduling.queues.inactive_reason`, which adds a cohort
    tree with a cycle: Kueue leaves such a ClusterQueue out of its snapshot, so each of its workloads is
    inadmissible at its first pop). Kueue pkg/cache/queue/metrics.go reportCQPendingWorkloads: an inactive
    ClusterQueue's pending workloads are all inadmissible."""
    cq = state.cluster_queues[cq_name]
    if not cluster_queue_active(cq, state=state).status:
        return False
    return inactive_reason(cq, state=state, tree=tree) is None


def counts_inadmissible(queued: Queued, key: str, *, admitting: bool, trigger: int) -> bool:
    """Whether the pending workload ``key`` of ``queued`` (a LocalQueue's queue) counts as ``inadmissible``
    rather than ``active``: every one of a ClusterQueue that does not admit now (``admitting`` False,
    :func:`admits`), else one parked at or after ``trigger``, the latest requeue trigger of its cohort tree
    (:func:`kueue_es.scheduling.queues.requeue_triggers`): still on Kueue's inadmissible list. Kueue
    pkg/cache/queue/metrics.go reportCQPendingWorkloads (``PendingInadmissible`` of an active queue,
    ``Pending`` all of it when inactive)."""
    if not admitting:
        return True
    parked_at = queued.parked.get(key) or queued.requeued.get(key)
    return parked_at is not None and parked_at[0] >= trigger


def admission_check_active(check: models.AdmissionCheck, *, state: ClusterState) -> Active | None:
    """The ``Active`` condition of a MultiKueue AdmissionCheck (controllerName ``kueue.x-k8s.io/multikueue``)
    from its MultiKueueConfig and the workers' connectivity (SEMANTICS-ADVANCED E.1); None for a check
    of another controller, whose condition is its controller's to write."""
    if not multikueue.is_multikueue(check):
        return None
    status, reason, message = multikueue.check_condition(state.multikueue, check)
    return Active(status, reason, message[:MAX_CONDITION_MESSAGE])


def multikueue_cluster_active(name: str, *, state: ClusterState) -> Active | None:
    """The ``Active`` condition of MultiKueueCluster ``name`` as the MultiKueue edge last reported the
    connection (WorkerClusterConnectivity: its reason and message); None before any report (the object's
    own condition stands)."""
    seen = state.multikueue.connectivity.get(name)
    if seen is None:
        return None
    reason = seen.reason or ("Active" if seen.active else "ClientConnectionFailed")
    message = seen.message or ("Connected" if seen.active else "")
    return Active(seen.active, reason, message[:MAX_CONDITION_MESSAGE])


def local_queue_active(lq: models.LocalQueue, *, state: ClusterState) -> Active:
    """A LocalQueue's ``Active`` condition (Kueue localqueue_controller.go Reconcile): ``Stopped`` when its
    own stopPolicy is not None, ``ClusterQueueDoesNotExist``, ``Ready`` when its ClusterQueue is Active,
    else ``ClusterQueueIsInactive``."""
    if lq.spec.stop_policy != "None":
        return Active(False, "Stopped", LQ_STOPPED_MESSAGE)
    cq = state.cluster_queues.get(lq.spec.cluster_queue)
    if cq is None:
        return Active(False, "ClusterQueueDoesNotExist", LQ_CQ_INACTIVE_MESSAGE)
    if cluster_queue_active(cq, state=state).status:
        return Active(True, READY_REASON, LQ_READY_MESSAGE)
    return Active(False, "ClusterQueueIsInactive", LQ_CQ_INACTIVE_MESSAGE)


def cohort_cycle(name: str, cohorts: dict[str, models.Cohort]) -> list[str]:
    """The parent chain of Cohort ``name`` up to where it first repeats (``[a, a]`` for a Cohort that is
    its own parent, ``[b, a, b]`` for a loop of two), or ``[]`` when the chain ends at a root. A Cohort
    under a loop has one too (``[c, a, a]``): its tree is as unusable (SEMANTICS §1.4)."""
    chain: list[str] = []
    current = name
    while current:
        if current in chain:
            return [*chain, current]
        chain.append(current)
        parent = cohorts.get(current)
        current = (parent.spec.parent_name or "") if parent is not None else ""
    return []


def cohort_active(name: str, *, state: ClusterState) -> Active:
    """A Cohort's ``Active`` condition (a kueue-es addition, see the module): False with reason
    :data:`COHORT_CYCLE_REASON` and the loop, e.g. ``Can't admit new workloads: the cohort has a
    cycle: a -> a.``, when its parent chain loops; else True ``Ready``."""
    cycle = cohort_cycle(name, state.cohorts)
    if cycle:
        return Active(
            False, COHORT_CYCLE_REASON, f"Can't admit new workloads: the cohort has a cycle: {' -> '.join(cycle)}."
        )
    return Active(True, READY_REASON, CQ_READY_MESSAGE)


def condition(active: Active, *, previous: Any, generation: int, now_ms: int) -> dict[str, Any]:
    """The ``Active`` condition as Kubernetes shows it (meta.SetStatusCondition): ``lastTransitionTime``
    kept from ``previous`` (the stored condition, a dict or None) while the status stays the same, else
    ``now_ms`` (ms since the epoch, RFC 3339 on the wire); ``observedGeneration`` the object's
    ``generation`` when known (above 0)."""
    status = "True" if active.status else "False"
    since = previous.get("lastTransitionTime") if isinstance(previous, dict) else None
    if not since or previous.get("status") != status:
        since = manifests.format_time_ms(now_ms)
    out: dict[str, Any] = {
        "type": ACTIVE,
        "status": status,
        "reason": active.reason,
        "message": active.message,
        "lastTransitionTime": since,
    }
    if generation > 0:
        out["observedGeneration"] = generation
    return out


def weighted_share(value: float) -> int:
    """A fair-sharing weighted share as Kueue writes it in ``status.fairSharing.weightedShare``: rounded up
    to an integer, +inf (a zero weight that borrows) as the largest int64 (helpers.go WeightedShare)."""
    if value == math.inf:
        return MAX_INT64
    return int(math.ceil(value))
