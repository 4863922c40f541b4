"""``kueue-es replay --jobs N`` without checkpoints: parts re-checked in forked processes from the
parent's fold (kueue_es.replay_ranges.replay_forked) give the one-pass report, difference for
difference, gap for gap, orphan for orphan.

Small logs (a few thousand messages) from ``kueue_es.bench.core_log``; the 1M-event figures are
in docs/benchmarks.md.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from kueue_es import deciders
from kueue_es.bench import core_log
from kueue_es.cli import main
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.logfile import LineReader, read_lines, write_lines
from kueue_es.replay import ReplayReport, check_log, find_records, replay_file
from kueue_es.replay_ranges import Source, replay_forked, split
from kueue_es.services.runtime import Decider


@pytest.fixture(scope="module")
def messages() -> list[LogMessage]:
    return list(core_log(events=4_000, cohorts=2, queues_per_cohort=5, scale=0.5))


@pytest.fixture(scope="module")
def old_messages() -> list[LogMessage]:
    """The layout before event schema 17: an output message per decision after its record."""
    return list(core_log(events=4_000, cohorts=2, queues_per_cohort=5, scale=0.5, schema_version=16))


def forked(path: Path, *, jobs: int = 2, parts_per_job: int = 3) -> ReplayReport:
    return replay_forked(Source(file=path), deciders.BY_ROLE, jobs=jobs, parts_per_job=parts_per_job)


def written(tmp_path: Path, messages: list[LogMessage]) -> Path:
    path = tmp_path / "log.jsonl"
    write_lines(path, messages)
    return path


def test_an_untouched_log_gives_the_one_pass_report(messages: list[LogMessage], tmp_path: Path) -> None:
    path = written(tmp_path, messages)
    one_pass = replay_file(path, deciders.BY_ROLE)
    assert one_pass.exit_code == 0 and one_pass.matched == one_pass.decisions > 20
    for jobs, parts in ((2, 3), (1, 1), (3, 2)):
        assert forked(path, jobs=jobs, parts_per_job=parts) == one_pass, (jobs, parts)


@pytest.mark.parametrize("where", ["late", "early"])
def test_a_perturbed_output_is_found_at_the_same_sequence(
    old_messages: list[LogMessage], tmp_path: Path, where: str
) -> None:
    """One output changed: late in the log, only its decision differs; early, its batch is
    orphaned (its digest no longer matches), so the fold changes and later decisions, in every
    part, differ too. Either way the parts report what one pass reports, in the same order."""
    messages = old_messages
    reserved = [m for m in messages if m.headers.get("Kq-Type") == "WorkloadAdmitted"]
    last_record = max(m.seq for m in messages if m.headers.get("Kq-Type") == "DecisionRecord")
    victim = last_record + 1 if where == "late" else reserved[len(reserved) // 10].seq  # late: in the last batch
    changed = [
        msgspec.structs.replace(m, data=m.data.replace(b'"type":', b'"type": ', 1)) if m.seq == victim else m
        for m in messages
    ]
    path = written(tmp_path, changed)
    one_pass = replay_file(path, deciders.BY_ROLE)
    assert one_pass.mismatches[0].seq == victim
    assert len(one_pass.mismatches) == 1 if where == "late" else len(one_pass.mismatches) > 5
    report = forked(path)
    assert report == one_pass
    assert report.exit_code == 1


@pytest.mark.parametrize("where", ["late", "early"])
def test_a_perturbed_carried_decision_is_found_at_its_record(
    messages: list[LogMessage], tmp_path: Path, where: str
) -> None:
    """Schema 17: a record's bytes changed where they hold a carried decision (its decoded value the
    same): a difference of that record alone, at the record (event 0), in one pass and in the parts."""
    carrying = [m for m in messages if m.headers.get("Kq-Type") == "DecisionRecord" and b'"WorkloadAdmitted"' in m.data]
    victim = carrying[-1 if where == "late" else len(carrying) // 10].seq
    changed = [
        msgspec.structs.replace(m, data=m.data.replace(b'"WorkloadAdmitted"', b'"WorkloadAdmitted" ', 1))
        if m.seq == victim
        else m
        for m in messages
    ]
    path = written(tmp_path, changed)
    one_pass = replay_file(path, deciders.BY_ROLE)
    assert [(m.seq, m.index) for m in one_pass.mismatches] == [(victim, 0)]
    report = forked(path)
    assert report == one_pass
    assert report.exit_code == 1


def test_gaps_orphans_and_unverifiable_records_match_one_pass(messages: list[LogMessage], tmp_path: Path) -> None:
    """A message deleted (a gap), a forged decision outside any batch (an orphan) and a record of
    another logic version (not re-checked): the parent's completeness pass and the parts together
    report what one pass reports."""
    records = find_records(messages)
    late_seq, late = records[len(records) * 2 // 3]
    older = msgspec.structs.replace(late, logic_version=1, kueue_es_version="0.0.9")  # re-run by no decider
    forged = types.QuotaReserved(
        workload=types.WorkloadRef(namespace="default", name="intruder"),
        cluster_queue="cq-0-cohort-0",
        pod_set_assignments=[],
        at_ms=1,
    )
    outgoing = subjects.message(forged, subject="kq.dec.p0.wl.default.intruder", msg_id="admit:p0:999:1")
    dispatch = next(m for m in messages if m.subject.startswith("kq.disp."))
    out: list[LogMessage] = []
    for message in messages:
        if message.seq == dispatch.seq:
            continue  # the gap
        if message.seq == late_seq:
            message = msgspec.structs.replace(message, data=codec.encode(older))
        out.append(message)
    last = messages[-1].seq
    out.append(
        LogMessage(
            seq=last + 1,
            subject=outgoing.subject,
            data=outgoing.data,
            headers={**outgoing.headers, "Nats-Msg-Id": outgoing.msg_id},
        )
    )
    path = written(tmp_path, out)
    one_pass = replay_file(path, deciders.BY_ROLE)
    assert one_pass.gaps == [(dispatch.seq, dispatch.seq)]
    assert [o.seq for o in one_pass.orphans] == [last + 1]
    assert [u.head_seq for u in one_pass.unverifiable] == [late_seq]
    assert one_pass == check_log(list(read_lines(path)), deciders.BY_ROLE)
    report = forked(path)
    assert report == one_pass
    assert report.exit_code == 4


def test_the_command_needs_no_checkpoints(
    messages: list[LogMessage], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = written(tmp_path, messages)
    assert main(["replay", "--file", str(path)]) == 0
    one_pass = capsys.readouterr().out
    assert main(["replay", "--file", str(path), "--jobs", "2"]) == 0
    assert capsys.readouterr().out == one_pass
    assert not (tmp_path / "log.jsonl.checkpoints").exists()


def test_parts_cover_every_record_once_in_basis_order(messages: list[LogMessage]) -> None:
    records = find_records(messages)
    parts = split(records, 5)
    assert len(parts) == 5
    covered = [pair for _, mine in parts for pair in mine]
    assert sorted(h for h, _ in covered) == [h for h, _ in records]
    starts = [start for start, _ in parts]
    assert starts == sorted(starts)
    assert all(start == min(r.basis_seq for _, r in mine) for start, mine in parts)
    assert split([], 4) == []


def test_a_line_reader_resumes_at_a_line_start(messages: list[LogMessage], tmp_path: Path) -> None:
    path = written(tmp_path, messages)
    lines = LineReader(path)
    for message in lines:
        if message.seq == 1234:
            break
    assert list(read_lines(path, start_seq=1234, offset=lines.line_start)) == messages[1233:]


def test_a_failing_part_stops_the_replay(messages: list[LogMessage], tmp_path: Path) -> None:
    def broken(state: object, *, now_ms: int, partition: str = "p0") -> list[types.Decision]:
        raise ValueError("broken on purpose")

    path = written(tmp_path, messages)
    admitter = Decider(role=deciders.ADMITTER.role, logic_version=deciders.ADMITTER.logic_version, decide=broken)
    with pytest.raises(RuntimeError, match="ValueError: broken on purpose"):
        replay_forked(Source(file=path), {**deciders.BY_ROLE, admitter.role: admitter}, jobs=2)
