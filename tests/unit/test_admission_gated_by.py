"""The AdmissionGatedBy annotation (admitter logic 33, with 32 kept for replay).

Kueue keeps a Workload annotated ``kueue.x-k8s.io/admission-gated-by`` (not empty) out of its queues while the
feature gate AdmissionGatedBy is on (beta, on by default since v0.19): pkg/workload/workload.go IsAdmissible and
HasAdmissionGate. Its workload controller writes QuotaReserved False, reason AdmissionGated, "Admission is gated
by: <value>" (workload_controller.go); once the annotation is removed the workload is queued again. Logic 32 and
earlier ignored the annotation.
"""

from __future__ import annotations

from typing import Any

from kueue_es.events import types
from kueue_es.services.admitter import core as admitter
from tests.builders import Log, cluster_queue, flavor, local_queue, workload

GATE = "kueue.x-k8s.io/admission-gated-by"


def gated(name: str, value: str, **kwargs: Any) -> dict[str, Any]:
    doc = workload(name, **kwargs)
    doc["metadata"]["annotations"] = {GATE: value}
    return doc


def quick_start(strategy: str = "BestEffortFIFO") -> Log:
    log = Log()
    cq = cluster_queue("cq", flavors={"default": {"cpu": 4}})
    cq["spec"]["queueingStrategy"] = strategy
    log.apply_manifests(flavor("default"), cq, local_queue("lq", "cq"))
    return log


def admitted(decisions: list[types.Decision]) -> list[str]:
    return [d.workload.key for d in decisions if isinstance(d, types.WorkloadAdmitted)]


def test_a_gated_workload_waits_admission_gated_and_blocks_nothing() -> None:
    log = quick_start("StrictFIFO")
    log.apply_manifests(
        gated("gated", "example.com/controller1", created=1, priority=10, cpu="1"), workload("next", created=2, cpu="1")
    )
    decisions = log.settle(1000)
    assert admitted(decisions) == ["default/next"]
    (pending,) = [d for d in decisions if isinstance(d, types.WorkloadInadmissible) and d.workload.name == "gated"]
    assert (pending.reason, pending.message) == ("AdmissionGated", "Admission is gated by: example.com/controller1")
    assert not pending.parked  # looked at again each cycle: nothing else requeues it


def test_removing_the_annotation_queues_it_again() -> None:
    log = quick_start()
    log.apply_manifests(gated("w", "example.com/controller1", created=1, cpu="1"))
    assert admitted(log.settle(1000)) == []
    log.apply_manifests(workload("w", created=1, cpu="1"))
    assert admitted(log.settle(2000)) == ["default/w"]


def test_an_empty_annotation_gates_nothing() -> None:
    log = quick_start()
    log.apply_manifests(gated("w", "", created=1, cpu="1"))
    assert admitted(log.settle(1000)) == ["default/w"]


def test_logic_32_ignores_the_annotation() -> None:
    log = quick_start()
    log.apply_manifests(gated("w", "example.com/controller1", created=1, cpu="1"))
    assert admitted(admitter.decide_as(32)(log.state, now_ms=1000)) == ["default/w"]
    assert admitter.LOGIC_VERSION >= 33 and 32 in admitter.EARLIER_LOGIC_VERSIONS
