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
import contextlib
import datetime
import gc
import hashlib
import multiprocessing
import os
import pickle
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from select import select as wait_readable
from typing import Any

from kueue_es import checkpoints, logfile
from kueue_es.events import subjects, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.events.bus.direct import DirectReader, DirectUnavailable
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState
from kueue_es.replay import (
    LogChecker,
    Mismatch,
    Progress,
    ReplayReport,
    Unverifiable,
    bus_records,
    count_by_partition,
    direct_records,
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
        assert self.nats_url is not None
        with contextlib.suppress(DirectUnavailable):
            return direct_records(self.nats_url)
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

    def messages(self, *, start_seq: int = 1, last: int = 0, offset: int = 0) -> Iterator[LogMessage]:
        """Every message from ``start_seq`` on (up to ``last`` for a bus), in order; a file is read
        from byte ``offset`` (the start of a line at or before ``start_seq``'s)."""
        if self.file is not None:
            yield from logfile.read_lines(self.file, start_seq=start_seq, offset=offset)
            return
        assert self.nats_url is not None
        try:
            reader = DirectReader(self.nats_url)
        except DirectUnavailable:
            reader = None
        if reader is not None:
            with reader:
                first = True
                try:
                    for message in reader.messages(start_seq=start_seq, last=last):
                        first = False
                        yield message
                    return
                except DirectUnavailable:
                    if not first:
                        raise
        yield from _nats_messages(self.nats_url, start_seq=start_seq, last=last)


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


# --- parts re-checked in forked processes ----------------------------------------------------------


class PartForks:
    """Runs parts in forked processes, at most ``jobs`` at once, and collects their results.

    :meth:`start` forks: the child holds the caller's fold as it is at that moment
    (copy-on-write: nothing is copied, encoded or written to disk), runs the part and
    writes its :class:`PartResult` (pickled: parent and child are the same program) to a
    pipe; :meth:`poll` reads what has come without waiting. Forking a process that holds
    a large fold costs tens of milliseconds of system time here (the page tables are
    copied), so a fork is made per part, never per decision. POSIX only. A child that
    fails raises RuntimeError in the parent with the child's error.
    """

    def __init__(self, jobs: int) -> None:
        self.jobs = max(jobs, 1)
        self.results: list[PartResult] = []
        self._out: dict[int, tuple[int, bytearray]] = {}  # read end of the pipe -> (pid, bytes so far)

    def start(self, part: Callable[[], PartResult]) -> None:
        """Run ``part`` in a forked child (waiting first while ``jobs`` children are out)."""
        while len(self._out) >= self.jobs:
            self._collect(block=True)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: run the part, write its result, exit without the parent's clean-ups
            code = 0
            try:
                os.close(read_end)
                gc.freeze()  # the inherited fold is never collected here: a collection would copy it all
                payload = b"R" + pickle.dumps(part(), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as err:  # noqa: BLE001 - handed to the parent, which raises it
                payload, code = b"E" + f"{type(err).__name__}: {err}".encode(errors="replace"), 1
            try:
                view = memoryview(payload)
                while view:
                    view = view[os.write(write_end, view) :]
            finally:
                os._exit(code)
        os.close(write_end)
        os.set_blocking(read_end, False)
        self._out[read_end] = (pid, bytearray())

    def poll(self) -> None:
        """Collect the results of the children that are done (never waits)."""
        if self._out:
            self._collect(block=False)

    def drain(self) -> None:
        """Collect every result still out, waiting for them."""
        while self._out:
            self._collect(block=True)

    def close(self) -> None:
        """Stop the children still running (after an error) and reap them."""
        for fd, (pid, _) in list(self._out.items()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            os.close(fd)
        self._out.clear()

    def _collect(self, *, block: bool) -> None:
        ready, _, _ = wait_readable(list(self._out), [], [], None if block else 0)
        for fd in ready:
            pid, received = self._out[fd]
            while True:
                try:
                    chunk = os.read(fd, 1 << 20)
                except BlockingIOError:
                    break
                if chunk:
                    received += chunk
                    continue
                del self._out[fd]  # end of file: the child is done
                os.close(fd)
                os.waitpid(pid, 0)
                if received[:1] != b"R":
                    detail = received[1:].decode(errors="replace") or "it exited without a result"
                    raise RuntimeError(f"A replay part failed in process {pid}: {detail}")
                result = pickle.loads(received[1:])  # noqa: S301 - our own child's result, through a pipe
                self.results.append(result)
                break


def split(records: Records, parts: int) -> list[tuple[int, Records]]:
    """``records`` in up to ``parts`` parts of consecutive bases, as many records each, with the
    position each is re-checked from (its first basis: the fold through that sequence)."""
    by_basis = sorted(records, key=lambda pair: (pair[1].basis_seq, pair[0]))
    count = max(1, min(parts, len(by_basis)))
    out = []
    for i in range(count):
        mine = by_basis[len(by_basis) * i // count : len(by_basis) * (i + 1) // count]
        if mine:
            out.append((mine[0][1].basis_seq, sorted(mine, key=lambda pair: pair[0])))
    return out


def replay_forked(
    source: Source,
    deciders: Mapping[str, Decider],
    *,
    jobs: int,
    parts_per_job: int = PARTS_PER_JOB,
    progress: Callable[[str, int], Progress] | None = None,
) -> ReplayReport:
    """``kueue-es replay --jobs N`` with no checkpoints: this process reads the log once, folds it
    and checks its completeness; when the fold reaches the first basis of a part (the records
    split into ``jobs`` x ``parts_per_job`` parts by basis), a forked child takes the fold from
    there and re-checks that part (:func:`check_part`: reading on from that message, folding
    and re-running its records), at most ``jobs`` children at once. Same report as one pass
    (:func:`kueue_es.replay.replay_file`), in the same order."""
    records, last = source.records()
    parts = split(records, jobs * parts_per_job)
    checker = LogChecker(
        records,
        deciders,
        rerun=False,
        fold=bool(parts),
        progress=progress("re-checking", last) if progress else None,
    )
    lines = logfile.LineReader(source.file) if source.file is not None else None
    messages = iter(lines) if lines is not None else source.messages(last=last)
    forks = PartForks(jobs)
    next_part = 0

    def fork(start_seq: int, offset: int) -> None:
        nonlocal next_part
        _, mine = parts[next_part]
        state = checker.state
        forks.start(
            lambda: check_part(
                source, mine, state=state, start_seq=start_seq, offset=offset, last=last, deciders=deciders
            )
        )
        next_part += 1
        if next_part == len(parts):
            checker.fold = False  # the last part has its fold: from here on only completeness is checked

    try:
        for count, message in enumerate(messages, 1):
            while next_part < len(parts) and parts[next_part][0] < message.seq:
                fork(message.seq, lines.line_start if lines is not None else 0)
            checker.feed(message)
            if count % 1024 == 0:
                forks.poll()
        while next_part < len(parts):  # bases the log never passed: their parts start at its end
            fork(last + 1 if last else checker.report.last_seq + 1, -1)
        forks.drain()
    finally:
        forks.close()
    report = checker.finish(last_seq=last)
    return merged(report, forks.results, records, records)


def merged(report: ReplayReport, results: Sequence[PartResult], all_records: Records, chosen: Records) -> ReplayReport:
    """The completeness pass's ``report`` with the parts' re-checks, in the one-pass order."""
    report.decisions = len(all_records)
    report.matched = sum(r.matched for r in results)
    report.partition_records = count_by_partition(chosen)  # those re-checked: --from/--to leave the rest out
    report.partition_matched = {}
    for result in results:
        for partition, count in result.partition_matched.items():
            report.partition_matched[partition] = report.partition_matched.get(partition, 0) + count
    report.mismatches = [m for _, m in sorted((x for r in results for x in r.mismatches), key=lambda p: p[0])]
    report.unverifiable = [
        u for _, u in sorted((x for r in results for x in r.unverifiable), key=lambda p: p[0])
    ] + report.unverifiable
    report.outside = len({h for h, _ in all_records} - {h for h, _ in chosen})  # not re-checked: outside --from/--to
    return report


# --- one part ---------------------------------------------------------------------------------


@dataclass(kw_only=True)
class PartResult:
    """What one part re-checked."""

    matched: int = 0
    partition_matched: dict[str, int] = field(default_factory=dict)
    mismatches: list[tuple[tuple[int, int], Mismatch]] = field(default_factory=list)
    unverifiable: list[tuple[tuple[int, int], Unverifiable]] = field(default_factory=list)
    folded: int = 0


def check_part(
    source: Source,
    records: Records,
    *,
    checkpoint: checkpoints.Checkpoint | None = None,
    state: ClusterState | None = None,
    start_seq: int = 1,
    offset: int = 0,
    last: int,
    deciders: Mapping[str, Decider] | None = None,
    progress: Progress | None = None,
) -> PartResult:
    """Re-check ``records`` (their bases after ``checkpoint``), folding from ``checkpoint``; or,
    given ``state`` (the fold through ``start_seq`` - 1), from ``start_seq`` on (in a file: its
    line at byte ``offset``; -1: no message is left to read)."""
    from kueue_es import deciders as registry

    if state is None:
        state, start_seq, offset = ClusterState(), 1, 0
        if checkpoint is not None:  # a refused one: the newest good one before it, else the start
            loaded = checkpoints.load_at_or_before(
                checkpoints.find(checkpoint.path.parent) or [checkpoint], checkpoint.seq, warn=_warn
            )
            if loaded is not None:
                state, start_seq = loaded[2], loaded[0].seq + 1
    checker = LogChecker(records, deciders or registry.BY_ROLE, state=state, completeness=False, progress=progress)
    messages = source.messages(start_seq=start_seq, last=last, offset=offset) if offset >= 0 else iter(())
    for message in messages:
        checker.feed(message)
        if checker.settled:
            break
    checker.finish()
    return PartResult(
        matched=checker.report.matched,
        partition_matched=checker.report.partition_matched,
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
    return merged(completeness.finish(last_seq=last), results, all_records, chosen)


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


def forked(args: Any) -> bool:
    """``--jobs N`` over the whole log with no ``--checkpoints`` given: :func:`replay_forked`."""
    return bool(
        args.jobs > 1
        and args.checkpoints is None
        and args.start is None
        and args.stop is None
        and not args.write_checkpoints
        and not args.verify_checkpoints
    )


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
        elif forked(args):
            report = replay_forked(source, deciders.BY_ROLE, jobs=args.jobs, progress=bars)
            positions, differed = [], []
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
