"""TAS placer logic 8, with 7 and 6 kept for replay.

Flavors whose topology ends at the hostname share their nodes' capacity (SEMANTICS-ADVANCED A.2.4,
Kueue TASHandleOverlappingFlavors): the admission counts every such flavor's usage on a node, and so
does Kueue's findReplacementAssignment (tas_flavor_snapshot.go, the same aggregatedDomainUsages).
Placer logics 6 and 7 placed a failed node's pods counting only their own flavor's usage, so they could put a
replacement on a node another flavor's workload had filled; 8 counts them all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.tas_placer import core as placer
from tests.scenario_states import before_first_record

SHARED = Path(__file__).parents[1] / "scenarios/tas/node-not-ready-replacement-blocked-by-other-flavor-usage.yaml"
WL1 = "default/wl1"


def test_placer_8_counts_the_other_flavor_on_the_node_and_7_does_not() -> None:
    state, now_ms, partition = before_first_record(SHARED, placer.ROLE)
    [evicted] = placer.decide(state, now_ms=now_ms, partition=partition)
    assert isinstance(evicted, types.EvictionRequested) and evicted.workload.key == WL1
    for version in (7, 6):
        [replaced] = placer.decide_as(version)(state, now_ms=now_ms, partition=partition)
        assert isinstance(replaced, types.TopologyAssigned) and replaced.workload.key == WL1
    assert placer.LOGIC_VERSION >= 8 and {6, 7} <= set(placer.EARLIER_LOGIC_VERSIONS)


def test_decide_as_refuses_a_version_it_does_not_keep() -> None:
    with pytest.raises(ValueError, match="placer logic version 5"):
        placer.decide_as(5)


def test_a_log_recorded_by_placer_7_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Logic 7 replaced x3's pod on x4, beside the other flavor's pod; replay re-runs it as 7 decided."""
    old = {**deciders.BY_ROLE, placer.ROLE: deciders.EARLIER[(placer.ROLE, 7)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(SHARED))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == placer.ROLE]
    assert records and {r.logic_version for r in records} == {7}
    assert not any(isinstance(e, types.EvictionRequested) for _, e in run.log)
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
