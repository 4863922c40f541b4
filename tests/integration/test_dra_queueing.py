"""Workloads refused for DRA reasons, through the watcher, admitter and dispatcher against the emulated API server.

Kueue's workload controller keeps a workload that needs DRA processing out of the queue manager until its devices
are charged (workload_controller.go: Create and Update skip it, "handled in Reconcile"; handleDRA and
markDRAInadmissible return before queues.AddOrUpdateWorkload): a refused one is pending in no queue's count, no
metric and no visibility API list, and it gets its QuotaReserved=False and Requeued=False conditions but no Event
(no scheduling cycle looks at it). Once its cause goes (the missing ResourceClaimTemplate created) it is queued as
any other. A workload whose devices are charged and that waits for quota shows them in ``status.resourceRequests``
(Kueue's PropagateResourceRequests of Info.TotalRequests, which adds the DRA resources).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kueue_es import timeline
from kueue_es.events import manager_config, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling import visibility
from kueue_es.services import kueue_metrics
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.runtime import fold_message
from kueue_es.services.visibility import api as visibility_api
from kueue_es.services.watcher.kinds import DRA_KINDS
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    admitter,
    dispatcher_with_consumer,
    folded,
    job,
    local_queue,
    log_entries,
    running,
    until_steady,
    wait_for,
    watch_with_workloads,
)
from tests.integration.test_workload_objects import conditions, eventually

pytestmark = pytest.mark.timeout(90)

CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: example.com/gpu
    deviceClassNames: [gpu.example.com]
"""

FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}}
CLUSTER_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "cluster-queue"},
    "spec": {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory", "example.com/gpu"],
                "flavors": [
                    {
                        "name": "default-flavor",
                        "resources": [
                            {"name": "cpu", "nominalQuota": 40},
                            {"name": "memory", "nominalQuota": "200Gi"},
                            {"name": "example.com/gpu", "nominalQuota": 8},
                        ],
                    }
                ],
            }
        ],
    },
}


def template(name: str, *, device_class: str = "gpu.example.com", count: int = 1) -> dict[str, Any]:
    """A ResourceClaimTemplate in namespace default asking ``count`` devices of ``device_class``."""
    request = {"name": "gpu", "exactly": {"deviceClassName": device_class, "count": count}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def claiming(name: str, *, claim: dict[str, str]) -> dict[str, Any]:
    """Job ``name`` (1 pod of 1 CPU, 200Mi) to user-queue whose pod names ``claim`` as its resource claim gpu."""
    manifest = job(name)
    pod_spec = manifest["spec"]["template"]["spec"]
    pod_spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    pod_spec["resourceClaims"] = [{"name": "gpu", **claim}]
    return manifest


@contextlib.asynccontextmanager
async def _dra_kueue(api: Any, bus: MemoryBus) -> AsyncIterator[None]:
    """The watcher (the Workload objects and the DRA kinds too; the mapping gpu.example.com -> example.com/gpu
    published first, as its start does), an admitter and a dispatcher running against ``api``."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api, config=manager_config.parse(CONFIG, source="test"))
    await watcher.config.start()
    async with running(
        *watch_with_workloads(watcher),
        *(watcher.watch(kind) for kind in DRA_KINDS),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        yield


async def _workload_name(bus: MemoryBus, job_name: str) -> str:
    [observed] = await wait_for(bus, types.WorkloadObserved, workload__owner__name=job_name)
    return observed.workload.metadata.name


async def _pending_counts(api: Any) -> tuple[Any, Any]:
    lq = await kube.get_object(api, resources.LOCAL_QUEUES, namespace="default", name="user-queue")
    cq = await kube.get_object(api, resources.CLUSTER_QUEUES, namespace=None, name="cluster-queue")
    return (lq.get("status") or {}).get("pendingWorkloads"), (cq.get("status") or {}).get("pendingWorkloads")


def _pending_gauges(state: Any) -> tuple[float, float]:
    """kueue_pending_workloads of cluster-queue and kueue_local_queue_pending_workloads of user-queue, active and
    inadmissible together."""
    gauges = kueue_metrics.gauges(state)
    statuses = ("active", "inadmissible")
    return (
        sum(gauges["kueue_pending_workloads"][("cluster-queue", s)] for s in statuses),
        sum(gauges["kueue_local_queue_pending_workloads"][("user-queue", "default", s)] for s in statuses),
    )


REFUSED = {
    "unmapped": (
        'spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName: Not found: "DeviceClass '
        'fpga.example.com is not mapped in DRA configuration for podset main"'
    ),
    "claim": "KueueDRAIntegration feature does not support use of resource claims",
    "missing": (
        "spec.podSets[0].template.spec.resourceClaims[0]: Internal error: failed to get claim spec for "
        'ResourceClaimTemplate later in podset main: resourceclaimtemplates.resource.k8s.io "later" not found'
    ),
}
"""The Jobs :func:`_submit` makes that Kueue refuses for DRA reasons, with its message."""


async def _submit(api: Any, bus: MemoryBus) -> dict[str, str]:
    """The queues (example.com/gpu: 8) and four Jobs: three refused for DRA reasons (:data:`REFUSED`: an
    unmapped DeviceClass, a ResourceClaim, a template that does not exist) and one asking 10 devices (too-many);
    once the admitter decided on each, Job name -> its workload's name."""
    await kube.apply_manifest(api, FLAVOR)
    await kube.apply_manifest(api, CLUSTER_QUEUE)
    await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
    await kube.apply_manifest(api, template("fpga", device_class="fpga.example.com"))
    await kube.apply_manifest(api, template("ten-gpus", count=10))
    await wait_for(bus, types.ResourceClaimTemplateObserved, count=2)
    claims = {
        "unmapped": {"resourceClaimTemplateName": "fpga"},
        "claim": {"resourceClaimName": "shared"},
        "missing": {"resourceClaimTemplateName": "later"},
        "too-many": {"resourceClaimTemplateName": "ten-gpus"},
    }
    for name, claim in claims.items():
        await kube.create_object(api, resources.JOBS, namespace="default", body=claiming(name, claim=claim))
    names = {name: await _workload_name(bus, name) for name in claims}
    await wait_for(bus, types.WorkloadInadmissible, count=len(claims))
    return names


async def _refused_conditions(api: Any, names: dict[str, str]) -> None:
    """Each refused workload's object shows Kueue's QuotaReserved=False Misconfigured and Requeued=False."""
    for job_name, message in REFUSED.items():
        workload = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=names[job_name],
            check=lambda o: "Requeued" in conditions(o),
        )
        reserved, requeued = conditions(workload)["QuotaReserved"], conditions(workload)["Requeued"]
        assert (reserved["status"], reserved["reason"], reserved["message"]) == ("False", "Misconfigured", message)
        assert (requeued["status"], requeued["reason"]) == ("False", "Inadmissible")


async def test_workloads_refused_for_dra_reasons_are_not_pending_until_their_cause_goes(
    api: Any, bus: MemoryBus
) -> None:
    """Of the four Jobs of :func:`_submit` only too-many is pending: in the LocalQueue's and ClusterQueue's
    status, the pending gauges, the visibility API, and only it has a position (kueue-es explain's). Creating
    the missing template queues its Job's workload (it asks 10 of 8 too): pending 2. Before, all four counted
    and were listed."""
    async with _dra_kueue(api, bus):
        names = await _submit(api, bus)
        await _refused_conditions(api, names)
        counts = await until_steady(lambda: _pending_counts(api), quiet=2.5, what="the queues' pendingWorkloads")
        assert counts == (1, 1)
        state = await folded(bus)
        pending = visibility_api.local_queue_pending(state, "default", "user-queue", {}, version="v1beta2", now_ms=0)
        assert [item["metadata"]["name"] for item in pending.body["items"]] == [names["too-many"]]
        listed = visibility_api.cluster_queue_pending(state, "cluster-queue", {}, version="v1beta2", now_ms=0)
        assert [item["metadata"]["name"] for item in listed.body["items"]] == [names["too-many"]]
        assert _pending_gauges(state) == (1, 1)
        assert all(visibility.position_of(state, "default", names[n]) is None for n in REFUSED)
        assert visibility.position_of(state, "default", names["too-many"]) is not None

        # the cause goes: the template is created, and the workload is queued (pending: it asks 10 of 8 too)
        await kube.apply_manifest(api, template("later", count=10))
        counts = await until_steady(lambda: _pending_counts(api), quiet=2.5, what="the queues' pendingWorkloads")
        assert counts == (2, 2)
        state = await folded(bus)
        assert visibility.position_of(state, "default", names["missing"]) is not None
        assert _pending_gauges(state) == (2, 2)


async def test_a_dra_refusal_writes_conditions_and_no_event(api: Any, bus: MemoryBus) -> None:
    """The refused workloads of :func:`_submit` get Kueue's conditions and no Event (the workload controller's
    handleDRA and markDRAInadmissible only patch the status; no scheduling cycle looks at them), while
    too-many, which the scheduler could not admit, gets its Warning. Before, each refusal was a Warning
    ``Misconfigured`` Event of the admission's recorder."""
    async with _dra_kueue(api, bus):
        names = await _submit(api, bus)
        await _refused_conditions(api, names)

        async def warned() -> list[tuple[str, str]]:
            listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
            wanted = set(names.values())
            return sorted(
                (e["involvedObject"]["name"], e["reason"]) for e in listed if e["involvedObject"]["name"] in wanted
            )

        events = await until_steady(warned, quiet=1.0, what="the Workloads' Events")
        assert [name for name, _ in events] == [names["too-many"]], events


async def test_a_workload_waiting_for_quota_shows_its_devices_in_its_resource_requests(
    api: Any, bus: MemoryBus
) -> None:
    """too-many (1 pod, 10 devices of gpu.example.com, mapped to example.com/gpu of quota 8) pends, and its
    ``status.resourceRequests`` counts the devices as Kueue's scheduler writes them (PropagateResourceRequests of
    Info.TotalRequests, DRA resources added); the demo's timeline says what it asks at its submission.
    Before, both left the devices out."""
    async with _dra_kueue(api, bus):
        names = await _submit(api, bus)
        waiting = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=names["too-many"],
            check=lambda o: bool((o.get("status") or {}).get("resourceRequests")),
        )
        assert waiting["status"]["resourceRequests"] == [
            {"name": "main", "resources": {"cpu": "1", "example.com/gpu": "10", "memory": "200Mi"}}
        ]
        before = ClusterState()
        said = []
        for message, event in await log_entries(bus):
            if isinstance(event, types.WorkloadObserved) and event.workload.metadata.name == names["too-many"]:
                said.append(timeline.describe(event, before))
            fold_message(before, message)
        assert said[0] == (
            "submitted",
            f"default/{names['too-many']} to queue user-queue: 1 pods x (cpu 1, memory 200Mi, example.com/gpu 10)",
        )
