"""Pods as a real API server stores them on create, read back with the real kubectl.

kube-apiserver's create strategy writes what no request sends: a Pod's ``status`` (phase Pending, its QoS
class, and PodScheduled False ``SchedulingGated`` while it has scheduling gates, which ``kubectl get pods``
prints as its STATUS). The emulator must match, as users run kubectl against it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import emulator, strategies
from kueue_es.sim.controllers import SimulatedControllers
from tests.kube.test_kubectl import Kubectl, table

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: these tests run the real one"),
]

GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


@pytest.fixture
async def kubectl(cluster: emulator.ClusterEmulator, tmp_path: Path) -> Kubectl:
    return Kubectl(cluster.url, tmp_path)


def pod(name: str, *, labels: dict[str, str] | None = None, resources: dict[str, Any] | None = None) -> str:
    """A one-container pod manifest (JSON, for kubectl's stdin)."""
    container = {"name": "c", "image": "busybox", "resources": resources or {}}
    metadata: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels or {}}
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}}
    return json.dumps(body)


async def test_a_pod_kueue_gates_reads_back_pending_and_scheduling_gated(kubectl: Kubectl) -> None:
    """A pod naming a queue gets Kueue's two scheduling gates from its webhook, then from the API server phase
    Pending, its QoS class and PodScheduled False SchedulingGated (at its creation time, no probe time), and
    `kubectl get pods` prints STATUS SchedulingGated. A pod nobody gates is Pending with no condition; a pod
    limiting cpu and memory is Guaranteed. Before, such pods had no status at all."""
    queued = pod("queued", labels={"kueue.x-k8s.io/queue-name": "user-queue"}, resources={"requests": {"cpu": "1"}})
    await kubectl.ok("create", "-f", "-", stdin=queued)
    await kubectl.ok("create", "-f", "-", stdin=pod("plain"))
    limited = {"limits": {"cpu": "500m", "memory": "1Gi"}}
    await kubectl.ok("create", "-f", "-", stdin=pod("sized", resources=limited))
    stored = json.loads(await kubectl.ok("get", "pod", "queued", "-o", "json"))
    assert [g["name"] for g in stored["spec"]["schedulingGates"]] == [
        "kueue.x-k8s.io/admission",
        "kueue.x-k8s.io/topology",
    ]
    assert stored["status"] == {
        "phase": "Pending",
        "qosClass": "Burstable",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": stored["metadata"]["creationTimestamp"],
                "reason": "SchedulingGated",
                "message": GATED_MESSAGE,
            }
        ],
    }
    plain = json.loads(await kubectl.ok("get", "pod", "plain", "-o", "json"))
    assert plain["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert await kubectl.ok("get", "pod", "sized", "-o", "jsonpath={.status.qosClass}") == "Guaranteed"
    rows = table(await kubectl.ok("get", "pods"))
    assert [row[:3] for row in rows] == [
        ["NAME", "READY", "STATUS"],
        ["plain", "0/1", "Pending"],
        ["queued", "0/1", "SchedulingGated"],
        ["sized", "0/1", "Pending"],
    ]


async def test_an_ungated_pod_stays_scheduling_gated_until_it_runs_then_reads_running(
    kubectl: Kubectl, api: k8s_client.ApiClient
) -> None:
    """Kueue's start takes the gates off: until something schedules the pod, its SchedulingGated condition stays
    (the API server changes no status on a spec update) and kubectl still prints SchedulingGated. Once the
    simulated kubelet runs it, PodScheduled is True with no SchedulingGated reason left, the QoS class kept, and
    kubectl prints Running."""
    await kubectl.ok("create", "-f", "-", stdin=pod("p", labels={"kueue.x-k8s.io/queue-name": "user-queue"}))
    await kubectl.ok("patch", "pod", "p", "--type=json", "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')
    ungated = json.loads(await kubectl.ok("get", "pod", "p", "-o", "json"))
    assert "schedulingGates" not in ungated["spec"]
    assert [(c["type"], c["reason"]) for c in ungated["status"]["conditions"]] == [("PodScheduled", "SchedulingGated")]
    assert table(await kubectl.ok("get", "pod", "p"))[1][2] == "SchedulingGated"

    controllers = asyncio.create_task(SimulatedControllers(api, lws=False, ray=False).run())
    try:
        async with asyncio.timeout(10):
            while (await client.get_object(api, resources.PODS, namespace="default", name="p"))["status"][
                "phase"
            ] != "Running":
                await asyncio.sleep(0.05)
    finally:
        await cancel_and_wait([controllers])
    status = json.loads(await kubectl.ok("get", "pod", "p", "-o", "jsonpath={.status}"))
    assert status["qosClass"] == "BestEffort"
    assert {c["type"]: (c["status"], c.get("reason")) for c in status["conditions"]} == {
        "PodScheduled": ("True", None),
        "Initialized": ("True", None),
        "ContainersReady": ("True", None),
        "Ready": ("True", None),
    }
    assert table(await kubectl.ok("get", "pod", "p"))[1][:3] == ["p", "1/1", "Running"]


@pytest.mark.parametrize(
    ("resources", "want"),
    [
        pytest.param([], "BestEffort", id="nothing asked: BestEffort"),
        pytest.param([{"requests": {"cpu": "0"}, "limits": {"nvidia.com/gpu": "1"}}], "BestEffort", id="zero cpu, gpu only"),
        pytest.param([{"requests": {"memory": "1Gi"}}], "Burstable", id="a request without limits"),
        pytest.param([{"limits": {"cpu": "1", "memory": "1Gi"}}], "Guaranteed", id="limits stand for requests"),
        pytest.param([{"requests": {"cpu": "1000m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1024Mi"}}], "Guaranteed", id="equal amounts written apart"),
        pytest.param([{"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}], "Burstable", id="requests below limits"),
        pytest.param([{"limits": {"cpu": "1"}}], "Burstable", id="no memory limit"),
        pytest.param([{"limits": {"cpu": "1", "memory": "1Gi"}}, {}], "Burstable", id="one container unlimited"),
        pytest.param([{"limits": {"cpu": "x", "memory": "1Gi"}}], "Burstable", id="an unreadable quantity is skipped"),
    ],
)  # fmt: skip
def test_the_qos_class_follows_kubernetes_compute_pod_qos(resources: list[dict[str, Any]], want: str) -> None:
    """Only cpu and memory above zero count; Guaranteed needs both limited in every container and requests equal
    to limits (a missing request is its limit, as defaulted); no amount at all is BestEffort (qos.go)."""
    containers = [{"name": f"c{i}", "resources": r} for i, r in enumerate(resources)]
    assert strategies.pod_qos_class({"containers": containers}) == want


def test_pod_level_resources_stand_for_the_containers() -> None:
    """With ``spec.resources`` (pod-level resources), the QoS class is the pod's: limits on cpu and memory equal to
    its requests make it Guaranteed whatever its containers ask."""
    spec = {"resources": {"limits": {"cpu": "2", "memory": "2Gi"}}, "containers": [{"name": "c", "resources": {}}]}
    assert strategies.pod_qos_class(spec) == "Guaranteed"
    spec["resources"] = {"requests": {"cpu": "1"}}
    assert strategies.pod_qos_class(spec) == "Burstable"
