"""Admitter logic 47, with 46 kept for replay: a victim taken out of the tree once (Kueue PR #14269).

Kueue's scheduler.go fits took a preempting entry's targets and the cycle's earlier victims out of the snapshot
together; a workload in both lists was taken out twice, so its ClusterQueue showed room it does not have. Since PR
#14269 (PreemptedWorkloads.MergeWithTargets) each is taken out once. kueue-es's TAS staleness check
(cycle._placement_stale) did the same double removal up to logic 46: an entry whose quota did not fit was taken for
one whose placement went stale and assigned again, instead of being skipped for its overlapping targets.
"""

from __future__ import annotations

from pathlib import Path

from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter

SCENARIO = Path(__file__).parents[1] / "scenarios/tas/cohort-overlapping-target-taken-out-once-gate-off-skipped.yaml"


def _before_last_admit_record() -> tuple[ClusterState, int, str]:
    """The scenario's state up to its last admitter record (the cycle that nominates a and b), its time and
    partition."""
    run = run_scenario(load_scenario(SCENARIO))
    last = max(
        i
        for i, (_, event) in enumerate(run.log)
        if isinstance(event, types.DecisionRecord) and event.role == admitter.ROLE
    )
    state = ClusterState()
    for seq, event in run.log[:last]:
        apply(state, event, seq=seq)
    record = run.log[last][1]
    assert isinstance(record, types.DecisionRecord)
    return state, record.now_ms, record.partition


def _pending(outputs: list[types.Output], key: str) -> tuple[str, str]:
    for out in outputs:
        if isinstance(out, types.WorkloadInadmissible | types.PendingOutcome) and out.workload.key == key:
            return out.reason, out.message
    raise AssertionError(f"no pending outcome for {key}")


def _nominated(outputs: list[types.Output]) -> dict[str, list[str]]:
    return {
        o.workload.key: sorted(t.workload.key for t in o.targets)
        for o in outputs
        if isinstance(o, types.PreemptionRequired)
    }


def test_admitter_47_skips_an_entry_whose_target_is_an_earlier_victim_and_46_assigned_it_again() -> None:
    state, now_ms, partition = _before_last_admit_record()
    now = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert _nominated(now) == {"default/a": ["default/v"]}
    assert _pending(now, "default/b") == (
        "WaitingForQuota",
        "Workload has overlapping preemption targets with another workload",
    )
    earlier = admitter.decide_as(46)(state, now_ms=now_ms, partition=partition)
    assert _nominated(earlier) == {"default/a": ["default/v"]}
    assert _pending(earlier, "default/b") == (
        "WaitingForQuota",
        "couldn't assign flavors to pod set one: insufficient unused quota for cpu in flavor tas-default, 2 more needed",
    )
    assert admitter.LOGIC_VERSION >= 47 and 46 in admitter.EARLIER_LOGIC_VERSIONS
