"""Server-side apply on the emulated API server, through the real client (``client.apply_object``).

The emulator's apply is create-or-merge with field ownership per manager: what a
manager stops applying is removed, what another manager set stays, an unchanged
apply is not a write. These are the properties the dispatcher relies on when it
applies Workload objects and queue status.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, errors, resources
from kueue_es.sim import emulator

pytestmark = pytest.mark.timeout(20)

MANAGER = "kueue-es"


def cluster_queue(name: str = "cq", **spec: Any) -> dict[str, Any]:
    """A ClusterQueue applied configuration."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, **spec},
    }


def status_of(name: str, status: dict[str, Any]) -> dict[str, Any]:
    """An applied configuration of a ClusterQueue's status."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "status": status,
    }


async def apply(api: k8s_client.ApiClient, body: dict[str, Any], **options: Any) -> dict[str, Any]:
    name = body["metadata"]["name"]
    options.setdefault("field_manager", MANAGER)
    return await client.apply_object(api, resources.CLUSTER_QUEUES, name=name, body=body, **options)


async def test_apply_creates_then_merges_and_an_unchanged_apply_is_not_a_write(
    api: k8s_client.ApiClient, cluster: emulator.ClusterEmulator
) -> None:
    """The first apply creates the object (uid, generation 1); a second one with a new field merges it in
    (generation 2); the same configuration again keeps the resourceVersion and sends no watch event."""
    created = await apply(api, cluster_queue(cohortName="team"))
    assert created["metadata"]["generation"] == 1 and created["metadata"]["uid"]
    # the manifest's fields, and what Kueue's CRD defaults (deploy/crds), as a real API server stores it
    assert created["spec"] == {
        "namespaceSelector": {},
        "cohortName": "team",
        "queueingStrategy": "BestEffortFIFO",
        "stopPolicy": "None",
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {
            "borrowWithinCohort": {"policy": "Never"},
            "reclaimWithinCohort": "Never",
            "withinClusterQueue": "Never",
        },
    }

    merged = await apply(api, cluster_queue(cohortName="team", queueingStrategy="StrictFIFO"))
    assert merged["metadata"]["uid"] == created["metadata"]["uid"]
    assert merged["metadata"]["generation"] == 2
    assert merged["spec"]["queueingStrategy"] == "StrictFIFO"

    version = cluster.resource_version
    again = await apply(api, cluster_queue(cohortName="team", queueingStrategy="StrictFIFO"))
    assert again["metadata"]["resourceVersion"] == merged["metadata"]["resourceVersion"]
    assert cluster.resource_version == version


async def test_fields_a_manager_stops_applying_are_removed_but_not_those_of_others(api: k8s_client.ApiClient) -> None:
    """A field the manager applied before and leaves out now is removed; a field set by a merge patch (another
    writer) stays; labels merge key by key."""
    await apply(api, {**cluster_queue(cohortName="team"), "metadata": {"name": "cq", "labels": {"a": "1"}}})
    await client.patch_object(
        api,
        resources.CLUSTER_QUEUES,
        name="cq",
        patch={"metadata": {"labels": {"b": "2"}}, "spec": {"stopPolicy": "Hold"}},
    )
    updated = await apply(api, {**cluster_queue(), "metadata": {"name": "cq", "labels": {"a": "1"}}})

    assert "cohortName" not in updated["spec"]
    assert updated["spec"]["stopPolicy"] == "Hold"
    assert updated["metadata"]["labels"] == {"a": "1", "b": "2"}


async def test_status_apply_changes_only_status_and_removes_what_is_no_longer_applied(
    api: k8s_client.ApiClient,
) -> None:
    """Applying through the status subresource writes status only (spec untouched, generation unchanged); a
    status field left out of the next apply is removed; a status apply to a missing object is 404."""
    created = await apply(api, cluster_queue())
    usage = [{"name": "f", "resources": [{"name": "cpu", "total": "1"}]}]  # Kueue's status schema requires them
    first = await apply(api, status_of("cq", {"pendingWorkloads": 2, "flavorsUsage": usage}), subresource="status")
    assert first["status"] == {"pendingWorkloads": 2, "flavorsUsage": usage}
    assert first["spec"] == created["spec"] and first["metadata"]["generation"] == 1

    second = await apply(api, status_of("cq", {"pendingWorkloads": 0}), subresource="status")
    assert second["status"] == {"pendingWorkloads": 0}

    with pytest.raises(errors.NotFoundError):
        await apply(api, status_of("missing", {"pendingWorkloads": 0}), subresource="status")


async def test_apply_refuses_bodies_that_do_not_fit(
    api: k8s_client.ApiClient, cluster: emulator.ClusterEmulator
) -> None:
    """No fieldManager, another kind, or another name than the URL's: 400 BadRequest, nothing written."""
    version = cluster.resource_version
    with pytest.raises(errors.ApiError) as no_manager:
        await apply(api, cluster_queue(), field_manager="")
    wrong_kind = {**cluster_queue(), "kind": "LocalQueue"}
    with pytest.raises(errors.ApiError) as kind_error:
        await apply(api, wrong_kind)
    with pytest.raises(errors.ApiError) as name_error:
        await client.apply_object(
            api, resources.CLUSTER_QUEUES, name="other", body=cluster_queue("cq"), field_manager=MANAGER
        )
    assert [e.value.status for e in (no_manager, kind_error, name_error)] == [400, 400, 400]
    assert cluster.resource_version == version


async def test_apply_of_a_namespaced_kind_writes_once_per_change(api: k8s_client.ApiClient) -> None:
    """A LocalQueue applied three times, the last unchanged: two writes (created, then modified), generation 2."""
    ref = resources.LOCAL_QUEUES
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": "default"},
        "spec": {"clusterQueue": "a"},
    }
    _, version = await client.list_objects(api, ref, namespace="default")
    for stop_policy in ("None", "Hold", "Hold"):  # clusterQueue is immutable, as in Kueue
        body["spec"]["stopPolicy"] = stop_policy
        await client.apply_object(api, ref, namespace="default", name="lq", body=body, field_manager=MANAGER)

    stored = await client.get_object(api, ref, namespace="default", name="lq")
    assert stored["spec"]["stopPolicy"] == "Hold" and stored["metadata"]["generation"] == 2
    assert int(stored["metadata"]["resourceVersion"]) == int(version) + 2


async def test_an_apply_body_is_read_as_json_or_as_yaml(cluster: emulator.ClusterEmulator) -> None:
    """An apply body in block YAML (as a hand-written ``curl`` sends it) and one in JSON (as clients send it) are
    the same configuration; a body that is neither is refused with 400 BadRequest, nothing written."""
    url = f"{cluster.url}/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq?fieldManager={MANAGER}"
    headers = {"Content-Type": "application/apply-patch+yaml"}
    as_yaml = (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: cq\n"
        "spec:\n  namespaceSelector: {}\n  cohortName: team\n"
    )
    async with aiohttp.ClientSession() as session:
        async with session.patch(url, data=as_yaml, headers=headers) as response:
            assert response.status == 201, await response.text()
            created = await response.json()
        as_json = json.dumps(cluster_queue(cohortName="team"))
        async with session.patch(url, data=as_json, headers=headers) as response:
            assert response.status == 200, await response.text()
            again = await response.json()
        version = cluster.resource_version
        async with session.patch(url, data="spec: [unclosed", headers=headers) as response:
            refused = (response.status, await response.json())
    assert created["spec"]["cohortName"] == "team"
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]  # the same: no write
    assert refused[0] == 400 and refused[1]["reason"] == "BadRequest" and "not valid YAML" in refused[1]["message"]
    assert cluster.resource_version == version
