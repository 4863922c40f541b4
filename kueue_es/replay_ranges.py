"""``kueue-es replay`` over a range, from checkpoints, in parallel processes.

:mod:`kueue_es.replay` re-checks a log in one streaming pass from its start. Here the
same checker runs on parts of it: the records whose basis lies in ``--from``..``--to``
(sequences, or RFC 3339 times matched against the records' ``now_ms``), each part
folded from the latest checkpoint before it (:mod:`kueue_es.checkpoints`) instead of
from the start; ``--jobs N`` re-checks N parts in N processes at once, while this
process checks the whole log's completeness (gaps, orphans, dispatch results: cheap,
no fold). Checkpoints are made by a pass from the start (``--write-checkpoints``) and
compared with a fresh fold by ``--verify-checkpoints``.
"""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import multiprocessing
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kueue_es import checkpoints, logfile
from kueue_es.events import subjects, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState
from kueue_es.replay import (
    LogChecker,
    Mismatch,
    Progress,
    ReplayReport,
    Unverifiable,
    bus_records,
    file_records,
    stream_log,
)
from kueue_es.services.runtime import Decider

Records = list[tuple[int, types.DecisionRecord]]
PARTS_PER_JOB = 4


# --- where the log comes from -------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """A log to read, from any process: a JSON-lines file, or a NATS server's URL."""

    file: Path | None = None
    nats_url: str | None = None

    def records(self) -> tuple[Records, int]:
        """The DecisionRecords (first pass) and the last sequence (0: the file's last line)."""
        if self.file is not None:
            return file_records(self.file), 0
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(self._bus_records())
        finally:
            loop.close()

    async def _bus_records(self) -> tuple[Records, int]:
        from kueue_es.events.bus import nats as nats_bus

        assert self.nats_url is not None
        bus = await nats_bus.connect(self.nats_url, create_stream=False)  # replay only reads
        try:
            last = await bus.last_seq()
            return await bus_records(bus, last=last), last
        finally:
            await bus.close()

    def messages(self, *, start_seq: int = 1, last: int = 0) -> Iterator[LogMessage]:
        """Every message from ``start_seq`` on (up to ``last`` for a bus), in order."""
        if self.file is not None:
            yield from logfile.read_lines(self.file, start_seq=start_seq)
            return
        yield from _nats_messages(self.nats_url or "", start_seq=start_seq, last=last)


def _nats_messages(url: str, *, start_seq: int, last: int, chunk: int = 2048) -> Iterator[LogMessage]:
    """A bus reader as a plain iterator (its own event loop, in chunks: a loop step per message
    would cost more than the message)."""
    from kueue_es.events.bus import nats as nats_bus

    loop = asyncio.new_event_loop()
    try:
        bus = loop.run_until_complete(nats_bus.connect(url, create_stream=False))
        reader = stream_log(bus, last=last, start_seq=start_seq)

        async def take() -> list[LogMessage]:
            out: list[LogMessage] = []
            try:
                while len(out) < chunk:
                    out.append(await anext(reader))
            except StopAsyncIteration:
                pass
            return out

        try:
            while True:
                batch = loop.run_until_complete(take())
                yield from batch
                if len(batch) < chunk:
                    return
        finally:
            loop.run_until_complete(reader.aclose())
            loop.run_until_complete(bus.close())
    finally:
        loop.close()


# --- one part ---------------------------------------------------------------------------------


@dataclass(kw_only=True)
class PartResult:
    """What one part re-checked."""

    matched: int = 0
    mismatches: list[tuple[tuple[int, int], Mismatch]] = field(default_factory=list)
    unverifiable: list[tuple[tuple[int, int], Unverifiable]] = field(default_factory=list)
    folded: int = 0


def check_part(
    source: Source,
    records: Records,
    *,
    checkpoint: checkpoints.Checkpoint | None,
    last: int,
    deciders: Mapping[str, Decider] | None = None,
    progress: Progress | None = None,
) -> PartResult:
    """Re-check ``records`` (their bases after ``checkpoint``), folding from ``checkpoint``."""
    from kueue_es import deciders as registry

    state, start = ClusterState(), 1
    if checkpoint is not None:  # a refused one: the newest good one before it, else the start
        loaded = checkpoints.load_at_or_before(
            checkpoints.find(checkpoint.path.parent) or [checkpoint], checkpoint.seq, warn=_warn
        )
        if loaded is not None:
            state, start = loaded[2], loaded[0].seq + 1
    checker = LogChecker(records, deciders or registry.BY_ROLE, state=state, completeness=False, progress=progress)
    for message in source.messages(start_seq=start, last=last):
        checker.feed(message)
        if checker.settled:
            break
    checker.finish()
    return PartResult(
        matched=checker.report.matched,
        mismatches=checker._mismatches,
        unverifiable=checker._unverifiable,
        folded=checker.report.messages,
    )


# --- the whole command ----------------------------------------------------------------------------


def position_of(value: str, records: Records) -> tuple[int | None, int | None]:
    """``--from``/``--to`` as a sequence, or as a time: (seq, now_ms) with one of them None."""
    if value.isdigit():
        return int(value), None
    moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return None, int(moment.timestamp() * 1000)


def select(records: Records, *, start: str | None, stop: str | None) -> Records:
    """The records whose basis (a sequence) or ``now_ms`` (a time) lies within ``start``..``stop``."""
    out = records
    if start is not None:
        seq, ms = position_of(start, records)
        out = [(h, r) for h, r in out if (r.basis_seq >= seq if seq is not None else r.now_ms >= (ms or 0))]
    if stop is not None:
        seq, ms = position_of(stop, records)
        out = [(h, r) for h, r in out if (r.basis_seq <= seq if seq is not None else r.now_ms <= (ms or 0))]
    return out


def plan(
    records: Records, found: Sequence[checkpoints.Checkpoint], *, jobs: int
) -> list[tuple[checkpoints.Checkpoint | None, Records]]:
    """Split ``records`` (in head order) into at most ``jobs`` parts, each starting at a checkpoint
    at or before its first basis, balanced by record count (the re-runs cost the most)."""
    if not records:
        return []
    by_basis = sorted(records, key=lambda pair: (pair[1].basis_seq, pair[0]))
    first = by_basis[0][1].basis_seq
    usable = [c for c in found if c.seq > first]
    starts: list[checkpoints.Checkpoint | None] = [checkpoints.latest_at_or_before(list(found), first)]
    for j in range(1, max(jobs, 1)):
        target = by_basis[len(by_basis) * j // jobs][1].basis_seq
        candidate = checkpoints.latest_at_or_before(usable, target)
        if candidate is not None and candidate not in starts:
            starts.append(candidate)
    parts: list[tuple[checkpoints.Checkpoint | None, Records]] = []
    for i, start in enumerate(starts):
        low = start.seq if start is not None else -1
        high = starts[i + 1].seq if i + 1 < len(starts) else None  # type: ignore[union-attr]
        mine = [pair for pair in records if low <= pair[1].basis_seq and (high is None or pair[1].basis_seq < high)]
        if mine:
            parts.append((start, mine))
    return parts


def replay_parts(
    source: Source,
    deciders: Mapping[str, Decider],
    *,
    start: str | None = None,
    stop: str | None = None,
    jobs: int = 1,
    checkpoint_dir: Path | None = None,
    progress: Callable[[str, int], Progress] | None = None,
) -> ReplayReport:
    """Re-check the records selected by ``start``/``stop`` in up to ``jobs`` parts from checkpoints,
    and the whole log's completeness here."""
    all_records, last = source.records()
    chosen = select(all_records, start=start, stop=stop)
    # More parts than processes: a process that finishes early takes the next part (the
    # later records cost more), and a part costs only its checkpoint's load.
    parts = plan(chosen, checkpoints.find(checkpoint_dir), jobs=jobs * PARTS_PER_JOB if jobs > 1 else 1)
    if len(parts) <= 1 and start is None and stop is None:  # from the start anyway: one pass does it all
        checker = LogChecker(all_records, deciders, progress=progress("re-checking", last) if progress else None)
        for message in source.messages(last=last):
            checker.feed(message)
        return checker.finish(last_seq=last)
    results: list[PartResult] = []
    futures: list[Future[PartResult]] = []
    pool = None
    if jobs > 1 and len(parts) > 1:
        pool = ProcessPoolExecutor(max_workers=min(jobs, len(parts)), mp_context=multiprocessing.get_context("fork"))
        futures = [pool.submit(check_part, source, mine, checkpoint=cp, last=last) for cp, mine in parts]
    try:
        completeness = LogChecker(
            all_records,
            deciders,
            rerun=False,
            progress=progress("reading", last) if progress else None,
        )
        for message in source.messages(last=last):
            completeness.feed(message)
        if pool is None:
            for cp, mine in parts:
                results.append(check_part(source, mine, checkpoint=cp, last=last, deciders=deciders))
        else:
            results = [future.result() for future in futures]
    finally:
        if pool is not None:
            pool.shutdown()
    report = completeness.finish(last_seq=last)
    report.decisions = len(all_records)
    report.matched = sum(r.matched for r in results)
    report.mismatches = [m for _, m in sorted((x for r in results for x in r.mismatches), key=lambda p: p[0])]
    skipped = {h for h, _ in all_records} - {h for h, _ in chosen}
    report.unverifiable = [
        u for _, u in sorted((x for r in results for x in r.unverifiable), key=lambda p: p[0])
    ] + report.unverifiable
    report.outside = len(skipped)  # not re-checked: outside --from/--to
    return report


def write_checkpoints(
    source: Source,
    deciders: Mapping[str, Decider],
    *,
    directory: Path,
    every: int,
    verify: bool = False,
    progress: Callable[[str, int], Progress] | None = None,
) -> tuple[ReplayReport, list[int], list[int]]:
    """One pass from the start that re-checks everything and writes a checkpoint every ``every``
    events (``verify``: instead compares each existing checkpoint with the fresh fold). Returns
    the report, the positions written or verified, and those that differed."""
    records, last = source.records()
    existing = {c.seq: c for c in checkpoints.find(directory)}
    done: list[int] = []
    differed: list[int] = []
    mark = every
    first: LogMessage | None = None  # message #1 and the one being fed: the log's identity
    current: LogMessage | None = None
    head_seqs: dict[str, int] = {}  # the last sequence on each head subject, any message

    def on_position(seq: int, state: ClusterState) -> None:
        nonlocal mark
        if verify:
            if seq in existing:
                done.append(seq)
                if not _same(existing[seq], state):
                    differed.append(seq)
            return
        if every and seq >= mark:
            assert current is not None and current.seq == seq
            log = checkpoints.identity_of(first, current) if first is not None else None
            checkpoints.write(directory, seq, state, log=log, head_seqs=dict(head_seqs))
            done.append(seq)
            mark = (seq // every + 1) * every

    checker = LogChecker(
        records, deciders, on_position=on_position, progress=progress("re-checking", last) if progress else None
    )
    for message in source.messages(last=last):
        if message.seq == 1:
            first = message
        current = message
        partition = batches.partition_of(message.subject)
        if partition is not None and subjects.head_token(message.subject) is not None:  # any role's head
            head_seqs[partition] = message.seq
        checker.feed(message)
    return checker.finish(last_seq=last), done, differed


def _same(checkpoint: checkpoints.Checkpoint, state: ClusterState) -> bool:
    """Whether ``checkpoint`` holds ``state``: to the byte of its body, or else as
    :func:`checkpoints.state_digest` sees it (a checkpoint written by a fold whose deciders
    read its queues at other times); says why not on stderr."""
    try:
        header, held = checkpoints.open_checkpoint(checkpoint.path)
    except checkpoints.CheckpointError as err:
        _warn(f"checkpoint refused: {err}")
        return False
    if hashlib.sha256(checkpoints.dumps(state)).hexdigest() == header.body_sha256:
        return True
    if checkpoints.state_digest(held) == checkpoints.state_digest(state):
        return True
    where = checkpoints.differences(held, state, f"checkpoint #{checkpoint.seq}") or ["queue or timer order"]
    _warn(f"checkpoint #{checkpoint.seq} differs from a fresh fold: {'; '.join(where)}")
    return False


def _warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


# --- the command line ------------------------------------------------------------------------------


def run_ranged(args: Any, *, progress: bool) -> int:
    """``kueue-es replay`` with --from/--to/--jobs/--write-checkpoints/--verify-checkpoints."""
    if args.file is not None:
        return _run(args, Source(file=args.file), args.checkpoints or checkpoints.default_dir(args.file), progress)
    if args.nats is not None:
        return _run(args, Source(nats_url=args.nats), args.checkpoints, progress)
    return asyncio.run(_with_store(args, progress))


async def _with_store(args: Any, progress: bool) -> int:
    from kueue_es.events.bus.server import open_stopped_store

    directory = args.checkpoints or checkpoints.default_dir(args.store)
    async with open_stopped_store(args.store) as server:
        return await asyncio.to_thread(_run, args, Source(nats_url=server.url), directory, progress)


def _run(args: Any, source: Source, directory: Path, progress: bool) -> int:
    from rich.console import Console

    from kueue_es import deciders
    from kueue_es.replay import print_report, progress_bars

    console = Console(soft_wrap=True)
    with progress_bars(progress) as bars:
        if args.write_checkpoints or args.verify_checkpoints:
            report, positions, differed = write_checkpoints(
                source,
                deciders.BY_ROLE,
                directory=directory,
                every=args.checkpoint_every,
                verify=args.verify_checkpoints,
                progress=bars,
            )
        else:
            report = replay_parts(
                source,
                deciders.BY_ROLE,
                start=args.start,
                stop=args.stop,
                jobs=args.jobs,
                checkpoint_dir=directory,
                progress=bars,
            )
            positions, differed = [], []
    print_report(console, report, max_diffs=args.max_diffs)
    if args.write_checkpoints:
        console.print(f"checkpoints written at {', '.join(f'#{p}' for p in positions) or 'none'} in {directory}")
    if args.verify_checkpoints:
        if differed:
            console.print(
                f"checkpoints that differ from a fresh fold: {', '.join(f'#{p}' for p in differed)} (exit 1)",
                style="bold red",
            )
            return max(report.exit_code, 1) if report.exit_code != 0 else 1
        console.print(f"{len(positions)} checkpoints verified against a fresh fold")
    return report.exit_code
