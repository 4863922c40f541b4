"""The ideal bound: greedy, priority then FIFO, instant admission, checked by hand and against the physical limits."""

from __future__ import annotations

import yaml

from kueue_es.perfbench import generator, ideal
from tests.bench.configs import BASELINE, TINY


def bound(text: str) -> ideal.IdealResult:
    return ideal.ideal_bound(generator.generate(generator.parse_config(yaml.safe_load(text))))


def test_tiny_config_by_hand() -> None:
    """2 CPU; smalls (1 CPU, 1 s) at 100, 200, 300 ms; big (2 CPU, 0.5 s, higher priority) at 250 ms.

    t=100 small 0 in, t=200 small 1 in (full); at 1100 one CPU frees: big does not fit and is
    skipped, small 2 goes in (till 2100); at 1200 one CPU frees, big still does not fit; at 2100
    both are free and big runs till 2600.
    """
    result = bound(TINY)
    assert result.makespan_ms == 2_600
    assert result.work_bound_ms == 2_000  # (3 x 1000 x 1000 + 2000 x 500) mCPU·ms / 2000 mCPU
    small, big = result.classes["small"], result.classes["big"]
    assert (small.count, small.average_time_to_admission_ms, small.average_time_to_finish_ms) == (3, 266, 1_266)
    assert (big.count, big.average_time_to_admission_ms, big.average_time_to_finish_ms) == (1, 1_850, 2_350)
    assert round(result.usage_percent["q"], 2) == 76.92  # 4,000,000 / (2000 x 2600)


def test_priority_first_when_both_fit() -> None:
    """Freed capacity goes to the higher priority first, then the older: a big waiting when a small arrives goes first."""
    text = TINY.replace("nominalQuota: 2", "nominalQuota: 3")
    result = bound(text)
    # t=100, 200, 300 the smalls take all 3 CPU; big (250) waits for 2 CPU: at 1100 one frees, at 1200 two: big runs
    assert result.classes["big"].average_time_to_admission_ms == 1_200 - 250
    assert result.makespan_ms == 1_700


def test_baseline_is_at_the_physical_limit() -> None:
    """Kueue's baseline: no scheduler finishes before work / quota (66 s) nor before the last creation + its runtime
    (61 s); the greedy ideal is within 2 % of the former (research/kueue-perf.md §7.1: 67.0 s)."""
    result = bound(BASELINE)
    assert result.workloads == 15_000
    assert result.work_bound_ms == 66_000
    assert result.makespan_ms >= max(result.work_bound_ms, 61_000)
    assert result.makespan_ms <= result.work_bound_ms * 1.02
    assert sum(c.count for c in result.classes.values()) == 15_000
    large = result.classes["large"].average_time_to_admission_ms
    small = result.classes["small"].average_time_to_admission_ms
    assert large < small  # priority first


def test_the_planned_workloads_given_give_the_same_bound() -> None:
    """The driver hands its planned workloads over rather than making them a second time (issue 18):
    the bound is the one worked out from the configuration alone."""
    generated = generator.generate(generator.parse_config(yaml.safe_load(BASELINE)))
    assert ideal.ideal_bound(generated, generated.planned()) == ideal.ideal_bound(generated)
