"""``kueue-es replay``: re-run every recorded decision at its basis and compare bytes.

The log is the audit trail. For each DecisionRecord, replay rebuilds the state the
decider saw (the fold of the log up to ``basis_seq``), runs the same decider with
the recorded ``now_ms`` and output cut, encodes the outputs as production does and
compares them with the stored messages that follow the record, and with the
record itself (its digest, cut and versions; research/event-sourcing.md §5.10). Since event
schema 17 the record carries its decisions (``DecisionRecord.decisions``) and no messages
follow it: its bytes hold them all, re-built in the record's own schema version.

It also checks that the log is complete: no sequence missing between 1 and the
last one (a deleted or purged message), no message on a decision subject that no
DecisionRecord covers (an orphan), no dispatch result naming a message that is not
a recorded decision (a decision a record carries is named by the record's sequence and its
place in the record). A decision no dispatch result answers is only a warning: the
dispatcher may still be at work. One whose workload, by the end of the log, finished,
was deleted or gave its quota back after it last took some is not warned about: the
dispatcher writes nothing for it (Kueue's reconciler neither starts nor stops a finished
job), e.g. an eviction the preemptor decided on a basis before the victim finished, or
one the dispatcher reached only after the job had finished.

Exit codes (:attr:`ReplayReport.exit_code`, documented in the README):
0 every record re-checked and matched, log complete; 1 a difference; 4 the log is
incomplete (gaps, orphans, dispatch results of no decision); 3 some records could
not be re-checked (another logic version, an unknown role, scenario seeds). The
lowest non-zero code that applies wins, in the order 1, 4, 3.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from kueue_es import deciders as registry
from kueue_es import logfile
from kueue_es.events import codec, models, slices, subjects, types
from kueue_es.events.bus.base import Bus, LogMessage
from kueue_es.events.bus.direct import DirectReader
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling import concurrent_admission
from kueue_es.services.dispatcher.core import startable
from kueue_es.services.runtime import Decider, build_batch, fold_decoded, fold_message

EXIT_OK = 0
EXIT_DIFFERENCE = 1
EXIT_UNVERIFIABLE = 3
EXIT_INCOMPLETE = 4

DEFAULT_MAX_DIFFS = 10
SEED_ROLE = "seed"  # the scenario runner's set-up batches (kueue_es.scenarios.core_engine.SEED)
MISSING = "<missing>"

Progress = Callable[[int], None]
"""Called with the number of messages handled since the last call."""


@dataclass(frozen=True, kw_only=True)
class FieldDiff:
    """One differing JSON path of a stored vs re-run event: ``stored`` -> ``replayed``."""

    path: str
    stored: object
    replayed: object


@dataclass(frozen=True, kw_only=True)
class Mismatch:
    """One decision that did not reproduce: where, and the first differing event."""

    decision_id: str
    head_seq: int
    basis_seq: int
    index: int  # 1-based position of the first differing output (0: the record itself)
    stored: str
    replayed: str
    reason: str = ""  # set when the record is refused before re-running (e.g. a cut no rule allows)

    @property
    def seq(self) -> int:
        """Stream sequence of the differing message."""
        return self.head_seq + self.index

    def fields(self) -> list[FieldDiff]:
        """The differing JSON paths of the stored and re-run event (a whole value when either is not JSON)."""
        return field_diff(self.stored, self.replayed)


@dataclass(frozen=True, kw_only=True)
class Unverifiable:
    """A record replay could not re-run: the installed registry has no decider for it."""

    decision_id: str
    head_seq: int
    role: str
    logic_version: int
    kueue_es_version: str  # "" when the record predates the field
    why: str


@dataclass(frozen=True, kw_only=True)
class Orphan:
    """A message replay found where the log's rules allow none."""

    seq: int
    subject: str
    type: str
    why: str


@dataclass(kw_only=True)
class ReplayReport:
    """Counts of a replay, every mismatch, and what made the log unverifiable or incomplete."""

    messages: int = 0
    last_seq: int = 0
    decisions: int = 0
    matched: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    unverifiable: list[Unverifiable] = field(default_factory=list)
    gaps: list[tuple[int, int]] = field(default_factory=list)  # (first, last) missing sequences, inclusive
    orphans: list[Orphan] = field(default_factory=list)
    stray_dispatch: list[Orphan] = field(default_factory=list)  # dispatch results naming no decision
    # the sequence of each decision no dispatch result answered (warning); a decision a DecisionRecord carries
    # (event schema 17) is at its record's sequence, so a record's several decisions repeat it
    undispatched: list[int] = field(default_factory=list)
    nothing_to_write: list[int] = field(default_factory=list)  # unanswered ones whose workload is done (no warning)
    outside: int = 0  # records left out by --from/--to (not re-checked by request)
    start_seq: int = 0  # > 0: re-checked from a snapshot at this position (a purged log), not from #1
    start_note: str = ""  # which snapshot, verified when (printed first)
    covered: int = 0  # records before the snapshot's position verified when the snapshot was made
    partition_records: dict[str, int] = field(default_factory=dict)  # partition -> its records to re-check
    partition_matched: dict[str, int] = field(default_factory=dict)  # partition -> those that matched

    @property
    def skipped(self) -> int:
        """Records not re-checked (:attr:`unverifiable`)."""
        return len(self.unverifiable)

    @property
    def seeds(self) -> list[Unverifiable]:
        """The unverifiable records that are scenario seeds."""
        return [u for u in self.unverifiable if u.role == SEED_ROLE]

    @property
    def missing(self) -> int:
        """How many sequences are missing."""
        return sum(last - first + 1 for first, last in self.gaps)

    @property
    def complete(self) -> bool:
        """No gaps, no orphans, no dispatch result of no decision."""
        return not (self.gaps or self.orphans or self.stray_dispatch)

    @property
    def exit_code(self) -> int:
        """0, or the first of 1 (difference), 4 (incomplete), 3 (unverifiable) that applies."""
        if self.mismatches:
            return EXIT_DIFFERENCE
        if not self.complete:
            return EXIT_INCOMPLETE
        if self.unverifiable:
            return EXIT_UNVERIFIABLE
        return EXIT_OK

    @property
    def ok(self) -> bool:
        """True only when every record was re-checked and matched and the log is complete."""
        return self.exit_code == EXIT_OK


def check_log(
    messages: Sequence[LogMessage],
    deciders: Mapping[str, Decider],
    *,
    last_seq: int = 0,
    progress: Progress | None = None,
) -> ReplayReport:
    """Replay ``messages`` (the whole log, in sequence order) against ``deciders`` by role.

    Pure: no I/O. ``last_seq`` is the stream's last sequence when known (a gap at
    the end shows only then); otherwise the last message's. ``progress`` is called
    as messages are folded. A thin wrapper of :class:`LogChecker` for a log in memory.
    """
    checker = LogChecker(find_records(messages), deciders, progress=progress)
    for message in messages:
        checker.feed(message)
    return checker.finish(last_seq=last_seq)


def find_records(messages: Iterable[LogMessage]) -> list[tuple[int, types.DecisionRecord]]:
    """The DecisionRecords of ``messages`` with their sequences, in log order (the first pass)."""
    found = []
    for message in messages:
        if message.headers.get("Kq-Type") not in (None, "DecisionRecord"):
            continue
        if subjects.is_old_head(message.subject):
            raise OldLayoutError(message.seq, message.subject)
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            continue
        if isinstance(event, types.DecisionRecord):
            found.append((message.seq, event))
    return found


_DECISIONS_PREFIX = subjects.DECISIONS.removesuffix(">")  # kq.dec.
_DISPATCH_PREFIX = subjects.DISPATCH.removesuffix(">")  # kq.disp.
HEADS = subjects.HEADS
"""The subjects of every partition's DecisionRecords (the first pass reads only these)."""


class OldLayoutError(ValueError):
    """The log puts its DecisionRecords on ``kq.dec.<partition>.head``, the single head of kueue-es
    before per-role heads; this replay reads only ``kq.dec.<partition>.head.<role>``."""

    def __init__(self, seq: int, subject: str) -> None:
        super().__init__(
            f"the log has a DecisionRecord on {subject} (#{seq}): the layout of kueue-es before per-role head"
            f" subjects ({subjects.OLD_HEADS}); this kueue-es reads {subjects.HEADS} only. Replay the log with the"
            " kueue-es version that wrote it (its records name it: kueueEsVersion)."
        )


def _is_head_subject(subject: str) -> bool:
    return subjects.head_token(subject) is not None


_DISPATCHED = frozenset({"WorkloadAdmitted", "EvictionRequested"})
"""Decision types the dispatcher answers with a result when it has something to write."""

_LIFECYCLE_FACTS = frozenset({"WorkloadFinished", "ObjectDeleted", "FactBatch"})
"""Facts the completeness check decodes (without a fold) to tell a decision with nothing to write."""


class _ObservedMeta(msgspec.Struct, rename="camel"):
    namespace: str = ""
    name: str = ""
    annotations: dict[str, str] = {}


class _ObservedJob(msgspec.Struct, rename="camel"):
    metadata: _ObservedMeta
    owner: models.OwnerReference | None = None


class _ObservedOwner(msgspec.Struct, rename="camel"):
    """The part of a WorkloadObserved the completeness check reads without a fold: whose job it is. Decoding
    only this skips the rest of the (large) workload."""

    workload: _ObservedJob


_observed_owner = msgspec.json.Decoder(_ObservedOwner)


def _has_no_job(owner: models.OwnerReference | None, annotations: Mapping[str, str]) -> bool:
    """Whether the dispatcher starts and stops no job for a workload with ``owner`` and ``annotations``: a Workload
    created on its own (no owner, and no ConcurrentAdmission variant, whose parent's job it starts), or the
    workload of a kind it does not start (``dispatcher.core.start_of`` and ``stop_of`` return nothing)."""
    if owner is None:
        return not annotations.get(concurrent_admission.VARIANT_OF_ANNOTATION)
    return not startable(owner.api_version, owner.kind)


def _replaces_a_slice(annotations: Mapping[str, str]) -> bool:
    """Whether the workload is an elastic job's replacement slice, whose admission starts nothing: the job runs on
    and the ungater releases its new pods (``dispatcher.core.start_of``; docs/elastic.md)."""
    return slices.is_elastic(annotations) and bool(annotations.get(slices.REPLACEMENT_FOR_ANNOTATION))


_UNVERIFIABLE: Final = "unverifiable"

At = tuple[int, int]
"""Where a decision stands in the log: ``(sequence, index)``, the index 0 for a decision of its own message
(and for every other event), else its 1-based place among the decisions its DecisionRecord carries (event
schema 17: ``DecisionRecord.decisions``, all at the record's sequence; ``DispatchEntry.decision_index``).
Ordered as the fold takes them: a record's finished releases (index 0) come before the decisions it carries."""


@dataclass(slots=True)
class _Pending:
    """One record being re-checked: its stored messages (head and outputs) as they are read,
    and the re-run's bytes once the fold reached its basis."""

    order: tuple[int, int]  # (basis, head): the report lists records in this order
    head_seq: int
    record: types.DecisionRecord
    stored: dict[int, bytes] = field(default_factory=dict)  # index -> stored bytes (0: the record)
    expected: list[bytes] | None = None  # the re-run: record then outputs
    refused: str = ""  # set when the record is refused before re-running (a cut no rule allows)
    ran: bool = False


class LogChecker:
    """Re-checks a log read once, in sequence order, keeping only what the checks still need.

    ``records`` are the log's DecisionRecords (:func:`find_records`, or a read of the head
    subjects only): a record comes after its basis, so its re-run is due before the fold
    passes the basis, and its stored outputs after it. Held in memory: the fold state;
    per record, its stored messages until its re-run is compared (a batch, at most
    ``output_count`` + 1 messages); the coverage of the records whose outputs are still
    to come; and for the completeness checks the subject of every recorded decision (to
    match dispatch results) and the dispatchable decisions not answered yet. Feed every
    message with :meth:`feed`, then :meth:`finish`.
    """

    def __init__(
        self,
        records: Sequence[tuple[int, types.DecisionRecord]],
        deciders: Mapping[str, Decider],
        *,
        state: ClusterState | None = None,
        progress: Progress | None = None,
        rerun: bool = True,
        completeness: bool = True,
        on_position: Callable[[int, ClusterState], None] | None = None,
        fold: bool | None = None,
        start: int = 0,
    ) -> None:
        # ``start``: the position ``state`` was folded through (a snapshot's), the log being fed from
        # ``start`` + 1: records whose basis is before it cannot be re-run on this fold; they are
        # kept in :attr:`before_start` (for their outputs' coverage only) for the caller to judge.
        self.before_start = [(seq, record) for seq, record in records if record.basis_seq < start]
        if start:
            rerun_records = [(seq, record) for seq, record in records if record.basis_seq >= start]
        else:
            rerun_records = list(records)
        self.start = start
        self.deciders = deciders
        self.fold = rerun if fold is None else fold  # the fork path folds without re-running here
        self.state = state if state is not None else ClusterState()
        self.progress = progress
        self.rerun, self.completeness, self.on_position = rerun, completeness, on_position
        self.report = ReplayReport(decisions=len(rerun_records), partition_records=count_by_partition(rerun_records))
        self._by_head = (
            [_Pending(order=(record.basis_seq, seq), head_seq=seq, record=record) for seq, record in rerun_records]
            if rerun
            else []
        )
        self._by_basis = sorted(self._by_head, key=lambda p: p.order)
        self._heads = {seq for seq, _ in records}
        self._covers = sorted(
            (seq, seq + record.output_count, record.decision_id) for seq, record in records if record.output_count > 0
        )
        self._next_cover = 0
        self._next_basis = 0
        self._next_head = 0
        self._open: list[_Pending] = []  # records whose stored messages are still being read or compared
        self._cover: list[tuple[int, int, str]] = []  # (head seq, last output seq, decision id), log order
        self._expected_seq = start + 1
        self._outputs: dict[At, str] = {}  # where -> the per-workload subject of every recorded decision
        self._carried_of: dict[tuple[int, str], int] = {}  # (record seq, workload key) -> its last carried index
        self._waiting: dict[str, list[At]] = {}  # subject -> dispatchable decisions not answered yet
        self._dispatchable: dict[At, types.WorkloadRef] = {}  # where -> the workload of a dispatchable decision
        self._reserved_at: dict[str, At] = {}  # workload key -> where it last took quota
        self._ended_at: dict[str, At] = {}  # workload key -> where it last finished, was deleted or released
        # workloads whose latest observation has no job the dispatcher writes (a Workload created on its own), those
        # whose admission starts nothing (an elastic job's replacement slice), and the dispatchable decisions made
        # meanwhile: the dispatcher answers those with no result
        self._jobless: set[str] = set()
        self._start_nothing: set[str] = set()
        for key, wl in self.state.workloads.items():
            self._observed(key, wl.workload.owner, wl.workload.metadata.annotations)
        self._unwritten_at: set[At] = set()
        self._mismatches: list[tuple[tuple[int, int], Mismatch]] = []
        self._unverifiable: list[tuple[tuple[int, int], Unverifiable]] = []
        self._late: list[Unverifiable] = []
        self._subjects: dict[str, str] = {}  # interned subjects
        self._done = 0
        # the services' own rule (projections/batches.py): a batch its fold would not take is an orphan
        self._verifier = batches.BatchVerifier()
        if self.fold:  # the fold's partition rule, on the fold this checker keeps (issue 18)
            self._verifier.judge = self.state.batches.judge
        self._verifier_orphans: list[Orphan] = []
        self._wrong_role: set[int] = set()  # seqs the verifier orphaned for their role
        self._held_types: dict[int, str] = {}  # seq -> Kq-Type of the decision messages the verifier holds

    # --- reading ------------------------------------------------------------------------------

    def feed(self, message: LogMessage) -> None:
        """Check and fold the next message of the log (sequences increasing)."""
        seq = message.seq
        if seq > self._expected_seq:
            self.report.gaps.append((self._expected_seq, seq - 1))
        self._expected_seq = max(self._expected_seq, seq + 1)
        if self.rerun:
            by_basis = self._by_basis
            while self._next_basis < len(by_basis) and by_basis[self._next_basis].record.basis_seq < seq:
                self._run(by_basis[self._next_basis])
                self._next_basis += 1
            by_head = self._by_head
            while self._next_head < len(by_head) and by_head[self._next_head].head_seq <= seq:
                self._open.append(by_head[self._next_head])
                self._next_head += 1
            if self._open:
                self._store(message)
        subject = message.subject
        kind = message.headers.get("Kq-Type")
        event: types.Event | None = None
        on_decision_subject = subject.startswith(_DECISIONS_PREFIX)
        if (
            self.fold
            or kind in (None, "DecisionRecord")
            or subject.startswith(_DISPATCH_PREFIX)
            or (self.completeness and (on_decision_subject or kind in _LIFECYCLE_FACTS))
        ):
            try:
                event = codec.decode(message.data)
            except codec.DecodeError:
                event = None
        if self.completeness:
            covers = self._covers
            while self._next_cover < len(covers) and covers[self._next_cover][0] <= seq:
                self._cover.append(covers[self._next_cover])
                self._next_cover += 1
            if event is None and kind == "WorkloadObserved":
                self._observed_message(message)
            else:
                self._lifecycle(seq, event)
            if on_decision_subject:
                self._decision_subject(message, event)
                self._verify(message, event)
            elif subject.startswith(_DISPATCH_PREFIX):
                self._dispatch_result(message, event)
            if isinstance(event, types.DecisionRecord) and seq not in self._heads:
                if kind in (None, "DecisionRecord"):
                    self._late_record(seq, event)
        if self.fold:
            if event is None:
                fold_message(self.state, message)  # logs it, once
            else:
                fold_decoded(self.state, message, event)
            if self.on_position is not None:
                self.on_position(seq, self.state)
        self.report.messages += 1
        self.report.last_seq = max(self.report.last_seq, seq)
        self._done += 1
        if self.progress is not None and self._done % 256 == 0:
            self.progress(256)

    @property
    def settled(self) -> bool:
        """Every record re-run and compared: reading further changes nothing of the re-checks."""
        return self._next_basis == len(self._by_basis) and self._next_head == len(self._by_head) and not self._open

    def finish(self, *, last_seq: int = 0) -> ReplayReport:
        """Run the records whose basis the log never passed, compare what is left, and report."""
        report = self.report
        while self._next_basis < len(self._by_basis):
            self._run(self._by_basis[self._next_basis])
            self._next_basis += 1
        for pending in self._open:
            self._compare(pending)
        self._open = []
        report.last_seq = max(last_seq, report.last_seq)
        if self._expected_seq <= report.last_seq:
            report.gaps.append((self._expected_seq, report.last_seq))
        if self.completeness:
            self._verified(self._verifier.expire(report.last_seq))
            self._merge_verifier_orphans()
        # a record on another role's head, or with outputs its role does not make, is no decision of
        # that role (an orphan, reported as one): re-running the role's decider on it proves nothing
        orphaned = self._wrong_role
        report.mismatches = [
            m for _, m in sorted(self._mismatches, key=lambda pair: pair[0]) if m.head_seq not in orphaned
        ]
        report.unverifiable = [
            u for _, u in sorted(self._unverifiable, key=lambda pair: pair[0]) if u.head_seq not in orphaned
        ] + self._late
        waiting = sorted(at for ats in self._waiting.values() for at in ats)
        report.undispatched = [at[0] for at in waiting if not self._done_with(at)]
        report.nothing_to_write = [at[0] for at in waiting if self._done_with(at)]
        if self.progress is not None and self._done % 256:
            self.progress(self._done % 256)
        return report

    # --- completeness -------------------------------------------------------------------------

    def _done_with(self, at: At) -> bool:
        """Whether the dispatcher writes nothing for the unanswered decision at ``at``: by the end of
        the log its workload finished, was deleted or gave its quota back after it last took some (the
        first checks of ``dispatcher.core._plan_start`` and ``_plan_stop``: no job to start or stop for
        a workload gone or holding no quota; Kueue jobframework/reconciler.go returns early for a
        finished workload). Judged from the log's events, not a fold: every pass (one pass, forked,
        from checkpoints) judges alike."""
        ref = self._dispatchable.get(at)
        if ref is None:
            return False
        if at in self._unwritten_at:
            return True  # dispatcher.service: a decision whose plan is no action records no result
        return self._ended_at.get(ref.key, (0, 0)) > self._reserved_at.get(ref.key, (0, 0))

    def _lifecycle(self, seq: int, event: types.Event | None) -> None:
        """Keep when each workload last took quota and last finished, was deleted or released it (a
        release or decision carried in a DecisionRecord included, at its :data:`At`)."""
        match event:
            case types.QuotaReserved() | types.WorkloadAdmitted():
                self._reserved_at[event.workload.key] = (seq, 0)
            case types.WorkloadFinished() | types.QuotaReleased():
                self._ended_at[event.workload.key] = (seq, 0)
            case types.DecisionRecord() if event.released or event.decisions:
                # a finished workload's release rides in its cycle's record (admitter logic 15): it ends
                # the workload's hold as the QuotaReleased message did before
                for release in event.released or ():
                    self._ended_at[release.workload.key] = (seq, 0)
                # the decisions it carries (schema 17), after its releases, as their messages followed it
                for index, decision in enumerate(event.carried, start=1):
                    if isinstance(decision, types.QuotaReserved | types.WorkloadAdmitted):
                        self._reserved_at[decision.workload.key] = (seq, index)
                    elif isinstance(decision, types.QuotaReleased):
                        self._ended_at[decision.workload.key] = (seq, index)
            case types.ObjectDeleted(kind="Workload"):
                self._ended_at[f"{event.namespace}/{event.name}"] = (seq, 0)
            case types.FactBatch(facts=facts):  # schema 16: its WorkloadFinished facts as if alone
                for fact in facts:
                    if isinstance(fact, types.WorkloadFinished):
                        self._ended_at[fact.workload.key] = (seq, 0)
                    else:
                        self._observed(fact.workload.key, fact.workload.owner, fact.workload.metadata.annotations)
            case types.WorkloadObserved(workload=workload):
                self._observed(workload.key, workload.owner, workload.metadata.annotations)
            case _:
                pass

    def _observed(self, key: str, owner: models.OwnerReference | None, annotations: Mapping[str, str]) -> None:
        """Workload ``key`` was observed with ``owner`` and ``annotations``: keep whether it has a job, and whether
        its admission starts one."""
        for keys, holds in (
            (self._jobless, _has_no_job(owner, annotations)),
            (self._start_nothing, _replaces_a_slice(annotations)),
        ):
            if holds:
                keys.add(key)
            else:
                keys.discard(key)

    def _answered_by_nothing(self, at: At, decision: types.WorkloadAdmitted | types.EvictionRequested) -> None:
        """Mark the dispatchable ``decision`` at ``at`` when the dispatcher has nothing to write for it."""
        key = decision.workload.key
        if key in self._jobless or (isinstance(decision, types.WorkloadAdmitted) and key in self._start_nothing):
            self._unwritten_at.add(at)

    def _observed_message(self, message: LogMessage) -> None:
        """A WorkloadObserved the completeness check did not decode (no fold): read only whose job it is."""
        try:
            observed = _observed_owner.decode(message.data).workload
        except msgspec.DecodeError:
            return
        key = f"{observed.metadata.namespace}/{observed.metadata.name}"
        self._observed(key, observed.owner, observed.metadata.annotations)

    def _decision_subject(self, message: LogMessage, event: types.Event | None = None) -> None:
        """A message on a decision subject counts only as output i of the record just before it,
        with the Msg-Id the record derives (ARCHITECTURE.md §3); a record's carried decisions (schema 17)
        are recorded decisions at its sequence (:meth:`_carried`)."""
        seq = message.seq
        if seq in self._heads:
            if isinstance(event, types.DecisionRecord) and event.decisions:
                self._carried(seq, event)
            return
        if _is_head_subject(message.subject):
            self.report.orphans.append(_orphan(message, "a message on a head subject that is not a DecisionRecord"))
            return
        cover = self._cover
        while cover and cover[0][1] < seq:  # records end in log order mostly; drop the finished ones
            cover.pop(0)
        if len(cover) > 64:  # a forged output count keeps the first one long: drop the others behind it
            cover[:] = [entry for entry in cover if entry[1] >= seq]
        msg_id = None
        for head, last, decision_id in reversed(cover):
            if head < seq <= last:
                msg_id = f"{decision_id}:{seq - head}"
                break
        if msg_id is None:
            self.report.orphans.append(_orphan(message, "no DecisionRecord covers it"))
        elif message.headers.get("Nats-Msg-Id", msg_id) != msg_id:
            self.report.orphans.append(_orphan(message, f"its Msg-Id is not the record's {msg_id!r}"))
        else:
            subject = self._subjects.setdefault(message.subject, message.subject)
            self._outputs[(seq, 0)] = subject
            if message.headers.get("Kq-Type") in _DISPATCHED:
                self._waiting.setdefault(subject, []).append((seq, 0))
                if isinstance(event, types.WorkloadAdmitted | types.EvictionRequested):
                    self._dispatchable[(seq, 0)] = event.workload
                    self._answered_by_nothing((seq, 0), event)

    def _carried(self, seq: int, record: types.DecisionRecord) -> None:
        """Record the decisions ``record`` (at ``seq``) carries (event schema 17) as its output messages
        were recorded: each at ``(seq, index)``, on the per-workload subject its message would have had
        (``subjects.workload_decision_subject``: a workload's decisions supersede each other there
        whichever way they were written), the dispatchable ones waiting for a dispatch result."""
        for index, decision in enumerate(record.carried, start=1):
            ref = decision.workload
            subject = subjects.workload_decision_subject(ref, record.partition)
            subject = self._subjects.setdefault(subject, subject)
            self._outputs[(seq, index)] = subject
            self._carried_of[(seq, ref.key)] = index
            if isinstance(decision, types.WorkloadAdmitted | types.EvictionRequested):
                self._waiting.setdefault(subject, []).append((seq, index))
                self._dispatchable[(seq, index)] = ref
                self._answered_by_nothing((seq, index), decision)

    def _verify(self, message: LogMessage, event: types.Event | None) -> None:
        """Judge a message on a decision subject by the services' batch rule: what their fold
        leaves out (a record on another role's head, an output of a kind its role does not make,
        a broken or incomplete batch) is an orphan here too."""
        self._held_types[message.seq] = message.headers.get("Kq-Type", "?")
        self._verified(
            self._verifier.offer(
                seq=message.seq,
                subject=message.subject,
                msg_id_header=message.headers.get("Nats-Msg-Id", ""),
                data=message.data,
                event=event,
            )
        )

    def _verified(self, verdict: batches.Verdict) -> None:
        for orphan in verdict.orphans:
            if orphan.reason in (batches.WRONG_ROLE, batches.WRONG_PARTITION):
                self._wrong_role.add(orphan.seq)
            kind = self._held_types.get(orphan.seq, "?")
            self._verifier_orphans.append(
                Orphan(seq=orphan.seq, subject=orphan.subject, type=kind, why=f"{orphan.reason}: {orphan.detail}")
            )
        if not self._verifier.holding:
            self._held_types.clear()

    def _merge_verifier_orphans(self) -> None:
        """Add the verifier's orphans the coverage check did not report, in sequence order, and drop
        them from the decisions waiting for a dispatch result (no dispatcher executes an orphan)."""
        report = self.report
        known = {orphan.seq for orphan in report.orphans}
        added = [orphan for orphan in self._verifier_orphans if orphan.seq not in known]
        if not added:
            return
        report.orphans = sorted([*report.orphans, *added], key=lambda orphan: orphan.seq)
        orphaned = {orphan.seq for orphan in added}  # a record orphaned: every decision it carries
        for subject, ats in list(self._waiting.items()):
            left = [at for at in ats if at[0] not in orphaned]
            if left:
                self._waiting[subject] = left
            else:
                del self._waiting[subject]

    def _dispatch_result(self, message: LogMessage, event: types.Event | None) -> None:
        """A dispatch result names a recorded decision before it (a DispatchBatchApplied: each of its
        entries does, a carried decision by its record's sequence and ``decision_index``). The
        dispatcher writes a workload's
        latest state, so a decision a later answered one of the same workload (its subject)
        superseded, e.g. an admission the eviction of a preemption overtook before the Job
        started, needs no answer of its own."""
        if event is None:
            self.report.stray_dispatch.append(_orphan(message, "undecodable"))
            return
        if isinstance(event, types.DispatchBatchApplied):  # each entry as the result of its decision
            if not event.entries:
                self.report.stray_dispatch.append(_orphan(message, "not a dispatch result"))
            for entry in event.entries:
                self._answer(message, (entry.decision_seq, entry.decision_index), entry.workload)
            return
        if not isinstance(event, types.DispatchApplied | types.DispatchFailed):
            self.report.stray_dispatch.append(_orphan(message, "not a dispatch result"))
            return
        self._answer(message, (event.decision_seq, 0), event.workload)

    def _answer(self, message: LogMessage, at: At, workload: types.WorkloadRef) -> None:
        """The dispatch result in ``message`` answers the decision at ``at`` (of ``workload``) and the
        earlier ones of the same workload it supersedes. A DispatchApplied or DispatchFailed of a
        carried decision names only its record's sequence (its index is in its Msg-Id alone): it
        answers the last decision of its workload that record carries."""
        seq, index = at
        subject = self._outputs.get(at)
        if subject is None and index == 0:
            carried = self._carried_of.get((seq, workload.key))
            if carried is not None:
                at = (seq, carried)
                subject = self._outputs.get(at)
        if subject is None and seq <= self.start:
            return  # a decision before the snapshot this check started from
        if subject is None:
            named = f"decision {index} of #{seq}" if index else f"#{seq}"
            self.report.stray_dispatch.append(_orphan(message, f"names {named}, which is not a recorded decision"))
            return
        waiting = self._waiting.get(subject)
        if waiting:
            left = [one for one in waiting if one > at]
            for one in waiting:
                if one <= at:
                    self._dispatchable.pop(one, None)
            if left:
                self._waiting[subject] = left
            else:
                del self._waiting[subject]

    def _late_record(self, seq: int, record: types.DecisionRecord) -> None:
        """A DecisionRecord the first pass did not read (it is on no head subject): its basis is
        folded already, so it is not re-checked (and no service folds it: an orphan)."""
        self._late.append(
            Unverifiable(
                decision_id=record.decision_id,
                head_seq=seq,
                role=record.role,
                logic_version=record.logic_version,
                kueue_es_version=record.kueue_es_version if isinstance(record.kueue_es_version, str) else "",
                why="a DecisionRecord on no head subject",
            )
        )

    # --- re-running ---------------------------------------------------------------------------

    def _store(self, message: LogMessage) -> None:
        """Keep the stored bytes the open records compare, and compare those now complete."""
        seq = message.seq
        still: list[_Pending] = []
        for pending in self._open:
            index = seq - pending.head_seq
            if pending.refused != _UNVERIFIABLE and 0 <= index <= pending.record.output_count:
                pending.stored[index] = message.data
            if index >= pending.record.output_count and pending.ran:
                self._compare(pending)
            else:
                still.append(pending)
        self._open = still

    def _run(self, pending: _Pending) -> None:
        """Re-run the decider of ``pending`` on the state at its basis (the state now)."""
        pending.ran = True
        record = pending.record
        version = record.kueue_es_version if isinstance(record.kueue_es_version, str) else ""
        decider = self.deciders.get(record.role)
        if decider is not None and decider.logic_version != record.logic_version:
            decider = registry.EARLIER.get((record.role, record.logic_version), decider)
        why = ""
        if record.role == SEED_ROLE:
            why = "a scenario runner's seed batch, not a service's decision"
        elif decider is None:
            why = f"no decider of role {record.role!r} is installed"
        elif decider.logic_version != record.logic_version:
            why = f"logic version {record.logic_version}; this kueue-es has {decider.logic_version}"
        if why or decider is None:
            self._unverifiable.append(
                (
                    pending.order,
                    Unverifiable(
                        decision_id=record.decision_id,
                        head_seq=pending.head_seq,
                        role=record.role,
                        logic_version=record.logic_version,
                        kueue_es_version=version,
                        why=why,
                    ),
                )
            )
            pending.refused = _UNVERIFIABLE
            pending.stored.clear()
            return
        cut = record.max_outputs
        if cut is not msgspec.UNSET and cut not in registry.CUTS:
            pending.refused = f"it claims an output cut of {cut}; the services cut at {sorted(registry.CUTS)} only"
            return
        chained = self.state.heads.get(record.partition, 0)
        if self.fold and record.expected_head_seq != chained:
            # each partition's records form a chain (issue 18): a record names the last record of
            # its partition that its decider had folded, which is the fold's at its basis
            pending.refused = (
                f"its expected_head_seq {record.expected_head_seq} is not the last record of partition"
                f" {record.partition} at its basis ({chained})"
            )
            return
        pending.expected = rerun_batch(decider, self.state, record)

    def _compare(self, pending: _Pending) -> None:
        record, stored, expected = pending.record, pending.stored, pending.expected or []
        pending.stored, pending.expected = {}, None  # compared: nothing of it is held any longer
        if pending.refused == _UNVERIFIABLE:
            return
        if pending.refused:
            self._mismatches.append(
                (
                    pending.order,
                    Mismatch(
                        decision_id=record.decision_id,
                        head_seq=pending.head_seq,
                        basis_seq=record.basis_seq,
                        index=0,
                        stored=stored.get(0, b"").decode(errors="replace"),
                        replayed="",
                        reason=pending.refused,
                    ),
                )
            )
            return
        for index in range(max(len(expected), record.output_count + 1)):
            replayed = expected[index] if index < len(expected) else b""
            stored_data = stored.get(index, b"")
            if replayed != stored_data:
                self._mismatches.append(
                    (
                        pending.order,
                        Mismatch(
                            decision_id=record.decision_id,
                            head_seq=pending.head_seq,
                            basis_seq=record.basis_seq,
                            index=index,
                            stored=stored_data.decode(errors="replace"),
                            replayed=replayed.decode(errors="replace"),
                        ),
                    )
                )
                return
        self.report.matched += 1
        matched = self.report.partition_matched
        matched[record.partition] = matched.get(record.partition, 0) + 1


def count_by_partition(records: Iterable[tuple[int, types.DecisionRecord]]) -> dict[str, int]:
    """How many of ``records`` each partition has (``DecisionRecord.partition``)."""
    counts: dict[str, int] = {}
    for _, record in records:
        counts[record.partition] = counts.get(record.partition, 0) + 1
    return counts


def rerun_batch(decider: Decider, state: ClusterState, record: types.DecisionRecord) -> list[bytes]:
    """The bytes ``decider`` writes for ``record`` on ``state`` (the fold at its basis): the
    record, then its outputs, with the record's own ``now_ms``, cut and versions (logic, kueue-es, schema)."""
    outputs = list(decider.decide(state, now_ms=record.now_ms, partition=record.partition))
    head, rest = build_batch(
        decider,
        outputs=outputs,
        basis_seq=record.basis_seq,
        head_seq=record.expected_head_seq,
        now_ms=record.now_ms,
        partition=record.partition,
        answers=record.answers,
        max_outputs=record.max_outputs,
        kueue_es_version=record.kueue_es_version,
        schema_version=record.schema_version,
    )
    return [head.data, *(m.data for m in rest)]


def _orphan(message: LogMessage, why: str) -> Orphan:
    return Orphan(seq=message.seq, subject=message.subject, type=message.headers.get("Kq-Type", "?"), why=why)


# --- reading the log from a bus ----------------------------------------------------------------


async def stream_log(
    bus: Bus, *, last: int, filters: Sequence[str] = ("kq.>",), start_seq: int = 1, idle: float = 10.0
) -> AsyncGenerator[LogMessage, None]:
    """The messages of the log matching ``filters`` from ``start_seq`` up to ``last``, in order.

    Reading stops at ``last``, or when the server says nothing more is pending (the
    messages at the end are gone: the checker reports the gap), or after ``idle``
    seconds without a message (every message is gone: the reader would otherwise wait
    for ever).
    """
    if not last or start_seq > last:
        return
    reader = bus.read(subjects=filters, start_seq=start_seq)
    try:
        while True:
            try:
                async with asyncio.timeout(idle):
                    message = await anext(reader)
            except (TimeoutError, StopAsyncIteration):
                break
            yield message
            if message.seq >= last or message.pending == 0:
                break
    finally:
        await reader.aclose()


async def read_log(bus: Bus, *, progress: Progress | None = None, idle: float = 10.0) -> tuple[list[LogMessage], int]:
    """Every message of the log up to its last sequence now, and that sequence (in memory: for
    tests and small logs; :func:`replay_bus` streams)."""
    last = await bus.last_seq()
    messages: list[LogMessage] = []
    async for message in stream_log(bus, last=last, idle=idle):
        messages.append(message)
        if progress is not None and len(messages) % 256 == 0:
            progress(256)
    if progress is not None and len(messages) % 256:
        progress(len(messages) % 256)
    return messages, last


async def bus_records(bus: Bus, *, last: int, idle: float = 10.0) -> list[tuple[int, types.DecisionRecord]]:
    """The first pass: the DecisionRecords on the head subjects, read alone (and those on the
    single head of the layout before per-role heads, to refuse them: OldLayoutError).

    A log with no record at all would keep a filtered reader waiting: when no head holds a
    message the reader gives up after a short idle.
    """
    filters = (HEADS, subjects.OLD_HEADS)
    quick = not any([await bus.last_subject_seq(head) for head in filters])
    found: list[tuple[int, types.DecisionRecord]] = []
    async for message in stream_log(bus, last=last, filters=filters, idle=1.0 if quick else idle):
        found.extend(find_records((message,)))
    return found


async def replay_bus(
    bus: Bus, deciders: Mapping[str, Decider], *, progress: Callable[[str, int], Progress] | None = None
) -> ReplayReport:
    """Re-check the log on ``bus`` (up to its last sequence now), streaming: one read of the head
    subjects for the records, one of everything to fold and compare.

    ``progress(phase, total)`` (optional) returns the callback for one phase
    ("reading records", then "re-checking").
    """
    last = await bus.last_seq()
    if progress is not None:
        progress("reading records", 0)
    records = await bus_records(bus, last=last)
    checker = LogChecker(records, deciders, progress=progress("re-checking", last) if progress else None)
    chunk: list[LogMessage] = []
    async for message in stream_log(bus, last=last):
        chunk.append(message)
        if len(chunk) >= READ_CHUNK:
            for held in chunk:
                checker.feed(held)
            chunk.clear()
    for held in chunk:
        checker.feed(held)
    return checker.finish(last_seq=last)


def direct_records(url: str) -> tuple[list[tuple[int, types.DecisionRecord]], int]:
    """The first pass through Direct Get (:mod:`kueue_es.events.bus.direct`): the DecisionRecords
    on the head subjects, and the stream's last sequence. Raises DirectUnavailable when the
    server does not answer Direct Get (read through :func:`bus_records` then), OldLayoutError for
    a record on the single head of the layout before per-role heads."""
    with DirectReader(url) as reader:
        last = reader.last_seq()
        found = find_records(reader.messages(last=last, subject=subjects.OLD_HEADS))  # raises on a record there
        found.extend(find_records(reader.messages(last=last, subject=HEADS)))
        return sorted(found, key=lambda pair: pair[0]), last


def replay_url(
    url: str, deciders: Mapping[str, Decider], *, progress: Callable[[str, int], Progress] | None = None
) -> ReplayReport:
    """:func:`replay_bus` through Direct Get batches on one socket (about 4 x less CPU a message
    than nats-py's ordered consumer, docs/benchmarks.md). Raises DirectUnavailable before
    reading any message when the server does not answer Direct Get."""
    if progress is not None:
        progress("reading records", 0)
    records, last = direct_records(url)
    checker = LogChecker(records, deciders, progress=progress("re-checking", last) if progress else None)
    with DirectReader(url) as reader:
        for message in reader.messages(last=last):
            checker.feed(message)
    return checker.finish(last_seq=last)


READ_CHUNK = 4096
"""Messages read from the bus before they are checked: reading in bursts keeps the consumer's
flow going (the client answers the server between messages only while it reads), and holds
a few MB at most."""


def file_records(path: Path) -> list[tuple[int, types.DecisionRecord]]:
    """The first pass over a log file: its DecisionRecords (a line whose Kq-Type header names
    another type is not decoded)."""
    found: list[tuple[int, types.DecisionRecord]] = []
    with path.open("rb") as src:
        for line in src:
            if _OTHER_TYPE in line and _RECORD_TYPE not in line:
                continue
            if line.strip():
                found.extend(find_records((logfile.decode_line(line),)))
    return found


_OTHER_TYPE = b'"Kq-Type":"'
_RECORD_TYPE = b'"Kq-Type":"DecisionRecord"'


def replay_file(
    path: Path, deciders: Mapping[str, Decider], *, progress: Callable[[str, int], Progress] | None = None
) -> ReplayReport:
    """Re-check a log file (:mod:`kueue_es.logfile`), streaming: one pass for the records, one to
    fold and compare."""
    records = file_records(path)
    checker = LogChecker(records, deciders, progress=progress("re-checking", 0) if progress else None)
    for message in logfile.read_lines(path):
        checker.feed(message)
    return checker.finish()


def replay_file_and_print(path: Path, *, max_diffs: int = DEFAULT_MAX_DIFFS, progress: bool = False) -> int:
    """``kueue-es replay --file``: re-check a log file, print the report, return its exit code."""
    from rich.console import Console

    with progress_bars(progress) as bars:
        report = replay_file(path, registry.BY_ROLE, progress=bars)
    print_report(Console(soft_wrap=True), report, max_diffs=max_diffs)
    return report.exit_code


def print_report(console: Any, report: ReplayReport, *, max_diffs: int = DEFAULT_MAX_DIFFS) -> None:
    """Print :func:`summary` on a rich console."""
    for line, style in summary(report, max_diffs=max_diffs):
        console.print(line, style=style or None, markup=False, highlight=False)


def field_diff(stored: str, replayed: str) -> list[FieldDiff]:
    """The differing paths of two JSON documents (``a.b[0].c``), or the whole values when either is not JSON."""
    try:
        left = json.loads(stored) if stored else MISSING
        right = json.loads(replayed) if replayed else MISSING
    except ValueError:
        return [FieldDiff(path="", stored=stored or MISSING, replayed=replayed or MISSING)]
    out: list[FieldDiff] = []
    _diff(left, right, "", out)
    return out


def _diff(left: object, right: object, path: str, out: list[FieldDiff]) -> None:
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right)):
            sub = f"{path}.{key}" if path else str(key)
            _diff(left.get(key, MISSING), right.get(key, MISSING), sub, out)
    elif isinstance(left, list) and isinstance(right, list):
        for i in range(max(len(left), len(right))):
            _diff(left[i] if i < len(left) else MISSING, right[i] if i < len(right) else MISSING, f"{path}[{i}]", out)
    elif left != right or type(left) is not type(right):
        out.append(FieldDiff(path=path, stored=left, replayed=right))


# --- the report as text ----------------------------------------------------------------------


def summary(report: ReplayReport, *, max_diffs: int = DEFAULT_MAX_DIFFS) -> list[tuple[str, str]]:
    """The report as lines of plain text, each with a rich style ("" for none)."""
    span = f"log #{report.start_seq + 1 if report.start_seq else 1}..#{report.last_seq}"
    if report.start_seq and report.last_seq <= report.start_seq:
        span = "nothing after the snapshot"
    lines: list[tuple[str, str]] = [(report.start_note, "")] if report.start_note else []
    lines.append(
        (
            f"replay: {report.messages} events folded "
            f"({span if report.last_seq else 'empty log'}), {_count(report.decisions, 'decision')}: "
            f"{report.matched} matched, {len(report.mismatches)} differed, {report.skipped} not re-checked",
            "",
        )
    )
    lines.extend(_partition_lines(report))
    if report.covered:
        lines.append(
            (
                f"{_count(report.covered, 'decision')} with a basis before the snapshot {_was(report.covered)} verified by it",
                "",
            )
        )
    if report.outside:
        lines.append(
            (f"{_count(report.outside, 'decision')} outside --from/--to {_was(report.outside)} not re-run", "")
        )
    for first, last in report.gaps:
        span = f"#{first}" if first == last else f"#{first}..#{last}"
        lines.append((f"gap: {span} missing from the log (deleted or purged)", "bold red"))
    for orphan in report.orphans:
        lines.append((f"orphan: #{orphan.seq} {orphan.type} on {orphan.subject}: {orphan.why}", "bold red"))
    for stray in report.stray_dispatch:
        lines.append(
            (f"dispatch result of no decision: #{stray.seq} {stray.type} on {stray.subject}: {stray.why}", "bold red")
        )
    lines.extend(_unverifiable_lines(report))
    for number, mismatch in enumerate(report.mismatches[:max_diffs], start=1):
        where = "the record" if mismatch.index == 0 else f"event {mismatch.index}"
        lines.append(
            (
                f"difference {number}: decision {mismatch.decision_id} at #{mismatch.seq} ({where}; "
                f"head #{mismatch.head_seq}, basis #{mismatch.basis_seq})"
                + (f": {mismatch.reason}" if mismatch.reason else ""),
                "bold red",
            )
        )
        if mismatch.reason:
            continue
        for diff in mismatch.fields():
            lines.append((f"    {diff.path or '(event)'}: {_show(diff.stored)} -> {_show(diff.replayed)}", ""))
    if len(report.mismatches) > max_diffs:
        lines.append((f"... and {len(report.mismatches) - max_diffs} more differences (--max-diffs N shows more)", ""))
    if report.undispatched:
        seqs = list(dict.fromkeys(report.undispatched))  # a record's carried decisions share its sequence
        shown = ", ".join(f"#{seq}" for seq in seqs[:10])
        more = ", ..." if len(seqs) > 10 else ""
        lines.append(
            (
                f"warning: {_count(len(report.undispatched), 'decision')} {_verb(len(report.undispatched), 'has', 'have')} no dispatch result ({shown}{more}): "
                "the dispatcher may still be at work",
                "yellow",
            )
        )
    if report.nothing_to_write:
        seqs = list(dict.fromkeys(report.nothing_to_write))
        shown = ", ".join(f"#{seq}" for seq in seqs[:10])
        more = ", ..." if len(seqs) > 10 else ""
        lines.append(
            (
                f"{_count(len(report.nothing_to_write), 'decision')} {_verb(len(report.nothing_to_write), 'needs', 'need')} no dispatch result ({shown}{more}): their workload "
                "has no job, or finished, was deleted or gave its quota back, so the dispatcher writes nothing "
                "for them",
                "",
            )
        )
    code = report.exit_code
    if code == EXIT_OK:
        lines.append(("every decision matched; the log is complete", "bold green"))
    elif code == EXIT_DIFFERENCE:
        lines.append(
            (
                f"{_count(len(report.mismatches), 'decision')} {_verb(len(report.mismatches), 'differs', 'differ')} (exit 1)",
                "bold red",
            )
        )
    elif code == EXIT_INCOMPLETE:
        lines.append(("the log is incomplete: gaps, orphans or dispatch results of no decision (exit 4)", "bold red"))
    else:
        lines.append(
            (
                f"every re-checked decision matched, but {_count(report.skipped, 'record')} could not be re-checked (exit 3)",
                "bold yellow",
            )
        )
    return lines


MAX_PARTITION_LINES = 20


def _count(number: int, noun: str) -> str:
    """``1 decision``, ``2 decisions``: a count and its noun, singular for one."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _verb(number: int, singular: str, plural: str) -> str:
    """The verb that agrees with ``number`` things."""
    return singular if number == 1 else plural


def _was(number: int) -> str:
    return _verb(number, "was", "were")


def _partition_lines(report: ReplayReport) -> list[tuple[str, str]]:
    """One line per partition (docs/design.md Partitions): its records re-checked and how many matched
    (each partition's chain is checked on its own); the first :data:`MAX_PARTITION_LINES` by id."""
    records, matched = report.partition_records, report.partition_matched
    lines = []
    for partition in sorted(records)[:MAX_PARTITION_LINES]:
        count, good = records[partition], matched.get(partition, 0)
        style = "" if good == count else "yellow"
        lines.append((f"  partition {partition}: {_count(count, 'record')}, {good} matched", style))
    if len(records) > MAX_PARTITION_LINES:
        lines.append((f"  ... and {len(records) - MAX_PARTITION_LINES} more partitions", ""))
    return lines


def _unverifiable_lines(report: ReplayReport) -> list[tuple[str, str]]:
    seeds = report.seeds
    lines: list[tuple[str, str]] = []
    if seeds:
        lines.append(
            (
                f"not re-checked: {len(seeds)} seed batches (the scenario runner's set-up, no service's decision; "
                f"first #{seeds[0].head_seq})",
                "yellow",
            )
        )
    groups: dict[tuple[str, int, str, str], list[Unverifiable]] = {}
    for item in report.unverifiable:
        if item.role != SEED_ROLE:
            groups.setdefault((item.role, item.logic_version, item.kueue_es_version, item.why), []).append(item)
    for (role, logic, version, why), items in groups.items():
        made = (
            f"made by kueue-es {version}: pip install kueue-es=={version} and replay with it"
            if version
            else "made before records carried the kueue-es version"
        )
        lines.append(
            (
                f"not re-checked: {len(items)} records of role {role!r}, logic version {logic} ({why}); {made}; "
                f"first #{items[0].head_seq}",
                "yellow",
            )
        )
    return lines


def _show(value: object) -> str:
    if value == MISSING:
        return MISSING
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 200 else text[:197] + "..."


# --- progress on stderr ----------------------------------------------------------------------


@contextlib.contextmanager
def progress_bars(enabled: bool) -> Iterator[Callable[[str, int], Progress] | None]:
    """A rich progress bar on stderr per phase (events/s, ETA), or None when not ``enabled``."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, ProgressColumn, Task, TextColumn, TimeRemainingColumn
    from rich.progress import Progress as Bars
    from rich.text import Text

    class EventsPerSecond(ProgressColumn):
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} events/s" if speed else "- events/s")

    bars = Bars(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        EventsPerSecond(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )

    def phase(name: str, total: int) -> Progress:
        task = bars.add_task(name, total=total or None)

        def advance(count: int) -> None:
            bars.advance(task, count)

        return advance

    with bars:
        yield phase
