"""The steps of Kueue's test/e2e/tas/extended/ (jobset_test.go, mpijob_test.go, pytorch_test.go,
appwrapper_test.go, trainjob_test.go, leaderworkerset_test.go's first case, with helpers_test.go and
suite_test.go's node set-up), run by tests/e2e/test_kueue_e2e_tas_extended.py on ``kueue-es demo --keep`` once
the JobSet, Kubeflow, AppWrapper, Trainer and LeaderWorkerSet CRDs are installed.

Kueue runs these cases one by one on a kind cluster of eight labelled workers (hack/testing/kind-cluster-tas.yaml:
blocks b1, b2 of racks r1, r2 of two nodes each, all ``cloud.provider.com/node-group: tas-group``), whose
``example.com/gpu`` capacity suite_test.go's BeforeSuite patches to 1 per node. Here the steps run at once, so each
makes its own eight Nodes (``<ns>-worker``, ``<ns>-worker2``..``<ns>-worker8``, the kind names behind a prefix, so
that they sort as kind's do) in a node group of its own, its own Topology, TAS flavor and ClusterQueue; the Nodes
are created with the status the kubelet and that patch give them (the emulator keeps a Node's status given at
create). A pod's placement is its ``spec.nodeName`` (``kubectl get pods -o wide``), which the simulated
kube-scheduler sets from the nodeSelector Kueue's TopologyUngater gave the pod: the checks compare it, per rank
label, with the node Kueue's e2e expects.

The pods run until deleted (Kueue's jobs exit fast; the placement is read off pods either way).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from kueue_es.events import models, tas
from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import (
    E2E,
    FOREVER,
    IMAGE,
    QUEUE_LABEL,
    Step,
    cluster_queue,
    is_true,
    local_queue,
    namespace,
    run_for,
)
from tests.e2e.kueue_e2e_ray import appwrapper

NODE_GROUP = "cloud.provider.com/node-group"  # helpers_test.go tasNodeGroupLabel
BLOCK = "cloud.provider.com/topology-block"  # utiltesting.DefaultBlockTopologyLevel
RACK = "cloud.provider.com/topology-rack"  # utiltesting.DefaultRackTopologyLevel
HOSTNAME = "kubernetes.io/hostname"
GPU = "example.com/gpu"  # helpers_test.go extraResource
KUEUE = "kueue.x-k8s.io/v1beta2"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
POD_INDEX_OFFSET = "kueue.x-k8s.io/pod-index-offset"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
JOB_ROLE = "training.kubeflow.org/job-role"
LWS_GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"

#: kind-cluster-tas.yaml's workers in order: (block, rack) of worker, worker2, .. worker8.
KIND_WORKERS = (
    ("b1", "r1"),
    ("b1", "r1"),
    ("b1", "r2"),
    ("b1", "r2"),
    ("b2", "r1"),
    ("b2", "r1"),
    ("b2", "r2"),
    ("b2", "r2"),
)


def worker(ns: str, number: int) -> str:
    """The name standing for kind's ``kind-worker`` (1) or ``kind-workerN`` in the step of namespace ``ns``."""
    return f"{ns}-worker" if number == 1 else f"{ns}-worker{number}"


def nodes(ns: str) -> list[dict[str, Any]]:
    """The eight workers of kind-cluster-tas.yaml for the step ``ns``, as kind registers them (Ready, a kind node's
    allocatable) with suite_test.go's ``example.com/gpu: 1``."""
    out = []
    for number, (block, rack) in enumerate(KIND_WORKERS, start=1):
        name = worker(ns, number)
        capacity = {"cpu": "8", "memory": "16Gi", "pods": "110", GPU: "1"}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {NODE_GROUP: ns, BLOCK: block, RACK: rack, HOSTNAME: name},
                },
                "status": {
                    "capacity": capacity,
                    "allocatable": capacity,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return out


async def _tas_queues(e2e: E2E, ns: str, quotas: Mapping[str, str], *, lq: str = "main") -> None:
    """The BeforeEach: MakeDefaultThreeLevelTopology, a TAS flavor on the node group, a ClusterQueue of ``quotas``
    on it and LocalQueue ``lq``, the step's nodes first."""
    topology = f"datacenter-{ns}"
    tas_flavor = f"tas-flavor-{ns}"
    cq = f"cluster-queue-{ns}"
    await e2e.create(namespace(ns), *nodes(ns))
    await e2e.apply(
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": topology},
            "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]},
        },
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": tas_flavor},
            "spec": {"nodeLabels": {NODE_GROUP: ns}, "topologyName": topology},
        },
        cluster_queue(cq, {tas_flavor: dict(quotas)}),
        local_queue(lq, ns, cq),
    )
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    await e2e.wait("localqueue", lq, ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {ns}/{lq} active")


def _container(name: str, requests: Mapping[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "args": ["entrypoint-tester"],
        "resources": {"requests": dict(requests), "limits": dict(requests)},
    }


async def _placement(e2e: E2E, ns: str, count: int, key: Callable[[Mapping[str, Any]], str | None]) -> dict[str, str]:
    """ "ensure all pods are created" and "ensure all pods are scheduled": the ``count`` pods of ``ns`` all bound,
    then rank key -> node name of the pods ``key`` names (None: not checked)."""

    async def scheduled() -> list[dict[str, Any]] | None:
        pods = await e2e.list("pods", ns)
        bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
        return pods if len(pods) == count and len(bound) == count else None

    pods = await eventually(scheduled, what=f"{count} pods of {ns} scheduled")
    out: dict[str, str] = {}
    for pod in pods:
        rank = key(pod["metadata"].get("labels") or {})
        if rank is not None:
            out[rank] = pod["spec"]["nodeName"]
    return out


def _want(ns: str, by_rank: Mapping[str, int]) -> dict[str, str]:
    return {rank: worker(ns, number) for rank, number in by_rank.items()}


# -- jobset_test.go ----------------------------------------------------------------------------------------------------


def _jobset(name: str, ns: str, replicated: list[tuple[str, int, int, Mapping[str, str]]]) -> dict[str, Any]:
    """testingjobset.MakeJobSet(name, ns).Queue("main").ReplicatedJobs((name, replicas, parallelism = completions,
    pod annotations)...).RequestAndLimit(each, example.com/gpu, 1)."""
    jobs = []
    for rj, replicas, parallelism, pod_annotations in replicated:
        pod = {
            "metadata": {"annotations": dict(pod_annotations)},
            "spec": {"restartPolicy": "Never", "containers": [_container("c", {GPU: "1"})]},
        }
        job_spec = {"parallelism": parallelism, "completions": parallelism, "template": pod}
        jobs.append({"name": rj, "replicas": replicas, "template": {"spec": job_spec}})
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "main"}, "annotations": run_for(FOREVER)},
        "spec": {"replicatedJobs": jobs},
    }


def _jobset_rank(labels: Mapping[str, Any]) -> str:
    return f"{labels.get(JOBSET_JOB_INDEX)}/{labels.get(COMPLETION_INDEX)}"


async def _jobset_ranks(
    e2e: E2E, ns: str, replicas: int, parallelism: int, annotations: Mapping[str, str]
) -> dict[str, str]:
    await _tas_queues(e2e, ns, {GPU: "8"})
    await e2e.create(_jobset("ranks-jobset", ns, [("replicated-job-1", replicas, parallelism, annotations)]))
    await e2e.wait(
        "jobset", "ranks-jobset", ns, lambda j: j["spec"].get("suspend") is False, what="JobSet is unsuspended"
    )
    return await _placement(e2e, ns, replicas * parallelism, _jobset_rank)


async def jobset_ranks(e2e: E2E) -> None:
    """jobset_test.go, It "Should place pods based on the ranks-ordering"."""
    ns = "e2e-tas-jobset-ranks"
    got = await _jobset_ranks(e2e, ns, 3, 2, {PREFERRED: BLOCK})
    assert got == _want(ns, {"0/0": 1, "0/1": 2, "1/0": 3, "1/1": 4, "2/0": 5, "2/1": 6}), got


async def jobset_slices_two_level(e2e: E2E) -> None:
    """jobset_test.go, It "Should place pods in podset slices with two-level scheduling based on the
    ranks-ordering"."""
    ns = "e2e-tas-jobset-two-level"
    got = await _jobset_ranks(e2e, ns, 2, 3, {PREFERRED: BLOCK, SLICE_REQUIRED: BLOCK, SLICE_SIZE: "3"})
    assert got == _want(ns, {"0/0": 1, "0/1": 2, "0/2": 3, "1/0": 5, "1/1": 6, "1/2": 7}), got


async def jobset_slices_only(e2e: E2E) -> None:
    """jobset_test.go, It "Should place pods in podset slices with slice-only scheduling based on the
    ranks-ordering"."""
    ns = "e2e-tas-jobset-slice-only"
    got = await _jobset_ranks(e2e, ns, 2, 3, {SLICE_REQUIRED: BLOCK, SLICE_SIZE: "3"})
    assert got == _want(ns, {"0/0": 1, "0/1": 2, "0/2": 3, "1/0": 5, "1/1": 6, "1/2": 7}), got


def _hosts(psa: Mapping[str, Any]) -> dict[str, int]:
    """A pod set assignment's topologyAssignment as domain -> pods (its one level being the hostname)."""
    raw = psa.get("topologyAssignment")
    assert raw, f"no topologyAssignment in {psa}"
    return tas.decode(msgspec.convert(raw, models.TopologyAssignment)).counts_by_domain()


async def jobset_two_replicated_jobs(e2e: E2E) -> None:
    """jobset_test.go, It "should admit a JobSet with two ReplicatedJobs"."""
    ns = "e2e-tas-jobset-two-rjs"
    await _tas_queues(e2e, ns, {GPU: "8"})
    host = {REQUIRED: HOSTNAME}
    await e2e.create(_jobset("test-jobset", ns, [("rj1", 1, 1, host), ("rj2", 1, 1, host)]))
    js = await e2e.wait(
        "jobset", "test-jobset", ns, lambda j: j["spec"].get("suspend") is False, what="JobSet is unsuspended"
    )
    selector = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"].get("nodeSelector")
    assert selector == {NODE_GROUP: ns}, selector
    workload = await e2e.wait_workload_of("jobset", "test-jobset", ns)
    name = workload["metadata"]["name"]
    admitted = await e2e.wait(
        "workload", name, ns, lambda w: (w.get("status") or {}).get("admission"), what=f"admission of {name}"
    )
    psas = admitted["status"]["admission"]["podSetAssignments"]
    assert len(psas) == 2, psas
    for psa, number in zip(psas, (1, 2), strict=True):
        assert psa["topologyAssignment"]["levels"] == [HOSTNAME], psa
        assert _hosts(psa) == {worker(ns, number): 1}, psa


# -- pytorch_test.go and mpijob_test.go --------------------------------------------------------------------------------


def _replica(container: str, count: int, requests: Mapping[str, str], annotations: Mapping[str, str]) -> dict[str, Any]:
    return {
        "replicas": count,
        "restartPolicy": "OnFailure",
        "template": {
            "metadata": {"annotations": dict(annotations)},
            "spec": {"restartPolicy": "OnFailure", "containers": [_container(container, requests)]},
        },
    }


async def pytorch_ranks(e2e: E2E) -> None:
    """pytorch_test.go, It "Should place pods based on the ranks-ordering"."""
    ns = "e2e-tas-pytorchjob-ranks"
    await _tas_queues(e2e, ns, {"cpu": "1", GPU: "8"})
    await e2e.create(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {
                "name": "ranks-pytorch",
                "namespace": ns,
                "labels": {QUEUE_LABEL: "main"},
                "annotations": run_for(FOREVER),
            },
            "spec": {
                "runPolicy": {"suspend": True},
                "pytorchReplicaSpecs": {
                    "Master": _replica("pytorch", 1, {"cpu": "200m"}, {PREFERRED: RACK}),
                    "Worker": _replica("pytorch", 3, {GPU: "1"}, {PREFERRED: BLOCK}),
                },
            },
        }
    )
    await e2e.wait(
        "pytorchjob",
        "ranks-pytorch",
        ns,
        lambda j: j["spec"]["runPolicy"].get("suspend") is False,
        what="PyTorchJob is unsuspended",
    )

    def rank(labels: Mapping[str, Any]) -> str | None:
        role = labels.get(REPLICA_TYPE)
        return f"{role}/{labels.get(REPLICA_INDEX)}" if role == "worker" else None

    got = await _placement(e2e, ns, 4, rank)
    assert got == _want(ns, {"worker/0": 1, "worker/1": 2, "worker/2": 3}), got


def _mpijob(
    name: str, ns: str, *, launcher_as_worker: bool, annotations: tuple[dict[str, str], dict[str, str]]
) -> dict[str, Any]:
    """testingmpijob.MakeMPIJob(name, ns).Queue("main").RunLauncherAsWorker(..).MPIJobReplicaSpecs(Launcher 1,
    Worker 3, OnFailure).RequestAndLimit(Launcher, cpu 200m).RequestAndLimit(Worker, example.com/gpu 1)."""
    spec: dict[str, Any] = {
        "runPolicy": {"suspend": True},
        "mpiReplicaSpecs": {
            "Launcher": _replica("mpijob", 1, {"cpu": "200m"}, annotations[0]),
            "Worker": _replica("mpijob", 3, {GPU: "1"}, annotations[1]),
        },
    }
    if launcher_as_worker:
        spec["runLauncherAsWorker"] = True
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "main"}, "annotations": run_for(FOREVER)},
        "spec": spec,
    }


async def _mpijob_placement(e2e: E2E, ns: str, job: dict[str, Any], *, with_launcher: bool) -> dict[str, str]:
    await _tas_queues(e2e, ns, {"cpu": "1", GPU: "8"})
    await e2e.create(job)
    name = job["metadata"]["name"]
    await e2e.wait(
        "mpijob", name, ns, lambda j: j["spec"]["runPolicy"].get("suspend") is False, what="MPIJob is unsuspended"
    )

    def rank(labels: Mapping[str, Any]) -> str | None:
        role = labels.get(JOB_ROLE)
        if role == "worker" or (with_launcher and role == "launcher"):
            return f"{role}/{labels.get(REPLICA_INDEX)}"
        return None

    return await _placement(e2e, ns, 4, rank)


async def mpijob_ranks(e2e: E2E) -> None:
    """mpijob_test.go, When "Creating a MPIJob", It "Should place pods based on the ranks-ordering"."""
    ns = "e2e-tas-mpijob-ranks"
    job = _mpijob("ranks-mpi", ns, launcher_as_worker=False, annotations=({PREFERRED: RACK}, {PREFERRED: BLOCK}))
    got = await _mpijob_placement(e2e, ns, job, with_launcher=False)
    assert got == _want(ns, {"worker/0": 1, "worker/1": 2, "worker/2": 3}), got


async def mpijob_launcher_as_worker_ranks(e2e: E2E) -> None:
    """mpijob_test.go, When "Creating a MPIJob with runLauncherAsWorker", It "Should place MPIJob pods based on the
    ranks-ordering (kueue.x-k8s.io/pod-index-offset Pods annotation)"."""
    ns = "e2e-tas-mpijob-offset"
    job = _mpijob("ranks-mpi", ns, launcher_as_worker=True, annotations=({PREFERRED: RACK}, {PREFERRED: BLOCK}))
    await _tas_queues(e2e, ns, {"cpu": "1", GPU: "8"})
    await e2e.create(job)
    await e2e.wait(
        "mpijob",
        "ranks-mpi",
        ns,
        lambda j: (
            (j["spec"]["mpiReplicaSpecs"]["Worker"]["template"].get("metadata") or {})
            .get("annotations", {})
            .get(POD_INDEX_OFFSET)
            == "1"
        ),
        what="the webhook adds pod-index-offset annotation to Worker",
    )
    await e2e.wait(
        "mpijob",
        "ranks-mpi",
        ns,
        lambda j: j["spec"]["runPolicy"].get("suspend") is False,
        what="MPIJob is unsuspended",
    )

    def rank(labels: Mapping[str, Any]) -> str | None:
        role = labels.get(JOB_ROLE)
        return f"{role}/{labels.get(REPLICA_INDEX)}" if role == "worker" else None

    got = await _placement(e2e, ns, 4, rank)
    assert got == _want(ns, {"worker/1": 1, "worker/2": 2, "worker/3": 3}), got


async def mpijob_grouped_ranks(e2e: E2E) -> None:
    """mpijob_test.go, When "Creating a launcher and workers grouped MPIJob with runLauncherAsWorker", It "Should
    place MPIJob launcher and workers grouped pods based on the ranks-ordering (kueue.x-k8s.io/podset-group-name Pods
    annotation)"."""
    ns = "e2e-tas-mpijob-group"
    grouped = {REQUIRED: BLOCK, GROUP_NAME: "same-group"}
    job = _mpijob("ranks-mpi-podsetgroup", ns, launcher_as_worker=True, annotations=(grouped, dict(grouped)))
    got = await _mpijob_placement(e2e, ns, job, with_launcher=True)
    assert got == _want(ns, {"launcher/0": 1, "worker/1": 1, "worker/2": 2, "worker/3": 3}), got


async def mpijob_unknown_replica(e2e: E2E) -> None:
    """mpijob_test.go, When "Creating an MPIJob with an unknown replica", It "Should accept the MPIJob and create a
    Workload with podsets only for known replica types"."""
    ns = "e2e-tas-mpijob-unknown"
    await _tas_queues(e2e, ns, {"cpu": "1", GPU: "8"})
    job = _mpijob("malformed-replica-type", ns, launcher_as_worker=False, annotations=({}, {}))
    replicas = job["spec"]["mpiReplicaSpecs"]
    del replicas["Launcher"]
    replicas["Worker"]["replicas"] = 1
    replicas["Unknown"] = _replica("mpijob", 1, {}, {REQUIRED: BLOCK})
    del replicas["Unknown"]["template"]["spec"]["containers"][0]["resources"]
    await e2e.create(job)
    workload = await e2e.wait_workload_of("mpijob", "malformed-replica-type", ns)
    assert [ps["name"] for ps in workload["spec"]["podSets"]] == ["worker"], workload["spec"]["podSets"]


# -- appwrapper_test.go ------------------------------------------------------------------------------------------------


def _wrapped_job(name: str, ns: str, requests: Mapping[str, str], annotations: Mapping[str, str]) -> dict[str, Any]:
    """utiltestingjob.MakeJob(name, ns).Parallelism(4).Completions(4).Indexed(true).Suspend(false)
    .RequestAndLimit(requests).PodAnnotation(annotations), as an AppWrapper component's template."""
    pod = {
        "metadata": {"annotations": dict(annotations)},
        "spec": {"restartPolicy": "Never", "containers": [_container("c", requests)]},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "annotations": run_for(FOREVER)},
        "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed", "suspend": False, "template": pod},
    }


async def _appwrapper_placement(e2e: E2E, ns: str, name: str, job: dict[str, Any]) -> dict[str, str]:
    await _tas_queues(e2e, ns, {"cpu": "1", GPU: "8"})
    await e2e.create(appwrapper(name, ns, queue="main", component={"template": job}))
    await e2e.wait("appwrapper", name, ns, lambda a: a["spec"].get("suspend") is False, what="AppWrapper unsuspended")
    return await _placement(e2e, ns, 4, lambda labels: labels.get(COMPLETION_INDEX))


async def appwrapper_places_pods(e2e: E2E) -> None:
    """appwrapper_test.go, It "Should place pods"."""
    ns = "e2e-tas-appwrapper-place"
    job = _wrapped_job("job-0", ns, {"cpu": "200m", GPU: "1"}, {PREFERRED: RACK})
    del job["spec"]["completionMode"]  # the wrapper's Job is not Indexed here
    await _appwrapper_placement(e2e, ns, "appwrapper", job)


async def appwrapper_ranks(e2e: E2E) -> None:
    """appwrapper_test.go, It "Should place pods based on the ranks-ordering"."""
    ns = "e2e-tas-appwrapper-ranks"
    job = _wrapped_job("ranks-job", ns, {GPU: "1"}, {REQUIRED: BLOCK})
    got = await _appwrapper_placement(e2e, ns, "aw-ranks-job", job)
    assert got == _want(ns, {"0": 1, "1": 2, "2": 3, "3": 4}), got


# -- trainjob_test.go --------------------------------------------------------------------------------------------------


async def _trainjob_ranks(
    e2e: E2E, ns: str, replicas: int, parallelism: int, annotations: Mapping[str, str]
) -> dict[str, str]:
    """testingtrainjob.MakeTrainingRuntime("test-trainingruntime", ns, a JobSet spec of replicated job "node")
    and MakeTrainJob("trainjob-test", ns) on it, then the pods' placement by job index / completion index."""
    await _tas_queues(e2e, ns, {GPU: "8"})
    jobset_spec = _jobset("", ns, [("node", replicas, parallelism, annotations)])["spec"]
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "test-trainingruntime", "namespace": ns},
        "spec": {"template": {"spec": jobset_spec}},
    }
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "trainjob-test",
            "namespace": ns,
            "labels": {QUEUE_LABEL: "main"},
            "annotations": run_for(FOREVER),
        },
        "spec": {
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "TrainingRuntime",
                "name": runtime["metadata"]["name"],
            }
        },
    }
    await e2e.create(runtime)
    await e2e.create(trainjob)
    await e2e.wait(
        "trainjob", "trainjob-test", ns, lambda j: j["spec"].get("suspend") is False, what="TrainJob is unsuspended"
    )
    return await _placement(e2e, ns, replicas * parallelism, _jobset_rank)


async def trainjob_ranks(e2e: E2E) -> None:
    """trainjob_test.go, It "Should place pods based on the ranks-ordering"."""
    ns = "e2e-tas-trainjob-ranks"
    got = await _trainjob_ranks(e2e, ns, 3, 2, {PREFERRED: BLOCK})
    assert got == _want(ns, {"0/0": 1, "0/1": 2, "1/0": 3, "1/1": 4, "2/0": 5, "2/1": 6}), got


async def trainjob_slices_two_level(e2e: E2E) -> None:
    """trainjob_test.go, It "Should place pods in podset slices with two-level scheduling based on the
    ranks-ordering"."""
    ns = "e2e-tas-trainjob-two-level"
    got = await _trainjob_ranks(e2e, ns, 2, 3, {PREFERRED: BLOCK, SLICE_REQUIRED: BLOCK, SLICE_SIZE: "3"})
    assert got == _want(ns, {"0/0": 1, "0/1": 2, "0/2": 3, "1/0": 5, "1/1": 6, "1/2": 7}), got


async def trainjob_slices_only(e2e: E2E) -> None:
    """trainjob_test.go, It "Should place pods in podset slices with slice-only scheduling based on the
    ranks-ordering"."""
    ns = "e2e-tas-trainjob-slice-only"
    got = await _trainjob_ranks(e2e, ns, 2, 3, {SLICE_REQUIRED: BLOCK, SLICE_SIZE: "3"})
    assert got == _want(ns, {"0/0": 1, "0/1": 2, "0/2": 3, "1/0": 5, "1/1": 6, "1/2": 7}), got


# -- leaderworkerset_test.go -------------------------------------------------------------------------------------------


async def lws_ranks(e2e: E2E) -> None:
    """leaderworkerset_test.go, When "creating a LeaderWorkerSet", It "should place pods based on the
    ranks-ordering": two groups of three (worker template only, a block required), each group's pods on one
    block by worker index, in either order of the groups."""
    ns = "e2e-tas-lws-ranks"
    await _tas_queues(e2e, ns, {"cpu": "2", GPU: "8"})
    template = {
        "metadata": {"annotations": {REQUIRED: BLOCK}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [_container("c", {GPU: "1"})]},
    }
    await e2e.create(
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "lws", "namespace": ns, "labels": {QUEUE_LABEL: "main"}},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": template}},
        }
    )
    await e2e.wait(
        "leaderworkerset",
        "lws",
        ns,
        lambda o: (o.get("status") or {}).get("readyReplicas") == 2,
        what="Waiting for replicas to be ready",
    )

    def rank(labels: Mapping[str, Any]) -> str:
        return f"{labels.get(LWS_GROUP_INDEX)}/{labels.get(LWS_WORKER_INDEX)}"

    got = await _placement(e2e, ns, 6, rank)
    first = {"0/0": 1, "0/1": 2, "0/2": 3, "1/0": 5, "1/1": 6, "1/2": 7}
    second = {"1/0": 1, "1/1": 2, "1/2": 3, "0/0": 5, "0/1": 6, "0/2": 7}
    assert got in (_want(ns, first), _want(ns, second)), got


STEPS: tuple[Step, ...] = (
    jobset_ranks,
    jobset_slices_two_level,
    jobset_slices_only,
    jobset_two_replicated_jobs,
    pytorch_ranks,
    mpijob_ranks,
    mpijob_launcher_as_worker_ranks,
    mpijob_grouped_ranks,
    mpijob_unknown_replica,
    appwrapper_places_pods,
    appwrapper_ranks,
    trainjob_ranks,
    trainjob_slices_two_level,
    trainjob_slices_only,
    lws_ranks,
)
