"""Admitter logic 19 and preemptor logic 8, with 18 and 7 kept for replay.

A requeue trigger on any Cohort of a tree brings back the parked workloads of the whole tree, as Kueue's
queue manager requeues a Cohort's root on every create or change (pkg/cache/queue/manager.go
AddOrUpdateCohort). Logic 18 counted only the cohorts above a ClusterQueue, so a new Cohort with quota
under a sibling branch, with no ClusterQueue of its own, woke nobody.

An entry whose preemption targets overlap the victims of the cycle's earlier preemptions is assigned again
with those victims gone, on its nominated flavors (Kueue's gate RecomputeAssignmentUponPreemptionTargetsOverlap,
scheduler.go updateAssignmentIfNeeded): new targets are preempted in the same cycle, a fit waits for the
earlier preemptions (DeferredFit). Logic 18 and preemptor logic 7 skipped it.
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
SAME_CYCLE = SCENARIOS / "preemption/overlapping-targets-recomputed-same-cycle.yaml"
GATE_OFF = SCENARIOS / "preemption/overlapping-targets-skipped-gate-off.yaml"
DEFERRED = SCENARIOS / "preemption/overlapping-targets-recompute-defers-fit.yaml"
STICKY = SCENARIOS / "fairsharing/overlapping-targets-recompute-keeps-nominated-flavor.yaml"
NON_BORROWING_LEAF = SCENARIOS / "fairsharing/overlapping-targets-recomputed-prefers-non-borrowing-leaf.yaml"
TWO_LEVELS_AWAY = SCENARIOS / "quota/cohort-quota-two-levels-away-admits.yaml"


def _nominations(outputs: list[types.Output]) -> dict[str, list[str]]:
    return {
        o.workload.key: sorted(t.workload.key for t in o.targets)
        for o in outputs
        if isinstance(o, types.PreemptionRequired)
    }


def _pending(outputs: list[types.Output], key: str) -> tuple[str, str]:
    for out in outputs:
        if isinstance(out, types.WorkloadInadmissible | types.PendingOutcome) and out.workload.key == key:
            return out.reason, out.message
    raise AssertionError(f"no pending outcome for {key}")


def _evicted(outputs: list[types.Decision]) -> list[str]:
    return sorted(o.workload.key for o in outputs if isinstance(o, types.EvictionRequested))


def test_admitter_19_gives_an_overlapping_entry_new_targets_and_18_skips_it() -> None:
    state, now_ms, partition = before_first_record(SAME_CYCLE, admitter.ROLE)
    now = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert _nominations(now) == {"default/alpha": ["default/beta-2"], "default/gamma": ["default/beta-1"]}
    earlier = admitter.decide_as(18)(state, now_ms=now_ms, partition=partition)
    assert _nominations(earlier) == {"default/alpha": ["default/beta-2"]}
    assert _pending(earlier, "default/gamma") == (
        "WaitingForQuota",
        "Workload has overlapping preemption targets with another workload",
    )
    assert admitter.LOGIC_VERSION >= 19 and 18 in admitter.EARLIER_LOGIC_VERSIONS


def test_the_gate_off_skips_an_overlapping_entry_as_18_did() -> None:
    state, now_ms, partition = before_first_record(GATE_OFF, admitter.ROLE)
    outputs = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert _nominations(outputs) == {"default/alpha": ["default/beta-2"]}
    assert _pending(outputs, "default/gamma")[1] == "Workload has overlapping preemption targets with another workload"


def test_admitter_19_defers_an_entry_that_fits_once_the_earlier_preemptions_complete() -> None:
    state, now_ms, partition = before_first_record(DEFERRED, admitter.ROLE)
    now = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert _nominations(now) == {"eng-alpha/wl-tiny-pending": ["eng-alpha/wl-rest-admitted"]}
    # Kueue's TestScheduleRecomputePreemptionTargets, word for word
    assert _pending(now, "eng-alpha/wl-hero") == (
        "WaitingForPreemptedWorkloads",
        "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete",
    )
    parked = [o for o in now if isinstance(o, types.WorkloadInadmissible) and o.workload.key == "eng-alpha/wl-hero"]
    assert [(o.parked, o.bookmark) for o in parked] == [(False, None)]


def test_admitter_19_recomputes_on_the_nominated_flavors_only() -> None:
    state, now_ms, partition = before_first_record(STICKY, admitter.ROLE)
    now = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert _nominations(now) == {"default/wl-pending-high-prio-2": ["default/wl-admitted-default"]}
    assert _pending(now, "default/wl-pending-high-prio-1") == (
        "WaitingForQuota",
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 10 more "
        "needed, skipping flavor on-demand as it is not found in the nomination mapping for resource cpu",
    )


@pytest.mark.parametrize(
    ("path", "want"),
    [
        (SAME_CYCLE, ["default/beta-1", "default/beta-2"]),
        (NON_BORROWING_LEAF, ["eng-alpha/wl-noisy-admitted", "eng-alpha/wl-rest-admitted"]),
    ],
    ids=["classical", "fair-sharing"],
)
def test_preemptor_8_evicts_the_recomputed_targets_and_7_refuses_them(path: Path, want: list[str]) -> None:
    state, now_ms, partition = before_first_record(path, preemptor.ROLE)
    assert _evicted(preemptor.decide(state, now_ms=now_ms, partition=partition)) == want
    earlier = preemptor.decide_as(7)(state, now_ms=now_ms, partition=partition)
    assert len(_evicted(earlier)) == 1
    refused = [o for o in earlier if isinstance(o, types.PreemptionIssued) and not o.targets]
    assert [o.message for o in refused] == [preemptor.OVERLAP_MESSAGE]
    assert preemptor.LOGIC_VERSION >= 8 and 7 in preemptor.EARLIER_LOGIC_VERSIONS


def test_a_log_recorded_by_admitter_18_and_preemptor_7_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run the old deciders recorded (gamma skipped, one eviction) re-checks decision by decision."""
    old = {
        **deciders.BY_ROLE,
        admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 18)],
        preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, 7)],
    }
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(SAME_CYCLE))
    records = [
        e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role in {admitter.ROLE, preemptor.ROLE}
    ]
    assert {(r.role, r.logic_version) for r in records} == {(admitter.ROLE, 18), (preemptor.ROLE, 7)}
    assert _evicted([e for _, e in run.log if isinstance(e, types.EvictionRequested)]) == ["default/beta-2"]
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []


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
