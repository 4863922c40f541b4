"""The decider loop on a bus, and replay re-checking what it committed."""

import asyncio

import msgspec

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.replay import check_log, replay_bus
from kueue_es.services.runtime import Decider, DeciderLoop, cancel_and_wait
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, reservations, workload
from tests.unit.test_replay_carried import admitted_log


async def publish(bus: MemoryBus, *docs: dict) -> None:
    for doc in docs:
        await bus.publish(subjects.fact_message(kueue_fact(doc)))


async def settle(bus: MemoryBus, loop: DeciderLoop, *, quiet: float = 0.3) -> None:
    """Wait until the loop has folded the whole log and committed nothing for ``quiet`` s."""
    last = -1
    while True:
        await asyncio.sleep(quiet)
        now = await bus.last_seq()
        if now == last and loop.state.last_seq == now:
            return
        last = now


async def run_quick_start(bus: MemoryBus) -> DeciderLoop:
    loop = DeciderLoop(bus=bus, decider=deciders.ADMITTER, clock=lambda: 1_000, wakeup=0.05)
    task = asyncio.create_task(loop.run())
    try:
        await publish(
            bus,
            flavor("default-flavor"),
            cluster_queue("cq", flavors={"default-flavor": {"cpu": 9, "memory": "36Gi"}}),
            local_queue("lq", "cq"),
        )
        await publish(bus, *(workload(f"job-{i}", count=3, created=i, cpu="1", memory="200Mi") for i in range(1, 5)))
        await settle(bus, loop)
        await bus.publish(
            subjects.fact_message(
                types.WorkloadFinished(workload=types.WorkloadRef(namespace="default", name="job-1", uid="uid-job-1"))
            )
        )
        await settle(bus, loop)
    finally:
        await cancel_and_wait([task])
    return loop


async def all_messages(bus: MemoryBus) -> list[LogMessage]:
    last = await bus.last_seq()
    out = []
    async for message in bus.read(start_seq=1):
        out.append(message)
        if message.seq >= last:
            return out
    return out


async def test_loop_admits_and_replay_matches() -> None:
    """The admitter loop commits batches under the head; replay reproduces every one."""
    bus = MemoryBus()
    loop = await run_quick_start(bus)
    state = loop.state
    assert sorted(k for k, w in state.workloads.items() if w.reservation) == [
        "default/job-2",
        "default/job-3",
        "default/job-4",
    ]
    assert state.usage["cq"]["default-flavor"]["cpu"] == 9000
    report = await replay_bus(bus, deciders.BY_ROLE)
    assert report.ok, report.mismatches
    assert report.decisions == loop.commits >= 2
    assert report.matched == report.decisions


async def test_replay_catches_a_tampered_decision() -> None:
    """Changing one stored decision's bytes is reported with the first differing event: since event schema
    17 the decision is carried in its record, whose bytes differ (index 0), at the decision's path."""
    bus = MemoryBus()
    await run_quick_start(bus)
    messages = await all_messages(bus)
    victim = next(
        m for m in messages if m.headers.get("Kq-Type") == "DecisionRecord" and b'"type":"WorkloadAdmitted"' in m.data
    )
    record = codec.decode(victim.data)
    assert isinstance(record, types.DecisionRecord) and record.output_count == 0
    index = next(i for i, d in enumerate(record.carried) if isinstance(d, types.WorkloadAdmitted))
    decisions = list(record.carried)
    decisions[index] = msgspec.structs.replace(decisions[index], cluster_queue="someone-else")
    forged = msgspec.structs.replace(record, decisions=tuple(decisions))
    tampered = [msgspec.structs.replace(m, data=codec.encode(forged)) if m.seq == victim.seq else m for m in messages]
    report = check_log(tampered, deciders.BY_ROLE)
    assert not report.ok
    first = report.mismatches[0]
    assert (first.head_seq, first.index) == (victim.seq, 0)
    assert "someone-else" in first.stored and "someone-else" not in first.replayed
    assert [d.path for d in first.fields()] == [f"decisions[{index}].clusterQueue"]


def test_replay_catches_a_tampered_decision_message_of_schema_16() -> None:
    """On an older log (event schema 16, a message per decision) the differing output message is named."""
    log, record_seq, _ = admitted_log(16)
    victim = next(m for m in log.messages if m.headers.get("Kq-Type") == "WorkloadAdmitted")
    forged = msgspec.structs.replace(codec.decode(victim.data), cluster_queue="someone-else")
    tampered = [
        msgspec.structs.replace(m, data=codec.encode(forged)) if m.seq == victim.seq else m for m in log.messages
    ]
    report = check_log(tampered, deciders.BY_ROLE)
    assert not report.ok
    first = report.mismatches[0]
    assert first.head_seq == record_seq < victim.seq == first.seq
    assert "someone-else" in first.stored and "someone-else" not in first.replayed


async def test_replay_catches_a_dropped_fact() -> None:
    """Removing a fact from the log changes some decision's basis: replay reports it."""
    bus = MemoryBus()
    await run_quick_start(bus)
    messages = await all_messages(bus)
    dropped = next(m for m in messages if m.subject.startswith("kq.in.wl.") and b"job-4" in m.data)
    report = check_log([m for m in messages if m.seq != dropped.seq], deciders.BY_ROLE)
    assert not report.ok


async def test_stale_batch_is_rejected_and_loop_recovers() -> None:
    """A second decider committing on the same head makes the first refold, never double-book."""
    bus = MemoryBus()
    first = DeciderLoop(bus=bus, decider=deciders.ADMITTER, clock=lambda: 1, wakeup=0.02)
    second = DeciderLoop(bus=bus, decider=deciders.ADMITTER, clock=lambda: 2, wakeup=0.02)
    tasks = [asyncio.create_task(first.run()), asyncio.create_task(second.run())]
    try:
        await publish(bus, flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 4}}), local_queue("lq", "cq"))
        await publish(bus, *(workload(f"w{i}", created=i, cpu="1") for i in range(8)))
        await settle(bus, first)
    finally:
        await cancel_and_wait(tasks)
    decisions = [  # carried in their records since event schema 17, else messages of their own
        decision
        for m in await all_messages(bus)
        if m.subject.startswith("kq.dec.")
        for decision in types.with_carried(codec.decode(m.data))
        if not isinstance(decision, types.DecisionRecord)
    ]
    reserved = reservations(decisions)  # one WorkloadAdmitted each: no admission checks here
    assert len(reserved) == 4  # 4 CPU: exactly four 1-CPU workloads, whoever committed them
    assert len({r.workload.name for r in reserved}) == 4
    assert first.state.usage["cq"]["f"]["cpu"] == 4000
    report = await replay_bus(bus, deciders.BY_ROLE)
    assert report.ok and report.decisions == first.commits + second.commits


async def test_undecodable_event_does_not_stop_the_loop() -> None:
    """A broken message on the log is skipped; later facts are still folded and decided."""
    bus = MemoryBus()
    loop = DeciderLoop(bus=bus, decider=deciders.ADMITTER, clock=lambda: 1, wakeup=0.02)
    task = asyncio.create_task(loop.run())
    try:
        from kueue_es.events.bus.base import OutgoingMessage

        await bus.publish(OutgoingMessage(subject="kq.in.wl.default.broken", data=b"{not json", msg_id="broken"))
        await publish(
            bus,
            flavor("f"),
            cluster_queue("cq", flavors={"f": {"cpu": 1}}),
            local_queue("lq", "cq"),
            workload("ok", cpu="1"),
        )
        await settle(bus, loop)
    finally:
        await cancel_and_wait([task])
    assert loop.state.workloads["default/ok"].reservation is not None
    assert (await replay_bus(bus, deciders.BY_ROLE)).ok


async def test_stepped_loop_answers_cycle_and_settle_requests() -> None:
    """Stepped: one cycle per `cycle` request (committed even when empty); `settle` answered when idle."""
    bus = MemoryBus()
    loop = DeciderLoop(bus=bus, decider=deciders.ADMITTER, clock=lambda: 7, wakeup=0.02, stepped=True)
    task = asyncio.create_task(loop.run())
    try:
        await publish(bus, flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 4}}), local_queue("lq", "cq"))
        await publish(bus, *(workload(f"w{i}", created=i, cpu="1") for i in range(3)))
        await asyncio.sleep(0.2)
        assert loop.commits == 0  # stepped: nothing without a request
        await bus.publish(subjects.fact_message(types.SchedulingRequested(request_id="c1", mode="cycle")))
        await settle(bus, loop)
        assert sorted(k for k, w in loop.state.workloads.items() if w.reservation) == ["default/w0"]
        await bus.publish(subjects.fact_message(types.SchedulingRequested(request_id="s1", mode="settle")))
        await settle(bus, loop)
    finally:
        await cancel_and_wait([task])
    assert sorted(k for k, w in loop.state.workloads.items() if w.reservation) == [
        "default/w0",
        "default/w1",
        "default/w2",
    ]
    records = [codec.decode(m.data) for m in await all_messages(bus) if m.headers.get("Kq-Type") == "DecisionRecord"]
    assert [r.answers for r in records if r.answers] == ["c1", "s1"]
    assert records[-1].output_count == 0 and not loop.state.requests
    assert (await replay_bus(bus, deciders.BY_ROLE)).ok


async def test_loop_never_decides_on_half_a_batch() -> None:
    """A reader may see a batch's DecisionRecord before the batch's other messages (seen in
    the demo: an admitter nominated again because it had folded a PreemptionIssued but not
    its evictions). The loop waits until the whole batch is folded before deciding. Since event
    schema 17 the record carries its decisions and is the whole batch; an older log's batch (schema
    16, written here) still comes in pieces."""
    seen = await _decide_on_pieces_of_a_batch(schema=16)
    assert seen and min(seen) == 3


async def test_a_record_carrying_its_decisions_is_a_whole_batch_to_the_loop() -> None:
    """Schema 17: the same batch is its record alone, folded whole, decisions included: the loop decides
    on it at once."""
    seen = await _decide_on_pieces_of_a_batch(schema=types.SCHEMA_VERSION)
    assert seen and min(seen) == 1


async def _decide_on_pieces_of_a_batch(*, schema: int) -> list[int]:
    """A probe decider loop fed a batch of two decisions written in ``schema``: the record first, the rest
    0.15 s later (asserting nothing was decided before, when there is a rest); the basis
    (``state.last_seq``) of each of its cycles."""
    seen: list[int] = []

    def decide(state, *, now_ms: int, partition: str = "p0") -> list[types.Decision]:  # noqa: ANN001
        seen.append(state.last_seq)
        return []

    bus = MemoryBus()
    loop = DeciderLoop(
        bus=bus,
        decider=Decider(role="probe", logic_version=1, decide=decide),
        partitions=["p0"],  # no ClusterQueue here: the legacy partition decides over the whole state
        clock=lambda: 1_000,
        wakeup=0.02,
        stepped=False,
    )
    ref = types.WorkloadRef(namespace="default", name="w", uid="u")
    outputs = [
        types.WorkloadInadmissible(workload=ref, reason="Pending", message="m", at_ms=1),
        types.WorkloadInadmissible(workload=ref, reason="Pending", message="n", at_ms=1),
    ]
    from kueue_es.services.runtime import build_batch

    head, rest = build_batch(
        deciders.ADMITTER, outputs=outputs, basis_seq=0, head_seq=0, now_ms=1, schema_version=schema
    )
    assert len(rest) == (0 if schema >= 17 else 2)
    await bus.commit_batch(head=head, expected_head_seq=0, rest=rest)  # stored whole, delivered in pieces
    messages = [
        LogMessage(seq=i, subject=m.subject, data=m.data, headers={**m.headers, "Nats-Msg-Id": m.msg_id}, pending=0)
        for i, m in enumerate([head, *rest], start=1)
    ]
    task = asyncio.create_task(loop._loop())
    try:
        await loop._inbox.put(messages[0])  # the record alone, looking caught up
        await asyncio.sleep(0.15)
        if rest:
            assert seen == []
        for message in messages[1:]:
            await loop._inbox.put(message)
        await asyncio.sleep(0.15)
    finally:
        await cancel_and_wait([task])
    return seen


def test_a_batch_is_cut_between_workloads() -> None:
    """A cycle's outputs over the batch limit are cut where one workload's decisions end, so a
    QuotaReserved never goes without its WorkloadAdmitted."""
    from kueue_es.services.runtime import cut_batch

    def pair(name: str) -> list[types.Decision]:
        ref = types.WorkloadRef(namespace="ns", name=name)
        return [
            types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[], at_ms=1),
            types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=1),
        ]

    outputs = pair("a") + pair("b") + pair("c")
    assert cut_batch(outputs, 3) == outputs[:2]
    assert cut_batch(outputs, 4) == outputs[:4]
    assert cut_batch(outputs, 10) == outputs
    assert cut_batch(pair("a") * 3, 4) == (pair("a") * 3)[:4]  # one workload only: cut at the limit
