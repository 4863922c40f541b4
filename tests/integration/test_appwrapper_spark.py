"""AppWrapper and SparkApplication through the edge (jobframework/integrations/appwrapper.py,
sparkapplication.py): Kueue's samples, each through its whole life (:mod:`tests.integration.lifecycle`).

An AppWrapper's start leaves its wrapped templates alone and writes the PodSetInfos into
``spec.components[i].podSetInfos``; a SparkApplication's start writes the driver's and executor's own
node selector and tolerations."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import manager_config, models, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.watcher.kinds import READS
from kueue_es.services.watcher.service import Watcher, watched_kinds
from kueue_es.sim.emulator import serve_emulator
from tests.integration.harness import SPOT_TOLERATION, events_of, running, wait_for
from tests.integration.lifecycle import SPOT_SELECTOR, Statuses, run_lifecycle, served
from tests.kube import examples

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def api() -> AsyncIterator[k8s_client.ApiClient]:
    """An emulated API server serving AppWrapper and SparkApplication, and a client for it."""
    kinds = (served("AppWrapper"), served("SparkApplication"), served("PyTorchJob"))
    async with serve_emulator(bookmark_interval=0.2, extra_resources=kinds) as emu:
        client = await kube.make_api_client(server=emu.url)
        try:
            yield client
        finally:
            await client.close()


def condition(kind: str, status: str = "True") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": kind,
        "message": kind,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def appwrapper_statuses() -> Statuses:
    """What the AppWrapper controller writes: deployed, then PodsReady, then (suspended) its quota given
    back, then Succeeded."""
    deployed = [condition("QuotaReserved"), condition("ResourcesDeployed")]
    return Statuses(
        running={"phase": "Running", "conditions": [*deployed, condition("PodsReady", "False")]},
        ready={"phase": "Running", "conditions": [*deployed, condition("PodsReady")]},
        inactive={"phase": "Suspended", "conditions": [condition("QuotaReserved", "False")]},
        finished={"phase": "Succeeded", "conditions": [condition("QuotaReserved", "False")]},
    )


async def test_sample_appwrapper_pytorch(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """appwrapper/pytorch-sample.yaml: no declared pod sets, so the PyTorchJob's are inferred (Master, Worker),
    named ``<appwrapper>-0`` and ``-1``; the start writes podSetInfos, not the wrapped templates."""
    [manifest] = examples.load("appwrapper/pytorch-sample.yaml")
    name = manifest["metadata"]["name"]
    seen = await run_lifecycle(
        api, bus, manifest, pod_sets=[(f"{name}-0", 1), (f"{name}-1", 1)], statuses=appwrapper_statuses()
    )
    [component] = seen["started"]["spec"]["components"]
    assert component["template"] == seen["created"]["spec"]["components"][0]["template"], "wrapped object untouched"
    for info in component["podSetInfos"]:
        assert info["nodeSelector"] == SPOT_SELECTOR and SPOT_TOLERATION in info["tolerations"]
    assert "podSetInfos" not in seen["stopped"]["spec"]["components"][0], "a stop clears them"


async def test_sample_appwrapper_leaderworkerset(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """appwrapper/leaderworkerset-sample.yaml: the declared pod sets (paths into the wrapped object,
    replicas 2 and 3) in order, one component with two podSetInfos."""
    [manifest] = examples.load("appwrapper/leaderworkerset-sample.yaml")
    name = manifest["metadata"]["name"]
    seen = await run_lifecycle(
        api, bus, manifest, pod_sets=[(f"{name}-0", 2), (f"{name}-1", 3)], statuses=appwrapper_statuses()
    )
    assert len(seen["started"]["spec"]["components"][0]["podSetInfos"]) == 2


async def test_wrapped_objects_are_part_of_the_appwrapper(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """The PyTorchJob the AppWrapper controller creates (owned by the AppWrapper; here even queue-labelled)
    is not a workload of its own (jobframework FindAncestorJobManagedByKueue): the watcher lists AppWrappers
    before the kinds they may wrap."""
    assert "AppWrapper" in READS["PyTorchJob"] and "AppWrapper" in READS["JobSet"]
    assert "AppWrapper" not in READS["AppWrapper"]
    [manifest] = examples.load("appwrapper/pytorch-sample.yaml")
    aw = await kube.apply_manifest(api, manifest)
    wrapped = copy.deepcopy(manifest["spec"]["components"][0]["template"])
    wrapped["metadata"] |= {
        "namespace": "default",
        "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        "ownerReferences": [
            {
                "apiVersion": aw["apiVersion"],
                "kind": "AppWrapper",
                "name": aw["metadata"]["name"],
                "uid": aw["metadata"]["uid"],
                "controller": True,
            }
        ],
    }
    await kube.apply_manifest(api, wrapped)
    async with running(Watcher(bus=bus, api=api).run()):  # lists both at start: AppWrappers first
        await wait_for(bus, types.WorkloadObserved)
        await asyncio.sleep(0.5)
    observed = await events_of(bus, types.WorkloadObserved)
    assert [e.workload.spec.pod_sets[0].name for e in observed] == ["sample-appwrapper-pytorch-job-0"]


def spark_statuses(executors: int) -> Statuses:
    """What the Spark operator writes: RUNNING with executors pending, then running, then SUSPENDED, then
    COMPLETED."""
    names = [f"spark-pi-exec-{i}" for i in range(1, executors + 1)]
    return Statuses(
        running={"applicationState": {"state": "RUNNING"}, "executorState": dict.fromkeys(names, "PENDING")},
        ready={"applicationState": {"state": "RUNNING"}, "executorState": dict.fromkeys(names, "RUNNING")},
        inactive={"applicationState": {"state": "SUSPENDED"}},
        finished={
            "applicationState": {"state": "COMPLETED"},
            "executorState": dict.fromkeys(names, "COMPLETED"),
            "terminationTime": "2026-01-01T00:10:00Z",
        },
    )


async def test_sample_sparkapplication(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """jobs/sample-sparkapplication.yaml: pod sets driver (1) and executor (2); the start writes the roles'
    nodeSelector and tolerations, the stop takes them out again."""
    [manifest] = examples.load("jobs/sample-sparkapplication.yaml")
    seen = await run_lifecycle(
        api, bus, manifest, pod_sets=[("driver", 1), ("executor", 2)], statuses=spark_statuses(2)
    )
    for role in ("driver", "executor"):
        started, stopped = seen["started"]["spec"][role], seen["stopped"]["spec"][role]
        assert started["nodeSelector"] == SPOT_SELECTOR and SPOT_TOLERATION in started["tolerations"]
        assert started["coreRequest"] == manifest["spec"][role]["coreRequest"]
        assert "nodeSelector" not in stopped and "tolerations" not in stopped


async def test_a_job_under_a_disabled_integrations_owner_is_part_of_the_appwrapper(
    api: k8s_client.ApiClient, bus: MemoryBus
) -> None:
    """Kueue PR #4824 (jobframework reconciler.go FindAncestorJobManagedByKueue, "Job -> JobSet (disabled) ->
    AppWrapper => AppWrapper (manageJobsWithoutQueueName)"): with the JobSet integration left out of
    integrations.frameworks, the walk from a Job still goes through its JobSet, never taken as the ancestor,
    to the AppWrapper that wraps it. The watcher lists such owners too, or the Job would be a second workload
    (before: it was, holding quota beside its AppWrapper's)."""
    config = manager_config.ManagerConfig(
        configuration=models.Configuration(),
        manage_jobs_without_queue_name=True,
        frameworks=("batch/job", "workload.codeflare.dev/appwrapper"),
    )
    kinds = watched_kinds(config)
    assert "JobSet" not in kinds and {"Job", "AppWrapper"} <= set(kinds)
    [manifest] = examples.load("appwrapper/pytorch-sample.yaml")
    aw = await kube.apply_manifest(api, manifest)

    def owned_by(owner: Mapping[str, Any]) -> dict[str, Any]:
        reference = {k: owner["metadata"][k] for k in ("name", "uid")}
        return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], **reference, "controller": True}

    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    js = await kube.apply_manifest(
        api,
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "wrapped", "namespace": "default", "ownerReferences": [owned_by(aw)]},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": template}}}]},
        },
    )
    await kube.apply_manifest(
        api,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "wrapped-w-0", "namespace": "default", "ownerReferences": [owned_by(js)]},
            "spec": {"suspend": True, "template": template},
        },
    )
    watcher = Watcher(bus=bus, api=api, manage_jobs_without_queue_name=True, config=config)
    async with running(watcher.run(kinds)):
        await wait_for(bus, types.WorkloadObserved)
        await asyncio.sleep(0.5)
    observed = await events_of(bus, types.WorkloadObserved)
    assert [e.workload.metadata.name.split("-", 1)[0] for e in observed] == ["appwrapper"]
