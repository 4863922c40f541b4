"""Admitter logic 30, with 29 kept for replay.

Kueue's workload controller, on an update of a workload holding quota where workload.PriorityChanged
holds (pkg/workload/workload.go: a WorkloadPriorityClass named anew, or another spec.priority), moves
the inadmissible workloads of its cohort tree back to their queues (workload_controller.go Update):
the workload may now be a preemption candidate. Logic 29 left them parked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import CoreRun, run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter

CASE = Path(__file__).parents[1] / "scenarios/config/resource-transformation-retain-credits-freed-by-preemption.yaml"


def _nominated(outputs: list[types.Output]) -> dict[str, list[str]]:
    return {
        o.workload.key: sorted(t.workload.key for t in o.targets)
        for o in outputs
        if isinstance(o, types.PreemptionRequired)
    }


def _run_by_29(monkeypatch: pytest.MonkeyPatch) -> CoreRun:
    """The scenario run with the admitter of logic 29."""
    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 29)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        return run_scenario(load_scenario(CASE))


def test_admitter_30_requeues_on_a_priority_change_and_29_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run_by_29(monkeypatch)
    # Where logic 29 settled: wl parked for lack of cpu_credits, wl-1 moved to the low class after it.
    last = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE][-1]
    assert run.state.workloads["default/wl"].parked_seq > 0
    decide_29 = admitter.decide_as(29)
    assert _nominated(decide_29(run.state, now_ms=last.now_ms, partition=last.partition)) == {}
    nominated = admitter.decide(run.state, now_ms=last.now_ms, partition=last.partition)
    assert _nominated(nominated) == {"default/wl": ["default/wl-1"]}
    assert admitter.LOGIC_VERSION >= 30 and 29 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_log_recorded_by_admitter_29_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run_by_29(monkeypatch)
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord)]
    assert {r.logic_version for r in records if r.role == admitter.ROLE} == {29}
    assert not any(isinstance(e, types.PreemptionRequired) for _, e in run.log)  # 29 never requeued wl
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
