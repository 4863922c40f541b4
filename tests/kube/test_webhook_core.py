"""Kueue's webhook integration tests for its own kinds, on the emulated API server.

Ported from Kueue test/integration/singlecluster/webhook/core/ (clusterqueue_test.go, cohort_test.go,
resourceflavor_test.go, localqueue_test.go, admissioncheck_test.go): each case creates (or updates) an object
and expects it stored, or refused with Kueue's field path and message. Kueue refuses some of these in its CRD
schema (422 Invalid) and others in its validating webhooks (403 Forbidden, ``admission webhook
"vclusterqueue.kb.io" denied the request: ...``); here :mod:`kueue_es.validation` checks both: what Kueue's CRD
refuses is 422 here too, and what only its webhook
refuses (a resource name that is not a label key, duplicate flavors, a ResourceFlavor's label rules, ...) 403 as
Kueue's, with the same field paths and messages; the webhook's rules kueue-es carries as CEL rules of its CRDs
(non-negative quantities, fair-sharing weights, limits without a cohort) are 422 here where Kueue's are 403.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, errors, resources

GROUP = "kueue.x-k8s.io/v1beta2"
NAME_PART = "name part must consist of alphanumeric characters"
SUBDOMAIN = "should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"
RG0 = "spec.resourceGroups[0]"
QUOTA0 = f"{RG0}.flavors[0].resources[0]"


def quotas(flavor: str, *resources: tuple[str, ...]) -> dict[str, Any]:
    """utiltestingapi.MakeFlavorQuotas(flavor).Resource(name, nominal, borrowing, lending)...; "" leaves one out."""
    out = []
    for name, *limits in resources:
        quota = {"name": name, "nominalQuota": limits[0] if limits else "0"}
        for field, value in zip(("borrowingLimit", "lendingLimit"), limits[1:], strict=False):
            if value != "":
                quota[field] = value
        out.append(quota)
    return {"name": flavor, "resources": out}


def group(*flavors: dict[str, Any], covered: list[str] | None = None) -> dict[str, Any]:
    """A resource group covering the resources of its flavors, in order (the builder's ResourceGroup)."""
    if covered is None:
        covered = []
        for flavor in flavors:
            covered += [r["name"] for r in flavor["resources"] if r["name"] not in covered]
    return {"coveredResources": covered, "flavors": list(flavors)}


def kueue(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": GROUP, "kind": kind, "metadata": metadata, "spec": spec}


def cq(*groups: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return kueue("ClusterQueue", "cluster-queue", {**({"resourceGroups": list(groups)} if groups else {}), **spec})


def cohort(*groups: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return kueue("Cohort", "cohort", {**({"resourceGroups": list(groups)} if groups else {}), **spec})


def flavor(**spec: Any) -> dict[str, Any]:
    return kueue("ResourceFlavor", "resource-flavor", spec)


def check(**spec: Any) -> dict[str, Any]:
    return kueue("AdmissionCheck", "admission-check", spec)


REF = {"apiGroup": "ref.api.group", "kind": "RefKind", "name": "ref-name"}
STORED = None


def refused(*causes: tuple[str, str]) -> tuple[int, list[tuple[str, str]]]:
    """Refused 422 by the CRD's schema or rules, with these causes: (field path, a part of the message)."""
    return 422, list(causes)


def denied(*causes: tuple[str, str]) -> tuple[int, list[tuple[str, str]]]:
    """Refused 403 by Kueue's validating webhook of the kind, its field errors these (Kueue: BeForbiddenError)."""
    return 403, list(causes)


CASES = [
    # clusterqueue_test.go "Validate ClusterQueue on creation"
    (
        "Should have non-negative borrowing limit",
        cq(group(quotas("x86", ("cpu", "2", "-1"))), cohortName="cohort"),
        denied((f"{QUOTA0}.borrowingLimit", 'Invalid value: "-1": must be greater than or equal to 0')),
    ),
    (
        "Should have non-negative quota value",
        cq(group(quotas("x86", ("cpu", "-1")))),
        denied((f"{QUOTA0}.nominalQuota", 'Invalid value: "-1": must be greater than or equal to 0')),
    ),
    (
        "Should have at least one flavor",
        cq({"coveredResources": [], "flavors": []}),
        refused(
            (f"{RG0}.coveredResources", "should have at least 1 items"),
            (f"{RG0}.flavors", "should have at least 1 items"),
        ),
    ),
    (
        "Should have at least one resource",
        cq(group(quotas("foo"))),
        refused(
            (f"{RG0}.coveredResources", "should have at least 1 items"),
            (f"{RG0}.flavors[0].resources", "should have at least 1 items"),
        ),
    ),
    (
        "Should have qualified flavor name",
        cq(group(quotas("invalid_name", ("cpu", "5")))),
        refused((f"{RG0}.flavors[0].name", SUBDOMAIN)),
    ),
    (
        "Should have qualified resource name",
        cq(group(quotas("x86", ("@cpu", "5")))),
        denied((f"{RG0}.coveredResources[0]", f'Invalid value: "@cpu": {NAME_PART}')),
    ),
    (
        "Should have valid resources quantity",
        cq(group(quotas("flavor", *[(f"r{i}",) for i in range(65)]))),
        refused(
            (f"{RG0}.coveredResources", "Too many: 65: must have at most 64 items"),
            (f"{RG0}.flavors[0].resources", "Too many: 65: must have at most 64 items"),
        ),
    ),
    (
        "Should have valid flavors quantity",
        cq(group(*[quotas(f"f{i}", ("cpu",)) for i in range(65)])),
        refused((f"{RG0}.flavors", "Too many: 65: must have at most 64 items")),
    ),
    (
        "Should forbid clusterQueue creation with unqualified labelSelector",
        cq(namespaceSelector={"matchLabels": {"nospecialchars^=@": "bar"}}),
        denied(("spec.namespaceSelector.matchLabels", f'Invalid value: "nospecialchars^=@": {NAME_PART}')),
    ),
    (
        "Should forbid to create clusterQueue with unknown clusterQueueingStrategy",
        cq(queueingStrategy="unknown"),
        refused(
            ("spec.queueingStrategy", 'Unsupported value: "unknown": supported values: "BestEffortFIFO", "StrictFIFO"')
        ),
    ),
    # Go's client leaves an empty strategy out (omitempty): the CRD's default applies
    ("Should allow to create clusterQueue with empty clusterQueueingStrategy", cq(), STORED),
    ("Should allow to create clusterQueue with empty preemption", cq(preemption={}), STORED),
    (
        "Should allow to create clusterQueue with preemption policies",
        cq(
            preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            flavorFungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        ),
        STORED,
    ),
    (
        "Should forbid to create clusterQueue with unknown preemption.withinCohort",
        cq(preemption={"reclaimWithinCohort": "unknown"}),
        refused(("spec.preemption.reclaimWithinCohort", 'Unsupported value: "unknown"')),
    ),
    (
        "Should forbid to create clusterQueue with unknown preemption.withinClusterQueue",
        cq(preemption={"withinClusterQueue": "unknown"}),
        refused(("spec.preemption.withinClusterQueue", 'Unsupported value: "unknown"')),
    ),
    (
        "Should allow to create clusterQueue with built-in resources with qualified names",
        cq(group(quotas("default", ("cpu",)))),
        STORED,
    ),
    (
        "Should forbid to create clusterQueue with invalid resource name",
        cq(group(quotas("default", ("@cpu",)))),
        denied((f"{RG0}.coveredResources[0]", f'Invalid value: "@cpu": {NAME_PART}')),
    ),
    ("Should allow to create clusterQueue with valid cohort", cq(cohortName="prod"), STORED),
    (
        "Should forbid to create clusterQueue with invalid cohort",
        cq(cohortName="@prod"),
        refused(("spec.cohortName", SUBDOMAIN)),
    ),
    (
        "Should allow to create clusterQueue with extended resources with qualified names",
        cq(group(quotas("default", ("example.com/gpu",)))),
        STORED,
    ),
    (
        "Should allow to create clusterQueue with flavor with qualified names",
        cq(group(quotas("x86", ("cpu",)))),
        STORED,
    ),
    (
        "Should forbid to create clusterQueue with flavor with unqualified names",
        cq(group(quotas("invalid_name"))),
        refused(
            (f"{RG0}.coveredResources", "should have at least 1 items"),
            (f"{RG0}.flavors[0].name", SUBDOMAIN),
            (f"{RG0}.flavors[0].resources", "should have at least 1 items"),
        ),
    ),
    (
        "Should allow to create clusterQueue with flavor quota with zero values",
        cq(group(quotas("x86", ("cpu", "0")))),
        STORED,
    ),
    (
        "Should allow to create clusterQueue with flavor quota with borrowingLimit 0",
        cq(group(quotas("x86", ("cpu", "1", "0"))), cohortName="cohort"),
        STORED,
    ),
    (
        "Should forbid to create clusterQueue with flavor quota with borrowingLimit and empty cohort",
        cq(group(quotas("x86", ("cpu", "1", "1")))),
        refused(("spec", 'Invalid value: "object": borrowingLimit must be nil when cohort is empty')),
    ),
    (
        "Should forbid to create clusterQueue with namespaceSelector with invalid expressions",
        cq(namespaceSelector={"matchExpressions": [{"key": "key", "operator": "In"}]}),
        denied(
            (
                "spec.namespaceSelector.matchExpressions[0].values",
                "Required value: must be specified when `operator` is 'In' or 'NotIn'",
            )
        ),
    ),
    (
        "Should allow to create clusterQueue with multiple resource groups",
        cq(
            group(quotas("alpha", ("cpu", "0"), ("memory", "0")), quotas("beta", ("cpu", "0"), ("memory", "0"))),
            group(quotas("gamma", ("example.com/gpu", "0")), quotas("omega", ("example.com/gpu", "0"))),
        ),
        STORED,
    ),
    (
        "Should forbid to create clusterQueue with resources in a flavor in different order",
        cq(group(quotas("alpha", ("cpu", "0"), ("memory", "0")), quotas("beta", ("memory", "0"), ("cpu", "0")))),
        denied(
            (f"{RG0}.flavors[1].resources[0].name", 'Invalid value: "memory": must match the name in coveredResources'),
            (f"{RG0}.flavors[1].resources[1].name", 'Invalid value: "cpu": must match the name in coveredResources'),
        ),
    ),
    (
        "Should forbid to create clusterQueue missing resources in a flavor",
        cq(group(quotas("alpha", ("cpu", "0")), covered=["cpu", "memory"])),
        refused((RG0, "flavors must have the same number of resources as the coveredResources")),
    ),
    (
        "Should forbid to create clusterQueue missing resources in a flavor (more resources than covered)",
        cq(group(quotas("alpha", ("cpu", "0"), ("memory", "0")), covered=["cpu"])),
        refused((RG0, "flavors must have the same number of resources as the coveredResources")),
    ),
    (
        "Should forbid to create clusterQueue missing resources in a flavor and mismatch",
        cq(group(quotas("alpha", ("cpu", "0"), ("memory", "0")), covered=["blah"])),
        refused((RG0, "flavors must have the same number of resources as the coveredResources")),
    ),
    (
        "Should forbid to create clusterQueue with resource in more than one resource group",
        cq(group(quotas("alpha", ("cpu", "0"), ("memory", "0"))), group(quotas("beta", ("memory", "0")))),
        denied(("spec.resourceGroups[1].coveredResources[0]", 'Duplicate value: "memory"')),
    ),
    (
        "Should forbid to create clusterQueue with flavor in more than one resource group",
        cq(group(quotas("alpha", ("cpu",)), quotas("beta", ("cpu",))), group(quotas("beta", ("memory",)))),
        denied(("spec.resourceGroups[1].flavors[0].name", 'Duplicate value: "beta"')),
    ),
    (
        "Should forbid to create clusterQueue missing with invalid preemption due to reclaimWithinCohort=Never, "
        "while borrowWithinCohort!=nil",
        cq(preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}),
        refused(("spec.preemption", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")),
    ),
    (
        "Should allow to create clusterQueue with valid preemption with borrowWithinCohort",
        cq(
            preemption={
                "reclaimWithinCohort": "LowerPriority",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10},
            }
        ),
        STORED,
    ),
    (
        "Should allow to create clusterQueue with existing cluster queue created with older Kueue version that has "
        "a nil borrowWithinCohort field",
        cq(preemption={"reclaimWithinCohort": "Never"}),
        STORED,
    ),
    *[
        (f"Should allow {what} FairSharing weight", cq(fairSharing={"weight": weight}), STORED)
        for what, weight in (
            ("zero", "0"),
            ("fractional", "0.1"),
            ("small", "1m"),
            ("even smaller", "1u"),
            ("smallest", "2n"),
        )
    ],
    *[
        (
            f"Should forbid {what} FairSharing weight",
            cq(fairSharing={"weight": weight}),
            denied(("spec.fairSharing", 'Invalid value: "1n": When not 0, weight must be > 10e-9')),
        )
        for what, weight in (("threshold", "1n"), ("collapsed", "0.0000000001"))
    ],
    (
        "Should forbid negative FairSharing weight",
        cq(fairSharing={"weight": "-1"}),
        denied(("spec.fairSharing", 'Invalid value: "-1": must be greater than or equal to 0')),
    ),
    # cohort_test.go "Validate Cohort on creation"
    ("Cohort: Should allow default Cohort", cohort(), STORED),
    ("Cohort: Should allow valid parent name", cohort(parentName="prod"), STORED),
    ("Cohort: Should reject invalid parent name", cohort(parentName="@prod"), refused(("spec.parentName", SUBDOMAIN))),
    (
        "Cohort: ResourceGroup should have at least one flavor",
        cohort({"coveredResources": ["cpu"], "flavors": []}),
        refused((f"{RG0}.flavors", "should have at least 1 items")),
    ),
    (
        "Cohort: FlavorQuota should have at least one resource",
        cohort(group(quotas("foo"))),
        refused(
            (f"{RG0}.coveredResources", "should have at least 1 items"),
            (f"{RG0}.flavors[0].resources", "should have at least 1 items"),
        ),
    ),
    (
        "Cohort: Should reject invalid flavor name",
        cohort(group(quotas("@x86", ("cpu", "5")))),
        refused((f"{RG0}.flavors[0].name", SUBDOMAIN)),
    ),
    (
        "Cohort: Should allow valid resource name (an invalid one, refused)",
        cohort(group(quotas("x86", ("@cpu", "5")))),
        denied((f"{RG0}.coveredResources[0]", f'Invalid value: "@cpu": {NAME_PART}')),
    ),
    (
        "Cohort: Should reject too many flavors in resource group",
        cohort(group(*[quotas(f"f{i}", ("cpu",)) for i in range(65)])),
        refused((f"{RG0}.flavors", "Too many: 65: must have at most 64 items")),
    ),
    (
        "Cohort: Should reject too many resources in resource group",
        cohort(group(quotas("flavor", *[(f"cpu{i}",) for i in range(65)]))),
        refused((f"{RG0}.coveredResources", "Too many: 65"), (f"{RG0}.flavors[0].resources", "Too many: 65")),
    ),
    ("Cohort: Should allow resource with valid name", cohort(group(quotas("default", ("cpu",)))), STORED),
    (
        "Cohort: Should reject resource with invalid name",
        cohort(group(quotas("default", ("@cpu",)))),
        denied((f"{RG0}.coveredResources[0]", f'Invalid value: "@cpu": {NAME_PART}')),
    ),
    (
        "Cohort: Should allow extended resources with valid name",
        cohort(group(quotas("default", ("example.com/gpu",)))),
        STORED,
    ),
    (
        "Cohort: Should reject flavor with invalid name",
        cohort(group(quotas("x_86", ("cpu",)))),
        refused((f"{RG0}.flavors[0].name", SUBDOMAIN)),
    ),
    (
        "Cohort: Should reject negative nominal quota",
        cohort(group(quotas("x86", ("cpu", "-1")))),
        denied((f"{QUOTA0}.nominalQuota", 'Invalid value: "-1": must be greater than or equal to 0')),
    ),
    (
        "Cohort: Should reject negative borrowing limit",
        cohort(group(quotas("x86", ("cpu", "1", "-1")))),
        denied(
            (f"{QUOTA0}.borrowingLimit", 'Invalid value: "-1": must be nil when parent is empty'),
            (f"{QUOTA0}.borrowingLimit", 'Invalid value: "-1": must be greater than or equal to 0'),
        ),
    ),
    (
        "Cohort: Should reject negative lending limit",
        cohort(group(quotas("x86", ("cpu", "1", "", "-1")))),
        denied(
            (f"{QUOTA0}.lendingLimit", 'Invalid value: "-1": must be greater than or equal to 0'),
            (f"{QUOTA0}.lendingLimit", 'Invalid value: "-1": must be nil when parent is empty'),
        ),
    ),
    (
        "Cohort: Should reject borrowingLimit when no parent",
        cohort(group(quotas("x86", ("cpu", "1", "1")))),
        denied((f"{QUOTA0}.borrowingLimit", 'Invalid value: "1": must be nil when parent is empty')),
    ),
    (
        "Cohort: Should allow borrowingLimit 0 when parent exists",
        cohort(group(quotas("x86", ("cpu", "1", "0"))), parentName="parent"),
        STORED,
    ),
    (
        "Cohort: Should reject lendingLimit when no parent",
        cohort(group(quotas("x86", ("cpu", "1", "", "1")))),
        denied((f"{QUOTA0}.lendingLimit", 'Invalid value: "1": must be nil when parent is empty')),
    ),
    (
        "Cohort: Should allow lendingLimit 0 when parent exists",
        cohort(group(quotas("x86", ("cpu", "0", "", "0"))), parentName="parent"),
        STORED,
    ),
    (
        "Cohort: Should allow lending limit to exceed nominal quota",
        cohort(group(quotas("x86", ("cpu", "3", "", "5"))), parentName="parent"),
        STORED,
    ),
    (
        "Cohort: Should reject resources in a flavor in different order",
        cohort(group(quotas("alpha", ("cpu", "0"), ("memory", "0")), quotas("beta", ("memory", "0"), ("cpu", "0")))),
        denied(
            (f"{RG0}.flavors[1].resources[0].name", "must match the name in coveredResources"),
            (f"{RG0}.flavors[1].resources[1].name", "must match the name in coveredResources"),
        ),
    ),
    (
        "Cohort: Should reject resource in more than one resource group",
        cohort(group(quotas("alpha", ("cpu", "0"), ("memory", "0"))), group(quotas("beta", ("memory", "0")))),
        denied(("spec.resourceGroups[1].coveredResources[0]", 'Duplicate value: "memory"')),
    ),
    (
        "Cohort: Should forbid collapsed FairSharing weight",
        cohort(fairSharing={"weight": "0.0000000001"}),
        denied(("spec.fairSharing", 'Invalid value: "1n": When not 0, weight must be > 10e-9')),
    ),
    (
        "Cohort: Should forbid negative FairSharing weight",
        cohort(fairSharing={"weight": "-1"}),
        denied(("spec.fairSharing", 'Invalid value: "-1": must be greater than or equal to 0')),
    ),
    # resourceflavor_test.go
    (
        "ResourceFlavor: Should be valid",
        flavor(nodeLabels={"foo": "bar"}, nodeTaints=[{"key": "spot", "value": "true", "effect": "NoSchedule"}]),
        STORED,
    ),
    (
        "ResourceFlavor: invalid number of taint",
        flavor(nodeTaints=[{"key": f"t{i}", "effect": "NoExecute"} for i in range(9)]),
        refused(("spec.nodeTaints", "Too many: 9: must have at most 8 items")),
    ),
    (
        "ResourceFlavor: invalid number of nodeSelector",
        flavor(nodeLabels={f"l{i}": "" for i in range(9)}),
        refused(("spec.nodeLabels", "Too many: 9: must have at most 8 items")),
    ),
    (
        "ResourceFlavor: valid number of nodeSelector and taint",
        flavor(
            nodeLabels={f"l{i}": "" for i in range(8)},
            nodeTaints=[{"key": f"t{i}", "effect": "NoExecute"} for i in range(8)],
        ),
        STORED,
    ),
    (
        "ResourceFlavor: Should fail to create with invalid taints",
        flavor(nodeTaints=[{"key": "skdajf"}, {"key": "@foo", "value": "bar", "effect": "NoSchedule"}]),
        refused(
            ("spec.nodeTaints[0].effect", "Required value"),
            ("spec.nodeTaints", "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"),
        ),
    ),
    (
        "ResourceFlavor: Should fail to create with invalid label name",
        flavor(nodeLabels={"@abc": "foo"}),
        denied(("spec.nodeLabels", f'Invalid value: "@abc": {NAME_PART}')),
    ),
    (
        "ResourceFlavor: Should fail to create with invalid tolerations",
        flavor(
            tolerations=[
                {"key": "@abc", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                {"key": "abc", "operator": "Exists", "value": "v", "effect": "NoSchedule"},
                {"key": "abc", "operator": "Equal", "value": "v", "effect": "not-valid"},
                {"key": "abc", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
            ]
        ),
        refused(
            ("spec.tolerations", "a value must be empty when 'operator' is 'Exists'"),
            ("spec.tolerations", "supported taint effect values"),
        ),
    ),
    # the webhook's own rules, each alone (resourceflavor_webhook.go ValidateResourceFlavor)
    (
        "ResourceFlavor: a taint key that is not a label name",
        flavor(nodeTaints=[{"key": "@foo", "value": "bar", "effect": "NoSchedule"}]),
        denied(("spec.nodeTaints[0].key", f'Invalid value: "@foo": {NAME_PART}')),
    ),
    (
        "ResourceFlavor: a taint value that is not a label value",
        flavor(nodeTaints=[{"key": "foo", "value": "b@r", "effect": "NoSchedule"}]),
        denied(("spec.nodeTaints[0].value", 'Invalid value: "b@r": a valid label must be an empty string')),
    ),
    (
        "ResourceFlavor: two taints of one key and effect",
        flavor(nodeTaints=[{"key": "a", "effect": "NoSchedule"}, {"key": "a", "value": "x", "effect": "NoSchedule"}]),
        denied(
            (
                "spec.nodeTaints[1]",
                'Duplicate value: v1.Taint{Key:"a", Value:"x", Effect:"NoSchedule", '
                "TimeAdded:(*v1.Time)(nil)}: taints must be unique by key and effect pair",
            )
        ),
    ),
    (
        "ResourceFlavor: a toleration key that is not a label name",
        flavor(tolerations=[{"key": "@abc", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]),
        denied(("spec.tolerations[0].key", f'Invalid value: "@abc": {NAME_PART}')),
    ),
    # localqueue_test.go
    (
        "LocalQueue: Should reject bad value for spec.clusterQueue",
        kueue("LocalQueue", "queue", {"clusterQueue": "invalid_name"}, namespace="default"),
        refused(("spec.clusterQueue", SUBDOMAIN)),
    ),
    # admissioncheck_test.go "Validate AdmissionCheck on creation" (named: Kueue's have no name, which the API
    # server refuses first)
    (
        "AdmissionCheck: Should fail to create AdmissionCheck with no controller name",
        check(parameters=REF),
        refused(("spec.controllerName", "Required value")),
    ),
    (
        "AdmissionCheck: Should fail to create AdmissionCheck with bad ref api group",
        check(controllerName="controller-name", parameters={**REF, "apiGroup": "ref.api.group/Bad"}),
        refused(("spec.parameters.apiGroup", SUBDOMAIN)),
    ),
    (
        "AdmissionCheck: Should fail to create AdmissionCheck with no ref api group",
        check(controllerName="controller-name", parameters={"kind": "RefKind", "name": "ref-name"}),
        refused(("spec.parameters.apiGroup", "Required value")),
    ),
    (
        "AdmissionCheck: Should fail to create AdmissionCheck with bad ref kind",
        check(controllerName="controller-name", parameters={**REF, "kind": "RefKind/Bad"}),
        refused(("spec.parameters.kind", "should match")),
    ),
    (
        "AdmissionCheck: Should fail to create AdmissionCheck with no ref kind",
        check(controllerName="controller-name", parameters={"apiGroup": "ref.api.group", "name": "ref-name"}),
        refused(("spec.parameters.kind", "Required value")),
    ),
    (
        "AdmissionCheck: Should fail to create AdmissionCheck with bad ref name",
        check(controllerName="controller-name", parameters={**REF, "name": "ref-name/Bad"}),
        refused(("spec.parameters.name", "should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'")),
    ),
    (
        "AdmissionCheck: Should fail to create AdmissionCheck with no ref name",
        check(controllerName="controller-name", parameters={"apiGroup": "ref.api.group", "kind": "RefKind"}),
        refused(("spec.parameters.name", "Required value")),
    ),
    (
        "AdmissionCheck: Should allow to create AdmissionCheck with no parameters",
        check(controllerName="controller-name"),
        STORED,
    ),
    (
        "AdmissionCheck: Should allow to create AdmissionCheck with valid spec",
        check(controllerName="controller-name", parameters=REF),
        STORED,
    ),
    # multikueue_cluster_test.go "Validate MultiKueueCluster on creation"
    *[
        (
            f"MultiKueueCluster: Should allow {what}",
            kueue("MultiKueueCluster", "worker", {"clusterSource": source}),
            STORED,
        )
        for what, source in (
            (
                "KubeConfig with Secret location type",
                {"kubeConfig": {"locationType": "Secret", "location": "worker-secret"}},
            ),
            (
                "KubeConfig with Path location type",
                {"kubeConfig": {"locationType": "Path", "location": "/etc/kueue/w"}},
            ),
            ("ClusterProfileRef", {"clusterProfileRef": {"name": "worker-profile"}}),
        )
    ],
    (
        "MultiKueueCluster: Should reject missing cluster source",
        kueue("MultiKueueCluster", "worker", {}),
        refused(("spec.clusterSource", "Required value")),
    ),
    (
        "MultiKueueCluster: Should reject both KubeConfig and ClusterProfileRef",
        kueue(
            "MultiKueueCluster",
            "worker",
            {
                "clusterSource": {
                    "kubeConfig": {"location": "worker-secret"},
                    "clusterProfileRef": {"name": "worker-profile"},
                }
            },
        ),
        refused(("spec.clusterSource", "exactly one of the fields in [kubeConfig clusterProfileRef] must be set")),
    ),
    (
        "MultiKueueCluster: Should reject empty KubeConfig location",
        kueue("MultiKueueCluster", "worker", {"clusterSource": {"kubeConfig": {"location": ""}}}),
        refused(("spec.clusterSource.kubeConfig.location", "should be at least 1 chars long")),
    ),
    (
        "MultiKueueCluster: Should reject too long KubeConfig location",
        kueue("MultiKueueCluster", "worker", {"clusterSource": {"kubeConfig": {"location": "a" * 257}}}),
        refused(("spec.clusterSource.kubeConfig.location", "Too long: may not be more than 256 bytes")),
    ),
    (
        "MultiKueueCluster: Should reject invalid KubeConfig location type",
        kueue(
            "MultiKueueCluster",
            "worker",
            {"clusterSource": {"kubeConfig": {"locationType": "Invalid", "location": "s"}}},
        ),
        refused(("spec.clusterSource.kubeConfig.locationType", 'Unsupported value: "Invalid"')),
    ),
    (
        "MultiKueueCluster: Should reject empty ClusterProfileRef name",
        kueue("MultiKueueCluster", "worker", {"clusterSource": {"clusterProfileRef": {"name": ""}}}),
        refused(("spec.clusterSource.clusterProfileRef.name", "should be at least 1 chars long")),
    ),
    (
        "MultiKueueCluster: Should reject too long ClusterProfileRef name",
        kueue("MultiKueueCluster", "worker", {"clusterSource": {"clusterProfileRef": {"name": "a" * 257}}}),
        refused(("spec.clusterSource.clusterProfileRef.name", "Too long: may not be more than 256 bytes")),
    ),
    # multikueue_config_test.go "Validate MultiKueueConfig on creation"
    (
        "MultiKueueConfig: Should allow one cluster",
        kueue("MultiKueueConfig", "config", {"clusters": ["worker1"]}),
        STORED,
    ),
    (
        "MultiKueueConfig: Should allow multiple clusters",
        kueue("MultiKueueConfig", "config", {"clusters": ["worker1", "worker2"]}),
        STORED,
    ),
    (
        "MultiKueueConfig: Should reject missing clusters",
        kueue("MultiKueueConfig", "config", {}),
        refused(("spec.clusters", "Required value")),
    ),
    (
        "MultiKueueConfig: Should reject duplicate clusters",
        kueue("MultiKueueConfig", "config", {"clusters": ["worker1", "worker1"]}),
        refused(("spec.clusters", 'Invalid value: "array": must be unique')),
    ),
    (
        "MultiKueueConfig: Should reject too many clusters",
        kueue("MultiKueueConfig", "config", {"clusters": [f"worker{i}" for i in range(21)]}),
        refused(("spec.clusters", "Too many: 21: must have at most 20 items")),
    ),
    (
        "MultiKueueConfig: Should reject too long cluster name",
        kueue("MultiKueueConfig", "config", {"clusters": ["a" * 257]}),
        refused(("spec.clusters[0]", "Too long: may not be more than 256 bytes")),
    ),
]

REFS = {
    "ClusterQueue": resources.CLUSTER_QUEUES,
    "Cohort": resources.COHORTS,
    "ResourceFlavor": resources.RESOURCE_FLAVORS,
    "LocalQueue": resources.LOCAL_QUEUES,
    "AdmissionCheck": resources.ADMISSION_CHECKS,
    "MultiKueueCluster": resources.MULTIKUEUE_CLUSTERS,
    "MultiKueueConfig": resources.MULTIKUEUE_CONFIGS,
}


async def create(api: k8s_client.ApiClient, obj: dict[str, Any]) -> dict[str, Any]:
    namespace = obj["metadata"].get("namespace")
    ref = REFS[obj["kind"]]
    if namespace:
        return await client.create_object(api, ref, namespace=namespace, body=obj)
    return await client.create_object(api, ref, body=obj)


@pytest.mark.parametrize(("obj", "want"), [pytest.param(obj, want, id=name) for name, obj, want in CASES])
async def test_kueue_s_create_cases(
    api: k8s_client.ApiClient, obj: dict[str, Any], want: tuple[int, list[tuple[str, str]]] | None
) -> None:
    """A create is stored, or refused as Kueue refuses it: 422 with exactly the causes Kueue's CRD names, or 403
    with the field errors of its validating webhook, each field with its message, in order."""
    if want is None:
        stored = await create(api, obj)
        assert stored["metadata"]["name"] == obj["metadata"]["name"]
        return
    status, causes_wanted = want
    with pytest.raises(errors.ApiError) as refusal:
        await create(api, obj)
    assert refusal.value.status == status, refusal.value.body
    if status == 403:
        message = refusal.value.message
        webhook = f'admission webhook "v{obj["kind"].lower()}.kb.io" denied the request: '
        assert message.startswith(webhook), message
        at = len(webhook)
        for field, part in causes_wanted:  # the field errors in order, each its field then its message
            at = message.index(f"{field}: ", at)
            at = message.index(part, at)
        return
    causes = refusal.value.body["details"]["causes"]
    assert [cause["field"] for cause in causes] == [field for field, _ in causes_wanted], causes
    for cause, (_, part) in zip(causes, causes_wanted, strict=True):
        assert part in cause["message"], cause


async def test_all_defaults_of_a_cluster_queue(api: k8s_client.ApiClient) -> None:
    """clusterqueue_test.go "Defaulting on creation": an empty spec gets Kueue's queueing strategy, stop policy,
    flavor fungibility and preemption; an empty fairSharing its weight 1. (The ``resource-in-use`` finalizer, which
    Kueue's mutating webhook adds: :func:`test_kueues_mutating_webhooks_add_the_resource_in_use_finalizer`.)"""
    defaults = {
        "queueingStrategy": "BestEffortFIFO",
        "stopPolicy": "None",
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {
            "withinClusterQueue": "Never",
            "reclaimWithinCohort": "Never",
            "borrowWithinCohort": {"policy": "Never"},
        },
    }
    assert (await create(api, kueue("ClusterQueue", "foo", {})))["spec"] == defaults
    overridden = {
        "flavorFungibility": defaults["flavorFungibility"],
        "preemption": {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
        },
    }
    assert (await create(api, kueue("ClusterQueue", "bar", overridden)))["spec"] == {**defaults, **overridden}
    fair = await create(api, kueue("ClusterQueue", "baz", {"fairSharing": {}}))
    assert str(fair["spec"]["fairSharing"]["weight"]) == "1"


async def update(api: k8s_client.ApiClient, obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """Create ``obj``, then replace its spec's fields ``spec`` (None: removed) as a Go client's Update does."""
    stored = await create(api, obj)
    for field, value in spec.items():
        if value is None:
            stored["spec"].pop(field, None)
        else:
            stored["spec"][field] = value
    ref, name = REFS[obj["kind"]], obj["metadata"]["name"]
    namespace = obj["metadata"].get("namespace")
    if namespace:
        return await client.replace_object(api, ref, namespace=namespace, name=name, body=stored)
    return await client.replace_object(api, ref, name=name, body=stored)


async def refused_update(api: k8s_client.ApiClient, obj: dict[str, Any], **spec: Any) -> list[dict[str, str]]:
    with pytest.raises(errors.ApiError) as refusal:
        await update(api, obj, **spec)
    assert refusal.value.status == 422, refusal.value.body
    return list(refusal.value.body["details"]["causes"])


async def test_kueue_s_update_cases(api: k8s_client.ApiClient) -> None:
    """The update cases of clusterqueue_test.go, cohort_test.go, resourceflavor_test.go, localqueue_test.go and
    admissioncheck_test.go: what may change, and the field path of what may not."""
    memory = group(quotas("x86", ("memory",)))
    causes = await refused_update(api, cq(memory), resourceGroups=[group(quotas("@x86", ("memory",)))])
    assert [c["field"] for c in causes] == [f"{RG0}.flavors[0].name"]  # Should have qualified flavor names
    queue = kueue("ClusterQueue", "strict", {"queueingStrategy": "StrictFIFO", "resourceGroups": [memory]})
    assert (await update(api, queue, queueingStrategy="BestEffortFIFO"))["spec"]["queueingStrategy"] == "BestEffortFIFO"

    assert (await update(api, kueue("Cohort", "c1", {}), parentName="cohort2"))["spec"]["parentName"] == "cohort2"
    causes = await refused_update(api, kueue("Cohort", "c2", {}), parentName="@cohort2")
    assert [c["field"] for c in causes] == ["spec.parentName"]

    causes = await refused_update(api, flavor(), nodeTaints=[{"key": "foo", "value": "bar", "effect": "Invalid"}])
    assert [c["field"] for c in causes] == ["spec.nodeTaints[0].effect", "spec.nodeTaints"]

    local = kueue("LocalQueue", "queue", {"clusterQueue": "foo"}, namespace="default")
    causes = await refused_update(api, local, clusterQueue="bar")
    assert causes == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "bar": field is immutable',
            "field": "spec.clusterQueue",
        }
    ]

    ac = {"controllerName": "controller-name", "parameters": REF}
    changed = {"apiGroup": "ref.api.group2", "kind": "RefKind2", "name": "ref-name2"}
    assert (await update(api, kueue("AdmissionCheck", "a1", ac), parameters=changed))["spec"]["parameters"] == changed
    assert "parameters" not in (await update(api, kueue("AdmissionCheck", "a2", ac), parameters=None))["spec"]
    causes = await refused_update(api, kueue("AdmissionCheck", "a3", ac), parameters={**REF, "name": ""})
    assert {c["field"] for c in causes} == {"spec.parameters.name"}
    causes = await refused_update(api, kueue("AdmissionCheck", "a4", ac), controllerName="controller-name2")
    assert causes == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "controller-name2": field is immutable',
            "field": "spec.controllerName",
        }
    ]


def flavor_usage(count: int) -> list[dict[str, Any]]:
    """localqueue_test.go makeLocalQueueFlavorUsage: ``count`` flavors of one cpu usage each."""
    return [{"name": f"f{i}", "resources": [{"name": "cpu", "total": "0"}]} for i in range(count)]


@pytest.mark.parametrize("field", ["flavorsReservation", "flavorsUsage"])
async def test_a_local_queue_status_holds_at_most_64_flavors(api: k8s_client.ApiClient, field: str) -> None:
    """localqueue_test.go "Updating the status of a Queue": 64 flavors are stored, 65 refused 422."""
    await create(api, kueue("LocalQueue", "queue", {"clusterQueue": "foo"}, namespace="default"))
    where = {"namespace": "default", "name": "queue", "subresource": "status"}
    status = {"flavorsReservation": flavor_usage(64), "flavorsUsage": flavor_usage(64)}
    await client.patch_object(api, resources.LOCAL_QUEUES, **where, patch={"status": status})
    with pytest.raises(errors.ApiError) as refusal:
        await client.patch_object(api, resources.LOCAL_QUEUES, **where, patch={"status": {field: flavor_usage(65)}})
    assert refusal.value.status == 422
    assert [c["field"] for c in refusal.value.body["details"]["causes"]] == [f"status.{field}"]


async def test_a_multikueue_cluster_s_kubeconfig_is_a_secret_by_default(api: k8s_client.ApiClient) -> None:
    """multikueue_cluster_test.go "KubeConfig locationType defaults to Secret"."""
    stored = await create(
        api, kueue("MultiKueueCluster", "worker", {"clusterSource": {"kubeConfig": {"location": "s"}}})
    )
    assert stored["spec"]["clusterSource"]["kubeConfig"] == {"locationType": "Secret", "location": "s"}


@pytest.mark.parametrize(("count", "stored"), [(16, True), (17, False)])
async def test_a_multikueue_cluster_status_holds_at_most_16_conditions(
    api: k8s_client.ApiClient, count: int, stored: bool
) -> None:
    """multikueue_cluster_test.go "Validate status conditions on update"."""
    await create(api, kueue("MultiKueueCluster", "worker", {"clusterSource": {"kubeConfig": {"location": "s"}}}))
    conditions = [
        {
            "type": f"Condition{i}",
            "status": "True",
            "reason": f"TestReason{i}",
            "message": "test condition",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        for i in range(count)
    ]
    where = {"name": "worker", "subresource": "status", "patch": {"status": {"conditions": conditions}}}
    if stored:
        await client.patch_object(api, resources.MULTIKUEUE_CLUSTERS, **where)
        return
    with pytest.raises(errors.ApiError) as refusal:
        await client.patch_object(api, resources.MULTIKUEUE_CLUSTERS, **where)
    assert refusal.value.status == 422
    assert [c["field"] for c in refusal.value.body["details"]["causes"]] == ["status.conditions"]


async def test_kueues_mutating_webhooks_add_the_resource_in_use_finalizer() -> None:
    """clusterqueue_webhook.go and resourceflavor_webhook.go Default (mclusterqueue.kb.io, mresourceflavor.kb.io, on
    CREATE): a created ClusterQueue or ResourceFlavor carries ``kueue.x-k8s.io/resource-in-use``, beside its own
    finalizers; a Cohort, which has no mutating webhook, does not. The emulator plays them as ``demo`` and ``up
    --emulator`` run it (``resource_in_use_finalizer``, with the dispatcher that takes the finalizer off); without
    it, as the other tests run it with no dispatcher, nothing is added."""
    from kueue_es import supervisor
    from kueue_es.sim import emulator

    assert supervisor.emulator_webhook_options(argparse.Namespace())["resource_in_use_finalizer"] is True
    finalizer = "kueue.x-k8s.io/resource-in-use"
    for played in (True, False):
        async with emulator.serve_emulator(resource_in_use_finalizer=played) as cluster:
            api = await client.make_api_client(server=str(cluster.url))
            try:
                queue = kueue("ClusterQueue", "cq", {})
                queue["metadata"]["finalizers"] = ["example.com/mine"]
                stored = [
                    await create(api, queue),
                    await create(api, kueue("ResourceFlavor", "rf", {})),
                    await create(api, kueue("Cohort", "co", {})),
                ]
            finally:
                await api.close()
        finalizers = [s["metadata"].get("finalizers") or [] for s in stored]
        if played:
            assert finalizers == [["example.com/mine", finalizer], [finalizer], []]
        else:
            assert finalizers == [["example.com/mine"], [], []]
