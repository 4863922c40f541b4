"""Admitter logic 24 and TAS placer logic 7: balanced placement picks its domains above the slice level by
whole slices, with admitter 23 and placer 6 kept for replay.

Kueue's applyBalancedPlacementAlgorithm (pkg/cache/scheduler/tas_balanced_placement.go) calls
selectOptimalDomainSetToFit with the request's slice size when the preferred level is above the slice
level. Admitter 23 and placer 6 counted single pods there: with a sub-block preferred and host slices of 2
they took a sub-block whose pods covered the request but whose nodes could not balance the slices, and fell
back to BestFit in it.
"""

from __future__ import annotations

from pathlib import Path

from kueue_es import deciders
from kueue_es.events import tas, types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter
from kueue_es.services.tas_placer import core as placer

TAS = Path(__file__).parents[1] / "scenarios/tas"
ADMISSION = TAS / "balanced-placement-four-levels-host-slices-under-subblock.yaml"
REPLACEMENT = TAS / "node-not-ready-balanced-replacement-four-levels-host-slices.yaml"


def _state_before(path: Path, role: str) -> tuple[ClusterState, types.DecisionRecord]:
    """The folded state on which the run's first ``role`` record writing a TopologyAssigned was decided,
    and that record."""
    log = run_scenario(load_scenario(path)).log
    for i, (_, event) in enumerate(log):
        if isinstance(event, types.DecisionRecord) and event.role == role:
            # its decisions: carried in it since event schema 17, else its output messages right after it
            outputs = list(event.carried) or [e for _, e in log[i + 1 : i + 1 + event.output_count]]
            if any(isinstance(o, types.TopologyAssigned) for o in outputs):
                state = ClusterState()
                for seq, earlier in log[:i]:
                    apply(state, earlier, seq=seq)
                return state, event
    raise AssertionError(f"no {role} record placing a topology in {path.name}")


def _hosts(outputs: list[types.Output]) -> dict[str, int]:
    """Pods per host of the one TopologyAssigned among ``outputs`` (pod set ``main``)."""
    [placed] = [o for o in outputs if isinstance(o, types.TopologyAssigned)]
    return {d.values[-1]: d.count for d in tas.decode(placed.assignments["main"]).domains}


def test_admitter_24_picks_the_sub_block_by_slices_and_23_is_kept() -> None:
    state, record = _state_before(ADMISSION, admitter.ROLE)
    now = admitter.decide(state, now_ms=record.now_ms, partition=record.partition)
    earlier = admitter.decide_as(23)(state, now_ms=record.now_ms, partition=record.partition)
    assert _hosts(now) == {"x3": 10, "x4": 8, "x5": 2}  # sub-block sb2, balanced
    assert _hosts(earlier) == {"x1": 18, "x2": 2}  # sub-block sb1, BestFit after the balanced attempt failed
    assert admitter.LOGIC_VERSION >= 24 and 23 in admitter.EARLIER_LOGIC_VERSIONS


def test_placer_7_replaces_by_slices_and_6_is_kept() -> None:
    state, record = _state_before(REPLACEMENT, placer.ROLE)
    now = placer.decide(state, now_ms=record.now_ms, partition=record.partition)
    earlier = placer.decide_as(6)(state, now_ms=record.now_ms, partition=record.partition)
    assert _hosts(now) == {"x3": 10, "x4": 8, "x5": 2}
    assert _hosts(earlier) == {"x1": 18, "x2": 2}
    assert placer.LOGIC_VERSION >= 7 and 6 in placer.EARLIER_LOGIC_VERSIONS
    assert deciders.EARLIER[(placer.ROLE, 6)].logic_version == 6


def test_both_runs_replay() -> None:
    for path in (ADMISSION, REPLACEMENT):
        run = run_scenario(load_scenario(path))
        assert check_log(run.messages, deciders.BY_ROLE).mismatches == []
