"""A pending workload's reason is recorded on its own subject only when it changes (issue 15).

The admitter writes a WorkloadInadmissible message the first time a workload waits and when
its pending reason changes; its other pending outcomes (a head tried again after a requeue
trigger and parked again, a new message under the same reason) are PendingOutcomes that the
cycle's DecisionRecord carries (``DecisionRecord.pending``). The batch verifier releases them
after the batch's outputs as the WorkloadInadmissible decisions they stand for, so every fold
decides as before; replay still re-runs logs of logic version 9, which wrote each of them as a
message.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.projections import batches
from kueue_es.replay import check_log
from kueue_es.services.admitter import core as admitter_core
from kueue_es.services.runtime import Decider, build_batch
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import FoldedLog, cluster_queue, flavor, local_queue, workload

NOW = 1_796_000_000_000
BIG = types.WorkloadRef(namespace="default", name="big", uid="uid-big")
SMALL = types.WorkloadRef(namespace="default", name="small", uid="uid-small")
PARKED_AGAIN = types.PendingOutcome(workload=BIG, reason="WaitingForQuota", message="no room", parked=True)


def facts(*, small: bool = True) -> list[OutgoingMessage]:
    """A ClusterQueue of 4 CPUs and workloads ``big`` (8 CPUs, never fits) and ``small`` (1 CPU)."""
    docs = (
        flavor("f"),
        cluster_queue("cq", flavors={"f": {"cpu": 4}}),
        local_queue("lq", "cq"),
        workload("big", cpu="8"),
        *([workload("small", cpu="1")] if small else []),
    )
    return [subjects.fact_message(kueue_fact(doc)) for doc in docs]


class Log(FoldedLog):
    """An in-memory log folded as every service folds it (``runtime.fold_message``), its batches written in
    event schema ``schema_version`` (16: a decision per message; since 17 the record carries them)."""

    def __init__(self, *, schema_version: int = types.SCHEMA_VERSION) -> None:
        super().__init__()
        self.schema_version = schema_version

    def trigger(self) -> None:
        """The LocalQueue observed again: a requeue trigger for its ClusterQueue (SEMANTICS §3.6)."""
        self.append(subjects.fact_message(kueue_fact(local_queue("lq", "cq"))))

    def commit(self, outputs: Sequence[types.Output], *, decider: Decider = deciders.ADMITTER) -> types.DecisionRecord:
        """Commit ``outputs`` as a decider does; returns the record."""
        head, rest = build_batch(
            decider,
            outputs=outputs,
            basis_seq=self.state.last_seq,
            head_seq=self.state.heads.get("p0", 0),  # the partition's chain: its last record folded
            now_ms=NOW,
            max_outputs=0,
            schema_version=self.schema_version,
        )
        self.append(head, *rest)
        record = codec.decode(head.data)
        assert isinstance(record, types.DecisionRecord)
        return record

    def cycle(self) -> list[types.Output]:
        """One admitter cycle, committed when it decides anything; its outputs."""
        out = deciders.ADMITTER.decide(self.state, now_ms=NOW)
        if out:
            self.commit(out)
        return list(out)


def inadmissible_decisions(messages: Sequence[LogMessage]) -> tuple[int, int]:
    """The WorkloadInadmissible decisions of a log, as messages of their own and carried in records
    (schema 17); a record's pending outcomes are not among them."""
    events = [codec.decode(m.data) for m in messages]
    own = sum(isinstance(e, types.WorkloadInadmissible) for e in events)
    carried = sum(isinstance(d, types.WorkloadInadmissible) for e in events for d in types.with_carried(e)[1:])
    return own, carried


def test_build_batch_puts_pending_outcomes_in_the_record_and_decisions_in_messages() -> None:
    """Schema 16 (an older log, re-built by replay): the decisions are messages of their own."""
    reserved = types.QuotaReserved(workload=SMALL, cluster_queue="cq", pod_set_assignments=[], at_ms=NOW)
    head, rest = build_batch(
        deciders.ADMITTER, outputs=[PARKED_AGAIN, reserved], basis_seq=5, head_seq=0, now_ms=NOW, schema_version=16
    )
    record = codec.decode(head.data)
    assert isinstance(record, types.DecisionRecord)
    assert record.pending == (PARKED_AGAIN,)
    assert record.output_count == 1 and [codec.decode(m.data) for m in rest] == [reserved]
    assert record.carried == () and b'"decisions"' not in head.data
    assert record.decided


def test_build_batch_puts_pending_outcomes_and_decisions_in_the_record_since_schema_17() -> None:
    reserved = types.QuotaReserved(workload=SMALL, cluster_queue="cq", pod_set_assignments=[], at_ms=NOW)
    head, rest = build_batch(deciders.ADMITTER, outputs=[PARKED_AGAIN, reserved], basis_seq=5, head_seq=0, now_ms=NOW)
    record = codec.decode(head.data)
    assert isinstance(record, types.DecisionRecord)
    assert record.pending == (PARKED_AGAIN,)
    assert record.output_count == 0 and rest == [] and record.carried == (reserved,)
    assert record.decided
    assert record.all_decisions() == [reserved, PARKED_AGAIN.inadmissible(at_ms=NOW)]  # the outcome after it


def test_a_record_without_pending_outcomes_encodes_as_before() -> None:
    head, _ = build_batch(deciders.ADMITTER, outputs=[], basis_seq=5, head_seq=0, now_ms=NOW)
    assert b"pending" not in head.data
    record = codec.decode(head.data)
    assert isinstance(record, types.DecisionRecord) and not record.decided
    assert codec.encode(record) == head.data


def test_pending_outcomes_are_folded_after_the_outputs_at_the_batchs_last_sequence() -> None:
    """Schema 16 (older logs): the batch's last sequence is its last output message's."""
    log = Log(schema_version=16)
    log.append(*facts())
    first = types.WorkloadInadmissible(workload=SMALL, reason="WaitingForQuota", message="first", at_ms=NOW)
    record = log.commit([PARKED_AGAIN, first])
    record_seq = len(log.messages) - record.output_count
    assert log.orphans == []
    big = log.state.workloads["default/big"]
    assert big.parked_seq == len(log.messages) > record_seq  # the batch's last message, after its outputs
    assert (big.pending_message, big.pending_reason) == ("no room", "WaitingForQuota")
    assert log.state.workloads["default/small"].pending_message == "first"
    assert log.state.admit_cycles == 1


def test_pending_outcomes_are_folded_after_the_carried_decisions_at_the_records_sequence() -> None:
    """Since schema 17 the batch is its record: the outcomes fold at its sequence, after the decisions it
    carries (where its outputs stood)."""
    log = Log()
    log.append(*facts())
    first = types.WorkloadInadmissible(workload=SMALL, reason="WaitingForQuota", message="first", at_ms=NOW)
    record = log.commit([PARKED_AGAIN, first])
    assert record.output_count == 0 and record.carried == (first,)
    record_seq = len(log.messages)
    verdict = batches.BatchVerifier().offer(
        seq=record_seq,
        subject=log.messages[-1].subject,
        msg_id_header=log.messages[-1].headers["Nats-Msg-Id"],
        data=log.messages[-1].data,
        event=record,
    )
    assert [(seq, event) for seq, event in verdict.accepted] == [
        (record_seq, record),
        (record_seq, first),
        (record_seq, PARKED_AGAIN.inadmissible(at_ms=NOW)),
    ]
    assert log.orphans == []
    big = log.state.workloads["default/big"]
    assert big.parked_seq == record_seq  # the batch's only message
    assert (big.pending_message, big.pending_reason) == ("no room", "WaitingForQuota")
    assert log.state.workloads["default/small"].pending_message == "first"
    assert log.state.admit_cycles == 1


def test_the_verifier_releases_a_record_with_only_pending_outcomes_as_their_decisions() -> None:
    head, rest = build_batch(deciders.ADMITTER, outputs=[PARKED_AGAIN], basis_seq=5, head_seq=0, now_ms=NOW)
    assert rest == []
    verdict = batches.BatchVerifier().offer(
        seq=9, subject=head.subject, msg_id_header=head.msg_id, data=head.data, event=codec.decode(head.data)
    )
    assert verdict.orphans == ()
    assert [(seq, type(event).__name__) for seq, event in verdict.accepted] == [
        (9, "DecisionRecord"),
        (9, "WorkloadInadmissible"),
    ]
    assert verdict.accepted[1][1] == PARKED_AGAIN.inadmissible(at_ms=NOW)


def test_a_preemptor_record_carrying_pending_outcomes_is_orphaned() -> None:
    log = Log()
    log.append(*facts())
    log.commit([PARKED_AGAIN], decider=deciders.PREEMPTOR)
    assert [orphan.reason for orphan in log.orphans] == [batches.WRONG_ROLE]
    assert log.state.workloads["default/big"].parked_seq == 0


def test_a_head_parked_again_with_the_same_reason_is_a_pending_outcome_not_a_message() -> None:
    log = Log()
    log.append(*facts(small=False))
    first = log.cycle()
    parked = [d for d in first if isinstance(d, types.WorkloadInadmissible) and d.workload.key == "default/big"]
    assert len(parked) == 1 and parked[0].parked  # the first time it waits: its own message
    assert log.cycle() == []  # parked: not tried again without a requeue trigger
    log.trigger()
    again = log.cycle()
    assert [type(d).__name__ for d in again] == ["PendingOutcome"]
    assert again[0].workload.key == "default/big" and isinstance(again[0], types.PendingOutcome)
    assert again[0].reason == parked[0].reason and again[0].parked
    record = codec.decode(log.messages[-1].data)
    assert isinstance(record, types.DecisionRecord) and record.output_count == 0 and record.pending == tuple(again)
    assert log.state.workloads["default/big"].parked_seq == len(log.messages)  # parked again, after the trigger
    assert log.cycle() == []


def test_a_new_reason_after_a_nomination_is_a_message_again() -> None:
    log = Log()
    log.append(*facts(small=False))
    log.cycle()
    key = "default/big"
    log.state.workloads[key].pending_reason = ""  # as a PreemptionRequired or a release leaves it
    log.trigger()
    again = log.cycle()
    assert [type(d).__name__ for d in again] == ["WorkloadInadmissible"]


@pytest.mark.parametrize("schema", [16, types.SCHEMA_VERSION])
def test_logic_version_9_wrote_the_same_decisions_as_messages_and_replays(schema: int) -> None:
    """A log written by logic version 9 (every pending outcome a decision: a message in schema 16, carried
    in its record since 17) re-runs to its bytes."""
    v9 = deciders.EARLIER[(admitter_core.ROLE, 9)]
    log = Log(schema_version=schema)
    log.append(*facts(small=False))
    for _ in range(3):
        out = list(v9.decide(log.state, now_ms=NOW))
        assert not any(isinstance(o, types.PendingOutcome) for o in out)
        if out:
            log.commit(out, decider=v9)
        log.trigger()
    records = [codec.decode(m.data) for m in log.messages if "head" in m.subject]
    assert {r.logic_version for r in records if isinstance(r, types.DecisionRecord)} == {9}
    report = check_log(log.messages, deciders.BY_ROLE)
    assert report.mismatches == [] and report.skipped == 0
    assert report.matched == len(records) == 3
    # the first park and both parks again, one decision each: its own message before schema 17
    assert inadmissible_decisions(log.messages) == ((3, 0) if schema < 17 else (0, 3))


@pytest.mark.parametrize("schema", [16, types.SCHEMA_VERSION])
def test_the_same_run_at_logic_version_10_writes_fewer_messages_and_replays(schema: int) -> None:
    log = Log(schema_version=schema)
    log.append(*facts(small=False))
    for _ in range(3):
        log.cycle()
        log.trigger()
    report = check_log(log.messages, deciders.BY_ROLE)
    assert report.mismatches == [] and report.skipped == 0 and report.matched == 3
    # the first park (its own message before schema 17); the parks again ride in their records as outcomes
    assert inadmissible_decisions(log.messages) == ((1, 0) if schema < 17 else (0, 1))
    records = [e for e in (codec.decode(m.data) for m in log.messages) if isinstance(e, types.DecisionRecord)]
    assert sum(len(r.pending or ()) for r in records) == 2
    assert log.state.workloads["default/big"].parked_seq > 0


def test_a_changed_pending_outcome_in_a_stored_record_is_a_mismatch() -> None:
    """The record's pending outcomes are part of its bytes: replay re-runs the cycle and compares them."""
    log = Log()
    log.append(*facts(small=False))
    for _ in range(2):
        log.cycle()
        log.trigger()
    index = max(i for i, m in enumerate(log.messages) if b'"pending"' in m.data)
    original = log.messages[index]
    log.messages[index] = LogMessage(
        seq=original.seq,
        subject=original.subject,
        data=original.data.replace(b'"parked":true', b'"parked":false', 1),
        headers=original.headers,
    )
    assert log.messages[index].data != original.data
    report = check_log(log.messages, deciders.BY_ROLE)
    assert [(m.head_seq, m.index) for m in report.mismatches] == [(original.seq, 0)]
