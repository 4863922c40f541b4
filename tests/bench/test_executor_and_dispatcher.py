"""The simulated cluster side of the bench: the executor, and the dispatcher's simulated API writes."""

from __future__ import annotations

import asyncio

import pytest

from kueue_es import deciders
from kueue_es.events import codec, models, subjects, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.perfbench.executor import Executor
from kueue_es.services.dispatcher.kube_api import WriteLimiter
from kueue_es.services.dispatcher.service import bind_decisions
from kueue_es.services.dispatcher.simulated import SimulatedDispatcher, UnlimitedWrites, simulated_limiter
from kueue_es.services.runtime import build_batch, cancel_and_wait

pytestmark = pytest.mark.timeout(20)

REF = types.WorkloadRef(namespace="ns", name="w", uid="u1")


def applied(action: str, seq: int) -> types.DispatchApplied:
    return types.DispatchApplied(workload=REF, decision_seq=seq, action=action)


def kinds(executor: Executor) -> list[str]:
    return [m.headers["Kq-Type"] for m in Executor.messages(executor.outbox)]


async def test_a_started_workload_finishes_after_its_runtime_and_reports_nothing_else() -> None:
    # Kueue's runner sets only Finished: no pods-ready fact, no second run for a second copy
    loop = asyncio.get_running_loop()
    executor = Executor(runtime_ms={"ns/w": 50}, clock=lambda: int(loop.time() * 1000))
    started = loop.time()
    executor.observe(applied("StartJob", 7))
    executor.observe(applied("StartJob", 7))  # a second copy starts nothing
    assert kinds(executor) == [] and executor.started == 1
    # bounds that hold on a loaded machine: the finish is due at its runtime, and never comes earlier
    assert executor.running["ns/w"].when() - started >= 0.049
    while not executor.outbox:
        await asyncio.sleep(0.005)
    assert loop.time() - started >= 0.049  # not before its runtime
    assert kinds(executor) == ["WorkloadFinished"]
    finished = codec.decode(Executor.messages(executor.outbox)[0].data)
    assert isinstance(finished, types.WorkloadFinished) and finished.workload == REF
    assert executor.running == {}


async def test_an_evicted_workload_loses_its_run_and_runs_its_full_runtime_again() -> None:
    loop = asyncio.get_running_loop()
    seen: list[types.Fact] = []
    executor = Executor(runtime_ms={"ns/w": 60}, clock=lambda: int(loop.time() * 1000), on_fact=seen.append)
    executor.observe(applied("StartJob", 7))
    await asyncio.sleep(0.04)
    executor.observe(types.EvictionRequested(workload=REF, cluster_queue="cq", reason="Preempted", message="", at_ms=0))
    executor.observe(applied("Evict", 9))
    stopped = seen[-1]
    assert isinstance(stopped, types.WorkloadStopped) and stopped.reason == "Preempted"
    executor.observe(applied("StartJob", 12))  # readmitted: the full 60 ms again
    restarted = loop.time()
    while not any(isinstance(f, types.WorkloadFinished) for f in seen):
        await asyncio.sleep(0.005)
    assert loop.time() - restarted >= 0.055
    assert [type(f).__name__ for f in seen] == ["WorkloadStopped", "WorkloadFinished"]


async def test_each_entry_of_a_batch_result_starts_or_stops_its_workload() -> None:
    other = types.WorkloadRef(namespace="ns", name="v", uid="u2")
    executor = Executor(runtime_ms={"ns/w": 60_000, "ns/v": 60_000}, clock=lambda: 0)
    executor.observe(
        types.DispatchBatchApplied(
            partition="p0",
            record_seq=6,
            entries=[
                types.DispatchEntry(decision_seq=7, workload=REF, action="StartJob"),
                types.DispatchEntry(decision_seq=8, workload=other, action="StartJob"),
            ],
        )
    )
    assert executor.started == 2 and set(executor.running) == {"ns/w", "ns/v"}
    executor.observe(
        types.DispatchBatchApplied(
            partition="p0",
            record_seq=9,
            entries=[types.DispatchEntry(decision_seq=10, workload=other, action="Evict")],
        )
    )
    assert set(executor.running) == {"ns/w"} and executor.stopped == 1
    for handle in executor.running.values():
        handle.cancel()


def test_the_simulated_limiter_is_none_or_client_gos() -> None:
    assert isinstance(simulated_limiter(None), UnlimitedWrites)
    assert isinstance(simulated_limiter(0), UnlimitedWrites)
    capped = simulated_limiter(50)
    assert (capped.qps, capped.burst) == (50, 100)
    with pytest.raises(ValueError, match="qps"):
        simulated_limiter(-1)


async def test_the_uncapped_simulated_dispatcher_has_uncapped_event_writes_too() -> None:
    """The Events' limiter is made like the dispatcher's: for the uncapped bench, another UnlimitedWrites."""
    bus = MemoryBus()
    dispatcher = SimulatedDispatcher(bus=bus, limiter=simulated_limiter(None))
    assert isinstance(dispatcher.event_limiter, UnlimitedWrites) and dispatcher.event_limiter.qps == float("inf")
    await dispatcher.event_limiter.acquire()
    assert dispatcher.event_limiter.writes == 1 and dispatcher.limiter.writes == 0
    await bus.close()


async def test_each_admission_is_one_limited_write_then_dispatch_applied() -> None:
    bus = MemoryBus()
    workloads = []
    for i in range(3):
        ref = types.WorkloadRef(namespace="ns", name=f"w{i}", uid=f"u{i}")
        workloads.append(ref)
        wl = models.Workload(
            metadata=models.ObjectMeta(name=ref.name, namespace="ns", uid=ref.uid),
            spec=models.WorkloadSpec(queue_name="lq", pod_sets=[models.PodSet(requests={"cpu": 1000})]),
            owner=models.OwnerReference(api_version="batch/v1", kind="Job", name=ref.name, uid=f"job-{i}"),
        )
        await bus.publish(subjects.fact_message(types.WorkloadObserved(workload=wl)))
    decisions: list[types.Decision] = []
    for ref in workloads:
        assignment = types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 1000}, count=1)
        decisions += [
            types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=1),
            types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=1),
        ]
    # one committed batch, as the admitter commits it: only verified batches count
    head, rest = build_batch(deciders.ADMITTER, outputs=decisions, basis_seq=await bus.last_seq(), head_seq=0, now_ms=1)
    await bus.commit_batch(head=head, expected_head_seq=0, rest=rest)
    limiter = WriteLimiter(qps=20, burst=1)  # 3 writes: the 2nd and 3rd wait 50 ms each
    dispatcher = SimulatedDispatcher(bus=bus, limiter=limiter)
    consumer = await bind_decisions(bus)
    folding = asyncio.create_task(dispatcher.fold_forever())
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        await dispatcher.handle_batch(consumer, await consumer.fetch(batch=50, timeout=1.0))
    finally:
        await cancel_and_wait([folding])
    assert loop.time() - started >= 0.09
    assert limiter.writes == 3
    stored = [codec.decode(m.data) async for m in _log(bus) if m.subject.startswith("kq.disp.")]
    assert [type(r) for r in stored] == [types.DispatchBatchApplied]  # one record, one pass: one result
    results = [r for event in stored for r in types.dispatch_results(event)]
    assert [(r.workload.name, r.action) for r in results] == [
        ("w0", "StartJob"),
        ("w1", "StartJob"),
        ("w2", "StartJob"),
    ]
    assert await consumer.fetch(batch=50, timeout=0.05) == []  # every decision acked


async def _log(bus: MemoryBus):  # type: ignore[no-untyped-def]
    last = await bus.last_seq()
    async for message in bus.read(subjects=("kq.>",), start_seq=1):
        yield message
        if message.seq >= last:
            return


async def test_the_harness_reader_makes_a_batch_results_entries_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness's reader hands each entry of a DispatchBatchApplied to the recorder and the executor
    as a DispatchApplied made once for both (issue 18: each made them all again)."""
    from kueue_es.perfbench import driver, metrics

    batch = types.DispatchBatchApplied(
        partition="p0",
        record_seq=6,
        entries=[
            types.DispatchEntry(decision_seq=7, workload=REF, action="StartJob"),
            types.DispatchEntry(decision_seq=8, workload=REF, action="Evict"),
        ],
    )
    made = 0
    applied = types.DispatchBatchApplied.applied

    def counted(self: types.DispatchBatchApplied) -> list[types.DispatchApplied]:
        nonlocal made
        made += 1
        return applied(self)

    monkeypatch.setattr(types.DispatchBatchApplied, "applied", counted)
    bus = MemoryBus()
    await bus.publish(subjects.message(batch, subject=subjects.record_dispatch_subject("p0", 6), msg_id="disp-6"))
    recorder = metrics.Recorder()
    executor = Executor(runtime_ms={"ns/w": 60_000}, clock=lambda: 0)
    done = asyncio.Event()
    reader = asyncio.create_task(
        driver._read(bus, recorder, executor, total=0, done=done, last={})  # type: ignore[arg-type]
    )
    await asyncio.wait_for(done.wait(), 5)
    await cancel_and_wait([reader])
    assert made == 1
    assert (executor.started, executor.stopped, executor.running) == (1, 1, {})
    assert kinds(executor) == ["WorkloadStopped"]
