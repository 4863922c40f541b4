"""The watcher finds a kind once its CRD is applied, as Kueue sets an integration up once its CRD exists.

The emulated API server starts without the JobSet CRD (its built-in JobSet placeholder removed),
so the watcher's JobSet list is 404 and it probes for the kind; then the published JobSet CRD
(tests/fixtures/crds) is created through the API and Kueue's sample JobSet applied: the watcher
must list and watch the new kind and put the JobSet's workload on the log.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim import custom_resources
from kueue_es.sim.emulator import ClusterEmulator
from tests.integration.harness import running, wait_for, wait_until
from tests.kube import examples

pytestmark = pytest.mark.timeout(60)

JOBSET_CRD = Path(__file__).resolve().parents[1] / "fixtures" / "crds" / "jobset.x-k8s.io_jobsets.yaml"


async def test_the_watcher_sees_a_kind_whose_crd_is_applied_after_it_started(
    emu: ClusterEmulator, api: k8s_client.ApiClient, bus: MemoryBus
) -> None:
    emu.unregister_resource(resources.JOBSETS)  # a cluster without the JobSet CRD
    with pytest.raises(kube_errors.NotFoundError):
        await kube.list_objects(api, resources.JOBSETS)
    watcher = Watcher(bus=bus, api=api, probe_seconds=0.1, probe_max_seconds=0.4)
    async with running(watcher.run()):
        await wait_until(lambda: watcher.synced["JobSet"].is_set(), what="the JobSet kind counted as listed")
        [crd] = custom_resources.load([JOBSET_CRD])
        response = await k8s_client.ApiextensionsV1Api(api).create_custom_resource_definition(
            crd, _preload_content=False
        )
        assert response.status == 201
        for doc in examples.load("admin/single-clusterqueue-setup.yaml"):
            await kube.apply_manifest(api, doc)
        [jobset] = examples.load("jobs/sample-jobset.yaml")
        created = await kube.apply_manifest(api, jobset)
        assert created["spec"]["suspend"] is True  # Kueue's JobSet webhook, with the CRD's schema
        [fact] = await wait_for(bus, types.WorkloadObserved, timeout=10.0)
    assert fact.workload.owner is not None and fact.workload.owner.kind == "JobSet"
    assert fact.workload.owner.name == created["metadata"]["name"]
    assert [ps.name for ps in fact.workload.spec.pod_sets] == ["workers", "driver"]


async def test_a_crd_applied_just_after_the_start_is_found_within_seconds_as_kueue_finds_it(
    emu: ClusterEmulator, api: k8s_client.ApiClient, bus: MemoryBus
) -> None:
    """With the watcher's default probing, a CRD applied right after it found the kind missing is found within a
    few seconds (Kueue's WaitForAPI backoff starts at 1 s), not after a fixed 30 s: the JobSet's workload is on the
    log within 10 s of the CRD."""
    emu.unregister_resource(resources.JOBSETS)
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run()):
        await wait_until(lambda: watcher.synced["JobSet"].is_set(), what="the JobSet kind counted as listed")
        [crd] = custom_resources.load([JOBSET_CRD])
        await k8s_client.ApiextensionsV1Api(api).create_custom_resource_definition(crd, _preload_content=False)
        for doc in examples.load("admin/single-clusterqueue-setup.yaml"):
            await kube.apply_manifest(api, doc)
        [jobset] = examples.load("jobs/sample-jobset.yaml")
        await kube.apply_manifest(api, jobset)
        [fact] = await wait_for(bus, types.WorkloadObserved, timeout=10.0)
    assert fact.workload.owner is not None and fact.workload.owner.kind == "JobSet"


class _NotServed:
    """A KubeReader that serves no kind, noting when each LIST came."""

    def __init__(self) -> None:
        self.listed_at: list[float] = []

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        self.listed_at.append(asyncio.get_running_loop().time())
        raise kube_errors.NotFoundError(status=404, reason="NotFound", message="the server could not find it")

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a kind not served is not watched")


async def test_a_kind_not_served_is_looked_for_again_after_waits_that_double_up_to_the_longest(bus: MemoryBus) -> None:
    """Between two looks for a kind the cluster does not serve the watcher waits ``probe_seconds``, twice as long
    each time after, and no longer than ``probe_max_seconds`` (Kueue's exponential backoff, 1 s to 2 minutes)."""
    reader = _NotServed()
    watcher = Watcher(bus=bus, api=reader, probe_seconds=0.1, probe_max_seconds=0.4)
    task = asyncio.create_task(watcher._until_served("JobSet", (resources.JOBSETS,), None))
    try:
        await wait_until(lambda: len(reader.listed_at) >= 6, timeout=10, what="six looks")
    finally:
        task.cancel()
    gaps = [later - earlier for earlier, later in zip(reader.listed_at, reader.listed_at[1:], strict=False)][:5]
    # at least each wait (a loaded machine wakes later, never earlier), and capped: uncapped, the last would be 1.6 s
    assert all(gap >= wait - 0.01 for gap, wait in zip(gaps, [0.1, 0.2, 0.4, 0.4, 0.4], strict=True)), gaps
    assert gaps[4] < 0.8, gaps
