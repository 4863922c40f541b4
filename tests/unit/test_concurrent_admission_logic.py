"""ConcurrentAdmission in the deciders (admitter logic 43, with 42 kept for replay).

With the gate ConcurrentAdmission on, Kueue's queue manager never queues a parent Workload (the label
kueue.x-k8s.io/concurrent-admission-parent), and its scheduler skips a variant while a sibling on a more
preferred flavor is admitted and, instead of admitting a variant that fits while a less preferred sibling is
admitted, evicts that sibling with reason FlavorMigration (pkg/cache/queue/cluster_queue.go PushOrUpdate,
pkg/scheduler/scheduler.go processEntry, issueMigration). Logic 42 admitted the parent itself and every
variant that fit.
"""

from __future__ import annotations

from typing import Any

from kueue_es.events import models, types
from kueue_es.scheduling import concurrent_admission as ca
from kueue_es.services.admitter import core as admitter
from tests.builders import Log, cluster_queue, flavor, local_queue, workload

PARENT_UID = "uid-parent"


def _system(reservation_cpu: int = 0) -> Log:
    log = Log()
    log.add(types.ConfigurationObserved(configuration=models.Configuration(feature_gates={ca.GATE: True})))
    cq = cluster_queue("cq", flavors={"reservation": {"cpu": reservation_cpu}, "spot": {"cpu": 5}})
    log.apply_manifests(flavor("reservation"), flavor("spot"), cq, local_queue("lq", "cq"))
    return log


def _parent() -> dict[str, Any]:
    doc = workload("parent", created=1, cpu="1")
    doc["metadata"]["labels"] = {ca.PARENT_LABEL: "true"}
    return doc


def _variant(flavor_name: str, created: int = 2) -> dict[str, Any]:
    doc = workload(f"parent-variant-{flavor_name}", created=created, cpu="1")
    doc["metadata"]["annotations"] = {ca.ALLOWED_FLAVORS_ANNOTATION: flavor_name}
    doc["metadata"]["ownerReferences"] = [
        {"apiVersion": ca.API_VERSION, "kind": "Workload", "name": "parent", "uid": PARENT_UID, "controller": True}
    ]
    return doc


def _admitted(decisions: list[Any]) -> dict[str, str]:
    return {
        d.workload.name: d.pod_set_assignments[0].flavors["cpu"]
        for d in decisions
        if isinstance(d, types.WorkloadAdmitted) and d.pod_set_assignments
    }


def test_the_watcher_marks_a_variant_with_its_parents_uid() -> None:
    log = _system()
    log.apply_manifests(_variant("spot"))
    wl = log.state.workloads["default/parent-variant-spot"].workload
    assert ca.parent_uid(wl) == PARENT_UID


def test_a_parent_is_not_queued_its_variants_are() -> None:
    log = _system()
    log.apply_manifests(_parent(), _variant("reservation"), _variant("spot"))
    decisions = log.settle(1000)
    assert _admitted(decisions) == {"parent-variant-spot": "spot"}
    assert not [d for d in decisions if getattr(d, "workload", None) is not None and d.workload.name == "parent"]


def test_logic_42_admits_the_parent_itself() -> None:
    log = _system()
    log.apply_manifests(_parent())
    assert "parent" in _admitted(admitter.decide_as(42)(log.state, now_ms=1000))
    assert admitter.LOGIC_VERSION >= 43 and 42 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_variant_that_fits_evicts_its_less_preferred_admitted_sibling() -> None:
    log = _system()
    log.apply_manifests(_parent(), _variant("reservation"), _variant("spot"))
    assert _admitted(log.settle(1000)) == {"parent-variant-spot": "spot"}
    # quota on the preferred flavor: the reservation variant migrates the workload there
    cq = cluster_queue("cq", flavors={"reservation": {"cpu": 5}, "spot": {"cpu": 5}})
    log.apply_manifests(cq)
    decisions = log.settle(2000)
    assert _admitted(decisions) == {}
    (eviction,) = [d for d in decisions if isinstance(d, types.EvictionRequested)]
    assert (eviction.workload.name, eviction.reason) == ("parent-variant-spot", ca.FLAVOR_MIGRATION)
    waiting = [
        d for d in decisions if isinstance(d, types.WorkloadInadmissible) and d.workload.name.endswith("reservation")
    ]
    assert waiting and waiting[-1].message == "Pending the migration of 1 workload(s)"
    # logic 42 admitted it beside its sibling, the workload's quota taken twice
    assert _admitted(admitter.decide_as(42)(log.state, now_ms=3000)) == {"parent-variant-reservation": "reservation"}


def test_a_variant_waits_while_a_more_preferred_sibling_is_admitted() -> None:
    log = _system(reservation_cpu=5)
    log.apply_manifests(_parent(), _variant("reservation", created=2))
    assert _admitted(log.settle(1000)) == {"parent-variant-reservation": "reservation"}
    log.apply_manifests(_variant("spot", created=3))
    decisions = log.settle(2000)
    assert _admitted(decisions) == {}
    (skipped,) = [d for d in decisions if isinstance(d, types.WorkloadInadmissible)]
    assert (skipped.workload.name, skipped.reason, skipped.message) == (
        "parent-variant-spot",
        "PendingEvaluation",
        ca.MORE_FAVORABLE_MESSAGE,
    )


def test_without_the_gate_a_parent_is_an_ordinary_workload() -> None:
    log = Log()
    cq = cluster_queue("cq", flavors={"spot": {"cpu": 5}})
    log.apply_manifests(flavor("spot"), cq, local_queue("lq", "cq"), _parent())
    assert _admitted(log.settle(1000)) == {"parent": "spot"}


def test_a_parent_counts_in_no_pending_count_its_variants_do() -> None:
    """Kueue never queues a parent: the ClusterQueue's and LocalQueue's pendingWorkloads, kueue_pending_workloads and
    the visibility API count its variants alone; kueue_unadmitted_workloads counts the parent alone
    (concurrent_admission_test.go 'Should not count variant workload in unadmitted workload metrics': 1, reason
    NoReservation, cause PendingEvaluation), until a variant is admitted."""
    from kueue_es.scheduling import visibility
    from kueue_es.services import kueue_metrics
    from kueue_es.services.dispatcher import status

    log = _system()
    big = _parent()
    big["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100"
    variants = [_variant("reservation"), _variant("spot")]
    for v in variants:
        v["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100"
    log.apply_manifests(big, *variants)
    log.settle(1000)
    assert status.cluster_queue_status(log.state, "cq")["pendingWorkloads"] == 2
    assert status.local_queue_status(log.state, "default", "lq")["pendingWorkloads"] == 2
    assert {p.name for p in visibility.pending_in_cluster_queue(log.state, "cq")} == {
        "parent-variant-reservation",
        "parent-variant-spot",
    }
    gauges = kueue_metrics.gauges(log.state)
    pending = gauges["kueue_pending_workloads"]
    assert pending[("cq", "active")] + pending[("cq", "inadmissible")] == 2
    assert gauges["kueue_unadmitted_workloads"] == {("cq", "NoReservation", "PendingEvaluation"): 1}
    # the spot variant admitted: the parent is admitted too, nothing unadmitted
    small = _system()
    small.apply_manifests(_parent(), _variant("reservation"), _variant("spot"))
    small.settle(1000)
    assert kueue_metrics.gauges(small.state)["kueue_unadmitted_workloads"] == {}
