"""Admitter logic 27, with 26 kept for replay.

Kueue's scheduler checks an entry against the cycle's snapshot before admitting or preempting
(pkg/scheduler/scheduler.go updateAssignmentIfNeeded): when the quota fits but the nominated topology
placement no longer does, the gate TASRecomputeAssignmentWithinSchedulingCycle (on by default) computes
the assignment again on the nominated flavors, and with the gate off the entry is skipped. Logic 26
placed a Fit entry again on the same flavors and ignored the gate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter
from tests.scenario_states import before_first_record

TAS = Path(__file__).parents[1] / "scenarios/tas"
RECLAIM = TAS / "cohort-reclaim-reserved-capacity-last-workload-recomputes-and-preempts.yaml"
GATE_OFF = TAS / "cohort-two-nominated-same-node-gate-off-second-waits.yaml"


def _nominated(outputs: list[types.Output]) -> dict[str, list[str]]:
    return {
        o.workload.key: sorted(t.workload.key for t in o.targets)
        for o in outputs
        if isinstance(o, types.PreemptionRequired)
    }


def _reserved(outputs: list[types.Output]) -> list[str]:
    return sorted({o.workload.key for o in outputs if isinstance(o, types.QuotaReserved | types.WorkloadAdmitted)})


def _last_admit_state(path: Path) -> tuple[ClusterState, int, str]:
    """The state folded up to the scenario's last admitter record (the cycle the case is about), that
    record's cycle time (ms) and partition."""
    run = run_scenario(load_scenario(path))
    last = max(i for i, (_, e) in enumerate(run.log) if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE)
    state = ClusterState()
    for seq, event in run.log[:last]:
        apply(state, event, seq=seq)
    record = run.log[last][1]
    assert isinstance(record, types.DecisionRecord)
    return state, record.now_ms, record.partition


def test_admitter_27_recomputes_the_stale_entry_and_26_skips_it() -> None:
    state, now_ms, partition = _last_admit_state(RECLAIM)
    assert _nominated(admitter.decide(state, now_ms=now_ms, partition=partition)) == {
        "default/b1": ["default/a2-admitted", "default/a3-admitted"],
        "default/c1": ["default/a1-admitted"],
    }
    earlier = admitter.decide_as(26)(state, now_ms=now_ms, partition=partition)
    assert _nominated(earlier) == {"default/b1": ["default/a2-admitted", "default/a3-admitted"]}
    assert admitter.LOGIC_VERSION >= 27 and 26 in admitter.EARLIER_LOGIC_VERSIONS


def test_admitter_27_skips_the_stale_entry_with_the_gate_off_and_26_places_it_again() -> None:
    state, now_ms, partition = before_first_record(GATE_OFF, admitter.ROLE)
    assert _reserved(admitter.decide(state, now_ms=now_ms, partition=partition)) == ["default/a1"]
    assert _reserved(admitter.decide_as(26)(state, now_ms=now_ms, partition=partition)) == ["default/a1", "default/b1"]


@pytest.mark.parametrize("path", [RECLAIM, GATE_OFF], ids=lambda p: p.stem)
def test_a_log_recorded_by_admitter_26_replays_matched(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 26)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(path))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord)]
    assert {r.logic_version for r in records if r.role == admitter.ROLE} == {26}
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
