"""Preemptor logic 12, with 11 kept for replay.

Kueue marks every flavor-resource of a workload's TAS pod sets Preempt once the workload needs
preemption (pkg/scheduler/flavorassigner/flavorassigner.go assignFlavors, updateModeForTASRequests),
so victims are searched among the workloads using any of them, and a preempting entry's TAS usage is
added to the cycle's snapshot (pkg/scheduler/scheduler.go processEntry, cq.AddUsage). Preemptor logic
11 searched only the FRs short of quota and booked no domains for the rest of its batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.preemptor import core as preemptor
from tests.scenario_states import before_first_record

TAS = Path(__file__).parents[1] / "scenarios/tas"
FRAGMENTED = TAS / "preemption-fit-quota-resource-needs-preemption-on-nodes.yaml"
OVERLAP = TAS / "preemption-overlap-recomputes-targets-and-topology.yaml"


def _evicted(outputs: list[types.Decision] | list[types.Event]) -> list[str]:
    return sorted(o.workload.key for o in outputs if isinstance(o, types.EvictionRequested))


def test_preemptor_12_takes_the_victims_of_every_tas_resource_and_11_none() -> None:
    state, now_ms, partition = before_first_record(FRAGMENTED, preemptor.ROLE)
    assert _evicted(preemptor.decide(state, now_ms=now_ms, partition=partition)) == [
        "default/low-cpu",
        "default/low-mem",
    ]
    assert _evicted(preemptor.decide_as(11)(state, now_ms=now_ms, partition=partition)) == []
    assert preemptor.LOGIC_VERSION >= 12 and 11 in preemptor.EARLIER_LOGIC_VERSIONS


def test_preemptor_12_books_the_first_answers_domains_and_11_defers_the_second() -> None:
    state, now_ms, partition = before_first_record(OVERLAP, preemptor.ROLE)
    both = ["default/wl-low-admitted", "default/wl-mid-admitted"]
    assert _evicted(preemptor.decide(state, now_ms=now_ms, partition=partition)) == both
    earlier = preemptor.decide_as(11)(state, now_ms=now_ms, partition=partition)
    assert _evicted(earlier) == ["default/wl-low-admitted"]


@pytest.mark.parametrize("path", [FRAGMENTED, OVERLAP], ids=lambda p: p.stem)
def test_a_log_recorded_by_preemptor_11_replays_matched(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = {**deciders.BY_ROLE, preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, 11)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(path))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord)]
    assert {r.logic_version for r in records if r.role == preemptor.ROLE} == {11}
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
