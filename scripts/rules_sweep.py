"""``kueue-es bench rules`` over a grid of hop delays, in parallel, sorted by wall.

Usage: ``python scripts/rules_sweep.py [--config GENERATOR.yaml] [--jobs N] A P D R`` where each of A, P, D
and R is a comma list of milliseconds (admitter, preemptor, dispatch, report hops: ``kueue_es.perfbench.rules.Hops``),
e.g. ``1,5,20 1,5,20 1,5,20 1,5,20`` for 81 runs. Prints one line a run, fastest first: the hops, the wall
in seconds, the wall over the ideal bound, all evictions and the nominations; then the minimum, median and
maximum wall. Each run is pure and deterministic (15-35 s for the baseline); ``--jobs`` runs that many at
once (default 2). docs/benchmarks.md, "Issue 18: Kueue's rules in virtual time", quotes its output.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from multiprocessing import Pool
from pathlib import Path

from kueue_es.perfbench import generator, ideal, rules

_generated: generator.Generated | None = None
_planned: list[generator.PlannedWorkload] = []


def _load(config: Path) -> None:
    """Pool initializer: each worker generates the configuration's workloads once."""
    global _generated, _planned
    _generated = generator.generate(generator.load_config(config))
    _planned = _generated.planned()


def _run(hops: tuple[int, int, int, int]) -> tuple[tuple[int, int, int, int], int, int, int]:
    """One virtual run at ``hops``: (hops, wall ms, evictions, nominations)."""
    assert _generated is not None
    admitter, preemptor, dispatch, report = hops
    result = rules.simulate(
        _generated,
        rules.Hops(admitter_ms=admitter, preemptor_ms=preemptor, dispatch_ms=dispatch, report_ms=report),
        _planned,
    )
    return hops, result.wall_ms, sum(result.evictions.values()), result.nominations


def main() -> None:
    """Parse the grid, run it and print the lines the module docstring describes."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=Path("../shared/perf/baseline/generator.yaml"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("axes", nargs=4, metavar="MS,MS,...", help="admitter, preemptor, dispatch, report hops")
    args = parser.parse_args()
    axes = [[int(ms) for ms in axis.split(",")] for axis in args.axes]
    _load(args.config)
    assert _generated is not None
    bound_ms = max(ideal.ideal_bound(_generated, _planned).makespan_ms, 1)
    grid = [(a, p, d, r) for a, p, d, r in itertools.product(*axes)]
    with Pool(args.jobs, initializer=_load, initargs=(args.config,)) as pool:
        runs = sorted(pool.imap_unordered(_run, grid), key=lambda run: run[1])
    for hops, wall_ms, evictions, nominations in runs:
        print(
            f"{'/'.join(map(str, hops))}  {wall_ms / 1000:.1f} s  {wall_ms / bound_ms:.3f}x  {evictions:,}  {nominations:,}"
        )
    walls = [wall_ms / 1000 for _, wall_ms, _, _ in runs]
    print(
        f"{len(runs)} runs: wall min {min(walls):.1f} s, median {statistics.median(walls):.1f} s, max {max(walls):.1f} s"
    )


if __name__ == "__main__":
    main()
