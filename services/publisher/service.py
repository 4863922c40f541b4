"""The publisher: ``KQ_PUB`` written from the verified log, exactly once, in log order.

``kueue-es service publisher --nats URL`` (NATS user ``publisher``: reads ``KQ_LOG``, writes ``kq.pub.>``,
events/bus/permissions.py). It folds the log as every service does (:func:`runtime.fold_decoded` into a
:class:`ClusterState`, so the batch verifier and the fold's partition rule are the deciders' own) and
publishes what the fold accepts, as :mod:`.core` says, each message only once its batch has passed: a
decision waits for the last output of its batch and is published with its record; a record carrying its
decisions (event schema 17) is published with them, each on its workload's subject. Orphans are not
published (logged ``decision_orphaned`` and counted in ``kueue_es_orphan_decisions_total``, as by the
deciders and the dispatcher: one series per reason, exported at 0 from the start).

Restartable and exactly-once: at start it reads ``KQ_PUB``'s last message and resumes after the log
sequence that message carries (``Kq-Seq``), folding from the newest snapshot at or before that point
(else from #1) and publishing nothing up to it (a log purged past that point by ``kueue-es compact``: from
the snapshot there, logging ``public_gap`` with the messages KQ_PUB misses, rather than refusing to start); a log message it left published in part (the entries
of a DispatchBatchApplied or a FactBatch, a record and some of its carried decisions: ``Kq-Entry``) is
read again and only its entries after the last one on ``KQ_PUB`` are published
(:func:`core.resume_entry`). Every public message's ``Nats-Msg-Id`` is the log message's Msg-Id (a
carried decision's: its output message's, ``<decision_id>:<i>``), so a repeat (two publishers during a
rollout) is stored once within the stream's 600 s window. Publishes are awaited one by one, so ``KQ_PUB`` is in log order.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import structlog

from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import base
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus, LogMessage, OutgoingMessage
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState
from kueue_es.services import runtime
from kueue_es.services.health import Health, ObservedBus, keep_trying
from kueue_es.services.publisher import core

log = structlog.get_logger(__name__)


class Publisher(runtime.LogFollower):
    """Folds the log on ``bus`` and publishes the verified per-workload messages to ``KQ_PUB``.

    ``start``: a snapshot's start point (used only when it lies at or before where ``KQ_PUB`` stands);
    ``health``: counts orphans and retries, and says ready once caught up.
    """

    def __init__(self, *, bus: Bus, start: runtime.StartPoint | None = None, health: Health | None = None) -> None:
        self.bus, self.start, self.health = bus, start, health
        # kueue_es_orphan_decisions_total{service="publisher"} exported at 0 from the start
        self._count_orphan = health.orphan_counter() if health is not None else None
        self.state = ClusterState()
        self.position = 0  # the last log sequence read
        self.published_through = 0  # every log message up to here is on KQ_PUB (or not public)
        self.published = 0  # messages this process put on KQ_PUB
        self.caught_up = False
        self._raw: dict[int, LogMessage] = {}  # the messages of the batch being verified, by sequence
        self._record: core.RecordRef | None = None  # the record of the batch being released
        self._ready: list[tuple[LogMessage, types.Event, core.RecordRef | None]] = []
        self.resumed_entry: tuple[int, int] | None = None  # (log seq, entries on KQ_PUB) of one left in part

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """A :meth:`Health.add_check`: ready once caught up; says how far it published."""
        return self.caught_up, {"published_through": self.published_through, "folded_seq": self.state.last_seq}

    async def run(self) -> None:
        """Find where ``KQ_PUB`` stands, then fold and publish for ever (cancel to stop)."""
        await self._resume()
        await self.follow()

    async def take(self, message: LogMessage) -> None:
        """Fold ``message`` and publish what it releases (:meth:`released`)."""
        for out in self.released(message):
            await self._publish(out)

    def stranded_expired(self) -> None:
        self._raw.clear()  # orphaned whole: nothing of it is published

    def progress(self) -> dict[str, Any]:
        return {"published_through": self.published_through}

    def released(self, message: LogMessage) -> list[tuple[LogMessage, types.Event, core.RecordRef | None]]:
        """Fold ``message`` and return what it releases for ``KQ_PUB``, in log order: ``(log message,
        event, record)`` for every accepted message past ``published_through`` whose subject is public
        (a record is public only with outputs, finished releases or carried decisions, which :meth:`outgoing`
        publishes after it; the pending outcomes a record stands for are not messages)."""
        self.position = max(self.position, message.seq)
        self._raw[message.seq] = message
        self._ready = []
        try:
            event: types.Event | None = codec.decode(message.data)
        except codec.DecodeError as err:  # as runtime.fold_message: skipped, or an orphan on a decision subject
            event = None
            if batches.partition_of(message.subject) is None:
                log.warning("event_undecodable", seq=message.seq, subject=message.subject, error=str(err))
            self.state.last_seq = max(self.state.last_seq, message.seq)
        runtime.fold_decoded(self.state, message, event, on_orphan=self.on_orphan, before_apply=self._accepted)
        open_batch = self.state.batches.open
        if open_batch is None:
            self._raw.clear()
        elif len(self._raw) > open_batch.record.output_count + 1:
            first = open_batch.head.seq
            self._raw = {seq: m for seq, m in self._raw.items() if seq >= first}
        ready, self._ready = self._ready, []
        return ready

    def _accepted(self, seq: int, event: types.Event, _state: ClusterState) -> None:
        raw = self._raw.get(seq)
        if raw is None or raw.seq <= self.published_through:
            if isinstance(event, types.DecisionRecord) and raw is not None:
                self._record = core.record_ref(seq, raw.data, event)
            return  # published before this start, or a record's pending outcome (no message of its own)
        if isinstance(event, types.DecisionRecord):
            self._record = core.record_ref(seq, raw.data, event)
        record = self._record if isinstance(event, types.DECISION_TYPES) else None
        self.published_through = seq
        if raw.subject.startswith(subjects.FACT_BATCH_PREFIX):  # shown its first fact: the batch, whole, once
            with contextlib.suppress(codec.DecodeError):
                self._ready.append((raw, codec.decode(raw.data), None))
        elif core.public_subject(raw.subject) is not None or core.is_record_results(raw.subject):
            self._ready.append((raw, event, record))

    def on_orphan(self, orphan: batches.Orphan) -> None:
        if self._count_orphan is not None:
            self._count_orphan(orphan)

    async def _publish(self, item: tuple[LogMessage, types.Event, core.RecordRef | None]) -> None:
        message, event, record = item
        time_ms = core.event_time_ms(event)
        if time_ms == 0:
            with contextlib.suppress(base.BusError):
                time_ms = await self.bus.message_time_ms(message.seq)  # type: ignore[attr-defined]
        for out in self.outgoing(item, time_ms=time_ms):
            await self._send(out)
            self.published += 1

    def outgoing(
        self, item: tuple[LogMessage, types.Event, core.RecordRef | None], *, time_ms: int
    ) -> list[OutgoingMessage]:
        """The ``KQ_PUB`` messages of ``item`` (one of :meth:`released`; ``time_ms`` for ``ce-time``):
        :func:`core.public_messages`, less the entries already on ``KQ_PUB`` of the log message this
        publisher's predecessor left published in part (``resumed_entry``, from :meth:`_resume`, then
        cleared). No I/O."""
        message, event, record = item
        out = core.public_messages(message, event, record=record, time_ms=time_ms)
        resumed, self.resumed_entry = self.resumed_entry, None
        if resumed is not None and resumed[0] == message.seq:
            out = [m for m in out if core.entry_of(m.headers)[0] > resumed[1]]
        elif resumed is not None and resumed[0] > message.seq:
            self.resumed_entry = resumed  # not there yet
        return out

    async def _send(self, out: OutgoingMessage) -> None:
        publish = self.bus.publish_public  # type: ignore[attr-defined]
        if self.health is not None:
            await keep_trying("publish", lambda: publish(out), health=self.health)
            self.health.published(out.headers.get(core.KQ_TYPE, "unknown"))
        else:
            await publish(out)

    async def _resume(self) -> None:
        last = await self.bus.last_public()  # type: ignore[attr-defined]
        self.published_through, fold_from = core.resume_point(last)
        self.resumed_entry = core.resume_entry(last)
        start, self.start = self.start, None
        # a snapshot at or below what KQ_PUB holds whole (a batch is never half read at a snapshot's position)
        exact = start is not None and (start.seq < fold_from or start.seq <= self.published_through)
        first = await self.bus.first_seq() if start is not None and not exact else 1
        if start is not None and (exact or first > 1):
            problem = await runtime.log_mismatch(self.bus, start)
            if problem is None:
                self.state, self.position = start.state, start.seq
                self.bus.folded_through(start.seq)
                log.info("started_from_snapshot", snapshot=start.origin, seq=start.seq)
                if not exact:  # the log was purged past where KQ_PUB stands (no snapshot below): said, not a crash loop
                    self.published_through = max(self.published_through, start.seq)
                    log.error(
                        "public_gap",
                        missing_from=fold_from,
                        missing_through=start.seq,
                        first_seq=first,
                        detail="KQ_LOG was purged below a snapshot past what KQ_PUB had published: what was "
                        "public among these messages is not on KQ_PUB; publishing on from the snapshot",
                    )
            else:
                log.warning("checkpoint_not_used", checkpoint=start.origin, seq=start.seq, reason=problem)
        elif start is not None:
            log.info("snapshot_not_used", seq=start.seq, reason=f"KQ_PUB needs the log from #{fold_from}")
        if self.position == 0:  # a log purged below a snapshot cannot be folded from #1
            await runtime.require_from_start(self.bus, "publisher")
        log.info("publisher_resumes", published_through=self.published_through, fold_from=self.position + 1)


async def serve_publisher(
    *,
    nats_url: str,
    stop: asyncio.Event,
    connect: Any,
    start: runtime.StartPoint | None = None,
) -> None:
    """Run the publisher against ``nats_url`` until ``stop`` is set (``connect``: the health probe's,
    so the bus is observed). Waits for ``KQ_PUB`` to exist (an admin creates it: ``kueue-es nats-setup``;
    on a server without users, where every connection may, the publisher creates it). Raises
    NotFoundError when it is still missing after the wait (the supervisor restarts the publisher)."""
    bus = await connect(nats_url)
    try:
        if getattr(bus, "creates_streams", False):  # a server without users (tests, a bare `up --nats URL`)
            await bus.ensure_public_stream()
        else:
            await bus.check_stream(nats_bus.PUBLIC_STREAM_NAME)
        health = bus.health if isinstance(bus, ObservedBus) else None
        publisher = Publisher(bus=bus, start=start, health=health)
        if health is not None:
            health.add_check(publisher.readiness)
        log.info("service_started", role="publisher")
        try:
            await runtime.run_until_stopped(stop, publisher.run())
        finally:
            log.info("service_stopped", role="publisher", published=publisher.published)
    finally:
        await bus.close()
