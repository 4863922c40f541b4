"""The steps of Kueue's test/e2e/sequential/ cases of waitforpodsready_test.go, objectretentionpolicies_test.go,
managejobswithoutqueuename_test.go (baseline, and extended's JobSet cases), podintegrationautoenablement_test.go,
workloadpriorityclassdefaulting_test.go and reconcile_test.go, run by tests/e2e/test_kueue_e2e_sequential_configs.py on
``kueue-es demo --keep`` with the manager Configuration each Describe restarts Kueue with
(util.UpdateKueueConfigurationAndRestart: Kueue's e2e Configuration, tests/fixtures/kueue-e2e/, with the Describe's
changes; :func:`configuration` writes it, :func:`switch` changes a running demo's; which Describes share a demo is
said in the test file).

Kueue runs each Describe's cases one by one on objects its BeforeEach names ``default``, ``cq``, ``lq``; here the
cases of one Configuration run at once, each with its own namespace, ResourceFlavor and ClusterQueue (named after
the step). A pod Kueue's case makes exit by exec into agnhost (util.WaitForActivePodsAndTerminate) is written
Failed (exit code 1) as its kubelet reports it (:func:`_fail_running_pod`); a Job Kueue's case ends that way with
exit code 0 runs a short simulated time instead.

Kueue's cases not here, and why:

- default_config_test.go (both): they rotate the certificates Kueue's internal cert management injects into the
  CRDs' conversion webhooks and the webhook configurations, and restart Kueue's Deployment with a kubeconfig of
  another ServiceAccount for the visibility server's delegated authorization; kueue-es has neither Deployment nor
  cert rotation to drive that way;
- extended/managejobswithoutqueuename_test.go: its JobSet cases are here (the JobSet CRD installed first); its
  AppWrapper and LeaderWorkerSet cases and Describe "ManageJobsWithoutQueueName without JobSet integration" are
  not ported yet (that Describe's integrations, without JobSet, would need a demo of their own).
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import (
    E2E,
    FOREVER,
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
    serving,
)
from tests.e2e.kueue_e2e_metrics import Series, expect_metrics

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KUEUE_E2E_CONFIG = FIXTURES / "kueue-e2e" / "controller_manager_config.yaml"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
SUSPENDED_BY_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
TINY = "10ms"  # util.TinyTimeout


def configuration(path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """util.UpdateKueueConfiguration: Kueue's e2e Configuration with ``change`` applied, written to ``path``."""
    cfg = yaml.safe_load(KUEUE_E2E_CONFIG.read_text())
    change(cfg)
    path.write_text(yaml.safe_dump(cfg))
    return path


async def switch(e2e: E2E, path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """util.UpdateKueueConfigurationAndRestart for the settings the deciders read (waitForPodsReady,
    objectRetentionPolicies, feature gates): the demo's Configuration file rewritten, then waited for until the
    watcher, which follows the file, has published it (one more ``configuration_observed`` in its log)."""
    assert e2e.run_dir is not None, "switch: this E2E was made without the demo's run directory"
    log = e2e.run_dir / "logs" / "watcher.log"

    def published() -> int:
        return log.read_text().count('"configuration_observed"') if log.exists() else 0

    async def seen(count: int) -> bool:
        return published() >= count

    before = published()
    configuration(path, change)
    await eventually(lambda: seen(before + 1), what=f"the watcher published the Configuration of {path}")


def wait_for_pods_ready(timeout: str, *, recovery: str | None, base: int, limit: int) -> dict[str, Any]:
    """configapi.WaitForPodsReady{BlockAdmission: true, Timeout, RecoveryTimeout, RequeuingStrategy{Eviction}}."""
    out: dict[str, Any] = {
        "blockAdmission": True,
        "timeout": timeout,
        "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": base, "backoffLimitCount": limit},
    }
    if recovery is not None:
        out["recoveryTimeout"] = recovery
    return out


async def _queues(
    e2e: E2E, ns: str, quotas: Mapping[str, str], *, lq: str = "lq", labels: Mapping[str, str] = {}
) -> str:
    """The BeforeEach: namespace ``ns``, a flavor and a ClusterQueue of ``quotas`` named after it, LocalQueue ``lq``
    (CreateClusterQueuesAndWaitForActive, CreateLocalQueuesAndWaitForActive). Returns the ClusterQueue's name."""
    cq = f"cq-{ns}"
    space = namespace(ns)
    if labels:
        space["metadata"]["labels"] = dict(labels)
    await e2e.apply(
        space, flavor(f"default-{ns}"), cluster_queue(cq, {f"default-{ns}": quotas}), local_queue(lq, ns, cq)
    )
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    await e2e.wait("localqueue", lq, ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {ns}/{lq} active")
    return cq


def _has(obj: Mapping[str, Any], kind: str, status: str, reason: str | None = None) -> bool:
    """HaveConditionStatus{True,False}[AndReason]."""
    found = condition(obj, kind)
    return found.get("status") == status and (reason is None or found.get("reason") == reason)


def _requeue_count(workload: Mapping[str, Any]) -> int:
    return int(((workload.get("status") or {}).get("requeueState") or {}).get("count") or 0)


def _evictions(workload: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(((workload.get("status") or {}).get("schedulingStats") or {}).get("evictions") or [])


async def _fail_running_pod(e2e: E2E, ns: str) -> str:
    """util.WaitForActivePodsAndTerminate(ns, 1, exit code 1): the one running pod's container exits 1, as its
    kubelet reports it (phase Failed, the container terminated with exit code 1). Returns the pod's name."""

    async def running() -> list[dict[str, Any]] | None:
        pods = [p for p in await e2e.list("pods", ns) if (p.get("status") or {}).get("phase") == "Running"]
        return pods if len(pods) == 1 else None

    name = (await eventually(running, what=f"1 running pod in {ns}"))[0]["metadata"]["name"]
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    terminated = {"exitCode": 1, "reason": "Error", "finishedAt": now}
    status = {
        "phase": "Failed",
        "conditions": [{"type": "Ready", "status": "False", "reason": "PodFailed"}],
        "containerStatuses": [
            {"name": "c", "image": "agnhost", "ready": False, "restartCount": 0, "state": {"terminated": terminated}}
        ],
    }
    await e2e.status_patch("pod", name, ns, status)
    return name


def _indexed(name: str, ns: str) -> dict[str, Any]:
    """MakeJob(name).Queue(lq).Request(cpu, 2).Parallelism(1).BackoffLimitPerIndex(2)
    .CompletionMode(Indexed).Completions(1), running until deleted."""
    out = job(name, ns, queue="lq", requests={"cpu": "2"}, parallelism=1, completions=1)
    out["spec"].update(completionMode="Indexed", backoffLimitPerIndex=2)
    return out


# -- waitforpodsready_test.go ------------------------------------------------------------------------------------


async def wfpr_timeout_evicts_and_requeues(e2e: E2E) -> None:
    """waitforpodsready_test.go, Describe "WaitForPodsReady with tiny Timeout and no RecoveryTimeout", It "should
    evict and requeue workload when pods readiness timeout is surpassed"."""
    ns = "wfpr-timeout"
    cq = await _queues(e2e, ns, {"cpu": "10"})
    await e2e.create(job("job-timeout", ns, queue="lq", requests={"cpu": "2"}, parallelism=1))
    wl = (await e2e.wait_workload_of("job", "job-timeout", ns))["metadata"]["name"]

    def evicted(w: dict[str, Any]) -> bool:
        return (
            _has(w, "PodsReady", "False", "WaitForStart")
            and _has(w, "Evicted", "True", "PodsReadyTimeout")
            and _evictions(w) == [{"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}]
        )

    await e2e.wait("workload", wl, ns, evicted, what="evicted by PodsReadyTimeout (WaitForStart), once")
    series = Series(
        "kueue_evicted_workloads_once_total",
        cluster_queue=cq,
        reason="PodsReadyTimeout",
        underlying_cause="WaitForStart",
    )
    await expect_metrics(e2e, [series], available=True)
    await e2e.wait("job", "job-timeout", ns, lambda j: j["spec"].get("suspend") is True, what="the Job suspended")
    await e2e.wait("workload", wl, ns, lambda w: _requeue_count(w) == 1, what="requeueState.count 1")
    # deactivated after the second eviction (backoffLimitCount 1, backoffBaseSeconds 10)
    await e2e.wait("workload", wl, ns, lambda w: w["spec"].get("active") is False, what="the Workload deactivated")
    # AfterEach: the namespace deleted, so that the next Configuration finds no Job of this one
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns, "--wait=false")


async def wfpr_recovery_timeout_evicts(e2e: E2E) -> None:
    """waitforpodsready_test.go, Describe "WaitForPodsReady with default Timeout and a tiny RecoveryTimeout", It
    "should evict and requeue workload when pod failure causes recovery timeout"."""
    ns = "wfpr-recovery-tiny"
    cq = await _queues(e2e, ns, {"cpu": "10"})
    await e2e.create(_indexed("job-recovery-timeout", ns))
    wl = (await e2e.wait_workload_of("job", "job-recovery-timeout", ns))["metadata"]["name"]
    await e2e.wait("workload", wl, ns, lambda w: _has(w, "PodsReady", "True"), what="PodsReady")
    await _fail_running_pod(e2e, ns)

    def requeued(w: dict[str, Any]) -> bool:
        evictions = _evictions(w)
        return (
            _requeue_count(w) >= 1
            and _has(w, "PodsReady", "True", "Started")
            and _has(w, "Evicted", "False")
            and _has(w, "Requeued", "True")
            and len(evictions) == 1
            and evictions[0].get("reason") == "PodsReadyTimeout"
            and evictions[0].get("underlyingCause") == "WaitForRecovery"
            and evictions[0].get("count", 0) >= 1
        )

    await e2e.wait("workload", wl, ns, requeued, what="requeued after a WaitForRecovery eviction, running again")
    series = Series(
        "kueue_evicted_workloads_once_total",
        cluster_queue=cq,
        reason="PodsReadyTimeout",
        underlying_cause="WaitForRecovery",
    )
    await expect_metrics(e2e, [series], available=True)
    # AfterEach: the namespace deleted, so that the next Configuration finds no Job of this one
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns, "--wait=false")


async def wfpr_recovers_before_recovery_timeout(e2e: E2E) -> None:
    """waitforpodsready_test.go, Describe "WaitForPodsReady with default Timeout and a long RecoveryTimeout", It
    "should continue running workload if pod recovers before recoveryTimeout"."""
    ns = "wfpr-recovery-long"
    cq = await _queues(e2e, ns, {"cpu": "10"})
    await e2e.create(_indexed("job-recovery-timeout", ns))
    wl = (await e2e.wait_workload_of("job", "job-recovery-timeout", ns))["metadata"]["name"]
    await e2e.wait("workload", wl, ns, lambda w: _has(w, "PodsReady", "True"), what="PodsReady")
    ready = [
        Series("kueue_ready_wait_time_seconds", cluster_queue=cq),
        Series("kueue_admitted_until_ready_wait_time_seconds", cluster_queue=cq),
        Series("kueue_local_queue_ready_wait_time_seconds", namespace=ns, name="lq"),
        Series("kueue_local_queue_admitted_until_ready_wait_time_seconds", namespace=ns, name="lq"),
    ]
    await expect_metrics(e2e, ready, available=True)
    await _fail_running_pod(e2e, ns)
    await e2e.wait(
        "workload", wl, ns, lambda w: _has(w, "PodsReady", "True", "Recovered"), what="PodsReady, reason Recovered"
    )
    await expect_metrics(e2e, [Series("kueue_evicted_workloads_once_total", cluster_queue=cq)], available=False)
    # the time-to-readiness histograms were not observed again after the recovery
    text = await e2e.kueue_metrics()
    counts = {
        ("kueue_ready_wait_time_seconds_count", "cluster_queue", cq),
        ("kueue_admitted_until_ready_wait_time_seconds_count", "cluster_queue", cq),
        ("kueue_local_queue_ready_wait_time_seconds_count", "namespace", ns),
        ("kueue_local_queue_admitted_until_ready_wait_time_seconds_count", "namespace", ns),
    }
    from tests.e2e.kueue_e2e_metrics import _values

    samples = _values(text)
    for name, key, value in counts:
        found = [v for n, labels, v in samples if n == name and labels.get(key) == value]
        assert found == [1.0], (name, found)
    # AfterEach: the namespace deleted, so that the next Configuration finds no Job of this one
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns, "--wait=false")


# -- objectretentionpolicies_test.go -----------------------------------------------------------------------------


async def orp_deactivated_workload_kept(e2e: E2E) -> tuple[str, str]:
    """objectretentionpolicies_test.go, Describe "ObjectRetentionPolicies", It "should delete the Workload after
    enabling the ObjectRetentionPolicies feature gate", up to "Enable ObjectRetentionPolicies feature gate" (the
    test then changes the Configuration and calls :func:`orp_deactivated_workload_deleted`). Returns (ns, Workload)."""
    ns = "orp-enable"
    await _queues(e2e, ns, {"cpu": "10"})
    await e2e.create(job("job", ns, queue="lq", requests={"cpu": "1"}))
    wl = (await e2e.wait_workload_of("job", "job", ns))["metadata"]["name"]
    await e2e.wait("workload", wl, ns, lambda w: w["spec"].get("active") is False, what="the Workload deactivated")
    return ns, wl


async def orp_deactivated_workload_deleted(e2e: E2E, ns: str, wl: str) -> None:
    """The rest of "should delete the Workload after enabling the ObjectRetentionPolicies feature gate": with
    afterDeactivatedByKueue set, the Job and its Workload are deleted."""
    await e2e.wait_gone("job", "job", ns)
    await e2e.wait_gone("workload", wl, ns)


async def orp_requeuing_limit_exceeded_deletes_job(e2e: E2E) -> None:
    """objectretentionpolicies_test.go, Describe "ObjectRetentionPolicies with TinyTimeout and
    RequeuingLimitExceeded", It "should delete Job"."""
    ns = "orp-requeuing-limit"
    await _queues(e2e, ns, {"cpu": "10"})
    await e2e.create(job("job", ns, queue="lq", requests={"cpu": "1"}))
    created = await e2e.must_get("job", "job", ns)
    found = await e2e.list("workloads", ns, f"kueue.x-k8s.io/job-uid={created['metadata']['uid']}")
    await e2e.wait_gone("job", "job", ns)
    for workload in found or await e2e.list("workloads", ns):
        await e2e.wait_gone("workload", workload["metadata"]["name"], ns)
    assert not await e2e.list("workloads", ns), "a Workload of the deleted Job is left"


async def orp_finished_workload_deleted(e2e: E2E) -> None:
    """objectretentionpolicies_test.go, Describe "ObjectRetentionPolicies with TinyTimeout", When "workload has
    finished", It "should delete the Workload" (the Job's pod exits 0: here the Job runs one simulated second)."""
    ns = "orp-finished"
    await _queues(e2e, ns, {"cpu": "10"})
    await e2e.create(job("job", ns, queue="lq", requests={"cpu": "1"}, seconds=1))
    wl = (await e2e.wait_workload_of("job", "job", ns))["metadata"]["name"]
    await e2e.wait_gone("workload", wl, ns)
    for _ in range(3):  # Consistently: the Job is not deleted
        assert await e2e.get("job", "job", ns) is not None, "the finished Job was deleted"
        await asyncio.sleep(0.2)


async def orp_manual_deactivation_keeps_objects(e2e: E2E) -> None:
    """objectretentionpolicies_test.go, Describe "ObjectRetentionPolicies with TinyTimeout", When "manually
    deactivating a Workload", It "shouldn't delete the Job or the Workload"."""
    ns = "orp-manual"
    await _queues(e2e, ns, {"cpu": "10"})
    await e2e.create(job("job", ns, queue="lq", requests={"cpu": "1"}))
    wl = (await e2e.wait_workload_of("job", "job", ns))["metadata"]["name"]
    await e2e.kubectl.ok("patch", "workload", wl, "-n", ns, "--type=merge", "-p", '{"spec":{"active":false}}')
    await e2e.wait("workload", wl, ns, lambda w: _has(w, "Evicted", "True", "Deactivated"), what="deactivated")
    for _ in range(5):  # Consistently: neither is deleted
        assert await e2e.get("job", "job", ns) is not None, "the Job of a manually deactivated Workload was deleted"
        assert await e2e.get("workload", wl, ns) is not None, "a manually deactivated Workload was deleted"
        await asyncio.sleep(0.2)


# -- managejobswithoutqueuename_test.go (baseline) ---------------------------------------------------------------


#: The label the managedJobsNamespaceSelector of reconcile_test.go asks for, on every namespace of the cases that
#: share its demo (managejobswithoutqueuename_test.go's and workloadpriorityclassdefaulting_test.go's).
MANAGED_NS = {"managed-by-kueue": "true"}


def _mjwqn_queues(e2e: E2E, ns: str) -> Any:
    """BeforeEach: ClusterQueue (2 CPU, 2G), LocalQueue ``main``."""
    return _queues(e2e, ns, {"cpu": "2", "memory": "2G"}, lq="main", labels=MANAGED_NS)


async def mjwqn_job_defaulted_queue_not_suspended(e2e: E2E) -> None:
    """managejobswithoutqueuename_test.go, When "manageJobsWithoutQueueName=true", It "should not suspend a job"
    (LocalQueue ``default`` in the namespace)."""
    ns = "e2e-mjwqn-default-lq"
    cq = await _mjwqn_queues(e2e, ns)
    await e2e.apply(local_queue("default", ns, cq))
    await e2e.wait("localqueue", "default", ns, lambda o: is_true(o, "Active"), what="LocalQueue default active")
    unsuspended = job("test-job", ns, queue=None, seconds=None)
    unsuspended["spec"]["suspend"] = False
    await e2e.create(unsuspended)
    found = await e2e.wait(
        "job", "test-job", ns, lambda j: j["spec"].get("suspend") is False, what="the Job not suspended"
    )
    assert found["metadata"]["labels"].get(QUEUE_LABEL) == "default", found["metadata"]["labels"]
    wl = (await e2e.wait_workload_of("job", "test-job", ns))["metadata"]["name"]
    await e2e.wait("workload", wl, ns, lambda w: bool((w.get("status") or {}).get("admission")), what="admitted")


async def mjwqn_job_suspended_until_labelled(e2e: E2E) -> None:
    """managejobswithoutqueuename_test.go, When "manageJobsWithoutQueueName=true", It "should suspend a job"."""
    ns = "e2e-mjwqn-job"
    await _mjwqn_queues(e2e, ns)
    unsuspended = job("test-job", ns, queue=None, seconds=None)
    unsuspended["spec"]["suspend"] = False
    await e2e.create(unsuspended)
    await e2e.wait("job", "test-job", ns, lambda j: j["spec"].get("suspend") is True, what="the Job suspended")
    await e2e.kubectl.ok("label", "job", "test-job", "-n", ns, f"{QUEUE_LABEL}=main")
    await e2e.wait("job", "test-job", ns, lambda j: j["spec"].get("suspend") is False, what="the Job unsuspended")
    wl = (await e2e.wait_workload_of("job", "test-job", ns))["metadata"]["name"]
    await e2e.wait("workload", wl, ns, lambda w: bool((w.get("status") or {}).get("admission")), what="admitted")


def _gated_and_managed(p: Mapping[str, Any]) -> bool:
    return bool(p["spec"].get("schedulingGates")) and p["metadata"].get("labels", {}).get(MANAGED_LABEL) == "true"


async def mjwqn_pod_gated(e2e: E2E) -> None:
    """managejobswithoutqueuename_test.go, It "should suspend a pod created in the test namespace"."""
    ns = "e2e-mjwqn-pod"
    await _mjwqn_queues(e2e, ns)
    await e2e.create(pod("test-pod", ns, queue=None, cpu="100m", seconds=FOREVER))
    await e2e.wait("pod", "test-pod", ns, _gated_and_managed, what="the pod gated, managed by Kueue")


async def mjwqn_kube_system_pod_runs(e2e: E2E) -> None:
    """managejobswithoutqueuename_test.go, It "should NOT suspend a pod created in the kube-system namespace"."""
    name = "mjwqn-test-pod"
    await e2e.create(pod(name, "kube-system", queue=None, cpu="1", seconds=FOREVER))
    await e2e.wait("pod", name, "kube-system", lambda p: p["status"].get("phase") == "Running", what="running")
    await e2e.kubectl.ok("delete", "pod", name, "-n", "kube-system", "--wait=false")
    await e2e.wait_gone("pod", name, "kube-system")


async def _pods_of(e2e: E2E, ns: str, app: str, count: int, check: Callable[[dict[str, Any]], bool], what: str) -> None:
    async def read() -> bool:
        pods = await e2e.list("pods", ns, f"app={app}-pod")
        return len(pods) == count and all(check(p) for p in pods)

    await eventually(read, what=what)


def _running(p: Mapping[str, Any]) -> bool:
    return (p.get("status") or {}).get("phase") == "Running"


async def mjwqn_deployment_pods_gated(e2e: E2E) -> None:
    """managejobswithoutqueuename_test.go, It "should suspend the pods of a deployment created in the test
    namespace"."""
    ns = "e2e-mjwqn-deploy"
    await _mjwqn_queues(e2e, ns)
    await e2e.create(serving("Deployment", "test-deploy", ns, queue=None, replicas=2, cpu="1"))
    await _pods_of(e2e, ns, "test-deploy", 2, _gated_and_managed, "2 pods gated, managed by Kueue")


async def mjwqn_kube_system_deployment_runs(e2e: E2E) -> None:
    """managejobswithoutqueuename_test.go, It "should not suspend the pods created by a deployment in the
    kube-system namespace"."""
    name = "mjwqn-test-deploy"
    await e2e.create(serving("Deployment", name, "kube-system", queue=None, replicas=2, cpu="1"))
    await _pods_of(e2e, "kube-system", name, 2, _running, "2 pods running")
    await e2e.kubectl.ok("delete", "deployment", name, "-n", "kube-system")
    await _pods_of(e2e, "kube-system", name, 0, _running, "no pods left")


async def mjwqn_statefulset_admitted_once_labelled(e2e: E2E) -> None:
    """managejobswithoutqueuename_test.go, It "should suspend the pods created by a StatefulSet in the test
    namespace without queue-name label"."""
    ns = "e2e-mjwqn-sts"
    await _mjwqn_queues(e2e, ns)
    await e2e.create(serving("StatefulSet", "sts", ns, queue=None, replicas=3))
    sts = await e2e.must_get("statefulset", "sts", ns)
    wl = f"statefulset-sts-{sts['metadata']['uid'][:5]}"

    async def the_workload() -> dict[str, Any] | None:
        found = [w for w in await e2e.list("workloads", ns) if w["metadata"]["name"].startswith("statefulset-sts-")]
        return found[0] if found else None

    workload = await eventually(the_workload, what="the StatefulSet's Workload")
    wl = workload["metadata"]["name"]
    await e2e.wait("workload", wl, ns, lambda w: _has(w, "QuotaReserved", "False"), what="not admitted")
    found = await e2e.must_get("statefulset", "sts", ns)
    assert (found.get("status") or {}).get("readyReplicas", 0) == 0, found.get("status")

    def pending_gated(p: Mapping[str, Any]) -> bool:
        gates = [g.get("name") for g in p["spec"].get("schedulingGates") or []]
        return p["status"].get("phase") == "Pending" and ADMISSION_GATE in gates

    await _pods_of(e2e, ns, "sts", 1, pending_gated, "one pod, pending and gated")
    await e2e.kubectl.ok("label", "statefulset", "sts", "-n", ns, f"{QUEUE_LABEL}=main")
    await e2e.wait("workload", wl, ns, lambda w: _has(w, "Admitted", "True"), what="the Workload admitted")
    await e2e.wait(
        "statefulset", "sts", ns, lambda s: (s.get("status") or {}).get("readyReplicas") == 3, what="3 ready"
    )

    def running_ungated(p: Mapping[str, Any]) -> bool:
        gates = [g.get("name") for g in p["spec"].get("schedulingGates") or []]
        return _running(p) and ADMISSION_GATE not in gates

    await _pods_of(e2e, ns, "sts", 3, running_ungated, "3 pods running, ungated")


async def mjwqn_kube_system_statefulset_runs(e2e: E2E) -> None:
    """managejobswithoutqueuename_test.go, It "should not suspend the pods created by a StatefulSet in the
    kube-system namespace"."""
    name = "mjwqn-test-sts"
    await e2e.create(serving("StatefulSet", name, "kube-system", queue=None, replicas=2, cpu="1"))
    await _pods_of(e2e, "kube-system", name, 2, lambda p: is_true(p, "Ready"), "2 pods ready")
    await e2e.kubectl.ok("delete", "statefulset", name, "-n", "kube-system")
    await _pods_of(e2e, "kube-system", name, 0, _running, "no pods left")


# -- podintegrationautoenablement_test.go ------------------------------------------------------------------------


async def statefulset_runs_with_pod_integration_auto_enabled(e2e: E2E) -> None:
    """podintegrationautoenablement_test.go, It "should successfully run StatefulSets when pod integration is
    auto-enabled"."""
    ns = "e2e-disabled-pod-sts"
    await _mjwqn_queues(e2e, ns)
    await e2e.create(serving("StatefulSet", "test-sts", ns, queue="main", replicas=2))

    async def admitted() -> dict[str, Any] | None:
        found = [w for w in await e2e.list("workloads", ns) if _has(w, "Admitted", "True")]
        return found[0] if found else None

    await eventually(admitted, what="the StatefulSet's Workload admitted")
    await _pods_of(
        e2e, ns, "test-sts", 2, lambda p: SUSPENDED_BY_PARENT in (p["metadata"].get("annotations") or {}), "2 pods"
    )
    await e2e.wait(
        "statefulset", "test-sts", ns, lambda s: (s.get("status") or {}).get("readyReplicas") == 2, what="2 ready"
    )


async def plain_pod_not_managed_without_queue(e2e: E2E) -> None:
    """podintegrationautoenablement_test.go, It "should not manage pods without queue names regardless of
    auto-enablement"."""
    ns = "e2e-disabled-pod-plain"
    await _mjwqn_queues(e2e, ns)
    await e2e.create(pod("plain-pod", ns, queue=None, cpu="200m", seconds=FOREVER))
    for _ in range(5):  # Consistently
        found = await e2e.must_get("pod", "plain-pod", ns)
        assert not found["spec"].get("schedulingGates"), found["spec"]
        names = [w["metadata"]["name"] for w in await e2e.list("workloads", ns)]
        assert not [n for n in names if "plain-pod" in n], names
        await asyncio.sleep(0.2)


# -- workloadpriorityclassdefaulting_test.go ---------------------------------------------------------------------


def _priority(w: Mapping[str, Any], name: str, value: int) -> bool:
    """ExpectWorkloadsWithWorkloadPriority: the Workload's priorityClassRef names WorkloadPriorityClass ``name``
    and its priority is ``value``."""
    ref = w["spec"].get("priorityClassRef") or {}
    return ref.get("kind") == "WorkloadPriorityClass" and ref.get("name") == name and w["spec"].get("priority") == value


async def wpc_defaulted(e2e: E2E) -> None:
    """workloadpriorityclassdefaulting_test.go, It "should default the WorkloadPriorityClass and admit a job with
    the defaulted priority"."""
    ns = "wpc-defaulting-default"
    await _queues(e2e, ns, {"cpu": "5"}, lq="main", labels=MANAGED_NS)
    await e2e.create(job("job-no-wpc", ns, queue="main", requests={"cpu": "100m"}, seconds=None))
    created = await e2e.must_get("job", "job-no-wpc", ns)
    assert created["metadata"]["labels"].get(PRIORITY_CLASS_LABEL) == "default", created["metadata"]["labels"]
    wl = (await e2e.wait_workload_of("job", "job-no-wpc", ns))["metadata"]["name"]
    await e2e.wait("workload", wl, ns, lambda w: _priority(w, "default", 100), what="WorkloadPriorityClass default")
    await e2e.wait("workload", wl, ns, lambda w: bool((w.get("status") or {}).get("admission")), what="admitted")
    await e2e.wait("workload", wl, ns, lambda w: is_true(w, "Finished"), what="finished")


async def wpc_label_kept(e2e: E2E) -> None:
    """workloadpriorityclassdefaulting_test.go, It "should not override an existing WorkloadPriorityClass
    label"."""
    ns = "wpc-defaulting-high"
    await _queues(e2e, ns, {"cpu": "5"}, lq="main", labels=MANAGED_NS)
    await e2e.apply(priority_class("high", 1000))
    await e2e.create(
        job(
            "job-with-wpc",
            ns,
            queue="main",
            requests={"cpu": "100m"},
            seconds=None,
            labels={PRIORITY_CLASS_LABEL: "high"},
        )
    )
    for _ in range(3):  # Consistently
        found = await e2e.must_get("job", "job-with-wpc", ns)
        assert found["metadata"]["labels"].get(PRIORITY_CLASS_LABEL) == "high", found["metadata"]["labels"]
        await asyncio.sleep(0.1)
    wl = (await e2e.wait_workload_of("job", "job-with-wpc", ns))["metadata"]["name"]
    await e2e.wait("workload", wl, ns, lambda w: _priority(w, "high", 1000), what="WorkloadPriorityClass high")


# -- reconcile_test.go -------------------------------------------------------------------------------------------


async def reconcile_namespace_selector(e2e: E2E) -> None:
    """reconcile_test.go, Describe "Job reconciliation with ManagedJobsNamespaceSelectorAlwaysRespected", its three
    cases in order: "should not reconcile a job in the default (unmanaged) namespace", "should reconcile a job in
    managed namespace and create a workload", "should not reconcile a pod in the default (unmanaged) namespace".
    Kueue lists the default namespace's Workloads at once after creating; here that is checked again once the
    managed namespace's Job has its Workload (so the watcher has had the time to make one)."""
    ns = "managed-ns-reconcile"
    await _queues(e2e, ns, {"cpu": "5"}, lq="user-queue", labels=MANAGED_NS)
    unmanaged = job("unmanaged-job", "default", queue="user-queue", seconds=None)
    unmanaged["spec"]["suspend"] = True
    await e2e.create(unmanaged)
    assert not await e2e.list("workloads", "default"), "a Workload in the unmanaged namespace default"
    managed = job("managed-job", ns, queue="user-queue", seconds=None)
    managed["spec"]["suspend"] = True
    await e2e.create(managed)

    async def one() -> list[dict[str, Any]] | None:
        found = await e2e.list("workloads", ns)
        return found if len(found) == 1 else None

    await eventually(one, what=f"one Workload in {ns}")
    await e2e.create(pod("test-pod", "default", queue="user-queue", cpu="100m", seconds=FOREVER))
    await asyncio.sleep(1)
    assert not await e2e.list("workloads", "default"), "a Workload in the unmanaged namespace default"
    await e2e.kubectl.ok("delete", "job", "unmanaged-job", "-n", "default")
    await e2e.kubectl.ok("delete", "pod", "test-pod", "-n", "default", "--wait=false")


# -- extended/managejobswithoutqueuename_test.go ----------------------------------------------------------------


def _jobset(
    name: str, ns: str, jobs: dict[str, int], *, parallelism: int, child_labels: Mapping[str, str]
) -> dict[str, Any]:
    """testingjobset.MakeJobSet(name, ns).ReplicatedJobs(one per ``jobs`` entry: name -> replicas, parallelism =
    completions, exit fast, the child Jobs' ``child_labels``).Suspend(false).RequestAndLimit(cpu 300m, memory
    300Mi), no queue-name label."""
    pod_spec = {"restartPolicy": "Never", "containers": [container({"cpu": "300m", "memory": "300Mi"})]}
    job_spec = {"parallelism": parallelism, "completions": parallelism, "template": {"spec": pod_spec}}
    replicated = [
        {
            "name": job_name,
            "replicas": count,
            "template": {"metadata": {"labels": dict(child_labels)}, "spec": job_spec},
        }
        for job_name, count in jobs.items()
    ]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"suspend": False, "replicatedJobs": replicated},
    }


def _completed(js: Mapping[str, Any]) -> bool:
    return (js.get("status") or {}).get("terminalState") == "Completed"


async def mjwqn_jobset_children_not_admitted(e2e: E2E) -> None:
    """extended/managejobswithoutqueuename_test.go, Describe "ManageJobsWithoutQueueName", It "should not admit
    child jobs even if the child job has a queue-name label"."""
    ns = "e2e-mjwqn-jobset"
    await _mjwqn_queues(e2e, ns)
    await e2e.create(_jobset("job-set", ns, {"replicated-job-1": 2}, parallelism=2, child_labels={QUEUE_LABEL: "main"}))
    await e2e.wait("jobset", "job-set", ns, lambda j: j["spec"].get("suspend") is True, what="the JobSet suspended")
    await e2e.kubectl.ok("label", "jobset", "job-set", "-n", ns, f"{QUEUE_LABEL}=main")
    await e2e.wait("jobset", "job-set", ns, lambda j: j["spec"].get("suspend") is False, what="the JobSet unsuspended")
    await e2e.wait("jobset", "job-set", ns, _completed, what="the JobSet completed")


async def unmanaged_namespace_jobset_runs(e2e: E2E) -> None:
    """extended/managejobswithoutqueuename_test.go, Describe "ManageJobsWithoutQueueName with namespace selector
    excluding test namespace", It "should not suspend Jobs from unmanaged JobSet" (the namespace lacks the label the
    demo's managedJobsNamespaceSelector asks for)."""
    ns = "e2e-mjwqn-unmanaged"
    await _queues(e2e, ns, {"cpu": "2", "memory": "2G"}, lq="main")
    await e2e.create(_jobset("job-set", ns, {"test-job-1": 1, "test-job-2": 1}, parallelism=1, child_labels={}))

    async def children(check: Callable[[dict[str, Any]], bool]) -> bool:
        jobs = await e2e.list("jobs", ns)
        return len(jobs) == 2 and all(check(j) for j in jobs)

    await eventually(lambda: children(lambda j: j["spec"].get("suspend") is False), what="2 Jobs, not suspended")
    await eventually(
        lambda: children(lambda j: j["spec"].get("suspend") is False and (j.get("status") or {}).get("succeeded") == 1),
        what="2 Jobs succeeded",
    )
    await e2e.wait("jobset", "job-set", ns, _completed, what="the JobSet completed")


WAIT_FOR_PODS_READY_TIMEOUT: list[Step] = [wfpr_timeout_evicts_and_requeues]
WAIT_FOR_PODS_READY_TINY_RECOVERY: list[Step] = [wfpr_recovery_timeout_evicts]
WAIT_FOR_PODS_READY_LONG_RECOVERY: list[Step] = [wfpr_recovers_before_recovery_timeout]
RETENTION_TINY: list[Step] = [orp_finished_workload_deleted, orp_manual_deactivation_keeps_objects]
MANAGE_JOBS_WITHOUT_QUEUE_NAME: list[Step] = [
    mjwqn_job_defaulted_queue_not_suspended,
    mjwqn_job_suspended_until_labelled,
    mjwqn_pod_gated,
    mjwqn_kube_system_pod_runs,
    mjwqn_deployment_pods_gated,
    mjwqn_kube_system_deployment_runs,
    mjwqn_statefulset_admitted_once_labelled,
    mjwqn_kube_system_statefulset_runs,
    mjwqn_jobset_children_not_admitted,
    unmanaged_namespace_jobset_runs,
]
POD_INTEGRATION_AUTO_ENABLEMENT: list[Step] = [
    statefulset_runs_with_pod_integration_auto_enabled,
    plain_pod_not_managed_without_queue,
]
PRIORITY_CLASS_DEFAULTING: list[Step] = [wpc_defaulted, wpc_label_kept]
RECONCILE: list[Step] = [reconcile_namespace_selector]
