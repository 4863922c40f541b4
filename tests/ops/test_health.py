"""services/health.py: the probes and the metrics of a service, on a memory bus and over HTTP."""

from __future__ import annotations

import asyncio

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.health import Health, serve_health
from kueue_es.services.runtime import DeciderLoop, cancel_and_wait
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload


def samples(text: str | bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text exposition, keyed by name and sorted labels."""
    if isinstance(text, bytes):
        text = text.decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def get(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as response:
        return response.status, await response.text()


async def publish(bus: MemoryBus, *docs: dict) -> None:
    for doc in docs:
        await bus.publish(subjects.fact_message(kueue_fact(doc)))


async def test_probes_and_metrics_of_two_admitters_on_one_log() -> None:
    """Not ready before connecting; ready once caught up; commits, conflicts and events folded are counted."""
    bus = MemoryBus()
    await publish(bus, flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 4}}), local_queue("lq", "cq"))
    first, second = Health(service="admitter"), Health(service="admitter")
    async with serve_health(first, port=0, host="127.0.0.1") as url, aiohttp.ClientSession() as session:
        status, body = await get(session, f"{url}/healthz")
        assert status == 200 and '"alive": true' in body
        status, body = await get(session, f"{url}/readyz")
        assert status == 503 and '"nats_connected": false' in body

        loops = [
            DeciderLoop(bus=await health.observe(bus), decider=deciders.ADMITTER, clock=lambda: 1, wakeup=0.02)
            for health in (first, second)
        ]
        tasks = [asyncio.create_task(loop.run()) for loop in loops]
        try:
            await publish(bus, *(workload(f"w{i}", created=i, cpu="1") for i in range(8)))
            async with asyncio.timeout(20):
                while (await bus.last_seq()) != loops[0].state.last_seq or sum(lp.commits for lp in loops) < 1:
                    await asyncio.sleep(0.1)
                await asyncio.sleep(0.3)
            status, body = await get(session, f"{url}/readyz")
            assert status == 200, body
            status, text = await get(session, f"{url}/metrics")
        finally:
            await cancel_and_wait(tasks)
    assert status == 200
    found = samples(text)
    label = (("service", "admitter"),)
    assert found["kueue_es_decisions_committed_total", label] == loops[0].commits
    assert found["kueue_es_commit_conflicts_total", label] == loops[0].conflicts
    assert found["kueue_es_events_folded_total", label] >= loops[0].state.last_seq - 1
    assert found["kueue_es_fold_lag_messages", label] == 0
    assert found["kueue_es_ready", label] == 1
    assert found["kueue_es_leader", label] == 1
    both = samples(second.metrics())
    reserved = (("service", "admitter"), ("type", "WorkloadAdmitted"))  # no checks: one message reserves and admits
    # each reservation was committed by exactly one of the two; a rejected batch publishes nothing
    assert (
        found.get(("kueue_es_published_total", reserved), 0) + both.get(("kueue_es_published_total", reserved), 0) == 4
    )
    assert sum(1 for w in loops[0].state.workloads.values() if w.reservation is not None) == 4
    assert both["kueue_es_decisions_committed_total", label] == loops[1].commits
    assert both["kueue_es_commit_conflicts_total", label] == loops[1].conflicts


async def test_dispatch_results_are_counted_once() -> None:
    """DispatchApplied and DispatchFailed count as writes and failures; a duplicate Msg-Id counts nothing."""
    health = Health(service="dispatcher")
    bus = await health.observe(MemoryBus())
    ref = types.WorkloadRef(namespace="default", name="w", uid="u")
    applied = types.DispatchApplied(workload=ref, decision_seq=1, action="StartJob", target="Job default/w")
    failed = types.DispatchFailed(workload=ref, decision_seq=2, action="Evict", status=403, reason="Forbidden")
    for event, msg_id in ((applied, "disp:a"), (applied, "disp:a"), (failed, "disp:b")):
        await bus.publish(subjects.message(event, subject=subjects.dispatch_subject(ref, "c"), msg_id=msg_id))
    found = samples(health.metrics())
    label = (("service", "dispatcher"),)
    assert found["kueue_es_dispatch_writes_total", label] == 1
    assert found["kueue_es_dispatch_failures_total", label] == 1
    assert health.readiness() == (
        True,
        {
            "service": "dispatcher",
            "role": "sole",
            "nats_connected": True,
            "consuming": True,
            "readers": 0,
            "readers_consuming": 0,
            "caught_up": True,
            "lag": 0,
            "retrying": [],
        },
    )


def test_a_standby_is_ready_while_it_reaches_the_lease() -> None:
    health = Health(service="watcher", lease_duration=0.2)
    health.role = "candidate"
    assert health.readiness()[0] is False  # never heard from the API server
    health.lease_contact()
    health.role = "standby"
    assert health.readiness() == (True, {"service": "watcher", "role": "standby", "lease_reachable": True})
    assert samples(health.metrics())["kueue_es_leader", (("service", "watcher"),)] == 0


async def test_orphans_are_counted_and_a_stalled_decider_is_not_ready() -> None:
    """Issue 13: serve_decider reports orphaned messages to the Health its observed bus carries
    (garbage on the head: counted, skipped, admission goes on), and adds the loop's readiness,
    which turns false once a batch has gone uncommitted for ``stall_after`` seconds."""
    from kueue_es.events.bus.base import ConflictError, OutgoingMessage
    from kueue_es.services.deciding import serve_decider

    health = Health(service="admitter")
    bus = MemoryBus()
    await bus.publish(OutgoingMessage(subject=subjects.head_subject("admit"), data=b"garbage", msg_id="g"))
    await publish(bus, flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 4}}), local_queue("lq", "cq"))
    await publish(bus, workload("w", cpu="1"))
    stop = asyncio.Event()

    async def connect(_: str) -> object:
        return await health.observe(bus.share())

    task = asyncio.create_task(serve_decider(deciders.ADMITTER, nats_url="", stop=stop, wakeup=0.02, connect=connect))
    try:
        async with asyncio.timeout(10):
            while "WorkloadAdmitted" not in await _types(bus):
                await asyncio.sleep(0.05)
    finally:
        stop.set()
        await task
    found = samples(health.metrics())
    assert found["kueue_es_orphan_decisions_total", (("reason", "not_a_record"), ("service", "admitter"))] == 1
    assert found["kueue_es_orphan_decisions_total", (("reason", "outside_batch"), ("service", "admitter"))] == 0
    assert health.readiness()[0] and health.readiness()[1]["stalled"] is False

    class Fenced(MemoryBus):
        async def commit_batch(self, **_: object) -> int:
            raise ConflictError("fenced")

    now = [0.0]
    fenced = Fenced()
    await publish(fenced, flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 4}}), local_queue("lq", "cq"))
    await publish(fenced, workload("w", cpu="1"))
    stalled = Health(service="admitter")
    loop = DeciderLoop(
        bus=await stalled.observe(fenced), decider=deciders.ADMITTER, wakeup=0.02, monotonic=lambda: now[0]
    )
    stalled.add_check(loop.readiness)
    running = asyncio.create_task(loop.run())
    try:
        async with asyncio.timeout(10):
            while not loop.conflicts:
                await asyncio.sleep(0.02)
        assert stalled.readiness()[0]
        now[0] = 31.0
        ready, facts = stalled.readiness()
        assert not ready and facts["stalled"] and facts["caught_up"]
        assert samples(stalled.metrics())["kueue_es_ready", (("service", "admitter"),)] == 0
    finally:
        await cancel_and_wait([running])


async def _types(bus: MemoryBus) -> list[str]:
    """The types of the log's messages, and of the decisions each DecisionRecord carries (schema 17)."""
    out = []
    for seq in range(1, await bus.last_seq() + 1):
        message = await bus.get(seq)
        out.append(message.headers.get("Kq-Type", ""))
        if out[-1] == "DecisionRecord":
            out.extend(codec.type_name(d) for d in types.with_carried(codec.decode(message.data))[1:])
    return out


async def test_a_service_that_holds_the_log_to_its_end_without_reading_is_caught_up() -> None:
    """A watcher started from a snapshot at the log's end reads nothing; saying it holds everything to
    the end it knew (``folded_through``) makes it caught up, and nothing short of that end does."""
    log_bus = MemoryBus()
    for i in range(3):
        finished = types.WorkloadFinished(workload=types.WorkloadRef(namespace="default", name=f"w{i}"), at_ms=i)
        await log_bus.publish(subjects.fact_message(finished, version="1"))
    assert await log_bus.last_seq() == 3
    health = Health(service="watcher")
    bus = await health.observe(log_bus.share())
    assert not health.caught_up
    bus.folded_through(2)
    assert not health.caught_up
    bus.folded_through(3)
    assert health.caught_up


def test_the_carried_decisions_of_a_record_are_counted_by_their_tags() -> None:
    """``published_total`` counts each decision a DecisionRecord carries under its own type; only the tags are
    read (the whole record is not decoded again). Any other message, a record of an older schema and one that
    does not decode carry none."""
    from kueue_es.events.bus.base import OutgoingMessage
    from kueue_es.services.health import carried_decisions
    from kueue_es.services.runtime import build_batch

    ref = types.WorkloadRef(namespace="default", name="w", uid="u")
    outputs = [
        types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=1),
        types.EvictionRequested(workload=ref, cluster_queue="cq", reason="Preempted", message="m", at_ms=1),
        types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=2),
    ]
    head, rest = build_batch(deciders.ADMITTER, outputs=outputs, basis_seq=3, head_seq=0, now_ms=1)
    assert not rest
    assert carried_decisions(head) == ["WorkloadAdmitted", "EvictionRequested", "WorkloadAdmitted"]
    old, old_rest = build_batch(
        deciders.ADMITTER, outputs=outputs, basis_seq=3, head_seq=0, now_ms=1, schema_version=16
    )
    assert carried_decisions(old) == [] and len(old_rest) == 3  # each a message of its own, counted as such
    broken = OutgoingMessage(subject=head.subject, data=b'{"decisions": 7', msg_id="x", headers=head.headers)
    assert carried_decisions(broken) == []
    assert carried_decisions(rest[0] if rest else old_rest[0]) == []


def _orphan_series(health: Health) -> dict[str, float]:
    """``kueue_es_orphan_decisions_total`` by reason, of ``health``'s service, as /metrics shows it."""
    return {
        dict(labels)["reason"]: value
        for (name, labels), value in samples(health.metrics()).items()
        if name == "kueue_es_orphan_decisions_total" and dict(labels)["service"] == health.service
    }


async def test_the_orphan_series_are_exported_at_zero_from_the_start() -> None:
    """docs/subscribing.md names ``kueue_es_orphan_decisions_total{service="publisher"}``: the publisher, the
    dispatcher and the deciders export it for every reason at 0 as soon as they start, not only (HELP and
    TYPE before) once the first orphan came; the first orphan then counts 1."""
    from types import SimpleNamespace

    from kueue_es.projections import batches
    from kueue_es.services.dispatcher import service as dispatcher_service
    from kueue_es.services.publisher.service import Publisher

    publisher_health = Health(service="publisher")
    publisher = Publisher(bus=await publisher_health.observe(MemoryBus()), health=publisher_health)
    assert _orphan_series(publisher_health) == dict.fromkeys(batches.REASONS, 0)
    publisher.on_orphan(batches.Orphan(seq=3, subject="kq.dec._.head.admitter", reason="not_a_record", detail=""))
    assert _orphan_series(publisher_health) == {**dict.fromkeys(batches.REASONS, 0), "not_a_record": 1}

    dispatcher_health = Health(service="dispatcher")
    settling = SimpleNamespace(readiness=lambda: (True, {"acks_outstanding": 0, "acks_retrying": 0}))
    dispatcher = SimpleNamespace(on_orphan=None, settling=settling)
    dispatcher_service.observe(dispatcher, await dispatcher_health.observe(MemoryBus()))  # type: ignore[arg-type]
    assert _orphan_series(dispatcher_health) == dict.fromkeys(batches.REASONS, 0)

    assert _orphan_series(Health(service="watcher")) == {}  # a service that counts no orphans exports none
