"""The Kubernetes Events of a batch are written at least once across a dispatcher crash.

Found by a new user's trial: a Job lost its ``Started`` Event ("Admitted by clusterQueue ...") when the
dispatcher was SIGKILLed right after unsuspending it (the Job itself ran): the batch's decisions were acked
as soon as their results were stored, and its Events written only after, so a kill in between lost them
for good. The acks now follow the Events: the next dispatcher gets the decisions again, carries them out
again (nothing changes on the server) and writes their Events under the same names.
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
    dispatcher_with_consumer,
    job,
    log_entries,
    running,
    wait_until,
    watch_all,
)
from tests.integration.test_workload_objects import eventually, set_up

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]


async def _events_about(api, name: str) -> list[dict[str, Any]]:
    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    return [e for e in listed if (e.get("regarding") or e.get("involvedObject") or {}).get("name") == name]


async def test_a_dispatcher_killed_between_a_job_start_and_its_events_leaves_them_to_the_next(
    api, bus: MemoryBus
) -> None:
    first, consumer = await dispatcher_with_consumer(bus, api, ack_wait=1.0)
    reached = asyncio.Event()

    async def killed_here(*args: object, **kwargs: object) -> None:  # the process dies before its Events
        reached.set()
        await asyncio.Event().wait()

    first.record_events = killed_here  # type: ignore[method-assign]
    async with running(*watch_all(Watcher(bus=bus, api=api)), admitter(bus).run()):
        async with running(first.fold_forever(), first.consume(consumer)):
            await set_up(api)
            await kube.apply_manifest(api, job("a", parallelism=1))
            await eventually(api, JOBS, namespace="default", name="a", check=lambda o: o["spec"]["suspend"] is False)
            await asyncio.wait_for(reached.wait(), timeout=10)
            await asyncio.sleep(0.3)  # its result is on the log, and what would be acked by now is
        assert any(isinstance(e, types.DispatchBatchApplied) for _, e in await log_entries(bus))
        assert not [e for e in await _events_about(api, "a") if e["reason"] == "Started"]

        restarted, restarted_consumer = await dispatcher_with_consumer(bus, api, ack_wait=1.0)
        async with running(restarted.fold_forever(), restarted.consume(restarted_consumer)):
            await wait_until(lambda: restarted.events_written >= 1, timeout=20.0, what="the restarted one's Events")
            await asyncio.sleep(0.5)
        started = [e for e in await _events_about(api, "a") if e["reason"] == "Started"]

    assert len(started) == 1, started
    assert "Admitted by clusterQueue cluster-queue" in str(started[0].get("note") or started[0].get("message"))
