"""The Pending Events of workloads put back in line: every message Kueue records is an Event of its own.

Kueue's scheduler records a Warning Event on each workload it puts back in line (scheduler.go
requeueAndUpdate), about the Workload object it decided on; its status patch before that Event gives the
object a new resourceVersion whenever the message changed, so client-go's recorder (tools/events
event_broadcaster.go getKey: the regarding object with its resourceVersion, not the note) makes the next
one a new Event. A head that fitted when nominated and lost its quota to another one of the cycle gets
"Workload no longer fits after processing another workload" (scheduler.go processEntry), then, in the
next cycle, its "couldn't assign flavors ..." again: three Events, each with its message. The admitter
carries such outcomes in its DecisionRecord (``DecisionRecord.pending``), which the dispatcher hands over
for their Events as it does the decisions of their own messages.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    JOBS,
    admitter,
    cluster_queue,
    dispatcher_with_consumer,
    events_of,
    flavor,
    job,
    local_queue,
    running,
    wait_for,
    watch_with_workloads,
)

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]

NO_LONGER_FITS = "Workload no longer fits after processing another workload"
NO_FLAVOR = (
    "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, 4 more needed"
)


def _in_cohort(name: str, cpu: int) -> dict[str, Any]:
    manifest = cluster_queue(name, cpu=cpu)
    manifest["spec"]["cohortName"] = "pool"
    return manifest


async def _pending_events(api: Any, name: str) -> list[tuple[str, str, int]]:
    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    mine = sorted(
        (e for e in listed if e["involvedObject"]["name"] == name and e["reason"] == "WaitingForQuota"),
        key=lambda e: e["eventTime"],
    )
    return [(e["type"], e["message"], e["count"]) for e in mine]


async def test_a_head_that_no_longer_fits_gets_an_event_for_each_message(api, bus: MemoryBus) -> None:
    """Two borrowing heads wait in a full cohort; the lender's Job is deleted, freeing quota for one of them:
    the other one's ``kubectl get events`` shows its first pending message, "no longer fits", and its pending
    message again, each an Event of its own (count 1), as Kueue's recorder makes them."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await kube.apply_manifest(api, flavor("default-flavor"))
        for name, cpu in (("cq-lend", 4), ("cq-bor", 0), ("cq-third", 0)):
            await kube.apply_manifest(api, _in_cohort(name, cpu))
            await kube.apply_manifest(api, local_queue(f"lq-{name}", name))
        await kube.apply_manifest(api, job("lend-1", queue="lq-cq-lend", parallelism=4))
        await wait_for(bus, types.WorkloadAdmitted)
        for name in ("bor-1", "third-1"):
            await kube.apply_manifest(api, job(name, queue=f"lq-cq-{name.split('-')[0]}", parallelism=4))
        await wait_for(bus, types.WorkloadInadmissible, count=2)
        await kube.delete_object(api, JOBS, namespace="default", name="lend-1")
        await wait_for(bus, types.WorkloadAdmitted, count=2, timeout=10)
        outcomes = [e for e in await events_of(bus, types.DecisionRecord) if e.pending]
        [loser] = {o.workload.name for r in outcomes for o in r.pending if o.message == NO_LONGER_FITS}
        wanted = [("Warning", NO_FLAVOR, 1), ("Warning", NO_LONGER_FITS, 1), ("Warning", NO_FLAVOR, 1)]
        seen: list[tuple[str, str, int]] = []
        try:
            async with asyncio.timeout(10):
                while (seen := await _pending_events(api, loser)) != wanted:
                    await asyncio.sleep(0.05)
        except TimeoutError:
            pytest.fail(f"the Events of {loser}: {seen}")


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


async def test_a_workload_waiting_for_its_preemptions_gets_kueues_event(api, bus: MemoryBus) -> None:
    """Found by a user's trial: a high-priority Job that can run only once a low-priority one is preempted waits
    for it, QuotaReserved=False ``WaitingForPreemptedWorkloads`` "... . Pending the preemption of 1 workload(s)";
    Kueue's scheduler records that reason and message as a Warning Event too (scheduler.go requeueAndUpdate after
    issuePreemptions), which ``kubectl get events`` showed nowhere. No preemptor runs here, so it keeps waiting."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await kube.apply_manifest(api, _priority_class("low", 10))
        await kube.apply_manifest(api, _priority_class("high", 1000))
        await kube.apply_manifest(api, flavor("on-demand"))
        queue = cluster_queue("pp", flavor_name="on-demand", cpu=4, memory="8Gi")
        queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        await kube.apply_manifest(api, queue)
        await kube.apply_manifest(api, local_queue("lq", "pp"))
        for name, priority in (("low-1", "low"), ("urgent", "high")):
            manifest = job(name, queue="lq", cpu="4", memory="1Gi")
            manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = priority
            await kube.apply_manifest(api, manifest)
            if name == "low-1":
                await wait_for(bus, types.WorkloadAdmitted)
        [nomination] = await wait_for(bus, types.PreemptionRequired)
        message = (
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
            "4 more needed. Pending the preemption of 1 workload(s)"
        )
        assert nomination.message == message
        seen: list[tuple[str, str, str]] = []
        try:
            async with asyncio.timeout(10):
                while True:
                    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
                    seen = [
                        (e["type"], e["reason"], e["message"])
                        for e in listed
                        if e["involvedObject"]["name"] == nomination.workload.name and e["type"] == "Warning"
                    ]
                    if seen:
                        break
                    await asyncio.sleep(0.05)
        except TimeoutError:
            pytest.fail(f"no Warning Event on {nomination.workload.name}")
    assert seen == [("Warning", "WaitingForPreemptedWorkloads", message)]
