"""The steps of Kueue's test/e2e/singlecluster/baseline/fair_sharing_test.go (Describe "Fair Sharing") and
hierarchical_cohort_test.go (Describe "Hierarchical Cohort"), run by tests/e2e/test_kueue_e2e_baseline.py on
``kueue-es demo --keep`` with Kueue's e2e manager Configuration (tests/fixtures/kueue-e2e/: fair sharing on).

Each case is a step with its own namespace, flavor, Cohorts and ClusterQueues (its BeforeEach).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.e2e.kueue_e2e import (
    E2E,
    KUEUE,
    Step,
    cluster_queue,
    flavor,
    is_true,
    job,
    local_queue,
    namespace,
)


def _in_cohort(cq: dict[str, Any], cohort: str) -> dict[str, Any]:
    """MakeClusterQueue(...).Cohort(cohort)."""
    cq["spec"]["cohortName"] = cohort
    return cq


def _cohort(
    name: str, *, parent: str | None = None, quotas: Mapping[str, Mapping[str, str]] | None = None
) -> dict[str, Any]:
    """MakeCohort(name).Parent(parent).ResourceGroup(one MakeFlavorQuotas per flavor)."""
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if quotas:
        spec["resourceGroups"] = [
            {
                "coveredResources": sorted({r for q in quotas.values() for r in q}),
                "flavors": [
                    {"name": f, "resources": [{"name": r, "nominalQuota": v} for r, v in q.items()]}
                    for f, q in quotas.items()
                ],
            }
        ]
    return {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


async def _active(e2e: E2E, cqs: list[str], lqs: list[str], ns: str) -> None:
    """CreateClusterQueuesAndWaitForActive, CreateLocalQueuesAndWaitForActive."""
    for cq in cqs:
        await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    for lq in lqs:
        await e2e.wait("localqueue", lq, ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {ns}/{lq} active")


def _share(cq: Mapping[str, Any]) -> int | None:
    fair = (cq.get("status") or {}).get("fairSharing")
    return None if fair is None else int(fair.get("weightedShare", 0))


async def borrowing_updates_the_weighted_share(e2e: E2E) -> None:
    """fair_sharing_test.go, When "the cluster queue starts borrowing", It "should update the
    ClusterQueue.status.fairSharing.weightedShare": four 3-pod jobs of 1 CPU in cq1 (9 CPU nominal) of a
    cohort of three such ClusterQueues: cq1 borrows 3 of the cohort's 27 CPU, weighted share 112 (Kueue's
    figure: borrowed over the lendable quota, per mille), the others 0."""
    ns = "e2e-fair-sharing"
    cohort = f"cohort-{ns}"
    rf = f"rf-{ns}"
    quotas = {rf: {"cpu": "9", "memory": "36G"}}
    cqs = [f"cq{i}-{ns}" for i in (1, 2, 3)]
    await e2e.apply(
        namespace(ns),
        flavor(rf),
        *(_in_cohort(cluster_queue(cq, quotas), cohort) for cq in cqs),
        *(local_queue(f"lq{i}", ns, cq) for i, cq in enumerate(cqs, start=1)),
    )
    await _active(e2e, cqs, ["lq1", "lq2", "lq3"], ns)
    for i in range(1, 5):
        await e2e.create(
            job(f"j{i}", ns, queue="lq1", parallelism=3, completions=3, requests={"cpu": "1", "memory": "200Mi"})
        )

    def settled(cq: Mapping[str, Any]) -> bool:
        return (cq.get("status") or {}).get("admittedWorkloads") == 4 and _share(cq) == 112

    await e2e.wait("clusterqueue", cqs[0], None, settled, what=f"{cqs[0]}: 4 admitted, weighted share 112")
    for other in cqs[1:]:
        found = await e2e.wait(
            "clusterqueue", other, None, lambda cq: _share(cq) is not None, what=f"{other}: a fairSharing status"
        )
        assert (found.get("status") or {}).get("admittedWorkloads", 0) == 0, found["status"]
        assert _share(found) == 0, found["status"]
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns)


async def zero_quota_queue_borrows_through_a_structural_cohort(e2e: E2E) -> None:
    """hierarchical_cohort_test.go, When "a zero-quota ClusterQueue borrows from a root through a structural child
    Cohort", It "should admit workloads through hierarchical borrowing": root Cohort (1 CPU) <- child Cohort (no
    quota) <- ClusterQueue (0 CPU); two 500m jobs are admitted borrowing the root's whole CPU, a third stays
    pending and the usage stays 1 CPU, all borrowed."""
    ns = "e2e-hierarchical-cohort"
    rf = f"rf-{ns}"
    root, child, cq = f"root-{ns}", f"child-{ns}", f"cq-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(rf),
        _cohort(root, quotas={rf: {"cpu": "1"}}),
        _cohort(child, parent=root),
        _in_cohort(cluster_queue(cq, {rf: {"cpu": "0"}}), child),
        local_queue("lq", ns, cq),
    )
    await _active(e2e, [cq], ["lq"], ns)
    for i in (1, 2):
        await e2e.create(job(f"job-{i}", ns, queue="lq", requests={"cpu": "500m"}))

    def usage(found: Mapping[str, Any]) -> dict[str, Any]:
        flavors = (found.get("status") or {}).get("flavorsUsage") or [{}]
        resources = flavors[0].get("resources") or [{}]
        return dict(resources[0])

    def borrowing_all(found: Mapping[str, Any], pending: int) -> bool:
        status = found.get("status") or {}
        used = usage(found)
        return (
            status.get("admittedWorkloads") == 2
            and status.get("pendingWorkloads", 0) == pending
            and (used.get("total"), used.get("borrowed")) == ("1", "1")
        )

    await e2e.wait("clusterqueue", cq, None, lambda o: borrowing_all(o, 0), what=f"{cq}: 2 admitted, 1 CPU borrowed")
    await e2e.create(job("job-overflow", ns, queue="lq", requests={"cpu": "500m"}))
    await e2e.wait("clusterqueue", cq, None, lambda o: borrowing_all(o, 1), what=f"{cq}: the overflow job pending")
    workload = await e2e.wait_workload_of("job", "job-overflow", ns)
    assert not is_true(workload, "QuotaReserved"), workload.get("status")
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns)


STEPS: list[Step] = [borrowing_updates_the_weighted_share, zero_quota_queue_borrows_through_a_structural_cohort]
