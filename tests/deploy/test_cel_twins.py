"""The CRDs' CEL rules and their Python twins say the same thing.

A real API server evaluates the ``x-kubernetes-validations`` of deploy/crds; the emulator and
``kueue-es apply`` evaluate their twins (``kueue_es.crds.RULES``, through
``kueue_es.validation``). Here cel-python evaluates the CEL text itself (with Kubernetes'
``isQuantity``/``quantity``/``sign``/``compareTo`` supplied from kueue-es's quantity parser) on
every value at every rule's place in a set of objects, valid and invalid, and on pairs of
old and new values for the transition rules; the two must agree everywhere, and every rule
must have been seen both holding and broken.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from kueue_es import crds, validation
from kueue_es.events import quantities

celpy = pytest.importorskip("celpy")
celtypes = pytest.importorskip("celpy.celtypes")

SCHEMAS = {kind.kind: crds.object_schema(kind) for kind in crds.KINDS}
API = "kueue.x-k8s.io/v1beta2"


def _is_quantity(value: Any) -> Any:
    try:
        quantities.parse_decimal(str(value))
    except (quantities.QuantityError, ValueError, ArithmeticError):
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _quantity(value: Any) -> Any:
    return celtypes.DoubleType(float(quantities.parse_decimal(str(value))))


def _sign(value: Any) -> Any:
    return celtypes.IntType((value > 0) - (value < 0))


def _compare_to(left: Any, right: Any) -> Any:
    return celtypes.IntType((left > right) - (left < right))


KUBERNETES_FUNCTIONS = {"isQuantity": _is_quantity, "quantity": _quantity, "sign": _sign, "compareTo": _compare_to}
ENV = celpy.Environment()
PROGRAMS = {
    rule.rule: ENV.program(ENV.compile(rule.rule), functions=KUBERNETES_FUNCTIONS)
    for rule in crds.rules_by_cel().values()
}


def cel(rule: str, value: Any, old: Any = None) -> bool:
    activation = {"self": celpy.json_to_cel(value)}
    if old is not None:
        activation["oldSelf"] = celpy.json_to_cel(old)
    try:
        result = PROGRAMS[rule].evaluate(activation)
    except celpy.CELEvalError:  # an API server refuses the object when a rule fails to evaluate
        return False
    return not isinstance(result, celpy.CELEvalError) and bool(result)


def placed(value: Any, schema: Mapping[str, Any], old: Any = None) -> Iterator[tuple[str, Any, Any]]:
    """``(rule, value, old value)`` for every rule met walking ``value`` (already defaulted) along ``schema``."""
    for rendered in schema.get("x-kubernetes-validations", []):
        yield rendered["rule"], value, old
    if isinstance(value, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            if value.get(name) is not None and name != "metadata":
                yield from placed(value[name], sub, old.get(name) if isinstance(old, dict) else None)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            yield from placed(item, schema["items"])


def obj(kind: str, spec: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": API, "kind": kind, "metadata": {"name": "x"}, **top}
    if spec is not None:
        out["spec"] = spec
    return out


def rg(*quotas: dict[str, Any], covered: tuple[str, ...] = ("cpu",)) -> dict[str, Any]:
    return {"coveredResources": list(covered), "flavors": [{"name": "f", "resources": list(quotas)}]}


OBJECTS = [
    obj("ClusterQueue", {"resourceGroups": [rg({"name": "cpu", "nominalQuota": "9", "lendingLimit": "1"})]}),
    obj(
        "ClusterQueue",
        {
            "cohortName": "c",
            "resourceGroups": [rg({"name": "cpu", "nominalQuota": 9, "lendingLimit": "1", "borrowingLimit": "2"})],
        },
    ),
    obj(
        "ClusterQueue",
        {"cohortName": "c", "resourceGroups": [rg({"name": "cpu", "nominalQuota": "1", "lendingLimit": "2"})]},
    ),
    obj("ClusterQueue", {"resourceGroups": [rg({"name": "cpu", "nominalQuota": -1, "borrowingLimit": "-500m"})]}),
    obj("ClusterQueue", {"resourceGroups": [rg({"name": "cpu", "nominalQuota": "1"}, covered=("cpu", "memory"))]}),
    obj(
        "ClusterQueue",
        {"fairSharing": {"weight": "-1"}, "flavorFungibility": {"preference": "BorrowingOverPreemption"}},
    ),
    obj(
        "ClusterQueue",
        {
            "fairSharing": {"weight": "0.5"},
            "flavorFungibility": {
                "preference": "PreemptionOverBorrowing",
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
            },
            "preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}},
        },
    ),
    obj("ClusterQueue", {"preemption": {"borrowWithinCohort": {"policy": "LowerPriority"}}}),
    obj("ClusterQueue", {"fairSharing": {"weight": "1n"}}),
    obj("Cohort", {"fairSharing": {"weight": "0.0000000001"}}),
    obj("Cohort", {"fairSharing": {"weight": "2n"}}),
    obj(
        "Cohort",
        {"resourceGroups": [rg({"name": "cpu", "nominalQuota": "1", "lendingLimit": "2", "borrowingLimit": "1"})]},
    ),
    obj(
        "Cohort", {"parentName": "p", "resourceGroups": [rg({"name": "cpu", "nominalQuota": "1", "lendingLimit": "2"})]}
    ),
    obj(
        "ResourceFlavor",
        {
            "topologyName": "t",
            "nodeTaints": [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "Sometimes"}],
            "tolerations": [{"operator": "Exists", "value": "v", "tolerationSeconds": 5, "effect": "Never"}],
        },
    ),
    obj(
        "ResourceFlavor",
        {
            "topologyName": "t",
            "nodeLabels": {"a": "b"},
            "nodeTaints": [{"key": "k", "effect": "NoExecute"}],
            "tolerations": [
                {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 5},
                {"operator": "Exists"},
            ],
        },
    ),
    obj("ResourceFlavor", {"tolerations": [{"key": "k", "operator": "Sometimes"}, {"effect": "NoSchedule"}]}),
    obj(
        "Workload",
        {
            "podSets": [
                {"name": "a", "count": 2, "minCount": 3, "template": {}},
                {"name": "b", "count": 2, "minCount": 1, "template": {}},
            ],
            "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "WorkloadPriorityClass", "name": "p"},
        },
    ),
    obj(
        "Workload",
        {
            "podSets": [{"name": "a", "template": {}}],
            "priority": 1,
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "p"},
        },
    ),
    obj(
        "Workload",
        {
            "podSets": [{"name": "a", "template": {}}],
            "priority": 1,
            "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "p"},
        },
    ),
    obj(
        "Topology", {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}, {"nodeLabel": "rack"}]}
    ),
    obj("Topology", {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}),
    obj("MultiKueueCluster", {"clusterSource": {"kubeConfig": {"location": "w1-secret"}}}),
    obj(
        "MultiKueueCluster",
        {"clusterSource": {"kubeConfig": {"location": "w1-secret"}, "clusterProfileRef": {"name": "w1"}}},
    ),
    obj("MultiKueueCluster", {"clusterSource": {}}),
    obj("MultiKueueConfig", {"clusters": ["w1", "w2"]}),
    obj("MultiKueueConfig", {"clusters": ["w1", "w2", "w1"]}),
    # the status rules of Kueue's Workload status schema (crds.STATUS_RULES)
    obj("Workload", status={"clusterName": "w1"}),
    obj("Workload", status={"clusterName": "w1", "nominatedClusterNames": ["w2"]}),
    *(
        obj(
            "Workload",
            status={
                "nominatedClusterNames": ["w1", "w2"],
                "admission": {"clusterQueue": "cq", "podSetAssignments": [{"topologyAssignment": topology_assignment}]},
            },
        )
        for topology_assignment in (
            {
                "levels": ["rack", "kubernetes.io/hostname"],
                "slices": [
                    {
                        "domainCount": 2,
                        "valuesPerLevel": [{"universal": "r1"}, {"individual": {"prefix": "h", "roots": ["1", "2"]}}],
                        "podCounts": {"individual": [1, 2]},
                    },
                    {
                        "domainCount": 1,
                        "valuesPerLevel": [{"universal": "r2"}, {"universal": "h3"}],
                        "podCounts": {"universal": 3},
                    },
                ],
            },
            {
                "levels": ["kubernetes.io/hostname"],
                "slices": [
                    {
                        "domainCount": 2,
                        "valuesPerLevel": [{"universal": "h1", "individual": {"roots": ["1"]}}, {}],
                        "podCounts": {"universal": 1, "individual": [1]},
                    },
                    {"domainCount": 1, "valuesPerLevel": [{"universal": "h3"}], "podCounts": {}},
                ],
            },
        )
    ),
]

#: (kind, old spec, new spec): updates for the transition rules (``oldSelf``).
UPDATES = [
    ("LocalQueue", {"clusterQueue": "a"}, {"clusterQueue": "a"}),
    ("LocalQueue", {"clusterQueue": "a"}, {"clusterQueue": "b"}),
    ("AdmissionCheck", {"controllerName": "a"}, {"controllerName": "b"}),
    ("ResourceFlavor", {"topologyName": "t", "nodeLabels": {"a": "b"}}, {"nodeLabels": {"a": "b"}}),
    ("ResourceFlavor", {"nodeLabels": {"a": "b"}}, {"topologyName": "t", "nodeLabels": {"a": "b"}}),
    ("Topology", {"levels": [{"nodeLabel": "rack"}]}, {"levels": [{"nodeLabel": "zone"}]}),
    (
        "Topology",
        {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
        {"levels": [{"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]},
    ),
]


#: (kind, old status, new status): status updates for the transition rules of Kueue's status schemas.
STATUS_UPDATES = [
    ("Workload", {"clusterName": "w1"}, {"clusterName": "w1"}),
    ("Workload", {"nominatedClusterNames": ["w1"]}, {"clusterName": "w1"}),
    ("Workload", {"clusterName": "w1"}, {"clusterName": "w2"}),
]


def _reserved(admitted: bool = True, assignments: int = 1) -> dict[str, Any]:
    conditions = [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": str(admitted)}]
    return {
        "conditions": conditions,
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": f"p{i}"} for i in range(assignments)]},
    }


_POD_SET = {"name": "main", "count": 1, "template": {"spec": {"containers": []}}}
_WPC = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "a"}
_PC = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "a"}


def _wl(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return obj("Workload", {"podSets": [_POD_SET], **spec}, **({"status": status} if status is not None else {}))


#: (kind, old object, new object): updates for the transition rules on a whole object (Kueue's Workload's,
#: which read its spec and status).
OBJECT_UPDATES = [
    ("Workload", _wl(_reserved(), queueName="a"), _wl(_reserved(), queueName="a")),
    ("Workload", _wl(_reserved(), queueName="a"), _wl(_reserved(), queueName="b")),
    ("Workload", _wl(queueName="a"), _wl(queueName="b")),
    ("Workload", _wl(_reserved(), priority=1, priorityClassRef=_WPC), _wl(_reserved(), priority=1)),
    (
        "Workload",
        _wl(_reserved(), priority=1, priorityClassRef=_WPC),
        _wl(_reserved(), priority=1, priorityClassRef=_PC),
    ),
    (
        "Workload",
        _wl(_reserved(), priority=1, priorityClassRef=_WPC),
        _wl(_reserved(), priority=1, priorityClassRef={**_WPC, "name": "b"}),
    ),
    (
        "Workload",
        _wl(_reserved(), priority=1, priorityClassRef={**_WPC, "kind": "PriorityClass"}),
        _wl(_reserved(), priority=1, priorityClassRef=_WPC),
    ),
    (
        "Workload",
        _wl(_reserved(), priority=1, priorityClassRef=_PC),
        _wl(_reserved(), priority=1, priorityClassRef={**_PC, "name": "b"}),
    ),
    (
        "Workload",
        _wl(_reserved(), priority=1, priorityClassRef=_PC),
        _wl(_reserved(), priority=1, priorityClassRef=_PC),
    ),
    ("Workload", _wl(_reserved(), maximumExecutionTimeSeconds=5), _wl(_reserved())),
    ("Workload", _wl(_reserved(), maximumExecutionTimeSeconds=5), _wl(_reserved(), maximumExecutionTimeSeconds=5)),
    ("Workload", _wl(_reserved(admitted=False), maximumExecutionTimeSeconds=5), _wl(_reserved(admitted=False))),
]
OBJECTS += [_wl(_reserved()), _wl(_reserved(assignments=2)), _wl()]


def evaluations() -> Iterator[tuple[str, Any, Any]]:
    for manifest in OBJECTS:
        body = copy.deepcopy(manifest)
        validation._default(body, SCHEMAS[body["kind"]])
        for rule, value, _ in placed(body, SCHEMAS[body["kind"]]):
            if not crds.rules_by_cel()[rule].transition:
                yield rule, value, None
    updates = [(kind, obj(kind, old_spec), obj(kind, new_spec)) for kind, old_spec, new_spec in UPDATES]
    updates += [(kind, obj(kind, status=old), obj(kind, status=new)) for kind, old, new in STATUS_UPDATES]
    updates += [(kind, copy.deepcopy(old), copy.deepcopy(new)) for kind, old, new in OBJECT_UPDATES]
    for kind, old, new in updates:
        validation._default(old, SCHEMAS[kind])
        validation._default(new, SCHEMAS[kind])
        for rule, value, old_value in placed(new, SCHEMAS[kind], old):
            if crds.rules_by_cel()[rule].transition and old_value is not None:
                yield rule, value, old_value


def test_twins_agree_with_the_cel_and_every_rule_is_seen_holding_and_broken() -> None:
    seen: dict[str, set[bool]] = {}
    disagreements = []
    for rule, value, old in evaluations():
        twin = crds.rules_by_cel()[rule]
        expected = cel(rule, value, old)
        if twin.check(value, old) != expected:
            disagreements.append(f"{twin.message!r} on {value!r} (old {old!r}): CEL says {expected}")
        seen.setdefault(rule, set()).add(expected)
    assert disagreements == []
    not_both = [crds.rules_by_cel()[r].message for r in crds.rules_by_cel() if seen.get(r) != {True, False}]
    assert not_both == []
