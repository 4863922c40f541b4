"""Admitter logic 21 and preemptor logic 10, with 20 and 9 kept for replay.

Kueue's fair preemption (pkg/scheduler/preemption/preemption.go fairPreemptions) takes the preemptor's own
lower-priority workloads when its ClusterQueue comes up in the target order. Since PR #14128 (issue #14122)
a first-strategy pass that did so without making the preemptor fit runs again over the candidates it set
aside: the preemptor's share has dropped, so they may pass now. Before, they went straight to the second
strategy, which takes one victim per ClusterQueue, and in the scenario below no targets were found at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter
from kueue_es.services.preemptor import core as preemptor
from tests.scenario_states import before_first_record

RERUN = Path(__file__).parents[1] / "scenarios/fairsharing/rerun-first-strategy-after-own-clusterqueue-victims.yaml"
PREEMPTOR_WL = "default/a-incoming"
VICTIMS = ["default/a1", "default/b5", "default/b6"]


def _nominated(outputs: list[types.Output]) -> list[str]:
    return sorted(
        t.workload.key
        for o in outputs
        if isinstance(o, types.PreemptionRequired) and o.workload.key == PREEMPTOR_WL
        for t in o.targets
    )


def _evicted(outputs: list[types.Decision] | list[types.Event]) -> list[str]:
    return sorted(o.workload.key for o in outputs if isinstance(o, types.EvictionRequested))


def test_admitter_21_nominates_after_the_second_pass_and_20_finds_no_targets() -> None:
    state, now_ms, partition = before_first_record(RERUN, admitter.ROLE)
    assert _nominated(admitter.decide(state, now_ms=now_ms, partition=partition)) == VICTIMS
    earlier = admitter.decide_as(20)(state, now_ms=now_ms, partition=partition)
    assert _nominated(earlier) == []
    assert not any(isinstance(o, types.WorkloadAdmitted | types.QuotaReserved) for o in earlier)
    assert admitter.LOGIC_VERSION >= 21 and 20 in admitter.EARLIER_LOGIC_VERSIONS


def test_preemptor_10_evicts_the_rerun_targets_and_9_evicts_nobody() -> None:
    state, now_ms, partition = before_first_record(RERUN, preemptor.ROLE)
    assert sorted(t.workload.key for _, n in state.nominations.values() for t in n.targets) == VICTIMS
    assert _evicted(preemptor.decide(state, now_ms=now_ms, partition=partition)) == VICTIMS
    assert _evicted(preemptor.decide_as(9)(state, now_ms=now_ms, partition=partition)) == []
    assert preemptor.LOGIC_VERSION >= 10 and 9 in preemptor.EARLIER_LOGIC_VERSIONS


def test_a_log_recorded_by_admitter_20_and_preemptor_9_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    old = {
        **deciders.BY_ROLE,
        admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 20)],
        preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, 9)],
    }
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(RERUN))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord)]
    assert {r.logic_version for r in records if r.role == admitter.ROLE} == {20}
    assert _evicted([e for _, e in run.log]) == []
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
