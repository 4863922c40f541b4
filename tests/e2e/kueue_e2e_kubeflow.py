"""The steps of Kueue's test/e2e/singlecluster/extended/ pytorchjob_test.go (Describe "PyTorch integration"),
jaxjob_test.go ("JAX integration"), mpijob_test.go ("MPIJob") and trainjob_test.go ("TrainJob"), run by
tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo --keep`` once the Kubeflow training-operator, MPI
operator and Trainer CRDs and the Trainer's torch-distributed ClusterTrainingRuntime are installed (as Kueue's
extended suite installs those operators with their runtimes); the simulated operators of
:mod:`kueue_es.sim.training` then make the jobs' pods and a TrainJob's JobSet, and report their status.

Each case is a step with its own namespace, flavors and ClusterQueue (its Describe's or When's BeforeEach).

Kueue's ``util.WaitForActivePodsAndTerminate`` (the PyTorch and JAX cases) execs into each running pod to ask
agnhost's ``netexec`` to exit 0; the emulated cluster runs no containers, so the step writes what the kubelet
then writes on the pod's status (phase ``Succeeded``), through ``kubectl patch --subresource=status``. The
"exit fast" jobs of the HoldAndDrain cases (mpijob_test.go and trainjob_test.go's "Should allow to suspend")
run until stopped here, as in kueue_e2e_jobset.py: on the emulator, whose pods start at once, exit fast
outruns the ClusterQueue's stop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import (
    E2E,
    FOREVER,
    IMAGE,
    QUEUE_LABEL,
    Step,
    cluster_queue,
    flavor,
    is_true,
    local_queue,
    namespace,
    run_for,
)

ON_DEMAND = {"instance-type": "on-demand"}
SPOT = {"instance-type": "spot"}
WAIT_FOR_DELETION = ["netexec"]  # util.BehaviorWaitForDeletion
EXIT_FAST = ["entrypoint-tester"]  # util.BehaviorExitFast
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"  # testingtrainjob.KueueRuntimePatchManager


def _template(
    container: str,
    requests: Mapping[str, str],
    args: list[str],
    *,
    limits: Mapping[str, str] | None = None,
    grace: int | None = None,
) -> dict[str, Any]:
    """A replica's pod template as the Kubeflow wrappers' defaults give it: one container, restartPolicy Never."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": container,
                "image": IMAGE,
                "args": args,
                "resources": {"requests": dict(requests), **({"limits": dict(limits)} if limits else {})},
            }
        ],
    }
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"spec": spec}


def pytorchjob(name: str, ns: str, *, queue: str) -> dict[str, Any]:
    """pytorchjobtesting.MakePyTorchJob(name, ns).Queue(queue).Suspend(false).PyTorchReplicaSpecsOnlyMasterDefault()
    .Image(Master, agnhost, wait for deletion).Request(Master, cpu 1, memory 200Mi).TerminationGracePeriod(1)."""
    template = _template("pytorch", {"cpu": "1", "memory": "200Mi"}, WAIT_FOR_DELETION, grace=1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}, "annotations": run_for(FOREVER)},
        "spec": {
            "runPolicy": {"suspend": False},
            "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template}},
        },
    }


def jaxjob(name: str, ns: str, *, queue: str) -> dict[str, Any]:
    """jaxjobtesting.MakeJAXJob(name, ns).Label(queue-name, queue).Suspend(false).JAXReplicaSpecsDefault()
    .TerminationGracePeriod(Worker, 1).Parallelism(Worker, 2).Image(Worker, agnhost, wait for deletion)
    .Request(Worker, cpu 1, memory 200Mi)."""
    template = _template("jax", {"cpu": "1", "memory": "200Mi"}, WAIT_FOR_DELETION, grace=1)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "JAXJob",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}, "annotations": run_for(FOREVER)},
        "spec": {"runPolicy": {"suspend": False}, "jaxReplicaSpecs": {"Worker": {"replicas": 2, "template": template}}},
    }


def mpijob(name: str, ns: str, *, launcher_cpu: str, seconds: float | None) -> dict[str, Any]:
    """testingmpijob.MakeMPIJob(name, ns).Queue("main").MPIJobReplicaSpecs(Launcher 1, Worker 1: agnhost)
    .RequestAndLimit(Launcher, cpu launcher_cpu).RequestAndLimit(Worker, cpu 100m): created suspended."""

    def replica(cpu: str) -> dict[str, Any]:
        return {"replicas": 1, "template": _template("mpijob", {"cpu": cpu}, EXIT_FAST, limits={"cpu": cpu})}

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "main"}, "annotations": run_for(seconds)},
        "spec": {
            "runPolicy": {"suspend": True},
            "mpiReplicaSpecs": {"Launcher": replica(launcher_cpu), "Worker": replica("100m")},
        },
    }


def trainjob(name: str, ns: str, *, args: list[str], seconds: float | None) -> dict[str, Any]:
    """testingtrainjob.MakeTrainJob(name, ns).RuntimeRefName("torch-distributed").Queue("main")
    .TrainerImage(agnhost, ["/agnhost"], args).TrainerRequest(cpu 500m).TrainerRequest(memory 200Mi):
    created suspended."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "main"}, "annotations": run_for(seconds)},
        "spec": {
            "suspend": True,
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "image": IMAGE,
                "command": ["/agnhost"],
                "args": args,
                "resourcesPerNode": {"requests": {"cpu": "500m", "memory": "200Mi"}},
            },
        },
    }


async def _active(e2e: E2E, cq: str, ns: str, lq: str) -> None:
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    await e2e.wait("localqueue", lq, ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {ns}/{lq} active")


async def _prefixed_queues(e2e: E2E, ns: str, prefix: str) -> str:
    """The BeforeEach of pytorchjob_test.go and jaxjob_test.go: flavor ``<prefix>-rf-NS``, ClusterQueue
    ``<prefix>-cq-NS`` of 5 CPU and 10Gi preempting lower priorities, LocalQueue ``<prefix>-lq-NS``."""
    rf, cq, lq = f"{prefix}-rf-{ns}", f"{prefix}-cq-{ns}", f"{prefix}-lq-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(rf),
        cluster_queue(cq, {rf: {"cpu": "5", "memory": "10Gi"}}, preemption="LowerPriority"),
        local_queue(lq, ns, cq),
    )
    await _active(e2e, cq, ns, lq)
    return lq


async def _default_queues(e2e: E2E, ns: str) -> str:
    """The "Creating a ..." When's BeforeEach: flavor ``default-NS``, ClusterQueue ``cluster-queue-NS`` of 2 CPU
    and 2G, LocalQueue ``main``. Returns the ClusterQueue's name."""
    cq = f"cluster-queue-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(f"default-{ns}"),
        cluster_queue(cq, {f"default-{ns}": {"cpu": "2", "memory": "2G"}}),
        local_queue("main", ns, cq),
    )
    await _active(e2e, cq, ns, "main")
    return cq


async def _node_selector_queues(e2e: E2E, ns: str) -> str:
    """The "Using resource flavors with node selectors" When's BeforeEach: flavors ``on-demand-NS`` and
    ``spot-NS`` of 1 CPU and 1Gi each, ClusterQueue ``cluster-queue-NS`` preempting lower priorities, LocalQueue
    ``main``. Returns the ClusterQueue's name."""
    cq = f"cluster-queue-{ns}"
    quotas = {"cpu": "1", "memory": "1Gi"}
    await e2e.apply(
        namespace(ns),
        flavor(f"on-demand-{ns}", node_labels=ON_DEMAND),
        flavor(f"spot-{ns}", node_labels=SPOT),
        cluster_queue(cq, {f"on-demand-{ns}": quotas, f"spot-{ns}": quotas}, preemption="LowerPriority"),
        local_queue("main", ns, cq),
    )
    await _active(e2e, cq, ns, "main")
    return cq


async def _hold_and_drain(e2e: E2E, cq: str) -> None:
    """ "Stopping the ClusterQueue to make the ... be stopped and suspended"."""
    await e2e.kubectl.ok("patch", "clusterqueue", cq, "--type=merge", "-p", '{"spec":{"stopPolicy":"HoldAndDrain"}}')


async def _terminate_active_pods(e2e: E2E, ns: str, count: int) -> None:
    """util.WaitForActivePodsAndTerminate(ns, count, exit code 0): ``count`` running pods, each then written
    Succeeded as the kubelet does once its container exited 0 (module docstring)."""

    async def running() -> list[dict[str, Any]] | None:
        pods = [p for p in await e2e.list("pods", ns) if (p.get("status") or {}).get("phase") == "Running"]
        return pods if len(pods) == count else None

    for pod in await eventually(running, what=f"{count} running pods in {ns}"):
        await e2e.status_patch("pod", pod["metadata"]["name"], ns, {"phase": "Succeeded"})


async def _runs_to_the_end(e2e: E2E, kind: str, name: str, ns: str, replica: str, count: int) -> None:
    """The body of pytorchjob_test.go's and jaxjob_test.go's "should admit group with leader only"."""

    def running(job: dict[str, Any]) -> bool:
        statuses = (job.get("status") or {}).get("replicaStatuses") or {}
        return (statuses.get(replica) or {}).get("active") == count and is_true(job, "Running")

    # Waiting for replicas to be ready
    await e2e.wait(kind, name, ns, running, what=f"{count} active {replica} replicas, Running")
    # Check workload is created, and admitted
    workload = await e2e.wait_workload_of(kind, name, ns)
    wl = workload["metadata"]["name"]
    await e2e.wait("workload", wl, ns, lambda w: is_true(w, "Admitted"), what="the Workload admitted")
    # Check workload is finished
    await _terminate_active_pods(e2e, ns, count)
    await e2e.wait("workload", wl, ns, lambda w: is_true(w, "Finished"), what="the Workload finished")
    # Delete the job; check workload is deleted
    await e2e.kubectl.ok("delete", kind, name, "-n", ns)
    await e2e.wait_gone(kind, name, ns)
    await e2e.wait_gone("workload", wl, ns)


async def pytorch_admits_leader_only(e2e: E2E) -> None:
    """pytorchjob_test.go, Describe "PyTorch integration", When "PyTorch created", It "should admit group with
    leader only"."""
    ns = "pytorch-e2e-leader"
    lq = await _prefixed_queues(e2e, ns, "pytorch")
    await e2e.create(pytorchjob("pytorch-simple", ns, queue=lq))
    await _runs_to_the_end(e2e, "pytorchjob", "pytorch-simple", ns, "Master", 1)


async def jax_admits_leader_only(e2e: E2E) -> None:
    """jaxjob_test.go, Describe "JAX integration", When "JAX created", It "should admit group with leader only"."""
    ns = "jax-e2e-leader"
    lq = await _prefixed_queues(e2e, ns, "jax")
    await e2e.create(jaxjob("jax-simple", ns, queue=lq))
    await _runs_to_the_end(e2e, "jaxjob", "jax-simple", ns, "Worker", 2)


async def mpijob_runs_if_admitted(e2e: E2E) -> None:
    """mpijob_test.go, Describe "MPIJob", When "Creating a MPIJob", It "Should run a MPIJob if admitted"."""
    ns = "e2e-mpijob-run"
    await _default_queues(e2e, ns)
    await e2e.create(mpijob("mpijob", ns, launcher_cpu="500m", seconds=None))
    workload = await e2e.wait_workload_of("mpijob", "mpijob", ns)
    await e2e.wait(
        "workload", workload["metadata"]["name"], ns, lambda w: is_true(w, "Finished"), what="the MPIJob finished"
    )
    await e2e.kubectl.ok("delete", "mpijobs", "--all", "-n", ns)


async def mpijob_suspended_by_hold_and_drain(e2e: E2E) -> None:
    """mpijob_test.go, Describe "MPIJob", When "Using resource flavors with node selectors", It "Should allow to
    suspend a MPIJob when the ClusterQueue is stopped with the HoldAndDrain policy"."""
    ns = "e2e-mpijob-stop"
    cq = await _node_selector_queues(e2e, ns)
    await e2e.create(mpijob("mpijob-suspend", ns, launcher_cpu="100m", seconds=FOREVER))
    started = await e2e.wait(
        "mpijob",
        "mpijob-suspend",
        ns,
        lambda j: j["spec"]["runPolicy"].get("suspend") is False,
        what="the MPIJob unsuspended",
    )
    launcher = started["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    assert launcher.get("nodeSelector") == ON_DEMAND, launcher
    await _hold_and_drain(e2e, cq)
    await e2e.wait(
        "mpijob",
        "mpijob-suspend",
        ns,
        lambda j: j["spec"]["runPolicy"].get("suspend") is True,
        what="the MPIJob suspended",
    )
    await e2e.kubectl.ok("delete", "mpijobs", "--all", "-n", ns)


async def _trainjob_admitted_and_started(e2e: E2E, ns: str) -> tuple[str, dict[str, Any]]:
    """ "Ensuring that a workload is created and the job admitted", "Waiting for the trainjob to be
    unsuspended". Returns the Workload's name and the started TrainJob."""
    workload = await e2e.wait_workload_of("trainjob", "trainjob-test", ns)
    wl = workload["metadata"]["name"]
    await e2e.wait("workload", wl, ns, lambda w: is_true(w, "Admitted"), what="the TrainJob's Workload admitted")
    started = await e2e.wait(
        "trainjob", "trainjob-test", ns, lambda j: j["spec"].get("suspend") is False, what="the TrainJob unsuspended"
    )
    return wl, started


async def trainjob_runs_if_admitted(e2e: E2E) -> None:
    """trainjob_test.go, Describe "TrainJob", When "Creating a TrainJob", It "Should run a TrainJob if admitted"."""
    ns = "e2e-trainjob-run"
    await _default_queues(e2e, ns)
    await e2e.create(trainjob("trainjob-test", ns, args=EXIT_FAST, seconds=None))
    wl, _ = await _trainjob_admitted_and_started(e2e, ns)
    await e2e.wait("trainjob", "trainjob-test", ns, lambda j: is_true(j, "Complete"), what="the TrainJob complete")
    await e2e.wait("workload", wl, ns, lambda w: is_true(w, "Finished"), what="the TrainJob's Workload finished")
    await e2e.kubectl.ok("delete", "trainjobs", "--all", "-n", ns)


async def trainjob_suspended_with_injected_node_selector(e2e: E2E) -> None:
    """trainjob_test.go, Describe "TrainJob", When "Using resource flavors with node selectors", It "Should allow
    to suspend a TrainJob when injected nodeSelector"."""
    ns = "e2e-trainjob-stop"
    cq = await _node_selector_queues(e2e, ns)
    await e2e.create(trainjob("trainjob-test", ns, args=WAIT_FOR_DELETION, seconds=FOREVER))
    _, started = await _trainjob_admitted_and_started(e2e, ns)
    # Verify that the trainjob has a runtime patch from kueue, with the flavor's nodeSelector
    patches = [p for p in started["spec"].get("runtimePatches") or [] if p.get("manager") == KUEUE_PATCH_MANAGER]
    assert len(patches) == 1, started["spec"]
    replicated = patches[0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert len(replicated) == 1, replicated
    assert replicated[0]["template"]["spec"]["template"]["spec"]["nodeSelector"] == ON_DEMAND, replicated
    await _hold_and_drain(e2e, cq)
    await e2e.wait(
        "trainjob", "trainjob-test", ns, lambda j: j["spec"].get("suspend") is True, what="the TrainJob suspended"
    )
    await e2e.kubectl.ok("delete", "trainjobs", "--all", "-n", ns)


STEPS: list[Step] = [
    pytorch_admits_leader_only,
    jax_admits_leader_only,
    mpijob_runs_if_admitted,
    mpijob_suspended_by_hold_and_drain,
    trainjob_runs_if_admitted,
    trainjob_suspended_with_injected_node_selector,
]
