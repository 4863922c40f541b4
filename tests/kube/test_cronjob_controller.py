"""CronJobs through the emulated API server (HTTP) and the simulated controllers (kueue_es/sim/controllers.py),
on an injected clock: Kueue's jobs/sample-cronjob.yaml applied as it is makes its Job once the clock passes a
minute boundary, as kube-controller-manager's cronjob controller does, and the Job goes with its CronJob."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import cronjobs, emulator
from kueue_es.sim.controllers import SimulatedControllers
from tests.kube import examples

pytestmark = pytest.mark.timeout(30)

START = datetime.datetime(2026, 3, 2, 10, 0, 30, tzinfo=datetime.UTC)


class Clock:
    """A clock the test moves: the emulator's timestamps and the controllers' schedule read it."""

    def __init__(self, now: datetime.datetime) -> None:
        self.now = now

    def __call__(self) -> datetime.datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
async def cluster(clock: Clock) -> AsyncIterator[emulator.ClusterEmulator]:
    """The emulator on the test's clock (Kueue's webhooks on: the Job naming a queue is created suspended)."""
    async with emulator.serve_emulator(bookmark_interval=0.2, clock=clock) as served:
        yield served


@pytest.fixture
async def controllers(api: k8s_client.ApiClient, clock: Clock) -> AsyncIterator[SimulatedControllers]:
    """The simulated controllers on the same clock, running until the test ends."""
    simulated = SimulatedControllers(api, lws=False, ray=False, clock=clock, watch_options={"timeout_seconds": 5})
    task = asyncio.create_task(simulated.run())
    try:
        yield simulated
    finally:
        await cancel_and_wait([task])


async def eventually(check: Callable[[], Any], *, timeout: float = 10.0) -> Any:
    """Poll ``check`` (sync or async) every 20 ms until it returns something truthy, and return that."""
    async with asyncio.timeout(timeout):
        while True:
            result = check()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return result
            await asyncio.sleep(0.02)


async def jobs(api: k8s_client.ApiClient) -> list[dict[str, Any]]:
    listed, _ = await client.list_objects(api, resources.JOBS, namespace="default")
    return listed


async def test_kueues_sample_cronjob_makes_its_job_past_a_minute_boundary(
    api: k8s_client.ApiClient, controllers: SimulatedControllers, clock: Clock
) -> None:
    """Applied at 10:00:30, the controllers set their timer for 10:01 and make nothing; moved past 10:01 the
    timer's wake makes ``sample-cronjob-<minutes>`` with the queue-name label of the jobTemplate, the
    owner reference, suspended by Kueue's Job webhook; the CronJob lists it as active. Deleting the CronJob
    garbage-collects the Job."""
    [sample] = examples.load("jobs/sample-cronjob.yaml")
    stored = await client.apply_manifest(api, sample)
    assert stored["spec"]["concurrencyPolicy"] == "Allow" and stored["spec"]["successfulJobsHistoryLimit"] == 3
    due = datetime.datetime(2026, 3, 2, 10, 1, tzinfo=datetime.UTC)
    await eventually(lambda: controllers.next_schedule == due + cronjobs.NEXT_SCHEDULE_DELTA)
    assert await jobs(api) == []

    clock.now = due + datetime.timedelta(seconds=2)
    controllers.wake()  # what the timer does at 10:01:00.1 on a wall clock
    [job] = await eventually(lambda: jobs(api))
    minutes = int(due.timestamp()) // 60
    assert job["metadata"]["name"] == f"sample-cronjob-{minutes}"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"
    assert job["metadata"]["annotations"][cronjobs.SCHEDULED_TIMESTAMP_ANNOTATION] == "2026-03-02T10:01:00Z"
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "sample-cronjob",
            "uid": stored["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert job["spec"]["suspend"] is True and job["spec"]["parallelism"] == 3

    async def listed() -> dict[str, Any]:
        cron_job = await client.get_object(api, resources.CRON_JOBS, namespace="default", name="sample-cronjob")
        return cron_job["status"] if cron_job.get("status", {}).get("active") else {}

    status = await eventually(listed)
    assert [ref["uid"] for ref in status["active"]] == [job["metadata"]["uid"]]
    assert status["lastScheduleTime"] == "2026-03-02T10:01:00Z"
    assert controllers.next_schedule == due + datetime.timedelta(minutes=1) + cronjobs.NEXT_SCHEDULE_DELTA

    await client.delete_object(api, resources.CRON_JOBS, namespace="default", name="sample-cronjob")
    assert await eventually(lambda: _none_left(api))


async def _none_left(api: k8s_client.ApiClient) -> bool:
    return not await jobs(api)


async def test_a_suspended_cronjob_makes_nothing_until_resumed(
    api: k8s_client.ApiClient, controllers: SimulatedControllers, clock: Clock
) -> None:
    """suspend: true sets no timer and makes no Job however late it gets; resumed, the most recent missed
    time runs at once (one Job, not one per missed minute)."""
    [sample] = examples.load("jobs/sample-cronjob.yaml")
    sample["spec"]["suspend"] = True
    await client.apply_manifest(api, sample)
    clock.now = START + datetime.timedelta(minutes=5)
    await eventually(lambda: controllers.ready and controllers.objects["CronJob"])
    await controllers.reconcile()  # a pass that would have made a Job
    assert await jobs(api) == [] and controllers.next_schedule is None
    await client.patch_object(
        api, resources.CRON_JOBS, namespace="default", name="sample-cronjob", patch={"spec": {"suspend": False}}
    )
    [job] = await eventually(lambda: jobs(api))
    assert job["metadata"]["name"] == f"sample-cronjob-{int(START.timestamp()) // 60 + 5}"
