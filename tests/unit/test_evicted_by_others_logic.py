"""Admitter logic 45: an Evicted condition someone other than kueue-es wrote evicts the workload, 44 kept for replay.

Kueue's tests and users evict a workload by writing ``Evicted=True`` into its status themselves (test/util
SetEvictedCondition and a status update; test/e2e/multikueue/baseline/e2e_test.go "Should re-do admission process
when workload gets evicted in the worker" writes reason Preempted, message "By test"). Kueue acts on it whoever
wrote it: the job reconciler stops the job and, once it no longer runs, clears the reservation, QuotaReserved=False
PendingEvaluation with the condition's message and Requeued=True for Preempted (jobframework/reconciler.go "6.
handle eviction", SetRequeuedCondition); nothing counts the eviction or records an Evicted Event (only
workload/evict/evict.go Evict does). The watcher reports the condition as a WorkloadEvictionObserved; logic 44
ignored it, so the dispatcher's next status write dropped the condition and the job kept running.
"""

from __future__ import annotations

from typing import Any

from kueue_es.events import types
from kueue_es.services.admitter import core as admitter
from kueue_es.services.dispatcher import core, kube_events, status
from tests.builders import Log, cluster_queue, flavor, local_queue, workload

BY_TEST = types.WorkloadEvictionObserved  # shorthand


def _admitted() -> tuple[Log, types.WorkloadRef]:
    log = Log()
    log.apply_manifests(
        flavor("default"), cluster_queue("cq", flavors={"default": {"cpu": "4"}}), local_queue("lq", "cq")
    )
    log.apply_manifests(workload("running", cpu="2"))
    admitted = log.settle(1_000)
    assert any(isinstance(d, types.WorkloadAdmitted) for d in admitted)
    return log, log.state.workloads["default/running"].ref


def _observed(ref: types.WorkloadRef, *, at_ms: int = 1_500) -> types.WorkloadEvictionObserved:
    return BY_TEST(workload=ref, reason="Preempted", message="By test", at_ms=at_ms)


def test_admitter_45_evicts_on_an_evicted_condition_someone_wrote_and_44_ignored_it() -> None:
    log, ref = _admitted()
    log.add(_observed(ref))
    assert admitter.decide_as(44)(log.state, now_ms=2_000) == []
    now = log.cycle(2_000)
    assert now == [
        types.EvictionRequested(
            workload=ref, cluster_queue="cq", reason="Preempted", message="By test", at_ms=1_500, observed=True
        )
    ]
    assert log.state.workloads[ref.key].reservation is not None  # held until the job is stopped
    assert log.cycle(3_000) == []  # carried out once
    log.add(types.WorkloadStopped(workload=ref, reason="Preempted", at_ms=4_000))
    released = log.cycle(5_000)
    assert [(type(o).__name__, getattr(o, "reason", "")) for o in released] == [("QuotaReleased", "Preempted")]
    again = log.settle(6_000)  # requeued at once, as Kueue: admitted again
    assert any(isinstance(d, types.WorkloadAdmitted) and d.workload.key == ref.key for d in again)
    assert admitter.LOGIC_VERSION >= 45 and 44 in admitter.EARLIER_LOGIC_VERSIONS


def test_nothing_is_counted_for_it() -> None:
    log, ref = _admitted()
    log.add(_observed(ref))
    log.cycle(2_000)
    counted = log.state.metrics.counters.get("kueue_evicted_workloads_total", {})
    assert not any(value for value in counted.values())
    assert log.state.workloads[ref.key].preempted_count == 0


def test_a_report_about_a_workload_evicted_already_or_holding_no_quota_is_dropped() -> None:
    log, ref = _admitted()
    own = types.EvictionRequested(workload=ref, cluster_queue="cq", reason="Preempted", message="mine", at_ms=1_200)
    log.add(own)
    log.add(_observed(ref))  # the dispatcher's own condition, read back by a watcher that could not tell
    assert log.state.evicted_by_others == {}
    assert log.cycle(2_000) == []
    assert log.state.workloads[ref.key].eviction is own
    pending = Log()
    pending.apply_manifests(flavor("default"), local_queue("lq", "missing"), workload("waiting", cpu="1"))
    waiting = pending.state.workloads["default/waiting"].ref
    pending.add(_observed(waiting))
    assert pending.state.evicted_by_others == {}


def test_a_report_for_another_uid_is_dropped() -> None:
    log, ref = _admitted()
    log.add(_observed(types.WorkloadRef(namespace=ref.namespace, name=ref.name, uid="someone-else")))
    assert log.cycle(2_000) == []


def _conditions(record: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in record.get("conditions", [])}


def test_the_status_and_events_are_kueues() -> None:
    log, ref = _admitted()
    log.add(_observed(ref))
    log.cycle(2_000)
    log.add(types.WorkloadStopped(workload=ref, reason="Preempted", at_ms=4_000))
    log.cycle(5_000)
    view = core.DispatchState()
    evicted: dict[str, Any] = {}
    released: dict[str, Any] = {}
    events: list[kube_events.KubeEvent] = []
    for seq, event in enumerate(log.events, start=1):
        core.fold(view, event, seq=seq)
        if isinstance(event, types.EvictionRequested):
            evicted = status.workload_status(view.records.get(ref.key), generation=1)
            events += kube_events.for_decision(view.cluster, event, view.records.get(ref.key))
        if isinstance(event, types.QuotaReleased):
            released = status.workload_status(view.records.get(ref.key), generation=1)
    assert _conditions(evicted)["Evicted"] == ("True", "Preempted", "By test")
    assert "Preempted" not in _conditions(evicted)  # only evict.go Evict writes it
    assert "schedulingStats" not in evicted  # nothing counted
    assert events == []  # no EvictedDueToPreempted: the job's Stopped Event is the dispatcher's write
    after = _conditions(released)
    assert after["QuotaReserved"] == ("False", "PendingEvaluation", "By test")
    assert after["Requeued"] == ("True", "Preempted", "By test")
    assert after["Admitted"][0] == "False"
    assert "admission" not in released
