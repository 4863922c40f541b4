"""A decider's timers fire when they are due, not at the loop's next idle ``wakeup``.

Kueue's workload controller requeues its reconcile for the time left before a workload's waitForPodsReady
timeout (workload_controller.go, ``RequeueAfter``), so a 10 ms timeout evicts after about 10 ms. Our admitter
decided timeouts only in its cycles, and with nothing new on the log the next cycle came with the 1 s
``wakeup``: by then the emulated pods were ready, and a workload Kueue's e2e expects evicted twice and
deactivated ran on (tests/e2e/test_kueue_e2e_sequential_configs.py, ObjectRetentionPolicies, on CI). The
loop now also wakes at the decider's next timer (``Decider.wakes_at``: the admitter's
lifecycle.next_wakeup_ms).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from kueue_es import deciders
from kueue_es.events import models, subjects, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.services import runtime
from kueue_es.services.runtime import Decider, DeciderLoop, cancel_and_wait
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload
from tests.integration.harness import events_of

pytestmark = pytest.mark.timeout(60)

IDLE_WAKEUP = 30.0  # seconds: far longer than any wait below, so only the timer can explain a cycle


async def start(bus: MemoryBus, *names: str) -> DeciderLoop:
    """waitForPodsReady timeout 200 ms, one ClusterQueue, workloads ``names``; the admitter running."""
    config = models.Configuration(wait_for_pods_ready=models.WaitForPodsReadyConfig(timeout="200ms"))
    for fact in (
        types.ConfigurationObserved(configuration=config),
        kueue_fact(flavor("f")),
        kueue_fact(cluster_queue("cq", flavors={"f": {"cpu": 4}})),
        kueue_fact(local_queue("lq", "cq")),
        *(kueue_fact(workload(name, cpu="1")) for name in names),
    ):
        await bus.publish(subjects.fact_message(fact))
    return DeciderLoop(bus=bus, decider=deciders.ADMITTER, wakeup=IDLE_WAKEUP)


async def until(loop: DeciderLoop, key: str, what: str, holds: Callable[[WorkloadState], bool]) -> None:
    async with asyncio.timeout(IDLE_WAKEUP / 2):
        while (wl := loop.state.workloads.get(key)) is None or not holds(wl):
            await asyncio.sleep(0.01)


async def test_a_pods_ready_timeout_evicts_when_due_not_at_the_next_wakeup() -> None:
    """The admitted workload (its pods never ready) is evicted PodsReadyTimeout before the 30 s idle wakeup,
    and not before its timeout."""
    bus = MemoryBus()
    loop = await start(bus, "w")
    task = asyncio.create_task(loop.run())
    try:
        await until(loop, "default/w", "evicted", lambda wl: wl.eviction is not None)
    finally:
        await cancel_and_wait([task])
    admitted = [d.at_ms for d in await events_of(bus, types.WorkloadAdmitted)]
    evicted = await events_of(bus, types.EvictionRequested)
    assert len(admitted) == 1 and len(evicted) == 1, (admitted, evicted)
    assert evicted[0].reason == "PodsReadyTimeout"
    assert evicted[0].at_ms >= admitted[0] + 200  # not before it is due


async def test_a_deadline_that_no_longer_counts_hides_no_later_one() -> None:
    """``a`` is admitted and its pods become ready: its deadline no longer counts, yet stays in the deadline
    heaps. ``b``, admitted after that deadline has passed, is still evicted when its own timeout is due: the
    loop looked past the front of the whole fold's heaps, which no partitioned cycle pops (the first version
    read them, saw a deadline in the past and woke only with the idle wakeup)."""
    bus = MemoryBus()
    loop = await start(bus, "a")
    task = asyncio.create_task(loop.run())
    try:
        await until(loop, "default/a", "admitted", lambda wl: wl.admitted)
        ref = loop.state.workloads["default/a"].ref
        await bus.publish(subjects.fact_message(types.WorkloadPodsReady(workload=ref, ready=True, reason="Started")))
        await until(loop, "default/a", "ready", lambda wl: wl.pods_ready is not None and wl.pods_ready.ready)
        await asyncio.sleep(0.4)  # a's deadline passes
        await bus.publish(subjects.fact_message(kueue_fact(workload("b", cpu="1"))))
        await until(loop, "default/b", "evicted", lambda wl: wl.eviction is not None)
    finally:
        await cancel_and_wait([task])
    evicted = await events_of(bus, types.EvictionRequested)
    assert [e.workload.name for e in evicted] == ["b"], evicted


def test_a_timer_already_due_is_left_to_the_next_cycle() -> None:
    """A timer at or before the cycle's clock is one the cycle just acted on (its decision not folded yet):
    waking for it again would spin, so only a later one is kept, and a burst comes in sweeps TIMER_GAP_MS
    apart."""
    at = [5_000]

    def wakes_at(state: ClusterState, *, partition: str, after_ms: int) -> int | None:
        return at[0] if at[0] > after_ms else None

    decider = Decider(role="admit", logic_version=1, decide=lambda state, now_ms: [], wakes_at=wakes_at)
    loop = DeciderLoop(bus=MemoryBus(), decider=decider, partitions=["p0"], clock=lambda: 5_000)
    loop._note_wake(5_000, ["p0"])
    assert loop._wake_in() is None
    at[0] = 5_250
    loop._note_wake(5_000, ["p0"])
    assert loop._wake_in() == 0.25
    at[0] = 5_001
    loop._note_wake(5_000, ["p0"])
    assert loop._wake_in() == runtime.TIMER_GAP_MS / 1000


def test_only_the_partitions_a_cycle_decided_are_asked_again() -> None:
    """With many partitions (a hundred cohort trees in bench/ten-times.yaml) asking each after every cycle
    would cost every cycle; a partition's timers change only when a message about it has it decided (or a
    sweep decides all), so the others' last answers are kept."""
    asked: list[str] = []
    timers = {"a": 7_000, "b": 6_000}

    def wakes_at(state: ClusterState, *, partition: str, after_ms: int) -> int | None:
        asked.append(partition)
        due = timers.get(partition)
        return due if due is not None and due > after_ms else None

    decider = Decider(role="admit", logic_version=1, decide=lambda state, now_ms: [], wakes_at=wakes_at)
    loop = DeciderLoop(bus=MemoryBus(), decider=decider, partitions=["a", "b"], clock=lambda: 5_000)
    loop._note_wake(5_000, ["a", "b"])
    assert loop._wake_in() == 1.0  # b's
    del timers["b"]
    loop._note_wake(5_100, ["b"])  # b decided (its timer went), a not
    assert asked == ["a", "b", "b"]
    assert loop._wake_in() == 2.0  # a's, kept from its last cycle
    loop._note_wake(7_000, ["b"])
    assert loop._wake_in() is None  # a's is due by then: its own cycle asks again
