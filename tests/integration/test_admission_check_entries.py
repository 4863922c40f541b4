"""AdmissionChecks reach the log, and the dispatcher keeps what a check controller wrote on a Workload.

Watcher (Kueue's kinds, AdmissionChecks, Namespaces and Jobs, but not the Workload
objects, so the log does not learn the controller's answer), admitter and dispatcher in
one process on one MemoryBus and one emulated API server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kueue_es.events import subjects, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher.object_sync import keep_controller_checks
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.kinds import OBSERVED_KINDS
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    admitter,
    cluster_queue,
    dispatcher_with_consumer,
    flavor,
    job,
    local_queue,
    running,
    wait_for,
)

pytestmark = pytest.mark.timeout(30)


async def workload_where(api: Any, check: Any) -> dict[str, Any]:
    async with asyncio.timeout(10):
        while True:
            items, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
            for wl in items:
                if check(wl):
                    return wl
            await asyncio.sleep(0.02)


def condition_types(wl: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions") or []}


async def test_a_status_write_keeps_the_entry_a_check_controller_set(api, bus: MemoryBus) -> None:
    """The Workload reserves quota with check ``prov`` Pending; the check's controller sets it Ready on the
    server; the dispatcher then writes the status for another reason (PodsReady) before the log knows of the
    Ready: the controller's entry stays."""
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "prov"},
        "spec": {"controllerName": "example.com/prov"},
    }
    queue = cluster_queue("cluster-queue", cpu=3)
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    watcher = Watcher(bus=bus, api=api)
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watches = [watcher.watch(kind) for kind in (*OBSERVED_KINDS, "Job")]
    async with running(*watches, admitter(bus).run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        for manifest in (flavor("default-flavor"), check, queue, local_queue("user-queue", "cluster-queue")):
            await kube.apply_manifest(api, manifest)
        [inactive] = await wait_for(bus, types.AdmissionCheckObserved)
        assert inactive.admission_check.active is False  # no Active condition yet: the ClusterQueue is inactive
        active = {"type": "Active", "status": "True", "reason": "Active", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
        await kube.patch_object(
            api,
            resources.ADMISSION_CHECKS,
            name="prov",
            patch={"status": {"conditions": [active]}},
            subresource="status",
        )
        await wait_for(bus, types.AdmissionCheckObserved, count=2)
        await kube.apply_manifest(api, job("checked"))
        [reserved] = await wait_for(bus, types.QuotaReserved)
        wl = await workload_where(api, lambda o: condition_types(o).get("QuotaReserved") == "True")
        assert [(c["name"], c["state"]) for c in wl["status"]["admissionChecks"]] == [("prov", "Pending")]

        ready = {"name": "prov", "state": "Ready", "message": "capacity found", "lastTransitionTime": "2026-01-01T00:01:00Z"}  # fmt: skip
        name = wl["metadata"]["name"]
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name=name,
            patch={"status": {"admissionChecks": [ready]}}, subresource="status",
        )  # fmt: skip
        pods_ready = types.WorkloadPodsReady(workload=reserved.workload, ready=False, reason="WaitForStart", at_ms=1)
        await bus.publish(subjects.fact_message(pods_ready, version="test"))
        wl = await workload_where(api, lambda o: "PodsReady" in condition_types(o))
    assert wl["status"]["admissionChecks"] == [ready]
    assert condition_types(wl)["Admitted"] == "False"  # the log has not heard of the Ready


def entry(state: str, message: str = "", at: str = "2026-01-01T00:00:10Z", **more: Any) -> dict[str, Any]:
    return {"name": "prov", "state": state, "lastTransitionTime": at, "message": message, **more}


@pytest.mark.parametrize(
    ("wanted", "server", "kept"),
    [
        (entry("Pending"), None, "wanted"),  # nothing on the server yet
        (entry("Pending"), entry("Ready", "ok", "2026-01-01T00:00:10Z"), "server"),  # answered in the same second
        (entry("Ready", "ok"), entry("Retry", "later", "2026-01-01T00:00:10Z"), "server"),  # a report is the server's
        (entry("Pending", "Reset to Pending after eviction. Previously: Ready", "2026-01-01T00:00:20Z"),
         entry("Ready", "ok", "2026-01-01T00:00:10Z"), "wanted"),  # the eviction's reset wins over the old Ready
        (entry("Pending", "Reset to Pending after eviction. Previously: Ready", "2026-01-01T00:00:20Z"),
         entry("Ready", "again", "2026-01-01T00:00:30Z"), "server"),  # answered again after the reset
    ],
)  # fmt: skip
def test_which_admission_check_entry_a_status_write_keeps(
    wanted: dict[str, Any], server: dict[str, Any] | None, kept: str
) -> None:
    merged = keep_controller_checks([wanted], [server] if server else [])
    assert merged == [wanted if kept == "wanted" else server]
