"""``kueue-es what-if``: read the log, run the baseline and the changed history, print the report.

Exit codes: 0 the report was printed; 1 the simulation did not settle (a livelock); 2 bad input (the CHANGES file, the source, a priority
override naming no workload of the history, ``--from`` out of the log) or no system found.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kueue_es import logfile
from kueue_es.events.bus.base import LogMessage
from kueue_es.whatif import changes as changes_mod
from kueue_es.whatif import history as history_mod
from kueue_es.whatif import report, simulate, source

EXIT_BAD_INPUT = 2


def run(args: Any) -> int:
    """The command (argparse namespace: changes, start, nats, store, file, all, write_log, progress)."""
    from kueue_es import current

    try:
        changes = changes_mod.load(Path(args.changes))
        src = source.from_options(nats=args.nats, store=args.store, file=args.file)
    except (changes_mod.ChangesError, source.SourceError, current.NoSystemError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    progress = args.progress or sys.stderr.isatty()
    with _bars(progress) as bars:
        try:
            messages = asyncio.run(source.read_log(src, progress=bars("reading the log", 0)))
        except source.SourceError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        try:
            cut = source.cut_seq(messages, args.start) if args.start else 0
        except source.SourceError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if args.start and not 0 < cut <= (messages[-1].seq if messages else 0):
            print(f"error: --from {args.start} is outside the log (#1..#{len(messages)})", file=sys.stderr)
            return EXIT_BAD_INPUT
        history = history_mod.extract(messages, cut_seq=cut)
        try:
            baseline = simulate.simulate(history, progress=bars("baseline (unchanged)", len(history.facts)))
            what_if = simulate.simulate(history, changes=changes, progress=bars("what-if", len(history.facts)))
        except simulate.SimulationError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
    unmatched = sorted(set(changes.priorities) - _named(what_if))
    if unmatched:
        print(
            f"error: {changes.source}: priorities[{unmatched[0]}]: no workload or Job of that name in the log",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    if args.write_log is not None:
        logfile.write_lines(Path(args.write_log), what_if.messages)
    print_report(
        report.console(),
        new_objects=changes_mod.not_recorded(changes, messages),
        src=src,
        messages=messages,
        history=history,
        changes=changes,
        baseline=baseline,
        what_if=what_if,
        show_all=args.all,
        start=args.start,
    )
    return 0


def _named(run: simulate.Run) -> set[str]:
    names: set[str] = set()
    for key, wl in run.state.workloads.items():
        names.add(key)
        if wl.workload.owner is not None:
            names.add(f"{wl.workload.metadata.namespace}/{wl.workload.owner.name}")
    return names


def print_report(
    console: Any,
    *,
    src: source.LogSource,
    messages: list[LogMessage],
    history: history_mod.History,
    changes: changes_mod.Changes,
    baseline: simulate.Run,
    what_if: simulate.Run,
    show_all: bool,
    start: str | None,
    new_objects: Sequence[tuple[str, str, str]] = (),
) -> None:
    """The what-if report: what was re-run, the per-workload table, the ClusterQueue summary.
    ``new_objects``: the CHANGES objects the recorded log never observes (kind, namespace, name), each
    warned about (a misspelt name adds an object instead of changing one)."""
    span = f"#1..#{history.last_seq}" if messages else "an empty log"
    console.print(f"what-if: {src.describe()} ({len(messages)} messages, {span}): {len(history.facts)} facts re-run")
    if start:
        console.print(
            f"  from {start}: the log up to #{history.prefix[-1].seq if history.prefix else 0} is kept as recorded"
        )
    console.print(f"  changed ({changes.source}): " + "; ".join(changes.describe()))
    if changes.objects:
        console.print(
            "  each changed object replaces every recorded version of it: later changes of it in the log"
            " (an edit, a patch) are not applied"
        )
    for kind, namespace, name in new_objects:
        console.print(
            f"  warning: {kind} {f'{namespace}/' if namespace else ''}{name} is not in the log: added as a new object",
            style="yellow",
            markup=False,
        )
    console.print(
        "  compared against the baseline: the same history re-run unchanged through the same simulation,"
        " so every difference below is the change's"
    )
    console.print(
        f"  simulation: a deciding cycle takes {history.cycle_ms} ms (the log's back-to-back cycles); a job runs"
        " its recorded run time from its admission; an evicted one stops at once"
    )
    recorded = report.outcomes(_log(messages))
    before = report.outcomes(baseline.log)
    both = [key for key, out in recorded.items() if out.admitted_ms and key in before and before[key].admitted_ms]
    gaps = [abs(recorded[key].admitted_ms - before[key].admitted_ms) for key in both]
    admitted = sum(1 for out in recorded.values() if out.admitted_ms)
    only_baseline = sum(1 for key, out in before.items() if out.admitted_ms and not recorded.get(key, out).admitted_ms)
    line = (
        f"  the baseline admits {sum(1 for gap in gaps if gap <= 1000)} of the {admitted} workloads the recording"
        " admitted within 1 s of their recorded admission"
    )
    if gaps:
        line += f" (largest gap {max(gaps) / 1000:.1f}s)"
    if admitted - len(both):
        line += f"; {admitted - len(both)} not at all"
    if only_baseline:
        line += f"; it admits {only_baseline} the recording did not"
    console.print(line)
    after = report.outcomes(what_if.log)
    table, earlier, later, differ = report.workload_table(before, after, show_all=show_all)
    console.print()
    if differ or show_all:
        console.print(table)
    console.print(
        f"{differ} of {len(set(before) | set(after))} workloads differ: {earlier} admitted earlier, {later} later"
        + ("" if show_all or not differ else " (--all lists every workload)")
    )
    console.print()
    end_ms = max(baseline.end_ms, what_if.end_ms)  # one window end for both: the end of the history
    console.print(
        report.summary_table(
            report.summaries(baseline.log, end_ms=end_ms, times=baseline.times),
            report.summaries(what_if.log, end_ms=end_ms, times=what_if.times),
        )
    )


def _log(messages: list[LogMessage]) -> list[tuple[int, Any]]:
    from kueue_es.events import codec

    out = []
    for message in messages:
        try:
            out.append((message.seq, codec.decode(message.data)))
        except codec.DecodeError:
            continue
    return out


class _NoBars:
    def __enter__(self) -> Any:
        return lambda name, total: None

    def __exit__(self, *exc: object) -> None:
        return None


def _bars(enabled: bool) -> Any:
    if not enabled:
        return _NoBars()
    from kueue_es.replay import progress_bars

    return progress_bars(True)


def run_diff(args: Any) -> int:
    """``kueue-es diff LOG_A LOG_B [--ignore-times]``: 0 same decisions, 1 a divergence, 2 bad input."""
    from kueue_es.whatif import diff

    try:
        sources = [source.parse_spec(args.log_a), source.parse_spec(args.log_b)]
    except source.SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        logs = [asyncio.run(source.read_log(one)) for one in sources]
    except source.SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    found = diff.compare(logs[0], logs[1], ignore_times=args.ignore_times)
    diff.print_divergence(report.console(), found, name_a=sources[0].describe(), name_b=sources[1].describe())
    return 0 if found is None else 1
