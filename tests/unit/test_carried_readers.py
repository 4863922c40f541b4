"""The log's readers outside the services on event schema 17 (a DecisionRecord carries its cycle's
decisions, ``DecisionRecord.decisions``) and on the layout before it (an output message per decision):
the bench harness's reader (``perfbench.driver._read``), the MultiKueue demo's timeline, the bus scenario
engine's answer to a request, and ``bench.core_log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools

import pytest
from rich.console import Console

from kueue_es import deciders
from kueue_es.bench import core_log
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.perfbench import driver, metrics
from kueue_es.perfbench.executor import Executor
from kueue_es.services.runtime import build_batch

OLD = 16
"""The schema before decisions were carried: a message per decision."""
SCHEMAS = [types.SCHEMA_VERSION, OLD]
A = types.WorkloadRef(namespace="ns", name="a", uid="uid-a")
B = types.WorkloadRef(namespace="ns", name="b", uid="uid-b")


async def commit(bus: MemoryBus, decider: deciders.Decider, outputs: list[types.Output], schema: int) -> int:
    """Commit one batch of ``outputs`` written in ``schema``; the record's sequence."""
    head, rest = build_batch(
        decider, outputs=outputs, basis_seq=await bus.last_seq(), head_seq=0, now_ms=5_000, schema_version=schema
    )
    record = codec.decode(head.data)
    assert isinstance(record, types.DecisionRecord)
    assert (len(record.carried), len(rest)) == ((len(outputs), 0) if schema >= 17 else (0, len(outputs)))
    ack = await bus.publish(head)
    for message in rest:
        await bus.publish(message)
    return ack.seq


async def until(condition: object, *, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)


@pytest.mark.parametrize("schema", SCHEMAS)
async def test_the_bench_harness_reads_carried_decisions(schema: int) -> None:
    bus = MemoryBus()
    reserved = types.QuotaReserved(workload=A, cluster_queue="cq", pod_set_assignments=[], at_ms=5_000)
    eviction = types.EvictionRequested(workload=B, cluster_queue="cq", reason="Preempted", message="", at_ms=5_000)
    record_seq = await commit(bus, deciders.ADMITTER, [reserved, eviction], schema)
    recorder = metrics.Recorder()
    executor = Executor(runtime_ms={}, clock=lambda: 5_000)
    last: dict[str, tuple[int, str]] = {}
    task = asyncio.create_task(
        driver._read(bus, recorder, executor, total=10, done=asyncio.Event(), last=last)  # type: ignore[arg-type]
    )
    try:
        await until(lambda: "ns/b" in executor.eviction_reason)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert recorder.held["ns/a"][0] == "cq"
    assert executor.eviction_reason == {"ns/b": "Preempted"}
    # the latest decision of each workload, kept under its per-workload decision subject for a stall's report
    seq_of = (lambda i: record_seq) if schema >= 17 else (lambda i: record_seq + i)
    assert last[subjects.workload_decision_subject(A, "p0")] == (seq_of(1), "QuotaReserved")
    assert last[subjects.workload_decision_subject(B, "p0")] == (seq_of(2), "EvictionRequested")


@pytest.mark.parametrize("schema", SCHEMAS)
async def test_the_multikueue_timeline_sees_carried_decisions(schema: int) -> None:
    from kueue_es.multikueue_demo import MultiKueueTimeline

    bus = MemoryBus()
    chosen = types.RemoteAdmissionChosen(workload=A, check="mk", cluster="worker-2", message="admitted", at_ms=1)
    retry = types.MultiKueueCheckRetry(workload=B, check="mk", message="lost", at_ms=1)
    await commit(bus, deciders.MULTIKUEUE, [chosen, retry], schema)
    out = io.StringIO()
    printer = MultiKueueTimeline(bus=bus, console=Console(file=out, width=200))
    task = asyncio.create_task(printer.follow())
    try:
        await until(lambda: printer.chosen and printer.retried)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert printer.chosen == {"ns/a": "worker-2"}
    assert printer.retried == {"ns/b"}
    assert "runs on" in out.getvalue() and "retry" in out.getvalue()


async def test_the_multikueue_timeline_prints_a_remote_write_once() -> None:
    """A DispatchApplied of a remote write is one ``remote`` line: it was noted both as the message's event and as
    its dispatch result, and printed twice (found by a new user's trial)."""
    from kueue_es.multikueue_demo import MultiKueueTimeline

    bus = MemoryBus()
    applied = types.DispatchApplied(workload=A, decision_seq=1, action="create-remote-workload", target="worker-2/ns/a")
    await bus.publish(subjects.message(applied, subject=subjects.dispatch_subject(A, "worker-2"), msg_id="d1"))
    out = io.StringIO()
    printer = MultiKueueTimeline(bus=bus, console=Console(file=out, width=200))
    task = asyncio.create_task(printer.follow())
    try:
        await until(lambda: "create-remote-workload" in out.getvalue())
        await asyncio.sleep(0.05)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert out.getvalue().count("create-remote-workload") == 1, out.getvalue()


@pytest.mark.parametrize("schema", SCHEMAS)
async def test_the_bus_engine_returns_the_decisions_a_record_answers_with(schema: int) -> None:
    from kueue_es.scenarios.bus_engine import _BusRun

    bus = MemoryBus()
    engine = _BusRun.__new__(_BusRun)  # only its bus and request counter: no services started
    engine.bus = bus
    engine.requests = itertools.count(1)

    async def publish(event: types.Event) -> None:
        await bus.publish(subjects.fact_message(event))  # type: ignore[arg-type]

    engine._publish = publish  # type: ignore[method-assign]
    reserved = types.QuotaReserved(workload=A, cluster_queue="cq", pod_set_assignments=[], at_ms=5_000)
    admitted = types.admitted(reserved, at_ms=5_000)

    async def answer() -> None:
        async with asyncio.timeout(5):
            while await bus.last_seq() < 1:  # the request is on the log
                await asyncio.sleep(0.01)
        head, rest = build_batch(
            deciders.ADMITTER,
            outputs=[reserved, admitted],
            basis_seq=await bus.last_seq(),
            head_seq=0,
            now_ms=5_000,
            answers="admit-cycle-1",
            schema_version=schema,
        )
        await bus.publish(head)
        for message in rest:
            await bus.publish(message)

    answering = asyncio.create_task(answer())
    record, outputs = await engine._request("cycle", role="admit")
    await answering
    assert record.answers == "admit-cycle-1"
    assert outputs == [reserved, admitted]


def test_the_bench_log_writes_both_layouts() -> None:
    """``core_log`` answers each admission with a DispatchApplied naming it: in schema 17 the record's
    sequence (a carried decision), before it the admission's own message."""
    for schema in SCHEMAS:
        messages = list(core_log(events=800, cohorts=1, queues_per_cohort=3, scale=0.2, schema_version=schema))
        kinds = {m.seq: m.headers.get("Kq-Type") for m in messages}
        results = [codec.decode(m.data) for m in messages if m.headers.get("Kq-Type") == "DispatchApplied"]
        assert results, schema
        named = {kinds[r.decision_seq] for r in results if isinstance(r, types.DispatchApplied)}
        assert named == ({"DecisionRecord"} if schema >= 17 else {"WorkloadAdmitted"}), schema
