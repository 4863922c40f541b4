"""The watcher's part of ConcurrentAdmission: a variant is published as a standalone Workload, and a Workload of an
opted-in ClusterQueue as a parent before the controller has labelled it (Kueue's queue manager never queues it:
pkg/cache/queue/manager.go IsConcurrentAdmissionParentWithoutLock)."""

from __future__ import annotations

from typing import Any, cast

from kueue_es.events import types
from kueue_es.scheduling import concurrent_admission as ca
from kueue_es.services.watcher.inputs import ConversionInputs
from kueue_es.services.watcher.standalone import StandaloneTracker, is_standalone


def _workload(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns", "uid": "u1", **meta},
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
        },
    }


def _tracker(gate: bool, policy: bool = True) -> StandaloneTracker:
    inputs = ConversionInputs(concurrent_admission=gate)
    inputs.queue_object_changed("LocalQueue", ("ns", "lq"), cast(Any, {"spec": {"clusterQueue": "cq"}}))
    spec = {"concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}}} if policy else {}
    inputs.queue_object_changed("ClusterQueue", ("", "cq"), cast(Any, {"spec": spec}))
    return StandaloneTracker(publisher=cast(Any, None), reporter=cast(Any, None), clock=lambda: 0, inputs=inputs)


def _labels(tracker: StandaloneTracker, obj: dict[str, Any]) -> dict[str, str]:
    fact, _ = tracker._observed(cast(Any, obj))
    assert isinstance(fact, types.WorkloadObserved)
    return fact.workload.metadata.labels


def test_a_workload_of_an_opted_in_cluster_queue_is_published_as_a_parent() -> None:
    assert _labels(_tracker(gate=True), _workload()) == {ca.PARENT_LABEL: "true"}


def test_not_without_the_gate_nor_the_policy() -> None:
    assert _labels(_tracker(gate=False), _workload()) == {}
    assert _labels(_tracker(gate=True, policy=False), _workload()) == {}


def test_a_variant_is_standalone_and_no_parent() -> None:
    owner = {"apiVersion": ca.API_VERSION, "kind": "Workload", "name": "p", "uid": "pu", "controller": True}
    variant = _workload(ownerReferences=[owner], annotations={ca.ALLOWED_FLAVORS_ANNOTATION: "spot"})
    assert is_standalone(variant)
    assert _labels(_tracker(gate=True), variant) == {}
    job_owned = _workload(ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju"}])
    assert not is_standalone(job_owned)
