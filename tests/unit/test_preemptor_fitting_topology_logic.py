"""Preemptor logic 19, with 18 kept for replay: the TAS domains of the batch's workloads that take quota
without evicting anybody are booked with their quota.

Kueue's scheduler adds an entry's usage to its snapshot before the next entry, its TAS usage included
(pkg/scheduler/scheduler.go processEntry ``cq.AddUsage``, netUsage; flavorassigner.go
ComputeTASNetUsage): a DeferredFit entry's, whose assignment was made with the cycle's earlier victims
removed, and a fitting entry's. Preemptor logic 18 booked their quota only: searching overlapping
targets again, a later nomination fitted in the domain a waiting DeferredFit workload will take, and a
nomination that fits now left its domain free for the next one, so a victim Kueue preempts in that
cycle was not evicted.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.scheduling.tas import cycle as tas_cycle
from kueue_es.services.preemptor import core as preemptor
from tests.scenario_states import before_first_record

TAS = Path(__file__).parents[1] / "scenarios/tas"
DEFERRED = TAS / "preemption-overlap-deferred-fit-domain-taken-third-preempts.yaml"
FITS_NOW = TAS / "preemption-nomination-fits-now-books-its-domain.yaml"


def _evicted(outputs: list[types.Decision]) -> list[str]:
    return sorted(o.workload.key for o in outputs if isinstance(o, types.EvictionRequested))


def _messages(outputs: list[types.Decision]) -> dict[str, str]:
    return {o.workload.key: o.message for o in outputs if isinstance(o, types.PreemptionIssued)}


def test_preemptor_19_counts_the_deferred_workloads_domain_and_18_defers_the_third() -> None:
    state, now_ms, partition = before_first_record(DEFERRED, preemptor.ROLE)
    assert state.deferred == {"default/wl-b": "cq-b"}  # the admitter left wl-b waiting (DeferredFit)
    assert _evicted(preemptor.decide(state, now_ms=now_ms, partition=partition)) == ["default/wl-v", "default/wl-w"]
    earlier = preemptor.decide_as(18)(state, now_ms=now_ms, partition=partition)
    assert _evicted(earlier) == ["default/wl-v"]
    assert _messages(earlier)["default/wl-c"] == preemptor.DEFERRED_MESSAGE
    assert preemptor.LOGIC_VERSION >= 19 and 18 in preemptor.EARLIER_LOGIC_VERSIONS


def test_preemptor_19_books_the_domain_of_a_nomination_that_fits_now_and_18_not() -> None:
    state, now_ms, partition = before_first_record(FITS_NOW, preemptor.ROLE)
    assert "default/wl-v" in state.releasable  # finished after the nominations, its quota not released yet
    outputs = preemptor.decide(state, now_ms=now_ms, partition=partition)
    assert _evicted(outputs) == ["default/wl-w"]
    assert _messages(outputs)["default/wl-a"].endswith("the workload fits without preemption")
    earlier = preemptor.decide_as(18)(state, now_ms=now_ms, partition=partition)
    assert _evicted(earlier) == []
    assert all(m.endswith("the workload fits without preemption") for m in _messages(earlier).values())


@pytest.mark.parametrize("path", [DEFERRED, FITS_NOW], ids=lambda p: p.stem)
def test_a_log_recorded_by_preemptor_18_replays_matched(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = {**deciders.BY_ROLE, preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, 18)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(path))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord)]
    assert {r.logic_version for r in records if r.role == preemptor.ROLE} == {18}
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []


def test_a_log_recorded_by_preemptor_19_replays_matched() -> None:
    run = run_scenario(load_scenario(DEFERRED))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord)]
    assert {r.logic_version for r in records if r.role == preemptor.ROLE} == {preemptor.LOGIC_VERSION}
    assert check_log(run.messages, deciders.BY_ROLE).mismatches == []


def test_a_claim_removed_leaves_the_cycles_usage_as_it_was() -> None:
    """``CycleTopology.remove`` undoes ``add``: the cached usage and a fresh computation agree, and the
    usage version moved on (the placer's phase-1 cache must not reuse capacities across the change)."""
    state, _, _ = before_first_record(DEFERRED, preemptor.ROLE)
    cycle = tas_cycle.CycleTopology(state)
    before = {leaf: dict(v) for leaf, v in cycle.usage("tas").items()}
    assert before  # wl-v and wl-w hold their nodes
    claim = {"tas": {leaf: {"cpu": 2000} for leaf in before}}
    version = cycle.version
    cycle.add(claim)
    assert all(cycle.usage("tas")[leaf]["cpu"] == before[leaf].get("cpu", 0) + 2000 for leaf in before)
    cycle.remove(claim)
    assert cycle.version == version + 2
    after = {leaf: {r: a for r, a in v.items() if a} for leaf, v in cycle.usage("tas").items()}
    assert after == {leaf: {r: a for r, a in v.items() if a} for leaf, v in before.items()}
    fresh = tas_cycle.CycleTopology(state)
    fresh.added = cycle.added
    assert {leaf: {r: a for r, a in v.items() if a} for leaf, v in fresh.usage("tas").items()} == after
