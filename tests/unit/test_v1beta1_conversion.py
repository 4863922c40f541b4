"""Kueue's v1beta1 <-> v1beta2 conversion (kueue_es.events.v1beta1): each rule of Kueue's
apis/kueue/v1beta1/*_conversion.go, the cases of its *_conversion_test.go, round trips of Kueue's own
examples, and the ConversionReview the webhook answers."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from kueue_es.events import v1beta1
from tests.kube import examples

EXAMPLES = examples.EXAMPLES
V1, V2 = v1beta1.V1BETA1, v1beta1.V1BETA2


def obj(kind: str, api_version: str, **parts: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, **parts}


def test_cluster_queue_cohort_checks_and_fungibility_up() -> None:
    """clusterqueue_conversion.go: cohort -> cohortName, admissionChecks -> admissionChecksStrategy (replacing one
    written beside it), Borrow and Preempt -> MayStopSearch; v1beta1-only status fields dropped."""
    old = obj(
        "ClusterQueue",
        V1,
        spec={
            "cohort": "team",
            "admissionChecks": ["a", "b"],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "z"}]},
            "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
            "queueingStrategy": "BestEffortFIFO",
        },
        status={
            "pendingWorkloads": 1,
            "pendingWorkloadsStatus": {"clusterQueuePendingWorkload": [], "lastChangeTime": "2026-01-01T00:00:00Z"},
            "fairSharing": {"weightedShare": 3, "admissionFairSharingStatus": {"consumedResources": {}}},
        },
    )
    new = v1beta1.to_v1beta2(old)
    assert new["apiVersion"] == V2
    assert new["spec"] == {
        "cohortName": "team",
        "admissionChecksStrategy": {"admissionChecks": [{"name": "a"}, {"name": "b"}]},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
        "queueingStrategy": "BestEffortFIFO",
    }
    assert new["status"] == {"pendingWorkloads": 1, "fairSharing": {"weightedShare": 3}}
    assert old["spec"]["cohort"] == "team", "the input is not changed"


def test_cluster_queue_keeps_strategy_without_checks_and_other_fungibility() -> None:
    old = obj(
        "ClusterQueue",
        V1,
        spec={
            "admissionChecks": [],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "z", "onFlavors": ["f"]}]},
            "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"},
        },
    )
    new = v1beta1.to_v1beta2(old)
    assert new["spec"] == {
        "admissionChecksStrategy": {"admissionChecks": [{"name": "z", "onFlavors": ["f"]}]},
        "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"},
    }


def test_cluster_queue_down() -> None:
    """cohortName -> cohort; the strategy stays; v1beta2-only concurrentAdmissionPolicy dropped."""
    new = obj(
        "ClusterQueue",
        V2,
        spec={
            "cohortName": "team",
            "admissionChecksStrategy": {"admissionChecks": [{"name": "a"}]},
            "concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}},
        },
    )
    assert v1beta1.to_v1beta1(new)["spec"] == {
        "cohort": "team",
        "admissionChecksStrategy": {"admissionChecks": [{"name": "a"}]},
    }


def test_cohort_drops_admission_fair_sharing_status_up() -> None:
    old = obj(
        "Cohort",
        V1,
        spec={"parentName": "root"},
        status={"fairSharing": {"weightedShare": 1, "admissionFairSharingStatus": {}}},
    )
    new = v1beta1.to_v1beta2(old)
    assert new["spec"] == {"parentName": "root"}
    assert new["status"] == {"fairSharing": {"weightedShare": 1}}
    assert v1beta1.to_v1beta1(new)["spec"] == {"parentName": "root"}


def test_local_queue_flavor_usage() -> None:
    """localqueue_conversion.go: status.flavorUsage <-> flavorsUsage; v1beta1-only status.flavors dropped."""
    usage = [{"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]
    old = obj(
        "LocalQueue",
        V1,
        spec={"clusterQueue": "cq"},
        status={"flavorUsage": usage, "flavors": [{"name": "f"}], "pendingWorkloads": 2},
    )
    new = v1beta1.to_v1beta2(old)
    assert new["status"] == {"flavorsUsage": usage, "pendingWorkloads": 2}
    assert v1beta1.to_v1beta1(new)["status"] == {"flavorUsage": usage, "pendingWorkloads": 2}


@pytest.mark.parametrize(
    ("source", "ref"),
    [
        ("kueue.x-k8s.io/workloadpriorityclass", {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass"}),
        ("scheduling.k8s.io/priorityclass", {"group": "scheduling.k8s.io", "kind": "PriorityClass"}),
    ],
)
def test_workload_priority_class(source: str, ref: dict[str, str]) -> None:
    """workload_conversion.go: priorityClassSource + priorityClassName <-> priorityClassRef."""
    old = obj("Workload", V1, spec={"priorityClassSource": source, "priorityClassName": "high", "priority": 7})
    new = v1beta1.to_v1beta2(old)
    assert new["spec"] == {"priorityClassRef": {**ref, "name": "high"}, "priority": 7}
    assert v1beta1.to_v1beta1(new)["spec"] == old["spec"]


def test_workload_priority_without_source_or_of_another_group() -> None:
    """An empty source converts to no ref (the name is dropped, as Kueue's switch has no case for it); a ref of
    another group and kind converts to no source."""
    old = obj("Workload", V1, spec={"priorityClassSource": "", "priorityClassName": "high"})
    assert v1beta1.to_v1beta2(old)["spec"] == {}
    new = obj("Workload", V2, spec={"priorityClassRef": {"group": "example.com", "kind": "Other", "name": "n"}})
    assert v1beta1.to_v1beta1(new)["spec"] == {}


def test_workload_status_and_v1beta2_only_fields() -> None:
    """accumulatedPastExexcutionTimeSeconds (sic) <-> accumulatedPastExecutionTimeSeconds; v1beta2-only
    preemption gates and slice constraints are dropped going to v1beta1."""
    new = obj(
        "Workload",
        V2,
        spec={
            "queueName": "q",
            "preemptionGates": [{"name": "g"}],
            "podSets": [{"name": "main", "count": 1, "topologyRequest": {
                "required": "rack", "podsetSliceRequiredTopologyConstraints": [{"topology": "rack", "size": 2}]}}],
        },
        status={"accumulatedPastExecutionTimeSeconds": 5, "preemptionGates": [{"name": "g", "position": "Open"}]},
    )  # fmt: skip
    old = v1beta1.to_v1beta1(new)
    assert old["spec"] == {
        "queueName": "q",
        "podSets": [{"name": "main", "count": 1, "topologyRequest": {"required": "rack"}}],
    }
    assert old["status"] == {"accumulatedPastExexcutionTimeSeconds": 5}
    assert v1beta1.to_v1beta2(old)["status"] == {"accumulatedPastExecutionTimeSeconds": 5}


def assignment(topology: dict[str, Any]) -> dict[str, Any]:
    return {
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "topologyAssignment": topology}]}
    }


V1_DOMAINS = {
    "levels": ["a", "b"],
    "domains": [{"values": ["a1", "b1"], "count": 10}, {"values": ["a1", "b2"], "count": 20}],
}
#: workload_conversion_test.go "with TopologyAssignment": Kueue's expected encoding
V2_SLICES = {
    "levels": ["a", "b"],
    "slices": [
        {
            "domainCount": 2,
            "valuesPerLevel": [{"universal": "a1"}, {"individual": {"prefix": "b", "roots": ["1", "2"]}}],
            "podCounts": {"individual": [10, 20]},
        }
    ],
}


def test_topology_assignment_domains_and_slices() -> None:
    """workload_conversion.go: v1beta1 domains <-> v1beta2 slices, encoded as Kueue's tas.V1Beta2From encodes
    (the case of Kueue's workload_conversion_test.go)."""
    new = v1beta1.to_v1beta2(obj("Workload", V1, status=assignment(V1_DOMAINS)))
    assert new["status"] == assignment(V2_SLICES)
    old = v1beta1.to_v1beta1(new)
    assert old["status"] == assignment(V1_DOMAINS)


def test_topology_assignment_of_many_slices_down() -> None:
    """workload_conversion_test.go "with TopologyAssignment, multiple slices": the slices' domains in order."""
    two = copy.deepcopy(V2_SLICES)
    two["slices"].append(
        {
            "domainCount": 2,
            "valuesPerLevel": [{"universal": "a2"}, {"individual": {"roots": ["first", "second"]}}],
            "podCounts": {"universal": 50},
        }
    )
    old = v1beta1.to_v1beta1(obj("Workload", V2, status=assignment(two)))
    domains = old["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["domains"]
    assert domains == [
        {"values": ["a1", "b1"], "count": 10},
        {"values": ["a1", "b2"], "count": 20},
        {"values": ["a2", "first"], "count": 50},
        {"values": ["a2", "second"], "count": 50},
    ]


def test_multikueue_cluster_source() -> None:
    """multikueue_conversion.go: spec.kubeConfig / clusterProfileRef <-> spec.clusterSource.*; a kubeConfig
    without a location is not carried over."""
    old = obj("MultiKueueCluster", V1, spec={"kubeConfig": {"location": "secret-a", "locationType": "Secret"}})
    new = v1beta1.to_v1beta2(old)
    assert new["spec"] == {"clusterSource": {"kubeConfig": {"location": "secret-a", "locationType": "Secret"}}}
    assert v1beta1.to_v1beta1(new)["spec"] == old["spec"]
    profile = obj("MultiKueueCluster", V1, spec={"kubeConfig": {"location": ""}, "clusterProfileRef": {"name": "p"}})
    new = v1beta1.to_v1beta2(profile)
    assert new["spec"] == {"clusterSource": {"clusterProfileRef": {"name": "p"}}}
    assert v1beta1.to_v1beta1(new)["spec"] == {"clusterProfileRef": {"name": "p"}}


def test_fields_only_one_version_has_are_dropped() -> None:
    """AdmissionCheck's v1beta1 retryDelayMinutes and MultiKueueConfig's v1beta2 quotaManagement do not exist in
    the other version (zz_generated.conversion.go)."""
    check = obj("AdmissionCheck", V1, spec={"controllerName": "c", "retryDelayMinutes": 15})
    assert v1beta1.to_v1beta2(check)["spec"] == {"controllerName": "c"}
    config = obj("MultiKueueConfig", V2, spec={"clusters": ["a"], "quotaManagement": "Manual"})
    assert v1beta1.to_v1beta1(config)["spec"] == {"clusters": ["a"]}


@pytest.mark.parametrize("kind", ["ResourceFlavor", "WorkloadPriorityClass", "Topology", "ProvisioningRequestConfig"])
def test_kinds_alike_in_both_versions_change_only_api_version(kind: str) -> None:
    new = obj(kind, V2, spec={"anything": {"kept": [1, 2]}}, value=3)
    old = v1beta1.to_v1beta1(new)
    assert old == {**new, "apiVersion": V1}
    assert v1beta1.to_v1beta2(old) == new


def test_bad_input_is_refused_naming_object_and_field() -> None:
    with pytest.raises(v1beta1.ConversionError, match='ClusterQueue "x": spec.admissionChecks: must be a list'):
        v1beta1.to_v1beta2(obj("ClusterQueue", V1, spec={"admissionChecks": "a"}))
    with pytest.raises(v1beta1.ConversionError, match="kind 'Job' is not a Kueue kind"):
        v1beta1.to_v1beta2({"apiVersion": V1, "kind": "Job", "metadata": {"name": "x"}})
    with pytest.raises(v1beta1.ConversionError, match="apiVersion 'batch/v1'"):
        v1beta1.to_v1beta2({"apiVersion": "batch/v1", "kind": "Workload"})
    with pytest.raises(v1beta1.ConversionError, match=r'Workload "ns/x": spec: must be an object'):
        v1beta1.to_v1beta2(
            {"apiVersion": V1, "kind": "Workload", "metadata": {"name": "x", "namespace": "ns"}, "spec": 1}
        )


def example_objects() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and doc.get("apiVersion") == V2 and doc.get("kind") in v1beta1.KINDS:
                found.append((f"{path.relative_to(EXAMPLES)}:{index} {doc['kind']}", doc))
    return found


EXAMPLE_OBJECTS = example_objects() if EXAMPLES.is_dir() else []
#: v1beta2-only fields Kueue's own conversion loses on the way down (so its round trip drops them too)
V1BETA2_ONLY = {"ClusterQueue": ("concurrentAdmissionPolicy",), "MultiKueueConfig": ("quotaManagement",)}


def test_examples_cover_most_kinds() -> None:
    kinds = {obj["kind"] for _, obj in EXAMPLE_OBJECTS}
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor", "AdmissionCheck", "Topology"} <= kinds


@pytest.mark.parametrize(("label", "example"), EXAMPLE_OBJECTS, ids=[label for label, _ in EXAMPLE_OBJECTS])
def test_examples_round_trip_unchanged(label: str, example: dict[str, Any]) -> None:
    """v1beta2 -> v1beta1 -> v1beta2 gives Kueue's example back (but for what v1beta1 cannot hold)."""
    expected = copy.deepcopy(example)
    for field in V1BETA2_ONLY.get(example["kind"], ()):
        (expected.get("spec") or {}).pop(field, None)
    down = v1beta1.to_v1beta1(example)
    assert down["apiVersion"] == V1
    assert v1beta1.to_v1beta2(down) == expected


def test_conversion_review() -> None:
    """A ConversionReview answered as controller-runtime's conversion webhook does: every object in the desired
    version, the request's uid, Success; one object that cannot be converted fails the review."""
    review = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {
            "uid": "u-1",
            "desiredAPIVersion": V2,
            "objects": [
                obj("ClusterQueue", V1, spec={"cohort": "c"}),
                obj("ClusterQueue", V2, spec={"cohortName": "d"}),
            ],
        },
    }
    answer = v1beta1.convert_review(review)
    assert answer["kind"] == "ConversionReview" and answer["apiVersion"] == "apiextensions.k8s.io/v1"
    assert answer["response"]["uid"] == "u-1"
    assert answer["response"]["result"] == {"status": "Success"}
    assert [o["spec"] for o in answer["response"]["convertedObjects"]] == [{"cohortName": "c"}, {"cohortName": "d"}]
    review["request"]["objects"].append({"apiVersion": V1, "kind": "Job"})
    failed = v1beta1.convert_review(review)["response"]
    assert failed["result"]["status"] == "Failure" and "not a Kueue kind" in failed["result"]["message"]
    assert failed["convertedObjects"] == []
    with pytest.raises(v1beta1.ConversionError, match="not a ConversionReview"):
        v1beta1.convert_review({"kind": "AdmissionReview"})
