"""Admitter logic 22, with 21 kept for replay.

Kueue's workload controller drops the requeueState of a workload whose ``spec.active`` is false (PR #7734,
pkg/controller/core/workload_controller.go): activated again, it counts its PodsReady timeouts from 1. The
fold marks a workload set inactive by hand (``WorkloadState.requeue_cleared``); logic 22 reads the mark,
logic 21 kept counting and deactivated it past ``backoffLimitCount``.
"""

from __future__ import annotations

from pathlib import Path

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter

SCENARIO = Path(__file__).parents[1] / "scenarios/podsready/deactivation-resets-requeue-count.yaml"
W1 = "default/w1"


def _timeout(outputs: list[types.Output]) -> types.EvictionRequested | None:
    return next((o for o in outputs if isinstance(o, types.EvictionRequested) and o.reason == "PodsReadyTimeout"), None)


def _before_last_timeout() -> tuple[ClusterState, types.DecisionRecord]:
    run = run_scenario(load_scenario(SCENARIO))
    records = [
        i
        for i, (_, e) in enumerate(run.log)
        if isinstance(e, types.DecisionRecord)
        and e.role == admitter.ROLE
        and any(
            isinstance(o, types.EvictionRequested) and o.reason == "PodsReadyTimeout"
            # its decisions: carried in it since event schema 17, else its output messages right after it
            for o in (e.carried or [o for _, o in run.log[i + 1 : i + 1 + e.output_count]])
        )
    ]
    assert len(records) == 2  # one timeout before the deactivation, one after
    last = records[-1]
    state = ClusterState()
    for seq, event in run.log[:last]:
        apply(state, event, seq=seq)
    record = run.log[last][1]
    assert isinstance(record, types.DecisionRecord)
    return state, record


def test_admitter_22_counts_from_one_after_deactivation_and_21_deactivates() -> None:
    state, record = _before_last_timeout()
    assert state.workloads[W1].requeue_cleared and state.workloads[W1].requeue_count == 1
    now = admitter.decide(state, now_ms=record.now_ms, partition=record.partition)
    evicted = _timeout(now)
    assert evicted is not None and evicted.requeue_count == 1
    earlier = admitter.decide_as(21)(state, now_ms=record.now_ms, partition=record.partition)
    assert _timeout(earlier) is None
    assert any(isinstance(o, types.WorkloadDeactivated) and o.workload.key == W1 for o in earlier)
    assert admitter.LOGIC_VERSION >= 22 and 21 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_new_timeout_ends_the_mark() -> None:
    run = run_scenario(load_scenario(SCENARIO))
    state = ClusterState()
    for seq, event in run.log:
        apply(state, event, seq=seq)
    assert not state.workloads[W1].requeue_cleared and state.workloads[W1].requeue_count == 1


def test_the_run_replays() -> None:
    run = run_scenario(load_scenario(SCENARIO))
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
