"""The watcher finds a kind once its CRD is applied, as Kueue sets an integration up once its CRD exists.

The emulated API server starts without the JobSet CRD (its built-in JobSet placeholder removed),
so the watcher's JobSet list is 404 and it probes for the kind; then the published JobSet CRD
(tests/fixtures/crds) is created through the API and Kueue's sample JobSet applied: the watcher
must list and watch the new kind and put the JobSet's workload on the log.
"""

from __future__ import annotations

from pathlib import Path

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
    watcher = Watcher(bus=bus, api=api, probe_seconds=0.1)
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
