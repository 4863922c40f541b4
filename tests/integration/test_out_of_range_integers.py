"""Numbers beyond what Kueue reads, through the emulated API server: refused by the webhooks in Go's words, and,
written where no webhook sees them, rejected by the watcher, which never publishes an event no service can read.

A user's trial: a queued Pod with ``kueue.x-k8s.io/pod-group-total-count: "99999999999999999999"`` (and fast
admission), or a Job labelled ``kueue.x-k8s.io/max-exec-time-seconds: "99999999999999999999"``, was created; the
watcher then published an event no service could decode ("integer out of the 64-bit range - at
`$.workload.spec.podSets[0].count`"; the demo printed ``undecodable event``). Kueue's webhooks refuse them with
strconv.Atoi's words (pod_controller.go groupTotalCount, jobframework/validation.go validateCreateForMaxExecTime).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import models, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors, resources
from kueue_es.services.watcher.publishing import Publisher
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import serve_emulator
from tests.integration.harness import log_entries, running, set_up_queues, wait_for

pytestmark = pytest.mark.timeout(60)

HUGE = "99999999999999999999"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def grouped_pod(name: str, total: str) -> dict[str, Any]:
    """A queued pod of fast-admission group ``g`` whose total count annotation is ``total``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/pod-group-name": "g"},
            "annotations": {TOTAL: total, "kueue.x-k8s.io/pod-group-fast-admission": "true"},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]},
    }


def job(name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue", **(labels or {})},
            "annotations": annotations or {},
        },
        "spec": {"parallelism": 3, "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


async def refusal(api: Any, ref: Any, body: dict[str, Any]) -> str:
    with pytest.raises(errors.ApiError) as refused:
        await kube.create_object(api, ref, namespace="default", body=body)
    assert refused.value.status == 403
    return str(refused.value.body["message"])


async def test_kueues_webhooks_refuse_numbers_go_cannot_read(api: k8s_client.ApiClient) -> None:
    field = f"metadata.annotations[{TOTAL}]"
    assert await refusal(api, resources.PODS, grouped_pod("p", HUGE)) == (
        'admission webhook "vpod.kb.io" denied the request: '
        f'{field}: Invalid value: "{HUGE}": strconv.Atoi: parsing "{HUGE}": value out of range'
    )
    assert await refusal(api, resources.PODS, grouped_pod("p", "0")) == (
        'admission webhook "vpod.kb.io" denied the request: '
        f"{field}: Invalid value: \"0\": incorrect annotation value '{TOTAL}=0': group total count should be"
        " greater than zero"
    )
    assert await refusal(api, resources.JOBS, job("j", labels={MAX_EXEC: HUGE})) == (
        'admission webhook "vjob.kb.io" denied the request: '
        f'metadata.labels[{MAX_EXEC}]: Invalid value: "{HUGE}": strconv.Atoi: parsing "{HUGE}": value out of range'
    )
    assert await refusal(api, resources.JOBS, job("j", annotations={MIN_PARALLELISM: HUGE})) == (
        'admission webhook "vjob.kb.io" denied the request: '
        f'metadata.annotations[{MIN_PARALLELISM}]: Invalid value: "{HUGE}": strconv.Atoi: parsing "{HUGE}":'
        " value out of range"
    )


@pytest.fixture
async def bare_api() -> AsyncIterator[k8s_client.ApiClient]:
    """An emulated API server without Kueue's validating webhooks (their mutating part stays): invalid jobs are
    stored, as on a cluster where the webhook was off when they came."""
    async with serve_emulator(bookmark_interval=0.2, kueue_validation=False) as emu:
        client = await kube.make_api_client(server=emu.url)
        try:
            yield client
        finally:
            await client.close()


async def test_the_watcher_rejects_what_no_webhook_refused_and_publishes_nothing_undecodable(
    bare_api: k8s_client.ApiClient, bus: MemoryBus
) -> None:
    """Stored without the webhook, each object is an ObjectRejected naming it and its field with Kueue's words,
    and every message the watcher put on the log decodes. A max-exec-time Go reads but the Workload's int32 field
    cannot hold gives no maximum, as Kueue's reconciler takes none (MaximumExecutionTimeSecondsForObject)."""
    api = bare_api
    async with running(Watcher(bus=bus, api=api).run()):
        await set_up_queues(api)
        await kube.create_object(api, resources.PODS, namespace="default", body=grouped_pod("p", HUGE))
        await kube.create_object(api, resources.JOBS, namespace="default", body=job("j", labels={MAX_EXEC: HUGE}))
        await kube.create_object(
            api, resources.JOBS, namespace="default", body=job("m", annotations={MIN_PARALLELISM: HUGE})
        )
        await kube.create_object(
            api, resources.JOBS, namespace="default", body=job("big", labels={MAX_EXEC: "4294967296"})
        )
        rejected = await wait_for(bus, types.ObjectRejected, count=3, timeout=10)
        [observed] = await wait_for(bus, types.WorkloadObserved, timeout=10)
        await asyncio.sleep(0.5)
        entries = await log_entries(bus)
    assert [message.subject for message, event in entries if event is None] == []
    got = {(r.kind, r.name): (r.field, r.problem) for r in rejected}
    assert got == {
        ("Pod", "p"): (f"metadata.annotations[{TOTAL}]", f'strconv.Atoi: parsing "{HUGE}": value out of range'),
        ("Job", "j"): (f"metadata.labels[{MAX_EXEC}]", f'strconv.Atoi: parsing "{HUGE}": value out of range'),
        ("Job", "m"): (
            f"metadata.annotations[{MIN_PARALLELISM}]",
            f'strconv.Atoi: parsing "{HUGE}": value out of range',
        ),
    }
    assert observed.workload.owner is not None and observed.workload.owner.name == "big"
    assert observed.workload.spec.maximum_execution_time_seconds is None


async def test_the_publisher_turns_an_unreadable_fact_into_its_rejection(bus: MemoryBus) -> None:
    """The boundary for whatever a converter lets through: a fact with an integer beyond 64 bits is published as
    the ObjectRejected of its object (a workload's: its job, the field its Workload's), never as itself."""
    publisher = Publisher(bus=bus, kinds=("Workload",))
    workload = models.Workload(
        metadata=models.ObjectMeta(name="job-j-abcde", namespace="default", uid="u"),
        spec=models.WorkloadSpec(
            queue_name="user-queue", pod_sets=[models.PodSet(name="main", count=int(HUGE), requests={"cpu": 1000})]
        ),
        owner=models.OwnerReference(api_version="batch/v1", kind="Job", name="j", uid="job-uid"),
    )
    await publisher.publish(types.WorkloadObserved(workload=workload), version="1")
    reclaimable = types.WorkloadReclaimablePods(
        workload=types.WorkloadRef(namespace="default", name="job-j-abcde", uid="u"),
        reclaimable_pods=[types.ReclaimablePod(name="main", count=int(HUGE))],
        at_ms=5,
    )
    await publisher.emit(reclaimable, version="2")
    entries = await log_entries(bus)
    assert [event for _, event in entries] == [
        types.ObjectRejected(
            kind="Job",
            namespace="default",
            name="j",
            field="spec.podSets[0].count",
            problem=f"{HUGE} is out of the 64-bit integer range: no event can carry it",
        ),
        types.ObjectRejected(
            kind="Workload",
            namespace="default",
            name="job-j-abcde",
            field="reclaimablePods[0].count",
            problem=f"{HUGE} is out of the 64-bit integer range: no event can carry it",
            at_ms=5,
        ),
    ]
    assert publisher.known.get("Workload", set()) == set()
