"""A Job running in waves on the demo's simulated kubelet gives back the quota of the pods it no longer needs.

Kueue's Job integration reports reclaimable pods (job_controller.go ReclaimablePods: parallelism less the
completions left, once fewer are left than run at once) from the Job's ``status.succeeded``, which the Job
controller keeps current as its pods finish; the Workload's ``status.reclaimablePods`` then frees their quota.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.kubelet import SIM_DURATION_ANNOTATION, SimulatedKubelet
from tests.integration.harness import admitter, dispatcher_with_consumer, job, running, set_up_queues

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]


async def job_workload(api: Any) -> dict[str, Any] | None:
    """The Workload object of Job ``default/waves``, None while there is none."""
    listed, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
    owned = [w for w in listed if any(r.get("name") == "waves" for r in w["metadata"].get("ownerReferences") or [])]
    return owned[0] if owned else None


async def test_a_job_past_its_first_wave_reclaims_its_spare_pods(api, bus: MemoryBus) -> None:
    """A Job of parallelism 3 and completions 4 on the simulated kubelet: once its first wave of 3 pods succeeded
    and 1 pod is left to run, its Workload says ``reclaimablePods`` main: 2 while it still runs. Before, the
    simulated Job controller wrote ``status.succeeded`` only at the Job's completion, so nothing was reclaimed
    (found on the demo: ``kubectl get job`` said COMPLETIONS 0/4 with 3 pods Completed)."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    kubelet = SimulatedKubelet(api, default_duration_seconds=0, watch_options={"backoff_seconds": 0.05})
    services = [
        Watcher(bus=bus, api=api).run(),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        kubelet.run(),
    ]
    async with running(*services):
        await set_up_queues(api, cpu=9)
        body = job("waves", parallelism=3, completions=4)
        body["metadata"]["annotations"] = {SIM_DURATION_ANNOTATION: "6"}
        await kube.apply_manifest(api, body)
        reclaimable: list[Any] = []
        job_status: dict[str, Any] = {}
        async with asyncio.timeout(20):
            while not reclaimable:
                wl = await job_workload(api)
                reclaimable = ((wl or {}).get("status") or {}).get("reclaimablePods") or []
                if not reclaimable:
                    await asyncio.sleep(0.05)
            job_status = (await kube.get_object(api, resources.JOBS, namespace="default", name="waves"))["status"]
    assert reclaimable == [{"name": "main", "count": 2}]
    assert (job_status.get("succeeded"), job_status.get("active")) == (3, 1)
    assert not any(c["type"] == "Complete" for c in job_status.get("conditions") or [])
