"""The decisions a DecisionRecord carries (event schema 17), delivered to the dispatcher one by one.

Why this module exists: since schema 17 a decider's cycle is one message, its DecisionRecord, which
carries the cycle's per-workload decisions (``DecisionRecord.decisions``) instead of one message each
(issue 18). The dispatcher executes, answers and acks decisions one by one (a Job write, its result,
a nak of one the API server refused for now), so :class:`CarriedDecisions` wraps the durable consumer,
which now delivers the records too (:data:`FILTERS`), and hands the dispatcher one delivery per carried
decision: a :class:`Delivery` whose message is the decision as its own message would have been (its
workload's decision subject, its Msg-Id ``<decision id>:<index>``, its bytes), at the record's
sequence, with a :class:`Carried` token naming the record's delivery and the decision's place
(:func:`decision_key`). A message of an older log (a decision of its own) passes through as it is.

A record's pending outcomes (``DecisionRecord.pending``: the WorkloadInadmissible decisions that keep a
workload's pending reason) are handed over too, after its carried decisions and numbered on from them, as
deliveries of their own (:func:`is_pending`): Kueue's scheduler records a ``Pending`` Event on each
workload it puts back in line (scheduler.go requeueAndUpdate), a new one when the workload's message
changed ("Workload no longer fits after processing another workload"), so the dispatcher records their
Events and writes their status with the batch they come in. They ask for no ack: acking, naking or
marking one does nothing (best effort, as Kueue's event recorder).

The record is acked once every decision it carries is acked; a nak of one naks the record (once per
delivery of it), and its next delivery hands over only the decisions not acked yet (a decision whose
ack of the record failed counts as not acked), and its pending outcomes again. A record that carries no
decision (pending outcomes only, finished releases, an older record whose outputs follow it) or does not
decode asks nothing of the dispatcher and is acked at once, beside the fetches (:meth:`CarriedDecisions.fetch` never waits for
it: an ack that keeps failing holds no decision, issue 15); whether a record counts at all
is the fold's verdict (``projections.batches``), which the dispatcher checks before executing
(``Dispatcher.orphaned_seqs``), as it does for a decision of its own.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Final

import structlog

from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import BusError, Delivery, DurableConsumer, LogMessage

log = structlog.get_logger(__name__)

DECISION_FILTER: Final = "kq.dec.*.wl.>"
"""The per-workload decision subjects (a decision of its own: logs before event schema 17)."""
RECORD_FILTER: Final = "kq.dec.*.head.*"
"""The DecisionRecords' head subjects (schema 17: the decisions they carry)."""
FILTERS: Final = (DECISION_FILTER, RECORD_FILTER)
"""The dispatcher's durable consumer's filter: every decision, of its own or carried."""

RECORD_ACK_SECONDS: Final = 20.0
"""Seconds the ack of a record that carries no decision is tried for (the inner consumer may try a transient
failure again) before it is left to the server's redelivery (then acked again): under the 30 s ack wait."""

IN_PROGRESS_EVERY: Final = 0.05
"""Seconds within which a second in-progress mark of one record is not sent again (the runner marks
every decision it holds in turn: one mark per record and round is enough)."""


@dataclass(frozen=True, slots=True)
class Carried:
    """The token of a carried decision's delivery: the record's ``seq``, the decision's 1-based ``index``
    among the record's decisions, and the ``decision`` itself (decoded once, with its record)."""

    seq: int
    index: int
    decision: types.CarriedDecision
    pending: bool = False  # one of the record's pending outcomes: nothing to execute, nothing to ack


def is_pending(delivery: Delivery) -> bool:
    """Whether ``delivery`` is a record's pending outcome (its Event and status only: no execution, no ack)."""
    token = delivery.token
    return isinstance(token, Carried) and token.pending


def decision_key(delivery: Delivery) -> tuple[int, int]:
    """Which decision a delivery is: ``(log sequence, index)``, the index 0 for a decision of its own
    message, else its 1-based place among its record's carried decisions (all at the record's
    sequence)."""
    token = delivery.token
    return (token.seq, token.index) if isinstance(token, Carried) else (delivery.message.seq, 0)


def decision_index(delivery: Delivery) -> int:
    """The index of :func:`decision_key` (0: a decision of its own message)."""
    token = delivery.token
    return token.index if isinstance(token, Carried) else 0


def carried_decision(delivery: Delivery) -> types.CarriedDecision | None:
    """The decision a carried delivery stands for (decoded with its record), None for a message of its own."""
    token = delivery.token
    return token.decision if isinstance(token, Carried) else None


@dataclass(slots=True)
class _Record:
    """A delivered record whose decisions are not all acked: its newest delivery and which are."""

    delivery: Delivery
    count: int
    acked: set[int] = field(default_factory=set)
    nakked: bool = False  # this delivery was nak'ed already (by one of its decisions)
    marked_at: float = -1.0  # loop time of the last in-progress mark


class CarriedDecisions(DurableConsumer):
    """The durable consumer ``inner`` (over :data:`FILTERS`), each record delivered as its carried
    decisions, one delivery each (see the module). ``acked_records``: records acked here;
    ``record_ack_seconds``: how long the ack of a record carrying no decision is tried (:data:`RECORD_ACK_SECONDS`);
    ``pending_outcomes``: whether the records' pending outcomes are handed over too (a dispatcher that writes no
    Workload objects and no Events has no use for them)."""

    def __init__(self, inner: DurableConsumer, *, pending_outcomes: bool = True) -> None:
        self.inner = inner
        self.pending_outcomes = pending_outcomes
        self._records: dict[int, _Record] = {}
        self.acked_records = 0
        self.record_ack_seconds = RECORD_ACK_SECONDS
        self._acking: set[asyncio.Task[None]] = set()  # acks of records carrying no decision, under way
        self.per_message = 1.0  # decisions per message fetched, a running mean (sizes the next fetch)

    async def fetch(self, *, batch: int = 100, timeout: float = 1.0) -> list[Delivery]:
        """About ``batch`` decisions: as many messages of the inner consumer as, at the decisions per message
        seen so far, carry that many (at least one), each record's as its decisions (so a large record gives
        more deliveries than ``batch``); [] when none came within ``timeout`` s. A fetch of ``batch`` records
        would hand the dispatcher a hundred times the decisions a batch was sized for (its writes at the
        write limiter's pace must stay well inside the ack wait)."""
        out: list[Delivery] = []
        messages = max(1, min(batch, round(batch / self.per_message)))
        fetched = await self.inner.fetch(batch=messages, timeout=timeout)
        for delivery in fetched:
            message = delivery.message
            if subjects.head_token(message.subject) is None:
                out.append(delivery)  # a decision of its own (an older log), or anything else: the runner's
                continue
            try:
                record = codec.decode(message.data)
            except codec.DecodeError:
                record = None
            if not isinstance(record, types.DecisionRecord) or not record.decisions:
                self._ack_apart(delivery)  # nothing to execute (the fold judges the record itself)
                if isinstance(record, types.DecisionRecord):
                    out.extend(self._pending(delivery, record, first=1))
                continue
            out.extend(self._expand(delivery, record))
            out.extend(self._pending(delivery, record, first=len(record.carried) + 1))
        if fetched:
            self.per_message = 0.8 * self.per_message + 0.2 * max(1.0, len(out) / len(fetched))
        return out

    def _ack_apart(self, delivery: Delivery) -> None:
        """Ack a record that carries no decision in a task of its own (the fetch does not wait for it)."""
        task = asyncio.ensure_future(self._ack_record(delivery))
        self._acking.add(task)
        task.add_done_callback(self._acking.discard)

    async def _ack_record(self, delivery: Delivery) -> None:
        seq = delivery.message.seq
        window = asyncio.timeout(self.record_ack_seconds)
        try:
            async with window:
                await self.inner.ack(delivery)
        except TimeoutError:
            if not window.expired():
                raise
            log.warning("record_ack_abandoned", seq=seq, after_s=self.record_ack_seconds)
            return
        except BusError as err:  # delivered again after the ack wait, and acked then
            log.warning("record_ack_failed", seq=seq, error=str(err))
            return
        self.acked_records += 1

    def _expand(self, delivery: Delivery, record: types.DecisionRecord) -> list[Delivery]:
        seq = delivery.message.seq
        held = self._records.get(seq)
        if held is None:
            held = self._records[seq] = _Record(delivery=delivery, count=len(record.carried))
        else:  # delivered again: the newest delivery is the one acked or nak'ed
            held.delivery, held.nakked = delivery, False
        out = []
        for index, decision in enumerate(record.carried, start=1):
            if index in held.acked:
                continue
            message = LogMessage(
                seq=seq,
                subject=subjects.workload_decision_subject(decision.workload, record.partition),
                data=b"",  # the decision is in the token, decoded once with its record
                headers={"Nats-Msg-Id": f"{record.decision_id}:{index}"},
                pending=delivery.message.pending,
            )
            out.append(Delivery(message=message, attempt=delivery.attempt, token=Carried(seq, index, decision)))
        return out

    def _pending(self, delivery: Delivery, record: types.DecisionRecord, *, first: int) -> list[Delivery]:
        """The record's pending outcomes as deliveries (:func:`is_pending`), numbered from ``first``; none unless
        :attr:`pending_outcomes`."""
        if not self.pending_outcomes or not record.pending:
            return []
        seq = delivery.message.seq
        out = []
        for index, decision in enumerate(record.pending_decisions(), start=first):
            message = LogMessage(
                seq=seq,
                subject=subjects.workload_decision_subject(decision.workload, record.partition),
                data=b"",
                headers={"Nats-Msg-Id": f"{record.decision_id}:{index}"},
                pending=delivery.message.pending,
            )
            token = Carried(seq, index, decision, pending=True)
            out.append(Delivery(message=message, attempt=delivery.attempt, token=token))
        return out

    async def ack(self, delivery: Delivery) -> None:
        """Ack one decision; the record's delivery once the last of its decisions is acked. Raises what
        that ack of the record raises (a TransientBusError: the caller's to try again); the decision then
        counts as not acked, so a redelivery of the record after the caller gave up brings it again."""
        token = delivery.token
        if not isinstance(token, Carried):
            await self.inner.ack(delivery)
            return
        if token.pending:
            return
        held = self._records.get(token.seq)
        if held is None:
            return  # the record was acked already (every decision of it), or this process never held it
        held.acked.add(token.index)
        if len(held.acked) >= held.count:
            try:
                await self.inner.ack(held.delivery)
            except BaseException:
                # not acked: a try again acks the record; given up, the record's next delivery hands this
                # decision over again (its result stored: acked, not executed), else it would hand over
                # nothing and never be acked
                held.acked.discard(token.index)
                raise
            del self._records[token.seq]
            self.acked_records += 1

    async def nak(self, delivery: Delivery, *, delay: float = 0.0) -> None:
        """Ask for the decision again after ``delay`` s: its record, once per delivery of it."""
        token = delivery.token
        if not isinstance(token, Carried):
            await self.inner.nak(delivery, delay=delay)
            return
        if token.pending:
            return
        held = self._records.get(token.seq)
        if held is None or held.nakked:
            return
        await self.inner.nak(held.delivery, delay=delay)
        held.nakked = True

    async def in_progress(self, delivery: Delivery) -> None:
        """Restart the ack wait of the decision's record (at most once per :data:`IN_PROGRESS_EVERY`)."""
        token = delivery.token
        if not isinstance(token, Carried):
            await self.inner.in_progress(delivery)
            return
        if token.pending:
            return
        held = self._records.get(token.seq)
        if held is None:
            return
        now = asyncio.get_running_loop().time()
        if now - held.marked_at < IN_PROGRESS_EVERY:
            return
        held.marked_at = now
        await self.inner.in_progress(held.delivery)

    async def close(self) -> None:
        """Close the inner consumer; what was not acked is delivered again after its ack wait."""
        self._records.clear()
        acking, self._acking = list(self._acking), set()
        for task in acking:
            task.cancel()
        await asyncio.gather(*acking, return_exceptions=True)
        await self.inner.close()
