"""The steps of Kueue's test/e2e/sequential/ cases that restart its manager with another Configuration:
baseline/admission_fair_sharing_test.go, custom_metrics_test.go, metrics_test.go (Describe "LocalQueue metrics"),
quota_check_strategy_test.go, visibility_server_test.go and extended/workloadidentifierannotations_test.go, run by
tests/e2e/test_kueue_e2e_sequential.py on one ``kueue-es demo --keep`` with those Configurations merged
(tests/fixtures/kueue-e2e-sequential/, which says what each case adds and why they do not meet).

Each step has its own namespace, ResourceFlavor, ClusterQueues and priority classes (Kueue's share fixed names,
as its cases run one by one), so the steps run at once.

Not ported, and why:

- baseline/failure_recovery_policy_test.go "should unblock foreground deletion during a kubelet outage": stops the
  kubelet of the node running the pod (``docker exec NODE systemctl stop kubelet``); the node controller then
  taints it unreachable, the pod is evicted, and Kueue's pod termination controller (gate FailureRecoveryPolicy)
  force-deletes the pod a minute after its deletion. The emulator has no node lifecycle controller and deletes a
  pod at once (no kubelet to wait for), and kueue-es has no pod termination controller (docs/kueue-job-integration.md);
  its one-minute forceful termination wait alone is most of this module's budget;
- baseline/ha_test.go: runs two Kueue manager replicas under leader election, kills the leader pod and checks
  admission carries on ("HA Failover"), and that the internal cert manager bootstraps the webhook certificates
  with a replica down ("Cert bootstrap with replica recovery"). kueue-es's replicas are the deciders' and
  dispatchers' standbys (services/standby.py slot leases), and the demo runs one process per service: the first
  failover case (a workload deleted before the failover frees its quota for the new leader) is in
  tests/ops/test_standby.py, on two admitter processes; the second (preemption by the new leader) is not ported.
  The certificate bootstrap scales a Deployment, which the demo does not run its services as; a second webhook
  replica taking the stored certificates is tests/kube/test_webhook_server.py
  test_a_second_replica_uses_the_stored_certificates.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from events import quantities
from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import (
    E2E,
    KUEUE,
    POD_GROUP_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_LABEL,
    Step,
    cluster_queue,
    condition,
    container,
    flavor,
    is_true,
    job,
    local_queue,
    namespace,
    pod,
    priority_class,
)
from tests.e2e.kueue_e2e_metrics import Series, expect_metrics
from tests.e2e.kueue_e2e_visibility import cq_path, read

GROUP_NAME_ANNOTATION = "kueue.x-k8s.io/pod-group-name"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


async def _active(e2e: E2E, cqs: tuple[str, ...], ns: str, lqs: tuple[str, ...]) -> None:
    """CreateClusterQueuesAndWaitForActive, CreateLocalQueuesAndWaitForActive."""
    for cq in cqs:
        await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    for lq in lqs:
        await e2e.wait("localqueue", lq, ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {ns}/{lq} active")


async def _unsuspended(e2e: E2E, name: str, ns: str) -> None:
    """util.ExpectJobUnsuspended."""
    await e2e.wait("job", name, ns, lambda j: j["spec"].get("suspend") is False, what=f"Job {ns}/{name} unsuspended")


def _afs_queue(name: str, ns: str, cq: str) -> dict[str, Any]:
    """MakeLocalQueue(name, ns).ClusterQueue(cq).FairSharing(weight 1)."""
    lq = local_queue(name, ns, cq)
    lq["spec"]["fairSharing"] = {"weight": "1"}
    return lq


def _afs_cq(
    name: str, rf: str, cpu: str, memory: str, *, cohort: str | None = None, reclaim: bool = False
) -> dict[str, Any]:
    """MakeClusterQueue(name).ResourceGroup(rf: cpu, memory).AdmissionMode(UsageBasedAdmissionFairSharing)."""
    cq = cluster_queue(name, {rf: {"cpu": cpu, "memory": memory}})
    cq["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    if cohort:
        cq["spec"]["cohortName"] = cohort
    if reclaim:
        cq["spec"]["preemption"] = {"reclaimWithinCohort": "Any"}
    return cq


def _afs_job(name: str, ns: str, queue: str, cpu: str) -> dict[str, Any]:
    return job(name, ns, queue=queue, requests={"cpu": cpu, "memory": "200Mi"})


async def _consumed_cpu_over(e2e: E2E, lq: str, ns: str, floor: float) -> None:
    """lq's status.fairSharing.admissionFairSharingStatus.consumedResources cpu is above ``floor`` (cores)."""

    def over(o: Mapping[str, Any]) -> bool:
        status = ((o.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus") or {}
        cpu = (status.get("consumedResources") or {}).get("cpu")
        return cpu is not None and _cores(str(cpu)) > floor

    await e2e.wait("localqueue", lq, ns, over, what=f"LocalQueue {ns}/{lq} consumed cpu above {floor}")


def _cores(quantity: str) -> float:
    return float(quantities.parse_decimal(quantity))


async def afs_lower_usage_first(e2e: E2E) -> None:
    """admission_fair_sharing_test.go "should prioritize LocalQueues with lower usage": lq-a fills the ClusterQueue
    with two 4-CPU jobs; once its usage shows, lq-a's third job and then lq-b's wait; a freed slot goes to lq-b."""
    ns = rf = "seq-afs"
    cq = "seq-afs-cq"
    await e2e.apply(namespace(ns), flavor(rf), _afs_cq(cq, rf, "8", "36G"))
    await e2e.apply(_afs_queue("lq-a", ns, cq), _afs_queue("lq-b", ns, cq))
    await _active(e2e, (cq,), ns, ("lq-a", "lq-b"))
    await e2e.create(_afs_job("job-a-1", ns, "lq-a", "4"), _afs_job("job-a-2", ns, "lq-a", "4"))
    await _unsuspended(e2e, "job-a-1", ns)
    await _unsuspended(e2e, "job-a-2", ns)
    await _consumed_cpu_over(e2e, "lq-a", ns, 4.0)
    await e2e.create(_afs_job("job-a-3", ns, "lq-a", "4"))
    await e2e.create(_afs_job("job-b-1", ns, "lq-b", "4"))
    await e2e.kubectl.ok("delete", "job", "job-a-1", "-n", ns, "--cascade=foreground", "--wait=false")
    await _unsuspended(e2e, "job-b-1", ns)
    assert (await e2e.must_get("job", "job-a-3", ns))["spec"].get("suspend") is True, "job-a-3 was admitted"


async def afs_cohort_reclaim(e2e: E2E) -> None:
    """admission_fair_sharing_test.go "should preempt workloads when reclaiming quota from cohort": lq1-a's two
    3-CPU jobs borrow from cq2; a job of lq2-a reclaims cq2's quota, so one of them is preempted."""
    ns = rf = "seq-afs-cohort"
    cq1, cq2 = "seq-afs-cq1", "seq-afs-cq2"
    await e2e.apply(namespace(ns), flavor(rf))
    await e2e.apply(
        _afs_cq(cq1, rf, "4", "12G", cohort="seq-afs-cohort", reclaim=True),
        _afs_cq(cq2, rf, "4", "12G", cohort="seq-afs-cohort", reclaim=True),
    )
    await e2e.apply(_afs_queue("lq1-a", ns, cq1), _afs_queue("lq2-a", ns, cq2))
    await _active(e2e, (cq1, cq2), ns, ("lq1-a", "lq2-a"))
    await e2e.create(_afs_job("job1-a-1", ns, "lq1-a", "3"), _afs_job("job1-a-2", ns, "lq1-a", "3"))
    await _unsuspended(e2e, "job1-a-1", ns)
    await _unsuspended(e2e, "job1-a-2", ns)
    await _consumed_cpu_over(e2e, "lq1-a", ns, 3.0)
    await e2e.create(_afs_job("job2-a-1", ns, "lq2-a", "3"))
    await _unsuspended(e2e, "job2-a-1", ns)
    await e2e.wait(
        "clusterqueue",
        cq1,
        None,
        lambda o: (o.get("status") or {}).get("admittedWorkloads") == 1,
        what=f"ClusterQueue {cq1} with one admitted workload",
    )


# -- custom_metrics_test.go ("Custom metric labels enabled") -----------------------------------------------------


async def _custom_queues(e2e: E2E, ns: str) -> None:
    cq = f"cq-{ns}"
    await e2e.apply(namespace(ns), flavor(f"on-demand-{ns}", node_labels={"instance-type": "on-demand"}))
    await e2e.apply(cluster_queue(cq, {f"on-demand-{ns}": {"cpu": "5"}}), local_queue("queue", ns, cq))
    await _active(e2e, (cq,), ns, ("queue",))


def _expect_copied(wl: Mapping[str, Any]) -> None:
    labels, annotations = wl["metadata"].get("labels") or {}, wl["metadata"].get("annotations") or {}
    assert labels.get("toCopyKeyIntegration") == "integration_value", labels
    assert labels.get("toCopyKeyCustom") == "custom_value", labels
    assert "dontCopyKey" not in labels, labels
    assert annotations.get("toCopyAnnotation") == "annotation_value", annotations
    assert "dontCopyAnnotation" not in annotations, annotations


async def custom_labels_copied_for_a_pod(e2e: E2E) -> None:
    """custom_metrics_test.go "should successfully copy labels and annotations for a single pod": the Workload
    gets the labelKeysToCopy label, the customLabels' source label and annotation, nothing else."""
    ns = "seq-custom-pod"
    await _custom_queues(e2e, ns)
    labels = {"toCopyKeyIntegration": "integration_value", "toCopyKeyCustom": "custom_value", "dontCopyKey": "ignored"}
    annotations = {"toCopyAnnotation": "annotation_value", "dontCopyAnnotation": "ignored"}
    await e2e.create(pod("test-pod", ns, queue="queue", cpu="200m", labels=labels, annotations=annotations))
    _expect_copied(await e2e.wait_workload_of("pod", "test-pod", ns))


async def custom_labels_copied_for_a_pod_group(e2e: E2E) -> None:
    """custom_metrics_test.go "should successfully copy labels and annotations for a pod group": the group's
    Workload takes what one pod has to copy and the other does not, and the annotation both agree on."""
    ns = "seq-custom-group"
    await _custom_queues(e2e, ns)
    first = pod(
        "test-pod1",
        ns,
        queue="queue",
        cpu="200m",
        group=("test-group", 2),
        labels={"dontCopyKey": "dontCopyValue"},
        annotations={"toCopyAnnotation": "annotation_value", "dontCopyAnnotation": "ignored1"},
    )
    second = pod(
        "test-pod2",
        ns,
        queue="queue",
        cpu="200m",
        group=("test-group", 2),
        labels={
            "toCopyKeyIntegration": "integration_value",
            "toCopyKeyCustom": "custom_value",
            "dontCopyKey": "dontCopyAnotherValue",
        },
        annotations={"toCopyAnnotation": "annotation_value", "dontCopyAnnotation": "ignored2"},
    )
    await e2e.create(first)
    await e2e.create(second)
    wl = await eventually(lambda: e2e.get("workload", "test-group", ns), what=f"Workload {ns}/test-group")
    _expect_copied(wl)


async def custom_annotation_mismatch_makes_no_workload(e2e: E2E) -> None:
    """custom_metrics_test.go "should not create workload for a pod group if there is a custom annotation
    mismatch": the pods disagree on the customLabels' source annotation, so no Workload is made."""
    ns = "seq-custom-mismatch"
    await _custom_queues(e2e, ns)
    for name, value in (("test-pod1", "annotation_value"), ("test-pod2", "mismatch_value")):
        await e2e.create(
            pod(name, ns, queue="queue", cpu="200m", group=("test-group", 2), annotations={"toCopyAnnotation": value})
        )
    # both pods are there (the watcher has seen the group whole), then Consistently no Workload (Kueue: 300 ms)
    await eventually(lambda: _both(e2e, ns), what="both pods of test-group")
    for _ in range(6):
        assert await e2e.get("workload", "test-group", ns) is None, "a Workload was made for the mismatching group"
        await asyncio.sleep(0.5)


async def _both(e2e: E2E, ns: str) -> bool:
    return len(await e2e.list("pods", ns, f"{POD_GROUP_LABEL}=test-group")) == 2


# -- metrics_test.go ("LocalQueue metrics", localQueueMetrics with a selector) -----------------------------------


def _workload(name: str, ns: str, queue: str) -> dict[str, Any]:
    """MakeWorkload(name, ns).Queue(queue).PodSets(MakePodSet("ps1", 1)).RequestAndLimit(cpu, 1)."""
    template = {"spec": {"restartPolicy": "Never", "containers": [container({"cpu": "1"})]}}
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"queueName": queue, "podSets": [{"name": "ps1", "count": 1, "template": template}]},
    }


async def _lq_metrics_setup(e2e: E2E, ns: str, *, labelled: bool) -> tuple[str, str]:
    rf, cq, lq = f"test-flavor-{ns}", f"test-cq-{ns}", f"test-lq-{ns}"
    await e2e.apply(namespace(ns), flavor(rf), cluster_queue(cq, {rf: {"cpu": "1", "memory": "1Gi"}}))
    queue = local_queue(lq, ns, cq)
    if labelled:
        queue["metadata"]["labels"] = {"metrics-test": "true"}
    await e2e.apply(queue)
    await _active(e2e, (cq,), ns, (lq,))
    await e2e.create(_workload("test-workload", ns, lq))
    await e2e.wait(
        "workload", "test-workload", ns, lambda o: is_true(o, "Admitted"), what=f"Workload {ns}/test-workload admitted"
    )
    return cq, lq


def _lq_series(ns: str, lq: str, *families: str) -> list[Series]:
    return [Series(f, namespace=ns, name=lq) for f in families]


LQ_FAMILIES = (
    "kueue_local_queue_pending_workloads",
    "kueue_local_queue_reserving_active_workloads",
    "kueue_local_queue_admitted_active_workloads",
    "kueue_local_queue_quota_reserved_workloads_total",
    "kueue_local_queue_quota_reserved_wait_time_seconds",
    "kueue_local_queue_admitted_workloads_total",
    "kueue_local_queue_admission_wait_time_seconds",
    "kueue_local_queue_status",
)


async def lq_metrics_of_a_selected_queue(e2e: E2E) -> None:
    """metrics_test.go "should ensure the localqueue metrics are available": a LocalQueue the selector picks has
    its series; its ClusterQueue deleted, the cache's go and the counters stay; the LocalQueue deleted, all go."""
    ns = "seq-lq-metrics-on"
    cq, lq = await _lq_metrics_setup(e2e, ns, labelled=True)
    await expect_metrics(e2e, _lq_series(ns, lq, *LQ_FAMILIES), available=True)
    await e2e.kubectl.ok("delete", "workload", "test-workload", "-n", ns, "--wait=true", "--timeout=60s")
    await e2e.kubectl.ok("delete", "clusterqueue", cq, "--wait=true", "--timeout=60s")
    await expect_metrics(
        e2e,
        _lq_series(
            ns, lq, "kueue_local_queue_reserving_active_workloads", "kueue_local_queue_admitted_active_workloads"
        ),
        available=False,
    )
    kept = [
        Series("kueue_local_queue_pending_workloads", namespace=ns, name=lq, status="active"),
        Series("kueue_local_queue_pending_workloads", namespace=ns, name=lq, status="inadmissible"),
        *_lq_series(ns, lq, *LQ_FAMILIES[3:]),
    ]
    await expect_metrics(e2e, kept, available=True)
    await e2e.kubectl.ok("delete", "localqueue", lq, "-n", ns, "--wait=true", "--timeout=60s")
    gone = (LQ_FAMILIES[0], *LQ_FAMILIES[3:7])
    await expect_metrics(e2e, _lq_series(ns, lq, *gone), available=False)


async def lq_metrics_of_an_unselected_queue(e2e: E2E) -> None:
    """metrics_test.go "should ensure the localqueue metrics are not available": a LocalQueue without the
    selector's label has no series, its workload admitted."""
    ns = "seq-lq-metrics-off"
    _, lq = await _lq_metrics_setup(e2e, ns, labelled=False)
    # the admitter has folded the admission (a ClusterQueue series of it is there) before the absence counts
    await expect_metrics(
        e2e, [Series("kueue_cluster_queue_resource_usage", cluster_queue=f"test-cq-{ns}")], available=True
    )
    await expect_metrics(e2e, _lq_series(ns, lq, *LQ_FAMILIES), available=False)


# -- quota_check_strategy_test.go (IgnoreUndeclared) -----------------------------------------------------------


async def _undeclared_setup(e2e: E2E, ns: str, *, preemption: bool) -> str:
    rf, cq = f"test-flavor-{ns}", f"test-cq-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(rf),
        cluster_queue(cq, {rf: {"cpu": "100"}}, preemption="LowerPriority" if preemption else None),
        local_queue("lq", ns, cq),
    )
    await _active(e2e, (cq,), ns, ("lq",))
    return cq


async def undeclared_resource_has_no_usage_metric(e2e: E2E) -> None:
    """quota_check_strategy_test.go "should not report metrics for resource usage for undeclared resources": a
    Job asking cpu and memory of a ClusterQueue declaring cpu only is admitted; only cpu's usage is reported."""
    ns = "seq-qcs-metrics"
    cq = await _undeclared_setup(e2e, ns, preemption=False)
    await e2e.create(job("ignoreundeclared-job", ns, queue="lq", requests={"cpu": "1", "memory": "1Gi"}))
    wl = await e2e.wait_workload_of("job", "ignoreundeclared-job", ns)
    name = wl["metadata"]["name"]
    await e2e.wait("workload", name, ns, lambda o: is_true(o, "Admitted"), what=f"Workload {ns}/{name} admitted")
    usage = "kueue_cluster_queue_resource_usage"
    await expect_metrics(e2e, [Series(usage, cluster_queue=cq, resource="cpu")], available=True)
    await expect_metrics(e2e, [Series(usage, cluster_queue=cq, resource="memory")], available=False)


async def undeclared_resource_lower_priority_preempted(e2e: E2E) -> None:
    """quota_check_strategy_test.go "should preempt workloads with undeclared resource that have lower priority":
    the high-priority Job's workload preempts the low one's, memory left out of both."""
    ns = "seq-qcs-preempt"
    await _undeclared_setup(e2e, ns, preemption=True)
    low, high = f"{ns}-low", f"{ns}-high"
    await e2e.apply(priority_class(low, 10), priority_class(high, 1000))
    asks = {"cpu": "100", "memory": "1Gi"}
    await e2e.create(job("low-job", ns, queue="lq", requests=asks, labels={PRIORITY_CLASS_LABEL: low}))
    low_wl = (await e2e.wait_workload_of("job", "low-job", ns))["metadata"]["name"]
    await e2e.wait("workload", low_wl, ns, lambda o: is_true(o, "Admitted"), what="the low Workload admitted")
    await e2e.create(job("high-job", ns, queue="lq", requests=asks, labels={PRIORITY_CLASS_LABEL: high}))
    high_wl = (await e2e.wait_workload_of("job", "high-job", ns))["metadata"]["name"]
    await e2e.wait("workload", high_wl, ns, lambda o: is_true(o, "Admitted"), what="the high Workload admitted")
    await e2e.wait(
        "workload",
        low_wl,
        ns,
        lambda o: condition(o, "Admitted").get("status") == "False" and is_true(o, "Preempted"),
        what="the low Workload preempted",
    )


# -- visibility_server_test.go, extended/workloadidentifierannotations_test.go ---------------------------------


async def visibility_with_a_custom_port(e2e: E2E) -> None:
    """visibility_server_test.go "Should use the custom port from the visibilityServer configuration API": with
    ``visibilityServer.bindPort`` set, a ClusterQueue's pending workloads summary is served through the API
    server. (Kueue also moves its Service's targetPort to it; the demo's aggregator finds the visibility server
    where it listens, so there is no Service to patch.)"""
    cq = "seq-visibility-cq"
    await e2e.apply({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": {}})
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")

    async def served() -> dict[str, Any] | None:
        code, body = await read(e2e, cq_path(cq))
        return body if code == 200 else None

    summary = await eventually(served, what=f"the pending workloads summary of {cq}")
    assert summary.get("items") == [], summary


def _lws(name: str, ns: str, queue: str) -> dict[str, Any]:
    """MakeLeaderWorkerSet(name, ns).Size(3).Replicas(1).RequestAndLimit(cpu, 200m).TerminationGracePeriod(1)
    .Queue(queue)."""
    template = {"spec": {"terminationGracePeriodSeconds": 1, "containers": [container({"cpu": "200m"})]}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 3, "workerTemplate": template}},
    }


async def lws_of_a_fifty_character_name(e2e: E2E) -> None:
    """workloadidentifierannotations_test.go "should admit group with 50-character lws name": the group's name is
    longer than a label value may be, so the pods carry it as the pod-group-name annotation, not the label."""
    ns = "seq-wia"
    rf, cq, lq = f"rf-{ns}", f"cq-{ns}", f"lq-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(rf, node_labels={"instance-type": "on-demand"}),
        cluster_queue(cq, {rf: {"cpu": "5"}}),
        local_queue(lq, ns, cq),
    )
    await _active(e2e, (cq,), ns, (lq,))
    name = "a" * 50
    await e2e.create(_lws(name, ns, lq))

    def ready(o: dict[str, Any]) -> bool:
        available = condition(o, "Available")
        return (o.get("status") or {}).get("readyReplicas") == 1 and (
            available.get("status"),
            available.get("reason"),
        ) == ("True", "AllGroupsReady")

    await e2e.wait("leaderworkerset", name, ns, ready, what="the LeaderWorkerSet's group ready")
    pods = await e2e.list("pods", ns, f"{LWS_NAME_LABEL}={name}")
    assert pods, "no pods of the LeaderWorkerSet"
    for p in pods:
        assert GROUP_NAME_ANNOTATION in (p["metadata"].get("annotations") or {}), p["metadata"]
        assert POD_GROUP_LABEL not in (p["metadata"].get("labels") or {}), p["metadata"]


STEPS: tuple[Step, ...] = (
    afs_lower_usage_first,
    afs_cohort_reclaim,
    custom_labels_copied_for_a_pod,
    custom_labels_copied_for_a_pod_group,
    custom_annotation_mismatch_makes_no_workload,
    lq_metrics_of_a_selected_queue,
    lq_metrics_of_an_unselected_queue,
    undeclared_resource_has_no_usage_metric,
    undeclared_resource_lower_priority_preempted,
    visibility_with_a_custom_port,
    lws_of_a_fifty_character_name,
)
