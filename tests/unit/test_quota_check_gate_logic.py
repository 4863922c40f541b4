"""Admitter logic 31 and preemptor logic 14, with 30 and 13 kept for replay.

Kueue ignores the resources a ClusterQueue does not cover (resources.quotaCheckStrategy IgnoreUndeclared)
only with the feature gate QuotaCheckStrategy on (pkg/scheduler/flavorassigner/flavorassigner.go
IgnoreUndeclaredResources). Admitter 30 and preemptor 13 applied the strategy whatever the gate said.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.scheduling import queues
from kueue_es.services.admitter import core as admitter
from kueue_es.services.preemptor import core as preemptor
from tests.scenario_states import before_first_record

GATE_OFF = Path(__file__).parents[1] / "scenarios/config/quota-check-ignore-undeclared-gate-off.yaml"


def _reserved(outputs: list[types.Output]) -> list[str]:
    return sorted({o.workload.key for o in outputs if isinstance(o, types.QuotaReserved | types.WorkloadAdmitted)})


def test_admitter_31_honours_the_gate_and_30_does_not() -> None:
    state, now_ms, partition = before_first_record(GATE_OFF, admitter.ROLE)
    assert not queues.ignores_undeclared(state.configuration)
    assert _reserved(admitter.decide(state, now_ms=now_ms, partition=partition)) == []
    earlier = admitter.decide_as(30)(state, now_ms=now_ms, partition=partition)
    assert _reserved(earlier) == ["default/gate-off-wl"]
    assert state.configuration.feature_gates == {"QuotaCheckStrategy": False}  # the fold's is left alone
    assert admitter.LOGIC_VERSION >= 31 and 30 in admitter.EARLIER_LOGIC_VERSIONS
    assert preemptor.LOGIC_VERSION >= 14 and 13 in preemptor.EARLIER_LOGIC_VERSIONS


def test_the_view_before_the_gate_is_kept_while_the_configuration_is() -> None:
    state, _, _ = before_first_record(GATE_OFF, admitter.ROLE)
    first = queues.without_quota_check_gate(state)
    assert queues.ignores_undeclared(first.configuration)
    assert queues.without_quota_check_gate(state).configuration is first.configuration


def test_a_log_recorded_by_admitter_30_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    old = {
        **deciders.BY_ROLE,
        admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 30)],
        preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, 13)],
    }
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(GATE_OFF))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord)]
    assert {r.logic_version for r in records if r.role == admitter.ROLE} == {30}
    assert "default/gate-off-wl" in {e.workload.key for _, e in run.log if isinstance(e, types.WorkloadAdmitted)}
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
