"""events.k8s.io/v1 Events over HTTP: views of the core/v1 Events the emulator stores (watch and write)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, resources
from kueue_es.sim import emulator

pytestmark = pytest.mark.timeout(60)


async def test_a_watch_of_events_k8s_io_sees_core_events_in_its_own_version(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    """An Event written through core/v1 is seen by an events.k8s.io/v1 watch as events.k8s.io/v1 (note,
    regarding), and one written through events.k8s.io/v1 (as Kueue's recorder writes them) is stored as core's."""
    since = str(cluster.resource_version)
    core_event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "a.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "a", "namespace": "default"},
        "reason": "Started",
        "message": "Started container c",
        "type": "Normal",
    }
    await client.create_object(api, resources.EVENTS, namespace="default", body=core_event)
    created = await client.create_object(
        api,
        emulator.EVENTS_V1,
        namespace="default",
        body={
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "b.1", "namespace": "default"},
            "eventTime": "2026-12-07T09:40:00.000000Z",
            "reportingController": "kueue-admission",
            "reportingInstance": "kueue-admission-0",
            "action": "Admitted",
            "reason": "Admitted",
            "type": "Normal",
            "note": "Admitted by ClusterQueue cq",
            "regarding": {"kind": "Pod", "name": "b", "namespace": "default"},
        },
    )
    assert created["apiVersion"] == "events.k8s.io/v1" and created["note"] == "Admitted by ClusterQueue cq"
    stored = await client.get_object(api, resources.EVENTS, namespace="default", name="b.1")
    assert stored["message"] == "Admitted by ClusterQueue cq" and stored["involvedObject"]["name"] == "b"
    assert stored["reportingComponent"] == "kueue-admission" and "note" not in stored

    seen: list[tuple[str, dict[str, Any]]] = []
    url = f"{cluster.url}{emulator.EVENTS_V1.path(namespace='default')}"
    params = {"watch": "true", "resourceVersion": since, "timeoutSeconds": "1"}
    async with aiohttp.ClientSession() as session, session.get(url, params=params) as response:
        assert response.status == 200
        assert "Warning" not in response.headers  # not deprecated, unlike Kueue's v1beta1
        async for line in response.content:
            event = json.loads(line)
            seen.append((event["type"], event["object"]))
    assert [(kind, obj["metadata"]["name"]) for kind, obj in seen] == [("ADDED", "a.1"), ("ADDED", "b.1")]
    first = seen[0][1]
    assert first["apiVersion"] == "events.k8s.io/v1" and first["note"] == "Started container c"
    assert first["regarding"] == core_event["involvedObject"] and "message" not in first
