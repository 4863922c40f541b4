"""``cancel_and_wait`` stops a loop whose first cancellation is lost, as happens on Python 3.11 when a
cancel races a completing ``asyncio.wait_for`` (nats-py's requests use one; the bench's log sampler,
cancelled once at the end of a run, kept polling and the run never ended)."""

from __future__ import annotations

import asyncio

import pytest

from kueue_es.services.runtime import cancel_and_wait


async def _sampler_losing_first_cancel(polls: list[int]) -> None:
    """A polling loop whose first cancellation is swallowed, like a request's wait_for that completed."""
    lost = False
    while True:
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            if lost:
                raise
            lost = True  # the race: the request's result wins, the loop goes on
        polls.append(1)


@pytest.mark.asyncio
async def test_one_cancel_does_not_stop_such_a_loop() -> None:
    polls: list[int] = []
    task = asyncio.create_task(_sampler_losing_first_cancel(polls))
    await asyncio.sleep(0.05)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=0.3)
    assert not done  # what the bench's clean-up waited on for ever
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.asyncio
async def test_cancel_and_wait_stops_it_and_a_normal_task() -> None:
    polls: list[int] = []
    stubborn = asyncio.create_task(_sampler_losing_first_cancel(polls))
    plain = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0.05)
    await asyncio.wait_for(cancel_and_wait([stubborn, plain], retry=0.05), timeout=5)
    assert stubborn.cancelled() and plain.cancelled()
