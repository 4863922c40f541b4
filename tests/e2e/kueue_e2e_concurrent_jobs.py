"""The steps of Kueue's test/e2e/singlecluster/baseline/concurrent_admission_test.go (Describe "ConcurrentAdmission",
When "Job is submitted to a ClusterQueue with ConcurrentAdmissionPolicy"), run by tests/e2e/test_kueue_e2e_baseline.py
on ``kueue-es demo --keep`` with Kueue's e2e manager Configuration (the gate ConcurrentAdmission on).

Here the parent is a batch/v1 Job's Workload: the job runs on the flavor of whichever variant is admitted, and moves
when a more preferred variant takes over (docs/design.md "Concurrent admission"). Each step has its own namespace,
flavors (named after it, node label ``instance-type``) and ClusterQueue of two flavors, 5 CPU and 1Gi each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from tests.e2e.kueue_e2e import (
    E2E,
    KUEUE,
    PRIORITY_CLASS_LABEL,
    Step,
    flavor,
    is_true,
    job,
    local_queue,
    namespace,
    priority_class,
)
from tests.e2e.kueue_e2e_concurrent import ALLOWED, PARENT_LABEL
from tests.e2e.kueue_e2e_concurrent import admitted_on as _admitted_on


def _queue(name: str, reservation: str, spot: str, *, reservation_quota: tuple[str, str]) -> dict[str, Any]:
    """MakeClusterQueue(name).ConcurrentAdmissionPolicy(TryPreferredFlavors).ResourceGroup(reservation, spot): cpu
    and memory, reservation's as given, spot's 5 and 1Gi."""
    cpu, memory = reservation_quota

    def quotas(cpu: str, memory: str) -> list[dict[str, str]]:
        return [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]

    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "concurrentAdmissionPolicy": {"migration": {"mode": "TryPreferredFlavors"}},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {"name": reservation, "resources": quotas(cpu, memory)},
                        {"name": spot, "resources": quotas("5", "1Gi")},
                    ],
                }
            ],
        },
    }


async def _setup(e2e: E2E, ns: str, *, reservation_quota: tuple[str, str]) -> tuple[str, str, str]:
    """The step's flavors, ClusterQueue and LocalQueue ``main``; (reservation, spot, ClusterQueue)."""
    reservation, spot, cq = f"reservation-{ns}", f"spot-{ns}", f"cq-concurrent-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(reservation, node_labels={"instance-type": "reservation"}),
        flavor(spot, node_labels={"instance-type": "spot"}),
        _queue(cq, reservation, spot, reservation_quota=reservation_quota),
        local_queue("main", ns, cq),
    )
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    return reservation, spot, cq


def _variants(workloads: list[dict[str, Any]], parent: Mapping[str, Any]) -> list[dict[str, Any]]:
    """findVariantsForParent: the Workloads with an owner reference to ``parent``'s UID."""
    uid = parent["metadata"]["uid"]
    return [
        wl
        for wl in workloads
        if wl["metadata"]["name"] != parent["metadata"]["name"]
        and any(ref.get("uid") == uid for ref in wl["metadata"].get("ownerReferences") or [])
    ]


def _variant_on(workloads: list[dict[str, Any]], parent: str, flavor_name: str) -> dict[str, Any] | None:
    """getVariantByFlavor: the Workload owned by Workload ``parent`` whose allowed-flavors annotation is the flavor."""
    for wl in workloads:
        owners = [ref.get("name") for ref in wl["metadata"].get("ownerReferences") or []]
        if wl["metadata"]["name"] != parent and parent in owners:
            if (wl["metadata"].get("annotations") or {}).get(ALLOWED) == flavor_name:
                return wl
    return None


def _running_on(instance_type: str) -> Any:
    """The Job is unsuspended with the flavor's node label in its pod template (a kueue-es check: Kueue's test reads
    only the Workloads)."""

    def check(obj: Mapping[str, Any]) -> bool:
        spec = obj.get("spec") or {}
        selector = ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
        return spec.get("suspend") is False and selector.get("instance-type") == instance_type

    return check


async def _eventually(check: Any, *, what: str, tries: int = 240) -> Any:
    last = None
    for _ in range(tries):
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.5)
    raise AssertionError(f"{what}; last seen {last}")


async def _parent_of(e2e: E2E, ns: str, name: str = "job") -> dict[str, Any]:
    """The Workload of Job ``name`` (GetWorkloadNameForJob), once it exists: the one the Job owns (the variants copy
    its ``kueue.x-k8s.io/job-uid`` label, as Kueue's generateVariant copies every label but the parent's)."""

    async def owned_by_the_job() -> dict[str, Any] | None:
        for wl in await e2e.list("workloads", ns):
            refs = wl["metadata"].get("ownerReferences") or []
            if any(ref.get("kind") == "Job" and ref.get("name") == name for ref in refs):
                return wl
        return None

    found: dict[str, Any] = await _eventually(owned_by_the_job, what=f"the Workload of Job {ns}/{name}")
    return found


async def creates_one_parent_and_one_variant_per_flavor(e2e: E2E) -> None:
    """It "Should create one Parent Workload and one Variant per flavor"."""
    ns = "e2e-concurrent-job-variants"
    reservation, spot, _ = await _setup(e2e, ns, reservation_quota=("5", "1Gi"))
    await e2e.create(job("job", ns, queue="main", requests={"cpu": "200m", "memory": "20Mi"}))
    parent = await _parent_of(e2e, ns)
    name = parent["metadata"]["name"]
    parent = await e2e.wait(
        "workload",
        name,
        ns,
        lambda o: (o["metadata"].get("labels") or {}).get(PARENT_LABEL) == "true",
        what="the parent labelled",
    )

    async def three_with_both_flavors() -> list[dict[str, Any]] | None:
        workloads = await e2e.list("workloads", ns)
        flavors = sorted((wl["metadata"].get("annotations") or {}).get(ALLOWED, "") for wl in workloads)
        return workloads if len(workloads) == 3 and flavors == sorted(["", reservation, spot]) else None

    workloads = await _eventually(three_with_both_flavors, what="2 variants + 1 parent, one variant per flavor")
    assert len(_variants(workloads, parent)) == 2, workloads


async def migrates_the_job_to_the_preferred_flavor(e2e: E2E) -> None:
    """It "Should migrate Job to more favorable flavor when its quota becomes available": reservation at 0, the Job
    runs on spot (its parent admitted there, the spot variant admitted, the reservation variant active); reservation
    given 5 CPU and 1Gi, the parent moves to reservation, the Job runs there, the spot variant is deactivated."""
    ns = "e2e-concurrent-job-migrate"
    reservation, spot, cq = await _setup(e2e, ns, reservation_quota=("0", "0"))
    await e2e.create(job("job", ns, queue="main", requests={"cpu": "200m", "memory": "20Mi"}))
    name = (await _parent_of(e2e, ns))["metadata"]["name"]
    await e2e.wait("workload", name, ns, _admitted_on(spot), what="the parent admitted on spot")

    async def spot_admitted_reservation_active() -> bool:
        workloads = await e2e.list("workloads", ns)
        on_spot, on_reservation = _variant_on(workloads, name, spot), _variant_on(workloads, name, reservation)
        return (
            on_spot is not None
            and on_reservation is not None
            and is_true(on_spot, "Admitted")
            and (on_reservation.get("spec") or {}).get("active", True) is not False
        )

    await _eventually(spot_admitted_reservation_active, what="spot variant admitted, reservation variant active")
    await e2e.wait("job", "job", ns, _running_on("spot"), what="the Job running on spot")
    # a kueue-es check: the parent's PodsReady follows its job's pods, as Kueue's job reconciler writes it
    await e2e.wait("workload", name, ns, lambda o: is_true(o, "PodsReady"), what="the parent PodsReady")
    patch = (
        '[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota","value":"5"},'
        '{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/1/nominalQuota","value":"1Gi"}]'
    )
    await e2e.kubectl.ok("patch", "clusterqueue", cq, "--type=json", "-p", patch)
    await e2e.wait("workload", name, ns, _admitted_on(reservation), what="the parent migrated to reservation")

    async def spot_deactivated() -> bool:
        on_spot = _variant_on(await e2e.list("workloads", ns), name, spot)
        return on_spot is not None and (on_spot.get("spec") or {}).get("active", True) is False

    await _eventually(spot_deactivated, what="the spot variant deactivated after the migration")
    await e2e.wait("job", "job", ns, _running_on("reservation"), what="the Job running on reservation")


async def a_finished_job_finishes_its_variants_and_frees_the_quota(e2e: E2E) -> None:
    """A kueue-es case beside Kueue's: a Job of 3 seconds on reservation completes; its parent finishes, the
    controller finishes both variants (syncFinished), and the ClusterQueue holds no quota after."""
    ns = "e2e-concurrent-job-finish"
    reservation, _, cq = await _setup(e2e, ns, reservation_quota=("5", "1Gi"))
    await e2e.create(job("job", ns, queue="main", requests={"cpu": "200m", "memory": "20Mi"}, seconds=3))
    name = (await _parent_of(e2e, ns))["metadata"]["name"]
    await e2e.wait("workload", name, ns, _admitted_on(reservation), what="the parent admitted on reservation")
    await e2e.wait("job", "job", ns, lambda o: is_true(o, "Complete"), what="the Job completed")
    await e2e.wait("workload", name, ns, lambda o: is_true(o, "Finished"), what="the parent finished")

    async def all_finished() -> bool:
        workloads = await e2e.list("workloads", ns)
        return len(workloads) == 3 and all(is_true(wl, "Finished") for wl in workloads)

    await _eventually(all_finished, what="the parent and both variants finished")
    parent = await e2e.must_get("workload", name, ns)
    # Kueue changes no other condition as a workload finishes: the parent stays admitted on reservation
    assert _admitted_on(reservation)(parent) and is_true(parent, "QuotaReserved"), parent["status"]
    await e2e.wait(
        "clusterqueue",
        cq,
        None,
        lambda o: (o.get("status") or {}).get("reservingWorkloads") == 0,
        what="no quota reserved in the ClusterQueue",
    )


async def a_preempted_variant_stops_its_job(e2e: E2E) -> None:
    """A kueue-es case beside Kueue's: spot alone has room (1 CPU, reservation none), preemption within the
    ClusterQueue by priority. A low-priority Job runs on spot; a high-priority one comes: its spot variant's preemption
    gate is opened (the reservation one can never fit), it preempts the low one's spot variant, whose Job is
    suspended and whose parent loses its admission, and the high one's Job runs on spot."""
    ns = "e2e-concurrent-job-preempt"
    _, spot, cq = await _setup(e2e, ns, reservation_quota=("0", "0"))
    patch = (
        '[{"op":"replace","path":"/spec/resourceGroups/0/flavors/1/resources/0/nominalQuota","value":"1"},'
        '{"op":"add","path":"/spec/preemption","value":{"withinClusterQueue":"LowerPriority"}}]'
    )
    await e2e.kubectl.ok("patch", "clusterqueue", cq, "--type=json", "-p", patch)
    await e2e.apply(priority_class(f"low-{ns}", 10), priority_class(f"high-{ns}", 1000))
    requests = {"cpu": "1", "memory": "20Mi"}
    low = job("low", ns, queue="main", requests=requests, labels={PRIORITY_CLASS_LABEL: f"low-{ns}"})
    await e2e.create(low)
    await e2e.wait("job", "low", ns, _running_on("spot"), what="the low Job running on spot")
    high = job("high", ns, queue="main", requests=requests, labels={PRIORITY_CLASS_LABEL: f"high-{ns}"})
    await e2e.create(high)
    await e2e.wait("job", "high", ns, _running_on("spot"), what="the high Job running on spot")
    await e2e.wait("job", "low", ns, lambda o: (o.get("spec") or {}).get("suspend") is True, what="the low Job stopped")
    low_parent = await _parent_of(e2e, ns, "low")
    low_parent = await e2e.wait(
        "workload",
        low_parent["metadata"]["name"],
        ns,
        lambda o: not is_true(o, "QuotaReserved") and not is_true(o, "Admitted"),
        what="the low Job's parent without its admission",
    )
    assert not (low_parent.get("status") or {}).get("admission"), low_parent["status"]
    await e2e.wait(
        "clusterqueue",
        cq,
        None,
        lambda o: (o.get("status") or {}).get("reservingWorkloads") == 1,
        what="one workload reserving: the high Job's spot variant",
    )


STEPS: list[Step] = [
    creates_one_parent_and_one_variant_per_flavor,
    migrates_the_job_to_the_preferred_flavor,
    a_finished_job_finishes_its_variants_and_frees_the_quota,
    a_preempted_variant_stops_its_job,
]
