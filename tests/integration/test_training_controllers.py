"""A PyTorchJob, an MPIJob and a TrainJob run to their end on the simulated cluster, as on ``kueue-es demo
--keep`` (kueue_es/sim/training.py).

Watcher, admitter and dispatcher on one MemoryBus, the simulated controllers and kubelet, one emulated API
server serving the kinds, and the real kubectl: the job created with ``kubectl create`` is admitted; the simulated
operator makes its pods with the flavor's nodeSelector (a TrainJob: its JobSet, with Kueue's runtime patch, whose
Jobs make the pods), reports them active and Running, they run their time, the job succeeds and Kueue finishes
its Workload. Before, nothing ran these kinds: an admitted one made no pods and held its quota until deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim import training
from kueue_es.sim.controllers import SimulatedControllers
from kueue_es.sim.emulator import serve_emulator
from kueue_es.sim.kubelet import SIM_DURATION_ANNOTATION, SimulatedKubelet
from tests.integration.harness import (
    SPOT_TOLERATION,
    admitter,
    dispatcher_with_consumer,
    running,
    set_up_queues,
    wait_for,
)
from tests.integration.lifecycle import served, until
from tests.integration.test_trainer_jobs import TORCH_DISTRIBUTED, TRAINER
from tests.kube.test_kubectl import Kubectl

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one"),
]
SPOT = {"instance-type": "spot"}


@pytest.fixture
async def served_emulator() -> AsyncIterator[Any]:
    """An emulated API server serving the Kubeflow kinds, the Trainer's and JobSets."""
    runtimes = tuple(resources.ref_for(TRAINER, kind) for kind in ("TrainingRuntime", "ClusterTrainingRuntime"))
    kinds = (served("PyTorchJob"), served("MPIJob"), served("TrainJob"), *runtimes)
    async with serve_emulator(bookmark_interval=0.2, extra_resources=kinds) as emu:
        yield emu


@pytest.fixture
async def api(served_emulator: Any) -> AsyncIterator[k8s_client.ApiClient]:
    client = await kube.make_api_client(server=served_emulator.url)
    try:
        yield client
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def _demo_services(api: Any, bus: MemoryBus) -> AsyncIterator[None]:
    """The watcher, admitter, dispatcher, simulated kubelet and simulated controllers, as the demo runs them."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    kubelet = SimulatedKubelet(api, default_duration_seconds=60, watch_options={"backoff_seconds": 0.05})
    async with running(
        Watcher(bus=bus, api=api).run(),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        kubelet.run(),
        SimulatedControllers(api, lws=False, ray=False).run(),
    ):
        yield


def _template(cpu: str) -> dict[str, Any]:
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "agnhost", "resources": {"requests": {"cpu": cpu}}}],
        }
    }


def _job(kind: str, api_version: str, field: str, specs: dict[str, int], duration: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": "trainer",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {SIM_DURATION_ANNOTATION: duration},
        },
        "spec": {"runPolicy": {}, field: {t: {"replicas": n, "template": _template("1")} for t, n in specs.items()}},
    }


async def _pods(api: Any, count: int) -> list[dict[str, Any]]:
    async def listed() -> list[dict[str, Any]]:
        found, _ = await kube.list_objects(api, resources.PODS, namespace="default")
        return found

    async with asyncio.timeout(10):
        while len(pods := await listed()) < count:
            await asyncio.sleep(0.05)
    return pods


@pytest.mark.parametrize(
    ("kind", "field", "specs", "pods"),
    [
        ("PyTorchJob", "pytorchReplicaSpecs", {"Master": 1, "Worker": 1}, ["trainer-master-0", "trainer-worker-0"]),
        (
            "MPIJob",
            "mpiReplicaSpecs",
            {"Launcher": 1, "Worker": 2},
            ["trainer-launcher-0", "trainer-worker-0", "trainer-worker-1"],
        ),
    ],
)
async def test_an_admitted_training_job_runs_its_pods_and_finishes_its_workload(
    api: Any,
    bus: MemoryBus,
    served_emulator: Any,
    tmp_path: Path,
    kind: str,
    field: str,
    specs: dict[str, int],
    pods: list[str],
) -> None:
    kubectl = Kubectl(served_emulator.url, tmp_path)
    ref = served(kind)
    async with _demo_services(api, bus):
        await set_up_queues(api)
        manifest = _job(kind, ref.api_version, field, specs, "1")
        await kubectl.ok("create", "-f", "-", stdin=json.dumps(manifest))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        made = await _pods(api, len(pods))
        ready = await until(
            api,
            ref,
            "trainer",
            lambda o: any(c["type"] == "Running" and c["status"] == "True" for c in o["status"].get("conditions", [])),
        )
        [finished] = await wait_for(bus, types.WorkloadFinished, timeout=15)
        done = await until(
            api,
            ref,
            "trainer",
            lambda o: any(
                c["type"] == "Succeeded" and c["status"] == "True" for c in o["status"].get("conditions", [])
            ),
        )
        # the CRDs' STATE printer column (.status.conditions[-1:].type), as kubectl reads it
        state = await kubectl.ok("get", kind.lower(), "trainer", "-o", "jsonpath={.status.conditions[-1:].type}")

    # created suspended (the webhook), then started: the operators move each changed condition last, so a
    # running job reads Running, not the Suspended (False) its resume left (before: STATE Suspended while running)
    assert ready["status"]["conditions"][-1]["type"] == "Running"
    assert state == "Succeeded"
    assert sorted(p["metadata"]["name"] for p in made) == pods
    for pod in made:
        assert pod["spec"]["nodeSelector"] == SPOT and pod["spec"]["tolerations"] == [SPOT_TOLERATION]
        assert pod["metadata"]["labels"][training.JOB_NAME_LABEL] == "trainer"
    assert sum(s["active"] for s in ready["status"]["replicaStatuses"].values()) == len(pods)
    assert finished.workload == admitted.workload and finished.succeeded is True
    assert all(s["active"] == 0 for s in done["status"]["replicaStatuses"].values())


async def test_an_admitted_trainjob_runs_its_jobset_and_finishes_its_workload(
    api: Any, bus: MemoryBus, served_emulator: Any, tmp_path: Path
) -> None:
    kubectl = Kubectl(served_emulator.url, tmp_path)
    trainjob = {
        "apiVersion": TRAINER,
        "kind": "TrainJob",
        "metadata": {
            "name": "tj",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {SIM_DURATION_ANNOTATION: "1"},
        },
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"resourcesPerNode": {"requests": {"cpu": "1"}}},
        },
    }
    async with _demo_services(api, bus):
        await set_up_queues(api)
        await kube.apply_manifest(api, dict(TORCH_DISTRIBUTED))
        await kubectl.ok("create", "-f", "-", stdin=json.dumps(trainjob))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        [made] = await _pods(api, 1)
        [finished] = await wait_for(bus, types.WorkloadFinished, timeout=15)
        done = await until(
            api,
            served("TrainJob"),
            "tj",
            lambda o: any(c["type"] == "Complete" and c["status"] == "True" for c in o["status"].get("conditions", [])),
        )
        child = await kube.get_object(api, resources.JOBSETS, namespace="default", name="tj")

    [owner] = child["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainJob", "tj", True)
    assert made["spec"]["nodeSelector"] == SPOT and made["spec"]["tolerations"] == [SPOT_TOLERATION]
    assert finished.workload == admitted.workload and finished.succeeded is True
    assert [(j["name"], j["succeeded"]) for j in done["status"]["jobsStatus"]] == [("node", 1)]
