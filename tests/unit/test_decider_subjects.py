"""The deciders read facts and decisions, not the dispatch results (``runtime.DECIDER_SUBJECTS``).

A decider that skips ``kq.disp.>`` must decide what one that folds everything decides, on a basis
replay accepts: this folds recorded logs both ways and compares, after every message the skipping
fold reads, the state both hold (``checkpoints.state_digest``: what a checkpoint of it keeps) and
what every decider decides on it for every partition.
"""

from __future__ import annotations

import json
from pathlib import Path

from kueue_es import checkpoints, deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import rules
from kueue_es.events.bus.base import LogMessage
from kueue_es.projections.cluster import ClusterState
from kueue_es.replay import check_log
from kueue_es.services.runtime import DECIDER_SUBJECTS, fold_message

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"


def _load(name: str) -> list[LogMessage]:
    messages = []
    for line in (LOGS / name).read_text().splitlines():
        raw = json.loads(line)
        messages.append(
            LogMessage(seq=raw["seq"], subject=raw["subject"], data=raw["data"].encode(), headers=raw["headers"])
        )
    return messages


def _read_by_deciders(subject: str) -> bool:
    return any(rules.matches(subject, f) for f in DECIDER_SUBJECTS)


def _decisions(state: ClusterState, now_ms: int) -> dict[tuple[str, str], list[bytes]]:
    out = {}
    for role, decider in sorted(deciders.BY_ROLE.items()):
        for partition in sorted({subjects.DEFAULT_PARTITION, *state.partitions.all()}):
            decided = decider.decide(state, now_ms=now_ms, partition=partition)
            out[(role, partition)] = [codec.encode(d) for d in decided]
    return out


def _fold_both_ways(messages: list[LogMessage]) -> tuple[int, int]:
    """Fold ``messages`` whole and without what the deciders skip; compare at every message the
    skipping fold reads, but inside a batch (no decider decides on half a batch). Returns (messages
    compared, messages skipped)."""
    whole, skipping = ClusterState(), ClusterState()
    compared = skipped = 0
    for message in messages:
        fold_message(whole, message)
        if not _read_by_deciders(message.subject):
            skipped += 1
            continue
        fold_message(skipping, message)
        assert skipping.batches.holding == whole.batches.holding, message.seq
        if skipping.batches.holding:  # half a batch: no decider decides on it (DeciderLoop._loop)
            continue
        compared += 1
        assert skipping.last_seq == whole.last_seq, message.seq  # the basis a decision would name
        assert checkpoints.state_digest(skipping) == checkpoints.state_digest(whole), message.seq
        now_ms = 1_800_000_000_000 + message.seq * 1000
        assert _decisions(skipping, now_ms) == _decisions(whole, now_ms), message.seq
    return compared, skipped


def test_the_deciders_read_facts_and_decisions_but_no_dispatch_results() -> None:
    """Every subject a service writes falls in DECIDER_SUBJECTS except the dispatcher's results."""
    assert _read_by_deciders("kq.in.wl.default.job-a")
    assert _read_by_deciders("kq.in.cq._.team-a")
    assert _read_by_deciders("kq.dec.p0.head.admitter")
    assert _read_by_deciders("kq.dec.p3.wl.default.job-a")
    assert not _read_by_deciders(subjects.dispatch_subject(types.WorkloadRef(namespace="default", name="job-a")))


def test_the_recorded_demo_log_folds_and_decides_the_same_without_its_dispatch_results() -> None:
    """The preemption demo (admissions, a preemption, evictions: 7 DispatchApplied among 87 messages):
    after each of the others that ends a batch or stands alone (48), the skipping fold holds and
    decides what the whole fold does."""
    messages = _load("demo-preempt.jsonl")
    assert sum(m.headers.get("Kq-Type") == "DispatchApplied" for m in messages) == 7
    assert _fold_both_ways(messages) == (48, 7)


def test_a_log_whose_dispatch_results_are_gone_replays_the_same() -> None:
    """Replay folds everything up to a record's basis: the demo's decisions are re-run and matched
    with the dispatch results in the log and without them, so none of them rests on one."""
    messages = _load("demo-preempt.jsonl")
    whole = check_log(messages, deciders.BY_ROLE)
    without = check_log([m for m in messages if _read_by_deciders(m.subject)], deciders.BY_ROLE)
    assert whole.mismatches == [] and without.mismatches == []
    assert whole.matched == without.matched == 22
