"""A decider slows down after cycles that commit only pending outcomes, as Kueue's scheduler does.

Kueue's scheduler waits 1 ms doubling to 10 ms before its next cycle after a cycle that admits
nothing (pkg/util/wait/backoff.go). Ours ran its next cycle as soon as its commit came back, so while
releases and arrivals kept touching a cohort where nothing fitted it committed a record per round
trip that only restated "N more needed" (three commits in four of the baseline bench at 50 writes/s).
A cycle that decides something (an admission, an eviction, ...: a message of its own) resets it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kueue_es.events import subjects, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.projections.cluster import ClusterState
from kueue_es.services import runtime
from kueue_es.services.runtime import Decider, DeciderLoop, cancel_and_wait

REF = types.WorkloadRef(namespace="default", name="w")
PENDING = types.PendingOutcome(workload=REF, reason="Pending", message="couldn't assign flavors: 1 more needed")


def loop_of(decide: Callable[..., list[types.Output]] | None = None, **kwargs: Any) -> DeciderLoop:
    decider = Decider(role="admit", logic_version=1, decide=decide or (lambda state, now_ms: []))
    return DeciderLoop(bus=MemoryBus(), decider=decider, **kwargs)


def test_only_messages_of_their_own_decide() -> None:
    release = types.FinishedRelease(workload=REF, cluster_queue="cq", cause_seq=3, at_ms=0)
    admitted = types.WorkloadAdmitted(workload=REF, cluster_queue="cq", at_ms=0)
    assert not runtime._decides([])
    assert not runtime._decides([PENDING, release])  # the record's alone: nothing was admitted
    assert runtime._decides([PENDING, admitted])


async def test_the_wait_doubles_from_1_ms_to_10_ms_and_a_decision_resets_it() -> None:
    loop = loop_of()
    assert loop._slowed_for() == 0.0
    waits = []
    for _ in range(6):
        loop._paced(False)
        waits.append(loop._slowed_for())
    expected = [0.001, 0.002, 0.004, 0.008, 0.010, 0.010]
    assert all(e - 0.001 < w <= e for w, e in zip(waits, expected, strict=True)), waits
    loop._paced(True)
    assert loop._slowed_for() == 0.0 and loop._slow_step == 0
    loop._paced(False)
    assert 0 < loop._slowed_for() <= 0.001  # from the start again


async def test_stepped_loops_are_never_paced() -> None:
    loop = loop_of(stepped=True)
    loop._paced(False)
    assert loop._slowed_for() == 0.0


async def test_pending_only_cycles_are_spaced_while_facts_keep_coming(monkeypatch: pytest.MonkeyPatch) -> None:
    """Facts arrive every millisecond; every cycle records the same pending outcome. Consecutive cycles
    are at least the backoff apart (a loaded machine only spaces them more), and the facts in between
    are folded all the same. A partition nothing touches is decided only by the first sweep."""
    clock = asyncio.get_running_loop().time
    cycles: list[float] = []

    untouched: list[float] = []

    def decide(state: ClusterState, *, now_ms: int, partition: str) -> list[types.Output]:
        if partition != "p0":
            untouched.append(clock())
            return []
        cycles.append(clock())
        return [PENDING]

    loop = loop_of(decide, partitions=["p0", "p1"], wakeup=5.0, clock=lambda: 0)
    bus = loop.bus
    started = clock()
    task = asyncio.create_task(loop.run())
    try:
        for i in range(150):
            finished = types.WorkloadFinished(workload=types.WorkloadRef(namespace="default", name=f"w{i}"))
            await bus.publish(subjects.fact_message(finished))
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)
    finally:
        await cancel_and_wait([task])
    elapsed = clock() - started
    # every fact folded, and every cycle's record but perhaps the last (its commit under way at the stop)
    assert 150 + len(cycles) - 1 <= loop.state.last_seq <= 150 + len(cycles)
    assert len(cycles) >= 5
    gaps = [later - earlier for earlier, later in zip(cycles, cycles[1:], strict=False)]
    for i, gap in enumerate(gaps):
        floor = min(runtime.SLOW_DOWN_MAX, runtime.SLOW_DOWN_FIRST * 2**i)
        assert gap >= floor * 0.95, (i, gap, floor)
    assert len(cycles) <= elapsed / runtime.SLOW_DOWN_MAX + 5  # one per 10 ms at most, not one per fact
    assert len(untouched) == 1  # the first sweep's: the end of a wait sweeps nothing (the wakeup is 5 s)
