"""Admitter logic 20 and preemptor logic 9, with 19 and 8 kept for replay.

A workload left waiting for the cycle's preemptions (WaitingForPreemptedWorkloads, Kueue's DeferredFit) is
requeued by Kueue with reason PendingPreemption, which makes it its ClusterQueue's sticky head under
BestEffortFIFO (pkg/scheduler/scheduler.go processEntry, pkg/cache/queue/cluster_queue.go
requeueIfNotPresent): a higher-priority arrival in that ClusterQueue is not tried before it. The fold marks
it (``ClusterState.deferred``); logic 20 reads the mark, logic 19 did not.

Kueue adds a DeferredFit entry's usage to the cycle's snapshot, so a third head whose targets overlap too
is searched again with that quota taken and preempts new targets. Preemptor logic 9 takes the deferred
workloads' quota when it searches overlapping targets again; 8 did not, and evicted fewer workloads than
the admitter nominated.
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
from kueue_es.services.preemptor import core as preemptor
from tests.scenario_states import before_first_record

SCENARIOS = Path(__file__).parents[1] / "scenarios"
STICKY = SCENARIOS / "preemption/overlapping-targets-deferred-fit-stays-sticky-head.yaml"
THREE_HEADS = SCENARIOS / "preemption/overlapping-targets-three-heads-all-preempted.yaml"
HERO, URGENT = "eng-alpha/wl-hero", "eng-alpha/wl-urgent"


def _before_second_admitter_record(log: list[tuple[int, types.Event]]) -> tuple[ClusterState, int, str]:
    records = [i for i, (_, e) in enumerate(log) if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    second = records[1]
    state = ClusterState()
    for seq, event in log[:second]:
        apply(state, event, seq=seq)
    record = log[second][1]
    assert isinstance(record, types.DecisionRecord)
    return state, record.now_ms, record.partition


def _admitted(outputs: list[types.Output]) -> list[str]:
    return sorted(o.workload.key for o in outputs if isinstance(o, types.WorkloadAdmitted | types.QuotaReserved))


def test_the_fold_marks_a_deferred_workload_until_it_is_admitted() -> None:
    run = run_scenario(load_scenario(STICKY))
    state, now_ms, partition = _before_second_admitter_record(run.log)
    assert state.deferred == {HERO: "cq-hero"}
    state = ClusterState()
    for seq, event in run.log:
        apply(state, event, seq=seq)
    assert state.deferred == {}  # admitted: no longer anybody's sticky head


def test_admitter_20_keeps_the_deferred_workload_at_the_head_and_19_does_not() -> None:
    run = run_scenario(load_scenario(STICKY))
    state, now_ms, partition = _before_second_admitter_record(run.log)
    assert _admitted(admitter.decide(state, now_ms=now_ms, partition=partition)) == [
        HERO,
        "eng-alpha/wl-tiny-pending",
    ]
    earlier = admitter.decide_as(19)(state, now_ms=now_ms, partition=partition)
    assert _admitted(earlier) == ["eng-alpha/wl-tiny-pending", URGENT]
    assert admitter.LOGIC_VERSION >= 20 and 19 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_parked_deferred_workload_is_no_longer_sticky() -> None:
    run = run_scenario(load_scenario(STICKY))
    state, now_ms, _ = _before_second_admitter_record(run.log)
    hero = state.workloads[HERO]
    apply(
        state,
        types.WorkloadInadmissible(workload=hero.ref, reason="Pending", message="parked", at_ms=now_ms, parked=True),
        seq=state.last_seq + 1,
    )
    assert state.deferred == {}


def test_a_log_recorded_by_admitter_19_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run logic 19 recorded (wl-urgent admitted before wl-hero) re-checks decision by decision: the
    fold's new mark changes nothing logic 19 decides."""
    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 19)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(STICKY))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    assert {r.logic_version for r in records} == {19}
    admitted = [e.workload.key for _, e in run.log if isinstance(e, types.WorkloadAdmitted)]
    assert URGENT in admitted and HERO not in admitted
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []


def _evicted(outputs: list[types.Decision]) -> list[str]:
    return sorted(o.workload.key for o in outputs if isinstance(o, types.EvictionRequested))


def test_preemptor_9_takes_the_deferred_workloads_quota_and_8_does_not() -> None:
    state, now_ms, partition = before_first_record(THREE_HEADS, preemptor.ROLE)
    assert state.deferred == {"default/wl-b": "cq-b"}
    nominated = sorted(t.workload.key for _, n in state.nominations.values() for t in n.targets)
    assert nominated == ["default/wl-v", "default/wl-w"]
    assert _evicted(preemptor.decide(state, now_ms=now_ms, partition=partition)) == nominated
    earlier = preemptor.decide_as(8)(state, now_ms=now_ms, partition=partition)
    assert _evicted(earlier) == ["default/wl-v"]
    deferred = [o for o in earlier if isinstance(o, types.PreemptionIssued) and o.workload.key == "default/wl-c"]
    assert [o.message for o in deferred] == [preemptor.DEFERRED_MESSAGE]
    assert preemptor.LOGIC_VERSION >= 9 and 8 in preemptor.EARLIER_LOGIC_VERSIONS


def test_a_log_recorded_by_preemptor_8_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    old = {**deciders.BY_ROLE, preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, 8)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(THREE_HEADS))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == preemptor.ROLE]
    assert {r.logic_version for r in records} == {8}
    assert _evicted([e for _, e in run.log if isinstance(e, types.EvictionRequested)]) == ["default/wl-v"]
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
