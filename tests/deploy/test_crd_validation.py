"""The CRDs carry Kueue's validation, so a real API server refuses what Kueue's API refuses.

- limits from the models' ``msgspec.Meta`` (Kueue's kubebuilder markers) reach the schema:
  minimums, patterns, lengths, item counts, enums;
- every ``x-kubernetes-validations`` rule has a Python twin in ``kueue_es.crds.RULES`` and
  :func:`kueue_es.validation.validate` enforces it with the field path of the rule;
- where the Kueue mirror is on this machine: every limit and every CEL rule of Kueue's
  published v1beta2 CRDs on a field we model is in ours, with the same value.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_es import crds, validation
from tests.deploy import schemas
from tests.deploy.test_crds import EXAMPLES, SERVED_EXAMPLES
from tests.kube.examples import REFUSED_BY_KUEUE

KUEUE_MIRROR = Path("/work/.mirror/kubernetes-sigs+kueue/repo")
SCHEMAS = {kind.kind: crds.object_schema(kind) for kind in crds.KINDS}
HOSTNAME = "kubernetes.io/hostname"
LIMITS = ("minimum", "maximum", "pattern", "minLength", "maxLength", "minItems", "maxItems", "maxProperties", "enum")

#: Kueue patterns kueue-es writes another way, matching the same strings: (path, Kueue's, ours).
SAME_LANGUAGE = {
    # Kueue's case-insensitive flag after ``^`` is RE2's; Python's re (the emulator, jsonschema) refuses it there
    (".spec.parameters.kind", "^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$", "^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"),
}

#: Kueue CEL rules kueue-es does not carry, and why.
NOT_CARRIED = {
    # Workload rules on status (set by the admitter/dispatcher, which keep them by construction)
    "podSetAssignments must have the same number of podSets as the spec": "status is written by kueue-es only",
    **{
        message: "a rule on the whole Workload reading its QuotaReserved/Admitted condition: not carried yet"
        for message in (
            "priorityClassRef is immutable while workload quota reserved",
            "priorityClassRef.group is immutable while workload quota reserved",
            "priorityClassRef.kind is immutable while workload quota reserved",
            "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload quota reserved",
            "queueName is immutable while workload quota reserved",
            "maximumExecutionTimeSeconds is immutable while workload quota reserved",
        )
    },
}


def node(kind: str, path: str) -> dict[str, Any]:
    return dict(schemas.nodes(SCHEMAS[kind]))[path]


def test_limits_reach_the_schema() -> None:
    """Minimums, item counts, patterns and enums are in the CRDs as Kueue's markers say."""
    assert node("Workload", ".spec.podSets[].count")["minimum"] == 0
    assert node("Workload", ".spec.podSets[].minCount")["minimum"] == 1
    assert node("Workload", ".spec.podSets")["maxItems"] == 18
    assert node("ClusterQueue", ".spec.resourceGroups[].flavors")["minItems"] == 1
    assert node("ClusterQueue", ".spec.cohortName")["pattern"] == crds.models.DNS_SUBDOMAIN_PATTERN
    assert sorted(node("ClusterQueue", ".spec.queueingStrategy")["enum"]) == ["BestEffortFIFO", "StrictFIFO"]
    assert node("Topology", ".spec.levels")["maxItems"] == 16
    assert node("ResourceFlavor", ".spec.nodeLabels")["maxProperties"] == 8


def test_cel_rules_are_emitted_where_they_apply() -> None:
    spec = node("ClusterQueue", ".spec")
    assert "borrowingLimit must be nil when cohort is empty" in [r["message"] for r in spec["x-kubernetes-validations"]]
    # Kueue's webhooks' checks stay the webhooks' (403 from vclusterqueue.kb.io / vcohort.kb.io), not CEL rules:
    # non-negative quantities, a lendingLimit without a cohort, a Cohort's limits without a parent, weights
    quota = node("ClusterQueue", ".spec.resourceGroups[].flavors[].resources[].nominalQuota")
    assert "x-kubernetes-validations" not in quota
    assert [r["message"] for r in spec["x-kubernetes-validations"]] == [
        "borrowingLimit must be nil when cohort is empty"
    ]
    assert "x-kubernetes-validations" not in node("Cohort", ".spec")
    assert "x-kubernetes-validations" not in node("LocalQueue", ".spec.fairSharing.weight")
    assert node("LocalQueue", ".spec.clusterQueue")["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "field is immutable"}
    ]


def test_every_cel_rule_in_the_crds_has_a_python_twin() -> None:
    twins = crds.rules_by_cel()
    rules = [
        rule["rule"]
        for kind in SCHEMAS
        for _, n in schemas.nodes(SCHEMAS[kind])
        for rule in n.get("x-kubernetes-validations", [])
    ]
    assert len(rules) >= 20
    assert [r for r in rules if r not in twins] == []


def cluster_queue(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}


def group(*quotas: dict[str, Any], covered: tuple[str, ...] = ("cpu",), flavor: str = "default") -> dict[str, Any]:
    return {"coveredResources": list(covered), "flavors": [{"name": flavor, "resources": list(quotas)}]}


@pytest.mark.parametrize(
    ("obj", "field", "message"),
    [
        (
            cluster_queue(resourceGroups=[group({"name": "cpu", "nominalQuota": -1})]),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            'Invalid value: "-1": must be greater than or equal to 0',
        ),
        (
            cluster_queue(resourceGroups=[group({"name": "cpu", "nominalQuota": "1", "borrowingLimit": "1"})]),
            "spec",
            'Invalid value: "object": borrowingLimit must be nil when cohort is empty',
        ),
        (
            cluster_queue(
                cohortName="c", resourceGroups=[group({"name": "cpu", "nominalQuota": 1, "lendingLimit": 2})]
            ),
            "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
            'Invalid value: "2": must be less than or equal to the nominalQuota',
        ),
        (
            cluster_queue(queueingStrategy="LIFO"),
            "spec.queueingStrategy",
            'Unsupported value: "LIFO": supported values: "BestEffortFIFO", "StrictFIFO"',
        ),
        (
            cluster_queue(flavorFungibility={"preference": "BorrowingOverPreemption"}),
            "spec.flavorFungibility",
            'Invalid value: "object": preference can only be set when both whenCanBorrow and whenCanPreempt are '
            "TryNextFlavor",
        ),
        (
            cluster_queue(resourceGroups=[group({"name": "cpu", "nominalQuota": 1}, covered=("cpu", "memory"))]),
            "spec.resourceGroups[0]",
            'Invalid value: "object": flavors must have the same number of resources as the coveredResources',
        ),
        (
            cluster_queue(resourceGroups=[group({"name": "memory", "nominalQuota": 1})]),
            "spec.resourceGroups[0].flavors[0].resources[0].name",
            'Invalid value: "memory": must match the name in coveredResources',
        ),
        (
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {"name": "w"},
                "spec": {"podSets": [{"name": "main", "count": -2, "template": {}}]},
            },
            "spec.podSets[0].count",
            "Invalid value: -2: spec.podSets[0].count in body should be greater than or equal to 0",
        ),
        (
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Topology",
                "metadata": {"name": "t"},
                "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]},
            },
            "spec.levels",
            'Invalid value: "array": the kubernetes.io/hostname label can only be used at the lowest level of topology',
        ),
    ],
)
def test_validate_refuses_with_kueues_field_and_message(obj: dict[str, Any], field: str, message: str) -> None:
    causes = validation.validate(obj)
    assert (field, message) in [(c.field, c.message) for c in causes], causes


def test_transition_rules_need_the_old_object() -> None:
    """A LocalQueue's clusterQueue is immutable: fine on create, refused when an update changes it."""
    old = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "q"}}
    old = {**old, "spec": {"clusterQueue": "a"}}
    new = {**old, "spec": {"clusterQueue": "b"}}
    assert validation.validate(new) == []
    assert [str(c) for c in validation.validate(new, old=old)] == [
        'spec.clusterQueue: Invalid value: "b": field is immutable'
    ]


def _workload(queue: str, *, reserved: bool, **spec: Any) -> dict[str, Any]:
    pod_set = {"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
    wl: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w"}}
    wl["spec"] = {"queueName": queue, "podSets": [pod_set], **spec}
    if reserved:
        condition = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "m"}
        condition |= {"lastTransitionTime": "2026-01-01T00:00:00Z"}
        admission = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1}]}
        wl["status"] = {"conditions": [condition], "admission": admission}
    return wl


def test_kueues_rules_on_a_whole_workload_read_its_status() -> None:
    """``kubectl patch workload W --type=merge -p '{"spec":{"queueName":"other"}}'`` on a Workload holding quota:
    Kueue's CRD refuses it with a rule on the whole object (workload_types.go XValidation, reading
    ``oldSelf.status``), so the API server says ``<nil>: ... queueName is immutable while workload quota
    reserved``; the same change is fine while the Workload waits. Before, those rules were not in the CRD here
    and the emulator stored the change, so ``kubectl get workload`` showed a LocalQueue kueue-es never used."""
    held = _workload("a", reserved=True)
    moved = {**held, "spec": {**held["spec"], "queueName": "b"}}
    assert [str(c) for c in validation.validate(moved, old=held)] == [
        '<nil>: Invalid value: "object": queueName is immutable while workload quota reserved'
    ]
    waiting = _workload("a", reserved=False)
    assert validation.validate({**waiting, "spec": {**waiting["spec"], "queueName": "b"}}, old=waiting) == []
    assert validation.validate(moved) == []  # a create has no old object, and its status is not kept
    # a status write keeps the stored spec: admitting with a podSetAssignment per pod set passes, a missing one not
    assert validation.validate_status(held, old=waiting) == []
    short = {**held, "status": {**held["status"], "admission": {"clusterQueue": "cq", "podSetAssignments": []}}}
    assert [c.message for c in validation.validate_status(short, old=waiting)] == [
        'Invalid value: "object": podSetAssignments must have the same number of podSets as the spec'
    ]
    timed = _workload("a", reserved=True, maximumExecutionTimeSeconds=60)
    assert validation.validate({**timed, "spec": {**timed["spec"], "maximumExecutionTimeSeconds": 30}}, old=timed) == []


@pytest.mark.parametrize(
    ("kind", "weight", "refused"),
    [
        ("ClusterQueue", "1n", True),
        ("ClusterQueue", "0.0000000001", True),
        ("Cohort", "1n", True),
        ("ClusterQueue", "0", False),
        ("ClusterQueue", "2n", False),
        ("Cohort", "1u", False),
        # Kueue's LocalQueue webhook has no such bound (validateFairSharing: ClusterQueue and Cohort)
        ("LocalQueue", "1n", False),
    ],
)
def test_fair_sharing_weight_that_would_collapse_is_refused(kind: str, weight: str, refused: bool) -> None:
    """kueue#6986: a weight in (0, 10^-9] loses its precision where Kueue divides by it, so the
    ClusterQueue and Cohort webhooks refuse it (pkg/webhooks/common.go validateFairSharing)."""
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": {"name": "x", "namespace": "default"}}
    obj["spec"] = {"fairSharing": {"weight": weight}, **({"clusterQueue": "cq"} if kind == "LocalQueue" else {})}
    # named as resource.Quantity.String() writes it: 0.0000000001 rounds up to 1n
    want = ['spec.fairSharing: Invalid value: "1n": When not 0, weight must be > 10e-9'] if refused else []
    assert [str(c) for c in validation.validate(obj)] == want


def test_a_valid_queue_passes_and_unknown_fields_are_named() -> None:
    cq = cluster_queue(namespaceSelector={}, resourceGroups=[group({"name": "cpu", "nominalQuota": "9"})])
    assert validation.validate(cq) == []
    assert validation.unknown_fields({**cq, "spec": {**cq["spec"], "cohrtName": "x"}}) == ["spec.cohrtName"]


# -- against Kueue's published CRDs (only where the mirror is on this machine) ------------------------


def kueue_nodes(plural: str) -> dict[str, dict[str, Any]]:
    text = subprocess.run(
        ["git", "-C", str(KUEUE_MIRROR), "show", f"HEAD:config/components/crd/bases/kueue.x-k8s.io_{plural}.yaml"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (version,) = [v for v in yaml.safe_load(text)["spec"]["versions"] if v["name"] == crds.VERSION]
    return dict(schemas.nodes(version["schema"]["openAPIV3Schema"]))


def squeeze(rule: str) -> str:
    return " ".join(rule.split())


@pytest.mark.skipif(
    not (KUEUE_MIRROR / "HEAD").exists() and not (KUEUE_MIRROR / ".git").exists(), reason="no Kueue mirror here"
)
@pytest.mark.parametrize("kind", crds.KINDS, ids=lambda k: k.kind)
def test_agrees_with_kueues_validation(kind: crds.Kind) -> None:
    """Every limit and CEL rule Kueue's CRD puts on a field we spell out is in ours, the same."""
    ours = dict(schemas.nodes(crds.object_schema(kind)))
    theirs = kueue_nodes(kind.plural)
    missing = []
    for path, their in theirs.items():
        if path.startswith((".status", ".metadata")) or path not in ours:
            continue
        our = ours[path]
        if our.get("x-kubernetes-preserve-unknown-fields"):
            continue
        for key in (k for k in LIMITS if k in their):
            same = sorted(our.get(key, [])) == sorted(their[key]) if key == "enum" else our.get(key) == their[key]
            same = same or (key == "pattern" and (path, their[key], our.get(key)) in SAME_LANGUAGE)
            if not same:
                missing.append(f"{path} {key}: Kueue {their[key]!r}, ours {our.get(key)!r}")
        our_rules = {squeeze(r["rule"]) for r in our.get("x-kubernetes-validations", [])}
        for rule in their.get("x-kubernetes-validations", []):
            if rule["message"] not in NOT_CARRIED and squeeze(rule["rule"]) not in our_rules:
                missing.append(f"{path} rule {rule['message']!r}")
    assert missing == []


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="../shared/kueue-examples is not beside the repo")
@pytest.mark.parametrize(("label", "obj"), SERVED_EXAMPLES, ids=[label for label, _ in SERVED_EXAMPLES])
def test_kueue_examples_pass_our_validation(label: str, obj: dict[str, Any]) -> None:
    """What Kueue's docs apply is accepted: no cause, no unknown field (kubectl apply of the examples works),
    but for the files Kueue's own webhooks refuse (``REFUSED_BY_KUEUE``), refused on the same field."""
    refused = REFUSED_BY_KUEUE.get(label.split(":")[0])
    assert [c.field for c in validation.validate(obj)] == ([refused[0]] if refused else [])
    assert validation.unknown_fields(obj) == []


# -- Kueue test/integration/singlecluster/tas/tas_test.go: what the API server refuses of TAS objects -----------


def flavor(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "tas-flavor"},
        "spec": spec,
    }


def topology(*levels: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": "levels-topology"},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        # 'Negative scenarios for ResourceFlavor configuration' / 'should not allow to create ResourceFlavor with
        # invalid topology name'
        (flavor(nodeLabels={"node-group": "tas"}, topologyName="invalid topology name"), "spec.topologyName"),
        # ... / 'should not allow to create ResourceFlavor without any node labels'
        (flavor(topologyName="default"), "spec"),
    ],
)
def test_kueue_tas_refuses_these_flavors(obj: dict[str, Any], field: str) -> None:
    assert [c.field for c in validation.validate(obj)] == [field]


FLAVOR_WITH_TOPOLOGY = flavor(topologyName="default", nodeLabels={"node-group": "tas", "foo": "bar"})


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        # 'Updating ResourceFlavorSpec that defines TopologyName' / 'should not allow to update topologyName'
        (
            {"topologyName": "invalid"},
            ['spec: Invalid value: "object": topologyName is immutable when topologyName is set'],
        ),
        # ... / 'should allow to update nodeTaints'
        ({"nodeTaints": [{"key": "foo", "value": "bar", "effect": "NoSchedule"}]}, []),
        # ... / 'should allow to update tolerations'
        ({"tolerations": [{"key": "key1", "value": "value", "effect": "NoSchedule", "operator": "Equal"}]}, []),
        # ... / 'should allow to update nodeLabels'
        ({"nodeLabels": {"tas-node": "true"}}, []),
        # ... / 'should allow to remove one of the nodeLabels'
        ({"nodeLabels": {"foo": "bar"}}, []),
    ],
)
def test_kueue_tas_flavor_updates(change: dict[str, Any], refused: list[str]) -> None:
    new = {**FLAVOR_WITH_TOPOLOGY, "spec": {**FLAVOR_WITH_TOPOLOGY["spec"], **change}}
    assert [str(c) for c in validation.validate(new, old=FLAVOR_WITH_TOPOLOGY)] == refused


MUTABLE_ONLY = (
    'spec.levels: Invalid value: "array": levels are mutable only when kubernetes.io/hostname is the lowest level '
    "both before and after the change"
)


@pytest.mark.parametrize(
    ("old", "new", "refused"),
    [
        # 'Updating Topology levels' / 'should allow mutating levels only when hostname stays the lowest level':
        # renaming a middle level with hostname lowest before and after
        (("cloud.provider.com/rack", HOSTNAME), ("cloud.provider.com/block", HOSTNAME), []),
        # rejecting an update that drops the hostname level
        (("cloud.provider.com/block", HOSTNAME), ("cloud.provider.com/block",), [MUTABLE_ONLY]),
        # rejecting any update of a topology whose lowest level is not hostname
        (("cloud.provider.com/rack",), ("cloud.provider.com/block",), [MUTABLE_ONLY]),
    ],
)
def test_kueue_tas_topology_level_updates(old: tuple[str, ...], new: tuple[str, ...], refused: list[str]) -> None:
    assert [str(c) for c in validation.validate(topology(*new), old=topology(*old))] == refused


# -- Kueue's "Topology validations" (test/integration/singlecluster/tas/tas_test.go) -----------------

HOSTNAME, BLOCK, RACK = (
    "kubernetes.io/hostname",
    "cloud.provider.com/topology-block",
    "cloud.provider.com/topology-rack",
)


def named_topology(name: str, *levels: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    spec = {"levels": [{"nodeLabel": level} for level in levels]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": meta, "spec": spec}


@pytest.mark.parametrize(
    ("obj", "valid"),
    [
        pytest.param(named_topology("valid", HOSTNAME), True, id="valid Topology"),
        pytest.param(named_topology("no-levels"), False, id="no levels"),
        pytest.param(named_topology("invalid-level", "@invalid"), False, id="invalid levels"),
        pytest.param(named_topology("default", BLOCK, BLOCK), False, id="non-unique levels"),
        pytest.param(named_topology("default", HOSTNAME, BLOCK, RACK), False, id="kubernetes.io/hostname first"),
        pytest.param(named_topology("default", BLOCK, HOSTNAME, RACK), False, id="kubernetes.io/hostname middle"),
        pytest.param(named_topology("default", BLOCK, RACK, HOSTNAME), True, id="kubernetes.io/hostname last"),
    ],
)
def test_topology_on_creation(obj: dict[str, Any], valid: bool) -> None:
    """Kueue's 'Creating a Topology' / 'Validate Topology on creation' table: each entry by its name."""
    assert (validation.validate(obj) == []) is valid


@pytest.mark.parametrize(
    ("old", "new", "valid"),
    [
        pytest.param(
            named_topology("valid", HOSTNAME),
            named_topology("valid", HOSTNAME, labels={"alpha": "beta"}),
            True,
            id="succeed to update topology",
        ),
        pytest.param(
            named_topology("valid", HOSTNAME),
            named_topology("valid", HOSTNAME, "added"),
            False,
            id="appending a level below hostname is prohibited",
        ),
        pytest.param(
            named_topology("default", BLOCK, RACK, HOSTNAME),
            named_topology("default", RACK, BLOCK, HOSTNAME),
            True,
            id="reordering levels above hostname is allowed",
        ),
        pytest.param(
            named_topology("default", BLOCK, RACK, HOSTNAME),
            named_topology("default", BLOCK, HOSTNAME, RACK),
            False,
            id="moving hostname away from the lowest level is prohibited",
        ),
        pytest.param(
            named_topology("valid", BLOCK, RACK),
            named_topology("valid", "changed", RACK),
            False,
            id="updating levels of a topology without hostname is prohibited",
        ),
    ],
)
def test_topology_on_update(old: dict[str, Any], new: dict[str, Any], valid: bool) -> None:
    """Kueue's 'Updating a Topology' / 'Validate Topology on update' table: each entry by its name."""
    assert (validation.validate(new, old=old) == []) is valid


def _checked(on_flavors: list[str], *flavors: str) -> dict[str, Any]:
    """A ClusterQueue with one cpu quota in each of ``flavors`` and check ``ac1`` on ``on_flavors``."""
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": f, "resources": [{"name": "cpu", "nominalQuota": 1}]} for f in flavors],
        }
    ]
    strategy = {"admissionChecks": [{"name": "ac1", "onFlavors": on_flavors}]}
    return cluster_queue(resourceGroups=groups if flavors else [], admissionChecksStrategy=strategy)


ON_FLAVORS = "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]"


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        (_checked(["alpha"], "alpha"), []),
        (_checked(["flavor1"]), [f'{ON_FLAVORS}: Unsupported value: "flavor1"']),
        (
            _checked(["ghost"], "alpha", "beta"),
            [f'{ON_FLAVORS}: Unsupported value: "ghost": supported values: "alpha", "beta"'],
        ),
    ],
)
def test_admission_check_on_flavors_must_be_in_quota(obj: dict[str, Any], want: list[str]) -> None:
    """Kueue PR #10369 (clusterqueue_webhook_test.go TestValidateClusterQueue 'admissionCheckStrategy refers
    to a flavor that is not in quota'): a check's onFlavors names only flavors the ClusterQueue has quota in."""
    assert [str(c) for c in validation.validate(obj)] == want


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        # 'legacy cluster queue with invalid onFlavors allows unrelated updates'
        (
            _checked(["ghost"], "alpha"),
            {
                **_checked(["ghost"], "alpha"),
                "spec": {**_checked(["ghost"], "alpha")["spec"], "queueingStrategy": "StrictFIFO"},
            },
            [],
        ),
        # 'invalid admissionCheckStrategy is rejected when the old cluster queue has no strategy'
        (
            cluster_queue(resourceGroups=_checked([], "alpha")["spec"]["resourceGroups"]),
            _checked(["ghost"], "alpha"),
            ["ghost"],
        ),
        # 'resourceGroup flavor change revalidates admissionCheck onFlavors for legacy cluster queue'
        (_checked(["ghost"], "alpha"), _checked(["ghost"], "beta"), ["ghost"]),
        # 'changing invalid onFlavors for a legacy cluster queue revalidates the new ref'
        (_checked(["ghost"], "alpha"), _checked(["phantom"], "alpha"), ["phantom"]),
    ],
)
def test_admission_check_on_flavors_on_update(old: dict[str, Any], new: dict[str, Any], want: list[str]) -> None:
    """Kueue's TestValidateClusterQueueUpdate with the gate RejectUpdatesToCQWithInvalidOnFlavors off (its
    default): a stored ClusterQueue's invalid onFlavors stay editable while they and the flavors stay as
    they were; any change to either checks them again."""
    causes = validation.validate(new, old=old)
    assert [(c.field, c.type, c.message.split('"')[1]) for c in causes] == [
        (ON_FLAVORS, validation.NOT_SUPPORTED, bad) for bad in want
    ]
