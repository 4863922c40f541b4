"""``kueue-es replay``: re-run every recorded decision at its basis and compare bytes.

The log is the audit trail. For each DecisionRecord, replay rebuilds the state the
decider saw (the fold of the log up to ``basis_seq``), runs the same decider with
the recorded ``now_ms``, encodes the outputs as production does and compares them
with the stored messages that follow the record, and with the record's digest
(research/event-sourcing.md §5.10). Any difference is a finding: the report names
the first differing event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kueue_es.events import codec, types
from kueue_es.events.bus.base import Bus, LogMessage
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.runtime import Decider, build_batch, fold_message


@dataclass(frozen=True, kw_only=True)
class Mismatch:
    """One decision that did not reproduce: where, and the first differing event."""

    decision_id: str
    head_seq: int
    basis_seq: int
    index: int  # 1-based position of the first differing output (0: the record itself)
    stored: str
    replayed: str


@dataclass(kw_only=True)
class ReplayReport:
    """Counts of a replay, and every mismatch (first differing event each)."""

    messages: int = 0
    decisions: int = 0
    matched: int = 0
    skipped: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every re-checked decision matched."""
        return not self.mismatches


def check_log(messages: Sequence[LogMessage], deciders: Mapping[str, Decider]) -> ReplayReport:
    """Replay ``messages`` (the whole log, in sequence order) against ``deciders`` by role.

    Pure: no I/O. Records of an unknown role or logic version are counted as skipped.
    """
    report = ReplayReport(messages=len(messages))
    by_seq = {m.seq: m for m in messages}
    records = _records(messages)
    report.decisions = len(records)
    state = ClusterState()
    pending = sorted(records, key=lambda pair: pair[1].basis_seq)
    next_record = 0
    for message in [*messages, None]:
        upto = message.seq - 1 if message is not None else float("inf")
        while next_record < len(pending) and pending[next_record][1].basis_seq <= upto:
            head_seq, record = pending[next_record]
            next_record += 1
            _check(state, head_seq, record, by_seq=by_seq, deciders=deciders, report=report)
        if message is not None:
            fold_message(state, message)
    return report


async def replay_bus(bus: Bus, deciders: Mapping[str, Decider]) -> ReplayReport:
    """Read the whole log from ``bus`` (up to its last sequence now) and :func:`check_log` it."""
    last = await bus.last_seq()
    messages: list[LogMessage] = []
    if last:
        async for message in bus.read(subjects=("kq.>",), start_seq=1):
            messages.append(message)
            if message.seq >= last:
                break
    return check_log(messages, deciders)


def _records(messages: Sequence[LogMessage]) -> list[tuple[int, types.DecisionRecord]]:
    found = []
    for message in messages:
        if message.headers.get("Kq-Type") not in (None, "DecisionRecord"):
            continue
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            continue
        if isinstance(event, types.DecisionRecord):
            found.append((message.seq, event))
    return found


def _check(
    state: ClusterState,
    head_seq: int,
    record: types.DecisionRecord,
    *,
    by_seq: Mapping[int, LogMessage],
    deciders: Mapping[str, Decider],
    report: ReplayReport,
) -> None:
    decider = deciders.get(record.role)
    if decider is None or decider.logic_version != record.logic_version:
        report.skipped += 1
        return
    outputs = list(decider.decide(state, now_ms=record.now_ms))
    head, rest = build_batch(
        decider,
        outputs=outputs,
        basis_seq=record.basis_seq,
        head_seq=record.expected_head_seq,
        now_ms=record.now_ms,
        partition=record.partition,
        answers=record.answers,
    )
    stored_head = by_seq.get(head_seq)
    candidates = [(0, head.data, stored_head.data if stored_head else b"")]
    for index in range(1, max(len(rest), record.output_count) + 1):
        replayed = rest[index - 1].data if index <= len(rest) else b""
        stored = by_seq.get(head_seq + index)
        candidates.append((index, replayed, stored.data if stored else b""))
    for index, replayed, stored_data in candidates:
        if replayed != stored_data:
            report.mismatches.append(
                Mismatch(
                    decision_id=record.decision_id,
                    head_seq=head_seq,
                    basis_seq=record.basis_seq,
                    index=index,
                    stored=stored_data.decode(errors="replace"),
                    replayed=replayed.decode(errors="replace"),
                )
            )
            return
    report.matched += 1
