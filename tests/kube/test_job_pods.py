"""A Job in the emulator has pods, as Kubernetes' Job controller makes them, seen through the real kubectl.

The simulated kubelet (:mod:`kueue_es.sim.kubelet`) creates an unsuspended Job's pods and finishes them
with its run; the simulated controllers (:mod:`kueue_es.sim.controllers`) bind ungated pods to a Node that
fits them, run them, and collect the pods of a deleted Job. Kueue's pod webhook and the watcher leave the
pods alone: their controller is a Job.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import models, tas
from kueue_es.jobframework import pods as pod_integration
from kueue_es.jobframework import workloads
from kueue_es.services.dispatcher import ungater
from kueue_es.services.kube import client, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import controllers, emulator, kubelet
from tests.kube.test_kubectl import Kubectl, table

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: these tests run the real one"),
]

#: The annotation and label of an Indexed Job pod's completion index (batch/v1 JobCompletionIndexAnnotation).
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "controller-uid", "job-name")


@pytest.fixture
async def kubectl(cluster: emulator.ClusterEmulator, tmp_path: Path) -> Kubectl:
    return Kubectl(cluster.url, tmp_path)


@pytest.fixture
async def simulated(api: k8s_client.ApiClient) -> AsyncIterator[None]:
    """The simulated kubelet (Jobs run 1 s unless annotated) and controllers, stopped after the test."""
    watch = {"timeout_seconds": 30, "backoff_seconds": 0.05}
    tasks = [
        asyncio.create_task(kubelet.SimulatedKubelet(api, default_duration_seconds=1.0, watch_options=watch).run()),
        asyncio.create_task(
            controllers.SimulatedControllers(api, lws=False, ray=False, watch_options={"timeout_seconds": 30}).run()
        ),
    ]
    try:
        yield
    finally:
        await cancel_and_wait(tasks)


def job(name: str, *, suspend: bool = False, duration: float | None = None, **spec: Any) -> dict[str, Any]:
    """A Job manifest; ``duration``: its simulated run time (seconds); ``spec`` fields over the defaults, a
    ``template_spec`` merged into the pod template's spec and ``template_labels`` into its labels."""
    annotations = {kubelet.SIM_DURATION_ANNOTATION: str(duration)} if duration is not None else {}
    pod_spec = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
    pod_spec.update(spec.pop("template_spec", {}))
    template = {"metadata": {"labels": spec.pop("template_labels", {})}, "spec": pod_spec}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"suspend": suspend, "template": template, **spec},
    }


async def pods_of(kubectl: Kubectl, name: str) -> list[dict[str, Any]]:
    """``kubectl get pods -l job-name=NAME -o json``: the Job's pods, by name."""
    out = json.loads(await kubectl.ok("get", "pods", "-l", f"job-name={name}", "-o", "json"))
    return sorted(out["items"], key=lambda pod: pod["metadata"]["name"])


async def until(check: Callable[[], Any], *, timeout: float = 10.0) -> Any:
    """Call the coroutine function ``check`` every 0.1 s until it returns something truthy; return that."""
    async with asyncio.timeout(timeout):
        while not (found := await check()):
            await asyncio.sleep(0.1)
    return found


async def job_status(api: k8s_client.ApiClient, name: str) -> dict[str, Any]:
    return (await client.get_object(api, resources.JOBS, namespace="default", name=name)).get("status") or {}


def is_complete(status: dict[str, Any]) -> bool:
    return any(c["type"] == "Complete" and c["status"] == "True" for c in status.get("conditions") or [])


def phases(pods: list[dict[str, Any]]) -> list[str]:
    return [pod["status"].get("phase", "") for pod in pods]


@pytest.mark.usefixtures("simulated")
async def test_a_running_job_has_parallelism_pods_that_succeed_before_it_completes(
    kubectl: Kubectl, api: k8s_client.ApiClient
) -> None:
    """An unsuspended Job gets ``parallelism`` pods ``<job>-<5 chars>`` with the Job controller's labels and a
    controller owner reference; they run and are Ready while the Job counts them active and ready, then
    succeed (containers terminated, reason Completed) and the Job is Complete with as many succeeded."""
    created = await client.create_object(
        api, resources.JOBS, namespace="default", body=job("sample", duration=6, parallelism=3, completions=3)
    )  # 6 s: the checks of the running pods (three kubectl runs) must fit in the run on a loaded machine
    uid = created["metadata"]["uid"]

    async def running() -> list[dict[str, Any]] | None:
        pods = await pods_of(kubectl, "sample")
        started = (await job_status(api, "sample")).get("startTime")  # written once the pods are created
        return pods if started and len(pods) == 3 and phases(pods) == ["Running"] * 3 else None

    pods = await until(running)
    status = await job_status(api, "sample")
    assert status["active"] == status["ready"] == 3 and not is_complete(status)
    for pod in pods:
        meta = pod["metadata"]
        assert meta["name"].startswith("sample-") and len(meta["name"]) == len("sample-") + 5
        assert {key: meta["labels"][key] for key in JOB_LABELS} == {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": "sample",
            "controller-uid": uid,
            "job-name": "sample",
        }
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "sample",
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"] == "True"
    rows = table(await kubectl.ok("get", "pods"))
    assert rows[0][:3] == ["NAME", "READY", "STATUS"]
    assert sorted((row[1], row[2]) for row in rows[1:]) == [("1/1", "Running")] * 3

    async def done() -> list[dict[str, Any]] | None:
        return await pods_of(kubectl, "sample") if is_complete(await job_status(api, "sample")) else None

    pods = await until(done)
    assert phases(pods) == ["Succeeded"] * 3
    for pod in pods:
        (container,) = pod["status"]["containerStatuses"]
        assert container["state"]["terminated"]["reason"] == "Completed"
        assert container["state"]["terminated"]["exitCode"] == 0
    status = await job_status(api, "sample")
    assert status["succeeded"] == 3 and "active" not in status  # JobStatus.active is omitempty
    rows = table(await kubectl.ok("get", "pods"))
    assert sorted((row[1], row[2]) for row in rows[1:]) == [("0/1", "Completed")] * 3


@pytest.mark.usefixtures("simulated")
async def test_an_indexed_job_names_and_labels_its_pods_by_completion_index_and_runs_them_in_waves(
    kubectl: Kubectl, api: k8s_client.ApiClient
) -> None:
    """Indexed, completions 3 and parallelism 2: pods ``<job>-<index>-<5 chars>`` for indexes 0 and 1 (capped at
    parallelism), with the completion index annotation, label and hostname; once they succeed, index 2 runs
    alone (capped by the completions left); the Job completes with 3 succeeded pods, one per index, and
    ``completedIndexes`` 0-2 (``kubectl describe job``)."""
    await client.create_object(
        api,
        resources.JOBS,
        namespace="default",
        body=job("indexed", duration=1.6, parallelism=2, completions=3, completionMode="Indexed"),
    )

    async def first_wave() -> list[dict[str, Any]] | None:
        pods = await pods_of(kubectl, "indexed")
        return pods if len(pods) == 2 and phases(pods) == ["Running"] * 2 else None

    pods = await until(first_wave)
    for index, pod in enumerate(pods):
        meta = pod["metadata"]
        assert meta["name"].startswith(f"indexed-{index}-") and len(meta["name"]) == len(f"indexed-{index}-") + 5
        assert meta["annotations"][JOB_COMPLETION_INDEX] == str(index)
        assert meta["labels"][JOB_COMPLETION_INDEX] == str(index)
        assert pod["spec"]["hostname"] == f"indexed-{index}"

    async def done() -> list[dict[str, Any]] | None:
        return await pods_of(kubectl, "indexed") if is_complete(await job_status(api, "indexed")) else None

    # the second wave is read from the pods' times, not caught while it runs (a loaded machine may poll past it)
    pods = await until(done)
    assert phases(pods) == ["Succeeded"] * 3
    assert pods[2]["metadata"]["name"].startswith("indexed-2-")
    first_wave_ended = max(_finished_at(pod) for pod in pods[:2])
    assert pods[2]["metadata"]["creationTimestamp"] >= first_wave_ended  # RFC 3339 in UTC: ordered as text
    assert [pod["metadata"]["labels"][JOB_COMPLETION_INDEX] for pod in pods] == ["0", "1", "2"]
    status = await job_status(api, "indexed")
    assert status["succeeded"] == 3 and status["completedIndexes"] == "0-2"
    assert "Completed Indexes:  0-2" in await kubectl.ok("describe", "job", "indexed")


@pytest.mark.parametrize(("count", "want"), [(0, ""), (1, "0"), (2, "0,1"), (3, "0-2"), (10, "0-9")])
def test_completed_indexes_read_as_the_job_controller_writes_them(count: int, want: str) -> None:
    """An Indexed Job's ``completedIndexes``: the Job controller's intervals, two neighbours by a comma."""
    assert kubelet.completed_indexes(count) == want


@pytest.mark.usefixtures("simulated")
async def test_suspending_a_job_deletes_its_pods_and_resuming_makes_new_ones(
    kubectl: Kubectl, api: k8s_client.ApiClient
) -> None:
    """Kueue evicts a Job by suspending it: its pods are deleted and its status counts none; unsuspended again
    it gets new pods."""
    await client.create_object(
        api, resources.JOBS, namespace="default", body=job("evicted", duration=30, parallelism=2)
    )

    async def running() -> list[str] | None:
        pods = await pods_of(kubectl, "evicted")
        return [p["metadata"]["name"] for p in pods] if phases(pods) == ["Running"] * 2 else None

    first = await until(running)
    await kubectl.ok("patch", "job", "evicted", "--type=merge", "-p", '{"spec":{"suspend":true}}')

    async def gone() -> bool:  # the pods are deleted first, then the status written
        suspended = any(c["type"] == "Suspended" for c in (await job_status(api, "evicted")).get("conditions") or [])
        return suspended and not await pods_of(kubectl, "evicted")

    await until(gone)
    status = await job_status(api, "evicted")
    assert "active" not in status and not status.get("startTime")
    await kubectl.ok("patch", "job", "evicted", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    second = await until(running)
    assert not set(first) & set(second)


@pytest.mark.usefixtures("simulated")
async def test_a_suspended_job_has_no_pods_and_a_deleted_job_takes_its_pods(
    kubectl: Kubectl, api: k8s_client.ApiClient
) -> None:
    """A Job created suspended (as Kueue's webhook stores a queued one) has no pods; ``kubectl delete job``
    takes the pods of a running one with it (the garbage collector)."""
    await client.create_object(api, resources.JOBS, namespace="default", body=job("held", suspend=True))
    await client.create_object(api, resources.JOBS, namespace="default", body=job("doomed", duration=30))

    async def running() -> bool:
        return phases(await pods_of(kubectl, "doomed")) == ["Running"]

    await until(running)
    assert await pods_of(kubectl, "held") == []
    await kubectl.ok("delete", "job", "doomed")

    async def gone() -> bool:
        return not await pods_of(kubectl, "doomed")

    await until(gone)


@pytest.mark.usefixtures("simulated")
async def test_pods_are_bound_to_a_node_their_node_selector_matches(
    kubectl: Kubectl, api: k8s_client.ApiClient
) -> None:
    """With Nodes, each pod is bound to one that matches its nodeSelector (the flavor's labels Kueue put on
    the template) and tolerates its taints; ``kubectl get pods -o wide`` shows it. Pods spread over the
    fitting nodes."""
    nodes = {
        "cpu-a": {"flavor": "cpu"},
        "cpu-b": {"flavor": "cpu"},
        "gpu-a": {"flavor": "gpu"},
        "tainted": {"flavor": "gpu"},
    }
    for name, labels in nodes.items():
        spec = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]} if name == "tainted" else {}
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec}
        await client.create_object(api, resources.NODES, body=body)
    await client.create_object(
        api,
        resources.JOBS,
        namespace="default",
        body=job("placed", duration=30, parallelism=2, template_spec={"nodeSelector": {"flavor": "cpu"}}),
    )
    await client.create_object(
        api,
        resources.JOBS,
        namespace="default",
        body=job("gpu", duration=30, parallelism=2, template_spec={"nodeSelector": {"flavor": "gpu"}}),
    )

    async def running() -> bool:
        return phases(await pods_of(kubectl, "placed") + await pods_of(kubectl, "gpu")) == ["Running"] * 4

    await until(running)
    rows = table(await kubectl.ok("get", "pods", "-o", "wide"))
    column = rows[0].index("NODE")
    placed = {row[0]: row[column] for row in rows[1:]}
    assert sorted(node for name, node in placed.items() if name.startswith("placed-")) == ["cpu-a", "cpu-b"]
    assert [node for name, node in placed.items() if name.startswith("gpu-")] == ["gpu-a", "gpu-a"]


def sized_node(name: str, *, cpu: str) -> dict[str, Any]:
    """A Node whose kubelet reported ``cpu`` CPUs, 16Gi and 110 pods allocatable."""
    allocatable = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": allocatable, "allocatable": allocatable},
    }


@pytest.mark.usefixtures("simulated")
async def test_a_pod_no_node_has_room_for_stays_pending_with_one_event_until_a_node_has_room(
    kubectl: Kubectl, api: k8s_client.ApiClient
) -> None:
    """A pod asking for 100 CPUs on a cluster of 8-CPU nodes is not bound: it stays Pending with kube-scheduler's
    PodScheduled False Unschedulable condition and one FailedScheduling Event, its Job counts it not ready and
    does not complete; once a Node with room joins, the pod is bound there, runs, and the Job completes."""
    for name in ("worker1", "worker2"):
        await client.create_object(api, resources.NODES, body=sized_node(name, cpu="8"))
    requests = {"requests": {"cpu": "100"}}
    containers = [{"name": "c", "image": "busybox", "resources": requests}]
    await client.create_object(
        api, resources.JOBS, namespace="default", body=job("big", duration=1, template_spec={"containers": containers})
    )
    message = (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )

    async def unschedulable() -> dict[str, Any] | None:
        pods = await pods_of(kubectl, "big")
        conditions = pods[0]["status"].get("conditions") or [] if pods else []
        found = [c for c in conditions if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"]
        return pods[0] if found else None

    pending = await until(unschedulable)
    condition = next(c for c in pending["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (pending["status"]["phase"], condition["status"], condition["message"]) == ("Pending", "False", message)
    assert not pending["spec"].get("nodeName")
    # longer than the Job's 1 s: the pod never ran, so the Job neither completes nor counts it ready
    await asyncio.sleep(2.5)
    status = await job_status(api, "big")
    assert not is_complete(status) and status.get("ready") == 0 and status.get("active") == 1, status
    rows = table(await kubectl.ok("get", "pods", "-l", "job-name=big"))
    assert rows[1][2] == "Pending"
    events = json.loads(await kubectl.ok("get", "events", "--field-selector", "reason=FailedScheduling", "-o", "json"))
    assert [
        (e["involvedObject"]["name"], e["type"], e["message"], e["source"]["component"]) for e in events["items"]
    ] == [(pending["metadata"]["name"], "Warning", message, "default-scheduler")]

    await client.create_object(api, resources.NODES, body=sized_node("big-node", cpu="128"))

    async def completed() -> dict[str, Any] | None:
        status = await job_status(api, "big")
        return status if is_complete(status) else None

    await until(completed)
    (finished,) = await pods_of(kubectl, "big")
    assert (finished["spec"]["nodeName"], finished["status"]["phase"]) == ("big-node", "Succeeded")
    events = json.loads(await kubectl.ok("get", "events", "--field-selector", "reason=FailedScheduling", "-o", "json"))
    assert len(events["items"]) == 1


@pytest.mark.usefixtures("simulated")
async def test_pods_take_turns_on_a_node_with_room_for_one_at_a_time(
    kubectl: Kubectl, api: k8s_client.ApiClient
) -> None:
    """Two pods of 6 CPUs on one 8-CPU node: one runs, the other waits Pending (Insufficient cpu) until the first
    succeeded and freed its CPUs, then runs on the same node; the Job completes after both."""
    await client.create_object(api, resources.NODES, body=sized_node("only", cpu="8"))
    containers = [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "6"}}}]
    body = job("pair", duration=1, parallelism=2, completions=2, template_spec={"containers": containers})
    await client.create_object(api, resources.JOBS, namespace="default", body=body)

    async def one_waiting() -> list[str] | None:
        found = sorted(phases(await pods_of(kubectl, "pair")))
        return found if found == ["Pending", "Running"] else None

    await until(one_waiting)
    status = await job_status(api, "pair")
    assert status.get("ready") == 1, status

    async def one_succeeded() -> dict[str, Any] | None:
        # the Job controller counts a pod that finished in status.succeeded at once, so ready + succeeded stays
        # 2 while the second pod runs (Kueue's Job PodsReady adds both: no WaitForRecovery on a healthy Job)
        status = await job_status(api, "pair")
        return status if status.get("succeeded") == 1 and status.get("ready") == 1 else None

    assert not is_complete(await until(one_succeeded))

    async def completed() -> dict[str, Any] | None:
        status = await job_status(api, "pair")
        return status if is_complete(status) else None

    await until(completed)
    pods = await pods_of(kubectl, "pair")
    assert [(p["spec"].get("nodeName"), p["status"]["phase"]) for p in pods] == [("only", "Succeeded")] * 2


@pytest.mark.usefixtures("simulated")
async def test_topology_gated_pods_wait_and_then_run_on_the_node_the_ungater_chose(
    kubectl: Kubectl, api: k8s_client.ApiClient
) -> None:
    """A TAS Job's pods carry the template's ``kueue.x-k8s.io/topology`` gate and stay Pending
    (SchedulingGated); Kueue's ungater plan (:func:`ungater.plan_pod_set`) over the pods as listed gives
    each a domain by its completion index, and once the gate is off and the domain's nodeSelector on, each runs on its node."""
    for name in ("node-1", "node-2"):
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        }
        await client.create_object(api, resources.NODES, body=body)
    gates = [{"name": ungater.TOPOLOGY_GATE}]
    await client.create_object(
        api,
        resources.JOBS,
        namespace="default",
        body=job(
            "tas",
            duration=30,
            parallelism=2,
            completions=2,
            completionMode="Indexed",
            template_spec={"schedulingGates": gates},
        ),
    )

    async def gated() -> list[dict[str, Any]] | None:
        pods = await pods_of(kubectl, "tas")
        return pods if len(pods) == 2 else None

    pods = await until(gated)
    # a Job without the gate, created after: once its pod runs, the controllers had their pass over the gated ones
    await client.create_object(api, resources.JOBS, namespace="default", body=job("marker", duration=30))

    async def marker_running() -> bool:
        return phases(await pods_of(kubectl, "marker")) == ["Running"]

    await until(marker_running)
    rows = table(await kubectl.ok("get", "pods", "-l", "job-name=tas"))
    assert sorted(row[2] for row in rows[1:]) == ["SchedulingGated"] * 2
    domains = tuple(tas.DomainAssignment(values=(host,), count=1) for host in ("node-2", "node-1"))
    assignment = tas.Assignment(levels=(tas.HOSTNAME_LABEL,), domains=domains)
    request = models.PodSetTopologyRequest(required="kubernetes.io/hostname", pod_index_label=JOB_COMPLETION_INDEX)
    plan = ungater.plan_pod_set(
        ungater.PodSetTopology(name="main", count=2, assignment=assignment, request=request), pods
    )
    assert sorted(u.name for u in plan) == sorted(p["metadata"]["name"] for p in pods)
    for ungate in plan:
        patch = {"spec": {"schedulingGates": None, "nodeSelector": ungate.node_selector}}
        await client.patch_object(api, resources.PODS, namespace="default", name=ungate.name, patch=patch)

    async def running() -> bool:
        return phases(await pods_of(kubectl, "tas")) == ["Running"] * 2

    await until(running)
    rows = table(await kubectl.ok("get", "pods", "-l", "job-name=tas", "-o", "wide"))
    column = rows[0].index("NODE")
    placed = {row[0]: row[column] for row in rows[1:]}
    assert placed == {ungate.name: ungate.node_selector[tas.HOSTNAME_LABEL] for ungate in plan}
    # rank mode: completion index 0 gets the assignment's first domain, index 1 the second
    assert sorted(placed.items()) == [(pods[0]["metadata"]["name"], "node-2"), (pods[1]["metadata"]["name"], "node-1")]


async def test_kueues_pod_webhook_and_watcher_leave_a_jobs_pods_alone(
    kubectl: Kubectl, api: k8s_client.ApiClient, cluster: emulator.ClusterEmulator
) -> None:
    """The pods of a Job whose template even names a queue are not Kueue's pod integration's: the pod webhook
    (played by the emulator) neither gates nor marks them managed, so the watcher makes no Workload for them
    (their controller is a Job: Kueue pod_webhook.go skips pods whose owner Kueue manages)."""
    assert emulator.gate_queued_pods in cluster.create_hooks
    watch = {"timeout_seconds": 30, "backoff_seconds": 0.05}
    tasks = [
        asyncio.create_task(kubelet.SimulatedKubelet(api, default_duration_seconds=30, watch_options=watch).run()),
        asyncio.create_task(controllers.SimulatedControllers(api, lws=False, ray=False).run()),
    ]
    try:
        queued = job("queued", template_labels={workloads.QUEUE_LABEL: "user-queue"})
        await client.create_object(api, resources.JOBS, namespace="default", body=queued)
        await kubectl.ok("patch", "job", "queued", "--type=merge", "-p", '{"spec":{"suspend":false}}')

        async def running() -> list[dict[str, Any]] | None:
            pods = await pods_of(kubectl, "queued")
            return pods if phases(pods) == ["Running"] else None

        (pod,) = await until(running)
    finally:
        await cancel_and_wait(tasks)
    assert workloads.MANAGED_LABEL not in pod["metadata"]["labels"]
    assert not pod["spec"].get("schedulingGates")
    assert not pod_integration.is_managed(pod, workloads.Context(manage_jobs_without_queue_name=True))


@pytest.mark.usefixtures("simulated")
async def test_a_not_ready_node_gets_no_new_pod(kubectl: Kubectl, api: k8s_client.ApiClient) -> None:
    """The node lifecycle controller taints a NotReady node node.kubernetes.io/not-ready:NoSchedule, so
    kube-scheduler binds no new pod there (a fresh user found the emulated scheduler did: Kueue's TAS then saw
    the replacement pods running on the failed node and never replaced it)."""
    down = sized_node("down", cpu="8")
    down["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    await client.create_object(api, resources.NODES, body=down)
    await client.create_object(api, resources.JOBS, namespace="default", body=job("waits", duration=1))

    async def refused() -> dict[str, Any] | None:
        pods = await pods_of(kubectl, "waits")
        conditions = pods[0]["status"].get("conditions") or [] if pods else []
        return next((c for c in conditions if c.get("reason") == "Unschedulable"), None)

    condition = await until(refused)
    assert "1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }" in condition["message"]
    up = sized_node("up", cpu="8")
    up["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    await client.create_object(api, resources.NODES, body=up)

    async def bound() -> str | None:
        pods = await pods_of(kubectl, "waits")
        return pods[0]["spec"].get("nodeName") if pods else None

    assert await until(bound) == "up"


def _finished_at(pod: dict[str, Any]) -> str:
    """When the pod's one container terminated (RFC 3339)."""
    [container] = pod["status"]["containerStatuses"]
    return str(container["state"]["terminated"]["finishedAt"])
