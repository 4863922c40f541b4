"""MPIJob (kubeflow.org/v2beta1) and TrainJob (Kubeflow Trainer v2) through the edge
(jobframework/integrations/mpijob.py, trainjob.py), each through its whole life (:mod:`tests.integration.lifecycle`):
Kueue's sample MPIJob, and a TrainJob of Kueue's "Run a TrainJob" page on the Trainer's torch-distributed
ClusterTrainingRuntime, created first (the watcher reads it to build the TrainJob's pod sets)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import serve_emulator
from tests.integration.harness import admitter, dispatcher_with_consumer, running, set_up_queues, wait_for
from tests.integration.lifecycle import Statuses, run_lifecycle, served, until
from tests.kube import examples

pytestmark = pytest.mark.timeout(60)

TRAINER = "trainer.kubeflow.org/v1alpha1"

#: The Kubeflow Trainer's published torch-distributed ClusterTrainingRuntime (manifests/base/runtimes,
#: v2.3.0): one replicated job ``node``, the trainer step, one node unless the TrainJob says otherwise.
TORCH_DISTRIBUTED: dict[str, Any] = {
    "apiVersion": TRAINER,
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed", "labels": {"trainer.kubeflow.org/framework": "torch"}},
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                            "spec": {
                                "template": {
                                    "spec": {
                                        "containers": [
                                            {"name": "node", "image": "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"}
                                        ]
                                    }
                                }
                            },
                        },
                    }
                ]
            }
        },
    },
}

#: Kueue's site/content/en/docs/tasks/run/trainjobs.md "Using ClusterTrainingRuntime" TrainJob, without its
#: nvidia.com/gpu request (the test's ClusterQueue covers cpu and memory only).
PYTORCH_DISTRIBUTED: dict[str, Any] = {
    "apiVersion": TRAINER,
    "kind": "TrainJob",
    "metadata": {
        "name": "pytorch-distributed",
        "namespace": "default",
        "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
    },
    "spec": {
        "runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime"},
        "trainer": {"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "4", "memory": "8Gi"}}},
    },
}


@pytest.fixture
async def api() -> AsyncIterator[k8s_client.ApiClient]:
    """An emulated API server serving MPIJob, TrainJob and the Trainer's runtimes, and a client for it."""
    runtimes = tuple(resources.ref_for(TRAINER, kind) for kind in ("TrainingRuntime", "ClusterTrainingRuntime"))
    kinds = (served("MPIJob"), served("TrainJob"), *runtimes)
    async with serve_emulator(bookmark_interval=0.2, extra_resources=kinds) as emu:
        client = await kube.make_api_client(server=emu.url)
        try:
            yield client
        finally:
            await client.close()


def condition(kind: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": kind, "message": f"job {kind.lower()}"}


async def test_sample_mpijob(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """jobs/sample-mpijob.yaml: pod sets launcher (1) and worker (2), runPolicy.suspend; the MPI operator's
    replicaStatuses (active) and Running / Succeeded conditions."""
    [manifest] = examples.load("jobs/sample-mpijob.yaml")
    manifest["metadata"]["namespace"] = "default"

    def replicas(active: int) -> dict[str, Any]:
        return {"replicaStatuses": {"Launcher": {"active": active}, "Worker": {"active": 2 * active}}}

    await run_lifecycle(
        api,
        bus,
        manifest,
        pod_sets=[("launcher", 1), ("worker", 2)],
        statuses=Statuses(
            running={**replicas(1), "conditions": [condition("Created")]},
            ready={**replicas(1), "conditions": [condition("Created"), condition("Running")]},
            inactive={**replicas(0), "conditions": [condition("Created")]},
            finished={**replicas(0), "conditions": [condition("Succeeded")]},
        ),
    )


async def test_trainjob_on_a_cluster_training_runtime(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """The TrainJob's pod set is its runtime's replicated job ``node`` with ``trainer.numNodes`` pods; the start
    writes the flavor into Kueue's runtimePatches entry, the stop empties it; the Trainer's jobsStatus gives
    IsActive and PodsReady, its Complete condition the finish."""

    def jobs(active: int, ready: int) -> dict[str, Any]:
        return {"jobsStatus": [{"name": "node", "active": active, "ready": ready, "succeeded": 0, "failed": 0}]}

    await run_lifecycle(
        api,
        bus,
        PYTORCH_DISTRIBUTED,
        pod_sets=[("node", 2)],
        inputs=[TORCH_DISTRIBUTED],
        statuses=Statuses(
            running={**jobs(1, 0), "conditions": []},
            ready=jobs(1, 1),
            inactive=jobs(0, 0),
            finished={**jobs(0, 0), "conditions": [condition("Complete")]},
        ),
    )


async def test_a_trainjob_waits_for_its_runtime(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """A TrainJob created before its runtime is rejected (no Workload: Kueue's "runtime not found"); the runtime's
    creation converts it again, and it is admitted and started."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run(), admitter(bus).run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        await set_up_queues(api, cpu=64)
        created = await kube.apply_manifest(api, copy.deepcopy(PYTORCH_DISTRIBUTED))
        assert created["spec"]["suspend"] is True
        [rejected] = await wait_for(bus, types.ObjectRejected, timeout=10)
        assert (rejected.kind, rejected.field) == ("TrainJob", "spec.runtimeRef.name")
        assert 'ClusterTrainingRuntime "torch-distributed" not found' in rejected.problem
        await kube.apply_manifest(api, copy.deepcopy(TORCH_DISTRIBUTED))
        [observed] = await wait_for(bus, types.WorkloadObserved, timeout=10)
        assert [(ps.name, ps.count) for ps in observed.workload.spec.pod_sets] == [("node", 2)]
        await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
        started = await until(api, served("TrainJob"), "pytorch-distributed", lambda o: o["spec"]["suspend"] is False)
        [kueue_patch] = [p for p in started["spec"]["runtimePatches"] if p["manager"] == "kueue.x-k8s.io/manager"]
        [node] = kueue_patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        assert node["name"] == "node"
        assert node["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"instance-type": "spot"}
