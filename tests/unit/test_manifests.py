"""Manifests become validated models; bad ones give errors naming object and field."""

import pytest

from kueue_es.events import manager_config, manifests, models, types
from kueue_es.services.watcher import convert
from tests.kube import examples

EXAMPLES = examples.EXAMPLES
SHARED = EXAMPLES.parent


def cq(spec: dict) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}


def one_flavor(resources: list[dict], covered: list[str] | None = None) -> dict:
    return {
        "resourceGroups": [
            {
                "coveredResources": covered or [r["name"] for r in resources],
                "flavors": [{"name": "f", "resources": resources}],
            }
        ]
    }


def test_kueue_single_clusterqueue_setup_parses() -> None:
    """Kueue's own admin/single-clusterqueue-setup.yaml converts with exact amounts."""
    docs = manifests.load_documents((EXAMPLES / "admin/single-clusterqueue-setup.yaml").read_text())
    objs = [manifests.parse_object(d) for d in docs]
    assert [type(o).__name__ for o in objs] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    queue = objs[1]
    assert isinstance(queue, models.ClusterQueue)
    quotas = queue.spec.resource_groups[0].flavors[0].resources
    assert [(q.name, q.nominal_quota) for q in quotas] == [("cpu", 9000), ("memory", 36 * 2**30)]
    assert queue.spec.namespace_selector == models.LabelSelector()
    assert queue.spec.queueing_strategy == "BestEffortFIFO"
    assert objs[2].spec.cluster_queue == "cluster-queue"  # type: ignore[union-attr]


@pytest.mark.parametrize("path", sorted(p.name for p in (EXAMPLES / "admin").glob("*.yaml")))
def test_every_admin_example_parses(path: str) -> None:
    """Every kueue.x-k8s.io object in Kueue's admin examples is accepted."""
    for doc in manifests.load_documents((EXAMPLES / "admin" / path).read_text()):
        if doc.get("apiVersion") == manifests.KUEUE_API and doc.get("kind") in manifests.KUEUE_KINDS:
            assert manifests.parse_object(doc).metadata.name


def test_workload_requests_from_template() -> None:
    """A Workload's pod set carries per-pod requests: containers summed, init containers maxed."""
    wl = manifests.parse_object(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "w", "creationTimestamp": "2026-01-01T00:00:01Z"},
            "spec": {
                "queueName": "q",
                "podSets": [
                    {
                        "name": "main",
                        "count": 2,
                        "template": {
                            "spec": {
                                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "3"}}}],
                                "containers": [
                                    {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                                    {"name": "b", "resources": {"limits": {"cpu": "500m"}}},
                                ],
                            }
                        },
                    }
                ],
            },
        }
    )
    assert isinstance(wl, models.Workload)
    assert wl.metadata.namespace == "default"
    assert wl.metadata.creation_timestamp_ms == 1767225601000
    assert wl.spec.pod_sets[0].requests == {"cpu": 3000, "memory": 2**30}


def workload(pod_set_extra: dict) -> dict:
    """A one-pod-set Workload manifest with ``pod_set_extra`` merged into its pod set."""
    pod_set = {"name": "main", "count": 2, "template": {"spec": {"containers": [{"name": "c"}]}}, **pod_set_extra}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w1"},
        "spec": {"queueName": "q", "podSets": [pod_set]},
    }


@pytest.mark.parametrize(
    ("manifest", "field", "problem"),
    [
        (
            cq(one_flavor([{"name": "cpu", "nominalQuota": "-3"}])),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "must not be negative",
        ),
        (
            cq(one_flavor([{"name": "cpu", "nominalQuota": "lots"}])),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "not a quantity",
        ),
        (cq({"queueingStrategy": "Random"}), "spec.queueingStrategy", "Invalid enum value"),
        (
            cq(one_flavor([{"name": "cpu", "nominalQuota": 1, "borrowingLimit": 1}])),
            "spec.resourceGroups[0].flavors[0].resources[0]",
            "need spec.cohortName",
        ),
        (
            cq(one_flavor([{"name": "cpu", "nominalQuota": 1}], covered=["cpu", "memory"])),
            "spec.resourceGroups[0].flavors[0].resources",
            "exactly the covered resources",
        ),
        (
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "Bad_Name"}},
            "metadata.name",
            "DNS-1123",
        ),
        (
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Widget", "metadata": {"name": "w"}},
            "apiVersion/kind",
            "not a kind",
        ),
        (
            # optional, as Kueue's, but never empty when written (Kueue's CRD pattern)
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "lq"},
                "spec": {"clusterQueue": ""},
            },
            "spec.clusterQueue",
            "leave the field out",
        ),
        # a misspelt field is refused, as strict field validation does, not silently dropped
        (
            workload({"topologyRequest": {"requird": "rack"}}),
            "spec.podSets[0].topologyRequest.requird",
            "unknown field",
        ),
        (workload({"cout": 3}), "spec.podSets[0].cout", "unknown field"),
        # outside pod sets too: every field Kueue's v1beta2 CRD does not declare (events/kueue_fields.py)
        ({**workload({}), "spec": {**workload({})["spec"], "bogusField": 1}}, "spec.bogusField", "unknown field"),
        (
            {
                **cq(one_flavor([{"name": "cpu", "nominalQuota": 1}])),
                "spec": {
                    **cq(one_flavor([{"name": "cpu", "nominalQuota": 1}]))["spec"],
                    "queuingStrategy": "StrictFIFO",
                },
            },
            "spec.queuingStrategy",
            "unknown field",
        ),
        (
            {
                **cq(one_flavor([{"name": "cpu", "nominalQuota": 1}])),
                "spec": {
                    **cq(one_flavor([{"name": "cpu", "nominalQuota": 1}]))["spec"],
                    "preemption": {"withinClusterQueu": "LowerPriority"},
                },
            },
            "spec.preemption.withinClusterQueu",
            "unknown field",
        ),
        (
            cq(one_flavor([{"name": "cpu", "nominalQuota": 1, "borowingLimit": 2}])),
            "spec.resourceGroups[0].flavors[0].resources[0].borowingLimit",
            "unknown field",
        ),
        (
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "lq"},
                "spec": {"clusterQueue": "cq"},
                "specs": {},
            },
            "specs",
            "unknown field",
        ),
        (
            workload(
                {"topologyRequest": {"podsetSliceRequiredTopologyConstraints": [{"topology": "rack", "sise": 2}]}}
            ),
            "spec.podSets[0].topologyRequest.podsetSliceRequiredTopologyConstraints[0].sise",
            "unknown field",
        ),
    ],
)
def test_bad_manifest_names_object_and_field(manifest: dict, field: str, problem: str) -> None:
    """Each kind of bad input raises ManifestError with the object, the field and the problem."""
    with pytest.raises(manifests.ManifestError) as caught:
        manifests.parse_object(manifest)
    assert caught.value.field == field
    assert problem.lower() in caught.value.problem.lower()
    assert caught.value.kind == manifest["kind"]
    assert manifest["metadata"]["name"] in str(caught.value)


def test_a_v1beta1_priority_class_name_is_read_as_a_priority_class_ref() -> None:
    """The scenario format's ``priorityClassName`` (Workload v1beta1): a WorkloadPriorityClass, or
    Kubernetes' PriorityClass when ``priorityClassSource`` says so; an explicit ref wins."""
    manifest = workload({})
    manifest["spec"]["priorityClassName"] = "high"
    ref = manifests.parse_object(manifest).spec.priority_class_ref
    assert ref is not None and (ref.group, ref.kind, ref.name) == ("kueue.x-k8s.io", "WorkloadPriorityClass", "high")
    manifest["spec"]["priorityClassSource"] = "scheduling.k8s.io/priorityclass"
    ref = manifests.parse_object(manifest).spec.priority_class_ref
    assert ref is not None and (ref.group, ref.kind) == ("scheduling.k8s.io", "PriorityClass")
    manifest["spec"]["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "x"}
    assert manifests.parse_object(manifest).spec.priority_class_ref.name == "x"


def test_a_configurations_resource_weights_are_numbers_as_in_kueues_file() -> None:
    """``admissionFairSharing.resourceWeights`` takes a float a resource (Kueue's configuration API), in a
    scenario's Configuration as in the manager's file, and both read to the same weights."""
    section = "admissionFairSharing: {usageHalfLifeTime: 168h, usageSamplingInterval: 5m, resourceWeights: "
    text = f"apiVersion: {manifests.CONFIG_API}\nkind: Configuration\n{section}{{cpu: 2, x/gpu: 0.25, mem: 1.0}}}}\n"
    (manifest,) = manifests.load_documents(text)
    config = manifests.parse_object(manifest)
    assert isinstance(config, models.Configuration) and config.admission_fair_sharing is not None
    assert config.admission_fair_sharing.resource_weights == {"cpu": "2", "x/gpu": "0.25", "mem": "1"}
    assert manager_config.parse(text).configuration.admission_fair_sharing == config.admission_fair_sharing


@pytest.mark.parametrize(
    ("weight", "problem"),
    [(-1, "greater than or equal to 0"), (True, "is not a number"), ("lots", "is not a number"), ([2], "not a number")],
)
def test_a_bad_resource_weight_names_the_resource(weight: object, problem: str) -> None:
    manifest = {
        "apiVersion": manifests.CONFIG_API,
        "kind": "Configuration",
        "admissionFairSharing": {"resourceWeights": {"cpu": weight}},
    }
    with pytest.raises(manifests.ManifestError) as caught:
        manifests.parse_object(manifest)
    assert caught.value.field == "admissionFairSharing.resourceWeights.cpu"
    assert problem in caught.value.problem


def test_fields_of_kueues_crds_we_do_not_model_are_accepted() -> None:
    """Strictness follows Kueue's CRD, not our models: a field Kueue declares but kueue-es ignores parses."""
    doc = cq(one_flavor([{"name": "cpu", "nominalQuota": 1}]))
    doc["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    assert manifests.parse_object(doc).metadata.name == doc["metadata"]["name"]
    assert manifests.parse_object({**doc, "spec": {**doc["spec"], "bogus": 1}}, strict=False) is not None


def test_every_topology_request_field_of_kueue_is_accepted() -> None:
    """Kueue's PodSetTopologyRequest fields all parse (the unknown-field check knows each of them)."""
    request = {
        "required": "rack",
        "podIndexLabel": "idx",
        "subGroupIndexLabel": "sub",
        "subGroupCount": 2,
        "podSetSliceRequiredTopology": "host",
        "podSetSliceSize": 1,
    }
    sliced = manifests.parse_object(workload({"topologyRequest": request}))
    assert sliced.spec.pod_sets[0].topology_request is not None
    assert sliced.spec.pod_sets[0].topology_request.pod_set_slice_size == 1
    layered = {"required": "rack", "podsetSliceRequiredTopologyConstraints": [{"topology": "rack", "size": 2}]}
    assert manifests.parse_object(workload({"topologyRequest": layered})).spec.pod_sets[0].topology_request is not None


def test_bad_yaml_names_the_file() -> None:
    """Unparseable YAML is a ManifestError naming the source."""
    with pytest.raises(manifests.ManifestError, match="jobs.yaml"):
        manifests.load_documents("a: [1, 2", source="jobs.yaml")


def test_objects_from_an_api_server_keep_fields_of_a_newer_kueue() -> None:
    """The watcher converts with strict=False: the API server validated the object against the
    CRD installed there (possibly a newer Kueue's), so a pod-set field we do not know is kept out,
    not a reason to reject the Workload; a file a user wrote is refused (above)."""
    manifest = workload({"someNewerField": {"a": 1}, "topologyRequest": {"required": "rack", "newHint": 1}})
    with pytest.raises(manifests.ManifestError):
        manifests.parse_object(manifest)
    fact = convert.kueue_fact(manifest)
    assert isinstance(fact, types.WorkloadObserved)
    assert fact.workload.spec.pod_sets[0].topology_request is not None
    assert fact.workload.spec.pod_sets[0].topology_request.required == "rack"
