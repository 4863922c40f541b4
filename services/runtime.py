"""The shared service runtime: fold the log, decide, commit one atomic batch per partition and cycle.

Every decider (admitter, preemptor, TAS placer) is this loop around its own pure
``decide(state, now_ms=..., partition=...)`` (ARCHITECTURE.md §3, research/event-sourcing.md §5.6):

1. catch up: fold every message (every partition's) into a :class:`ClusterState`,
   remembering the last sequence folded (the basis) and each partition's last head sequence;
2. decide once caught up, reading the clock once per cycle, each partition it owns
   (``--partitions``, slot leases) that something touched;
3. commit each partition's outputs as one batch headed by a DecisionRecord on the decider's
   own head (``kq.dec.<p>.head.<user>``) that expects the last sequence seen on every head
   of that partition (``kq.dec.<p>.head.*``), the partitions concurrently; a stale view is
   rejected whole (ConflictError) and that partition is decided again once folded on;
4. never apply its own decisions: wait until they come back through the log.

Also here: structlog set-up (JSON lines) and graceful SIGTERM handling shared by
all services.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TextIO, cast

import msgspec
import structlog

from kueue_es import __version__
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import Bus, BusError, ConflictError, DuplicateBatchError, LogMessage, OutgoingMessage
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState, UnknownEventError, WorkloadState, apply

log = structlog.get_logger(__name__)

DecideFn = Callable[[ClusterState], Sequence[types.Decision]]
MAX_BATCH = 500


class _CurrentStderr:
    """``sys.stderr`` as it is when a line is written, not when logging was configured (a
    caller such as a test runner may swap it and close the old one)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(
    *, service: str, level: int = logging.INFO, file: TextIO | None = None, cache: bool = True
) -> None:
    """JSON-lines logs on ``file`` (default stderr), each line bound to ``service``.

    ``cache``: loggers freeze this configuration on first use (fast, for a service's process);
    a one-shot command that may run inside another program (a test, a tool) passes False,
    so a later ``structlog.configure`` (``capture_logs`` in tests) still takes effect.
    """
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=file or cast(TextIO, _CurrentStderr())),
        cache_logger_on_first_use=cache,
    )
    structlog.contextvars.bind_contextvars(service=service)


def wall_clock_ms() -> int:
    """The real clock in ms since the epoch; only runners call it, once per cycle."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, kw_only=True)
class Decider:
    """What a decider service is: its role name, logic version and pure decide function.

    ``decide(state, now_ms)`` returns per-workload decisions (no DecisionRecord) and, the
    admitter, pending outcomes for the record (:data:`types.Output`, :func:`build_batch`).
    """

    role: str
    logic_version: int
    decide: Callable[..., Sequence[types.Output]]
    yields_to: Callable[[ClusterState], Collection[str]] | None = None
    """The open requests of ``state`` that another role answers next (the admitter: the nominations the
    preemptor answers), by key: the loop holds its cycles for up to :data:`YIELD_SECONDS` after one
    opens, so the two do not commit on the same basis (a conflict, issue 15). Timing only: what is
    decided on a given state is the same."""
    wakes_at: Callable[..., int | None] | None = None
    """``wakes_at(state, partition=P, after_ms=T)``: when the role next has something to decide in partition
    ``P`` with no new message, later than ``T`` (ms since the epoch), or None: the admitter's next backoff
    end, PodsReady or maximum-execution-time deadline (:func:`kueue_es.scheduling.lifecycle.next_timer_ms`).
    The loop runs a cycle then rather than at its
    next ``wakeup``, as Kueue's workload controller requeues its reconcile for the time left
    (workload_controller.go, ``RequeueAfter``): a 10 ms waitForPodsReady timeout fires after 10 ms, not up
    to a second later, when the pods may have become ready meanwhile. Timing only, as ``yields_to``."""


OrphanHook = Callable[[batches.Orphan], None]


class Gate(Protocol):
    """Whether this replica of a decider may decide and commit now (``kueue_es.services.standby``'s
    lease): a replica whose gate is shut stands by, folding the log."""

    def active(self) -> bool:
        """True while this replica may decide and commit."""
        ...


STANDBY_POLL = 0.1
"""Seconds a standby waits for a message before asking its gate again (a takeover is seen this soon)."""

TIMER_SLACK = 0.001
"""Seconds a loop waits past a decider's timer (:attr:`Decider.wakes_at`), so that the clock the cycle reads
(whole ms) has reached it."""
UNOWNED_AFTER = 10.0
"""Seconds a partition outside a static ``--partitions`` list must show no decider at work (see
:meth:`DeciderLoop.unowned_partitions`) before the loop reports it: any decider owning it commits within
a cycle or two."""
YIELD_SECONDS = 0.5
"""How long a decider holds its cycles after another role's request opened (``Decider.yields_to``):
the preemptor answers a nomination in milliseconds; past this a slow or dead one no longer holds the
admitter up."""

SLOW_DOWN_FIRST = 0.001
SLOW_DOWN_MAX = 0.010
"""Seconds a decider waits before its next cycle after a cycle that committed only pending outcomes
(batches without outputs: "waiting for quota", "... N more needed"): 1 ms doubling to 10 ms, back to
none after a cycle that decides something. Kueue's scheduler slows down so after a cycle that admits
nothing (pkg/util/wait/backoff.go, ``SlowDown`` from pkg/scheduler/scheduler.go). Without it the loop
cycles once per commit round trip while releases and arrivals keep touching a cohort where nothing
fits, and records a number that changes every time: in the baseline bench at 50 writes/s three
commits in four carried nothing else."""


def slow_down_seconds(step: int) -> float:
    """Seconds to wait before the next cycle after ``step`` + 1 cycles in a row that committed only
    pending outcomes (``step`` counts from 0): :data:`SLOW_DOWN_FIRST` doubling up to
    :data:`SLOW_DOWN_MAX` (Kueue pkg/util/wait/backoff.go). ``kueue-es bench rules`` paces its
    virtual deciders with it too. Raises ValueError for a negative ``step``."""
    if step < 0:
        raise ValueError(f"slow-down step {step}: must be 0 or more")
    return min(SLOW_DOWN_MAX, SLOW_DOWN_FIRST * (1 << min(step, 8)))


TIMER_GAP_MS = round(SLOW_DOWN_MAX * 1000)
"""Milliseconds at least between a cycle and the next one a decider's timer brings (:meth:`DeciderLoop._note_wake`):
the longest a slowed-down decider waits between cycles (:data:`SLOW_DOWN_MAX`)."""

FOLD_SLICE = 256
"""Messages a decider folds from its inbox before it lets the event loop's other tasks run (its lease
renewals, ``/readyz``): about 6 ms of fold on an idle core. Without it a backlog was folded in one go,
and at a load of 17 on two cores a holder's renewals came seconds late and it stepped down."""


def fold_message(state: ClusterState, message: LogMessage, *, on_orphan: OrphanHook | None = None) -> ClusterState:
    """Fold one log message through the batch verifier (:mod:`kueue_es.projections.batches`).

    Only verified batches change the state: a DecisionRecord and its outputs are folded
    together once the last output arrived and the batch checked out; until then nothing
    of it is folded (``state.last_seq`` stays before the record). Anything else on a
    decision subject, and any decision type elsewhere, is an orphan: folded by no one,
    logged (``decision_orphaned``) and passed to ``on_orphan`` (a metric); its sequence
    counts as folded. A message that does not decode, or whose event type the fold
    does not classify (``cluster.UnknownEventError``), is logged and skipped: a broken
    event never stops a service (its sequence still counts as folded).
    """
    try:
        event: types.Event | None = codec.decode(message.data)
    except codec.DecodeError as err:
        event = None
        if batches.partition_of(message.subject) is None:  # on a decision subject it is an orphan, reported below
            log.warning("event_undecodable", seq=message.seq, subject=message.subject, error=str(err))
        state.last_seq = max(state.last_seq, message.seq)
    return fold_decoded(state, message, event, on_orphan=on_orphan)


def fold_decoded(
    state: ClusterState,
    message: LogMessage,
    event: types.Event | None,
    *,
    on_orphan: OrphanHook | None = None,
    before_apply: Callable[[int, types.Event, ClusterState], None] | None = None,
) -> ClusterState:
    """:func:`fold_message` for a message already decoded (``event``; None when it does not decode,
    and the caller has logged that and moved ``state.last_seq`` past it), so a reader that needs the
    event too (replay) decodes it once. ``before_apply(seq, event, state)`` sees each event the batch
    verifier accepts just before it is folded (``kueue-es explain`` tells a workload's story so); a
    FactBatch's facts one by one."""
    verifier = state.batches
    if verifier.passes(message.subject, event):  # a fact or a dispatch result, no batch held: taken as it is
        assert event is not None
        if before_apply is not None:
            _apply_seen(state, event, message.seq, before_apply)
            return state
        try:
            apply(state, event, seq=message.seq)
        except UnknownEventError as err:  # raised before the fold touches the state
            log.warning("event_unclassified", seq=message.seq, error=str(err))
            state.last_seq = max(state.last_seq, message.seq)
        return state
    verdict = verifier.offer(
        seq=message.seq,
        subject=message.subject,
        msg_id_header=message.headers.get("Nats-Msg-Id", ""),
        data=message.data,
        event=event,
    )
    for orphan in verdict.orphans:
        report_orphan(orphan, on_orphan)
        state.last_seq = max(state.last_seq, orphan.seq)
    for seq, accepted in verdict.accepted:
        if before_apply is not None:
            _apply_seen(state, accepted, seq, before_apply)
            continue
        try:
            apply(state, accepted, seq=seq)
        except UnknownEventError as err:  # raised before the fold touches the state
            log.warning("event_unclassified", seq=seq, error=str(err))
            state.last_seq = max(state.last_seq, seq)
    return state


def _apply_seen(
    state: ClusterState, event: types.Event, seq: int, before_apply: Callable[[int, types.Event, ClusterState], None]
) -> None:
    """Fold ``event`` at ``seq``, showing ``before_apply`` each fact of it (a FactBatch's one by one)."""
    for one in types.unbatched(event):
        before_apply(seq, one, state)
        try:
            apply(state, one, seq=seq)
        except UnknownEventError as err:  # raised before the fold touches the state
            log.warning("event_unclassified", seq=seq, error=str(err))
            state.last_seq = max(state.last_seq, seq)


def message_digest(message: LogMessage) -> str:
    """Hex SHA-256 over a stored message's subject and data (length-prefixed, :func:`codec.digest`):
    how a checkpoint names the log it was folded from (``kueue_es.checkpoints.LogIdentity``)."""
    return codec.digest((message.subject.encode(), message.data))


async def expire_stranded(bus: Bus, state: ClusterState, on_orphan: OrphanHook | None = None) -> bool:
    """Orphan the batch ``state``'s fold holds if the log ends before that batch does
    (:meth:`batches.BatchVerifier.expire`: a batch is stored whole, so its outputs never come; a
    rogue record). Call it only once the fold has read every message it was given. True when no
    batch is held any longer (none was, or it was expired); False while the held batch's end is
    stored (its outputs are on their way) or the log's end could not be asked."""
    if not state.batches.holding:
        return True
    held = state.batches.holding_until
    try:
        last = await bus.last_seq()
    except BusError:
        return False
    if state.batches.holding_until != held:  # the fold moved on meanwhile: judge again later
        return not state.batches.holding
    verdict = state.batches.expire(last)
    for orphan in verdict.orphans:
        report_orphan(orphan, on_orphan)
        state.last_seq = max(state.last_seq, orphan.seq)
    return not state.batches.holding


def report_orphan(orphan: batches.Orphan, on_orphan: OrphanHook | None = None) -> None:
    """Log an orphaned message (``decision_orphaned``) and pass it to ``on_orphan``."""
    log.warning("decision_orphaned", seq=orphan.seq, subject=orphan.subject, reason=orphan.reason, detail=orphan.detail)
    if on_orphan is not None:
        on_orphan(orphan)


CARRIED_SINCE_SCHEMA = 17
"""The event schema version from which a DecisionRecord carries its cycle's decisions (no output messages)."""

CARRIED_MAX_BYTES = 512 * 1024
"""Bytes of a DecisionRecord carrying its decisions at most before its cycle's outputs are cut (:func:`cut_bytes`,
the rest decided again next cycle): under nats-server's default max_payload (1 MiB) with room for its headers."""

_CARRIED_TYPES = frozenset(types.CarriedDecision.__args__)

RECORD_CARRIED = (types.PendingOutcome, types.FinishedRelease)
"""The outputs a cycle's DecisionRecord carries itself (``pending``, ``released``), not messages of their own."""


def build_batch(
    decider: Decider,
    *,
    outputs: Sequence[types.Output],
    basis_seq: int,
    head_seq: int,
    now_ms: int,
    partition: str = subjects.DEFAULT_PARTITION,
    answers: str = "",
    max_outputs: int | msgspec.UnsetType = 0,
    kueue_es_version: str | msgspec.UnsetType | None = None,
    schema_version: int = types.SCHEMA_VERSION,
) -> tuple[OutgoingMessage, list[OutgoingMessage]]:
    """The head DecisionRecord and the output messages of one committed cycle. Since event schema 17
    the record carries the cycle's per-workload decisions itself (``DecisionRecord.decisions``) and
    there are no output messages: one message per cycle, not one per decision, which nats-server
    stores once and every reader parses once (issue 18). A batch written in an earlier schema
    (``schema_version`` < 17: replay re-building an older record) has one output message per
    decision, as then. Either way its PendingOutcomes and FinishedReleases go into the record
    (``DecisionRecord.pending`` and ``released``, each left out when there are none, so a batch
    without them encodes as before).

    Msg-Ids derive from the decision id (role, partition, basis), so a retried
    commit of the same basis is a duplicate, never a second copy.

    ``max_outputs`` > 0 cuts the outputs (:func:`cut_batch`) and is recorded, so
    replay re-runs the same cut; ``kueue_es_version`` (None: this one) is recorded
    too, and ``schema_version``, the payload schema the batch is written in (this one's unless
    given). Replay passes a stored record's own values, ``UNSET`` for a record written
    before these fields existed: they are then left out, as they were.
    """
    if isinstance(max_outputs, int) and max_outputs > 0:
        outputs = cut_batch(list(outputs), max_outputs)
    decision_id = f"{decider.role}:{partition}:{basis_seq}"
    decisions = [out for out in outputs if not isinstance(out, RECORD_CARRIED)]
    pending = tuple(out for out in outputs if isinstance(out, types.PendingOutcome))
    released = tuple(out for out in outputs if isinstance(out, types.FinishedRelease))
    carried: tuple[types.CarriedDecision, ...] | msgspec.UnsetType = msgspec.UNSET
    if schema_version >= CARRIED_SINCE_SCHEMA:
        kept: list[types.CarriedDecision] = []
        for out in decisions:
            if isinstance(out, types.DecisionRecord) or type(out) not in _CARRIED_TYPES:
                raise TypeError(f"{type(out).__name__} is not a per-workload decision")
            kept.append(out)
        carried, decisions = tuple(kept) or msgspec.UNSET, []
    rest = [
        subjects.message(out, subject=workload_subject(out, partition), msg_id=f"{decision_id}:{i}")
        for i, out in enumerate(decisions, start=1)
    ]
    record = types.DecisionRecord(
        decision_id=decision_id,
        partition=partition,
        role=decider.role,
        basis_seq=basis_seq,
        expected_head_seq=head_seq,
        now_ms=now_ms,
        logic_version=decider.logic_version,
        schema_version=schema_version,
        output_count=len(rest),
        outputs_sha256=codec.digest(m.data for m in rest),
        answers=answers,
        max_outputs=max_outputs,
        kueue_es_version=__version__ if kueue_es_version is None else kueue_es_version,
        pending=pending or msgspec.UNSET,
        released=released or msgspec.UNSET,
        decisions=carried,
    )
    head = subjects.message(record, subject=subjects.head_subject(decider.role, partition), msg_id=f"{decision_id}:0")
    if carried and len(head.data) > CARRIED_MAX_BYTES:
        overhead = len(head.data) - sum(_encoded_size(out) for out in outputs)  # the record's own fields
        shorter = cut_bytes(list(outputs), CARRIED_MAX_BYTES - overhead)
        if len(shorter) < len(outputs):  # the rest is decided again in the next cycle, as a MAX_BATCH cut's is
            return build_batch(
                decider,
                outputs=shorter,
                basis_seq=basis_seq,
                head_seq=head_seq,
                now_ms=now_ms,
                partition=partition,
                answers=answers,
                max_outputs=max_outputs,
                kueue_es_version=kueue_es_version,
                schema_version=schema_version,
            )
    return head, rest


def _decides(outputs: Sequence[types.Output]) -> bool:
    """Whether a cycle's outputs decide something: an admission, an eviction, a nomination, ..., not
    only pending outcomes and finished releases (:data:`RECORD_CARRIED`)."""
    return any(not isinstance(out, RECORD_CARRIED) for out in outputs)


def workload_subject(decision: types.Output, partition: str) -> str:
    """Subject of a per-workload decision."""
    ref = getattr(decision, "workload", None)
    if ref is None:
        raise TypeError(f"{type(decision).__name__} is not a per-workload decision")
    return subjects.workload_decision_subject(ref, partition)


def cut_batch(outputs: list[types.Output], limit: int) -> list[types.Output]:
    """The first at most ``limit`` outputs, cut between two workloads' decisions (a
    QuotaReserved and its WorkloadAdmitted, a nomination and its evictions stay in one
    batch); the rest is decided again in the next cycle. A single workload with more
    than ``limit`` decisions is cut at ``limit``."""
    if len(outputs) <= limit:
        return outputs
    cut = limit
    while cut > 0 and _workload_of(outputs[cut]) == _workload_of(outputs[cut - 1]):
        cut -= 1
    return outputs[: cut or limit]


def _encoded_size(out: types.Output) -> int:
    """The bytes ``out`` takes in its record's JSON: its canonical encoding and the comma after it (a
    PendingOutcome or FinishedRelease is no event of its own, but encodes as the record encodes it)."""
    return len(codec.encode(cast(types.Event, out))) + 1


def cut_bytes(outputs: list[types.Output], limit: int) -> list[types.Output]:
    """The first outputs whose encodings add up to at most ``limit`` bytes, cut between two workloads'
    decisions as :func:`cut_batch` cuts (at least the first workload's, whatever their size). A pure
    function of the outputs, so replay, which builds the record again from the same outputs, cuts the same."""
    size, cut = 0, 0
    for index, out in enumerate(outputs):
        size += _encoded_size(out)
        if size > limit:
            cut = index
            break
    else:
        return outputs
    while cut > 0 and _workload_of(outputs[cut]) == _workload_of(outputs[cut - 1]):
        cut -= 1
    if cut == 0:  # one workload's decisions alone are over the limit: they go together, as they must
        first = _workload_of(outputs[0])
        cut = 1
        while cut < len(outputs) and _workload_of(outputs[cut]) == first:
            cut += 1
    return outputs[:cut]


def _workload_of(decision: types.Output) -> str:
    ref = getattr(decision, "workload", None)
    return ref.key if isinstance(ref, types.WorkloadRef) else ""


@dataclass(frozen=True, kw_only=True)
class StartPoint:
    """A folded state to start from instead of the log's beginning (a checkpoint, loaded by
    ``kueue_es.checkpoints``; this runtime reads no files).

    ``state`` is the fold of messages #1..#``seq`` (``seq``: the position, the last message fed,
    whatever the state's batch verifier holds); ``head_seqs`` the last sequence on each
    partition's head subject up to ``seq``; ``first_sha256`` and ``at_sha256`` the
    :func:`message_digest` of messages #1 and #``seq`` of the log it was folded from. ``origin``
    names where it came from, for the log lines.
    """

    state: ClusterState
    seq: int
    head_seqs: dict[str, int]
    first_sha256: str
    at_sha256: str
    origin: str = ""
    view: Any = None
    """A service's own fold beside ``state`` (the dispatcher's ``DispatchState``), None for a decider."""


class LogPurgedError(BusError):
    """The log was purged below a snapshot and the service has no usable snapshot to start from."""


async def require_from_start(bus: Bus, service: str) -> None:
    """Raise :class:`LogPurgedError` when the log on ``bus`` no longer starts at message #1: a
    service that would fold from the start would miss what was purged (kueue_es.snapshots)."""
    first = await bus.first_seq()
    if first > 1:
        raise LogPurgedError(
            f"the {service} cannot fold the log from the start: stream KQ_LOG starts at #{first} (the messages "
            "before it were purged below a snapshot) and no usable snapshot in the bucket KQ_SNAPSHOTS covers "
            f"#{first}; look at `kueue-es compact` and the snapshots it reports"
        )


async def log_mismatch(bus: Bus, start: StartPoint) -> str | None:
    """Why ``start`` was not folded from the log on ``bus`` (None: it was, as far as the
    stream's message #1 and the message at its position show: same subject and bytes). On a
    log purged below a snapshot, message #1 is gone: the message at the position is checked, and
    the snapshot's verification chain (kueue_es.snapshots) vouches for the rest."""
    first = await bus.first_seq()
    checks = [(start.seq, start.at_sha256, "the message")]
    if first <= 1:
        checks.insert(0, (1, start.first_sha256, "message #1"))
    elif start.seq < first:
        return f"the log starts at #{first}, after the checkpoint's position #{start.seq}"
    for seq, expected, what in checks:
        try:
            found = await bus.get(seq)
        except BusError as err:
            return f"{what} at #{seq} cannot be read: {err}"
        if found.seq != seq or message_digest(found) != expected:
            return f"{what} at #{seq} is not the one the checkpoint was folded from"
    return None


class PartitionGate(Protocol):
    """Which partitions this replica decides (``kueue_es.services.standby.SlotLeases``: the partitions of
    the lease slots it holds)."""

    def active(self) -> bool:
        """True while this replica holds at least one slot."""
        ...

    def owns(self, partition: str) -> bool:
        """True while this replica may decide and commit ``partition``."""
        ...


DECIDER_SUBJECTS = (subjects.FACTS, subjects.DECISIONS)
"""What a :class:`DeciderLoop` reads: the facts and every partition's decisions, not the dispatch
results (``kq.disp.>``, one DispatchApplied or DispatchFailed per dispatched decision before
DispatchBatchApplied, one per record and dispatcher pass, took their place: 50,000 of a
large-scale run's 354,150 messages). The fold names both in ``cluster.IGNORED``: folding one moves
only ``state.last_seq`` (and ``partitions.seq``, which the next event folded sets anew), and no
comparison the deciders make with a sequence (a basis against a move, a record or a fence) can tell
a basis that is the last fact or decision before a dispatch result from one that is the result
itself. So a decider that skips them decides the same, on the same basis as far as replay can see:
``kueue-es replay`` folds everything up to a record's basis, dispatch results included, and gets
the same state (tests/unit/test_decider_subjects.py folds recorded logs both ways)."""

WORKLOAD_TOKENS = ("kq.in.wl.", "kq.in.pod.")


def _untoken(text: str) -> str:
    """The name :func:`subjects.token` made ``text`` of."""
    return "" if text == "_" else text.replace("%2E", ".").replace("%25", "%")


def workload_key_of(subject: str) -> str | None:
    """The workload key (``<namespace>/<name>``) a message on ``subject`` is about, from the subject alone:
    a workload fact (``kq.in.wl.<ns>.<name>``), a per-workload decision (``kq.dec.<p>.wl.<ns>.<name>``)
    or a dispatch result (``kq.disp.<cluster>.wl.<ns>.<name>``); None for any other subject."""
    parts = subject.split(".")
    if len(parts) == 5 and parts[1] == "in" and parts[2] == "wl":
        return f"{_untoken(parts[3])}/{_untoken(parts[4])}"
    if len(parts) == 6 and parts[1] in ("dec", "disp") and parts[3] == "wl":
        return f"{_untoken(parts[4])}/{_untoken(parts[5])}"
    return None


@dataclass(kw_only=True)
class PartitionStats:
    """One partition's side of a :class:`DeciderLoop`: its heads' last sequence, commit attempts and block."""

    head_seq: int = 0
    """The last sequence on the partition's heads (every role's) as the server has it: every message there
    counts, a record or not, so a non-record on a head is skipped, never a permanent fence."""
    commits: int = 0
    conflicts: int = 0
    """Batches with decisions (or an answer) the head check refused: real contention."""
    fence_conflicts: int = 0
    """Fence-only batches (empty, committed only because a hand-over waits for one) the head check refused:
    harmless, another record of the partition came first and the fence is committed again if still owed."""
    waiting_for: int = 0  # the sequence our last commit reached: decide again only after folding it
    blocked_since: float | None = None  # when a batch to commit first failed to commit
    commit_failing: bool = False  # the last commit failed without an answer (not a conflict)


class DeciderLoop:
    """Runs one :class:`Decider` against a bus until stopped, per partition (issue 18).

    ``partitions``: the partitions it decides: None (``--partitions all``) every partition of the
    fold (``state.partitions``), or only those the ``gate`` owns when the gate is a
    :class:`PartitionGate` (slot leases); a list: exactly those (static, no lease), ``["p0"]`` the
    legacy single partition deciding over the whole state. Every partition is folded whatever it
    owns: a workload or ClusterQueue that moves between partitions is handed over through the log
    (a fence record, ``state.partitions.fence_needed``), and its state comes with it.

    Each cycle decides every owned partition that something touched since its last cycle (a
    message about one of its workloads, a decision of it; a fact about a ClusterQueue, Cohort,
    flavor, ... touches all; every ``wakeup`` s all, and when the decider's next timer is due:
    :attr:`Decider.wakes_at`), or that owes a fence, and commits
    each partition's batch on its own heads (``kq.dec.<p>.head.*``) concurrently; a conflict in one
    re-decides only that one, after folding on.

    ``clock`` returns ms since the epoch (injectable for tests); ``wakeup`` is the
    idle interval in seconds after which a cycle runs even without new messages.
    ``stepped``: run cycles only to answer SchedulingRequested facts (the scenario
    runner's ``run: {cycles: N}``); otherwise cycles run whenever caught up, and a
    request is answered by the cycle that completes it.

    ``stall_after`` (seconds, on the ``monotonic`` clock): the loop counts as stalled
    (:meth:`readiness` false) once a partition has had a batch to commit for that long without
    a commit succeeding: from the first cycle whose commit failed until a commit
    succeeds or a cycle finds nothing to decide. ``on_orphan`` is told of every orphaned
    message (:func:`fold_message`), e.g. to count it.

    ``start``: a :class:`StartPoint` (a checkpoint) to fold on from instead of from #1, used
    only when the log on the bus is the one it was folded from (:func:`log_mismatch`);
    otherwise the loop folds from the start and says why (``checkpoint_not_used``).

    ``gate``: a :class:`Gate` (a standby lease): while it is shut the loop only folds, and a batch
    decided while it shut is dropped; a :class:`PartitionGate`: the same per partition.

    ``fold``: a :class:`LogFold` shared with other roles of this process (``kueue-es service deciders``):
    the loop joins it and keeps only its own side (decide, dirty partitions, stats, gate, commits on
    ``bus``); ``start`` and ``on_orphan`` are then the fold's (ValueError if given here). None: the loop
    makes a fold of its own on ``bus``, a single-role service as before.
    """

    def __init__(
        self,
        *,
        bus: Bus,
        decider: Decider,
        partitions: Collection[str] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        wakeup: float = 1.0,
        stepped: bool = False,
        stall_after: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
        on_orphan: OrphanHook | None = None,
        start: StartPoint | None = None,
        gate: Gate | PartitionGate | None = None,
        fold: LogFold | None = None,
    ) -> None:
        self.bus, self.decider = bus, decider
        if fold is None:
            fold = LogFold(bus=bus, on_orphan=on_orphan, start=start)
        elif start is not None or on_orphan is not None:
            raise ValueError("a shared fold takes the start point and the orphan hook, not its roles")
        self.fold = fold
        fold.roles.append(self)
        self.partitions = None if partitions is None else tuple(sorted(set(partitions)))
        self.gate = gate
        self.clock, self.wakeup, self.stepped = clock, wakeup, stepped
        self.stall_after, self.monotonic = stall_after, monotonic
        self.stats: dict[str, PartitionStats] = {}
        self._dirty: set[str] = set()
        self._all_dirty = True
        self._swept_at = 0.0  # monotonic() when every owned partition was last decided
        self._fence_scan = True  # something may have moved: look for fences owed among every owned partition
        self._owed: set[str] = set()  # owned partitions that owed a fence at the last look
        self.yield_seconds = YIELD_SECONDS
        self._open_since: dict[str, float] = {}  # another role's open requests: when this loop saw each
        self.unowned_after = UNOWNED_AFTER
        self._suspect: dict[str, float] = {}  # partitions outside a static list showing no decider: since when
        self.unowned: dict[str, str] = {}  # those reported (past unowned_after): partition -> why
        self._unowned_at = -1e9  # monotonic() of the last look for them
        self._slow_step = 0  # cycles in a row that committed only pending outcomes (Kueue's SlowDown)
        self._slow_until = 0.0  # the event loop's time before which the next cycle waits
        self._wake_at_ms: int | None = None  # the decider's next timer after the last cycle (Decider.wakes_at)
        self._timers: dict[str, int] = {}  # each partition's next timer as of its last cycle (_note_wake)

    # -- the fold, shared with the roles co-hosted with this one (LogFold) ------------------------

    @property
    def state(self) -> ClusterState:
        """The fold's state (shared by every role of the fold)."""
        return self.fold.state

    @state.setter
    def state(self, state: ClusterState) -> None:
        self.fold.state = state

    @property
    def on_orphan(self) -> OrphanHook | None:
        """The fold's orphan hook (:func:`fold_message`)."""
        return self.fold.on_orphan

    @on_orphan.setter
    def on_orphan(self, hook: OrphanHook | None) -> None:
        self.fold.on_orphan = hook

    @property
    def position(self) -> int:
        """The last sequence read before the fold's reader started: a start point's."""
        return self.fold.position

    @property
    def start(self) -> StartPoint | None:
        """The fold's start point, until :meth:`run` took it."""
        return self.fold.start

    @property
    def _inbox(self) -> asyncio.Queue[LogMessage]:
        return self.fold.inbox

    @property
    def _caught_up(self) -> bool:
        return self.fold.caught_up

    def touch(self, dirty: Collection[str], *, everything: bool, moved: bool, heads: dict[str, int]) -> None:
        """What a drain of the fold touched: the partitions in ``dirty`` (``""``: a workload of none),
        ``everything`` (a fact about a ClusterQueue, Cohort, flavor, ...: any partition may care), ``moved``
        (something may have moved between partitions: look for fences owed), and the last sequence seen on
        each partition's heads (every role's)."""
        self._dirty.update(dirty)
        if everything:
            self._all_dirty = True
        if moved:
            self._fence_scan = True
        for partition, seq in heads.items():
            stats = self.partition_stats(partition)
            if seq > stats.head_seq:
                stats.head_seq = seq

    # -- counters, as before partitions: the sums -------------------------------------------------

    @property
    def commits(self) -> int:
        """Batches committed, every partition."""
        return sum(s.commits for s in self.stats.values())

    @property
    def conflicts(self) -> int:
        """Commits with decisions refused by the head check (or as duplicates), every partition: real
        contention, not counting refused fence-only commits (:attr:`fence_conflicts`)."""
        return sum(s.conflicts for s in self.stats.values())

    @property
    def fence_conflicts(self) -> int:
        """Fence-only commits refused (harmless, :attr:`PartitionStats.fence_conflicts`), every partition."""
        return sum(s.fence_conflicts for s in self.stats.values())

    @property
    def head_seq(self) -> int:
        """The last sequence on any partition's heads this loop has seen."""
        return max((s.head_seq for s in self.stats.values()), default=0)

    def partition_stats(self, partition: str) -> PartitionStats:
        """``partition``'s stats (made on first use)."""
        stats = self.stats.get(partition)
        if stats is None:
            stats = self.stats[partition] = PartitionStats()
        return stats

    async def run(self) -> None:
        """Fold and decide forever (cancel to stop); with roles co-hosted on this loop's fold, they all
        run (:meth:`LogFold.run`)."""
        await self.fold.run()

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Ready unless stalled (see the class) or the last commit of a partition failed on the bus (a
        timeout, no responders: ``commit_failing``, until a commit is answered or nothing is left to
        commit); the facts say for how long and which partitions."""
        failing = sorted(p for p, s in self.stats.items() if s.commit_failing)
        blocked = [s.blocked_since for s in self.stats.values() if s.blocked_since is not None]
        facts: dict[str, Any] = {"partitions": len(self.owned())}
        if self.unowned:
            facts["unowned_partitions"] = sorted(self.unowned)[:10]
        if failing:
            facts.update(commit_failing=True, failing_partitions=failing[:10])
        if not blocked:
            return not failing, {"stalled": False, **facts}
        longest = self.monotonic() - min(blocked)
        stalled = longest > self.stall_after
        stalled_partitions = sorted(
            p
            for p, s in self.stats.items()
            if s.blocked_since is not None and self.monotonic() - s.blocked_since > self.stall_after
        )
        if stalled_partitions:
            facts["stalled_partitions"] = stalled_partitions[:10]
        return not stalled and not failing, {"stalled": stalled, "uncommitted_for_s": round(longest, 1), **facts}

    async def _resume(self) -> None:
        await self.fold.resume()

    async def _purged_head(self, partition: str | None = None) -> bool:
        """The server compares a batch with the last message on the partition's heads that it still
        has: once the log is purged past the last head this loop folded (kueue_es.snapshots), none
        (0), not the purged sequence, which would be refused for ever. True when one (``partition``'s,
        or any) was reset so."""
        chosen = self.stats.items() if partition is None else [(partition, self.partition_stats(partition))]
        candidates = [(p, s) for p, s in chosen if s.head_seq]
        if not candidates:
            return False
        first = await self.bus.first_seq()
        reset = False
        for p, stats in candidates:
            if stats.head_seq < first:
                log.info("head_purged", partition=p, head_seq=stats.head_seq)
                stats.head_seq = 0
                reset = True
        return reset

    async def _read(self) -> None:
        await self.fold.read()

    async def _loop(self) -> None:
        await self.fold.turns()

    async def _drain(self, *, timeout: float) -> bool:
        return await self.fold.drain(timeout=timeout)

    def _open_any(self) -> bool:
        return self.gate is None or self.gate.active()

    def _owns(self, partition: str) -> bool:
        gate = self.gate
        if gate is None:
            return True
        owns = getattr(gate, "owns", None)
        return owns(partition) if owns is not None else gate.active()

    def owned(self) -> list[str]:
        """The partitions this loop decides now (see the class), sorted."""
        if self.partitions is not None:
            return [p for p in self.partitions if self._owns(p)]
        return [p for p in self.state.partitions.all() if self._owns(p)]

    def _fencing(self) -> list[str]:
        """Partitions this loop owns that owe a fence record now (``state.partitions.fence_needed``): looked
        for among every owned partition only after something may have moved (a fact other than a
        workload's, a workload that changed partition), else among those that owed one last cycle."""
        partitions = self.state.partitions
        if self._fence_scan:
            self._fence_scan = False
            self._owed.update(self.owned())
        owed = {p for p in self._owed if self._owns(p) and partitions.fence_needed(p) is not None}
        self._owed = owed
        return sorted(owed)

    def _held_for(self) -> float:
        """Seconds to hold cycles yet: until the newest open request of another role (``Decider.yields_to``)
        has been open :attr:`yield_seconds`; 0 when none is open or stepped (the scenario runner)."""
        if self.decider.yields_to is None or self.stepped or self.yield_seconds <= 0:
            return 0.0
        keys = self.decider.yields_to(self.state)
        if not keys:
            self._open_since.clear()
            return 0.0
        now = self.monotonic()
        self._open_since = {key: self._open_since.get(key, now) for key in keys}
        return max(0.0, self.yield_seconds - (now - max(self._open_since.values())))

    def _slowed_for(self) -> float:
        """Seconds the next cycle waits yet after cycles that committed only pending outcomes (see
        :data:`SLOW_DOWN_FIRST`); 0 when none is due. Timed on the event loop's clock: pacing, never a decision."""
        if not self._slow_until:
            return 0.0
        left = self._slow_until - asyncio.get_running_loop().time()
        if left <= 0:
            self._slow_until = 0.0
            return 0.0
        return left

    def _paced(self, decided: bool) -> None:
        """After a cycle with commits: none to wait when it decided something (an output of its own
        message, an answer, a fence: :func:`_decides`), else Kueue's backoff, 1 ms doubling to 10 ms
        (:data:`SLOW_DOWN_FIRST`); the scenario runner's stepped cycles are never paced."""
        if decided or self.stepped:
            self._slow_step, self._slow_until = 0, 0.0
            return
        delay = slow_down_seconds(self._slow_step)
        self._slow_step += 1
        self._slow_until = asyncio.get_running_loop().time() + delay

    def unowned_partitions(self) -> dict[str, str]:
        """With a static ``--partitions`` list: the partitions of the fold outside it that show no decider
        at work, each with why (a replica cannot see the others' lists; the log shows who decides):

        - one that owes a fence (``state.partitions.fence_needed``): a ClusterQueue, Cohort or workload
          moved out of it and the partition it moved into waits for its record, which any decider
          owning it commits at once;
        - one holding waiting workloads (no quota, not finished) with no DecisionRecord of it in the log
          (``state.heads``): a decider owning it records a new workload's first pending reason or
          admission within a cycle.

        Only those showing it for :attr:`unowned_after` seconds, as of the last call of :meth:`_note_unowned`
        (each sweep). Empty with ``--partitions all``: every partition has a lease slot."""
        return self.unowned

    def _note_unowned(self) -> None:
        """Keep :attr:`unowned` (see :meth:`unowned_partitions`); log ``partition_unowned`` (a warning naming
        the partition, its ClusterQueues and what waits) when one is reported, ``partition_decided`` when
        the log shows a decider at work in it again."""
        now = self.monotonic()
        if self.partitions is None or now - self._unowned_at < 1.0:  # at most once a second: a walk of the partitions
            return
        self._unowned_at = now
        partitions, heads, mine = self.state.partitions, self.state.heads, set(self.partitions)
        if subjects.DEFAULT_PARTITION in mine or (subjects.DEFAULT_PARTITION in heads and len(heads) == 1):
            return  # p0 decides over everything (this loop's, or a legacy log's records)
        found: dict[str, str] = {}
        for p in partitions.all():
            if p in mine or p == subjects.DEFAULT_PARTITION:
                continue
            owed = partitions.fence_needed(p)
            if owed is not None:
                waiting = sorted({t for source, _, t in self.state.transits.values() if source == p})
                found[p] = (
                    f"it owes the fence of a hand-over (a record of {p} with a basis at or after #{owed}) that"
                    f" {', '.join(waiting)} wait{'s' if len(waiting) == 1 else ''} for, and no decider commits it"
                )
                continue
            part = partitions.parts.get(p)
            if part is None or p in heads:
                continue
            count = sum(1 for wl in part.workloads.values() if _waits(wl))
            if count:
                found[p] = (
                    f"{count} workload{' waits' if count == 1 else 's wait'} in it and no decider has committed a"
                    " record of it"
                )
        for p in list(self._suspect):
            if p not in found:
                del self._suspect[p]
                if self.unowned.pop(p, None) is not None:
                    log.info("partition_decided", partition=p)
        for p, why in found.items():
            since = self._suspect.setdefault(p, now)
            if self.unowned.get(p) == why or now - since < self.unowned_after:
                continue  # reported already (a new reason is reported again), or not for long enough
            self.unowned[p] = why
            log.warning(
                "partition_unowned",
                partition=p,
                cluster_queues=sorted(partitions.members(p))[:20],
                why=why,
                decides=list(self.partitions),
                hint=f"if no --partitions list of this decider's replicas names {p}, what waits on it waits for"
                " ever: add it to one, or run the replicas with --partitions all",
            )

    def _due(self) -> list[str]:
        """The owned partitions to decide this cycle: touched since their last cycle (all after a sweep),
        owing a fence, and not waiting for their own last commit to come back."""
        if self._all_dirty:
            candidates = set(self.owned())
            self._swept_at = self.monotonic()
            self._note_unowned()
            for p, stats in self.stats.items():
                if p not in candidates:  # gone, or no longer ours: nothing of it left to commit here
                    stats.blocked_since, stats.commit_failing = None, False
        else:
            candidates = {p for p in self._dirty if p and self._owns(p)}
            if self.partitions is not None:
                candidates &= set(self.partitions)
        candidates.update(self._fencing())
        self._dirty, self._all_dirty = set(), False
        last = self.state.last_seq
        due = []
        for p in sorted(candidates):
            if self.partition_stats(p).waiting_for > last:
                self._dirty.add(p)  # decide it once our commit is folded
            else:
                due.append(p)
        return due

    async def _cycle(self) -> None:
        """Decide every due partition on the current state and commit their batches concurrently."""
        request = self.state.open_request(self.decider.role)
        if self.stepped and request is None:
            return
        due = self._due()
        if request is not None and not due:
            due = self.owned()[:1] or list(self.partitions or ())[:1]
        now_ms = self.clock()
        partitions = self.state.partitions
        commits: dict[str, asyncio.Task[int]] = {}
        decided = False  # anything committed but pending outcomes (see _paced)
        answers = request.request_id if request is not None else ""
        for p in due:
            if partitions.blocked(p):  # something is in transit into it: its decide is empty until the fence
                self._dirty.add(p)
                continue
            outputs = cut_batch(list(self.decider.decide(self.state, now_ms=now_ms, partition=p)), MAX_BATCH)
            answer = ""
            if answers and (request is not None and (request.mode == "cycle" or not outputs)):
                answer, answers = answers, ""  # one record answers the request
            if outputs or answer or partitions.fence_needed(p) is not None:
                decided = decided or bool(answer) or partitions.fence_needed(p) is not None or _decides(outputs)
                # committed while the next partition is decided; the state does not change meanwhile
                # (only this task folds), and the lease renewals get their turn between partitions
                commits[p] = asyncio.create_task(self._commit(p, outputs, answer, now_ms))
                await asyncio.sleep(0)
            else:
                stats = self.partition_stats(p)
                stats.blocked_since, stats.commit_failing = None, False  # nothing to commit: not blocked
        if due:
            self._note_wake(now_ms, due)
        if not commits:
            return
        try:
            await asyncio.gather(*commits.values())
        finally:
            for p, task in commits.items():
                if task.done() and not task.cancelled() and task.exception() is None:
                    self.partition_stats(p).waiting_for = task.result()
        self._paced(decided)

    def _note_wake(self, now_ms: int, decided: Collection[str]) -> None:
        """Keep the decider's next timer (:attr:`Decider.wakes_at`) after a cycle at ``now_ms`` that decided the
        partitions ``decided``: theirs are asked again (a partition's timers change only with a message about
        it, which has it decided, or with a sweep, which decides all), the others' kept. Only a later one
        counts: one due by then was this cycle's to decide, and its decision, once folded, brings the next
        cycle (waking for it again would spin)."""
        wakes_at = self.decider.wakes_at
        if wakes_at is None:
            return
        timers = self._timers
        for p in decided:
            at = wakes_at(self.state, partition=p, after_ms=now_ms)
            if at is None:
                timers.pop(p, None)
            else:
                timers[p] = at
        at = min((due for due in timers.values() if due > now_ms), default=None)
        # no closer than TIMER_GAP_MS after this cycle: the timers of a burst of admissions come in a few sweeps
        self._wake_at_ms = None if at is None else max(at, now_ms + TIMER_GAP_MS)

    def _wake_in(self) -> float | None:
        """Seconds until the decider's next timer (:meth:`_note_wake`), at least 0; None without one."""
        if self._wake_at_ms is None:
            return None
        return max(0.0, (self._wake_at_ms - self.clock()) / 1000)

    async def _commit(self, partition: str, outputs: list[types.Output], answers: str, now_ms: int) -> int:
        """Commit ``partition``'s batch; returns the sequence to wait for before deciding it again."""
        stats = self.partition_stats(partition)
        basis = self.state.last_seq
        head, rest = build_batch(
            self.decider,
            outputs=outputs,
            basis_seq=basis,
            head_seq=self.state.heads.get(partition, 0),  # the record's content: the last record folded
            now_ms=now_ms,
            partition=partition,
            answers=answers,
            max_outputs=MAX_BATCH,
        )
        if not self._owns(partition):  # the lease was lost while deciding: the holder decides it now
            log.info("commit_dropped_standby", partition=partition, basis_seq=basis, outputs=len(outputs))
            return 0
        try:
            last = await self.bus.commit_batch(
                head=head, expected_head_seq=stats.head_seq, rest=rest, head_filter=subjects.heads_of(partition)
            )
        except (ConflictError, DuplicateBatchError) as err:
            fence_only = not outputs and not answers  # committed only for a hand-over's fence
            if fence_only:
                stats.fence_conflicts += 1
            else:
                stats.conflicts += 1
            stats.commit_failing = False
            self._blocked(stats)
            log.info(
                "commit_rejected",
                partition=partition,
                basis_seq=basis,
                head_seq=stats.head_seq,
                error=type(err).__name__,
                fence_only=fence_only,
            )
            with contextlib.suppress(BusError):
                if await self._purged_head(partition):
                    return 0  # the head was purged, nobody moved it: decide again now
            return basis + 1  # someone else moved the head: fold it first
        except BusError as err:
            # no answer (or a refusal): decide again at the next wakeup, not only once a new message
            # comes (none may). Safe whether or not it landed: the same basis makes the same Msg-Ids
            # and expects the same head, so a repeat of a batch that landed is rejected whole.
            self._blocked(stats)
            stats.commit_failing = True
            log.warning("commit_failed", partition=partition, basis_seq=basis, error=str(err))
            return 0
        stats.commits += 1
        stats.blocked_since = None
        stats.commit_failing = False
        log.info(
            "committed",
            partition=partition,
            basis_seq=basis,
            head_seq=last - len(rest),
            outputs=len(outputs),  # decisions, pending outcomes and releases of the cycle
            role=self.decider.role,
        )
        return last

    def _blocked(self, stats: PartitionStats) -> None:
        if stats.blocked_since is None:
            stats.blocked_since = self.monotonic()


_DECISION_PREFIX = subjects.DECISIONS.removesuffix(">")


class LogFold:
    """One reader of the log and one :class:`ClusterState` fold, shared by the decider roles
    (:class:`DeciderLoop`) a process hosts: one role (``kueue-es service admitter``), or several over
    the same fold (``kueue-es service deciders``: the admitter, preemptor and TAS placer, as Kueue runs
    admission, preemption and topology-aware placement in one manager). Each role keeps its own
    decide, dirty partitions, stats, gate (lease), heads and DecisionRecord chain, and commits on its
    own bus (its own NATS user); the fold reads once, on ``bus``.

    Decisions are never applied locally: a role sees another's decisions only when they come back
    through the log, exactly as separate processes do. The roles take turns in one task
    (:meth:`turns`): after each drain, every open role's cycle runs in the order the roles were added,
    each committing its batches before the next decides.

    ``start``: a :class:`StartPoint` to fold on from (see :class:`DeciderLoop`); ``on_orphan`` is told
    of every orphaned message.
    """

    def __init__(self, *, bus: Bus, on_orphan: OrphanHook | None = None, start: StartPoint | None = None) -> None:
        self.bus, self.on_orphan, self.start = bus, on_orphan, start
        self.state = ClusterState()
        self.inbox: asyncio.Queue[LogMessage] = asyncio.Queue()
        self.caught_up = False
        self.position = 0  # the last sequence read before this fold's reader: a start point's
        self.roles: list[DeciderLoop] = []

    def _service(self) -> str:
        return " and ".join(f"{role.decider.role} decider" for role in self.roles) or "decider"

    async def run(self) -> None:
        """Fold and let every role decide forever (cancel to stop)."""
        await self.resume()
        reader = asyncio.create_task(self.read())
        try:
            await self.turns()
        finally:
            await cancel_and_wait([reader])

    async def resume(self) -> None:
        """Take the start point if it is of this log; else fold from the start, saying why."""
        start, self.start = self.start, None
        if start is None:
            await require_from_start(self.bus, self._service())
            return
        problem = await log_mismatch(self.bus, start)
        if problem is not None:
            log.warning("checkpoint_not_used", checkpoint=start.origin, seq=start.seq, reason=problem)
            await require_from_start(self.bus, self._service())
            return
        self.state, self.position = start.state, start.seq
        self.bus.folded_through(start.seq)  # ready at once when nothing follows the snapshot
        for role in self.roles:
            for partition, seq in start.head_seqs.items():
                role.partition_stats(partition).head_seq = seq
            await role._purged_head()
        with contextlib.suppress(BusError):  # nothing after the checkpoint: no message will say so
            self.caught_up = await self.bus.last_seq() <= start.seq
        log.info(
            "started_from_checkpoint", checkpoint=start.origin, seq=start.seq, workloads=len(start.state.workloads)
        )

    async def read(self) -> None:
        """Put every fact and every partition's decision after the fold's position into the inbox."""
        filters = DECIDER_SUBJECTS  # every partition's decisions: hand-overs fold
        start_seq = max(self.state.last_seq, self.position) + 1  # a held batch's messages are not read twice
        async for message in self.bus.read(subjects=filters, start_seq=start_seq):
            await self.inbox.put(message)

    async def turns(self) -> None:
        """Drain, then let each open role run its cycle, for ever (see the class)."""
        roles = self.roles
        held = [0.0] * len(roles)  # seconds left of each role holding cycles for another role's request
        while True:
            standby = not any(role._open_any() for role in roles)  # a standby asks often: a takeover decides at once
            wakeup = min(role.wakeup for role in roles)
            timeout = min(wakeup, STANDBY_POLL) if standby else wakeup
            holding = [h for h in held if h > 0]
            if holding:
                timeout = min(timeout, *holding)
            timers = [left for role in roles if (left := role._wake_in()) is not None]
            if timers:
                timeout = min(timeout, min(timers) + TIMER_SLACK)
            # a role slowing down after pending-only cycles (DeciderLoop._paced) cycles once its wait ends
            pacing = min((left for role in roles if (left := role._slowed_for()) > 0), default=timeout)
            came = await self.drain(timeout=min(timeout, pacing))
            swept = not came and pacing >= timeout  # the end of a slow-down alone sweeps nothing
            for role in roles:
                if swept or role.monotonic() - role._swept_at >= role.wakeup or role._wake_in() == 0.0:
                    role._all_dirty = True  # timers (backoff, requeue) and partitions a lease just gave us
                    role._wake_at_ms = None  # the cycle this sweep brings notes the next one
            if not self.caught_up:
                continue
            open_roles = [i for i, role in enumerate(roles) if role._open_any()]
            if not open_roles:
                continue
            if self.state.batches.holding and (came or not await expire_stranded(self.bus, self.state, self.on_orphan)):
                continue  # never decide on half a batch: its outputs are part of the basis
            for i in open_roles:
                held[i] = roles[i]._held_for()
                if held[i] > 0:
                    continue  # the role it yields to runs its cycle in this same turn
                if roles[i]._slowed_for() > 0:
                    continue  # what touched it stays dirty for the cycle after the slow-down
                await roles[i]._cycle()

    async def drain(self, *, timeout: float) -> bool:
        """Fold everything available and tell every role what it touched; True if at least one message came."""
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow the
            # cancellation that stops the service, and the loop would run on.
            async with asyncio.timeout(timeout):
                message = await self.inbox.get()
        except TimeoutError:
            return False
        partitions = self.state.partitions
        dirty: set[str] = set()
        heads: dict[str, int] = {}
        everything = moved = False
        folded = 0
        while True:
            subject = message.subject
            if subject.startswith(subjects.FACT_BATCH_PREFIX):  # several workloads' facts: each as alone
                moved = self._fold_batch(message, dirty) or moved
                partitions = self.state.partitions
                key = None
            elif subject.startswith(_DECISION_PREFIX) and subjects.head_token(subject) is not None:  # a record
                moved = self._fold_record(message, dirty) or moved
                partitions = self.state.partitions
                key = None
            else:
                key = workload_key_of(subject)
                before = partitions.of_workload(key) if key is not None else None
                fold_message(self.state, message, on_orphan=self.on_orphan)
                partitions = self.state.partitions
            if key is not None:
                after = partitions.of_workload(key)
                dirty.add(before or "")
                if after != before:
                    dirty.add(after or "")
                    moved = moved or before is not None
            if subject.startswith(_DECISION_PREFIX):
                partition, _, rest = subject[len(_DECISION_PREFIX) :].partition(".")
                dirty.add(partition)
                if rest.startswith("head.") and "." not in rest[5:]:  # on one of the partition's heads
                    heads[partition] = message.seq  # the log's order: the last one is the highest
            elif key is None and not subject.startswith(subjects.FACT_BATCH_PREFIX):  # a batch: its workloads marked
                everything = moved = True  # a ClusterQueue, Cohort, flavor, pod, ...: any partition may care
            self.caught_up = message.pending == 0
            folded += 1
            if folded % FOLD_SLICE == 0:
                # a backlog (a restart, a stall) is folded in slices: the lease renewals and the health
                # server run between them, so a holder catching up is not taken for dead
                self._touch(dirty, everything, moved, heads)
                dirty, heads, everything, moved = set(), {}, False, False
                await asyncio.sleep(0)
            try:
                message = self.inbox.get_nowait()
            except asyncio.QueueEmpty:
                self._touch(dirty, everything, moved, heads)
                return True

    def _fold_batch(self, message: LogMessage, dirty: set[str]) -> bool:
        """Fold a FactBatch message, adding to ``dirty`` the partitions of its workloads before and after, as
        its facts would each alone; True when one of them moved from a partition to another."""
        try:
            event: types.Event | None = codec.decode(message.data)
        except codec.DecodeError as err:
            log.warning("event_undecodable", seq=message.seq, subject=message.subject, error=str(err))
            self.state.last_seq = max(self.state.last_seq, message.seq)
            return False
        partitions = self.state.partitions
        keys = [fact.workload.key for fact in event.facts] if isinstance(event, types.FactBatch) else []
        before = [partitions.of_workload(key) for key in keys]
        fold_decoded(self.state, message, event, on_orphan=self.on_orphan)
        partitions = self.state.partitions
        moved = False
        for key, was in zip(keys, before, strict=True):
            now = partitions.of_workload(key)
            dirty.add(was or "")
            if now != was:
                dirty.add(now or "")
                moved = moved or was is not None
        return moved

    def _fold_record(self, message: LogMessage, dirty: set[str]) -> bool:
        """Fold a message on a head subject; for a DecisionRecord carrying decisions (schema 17), add to
        ``dirty`` the partition of every decided workload that is not the record's after the fold (the
        record's own is marked by its subject), as their output messages did; True when one moved there."""
        try:
            event: types.Event | None = codec.decode(message.data)
        except codec.DecodeError:
            event = None  # an orphan on a head subject: the verifier reports it
            self.state.last_seq = max(self.state.last_seq, message.seq)
        fold_decoded(self.state, message, event, on_orphan=self.on_orphan)
        if not isinstance(event, types.DecisionRecord) or not event.decisions:
            return False
        partitions = self.state.partitions
        moved = False
        for decision in event.decisions:
            now = partitions.of_workload(decision.workload.key)
            if now is not None and now != event.partition:
                dirty.add(now)
                moved = True
        return moved

    def _touch(self, dirty: set[str], everything: bool, moved: bool, heads: dict[str, int]) -> None:
        for role in self.roles:
            role.touch(dirty, everything=everything, moved=moved, heads=heads)


def _waits(wl: WorkloadState) -> bool:
    """A workload waiting for a decision of its partition: no quota, not finished, not deleted."""
    return wl.reservation is None and wl.finished is None and not wl.deleted_seq


STOP_DEADLINE_SECONDS = 60.0
"""Seconds a command stopping on SIGTERM or Ctrl-C (:func:`cancel_on_stop_signals`) has to end: the services'
own stop (10 s of grace, then a kill), the emulated API server's and the NATS server's fit well inside."""


def cancel_on_stop_signals(*, deadline: float = STOP_DEADLINE_SECONDS) -> None:
    """For a command that runs as the current task of ``asyncio.run`` (``demo``, ``up``): SIGTERM and SIGINT
    cancel that task, so every ``finally`` stops what it started, and the first of them arms a deadline:
    ``deadline`` seconds later a process still alive prints the stack of every thread to stderr and exits
    at once (143 after SIGTERM, 130 after SIGINT). A task that swallows its cancellation, or a teardown that
    waits for ever, could otherwise leave a process whose services are gone alive through every further
    signal, killable only with SIGKILL (seen once with ``demo --keep``). Outside a running task, nothing."""
    task = asyncio.current_task()
    if task is None:
        return
    loop = asyncio.get_running_loop()
    armed: list[threading.Timer] = []

    def stop(signum: int) -> None:
        task.cancel()
        if not armed:
            code = 128 + signum
            timer = threading.Timer(deadline, _exit_after_deadline, args=(deadline, code))
            timer.daemon = True  # never what keeps an interpreter that is exiting alive
            timer.start()
            armed.append(timer)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop, int(sig))


def _exit_after_deadline(deadline: float, code: int) -> None:
    print(f"kueue-es: still stopping {deadline:g} s after the stop signal: exiting now; stacks:", file=sys.stderr)
    with contextlib.suppress(Exception):
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


async def run_until_signalled(main: Callable[[asyncio.Event], Awaitable[object]], *, slow_stop: float = 3.0) -> None:
    """Run ``main(stop)`` and set ``stop`` on SIGTERM or SIGINT, for a graceful exit.

    If shutting down takes longer than ``slow_stop`` seconds, the stacks of every
    task still running are logged (``shutdown_slow``) so a hang can be diagnosed.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    task = asyncio.ensure_future(main(stop))
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    watchdog = asyncio.ensure_future(_report_slow_stop(slow_stop))
    try:
        if not task.done():
            await asyncio.wait({task}, timeout=None)
    finally:
        watchdog.cancel()
        stopper.cancel()
    failure = None if task.cancelled() else task.exception()
    if failure is not None:
        raise failure


async def _report_slow_stop(after: float) -> None:
    await asyncio.sleep(after)
    for task in asyncio.all_tasks():
        if task is asyncio.current_task():
            continue
        frames = [f"{f.f_code.co_filename}:{f.f_lineno} {f.f_code.co_name}" for f in task.get_stack(limit=8)]
        log.warning("shutdown_slow", task=task.get_name(), stack=frames)


async def run_until_stopped(stop: asyncio.Event, *coroutines: Coroutine[Any, Any, Any]) -> None:
    """Run ``coroutines`` as tasks until ``stop`` is set or one of them fails.

    On the way out every task is cancelled and awaited; a task's exception is
    re-raised so the service exits non-zero and its log says why.
    """
    tasks = [asyncio.create_task(c) for c in coroutines]
    stopper = asyncio.create_task(stop.wait())
    try:
        done, _ = await asyncio.wait({*tasks, stopper}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is not stopper and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
    finally:
        stopper.cancel()
        await cancel_and_wait(tasks)


async def cancel_and_wait(tasks: Sequence[asyncio.Task[Any]], *, retry: float = 0.5) -> None:
    """Cancel ``tasks`` and wait until all are done, cancelling again every ``retry`` s.

    On Python 3.11 a cancellation that races with a completing ``asyncio.wait_for``
    is swallowed (nats-py's fetch uses one), so a single cancel() may not stop a loop.
    """
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=retry)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            log.warning("task_failed_on_stop", task=task.get_name(), error=repr(task.exception()))


class LogFollower:
    """A reader that folds the whole log and follows it for ever: the publisher's and the visibility
    server's loop (a decider has its own, :class:`DeciderLoop`).

    Subclasses set ``bus`` and ``state`` and implement :meth:`take` (fold one message, and whatever
    else they do with it). :meth:`follow` reads every fact, dispatch result and decision (every
    partition's) after ``max(state.last_seq, position)`` and hands them to :meth:`take` in log
    order; after ``idle_s`` seconds without a message it orphans a batch the log ended inside
    (:func:`expire_stranded`, then :meth:`stranded_expired`) and asks the log's end to learn it has
    caught up. ``caught_up`` turns true at the first message with nothing pending behind it.
    """

    bus: Bus
    state: ClusterState
    position: int = 0  # the last log sequence read
    caught_up: bool = False
    idle_s: float = 1.0

    async def take(self, message: LogMessage) -> None:
        """Fold ``message`` (and act on it); called in log order."""
        raise NotImplementedError

    def on_orphan(self, orphan: batches.Orphan) -> None:
        """A message the fold orphaned (logged already by :func:`report_orphan`)."""

    def stranded_expired(self) -> None:
        """The batch the log ended inside was orphaned whole."""

    def progress(self) -> dict[str, Any]:
        """Fields for the ``caught_up`` log line."""
        return {"folded_seq": self.state.last_seq}

    async def follow(self) -> None:
        """Read and fold for ever (cancel to stop). The reader runs as its own task, so a slow
        :meth:`take` never holds up the bus's delivery."""
        inbox: asyncio.Queue[LogMessage] = asyncio.Queue()
        reader = asyncio.create_task(self._read(inbox))
        try:
            while True:
                try:
                    async with asyncio.timeout(self.idle_s):
                        message = await inbox.get()
                except TimeoutError:
                    await self._idle()
                    continue
                self.position = max(self.position, message.seq)
                await self.take(message)
                if message.pending == 0 and not self.caught_up:
                    self.caught_up = True
                    log.info("caught_up", seq=message.seq, **self.progress())
        finally:
            await cancel_and_wait([reader])

    async def _idle(self) -> None:
        if self.state.batches.holding and await expire_stranded(self.bus, self.state, self.on_orphan):
            self.stranded_expired()
        if not self.caught_up:
            with contextlib.suppress(Exception):  # the bus is down: ask again at the next idle
                self.caught_up = await self.bus.last_seq() <= max(self.state.last_seq, self.position)

    async def _read(self, inbox: asyncio.Queue[LogMessage]) -> None:
        filters = [subjects.FACTS, subjects.DISPATCH, subjects.DECISIONS]  # every partition's decisions
        async for message in self.bus.read(subjects=filters, start_seq=max(self.state.last_seq, self.position) + 1):
            await inbox.put(message)
