"""The steps of Kueue's test/e2e/singlecluster/extended/kuberay_test.go (Describe "Kuberay"),
kuberay_autoscaling_test.go (Describe "KubeRay multi-PodSet autoscaling") and appwrapper_test.go (Describe
"AppWrapper") that run on the emulated cluster, run by tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo
--keep`` once the KubeRay and AppWrapper CRDs are installed (the simulated controllers then stand in for the
KubeRay operator and the AppWrapper controller: :mod:`kueue_es.sim.kuberay`, :mod:`kueue_es.sim.appwrappers`).
Kueue runs its extended suite with test/e2e/config/extended/controller_manager_config.yaml, which differs from the
default suite's only in leader-election timings kueue-es does not read, so the same manager Configuration serves
(tests/fixtures/kueue-e2e/).

Each case is a step with its own namespace, flavor, ClusterQueue and LocalQueue (its Describe's BeforeEach):
``kuberay-rf-NS`` (node label ``instance-type: on-demand``), ``kuberay-cq-NS`` of 4 CPU and 2Gi, ``kuberay-lq-NS``;
``appwrapper-rf-NS``, ``appwrapper-cq-NS`` of 5 CPU preempting lower priorities, ``appwrapper-lq-NS``.

Kueue's cases not here, and why (each needs Ray itself running in the pods, which the emulator's pods do not):

- kuberay_test.go "Should run a rayjob with InTreeAutoscaling" and "Should run a rayjob with multi scale-up
  steps", kuberay_autoscaling_test.go "Should scale RayCluster worker groups independently": the Ray autoscaler
  scales the worker groups from the demand of Ray tasks and detached actors the entrypoint (or ``kubectl exec``
  on the head) starts; here no Ray runs, so nothing asks for workers (the slices Kueue makes for a worker group
  scaled by hand are tests/e2e/test_ray_elastic.py's);
- "Should run a RayService if admitted" and "Should run a rayservice with InTreeAutoscaling": the RayService
  gets Ready when Ray Serve answers, and both curl the serve Service from a pod (``kubectl exec``); the
  simulated controllers have no RayService controller;
- "Should run the Redis cleanup Job when a GCS fault-tolerant RayService is deleted": needs a Redis that Ray's
  GCS writes to, ``redis-cli`` run in its pod, and KubeRay's Redis cleanup Job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import (
    E2E,
    JOB_UID_LABEL,
    QUEUE_LABEL,
    Step,
    cluster_queue,
    condition,
    container,
    flavor,
    is_true,
    local_queue,
    namespace,
    run_for,
)

ON_DEMAND = {"instance-type": "on-demand"}
#: Ray's object store size the cases set on each node (kuberay_test.go objectStoreMemory).
OBJECT_STORE_MEMORY = "100000000"
RAY_IMAGE = "rayproject/ray:2.52.1"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"


async def _queues(e2e: E2E, ns: str, prefix: str, quotas: Mapping[str, str], *, preemption: str | None = None) -> str:
    """The Describe's BeforeEach: namespace, flavor ``PREFIX-rf-NS`` (``instance-type: on-demand``), ClusterQueue
    ``PREFIX-cq-NS`` of ``quotas``, LocalQueue ``PREFIX-lq-NS``, both active. Returns the LocalQueue's name."""
    rf, cq, lq = f"{prefix}-rf-{ns}", f"{prefix}-cq-{ns}", f"{prefix}-lq-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(rf, node_labels=ON_DEMAND),
        cluster_queue(cq, {rf: quotas}, preemption=preemption),
        local_queue(lq, ns, cq),
    )
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    await e2e.wait("localqueue", lq, ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {ns}/{lq} active")
    return lq


async def _ray_queues(e2e: E2E, ns: str) -> str:
    # head + workers, plus 500m for the autoscaler sidecar and the submitter (kuberay_test.go's BeforeEach)
    return await _queues(e2e, ns, "kuberay", {"cpu": "4", "memory": "2Gi"})


def _ray_group(name: str, cpu: str, *, replicas: int | None = None) -> dict[str, Any]:
    """A group of testingraycluster's wrapper: one container asking ``cpu`` (RequestAndLimit), the Ray image,
    ``object-store-memory`` in its rayStartParams (RayStartParam)."""
    pod = {"spec": {"terminationGracePeriodSeconds": 1, "containers": [container({"cpu": cpu}, image=RAY_IMAGE)]}}
    pod["spec"]["containers"][0]["name"] = name
    group: dict[str, Any] = {"rayStartParams": {"object-store-memory": OBJECT_STORE_MEMORY}, "template": pod}
    if replicas is not None:
        group.update({"groupName": "workers-group-0", "replicas": replicas, "minReplicas": 0, "maxReplicas": 10})
    return group


def _cluster_spec() -> dict[str, Any]:
    """MakeCluster / MakeJob's cluster: head of 1 CPU, one worker group ``workers-group-0`` of one 400m pod."""
    return {
        "headGroupSpec": _ray_group("head-container", "1"),
        "workerGroupSpecs": [_ray_group("worker-container", "400m", replicas=1)],
    }


def rayjob(name: str, ns: str, *, queue: str, mode: str, submitter_cpu: str | None) -> dict[str, Any]:
    """testingrayjob.MakeJob(name, ns).Queue(queue).WithSubmissionMode(mode).Entrypoint(...)...: a suspended
    RayJob that shuts its cluster down once finished, with a submitter pod template of ``submitter_cpu``."""
    spec: dict[str, Any] = {
        "suspend": True,
        "shutdownAfterJobFinishes": True,
        "submissionMode": mode,
        "entrypoint": 'python -c "import ray; ray.init(); print(ray.cluster_resources())"',
        "rayClusterSpec": _cluster_spec(),
    }
    if submitter_cpu is not None:
        submitter = container({"cpu": submitter_cpu}, image=RAY_IMAGE, name="rayjob-submitter")
        spec["submitterPodTemplate"] = {"spec": {"restartPolicy": "OnFailure", "containers": [submitter]}}
    meta = {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}, "annotations": run_for(None)}
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta, "spec": spec}


def raycluster(name: str, ns: str, *, queue: str, elastic: bool = False) -> dict[str, Any]:
    """testingraycluster.MakeCluster(name, ns).Suspend(true).Queue(queue)...; ``elastic``: with the
    elastic-job annotation and in-tree autoscaling (WithEnableAutoscaling)."""
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}}
    spec: dict[str, Any] = {"suspend": True, **_cluster_spec()}
    if elastic:
        meta["annotations"] = {ELASTIC_JOB: "true"}
        spec["enableInTreeAutoscaling"] = True
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


def _non_finished(workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """util.FindNonFinishedWorkloads."""
    return [w for w in workloads if not is_true(w, "Finished")]


async def _admitted(e2e: E2E, kind: str, name: str, ns: str) -> dict[str, Any]:
    """The job's Workload (by its job-uid label), waited for until admitted (ExpectWorkloadsToBeAdmitted)."""
    workload = await e2e.wait_workload_of(kind, name, ns)
    return await e2e.wait(
        "workload", workload["metadata"]["name"], ns, lambda w: is_true(w, "Admitted"), what=f"{kind} {name} admitted"
    )


async def _the_admitted_workload(e2e: E2E, ns: str) -> dict[str, Any]:
    """The namespace's one non-finished Workload, once it is admitted."""

    async def read() -> dict[str, Any] | None:
        active = _non_finished(await e2e.list("workloads", ns))
        return active[0] if len(active) == 1 and is_true(active[0], "Admitted") else None

    return dict(await eventually(read, what=f"exactly one non-finished admitted Workload in {ns}"))


async def _head_pod(e2e: E2E, ns: str, cluster: str) -> dict[str, Any]:
    """util.GetRayClusterHeadPod: the cluster's one head pod (``ray.io/node-type=head``)."""

    async def read() -> dict[str, Any] | None:
        pods = await e2e.list("pods", ns, f"ray.io/cluster={cluster}", "ray.io/node-type=head")
        return pods[0] if len(pods) == 1 else None

    return dict(await eventually(read, what=f"the head pod of RayCluster {ns}/{cluster}"))


def _container_named(template: Mapping[str, Any], name: str) -> dict[str, Any]:
    """findContainer: the container ``name`` of a pod or pod template spec; AssertionError when absent."""
    found = [c for c in (template.get("spec") or {}).get("containers") or [] if c.get("name") == name]
    assert found, f"no container {name!r} in {template.get('spec')}"
    return dict(found[0])


def _head_pod_set(workload: Mapping[str, Any]) -> dict[str, Any]:
    found = [p for p in workload["spec"]["podSets"] if p["name"] == "head"]
    assert found, f"the Workload has no head PodSet: {[p['name'] for p in workload['spec']['podSets']]}"
    return dict(found[0])


def _same_requests(accounted: Mapping[str, Any], real: Mapping[str, Any], what: str) -> None:
    """Kueue's accounted requests of a container equal the real pod's (the quantities compared as written)."""
    ours = (accounted.get("resources") or {}).get("requests") or {}
    theirs = (real.get("resources") or {}).get("requests") or {}
    for resource in ("cpu", "memory"):
        assert ours.get(resource) == theirs.get(resource), f"{what} {resource}: Kueue {ours}, head pod {theirs}"


async def _rayjob_running(e2e: E2E, name: str, ns: str) -> dict[str, Any]:
    """ "Waiting for the RayJob cluster become ready": unsuspended, jobDeploymentStatus Running."""
    return await e2e.wait(
        "rayjob",
        name,
        ns,
        lambda j: j["spec"].get("suspend") is False and (j.get("status") or {}).get("jobDeploymentStatus") == "Running",
        what=f"RayJob {ns}/{name} running",
    )


async def runs_a_rayjob(e2e: E2E) -> None:
    """kuberay_test.go, Describe "Kuberay", It "Should run a rayjob if admitted"."""
    ns = "kuberay-e2e-rayjob"
    lq = await _ray_queues(e2e, ns)
    await e2e.create(rayjob("rayjob", ns, queue=lq, mode="K8sJobMode", submitter_cpu="300m"))
    await _admitted(e2e, "rayjob", "rayjob", ns)
    await _rayjob_running(e2e, "rayjob", ns)

    async def labelled() -> list[dict[str, Any]] | None:
        # "Verify ray job worker pods have queue labels assigned": every pod of the namespace
        pods = await e2e.list("pods", ns)
        labels = [p["metadata"].get("labels") or {} for p in pods]
        ok = all((lb.get(CLUSTER_QUEUE_LABEL), lb.get(LOCAL_QUEUE_LABEL)) == (f"kuberay-cq-{ns}", lq) for lb in labels)
        return pods if pods and ok else None

    await eventually(labelled, what="the RayJob's pods with the queue labels")

    def finished(j: dict[str, Any]) -> bool:
        status = j.get("status") or {}
        return (status.get("jobDeploymentStatus"), status.get("jobStatus")) == ("Complete", "SUCCEEDED")

    await e2e.wait("rayjob", "rayjob", ns, finished, what="the RayJob finished successfully")
    await e2e.kubectl.ok("delete", "rayjobs", "--all", "-n", ns)


async def counts_the_sidecar_submitter(e2e: E2E) -> None:
    """kuberay_test.go, Describe "Kuberay", It "Should account for the SidecarMode submitter in the head PodSet
    quota"."""
    ns = "kuberay-e2e-sidecar"
    lq = await _ray_queues(e2e, ns)
    await e2e.create(rayjob("rayjob-sidecar", ns, queue=lq, mode="SidecarMode", submitter_cpu=None))
    workload = await _the_admitted_workload(e2e, ns)
    accounted = _container_named(_head_pod_set(workload)["template"], "ray-job-submitter")
    running = await _rayjob_running(e2e, "rayjob-sidecar", ns)
    head = await _head_pod(e2e, ns, running["status"]["rayClusterName"])
    _same_requests(accounted, _container_named(head, "ray-job-submitter"), "the submitter")
    await e2e.kubectl.ok("delete", "rayjobs", "--all", "-n", ns)


async def runs_a_raycluster(e2e: E2E) -> None:
    """kuberay_test.go, Describe "Kuberay", It "Should run a RayCluster on worker if admitted"."""
    ns = "kuberay-e2e-raycluster"
    lq = await _ray_queues(e2e, ns)
    await e2e.create(raycluster("raycluster1", ns, queue=lq))
    await _admitted(e2e, "raycluster", "raycluster1", ns)

    def ready(c: dict[str, Any]) -> bool:
        status = c.get("status") or {}
        counts = ("desiredWorkerReplicas", "readyWorkerReplicas", "availableWorkerReplicas")
        return all(status.get(k) == 1 for k in counts)

    await e2e.wait("raycluster", "raycluster1", ns, ready, what="the RayCluster ready")
    await e2e.kubectl.ok("delete", "rayclusters", "--all", "-n", ns)


async def counts_the_autoscaler_sidecar(e2e: E2E) -> None:
    """kuberay_test.go, Describe "Kuberay", It "Should account for the autoscaler sidecar in the head PodSet quota
    when in-tree autoscaling is enabled"."""
    ns = "kuberay-e2e-autoscaler"
    lq = await _ray_queues(e2e, ns)
    await e2e.create(raycluster("raycluster-autoscaling", ns, queue=lq, elastic=True))
    workload = await _the_admitted_workload(e2e, ns)
    accounted = _container_named(_head_pod_set(workload)["template"], "autoscaler")
    head = await _head_pod(e2e, ns, "raycluster-autoscaling")
    _same_requests(accounted, _container_named(head, "autoscaler"), "the autoscaler")
    await e2e.kubectl.ok("delete", "rayclusters", "--all", "-n", ns)


# -- AppWrapper --------------------------------------------------------------------------------------------------


def appwrapper(name: str, ns: str, *, queue: str, component: dict[str, Any]) -> dict[str, Any]:
    """awtesting.MakeAppWrapper(name, ns).Queue(queue).Suspend(true).Component(component)."""
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": {"suspend": True, "components": [component]},
    }


async def _unsuspended(e2e: E2E, name: str, ns: str) -> None:
    await e2e.wait(
        "appwrapper", name, ns, lambda a: a["spec"].get("suspend") is False, what=f"AppWrapper {ns}/{name} unsuspended"
    )


async def admits_a_wrapped_job(e2e: E2E) -> None:
    """appwrapper_test.go, Describe "AppWrapper", It "Should admit Workload for Job"."""
    ns = "appwrapper-e2e-job"
    lq = await _queues(e2e, ns, "appwrapper", {"cpu": "5"}, preemption="LowerPriority")
    pod = {"restartPolicy": "Never", "containers": [container({"cpu": "200m"})]}
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job-0", "namespace": ns, "annotations": run_for(None)},
        "spec": {"parallelism": 2, "completions": 2, "suspend": False, "template": {"spec": pod}},
    }
    await e2e.create(appwrapper("appwrapper", ns, queue=lq, component={"template": job}))
    await _unsuspended(e2e, "appwrapper", ns)
    await e2e.wait(
        "appwrapper",
        "appwrapper",
        ns,
        lambda a: (a.get("status") or {}).get("phase") == "Succeeded",
        what="the wrapped Job completed",
    )
    await e2e.kubectl.ok("delete", "appwrapper", "appwrapper", "-n", ns)
    await e2e.wait_gone("appwrapper", "appwrapper", ns)


async def admits_wrapped_deployment_pods(e2e: E2E) -> None:
    """appwrapper_test.go, Describe "AppWrapper", It "Should admit Workload for Deployment Pods"."""
    ns = "appwrapper-e2e-deployment"
    lq = await _queues(e2e, ns, "appwrapper", {"cpu": "5"}, preemption="LowerPriority")
    labels = {"app": "deployment-pod"}
    pod = {"terminationGracePeriodSeconds": 1, "containers": [container({"cpu": "200m"})]}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "deployment", "namespace": ns},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }
    component = {"template": deployment, "podSets": [{"replicas": 3, "path": "template.spec.template"}]}
    await e2e.create(appwrapper("aw", ns, queue=lq, component=component))
    await _unsuspended(e2e, "aw", ns)
    aw = await e2e.must_get("appwrapper", "aw", ns)

    async def one_admitted() -> dict[str, Any] | None:
        found = await e2e.list("workloads", ns)
        return found[0] if len(found) == 1 and is_true(found[0], "Admitted") else None

    workload = dict(await eventually(one_admitted, what="only one Workload, admitted"))
    assert workload["metadata"]["labels"][JOB_UID_LABEL] == aw["metadata"]["uid"], workload["metadata"]
    assert workload["metadata"]["name"].startswith("appwrapper-aw-"), workload["metadata"]["name"]
    await e2e.wait(
        "deployment",
        "deployment",
        ns,
        lambda d: (d.get("status") or {}).get("readyReplicas") == 3,
        what="the Deployment ready",
    )
    assert not condition(workload, "Finished"), workload["status"]
    await e2e.kubectl.ok("delete", "appwrapper", "aw", "-n", ns)


STEPS: list[Step] = [
    runs_a_rayjob,
    counts_the_sidecar_submitter,
    runs_a_raycluster,
    counts_the_autoscaler_sidecar,
    admits_a_wrapped_job,
    admits_wrapped_deployment_pods,
]
