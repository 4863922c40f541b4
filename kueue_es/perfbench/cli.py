"""``kueue-es bench --config GENERATOR.yaml [--api-qps N] [--check RANGESPEC.yaml] [--chaos SEED [--kill-every S]]``."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def add_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``kueue-es bench`` itself (``bench core`` has its own)."""
    parser.add_argument(
        "--config", type=Path, default=None, help="a Kueue scheduler-performance generator.yaml (shared/perf/*/)"
    )
    parser.add_argument(
        "--api-qps",
        type=float,
        default=None,
        help="cap the dispatcher's simulated API writes a second (default uncapped)",
    )
    parser.add_argument("--api-burst", type=int, default=None, help="with --api-qps: the burst (default 100)")
    parser.add_argument(
        "--check", type=Path, default=None, help="a rangespec.yaml in Kueue's format: exit 1 when out of range"
    )
    parser.add_argument(
        "--output", type=Path, default=None, help="where to write the YAML (default RUN_DIR/bench.yaml)"
    )
    parser.add_argument("--dir", type=Path, default=None, help="run directory: nats store, service logs (default temp)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="give up after this many seconds (default 1800)")
    parser.add_argument(
        "--stall-timeout",
        type=float,
        default=60.0,
        help="give up when the log has not grown for this many seconds with no workload running (default 60)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--replicas",
        type=int,
        default=None,
        help="processes of each decider and of the dispatcher (deploy/ runs 2: one holds the standby lease, the"
        " other stands by; default 2 with --chaos, else 1)",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        metavar="N",
        help="run N admitter processes sharing the partitions (cohort trees) through the slot leases"
        " (--partitions all); the table shows each process's CPU seconds and commits",
    )
    parser.add_argument(
        "--deciders",
        choices=("separate", "cohosted"),
        default="separate",
        help="separate (default, deploy/'s topology, comparable with earlier runs): the admitter, preemptor and"
        " TAS placer each in its own process; cohosted: the three in one process over one fold"
        " (kueue-es service deciders), named deciders in the table",
    )
    parser.add_argument(
        "--standby-lease",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the deciders take turns through their standby lease (default); --no-standby-lease: all replicas hot",
    )
    parser.add_argument(
        "--chaos",
        type=int,
        default=None,
        metavar="SEED",
        help="kill a random service about every --kill-every s (and nats-server once), restart it, then check"
        " the log's invariants and replay; exit 1 on any violation",
    )
    parser.add_argument(
        "--kill-every",
        type=float,
        default=10.0,
        metavar="S",
        help="with --chaos: seconds between kills (+-30%%, default 10)",
    )
    parser.add_argument(
        "--compact",
        default=None,
        metavar="ARGS",
        help="also run the compactor (kueue-es compact ARGS: verified snapshots restarted services start from),"
        " as deploy/ does; with --chaos it runs by default with '--every 10000 --interval 10s'; '' runs none",
    )


def run_kept(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, with ``main``'s result kept out of the task asyncio.run makes.

    On Python 3.11, asyncio.run's clean-up looks its SIGINT handler (a partial over the main task) up
    through ``signal.getsignal``, which formats ``repr(handler)`` for a ValueError it then drops: the
    task's repr holds its result's. For the bench that is the run's RunResult, recorder and all, a
    dataclass repr over every workload (50,000 in the large configuration: issue 18).
    """
    kept: list[T] = []

    async def keeping() -> None:
        kept.append(await main)

    asyncio.run(keeping())
    return kept[0]


def run(args: argparse.Namespace) -> int:
    """Run the bench; 0 in range (or no --check), 1 out of range, incomplete or (``--chaos``) a violated
    invariant or a victim that never recovered, 2 bad input."""
    import tempfile

    import yaml
    from rich.console import Console

    from kueue_es.perfbench import driver, generator, metrics, report
    from kueue_es.services import collector
    from kueue_es.services.runtime import configure_logging

    if args.config is None:
        print("error: give --config GENERATOR.yaml (or use `kueue-es bench core`)", file=sys.stderr)
        return 2
    if args.replicas is None:
        args.replicas = 2 if args.chaos is not None else 1  # a chaos run: deploy/'s topology
    if args.replicas < 1:
        print(f"error: --replicas must be at least 1, got {args.replicas}", file=sys.stderr)
        return 2
    if args.partitions is not None and (args.partitions < 1 or args.chaos is not None):
        print("error: --partitions N takes N >= 1 and no --chaos", file=sys.stderr)
        return 2
    if args.partitions is not None and args.deciders == "cohosted":
        print("error: --partitions N (N admitter processes) needs --deciders separate", file=sys.stderr)
        return 2
    if args.chaos is not None and args.kill_every <= 0:
        print(f"error: --kill-every must be positive, not {args.kill_every:g}", file=sys.stderr)
        return 2
    spec = None
    if args.check is not None:
        try:
            spec = yaml.safe_load(args.check.read_text())
        except (OSError, yaml.YAMLError) as err:
            print(f"error: {args.check}: {err}", file=sys.stderr)
            return 2
    console = Console(soft_wrap=True, width=max(Console().width, 120))
    run_dir = args.dir or Path(tempfile.mkdtemp(prefix="kueue-es-bench-"))
    try:
        driver.refuse_used_run_dir(run_dir)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    # the harness's own log (reconnects during a chaos run's nats-server kill, ...) beside the services'
    harness_log = (run_dir / "logs" / "bench.log").open("a")
    configure_logging(service="kueue-es bench", file=harness_log, cache=False)
    # The harness (API server, watcher, kubelet stand-ins) shares the cores with the services it
    # measures: its collector keeps to the services' policy, so it takes no more CPU than it must;
    # undone after the run, as the caller (a test, say) may go on in this process
    collector.install()
    try:
        result = run_kept(
            driver.run_bench(
                config_path=args.config,
                api_qps=args.api_qps,
                api_burst=args.api_burst,
                run_dir=run_dir,
                timeout=args.timeout,
                stall_seconds=args.stall_timeout,
                progress=not args.no_progress,
                replicas=args.replicas,
                standby_lease=args.standby_lease,
                chaos_seed=args.chaos,
                kill_every=args.kill_every,
                compact_args=None if args.compact is None else shlex.split(args.compact),
                partitions=args.partitions,
                deciders=args.deciders,
            )
        )
    except generator.ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        collector.uninstall()
    doc = report.document(result)
    output = args.output or Path(result.run_dir) / "bench.yaml"
    report.write_yaml(doc, output)
    console.print(report.table(doc))
    deciders = doc["deciders"]
    attempts = deciders["commits"] + deciders["conflicts"]
    share = f"{100 * deciders['conflicts'] / attempts:.1f} %" if attempts else "-"
    head = (
        f"deciders: {deciders['partitions']} admitter processes sharing the partitions (one preemptor, placer),"
        if deciders.get("partitions")
        else f"deciders: {deciders['replicas']} replica(s) each"
        + (
            " of the co-hosted process (admitter, preemptor, TAS placer over one fold),"
            if deciders.get("cohosted")
            else ","
        )
    )
    console.print(
        f"{head} standby lease"
        f" {'on' if deciders['standbyLease'] else 'off'}; {deciders['commits']} commits, {deciders['conflicts']}"
        f" conflicts ({share} of commit attempts): "
        + ", ".join(f"{n} {p['commits']}/{p['conflicts']}" for n, p in deciders["processes"].items()),
        highlight=False,
    )
    if result.compact_args:
        console.print(f"compactor: kueue-es compact {' '.join(result.compact_args)}", highlight=False)
    status = 0 if result.complete else 1
    if result.chaos is not None:
        console.print(report.chaos_table(result.chaos))
        for line in report.chaos_lines(result.chaos):
            console.print(line, highlight=False)
        status = status if result.chaos.ok else 1
    console.print(f"YAML: {output} (Kueue's summary.yaml and cmdStats.yaml beside it); logs in {result.run_dir}/logs")
    if spec is not None:
        try:
            problems = metrics.check_rangespec(
                spec, wall_ms=result.wall_ms, usage=result.recorder.usage_percent(), summary=doc["summary"]
            )
        except ValueError as err:
            print(f"error: {args.check}: {err}", file=sys.stderr)
            return 2
        for problem in problems:
            console.print(f"[bold red]out of range[/bold red]: {problem}")
        if not problems:
            console.print(f"[bold green]in range[/bold green] of {args.check}")
        status = 1 if problems else status
    return status
