"""Transient bus failures never end a service (issue 15, point 3).

A real nats-server, the admitter and the dispatcher (against the simulated API) run in this
process as ``kueue-es service`` runs them (observed by their :class:`Health`). Faults are
injected into nats-py's client: publishes of dispatch results, decision batches and the
dispatcher's pulls time out or find no responder, acks find the outgoing buffer full. Each
service is not ready during its fault, keeps running, and is ready and consuming again
afterwards with nothing lost: every workload reserved once, its Job started once. The
dispatcher's failing acks hold no later decision: its Job starts while they are retried.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import nats.aio.client
import nats.errors
import nats.js.client
import pytest

from kueue_es import deciders
from kueue_es.events import codec, models, subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus import server
from kueue_es.services.deciding import serve_decider
from kueue_es.services.dispatcher.simulated import serve_simulated_dispatcher
from kueue_es.services.health import Health
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload


class Faults:
    """Which nats-py calls fail now: requests (JetStream publishes, batches) on subjects with one of
    ``requests`` as prefix, pulls of durable consumers while ``pulls``, acks while ``acks``."""

    def __init__(self) -> None:
        self.requests: tuple[str, ...] = ()
        self.pulls = False
        self.acks = False
        self.injected = 0
        self._kinds = itertools.cycle([nats.errors.TimeoutError, nats.errors.NoRespondersError])

    def clear(self) -> None:
        self.requests, self.pulls, self.acks = (), False, False

    def fail(self) -> None:
        self.injected += 1
        raise next(self._kinds)()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        request = nats.aio.client.Client.request
        publish = nats.aio.client.Client.publish
        fetch = nats.js.client.JetStreamContext.PullSubscription.fetch
        faults = self

        async def faulty_request(client: Any, subject: str, *args: Any, **kwargs: Any) -> Any:
            if subject.startswith(faults.requests or ("\0",)):
                faults.fail()
            return await request(client, subject, *args, **kwargs)

        async def faulty_publish(client: Any, subject: str, *args: Any, **kwargs: Any) -> Any:
            if faults.acks and subject.startswith("$JS.ACK."):
                faults.injected += 1
                raise nats.errors.OutboundBufferLimitError
            return await publish(client, subject, *args, **kwargs)

        async def faulty_fetch(sub: Any, *args: Any, **kwargs: Any) -> Any:
            if faults.pulls:  # (a pull that times out is one that found nothing: not a fault)
                await asyncio.sleep(0.05)
                faults.injected += 1
                raise nats.errors.NoRespondersError
            return await fetch(sub, *args, **kwargs)

        monkeypatch.setattr(nats.aio.client.Client, "request", faulty_request)
        monkeypatch.setattr(nats.aio.client.Client, "publish", faulty_publish)
        monkeypatch.setattr(nats.js.client.JetStreamContext.PullSubscription, "fetch", faulty_fetch)


def job_workload(name: str) -> types.Fact:
    """A Workload made for the batch/v1 Job ``name`` (the dispatcher starts such a Job)."""
    fact = kueue_fact(workload(name, cpu="1"))
    assert isinstance(fact, types.WorkloadObserved)
    owner = models.OwnerReference(api_version="batch/v1", kind="Job", name=name, uid=f"job-{name}")
    return types.WorkloadObserved(workload=msgspec.structs.replace(fact.workload, owner=owner))


async def log_types(bus: nats_bus.NatsBus) -> list[tuple[str, str]]:
    """(Kq-Type, workload name) of every per-workload message on the log, and of every decision a record
    carries (event schema 17) as if it were its own message."""
    found = []
    for seq in range(1, await bus.last_seq() + 1):
        message = await bus.get(seq)
        event = codec.decode(message.data)
        if isinstance(event, types.DispatchBatchApplied):  # each entry as its own DispatchApplied
            found.extend(("DispatchApplied", entry.workload.name) for entry in event.entries)
            continue
        if isinstance(event, types.DecisionRecord):
            found.extend((codec.type_name(decision), decision.workload.name) for decision in event.carried)
            continue
        ref = getattr(event, "workload", None)
        if isinstance(ref, types.WorkloadRef):
            found.append((message.headers.get("Kq-Type", ""), ref.name))
    return found


async def until(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await asyncio.sleep(0.05)


async def until_logged(bus: nats_bus.NatsBus, want: tuple[str, str], *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while want not in await log_types(bus):
        assert time.monotonic() < deadline, f"not within {timeout} s: {want} on the log"
        await asyncio.sleep(0.2)


async def test_the_admitter_and_the_dispatcher_survive_timeouts_and_no_responders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dispatch results, decision batches, pulls and acks fail for a while: each service is not ready
    meanwhile (retrying, or its commit failing), keeps running, then admits and starts every Job once."""
    # the bus gives up early, so the services' own keep-trying (not the bus's) carries the faults
    monkeypatch.setattr(nats_bus, "PUBLISH_RETRY_SECONDS", 0.3)
    monkeypatch.setattr(nats_bus, "TRANSIENT_RETRY_SECONDS", 0.3)
    faults = Faults()
    async with server.NatsServer(tmp_path / "nats") as nats_server:
        url = nats_server.url
        writer = await nats_bus.connect(url)
        admitter, dispatcher = Health(service="admitter"), Health(service="dispatcher")
        stop = asyncio.Event()
        services = [
            asyncio.create_task(
                serve_decider(deciders.ADMITTER, nats_url=url, stop=stop, wakeup=0.2, connect=admitter.connect)
            ),
            asyncio.create_task(serve_simulated_dispatcher(nats_url=url, stop=stop, connect=dispatcher.connect)),
        ]

        def ready(health: Health) -> bool:
            return health.readiness()[0]

        def alive() -> None:
            assert not any(task.done() for task in services), [t.exception() for t in services if t.done()]

        try:
            for doc in (flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 8}}), local_queue("lq", "cq")):
                await writer.publish(subjects.fact_message(kueue_fact(doc)))
            await until(lambda: ready(admitter) and ready(dispatcher), timeout=30, what="both ready")
            faults.install(monkeypatch)

            # 1. the dispatcher's acks find the buffer full: the Job of a later decision starts all the same
            faults.acks = True
            await writer.publish(subjects.fact_message(job_workload("w1")))
            await until(lambda: "ack" in dispatcher.readiness()[1]["retrying"], timeout=30, what="ack retried")
            assert not ready(dispatcher)
            await writer.publish(subjects.fact_message(job_workload("w2")))
            await until_logged(writer, ("DispatchApplied", "w2"), timeout=30)
            assert faults.acks and not ready(dispatcher)  # w1's and w2's acks still failing
            facts = dispatcher.readiness()[1]
            assert facts["acks_outstanding"] >= 2 and facts["acks_failing"] is False, facts  # retried, not given up
            alive()

            # ... and its results time out / find no responder as well
            faults.requests = ("kq.disp.",)
            await writer.publish(subjects.fact_message(job_workload("w3")))
            await until(lambda: "publish" in dispatcher.readiness()[1]["retrying"], timeout=30, what="publish retried")
            assert not ready(dispatcher)
            await until(lambda: faults.injected >= 6, timeout=30, what="faults injected")
            alive()
            faults.clear()
            await until_logged(writer, ("DispatchApplied", "w3"), timeout=30)
            await until(lambda: ready(dispatcher), timeout=60, what="dispatcher ready again")
            assert dispatcher.readiness()[1]["acks_outstanding"] == 0

            # 2. the admitter's decision batches time out / find no responder
            faults.requests = ("kq.dec.",)
            injected = faults.injected
            await writer.publish(subjects.fact_message(job_workload("w4")))
            await until(lambda: admitter.readiness()[1].get("commit_failing", False), timeout=30, what="commit fails")
            assert not ready(admitter)
            await until(lambda: faults.injected >= injected + 3, timeout=30, what="commits retried")
            alive()
            faults.clear()
            await until_logged(writer, ("DispatchApplied", "w4"), timeout=30)
            await until(lambda: ready(admitter), timeout=30, what="admitter ready again")

            # 3. the dispatcher's pulls find no responder / time out
            faults.pulls = True
            await writer.publish(subjects.fact_message(job_workload("w5")))
            await until(lambda: "fetch" in dispatcher.readiness()[1]["retrying"], timeout=30, what="fetch retried")
            assert not ready(dispatcher)
            await until_logged(writer, ("WorkloadAdmitted", "w5"), timeout=30)
            alive()
            faults.clear()
            await until_logged(writer, ("DispatchApplied", "w5"), timeout=30)
            await until(lambda: ready(admitter) and ready(dispatcher), timeout=30, what="both ready at the end")

            found = await log_types(writer)
            for name in ("w1", "w2", "w3", "w4", "w5"):
                assert found.count(("WorkloadAdmitted", name)) == 1, found  # reserved and admitted at once
                assert found.count(("DispatchApplied", name)) == 1, found
            facts = dispatcher.readiness()[1]
            assert facts["consuming"] and facts["caught_up"] and facts["retrying"] == []
        finally:
            faults.clear()
            stop.set()
            await asyncio.gather(*services, return_exceptions=True)
            await writer.close()
        for task in services:
            assert task.exception() is None
