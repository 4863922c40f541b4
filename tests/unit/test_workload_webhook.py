"""Kueue's Workload webhooks (pkg/webhooks/workload_webhook.go): each rule once allowed, once refused with
Kueue's field path and message (kueue_es.jobframework.workload_webhook)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueue_es.jobframework import workload_webhook as ww

RESERVED = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""}


def workload(
    *pod_sets: dict[str, Any], status: dict[str, Any] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A Workload as the API server hands it to the webhook (the CRD's defaults applied)."""
    obj: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "default", "annotations": annotations or {}},
        "spec": {"queueName": "lq", "podSets": list(pod_sets) or [pod_set()]},
    }
    if status is not None:
        obj["status"] = status
    return obj


def pod_set(name: str = "main", count: int = 2, **extra: Any) -> dict[str, Any]:
    requests = extra.pop("requests", {"cpu": "1"})
    template = extra.pop("template", {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}})
    return {"name": name, "count": count, "template": template, **extra}


def admitted(*assignments: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {
        "conditions": [RESERVED],
        "admission": {"clusterQueue": "cq", "podSetAssignments": list(assignments) or [assignment()]},
        **status,
    }


def assignment(name: str = "main", count: int = 2, cpu: str = "2") -> dict[str, Any]:
    return {"name": name, "count": count, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": cpu}}


def refused(obj: dict[str, Any], *, old: dict[str, Any] | None = None, **gates: bool) -> list[str]:
    return [str(error) for error in ww.validate(obj, old=old, gates=gates)]


# -- create (ValidateWorkload) --------------------------------------------------------------------------

CPU = "spec.podSets[0].template.spec.containers[0].resources"


@pytest.mark.parametrize(
    ("valid", "invalid", "message"),
    [
        pytest.param(
            workload(pod_set(requests={"cpu": "1", "example.com/gpu": "1"})),
            workload(pod_set(requests={"cpu": "1", "pods": "1"})),
            f'{CPU}.requests[pods]: Invalid value: "pods": the key is reserved for internal kueue use',
            id="pods-key-reserved",
        ),
        pytest.param(
            workload(pod_set(template={"spec": {"containers": [], "resources": {"limits": {"cpu": "1"}}}})),
            workload(pod_set(template={"spec": {"containers": [], "resources": {"limits": {"pods": "1"}}}})),
            'spec.podSets[0].template.spec.resources.limits[pods]: Invalid value: "pods": the key is reserved for '
            "internal kueue use",
            id="pod-level-pods-key",
        ),
        pytest.param(
            workload(pod_set(requests={"cpu": "0"})),
            workload(pod_set(requests={"cpu": "-0.5"})),
            f'{CPU}.requests[cpu]: Invalid value: "-500m": must be greater than or equal to 0',
            id="negative-quantity",
        ),
        pytest.param(
            workload(pod_set(template={"metadata": {"labels": {"app": "x"}}, "spec": {"containers": []}})),
            workload(pod_set(template={"metadata": {"labels": {"app": "x y"}}, "spec": {"containers": []}})),
            'spec.podSets[0].template.metadata.labels: Invalid value: "x y": a valid label must be an empty string '
            "or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'MyValue', or 'my_value', or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            id="template-label-value",
        ),
        pytest.param(
            workload(pod_set(template={"metadata": {"annotations": {"Example.com/A": "1"}}, "spec": {}})),
            workload(pod_set(template={"metadata": {"annotations": {"/a": "1"}}, "spec": {}})),
            'spec.podSets[0].template.metadata.annotations: Invalid value: "/a": prefix part must be non-empty',
            id="template-annotation-key",
        ),
        pytest.param(
            workload(pod_set(topologyRequest={"podSetSliceRequiredTopology": "rack", "podSetSliceSize": 2})),
            workload(pod_set(topologyRequest={"podSetSliceRequiredTopology": "rack"})),
            "spec.podSets[0].topologyRequest.podSetSliceSize: Required value: must be set when "
            "podSetSliceRequiredTopology is specified",
            id="slice-size-required",
        ),
        pytest.param(
            workload(pod_set(topologyRequest={"required": "rack"})),
            workload(pod_set(topologyRequest={"required": "rack", "podSetSliceSize": 2})),
            "spec.podSets[0].topologyRequest.podSetSliceSize: Forbidden: may not be set when "
            "podSetSliceRequiredTopology is not specified",
            id="slice-size-forbidden",
        ),
        pytest.param(
            workload(
                pod_set(topologyRequest={"podsetSliceRequiredTopologyConstraints": [{"topology": "r", "size": 1}]})
            ),
            workload(
                pod_set(topologyRequest={"podsetSliceRequiredTopologyConstraints": [{"topology": "r", "size": 0}]})
            ),
            "spec.podSets[0].topologyRequest.podsetSliceRequiredTopologyConstraints[0].size: Invalid value: 0: must "
            "be greater than 0",
            id="slice-layer-size",
        ),
        pytest.param(
            workload(pod_set("a", minCount=1), pod_set("b")),
            workload(pod_set("a", minCount=1), pod_set("b", minCount=1)),
            "spec.podSets: Invalid value: 2: at most one podSet can use minCount",
            id="one-min-count",
        ),
        pytest.param(
            workload(status=admitted()),
            workload(status={"conditions": [RESERVED]}),
            "status.admission: Required value: must be set while the QuotaReserved condition is true",
            id="admission-required",
        ),
        pytest.param(
            workload(status=admitted(assignment("main"))),
            workload(status=admitted(assignment("other"))),
            'status.admission.podSetAssignments[0].name: Not found: "other"',
            id="assignment-names-a-pod-set",
        ),
        pytest.param(
            workload(status=admitted(assignment(cpu="1500m", count=3))),
            workload(status=admitted(assignment(cpu="3", count=2), assignment(cpu="1001m", count=2))),
            'status.admission.podSetAssignments[1].resourceUsage[cpu]: Invalid value: "1001m": is not a multiple of 2',
            id="usage-multiple-of-count",
        ),
        pytest.param(
            workload(status={"reclaimablePods": [{"name": "main", "count": 2}]}),
            workload(status={"reclaimablePods": [{"name": "main", "count": 3}]}),
            "status.reclaimablePods[main].count: Invalid value: 3: should be less or equal to 2",
            id="reclaimable-count",
        ),
        pytest.param(
            workload(status={"reclaimablePods": [{"name": "main", "count": 1}]}),
            workload(status={"reclaimablePods": [{"name": "worker", "count": 1}]}),
            'status.reclaimablePods[worker].name: Unsupported value: "worker": supported values: "main"',
            id="reclaimable-name",
        ),
        pytest.param(
            workload(
                status={"admissionChecks": [{"name": "ac", "state": "Ready", "podSetUpdates": [{"name": "main"}]}]}
            ),
            workload(status={"admissionChecks": [{"name": "ac", "state": "Ready", "podSetUpdates": [{"name": "x"}]}]}),
            'status.admissionChecks[0].podSetUpdates[0].name: Unsupported value: "x": supported values: "main"',
            id="pod-set-update-name",
        ),
        pytest.param(
            workload(
                status={
                    "admissionChecks": [
                        {
                            "name": "ac",
                            "state": "Ready",
                            "podSetUpdates": [{"name": "main", "nodeSelector": {"a": "b"}}],
                        }
                    ]
                }
            ),
            workload(
                status={
                    "admissionChecks": [
                        {
                            "name": "ac",
                            "state": "Ready",
                            "podSetUpdates": [{"name": "main", "nodeSelector": {"a/b/c": "b"}}],
                        }
                    ]
                }
            ),
            'status.admissionChecks[0].podSetUpdates[0].nodeSelector: Invalid value: "a/b/c": a qualified name must '
            "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. "
            "'example.com/MyName')",
            id="pod-set-update-node-selector",
        ),
        pytest.param(
            workload(annotations={ww.ADMISSION_GATED_BY_ANNOTATION: "example.com/gate, example.com/other"}),
            workload(annotations={ww.ADMISSION_GATED_BY_ANNOTATION: "example.com/gate,example.com/gate"}),
            'metadata.annotations[kueue.x-k8s.io/admission-gated-by]: Invalid value: "example.com/gate,'
            'example.com/gate": duplicate gate name: example.com/gate',
            id="admission-gated-by-format",
        ),
        pytest.param(
            workload(annotations={ww.ADMISSION_GATED_BY_ANNOTATION: "example.com/gate"}),
            workload(annotations={ww.ADMISSION_GATED_BY_ANNOTATION: "gate"}),
            'metadata.annotations[kueue.x-k8s.io/admission-gated-by]: Invalid value: "gate": must be a '
            'domain-prefixed path (such as "acme.io/foo")',
            id="admission-gated-by-domain",
        ),
    ],
)
def test_create_rules(valid: dict[str, Any], invalid: dict[str, Any], message: str) -> None:
    assert refused(valid) == []
    assert refused(invalid) == [message]


def test_minimum_count_is_refused_on_an_elastic_workload_only_with_the_gate() -> None:
    elastic = workload(pod_set(minCount=1), annotations={"kueue.x-k8s.io/elastic-job": "true"})
    assert refused(elastic, ElasticJobsViaWorkloadSlices=False) == []
    message = "spec.podSets: Invalid value: 1: partial admission and elastic job cannot be used together"
    assert refused(elastic, ElasticJobsViaWorkloadSlices=True) == [message]
    assert refused(elastic) == [message]  # the gate is on by default (Kueue v0.18+)


def test_priority_boost_must_be_an_integer_under_its_gate() -> None:
    key = "kueue.x-k8s.io/priority-boost"
    assert refused(workload(annotations={key: "x"})) == []  # the gate is off by default
    assert refused(workload(annotations={key: "-5"}), PriorityBoost=True) == []
    path = f"metadata.annotations[{key}]"
    assert refused(workload(annotations={key: "x"}), PriorityBoost=True) == [
        f'{path}: Invalid value: "x": must be a valid signed integer'
    ]
    assert refused(workload(annotations={key: ""}), PriorityBoost=True) == [
        f'{path}: Invalid value: "": must be a valid signed integer; use "0" explicitly, empty string is not allowed'
    ]


def test_gated_rules_are_off_with_their_gates() -> None:
    negative = workload(pod_set(requests={"cpu": "-1"}, template={"metadata": {"labels": {"a": "b c"}}, "spec": {}}))
    assert (
        refused(negative, WorkloadValidateResourcesAreNonNegative=False, WorkloadValidationForPodSetMetadata=False)
        == []
    )
    sliced = workload(pod_set(topologyRequest={"podSetSliceSize": 2}))
    assert refused(sliced, TASValidateWorkloadSliceSize=False) == []
    gated = workload(annotations={ww.ADMISSION_GATED_BY_ANNOTATION: "gate"})
    assert refused(gated, AdmissionGatedBy=False) == []


def test_default_drops_min_count_only_without_partial_admission() -> None:
    obj = workload(pod_set(minCount=1))
    assert ww.default(obj, gates={}) == obj
    assert "minCount" not in ww.default(obj, gates={"PartialAdmission": False})["spec"]["podSets"][0]
    assert obj["spec"]["podSets"][0]["minCount"] == 1  # a copy


# -- update (ValidateWorkloadUpdate) ----------------------------------------------------------------


def test_pod_sets_are_immutable_while_quota_is_reserved() -> None:
    pending = workload()
    changed = workload(pod_set(count=3))
    assert refused(changed, old=pending) == []
    reserved = workload(status=admitted())
    same = workload(pod_set(requests={"cpu": "1000m"}), status=admitted())  # equal quantities are no change
    assert refused(same, old=reserved) == []
    assert refused(workload(pod_set(count=3), status=admitted()), old=reserved) == [
        "spec.podSets.0: Invalid value: v1beta2.PodSet{...}: field is immutable"
    ]
    assert refused(workload(pod_set(), pod_set("b"), status=admitted()), old=reserved) == [
        "spec.podSets: Invalid value: []v1beta2.PodSet{...}: field is immutable"
    ]


def test_an_elastic_workloads_count_may_go_down_while_it_holds_quota() -> None:
    elastic = {"kueue.x-k8s.io/elastic-job": "true"}
    old = workload(pod_set(count=4), status=admitted(assignment(count=4, cpu="4")), annotations=elastic)
    new = workload(pod_set(count=2), status=admitted(assignment(count=4, cpu="4")), annotations=elastic)
    assert refused(new, old=old, ElasticJobsViaWorkloadSlices=True) == []
    assert refused(new, old=old) == []  # on by default
    assert refused(new, old=old, ElasticJobsViaWorkloadSlices=False) == [
        "spec.podSets.0: Invalid value: v1beta2.PodSet{...}: field is immutable"
    ]


def test_reclaimable_pods_do_not_go_down_nor_go_away_while_quota_is_reserved() -> None:
    old = workload(status=admitted(reclaimablePods=[{"name": "main", "count": 1}]))
    assert refused(workload(status=admitted(reclaimablePods=[{"name": "main", "count": 2}])), old=old) == []
    assert refused(workload(status=admitted(reclaimablePods=[{"name": "main", "count": 0}])), old=old) == [
        "status.reclaimablePods[main].count: Invalid value: 0: cannot be less than 1"
    ]
    assert refused(workload(status=admitted(reclaimablePods=[])), old=old) == [
        "status.reclaimablePods[main]: Required value: cannot be removed"
    ]


def test_admission_is_immutable_but_its_topology_assignment() -> None:
    old = workload(status=admitted())
    topology = {"levels": ["kubernetes.io/hostname"], "slices": []}
    with_topology = copy.deepcopy(old)
    with_topology["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = topology
    assert refused(with_topology, old=old) == []
    cleared = copy.deepcopy(old)
    del cleared["status"]["admission"]
    cleared["status"]["conditions"] = []
    assert refused(cleared, old=old) == []
    moved = copy.deepcopy(old)
    moved["status"]["admission"]["clusterQueue"] = "other"
    assert refused(moved, old=old) == ["status.admission: Invalid value: v1beta2.Admission{...}: field is immutable"]
    assert refused(with_topology, old=old, TopologyAwareScheduling=False) == [
        "status.admission: Invalid value: v1beta2.Admission{...}: field is immutable"
    ]


def test_a_ready_checks_pod_set_updates_are_immutable() -> None:
    def checks(state: str, selector: str) -> dict[str, Any]:
        update = {"name": "main", "nodeSelector": {"zone": selector}}
        return {"admissionChecks": [{"name": "ac", "state": state, "podSetUpdates": [update]}]}

    assert refused(workload(status=checks("Ready", "b")), old=workload(status=checks("Pending", "a"))) == []
    assert refused(workload(status=checks("Ready", "b")), old=workload(status=checks("Ready", "a"))) == [
        "status.admissionChecks[0].podSetUpdates: Invalid value: []v1beta2.PodSetUpdate{...}: field is immutable"
    ]


def test_cluster_name_is_one_of_the_nominated_clusters() -> None:
    old = workload(status={"nominatedClusterNames": ["w1", "w2"]})
    assert refused(workload(status={"clusterName": "w2"}), old=old) == []
    assert refused(workload(status={"clusterName": "w3"}), old=old) == [
        'status.clusterName: Invalid value: "w3": when setting clusterName it must be one of the nominatedClusterNames'
    ]


def test_admission_gates_may_only_be_removed() -> None:
    key = ww.ADMISSION_GATED_BY_ANNOTATION
    path = f"metadata.annotations[{key}]"
    old = workload(annotations={key: "example.com/a,example.com/b"})
    assert refused(workload(annotations={key: "example.com/b"}), old=old) == []
    assert refused(workload(annotations={key: "example.com/b,example.com/c"}), old=old) == [
        f"{path}: Forbidden: can only remove gates, not add new ones"
    ]
    assert refused(workload(annotations={key: "example.com/a"}), old=workload()) == [
        f"{path}: Forbidden: cannot add admission gate after creation"
    ]


def test_a_workload_reserving_quota_without_admission_may_still_converge() -> None:
    stuck = workload(status={"conditions": [RESERVED]})
    assert refused(copy.deepcopy(stuck), old=stuck) == []


def test_message_is_kube_apiservers_denial() -> None:
    errors = ww.validate(workload(pod_set("a", minCount=1), pod_set("b", minCount=1)), gates={})
    assert ww.message(errors) == (
        'admission webhook "vworkload.kb.io" denied the request: spec.podSets: Invalid value: 2: at most one '
        "podSet can use minCount"
    )
