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
"""

from __future__ import annotations

import json
from pathlib import Path

from kueue_es import deciders
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
