"""The status Kueue writes, folded from the log by the dispatcher's pure core (services/dispatcher/status.py).

Each test folds a log into a DispatchState and compares the rendered Workload,
ClusterQueue or LocalQueue status with what Kueue writes at that point, condition
by condition (type, status, reason, message, lastTransitionTime): pending, admitted,
preempted, requeued after the job stopped, admitted again, finished; the
UnadmittedWorkloadsObservability gate off; stop policies; usage with borrowing; and
Kubernetes' canonical quantities.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from kueue_es.events import manifests, models, quantities, types
from kueue_es.jobframework import jobs, workloads
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.dispatcher import core, kube_events, status
from kueue_es.services.watcher import convert
from tests.integration.harness import cluster_queue, flavor, job, local_queue

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
PREEMPT_MESSAGE = "Preempted to accommodate a workload (UID: uid-urgent, JobUID: uid-urgent) due to prioritization in the ClusterQueue"
PENDING_MESSAGE = (
    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, 1 more needed"
)


def at(seconds: int) -> int:
    """T0 plus ``seconds``, in ms."""
    return T0 + seconds * 1000


def ts(seconds: int) -> str:
    """T0 plus ``seconds`` as Kubernetes writes a time."""
    return manifests.format_time_ms(at(seconds))


def cond(kind: str, ok: bool, reason: str, message: str, seconds: int, *, generation: bool = True) -> dict[str, Any]:
    """A condition as the Workload status shows it, at generation 1."""
    out: dict[str, Any] = {
        "type": kind,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": ts(seconds),
    }
    if generation:
        out["observedGeneration"] = 1
    return out


ADMISSION = {
    "clusterQueue": "cluster-queue",
    "podSetAssignments": [
        {
            "name": "main",
            "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
            "resourceUsage": {"cpu": "2", "memory": "400Mi"},
            "count": 2,
        }
    ],
}


class Log:
    """A pure log folded into a DispatchState at increasing sequences."""

    def __init__(self, *events: types.Event) -> None:
        self.view = core.DispatchState()
        self.seq = 0
        self.add(*events)

    def add(self, *events: types.Event) -> int:
        for event in events:
            self.seq += 1
            core.fold(self.view, event, seq=self.seq)
        return self.seq

    def status(self, ref: types.WorkloadRef) -> dict[str, Any]:
        return status.workload_status(self.view.records.get(ref.key), generation=1)


def queues_log(*extra: types.Event, cpu: int = 9) -> tuple[Log, types.WorkloadRef]:
    """Flavor, ClusterQueue cluster-queue (``cpu`` CPUs), LocalQueue user-queue, and Job sample's workload (2 x 1 CPU)."""
    manifest = job("sample", parallelism=2)
    manifest["metadata"] |= {"uid": "uid-sample", "creationTimestamp": "2026-01-01T00:00:00Z"}
    observed = jobs.job_facts(manifest)
    assert isinstance(observed, types.WorkloadObserved)
    log = Log(
        *extra,
        convert.kueue_fact(flavor("default-flavor")),
        convert.kueue_fact(cluster_queue("cluster-queue", cpu=cpu)),
        convert.kueue_fact(local_queue("user-queue", "cluster-queue")),
        observed,
    )
    meta = observed.workload.metadata
    return log, types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)


RESOURCE_REQUESTS = [{"name": "main", "resources": {"cpu": "2", "memory": "400Mi"}}]
"""``status.resourceRequests`` of Job sample's workload after a cycle could not admit it: its 2 pods' requests."""

WAIT_FOR_START = cond("PodsReady", False, "WaitForStart", "Not all pods are ready or succeeded", 0)
"""waitForPodsReady is on by default: the job reconciler's PodsReady for a job's workload not admitted (or not
started), from its creation on (reconciler.go generatePodsReadyCondition)."""


def reserved(ref: types.WorkloadRef, seconds: int) -> types.QuotaReserved:
    assignment = types.PodSetAssignment(
        name="main",
        flavors={"cpu": "default-flavor", "memory": "default-flavor"},
        resource_usage={"cpu": 2000, "memory": 400 * 2**20},
        count=2,
    )
    return types.QuotaReserved(
        workload=ref, cluster_queue="cluster-queue", pod_set_assignments=[assignment], at_ms=at(seconds)
    )


def admitted(ref: types.WorkloadRef, seconds: int) -> list[types.Event]:
    reservation = reserved(ref, seconds)
    return [reservation, types.admitted(reservation, at_ms=at(seconds))]


def preempted(ref: types.WorkloadRef, seconds: int) -> types.EvictionRequested:
    return types.EvictionRequested(
        workload=ref,
        cluster_queue="cluster-queue",
        preemptor=types.WorkloadRef(namespace="default", name="job-urgent-00000", uid="uid-urgent"),
        preemption_reason="InClusterQueue",
        message=PREEMPT_MESSAGE,
        at_ms=at(seconds),
    )


def released(ref: types.WorkloadRef, reason: str, seconds: int) -> types.QuotaReleased:
    return types.QuotaReleased(
        workload=ref, cluster_queue="cluster-queue", reason=reason, cause_seq=0, at_ms=at(seconds)
    )


def test_workload_lifecycle_conditions_as_kueue_writes_them() -> None:
    """Pending, admitted, preempted, requeued, admitted again, finished: Kueue's conditions, reasons, messages and
    transition times at every step (UnadmittedWorkloadsObservability on, Kueue's default)."""
    log, ref = queues_log()
    # observed, nothing decided: only the job reconciler's PodsReady (waitForPodsReady is on by default)
    assert log.status(ref) == {"conditions": [WAIT_FOR_START]}

    log.add(types.WorkloadInadmissible(workload=ref, reason="Pending", message=PENDING_MESSAGE, at_ms=at(1)))
    pending_conditions = [
        cond("QuotaReserved", False, "Pending", PENDING_MESSAGE, 1),
        cond("Admitted", False, "NoReservation", "The workload has no reservation", 1),
        WAIT_FOR_START,
    ]
    assert log.status(ref) == {"conditions": pending_conditions, "resourceRequests": RESOURCE_REQUESTS}

    log.add(*admitted(ref, 10))
    reserved_condition = cond(
        "QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue cluster-queue", 10
    )
    admitted_condition = cond("Admitted", True, "Admitted", "The workload is admitted", 10)
    assert log.status(ref) == {
        "conditions": [reserved_condition, admitted_condition, WAIT_FOR_START],
        "admission": ADMISSION,
    }

    log.add(preempted(ref, 70))
    evicted_condition = cond("Evicted", True, "Preempted", PREEMPT_MESSAGE, 70)
    preempted_condition = cond("Preempted", True, "InClusterQueue", PREEMPT_MESSAGE, 70, generation=False)
    stats = {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}
    assert log.status(ref) == {
        "conditions": [reserved_condition, evicted_condition, admitted_condition, WAIT_FOR_START, preempted_condition],
        "admission": ADMISSION,
        "schedulingStats": stats,
    }

    log.add(types.WorkloadStopped(workload=ref, at_ms=at(75)))  # the job stopped: nothing changes yet
    log.add(released(ref, "Preempted", 80))
    requeued = {
        "conditions": [
            cond("QuotaReserved", False, "PendingEvaluation", PREEMPT_MESSAGE, 80),
            evicted_condition,
            cond("Admitted", False, "NoReservation", "The workload has no reservation", 80),
            WAIT_FOR_START,
            preempted_condition,
            cond("Requeued", True, "Preempted", PREEMPT_MESSAGE, 80),
        ],
        "schedulingStats": stats,
        "accumulatedPastExecutionTimeSeconds": 70,
    }
    assert log.status(ref) == requeued

    log.add(*admitted(ref, 100))
    assert log.status(ref) == {
        "conditions": [
            cond("QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue cluster-queue", 100),
            cond("Evicted", False, "QuotaReserved", f"Previously: {PREEMPT_MESSAGE}", 100),
            cond("Admitted", True, "Admitted", "The workload is admitted", 100),
            WAIT_FOR_START,
            cond("Preempted", False, "QuotaReserved", f"Previously: {PREEMPT_MESSAGE}", 100),
            cond("Requeued", True, "Preempted", PREEMPT_MESSAGE, 80),
        ],
        "admission": ADMISSION,
        "schedulingStats": stats,
        "accumulatedPastExecutionTimeSeconds": 70,
    }

    finished = types.WorkloadFinished(workload=ref, message="Job finished successfully", at_ms=at(160))
    log.add(finished, released(ref, "Finished", 161))
    final = log.status(ref)
    assert final["conditions"][-1] == cond("Finished", True, "Succeeded", "Job finished successfully", 160)
    assert final["admission"] == ADMISSION  # Kueue keeps the admission of a finished workload
    assert [c["type"] for c in final["conditions"]] == [
        "QuotaReserved",
        "Evicted",
        "Admitted",
        "PodsReady",
        "Preempted",
        "Requeued",
        "Finished",
    ]


def test_resource_requests_of_a_workload_the_scheduler_could_not_admit() -> None:
    """Kueue's scheduler writes ``status.resourceRequests`` (each pod set's total requests) when a cycle cannot admit
    the workload, as on Kueue's "Troubleshooting Jobs" page ("Pending Workload"), and drops them once it reserves
    quota; its workload controller's reasons (a LocalQueue that does not exist, an inactive ClusterQueue) come from
    no cycle and carry none (scheduler.go requeueAndUpdate, workload.go PropagateResourceRequests, patching.go
    admissionStatusPatch)."""
    config = types.ConfigurationObserved(
        configuration=models.Configuration(resources=models.ResourcesConfig(exclude_resource_prefixes=["memory"]))
    )
    log, ref = queues_log(config)
    log.add(
        types.WorkloadInadmissible(
            workload=ref, reason="Misconfigured", message="LocalQueue q doesn't exist", at_ms=at(1)
        )
    )
    assert "resourceRequests" not in log.status(ref)
    log.add(
        types.WorkloadInadmissible(
            workload=ref, reason="Suspended", message="ClusterQueue cluster-queue is inactive", at_ms=at(2)
        )
    )
    assert "resourceRequests" not in log.status(ref)

    log.add(types.WorkloadInadmissible(workload=ref, reason="WaitingForQuota", message=PENDING_MESSAGE, at_ms=at(3)))
    # the excluded prefix is left out, as Kueue's TotalRequests leave it out
    assert log.status(ref)["resourceRequests"] == [{"name": "main", "resources": {"cpu": "2"}}]

    log.add(*admitted(ref, 10))
    assert "resourceRequests" not in log.status(ref)
    log.add(preempted(ref, 70), released(ref, "Preempted", 80))
    assert "resourceRequests" not in log.status(ref)  # requeued, not tried again yet
    message = f"{PENDING_MESSAGE}. Pending the preemption of 1 workload(s)"
    nomination = types.PreemptionRequired(
        workload=ref, cluster_queue="cluster-queue", pod_set_assignments=[], targets=[], message=message, at_ms=at(90)
    )
    log.add(nomination)
    assert log.status(ref)["resourceRequests"] == [{"name": "main", "resources": {"cpu": "2"}}]


def test_a_decision_seen_twice_changes_nothing() -> None:
    """Folding the same decisions again (a redelivery, or a second copy on the log) leaves the status as it was,
    and marks nothing for writing."""
    log, ref = queues_log()
    log.add(*admitted(ref, 10), preempted(ref, 70))
    before = log.status(ref)
    log.view.take_dirty_workloads()
    log.view.take_dirty_queues()

    log.add(*admitted(ref, 20), preempted(ref, 90))
    assert log.status(ref) == before
    assert log.view.take_dirty_workloads() == {}
    assert log.view.take_dirty_queues() == []


def test_legacy_reasons_with_the_gate_off() -> None:
    """With UnadmittedWorkloadsObservability off, a pending workload has no Admitted condition, and the requeued one
    is QuotaReserved=False reason Pending."""
    config = types.ConfigurationObserved(
        configuration=models.Configuration(feature_gates={"UnadmittedWorkloadsObservability": False})
    )
    log, ref = queues_log(config)
    log.add(types.WorkloadInadmissible(workload=ref, reason="Pending", message=PENDING_MESSAGE, at_ms=at(1)))
    pending = [cond("QuotaReserved", False, "Pending", PENDING_MESSAGE, 1), WAIT_FOR_START]
    assert log.status(ref) == {"conditions": pending, "resourceRequests": RESOURCE_REQUESTS}

    log.add(*admitted(ref, 10), preempted(ref, 70), released(ref, "Preempted", 80))
    conditions = {c["type"]: c for c in log.status(ref)["conditions"]}
    assert conditions["QuotaReserved"] == cond("QuotaReserved", False, "Pending", PREEMPT_MESSAGE, 80)
    assert conditions["Admitted"] == cond("Admitted", False, "NoReservation", "The workload has no reservation", 80)
    assert conditions["Requeued"] == cond("Requeued", True, "Preempted", PREEMPT_MESSAGE, 80)


def test_stop_policies() -> None:
    """HoldAndDrain evicts with ClusterQueueStopped and is not requeued (Requeued=False); Hold gives back a
    reservation not admitted yet as QuotaReserved=False reason Suspended, "ClusterQueue ... is stopped"."""
    log, ref = queues_log()
    drained = types.EvictionRequested(
        workload=ref,
        cluster_queue="cluster-queue",
        reason="ClusterQueueStopped",
        message="The ClusterQueue is stopped",
        at_ms=at(20),
    )
    log.add(*admitted(ref, 10), drained, released(ref, "ClusterQueueStopped", 30))
    conditions = {c["type"]: c for c in log.status(ref)["conditions"]}
    assert conditions["Evicted"] == cond("Evicted", True, "ClusterQueueStopped", "The ClusterQueue is stopped", 20)
    assert conditions["Requeued"] == cond("Requeued", False, "ClusterQueueStopped", "The ClusterQueue is stopped", 30)
    assert conditions["QuotaReserved"] == cond(
        "QuotaReserved", False, "PendingEvaluation", "The ClusterQueue is stopped", 30
    )
    assert "Preempted" not in conditions

    held, held_ref = queues_log()
    held.add(reserved(held_ref, 10), released(held_ref, "ClusterQueueStopped", 30))
    assert held.status(held_ref)["conditions"][0] == cond(
        "QuotaReserved", False, "Suspended", "ClusterQueue cluster-queue is stopped", 30
    )


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("ClusterQueueTerminating", "ClusterQueue cluster-queue is terminating or missing"),
        ("LocalQueueMissing", "LocalQueue user-queue is terminating or missing"),
    ],
)
@pytest.mark.parametrize("gate", [True, False])
def test_a_reservation_given_back_as_its_queue_goes(reason: str, message: str, gate: bool) -> None:
    """Admitter logic 42: a reservation not admitted yet is given back when its LocalQueue is gone or its
    ClusterQueue terminating; Kueue's workload controller writes QuotaReserved=False "<kind> <name> is
    terminating or missing", reason Misconfigured (Inadmissible with UnadmittedWorkloadsObservability off)
    (workload_controller.go reconcileOnLocalQueueActiveState, reconcileOnClusterQueueActiveState)."""
    config = types.ConfigurationObserved(
        configuration=models.Configuration(feature_gates={"UnadmittedWorkloadsObservability": gate})
    )
    log, ref = queues_log(config)
    log.add(reserved(ref, 10), released(ref, reason, 30))
    conditions = {c["type"]: c for c in log.status(ref)["conditions"]}
    expected_reason = "Misconfigured" if gate else "Inadmissible"
    assert conditions["QuotaReserved"] == cond("QuotaReserved", False, expected_reason, message, 30)
    assert "Evicted" not in conditions and "Requeued" not in conditions


@pytest.mark.parametrize("kind", ["ClusterQueue", "LocalQueue"])
def test_a_drained_workload_is_requeued_restarted_once_its_queue_runs_again(kind: str) -> None:
    """workload_controller.go: a workload drained by HoldAndDrain (Requeued=False ``<kind>Stopped``) gets
    Requeued=True ``<kind>Restarted`` "The <kind> was restarted after being stopped" once the queue's stop policy
    is gone, here at the admitter's first decision about it since; while the queue is still stopped, a decision
    changes nothing of it."""
    log, ref = queues_log()
    stopped_reason = f"{kind}Stopped"
    drained = types.EvictionRequested(
        workload=ref,
        cluster_queue="cluster-queue",
        reason=stopped_reason,
        message=f"The {kind} is stopped",
        at_ms=at(20),
    )
    stop = cluster_queue("cluster-queue") if kind == "ClusterQueue" else local_queue("user-queue", "cluster-queue")
    stop["spec"]["stopPolicy"] = "HoldAndDrain"
    log.add(convert.kueue_fact(stop), *admitted(ref, 10), drained, released(ref, stopped_reason, 30))
    waiting = types.WorkloadInadmissible(workload=ref, reason="Pending", message=f"{kind} is stopped", at_ms=at(35))
    log.add(waiting)
    conditions = {c["type"]: c for c in log.status(ref)["conditions"]}
    assert (conditions["Requeued"]["status"], conditions["Requeued"]["reason"]) == ("False", stopped_reason)

    stop["spec"]["stopPolicy"] = "None"
    log.add(convert.kueue_fact(stop), *admitted(ref, 40))
    conditions = {c["type"]: c for c in log.status(ref)["conditions"]}
    restarted = f"The {kind} was restarted after being stopped"
    assert conditions["Requeued"] == cond("Requeued", True, f"{kind}Restarted", restarted, 40)
    assert conditions["QuotaReserved"]["status"] == "True"


def test_admission_checks_leave_a_reserved_workload_not_admitted() -> None:
    """In a ClusterQueue that requires an admission check, a reservation is QuotaReserved=True and Admitted=False
    reason UnsatisfiedAdmissionChecks."""
    checked = cluster_queue("cluster-queue")
    checked["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    log, ref = queues_log()
    log.add(convert.kueue_fact(checked), reserved(ref, 10))
    assert log.status(ref)["conditions"][1] == cond(
        "Admitted", False, "UnsatisfiedAdmissionChecks", "The workload has not all checks ready", 10
    )


def test_queue_status_counts_and_usage_with_borrowing() -> None:
    """ClusterQueue in a cohort with 1 CPU nominal holding 2 CPUs (admitted) and one pending workload: borrowed 1;
    the LocalQueue shows the same counts and totals, without borrowed."""
    cq = cluster_queue("cluster-queue", cpu=1)
    cq["spec"]["cohortName"] = "team"
    log, ref = queues_log()
    log.add(convert.kueue_fact(cq), *admitted(ref, 10))
    other = job("other")
    other["metadata"] |= {"uid": "uid-other", "creationTimestamp": "2026-01-01T00:00:05Z"}
    log.add(jobs.job_facts(other))

    usage = [
        {
            "name": "default-flavor",
            "resources": [
                {"name": "cpu", "total": "2", "borrowed": "1"},
                {"name": "memory", "total": "400Mi", "borrowed": "0"},
            ],
        }
    ]
    assert status.cluster_queue_status(log.view.cluster, "cluster-queue") == {
        "pendingWorkloads": 1,
        "reservingWorkloads": 1,
        "admittedWorkloads": 1,
        "flavorsReservation": usage,
        "flavorsUsage": usage,
    }
    lq_usage = [
        {"name": "default-flavor", "resources": [{"name": "cpu", "total": "2"}, {"name": "memory", "total": "400Mi"}]}
    ]
    assert status.local_queue_status(log.view.cluster, "default", "user-queue") == {
        "pendingWorkloads": 1,
        "reservingWorkloads": 1,
        "admittedWorkloads": 1,
        "flavorsReservation": lq_usage,
        "flavorsUsage": lq_usage,
    }
    dirty = log.view.take_dirty_queues()
    assert ("ClusterQueue", "", "cluster-queue") in dirty and ("LocalQueue", "default", "user-queue") in dirty


def test_reserved_but_not_admitted_counts_in_reservation_only() -> None:
    """A reservation without admission is in flavorsReservation and reservingWorkloads, not in flavorsUsage."""
    log, ref = queues_log()
    log.add(reserved(ref, 10))
    cq_status = status.cluster_queue_status(log.view.cluster, "cluster-queue")
    assert (cq_status["reservingWorkloads"], cq_status["admittedWorkloads"], cq_status["pendingWorkloads"]) == (1, 0, 0)
    assert cq_status["flavorsReservation"][0]["resources"][0]["total"] == "2"
    assert cq_status["flavorsUsage"][0]["resources"][0]["total"] == "0"


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 0, "0"),
        ("cpu", 500, "500m"),
        ("cpu", 3000, "3"),
        ("cpu", 1500, "1500m"),
        ("cpu", 1_500_000, "1500"),
        ("cpu", 2_000_000, "2k"),
        ("memory", 200 * 2**20, "200Mi"),
        ("memory", 36 * 2**30, "36Gi"),
        ("memory", 1536 * 2**20, "1536Mi"),
        ("memory", 1000, "1k"),
        ("memory", 3000, "3000"),
        ("memory", 10**9, "1000000000"),
        ("memory", 2**10, "1Ki"),
        ("pods", 1024, "1024"),
        ("pods", 3000, "3k"),
        ("nvidia.com/gpu", 2, "2"),
        ("hugepages-2Mi", 4 * 2**20, "4Mi"),
    ],
)
def test_quantities_are_kubernetes_canonical(resource: str, amount: int, text: str) -> None:
    """Amounts are written as Kubernetes writes the Quantity Kueue builds (milli CPU; binary memory)."""
    assert quantities.to_quantity(resource, amount) == text


def test_a_priority_class_change_marks_its_workloads_for_writing() -> None:
    """A WorkloadPriorityClass whose value changes makes the Workloads naming it dirty: their spec.priority follows."""
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}}
    manifest = job("sample")
    manifest["metadata"] |= {"uid": "uid-sample", "creationTimestamp": "2026-01-01T00:00:00Z"}
    manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    observed = jobs.job_facts(manifest, context=workloads.Context(workload_priority_classes={"high"}))
    assert isinstance(observed, types.WorkloadObserved)
    log = Log(convert.kueue_fact({**wpc, "value": 100}), observed)
    wl = log.view.cluster.workloads[observed.workload.key]
    assert status.workload_object(wl, log.view.cluster)["spec"]["priority"] == 100
    log.view.take_dirty_workloads()

    log.add(convert.kueue_fact({**wpc, "value": 7}))
    assert list(log.view.take_dirty_workloads()) == [observed.workload.key]
    spec = status.workload_object(wl, log.view.cluster)["spec"]
    assert spec["priority"] == 7
    assert spec["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}


def test_a_reactivation_before_the_job_stopped_ends_requeued_reactivated() -> None:
    """Deactivated by hand and set active again before its job stopped (the watcher's ``true`` on the log before the
    QuotaReleased): the job reconciler's Requeued=False ``Deactivated`` comes after the reactivation, and Kueue's
    workload controller, reconciling that write, finds the Workload active and sets Requeued=True ``Reactivated``
    (workload_controller.go); here at the admitter's next decision. Before, Requeued stayed False ``Deactivated``
    on the Workload admitted again (seen with the real kubectl on ``kueue-es demo``)."""
    log, ref = queues_log()
    log.add(*admitted(ref, 10))
    active = log.view.cluster.workloads[ref.key].workload
    inactive = msgspec.structs.replace(active, spec=msgspec.structs.replace(active.spec, active=False))
    deactivated = "The workload is deactivated"
    log.add(
        types.WorkloadObserved(workload=inactive),
        types.EvictionRequested(
            workload=ref, cluster_queue="cluster-queue", reason="Deactivated", message=deactivated, at_ms=at(12)
        ),
        types.WorkloadObserved(workload=active),  # reactivated while its job still stops
        types.WorkloadStopped(workload=ref, reason="Deactivated", at_ms=at(13)),
        released(ref, "Deactivated", 14),
    )
    requeued = {c["type"]: c for c in log.status(ref)["conditions"]}["Requeued"]
    assert (requeued["status"], requeued["reason"]) == ("False", "Deactivated")
    log.add(reserved(ref, 20))
    requeued = {c["type"]: c for c in log.status(ref)["conditions"]}["Requeued"]
    assert (requeued["status"], requeued["reason"], requeued["message"]) == (
        "True",
        "Reactivated",
        "The workload was reactivated",
    )
    assert requeued["lastTransitionTime"] == manifests.format_time_ms(at(20))


def test_scheduling_stats_list_each_eviction_reason_where_it_first_came() -> None:
    """``status.schedulingStats.evictions`` in Kueue's order: a reason not listed yet is appended, one listed keeps
    its place and counts one more (evict.go setSchedulingStatsEviction). Preempted, then deactivated by hand, then
    preempted again: Preempted (2) before Deactivated (1). Before, the entries were sorted by reason."""
    log, ref = queues_log()
    log.add(*admitted(ref, 10), preempted(ref, 20), released(ref, "Preempted", 21))
    deactivated = types.EvictionRequested(
        workload=ref,
        cluster_queue="cluster-queue",
        reason="Deactivated",
        message="The workload is deactivated",
        at_ms=at(40),
    )
    log.add(*admitted(ref, 30), deactivated, released(ref, "Deactivated", 41))
    log.add(*admitted(ref, 50), preempted(ref, 60), released(ref, "Preempted", 61))
    assert log.status(ref)["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 2},
        {"reason": "Deactivated", "underlyingCause": "", "count": 1},
    ]


def checked_log() -> tuple[Log, types.WorkloadRef]:
    """queues_log with a ClusterQueue that requires admission check ``prov`` on every flavor."""
    checked = cluster_queue("cluster-queue")
    checked["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    log, ref = queues_log()
    log.add(convert.kueue_fact(checked))
    return log, ref


def check(ref: types.WorkloadRef, state: str, seconds: int, **fields: Any) -> types.AdmissionCheckStateChanged:
    return types.AdmissionCheckStateChanged(workload=ref, check="prov", state=state, at_ms=at(seconds), **fields)  # type: ignore[arg-type]


def test_admission_check_entries_follow_the_checks_and_reset_on_eviction() -> None:
    """status.admissionChecks: added Pending when the ClusterQueue asks for it of the pending workload (kept at its
    reservation); the controller's Retry with requeueAfterSeconds kept;
    the AdmissionCheck eviction resets it to Pending with Kueue's message and retryCount 1; requeueState holds
    requeueAt and no count (Kueue counts only PodsReady timeouts), Requeued=False (AdmissionCheck) until the next
    reservation, then True BackoffFinished and no requeueState. Before, the status showed ``count: 0``."""
    log, ref = checked_log()
    log.add(reserved(ref, 10))
    assert log.status(ref)["admissionChecks"] == [
        {"name": "prov", "state": "Pending", "lastTransitionTime": ts(0), "message": ""}
    ]
    log.add(check(ref, "Retry", 12, message="try later", requeue_after_seconds=30))
    evicted = types.EvictionRequested(
        workload=ref,
        cluster_queue="cluster-queue",
        reason="AdmissionCheck",
        message="Evicted due to AdmissionCheck(s) in Retry state: prov",
        at_ms=at(13),
        requeue_at_ms=at(42),
    )
    log.add(evicted, released(ref, "AdmissionCheck", 14))
    out = log.status(ref)
    assert out["admissionChecks"] == [
        {
            "name": "prov",
            "state": "Pending",
            "lastTransitionTime": ts(13),
            "message": "Reset to Pending after eviction. Previously: Retry",
            "requeueAfterSeconds": 30,
            "retryCount": 1,
        }
    ]
    # Kueue's SetRequeueState(wl, requeueAt, false): no count for a check's Retry (it is the PodsReady timeouts')
    assert out["requeueState"] == {"requeueAt": ts(42)}
    conditions = {c["type"]: c for c in out["conditions"]}
    assert (conditions["Requeued"]["status"], conditions["Requeued"]["reason"]) == ("False", "AdmissionCheck")
    assert out["schedulingStats"] == {"evictions": [{"reason": "AdmissionCheck", "underlyingCause": "", "count": 1}]}
    log.add(reserved(ref, 50))
    out = log.status(ref)
    assert {c["type"]: c for c in out["conditions"]}["Requeued"] == cond(
        "Requeued", True, "BackoffFinished", "The workload backoff was finished", 42
    )
    assert "requeueState" not in out  # requeueAt cleared, no count: nothing left of it


def _strategy(*rules: dict[str, Any]) -> types.ClusterQueueObserved:
    """ClusterQueue cluster-queue (flavors default-flavor and spot) with the admission checks ``rules``."""
    queue = cluster_queue("cluster-queue")
    queue["spec"]["resourceGroups"][0]["flavors"].append(
        {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "1"}]}
    )
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": list(rules)}
    fact = convert.kueue_fact(queue)
    assert isinstance(fact, types.ClusterQueueObserved)
    return fact


def test_admission_check_entries_follow_a_cluster_queue_edit() -> None:
    """Kueue's workload_controller_test.go "the workload should have checks updated when changed on the cluster
    queue": a pending workload lists the checks that apply to every flavor of its ClusterQueue (check1, check2;
    check3 is on spot only); the ClusterQueue's checks become check2 and check3: the list follows, check2's
    entry (Retry, its message and time) kept. Before, a ClusterQueue edit left the list as it was."""
    log, ref = queues_log()
    log.add(_strategy({"name": "check1"}, {"name": "check2"}, {"name": "check3", "onFlavors": ["spot"]}))
    assert [c["name"] for c in log.status(ref)["admissionChecks"]] == ["check1", "check2"]
    log.add(
        types.AdmissionCheckStateChanged(workload=ref, check="check1", state="Ready", message="passed", at_ms=at(5)),
        types.AdmissionCheckStateChanged(workload=ref, check="check2", state="Retry", message="rejected", at_ms=at(6)),
    )
    check2 = log.status(ref)["admissionChecks"][1]
    seq = log.add(_strategy({"name": "check2"}, {"name": "check3"}))
    out = log.status(ref)["admissionChecks"]
    assert [c["name"] for c in out] == ["check2", "check3"]
    assert out[0] == check2 == {"name": "check2", "state": "Retry", "lastTransitionTime": ts(6), "message": "rejected"}
    assert out[1]["state"] == "Pending"
    assert log.view.dirty_workloads.get(ref.key) == seq  # written again


def test_admission_check_entries_of_an_admitted_workload_follow_a_cluster_queue_edit() -> None:
    """Kueue's workload controller syncs status.admissionChecks of an admitted workload too
    (workload_controller.go reconcileSyncAdmissionChecks runs whatever the workload's admission): a check the
    ClusterQueue adds is listed Pending, one it drops goes, and the workload stays admitted (the Admitted
    condition is synced only for workloads not admitted) with no eviction. Before, an admitted workload kept
    its old list."""
    log, ref = queues_log()
    log.add(_strategy({"name": "check1"}))
    log.add(reserved(ref, 10))
    log.add(types.AdmissionCheckStateChanged(workload=ref, check="check1", state="Ready", message="ok", at_ms=at(11)))
    log.add(types.admitted(reserved(ref, 10), at_ms=at(12)))
    before = log.status(ref)
    assert [(c["name"], c["state"]) for c in before["admissionChecks"]] == [("check1", "Ready")]
    seq = log.add(_strategy({"name": "check1"}, {"name": "check2"}))
    out = log.status(ref)
    assert [(c["name"], c["state"]) for c in out["admissionChecks"]] == [("check1", "Ready"), ("check2", "Pending")]
    assert out["admissionChecks"][0] == before["admissionChecks"][0]
    assert out["conditions"] == before["conditions"]  # still admitted, not evicted
    assert log.view.dirty_workloads.get(ref.key) == seq
    log.add(_strategy({"name": "check2"}))
    assert [c["name"] for c in log.status(ref)["admissionChecks"]] == ["check2"]


def test_a_reservation_assigning_no_flavor_requires_no_check() -> None:
    """A workload asking for nothing reserves no flavor: Kueue's admissionChecksForAdmission intersects each check's
    flavors (all of the ClusterQueue's when it names none) with the admission's, so none is required, and the
    admitter admits it at once. Its status then lists no check entry; before, the dispatcher kept the ClusterQueue's
    checks Pending beside Admitted=True."""
    log, ref = queues_log()
    log.add(_strategy({"name": "check1"}, {"name": "check3", "onFlavors": ["spot"]}))
    assert [c["name"] for c in log.status(ref)["admissionChecks"]] == ["check1"]
    nothing = types.PodSetAssignment(name="main", flavors={}, resource_usage={}, count=2)
    reserved_nothing = types.QuotaReserved(
        workload=ref, cluster_queue="cluster-queue", pod_set_assignments=[nothing], at_ms=at(10)
    )
    log.add(types.admitted(reserved_nothing, at_ms=at(10)))
    out = log.status(ref)
    assert "admissionChecks" not in out
    assert {c["type"]: c for c in out["conditions"]}["Admitted"]["status"] == "True"


def test_deactivation_sets_spec_active_false_until_reactivated() -> None:
    """WorkloadDeactivated with the eviction of the same batch: spec.active false to be written once (until the
    watcher sees it; the applied object never carries the field, which is its user's), Evicted
    DeactivatedDueToAdmissionCheck counted as (Deactivated, AdmissionCheck), Requeued=False
    DeactivatedDueToAdmissionCheck (before, ``Deactivated``); the workload seen inactive and then active again is
    Requeued=True Reactivated (Kueue matches the deactivation reasons by prefix since its PR #14874)."""
    log, ref = checked_log()
    log.add(reserved(ref, 10), check(ref, "Rejected", 11, message="no capacity"))
    log.add(
        types.WorkloadDeactivated(workload=ref, reason="AdmissionCheck", message="no capacity", at_ms=at(12)),
        types.EvictionRequested(
            workload=ref,
            cluster_queue="cluster-queue",
            reason="DeactivatedDueToAdmissionCheck",
            message="The workload is deactivated due to no capacity",
            at_ms=at(12),
        ),
        released(ref, "DeactivatedDueToAdmissionCheck", 13),
    )
    wl = log.view.cluster.workloads[ref.key]
    record = log.view.records[ref.key]
    assert "active" not in status.workload_object(wl, log.view.cluster)["spec"]
    assert status.deactivation_unwritten(record) and record.deactivations == 1
    out = log.status(ref)
    conditions = {c["type"]: c for c in out["conditions"]}
    assert conditions["Evicted"]["reason"] == "DeactivatedDueToAdmissionCheck"
    # the job reconciler's SetRequeuedCondition takes the Evicted condition's reason and message (reconciler.go)
    requeued = conditions["Requeued"]
    assert (requeued["status"], requeued["reason"]) == ("False", "DeactivatedDueToAdmissionCheck")
    assert requeued["message"] == conditions["Evicted"]["message"]
    assert out["schedulingStats"]["evictions"] == [
        {"reason": "Deactivated", "underlyingCause": "AdmissionCheck", "count": 1}
    ]
    active = wl.workload
    inactive = msgspec.structs.replace(active, spec=msgspec.structs.replace(active.spec, active=False))
    log.add(types.WorkloadObserved(workload=inactive))
    assert not status.deactivation_unwritten(log.view.records[ref.key])  # written and seen
    log.add(types.WorkloadObserved(workload=active))
    assert not status.deactivation_unwritten(log.view.records[ref.key])
    assert "active" not in status.workload_object(wl, log.view.cluster)["spec"]
    # Reactivated when the admitter next decides about it (at 40 s), not at the workload's creation: the
    # reservation's "wait time since queued" counts from there, as from Kueue's reconcile of the change
    log.add(types.WorkloadInadmissible(workload=ref, reason="Pending", message="waiting", at_ms=at(40)))
    requeued = {c["type"]: c for c in log.status(ref)["conditions"]}["Requeued"]
    assert (requeued["status"], requeued["reason"]) == ("True", "Reactivated")
    assert requeued["lastTransitionTime"] == manifests.format_time_ms(at(40))
    again = reserved(ref, 45)
    log.add(again)
    [event] = kube_events.for_decision(log.view.cluster, again, log.view.records[ref.key])
    assert event.message.endswith("wait time since queued was 5s")


def test_pod_set_updates_are_merged_and_a_conflict_fails_the_start() -> None:
    """A Ready check's podSetUpdates reach StartJob with the flavor's node labels; the stop takes its labels and
    annotations out; a nodeSelector key the flavor sets otherwise plans FailStart naming the conflict as Kueue."""
    zoned = flavor("default-flavor", node_labels={"zone": "a"})
    for conflicting, expected in ((False, None), (True, "zone")):
        log, ref = checked_log()
        log.add(convert.kueue_fact(zoned), reserved(ref, 10))
        update = models.PodSetUpdate(
            name="main", labels={"team": "x"}, node_selector={"zone": "b" if conflicting else "a", "pool": "p"}
        )
        log.add(check(ref, "Ready", 11, pod_set_updates=[update]))
        admit = types.WorkloadAdmitted(workload=ref, cluster_queue="cluster-queue", at_ms=at(12))
        log.add(admit)
        action = core.plan(log.view, admit, seq=log.seq)
        if expected is None:
            assert isinstance(action, core.StartJob)
            assert action.node_selector == {"pool": "p", "zone": "a"} and action.labels["team"] == "x"
            stop = core.plan(log.view, preempted(ref, 20), seq=log.add(preempted(ref, 20)))
            assert isinstance(stop, core.StopJob) and "team" in stop.labels
            assert set(stop.labels) == set(action.labels)  # everything the start added, the check's too
            assert stop.node_selector == {"pool": None, "zone": None}
        else:
            assert action == core.FailStart(
                workload=ref,
                namespace="default",
                name="sample",
                kind="Job",
                message='in admission check "prov": invalid admission check PodSetUpdate: conflict for nodeSelector: '
                "conflict for key=zone, value1=a, value2=b",
            )


def test_a_workload_refused_for_dra_reasons_gets_requeued_false_as_kueue_writes_it() -> None:
    """workload_controller.go handleDRA / markDRAInadmissible: QuotaReserved=False Misconfigured with the
    refusal's message AND Requeued=False Inadmissible (for a pod naming a ResourceClaim: "DRA resource claims
    not supported"); both go once the devices are charged and the workload reserves quota."""
    from kueue_es.events import dra as dra_events
    from kueue_es.scheduling import dra

    mapping = models.DeviceClassMapping(name="example.com/gpu", device_class_names=["gpu.example.com"])
    config = types.ConfigurationObserved(
        configuration=models.Configuration(resources=models.ResourcesConfig(device_class_mappings=[mapping]))
    )
    manifest = job("claims", parallelism=1)
    manifest["metadata"] |= {"uid": "uid-claims", "creationTimestamp": "2026-01-01T00:00:00Z"}
    manifest["spec"]["template"]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
    claims = jobs.job_facts(manifest)
    assert isinstance(claims, types.WorkloadObserved)
    manifest = job("unmapped", parallelism=1)
    manifest["metadata"] |= {"uid": "uid-unmapped", "creationTimestamp": "2026-01-01T00:00:00Z"}
    manifest["spec"]["template"]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "odd"}]
    unmapped = jobs.job_facts(manifest)
    assert isinstance(unmapped, types.WorkloadObserved)
    template = dra_events.dra_fact(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "odd", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "fpga"}}]}}},
        }
    )
    assert template is not None
    log, ref = queues_log(config, template, claims, unmapped)
    refs = {o.workload.metadata.name: o.workload for o in (claims, unmapped)}
    claims_ref, unmapped_ref = (
        types.WorkloadRef(namespace="default", name=refs[n].metadata.name, uid=refs[n].metadata.uid)
        for n in (claims.workload.metadata.name, unmapped.workload.metadata.name)
    )
    problem = dra.charge_in(log.view.cluster, unmapped.workload).problem
    assert problem.endswith('"DeviceClass fpga is not mapped in DRA configuration for podset main"')
    log.add(
        types.WorkloadInadmissible(
            workload=claims_ref, reason="Misconfigured", message=dra.CLAIMS_MESSAGE, at_ms=at(1)
        ),
        types.WorkloadInadmissible(workload=unmapped_ref, reason="Misconfigured", message=problem, at_ms=at(1)),
        types.WorkloadInadmissible(workload=ref, reason="Pending", message=PENDING_MESSAGE, at_ms=at(1)),
    )
    conditions = {c["type"]: c for c in log.status(claims_ref)["conditions"]}
    assert conditions["QuotaReserved"] == cond("QuotaReserved", False, "Misconfigured", dra.CLAIMS_MESSAGE, 1)
    assert conditions["Requeued"] == cond("Requeued", False, "Inadmissible", "DRA resource claims not supported", 1)
    conditions = {c["type"]: c for c in log.status(unmapped_ref)["conditions"]}
    assert conditions["QuotaReserved"] == cond("QuotaReserved", False, "Misconfigured", problem, 1)
    assert conditions["Requeued"] == cond("Requeued", False, "Inadmissible", problem, 1)
    # a workload waiting for quota, not refused for devices, gets no Requeued condition
    assert "Requeued" not in {c["type"] for c in log.status(ref)["conditions"]}

    # the template now names a mapped class: charged, waiting for quota, then reserved: Requeued=False is gone
    fixed = dra_events.dra_fact(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "odd", "namespace": "default", "resourceVersion": "2"},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}
            },
        }
    )
    assert fixed is not None
    log.add(fixed, types.WorkloadInadmissible(workload=unmapped_ref, reason="Pending", message="waiting", at_ms=at(2)))
    conditions = {c["type"]: c for c in log.status(unmapped_ref)["conditions"]}
    assert "Requeued" not in conditions
    assert conditions["QuotaReserved"] == cond("QuotaReserved", False, "Pending", "waiting", 2)


def test_a_job_started_by_hand_before_admission_shows_pods_ready_wait_for_start() -> None:
    """Pods of a job unsuspended by hand run and are ready while its workload waits: Kueue's
    generatePodsReadyCondition says PodsReady=False WaitForStart for a workload not admitted, whatever runs.
    Before, the Workload showed PodsReady=True Started beside Admitted=False. Once admitted it follows the pods."""
    log, ref = queues_log()
    log.add(types.WorkloadPodsReady(workload=ref, ready=True, reason="Started", at_ms=at(3)))
    pods_ready = next(c for c in log.status(ref)["conditions"] if c["type"] == "PodsReady")
    assert (pods_ready["status"], pods_ready["reason"]) == ("False", "WaitForStart")
    log.add(*admitted(ref, 5))
    log.add(types.WorkloadPodsReady(workload=ref, ready=True, reason="Started", at_ms=at(6)))
    pods_ready = next(c for c in log.status(ref)["conditions"] if c["type"] == "PodsReady")
    assert (pods_ready["status"], pods_ready["reason"]) == ("True", "Started")


def test_a_finished_workload_keeps_its_last_pods_ready() -> None:
    """Kueue's job reconciler writes nothing more once the job has finished (reconciler.go: step 3 returns before
    step 5 writes PodsReady): a PodsReady fact folded after the finish and the release of the quota (as the
    watcher reported when a failed Job's pods went, on logs written before it stopped) leaves the Workload's
    PodsReady as it was. Before, the Workload of a Job failed with BackoffLimitExceeded showed PodsReady False
    WaitForStart (found walking Kueue's troubleshooting pages with kubectl)."""
    log, ref = queues_log()
    log.add(*admitted(ref, 1))
    log.add(types.WorkloadPodsReady(workload=ref, ready=True, reason="Started", at_ms=at(2)))
    failed = "Job has reached the specified backoff limit"
    log.add(types.WorkloadFinished(workload=ref, succeeded=False, reason="Failed", message=failed, at_ms=at(3)))
    log.add(released(ref, "Finished", 3))
    log.add(types.WorkloadPodsReady(workload=ref, ready=False, reason="WaitForRecovery", at_ms=at(3)))
    conditions = {c["type"]: c for c in log.status(ref)["conditions"]}
    started = "All pods reached readiness and the workload is running"
    assert conditions["PodsReady"] == cond("PodsReady", True, "Started", started, 2)
    assert conditions["Finished"] == cond("Finished", True, "Failed", failed, 3)


def test_a_delayed_admission_check_retry_counts_and_backs_off() -> None:
    """delayed_admission_test.go 'should requeue workloads after a delayed retry', on the core engine's log:
    a Retry without requeueAfterSeconds evicts the workload, resets its check to Pending with retryCount 1 and
    no requeueState; a second Retry with requeueAfterSeconds 5 leaves retryCount 2, requeueAfterSeconds and
    requeueState.requeueAt; once the check is Ready it is admitted, retryCount still 2."""
    path = Path(__file__).parents[1] / "scenarios" / "checks" / "delayed-retry-requeues-then-admits.yaml"
    run = run_scenario(load_scenario(path))
    view = core.DispatchState()
    seen: list[dict[str, Any]] = []
    for seq, event in run.log:
        core.fold(view, event, seq=seq)
        if isinstance(event, types.QuotaReleased) and event.workload.name == "delayed-ac-retry":
            seen.append(status.workload_status(view.records[event.workload.key], generation=1))
    first, second = seen
    assert [(c["state"], c.get("retryCount")) for c in first["admissionChecks"]] == [("Pending", 1)]
    assert "requeueState" not in first
    check = second["admissionChecks"][0]
    assert (check["state"], check["retryCount"], check["requeueAfterSeconds"]) == ("Pending", 2, 5)
    assert second["requeueState"]["requeueAt"]
    final = status.workload_status(view.records["default/delayed-ac-retry"], generation=1)
    assert [(c["state"], c["retryCount"]) for c in final["admissionChecks"]] == [("Ready", 2)]
    assert {c["type"]: c["status"] for c in final["conditions"]}["Admitted"] == "True"
