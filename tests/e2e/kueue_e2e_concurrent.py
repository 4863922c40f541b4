"""The steps of Kueue's test/integration/singlecluster/controller/concurrentadmission/concurrent_admission_test.go
(Describe "Concurrent Admission"), run by tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo --keep`` with
Kueue's e2e manager Configuration (tests/fixtures/kueue-e2e/: the gate ConcurrentAdmission on).

Kueue's integration test drives Workloads with no job (MakeWorkload(...).ParentVariant()) against its manager;
here the same Workloads go through kubectl to the services, and the test's own writes (FinishEvictionForWorkloads,
an admission check's state, SetAdmissionCheckActive) are kubectl status patches. Each case is a step with its own
namespace, flavors and ClusterQueue (flavor names carry the namespace: the steps run at once). The e2e suite's
baseline/concurrent_admission_test.go, whose parents are Jobs' Workloads, is kueue_e2e_concurrent_jobs.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from tests.e2e.kueue_e2e import E2E, KUEUE, Step, cluster_queue, flavor, is_true, local_queue, namespace

PARENT_LABEL = "kueue.x-k8s.io/concurrent-admission-parent"
ALLOWED = "kueue.x-k8s.io/workload-allowed-resource-flavors"
GATE = "kueue.x-k8s.io/concurrent-admission"


def _ca_queue(
    name: str, quotas: Mapping[str, str], *, mode: str = "TryPreferredFlavors", last: str | None = None
) -> dict[str, Any]:
    """MakeClusterQueue(name).ConcurrentAdmissionPolicy(mode).LastAcceptableFlavorName(last).ResourceGroup(cpu
    quota per flavor, in order)."""
    cq = cluster_queue(name, {f: {"cpu": q} for f, q in quotas.items()})
    migration: dict[str, Any] = {"mode": mode}
    if last is not None:
        migration["constraints"] = {"lastAcceptableFlavorName": last}
    cq["spec"]["concurrentAdmissionPolicy"] = {"migration": migration}
    return cq


def _workload(name: str, ns: str, cpu: str, *, parent: bool = True, priority: int | None = None) -> dict[str, Any]:
    """MakeWorkload(name, ns).Request(cpu).Queue("lq")[.ParentVariant()][.Priority(priority)]."""
    spec: dict[str, Any] = {
        "queueName": "lq",
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
                    }
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if parent:
        meta["labels"] = {PARENT_LABEL: "true"}
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": meta, "spec": spec}


async def _setup(e2e: E2E, ns: str, cq: dict[str, Any], flavors: list[str]) -> None:
    await e2e.apply(namespace(ns), *(flavor(f) for f in flavors), cq, local_queue("lq", ns, cq["metadata"]["name"]))
    name = cq["metadata"]["name"]
    await e2e.wait("clusterqueue", name, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {name} active")


async def _variant(e2e: E2E, ns: str, parent: str, flavor_name: str) -> dict[str, Any] | None:
    """getVariantByFlavor: the Workload owned by ``parent`` whose allowed-flavors annotation is ``flavor_name``."""
    for wl in await e2e.list("workloads", ns):
        owners = [o.get("name") for o in wl["metadata"].get("ownerReferences") or []]
        if parent in owners and (wl["metadata"].get("annotations") or {}).get(ALLOWED) == flavor_name:
            return wl
    return None


async def _wait_variant(e2e: E2E, ns: str, parent: str, flavor_name: str, check: Any, *, what: str) -> None:
    for _ in range(180):
        found = await _variant(e2e, ns, parent, flavor_name)
        if found is not None and check(found):
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"{ns}/{parent}: {what}; last seen {found}")


def admitted_on(flavor_name: str) -> Any:
    """The Workload is admitted with its first pod set's cpu on ``flavor_name``."""

    def check(wl: Mapping[str, Any]) -> bool:
        admission = (wl.get("status") or {}).get("admission") or {}
        assignments = admission.get("podSetAssignments") or [{}]
        return is_true(wl, "Admitted") and (assignments[0].get("flavors") or {}).get("cpu") == flavor_name

    return check


def _active(wl: Mapping[str, Any]) -> bool:
    return (wl.get("spec") or {}).get("active", True) is not False


async def _set_quota(e2e: E2E, cq: str, index: int, quota: str) -> None:
    path = f"/spec/resourceGroups/0/flavors/{index}/resources/0/nominalQuota"
    await e2e.kubectl.ok(
        "patch", "clusterqueue", cq, "--type=json", "-p", f'[{{"op":"replace","path":"{path}","value":"{quota}"}}]'
    )


async def _finish_eviction(e2e: E2E, ns: str, name: str) -> None:
    """util.FinishEvictionForWorkloads: once Evicted, the quota reservation unset (QuotaReserved False, reason
    PendingEvaluation "By test"; Admitted False; no admission), as the job's reconciler does for a stopped job."""
    found = await e2e.wait("workload", name, ns, lambda o: is_true(o, "Evicted"), what=f"{ns}/{name} evicted")
    conditions = [c for c in found["status"]["conditions"] if c["type"] not in ("QuotaReserved", "Admitted")]
    now = found["status"]["conditions"][0].get("lastTransitionTime")
    conditions += [
        {"type": "QuotaReserved", "status": "False", "reason": "PendingEvaluation", "message": "By test"},
        {
            "type": "Admitted",
            "status": "False",
            "reason": "NoReservation",
            "message": "The workload has no reservation",
        },
    ]
    for c in conditions:
        c.setdefault("lastTransitionTime", now)
    await e2e.status_patch("workload", name, ns, {"conditions": conditions, "admission": None})


async def _consistently(check: Any, *, what: str, seconds: float = 2.0) -> None:
    """gomega.Consistently over util.ConsistentDuration-like ``seconds``."""
    for _ in range(int(seconds / 0.25)):
        assert await check(), what
        await asyncio.sleep(0.25)


async def creates_variants_for_all_flavors(e2e: E2E) -> None:
    """When "Should assign flavors with respect to constraints", It "Creates variants for all flavors in the
    ClusterQueue": a parent of 1 CPU in a ClusterQueue of reservation and spot (5 CPU each) gets one variant per
    flavor."""
    ns = "e2e-ca-variants"
    res, spot = f"reservation-{ns}", f"spot-{ns}"
    await _setup(e2e, ns, _ca_queue(f"cq-{ns}", {res: "5", spot: "5"}), [res, spot])
    await e2e.create(_workload("parent-wl-constraints", ns, "1"))
    for f in (res, spot):
        await _wait_variant(e2e, ns, "parent-wl-constraints", f, lambda v: True, what=f"a variant for {f}")
    # the controller's Events on the parent, as kubectl describe lists them (a kueue-es check: Kueue's test reads none)
    for _ in range(60):
        events = await e2e.list("events", ns)
        created = [e for e in events if e.get("reason") == "CreatedVariant"]
        if len(created) == 2:
            break
        await asyncio.sleep(0.5)
    assert {e["involvedObject"]["name"] for e in created} == {"parent-wl-constraints"}, created


async def counts_the_parent_not_its_variants_as_unadmitted(e2e: E2E) -> None:
    """When "Should assign flavors with respect to constraints", It "Should not count variant workloads in
    unadmitted workload metrics": a parent of 100 CPU (5 per flavor) and its two variants count once in
    kueue_unadmitted_workloads{reason NoReservation, underlying_cause PendingEvaluation} on the admitter's /metrics
    (Kueue reads its gauge in process; UnadmittedWorkloadsObservability is on by default)."""
    from prometheus_client.parser import text_string_to_metric_families

    ns = "e2e-ca-metrics"
    res, spot, cq = f"reservation-{ns}", f"spot-{ns}", f"cq-{ns}"
    await _setup(e2e, ns, _ca_queue(cq, {res: "5", spot: "5"}), [res, spot])
    await e2e.create(_workload("parent-wl-metrics", ns, "100"))
    for f in (res, spot):
        await _wait_variant(e2e, ns, "parent-wl-metrics", f, lambda v: True, what=f"a variant for {f}")
    wanted = {"cluster_queue": cq, "reason": "NoReservation", "underlying_cause": "PendingEvaluation"}
    value = None
    for _ in range(120):
        text = await e2e.kueue_metrics()
        values = [
            s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "kueue_unadmitted_workloads" and wanted.items() <= dict(s.labels).items()
        ]
        value = values[0] if values else None
        if value == 1:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"kueue_unadmitted_workloads{wanted}: {value}, not 1")


async def migrates_when_the_preferred_flavor_frees(e2e: E2E) -> None:
    """When "Should migrate to a target flavor if quota is released", It "should migrate to the preferred flavor when
    it becomes available": admitted on spot (reservation 0 CPU), reservation raised to 5, the parent's eviction
    finished: admitted on reservation, the spot variant deactivated."""
    ns = "e2e-ca-migrate"
    res, spot, cq = f"reservation-{ns}", f"spot-{ns}", f"cq-{ns}"
    await _setup(e2e, ns, _ca_queue(cq, {res: "0", spot: "5"}), [res, spot])
    await e2e.create(_workload("parent-wl-migrate", ns, "1"))
    await e2e.wait("workload", "parent-wl-migrate", ns, admitted_on(spot), what="the parent admitted on spot")
    await _set_quota(e2e, cq, 0, "5")
    await _finish_eviction(e2e, ns, "parent-wl-migrate")
    await e2e.wait("workload", "parent-wl-migrate", ns, admitted_on(res), what="the parent migrated to reservation")
    await _wait_variant(e2e, ns, "parent-wl-migrate", spot, lambda v: not _active(v), what="spot variant inactive")


async def migrates_only_at_or_above_the_last_acceptable_flavor(e2e: E2E) -> None:
    """When "Should not migrate to a flavor below min target", It "should only migrate to flavors at or above the
    minimum preferred flavor": lastAcceptableFlavorName reservation; admitted on spot, the on-demand variant is
    deactivated and on-demand's new quota moves nothing; reservation's does."""
    ns = "e2e-ca-last-acceptable"
    res, od, spot, cq = f"reservation-{ns}", f"on-demand-{ns}", f"spot-{ns}", f"cq-{ns}"
    await _setup(e2e, ns, _ca_queue(cq, {res: "0", od: "0", spot: "5"}, last=res), [res, od, spot])
    await e2e.create(_workload("parent-wl-no-migrate", ns, "1"))
    await e2e.wait("workload", "parent-wl-no-migrate", ns, admitted_on(spot), what="the parent admitted on spot")
    await _wait_variant(e2e, ns, "parent-wl-no-migrate", od, lambda v: not _active(v), what="on-demand inactive")
    await _set_quota(e2e, cq, 1, "5")

    async def still_on_spot() -> bool:
        return admitted_on(spot)(await e2e.must_get("workload", "parent-wl-no-migrate", ns))

    await _consistently(still_on_spot, what="the parent stays on spot")
    await _set_quota(e2e, cq, 0, "5")
    await _finish_eviction(e2e, ns, "parent-wl-no-migrate")
    await e2e.wait("workload", "parent-wl-no-migrate", ns, admitted_on(res), what="the parent migrated to reservation")


async def retain_first_admission_does_not_migrate(e2e: E2E) -> None:
    """When "ClusterQueue uses RetainFirstAdmission mode", It "should not migrate to a preferred flavor when it
    becomes available": admitted on spot, the reservation variant deactivated and kept so after its quota rises."""
    ns = "e2e-ca-retain"
    res, spot, cq = f"reservation-{ns}", f"spot-{ns}", f"cq-{ns}"
    await _setup(e2e, ns, _ca_queue(cq, {res: "0", spot: "5"}, mode="RetainFirstAdmission"), [res, spot])
    await e2e.create(_workload("parent-wl-hold", ns, "1"))
    await e2e.wait("workload", "parent-wl-hold", ns, admitted_on(spot), what="the parent admitted on spot")
    await _wait_variant(e2e, ns, "parent-wl-hold", res, lambda v: not _active(v), what="reservation variant inactive")
    await _set_quota(e2e, cq, 0, "5")

    async def held() -> bool:
        variant = await _variant(e2e, ns, "parent-wl-hold", res)
        on_spot = admitted_on(spot)(await e2e.must_get("workload", "parent-wl-hold", ns))
        return on_spot and variant is not None and not _active(variant)

    await _consistently(held, what="the parent stays on spot, the reservation variant inactive")


async def parent_waits_for_the_variants_admission_checks(e2e: E2E) -> None:
    """When "ClusterQueue has admission checks", It "Should wait for variant admission checks before admitting parent
    workload": the check runs on provreq-flavor only; the variant there reserves quota but the parent is not
    admitted until the check is Ready, and then carries no admission checks of its own."""
    ns = "e2e-ca-checks"
    res, prov, cq, ac = f"reservation-{ns}", f"provreq-flavor-{ns}", f"cq-{ns}", f"ac-{ns}"
    check = {
        "apiVersion": KUEUE,
        "kind": "AdmissionCheck",
        "metadata": {"name": ac},
        "spec": {"controllerName": "ac-controller"},
    }
    await e2e.apply(check)
    active = {
        "type": "Active",
        "status": "True",
        "reason": "Active",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    await e2e.status_patch("admissioncheck", ac, None, {"conditions": [active]})
    queue = _ca_queue(cq, {res: "0", prov: "5"})
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": ac, "onFlavors": [prov]}]}
    await _setup(e2e, ns, queue, [res, prov])
    await e2e.create(_workload("parent-wl-ac", ns, "1"))

    def reserved_not_admitted(v: Mapping[str, Any]) -> bool:
        return is_true(v, "QuotaReserved") and not is_true(v, "Admitted")

    await _wait_variant(e2e, ns, "parent-wl-ac", prov, reserved_not_admitted, what="the variant reserves, waits")

    async def parent_not_admitted() -> bool:
        return not is_true(await e2e.must_get("workload", "parent-wl-ac", ns), "Admitted")

    await _consistently(parent_not_admitted, what="the parent is not admitted")
    variant = await _variant(e2e, ns, "parent-wl-ac", prov)
    assert variant is not None
    ready = {
        "name": ac,
        "state": "Ready",
        "message": "Admission check succeeded",
        "lastTransitionTime": "2026-01-01T00:00:01Z",
    }
    await e2e.status_patch("workload", variant["metadata"]["name"], ns, {"admissionChecks": [ready]})
    await _wait_variant(e2e, ns, "parent-wl-ac", prov, lambda v: is_true(v, "Admitted"), what="the variant admitted")
    parent = await e2e.wait(
        "workload", "parent-wl-ac", ns, admitted_on(prov), what="the parent admitted on provreq-flavor"
    )
    assert not (parent.get("status") or {}).get("admissionChecks"), parent["status"]


async def opens_one_preemption_gate_at_a_time(e2e: E2E) -> None:
    """When "Variants require preemption to be admitted", It "should open the preemption gate for only the
    most-preferred variant at a time": both flavors (1 CPU each) held by low-priority workloads, a high-priority
    parent's reservation variant gets its gate opened, the spot variant's stays closed."""
    ns = "e2e-ca-preemption-gate"
    res, spot, cq = f"reservation-{ns}", f"spot-{ns}", f"cq-{ns}"
    queue = _ca_queue(cq, {res: "1", spot: "1"}, mode="RetainFirstAdmission")
    queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    await _setup(e2e, ns, queue, [res, spot])
    for i in range(2):
        await e2e.create(_workload(f"low-{i}", ns, "1", parent=False, priority=0))
        await e2e.wait("workload", f"low-{i}", ns, lambda o: is_true(o, "QuotaReserved"), what=f"low-{i} reserves")
    await e2e.create(_workload("parent-wl-preemption-gate", ns, "1", priority=100))

    def gate_open(v: Mapping[str, Any]) -> bool:
        gates = (v.get("status") or {}).get("preemptionGates") or []
        return any(g.get("name") == GATE and g.get("position") == "Open" for g in gates)

    parent = "parent-wl-preemption-gate"
    await _wait_variant(e2e, ns, parent, res, gate_open, what="the reservation variant's gate open")

    async def spot_closed() -> bool:
        variant = await _variant(e2e, ns, parent, spot)
        return variant is not None and not gate_open(variant)

    await _consistently(spot_closed, what="the spot variant's gate stays closed")


async def creates_a_variant_for_an_added_flavor(e2e: E2E) -> None:
    """When "Should react to changes in the ClusterQueue's resource flavors", It "creates a variant for a flavor
    added to the ClusterQueue"."""
    ns = "e2e-ca-added-flavor"
    res, spot, od, cq = f"reservation-{ns}", f"spot-{ns}", f"on-demand-{ns}", f"cq-{ns}"
    await _setup(e2e, ns, _ca_queue(cq, {res: "0", spot: "0"}), [res, spot, od])
    await e2e.create(_workload("parent-wl-add", ns, "1"))
    for f in (res, spot):
        await _wait_variant(e2e, ns, "parent-wl-add", f, lambda v: True, what=f"a variant for {f}")
    added = {"name": od, "resources": [{"name": "cpu", "nominalQuota": "0"}]}
    await e2e.kubectl.ok(
        "patch", "clusterqueue", cq, "--type=json", "-p",
        f'[{{"op":"add","path":"/spec/resourceGroups/0/flavors/-","value":{_json(added)}}}]',
    )  # fmt: skip
    await _wait_variant(e2e, ns, "parent-wl-add", od, lambda v: True, what="a variant for the added flavor")


async def readmits_on_a_remaining_flavor(e2e: E2E) -> None:
    """When "Should evict the parent when the admitted variant's flavor is removed", It "re-admits the parent on a
    remaining flavor": admitted on reservation; the ClusterQueue left with spot alone (5 CPU), the reservation
    variant is deleted, the parent evicted and, once its eviction is finished, admitted on spot."""
    ns = "e2e-ca-removed-flavor"
    res, spot, cq = f"reservation-{ns}", f"spot-{ns}", f"cq-{ns}"
    await _setup(e2e, ns, _ca_queue(cq, {res: "5", spot: "0"}), [res, spot])
    await e2e.create(_workload("parent-wl-evict", ns, "1"))
    await e2e.wait("workload", "parent-wl-evict", ns, admitted_on(res), what="the parent admitted on reservation")
    only_spot = [{"name": spot, "resources": [{"name": "cpu", "nominalQuota": "5"}]}]
    await e2e.kubectl.ok(
        "patch", "clusterqueue", cq, "--type=json", "-p",
        f'[{{"op":"replace","path":"/spec/resourceGroups/0/flavors","value":{_json(only_spot)}}}]',
    )  # fmt: skip
    for _ in range(180):
        if await _variant(e2e, ns, "parent-wl-evict", res) is None:
            break
        await asyncio.sleep(0.5)
    else:
        raise AssertionError("the reservation variant was not deleted")
    await _finish_eviction(e2e, ns, "parent-wl-evict")
    await e2e.wait("workload", "parent-wl-evict", ns, admitted_on(spot), what="the parent admitted again on spot")


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


STEPS: list[Step] = [
    creates_variants_for_all_flavors,
    counts_the_parent_not_its_variants_as_unadmitted,
    migrates_when_the_preferred_flavor_frees,
    migrates_only_at_or_above_the_last_acceptable_flavor,
    retain_first_admission_does_not_migrate,
    parent_waits_for_the_variants_admission_checks,
    opens_one_preemption_gate_at_a_time,
    creates_a_variant_for_an_added_flavor,
    readmits_on_a_remaining_flavor,
]
