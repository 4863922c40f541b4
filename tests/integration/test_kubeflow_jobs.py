"""Kubeflow Trainer v1 jobs through the edge (jobframework/integrations/kubeflow.py): Kueue's sample
PyTorchJob, and a TFJob with every replica type, each through its whole life (:mod:`tests.integration.lifecycle`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.sim.emulator import serve_emulator
from tests.integration.lifecycle import Statuses, run_lifecycle, served
from tests.kube import examples

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def api() -> AsyncIterator[k8s_client.ApiClient]:
    """An emulated API server serving the Kubeflow v1 kinds, and a client for it."""
    kinds = tuple(served(kind) for kind in ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob"))
    async with serve_emulator(bookmark_interval=0.2, extra_resources=kinds) as emu:
        client = await kube.make_api_client(server=emu.url)
        try:
            yield client
        finally:
            await client.close()


def replica_statuses(types: list[str], *, active: int) -> dict[str, Any]:
    return {"replicaStatuses": {t: {"active": active} for t in types}}


def condition(kind: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": kind, "message": f"job {kind.lower()}"}


def statuses(types: list[str]) -> Statuses:
    """What the training-operator writes: active replicas, then the Running condition (PodsReady), then
    nothing active, then Succeeded."""
    return Statuses(
        running={**replica_statuses(types, active=1), "conditions": [condition("Created")]},
        ready={**replica_statuses(types, active=1), "conditions": [condition("Created"), condition("Running")]},
        inactive={**replica_statuses(types, active=0), "conditions": [condition("Created")]},
        finished={**replica_statuses(types, active=0), "conditions": [condition("Succeeded")]},
    )


async def test_sample_pytorchjob(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """jobs/sample-pytorchjob.yaml: pod sets master (1) and worker (1), runPolicy.suspend."""
    [manifest] = examples.load("jobs/sample-pytorchjob.yaml")
    await run_lifecycle(
        api, bus, manifest, pod_sets=[("master", 1), ("worker", 1)], statuses=statuses(["Master", "Worker"])
    )


async def test_tfjob_replica_types_in_kueue_order(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """A TFJob's pod sets follow Kueue's order (Chief, Master, PS, Worker, Evaluator), whatever the map's."""

    def replica(count: int) -> dict[str, Any]:
        container = {"name": "tf", "image": "tf", "resources": {"requests": {"cpu": "1"}}}
        return {"replicas": count, "template": {"spec": {"containers": [container]}}}

    manifest = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "tf", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"tfReplicaSpecs": {"Worker": replica(3), "PS": replica(2), "Chief": replica(1)}},
    }
    await run_lifecycle(
        api,
        bus,
        manifest,
        pod_sets=[("chief", 1), ("ps", 2), ("worker", 3)],
        statuses=statuses(["Chief", "PS", "Worker"]),
    )
