"""A decider holds its cycles while another role's request is new (issue 15, point 5: conflicts).

The admitter commits a PreemptionRequired; the preemptor answers it. Were the admitter to run its next
cycle at once, both would commit on the same basis and one would be refused (a conflict). So the
admitter's runner holds cycles for up to ``YIELD_SECONDS`` while a nomination is open, and never
longer: a dead preemptor must not stop admission.
"""

from __future__ import annotations

import asyncio

from kueue_es import deciders
from kueue_es.events import subjects, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.runtime import Decider, DeciderLoop, cancel_and_wait


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_admitter_yields_to_open_nominations() -> None:
    assert deciders.ADMITTER.yields_to is not None
    state = ClusterState()
    assert not deciders.ADMITTER.yields_to(state)
    assert deciders.PREEMPTOR.yields_to is None  # the preemptor answers: it never waits for the admitter


def test_held_for_counts_from_the_newest_open_request() -> None:
    open_keys: set[str] = set()
    clock = Clock()
    decider = Decider(role="admit", logic_version=1, decide=lambda state, now_ms: [], yields_to=lambda s: open_keys)
    loop = DeciderLoop(bus=MemoryBus(), decider=decider, monotonic=clock)
    assert loop._held_for() == 0.0
    open_keys.add("default/a")
    assert loop._held_for() == loop.yield_seconds
    clock.now += 0.3
    assert abs(loop._held_for() - (loop.yield_seconds - 0.3)) < 1e-9
    open_keys.add("default/b")  # a newer one: held from it
    assert loop._held_for() == loop.yield_seconds
    clock.now += loop.yield_seconds + 0.01
    assert loop._held_for() == 0.0  # past the window: a slow preemptor no longer holds cycles
    open_keys.clear()
    assert loop._held_for() == 0.0
    open_keys.add("default/a")  # opened again later: a new window
    assert loop._held_for() == loop.yield_seconds


def test_stepped_loops_never_hold() -> None:
    decider = Decider(role="admit", logic_version=1, decide=lambda state, now_ms: [], yields_to=lambda s: {"x"})
    assert DeciderLoop(bus=MemoryBus(), decider=decider, stepped=True)._held_for() == 0.0


async def test_cycles_wait_while_a_request_is_open_then_run() -> None:
    open_keys: set[str] = {"default/a"}
    cycles: list[float] = []
    loop_clock = asyncio.get_running_loop().time

    def decide(state: ClusterState, *, now_ms: int, partition: str) -> list[types.Decision]:
        cycles.append(loop_clock())
        return []

    bus = MemoryBus()
    await bus.publish(
        subjects.fact_message(types.WorkloadFinished(workload=types.WorkloadRef(namespace="default", name="w")))
    )
    decider = Decider(role="admit", logic_version=1, decide=decide, yields_to=lambda s: open_keys)
    loop = DeciderLoop(bus=bus, decider=decider, partitions=["p0"], wakeup=0.02, clock=lambda: 0)
    loop.yield_seconds = 0.3
    started = loop_clock()
    task = asyncio.create_task(loop.run())
    try:
        await asyncio.sleep(0.15)
        assert cycles == []  # held: the request is open and new
        await asyncio.sleep(0.35)
        assert cycles and cycles[0] - started >= 0.29  # the window ran out: cycles run again
        open_keys.clear()
        count = len(cycles)
        await asyncio.sleep(0.1)
        assert len(cycles) > count  # nothing open: every wakeup cycles
    finally:
        await cancel_and_wait([task])
