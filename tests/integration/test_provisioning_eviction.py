"""The ProvisioningRequest check controller and an eviction in the second its workload reserved quota.

Watcher (Workload objects and AdmissionChecks too), admitter, dispatcher, the provisioning controller
(services/provisioning) and the fake autoscaler on one MemoryBus and one emulated API server. Kueue's
provisioning controller leaves an evicted Workload alone but for deleting its requests (its Reconcile returns
on ``evict.IsEvicted``: the Evicted condition True), and the eviction's own status write reset every check to
Pending (evict.go resetChecksOnEviction), so the reset stays until the workload reserves quota again.

The lastTransitionTimes of the API have seconds precision. The controller took a Workload for evicted only while
its Evicted condition was later than its QuotaReserved one, so an eviction written in the second the workload
reserved quota read as "reserved again since": the controller wrote the check's state, from its request, back
over the reset (the deactivation's Rejected for good, as nothing resets it again). Under load, in a full CI run,
``tests/e2e/test_provisioning.py::test_failed_then_retry_then_rejected`` lost its reset so, in the moment between
the eviction's write and the release's. Here the admitter's clock stands still, so every decision of a test falls
in one second, and its releases wait while the test looks.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kueue_es import deciders
from kueue_es.events import manifests, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.provisioning.service import ProvisioningController
from kueue_es.services.runtime import Decider, DeciderLoop
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.autoscaler import FakeAutoscaler
from tests.integration.harness import (
    cluster_queue,
    dispatcher_with_consumer,
    events_of,
    flavor,
    job,
    local_queue,
    running,
    wait_for,
    watch_with_workloads,
)

pytestmark = pytest.mark.timeout(60)

CHECK = "sample-prov"
RESET = "Reset to Pending after eviction. Previously: Rejected"
RESET_RETRY = "Reset to Pending after eviction. Previously: Retry"
FAILED = "the request asked to fail (parameter fakeAutoscalerOutcome)"


def setup() -> list[dict[str, Any]]:
    """Kueue's provisioning-setup.yaml in small: a ClusterQueue naming check ``sample-prov`` of the provisioning
    controller, its ProvisioningRequestConfig with one attempt before Rejected and no backoff."""
    queue = cluster_queue("cluster-queue", cpu=3)
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK}]}
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prov-config"},
        },
    }
    config = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "prov-config"},
        "spec": {
            "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
            "managedResources": ["cpu"],
            "retryStrategy": {"backoffLimitCount": 1, "backoffBaseSeconds": 0, "backoffMaxSeconds": 1800},
        },
    }
    return [flavor("default-flavor"), check, config, queue, local_queue("user-queue", "cluster-queue")]


@contextlib.asynccontextmanager
async def with_provisioning(api: Any, bus: MemoryBus, *, admitter: Decider, now_ms: int) -> AsyncIterator[None]:
    """The services, the provisioning controller and the fake autoscaler; ``admitter`` decides, its clock reads
    ``now_ms``."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    stop = asyncio.Event()
    controller = asyncio.create_task(ProvisioningController(api, resync=0.5).run(stop))
    try:
        async with running(
            *watch_with_workloads(watcher),
            watcher.watch("AdmissionCheck"),
            DeciderLoop(bus=bus, decider=admitter, wakeup=0.05, clock=lambda: now_ms).run(),
            dispatcher.fold_forever(),
            dispatcher.consume(consumer),
            FakeAutoscaler(api, delay=0.1).run(),
        ):
            yield
    finally:
        stop.set()
        await controller  # it ends its round and its watches


async def watch_workloads(api: Any, seen: list[dict[str, Any]]) -> None:
    """Every version of the Workload objects in ``default`` the API server stores, in turn, into ``seen``."""
    async for change in kube.watch_objects(api, resources.WORKLOADS, namespace="default"):
        if isinstance(change, kube.Resynced):
            seen.extend(change.objects)
        elif change.type != "DELETED":
            seen.append(change.object)


def evicted_reason(wl: dict[str, Any]) -> str:
    """The reason of ``wl``'s Evicted condition when True, else ""."""
    for cond in (wl.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Evicted" and cond.get("status") == "True":
            return str(cond.get("reason") or "")
    return ""


def holding_releases(hold: list[bool]) -> Decider:
    """The admitter, but that its QuotaReleased decisions are left out while ``hold[0]``: an evicted workload keeps
    its quota a while, as one whose job takes time to stop does (Kueue's job reconciler clears the reservation once
    ``!job.IsActive()``), so the Workload shows Evicted beside QuotaReserved; it decides them again once let go."""

    def decide(state: ClusterState, **kwargs: Any) -> list[types.Output]:
        outputs = deciders.ADMITTER.decide(state, **kwargs)
        return [out for out in outputs if not (hold[0] and isinstance(out, types.QuotaReleased))]

    return dataclasses.replace(deciders.ADMITTER, decide=decide)


@pytest.mark.parametrize(
    "held",
    [("AdmissionCheck", "DeactivatedDueToAdmissionCheck"), ("DeactivatedDueToAdmissionCheck",)],
    ids=["both-evictions-held", "deactivation-held"],
)
async def test_an_eviction_in_the_second_of_the_reservation_keeps_the_checks_reset(
    api, bus: MemoryBus, held: tuple[str, ...]
) -> None:
    """Attempt 1 fails: Retry, the eviction resets the check and, once the job stopped, the workload reserves quota
    again; attempt 2 fails: Rejected, and the deactivation's eviction resets it, "Previously: Rejected". Each reset
    is in the very status write that sets Evicted, and the controller writes the check no more while the Workload
    is evicted (it deletes the requests), also when the eviction is in the second of the reservation it ends (the
    admitter's clock stands still) and the controller looks before the quota is released (held a while after the
    evictions ``held``). Before, the controller wrote "Retrying after failure" over the first reset (and went on
    with attempt 2 while evicted) and Rejected over the second, which stayed: the CI failure of
    ``test_failed_then_retry_then_rejected``, which ``deactivation-held`` plays."""
    now_ms = int(time.time() * 1000) + 30_000  # every decision in one second, after every controller's write
    seen: list[dict[str, Any]] = []
    for manifest in setup():
        await kube.apply_manifest(api, manifest)
    doomed = job("doomed")
    doomed["metadata"]["annotations"] = {"provreq.kueue.x-k8s.io/fakeAutoscalerOutcome": "Failed"}
    hold = [False]
    async with (
        with_provisioning(api, bus, admitter=holding_releases(hold), now_ms=now_ms),
        running(watch_workloads(api, seen)),
    ):
        await kube.apply_manifest(api, doomed)
        steps = [("AdmissionCheck", RESET_RETRY), ("DeactivatedDueToAdmissionCheck", RESET)]
        for count, (reason, reset) in enumerate(steps, start=1):
            hold[0] = reason in held
            *_, evicted = await wait_for(bus, types.EvictionRequested, count=count, timeout=10)
            assert evicted.reason == reason
            if hold[0]:
                await asyncio.sleep(1.2)  # the controller's rounds (its resync is 0.5 s) while the quota is held
                now = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=evicted.workload.name)
                [entry] = now["status"]["admissionChecks"]
                assert (evicted_reason(now), entry["message"]) == (reason, reset), entry
                hold[0] = False
            await wait_for(bus, types.QuotaReleased, count=count, timeout=10)

        async def requests_gone() -> bool:
            listed, _ = await kube.list_objects(api, resources.PROVISIONING_REQUESTS, namespace="default")
            return not listed

        async with asyncio.timeout(10):
            while not await requests_gone():
                await asyncio.sleep(0.05)
        await asyncio.sleep(1.2)
        wl = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=evicted.workload.name)
    [entry] = wl["status"]["admissionChecks"]
    assert (entry["state"], entry["message"]) == ("Pending", RESET)
    condition = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")
    assert (condition["status"], condition["reason"]) == ("True", "DeactivatedDueToAdmissionCheck")
    assert condition["lastTransitionTime"] == manifests.format_time_ms(now_ms)  # the second of every reservation
    assert wl["spec"]["active"] is False
    # the check's states as the controller wrote them, read back: Retry once, Rejected once, nothing over a reset
    reports = [(c.state, c.message) for c in await events_of(bus, types.AdmissionCheckStateChanged)]
    assert [s for s, _ in reports if s != "Pending"] == ["Retry", "Rejected"], reports
    assert reports[-1] == ("Rejected", FAILED), reports
    # Kueue's Evict: the Evicted condition and the check's reset in one status write, never one without the other
    reasons = set()
    for version in seen:
        reason = evicted_reason(version)
        [check] = (version.get("status") or {}).get("admissionChecks") or [{}]
        if reason:
            reasons.add(reason)
            assert check.get("state") == "Pending", (reason, check)
            assert str(check.get("message")).startswith("Reset to Pending after eviction."), (reason, check)
    assert reasons == {"AdmissionCheck", "DeactivatedDueToAdmissionCheck"}
