"""Which decisions count: only the outputs of a verified DecisionRecord batch.

A decider commits one batch per cycle (``services.runtime.build_batch``): a
DecisionRecord on its own head ``kq.dec.<p>.head.<user>``, which since event schema 17
carries the cycle's decisions itself (``DecisionRecord.decisions``, no output messages),
and before that was followed by its ``output_count`` decisions on
``kq.dec.<p>.wl.<ns>.<name>``. The bus stores a batch
atomically and contiguously (``Bus.commit_batch``; ``tests/bus/test_contract.py`` checks
it on the memory bus, one nats-server and a 3-node cluster), so the batch headed by the
record at sequence ``r`` is exactly the messages at ``r+1 .. r+n``. The rule (ARCHITECTURE.md §3, issue 13):

- a message on a head subject counts only if it is a DecisionRecord of that
  partition on the head of its role (``head.admitter`` names role ``admit``, and so
  on: ``subjects.HEAD_TOKENS``; each decider's NATS user may publish only its own
  head), its ``decision_id`` is ``<role>:<partition>:<basis_seq>``, its Msg-Id is
  ``<decision_id>:0`` and its basis lies before it;
- output ``i`` of that record is the message at ``r+i``: on one of the partition's
  per-workload decision subjects (the one its workload names), with Msg-Id
  ``<decision_id>:<i>``, decoding to a decision other than a DecisionRecord;
- when all ``n`` outputs are there, each of a kind the record's role makes
  (:data:`ROLE_OUTPUTS`), and the digest over their bytes equals the record's
  ``outputs_sha256``, the record and its outputs are released to the fold, in log
  order; until then nothing of the batch is folded;
- a record's carried decisions (``DecisionRecord.decisions``, schema 17) are released with
  it, at its sequence, after its finished releases and before its pending outcomes, in their
  order: where its outputs stood. A record may carry decisions or have output messages, not
  both (else :data:`NOT_A_RECORD`); a carried decision of a kind its role does not make
  orphans the record (``wrong_role``), as such an output orphans its batch;
- a record's finished releases (``DecisionRecord.released``, issue 18: the admitter's
  QuotaReleased decisions of finished workloads) are released with it, right after it and
  before its outputs, as the QuotaReleased decisions they stand for, at the record's sequence;
  a record of a role that makes no QuotaReleased may carry none (else ``wrong_role``);
- a record's pending outcomes (``DecisionRecord.pending``, issue 15: the admitter's
  WorkloadInadmissible decisions that change no workload's pending reason) are released
  with it, after its outputs, as the WorkloadInadmissible decisions they stand for, at
  the sequence of the batch's last message; a record of a role that makes no
  WorkloadInadmissible may carry none (else ``wrong_role``, as an output would be);
- everything else on a decision subject, and any decision type on another subject,
  is an :class:`Orphan`: folded by no one, returned for the caller to report. A batch
  that breaks (a message at ``r+i`` that is not output ``i``, a gap, a digest
  mismatch, an output of a kind its role does not make) is orphaned whole, record
  included, and the breaking message is then judged on its own (it may head the next
  batch);
- a complete batch (or a record without outputs) that the fold's partition rule refuses
  (:attr:`BatchVerifier.judge`, :func:`kueue_es.projections.partitions.record_problem`: an
  output or pending outcome about a workload outside the record's partition at its basis, or
  a record of a partition whose basis lies before the last ``p0`` record) is orphaned whole
  (:data:`WRONG_PARTITION`), so a forged cross-partition decision is never folded;
- a batch whose end lies past the end of the log is never completed: the bus stores a
  batch whole, so its outputs cannot come later. A reader that has read to the end of
  the log and finds the stream's last sequence before the held batch's end orphans it
  (:meth:`BatchVerifier.expire`) instead of holding it until the next message breaks it.

Pure and deterministic: the same messages in the same order give the same verdicts,
so replay and every service agree on what was folded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from kueue_es.events import codec, subjects, types

DECISION_PREFIX: Final = "kq.dec."


@dataclass(frozen=True, slots=True)
class Orphan:
    """A message on the log that no fold takes: where it is and why."""

    seq: int
    subject: str
    reason: str  # one of REASONS (a metric label)
    detail: str  # what exactly was wrong, for the log


NOT_A_RECORD: Final = "not_a_record"
OUTSIDE_BATCH: Final = "outside_batch"
OFF_DECISION_SUBJECT: Final = "off_decision_subject"
BATCH_BROKEN: Final = "batch_broken"
DIGEST_MISMATCH: Final = "digest_mismatch"
WRONG_ROLE: Final = "wrong_role"
BATCH_INCOMPLETE: Final = "batch_incomplete"
WRONG_PARTITION: Final = "wrong_partition"
REASONS: Final = (
    NOT_A_RECORD,
    OUTSIDE_BATCH,
    OFF_DECISION_SUBJECT,
    BATCH_BROKEN,
    DIGEST_MISMATCH,
    WRONG_ROLE,
    BATCH_INCOMPLETE,
    WRONG_PARTITION,
)
"""Why a message is an orphan: a non-record on a head subject; a decision-subject message
outside any batch; a decision type on another subject; part of a batch that broke (a message
at an output's place that is not that output, or a gap); a complete batch whose outputs do
not hash to the record's digest; a record on another role's head, or a batch with an output
of a kind its role does not make; a batch whose end lies past the end of the log; a batch that
decides a workload outside its record's partition (issue 18)."""

ROLE_OUTPUTS: Final[dict[str, frozenset[type[types.Decision]]]] = {
    # the admitter's cycle (scheduling/cycle.py, lifecycle.py, tas/cycle.py): reservations with
    # their topology, admissions, requeues and inadmissible reasons, releases, nominations for
    # the preemptor, and the lifecycle's evictions and deactivations
    "admit": frozenset(
        {
            types.QuotaReserved,
            types.TopologyAssigned,
            types.WorkloadAdmitted,
            types.WorkloadInadmissible,
            types.QuotaReleased,
            types.PreemptionRequired,
            types.EvictionRequested,
            types.WorkloadDeactivated,
            types.WorkloadRequeued,
        }
    ),
    # the preemptor (services/preemptor/core.py): its answer to a nomination and the evictions
    "preempt": frozenset({types.PreemptionIssued, types.EvictionRequested}),
    # the TAS placer (scheduling/tas/replacement.py): a failed node's pods placed again, or an eviction
    "place": frozenset({types.TopologyAssigned, types.EvictionRequested}),
    # the MultiKueue decider (scheduling/multikueue.py): workers nominated, the winner, Retry, Rejected
    "multikueue": frozenset(
        {types.WorkersNominated, types.RemoteAdmissionChosen, types.MultiKueueCheckRetry, types.MultiKueueCheckRejected}
    ),
    # the scenario engines' pre-admitted workloads (kueue_es/scenarios), one of them maybe being evicted
    "seed": frozenset({types.QuotaReserved, types.TopologyAssigned, types.WorkloadAdmitted, types.EvictionRequested}),
}
"""The decision kinds each DecisionRecord role makes: the one table the fold checks a batch's
outputs against (its keys are the roles with a head, ``subjects.HEAD_TOKENS``: a record of any
other role is an orphan). tests/unit/test_batches.py checks it against the services' roles and
the outputs of the recorded demo; the scenario suites fold every batch the deciders make
through it."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one offered message releases: events to fold now, in log order, and orphans."""

    accepted: tuple[tuple[int, types.Event], ...] = ()
    orphans: tuple[Orphan, ...] = ()


_NOTHING: Final = Verdict()  # what most offers return: shared, as a Verdict is immutable

_OUTPUT_TYPES: Final[frozenset[type[types.Event]]] = frozenset(
    t for t in types.DECISION_TYPES if t is not types.DecisionRecord
)
"""The per-workload decision types (a batch's outputs), for an exact type test on the fast path."""
_PLAIN_TYPES: Final[frozenset[type[types.Event]]] = frozenset(
    types.FACT_TYPES + (types.FactBatch,) + types.DISPATCH_TYPES
)
"""The event types that are no decision (facts and dispatch results), for the same on :meth:`BatchVerifier.passes`."""


@dataclass(slots=True)
class _Held:
    seq: int
    subject: str
    data: bytes
    event: types.Event


@dataclass(slots=True)
class _OpenBatch:
    record: types.DecisionRecord
    head: _Held
    outputs: list[_Held] = field(default_factory=list)
    # why the batch is not its role's: the record on another role's head, an output of a kind the role does not make
    wrong: str = ""


def partition_of(subject: str) -> str | None:
    """The partition of a decision subject (``kq.dec.<p>....``), None for any other subject."""
    if not subject.startswith(DECISION_PREFIX):
        return None
    partition, _, _ = subject[len(DECISION_PREFIX) :].partition(".")
    return partition


def decision_id(record: types.DecisionRecord) -> str:
    """The id ``build_batch`` derives for a record: ``<role>:<partition>:<basis_seq>``."""
    return f"{record.role}:{record.partition}:{record.basis_seq}"


def msg_id(record: types.DecisionRecord, index: int) -> str:
    """The Msg-Id of message ``index`` of the record's batch (0: the record itself)."""
    return f"{decision_id(record)}:{index}"


def record_problem(*, seq: int, subject: str, msg_id_header: str, event: types.Event | None) -> str | None:
    """Why the message at ``seq`` on head ``subject`` is not a DecisionRecord that heads a batch, or None."""
    if event is None:
        return "undecodable message on a head subject"
    if not isinstance(event, types.DecisionRecord):
        return f"{codec.type_name(event)} on a head subject"
    if partition_of(subject) != event.partition:
        return f"record of partition {event.partition!r} on {subject}"
    if event.decision_id != decision_id(event):
        return f"decision_id {event.decision_id!r} is not {decision_id(event)!r}"
    if msg_id_header != msg_id(event, 0):
        return f"Msg-Id {msg_id_header!r} is not {msg_id(event, 0)!r}"
    if not 0 <= event.basis_seq < seq:
        return f"basis_seq {event.basis_seq} is not before the record"
    if event.output_count < 0:
        return f"output_count {event.output_count} is negative"
    if event.output_count > 0 and event.decisions:
        return f"output_count {event.output_count} and decisions carried: a record has one or the other"
    return None


def head_problem(subject: str, record: types.DecisionRecord) -> str | None:
    """Why ``record`` may not stand on the head ``subject`` (another role's head, or a role without
    one), or None. Each decider's NATS user may publish only its own head, so a record on a head
    names the role of the decider that wrote it."""
    head = subjects.HEAD_TOKENS.get(record.role)
    if head is None:
        return f"role {record.role!r} has no head subject (the roles are {sorted(subjects.HEAD_TOKENS)})"
    if subjects.head_token(subject) != head:
        return f"record of role {record.role!r} on {subject}, not on its head {subjects.head_subject(record.role, record.partition)}"
    return None


def pending_problem(record: types.DecisionRecord) -> str | None:
    """Why ``record`` may not carry its pending outcomes or finished releases (a role that makes no
    WorkloadInadmissible, or no QuotaReleased), or None."""
    if record.pending and types.WorkloadInadmissible not in ROLE_OUTPUTS.get(record.role, ()):
        return f"role {record.role!r} records pending outcomes, a WorkloadInadmissible it does not make"
    if record.released and types.QuotaReleased not in ROLE_OUTPUTS.get(record.role, ()):
        return f"role {record.role!r} records finished releases, a QuotaReleased it does not make"
    return None


def carried_problem(record: types.DecisionRecord) -> str | None:
    """Why ``record`` may not carry its decisions (schema 17): one of a kind its role does not make
    (:data:`ROLE_OUTPUTS`, as an output message would be), or None."""
    if not record.decisions:
        return None
    makes = ROLE_OUTPUTS.get(record.role, frozenset())
    for index, decision in enumerate(record.decisions, start=1):
        if type(decision) not in makes:
            return f"decision {index} is a {codec.type_name(decision)}, which role {record.role!r} does not make"
    return None


def _released(record: types.DecisionRecord, *, at_seq: int) -> list[tuple[int, types.Event]]:
    """The QuotaReleased decisions the record's finished releases stand for, folded at ``at_seq``, the
    record's own sequence: before every output, where the cycle put its releases (they free the quota
    its admissions take)."""
    return [(at_seq, decision) for decision in record.released_decisions()]


def _pending(record: types.DecisionRecord, *, at_seq: int) -> tuple[tuple[int, types.Event], ...]:
    """The WorkloadInadmissible decisions the record's pending outcomes stand for, folded at
    ``at_seq``, the batch's last sequence: after every output, so a release among the outputs
    (a requeue trigger) comes before the workloads the cycle parked, as it does in the cycle."""
    return tuple((at_seq, decision) for decision in record.pending_decisions())


def output_problem(
    batch_record: types.DecisionRecord,
    index: int,
    *,
    subject: str,
    msg_id_header: str,
    event: types.Event | None,
) -> str | None:
    """Why a message (at the right sequence) is not output ``index`` of ``batch_record``, or None."""
    if partition_of(subject) != batch_record.partition or subjects.head_token(subject) is not None:
        return f"{subject} is not a decision subject of partition {batch_record.partition!r}"
    if msg_id_header != msg_id(batch_record, index):
        return f"Msg-Id {msg_id_header!r} is not {msg_id(batch_record, index)!r}"
    if event is None:
        return "undecodable"
    if isinstance(event, types.DecisionRecord) or not isinstance(event, types.DECISION_TYPES):
        return f"{codec.type_name(event)} is not a per-workload decision"
    ref = getattr(event, "workload", None)
    if not isinstance(ref, types.WorkloadRef) or subject != subjects.workload_decision_subject(
        ref, batch_record.partition
    ):
        return f"{codec.type_name(event)} on {subject}, not on its workload's subject"
    return None


def _is_output(
    batch_record: types.DecisionRecord, index: int, *, subject: str, msg_id_header: str, event: types.Event | None
) -> bool:
    """True only when :func:`output_problem` finds no problem: the fast test of the common case (an
    exact decision type, its Msg-Id, its workload's subject, which is on the record's partition and
    no head); anything it does not pass is judged by :func:`output_problem`, which says why."""
    if type(event) not in _OUTPUT_TYPES:
        return False
    ref = getattr(event, "workload", None)
    return (
        type(ref) is types.WorkloadRef
        and msg_id_header == f"{batch_record.role}:{batch_record.partition}:{batch_record.basis_seq}:{index}"
        and subject == subjects.workload_decision_subject(ref, batch_record.partition)
    )


@dataclass(slots=True)
class BatchVerifier:
    """Holds the batch being received and judges every message of a log, in sequence order.

    Feed it every message a fold reads (:meth:`offer`), decodable or not; fold what it
    accepts, report what it orphans. ``orphaned`` counts the orphans so far.
    """

    open: _OpenBatch | None = None
    orphaned: int = 0
    # The fold's partition rule: why a complete batch (record, outputs) may not be folded, or None
    # (``cluster.wire`` sets it; None: no rule). Not state: a checkpoint leaves it out.
    judge: Callable[[types.DecisionRecord, Sequence[types.Event]], str | None] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def holding(self) -> bool:
        """True while a record waits for its outputs (nothing of its batch is folded yet)."""
        return self.open is not None

    @property
    def holding_until(self) -> int:
        """The sequence the held batch's last output must have (0 when none is held)."""
        return self.open.head.seq + self.open.record.output_count if self.open is not None else 0

    def offer(self, *, seq: int, subject: str, msg_id_header: str, data: bytes, event: types.Event | None) -> Verdict:
        """Judge the message at ``seq``. ``event`` is its decoded event, None when it does not decode.

        A message that is neither on a decision subject nor of a decision type is accepted
        as it is (None events are neither accepted nor orphaned: the caller skips them).
        """
        orphans: list[Orphan] = []
        batch = self.open
        if batch is not None:
            index = len(batch.outputs) + 1
            record = batch.record
            if seq != batch.head.seq + index:
                problem: str | None = f"output {index} expected at {batch.head.seq + index}, next message is at {seq}"
            elif _is_output(record, index, subject=subject, msg_id_header=msg_id_header, event=event):
                problem = None  # what output_problem would say, found without building its messages
            else:
                problem = output_problem(record, index, subject=subject, msg_id_header=msg_id_header, event=event)
            if problem is None:
                assert event is not None  # output_problem refuses undecodable messages
                batch.outputs.append(_Held(seq=seq, subject=subject, data=data, event=event))
                if not batch.wrong and type(event) not in ROLE_OUTPUTS.get(record.role, ()):
                    batch.wrong = (
                        f"output {index} is a {codec.type_name(event)}, which role {record.role!r} does not make"
                    )
                if index < record.output_count:
                    return _NOTHING
                self.open = None
                if batch.wrong:
                    return self._orphan_batch(batch, WRONG_ROLE, f"batch {record.decision_id}: {batch.wrong}")
                # the digest, once per batch, over the outputs' bytes as stored (nothing is encoded again)
                if codec.digest([held.data for held in batch.outputs]) != record.outputs_sha256:
                    return self._orphan_batch(
                        batch, DIGEST_MISMATCH, f"batch {record.decision_id}: outputs do not match its digest"
                    )
                if self.judge is not None:
                    problem = self.judge(record, [h.event for h in batch.outputs])
                    if problem is not None:
                        return self._orphan_batch(batch, WRONG_PARTITION, f"batch {record.decision_id}: {problem}")
                head = batch.head
                accepted = [(head.seq, head.event)]
                if record.released:
                    accepted.extend(_released(record, at_seq=head.seq))
                accepted.extend([(h.seq, h.event) for h in batch.outputs])
                if record.pending:
                    accepted.extend(_pending(record, at_seq=seq))
                return Verdict(accepted=tuple(accepted))
            self.open = None
            broken = self._orphan_batch(batch, BATCH_BROKEN, f"batch {batch.record.decision_id} broken: {problem}")
            orphans.extend(broken.orphans)
        verdict = self._fresh(seq=seq, subject=subject, msg_id_header=msg_id_header, data=data, event=event)
        if orphans:
            return Verdict(accepted=verdict.accepted, orphans=(*orphans, *verdict.orphans))
        return verdict

    def passes(self, subject: str, event: types.Event | None) -> bool:
        """True when :meth:`offer` would accept this message as it is, alone, and change nothing: no
        batch is held, it is not on a decision subject and its event decodes to no decision type. A
        fold may then apply it without offering it (the common case: a fact or a dispatch result)."""
        return self.open is None and type(event) in _PLAIN_TYPES and not subject.startswith(DECISION_PREFIX)

    def _fresh(self, *, seq: int, subject: str, msg_id_header: str, data: bytes, event: types.Event | None) -> Verdict:
        """Judge a message while no batch is open."""
        partition = partition_of(subject)
        if partition is None:
            if event is None:
                return _NOTHING
            if isinstance(event, types.DECISION_TYPES):
                return self._orphan(
                    seq, subject, OFF_DECISION_SUBJECT, f"{codec.type_name(event)} outside the decision subjects"
                )
            return Verdict(accepted=((seq, event),))
        if subjects.head_token(subject) is not None:
            problem = record_problem(seq=seq, subject=subject, msg_id_header=msg_id_header, event=event)
            if problem is not None:
                return self._orphan(seq, subject, NOT_A_RECORD, problem)
            assert isinstance(event, types.DecisionRecord)
            problem = head_problem(subject, event) or pending_problem(event) or carried_problem(event)
            if problem is not None and event.output_count == 0:
                return self._orphan(seq, subject, WRONG_ROLE, problem)
            if event.output_count == 0:
                if problem is None and self.judge is not None:
                    problem = self.judge(event, ())  # the decisions it carries are the record's to name
                    if problem is not None:
                        return self._orphan(seq, subject, WRONG_PARTITION, f"record {event.decision_id}: {problem}")
                if event.decisions:  # schema 17: its decisions, at its sequence, where its outputs would follow
                    return Verdict(
                        accepted=(
                            (seq, event),
                            *_released(event, at_seq=seq),
                            *[(seq, decision) for decision in event.decisions],
                            *_pending(event, at_seq=seq),
                        )
                    )
                return Verdict(accepted=((seq, event), *_released(event, at_seq=seq), *_pending(event, at_seq=seq)))
            self.open = _OpenBatch(
                record=event, head=_Held(seq=seq, subject=subject, data=data, event=event), wrong=problem or ""
            )
            return _NOTHING  # a record on the wrong head is read with its outputs and orphaned with them
        what = "undecodable message" if event is None else codec.type_name(event)
        if subjects.is_old_head(subject):
            what += " on the single partition head of kueue-es before per-role heads"
        return self._orphan(seq, subject, OUTSIDE_BATCH, f"{what} outside any batch")

    def expire(self, last_seq: int) -> Verdict:
        """The log ends at ``last_seq`` (the stream's last sequence, asked after reading every message
        up to it): a held batch that would end past it never completes (a batch is stored whole), so
        it is orphaned whole now (:data:`BATCH_INCOMPLETE`). Nothing when no batch is held or its end
        is stored."""
        batch = self.open
        if batch is None or self.holding_until <= last_seq:
            return _NOTHING
        self.open = None
        return self._orphan_batch(
            batch,
            BATCH_INCOMPLETE,
            f"batch {batch.record.decision_id} of {batch.record.output_count} outputs would end at"
            f" {self.holding_until}; the log ends at {last_seq}",
        )

    def _orphan(self, seq: int, subject: str, reason: str, detail: str) -> Verdict:
        self.orphaned += 1
        return Verdict(orphans=(Orphan(seq=seq, subject=subject, reason=reason, detail=detail),))

    def _orphan_batch(self, batch: _OpenBatch, reason: str, detail: str) -> Verdict:
        held = [batch.head, *batch.outputs]
        self.orphaned += len(held)
        return Verdict(orphans=tuple(Orphan(seq=h.seq, subject=h.subject, reason=reason, detail=detail) for h in held))
