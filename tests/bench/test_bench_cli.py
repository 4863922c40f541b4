"""``kueue-es bench``'s command around the run: what it does with the run's result."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys

from kueue_es.perfbench import cli


class Counted:
    """Counts its reprs (the bench's RunResult is a repr over every workload of the run)."""

    reprs = 0

    def __repr__(self) -> str:
        Counted.reprs += 1
        return "Counted()"


async def result() -> Counted:
    return Counted()


def test_the_runs_result_is_kept_out_of_asyncio_runs_task() -> None:
    """asyncio.run's clean-up formats its main task's repr, result included (Python 3.11's
    signal.getsignal); run_kept hands the result back without it ever being formatted (issue 18)."""
    Counted.reprs = 0
    # asyncio.Runner installs its SIGINT handler (and so formats the task) only over Python's default one: a
    # process started in the background by a shell inherits SIGINT ignored, so the default is put back here
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        asyncio.run(result())
    finally:
        signal.signal(signal.SIGINT, previous)
    formatted = Counted.reprs
    Counted.reprs = 0
    kept = cli.run_kept(result())
    assert isinstance(kept, Counted)
    assert Counted.reprs == 0
    assert formatted > 0  # what run_kept avoids does happen in a plain asyncio.run


def test_a_bench_run_does_not_import_the_chaos_checks() -> None:
    """The replay and the invariants (and through them every decider's core) are for checking a chaos
    run's store afterwards: a bench process imports them only then, not at its start (issue 18: a tenth
    of a CPU second of the harness's share of the run)."""
    code = (
        "import sys, kueue_es.cli\n"
        "from kueue_es.perfbench import chaos, cli, driver, report\n"
        "print(sorted(m for m in ('kueue_es.deciders', 'kueue_es.replay', 'kueue_es.perfbench.invariants')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
