"""The feature gates that order queues, entries and preemption candidates: PriorityBoost, PrioritySortingWithinCohort
and PrioritizePreemptorWorkloads (admitter logic 37 and preemptor logic 17; 36 and 16 kept for replay, reading none).

Kueue: pkg/util/priority/priority.go (EffectivePriority), pkg/workload/workload.go GetQueueOrderTimestamp,
pkg/scheduler/scheduler.go makeClassicalIterator and reserveCapacityForUnreclaimablePreempt,
pkg/scheduler/fair_sharing_iterator.go entryComparer.less, pkg/cache/queue/cluster_queue.go (the heap order and
priorityBoostAnnotationChanged). The unit-test cases are ported from scheduler_test.go TestEntryOrdering,
preemption_policy_test.go and preemption_test.go TestPriorityInfo.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import msgspec
import pytest

from kueue_es import deciders
from kueue_es.events import models, types
from kueue_es.projections import cluster, quota
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.scheduling import cycle, entries, flavors, preemption, queues, visibility
from kueue_es.services.admitter import core as admitter
from kueue_es.services.dispatcher import kube_events
from kueue_es.services.preemptor import core as preemptor
from tests.builders import Log, cluster_queue, flavor, local_queue, parse, workload

BOOST = cluster.PRIORITY_BOOST_ANNOTATION
SECOND = 1000
NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the builders' time 0


def _config(**gates: bool) -> dict[str, Any]:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}


def _state(**gates: bool) -> ClusterState:
    return ClusterState(configuration=models.Configuration(feature_gates=gates))


def _workload(name: str, *, priority: int | None = None, boost: str | None = None, created_s: int = 0) -> Any:
    doc = workload(name, priority=priority, created=created_s, cpu="1")
    if boost is not None:
        doc["metadata"]["annotations"] = {BOOST: boost}
    return parse(doc)


# --- PriorityBoost: the effective priority -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("priority", "boost", "gate", "effective", "base", "boosted"),
    [
        pytest.param(None, None, True, 0, 0, 0, id="empty workload"),
        pytest.param(100, None, True, 100, 100, 0, id="workload with priority only"),
        pytest.param(200, "50", True, 250, 200, 50, id="workload with priority and positive boost"),
        pytest.param(100, "-30", True, 70, 100, -30, id="workload with priority and negative boost"),
        pytest.param(100, "not-a-number", True, 100, 100, 0, id="workload with invalid boost annotation falls back"),
        pytest.param(2**31 - 1, "1", True, 2**31, 2**31 - 1, 1, id="workload with effective priority above int32 max"),
        pytest.param(100, "50", False, 100, 100, 0, id="feature disabled: boost annotation ignored"),
    ],
)
def test_kueues_priority_info_cases(
    priority: int | None, boost: str | None, gate: bool, effective: int, base: int, boosted: int
) -> None:
    """preemption_test.go TestPriorityInfo: effective = base + boost, the boost only with the gate on."""
    state = _state(PriorityBoost=gate)
    wl = _workload("w", priority=priority, boost=boost)
    assert cluster.priority_of(wl, state) == base
    assert cluster.priority_boost(wl, state.configuration) == boosted
    assert cluster.effective_priority(wl, state) == effective
    # Kueue's Preempted events write it so (preemption.go IssuePreemptions)
    held = WorkloadState(workload=wl, observed_seq=1)
    assert kube_events._priority_info(state, held) == f"{effective} (base: {base}, boost: {boosted})"


@pytest.mark.parametrize(
    ("value", "want"),
    [("", 0), ("7", 7), ("+7", 7), ("-7", -7), ("007", 7), (" 7", None), ("7.0", None), ("1_000", None)]
    + [(str(2**31 - 1), 2**31 - 1), (str(2**31), None), (str(-(2**31)), -(2**31)), (str(-(2**31) - 1), None)],
)
def test_the_annotation_is_read_as_go_reads_an_int32(value: str, want: int | None) -> None:
    """strconv.ParseInt(value, 10, 32), which Kueue's PriorityBoost uses."""
    assert cluster.parse_priority_boost(value) == want


def _preemption_sides(
    preemptor_priority: int,
    candidate_priority: int,
    *,
    preemptor_boost: str | None = None,
    candidate_boost: str | None = None,
    preemptor_created: int = 0,
    candidate_created: int = 0,
) -> tuple[preemption.Preemptor, preemption.Candidate]:
    state = _state(PriorityBoost=True)
    mine = _workload("preemptor", priority=preemptor_priority, boost=preemptor_boost, created_s=preemptor_created)
    theirs = _workload("candidate", priority=candidate_priority, boost=candidate_boost, created_s=candidate_created)
    cq = parse(cluster_queue("cq", flavors={"default": {"cpu": 1}}))
    side = preemption.Preemptor(
        key=mine.key,
        cq=cq,
        priority=cluster.effective_priority(mine, state),
        queue_ts_ms=mine.metadata.creation_timestamp_ms,
        usage={},
        frs_need=frozenset(),
    )
    other = preemption.Candidate(
        key=theirs.key,
        workload=WorkloadState(workload=theirs, observed_seq=1),
        cluster_queue="cq",
        usage={},
        flavored=frozenset(),
        priority=cluster.effective_priority(theirs, state),
        queue_ts_ms=theirs.metadata.creation_timestamp_ms,
        reserved_at_ms=NOW,
        evicted=False,
        uid="candidate",
    )
    return side, other


@pytest.mark.parametrize(
    ("policy", "sides", "want"),
    [
        pytest.param(
            "LowerPriority",
            _preemption_sides(200, 100, candidate_boost="150"),
            False,
            id="LowerPriority: boost makes low-priority immune to medium-priority preemption",
        ),
        pytest.param(
            "LowerPriority",
            _preemption_sides(100, 200, preemptor_boost="200"),
            True,
            id="LowerPriority: boost on preemptor enables preemption of higher raw priority",
        ),
        pytest.param(
            "LowerOrNewerEqualPriority",
            _preemption_sides(100, 200, preemptor_boost="100", candidate_created=1),
            True,
            id="LowerOrNewerEqualPriority: boost equalizes priorities, older preemptor can preempt newer candidate",
        ),
        pytest.param(
            "LowerOrNewerEqualPriority",
            _preemption_sides(100, 200, preemptor_boost="100", preemptor_created=1),
            False,
            id="LowerOrNewerEqualPriority: equal effective priority, newer preemptor cannot preempt older candidate",
        ),
        pytest.param(
            "Any",
            _preemption_sides(50, 100, candidate_boost="200"),
            True,
            id="Any: always satisfies regardless of priority or boost",
        ),
    ],
)
def test_kueues_preemption_policy_boost_cases(
    policy: str, sides: tuple[preemption.Preemptor, preemption.Candidate], want: bool
) -> None:
    """common/preemption_policy_test.go TestSatisfiesPreemptionPolicy, its PriorityBoost cases."""
    assert preemption.satisfies(policy, *sides) is want


# --- the entry order (TestEntryOrdering) ----------------------------------------------------------------------


def _entry(
    state: ClusterState,
    uid: str,
    name: str,
    *,
    created_s: int,
    priority: int = 0,
    borrowing: int = 0,
    waiting: bool = False,
    evicted_s: int | None = None,
    preempted: tuple[str, int] | None = None,
) -> entries.Entry:
    """A head as TestEntryOrdering's: ``evicted_s`` a PodsReadyTimeout eviction (kept as the queue time only
    with requeuingStrategy.timestamp Eviction, as the fold does), ``preempted`` its Preempted condition's
    reason and time. ``uid``: Kueue's sort leaves ties unordered, kueue-es breaks them by UID (ours)."""
    doc = workload(name.replace("_", "-"), priority=priority, created=created_s, cpu="1")
    doc["metadata"]["uid"] = f"{uid}/{name}"  # Kueue's names, some not valid object names
    wl = WorkloadState(workload=parse(doc), observed_seq=1)
    assert wl.workload.metadata.creation_timestamp_ms == NOW + created_s * SECOND
    wait = state.configuration.wait_for_pods_ready
    if evicted_s is not None and (wait is None or wait.requeuing_strategy.timestamp == "Eviction"):
        wl.order_ms = NOW + evicted_s * SECOND
    if preempted is not None and preempted[0] == preemption.IN_COHORT_RECLAIM_WHILE_BORROWING:
        wl.reclaim_preempted_ms = NOW + preempted[1] * SECOND
    assignment = flavors.Assignment(mode="Fit", borrowing=borrowing)
    cq = parse(cluster_queue(f"cq-{uid}", flavors={"default": {"cpu": 1}}))
    order = cluster.effective_order(wl, state)
    return entries.Entry(wl, cq, assignment, -order[0], order, (), waiting)


def _kueue_input(state: ClusterState) -> list[entries.Entry]:
    return [
        _entry(state, "01", "old_borrowing", created_s=0, borrowing=1),
        _entry(state, "02", "old", created_s=1),
        _entry(state, "03", "new", created_s=3),
        _entry(state, "04", "high_pri_borrowing", created_s=3, priority=1, borrowing=1),
        _entry(state, "05", "new_high_pri", created_s=4, priority=1),
        _entry(state, "06", "new_borrowing", created_s=3, borrowing=1),
        _entry(state, "07", "evicted_borrowing", created_s=1, borrowing=1, evicted_s=2),
        _entry(state, "08", "recently_evicted", created_s=0, evicted_s=2),
        _entry(state, "09", "high_pri_borrowing_more", created_s=3, priority=1, borrowing=2),
    ]


def _preempted_input(state: ClusterState) -> list[entries.Entry]:
    reclaim = preemption.IN_COHORT_RECLAIM_WHILE_BORROWING
    return [
        _entry(
            state, "01", "old-mid-recently-preempted-in-queue", created_s=0, priority=1, preempted=("InClusterQueue", 5)
        ),
        _entry(
            state, "02", "old-mid-recently-reclaimed-while-borrowing", created_s=0, priority=1, preempted=(reclaim, 6)
        ),
        _entry(
            state,
            "03",
            "old-mid-more-recently-reclaimed-while-borrowing",
            created_s=0,
            priority=1,
            preempted=(reclaim, 7),
        ),
        _entry(state, "04", "old-mid-not-preempted-yet", created_s=1, priority=1),
        _entry(state, "05", "preemptor", created_s=7, priority=2),
    ]


def _preemptor_input(state: ClusterState) -> list[entries.Entry]:
    return [
        _entry(state, "01", "preemptor-borrowing", created_s=1, priority=1, borrowing=1, waiting=True),
        _entry(state, "02", "preemptor-not-borrowing", created_s=2, priority=1, waiting=True),
        _entry(state, "03", "not-preemptor-not-borrowing", created_s=0, priority=2),
    ]


def _order(state: ClusterState, made: list[entries.Entry]) -> list[str]:
    tree = quota.build(state)
    ordered = entries.ordered(list(reversed(made)), state=state, tree=tree)
    return [e.workload.workload.metadata.uid.split("/", 1)[1] for e in ordered]


def _creation_strategy(state: ClusterState) -> ClusterState:
    wait = models.WaitForPodsReadyConfig(requeuing_strategy=models.RequeuingStrategy(timestamp="Creation"))
    config = models.Configuration(feature_gates=state.configuration.feature_gates, wait_for_pods_ready=wait)
    return ClusterState(configuration=config)


@pytest.mark.parametrize(
    ("gates", "creation", "make", "want"),
    [
        pytest.param(
            {"PrioritySortingWithinCohort": True},
            False,
            _kueue_input,
            ["new_high_pri", "old", "recently_evicted", "new", "high_pri_borrowing", "old_borrowing"]
            + ["evicted_borrowing", "new_borrowing", "high_pri_borrowing_more"],
            id="Priority sorting is enabled (default) using pods-ready Eviction timestamp (default)",
        ),
        pytest.param(
            {"PrioritySortingWithinCohort": True},
            True,
            _kueue_input,
            ["new_high_pri", "recently_evicted", "old", "new", "high_pri_borrowing", "old_borrowing"]
            + ["evicted_borrowing", "new_borrowing", "high_pri_borrowing_more"],
            id="Priority sorting is enabled (default) using pods-ready Creation timestamp",
        ),
        pytest.param(
            {"PrioritySortingWithinCohort": False},
            False,
            _kueue_input,
            ["old", "recently_evicted", "new", "new_high_pri", "old_borrowing", "evicted_borrowing"]
            + ["high_pri_borrowing", "new_borrowing", "high_pri_borrowing_more"],
            id="Priority sorting is disabled using pods-ready Eviction timestamp",
        ),
        pytest.param(
            {"PrioritySortingWithinCohort": False},
            True,
            _kueue_input,
            ["recently_evicted", "old", "new", "new_high_pri", "old_borrowing", "evicted_borrowing"]
            + ["high_pri_borrowing", "new_borrowing", "high_pri_borrowing_more"],
            id="Priority sorting is disabled using pods-ready Creation timestamp",
        ),
        pytest.param(
            {"PrioritySortingWithinCohort": False},
            False,
            _preempted_input,
            ["old-mid-recently-preempted-in-queue", "old-mid-not-preempted-yet"]
            + [
                "old-mid-recently-reclaimed-while-borrowing",
                "preemptor",
                "old-mid-more-recently-reclaimed-while-borrowing",
            ],
            id="Some workloads are preempted; Priority sorting is disabled",
        ),
        pytest.param(
            {"PrioritySortingWithinCohort": True},
            False,
            _preempted_input,
            ["preemptor", "old-mid-recently-preempted-in-queue", "old-mid-recently-reclaimed-while-borrowing"]
            + ["old-mid-more-recently-reclaimed-while-borrowing", "old-mid-not-preempted-yet"],
            id="Some workloads are preempted; Priority sorting is enabled",
        ),
        pytest.param(
            {"PrioritySortingWithinCohort": True, "PrioritizePreemptorWorkloads": True},
            False,
            _preemptor_input,
            ["preemptor-not-borrowing", "preemptor-borrowing", "not-preemptor-not-borrowing"],
            id="Some workloads are preemptors; PrioritizePreemptorWorkloads is enabled",
        ),
    ],
)
def test_kueues_entry_ordering_cases(gates: dict[str, bool], creation: bool, make: Any, want: list[str]) -> None:
    """scheduler_test.go TestEntryOrdering (classical iterator)."""
    state = _state(**gates)
    if creation:
        state = _creation_strategy(state)
    assert _order(state, make(state)) == want


def test_preemptors_go_first_with_prioritize_preemptor_workloads_off_too() -> None:
    """TestEntryOrdering's 'Some workloads are preemptors; PrioritizePreemptorWorkloads is disabled' wants
    not-preemptor-not-borrowing first: Kueue lets another head take what the preemptor's victims free. kueue-es
    keeps its nominated preemptors first on purpose (docs/preemption.md, "who gets the freed capacity"), so the
    gate off gives the order it gives on."""
    state = _state(PrioritizePreemptorWorkloads=False)
    assert _order(state, _preemptor_input(state)) == [
        "preemptor-not-borrowing",
        "preemptor-borrowing",
        "not-preemptor-not-borrowing",
    ]


def test_the_reclaim_timestamp_is_the_folds_preemption_and_goes_with_the_next_reservation() -> None:
    """GetQueueOrderTimestamp: 1 ms after an InCohortReclaimWhileBorrowing preemption, gate off only; the
    Preempted condition (and so the tweak) goes with the next reservation (SetQuotaReservation)."""
    log = _one_admitted(PrioritySortingWithinCohort=False)
    wl = log.state.workloads["default/w"]
    ref = wl.ref
    at = NOW + 5 * SECOND
    log.add(
        types.EvictionRequested(
            workload=ref,
            cluster_queue="cq",
            reason="Preempted",
            message="m",
            at_ms=at,
            preemption_reason=preemption.IN_COHORT_RECLAIM_WHILE_BORROWING,
        )
    )
    assert cluster.queue_order_ts(wl, log.state.configuration) == at + 1
    on = models.Configuration(feature_gates={"PrioritySortingWithinCohort": True})
    assert cluster.queue_order_ts(wl, on) == wl.workload.metadata.creation_timestamp_ms
    log.add(types.WorkloadStopped(workload=ref, at_ms=at + 1))
    log.settle(at + 2)  # released, then reserved again
    assert wl.reservation is not None and wl.reclaim_preempted_ms == 0


def _one_admitted(**gates: bool) -> Log:
    log = Log()
    log.apply_manifests(
        _config(**gates),
        flavor("default"),
        cluster_queue("cq", flavors={"default": {"cpu": 4}}),
        local_queue("lq", "cq"),
    )
    log.apply_manifests(workload("w", created=1, cpu="1"))
    log.settle(NOW)
    return log


# --- PriorityBoost through the admitter ----------------------------------------------------------------------


def _boosted(name: str, boost: str | None, **kwargs: Any) -> dict[str, Any]:
    doc = workload(name, **kwargs)
    if boost is not None:
        doc["metadata"]["annotations"] = {BOOST: boost}
    return doc


def _strict_queue(**gates: bool) -> Log:
    log = Log()
    cq = cluster_queue("cq", flavors={"default": {"cpu": 1}}, strategy="StrictFIFO")
    log.apply_manifests(_config(**gates), flavor("default"), cq, local_queue("lq", "cq"))
    return log


def _admitted(decisions: list[types.Output]) -> list[str]:
    return [d.workload.key for d in decisions if isinstance(d, types.QuotaReserved | types.WorkloadAdmitted)]


@pytest.mark.parametrize(("gate", "first"), [(True, "default/boosted"), (False, "default/plain")])
def test_the_boost_orders_the_clusterqueue(gate: bool, first: str) -> None:
    """cluster_queue.go baseCompareFunc: the heap orders by effective priority. One slot: the first in order wins."""
    log = _strict_queue(PriorityBoost=gate)
    log.apply_manifests(
        workload("plain", created=1, priority=5, cpu="1"), _boosted("boosted", "10", created=2, priority=0, cpu="1")
    )
    assert _admitted(log.settle(NOW)) == [first]


def test_a_negative_boost_moves_a_workload_back() -> None:
    log = _strict_queue(PriorityBoost=True)
    log.apply_manifests(
        _boosted("sunk", "-10", created=1, priority=5, cpu="1"), workload("plain", created=2, priority=0, cpu="1")
    )
    assert _admitted(log.settle(NOW)) == ["default/plain"]


def test_logic_36_reads_no_boost_and_37_does() -> None:
    log = _strict_queue(PriorityBoost=True)
    log.apply_manifests(
        workload("plain", created=1, priority=5, cpu="1"), _boosted("boosted", "10", created=2, priority=0, cpu="1")
    )
    assert _admitted(admitter.decide_as(36)(log.state, now_ms=NOW)) == ["default/plain"]
    assert _admitted(admitter.decide(log.state, now_ms=NOW)) == ["default/boosted"]
    assert log.state.configuration.feature_gates == {"PriorityBoost": True}  # the fold's is left alone
    assert admitter.LOGIC_VERSION >= 37 and 36 in admitter.EARLIER_LOGIC_VERSIONS
    assert preemptor.LOGIC_VERSION >= 17 and 16 in preemptor.EARLIER_LOGIC_VERSIONS


def test_the_view_before_the_gates_is_kept_while_the_configuration_is() -> None:
    log = _strict_queue(PriorityBoost=True, PrioritySortingWithinCohort=False)
    first = queues.without_ordering_gates(log.state)
    assert first.configuration.feature_gates == {
        "PriorityBoost": False,
        "PrioritySortingWithinCohort": True,
        "PrioritizePreemptorWorkloads": False,
    }
    assert queues.without_ordering_gates(log.state).configuration is first.configuration
    plain = _strict_queue()
    assert queues.without_ordering_gates(plain.state) is plain.state


def test_boosting_a_parked_workload_queues_it_again() -> None:
    """cluster_queue.go: with the gate on, a changed priority-boost annotation moves a workload off the
    inadmissible list; the annotation is not spec, so nothing else would."""
    log = Log()
    log.apply_manifests(
        _config(PriorityBoost=True),
        flavor("default"),
        cluster_queue("cq", flavors={"default": {"cpu": 1}}),
        local_queue("lq", "cq"),
    )
    log.apply_manifests(workload("running", created=1, cpu="1"), workload("waiting", created=2, cpu="1"))
    assert _admitted(log.settle(NOW)) == ["default/running"]
    waiting = log.state.workloads["default/waiting"]
    assert waiting.parked_seq  # NoFit, parked under BestEffortFIFO
    log.apply_manifests(_boosted("waiting", "1", created=2, cpu="1"))
    decided = log.settle(NOW + SECOND)
    tried = [d for d in decided if isinstance(d, types.WorkloadInadmissible | types.PendingOutcome)]
    assert [d.workload.key for d in tried] == ["default/waiting"]  # tried again: still no room, parked again
    assert log.state.workloads["default/waiting"].parked_seq > log.state.workloads["default/waiting"].boost_changed_seq
    assert admitter.decide_as(36)(log.state, now_ms=NOW + 2 * SECOND) == []  # 36: still parked


# --- PrioritizePreemptorWorkloads under fair sharing -----------------------------------------------------------


def _fair_state(**gates: bool) -> ClusterState:
    log = Log()
    cqs = []
    for name, nominal in (("cq-a", 2), ("cq-b", 2), ("lender", 4)):
        cq = cluster_queue(name, flavors={"default": {"cpu": nominal}})
        cq["spec"]["cohortName"] = "pool"
        cqs.append(cq)
    config = _config(**gates)
    config["fairSharing"] = {}
    log.apply_manifests(config, flavor("default"), *cqs)
    return log.state


def _fair_order(state: ClusterState) -> list[str]:
    made = {e.cq.metadata.name: e for e in _preemptor_input(state)}
    fit = flavors.Assignment(mode="Fit")  # its borrowing is the tree's: cq-a's, below
    a = msgspec.structs.replace(made["cq-01"], cq=state.cluster_queues["cq-a"], assignment=fit)  # the older preemptor
    b = msgspec.structs.replace(made["cq-02"], cq=state.cluster_queues["cq-b"], assignment=fit)
    c = msgspec.structs.replace(made["cq-03"], cq=state.cluster_queues["lender"])  # not a preemptor, priority 2
    tree = quota.build(state, usage={"cq-a": {"default": {"cpu": 3000}}})  # cq-a borrows: the higher share
    ordered = entries.ordered([c, a, b], state=state, tree=tree)
    return [e.workload.workload.metadata.uid.split("/", 1)[1] for e in ordered]


def test_preemptors_meet_in_the_tournament_with_the_gate_on() -> None:
    """fair_sharing_iterator.go entryComparer.less: preemptors first at each cohort, then the shares: of the two
    preemptors, the one in the ClusterQueue with the lower share (cq-b, not borrowing) wins. Off, kueue-es takes
    its nominated preemptors before the tournament, in queue order (the older first, ours)."""
    assert _fair_order(_fair_state(PrioritizePreemptorWorkloads=True)) == [
        "preemptor-not-borrowing",
        "preemptor-borrowing",
        "not-preemptor-not-borrowing",
    ]
    assert _fair_order(_fair_state(PrioritizePreemptorWorkloads=False)) == [
        "preemptor-borrowing",
        "preemptor-not-borrowing",
        "not-preemptor-not-borrowing",
    ]


BOOSTED = Path(__file__).parents[1] / "scenarios/preemption/priority-boost-boosted-pending-workload-preempts.yaml"


def test_a_log_recorded_by_admitter_36_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log that admitter 36 and preemptor 16 wrote with the gate PriorityBoost on (and a boost annotation
    that changes) is re-run by them exactly; the fold's new index and triggers change nothing they read."""
    old = {
        **deciders.BY_ROLE,
        admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 36)],
        preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, 16)],
    }
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(BOOSTED))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord)]
    assert {r.logic_version for r in records if r.role == admitter.ROLE} == {36}
    admitted = {e.workload.key for _, e in run.log if isinstance(e, types.WorkloadAdmitted)}
    assert "default/wl-low" not in admitted  # 36 read no boost: wl-low stayed parked
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []


@pytest.mark.parametrize(("gate", "first"), [(True, "boosted"), (False, "plain")])
def test_the_visibility_api_lists_a_boosted_workload_in_its_place(gate: bool, first: str) -> None:
    """pkg/visibility/storage: the pending workloads in the ClusterQueue's heap order (EffectivePriority),
    each shown with its base priority."""
    log = _strict_queue(PriorityBoost=gate)
    cq = cluster_queue("held", flavors={"default": {"cpu": 1}})
    cq["spec"]["stopPolicy"] = "Hold"  # nothing is admitted: both stay pending
    log.apply_manifests(cq, local_queue("held-lq", "held"))
    log.apply_manifests(
        workload("plain", queue="held-lq", created=1, priority=5, cpu="1"),
        _boosted("boosted", "10", queue="held-lq", created=2, priority=0, cpu="1"),
    )
    listed = visibility.pending_in_cluster_queue(log.state, "held")
    assert [(p.name, p.position_in_cluster_queue) for p in listed][0] == (first, 0)
    assert {p.name: p.priority for p in listed} == {"plain": 5, "boosted": 0}


# --- PrioritizePreemptorWorkloads: capacity kept for a preemptor without candidates ----------------------------


@pytest.mark.parametrize(
    ("gate", "waiting", "kept"),
    [(True, True, True), (True, False, False), (False, True, False)],
)
def test_a_preemptor_without_candidates_keeps_capacity_under_reclaim_any(gate: bool, waiting: bool, kept: bool) -> None:
    """scheduler.go reserveCapacityForUnreclaimablePreempt: a Preempt entry without targets in a ClusterQueue
    that reclaims with ``Any`` reserves nothing, unless PrioritizePreemptorWorkloads is on and it is waiting for
    its preemptions (IsPreemptor). cq-b borrows 1 of cq-a's 2 CPU; cq-a's entry asks 2: kept, cq-b's next 1 CPU
    no longer fits."""
    log = Log()
    made = []
    for name in ("cq-a", "cq-b"):
        cq = cluster_queue(name, flavors={"default": {"cpu": 2}})
        cq["spec"]["cohortName"] = "pool"
        cq["spec"]["preemption"] = {"reclaimWithinCohort": "Any"}
        made.append(cq)
    log.apply_manifests(_config(PrioritizePreemptorWorkloads=gate), flavor("default"), *made)
    state = log.state
    tree = quota.build(state, usage={"cq-b": {"default": {"cpu": 3000}}})
    fr = ("default", "cpu")
    assignment = flavors.Assignment(mode="Preempt", flat=("main", 1, 1, "cpu", fr, 2000, True))
    head = WorkloadState(workload=parse(workload("preemptor", cpu="2")), observed_seq=1)
    entry = entries.Entry(head, state.cluster_queues["cq-a"], assignment, 0, (0, NOW, "uid", head.key), (), waiting)
    assert tree.fits("cq-b", {fr: 1000})
    out = cycle._process(
        entry,
        state=state,
        tree=tree,
        chosen={},
        gate=cycle._PodsReadyGate(state),
        cycle=cast(Any, None),  # no TAS pod set: never read
        now_ms=NOW,
        reserve_for_preemptors=bool(state.configuration.feature_gates.get("PrioritizePreemptorWorkloads")),
    )
    assert [type(o).__name__ for o in out] == ["WorkloadInadmissible"]
    assert tree.fits("cq-b", {fr: 1000}) is not kept


@pytest.mark.parametrize(("sorting", "first"), [(True, "new-high"), (False, "old-low")])
def test_equal_shares_go_by_queue_time_with_priority_sorting_off(sorting: bool, first: str) -> None:
    """fair_sharing_iterator.go entryComparer.less, step 4: the effective priority only with the gate
    PrioritySortingWithinCohort on; then the queue-order timestamp."""
    state = _fair_state(PrioritySortingWithinCohort=sorting)
    old = _entry(state, "01", "old-low", created_s=0, priority=0)
    new = _entry(state, "02", "new-high", created_s=5, priority=10)
    old = msgspec.structs.replace(old, cq=state.cluster_queues["cq-a"])
    new = msgspec.structs.replace(new, cq=state.cluster_queues["cq-b"])
    tree = quota.build(state)  # nothing used: equal shares
    ordered = list(entries.ordered([new, old], state=state, tree=tree))
    assert ordered[0].workload.workload.metadata.uid.split("/", 1)[1] == first
