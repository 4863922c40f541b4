"""Admission fair sharing arithmetic (SEMANTICS §8; Kueue admission_fair_sharing.go)."""

from __future__ import annotations

import math

import pytest

from kueue_es.projections import afs


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("168h", 604800.0), ("5m", 300.0), ("1h30m", 5400.0), ("0s", 0.0), ("0", 0.0), ("1.5s", 1.5), ("250ms", 0.25)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert afs.go_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "5 m", "m5", "1d", "-5m"])
def test_bad_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="not a Go duration"):
        afs.go_duration_seconds(text)


def test_alpha_is_one_half_after_one_half_life() -> None:
    assert afs.alpha(3600, 3600) == pytest.approx(0.5)
    assert afs.alpha(10, 0) == 0.0


def test_decay_composes_so_sampling_times_do_not_matter() -> None:
    """Advancing in two steps equals advancing once: the ledger can be updated only when
    the admitted usage changes, with the same values Kueue's periodic sampling gives."""
    once = afs.Ledger(consumed={"cpu": 8.0}, admitted={"cpu": 2000}, last_ms=0)
    twice = afs.Ledger(consumed={"cpu": 8.0}, admitted={"cpu": 2000}, last_ms=0)
    once.advance(7_200_000, 3600)
    twice.advance(1_800_000, 3600)
    twice.advance(7_200_000, 3600)
    assert once.consumed["cpu"] == pytest.approx(twice.consumed["cpu"])
    assert once.consumed["cpu"] == pytest.approx(2 + 6 * 0.25)  # two half-lives towards 2 cores


def test_zero_half_life_keeps_no_history() -> None:
    ledger = afs.Ledger(consumed={"cpu": 8.0}, admitted={"cpu": 1000}, last_ms=0)
    assert ledger.decayed(1000, 0) == {}


def test_memory_counts_in_bytes_and_cpu_in_cores() -> None:
    assert afs.as_float("cpu", 1500) == 1.5
    assert afs.as_float("memory", 1024) == 1024.0
    assert math.isclose(afs.alpha(300, 604800), 1 - 0.5 ** (300 / 604800))
