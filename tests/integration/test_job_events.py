"""The job framework's Kubernetes Events on the jobs themselves, as ``kubectl describe pod`` and
``kubectl get events`` show them on Kueue (pkg/controller/jobframework/reconciler.go,
pkg/controller/jobs/pod/pod_controller.go).

Watcher, admitter and dispatcher on one MemoryBus and one emulated API server: the plain Pod integration's
Events pod by pod: ``CreatedWorkload`` on the pod (a group's first pod), ``Started`` on each pod ungated
(a late member too), ``Stopped`` on each pod an eviction or the Workload's deletion deletes. Each from the
recorder of its integration (``<framework>-kueue-controller``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from tests.integration.harness import (
    commit,
    dispatcher_with_consumer,
    eviction,
    running,
    set_up_queues,
    wait_for,
)
from tests.integration.test_pod_groups import member, pods_until, running_group, services, ungated

pytestmark = pytest.mark.timeout(60)

Event = tuple[str, str, str, str]  # (kind, name, reason, message) of the object an Event is about


async def job_events(api: Any) -> list[dict[str, Any]]:
    """The Events in ``default`` about anything but a Workload (the jobs' and pods' own)."""
    listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
    return [e for e in listed if e["involvedObject"]["kind"] != "Workload"]


def summary(events: list[dict[str, Any]]) -> list[Event]:
    """Each Event as (kind, name, reason, message), sorted."""
    return sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"], e["message"]) for e in events)


async def events_until(api: Any, check: Callable[[list[Event]], bool]) -> list[dict[str, Any]]:
    """Poll the jobs' Events until ``check`` holds of their :func:`summary`."""
    async with asyncio.timeout(15):
        while True:
            events = await job_events(api)
            if check(summary(events)):
                return events
            await asyncio.sleep(0.05)


async def test_a_pod_groups_events_pod_by_pod(api, bus: MemoryBus) -> None:
    """Kueue's pod integration: CreatedWorkload on the group's first pod, Started on each pod it ungates (and on a
    member that joins later, a failed one's replacement), Stopped with the eviction's message on each pod the
    eviction deletes; all from pod-kueue-controller, about each pod (its UID). Before, the pods got none."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    started = "Admitted by clusterQueue cluster-queue"
    async with running(*services(bus, api, dispatcher, consumer)):
        admitted = await running_group(api, bus, "grp", ("g-a", "g-b"))
        uids = {n: p["metadata"]["uid"] for n, p in (await pods_until(api, lambda pods: True)).items()}
        await kube.patch_object(
            api,
            resources.PODS,
            namespace="default",
            name="g-a",
            patch={"status": {"phase": "Failed"}},
            subresource="status",
        )
        await kube.apply_manifest(api, member("g-c", "grp", total=2))
        pods = await pods_until(api, lambda pods: "g-c" in ungated(pods))
        uids["g-c"] = pods["g-c"]["metadata"]["uid"]
        before = await events_until(api, lambda s: ("Pod", "g-c", "Started", started) in s)
        evicted = eviction(admitted.workload)
        await commit(bus, evicted)
        await pods_until(api, lambda pods: set(pods) == {"g-a"})  # the failed one is not running: it stays
        after = await events_until(api, lambda s: sum(e[2] == "Stopped" for e in s) == 2)

    assert summary(before) == [
        ("Pod", "g-a", "CreatedWorkload", "Created Workload: default/grp"),
        ("Pod", "g-a", "Started", started),
        ("Pod", "g-b", "Started", started),
        ("Pod", "g-c", "Started", started),
    ]
    assert summary(after) == sorted(
        [*summary(before), ("Pod", "g-b", "Stopped", evicted.message), ("Pod", "g-c", "Stopped", evicted.message)]
    )
    for event in after:
        involved = event["involvedObject"]
        assert involved["apiVersion"] == "v1" and involved["uid"] == uids[involved["name"]]
        assert event["source"] == {"component": "pod-kueue-controller"} and event["count"] == 1


async def test_a_single_pods_events(api, bus: MemoryBus) -> None:
    """A single Pod: CreatedWorkload, and Started once ungated."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await set_up_queues(api, cpu=9)
        await kube.apply_manifest(api, member("solo", "", total=1))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted, timeout=10)
        await pods_until(api, lambda pods: "solo" in ungated(pods))
        events = await events_until(api, lambda s: any(e[2] == "Started" for e in s))
    ref = admitted.workload

    assert summary(events) == [
        ("Pod", "solo", "CreatedWorkload", f"Created Workload: default/{ref.name}"),
        ("Pod", "solo", "Started", "Admitted by clusterQueue cluster-queue"),
    ]


async def test_deleting_a_running_groups_workload_stops_each_pod_with_an_event(api, bus: MemoryBus) -> None:
    """``kubectl delete workload GROUP``: Kueue's reconciler stops the job of a Workload being deleted, and Pod.Stop
    records Stopped "Workload is deleted" on each pod it deletes."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(*services(bus, api, dispatcher, consumer)):
        await running_group(api, bus, "del", ("d-a", "d-b"))
        await kube.delete_object(api, resources.WORKLOADS, namespace="default", name="del")
        await pods_until(api, lambda pods: not pods)
        events = await events_until(api, lambda s: sum(e[2] == "Stopped" for e in s) == 2)

    assert [e for e in summary(events) if e[2] == "Stopped"] == [
        ("Pod", "d-a", "Stopped", "Workload is deleted"),
        ("Pod", "d-b", "Stopped", "Workload is deleted"),
    ]
