"""Kueue's ClusterQueue and Cohort webhooks as pure rules (kueue_es.jobframework.core_webhooks.validate).

Cases after Kueue's pkg/webhooks/clusterqueue_webhook_test.go (TestValidateTotalFlavors,
TestValidateTotalCoveredResources, TestValidateFlavorResourceCombinations) and cohort_webhook_test.go: the
webhook alone, without the CRD's per-list limits in front of it.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.jobframework import core_webhooks

QUOTA0 = "spec.resourceGroups[0].flavors[0].resources[0]"


def flavors_group(flavors: int, resources: int) -> dict[str, Any]:
    names = [f"res{j:03d}" for j in range(resources)]
    return {
        "coveredResources": names,
        "flavors": [
            {"name": f"f{i:03d}", "resources": [{"name": n, "nominalQuota": "1"} for n in names]}
            for i in range(flavors)
        ],
    }


def refusals(kind: str, spec: dict[str, Any]) -> list[str]:
    return [str(r) for r in core_webhooks.validate(kind, {"spec": spec})]


@pytest.mark.parametrize(("flavors", "refused"), [(10, False), (256, False), (257, True)])
def test_total_flavors(flavors: int, refused: bool) -> None:
    # groups of at most 64 flavors (the CRD's limit), each covering a resource of its own, every flavor named once
    sizes = [64] * (flavors // 64) + ([flavors % 64] if flavors % 64 else [])
    groups = [
        {
            "coveredResources": [f"r{g}"],
            "flavors": [
                {"name": f"g{g}-f{i}", "resources": [{"name": f"r{g}", "nominalQuota": "1"}]} for i in range(n)
            ],
        }
        for g, n in enumerate(sizes)
    ]
    want = (
        [
            f"spec.resourceGroups: Invalid value: {flavors}: total number of flavors across all resourceGroups "
            f"must be ≤ 256, got {flavors}"
        ]
        if refused
        else []
    )
    assert refusals("ClusterQueue", {"resourceGroups": groups}) == want


@pytest.mark.parametrize(("covered", "refused"), [(10, False), (256, False), (257, True)])
def test_total_covered_resources(covered: int, refused: bool) -> None:
    got = refusals("ClusterQueue", {"resourceGroups": [flavors_group(1, covered)]})
    want = f"spec.resourceGroups: Invalid value: {covered}: total number of covered resources across all " + (
        f"resourceGroups must be ≤ 256, got {covered}"
    )
    assert got == ([want] if refused else [])


@pytest.mark.parametrize(("flavors", "resources", "refused"), [(1, 10, False), (8, 64, False), (9, 64, True)])
def test_flavor_resource_combinations(flavors: int, resources: int, refused: bool) -> None:
    got = refusals("ClusterQueue", {"resourceGroups": [flavors_group(flavors, resources)]})
    pairs = flavors * resources
    want = (
        f"spec.resourceGroups[0]: Invalid value: {pairs}: number of flavor-resource combinations in a "
        f"resourceGroup must be ≤ 512, got {pairs}"
    )
    assert got == ([want] if refused else [])


def quota(**fields: Any) -> dict[str, Any]:
    return {"coveredResources": ["cpu"], "flavors": [{"name": "x86", "resources": [{"name": "cpu", **fields}]}]}


def test_a_quota_s_errors_come_in_kueues_order_with_canonical_quantities() -> None:
    """validateFlavorQuotas: name, nominalQuota, borrowingLimit (no cohort, then negative), lendingLimit
    (negative, no cohort, above nominal); each quantity as Quantity.String() writes it."""
    spec = {"resourceGroups": [quota(nominalQuota="-1000m", borrowingLimit="-1", lendingLimit="2048Mi")]}
    assert refusals("ClusterQueue", spec) == [
        f'{QUOTA0}.nominalQuota: Invalid value: "-1": must be greater than or equal to 0',
        f'{QUOTA0}.borrowingLimit: Invalid value: "-1": must be nil when cohort is empty',
        f'{QUOTA0}.borrowingLimit: Invalid value: "-1": must be greater than or equal to 0',
        f'{QUOTA0}.lendingLimit: Invalid value: "2Gi": must be nil when cohort is empty',
        f'{QUOTA0}.lendingLimit: Invalid value: "2Gi": must be less than or equal to the nominalQuota',
    ]
    # a Cohort: "parent", and its lendingLimit may exceed its nominalQuota
    assert refusals("Cohort", {"resourceGroups": [quota(nominalQuota="1", lendingLimit="2")]}) == [
        f'{QUOTA0}.lendingLimit: Invalid value: "2": must be nil when parent is empty'
    ]
    assert refusals("Cohort", {"parentName": "p", "resourceGroups": [quota(nominalQuota="1", lendingLimit="2")]}) == []


def test_fair_sharing_weights_of_cluster_queues_and_cohorts_only() -> None:
    for kind in ("ClusterQueue", "Cohort"):
        assert refusals(kind, {"fairSharing": {"weight": "-0.5"}}) == [
            'spec.fairSharing: Invalid value: "-500m": must be greater than or equal to 0'
        ]
        assert refusals(kind, {"fairSharing": {"weight": "0.0000000001"}}) == [
            'spec.fairSharing: Invalid value: "1n": When not 0, weight must be > 10e-9'
        ]
        assert refusals(kind, {"fairSharing": {"weight": "0"}}) == []
    # Kueue has no LocalQueue webhook: its weight is not checked
    assert refusals("LocalQueue", {"fairSharing": {"weight": "-1"}}) == []
