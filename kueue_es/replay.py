"""``kueue-es replay``: re-run every recorded decision at its basis and compare bytes.

The log is the audit trail. For each DecisionRecord, replay rebuilds the state the
decider saw (the fold of the log up to ``basis_seq``), runs the same decider with
the recorded ``now_ms`` and output cut, encodes the outputs as production does and
compares them with the stored messages that follow the record, and with the
record itself (its digest, cut and versions; research/event-sourcing.md §5.10).

It also checks that the log is complete: no sequence missing between 1 and the
last one (a deleted or purged message), no message on a decision subject that no
DecisionRecord covers (an orphan), no dispatch result naming a message that is not
a recorded decision. A decision no dispatch result answers is only a warning: the
dispatcher may still be at work, or had nothing to write.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import msgspec

from kueue_es import deciders as registry
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import Bus, LogMessage
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.runtime import Decider, build_batch, fold_message

EXIT_OK = 0
EXIT_DIFFERENCE = 1
EXIT_UNVERIFIABLE = 3
EXIT_INCOMPLETE = 4

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
    undispatched: list[int] = field(default_factory=list)  # decision seqs no dispatch result answered (warning)

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
    as messages are folded.
    """
    last = max(last_seq, messages[-1].seq if messages else 0)
    report = ReplayReport(messages=len(messages), last_seq=last)
    by_seq = {m.seq: m for m in messages}
    records = _records(messages)
    report.decisions = len(records)
    _check_complete(messages, records, last=last, report=report)
    state = ClusterState()
    pending = sorted(records, key=lambda pair: pair[1].basis_seq)
    next_record = 0
    done = 0
    for message in [*messages, None]:
        upto = message.seq - 1 if message is not None else float("inf")
        while next_record < len(pending) and pending[next_record][1].basis_seq <= upto:
            head_seq, record = pending[next_record]
            next_record += 1
            _check(state, head_seq, record, by_seq=by_seq, deciders=deciders, report=report)
        if message is not None:
            fold_message(state, message)
            done += 1
            if progress is not None and done % 256 == 0:
                progress(256)
    if progress is not None and done % 256:
        progress(done % 256)
    return report


async def read_log(bus: Bus, *, progress: Progress | None = None, idle: float = 10.0) -> tuple[list[LogMessage], int]:
    """Every message of the log up to its last sequence now, and that sequence.

    Reading stops at the last sequence, or when the server says nothing more is
    pending (the messages at the end are gone: :func:`check_log` reports the gap),
    or after ``idle`` seconds without a message (every message is gone: the reader
    would otherwise wait for ever).
    """
    last = await bus.last_seq()
    messages: list[LogMessage] = []
    if not last:
        return messages, last
    reader = bus.read(subjects=("kq.>",), start_seq=1)
    try:
        while True:
            try:
                async with asyncio.timeout(idle):
                    message = await anext(reader)
            except (TimeoutError, StopAsyncIteration):
                break
            messages.append(message)
            if progress is not None and len(messages) % 256 == 0:
                progress(256)
            if message.seq >= last or message.pending == 0:
                break
    finally:
        await reader.aclose()
    if progress is not None and len(messages) % 256:
        progress(len(messages) % 256)
    return messages, last


async def replay_bus(
    bus: Bus, deciders: Mapping[str, Decider], *, progress: Callable[[str, int], Progress] | None = None
) -> ReplayReport:
    """Read the whole log from ``bus`` (up to its last sequence now) and :func:`check_log` it.

    ``progress(phase, total)`` (optional) returns the callback for one phase
    ("reading", then "re-checking").
    """
    last = await bus.last_seq()
    messages, last = await read_log(bus, progress=progress("reading", last) if progress else None)
    return check_log(
        messages, deciders, last_seq=last, progress=progress("re-checking", len(messages)) if progress else None
    )


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


def _records(messages: Sequence[LogMessage]) -> list[tuple[int, types.DecisionRecord]]:
    found = []
    for message in messages:
        if message.headers.get("Kq-Type") not in (None, "DecisionRecord"):
            continue
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            continue
        if isinstance(event, types.DecisionRecord):
            found.append((message.seq, event))
    return found


_DECISIONS_PREFIX = subjects.DECISIONS.removesuffix(">")  # kq.dec.
_DISPATCH_PREFIX = subjects.DISPATCH.removesuffix(">")  # kq.disp.


def _is_decision_subject(subject: str) -> bool:
    return subject.startswith(_DECISIONS_PREFIX)


def _is_head_subject(subject: str) -> bool:
    tokens = subject.split(".")
    return len(tokens) == 4 and tokens[3] == "head"


def _check_complete(
    messages: Sequence[LogMessage],
    records: Sequence[tuple[int, types.DecisionRecord]],
    *,
    last: int,
    report: ReplayReport,
) -> None:
    """Gaps, orphans on decision subjects, dispatch results of no decision, decisions never dispatched."""
    expected = 1
    for message in messages:
        if message.seq > expected:
            report.gaps.append((expected, message.seq - 1))
        expected = max(expected, message.seq + 1)
    if expected <= last:
        report.gaps.append((expected, last))
    # A decision subject's message counts only as output i of the record just before it,
    # with the Msg-Id the record derives (ARCHITECTURE.md §3).
    covered: dict[int, str] = {}
    for head_seq, record in records:
        for i in range(1, record.output_count + 1):
            covered[head_seq + i] = f"{record.decision_id}:{i}"
    heads = {seq for seq, _ in records}
    outputs: dict[int, LogMessage] = {}
    for message in messages:
        if not _is_decision_subject(message.subject):
            continue
        if message.seq in heads:
            continue
        if _is_head_subject(message.subject):
            report.orphans.append(_orphan(message, "a message on a head subject that is not a DecisionRecord"))
            continue
        msg_id = covered.get(message.seq)
        if msg_id is None:
            report.orphans.append(_orphan(message, "no DecisionRecord covers it"))
        elif message.headers.get("Nats-Msg-Id", msg_id) != msg_id:
            report.orphans.append(_orphan(message, f"its Msg-Id is not the record's {msg_id!r}"))
        else:
            outputs[message.seq] = message
    answered: set[int] = set()
    for message in messages:
        if not message.subject.startswith(_DISPATCH_PREFIX):
            continue
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            report.stray_dispatch.append(_orphan(message, "undecodable"))
            continue
        if not isinstance(event, types.DispatchApplied | types.DispatchFailed):
            report.stray_dispatch.append(_orphan(message, "not a dispatch result"))
            continue
        if event.decision_seq not in outputs:
            report.stray_dispatch.append(
                _orphan(message, f"names #{event.decision_seq}, which is not a recorded decision")
            )
            continue
        answered.add(event.decision_seq)
    report.undispatched = _undispatched(outputs, answered)


def _undispatched(outputs: Mapping[int, LogMessage], answered: set[int]) -> list[int]:
    """Decisions the dispatcher should have answered and did not. The dispatcher writes a
    workload's latest state, so a decision a later answered one of the same workload (its
    subject) superseded, e.g. an admission the eviction of a preemption overtook before the
    Job started, needs no answer of its own."""
    waiting: list[int] = []
    last_answered: dict[str, int] = {}
    for seq in sorted(answered):
        last_answered[outputs[seq].subject] = seq
    for seq, message in outputs.items():
        if message.headers.get("Kq-Type") in _DISPATCHED and seq not in answered:
            if last_answered.get(message.subject, 0) < seq:
                waiting.append(seq)
    return waiting


_DISPATCHED = frozenset({"WorkloadAdmitted", "EvictionRequested"})
"""Decision types the dispatcher answers with a result when it has something to write."""


def _orphan(message: LogMessage, why: str) -> Orphan:
    return Orphan(seq=message.seq, subject=message.subject, type=message.headers.get("Kq-Type", "?"), why=why)


def _check(
    state: ClusterState,
    head_seq: int,
    record: types.DecisionRecord,
    *,
    by_seq: Mapping[int, LogMessage],
    deciders: Mapping[str, Decider],
    report: ReplayReport,
) -> None:
    version = record.kueue_es_version if isinstance(record.kueue_es_version, str) else ""
    decider = deciders.get(record.role)
    why = ""
    if record.role == SEED_ROLE:
        why = "a scenario runner's seed batch, not a service's decision"
    elif decider is None:
        why = f"no decider of role {record.role!r} is installed"
    elif decider.logic_version != record.logic_version:
        why = f"logic version {record.logic_version}; this kueue-es has {decider.logic_version}"
    if why or decider is None:
        report.unverifiable.append(
            Unverifiable(
                decision_id=record.decision_id,
                head_seq=head_seq,
                role=record.role,
                logic_version=record.logic_version,
                kueue_es_version=version,
                why=why,
            )
        )
        return
    stored_head = by_seq.get(head_seq)
    cut = record.max_outputs
    if cut is not msgspec.UNSET and cut not in registry.CUTS:
        report.mismatches.append(
            Mismatch(
                decision_id=record.decision_id,
                head_seq=head_seq,
                basis_seq=record.basis_seq,
                index=0,
                stored=stored_head.data.decode(errors="replace") if stored_head else "",
                replayed="",
                reason=f"it claims an output cut of {cut}; the services cut at {sorted(registry.CUTS)} only",
            )
        )
        return
    outputs = list(decider.decide(state, now_ms=record.now_ms))
    head, rest = build_batch(
        decider,
        outputs=outputs,
        basis_seq=record.basis_seq,
        head_seq=record.expected_head_seq,
        now_ms=record.now_ms,
        partition=record.partition,
        answers=record.answers,
        max_outputs=cut,
        kueue_es_version=record.kueue_es_version,
    )
    candidates = [(0, head.data, stored_head.data if stored_head else b"")]
    for index in range(1, max(len(rest), record.output_count) + 1):
        replayed = rest[index - 1].data if index <= len(rest) else b""
        stored = by_seq.get(head_seq + index)
        candidates.append((index, replayed, stored.data if stored else b""))
    for index, replayed, stored_data in candidates:
        if replayed != stored_data:
            report.mismatches.append(
                Mismatch(
                    decision_id=record.decision_id,
                    head_seq=head_seq,
                    basis_seq=record.basis_seq,
                    index=index,
                    stored=stored_data.decode(errors="replace"),
                    replayed=replayed.decode(errors="replace"),
                )
            )
            return
    report.matched += 1


# --- the report as text ----------------------------------------------------------------------

DEFAULT_MAX_DIFFS = 10


def summary(report: ReplayReport, *, max_diffs: int = DEFAULT_MAX_DIFFS) -> list[tuple[str, str]]:
    """The report as lines of plain text, each with a rich style ("" for none)."""
    lines: list[tuple[str, str]] = [
        (
            f"replay: {report.messages} events folded "
            f"({f'log #1..#{report.last_seq}' if report.last_seq else 'empty log'}), {report.decisions} decisions: "
            f"{report.matched} matched, {len(report.mismatches)} differed, {report.skipped} not re-checked",
            "",
        )
    ]
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
        shown = ", ".join(f"#{seq}" for seq in report.undispatched[:10])
        more = ", ..." if len(report.undispatched) > 10 else ""
        lines.append(
            (
                f"warning: {len(report.undispatched)} decisions have no dispatch result ({shown}{more}): "
                "the dispatcher may still be at work, or had nothing to write",
                "yellow",
            )
        )
    code = report.exit_code
    if code == EXIT_OK:
        lines.append(("every decision matched; the log is complete", "bold green"))
    elif code == EXIT_DIFFERENCE:
        lines.append((f"{len(report.mismatches)} decisions differ (exit 1)", "bold red"))
    elif code == EXIT_INCOMPLETE:
        lines.append(("the log is incomplete: gaps, orphans or dispatch results of no decision (exit 4)", "bold red"))
    else:
        lines.append(
            (
                f"every re-checked decision matched, but {report.skipped} records could not be re-checked (exit 3)",
                "bold yellow",
            )
        )
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
