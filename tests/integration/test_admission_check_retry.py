"""Admission checks in Retry, Rejected and by hand, through the real services against the emulated API server.

Watcher (Workload objects and AdmissionChecks too), admitter and dispatcher on one MemoryBus and one
emulated API server; a check controller is played by status writes on the Workload, as
``kubectl patch workload W --subresource=status --type=merge`` does. Kueue's rules
(pkg/controller/core/workload_controller.go reconcileCheckBasedEviction, syncAdmissionCheckConditions,
pkg/workload/evict resetChecksOnEviction, pkg/workload SetRequeueState, jobframework/reconciler.go stopJob and
"handle eviction") say what the Workload and its Job show after each write.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kueue_es import logsource
from kueue_es.events import manifests, types
from kueue_es.events.bus.base import OutgoingMessage, PublishAck
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling.explain import StoryCollector
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.kueue_metrics import KueueCollector
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    admitter,
    cluster_queue,
    dispatcher_with_consumer,
    events_of,
    flavor,
    folded,
    job,
    local_queue,
    log_entries,
    running,
    wait_for,
    watch_with_workloads,
)
from tests.integration.test_job_events import job_events, summary

pytestmark = pytest.mark.timeout(60)


class SlowBus(MemoryBus):
    """A log that takes a while to store an admission check's fact published alone (a round trip to a
    nats-server under load): the admitter, caught up meanwhile, runs its cycles between two such facts."""

    async def publish(self, message: OutgoingMessage) -> PublishAck:
        ack = await super().publish(message)
        if message.headers.get("Kq-Type") == "AdmissionCheckStateChanged":
            await asyncio.sleep(0.5)
        return ack


@pytest.fixture
async def slow_bus() -> AsyncIterator[SlowBus]:
    bus = SlowBus()
    yield bus
    await bus.close()


ACTIVE = {"type": "Active", "status": "True", "reason": "Active", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
T = "2026-01-01T00:01:00Z"


def admission_check(name: str) -> dict[str, Any]:
    """An AdmissionCheck of the example controller (made Active by a status write, as its controller would)."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {"controllerName": "example.com/my-controller"},
    }


def entry(name: str, state: str, message: str = "", at: str = T, **more: Any) -> dict[str, Any]:
    """One ``status.admissionChecks[]`` entry as a check controller writes it."""
    return {"name": name, "state": state, "message": message, "lastTransitionTime": at, **more}


@contextlib.asynccontextmanager
async def kueue(api: Any, bus: MemoryBus) -> AsyncIterator[None]:
    """Watcher (Workload objects and AdmissionChecks too), admitter and dispatcher running against ``api``."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    async with running(
        *watch_with_workloads(watcher),
        watcher.watch("AdmissionCheck"),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        yield


async def checked_job(api: Any, bus: MemoryBus, checks: tuple[str, ...] = ("my-check", "my-check2")) -> str:
    """ClusterQueue cluster-queue naming ``checks`` (each Active), LocalQueue user-queue, and Job ``checked``
    holding quota there, its Workload listing the checks Pending; the Workload's name."""
    queue = cluster_queue("cluster-queue", cpu=3)
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in checks]}
    for manifest in (flavor("default-flavor"), *(admission_check(n) for n in checks), queue):
        await kube.apply_manifest(api, manifest)
    await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
    for name in checks:
        patch = {"status": {"conditions": [ACTIVE]}}
        await kube.patch_object(api, resources.ADMISSION_CHECKS, name=name, patch=patch, subresource="status")
    await wait_for(bus, types.AdmissionCheckObserved, count=2 * len(checks))
    await kube.apply_manifest(api, job("checked"))
    [reserved] = await wait_for(bus, types.QuotaReserved)
    name = reserved.workload.name
    await workload_until(api, name, lambda wl: len(status_of(wl).get("admissionChecks") or []) == len(checks))
    return name


def status_of(wl: dict[str, Any]) -> dict[str, Any]:
    return wl.get("status") or {}


def conditions(wl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status_of(wl).get("conditions") or []}


async def workload_until(
    api: Any, name: str, check: Callable[[dict[str, Any]], bool], timeout: float = 15
) -> dict[str, Any]:
    """Poll Workload ``name`` until ``check`` holds of it."""
    async with asyncio.timeout(timeout):
        while True:
            with contextlib.suppress(kube.errors.NotFoundError):
                wl = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
                if check(wl):
                    return wl
            await asyncio.sleep(0.05)


async def write_checks(api: Any, name: str, *entries: dict[str, Any]) -> None:
    """A check controller's status write (a JSON merge patch: the list is replaced whole)."""
    patch = {"status": {"admissionChecks": list(entries)}}
    await kube.patch_object(api, resources.WORKLOADS, namespace="default", name=name, patch=patch, subresource="status")


async def test_a_retry_without_a_count_leaves_requeue_state_without_count(api, bus: MemoryBus) -> None:
    """A check's Retry with requeueAfterSeconds: Kueue's workload controller sets requeueState.requeueAt from it
    (NeedsRequeueAtUpdate, SetRequeueState(wl, requeueAt, false): the count is the PodsReady timeouts', left nil and
    omitted), so the evicted Workload shows ``requeueState: {requeueAt: ...}``; once the backoff is over and it
    holds quota again, nothing is left of it (the requeueAt cleared). Before, ``count: 0`` was written beside it,
    and stayed as ``{count: 0}``."""
    async with kueue(api, bus):
        name = await checked_job(api, bus, checks=("my-check",))
        now = manifests.format_time_ms(int(time.time() * 1000))  # a backoff of 3 s from now on: shown while it lasts
        await write_checks(api, name, entry("my-check", "Retry", "later", at=now, requeueAfterSeconds=3))
        waiting = await workload_until(api, name, lambda wl: "requeueState" in status_of(wl))
        assert set(waiting["status"]["requeueState"]) == {"requeueAt"}
        await wait_for(bus, types.QuotaReserved, count=2, timeout=10)
        again = await workload_until(
            api,
            name,
            lambda wl: (
                conditions(wl).get("Requeued", {}).get("reason") == "BackoffFinished"
                and "requeueState" not in status_of(wl)
            ),
        )
    assert conditions(again)["QuotaReserved"]["status"] == "True"


async def test_a_rejected_check_deactivates_with_kueues_requeued_reason(api, bus: MemoryBus) -> None:
    """A check Rejected while the workload holds quota: Kueue deactivates it (Evicted
    ``DeactivatedDueToAdmissionCheck``), and its job reconciler, once the job stopped, writes Requeued=False with
    the Evicted condition's reason and message (reconciler.go step 6, SetRequeuedCondition(wl, evCond.Reason,
    evCond.Message, false); Kueue's job_controller_test.go expects ``DeactivatedDueToRequeuingLimitExceeded`` so).
    Before, the reason was ``Deactivated`` for every deactivation."""
    async with kueue(api, bus):
        name = await checked_job(api, bus, checks=("my-check",))
        await write_checks(api, name, entry("my-check", "Rejected", "no capacity"))
        await wait_for(bus, types.QuotaReleased, timeout=10)
        wl = await workload_until(api, name, lambda wl: "Requeued" in conditions(wl))
    evicted, requeued = conditions(wl)["Evicted"], conditions(wl)["Requeued"]
    assert (evicted["status"], evicted["reason"]) == ("True", "DeactivatedDueToAdmissionCheck")
    assert (
        evicted["message"]
        == 'The workload is deactivated due to AdmissionCheck in Rejected state: "my-check" (no capacity)'
    )
    assert (requeued["status"], requeued["reason"], requeued["message"]) == (
        "False",
        "DeactivatedDueToAdmissionCheck",
        evicted["message"],
    )
    assert wl["spec"]["active"] is False


async def events_until(api: Any, check: Callable[[list[tuple[str, str, str, str]]], bool]) -> list[tuple[str, ...]]:
    """Poll the Events in ``default`` (all of them, the Workloads' too) until ``check`` holds of their summary."""
    async with asyncio.timeout(15):
        while True:
            listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
            found = summary(listed)
            if check(found):
                return found
            await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("state", "evicted"),
    [("Retry", "EvictedDueToAdmissionCheck"), ("Rejected", "EvictedDueToDeactivatedDueToAdmissionCheck")],
)
async def test_no_stopped_event_for_a_job_that_never_started(api, bus: MemoryBus, state: str, evicted: str) -> None:
    """A Job whose Workload holds quota while its check is Pending never started (still suspended); a Retry (or a
    Rejected) evicts that reservation and the Job is given back its template: Kueue's Job.Stop finds it suspended
    and returns stoppedNow=false, so stopJob records no ``Stopped`` Event on it (reconciler.go). Before, the
    dispatcher recorded one for every stop it wrote."""
    async with kueue(api, bus):
        name = await checked_job(api, bus, checks=("my-check",))
        await write_checks(api, name, entry("my-check", state, "busy"))
        await wait_for(bus, types.QuotaReleased, timeout=10)
        found = await events_until(api, lambda events: any(e[2] == evicted for e in events))
        await asyncio.sleep(0.5)  # a Stopped Event would be written with the eviction's
        found = summary(await job_events(api))
    assert [e for e in found if e[0] == "Job" and e[2] == "Stopped"] == []


async def test_two_checks_set_to_retry_by_one_write_are_one_eviction(api, slow_bus: SlowBus) -> None:
    """Two checks set to Retry by one status write (the user's trial: ``kubectl patch workload W
    --subresource=status --type=merge`` with both entries): Kueue's workload controller sees them together and
    evicts once, naming both (buildAdmissionChecksMessage: plural noun, sorted, each message in brackets), resets
    both to Pending with retryCount 1 (evict.go resetChecksOnEviction) and the workload is queued and reserves
    quota again. Before, the watcher published the two facts one after the other: the admitter evicted on the
    first alone, only it was reset, and the workload, pending with the second in Retry, was never admitted again
    (QuotaReserved=False "The workload has failed admission checks")."""
    bus = slow_bus
    async with kueue(api, bus):
        name = await checked_job(api, bus)
        await write_checks(api, name, entry("my-check", "Retry"), entry("my-check2", "Retry", "busy"))
        [evicted] = await wait_for(bus, types.EvictionRequested, timeout=10)
        await wait_for(bus, types.QuotaReserved, count=2, timeout=10)
        wl = await workload_until(api, name, lambda wl: conditions(wl)["QuotaReserved"]["status"] == "True")
    assert evicted.reason == "AdmissionCheck"
    assert evicted.message == 'Evicted due to AdmissionChecks in Retry state: "my-check"; "my-check2" (busy)'
    assert len(await events_of(bus, types.EvictionRequested)) == 1
    checks = {c["name"]: c for c in status_of(wl)["admissionChecks"]}
    for name in ("my-check", "my-check2"):
        assert checks[name]["state"] == "Pending"
        assert checks[name]["message"] == "Reset to Pending after eviction. Previously: Retry"
        assert checks[name]["retryCount"] == 1


async def test_a_second_retry_written_while_the_first_eviction_is_carried_out_is_reset_too(api, bus: MemoryBus) -> None:
    """my-check set to Retry evicts the workload; before the eviction is carried out (the dispatcher, stopped here,
    has not written it yet) a second write sets my-check2 to Retry. Kueue's Evict resets every check it finds not
    Pending, and its status write, strict on the resourceVersion, is made again over the second write: both are
    reset (retryCount 1) and the workload is queued again. Before, my-check2 stayed Retry on the released
    workload, which was never admitted again."""
    watcher = Watcher(bus=bus, api=api)
    async with running(*watch_with_workloads(watcher), watcher.watch("AdmissionCheck"), admitter(bus).run()):
        dispatcher, consumer = await dispatcher_with_consumer(bus, api)
        async with running(dispatcher.fold_forever(), dispatcher.consume(consumer)):
            name = await checked_job(api, bus)
        await write_checks(api, name, entry("my-check", "Retry"), entry("my-check2", "Pending"))
        await wait_for(bus, types.EvictionRequested, timeout=10)
        await write_checks(api, name, entry("my-check", "Retry"), entry("my-check2", "Retry", "busy"))
        await wait_for(bus, types.AdmissionCheckStateChanged, check="my-check2", state="Retry", timeout=10)
        dispatcher, consumer = await dispatcher_with_consumer(bus, api)
        async with running(dispatcher.fold_forever(), dispatcher.consume(consumer)):
            await wait_for(bus, types.QuotaReserved, count=2, timeout=10)
            wl = await workload_until(
                api,
                name,
                lambda wl: (
                    conditions(wl)["QuotaReserved"]["status"] == "True"
                    and all(c["state"] == "Pending" for c in status_of(wl)["admissionChecks"])
                ),
            )
    [evicted] = await events_of(bus, types.EvictionRequested)
    assert evicted.message == 'Evicted due to AdmissionCheck in Retry state: "my-check"'
    checks = {c["name"]: c for c in status_of(wl)["admissionChecks"]}
    for check in ("my-check", "my-check2"):
        assert (checks[check]["message"], checks[check]["retryCount"]) == (
            "Reset to Pending after eviction. Previously: Retry",
            1,
        )


async def test_the_entries_follow_the_cluster_queues_checks_whatever_is_written(api, bus: MemoryBus) -> None:
    """A status write that drops my-check2's entry and adds one for a check the ClusterQueue does not name:
    Kueue's workload controller syncs the list at its next reconcile (syncAdmissionCheckConditions): the
    unknown entry goes, the missing one comes back Pending, sorted by name. Before, the list stayed as written.
    The workload stays waiting for its checks (a check Ready that the ClusterQueue does not name admits
    nothing)."""
    async with kueue(api, bus):
        name = await checked_job(api, bus)
        before = await workload_until(api, name, lambda wl: True)
        mine = next(c for c in status_of(before)["admissionChecks"] if c["name"] == "my-check")
        await write_checks(api, name, entry("another-check", "Ready", "ok"), mine)
        synced = await workload_until(
            api, name, lambda wl: [c["name"] for c in status_of(wl)["admissionChecks"]] == ["my-check", "my-check2"]
        )
        await asyncio.sleep(0.5)  # and it stays so
        after = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
    assert status_of(after)["admissionChecks"] == status_of(synced)["admissionChecks"]
    checks = {c["name"]: c for c in status_of(after)["admissionChecks"]}
    assert checks["my-check"] == mine
    assert (checks["my-check2"]["state"], checks["my-check2"]["message"]) == ("Pending", "")
    assert conditions(after)["Admitted"]["status"] == "False"
    assert await events_of(bus, types.WorkloadAdmitted) == []


def metric_samples(state: ClusterState) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample the admitter's ``/metrics`` exports over ``state``: (sample name, labels) -> value."""
    registry = CollectorRegistry()
    registry.register(KueueCollector(lambda: state))
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
    }


def metric_value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], sample: str, /, **labels: str) -> float:
    """The value of ``sample`` with exactly ``labels`` (and the standalone replica's role), 0 when not exported."""
    labels.setdefault("replica_role", "standalone")
    return samples.get((sample, frozenset(labels.items())), 0.0)


async def explained(bus: MemoryBus, name: str) -> list[tuple[str, str]]:
    """``kueue-es explain workload NAME``'s story of the Workload, as (step, text) pairs, read from the log."""
    collector = StoryCollector(namespace="default", name=name)
    folder = logsource.Folder(observer=collector.observe, on_message=lambda m: collector.stored_at(m.time_ms))
    for message, _ in await log_entries(bus):
        folder.feed(message)
    return [(line.what, line.text) for line in collector.lines[f"default/{name}"]]


async def test_deactivating_a_reservation_waiting_for_its_checks_counts_an_eviction(api, bus: MemoryBus) -> None:
    """A job's Workload holding quota while its check is Pending (QuotaReserved=True, Admitted=False
    UnsatisfiedAdmissionChecks) set inactive by hand (``kubectl patch kwl X --type=merge -p
    '{"spec":{"active":false}}'``): Kueue's workload controller evicts every inactive workload (Evicted
    ``Deactivated``) and, as it has ``status.admission``, evict.go counts the eviction (evicted_workloads_total, its
    once and LocalQueue twins, schedulingStats); its job reconciler then clears the reservation of the suspended
    job. Before, kueue-es's release alone counted nothing and ``explain`` told no eviction."""
    async with kueue(api, bus):
        name = await checked_job(api, bus, checks=("my-check",))
        await kube.patch_object(
            api, resources.WORKLOADS, namespace="default", name=name, patch={"spec": {"active": False}}
        )
        [released] = await wait_for(bus, types.QuotaReleased, timeout=10)
        wl = await workload_until(
            api, name, lambda wl: conditions(wl).get("QuotaReserved", {}).get("status") == "False"
        )
    assert released.reason == "Deactivated"
    assert await events_of(bus, types.EvictionRequested) == []  # one message, the release, stands for both
    assert (conditions(wl)["Evicted"]["status"], conditions(wl)["Evicted"]["reason"]) == ("True", "Deactivated")
    assert status_of(wl)["schedulingStats"]["evictions"] == [
        {"reason": "Deactivated", "underlyingCause": "", "count": 1}
    ]
    samples = metric_samples(await folded(bus))
    labels = {"reason": "Deactivated", "underlying_cause": "", "priority_class": ""}
    for family in ("kueue_evicted_workloads_total", "kueue_evicted_workloads_once_total"):
        assert metric_value(samples, family, cluster_queue="cluster-queue", **labels) == 1, family
    lq = {"name": "user-queue", "namespace": "default"}
    assert metric_value(samples, "kueue_local_queue_evicted_workloads_total", **lq, **labels) == 1
    latency = {"cluster_queue": "cluster-queue", "reason": "Deactivated"}
    assert metric_value(samples, "kueue_workload_eviction_latency_seconds_count", **latency) == 1
    story = await explained(bus, name)
    steps = [what for what, _ in story]
    assert steps[steps.index("evicted") + 1] == "released"
    assert ("evicted", "Deactivated in ClusterQueue cluster-queue: The workload is deactivated") in story


@pytest.mark.parametrize(("kind", "reason"), [("cq", "ClusterQueueStopped"), ("lq", "LocalQueueStopped")])
async def test_hold_and_drain_of_a_reservation_waiting_for_its_checks_counts_no_eviction(
    api, bus: MemoryBus, kind: str, reason: str
) -> None:
    """The same reservation under a ClusterQueue's (or LocalQueue's) ``stopPolicy: HoldAndDrain``: Kueue's workload
    controller evicts only an admitted workload for a stop policy; a reservation not yet admitted has its quota
    unset with no eviction (workload_controller.go reconcileOnClusterQueueActiveState /
    reconcileOnLocalQueueActiveState: UnsetQuotaReservationWithCondition ``Suspended``), so nothing is counted."""
    async with kueue(api, bus):
        name = await checked_job(api, bus, checks=("my-check",))
        if kind == "cq":
            stopped = resources.CLUSTER_QUEUES, {"name": "cluster-queue"}
        else:
            stopped = resources.LOCAL_QUEUES, {"name": "user-queue", "namespace": "default"}
        await kube.patch_object(api, stopped[0], **stopped[1], patch={"spec": {"stopPolicy": "HoldAndDrain"}})
        [released] = await wait_for(bus, types.QuotaReleased, timeout=10)
        wl = await workload_until(
            api, name, lambda wl: conditions(wl).get("QuotaReserved", {}).get("status") == "False"
        )
    assert released.reason == reason
    assert "Evicted" not in conditions(wl)
    assert "schedulingStats" not in status_of(wl)
    samples = metric_samples(await folded(bus))
    assert [key for key in samples if "evicted_workloads" in key[0]] == []
    assert "evicted" not in [what for what, _ in await explained(bus, name)]


async def test_a_retry_written_with_a_later_time_is_reset_by_its_eviction(api, bus: MemoryBus) -> None:
    """A Retry written by hand with a lastTransitionTime still to come (a user's trial: ``kubectl patch workload W
    --subresource=status --type=merge`` with a made-up time): Kueue's Evict resets it whatever its time
    (resetChecksOnEviction), so once evicted and holding quota again the Workload shows it Pending, "Reset to
    Pending after eviction. Previously: Retry", retryCount 1. Before, the dispatcher's write kept the server's
    entry as a controller's answer newer than the reset, and the Workload read Retry "try again" for good."""
    async with kueue(api, bus):
        name = await checked_job(api, bus, checks=("my-check",))
        later = manifests.format_time_ms(int(time.time() * 1000) + 3_600_000)
        await write_checks(api, name, entry("my-check", "Retry", "try again", at=later))
        await wait_for(bus, types.QuotaReserved, count=2, timeout=10)
        wl = await workload_until(
            api,
            name,
            lambda wl: (
                conditions(wl)["QuotaReserved"]["status"] == "True"
                and status_of(wl)["admissionChecks"][0]["state"] == "Pending"
            ),
            timeout=5,
        )
    [check] = status_of(wl)["admissionChecks"]
    assert (check["message"], check["retryCount"]) == ("Reset to Pending after eviction. Previously: Retry", 1)


async def test_deactivating_a_reservation_resets_its_ready_check(api, bus: MemoryBus) -> None:
    """A reservation waiting for my-check2 with my-check Ready, set inactive by hand: Kueue evicts it (evict.go
    Evict) and resets my-check to Pending ("Previously: Ready"); set active again it reserves quota and waits for
    both checks anew, so my-check2 turning Ready alone admits nothing. Before, my-check stayed Ready (on the
    Workload and for the admitter), and my-check2's Ready admitted the workload (admitter logic 56)."""
    async with kueue(api, bus):
        name = await checked_job(api, bus)
        await write_checks(api, name, entry("my-check", "Ready", "ok"), entry("my-check2", "Pending"))
        await wait_for(bus, types.AdmissionCheckStateChanged, check="my-check", state="Ready", timeout=10)
        wl_api = {"namespace": "default", "name": name}
        await kube.patch_object(api, resources.WORKLOADS, **wl_api, patch={"spec": {"active": False}})
        await wait_for(bus, types.QuotaReleased, timeout=10)
        reset = "Reset to Pending after eviction. Previously: Ready"
        released = await workload_until(
            api, name, lambda wl: status_of(wl)["admissionChecks"][0].get("message") == reset, timeout=5
        )
        await kube.patch_object(api, resources.WORKLOADS, **wl_api, patch={"spec": {"active": True}})
        await wait_for(bus, types.QuotaReserved, count=2, timeout=10)
        again = await workload_until(api, name, lambda wl: conditions(wl)["QuotaReserved"]["status"] == "True")
        mine = status_of(again)["admissionChecks"][0]
        await write_checks(api, name, mine, entry("my-check2", "Ready", "ok"))
        await wait_for(bus, types.AdmissionCheckStateChanged, check="my-check2", state="Ready", timeout=10)
        await asyncio.sleep(1)
        after = await kube.get_object(api, resources.WORKLOADS, **wl_api)
    assert (status_of(released)["admissionChecks"][0]["state"], mine["state"]) == ("Pending", "Pending")
    assert await events_of(bus, types.WorkloadAdmitted) == []
    assert conditions(after)["Admitted"]["status"] == "False"
