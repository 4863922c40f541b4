"""The dispatcher's results per DecisionRecord: one DispatchBatchApplied per record and pass (issue 18).

Why this module exists: one DispatchApplied per decision was a sixth of the log (50,120 of 312,165
messages of a large-scale run). A record's outputs are contiguous on the log (head at ``h``, outputs
``h+1..h+outputCount``, at most ``MAX_BATCH``), fixed once committed, so the decisions of one record
that one pass of the dispatcher applies are answered by one
:class:`~kueue_es.events.types.DispatchBatchApplied` listing ``(decision_seq, workload, action, ...)``
of each, on the record's own subject ``kq.disp.<cluster>.rec.<partition>.<h>``
(:func:`~kueue_es.events.subjects.record_dispatch_subject`).

What keeps it exact without the duplicate window (docs/benchmarks.md, branch ``disprec``): which of a
record's decisions a pass applies is not fixed (a nak'ed Job write comes back later, a restart
redelivers only the unacked ones), so the results are published with
``Nats-Expected-Last-Subject-Sequence``: the first on a record's subject expects 0, the next the
sequence the one before was stored at. A refused publish (ConflictError) means someone (this
dispatcher before a restart, or the holder a standby took over from, whose publish was still in
flight) answered part of the record already: the subject's few messages are read, the decisions they
answer are left out (and acked, as their result is stored), and the rest is published expecting the
last sequence read. A decision is acked only once a result naming it is stored
(:mod:`~kueue_es.services.dispatcher.settling`).

DispatchFailed stays one per decision on the workload's subject (its Msg-Id ``disp:<cluster>:<seq>``),
as do the results of a decision whose record its Msg-Id does not name (a DispatchApplied as before).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import Bus, BusError, ConflictError, LogMessage

log = structlog.get_logger(__name__)

MAX_CONFLICTS = 8
"""Refused publishes of one result in a row before the result fails (raised as a batch's failure:
the decisions are delivered again). Each refusal means another writer stored a result on the record
meanwhile; two dispatchers never write at once for long (the standby lease)."""

REMEMBERED_RECORDS = 4096
"""Record subjects whose last stored sequence is remembered (the oldest forgotten first): a forgotten
one is expected empty, refused, and read, which costs a read, never a wrong result."""


def record_of(message: LogMessage, carried_index: int = 0) -> tuple[str, int] | None:
    """``(partition, record sequence)`` of a decision delivered from the log, from its Msg-Id
    ``<role>:<partition>:<basisSeq>:<index>``: output ``index`` of the record at ``seq - index``, or
    (``carried_index`` > 0, event schema 17) decision ``carried_index`` the record at ``seq`` carries;
    None when the Msg-Id does not say (then its result is a DispatchApplied of its own)."""
    role_partition_basis, _, index_text = message.headers.get("Nats-Msg-Id", "").rpartition(":")
    parts = role_partition_basis.split(":")
    if len(parts) != 3 or not index_text.isdigit():
        return None
    index = int(index_text)
    if carried_index:
        return (parts[1], message.seq) if index == carried_index else None
    if index < 1 or index >= message.seq:
        return None
    return parts[1], message.seq - index


def results_msg_id(cluster: str, partition: str, record_seq: int, expected: int, seqs: list[Decided]) -> str:
    """The Msg-Id of a DispatchBatchApplied: ``disp:<cluster>:rec:<partition>:<record seq>:<expected
    seq>:<digest of the decisions>`` (each its sequence, and ``.<index>`` for one its record carries); a
    retried publish of the same result is a duplicate, a result of other decisions never is."""
    names = [f"{seq}.{index}" if index else str(seq) for seq, index in seqs]
    digest = hashlib.sha256(",".join(names).encode()).hexdigest()[:16]
    return f"disp:{cluster}:rec:{partition}:{record_seq}:{expected}:{digest}"


Decided = tuple[int, int]
"""Which decision a result answers: ``(decision_seq, decision_index)`` (the index 0 for a decision of its own
message, else its place among the decisions its record carries: ``DispatchEntry.decision_index``)."""


def decided(entry: types.DispatchEntry | types.DispatchApplied | types.DispatchFailed) -> Decided:
    """The :data:`Decided` a result names (a DispatchApplied or DispatchFailed: index 0, a decision of its own)."""
    return (entry.decision_seq, entry.decision_index if isinstance(entry, types.DispatchEntry) else 0)


@dataclass(frozen=True, slots=True)
class _Stored:
    """What a record's subject holds as far as this dispatcher knows: its last sequence and the
    decisions its results answer."""

    last: int
    answered: frozenset[Decided]


@dataclass(slots=True)
class _Group:
    """The applied decisions of one record gathered in this pass, not yet handed to a publish."""

    partition: str
    record_seq: int
    entries: list[types.DispatchEntry] = field(default_factory=list)
    stored: list[Any] = field(default_factory=list)  # the Settlements whose ``stored`` the publish becomes


class RecordResults:
    """Gathers a pass's applied decisions per record and publishes each record's DispatchBatchApplied.

    ``bus``: where to publish and read; ``cluster``: the dispatch subject's cluster token. The runner
    :meth:`add` s each applied decision (with its Settlement) in decision order and :meth:`flush`
    es (hands the gathered results to ``settling``) before any other result and at the end of a
    batch. ``published``: results published; ``duplicates``: results found stored already, the same
    decisions expecting the same sequence (the duplicate window); ``refused``: publishes refused (a
    record answered in part already); ``answered_before``: decisions found answered on reading a refused record.
    """

    def __init__(self, *, bus: Bus, cluster: str) -> None:
        self.bus, self.cluster = bus, cluster
        self._group: _Group | None = None
        self._last: OrderedDict[str, asyncio.Future[_Stored | None]] = OrderedDict()
        self.published = 0
        self.duplicates = 0
        self.refused = 0
        self.answered_before = 0

    def add(
        self, record: tuple[str, int], applied: types.DispatchApplied, settlement: Any, settling: Any, *, index: int = 0
    ) -> None:
        """Gather ``applied`` (of a decision of ``record``, ``(partition, record seq)``; ``index`` > 0: the
        decision's place among those the record carries) for its record's result; a decision of another
        record first flushes what was gathered (to ``settling``)."""
        group = self._group
        if group is not None and (group.partition, group.record_seq) != record:
            self.flush(settling)
            group = None
        if group is None:
            group = self._group = _Group(partition=record[0], record_seq=record[1])
        group.entries.append(
            types.DispatchEntry(
                decision_seq=applied.decision_seq,
                decision_index=index,
                workload=applied.workload,
                action=applied.action,
                target=applied.target,
                node_selector=applied.node_selector,
            )
        )
        group.stored.append(settlement)

    def flush(self, settling: Any) -> asyncio.Future[None] | None:
        """Hand what was gathered to ``settling`` (:meth:`Settling.result`): one DispatchBatchApplied
        publish, which each gathered Settlement's ``stored`` becomes; returns its future (None when
        nothing was gathered)."""
        group, self._group = self._group, None
        if group is None:
            return None
        future: asyncio.Future[None] = settling.result(self.publish(group.partition, group.record_seq, group.entries))
        for settlement in group.stored:
            settlement.stored = future
        return future

    def publish(self, partition: str, record_seq: int, entries: list[types.DispatchEntry]) -> Coroutine[Any, Any, None]:
        """The publish of ``entries``' result on the record's subject, chained after the one before on
        that subject (it expects that one's sequence, and leaves out the decisions answered there).
        Its place in the chain is taken now, so the returned coroutine may start late."""
        subject = subjects.record_dispatch_subject(partition, record_seq, self.cluster)
        previous = self._last.pop(subject, None)
        mine: asyncio.Future[_Stored | None] = asyncio.get_running_loop().create_future()
        self._last[subject] = mine
        while len(self._last) > REMEMBERED_RECORDS:
            oldest = next(iter(self._last))
            if not self._last[oldest].done():
                break
            del self._last[oldest]
        return self._publish(subject, partition, record_seq, entries, previous, mine)

    async def _publish(
        self,
        subject: str,
        partition: str,
        record_seq: int,
        entries: list[types.DispatchEntry],
        previous: asyncio.Future[_Stored | None] | None,
        mine: asyncio.Future[_Stored | None],
    ) -> None:
        stored: _Stored | None = None  # what the subject holds once this is done (None: not known)
        try:
            known: _Stored | None = _Stored(last=0, answered=frozenset())
            if previous is not None:
                try:
                    known = await asyncio.shield(previous)
                except BaseException:  # noqa: BLE001 -- the one before failed: what the subject holds is read
                    if not previous.done():
                        raise  # cancelled ourselves
                    known = None
            for _ in range(MAX_CONFLICTS):
                if known is None:
                    last, answered = await self.answered(subject, record_seq)
                    known = _Stored(last=last, answered=frozenset(answered))
                left = [entry for entry in entries if decided(entry) not in known.answered]
                self.answered_before += len(entries) - len(left)
                entries = left
                if not entries:
                    log.info("dispatch_results_stored_before", subject=subject, last=known.last)
                    stored = known
                    return
                seqs = [decided(entry) for entry in entries]
                result = types.DispatchBatchApplied(partition=partition, record_seq=record_seq, entries=entries)
                message = msgspec.structs.replace(
                    subjects.message(
                        result,
                        subject=subject,
                        msg_id=results_msg_id(self.cluster, partition, record_seq, known.last, seqs),
                    ),
                    expected_last_subject_seq=known.last,
                )
                try:
                    ack = await self.bus.publish(message)
                except ConflictError as err:
                    self.refused += 1
                    log.info("dispatch_results_refused", subject=subject, expected=known.last, error=str(err))
                    known = None
                    continue
                if ack.duplicate:  # this very result was stored (a retry, a restart): others may follow it
                    self.duplicates += 1
                else:
                    self.published += 1
                    stored = _Stored(last=ack.seq, answered=known.answered | frozenset(seqs))
                return
            raise BusError(f"The results of {len(entries)} decisions on {subject!r} were refused {MAX_CONFLICTS} times")
        finally:
            if not mine.done():
                mine.set_result(stored)

    async def answered_already(self, record: tuple[str, int], seq: int, index: int = 0) -> bool:
        """Whether a result on ``record``'s subject (``(partition, record seq)``) answers the decision at
        ``seq`` (``index`` > 0: the one of that place the record carries): what this dispatcher stored
        there (once its results handed over are done), else what the subject holds. Asked before a
        DispatchFailed of a decision delivered again, so a decision applied before a restart is not
        answered a second time."""
        subject = subjects.record_dispatch_subject(record[0], record[1], self.cluster)
        mine = self._last.get(subject)
        if mine is not None:
            known = await asyncio.shield(mine)
            if known is not None:
                return (seq, index) in known.answered
        _, answered = await self.answered(subject, record[1])
        return (seq, index) in answered

    async def answered(self, subject: str, record_seq: int) -> tuple[int, set[Decided]]:
        """``(last sequence, decisions answered)`` of the record's results on ``subject`` as stored
        now: every DispatchBatchApplied there, read from the record on (0 and none when empty)."""
        last = await self.bus.last_subject_seq(subject)
        answered: set[Decided] = set()
        if last == 0:
            return 0, answered
        reader = self.bus.read(subjects=(subject,), start_seq=record_seq + 1 if record_seq < last else 1)
        async with contextlib.aclosing(reader):
            async for message in reader:
                with contextlib.suppress(codec.DecodeError):
                    event = codec.decode(message.data)
                    entries = event.entries if isinstance(event, types.DispatchBatchApplied) else ()
                    answered.update(decided(entry) for entry in entries or types.dispatch_results(event))
                if message.seq >= last:
                    break
        return last, answered
