"""Kueue's wait-time histograms after a requeue, through the real services against the emulated API server.

Watcher, admitter and dispatcher on one MemoryBus and one emulated API server (``kueue`` of
test_admission_check_retry); the metrics are the admitter's ``/metrics`` over the folded log. Kueue's rules:
pkg/workload/workload.go QueuedWaitTime (from the Requeued condition's lastTransitionTime, else the creation),
pkg/controller/core/workload_controller.go (Requeued=True ``Reactivated``, ``ClusterQueueRestarted``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from tests.integration.harness import cluster_queue, flavor, folded, job, local_queue, wait_for
from tests.integration.test_admission_check_retry import kueue, metric_samples, metric_value
from tests.integration.test_workload_objects import eventually

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("how", ["deactivated", "ClusterQueue"])
async def test_the_wait_after_a_reactivation_or_a_restart_counts_from_it(api, bus: MemoryBus, how: str) -> None:
    """A Job admitted at once, then set inactive by hand (or drained by its ClusterQueue's ``stopPolicy:
    HoldAndDrain``), then 2 s later active again (the stop policy None again), admitted again at once: Kueue's
    QueuedWaitTime counts from Requeued=True ``Reactivated`` (``ClusterQueueRestarted``), set when its workload
    controller sees the change, so the second wait is about 0 s in the quota-reserved and admission wait
    histograms. Before, kueue-es counted from the release, so the 2 s stopped were in it."""
    async with kueue(api, bus):
        await kube.apply_manifest(api, flavor("default-flavor"))
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=3))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        await kube.apply_manifest(api, job("sample"))
        [reserved] = await wait_for(bus, types.WorkloadAdmitted)
        first = metric_samples(await folded(bus))
        name = reserved.workload.name
        # the dispatcher writes the Workload object after the admission is on the log: a user patches what exists
        admitted = {"type": "Admitted", "status": "True"}
        await eventually(
            api,
            resources.WORKLOADS,
            name=name,
            namespace="default",
            check=lambda obj: any(admitted.items() <= c.items() for c in obj.get("status", {}).get("conditions", [])),
        )
        if how == "deactivated":
            where: dict[str, Any] = {"namespace": "default", "name": name}
            what, stop, run = resources.WORKLOADS, {"spec": {"active": False}}, {"spec": {"active": True}}
        else:
            where = {"name": "cluster-queue"}
            what, stop, run = resources.CLUSTER_QUEUES, {"spec": {"stopPolicy": "HoldAndDrain"}}, {"spec": {"stopPolicy": "None"}}  # fmt: skip
        await kube.patch_object(api, what, **where, patch=stop)
        await wait_for(bus, types.QuotaReleased, timeout=10)
        await asyncio.sleep(2)
        await kube.patch_object(api, what, **where, patch=run)
        await wait_for(bus, types.WorkloadAdmitted, count=2, timeout=10)
        second = metric_samples(await folded(bus))
    labels = {"cluster_queue": "cluster-queue", "priority_class": ""}
    for family in ("kueue_quota_reserved_wait_time_seconds", "kueue_admission_wait_time_seconds"):
        assert metric_value(second, f"{family}_count", **labels) == 2, family
        again = metric_value(second, f"{family}_sum", **labels) - metric_value(first, f"{family}_sum", **labels)
        assert again < 1, (family, again)
