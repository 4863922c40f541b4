"""Replay as an audit (issue 13): records it cannot re-check, the services' output cut,
an incomplete log (gaps, orphans, dispatch results of no decision), field-level diffs.

Most cases start from the recorded preemption demo (tests/fixtures/logs/demo-preempt.jsonl,
87 messages, 22 decisions, every one matching) and change one thing.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.replay import ReplayReport, check_log, replay_bus, summary
from kueue_es.scenarios.core_engine import SEED
from kueue_es.services.runtime import MAX_BATCH, Decider, DeciderLoop, build_batch, cancel_and_wait
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import flavor
from tests.unit.test_golden_log import _load


def golden() -> list[LogMessage]:
    return _load("demo-preempt.jsonl")


def text(report: ReplayReport, *, max_diffs: int = 10) -> str:
    return "\n".join(line for line, _ in summary(report, max_diffs=max_diffs))


def replace_record(messages: list[LogMessage], seq: int, **changes: object) -> list[LogMessage]:
    """``messages`` with the DecisionRecord at ``seq`` re-encoded with ``changes``."""
    out = []
    for message in messages:
        if message.seq == seq:
            record = codec.decode(message.data)
            assert isinstance(record, types.DecisionRecord)
            message = msgspec.structs.replace(message, data=codec.encode(msgspec.structs.replace(record, **changes)))
        out.append(message)
    return out


def append(messages: list[LogMessage], event: types.Event, *, subject: str, msg_id: str) -> list[LogMessage]:
    outgoing = subjects.message(event, subject=subject, msg_id=msg_id)
    headers = {**outgoing.headers, "Nats-Msg-Id": msg_id}
    return [*messages, LogMessage(seq=messages[-1].seq + 1, subject=subject, data=outgoing.data, headers=headers)]


def records(messages: list[LogMessage]) -> list[tuple[int, types.DecisionRecord]]:
    found = []
    for message in messages:
        if message.headers.get("Kq-Type") == "DecisionRecord":
            record = codec.decode(message.data)
            assert isinstance(record, types.DecisionRecord)
            found.append((message.seq, record))
    return found


def test_the_golden_log_is_complete_and_exits_0() -> None:
    report = check_log(golden(), deciders.BY_ROLE)
    assert (report.exit_code, report.gaps, report.orphans, report.stray_dispatch) == (0, [], [], [])
    assert report.last_seq == 87
    assert "every decision matched; the log is complete" in text(report)


# --- records replay cannot re-check ----------------------------------------------------------


def test_a_record_of_another_logic_version_is_unverifiable_and_names_its_kueue_es_version() -> None:
    messages = golden()
    seq, record = records(messages)[0]
    report = check_log(
        replace_record(messages, seq, logic_version=record.logic_version - 1, kueue_es_version="0.0.9"),
        deciders.BY_ROLE,
    )
    assert not report.mismatches
    assert report.exit_code == 3 and not report.ok
    assert [(u.head_seq, u.kueue_es_version) for u in report.unverifiable] == [(seq, "0.0.9")]
    assert report.matched == report.decisions - 1
    out = text(report)
    assert "pip install kueue-es==0.0.9" in out
    assert "every decision matched" not in out


def test_a_record_of_an_unknown_role_is_unverifiable() -> None:
    without_preemptor = {role: d for role, d in deciders.BY_ROLE.items() if d is not deciders.PREEMPTOR}
    report = check_log(golden(), without_preemptor)
    preempting = [seq for seq, r in records(golden()) if r.role == deciders.PREEMPTOR.role]
    assert preempting
    assert [u.head_seq for u in report.unverifiable] == preempting
    assert report.exit_code == 3
    out = text(report)
    assert f"role {deciders.PREEMPTOR.role!r}" in out
    assert "made before records carried the kueue-es version" in out  # the fixture predates the field


def test_a_seed_batch_is_unverifiable_with_its_own_line() -> None:
    messages = golden()
    head, _ = build_batch(SEED, outputs=[], basis_seq=87, head_seq=records(messages)[-1][0], now_ms=1)
    messages.append(
        LogMessage(seq=88, subject=head.subject, data=head.data, headers={**head.headers, "Nats-Msg-Id": head.msg_id})
    )
    report = check_log(messages, deciders.BY_ROLE)
    assert report.exit_code == 3
    assert [u.head_seq for u in report.seeds] == [88]
    assert "1 seed batches" in text(report)


def test_a_difference_wins_over_unverifiable_records() -> None:
    messages = golden()
    victim = next(m for m in messages if m.headers.get("Kq-Type") == "QuotaReserved")
    messages = [
        msgspec.structs.replace(m, data=m.data.replace(b'"cluster-queue"', b'"cluster-queuf"', 1))
        if m.seq == victim.seq
        else m
        for m in messages
    ]
    without_preemptor = {role: d for role, d in deciders.BY_ROLE.items() if d is not deciders.PREEMPTOR}
    report = check_log(messages, without_preemptor)
    assert report.unverifiable and report.mismatches
    assert report.exit_code == 1


# --- the output cut --------------------------------------------------------------------------

BULK_WORKLOADS = 2 * MAX_BATCH + 100


def bulk_decide(state: object, *, now_ms: int, partition: str = "p0") -> list[types.Decision]:
    """More than MAX_BATCH outputs while the log is short: one per workload not yet decided."""
    decided = getattr(state, "last_seq", 0)
    return [
        types.WorkloadInadmissible(
            workload=types.WorkloadRef(namespace="bulk", name=f"w{i:04d}"),
            reason="Pending",
            message="bulk",
            at_ms=now_ms,
        )
        for i in range(decided, BULK_WORKLOADS)
    ]


BULK = Decider(
    role="admit", logic_version=1, decide=bulk_decide
)  # an admitter of another logic: its outputs are kinds the admitter makes


async def bulk_log() -> tuple[MemoryBus, DeciderLoop]:
    bus = MemoryBus()
    await bus.publish(subjects.fact_message(kueue_fact(flavor("f"))))  # the loop decides once caught up with something
    loop = DeciderLoop(bus=bus, decider=BULK, partitions=["p0"], clock=lambda: 7, wakeup=0.01)
    task = asyncio.create_task(loop.run())
    try:
        for _ in range(600):
            await asyncio.sleep(0.02)
            if loop.commits and not bulk_decide(loop.state, now_ms=0) and loop.state.last_seq == await bus.last_seq():
                break
    finally:
        await cancel_and_wait([task])
    return bus, loop


async def test_batches_cut_at_max_batch_replay_with_their_recorded_cut() -> None:
    """The decider loop cuts a cycle's outputs at MAX_BATCH; replay re-runs the cut the record names."""
    bus, loop = await bulk_log()
    report = await replay_bus(bus, {BULK.role: BULK})
    assert loop.commits >= 3
    assert report.decisions == loop.commits
    assert report.mismatches == []
    assert report.exit_code == 0
    _, stored = await _all(bus)
    # since event schema 17 a record carries its decisions (no output messages)
    cut = [r for _, r in records(stored) if r.output_count + len(r.carried) == MAX_BATCH]
    assert len(cut) >= 2 and all(r.max_outputs == MAX_BATCH for r in cut)


async def test_a_record_claiming_a_cut_no_rule_allows_is_a_difference() -> None:
    bus, _ = await bulk_log()
    last, messages = await _all(bus)
    seq, _ = records(messages)[0]
    report = check_log(replace_record(messages, seq, max_outputs=3), {BULK.role: BULK}, last_seq=last)
    assert report.exit_code == 1
    assert [m.head_seq for m in report.mismatches] == [seq]
    assert "output cut of 3" in text(report)


async def _all(bus: MemoryBus) -> tuple[int, list[LogMessage]]:
    last = await bus.last_seq()
    out = []
    async for message in bus.read(start_seq=1):
        out.append(message)
        if message.seq >= last:
            break
    return last, out


def test_new_records_carry_the_cut_and_the_version_and_old_ones_re_encode_unchanged() -> None:
    from kueue_es import __version__

    head, _ = build_batch(deciders.ADMITTER, outputs=[], basis_seq=1, head_seq=0, now_ms=1, max_outputs=MAX_BATCH)
    record = codec.decode(head.data)
    assert isinstance(record, types.DecisionRecord)
    assert (record.max_outputs, record.kueue_es_version) == (MAX_BATCH, __version__)
    for message in golden():
        if message.headers.get("Kq-Type") == "DecisionRecord":
            assert codec.encode(codec.decode(message.data)) == message.data


# --- an incomplete log -----------------------------------------------------------------------


def test_a_missing_dispatch_message_is_a_gap() -> None:
    messages = golden()
    dropped = next(m for m in messages if m.headers.get("Kq-Type") == "DispatchApplied")
    report = check_log([m for m in messages if m.seq != dropped.seq], deciders.BY_ROLE)
    assert report.gaps == [(dropped.seq, dropped.seq)]
    assert report.exit_code != 0
    assert f"gap: #{dropped.seq} missing" in text(report)


def test_messages_missing_at_the_end_are_a_gap_when_the_last_sequence_is_known() -> None:
    messages = golden()
    last_head = records(messages)[-1][0]  # cut before the last batch: the rest still matches
    report = check_log(messages[: last_head - 1], deciders.BY_ROLE, last_seq=87)
    assert report.gaps == [(last_head, 87)]
    assert report.mismatches == []
    assert report.exit_code == 4
    assert f"gap: #{last_head}..#87 missing" in text(report)


def test_a_forged_decision_without_a_record_is_an_orphan() -> None:
    forged = types.QuotaReserved(
        workload=types.WorkloadRef(namespace="default", name="intruder"),
        cluster_queue="cluster-queue",
        pod_set_assignments=[],
        at_ms=1,
    )
    messages = append(golden(), forged, subject="kq.dec.p0.wl.default.intruder", msg_id="admit:p0:999:1")
    report = check_log(messages, deciders.BY_ROLE)
    assert [(o.seq, o.type) for o in report.orphans] == [(88, "QuotaReserved")]
    assert report.exit_code == 4
    assert "orphan: #88 QuotaReserved" in text(report)


def test_a_non_record_on_the_head_subject_is_an_orphan() -> None:
    forged = types.WorkloadAdmitted(
        workload=types.WorkloadRef(namespace="default", name="x"), cluster_queue="cq", at_ms=1
    )
    messages = append(golden(), forged, subject=subjects.head_subject("admit"), msg_id="x")
    report = check_log(messages, deciders.BY_ROLE)
    assert [o.seq for o in report.orphans] == [88]
    assert report.exit_code == 4


def test_a_dispatch_result_naming_no_decision_is_reported() -> None:
    result = types.DispatchApplied(
        workload=types.WorkloadRef(namespace="default", name="x"), decision_seq=3, action="StartJob"
    )
    messages = append(golden(), result, subject="kq.disp.local.wl.default.x", msg_id="disp:local:3")
    report = check_log(messages, deciders.BY_ROLE)
    assert [s.seq for s in report.stray_dispatch] == [88]
    assert report.exit_code == 4
    assert "names #3, which is not a recorded decision" in text(report)


def test_admissions_an_eviction_overtook_need_no_dispatch_result() -> None:
    """The demo's preemption evicted two workloads whose admission the dispatcher had not written
    yet: it wrote their latest state (the eviction), so replay warns about neither."""
    messages = golden()
    report = check_log(messages, deciders.BY_ROLE)
    admitted = {m.seq for m in messages if m.headers.get("Kq-Type") == "WorkloadAdmitted"}
    answered = {codec.decode(m.data).decision_seq for m in messages if m.subject.startswith("kq.disp.")}  # type: ignore[union-attr]
    assert admitted - answered, "the recorded demo has admissions without a result of their own"
    assert report.undispatched == []
    assert report.exit_code == 0
    assert "no dispatch result" not in text(report)


def test_a_decision_whose_dispatch_never_came_is_only_a_warning() -> None:
    """A log read before the dispatcher's first result: the decisions it had not answered yet
    are a warning naming them, exit 0."""
    messages = golden()
    first_result = next(i for i, m in enumerate(messages) if m.subject.startswith("kq.disp."))
    waiting = codec.decode(messages[first_result].data).decision_seq  # type: ignore[union-attr]
    early = messages[:first_result]
    report = check_log(early, deciders.BY_ROLE)
    kinds = {m.seq: m.headers.get("Kq-Type") for m in early}
    assert waiting in report.undispatched
    assert {kinds[seq] for seq in report.undispatched} <= {"WorkloadAdmitted", "EvictionRequested"}
    assert report.exit_code == 0
    assert f"warning: {len(report.undispatched)} decisions have no dispatch result (#{waiting}" in text(report)


def test_a_decision_whose_workload_finished_needs_no_dispatch_result() -> None:
    """An unanswered decision whose workload finished before the dispatcher reached it (large-scale
    bench, issue 18: the preemptor evicted small workloads whose finish landed between its basis and
    its commit, or the dispatcher, far behind, came to the eviction after the job had finished): the
    dispatcher writes nothing for it, so replay counts it apart and does not warn; the others stay."""
    messages = golden()
    first_result = next(i for i, m in enumerate(messages) if m.subject.startswith("kq.disp."))
    early = messages[:first_result]
    waiting = check_log(early, deciders.BY_ROLE).undispatched
    assert len(waiting) >= 2
    by_seq = {m.seq: codec.decode(m.data) for m in early}
    done = by_seq[waiting[0]]
    assert isinstance(done, types.WorkloadAdmitted | types.EvictionRequested)
    fact = types.WorkloadFinished(workload=done.workload, at_ms=1)
    outgoing = subjects.fact_message(fact, version="fin")
    finished_log = append(early, fact, subject=outgoing.subject, msg_id=outgoing.msg_id)
    report = check_log(finished_log, deciders.BY_ROLE)
    same_workload = [s for s in waiting if by_seq[s].workload.key == done.workload.key]  # type: ignore[union-attr]
    assert report.nothing_to_write == same_workload
    assert report.undispatched == [s for s in waiting if s not in same_workload]
    assert report.exit_code == 0
    lines = text(report)
    need = "decision needs" if len(same_workload) == 1 else "decisions need"
    have = "decision has" if len(report.undispatched) == 1 else "decisions have"
    assert f"{len(same_workload)} {need} no dispatch result (#{waiting[0]}" in lines
    assert f"warning: {len(report.undispatched)} {have} no dispatch result" in lines


# --- differences, field by field --------------------------------------------------------------


def test_a_perturbed_decision_names_the_field_and_both_values() -> None:
    messages = golden()
    victim = next(m for m in messages if m.headers.get("Kq-Type") == "QuotaReserved")
    messages = [
        msgspec.structs.replace(m, data=m.data.replace(b'"cluster-queue"', b'"cluster-queuf"', 1))
        if m.seq == victim.seq
        else m
        for m in messages
    ]
    report = check_log(messages, deciders.BY_ROLE)
    first = report.mismatches[0]
    assert first.seq == victim.seq
    assert [(d.path, d.stored, d.replayed) for d in first.fields()] == [
        ("clusterQueue", "cluster-queuf", "cluster-queue")
    ]
    out = text(report)
    assert f"decision {first.decision_id} at #{victim.seq}" in out
    assert 'clusterQueue: "cluster-queuf" -> "cluster-queue"' in out


def test_every_record_is_checked_and_max_diffs_limits_the_listing() -> None:
    messages = golden()
    perturbed = {m.seq for m in messages if m.headers.get("Kq-Type") == "WorkloadInadmissible"}
    messages = [
        msgspec.structs.replace(m, data=m.data.replace(b'"reason":"', b'"reason":"X', 1)) if m.seq in perturbed else m
        for m in messages
    ]
    report = check_log(messages, deciders.BY_ROLE)
    assert len(report.mismatches) >= 3
    out = text(report, max_diffs=2)
    assert "difference 2:" in out and "difference 3:" not in out
    assert f"and {len(report.mismatches) - 2} more differences" in out


@pytest.mark.parametrize(
    ("stored", "replayed", "expected"),
    [
        ('{"a":{"b":[1,2]}}', '{"a":{"b":[1,3]}}', [("a.b[1]", 2, 3)]),
        ('{"a":1}', '{"a":1,"c":true}', [("c", "<missing>", True)]),
        ("", '{"a":1}', [("", "<missing>", {"a": 1})]),
        ("not json", "{}", [("", "not json", "{}")]),
    ],
)
def test_field_diff_paths(stored: str, replayed: str, expected: list[tuple[str, object, object]]) -> None:
    from kueue_es.replay import field_diff

    assert [(d.path, d.stored, d.replayed) for d in field_diff(stored, replayed)] == expected


class _Truncated(MemoryBus):
    """A log whose last sequence is ``last`` but whose messages after the stored ones are gone."""

    def __init__(self, last: int) -> None:
        super().__init__()
        self.last = last

    async def last_seq(self) -> int:
        return self.last


async def test_reading_stops_when_the_last_messages_are_gone() -> None:
    from kueue_es.replay import read_log

    bus = _Truncated(last=5)
    for name in ("a", "b", "c"):
        await bus.publish(subjects.fact_message(kueue_fact(flavor(name))))
    messages, last = await read_log(bus, idle=30)
    assert ([m.seq for m in messages], last) == ([1, 2, 3], 5)
    assert check_log(messages, deciders.BY_ROLE, last_seq=last).gaps == [(4, 5)]


async def test_reading_a_log_whose_every_message_is_gone_does_not_hang() -> None:
    from kueue_es.replay import read_log

    messages, last = await read_log(_Truncated(last=5), idle=0.2)
    assert (messages, last) == ([], 5)
    report = check_log(messages, deciders.BY_ROLE, last_seq=last)
    assert (report.gaps, report.exit_code) == ([(1, 5)], 4)


def as_record_results(messages: list[LogMessage]) -> list[LogMessage]:
    """``messages`` with each DispatchApplied replaced, at its sequence, by the DispatchBatchApplied of
    schema version 5 answering the same decision on its record's subject."""
    heads = [seq for seq, _ in records(messages)]
    out = []
    for message in messages:
        event = codec.decode(message.data)
        if isinstance(event, types.DispatchApplied):
            record_seq = max(seq for seq in heads if seq < event.decision_seq)
            entry = types.DispatchEntry(
                decision_seq=event.decision_seq,
                workload=event.workload,
                action=event.action,
                target=event.target,
                node_selector=event.node_selector,
            )
            batch = types.DispatchBatchApplied(partition="p0", record_seq=record_seq, entries=[entry])
            subject = subjects.record_dispatch_subject("p0", record_seq)
            outgoing = subjects.message(batch, subject=subject, msg_id=f"disp:local:rec:p0:{record_seq}:0:x")
            headers = {**outgoing.headers, "Nats-Msg-Id": outgoing.msg_id}
            message = LogMessage(seq=message.seq, subject=subject, data=outgoing.data, headers=headers)
        out.append(message)
    return out


def test_dispatch_results_per_record_answer_their_decisions() -> None:
    messages = as_record_results(golden())
    assert any(m.headers.get("Kq-Type") == "DispatchBatchApplied" for m in messages)
    assert not any(m.headers.get("Kq-Type") == "DispatchApplied" for m in messages)
    report = check_log(messages, deciders.BY_ROLE)
    assert (report.exit_code, report.gaps, report.orphans, report.stray_dispatch) == (0, [], [], [])
    assert report.undispatched == [] and report.matched == check_log(golden(), deciders.BY_ROLE).matched


def test_an_entry_naming_no_decision_is_reported() -> None:
    ref = types.WorkloadRef(namespace="default", name="x")
    batch = types.DispatchBatchApplied(
        partition="p0", record_seq=2, entries=[types.DispatchEntry(decision_seq=3, workload=ref, action="StartJob")]
    )
    messages = append(golden(), batch, subject=subjects.record_dispatch_subject("p0", 2), msg_id="disp:local:rec:x")
    report = check_log(messages, deciders.BY_ROLE)
    assert [s.seq for s in report.stray_dispatch] == [88]
    assert "names #3, which is not a recorded decision" in text(report)
