"""``kueue-es bench``'s command around the run: what it does with the run's result."""

from __future__ import annotations

import asyncio

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
    asyncio.run(result())
    formatted = Counted.reprs
    Counted.reprs = 0
    kept = cli.run_kept(result())
    assert isinstance(kept, Counted)
    assert Counted.reprs == 0
    assert formatted > 0  # what run_kept avoids does happen in a plain asyncio.run
