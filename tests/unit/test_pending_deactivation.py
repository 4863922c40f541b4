"""Admitter logic 44: a workload set inactive while it holds no quota is recorded ``Deactivated`` (and one whose
admission gate is cleared ``PendingEvaluation``), 43 kept for replay.

Kueue's workload controller evicts every inactive workload, a pending one too (workload_controller.go Reconcile:
workload/evict Evict with reason ``Deactivated`` "The workload is deactivated", one eviction counted in
``status.schedulingStats.evictions``, no Event since it has no admission), and with UnadmittedWorkloadsObservability
on writes QuotaReserved=False ``Deactivated`` (resolveGranularUnadmittedQuotaReservedCondition); set active again,
it is back to ``PendingEvaluation`` until the scheduler looks at it. Kueue's cases: workload_controller_test.go
"should write granular conditions and reasons when workload is deactivated" and "should dynamically transition
between reasons based on precedence". Logic 43 recorded nothing, so a Workload created inactive had no status and
one deactivated while pending kept its old pending reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter
from kueue_es.services.dispatcher import core, kube_events, status
from tests.builders import workload
from tests.unit.test_admission_gated_by import gated, quick_start

SCENARIOS = Path(__file__).parents[1] / "scenarios/lifecycle"
CREATED = SCENARIOS / "created-inactive-workload-evicted-deactivated.yaml"
TRANSITION = SCENARIOS / "deactivated-while-pending-then-reactivated.yaml"
DEACTIVATED = "The workload is deactivated"
WORKLOAD_CONTROLLER = "kueue-workload-controller"


def _conditions(wanted: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(c["type"], c["status"], c["reason"], c["message"]) for c in wanted.get("conditions", [])]


def _dispatch(path: Path, key: str) -> tuple[list[dict[str, Any]], list[kube_events.KubeEvent]]:
    """The workload ``key``'s status after every decision about it, and the Events of those decisions."""
    run = run_scenario(load_scenario(path))
    view = core.DispatchState()
    statuses: list[dict[str, Any]] = []
    events: list[kube_events.KubeEvent] = []
    for seq, event in run.log:
        core.fold(view, event, seq=seq)
        if isinstance(event, types.WorkloadInadmissible) and event.workload.key == key:
            statuses.append(status.workload_status(view.records.get(key), generation=1))
            events += kube_events.for_decision(view.cluster, event, view.records.get(key))
    return statuses, events


def test_a_workload_created_inactive_gets_kueues_deactivated_status() -> None:
    statuses, events = _dispatch(CREATED, "default/wl-deactivated")
    assert statuses, "no decision about the inactive workload"
    assert _conditions(statuses[-1]) == [
        ("QuotaReserved", "False", "Deactivated", DEACTIVATED),
        ("Evicted", "True", "Deactivated", DEACTIVATED),
        ("Admitted", "False", "NoReservation", "The workload has no reservation"),
    ]
    assert statuses[-1]["schedulingStats"] == {
        "evictions": [{"reason": "Deactivated", "underlyingCause": "", "count": 1}]
    }
    assert events == []  # evict.go records no Event for a workload that has no admission


def test_deactivated_while_waiting_then_reactivated() -> None:
    statuses, events = _dispatch(TRANSITION, "default/wl-transitioning")
    reasons = [next(c for c in s["conditions"] if c["type"] == "QuotaReserved")["reason"] for s in statuses]
    assert "Deactivated" in reasons
    at = reasons.index("Deactivated")
    assert reasons[:at] and "Deactivated" not in reasons[at + 1 :]  # waiting before, waiting again after
    evicted = next(c for c in statuses[at]["conditions"] if c["type"] == "Evicted")
    assert (evicted["status"], evicted["reason"], evicted["message"]) == ("True", "Deactivated", DEACTIVATED)
    assert statuses[-1]["schedulingStats"] == {
        "evictions": [{"reason": "Deactivated", "underlyingCause": "", "count": 1}]
    }
    assert [e.reason for e in events if e.reason == "Deactivated"] == []


def test_admitter_42_records_nothing_for_a_pending_inactive_workload() -> None:
    run = run_scenario(load_scenario(CREATED))
    state = ClusterState()
    for seq, event in run.log:
        if isinstance(event, types.WorkloadInadmissible) and event.reason == "Deactivated":
            break
        apply(state, event, seq=seq)
    key = "default/wl-deactivated"
    now = [o for o in admitter.decide(state, now_ms=10_000) if o.workload.key == key]
    assert [(type(o).__name__, getattr(o, "reason", "")) for o in now] == [("WorkloadInadmissible", "Deactivated")]
    assert [o for o in admitter.decide_as(43)(state, now_ms=10_000) if o.workload.key == key] == []
    assert admitter.LOGIC_VERSION >= 44 and 43 in admitter.EARLIER_LOGIC_VERSIONS


def test_the_runs_replay() -> None:
    for path in (CREATED, TRANSITION):
        run = run_scenario(load_scenario(path))
        assert check_log(run.messages, deciders.BY_ROLE).mismatches == []


def test_admission_gated_and_gate_cleared_events() -> None:
    """Kueue's workload controller records Normal ``AdmissionGated`` when it first sees the annotation and Normal
    ``AdmissionGateCleared`` once it is removed, writing QuotaReserved ``PendingEvaluation`` "AdmissionGatedBy
    cleared, waiting for quota reservation" before its scheduler admits it (mayUpdateConditionForAdmissionGatedBy);
    logic 43 recorded no clearing and the gated outcome gave the scheduler's Warning."""
    log = quick_start()
    log.apply_manifests(gated("w", "example.com/controller1", created=1, cpu="1"))
    first = log.settle(1000)
    assert [
        (e.type, e.reason, e.message, e.component) for d in first for e in kube_events.for_decision(log.state, d)
    ] == [("Normal", "AdmissionGated", "Workload admission is gated by: example.com/controller1", WORKLOAD_CONTROLLER)]
    log.apply_manifests(workload("w", created=1, cpu="1"))
    earlier = admitter.decide_as(43)(log.state, now_ms=2000)
    assert [type(d).__name__ for d in earlier] == ["WorkloadAdmitted"]
    second = log.settle(2000)
    assert [(type(d).__name__, getattr(d, "reason", "")) for d in second] == [
        ("WorkloadInadmissible", "PendingEvaluation"),
        ("WorkloadAdmitted", ""),
    ]
    events = [(e.type, e.reason, e.message) for d in second for e in kube_events.for_decision(log.state, d)]
    assert events[0] == ("Normal", "AdmissionGateCleared", "Admission gate cleared, workload is now admissible")
    assert [reason for _, reason, _ in events[1:]] == ["Admitted"]  # the scheduler's, after the clearing
