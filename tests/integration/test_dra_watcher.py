"""The watcher's DRA facts against the emulated API server (SEMANTICS-ADVANCED F).

DeviceClasses and ResourceClaimTemplates (resource.k8s.io/v1) become DeviceClassObserved /
ResourceClaimTemplateObserved, a status-free rewrite that changes nothing publishes nothing,
a deletion is ObjectDeleted, and a Job's pod template ``resourceClaims`` reach its workload.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import models, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.kinds import DRA_KINDS
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import job, running, wait_for

pytestmark = pytest.mark.timeout(60)


def device_class(name: str, *, extended: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{name}"'}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "single-gpu", "namespace": "default"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
}


async def test_device_classes_and_claim_templates_become_facts_and_their_deletion_too(api, bus: MemoryBus) -> None:
    watcher = Watcher(bus=bus, api=api)
    async with running(*(watcher.watch(kind) for kind in (*DRA_KINDS, "Job"))):
        await kube.apply_manifest(api, device_class("gpu.example.com", extended="example.com/gpu"))
        await kube.apply_manifest(api, TEMPLATE)
        [observed] = await wait_for(bus, types.DeviceClassObserved)
        [template] = await wait_for(bus, types.ResourceClaimTemplateObserved)
        assert observed.device_class.extended_resource_name == "example.com/gpu"
        assert template.resource_claim_template.requests == [
            models.DeviceRequest(name="gpu", exactly=models.ExactDeviceRequest(device_class_name="gpu.example.com"))
        ]
        # a label changes nothing quota reads: no new fact
        before = await bus.last_seq()
        await kube.apply_manifest(api, device_class("gpu.example.com", extended="example.com/gpu", labels={"a": "b"}))
        manifest = job("with-claims", cpu="1")
        pod_spec = manifest["spec"]["template"]["spec"]
        pod_spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]
        await kube.create_object(api, resources.JOBS, namespace="default", body=manifest)
        [workload] = await wait_for(bus, types.WorkloadObserved)
        assert workload.workload.spec.pod_sets[0].resource_claims == [
            models.PodResourceClaim(name="gpu", resource_claim_template_name="single-gpu")
        ]
        await kube.delete_object(api, resources.RESOURCE_CLAIM_TEMPLATES, namespace="default", name="single-gpu")
        await wait_for(bus, types.ObjectDeleted, kind="ResourceClaimTemplate", name="single-gpu")
    types_after = [(await bus.get(s)).headers["Kq-Type"] for s in range(before + 1, await bus.last_seq() + 1)]
    assert "DeviceClassObserved" not in types_after, types_after


SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-1-gpu.example.com"},
    "spec": {
        "driver": "gpu.example.com",
        "nodeName": "node-1",
        "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {"model": {"string": "a100"}, "driverVersion": {"version": "1.2.3"}},
                "capacity": {"memory": {"value": "81920Mi"}},
            }
        ],
    },
}


async def test_resource_slices_and_selectors_become_facts_and_their_deletion_too(api, bus: MemoryBus) -> None:
    """A ResourceSlice's devices (attributes, capacity canonical) and a DeviceClass's CEL selectors reach the log."""
    watcher = Watcher(bus=bus, api=api)
    async with running(*(watcher.watch(kind) for kind in DRA_KINDS)):
        await kube.apply_manifest(api, device_class("gpu.example.com"))
        await kube.apply_manifest(api, SLICE)
        [observed] = await wait_for(bus, types.DeviceClassObserved)
        [published] = await wait_for(bus, types.ResourceSliceObserved)
        assert observed.device_class.selectors == ['device.driver == "gpu.example.com"']
        slc = published.resource_slice
        assert (slc.driver, slc.pool, [d.name for d in slc.devices]) == ("gpu.example.com", "node-1", ["gpu-0"])
        assert slc.devices[0].attributes["driverVersion"].version_value == "1.2.3"
        assert slc.devices[0].capacity == {"memory": "80Gi"}
        await kube.delete_object(api, resources.RESOURCE_SLICES, namespace=None, name="node-1-gpu.example.com")
        await wait_for(bus, types.ObjectDeleted, kind="ResourceSlice", name="node-1-gpu.example.com")
