"""TopologyAssignment encoding (SEMANTICS-ADVANCED A.8) against Kueue's pkg/util/tas/tas_assignment_test.go,
topology requests from manifests and annotations (A.4), and the Topology / Node / Pod parsers."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueue_es.events import manifests, models, tas
from kueue_es.events.tas import Assignment, DomainAssignment, decode, encode

H = tas.HOSTNAME_LABEL


def _assignment(levels: list[str], domains: list[tuple[list[str], int]]) -> Assignment:
    return Assignment(levels=tuple(levels), domains=tuple(DomainAssignment(tuple(v), n) for v, n in domains))


def _json(ta: models.TopologyAssignment) -> dict:
    return msgspec.json.decode(msgspec.json.encode(ta))


ENCODINGS = [
    ("bothWays empty", _assignment(["a", "b"], []), {"levels": ["a", "b"]}),
    (
        "bothWays one domain",
        _assignment(["a", "b"], [(["a1", "b1"], 1)]),
        {
            "levels": ["a", "b"],
            "slices": [
                {"domainCount": 1, "valuesPerLevel": [{"universal": "a1"}, {"universal": "b1"}],
                 "podCounts": {"universal": 1}}
            ],
        },
    ),
    (
        "bothWays multiple domains, same counts, no common prefix",
        _assignment(["a", "b"], [(["a1", "b1"], 1), (["a2", "b2"], 1)]),
        {
            "levels": ["a", "b"],
            "slices": [
                {"domainCount": 2,
                 "valuesPerLevel": [{"individual": {"prefix": "a", "roots": ["1", "2"]}},
                                    {"individual": {"prefix": "b", "roots": ["1", "2"]}}],
                 "podCounts": {"universal": 1}}
            ],
        },
    ),
    (
        "GKE node pools",
        _assignment([H], [(["gke-c-pool-a-hash1-aa"], 3), (["gke-c-pool-a-hash1-bb"], 3),
                          (["gke-c-pool-b-hash2-cc"], 4), (["gke-c-pool-b-hash2-dd"], 5)]),
        {
            "levels": [H],
            "slices": [
                {"domainCount": 2, "podCounts": {"universal": 3},
                 "valuesPerLevel": [{"individual": {"prefix": "gke-c-pool-a-hash1-", "roots": ["aa", "bb"]}}]},
                {"domainCount": 2, "podCounts": {"individual": [4, 5]},
                 "valuesPerLevel": [{"individual": {"prefix": "gke-c-pool-b-hash2-", "roots": ["cc", "dd"]}}]},
            ],
        },
    ),
    (
        "AWS EKS private DNS names",
        _assignment([H], [(["ip-10-24-34-0.us-west-2.compute.internal"], 2),
                          (["ip-10-24-34-1.us-west-2.compute.internal"], 2),
                          (["ip-10-24-35-0.us-west-2.compute.internal"], 3),
                          (["ip-10-24-35-1.us-west-2.compute.internal"], 4)]),
        {
            "levels": [H],
            "slices": [
                {"domainCount": 2, "podCounts": {"universal": 2},
                 "valuesPerLevel": [{"individual": {"prefix": "ip-10-24-34-", "suffix": ".us-west-2.compute.internal",
                                                    "roots": ["0", "1"]}}]},
                {"domainCount": 2, "podCounts": {"individual": [3, 4]},
                 "valuesPerLevel": [{"individual": {"prefix": "ip-10-24-35-", "suffix": ".us-west-2.compute.internal",
                                                    "roots": ["0", "1"]}}]},
            ],
        },
    ),
    (
        "A.8.3 example: kind-worker, kind-worker2",
        _assignment([H], [(["kind-worker"], 1), (["kind-worker2"], 1)]),
        {
            "levels": [H],
            "slices": [{"domainCount": 2, "podCounts": {"universal": 1},
                        "valuesPerLevel": [{"individual": {"prefix": "kind-worker", "roots": ["", "2"]}}]}],
        },
    ),
]  # fmt: skip


@pytest.mark.parametrize(("name", "assignment", "want"), ENCODINGS, ids=[c[0] for c in ENCODINGS])
def test_kueue_encodings(name: str, assignment: Assignment, want: dict) -> None:
    """Kueue's own expected encodings (the cloud-provider ones are Kueue's
    TestCompactTopologyAssignmentEncodingWithHostnamePrefixRuns, i.e. before the size comparison),
    and decoding them gives the assignment back."""
    encoded = tas._prefix_runs_encoding(assignment) if "pool" in name or "DNS" in name else encode(assignment)
    assert _json(encoded) == want
    assert decode(encoded) == assignment


def _pools(n: int) -> Assignment:
    """Kueue hostnamePrefixAssignment: half pool-a-node-XXXXX, half pool-b-node-XXXXX, one pod each."""
    half = n // 2
    hosts = [f"pool-{'a' if i < half else 'b'}-node-{(i if i < half else i - half):05d}" for i in range(n)]
    return _assignment([H], [([h], 1) for h in hosts])


@pytest.mark.parametrize(
    ("count", "prefix_runs"),
    [(1, True), (4, False), (20, True)],
    ids=["enabled keeps one-slice", "enabled uses smaller single-slice", "enabled uses smaller hostname-prefix"],
)
def test_size_comparison(count: int, prefix_runs: bool) -> None:
    """Kueue TestV1Beta2FromInternal_hostnamePrefixFeatureGateAndFallback: the exact choice."""
    want = tas._prefix_runs_encoding(_pools(count)) if prefix_runs else tas._single_slice_encoding(_pools(count))
    assert encode(_pools(count)) == want


@pytest.mark.parametrize(
    ("count", "prefix_runs"),
    [(1, True), (4, False), (20, True)],
    ids=["enabled keeps one-slice", "enabled uses smaller single-slice", "enabled uses smaller hostname-prefix"],
)
def test_shorter_encoding_wins(count: int, prefix_runs: bool) -> None:
    """Kueue TestV1Beta2FromInternal_hostnamePrefixFeatureGateAndFallback."""
    got = encode(_pools(count))
    assert (len(got.slices) > 1) == (prefix_runs and count > 1)
    assert decode(got) == _pools(count)
    assert len(encode(_pools(count), by_hostname_prefix=False).slices) == 1


def test_prefix_keys() -> None:
    """Kueue TestReusableHostnamePrefixKeys."""
    hosts = ["gke-c-pool-a-hash1-aa", "gke-c-pool-a-hash1-bb", "gke-c-pool-b-hash2-cc", "gke-c-pool-b-hash2-dd"]
    assert tas._hostname_prefix_keys(hosts) == [h[:-2] for h in hosts]
    assert tas._hostname_prefix_keys(["node-a", "host-b"]) == ["", ""]
    assert tas._hostname_prefix_keys(["nodea", "hostb"]) is None


def test_decoder_accepts_any_valid_encoding() -> None:
    """A.8.2: an uncompressed encoding (every value individual, several slices) decodes the same."""
    loose = models.TopologyAssignment(
        levels=["block", H],
        slices=[
            models.TopologyAssignmentSlice(
                domain_count=1,
                values_per_level=[
                    models.TopologyAssignmentLevelValues(
                        individual=models.TopologyAssignmentIndividualValues(roots=["b1"])
                    ),
                    models.TopologyAssignmentLevelValues(universal="x1"),
                ],
                pod_counts=models.TopologyAssignmentPodCounts(individual=[2]),
            ),
            models.TopologyAssignmentSlice(
                domain_count=2,
                values_per_level=[
                    models.TopologyAssignmentLevelValues(universal="b2"),
                    models.TopologyAssignmentLevelValues(
                        individual=models.TopologyAssignmentIndividualValues(prefix="x", suffix="-z", roots=["2", "3"])
                    ),
                ],
                pod_counts=models.TopologyAssignmentPodCounts(universal=1),
            ),
        ],
    )
    want = _assignment(["block", H], [(["b1", "x1"], 2), (["b2", "x2-z"], 1), (["b2", "x3-z"], 1)])
    assert decode(loose) == want
    bad = msgspec.structs.replace(loose.slices[1], domain_count=3)
    with pytest.raises(ValueError, match="roots"):
        decode(models.TopologyAssignment(levels=["block", H], slices=[bad]))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["b1", "b2", "blk-x"]), st.from_regex(r"[a-z]{1,3}(-[a-z0-9]{1,3}){0,3}", fullmatch=True),
                  st.integers(1, 9)),
        max_size=12,
    ),
    st.booleans(),
)  # fmt: skip
def test_round_trip(domains: list[tuple[str, str, int]], hostname: bool) -> None:
    """decode(encode(a)) == a for hostname-only and multi-level assignments, with either gate value."""
    levels = [H] if hostname else ["block", "node"]
    assignment = _assignment(levels, [([h] if hostname else [b, h], n) for b, h, n in domains])
    for by_prefix in (True, False):
        encoded = encode(assignment, by_hostname_prefix=by_prefix)
        assert decode(encoded) == assignment
        assert decode(msgspec.json.decode(msgspec.json.encode(encoded), type=models.TopologyAssignment)) == assignment


# --- topology requests (A.4) -------------------------------------------------------------------


def _workload(pod_sets: list[dict]) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"podSets": pod_sets},
    }


def _ps(name: str, count: int, tr: dict | None) -> dict:
    out: dict = {"name": name, "count": count, "template": {"spec": {"containers": [{"name": "c"}]}}}
    if tr is not None:
        out["topologyRequest"] = tr
    return out


def test_workload_topology_request_is_parsed() -> None:
    """spec.podSets[].topologyRequest with Kueue's v1beta2 field names."""
    wl = manifests.parse_object(
        _workload([_ps("main", 4, {"required": "cloud.com/rack", "podSetSliceRequiredTopology": H,
                                   "podSetSliceSize": 2, "podIndexLabel": "idx"})])
    )  # fmt: skip
    assert isinstance(wl, models.Workload)
    tr = wl.spec.pod_sets[0].topology_request
    assert tr == models.PodSetTopologyRequest(
        required="cloud.com/rack", pod_set_slice_required_topology=H, pod_set_slice_size=2, pod_index_label="idx"
    )
    assert tas.requests_tas(tr) and not tas.requests_tas(models.PodSetTopologyRequest(pod_index_label="idx"))


@pytest.mark.parametrize(
    ("pod_sets", "field", "problem"),
    [
        ([_ps("m", 2, {"required": "a", "preferred": "b"})], "spec.podSets[0].topologyRequest.preferred", "together"),
        ([_ps("m", 2, {"required": "bad key!"})], "spec.podSets[0].topologyRequest.required", "label key"),
        ([_ps("m", 2, {"podSetSliceRequiredTopology": H})], "spec.podSets[0].topologyRequest.podSetSliceSize",
         "required"),
        ([_ps("m", 2, {"podSetSliceRequiredTopology": H, "podSetSliceSize": 3})],
         "spec.podSets[0].topologyRequest.podSetSliceSize", "between 1"),
        ([_ps("m", 4, {"podsetSliceRequiredTopologyConstraints": [{"topology": "r", "size": 4},
                                                                   {"topology": H, "size": 3}]})],
         "spec.podSets[0].topologyRequest.podsetSliceRequiredTopologyConstraints[1].size", "divide"),
    ],
)  # fmt: skip
def test_invalid_topology_requests_name_the_field(pod_sets: list[dict], field: str, problem: str) -> None:
    """A.4.2 validation: errors name the object and the field."""
    with pytest.raises(manifests.ManifestError) as err:
        manifests.parse_object(_workload(pod_sets))
    assert err.value.field == field and problem in err.value.problem and "Workload ns/w" in str(err.value)


@pytest.mark.parametrize(
    ("pod_sets", "field", "problem"),
    [
        ([_ps("m", 2, {"required": "a", "podSetGroupName": "7"})], "topologyRequest.podSetGroupName", "number"),
        ([_ps("l", 2, {"required": "a", "podSetGroupName": "g"}), _ps("w", 3, {"required": "a", "podSetGroupName": "g"})],
         "spec.podSets[0].topologyRequest.podSetGroupName", "count 1"),
        ([_ps("l", 1, {"required": "a", "podSetGroupName": "g"}), _ps("w", 3, {"required": "b", "podSetGroupName": "g"})],
         "spec.podSets[0].topologyRequest.podSetGroupName", "same topology"),
        ([_ps("l", 1, {"required": "a", "podSetGroupName": "g"})], "spec.podSets[0].topologyRequest.podSetGroupName",
         "exactly 2"),
    ],
)  # fmt: skip
def test_group_rules_are_the_job_webhooks(pod_sets: list[dict], field: str, problem: str) -> None:
    """A.4.2 leader + workers rules: the job webhooks' (jobframework/tas_validation.go), naming the field;
    a Workload object is not held to them (Kueue's Workload webhook has none)."""
    wl = manifests.parse_object(_workload(pod_sets))
    assert isinstance(wl, models.Workload)
    with pytest.raises(tas.TopologyRequestError) as err:
        for ps in wl.spec.pod_sets:
            assert ps.topology_request is not None
            tas.validate_topology_request(ps.topology_request, count=ps.count)
        tas.validate_pod_set_groups(wl.spec.pod_sets)
    assert err.value.field == field and problem in err.value.problem


def test_annotations_to_topology_request() -> None:
    """A.4.1: precedence, group name only with required/preferred, slices, JSON layers, gate off ignores JSON."""
    f = tas.topology_request_from_annotations
    assert f({}) is None
    assert f({"other": "x"}) is None
    assert f({tas.REQUIRED_ANNOTATION: "rack", tas.GROUP_NAME_ANNOTATION: "g"}) == models.PodSetTopologyRequest(
        required="rack", pod_set_group_name="g"
    )
    assert f({tas.UNCONSTRAINED_ANNOTATION: "true", tas.GROUP_NAME_ANNOTATION: "g"}) == models.PodSetTopologyRequest(
        unconstrained=True
    )
    # kept: not a TAS request, but Kueue keeps it so that it injects no "true" of its own
    assert f({tas.UNCONSTRAINED_ANNOTATION: "false"}) == models.PodSetTopologyRequest(unconstrained=False)
    assert not tas.requests_tas(f({tas.UNCONSTRAINED_ANNOTATION: "false"}))
    assert f({tas.SLICE_REQUIRED_ANNOTATION: H, tas.SLICE_SIZE_ANNOTATION: "2"}) == models.PodSetTopologyRequest(
        pod_set_slice_required_topology=H, pod_set_slice_size=2
    )
    layers = '[{"topology": "rack", "size": 4}, {"topology": "kubernetes.io/hostname", "size": 2}]'
    got = f({tas.PREFERRED_ANNOTATION: "block", tas.SLICE_CONSTRAINTS_ANNOTATION: layers})
    assert got is not None and [x.size for x in got.podset_slice_required_topology_constraints] == [4, 2]
    assert f({tas.SLICE_CONSTRAINTS_ANNOTATION: layers}, multi_layer=False) is None
    # read as Go reads it: keys case-insensitively, unknown keys skipped
    got = f(
        {
            tas.REQUIRED_ANNOTATION: "block",
            tas.SLICE_CONSTRAINTS_ANNOTATION: '[{"Topology": "rack", "SIZE": 4, "x": 1}]',
        }
    )
    assert got is not None and got.podset_slice_required_topology_constraints == [
        models.PodsetSliceRequiredTopologyConstraint(topology="rack", size=4)
    ]
    for bad, annotation in (
        ({tas.REQUIRED_ANNOTATION: "a", tas.PREFERRED_ANNOTATION: "b"}, tas.PREFERRED_ANNOTATION),
        ({tas.UNCONSTRAINED_ANNOTATION: "maybe"}, tas.UNCONSTRAINED_ANNOTATION),
        ({tas.SLICE_REQUIRED_ANNOTATION: H}, tas.SLICE_SIZE_ANNOTATION),
        ({tas.SLICE_REQUIRED_ANNOTATION: H, tas.SLICE_SIZE_ANNOTATION: "two"}, tas.SLICE_SIZE_ANNOTATION),
        ({tas.SLICE_CONSTRAINTS_ANNOTATION: "{"}, tas.SLICE_CONSTRAINTS_ANNOTATION),
        ({tas.SLICE_CONSTRAINTS_ANNOTATION: "[]"}, tas.SLICE_CONSTRAINTS_ANNOTATION),  # tas.go: 1 to 3 layers
        ({tas.SLICE_CONSTRAINTS_ANNOTATION: '[{"topology": "rack", "size": 0}]'}, tas.SLICE_CONSTRAINTS_ANNOTATION),
    ):
        with pytest.raises(tas.TopologyRequestError) as err:
            f(bad)
        assert err.value.field == annotation


# --- Topology, Node, Pod manifests ---------------------------------------------------------------


def test_topology_parsing_and_validation() -> None:
    """A.1: v1beta2 and v1alpha1; hostname only as the last level; unique levels."""
    for api in ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1alpha1"):
        topo = manifests.parse_topology(
            {"apiVersion": api, "kind": "Topology", "metadata": {"name": "t"},
             "spec": {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": H}]}}
        )  # fmt: skip
        assert topo.level_keys == ["rack", H]
    for levels, problem in (([{"nodeLabel": H}, {"nodeLabel": "rack"}], "last level"), ([], "at least 1 items"),
                            ([{"nodeLabel": "a"}, {"nodeLabel": "a"}], "twice")):  # fmt: skip
        with pytest.raises(manifests.ManifestError, match=problem):
            manifests.parse_topology(
                {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"},
                 "spec": {"levels": levels}}
            )  # fmt: skip


def test_node_and_pod_parsing() -> None:
    """Allocatable as integer amounts, the Ready status without timestamps; pods charge pods: 1; TAS pods are skipped."""
    n = manifests.parse_node(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {H: "n1"}},
         "spec": {"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule", "timeAdded": "x"}]},
         "status": {"allocatable": {"cpu": "3500m", "memory": "1Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}}
    )  # fmt: skip
    assert n.status.allocatable == {"cpu": 3500, "memory": 2**30, "pods": 110}
    assert n.status.ready == "True" and n.spec.unschedulable and not n.schedulable_and_ready
    assert n.spec.taints == [models.Taint(key="k", effect="NoSchedule")]
    with pytest.raises(manifests.ManifestError) as err:
        manifests.parse_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"},
                              "status": {"allocatable": {"cpu": "lots"}}})  # fmt: skip
    assert err.value.field == "status.allocatable.cpu"
    p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
         "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m"}}}]},
         "status": {"phase": "Running"}}  # fmt: skip
    usage = manifests.parse_pod_usage(p)
    assert usage == models.PodUsage(namespace="ns", name="p", node_name="n1", phase="Running",
                                    requests={"cpu": 250, "pods": 1})  # fmt: skip
    assert usage.takes_capacity
    p["metadata"]["annotations"] = {tas.UNCONSTRAINED_ANNOTATION: "true"}
    assert manifests.parse_pod_usage(p) is None
