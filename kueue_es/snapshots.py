"""Snapshots on the bus and a bounded log (issue 15, point 6).

A *snapshot* is a checkpoint (:mod:`kueue_es.checkpoints`: JSON header, msgpack body) stored beside
the log in the JetStream Object Store bucket ``KQ_SNAPSHOTS``, named ``<seq, 12 digits>-<code
tag>.snap`` after its position. Its body holds every service's fold at that position: the deciders'
:class:`ClusterState` (every subject) and, as the ``dispatcher`` section, the dispatcher's view (its
own fold of facts and decisions, ``DispatchState``, with the decisions its batch verifier orphaned),
so each starts from it exactly where folding from #1 would have brought it.

The compactor (``kueue-es compact``) writes one every ``--every`` messages or ``--interval`` seconds,
and only once it is *verified*: it folds from the previous verified snapshot (or from #1), re-running
every DecisionRecord whose basis lies after it with replay's :class:`~kueue_es.replay.LogChecker`;
the snapshot is written only when none differed and the log there has no gap and no orphan. Its
position K is where the log ended when the round began (the first position from there at which no
batch is half read); the check runs on to the end of the log a ``--settle`` later, so the decisions
whose basis is before K but which were committed after K are re-checked too. The header's
``verified`` says from which snapshot (and the SHA-256 of its body: the chain), through which
sequence, and when.

Retention (``--retain-age``, ``--retain-bytes``) only ever purges the log below a verified
snapshot (JetStream purge keeping from its position K, so message #K, which names the log in the
snapshot's identity, stays), never past what the dispatcher's durable consumer has acknowledged,
and then deletes the snapshots below the new start. Message #1 is then gone: a snapshot carries the
digest of the original log's message #1 and of its own message #K; a service checks #K (and #1
while the log still has it), and the verification chain vouches for what was purged.

Services (deciders and dispatcher) start from the newest snapshot of their log when there is one
(``service_start``); on a purged log without one they refuse to start, naming the stream's first
sequence (``services.runtime.LogPurgedError``). ``kueue-es replay`` on a purged log starts from the
oldest snapshot (the one at the log's first sequence) and re-checks every decision after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from kueue_es import checkpoints
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import base
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus, LogMessage
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState, UnknownEventError
from kueue_es.replay import HEADS, LogChecker, ReplayReport, Unverifiable, find_records, stream_log
from kueue_es.services.dispatcher import core as dispatch_core
from kueue_es.services.dispatcher import status as dispatch_status
from kueue_es.services.publisher import core as publisher_core
from kueue_es.services.runtime import LogPurgedError, StartPoint, log_mismatch, message_digest
from kueue_es.services.watcher import publishing

log = structlog.get_logger(__name__)

SUFFIX = ".snap"
DISPATCHER = "dispatcher"
PUBLISHER = "publisher"
DURABLE = "dispatcher"
_FACTS = subjects.FACTS.removesuffix(">")
_DECISIONS = subjects.DECISIONS.removesuffix(">")


def object_name(seq: int) -> str:
    """The object name of this code's snapshot at position ``seq``."""
    return f"{seq:012d}-{checkpoints.code_tag()}{SUFFIX}"


def position_of(name: str) -> int | None:
    """The position in a snapshot object's name when this code wrote it, else None."""
    seq, _, rest = name.partition("-")
    return int(seq) if seq.isdigit() and rest == f"{checkpoints.code_tag()}{SUFFIX}" else None


# --- the dispatcher's section -------------------------------------------------------------------


class DispatchSection(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """The dispatcher's view (``DispatchState`` with objects tracked) and its orphaned decisions."""

    cluster: bytes
    reserved_seq: dict[str, int]
    records: dict[str, dispatch_status.WorkloadRecord]
    started: dict[str, list[dispatch_core.PodSetInfo] | str]
    dirty_workloads: dict[str, int]
    dirty_queues: list[tuple[str, str, str]]
    orphaned: list[int]
    unwritten_releases: dict[str, int] = {}  # last: a snapshot written before it has none
    deleted_workloads: list[str] = []  # after it, for the same reason
    not_matching: list[str] = []  # after it, for the same reason
    adopted_admitted: dict[str, int] = {}  # after it, for the same reason
    object_versions: dict[str, int] = {}  # after it, for the same reason


_section_decoder = msgspec.msgpack.Decoder(DispatchSection)


class DispatchFold:
    """The dispatcher's fold without its I/O (``Dispatcher.fold_forever``): facts and decisions
    through the batch verifier into a ``DispatchState`` that tracks objects."""

    def __init__(self, view: dispatch_core.DispatchState | None = None, orphaned: frozenset[int] = frozenset()) -> None:
        self.view = view if view is not None else dispatch_core.DispatchState(track_objects=True)
        self.orphaned = set(orphaned)

    def feed(self, message: LogMessage) -> None:
        """Fold ``message`` if the dispatcher reads it (facts and decisions)."""
        subject = message.subject
        if not (subject.startswith(_FACTS) or subject.startswith(_DECISIONS)):
            return
        cluster = self.view.cluster
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            event = None
            cluster.last_seq = max(cluster.last_seq, message.seq)
        verdict = cluster.batches.offer(
            seq=message.seq,
            subject=subject,
            msg_id_header=message.headers.get("Nats-Msg-Id", ""),
            data=message.data,
            event=event,
        )
        for orphan in verdict.orphans:
            cluster.last_seq = max(cluster.last_seq, orphan.seq)
            if batches.partition_of(orphan.subject) is not None:
                self.orphaned.add(orphan.seq)
        for seq, accepted in ((seq, one) for seq, event in verdict.accepted for one in types.unbatched(event)):
            try:
                dispatch_core.fold(self.view, accepted, seq=seq)
            except UnknownEventError:
                cluster.last_seq = max(cluster.last_seq, seq)

    def dumps(self) -> bytes:
        """The ``dispatcher`` section of a snapshot."""
        view = self.view
        return msgspec.msgpack.encode(
            DispatchSection(
                cluster=checkpoints.dumps(view.cluster),
                reserved_seq=view.reserved_seq,
                records=view.records,
                started=view.started,
                dirty_workloads=view.dirty_workloads,
                dirty_queues=list(view.dirty_queues),
                orphaned=sorted(self.orphaned),
                unwritten_releases=view.unwritten_releases,
                deleted_workloads=list(view.deleted_workloads),
                not_matching=list(view.not_matching),
                adopted_admitted=view.adopted_admitted,
                object_versions=view.object_versions,
            )
        )

    @classmethod
    def loads(cls, data: bytes | memoryview, *, where: str) -> DispatchFold:
        """The fold a ``dispatcher`` section holds; CheckpointError naming ``where`` when it does not decode."""
        try:
            section = _section_decoder.decode(data)
        except msgspec.DecodeError as err:
            raise checkpoints.CheckpointError(f"{where}: section dispatcher: {err}") from None
        view = dispatch_core.DispatchState(
            cluster=checkpoints.loads(section.cluster, where=f"{where} (section dispatcher)"),
            reserved_seq=section.reserved_seq,
            records=section.records,
            started=section.started,
            dirty_workloads=section.dirty_workloads,
            dirty_queues=dict.fromkeys(section.dirty_queues),
            track_objects=True,
            unwritten_releases=section.unwritten_releases,
            deleted_workloads=dict.fromkeys(section.deleted_workloads),
            not_matching=dict.fromkeys(section.not_matching),
            adopted_admitted=section.adopted_admitted,
            object_versions=section.object_versions,
        )
        return cls(view, frozenset(section.orphaned))


# --- the watcher's section -----------------------------------------------------------------------

WATCHER = "watcher"
_TAS_FACT_TYPES = ("TopologyObserved", "NodeObserved", "PodObserved", "ObjectDeleted")


class WatcherSection(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """What the watcher learns from the log at start-up (``Watcher.learn_from_log``): its fold of the
    facts, its TAS topology, and the facts its progress reporter and configuration file learn from,
    one per key (the one that decides what they keep), with how many ConfigurationObserved there were."""

    cluster: bytes
    topology: bytes
    learned: list[tuple[int, str, bytes, dict[str, str]]]
    config_count: int
    memory: list[tuple[str, str, str, bytes]] = []
    """The last fact about each object, as its content key (``publishing.remember``); last: a snapshot
    written before it has none (the watcher then publishes every object again once, as it did)."""


_watcher_decoder = msgspec.msgpack.Decoder(WatcherSection)


class WatcherFold:
    """The watcher's start-up fold without its I/O: facts only, into a :class:`ClusterState` and a
    ``TopologyState``, keeping of the facts the reporter and the configuration learn from the last
    WorkloadStopped and WorkloadEvictionObserved of each workload, the first WorkloadPodsReady of each, the first
    AdmissionCheckStateChanged of each (workload, check) and the last ConfigurationObserved:
    what ``ProgressReporter.learn`` and ``ConfigFile.learn`` keep of them (the rest they overwrite,
    or leave alone)."""

    def __init__(self) -> None:
        from kueue_es.projections.topology import TopologyState

        self.state = ClusterState()
        self.topology = TopologyState()
        self.learned: dict[tuple[str, ...], LogMessage] = {}
        self.config_count = 0
        self.memory: dict[tuple[str, str, str], bytes] = {}  # publishing.remember: the last fact about each object

    def feed(self, message: LogMessage) -> None:
        """Fold ``message`` if it is a fact."""
        if not message.subject.startswith(_FACTS):
            return
        from kueue_es.services.runtime import fold_message

        fold_message(self.state, message)
        kind = message.headers.get("Kq-Type")
        if kind in _TAS_FACT_TYPES:
            try:
                self.topology.apply(codec.decode(message.data))
            except codec.DecodeError:
                pass
        self.learn(message)
        publishing.remember(self.memory, message.data)

    def learn(self, message: LogMessage) -> None:
        """Keep ``message`` if it is a fact the reporter or the configuration learn from and decides it."""
        kind = message.headers.get("Kq-Type")
        if kind not in (
            "WorkloadStopped",
            "WorkloadPodsReady",
            "AdmissionCheckStateChanged",
            "ConfigurationObserved",
            "WorkloadReclaimablePods",
            "WorkloadEvictionObserved",
        ):
            return
        try:
            event: Any = codec.decode(message.data)
        except codec.DecodeError:
            return
        if kind == "ConfigurationObserved":
            self.config_count += 1
            self.learned[("config",)] = message
        elif kind == "WorkloadStopped":
            self.learned[("stopped", event.workload.namespace, event.workload.name)] = message
        elif kind == "WorkloadEvictionObserved":  # the reporter keeps the last one's version, as a WorkloadStopped's
            self.learned[("evicted", event.workload.namespace, event.workload.name)] = message
        elif kind == "WorkloadPodsReady":
            self.learned.setdefault(("ready", event.workload.namespace, event.workload.name), message)
        elif kind == "WorkloadReclaimablePods":
            self.learned.setdefault(("reclaim", event.workload.namespace, event.workload.name), message)
        else:
            self.learned.setdefault(("check", event.workload.namespace, event.workload.name, event.check), message)

    def dumps(self) -> bytes:
        """The ``watcher`` section of a snapshot."""
        learned = sorted(self.learned.values(), key=lambda m: m.seq)
        return msgspec.msgpack.encode(
            WatcherSection(
                cluster=checkpoints.dumps(self.state),
                topology=checkpoints.dump_topology(self.topology),
                learned=[(m.seq, m.subject, m.data, dict(m.headers)) for m in learned],
                config_count=self.config_count,
                memory=[(*identity, key) for identity, key in sorted(self.memory.items())],
            )
        )

    @staticmethod
    def start_view(
        data: bytes | memoryview, *, where: str
    ) -> tuple[ClusterState, Any, list[LogMessage], int, dict[tuple[str, str, str], bytes]]:
        """(facts-only state, topology, the learned facts in log order, ConfigurationObserved count, the
        last fact about each object as ``publishing.remember`` keeps it)."""
        try:
            section = _watcher_decoder.decode(data)
        except msgspec.DecodeError as err:
            raise checkpoints.CheckpointError(f"{where}: section watcher: {err}") from None
        learned = [
            LogMessage(seq=seq, subject=subj, data=body, headers=hdrs) for seq, subj, body, hdrs in section.learned
        ]
        return (
            checkpoints.loads(section.cluster, where=f"{where} (section watcher)"),
            checkpoints.load_topology(section.topology, where=f"{where} (section watcher)"),
            learned,
            section.config_count,
            {(kind, namespace, name): key for kind, namespace, name, key in section.memory},
        )


# --- reading snapshots ---------------------------------------------------------------------------


@dataclass(kw_only=True)
class Loaded:
    """A snapshot read from the bucket and checked against the log."""

    name: str
    header: checkpoints.Header
    state: ClusterState
    sections: dict[str, memoryview]

    @property
    def seq(self) -> int:
        """Its position."""
        return self.header.seq

    def dispatch(self) -> DispatchFold:
        """The dispatcher's fold at the position (CheckpointError when the section is missing)."""
        data = self.sections.get(DISPATCHER)
        if data is None:
            raise checkpoints.CheckpointError(f"{self.name}: header.sections: no {DISPATCHER!r} section")
        return DispatchFold.loads(data, where=self.name)

    def watcher(self) -> WatcherFold:
        """The watcher's start-up fold at the position, to fold on (CheckpointError when missing)."""
        data = self.sections.get(WATCHER)
        if data is None:
            raise checkpoints.CheckpointError(f"{self.name}: header.sections: no {WATCHER!r} section")
        fold = WatcherFold()
        fold.state, fold.topology, learned, count, fold.memory = WatcherFold.start_view(data, where=self.name)
        for message in learned:  # keyed again as they were
            fold.learn(message)
        fold.config_count = count
        return fold

    def start_point(self, role: str) -> StartPoint:
        """The :class:`StartPoint` of service ``role`` (a decider's, or the dispatcher's with its view)."""
        assert self.header.log is not None
        view = None
        state = self.state
        if role == DISPATCHER:
            fold = self.dispatch()
            view, state = (fold.view, frozenset(fold.orphaned)), fold.view.cluster
        elif role == WATCHER:
            data = self.sections.get(WATCHER)
            if data is None:
                raise checkpoints.CheckpointError(f"{self.name}: header.sections: no {WATCHER!r} section")
            state, *rest = WatcherFold.start_view(data, where=self.name)
            view = tuple(rest)
        return StartPoint(
            state=state,
            seq=self.seq,
            head_seqs=self.header.head_seqs,
            first_sha256=self.header.log.first_sha256,
            at_sha256=self.header.log.at_sha256,
            origin=f"{nats_bus.SNAPSHOT_BUCKET}/{self.name}",
            view=view,
        )


async def positions(bus: Bus) -> list[tuple[int, str]]:
    """This code's snapshots in the bucket as (position, name), oldest first."""
    found = []
    for name in await bus.snapshot_names():  # type: ignore[attr-defined]
        seq = position_of(name)
        if seq is not None:
            found.append((seq, name))
    return sorted(found)


async def load(bus: Bus, name: str) -> Loaded:
    """Read and decode the snapshot ``name``, and check it is a verified snapshot of the log on ``bus``
    (its message at the position, and message #1 while the log has it). Raises CheckpointError."""
    try:
        data = await bus.get_snapshot(name)  # type: ignore[attr-defined]
    except base.BusError as err:
        raise checkpoints.CheckpointError(f"{name}: cannot be read: {err}") from None
    header, state, sections = checkpoints.decode(data, where=name)
    if header.seq != position_of(name):
        raise checkpoints.CheckpointError(f"{name}: header.seq: {header.seq}, the name says {position_of(name)}")
    if header.log is None or header.verified is None:
        raise checkpoints.CheckpointError(f"{name}: header: names no log or was not verified")
    loaded = Loaded(name=name, header=header, state=state, sections=sections)
    problem = await log_mismatch(bus, loaded.start_point("admitter"))
    if problem is not None:
        raise checkpoints.CheckpointError(f"{name}: not of this log: {problem}")
    return loaded


async def newest(
    bus: Bus, *, warn: Callable[[str], None], oldest_first: bool = False, below: int | None = None
) -> Loaded | None:
    """The newest (``oldest_first``: the oldest) snapshot that loads and is of this log, each refused
    one told to ``warn``; None when none is. ``below``: the newest at a position below it first, then
    (none is, or none loads) the oldest of the others."""
    found = await positions(bus)
    first = await bus.first_seq()
    found = [pair for pair in found if pair[0] >= first]
    if not oldest_first:
        found.reverse()
    if below is not None:
        found = [pair for pair in found if pair[0] < below] + sorted(pair for pair in found if pair[0] >= below)
    for _, name in found:
        try:
            return await load(bus, name)
        except checkpoints.CheckpointError as err:
            warn(f"snapshot refused: {err}")
    return None


async def service_start(url: str, role: str, *, warn: Callable[[str], None]) -> StartPoint | None:
    """The start point of service ``role`` from the newest snapshot of the log at ``url`` (None: none;
    the service then folds from #1, or refuses to on a purged log). The ``publisher``'s: the newest below
    where ``KQ_PUB`` needs the log from, else the oldest (a log purged past that point)."""
    from kueue_es.services.publisher import core as publisher_core

    bus = await nats_bus.connect(url, create_stream=False)
    try:
        below = None
        if role == PUBLISHER:
            with contextlib.suppress(base.BusError, ValueError):  # no KQ_PUB, or no usable last message: the newest
                _, below = publisher_core.resume_point(await bus.last_public())
        loaded = await newest(bus, warn=warn, below=below)
        return None if loaded is None else loaded.start_point(role)
    finally:
        await bus.close()


# --- the compactor ---------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Settings:
    """``kueue-es compact``: a snapshot every ``every`` messages or ``interval`` s (when the log grew),
    checked through the log's end ``settle`` s after its position was chosen; the log purged below
    the newest snapshot older than ``retain_age`` s, or whenever it holds more than ``retain_bytes``
    (None: no limit); ``keep``: how many snapshots above the log's start are kept."""

    every: int = 50_000
    interval: float = 600.0
    settle: float = 2.0
    retain_age: float | None = None
    retain_bytes: int | None = None
    keep: int = 2


@dataclass(kw_only=True)
class Round:
    """What one compactor round did."""

    written: int | None = None  # the position of the snapshot written
    report: ReplayReport | None = None
    verified_from: int = 0
    purged: int = 0
    first_seq: int = 1
    deleted: list[str] = field(default_factory=list)
    note: str = ""


def _rfc3339(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).isoformat(timespec="seconds")


def _parse_time(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


async def _records(bus: Bus, *, after: int, last: int) -> list[tuple[int, Any]]:
    """The DecisionRecords on the head subjects from ``after`` + 1 through ``last``."""
    if await bus.last_subject_seq(HEADS) <= after:
        return []
    found = []
    async for message in stream_log(bus, last=last, filters=(HEADS,), start_seq=after + 1):
        found.extend(find_records((message,)))
    return found


async def snapshot_once(
    bus: Bus, settings: Settings, *, force: bool = False, clock: Callable[[], float] = time.time
) -> Round:
    """One round: when due (or ``force``d and the log grew), verify from the previous snapshot and
    write one. Raises LogPurgedError when the log was purged and no snapshot covers its start."""
    from kueue_es import deciders

    outcome = Round()
    last0 = await bus.last_seq()
    found = await positions(bus)
    if found and not force:  # due? judged from the newest snapshot's name and message, without loading it
        newest_seq = found[-1][0]
        grown = last0 - newest_seq
        try:
            taken_ms = await bus.message_time_ms(newest_seq)  # type: ignore[attr-defined]
        except base.BusError:
            taken_ms = 0
        if grown <= 0 or (grown < settings.every and clock() * 1000 - taken_ms < settings.interval * 1000):
            outcome.verified_from = newest_seq
            outcome.note = f"not due: {grown} messages since snapshot #{newest_seq}"
            return outcome
    previous = await newest(bus, warn=lambda text: log.warning("snapshot_refused", detail=text))
    if previous is None:
        first = await bus.first_seq()
        if first > 1:
            raise LogPurgedError(f"KQ_LOG starts at #{first} and no snapshot of this code covers it")
        position, state, dispatch, through, chain, first_sha = 0, ClusterState(), DispatchFold(), 0, "", ""
        watcher = WatcherFold()
        heads: dict[str, int] = {}
        made_at = 0.0
    else:
        assert previous.header.verified is not None and previous.header.log is not None
        position, state, dispatch = previous.seq, previous.state, previous.dispatch()
        watcher = previous.watcher()
        through, chain = previous.header.verified.through_seq, previous.header.body_sha256
        first_sha = previous.header.log.first_sha256
        heads = dict(previous.header.head_seqs)
        made_at = _parse_time(previous.header.verified.at)
    outcome.verified_from = position
    grown = last0 - position
    due = grown > 0 and (force or grown >= settings.every or clock() - made_at >= settings.interval)
    if not due:
        outcome.note = f"not due: {grown} messages since snapshot #{position}"
        return outcome
    await asyncio.sleep(settings.settle)
    last = await bus.last_seq()
    records = await _records(bus, after=position, last=last)
    checker = LogChecker(records, deciders.BY_ROLE, state=state, start=position)
    captured: tuple[int, bytes, dict[str, bytes], dict[str, int], str] | None = None
    async for message in stream_log(bus, last=last, start_seq=position + 1):
        if message.seq == 1:
            first_sha = message_digest(message)
        checker.feed(message)
        dispatch.feed(message)
        watcher.feed(message)
        partition = batches.partition_of(message.subject)
        if partition is not None and subjects.head_token(message.subject) is not None:
            heads[partition] = message.seq
        if (
            captured is None
            and message.seq >= last0
            and not checker.state.batches.holding
            and not dispatch.view.cluster.batches.holding
        ):
            body = checkpoints.dumps(checker.state)
            sections = {DISPATCHER: dispatch.dumps(), WATCHER: watcher.dumps()}
            captured = (message.seq, body, sections, dict(heads), message_digest(message))
    report = checker.finish(last_seq=last)
    covered = 0
    for seq, record in checker.before_start:
        if seq <= through:
            covered += 1
        else:
            report.unverifiable.append(_late(seq, record, position, through))
    report.covered = covered
    outcome.report = report
    if report.mismatches or not report.complete:
        outcome.note = (
            f"not verified from #{position} through #{last}: {len(report.mismatches)} differed, "
            f"{len(report.gaps)} gaps, {len(report.orphans)} orphans, {len(report.stray_dispatch)} stray results"
        )
        log.error("snapshot_not_verified", detail=outcome.note)
        return outcome
    if captured is None:
        outcome.note = f"no position from #{last0} through #{last} where no batch is half read"
        return outcome
    seq, body, sections, head_seqs, at_sha = captured
    verification = checkpoints.Verification(
        from_seq=position,
        through_seq=last,
        matched=report.matched + covered,
        unverifiable=len(report.unverifiable),
        at=_rfc3339(clock()),
        previous_sha256=chain,
    )
    data = checkpoints.assemble(
        seq,
        body,
        log=checkpoints.LogIdentity(first_sha256=first_sha, at_sha256=at_sha),
        head_seqs=head_seqs,
        sections=sections,
        verified=verification,
    )
    await bus.put_snapshot(object_name(seq), data)  # type: ignore[attr-defined]
    outcome.written = seq
    log.info(
        "snapshot_written",
        seq=seq,
        verified_from=position,
        verified_through=last,
        matched=verification.matched,
        unverifiable=verification.unverifiable,
        bytes=len(data),
    )
    return outcome


def _late(seq: int, record: Any, position: int, through: int) -> Unverifiable:
    version = record.kueue_es_version if isinstance(record.kueue_es_version, str) else ""
    return Unverifiable(
        decision_id=record.decision_id,
        head_seq=seq,
        role=record.role,
        logic_version=record.logic_version,
        kueue_es_version=version,
        why=f"its basis #{record.basis_seq} is before snapshot #{position} and it was committed after the "
        f"snapshot's check ended at #{through}",
    )


async def retain(bus: Bus, settings: Settings, *, clock: Callable[[], float] = time.time) -> Round:
    """Apply the retention limits: purge the log below the newest snapshot they allow (never past
    what the dispatcher's durable consumer acknowledged, nor past where the publisher would read again
    for KQ_PUB), then delete the snapshots below the log's new start and all but the ``keep`` newest
    above it."""
    outcome = Round()
    found = await positions(bus)
    first = await bus.first_seq()
    keep_from = first
    if found and (settings.retain_age is not None or settings.retain_bytes is not None):
        done = await bus.durable_done_through(DURABLE)  # type: ignore[attr-defined]
        bound = done + 1 if done is not None else await bus.last_seq()
        publisher_bound = await _publisher_resumes_at(bus, default=bound)
        if publisher_bound < bound:  # a stopped publisher holds the log as a stopped dispatcher does: say so
            log.info(
                "retention_held_by_publisher", publisher_resumes_at=publisher_bound, dispatcher_done_through=bound - 1
            )
            bound = publisher_bound
        candidates = [seq for seq, _ in found if first < seq <= bound]
        over = settings.retain_bytes is not None and await bus.stream_bytes() > settings.retain_bytes  # type: ignore[attr-defined]
        for seq in reversed(candidates):
            old = False
            if settings.retain_age is not None:
                old = await bus.message_time_ms(seq) <= (clock() - settings.retain_age) * 1000  # type: ignore[attr-defined]
            if old or over:
                keep_from = seq
                break
    if keep_from > first:
        try:  # checked once more against the log before anything is dropped
            await load(bus, object_name(keep_from))
        except checkpoints.CheckpointError as err:
            outcome.note = f"not purged: {err}"
            log.error("purge_refused", detail=outcome.note)
            keep_from = first
    if keep_from > first:
        try:
            outcome.purged = await bus.purge_below(keep_from)  # type: ignore[attr-defined]
        except base.BusError as err:  # a log created with deny_purge (before snapshots), or no right to
            outcome.note = f"not purged below #{keep_from}: {err}"
            log.error("purge_refused", detail=outcome.note)
        else:
            log.info("log_purged", below=keep_from, purged=outcome.purged)
    outcome.first_seq = await bus.first_seq()
    above = [(seq, name) for seq, name in found if seq >= outcome.first_seq]
    spare = {name for _, name in above[1 : -settings.keep]} if settings.keep > 0 else set()
    for seq, name in found:
        if seq < outcome.first_seq or name in spare:
            await bus.delete_snapshot(name)  # type: ignore[attr-defined]
            outcome.deleted.append(name)
    return outcome


async def _publisher_resumes_at(bus: Bus, *, default: int) -> int:
    """The log sequence the publisher reads from when it starts again (after the last message it
    published whole to KQ_PUB, or the record heading that message's batch: publisher.core.resume_point),
    so a purge leaves it everything it has not published. ``default`` when there is no KQ_PUB or it is
    empty: no publisher has published on this deployment, no subscriber has seen a message, and a
    publisher started later begins at the oldest snapshot, as a new subscriber of a stream with limits
    does (a deployment without a publisher keeps its retention). When KQ_PUB cannot be read (a NATS user
    without the right, a server away), 1: nothing is purged this round rather than messages subscribers
    would miss."""
    last_public = getattr(bus, "last_public", None)
    if last_public is None:  # a bus without KQ_PUB (the memory bus of tests)
        return default
    try:
        last = await last_public()
    except base.NotFoundError:
        return default
    except base.BusError as err:
        log.warning("public_position_unknown", error=str(err))
        return 1
    if last is None:
        return default
    try:
        _, resumes_at = publisher_core.resume_point(last)
    except ValueError as err:
        log.warning("public_position_unknown", error=str(err))
        return 1
    return resumes_at


async def compact_forever(
    bus: Bus,
    settings: Settings,
    *,
    stop: asyncio.Event,
    poll: float = 10.0,
    on_round: Callable[[Round], None] | None = None,
) -> None:
    """The compactor role: a round every ``poll`` s (snapshot when due, then retention) until ``stop``;
    ``on_round`` is told of each round's snapshot outcome (health)."""
    while not stop.is_set():
        try:
            done = await snapshot_once(bus, settings)
            await retain(bus, settings)
            if on_round is not None:
                on_round(done)
        except base.BusError as err:
            log.warning("compact_round_failed", error=str(err))
        except Exception:  # a state it cannot write (a bug, a bad value) skips the snapshot, never the role
            log.exception("compact_round_failed")
        try:
            async with asyncio.timeout(poll):
                await stop.wait()
        except TimeoutError:
            pass


# --- replay of a purged log ------------------------------------------------------------------------


async def replay_from_snapshot(bus: Bus, *, progress: Any = None) -> ReplayReport:
    """Re-check the log on ``bus`` from its oldest snapshot (a log purged below it): every decision
    whose basis is at or after the snapshot's position is re-run; one before it counts as verified
    when the snapshot's check covered it, else as not re-checked. Raises LogPurgedError when no
    snapshot covers the log's first sequence."""
    from kueue_es import deciders

    first = await bus.first_seq()
    oldest = await newest(bus, warn=lambda text: print(f"warning: {text}", file=sys.stderr), oldest_first=True)
    if oldest is None:
        raise LogPurgedError(
            f"KQ_LOG starts at #{first} (purged) and no snapshot in {nats_bus.SNAPSHOT_BUCKET} covers it: "
            "the decisions before the first snapshot cannot be re-checked"
        )
    verified = oldest.header.verified
    assert verified is not None
    last = await bus.last_seq()
    records = await _records(bus, after=oldest.seq, last=last)
    checker = LogChecker(
        records,
        deciders.BY_ROLE,
        state=oldest.state,
        start=oldest.seq,
        progress=progress("re-checking", last) if progress else None,
    )
    async for message in stream_log(bus, last=last, start_seq=oldest.seq + 1):
        checker.feed(message)
    report = checker.finish(last_seq=last)
    covered = 0
    for seq, record in checker.before_start:
        if seq <= verified.through_seq:
            covered += 1
        else:
            report.unverifiable.append(_late(seq, record, oldest.seq, verified.through_seq))
    report.covered = covered
    report.start_seq = oldest.seq
    origin = f"from #{verified.from_seq}" if verified.from_seq else "from #1"
    report.start_note = (
        f"log starts at #{first}, covered by snapshot {oldest.name} (#{oldest.seq}) verified at {verified.at} "
        f"({origin} through #{verified.through_seq}, {verified.matched} decision{'' if verified.matched == 1 else 's'} matched)"
    )
    return report


# --- the command -------------------------------------------------------------------------------------


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a number with an optional unit s, m, h or d (``90d``, ``12h``, ``600``)."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{text!r} is not a duration (a number with s, m, h or d)") from None
    if value < 0:
        raise ValueError(f"{text!r}: a duration is not negative")
    return value * units[unit]


def parse_bytes(text: str) -> int:
    """Bytes in ``text``: a number with an optional unit K, M, G (powers of 1024: ``10G``)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    number, unit = (text[:-1], text[-1].upper()) if text and text[-1].upper() in units else (text, "")
    if not number.isdigit():
        raise ValueError(f"{text!r} is not a size (a whole number with K, M or G)")
    return int(number) * units.get(unit, 1)


def settings_from(args: Any) -> Settings:
    """The :class:`Settings` of ``kueue-es compact``'s arguments (ValueError naming a bad one)."""
    return Settings(
        every=args.every,
        interval=parse_duration(args.interval),
        settle=parse_duration(args.settle),
        retain_age=parse_duration(args.retain_age) if args.retain_age else None,
        retain_bytes=parse_bytes(args.retain_bytes) if args.retain_bytes else None,
        keep=args.keep,
    )


def run_command(args: Any) -> int:
    """``kueue-es compact``: with ``--once``, one round (a snapshot of what is new, then retention)
    and a summary; exit 0, 1 when the log did not verify, 2 on bad arguments or a purged log no
    snapshot covers. Without it, the long-running compactor role (until SIGTERM)."""
    from kueue_es.services.runtime import configure_logging, run_until_signalled

    try:
        settings = settings_from(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    async def once() -> int:
        bus = await nats_bus.connect(args.nats, create_stream=False)
        try:
            done = await snapshot_once(bus, settings, force=True)
            kept = await retain(bus, settings)
        finally:
            await bus.close()
        if done.written is not None:
            origin = f"snapshot #{done.verified_from}" if done.verified_from else "the start"
            print(f"snapshot #{done.written} written, verified from {origin}", end="")
            if done.report is not None:
                print(
                    f" through #{done.report.last_seq}: {done.report.matched + done.report.covered} decisions "
                    f"matched, {len(done.report.unverifiable)} not re-checked"
                )
        else:
            print(f"no snapshot written: {done.note}")
        print(f"log starts at #{kept.first_seq}; purged {kept.purged} messages; deleted snapshots: {len(kept.deleted)}")
        if kept.note:
            print(kept.note)
        failed = done.report is not None and (done.report.mismatches or not done.report.complete)
        return 1 if failed else 0

    if args.once:
        try:
            return asyncio.run(once())
        except LogPurgedError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    configure_logging(service="compactor")

    async def main(stop: asyncio.Event) -> None:
        import contextlib

        from kueue_es.services import health

        probe = health.Health(service="compactor")
        verified = {"verified": True}

        def on_round(done: Round) -> None:
            probe.caught_up = True  # a round ran to its end
            if done.report is not None:
                verified["verified"] = done.written is not None or not done.report.mismatches

        probe.checks.append(lambda: (verified["verified"], dict(verified)))
        async with contextlib.AsyncExitStack() as stack:
            if args.health_port is not None:
                await stack.enter_async_context(
                    health.serve_health(probe, port=args.health_port, host=args.health_host)
                )
            bus = await probe.connect(args.nats)
            stack.push_async_callback(bus.close)
            log.info("service_started", every=settings.every, interval=settings.interval)
            await compact_forever(bus, settings, stop=stop, poll=min(10.0, settings.interval), on_round=on_round)

    asyncio.run(run_until_signalled(main))
    return 0
