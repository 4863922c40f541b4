"""KubeRay's kinds through the edge (jobframework/integrations/ray.py): Kueue's sample RayJob, RayCluster and
RayService, each through its life (:mod:`tests.integration.lifecycle`), and a RayCluster a RayJob created.

The statuses are what KubeRay writes: a RayJob's ``jobDeploymentStatus`` / ``jobStatus`` and its cluster's
state, a RayCluster's ``state``, a RayService's ``Ready`` condition. A RayCluster or RayService never
finishes, so their lives end at the second start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import serve_emulator
from tests.integration.harness import events_of, running, wait_for
from tests.integration.lifecycle import Statuses, run_lifecycle, served
from tests.kube import examples

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def api() -> AsyncIterator[k8s_client.ApiClient]:
    """An emulated API server serving the KubeRay kinds, and a client for it."""
    kinds = tuple(served(kind) for kind in ("RayJob", "RayCluster", "RayService"))
    async with serve_emulator(bookmark_interval=0.2, extra_resources=kinds) as emu:
        client = await kube.make_api_client(server=emu.url)
        try:
            yield client
        finally:
            await client.close()


def sample(name: str) -> dict[str, Any]:
    [doc] = [d for d in examples.load(f"jobs/{name}.yaml") if d["kind"] != "ConfigMap"]
    doc["metadata"].setdefault("namespace", "default")
    return doc


async def test_sample_rayjob(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """jobs/ray-job-sample.yaml: head (1), small-group (1), submitter (1); spec.suspend; finished by
    jobDeploymentStatus Complete with jobStatus SUCCEEDED."""
    ready_cluster = {"state": "ready"}
    await run_lifecycle(
        api,
        bus,
        sample("ray-job-sample"),
        pod_sets=[("head", 1), ("small-group", 1), ("submitter", 1)],
        statuses=Statuses(
            running={"jobDeploymentStatus": "Initializing", "rayClusterStatus": {"state": ""}},
            ready={"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "rayClusterStatus": ready_cluster},
            inactive={"jobDeploymentStatus": "Suspended", "rayClusterStatus": {}},
            finished={"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "done"},
        ),
    )


async def test_sample_raycluster(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """jobs/ray-cluster-sample.yaml: head (1), small-group (1); spec.suspend; active while ``ready``."""
    await run_lifecycle(
        api,
        bus,
        sample("ray-cluster-sample"),
        pod_sets=[("head", 1), ("small-group", 1)],
        statuses=Statuses(
            running={"state": ""},
            ready={"state": "ready", "readyWorkerReplicas": 1},
            inactive={"state": "suspended"},
            finished=None,
        ),
    )


async def test_sample_rayservice(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """jobs/ray-service-sample.yaml: head (1), small-group (1); spec.rayClusterConfig.suspend; active while
    its Ready condition is True."""

    def ready(status: str) -> dict[str, Any]:
        return {"conditions": [{"type": "Ready", "status": status, "reason": "x", "message": "x"}]}

    await run_lifecycle(
        api,
        bus,
        sample("ray-service-sample"),
        pod_sets=[("head", 1), ("small-group", 1)],
        statuses=Statuses(running=ready("False"), ready=ready("True"), inactive=ready("False"), finished=None),
    )


async def test_a_rayjobs_raycluster_is_part_of_the_rayjob(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """The RayCluster KubeRay creates for a RayJob carries the RayJob's queue label and a controller owner
    reference to it: Kueue's webhook leaves it unsuspended and it gives no workload of its own; the
    autoscaling sample is refused by the webhook, naming the field (without the webhook the watcher reports
    the same as an ObjectRejected: tests/kube/test_ray_conversion.py)."""
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run()):
        job = await kube.apply_manifest(api, sample("ray-job-sample"))
        cluster = sample("ray-cluster-sample")
        cluster["metadata"]["name"] = "rayjob-sample-raycluster-abcde"
        cluster["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayJob",
                "name": job["metadata"]["name"],
                "uid": job["metadata"]["uid"],
                "controller": True,
            }
        ]
        created = await kube.apply_manifest(api, cluster)
        with pytest.raises(kube_errors.ApiError, match="enableInTreeAutoscaling") as refused:
            await kube.apply_manifest(api, sample("ray-job-autoscaling-sample"))  # Kueue's webhook: 403
        await kube.apply_manifest(api, sample("ray-service-sample"))  # a later marker
        facts = await wait_for(bus, types.WorkloadObserved, count=2)

    assert created["spec"].get("suspend") is not True
    assert sorted(f.workload.owner.kind for f in facts if f.workload.owner) == ["RayJob", "RayService"]
    assert 'admission webhook "vrayjob.kb.io" denied the request' in str(refused.value)
    assert len(await events_of(bus, types.WorkloadObserved)) == 2
