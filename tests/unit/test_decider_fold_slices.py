"""A decider folds a backlog in slices, so its other tasks (lease renewals, ``/readyz``) run meanwhile.

``DeciderLoop._drain`` took every message waiting in its inbox without awaiting anything: after a
restart or a stall the whole backlog was folded in one go. At a load of 17 on two cores that took
seconds, the holder's lease renewals came past their deadline and it stepped down (and took its
slots again) over and over (issue 15's chaos runs). It now lets the event loop run every
``FOLD_SLICE`` messages.
"""

from __future__ import annotations

import asyncio

from kueue_es.events import subjects
from kueue_es.events.bus.base import LogMessage
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services import runtime
from kueue_es.services.runtime import Decider, DeciderLoop
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload
from tests.publisher_log import stored


def backlog(count: int) -> list[LogMessage]:
    docs = [flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 4}}), local_queue("lq", "cq")]
    docs += [workload(f"w{i}", cpu="1") for i in range(count - len(docs))]
    return stored([subjects.fact_message(kueue_fact(doc)) for doc in docs])


async def test_a_backlog_is_folded_in_slices_that_let_other_tasks_run() -> None:
    decider = Decider(role="admit", logic_version=1, decide=lambda state, now_ms: [])
    loop = DeciderLoop(bus=MemoryBus(), decider=decider)
    messages = backlog(4 * runtime.FOLD_SLICE + 10)
    for message in messages:
        loop._inbox.put_nowait(message)
    ticks_during_drain = 0
    draining = True

    async def renewals() -> None:  # stands for the lease's renewal task
        nonlocal ticks_during_drain
        while draining:
            ticks_during_drain += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(renewals())
    await asyncio.sleep(0)  # the ticker starts
    ticks_before = ticks_during_drain
    assert await loop._drain(timeout=1.0)
    draining = False
    await ticker
    assert loop.state.last_seq == len(messages)  # every message folded, in one drain
    assert loop._caught_up
    # the other task ran between the slices: at least once per FOLD_SLICE messages
    assert ticks_during_drain - ticks_before >= len(messages) // runtime.FOLD_SLICE
