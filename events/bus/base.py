"""The bus contract: one append-only log that every kueue-es service shares.

Two implementations keep this contract: :mod:`kueue_es.events.bus.memory` (in-process, for
unit tests and the core scenario engine) and :mod:`kueue_es.events.bus.nats` (NATS
JetStream, the real thing). ``tests/bus/test_contract.py`` runs one suite against
both, and against a 3-node nats-server cluster, so the fake never drifts from the
real log. Design: ARCHITECTURE.md §2-§3, research/event-sourcing.md §2.3-§2.6, §5.6.

Sequences are the stream's sequence numbers: 1-based, gap-free for a log that
never deletes, identical for every reader.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncGenerator, Sequence

import msgspec

STREAM_NAME = "KQ_LOG"
STREAM_SUBJECTS = ("kq.in.>", "kq.dec.>", "kq.disp.>")


class OutgoingMessage(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A message to append: subject, payload bytes, and the dedup id.

    ``msg_id`` becomes the ``Nats-Msg-Id`` header; a second publish with the same
    id inside the duplicate window is acknowledged as a duplicate and not stored.
    ``headers`` are extra headers (``Kq-Type`` etc.), all strings.
    """

    subject: str
    data: bytes
    msg_id: str
    headers: dict[str, str] = {}
    expected_last_subject_seq: int | None = None
    """When set, the message is stored only if the last message on ``subject`` has this sequence
    (0: none yet; JetStream's ``Nats-Expected-Last-Subject-Sequence``); else the publish raises
    ConflictError and stores nothing (a dispatch result per record, issue 18)."""


class LogMessage(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A stored message as a reader sees it.

    ``seq`` is its stream sequence; ``pending`` is 0 when no message matching the reader's
    filters followed it at delivery time (the reader has caught up), else at least 1: how many
    matching messages followed, or (a NATS reader of several filters, which reads the whole log)
    how many messages of any subject did. ``time_ms``: when JetStream stored it (its
    ``Nats-Time-Stamp``), ms since the epoch; 0 where the reader does not know it (the memory bus, a
    log file written without it, a message a tool made). The tools show it for an event that
    carries no time of its own (``kueue-es explain``'s ``~`` times, ``--at TIME``); no fold reads it.
    """

    seq: int
    subject: str
    data: bytes
    headers: dict[str, str] = {}
    pending: int = 0
    time_ms: int = 0


class PublishAck(msgspec.Struct, frozen=True, kw_only=True):
    """The result of a publish: the stored sequence, or the original one for a duplicate."""

    seq: int
    duplicate: bool = False


class BusError(Exception):
    """Base class of every error the bus raises."""


class TransientBusError(BusError):
    """An operation failed in a way that may pass when tried again: no answer in time, no
    responder (JetStream restarting), the connection reconnecting or its buffer full.

    Whether the operation took effect is unknown for a write (a publish's Msg-Id makes a
    repeat safe; a batch is never re-sent, its author folds the log to find out). Services
    keep trying and report not-ready meanwhile (:mod:`kueue_es.services.health`).
    """


class ConflictError(BusError):
    """A batch's expected head sequence is stale: another decider committed first (or a publish's
    ``expected_last_subject_seq`` is: another message is on its subject since).

    Nothing of the batch was stored. The decider must fold the log again and
    decide afresh (never re-send a batch computed from an old basis).
    """


class DuplicateBatchError(BusError):
    """A batch carried a ``msg_id`` already stored: the whole batch was rejected.

    This happens when a commit whose acknowledgement was lost is retried; the
    earlier copy is in the log and will reach the decider through its reader.
    """


class NotFoundError(BusError):
    """No message is stored at the requested sequence."""


class BusStatus(msgspec.Struct, frozen=True, kw_only=True):
    """How a bus connection and its readers stand, for a service's /readyz.

    ``connected``: the connection is up. ``readers``: open readers (``read`` iterations and
    durable consumers); ``consuming``: those whose position the server confirmed since the
    connection last came back (a consumer created or a fetch answered); ``caught_up``: every
    reader has been delivered everything that was on the log when it (re)subscribed;
    ``lag``: messages the readers have still to be delivered, as the server last counted
    them; ``retrying``: operations being tried again after a transient failure (``publish``, ...).
    """

    connected: bool = True
    readers: int = 0
    consuming: int = 0
    caught_up: bool = True
    lag: int = 0
    retrying: tuple[str, ...] = ()


class Delivery(msgspec.Struct, frozen=True, kw_only=True):
    """One delivery from a durable consumer; ``attempt`` counts from 1."""

    message: LogMessage
    attempt: int = 1
    token: object = None  # implementation's handle for ack/nak


class DurableConsumer(abc.ABC):
    """At-least-once delivery that survives restarts (the dispatcher's input).

    Messages are delivered in sequence order; one that is neither acked nor
    nak'ed within ``ack_wait`` seconds is delivered again, as is one nak'ed.
    """

    @abc.abstractmethod
    async def fetch(self, *, batch: int = 100, timeout: float = 1.0) -> list[Delivery]:
        """Return up to ``batch`` deliveries; an empty list when none came within ``timeout`` s."""

    @abc.abstractmethod
    async def ack(self, delivery: Delivery) -> None:
        """Acknowledge: the message is never delivered to this consumer again."""

    @abc.abstractmethod
    async def nak(self, delivery: Delivery, *, delay: float = 0.0) -> None:
        """Ask for redelivery after ``delay`` seconds."""

    async def in_progress(self, delivery: Delivery) -> None:  # noqa: B027 -- optional, not abstract
        """Say the message is still being worked on: its ``ack_wait`` starts again (JetStream's
        ``+WIP``); a no-op where the consumer has no such signal."""

    async def close(self) -> None:  # noqa: B027 -- optional, not abstract
        """Stop using this handle: no more fetches (the consumer and its position stay on the server;
        what was delivered and not acked is delivered again after its ack wait)."""


class Bus(abc.ABC):
    """The log: append, atomically commit decision batches, read in order."""

    @abc.abstractmethod
    async def publish(self, message: OutgoingMessage) -> PublishAck:
        """Append one message (a fact or a dispatch result), deduplicated by ``msg_id``."""

    @abc.abstractmethod
    async def commit_batch(
        self,
        *,
        head: OutgoingMessage,
        expected_head_seq: int,
        rest: Sequence[OutgoingMessage],
        head_filter: str | None = None,
    ) -> int:
        """Append ``head`` then ``rest`` as one atomic batch, or nothing.

        ``head`` goes on a head subject and is stored only if the last message on
        ``head_filter`` (a filter, wildcards allowed; default ``head.subject``) has sequence
        ``expected_head_seq`` (0: none yet). The deciders pass every head of the partition
        (``kq.dec.<p>.head.*``): each publishes on its own head, all check one token.
        Returns the sequence of the last stored message.

        Raises ConflictError on a stale ``expected_head_seq``, DuplicateBatchError
        if any ``msg_id`` was already stored, BusError on other failures.
        At most 999 messages in ``rest``.
        """

    async def publish_together(self, messages: Sequence[OutgoingMessage]) -> int:
        """Append ``messages`` (facts: no expected sequences) as one atomic batch, or nothing, so that a reader
        never sees some of them without the others: the first is delivered with the rest ``pending`` behind it,
        and a decider, which decides only once caught up, folds them all before its next cycle (a watcher's
        facts from one object write). Returns the sequence of the last one.

        Raises DuplicateBatchError when any ``msg_id`` is stored already (nothing stored: publish them one by
        one then, each deduplicated), BusError on other failures. At most 1,000 messages. This default publishes
        them one by one, not atomically: a bus that can batch overrides it."""
        last = 0
        for message in messages:
            last = (await self.publish(message)).seq
        return last

    @abc.abstractmethod
    def read(self, *, subjects: Sequence[str] = ("kq.>",), start_seq: int = 1) -> AsyncGenerator[LogMessage, None]:
        """Yield every stored message matching any of ``subjects`` (NATS wildcards
        ``*`` and ``>``) from ``start_seq`` on, in sequence order, then wait for new
        ones forever (cancel the iteration to stop). ``pending`` tells when caught up.
        Leaving early: wrap in ``contextlib.aclosing`` so the reader (a server-side
        consumer on NATS) is released at once, not when garbage-collected.
        """

    @abc.abstractmethod
    async def last_seq(self) -> int:
        """The last stored sequence of the stream (0 when empty)."""

    async def first_seq(self) -> int:
        """The first stored sequence (1 on a log never purged, also when empty; a log purged below a
        snapshot starts later: kueue_es.snapshots). This default suits a bus that never purges."""
        return 1

    @abc.abstractmethod
    async def last_subject_seq(self, subject: str) -> int:
        """The sequence of the last message on ``subject`` (0 when none); a filter with
        wildcards gives the last message on any subject it matches."""

    @abc.abstractmethod
    async def get(self, seq: int) -> LogMessage:
        """The message stored at ``seq``; raises NotFoundError (a BusError) if none."""

    @abc.abstractmethod
    async def durable(
        self,
        *,
        name: str,
        subjects: Sequence[str],
        ack_wait: float = 30.0,
        set_ack_wait: bool = False,
        set_filter: bool = False,
    ) -> DurableConsumer:
        """Create or bind the durable consumer ``name`` over ``subjects``, starting at
        the first message; a consumer bound again resumes after its last ack, with its
        own ``ack_wait`` (seconds) unless ``set_ack_wait`` (then this one), and its own
        filter unless ``set_filter`` (then ``subjects``: a newer kueue-es reads more)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections; the log itself stays."""

    def status(self) -> BusStatus:
        """The connection's and readers' state (:class:`BusStatus`); a bus without a connection
        (in memory) is always connected and consuming."""
        return BusStatus()

    def folded_through(self, seq: int) -> None:
        """The caller holds everything it reads up to ``seq`` without reading it here (it started
        from a snapshot at ``seq``, or nothing it reads follows): a health wrapper counts it as
        caught up once ``seq`` reaches the log's end it knew; a plain bus keeps nothing."""
        del seq  # nothing to keep without a health wrapper
