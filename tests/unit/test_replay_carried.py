"""``kueue-es replay`` on logs of event schema 17, whose DecisionRecords carry their cycle's decisions
(``DecisionRecord.decisions``, several at the record's sequence), and on the layout before it (an output
message per decision after its record): the re-run compares the record's bytes, and the completeness
checks match each dispatch result to its decision, a carried one by ``(record seq, decision_index)``.
"""

from __future__ import annotations

import msgspec
import pytest

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import OutgoingMessage
from kueue_es.replay import check_log, summary
from kueue_es.services.runtime import build_batch
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import FoldedLog, cluster_queue, flavor, local_queue, of_a_job, workload
from tests.unit.test_replay_streaming import small_log

NOW = 1_796_000_000_000
OLD = 16
"""The schema before decisions were carried: a message per decision."""


def admitted_log(schema: int) -> tuple[FoldedLog, int, list[types.WorkloadAdmitted]]:
    """Three workloads, each of its own ClusterQueue (Kueue admits one a ClusterQueue a cycle), admitted by
    one admitter cycle written in ``schema``: the log, the record's sequence and its admissions in order."""
    log = FoldedLog()
    names = ("a", "b", "c")
    docs = (
        flavor("f"),
        *(cluster_queue(f"cq-{name}", flavors={"f": {"cpu": 4}}) for name in names),
        *(local_queue(f"lq-{name}", f"cq-{name}") for name in names),
        *(workload(name, queue=f"lq-{name}", cpu="3", created=i) for i, name in enumerate(names, start=1)),
    )
    # Jobs' workloads: the dispatcher answers their admissions (a Workload of no job it answers with nothing)
    log.append(*[subjects.fact_message(of_a_job(kueue_fact(doc))) for doc in docs])
    outputs = list(deciders.ADMITTER.decide(log.state, now_ms=NOW))
    head, rest = build_batch(
        deciders.ADMITTER,
        outputs=outputs,
        basis_seq=log.state.last_seq,
        head_seq=0,
        now_ms=NOW,
        max_outputs=0,
        schema_version=schema,
    )
    record_seq = log.append(head) if not rest else log.append(head, *rest) - len(rest)
    admissions = [o for o in outputs if isinstance(o, types.WorkloadAdmitted)]
    assert [a.workload.name for a in admissions] == ["a", "b", "c"]
    assert log.orphans == []
    return log, record_seq, admissions


def where(schema: int, record_seq: int, index: int) -> tuple[int, int]:
    """``(decision_seq, decision_index)`` of decision ``index`` (1-based) of the record at ``record_seq``."""
    if schema >= 17:
        return record_seq, index
    return record_seq + index, 0  # its own message, right after the record


def batch_result(record_seq: int, entries: list[types.DispatchEntry]) -> OutgoingMessage:
    result = types.DispatchBatchApplied(partition="p0", record_seq=record_seq, entries=entries)
    return subjects.message(
        result, subject=subjects.record_dispatch_subject("p0", record_seq, "local"), msg_id=f"disp:test:{record_seq}"
    )


def entry(at: tuple[int, int], admission: types.WorkloadAdmitted) -> types.DispatchEntry:
    return types.DispatchEntry(decision_seq=at[0], decision_index=at[1], workload=admission.workload, action="StartJob")


@pytest.mark.parametrize("schema", [types.SCHEMA_VERSION, OLD])
def test_every_decision_a_batch_result_answers_is_dispatched(schema: int) -> None:
    log, record_seq, admissions = admitted_log(schema)
    record = codec.decode(log.messages[record_seq - 1].data)
    assert isinstance(record, types.DecisionRecord)
    assert len(record.carried) == (len(admissions) if schema >= 17 else 0)
    entries = [entry(where(schema, record_seq, i), a) for i, a in enumerate(admissions, start=1)]
    log.append(batch_result(record_seq, entries))
    report = check_log(log.messages, deciders.BY_ROLE)
    assert report.stray_dispatch == []
    assert report.undispatched == []
    assert report.mismatches == [] and report.matched == 1
    assert report.exit_code == 0


@pytest.mark.parametrize("schema", [types.SCHEMA_VERSION, OLD])
def test_a_decision_no_result_answers_is_a_warning_naming_its_sequence(schema: int) -> None:
    log, record_seq, admissions = admitted_log(schema)
    # only the first and the last answered: the second of the record waits
    answered = [entry(where(schema, record_seq, i), admissions[i - 1]) for i in (1, 3)]
    log.append(batch_result(record_seq, answered))
    report = check_log(log.messages, deciders.BY_ROLE)
    assert report.stray_dispatch == []
    assert report.undispatched == [where(schema, record_seq, 2)[0]]
    assert report.exit_code == 0
    assert any("1 decision has no dispatch result" in line for line, _ in summary(report))


def test_a_single_result_of_a_carried_decision_answers_its_workloads_decision_only() -> None:
    """The dispatcher's DispatchApplied (or DispatchFailed) of a carried decision names the record's
    sequence; its index is only in its Msg-Id: it answers its workload's decision in that record."""
    log, record_seq, admissions = admitted_log(types.SCHEMA_VERSION)
    second = admissions[1]
    result = types.DispatchFailed(
        workload=second.workload, decision_seq=record_seq, action="StartJob", status=422, reason="Invalid"
    )
    log.append(
        subjects.message(result, subject=subjects.dispatch_subject(second.workload), msg_id=f"disp:c:{record_seq}:2")
    )
    report = check_log(log.messages, deciders.BY_ROLE)
    assert report.stray_dispatch == []
    assert report.undispatched == [record_seq, record_seq]  # the first and the third, both of that record


def test_a_result_naming_a_decision_the_record_does_not_carry_is_stray() -> None:
    log, record_seq, admissions = admitted_log(types.SCHEMA_VERSION)
    entries = [entry((record_seq, i), a) for i, a in enumerate(admissions, start=1)]
    log.append(batch_result(record_seq, [*entries, entry((record_seq, 4), admissions[0])]))
    report = check_log(log.messages, deciders.BY_ROLE)
    assert [stray.why for stray in report.stray_dispatch] == [
        f"names decision 4 of #{record_seq}, which is not a recorded decision"
    ]
    assert report.exit_code == 4


def test_a_later_decision_of_the_same_record_supersedes_an_earlier_one_of_its_workload() -> None:
    """A workload's decisions supersede each other by their place in the log: (sequence, index)."""
    log, record_seq, admissions = admitted_log(types.SCHEMA_VERSION)
    entries = [entry((record_seq, i), a) for i, a in enumerate(admissions, start=1)]
    log.append(batch_result(record_seq, entries[1:]))  # the first unanswered
    report = check_log(log.messages, deciders.BY_ROLE)
    assert report.undispatched == [record_seq]


def test_a_changed_carried_decision_is_a_difference_of_its_record() -> None:
    """The re-run compares the record's bytes, which hold its decisions: a carried decision changed is
    a difference at the record (index 0), its field named."""
    messages = small_log()
    carrying = [
        m
        for m in messages
        if m.headers.get("Kq-Type") == "DecisionRecord" and b'"WorkloadAdmitted"' in m.data  # schema 17: in it
    ]
    assert carrying
    target = carrying[-1]
    record = codec.decode(target.data)
    assert isinstance(record, types.DecisionRecord) and record.output_count == 0
    index = next(i for i, d in enumerate(record.carried) if isinstance(d, types.WorkloadAdmitted))
    changed_decision = msgspec.structs.replace(record.carried[index], at_ms=record.carried[index].at_ms + 1)
    decisions = (*record.carried[:index], changed_decision, *record.carried[index + 1 :])
    forged = msgspec.structs.replace(target, data=codec.encode(msgspec.structs.replace(record, decisions=decisions)))
    report = check_log([forged if m.seq == target.seq else m for m in messages], deciders.BY_ROLE)
    assert report.exit_code == 1
    first = report.mismatches[0]
    assert (first.head_seq, first.index, first.seq) == (target.seq, 0, target.seq)
    assert [d.path for d in first.fields()] == [f"decisions[{index}].atMs"]


def test_the_bench_log_answers_its_carried_admissions() -> None:
    """``bench.core_log`` (schema 17) answers each carried admission with a DispatchApplied naming its
    record's sequence; replay matches every one, and none is a stray."""
    messages = small_log()
    results = [codec.decode(m.data) for m in messages if m.headers.get("Kq-Type") == "DispatchApplied"]
    heads = {m.seq for m in messages if m.headers.get("Kq-Type") == "DecisionRecord"}
    assert len(results) > 10
    assert all(isinstance(r, types.DispatchApplied) and r.decision_seq in heads for r in results)
    report = check_log(messages, deciders.BY_ROLE)
    assert report.exit_code == 0 and report.stray_dispatch == [] and report.undispatched == []
