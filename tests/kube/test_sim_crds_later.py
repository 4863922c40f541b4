"""The simulated controllers take up a kind whose CRD is applied after they started, at once and without polling.

They used to list every such kind every 2 s until its CRD came (15 kinds: an idle demo answered several 404s a
second); they now wait for a CustomResourceDefinition change (a slow poll stays as a fallback).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import controllers, custom_resources
from kueue_es.sim.controllers import SimulatedControllers

CRDS = Path(__file__).resolve().parents[1] / "fixtures" / "crds"
LWS = resources.ResourceRef(
    group="leaderworkerset.x-k8s.io", version="v1", plural="leaderworkersets", kind="LeaderWorkerSet", namespaced=True
)


def leader_worker_set(name: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": template}},
    }


async def test_a_crd_applied_later_is_taken_up_at_once(api: k8s_client.ApiClient, monkeypatch: Any) -> None:
    lists: list[str] = []
    real_list = client.list_objects

    async def counted(api_client: Any, ref: resources.ResourceRef, **kw: Any) -> Any:
        lists.append(ref.kind)
        return await real_list(api_client, ref, **kw)

    monkeypatch.setattr(controllers.client, "list_objects", counted)
    sim = SimulatedControllers(api)
    task = asyncio.create_task(sim.run())
    try:
        await asyncio.sleep(0.5)  # every CRD kind's first list failed: waiting for its CRD
        first = len(lists)
        await asyncio.sleep(2.5)
        assert len(lists) == first, lists[first:]  # idle: nothing is listed again
        crd = yaml.safe_load((CRDS / "leaderworkerset.x-k8s.io_leaderworkersets.yaml").read_text())
        await client.create_object(api, custom_resources.CRDS, body=crd)
        applied = time.monotonic()
        async with asyncio.timeout(10):
            while True:
                try:
                    await client.create_object(api, LWS, namespace="default", body=leader_worker_set("lws"))
                    break
                except client.errors.KubeError:  # served a moment after the CRD is stored
                    await asyncio.sleep(0.05)
            while not (await client.list_objects(api, resources.STATEFUL_SETS, namespace="default"))[0]:
                await asyncio.sleep(0.05)
        assert time.monotonic() - applied < controllers.CRD_POLL_SECONDS / 3
    finally:
        await cancel_and_wait([task])
