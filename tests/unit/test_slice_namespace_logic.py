"""Admitter logic 36 and preemptor logic 16: an elastic slice replaces only a slice of its own namespace.

Kueue PR #13082 (pkg/workloadslicing/workloadslicing.go ReplacedWorkloadSlice): a Workload whose
``kueue.x-k8s.io/workload-slice-replacement-for`` names another namespace's workload replaces nothing.
Admitter 35 took it for that workload's replacement, admitted it for the delta and finished the other.
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

CROSS = Path(__file__).parents[1] / "scenarios/elastic/replacement-for-another-namespace-replaces-nothing.yaml"


def _reserved(outputs: list[types.Output]) -> list[str]:
    return sorted({o.workload.key for o in outputs if isinstance(o, types.QuotaReserved | types.WorkloadAdmitted)})


def test_admitter_36_does_not_replace_across_namespaces_and_35_did() -> None:
    """At the cycle after test-new arrives: 36 leaves it pending; 35 admitted it as default/test-old's
    replacement."""
    state, now_ms, partition = before_first_record(CROSS, admitter.ROLE)
    assert _reserved(admitter.decide(state, now_ms=now_ms, partition=partition)) == []
    assert _reserved(admitter.decide_as(35)(state, now_ms=now_ms, partition=partition)) == ["other-ns/test-new"]


def test_a_log_recorded_by_admitter_35_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    old = {
        **deciders.BY_ROLE,
        admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 35)],
        preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, 15)],
    }
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(CROSS))
    finished = {e.workload.key for _, e in run.log if isinstance(e, types.QuotaReleased)}
    assert "default/test-old" in finished  # released as the replaced slice
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
