"""A restarted watcher publishes only what changed while it was down.

Found by a new user's trial: every watcher restart published again a fact for every object that had not
changed (a second WorkloadFinished for each finished Workload, an ``applied ClusterQueue`` in the demo's
timeline with nothing applied, old workloads ``submitted`` again). Its relist compared with an empty memory,
and the Msg-Id deduplication only works within the stream's duplicate window, long past after a restart.
The watcher now learns the last fact the log holds about each object when it folds the log at start-up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from kueue_es.events import models, subjects, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.kinds import KUEUE_KINDS, WORKLOAD_KIND
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    JOBS,
    admitter,
    cluster_queue,
    dispatcher_with_consumer,
    job,
    log_entries,
    running,
)
from tests.integration.test_workload_objects import _complete, _started, conditions, eventually, set_up

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]


async def _restarted_watcher_facts(api, bus: MemoryBus) -> tuple[Watcher, list[types.Fact]]:
    """A new watcher, started as the service starts it (the log folded, then the relist), left running until
    quiet; the facts it published."""
    before = await bus.last_seq()
    restarted = Watcher(bus=bus, api=api)
    await restarted.learn_from_log()
    async with running(restarted.run((*KUEUE_KINDS, "Job", WORKLOAD_KIND))):
        await asyncio.sleep(1.5)  # every kind listed and watched
    facts = [
        event
        for message, event in (await log_entries(bus))[before:]
        if message.subject.startswith(subjects.FACTS.removesuffix(">")) and event is not None
    ]
    return restarted, facts  # type: ignore[return-value]


async def test_a_restarted_watcher_publishes_only_what_changed_while_it_was_down(api, bus: MemoryBus) -> None:
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(admitter(bus).run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        first = Watcher(bus=bus, api=api)
        async with running(first.run((*KUEUE_KINDS, "Job", WORKLOAD_KIND))):
            await set_up(api, cpu=3)
            done = await _started(api, bus, "done", parallelism=1)
            await _complete(api, "done", succeeded=1)
            await eventually(
                api,
                resources.WORKLOADS,
                namespace="default",
                name=done.name,
                check=lambda o: "Finished" in conditions(o),
            )
            await kube.apply_manifest(api, job("run"))
            await eventually(api, JOBS, namespace="default", name="run", check=lambda o: o["spec"]["suspend"] is False)
            await asyncio.sleep(0.5)  # the Workload objects' status read back

        # nothing changed while it was down: the restart publishes nothing
        restarted, facts = await _restarted_watcher_facts(api, bus)
        assert facts == [] and restarted.published == 0, [type(f).__name__ for f in facts]

        # a ClusterQueue changed and a finished Job deleted while it was down: exactly those are published
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=4))
        await kube.delete_object(api, JOBS, namespace="default", name="done")
        _, facts = await _restarted_watcher_facts(api, bus)

    about = {subjects.fact_identity(f): f for f in facts}
    changed = about.get(("ClusterQueue", "", "cluster-queue"))
    assert isinstance(changed, types.ClusterQueueObserved)
    gone = about.get(("Workload", "default", done.name))
    assert isinstance(gone, types.ObjectDeleted) and gone.uid == done.uid
    assert set(about) == {("ClusterQueue", "", "cluster-queue"), ("Workload", "default", done.name)}, facts


async def test_a_restarted_watcher_keeps_a_users_priority_on_a_jobs_workload(api, bus: MemoryBus) -> None:
    """A priority a user set on a waiting Job's Workload object (``kubectl patch kwl X -p
    '{"spec":{"priority":5000}}'``), on the log: a restarted watcher, which converts the Job again, publishes
    nothing (it learns the log's own priorities), so the 5000 never gives way to the class's value meanwhile."""
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass"}
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(admitter(bus).run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        first = Watcher(bus=bus, api=api)
        async with running(first.run((*KUEUE_KINDS, "Job", WORKLOAD_KIND))):
            await kube.apply_manifest(api, {**wpc, "metadata": {"name": "low"}, "value": 100})
            await set_up(api, cpu=3)
            manifest = job("big", parallelism=4)  # never fits: it keeps waiting
            manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
            await kube.apply_manifest(api, manifest)
            [made] = await _workloads_until(bus, lambda wl: True)
            await eventually(
                api, resources.WORKLOADS, namespace="default", name=made.metadata.name, check=lambda o: "status" in o
            )
            patch = {"spec": {"priority": 5000}}
            await kube.patch_object(api, resources.WORKLOADS, namespace="default", name=made.metadata.name, patch=patch)
            await _workloads_until(bus, lambda wl: wl.spec.priority == 5000)
            await asyncio.sleep(0.5)  # the dispatcher's writes of it read back

        restarted, facts = await _restarted_watcher_facts(api, bus)
    assert facts == [] and restarted.published == 0, facts


async def _workloads_until(bus: MemoryBus, check: Callable[[models.Workload], bool]) -> list[models.Workload]:
    """The workloads published (10 s at most) once one passes ``check``."""
    async with asyncio.timeout(10):
        while True:
            found = [e.workload for _, e in await log_entries(bus) if isinstance(e, types.WorkloadObserved)]
            if any(check(wl) for wl in found):
                return found
            await asyncio.sleep(0.02)
