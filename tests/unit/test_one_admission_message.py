"""One WorkloadAdmitted for a workload reserved and admitted at once (issue 18, admitter logic version 13).

Without admission checks (and without a TAS placement) the admitter writes ONE WorkloadAdmitted, no
QuotaReserved; the fold takes it as the reservation then the admission, the state the pair gave;
the dispatcher's status, reservation sequence and Kubernetes Events read it as both; a ClusterQueue
with a check keeps the pair; logic versions 11 and 12 (replayed for old logs) still write the pair.
"""

from __future__ import annotations

from typing import Any

from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.admitter import core as admitter
from kueue_es.services.dispatcher import core as dispatcher
from kueue_es.services.dispatcher import kube_events
from kueue_es.services.watcher import convert
from tests.builders import Log, cluster_queue, flavor, local_queue, workload

NOW = 1_767_225_700_000
KEY = "default/w1"


def manifests(*, checks: bool = False) -> list[dict[str, Any]]:
    cq = cluster_queue("cq", flavors={"f": {"cpu": 4}})
    docs = [flavor("f"), cq, local_queue("lq", "cq"), workload("w1", created=1, cpu="1")]
    if checks:
        cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
        docs.insert(
            0,
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "AdmissionCheck",
                "metadata": {"name": "prov"},
                "spec": {"controllerName": "example.com/check"},
                "status": {"conditions": [{"type": "Active", "status": "True", "reason": "R", "message": "m"}]},
            },
        )
    return docs


def log_of(*, checks: bool = False) -> Log:
    log = Log()
    log.apply_manifests(*manifests(checks=checks))
    return log


def held(state: ClusterState) -> tuple[Any, ...]:
    """What a reservation and an admission change in the fold (the sequences aside)."""
    wl = state.workloads[KEY]
    return (
        wl.reservation,
        wl.held,
        wl.admitted,
        wl.admitted_at_ms,
        wl.order_ms,
        state.usage,
        state.reserved,
        state.metrics.counters,
        state.metrics.histograms,
    )


def test_a_workload_without_checks_is_reserved_and_admitted_by_one_message() -> None:
    log = log_of()
    out = admitter.decide(log.state, now_ms=NOW)
    assert [type(o) for o in out] == [types.WorkloadAdmitted]
    (admitted,) = out
    assert isinstance(admitted, types.WorkloadAdmitted)
    assert admitted.pod_set_assignments and admitted.pod_set_assignments[0].resource_usage == {"cpu": 1000}
    log.add(admitted)
    wl = log.state.workloads[KEY]
    assert wl.reservation == types.reservation_of(admitted) and wl.admitted
    assert log.state.usage["cq"]["f"]["cpu"] == 1000
    counters = log.state.metrics.counters
    assert counters["kueue_quota_reserved_workloads_total"] == {("cq", ""): 1}  # still counted
    assert counters["kueue_admitted_workloads_total"] == {("cq", ""): 1}
    assert admitter.decide(log.state, now_ms=NOW + 1) == []  # nothing left to decide: admitted


def test_the_one_message_folds_to_the_state_of_the_pair() -> None:
    one = log_of()
    (admitted,) = admitter.decide(one.state, now_ms=NOW)
    assert isinstance(admitted, types.WorkloadAdmitted)
    one.add(admitted)
    pair = log_of()
    pair.add(types.reservation_of(admitted), admitted)
    assert held(one.state) == held(pair.state)
    # a second copy changes nothing: the workload already holds the reservation and is admitted
    one.add(admitted)
    assert held(one.state) == held(pair.state)


def test_with_an_admission_check_the_reservation_comes_alone_and_admission_later() -> None:
    log = log_of(checks=True)
    out = admitter.decide(log.state, now_ms=NOW)
    assert [type(o) for o in out] == [types.QuotaReserved]
    log.add(*out)
    wl = log.state.workloads[KEY]
    assert wl.reservation is not None and not wl.admitted


def test_logic_versions_11_and_12_still_write_the_pair_for_replay() -> None:
    log = log_of()
    earlier = admitter.decide_as(11)(log.state, now_ms=NOW)
    now = admitter.decide(log.state, now_ms=NOW)
    assert [type(o) for o in earlier] == [types.QuotaReserved, types.WorkloadAdmitted]
    assert earlier[1] == now[0]
    assert isinstance(now[0], types.WorkloadAdmitted) and earlier[0] == types.reservation_of(now[0])
    assert admitter.decide_as(12)(log.state, now_ms=NOW) == earlier
    assert admitter.LOGIC_VERSION >= 13 and {11, 12} <= set(admitter.EARLIER_LOGIC_VERSIONS)
    if admitter.LOGIC_VERSION > 13:  # 13 wrote the WorkloadAdmitted alone, as the current logic does
        assert admitter.decide_as(13)(log.state, now_ms=NOW) == now


def test_a_workload_admitted_without_assignments_reserves_nothing() -> None:
    """A schema-1 WorkloadAdmitted (no podSetAssignments) of a workload holding nothing changes nothing,
    as before: only a WorkloadAdmitted that carries its assignments can stand for a reservation."""
    log = log_of()
    log.add(
        types.WorkloadAdmitted(workload=types.WorkloadRef(namespace="default", name="w1"), cluster_queue="cq", at_ms=1)
    )
    wl = log.state.workloads[KEY]
    assert wl.reservation is None and not wl.admitted


def test_the_dispatcher_reads_one_message_as_reservation_and_admission() -> None:
    view = dispatcher.DispatchState()
    facts = [convert.kueue_fact(doc) for doc in manifests()]
    for seq, fact in enumerate(facts, start=1):
        dispatcher.fold(view, fact, seq=seq)
    (admitted,) = admitter.decide(view.cluster, now_ms=NOW)
    assert isinstance(admitted, types.WorkloadAdmitted)
    seq = len(facts) + 1
    dispatcher.fold(view, admitted, seq=seq)
    assert view.reserved_seq[KEY] == seq
    record = view.records[KEY]
    assert record.admission == types.reservation_of(admitted)
    assert record.conditions["QuotaReserved"].status and record.conditions["Admitted"].status
    assert KEY in view.started
    events = kube_events.for_decision(view.cluster, admitted, record, reserved=True)
    assert [(e.type, e.reason) for e in events] == [("Normal", "QuotaReserved"), ("Normal", "Admitted")]
    assert events[0].message.startswith("Quota reserved in ClusterQueue cq, wait time since queued was")
    assert [e.reason for e in kube_events.for_decision(view.cluster, admitted, record)] == ["Admitted"]
