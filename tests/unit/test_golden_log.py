"""Replay of a log recorded before a change: the decisions must reproduce byte for byte.

``tests/fixtures/logs/demo-preempt.jsonl`` is ``kueue-es demo --preempt --jobs 4
--duration 1`` recorded at 83bc919, before the move to the ``kueue_es`` import
namespace (issue 12): every message of the stream, one JSON object a line. A
refactor that changes any decision, or the bytes of its encoding, fails here.

Per-role head subjects (issue 13) moved its 22 DecisionRecords from ``kq.dec.p0.head`` to
their role's head (``kq.dec.p0.head.admitter``, ``...head.preemptor``); every payload,
header and sequence is as recorded (checked line by line when the subjects were rewritten).

The preemptor's logic version 5 (issue 18: a nomination is checked on quota as Kueue's cache
holds it) re-decided the log's one preemptor decision, ``preempt:p0:24``, to the same outputs
(same bytes, same ``outputsSha256``): its DecisionRecord now says ``logicVersion`` 5 instead of 4,
the only byte changed, so this test re-runs it with the installed logic. A logic change that
decides it differently needs a new recording (``kueue-es demo --preempt --jobs 4 --duration 1
--dir DIR``, every message of ``DIR/nats`` a line in this form) and the tests that name its
workloads and sequences updated with it.

``demo-preempt-v2.jsonl`` is the same command recorded at issue 19 (admitter logic version 11,
schema version 2: each WorkloadAdmitted carries its pod set assignments), dumped the same way. It
is a second recording, not a replacement: the first stays the proof that a log of schema
version 1 and admitter logic 9 still replays (``deciders.EARLIER``), and the tests that name its
workloads and sequences keep it. Its run decided what the first did (7 reservations and
admissions, 1 nomination and its preemption of 2, 7 releases); it differs in what came between
the two recordings: the partition (``q-cluster-queue``, issue 18), pending outcomes in the records
(issue 15), NamespaceObserved facts (issue 14), and the flavors on WorkloadAdmitted.
"""

from __future__ import annotations

import json
from pathlib import Path

from kueue_es import deciders
from kueue_es.events import codec, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.replay import check_log

FIXTURES = Path(__file__).parent.parent / "fixtures" / "logs"


def _load(name: str) -> list[LogMessage]:
    messages = []
    for line in (FIXTURES / name).read_text().splitlines():
        raw = json.loads(line)
        messages.append(
            LogMessage(seq=raw["seq"], subject=raw["subject"], data=raw["data"].encode(), headers=raw["headers"])
        )
    return messages


def test_demo_log_recorded_before_the_move_replays_with_every_decision_matched() -> None:
    """All 22 decisions of the recorded preemption demo re-run to the same bytes."""
    report = check_log(_load("demo-preempt.jsonl"), deciders.BY_ROLE)
    assert report.messages == 87
    assert report.decisions == 22
    assert report.skipped == 0
    assert report.mismatches == []
    assert report.matched == 22


def test_a_perturbed_decision_in_the_recorded_log_is_a_mismatch() -> None:
    """Changing one stored decision's bytes is caught at that decision (later ones, folded from it, differ too)."""
    messages = _load("demo-preempt.jsonl")
    index = next(i for i, m in enumerate(messages) if m.headers.get("Kq-Type") == "QuotaReserved")
    original = messages[index]
    messages[index] = LogMessage(
        seq=original.seq,
        subject=original.subject,
        data=original.data.replace(b'"cluster-queue"', b'"cluster-queuf"', 1),
        headers=original.headers,
    )
    assert messages[index].data != original.data
    report = check_log(messages, deciders.BY_ROLE)
    first = report.mismatches[0]
    assert first.head_seq + first.index == original.seq
    assert "cluster-queuf" in first.stored
    assert "cluster-queuf" not in first.replayed


def test_demo_log_of_schema_version_2_replays_and_admissions_carry_their_flavors() -> None:
    """All 21 decisions of the issue-19 recording re-run to the same bytes, and every
    WorkloadAdmitted carries the pod set assignments of the QuotaReserved before it."""
    messages = _load("demo-preempt-v2.jsonl")
    report = check_log(messages, deciders.BY_ROLE)
    assert (report.messages, report.decisions, report.skipped, report.matched) == (93, 21, 0, 21)
    assert report.mismatches == []
    reserved: dict[str, types.QuotaReserved] = {}
    admitted = 0
    for message in messages:
        assert message.headers["Kq-Schema"] == "2"
        event = codec.decode(message.data)
        if isinstance(event, types.QuotaReserved):
            reserved[event.workload.key] = event
        elif isinstance(event, types.WorkloadAdmitted):
            admitted += 1
            assert event.pod_set_assignments == reserved[event.workload.key].pod_set_assignments
            assert event.pod_set_assignments
    assert admitted == 7


def test_the_old_log_admissions_have_no_flavors_and_replay_as_logic_version_9_wrote_them() -> None:
    """Schema version 1: no WorkloadAdmitted of the first recording carries pod set assignments; the
    admitter's logic 9 re-runs them without (``decide_as``), so they match byte for byte above."""
    events = [codec.decode(m.data) for m in _load("demo-preempt.jsonl")]
    admissions = [e for e in events if isinstance(e, types.WorkloadAdmitted)]
    assert len(admissions) == 7
    assert all(not e.pod_set_assignments for e in admissions)
    records = [e for e in events if isinstance(e, types.DecisionRecord) and e.role == "admit"]
    assert {(r.logic_version, r.schema_version) for r in records} == {(9, 1)}
