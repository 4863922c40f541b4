"""What the partition runtime tells its users (issue 18): a partition no decider owns, and conflicts
counted apart from the fence's."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from kueue_es import deciders
from kueue_es.events import subjects
from kueue_es.events.bus.base import ConflictError
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.deciding import PartitionCollector
from kueue_es.services.health import Health
from kueue_es.services.runtime import DeciderLoop, cancel_and_wait
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload
from tests.ops.test_health import samples


async def publish(bus: MemoryBus, *docs: dict) -> None:
    for doc in docs:
        await bus.publish(subjects.fact_message(kueue_fact(doc)))


def in_cohort(name: str, cohort: str) -> dict:
    doc = cluster_queue(name, flavors={"f": {"cpu": 4}})
    doc["spec"]["cohortName"] = cohort
    return doc


class Refusing(MemoryBus):
    """A bus whose head check refuses every batch (another replica always came first)."""

    async def commit_batch(self, **_: object) -> int:
        raise ConflictError("the head moved")


async def test_a_refused_fence_is_counted_apart_from_contention() -> None:
    """A batch with decisions refused is contention (``conflicts``); an empty batch committed only as the
    fence of a hand-over (q-b's, after ClusterQueue b joined cohort x) refused is harmless and counted
    apart (``fence_conflicts``), in the loop, its per-partition metrics and the bus's metrics."""
    bus = Refusing()
    await publish(bus, flavor("f"), cluster_queue("solo", flavors={"f": {"cpu": 4}}), local_queue("lq", "solo"))
    await publish(bus, workload("w", cpu="1"))  # q-solo admits it: a batch with decisions
    await publish(bus, cluster_queue("b", flavors={"f": {"cpu": 4}}), in_cohort("b", "x"))  # q-b owes a fence
    health = Health(service="admitter")
    loop = DeciderLoop(bus=await health.observe(bus), decider=deciders.ADMITTER, wakeup=0.02)
    health.registry.register(PartitionCollector(loop, service="admitter"))
    running = asyncio.create_task(loop.run())
    try:
        async with asyncio.timeout(10):
            while not (loop.partition_stats("q-b").fence_conflicts and loop.partition_stats("q-solo").conflicts):
                await asyncio.sleep(0.02)
    finally:
        await cancel_and_wait([running])
    assert loop.partition_stats("q-b").conflicts == 0  # the fence never counts as contention
    assert loop.partition_stats("q-solo").fence_conflicts == 0
    found = samples(health.metrics())
    label = (("partition", "q-b"), ("role", "admit"), ("service", "admitter"))
    assert found["kueue_es_decider_fence_conflicts_total", label] == loop.partition_stats("q-b").fence_conflicts
    assert found["kueue_es_decider_conflicts_total", label] == 0
    service = (("service", "admitter"),)
    assert found["kueue_es_commit_fence_conflicts_total", service] == loop.fence_conflicts
    assert found["kueue_es_commit_conflicts_total", service] == loop.conflicts


async def watch_unowned(bus: MemoryBus, partitions: list[str], wanted: str) -> tuple[DeciderLoop, Health, list[dict]]:
    """Run an admitter owning ``partitions`` (static) on ``bus`` until it reports ``wanted`` unowned."""
    health = Health(service="admitter")
    loop = DeciderLoop(bus=await health.observe(bus), decider=deciders.ADMITTER, partitions=partitions, wakeup=0.05)
    loop.unowned_after = 0.0
    health.add_check(loop.readiness)
    health.registry.register(PartitionCollector(loop, service="admitter"))
    with capture_logs() as logs:
        running = asyncio.create_task(loop.run())
        try:
            async with asyncio.timeout(10):
                while wanted not in loop.unowned_partitions():
                    await asyncio.sleep(0.05)
        finally:
            await cancel_and_wait([running])
    return loop, health, logs


async def test_a_partition_outside_every_static_list_is_reported_where_users_look() -> None:
    """An admitter deciding only q-a sees q-b hold a workload that no decider has recorded anything
    about: it logs a warning naming q-b and its ClusterQueue, /readyz lists it (still ready: not this
    replica's fault), and kueue_es_partitions_unowned counts it. Its own partition is never reported."""
    bus = MemoryBus()
    await publish(bus, flavor("f"), cluster_queue("a", flavors={"f": {"cpu": 4}}), local_queue("lq-a", "a"))
    await publish(bus, cluster_queue("b", flavors={"f": {"cpu": 4}}), local_queue("lq-b", "b"))
    await publish(bus, workload("wa", cpu="1", queue="lq-a"), workload("wb", cpu="1", queue="lq-b"))
    loop, health, logs = await watch_unowned(bus, ["q-a"], "q-b")
    assert set(loop.unowned_partitions()) == {"q-b"}
    assert loop.unowned_partitions()["q-b"] == "1 workload waits in it and no decider has committed a record of it"
    warning = next(e for e in logs if e["event"] == "partition_unowned")
    assert warning["log_level"] == "warning" and warning["partition"] == "q-b" and warning["cluster_queues"] == ["b"]
    assert warning["decides"] == ["q-a"]
    ready, facts = health.readiness()
    assert ready and facts["unowned_partitions"] == ["q-b"]
    found = samples(health.metrics())
    assert found["kueue_es_partitions_unowned", (("role", "admit"), ("service", "admitter"))] == 1


async def test_a_hand_over_out_of_an_unowned_partition_is_reported_naming_who_waits() -> None:
    """ClusterQueue b (alone: q-b) joins cohort x: c-x waits for q-b's fence. An admitter deciding only c-x
    reports q-b: it owes the fence c-x waits for and no decider commits it."""
    bus = MemoryBus()
    await publish(bus, flavor("f"), cluster_queue("b", flavors={"f": {"cpu": 4}}), local_queue("lq-b", "b"))
    await publish(bus, workload("wb", cpu="1", queue="lq-b"), in_cohort("b", "x"))
    loop, _, _ = await watch_unowned(bus, ["c-x"], "q-b")
    assert loop.state.partitions.blocked("c-x")
    why = loop.unowned_partitions()["q-b"]
    assert "owes the fence of a hand-over" in why and "c-x waits for" in why
