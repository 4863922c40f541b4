"""Admitter logic 19, with 18 kept for replay.

A requeue trigger on any Cohort of a tree brings back the parked workloads of the whole tree, as Kueue's
queue manager requeues a Cohort's root on every create or change (pkg/cache/queue/manager.go
AddOrUpdateCohort). Logic 18 counted only the cohorts above a ClusterQueue, so a new Cohort with quota
under a sibling branch, with no ClusterQueue of its own, woke nobody.
"""

from __future__ import annotations

from pathlib import Path

from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter

SCENARIOS = Path(__file__).parents[1] / "scenarios"
TWO_LEVELS_AWAY = SCENARIOS / "quota/cohort-quota-two-levels-away-admits.yaml"


def test_admitter_19_requeues_the_tree_on_a_cohort_with_no_clusterqueue_under_it() -> None:
    """The Cohort ``bank`` (quota, under ``right``) has no ClusterQueue: its creation still brings back the
    parked workload of ``cq`` (under ``left``, same root)."""
    run = run_scenario(load_scenario(TWO_LEVELS_AWAY))
    fact = next(
        i
        for i, (_, e) in enumerate(run.log)
        if isinstance(e, types.CohortObserved) and e.cohort.metadata.name == "bank"
    )
    record = next(
        i
        for i, (_, e) in enumerate(run.log)
        if i > fact and isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE
    )
    state = ClusterState()
    for seq, event in run.log[:record]:
        apply(state, event, seq=seq)
    head = run.log[record][1]
    assert isinstance(head, types.DecisionRecord)
    now = admitter.decide(state, now_ms=head.now_ms, partition=head.partition)
    assert [o.workload.key for o in now if isinstance(o, types.WorkloadAdmitted)] == ["default/wl"]
    assert admitter.decide_as(18)(state, now_ms=head.now_ms, partition=head.partition) == []
    assert admitter.LOGIC_VERSION >= 19 and 18 in admitter.EARLIER_LOGIC_VERSIONS
