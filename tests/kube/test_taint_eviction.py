"""The taint-eviction controller stand-in (kueue_es.sim.controllers ``_evict_tainted``): a pod bound to a node with a
NoExecute taint it does not tolerate is deleted, one tolerating it for ``tolerationSeconds`` after that time, one
tolerating it for good stays (kubernetes pkg/controller/tainteviction/taint_eviction.go).

Found by a new user's TAS trial: ``kubectl taint node kind-worker maint=true:NoExecute`` left the pods Running in
the demo, so Kueue's TAS node failure replacement (TASReplaceNodeOnPodTermination) waited for pods deleted by hand.
"""

from __future__ import annotations

import datetime
from typing import Any

from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, errors, resources
from kueue_es.sim import controllers
from kueue_es.sim.controllers import SimulatedControllers

MAINT = {"key": "maint", "value": "true", "effect": "NoExecute"}


def bound_pod(name: str, tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": "kind-worker",
            "tolerations": tolerations,
            "containers": [{"name": "c", "image": "busybox"}],
        },
    }


async def _exists(api: k8s_client.ApiClient, name: str) -> bool:
    try:
        await client.get_object(api, resources.PODS, namespace="default", name=name)
    except errors.NotFoundError:
        return False
    return True


async def test_noexecute_taint_evicts_untolerating_pods_and_tolerating_ones_after_their_seconds(
    api: k8s_client.ApiClient,
) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "kind-worker", "labels": {"kubernetes.io/hostname": "kind-worker"}},
        "spec": {"taints": [MAINT]},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }
    await client.create_object(api, resources.NODES, body=node)
    pods = {
        "plain": [],
        "forever": [{"key": "maint", "operator": "Exists", "effect": "NoExecute"}],
        "thirty": [{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
    }
    for name, tolerations in pods.items():
        body = bound_pod(name, tolerations)
        if name == "plain":  # kept by a finalizer, to show what the eviction wrote before it deleted the pod
            body["metadata"]["finalizers"] = ["example.com/hold"]
        await client.create_object(api, resources.PODS, namespace="default", body=body)
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    sim = SimulatedControllers(api, clock=lambda: now)

    async def refresh() -> None:
        sim.objects["Node"] = {("", "kind-worker"): await client.get_object(api, resources.NODES, name="kind-worker")}
        listed, _ = await client.list_objects(api, resources.PODS, namespace="default")
        sim.objects["Pod"] = {("default", p["metadata"]["name"]): p for p in listed}

    await refresh()
    await sim._evict_tainted()

    plain = await client.get_object(api, resources.PODS, namespace="default", name="plain")
    assert plain["metadata"].get("deletionTimestamp")
    assert [(c["type"], c["reason"]) for c in plain["status"]["conditions"] if c["type"] == "DisruptionTarget"] == [
        ("DisruptionTarget", controllers.TAINT_EVICTION_REASON)
    ]
    assert await _exists(api, "forever") and await _exists(api, "thirty")
    assert sim.next_eviction == now + datetime.timedelta(seconds=30)
    events, _ = await client.list_objects(api, resources.EVENTS, namespace="default")
    assert [(e["reason"], e["message"], e["involvedObject"]["name"]) for e in events] == [
        (controllers.TAINT_EVICTION_EVENT, "Marking for deletion Pod default/plain", "plain")
    ]

    now += datetime.timedelta(seconds=29)
    await refresh()
    await sim._evict_tainted()
    events, _ = await client.list_objects(api, resources.EVENTS, namespace="default")
    assert len(events) == 1  # the pod being deleted is not evicted again
    assert await _exists(api, "thirty")  # counted from when it was first seen due, not from each pass

    now += datetime.timedelta(seconds=1)
    await refresh()
    await sim._evict_tainted()
    assert not await _exists(api, "thirty")
    assert await _exists(api, "forever")
    assert sim.next_eviction is None
