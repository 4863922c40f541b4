"""Kueue's CandidatesOrdering (common/ordering.go): admitter logic 18 and preemptor logic 7, and the
order of admitter 17 and preemptor 6 kept for replay.

With admission fair sharing Kueue compares two candidates of one ClusterQueue in different LocalQueues
by LocalQueue usage before priority, in any ClusterQueue; admitter 17 and preemptor 6 did so only in
the preemptor's own. ``tests/scenarios/preemption/afs-other-clusterqueue-localqueue-usage-before-priority.yaml``
(classical) and ``tests/scenarios/afs/fair-sharing-reclaims-from-the-localqueue-that-used-more.yaml``
(fair sharing, Kueue's integration test) reclaim from another ClusterQueue with two LocalQueues.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.scheduling import preemption
from kueue_es.services.admitter import core as admitter
from kueue_es.services.preemptor import core as preemptor
from tests.builders import Log, cluster_queue, flavor, local_queue, workload
from tests.scenario_states import before_first_record

SCENARIOS = Path(__file__).parents[1] / "scenarios"
CLASSICAL = SCENARIOS / "preemption/afs-other-clusterqueue-localqueue-usage-before-priority.yaml"
FAIR = SCENARIOS / "afs/fair-sharing-reclaims-from-the-localqueue-that-used-more.yaml"
PREEMPTOR_CQ = "preemptor"


def _candidate(
    name: str,
    *,
    cq: str = PREEMPTOR_CQ,
    priority: int = 0,
    reserved_at_ms: int = 1000,
    lq_usage: float = 0.0,
    evicted: bool = False,
) -> preemption.Candidate:
    return preemption.Candidate(
        key=f"default/{name}",
        workload=cast(WorkloadState, None),  # the order never reads it
        cluster_queue=cq,
        usage={},
        flavored=frozenset(),
        priority=priority,
        queue_ts_ms=0,
        reserved_at_ms=reserved_at_ms,
        evicted=evicted,
        uid=name,
        lq_usage=lq_usage,
    )


def _names(candidates: list[preemption.Candidate], *, lq_usage_in_every_cq: bool = True) -> list[str]:
    found = preemption.ordered(candidates, PREEMPTOR_CQ, of=lambda c: c, lq_usage_in_every_cq=lq_usage_in_every_cq)
    return [c.uid for c in found]


LOW_USAGE = _candidate("low_lq_usage", priority=1, lq_usage=0.1)
MID_USAGE = _candidate("mid_lq_usage", priority=10, lq_usage=0.5)
HIGH_USAGE_OTHER_CQ = _candidate("high_lq_usage_different_cq", cq="different_cq", priority=1, lq_usage=1.0)


@pytest.mark.parametrize(
    ("candidates", "want"),
    [
        pytest.param(
            [_candidate("high", priority=10), _candidate("low", priority=-10)],
            ["low", "high"],
            id="workloads sorted by priority",
        ),
        pytest.param(
            [_candidate("other", priority=10), _candidate("evicted", evicted=True)],
            ["evicted", "other"],
            id="evicted workload first",
        ),
        pytest.param(
            [_candidate("preemptorCq", priority=10), _candidate("other", cq="other", priority=10)],
            ["other", "preemptorCq"],
            id="workload from different CQ first",
        ),
        pytest.param(
            [
                _candidate("older", reserved_at_ms=0),
                _candidate("younger", reserved_at_ms=2000),
                _candidate("current", reserved_at_ms=1000),
            ],
            ["younger", "current", "older"],
            id="old workloads last",
        ),
        pytest.param(
            [LOW_USAGE, MID_USAGE], ["mid_lq_usage", "low_lq_usage"], id="workloads with higher LQ usage first"
        ),
        pytest.param(
            [MID_USAGE, HIGH_USAGE_OTHER_CQ],
            ["high_lq_usage_different_cq", "mid_lq_usage"],
            id="workloads from different CQ are sorted based on priority and timestamp",
        ),
    ],
)
def test_kueues_candidates_ordering_cases(candidates: list[preemption.Candidate], want: list[str]) -> None:
    """preemption_test.go TestCandidatesOrdering, with admission fair sharing where Kueue sets it (its
    priority-boost cases: :func:`test_kueues_priority_boost_cases`)."""
    assert _names(candidates) == want
    assert _names(list(reversed(candidates))) == want


def _pool_order(held: list[tuple[str, str | None]], *, gate: bool, priority: int = 10) -> list[str]:
    """The candidates CandidatePool makes of workloads holding quota in the preemptor's ClusterQueue (all of
    ``priority``, each with its priority-boost annotation or none), in CandidatesOrdering's order."""
    log = Log()
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "featureGates": {"PriorityBoost": gate},
    }
    cq = cluster_queue(PREEMPTOR_CQ, flavors={"default": {"cpu": 10}})
    log.apply_manifests(config, flavor("default"), cq, local_queue("lq", PREEMPTOR_CQ))
    for n, (name, boost) in enumerate(held):
        doc = workload(name, created=n, priority=priority, cpu="1")
        if boost is not None:
            doc["metadata"]["annotations"] = {"kueue.x-k8s.io/priority-boost": boost}
        log.apply_manifests(doc)
    log.settle(1000)
    pool = preemption.CandidatePool(log.state)
    found = preemption.ordered(pool.of(PREEMPTOR_CQ), PREEMPTOR_CQ, of=lambda c: c)
    return [c.workload.workload.metadata.name for c in found]


@pytest.mark.parametrize(
    ("held", "want"),
    [
        pytest.param(
            [("high-boost", "100"), ("low-boost", "5")],
            ["low-boost", "high-boost"],
            id="workloads sorted by effective priority with boost",
        ),
        pytest.param(
            [("missing-boost", None), ("has-boost", "5")],
            ["missing-boost", "has-boost"],
            id="workload missing priority boost defaults to zero",
        ),
        pytest.param(
            [("invalid-boost", "invalid"), ("valid-boost", "5")],
            ["invalid-boost", "valid-boost"],
            id="invalid priority boost defaults to zero",
        ),
    ],
)
def test_kueues_priority_boost_cases(held: list[tuple[str, str | None]], want: list[str]) -> None:
    """preemption_test.go TestCandidatesOrdering, its PriorityBoost cases (gate on): lower effective priority
    first. The candidates come from the fold through CandidatePool (admitter 37 and preemptor 17)."""
    assert _pool_order(held, gate=True) == want
    assert _pool_order(list(reversed(held)), gate=True) == want


def test_with_the_gate_off_the_boost_orders_nothing() -> None:
    """The same workloads with PriorityBoost off: equal priorities, so the one reserved last goes first."""
    assert _pool_order([("high-boost", "100"), ("low-boost", "5")], gate=False) == ["low-boost", "high-boost"]
    assert _pool_order([("low-boost", "5"), ("high-boost", "100")], gate=False) == ["high-boost", "low-boost"]


def test_same_named_localqueues_of_two_namespaces_are_two_localqueues() -> None:
    """Kueue PR #14547's case ("workloads from same-named LQs in different namespaces are sorted by LQ
    usage"): a LocalQueue is its namespace and name, so team-b/default's higher usage goes first."""
    low = _candidate("low_same_name_lq_usage", priority=-10, lq_usage=0.1)
    high = _candidate("high_same_name_lq_usage", priority=10, lq_usage=1.0)
    assert _names([low, high]) == ["high_same_name_lq_usage", "low_same_name_lq_usage"]


def test_localqueue_usage_orders_the_candidates_of_another_clusterqueue() -> None:
    """Two candidates of another ClusterQueue, in different LocalQueues: the higher usage first, before
    priority (logic 18 / 7); admitter 17 and preemptor 6 ordered them by priority."""
    heavy = _candidate("heavy", cq="other", priority=10, lq_usage=20.0)
    light = _candidate("light", cq="other", priority=1, lq_usage=12.0)
    assert _names([light, heavy]) == ["heavy", "light"]
    assert _names([light, heavy], lq_usage_in_every_cq=False) == ["light", "heavy"]
    # in the preemptor's own ClusterQueue both orders agree
    own_heavy = _candidate("own_heavy", priority=10, lq_usage=20.0)
    own_light = _candidate("own_light", priority=1, lq_usage=12.0)
    for every in (True, False):
        assert _names([own_light, own_heavy], lq_usage_in_every_cq=every) == ["own_heavy", "own_light"]


def test_each_clusterqueues_order_is_kept_where_kueues_comparison_is_not_transitive() -> None:
    """x_heavy < x_light by usage, x_light < y_mid by priority, y_mid < x_heavy by priority: Kueue's
    comparison has a cycle and Go's sort answers by input order. Here each ClusterQueue's candidates keep
    their order and the runs merge by priority: the same answer whatever the input order."""
    x_heavy = _candidate("x_heavy", cq="x", priority=10, lq_usage=5.0)
    x_light = _candidate("x_light", cq="x", priority=0, lq_usage=1.0)
    y_mid = _candidate("y_mid", cq="y", priority=5)
    want = ["y_mid", "x_heavy", "x_light"]
    assert _names([x_heavy, x_light, y_mid]) == want
    assert _names([y_mid, x_light, x_heavy]) == want
    assert _names([x_light, y_mid, x_heavy]) == want


def _before_first(path: Path, role: str) -> tuple[ClusterState, int, str]:
    """The state up to the scenario's first record of ``role``, that record's time and partition."""
    return before_first_record(path, role)


def _nominated_targets(outputs: list[types.Output]) -> list[str]:
    return sorted(t.workload.key for o in outputs if isinstance(o, types.PreemptionRequired) for t in o.targets)


def _evicted(outputs: list[types.Decision]) -> list[str]:
    return sorted(o.workload.key for o in outputs if isinstance(o, types.EvictionRequested))


@pytest.mark.parametrize("path", [CLASSICAL, FAIR], ids=["classical", "fair-sharing"])
def test_admitter_18_nominates_the_localqueue_that_used_more_and_17_as_before(path: Path) -> None:
    state, now_ms, partition = _before_first(path, admitter.ROLE)
    now = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert _nominated_targets(now) == ["default/high-a"]
    earlier = admitter.decide_as(17)(state, now_ms=now_ms, partition=partition)
    assert _nominated_targets(earlier) == ["default/low-b"]
    assert admitter.LOGIC_VERSION >= 18 and 17 in admitter.EARLIER_LOGIC_VERSIONS


@pytest.mark.parametrize("path", [CLASSICAL, FAIR], ids=["classical", "fair-sharing"])
def test_preemptor_7_evicts_from_the_localqueue_that_used_more_and_6_as_before(path: Path) -> None:
    state, now_ms, partition = _before_first(path, preemptor.ROLE)
    assert preemptor.LOGIC_VERSION >= 7 and 6 in preemptor.EARLIER_LOGIC_VERSIONS
    assert _evicted(preemptor.decide(state, now_ms=now_ms, partition=partition)) == ["default/high-a"]
    # the nomination (admitter 18's) names high-a; preemptor 6 searched again and took low-b
    for version in (5, 6):
        earlier = preemptor.decide_as(version)(state, now_ms=now_ms, partition=partition)
        assert _evicted(earlier) == ["default/low-b"]


@pytest.mark.parametrize("path", [CLASSICAL, FAIR], ids=["classical", "fair-sharing"])
def test_a_log_recorded_by_admitter_17_and_preemptor_6_replays_matched(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run recorded by the old deciders (low-b evicted) re-checks decision by decision: replay re-runs
    each record with the logic version it names (``deciders.EARLIER``)."""
    old = {
        **deciders.BY_ROLE,
        admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 17)],
        preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, 6)],
    }
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(path))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role != "seed"]
    assert {(r.role, r.logic_version) for r in records} == {(admitter.ROLE, 17), (preemptor.ROLE, 6)}
    assert _evicted([e for _, e in run.log if isinstance(e, types.EvictionRequested)]) == ["default/low-b"]
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
    assert report.matched == len(records) and all(u.role == "seed" for u in report.unverifiable)
