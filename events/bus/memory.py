"""The in-process bus: the log as a Python list, for unit tests and the core engine.

It keeps the contract of :mod:`kueue_es.events.bus.base` the way nats-server keeps it, so
code tested here behaves the same on JetStream (``tests/bus/test_contract.py``
runs one suite against both). Where the two could differ, this module follows
what nats-server 2.15 was measured to do:

- dedup by ``msg_id`` has no window: an id is remembered for the life of the
  store (JetStream forgets after ``duplicate_window``, 600 s on ``KQ_LOG``);
- an atomic batch is checked for duplicate ids first, then for the head's
  expected sequence, as the server does for batches, standalone and clustered;
- a durable consumer redelivers due messages before new ones, in sequence order,
  and holds back new ones while :data:`rules.MAX_ACK_PENDING` await their ack.

Several :class:`MemoryBus` handles can share one log (:meth:`MemoryBus.share`),
like several connections to one server: closing a handle leaves the log and its
durable consumers in place for the others.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
from collections.abc import AsyncGenerator, Sequence

import msgspec

from kueue_es.events.bus import base, rules


@dataclasses.dataclass
class _Outstanding:
    attempt: int
    due: float


@dataclasses.dataclass
class _DurableState:
    name: str
    accept: rules.SubjectFilter
    ack_wait: float
    scanned: int = 0
    ahead: collections.deque[int] = dataclasses.field(default_factory=collections.deque)
    outstanding: dict[int, _Outstanding] = dataclasses.field(default_factory=dict)


class _Store:
    """The shared log: messages, dedup ids, last sequence per subject, durables."""

    def __init__(self) -> None:
        self.log: list[base.LogMessage] = []
        self.msg_ids: dict[str, int] = {}
        self.last_by_subject: dict[str, int] = {}
        self.last_by_filter: dict[str, int] = {}  # filter -> last sequence on it (filters asked for so far)
        self.durables: dict[str, _DurableState] = {}
        self.changed = asyncio.Event()

    def notify(self) -> None:
        """Wake every waiter (readers, fetchers); they re-check their condition."""
        self.changed.set()
        self.changed = asyncio.Event()

    def append(self, message: base.OutgoingMessage) -> int:
        seq = len(self.log) + 1
        headers = {**message.headers, "Nats-Msg-Id": message.msg_id}
        self.log.append(base.LogMessage(seq=seq, subject=message.subject, data=message.data, headers=headers))
        self.msg_ids[message.msg_id] = seq
        self.last_by_subject[message.subject] = seq
        for pattern in self.last_by_filter:
            if rules.matches(message.subject, pattern):
                self.last_by_filter[pattern] = seq
        return seq

    def last_matching(self, pattern: str) -> int:
        """The last sequence on ``pattern`` (a literal subject or a filter), 0 when none; a filter
        is looked up once by a scan, then kept up to date as messages are appended."""
        if rules.is_literal(pattern):
            return self.last_by_subject.get(pattern, 0)
        if pattern not in self.last_by_filter:
            self.last_by_filter[pattern] = max(
                (seq for subject, seq in self.last_by_subject.items() if rules.matches(subject, pattern)), default=0
            )
        return self.last_by_filter[pattern]


class MemoryBus(base.Bus):
    """The bus contract over an in-process list; no I/O, no threads.

    Create one with ``MemoryBus()``; use :meth:`share` for a second handle on the
    same log. Every method raises BusError once this handle is closed.
    """

    def __init__(self) -> None:
        self._store = _Store()
        self._closed = False

    def share(self) -> MemoryBus:
        """Another handle on this log, as a second connection to one server would be."""
        other = MemoryBus()
        other._store = self._store
        return other

    def _check_open(self) -> _Store:
        if self._closed:
            raise base.BusError("This memory bus handle is closed; open another with share() before closing.")
        return self._store

    async def publish(self, message: base.OutgoingMessage) -> base.PublishAck:
        """Append ``message`` unless its ``msg_id`` is stored already (then return the original seq)."""
        store = self._check_open()
        rules.check_outgoing(message)
        if (seq := store.msg_ids.get(message.msg_id)) is not None:
            return base.PublishAck(seq=seq, duplicate=True)
        expected = message.expected_last_subject_seq
        if expected is not None and (actual := store.last_matching(message.subject)) != expected:
            raise base.ConflictError(
                f"{message.subject!r} is at sequence {actual}, not {expected}; {message.msg_id!r} was not stored."
            )
        seq = store.append(message)
        store.notify()
        return base.PublishAck(seq=seq)

    async def commit_batch(
        self,
        *,
        head: base.OutgoingMessage,
        expected_head_seq: int,
        rest: Sequence[base.OutgoingMessage],
        head_filter: str | None = None,
    ) -> int:
        """Append ``head`` and ``rest`` as one batch, or raise and store nothing (see :class:`base.Bus`)."""
        store = self._check_open()
        rules.check_batch(head=head, rest=rest)
        if head_filter is not None:
            rules.tokens(head_filter)
        ids = [head.msg_id, *(message.msg_id for message in rest)]
        if len(set(ids)) != len(ids) or any(msg_id in store.msg_ids for msg_id in ids):
            raise base.DuplicateBatchError(
                f"The batch headed by {head.msg_id!r} repeats a msg_id already stored or inside itself;"
                " nothing was stored."
            )
        expect_on = head_filter or head.subject
        actual = store.last_matching(expect_on)
        if actual != expected_head_seq:
            raise base.ConflictError(
                f"The head {expect_on!r} is at sequence {actual}, not {expected_head_seq}; nothing was stored."
            )
        last = store.append(head)
        for message in rest:
            last = store.append(message)
        store.notify()
        return last

    async def publish_together(self, messages: Sequence[base.OutgoingMessage]) -> int:
        """Append ``messages`` as one batch, or raise and store nothing (see :class:`base.Bus`)."""
        store = self._check_open()
        if not messages:
            raise base.BusError("An atomic batch needs at least one message.")
        rules.check_batch(head=messages[0], rest=messages[1:])
        ids = [message.msg_id for message in messages]
        if len(set(ids)) != len(ids) or any(msg_id in store.msg_ids for msg_id in ids):
            raise base.DuplicateBatchError(
                f"The batch of {ids[0]!r} repeats a msg_id already stored or inside itself; nothing was stored."
            )
        if any(message.expected_last_subject_seq is not None for message in messages):
            raise base.BusError("A batch published together expects no subject sequence.")
        last = 0
        for message in messages:
            last = store.append(message)
        store.notify()
        return last

    async def read(
        self, *, subjects: Sequence[str] = ("kq.>",), start_seq: int = 1
    ) -> AsyncGenerator[base.LogMessage, None]:
        """Yield the matching messages from ``start_seq`` on, then wait for more (see :class:`base.Bus`).

        ``pending`` counts the matching messages stored after the one yielded, at
        the moment it is yielded. Each stored message is examined once per reader.
        """
        store = self._check_open()
        accept = rules.SubjectFilter(subjects)
        scanned = max(start_seq, 1) - 1
        ahead: collections.deque[base.LogMessage] = collections.deque()
        while True:
            log = store.log
            while scanned < len(log):
                message = log[scanned]
                scanned += 1
                if accept(message.subject):
                    ahead.append(message)
            if ahead:
                message = ahead.popleft()
                yield msgspec.structs.replace(message, pending=len(ahead))
                continue
            changed = store.changed
            await changed.wait()
            self._check_open()

    async def last_seq(self) -> int:
        """The last stored sequence (0 when empty)."""
        return len(self._check_open().log)

    async def last_subject_seq(self, subject: str) -> int:
        """The sequence of the last message on ``subject``, or on any subject the filter ``subject`` matches (0 when none)."""
        store = self._check_open()
        rules.tokens(subject)
        return store.last_matching(subject)

    async def get(self, seq: int) -> base.LogMessage:
        """The message at ``seq``; raises NotFoundError when there is none."""
        store = self._check_open()
        if not 1 <= seq <= len(store.log):
            raise base.NotFoundError(f"There is no message at sequence {seq} (last is {len(store.log)}).")
        return store.log[seq - 1]

    async def durable(
        self,
        *,
        name: str,
        subjects: Sequence[str],
        ack_wait: float = 30.0,
        set_ack_wait: bool = False,
        set_filter: bool = False,
    ) -> base.DurableConsumer:
        """Create the durable ``name`` or bind to the existing one (whose filter and ack_wait win, the
        ack_wait unless ``set_ack_wait``, the filter unless ``set_filter``)."""
        store = self._check_open()
        state = store.durables.get(name)
        if state is None:
            state = store.durables[name] = _DurableState(
                name=name, accept=rules.SubjectFilter(subjects), ack_wait=ack_wait
            )
        else:
            if set_ack_wait:
                state.ack_wait = ack_wait
            if set_filter:
                state.accept = rules.SubjectFilter(subjects)
        return MemoryDurable(bus=self, state=state)

    async def close(self) -> None:
        """Close this handle; waiting readers raise BusError. The log stays for other handles."""
        if not self._closed:
            self._closed = True
            self._store.notify()


class MemoryDurable(base.DurableConsumer):
    """A handle on a durable consumer's state held by the shared store.

    A message stays outstanding from delivery until acked; it is delivered again
    ``ack_wait`` seconds after a delivery, or ``delay`` seconds after a nak.
    """

    def __init__(self, *, bus: MemoryBus, state: _DurableState) -> None:
        self._bus = bus
        self._state = state

    async def fetch(self, *, batch: int = 100, timeout: float = 1.0) -> list[base.Delivery]:
        """Up to ``batch`` deliveries (due redeliveries first); [] after ``timeout`` s without any."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            store = self._bus._check_open()
            now = loop.time()
            deliveries = self._collect(store=store, batch=batch, now=now)
            if deliveries or now >= deadline:
                return deliveries
            wake = min([deadline, *(entry.due for entry in self._state.outstanding.values())])
            changed = store.changed
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(wake - now, 0.0)):
                    await changed.wait()

    def _collect(self, *, store: _Store, batch: int, now: float) -> list[base.Delivery]:
        state = self._state
        log = store.log
        while state.scanned < len(log):
            state.scanned += 1
            if state.accept(log[state.scanned - 1].subject):
                state.ahead.append(state.scanned)
        due = sorted(seq for seq, entry in state.outstanding.items() if entry.due <= now)[:batch]
        chosen = [(seq, state.outstanding[seq].attempt + 1, len(state.ahead)) for seq in due]
        room = rules.MAX_ACK_PENDING - len(state.outstanding)
        while state.ahead and len(chosen) < batch and room > 0:
            seq = state.ahead.popleft()
            room -= 1
            chosen.append((seq, 1, len(state.ahead)))
        deliveries = []
        for seq, attempt, pending in chosen:
            state.outstanding[seq] = _Outstanding(attempt=attempt, due=now + state.ack_wait)
            message = msgspec.structs.replace(log[seq - 1], pending=pending)
            deliveries.append(base.Delivery(message=message, attempt=attempt, token=seq))
        return deliveries

    async def ack(self, delivery: base.Delivery) -> None:
        """Forget the message; acking twice, or after a newer delivery, is harmless."""
        store = self._bus._check_open()
        outstanding = self._state.outstanding
        if outstanding.pop(delivery.message.seq, None) is not None and len(outstanding) == rules.MAX_ACK_PENDING - 1:
            store.notify()

    async def nak(self, delivery: base.Delivery, *, delay: float = 0.0) -> None:
        """Make the message due again ``delay`` seconds from now (no-op once acked)."""
        store = self._bus._check_open()
        entry = self._state.outstanding.get(delivery.message.seq)
        if entry is not None:
            entry.due = asyncio.get_running_loop().time() + delay
            store.notify()

    async def in_progress(self, delivery: base.Delivery) -> None:
        """Make the message due again ``ack_wait`` seconds from now (no-op once acked)."""
        self._bus._check_open()
        entry = self._state.outstanding.get(delivery.message.seq)
        if entry is not None:
            entry.due = asyncio.get_running_loop().time() + self._state.ack_wait
