"""Open a log (a running system, a stopped one's store, a JSON-lines file) and fold it up to a point.

``kueue-es explain``, ``list`` and ``status`` (and any other reader of "the state as of then") use it:

- :func:`parse_at` reads ``--at SEQ|RFC3339`` into an :class:`At`;
- :class:`Folder` folds messages as every service does (``runtime.fold_decoded``: only verified
  decision batches count) and tells an observer each event the fold accepts, with its sequence,
  before it is applied (so the observer sees the state just before it); it stops at the ``--at``;
- :func:`fold_source` opens the source, starts from a snapshot when allowed and useful, reads the
  messages (Direct Get batches when the server answers them, nats-py otherwise), and shows a rich
  progress bar on stderr once a fold has taken more than a second.

Times: a message's time is its event's own ``atMs`` (decisions, dispatcher and watcher facts that
carry one), its DecisionRecord's ``nowMs`` or its Workload's creation time; an event without one
(objects observed and deleted, dispatch results) takes the time JetStream stored its message
(``LogMessage.time_ms``: when it was published), and none where the reader does not know that (a
log file written without it, a simulated what-if log). ``--at TIME`` folds every message up to the
first one whose time is after TIME: the last message at or before it (a message with no time at all
counts as before while no later time was seen). ``--at SEQ`` folds
through sequence SEQ; a decision batch whose record is at or before SEQ but whose last output is
after it is not folded (the fold takes a batch whole, as the services do).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kueue_es import logfile
from kueue_es.events import codec, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.events.bus.server import Credentials
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.runtime import fold_decoded

Observer = Callable[[int, types.Event, ClusterState], None]
"""Called with (sequence, accepted event, the state just before the event is applied)."""
MessageHook = Callable[[LogMessage], None]
"""Called with each message a :class:`Folder` folds, before its events reach the observer (so a reader
can take the message's stored time, ``LogMessage.time_ms``, for events that carry none)."""


class LogSourceError(Exception):
    """The log cannot be read as asked (no such file, a purged log, an --at outside it); the message says why."""


@dataclass(frozen=True)
class At:
    """Where to stop folding: a sequence (``seq``), or a time (``ms``, ms since the epoch); ``text`` as given."""

    text: str
    seq: int | None = None
    ms: int | None = None


def parse_at(text: str, *, option: str = "--at") -> At:
    """``--at`` (or another ``option``, named in errors) as a sequence (digits, >= 1) or an RFC 3339 time
    (``2026-12-01T23:00:00Z``; no zone: UTC).

    Raises ValueError naming the option and the value when it is neither."""
    value = text.strip()
    if value.isdigit():
        if int(value) < 1:
            raise ValueError(f"{option} {text!r}: a sequence starts at 1")
        return At(text=value, seq=int(value))
    try:
        moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{option} {text!r} is neither a log sequence nor an RFC 3339 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return At(text=value, ms=int(moment.timestamp() * 1000))


def rfc3339(ms: int) -> str:
    """``ms`` since the epoch as RFC 3339 in UTC with milliseconds (``2026-12-01T23:00:00.123Z``); "" for 0."""
    if not ms:
        return ""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


_EXACT_TYPES = frozenset(types.ALL_TYPES)  # an event of one of these is a DecisionRecord only if it is that type


def message_time(message: LogMessage, event: types.Event | None) -> int:
    """The time of a log message, ms since the epoch: its event's own (:func:`event_time`), else the time
    JetStream stored it (``message.time_ms``; 0 when the reader does not know it)."""
    own = event_time(event) if event is not None else 0
    return own or message.time_ms


def event_time(event: types.Event) -> int:
    """The time an event carries (``atMs``, a DecisionRecord's ``nowMs``, a WorkloadObserved's
    Workload ``creationTimestamp``; a FactBatch: the latest of its facts'), ms since the epoch; 0 when none.

    A WorkloadObserved carries no ``atMs``: without its creation time, a fold "as of" a time
    would take a workload created later for one that existed then (the fold's clock is the
    latest time met, and the message before may be minutes older). A later observation of the
    same workload carries the same creation time, which never moves the clock back."""
    kind = type(event)
    if kind is types.DecisionRecord or (kind not in _EXACT_TYPES and isinstance(event, types.DecisionRecord)):
        return event.now_ms  # type: ignore[union-attr]
    if kind is types.WorkloadObserved:
        return event.workload.metadata.creation_timestamp_ms  # type: ignore[union-attr]
    if kind is types.FactBatch:  # the watcher's burst of workload facts: the latest of theirs
        return max((event_time(fact) for fact in event.facts), default=0)  # type: ignore[union-attr]
    value = getattr(event, "at_ms", 0)
    return value if isinstance(value, int) else 0


@dataclass
class Folder:
    """Folds messages in sequence order into ``state``, up to ``at``, telling ``observer`` each accepted event.

    ``last_ms`` is the latest time met (:func:`message_time`: the fold's "now": ages, the visibility
    order's fair-sharing clock); ``stopped`` turns True at the first message past ``at`` (that message
    is not folded; past a time, ``stopped_at`` is its sequence and time); ``read`` counts the messages fed. ``on_message`` sees each message folded, before
    ``observer`` sees its events."""

    state: ClusterState = field(default_factory=ClusterState)
    at: At | None = None
    observer: Observer | None = None
    on_message: MessageHook | None = None
    last_ms: int = 0
    stopped: bool = False
    read: int = 0
    last_read: int = 0  # the sequence of the last message folded
    stopped_at: tuple[int, int] | None = None  # the message past a time ``at``: (its sequence, its time)

    def feed(self, message: LogMessage) -> bool:
        """Fold ``message``; False (and nothing folded) once it is past ``at``."""
        at = self.at
        if at is not None and at.seq is not None and message.seq > at.seq:
            self.stopped = True
            return False
        try:
            event: types.Event | None = codec.decode(message.data)
        except codec.DecodeError:
            event = None
        moment = message_time(message, event)
        if at is not None and at.ms is not None and moment > at.ms:
            self.stopped = True
            self.stopped_at = (message.seq, moment)
            return False
        if moment > self.last_ms:
            self.last_ms = moment
        self.read += 1
        self.last_read = message.seq
        if self.on_message is not None:
            self.on_message(message)
        state = self.state
        if event is None:
            state.last_seq = max(state.last_seq, message.seq)
        fold_decoded(state, message, event, before_apply=self.observer)
        return True


@dataclass(frozen=True, kw_only=True)
class Source:
    """A log to read: a running system's NATS URL (with its reading user), a stopped system's store
    directory, or a JSON-lines file (:mod:`kueue_es.logfile`). Exactly one of the three is set."""

    nats_url: str | None = None
    credentials: Credentials | None = None
    store: Path | None = None
    file: Path | None = None
    origin: str = ""

    def describe(self) -> str:
        """Where the log comes from, for people."""
        if self.file is not None:
            return f"file {self.file}"
        if self.store is not None:
            return f"store {self.store}"
        return f"{self.nats_url} ({self.origin})" if self.origin else str(self.nats_url)


@dataclass(kw_only=True)
class Folded:
    """What :func:`fold_source` leaves: the fold, where it started (0: #1; else a snapshot's position)
    and ended, the log's last sequence, and notes for people (a snapshot start)."""

    folder: Folder
    start_seq: int = 0
    last_seq: int = 0
    notes: list[str] = field(default_factory=list)
    live: bool = False  # a running system's log folded to its end: "now" is the wall clock

    @property
    def state(self) -> ClusterState:
        """The folded state."""
        return self.folder.state

    @property
    def now_ms(self) -> int:
        """The time the fold stands for (ms since the epoch): the wall clock for a running system read to its
        end (``live``), else the latest time in the log folded (as of ``--at``)."""
        if self.live:
            return max(self.folder.last_ms, int(time.time() * 1000))
        return self.folder.last_ms


class _LazyProgress:
    """A rich progress bar on stderr that appears only once the fold has taken more than ``delay`` s."""

    def __init__(self, *, enabled: bool, total: int | None, delay: float = 1.0) -> None:
        self.enabled, self.total, self.delay = enabled, total, delay
        self.started = time.monotonic()
        self._bar: Any = None
        self._task: Any = None
        self._pending = 0

    def advance(self, count: int = 1) -> None:
        if not self.enabled:
            return
        self._pending += count
        if self._pending < 512:
            return
        if self._bar is None:
            if time.monotonic() - self.started < self.delay:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(
                TextColumn("folding the log"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("fold", total=self.total)
        self._bar.advance(self._task, self._pending)
        self._pending = 0

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def fold_messages(
    messages: Iterator[LogMessage],
    folder: Folder,
    *,
    progress: bool = False,
    total: int | None = None,
) -> Folder:
    """Feed ``messages`` to ``folder`` until they end or one is past its ``at``; a progress bar after 1 s
    when ``progress``. Pure but for the bar."""
    bar = _LazyProgress(enabled=progress, total=total)
    try:
        for message in messages:
            if not folder.feed(message):
                break
            bar.advance()
    finally:
        bar.close()
    return folder


def fold_source(
    source: Source,
    *,
    at: At | None = None,
    observer: Observer | None = None,
    from_start: bool = False,
    progress: bool | None = None,
    on_start: Callable[[ClusterState, int], None] | None = None,
    on_message: MessageHook | None = None,
) -> Folded:
    """Open ``source`` and fold it up to ``at`` (None: its end now).

    ``from_start``: fold from message #1 (a reader of the whole story, ``explain``); otherwise start
    from the newest verified snapshot (:mod:`kueue_es.snapshots`) at or before an ``--at SEQ`` (any
    snapshot when there is no ``--at``), when the log is on NATS and has one. On a purged log (first
    sequence > 1) the fold starts from the oldest snapshot whatever ``from_start`` says, and says so in
    :attr:`Folded.notes`. ``progress`` None: a bar when stderr is a terminal. ``on_start(state, seq)`` is
    called when the fold starts from a snapshot's state at position ``seq``, before any message;
    ``on_message`` with each message folded (:attr:`Folder.on_message`).

    Raises LogSourceError (no such file, a purged log without snapshot), BusError (NATS unreachable)."""
    if progress is None:
        progress = sys.stderr.isatty()
    folder = Folder(at=at, observer=observer, on_message=on_message)
    if source.file is not None:
        if not source.file.is_file():
            raise LogSourceError(f"no log file {source.file}")
        fold_messages(logfile.read_lines(source.file), folder, progress=progress)
        return Folded(folder=folder, last_seq=folder.last_read)
    if source.store is not None:
        return asyncio.run(_fold_store(source, folder, from_start=from_start, progress=progress, on_start=on_start))
    folded = asyncio.run(_fold_nats(source, folder, from_start=from_start, progress=progress, on_start=on_start))
    folded.live = at is None
    return folded


async def _fold_store(
    source: Source,
    folder: Folder,
    *,
    from_start: bool,
    progress: bool,
    on_start: Callable[[ClusterState, int], None] | None,
) -> Folded:
    from kueue_es.events.bus.server import open_stopped_store, store_reader

    assert source.store is not None
    if not source.store.is_dir():
        raise LogSourceError(f"no nats store directory {source.store}")
    async with open_stopped_store(source.store) as server:
        inner = Source(nats_url=server.url, origin=f"store {source.store}", credentials=store_reader(server))
        return await _fold_nats(inner, folder, from_start=from_start, progress=progress, on_start=on_start)


async def _fold_nats(
    source: Source,
    folder: Folder,
    *,
    from_start: bool,
    progress: bool,
    on_start: Callable[[ClusterState, int], None] | None = None,
) -> Folded:
    from kueue_es import checkpoints, snapshots
    from kueue_es.events.bus import base
    from kueue_es.events.bus import nats as nats_bus

    assert source.nats_url is not None
    notes: list[str] = []
    bus = await nats_bus.connect(source.nats_url, credentials=source.credentials, create_stream=False)
    try:
        first, last = await bus.first_seq(), await bus.last_seq()
        loaded = None
        purged = first > 1
        at = folder.at
        if purged or not from_start:
            with contextlib.suppress(base.BusError):  # a bucket that cannot be listed: fold from the log
                usable = [(seq, name) for seq, name in await snapshots.positions(bus) if seq >= first]
                if at is not None and at.seq is not None:
                    usable = [(seq, name) for seq, name in usable if seq <= at.seq]
                if purged and (from_start or (at is not None and at.ms is not None)):
                    candidates = usable[:1]  # the whole story left, or a time we cannot place: the oldest
                elif at is not None and at.ms is not None:
                    candidates = []  # where a time falls is known only by reading: fold from #1
                else:
                    candidates = list(reversed(usable))  # the newest first
                for _, name in candidates:
                    try:
                        loaded = await snapshots.load(bus, name)
                        break
                    except checkpoints.CheckpointError as err:
                        notes.append(f"snapshot refused: {err}")
        if purged and at is not None and at.seq is not None and at.seq < first:
            raise LogSourceError(f"--at {at.seq} is before the log's first sequence #{first} (purged below it)")
        if purged and loaded is None:
            raise LogSourceError(
                f"the log starts at #{first} (purged below it) and no verified snapshot covers it: "
                "nothing before it can be folded"
            )
        start = 0
        if loaded is not None:
            folder.state = loaded.state
            start = loaded.seq
            if on_start is not None:
                on_start(loaded.state, loaded.seq)
            notes.append(f"folded from snapshot {loaded.name} (#{loaded.seq}), not from #1")
            if purged:
                notes.append(f"the log starts at #{first}: what happened before the snapshot is not in it")
        if last == 0 or (at is not None and at.seq is not None and at.seq <= start):
            return Folded(folder=folder, start_seq=start, last_seq=last, notes=notes)
        stop = last if at is None or at.seq is None else min(last, at.seq)
        if start >= stop:
            return Folded(folder=folder, start_seq=start, last_seq=last, notes=notes)
        direct = await asyncio.to_thread(_direct_fold, source, folder, start + 1, stop, progress)
        if not direct:
            from kueue_es.replay import stream_log

            bar = _LazyProgress(enabled=progress, total=stop - start)
            try:
                async for message in stream_log(bus, last=stop, start_seq=start + 1):
                    if not folder.feed(message):
                        break
                    bar.advance()
            finally:
                bar.close()
        return Folded(folder=folder, start_seq=start, last_seq=last, notes=notes)
    finally:
        await bus.close()


def _direct_fold(source: Source, folder: Folder, start_seq: int, last: int, progress: bool) -> bool:
    """Fold through Direct Get batches; False (nothing folded) when the server does not answer them."""
    from kueue_es.events.bus.direct import DirectReader, DirectUnavailable

    assert source.nats_url is not None
    try:
        reader = DirectReader(source.nats_url, credentials=source.credentials)
    except DirectUnavailable:
        return False
    with reader:
        try:
            messages = reader.messages(start_seq=start_seq, last=last)
            first = next(messages, None)
        except DirectUnavailable:
            return False
        if first is None:
            return True

        def chained() -> Iterator[LogMessage]:
            yield first
            yield from messages

        fold_messages(chained(), folder, progress=progress, total=last - start_seq + 1)
    return True
