"""The emulated API server behaves like a real one for the kubernetes-asyncio client.

Most tests use the generated typed APIs (BatchV1Api, CoreV1Api,
CustomObjectsApi) and kubernetes_asyncio.watch.Watch, i.e. exactly what the
client library sends (``watch=True``, its patch content types), so a gap in
the emulation shows up as a client-side failure.
"""

from __future__ import annotations

import datetime
import json
import re
import uuid
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import watch as k8s_watch

from kueue_es.services.kube import client, resources
from kueue_es.sim import emulator

pytestmark = pytest.mark.timeout(20)


def job(name: str | None = None, *, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A minimal batch/v1 Job manifest; no name means generateName ``job-``."""
    metadata: dict[str, Any] = {"name": name} if name else {"generateName": "job-"}
    metadata["labels"] = labels or {}
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {"template": template, **spec}}


async def collect_watch(func: Any, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """Run a kubernetes_asyncio Watch (which sends watch=True) to its end; returns the raw events."""
    events = []
    async with k8s_watch.Watch() as watcher:
        async for event in watcher.stream(func, *args, **kwargs):
            events.append({"type": event["type"], "object": event["raw_object"]})
    return events


async def test_create_sets_generated_name_uid_resource_version_and_timestamp(api: k8s_client.ApiClient) -> None:
    """generateName yields prefix + 5 chars; uid, resourceVersion, creationTimestamp, generation are set."""
    batch = k8s_client.BatchV1Api(api)
    created = await batch.create_namespaced_job("default", job())
    assert re.fullmatch(r"job-[a-z0-9]{5}", created.metadata.name)
    assert uuid.UUID(created.metadata.uid)
    assert int(created.metadata.resource_version) > 0
    assert created.metadata.generation == 1
    age = datetime.datetime.now(tz=datetime.UTC) - created.metadata.creation_timestamp
    assert datetime.timedelta(0) <= age < datetime.timedelta(seconds=5)
    second = await batch.create_namespaced_job("default", job())
    assert second.metadata.name != created.metadata.name
    assert int(second.metadata.resource_version) > int(created.metadata.resource_version)
    raw = await client.get_object(api, resources.JOBS, namespace="default", name=created.metadata.name)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", raw["metadata"]["creationTimestamp"])


async def test_create_defaults_job_spec_and_rejects_duplicates_and_missing_namespaces(
    api: k8s_client.ApiClient,
) -> None:
    """Jobs get server defaults; a second create is 409 AlreadyExists; an unknown namespace is 404."""
    batch = k8s_client.BatchV1Api(api)
    created = await batch.create_namespaced_job("default", job("j1"))
    assert (created.spec.parallelism, created.spec.completions, created.spec.suspend, created.spec.backoff_limit) == (
        1,
        1,
        False,
        6,
    )
    with pytest.raises(k8s_client.ApiException) as conflict:
        await batch.create_namespaced_job("default", job("j1"))
    assert conflict.value.status == 409 and json.loads(conflict.value.body)["reason"] == "AlreadyExists"
    with pytest.raises(k8s_client.ApiException) as missing:
        await batch.create_namespaced_job("nowhere", job("j1"))
    assert missing.value.status == 404


async def test_namespaces_are_addressable(api: k8s_client.ApiClient) -> None:
    """/api/v1/namespaces lists, gets and creates Namespaces (kmock's own parser cannot)."""
    core = k8s_client.CoreV1Api(api)
    names = {ns.metadata.name for ns in (await core.list_namespace()).items}
    assert {"default", "kube-system"} <= names
    await core.create_namespace({"metadata": {"name": "team-a"}})
    team = await core.read_namespace("team-a")
    assert team.status.phase == "Active"
    assert team.metadata.labels["kubernetes.io/metadata.name"] == "team-a"
    await k8s_client.BatchV1Api(api).create_namespaced_job("team-a", job("in-team-a"))


@pytest.mark.parametrize(
    ("selector", "want_names"),
    [
        ("app", {"a", "b"}),
        ("!app", {"c"}),
        ("app=web", {"a"}),
        ("app==web", {"a"}),
        ("app!=web", {"b", "c"}),
        ("app in (web,db)", {"a", "b"}),
        ("app notin (web)", {"b", "c"}),
        ("app in (web,db),tier=front", {"a"}),
    ],
)
async def test_list_with_label_selectors(api: k8s_client.ApiClient, selector: str, want_names: set[str]) -> None:
    """Each label selector form filters a list as a real server does."""
    batch = k8s_client.BatchV1Api(api)
    await batch.create_namespaced_job("default", job("a", labels={"app": "web", "tier": "front"}))
    await batch.create_namespaced_job("default", job("b", labels={"app": "db"}))
    await batch.create_namespaced_job("default", job("c", labels={"tier": "front"}))
    listed = await batch.list_namespaced_job("default", label_selector=selector)
    assert {item.metadata.name for item in listed.items} == want_names
    items, resource_version = await client.list_objects(api, resources.JOBS, label_selector=selector)
    assert {item["metadata"]["name"] for item in items} == want_names
    assert int(resource_version) == int(listed.metadata.resource_version)


async def test_list_with_field_selector_and_bad_selector(api: k8s_client.ApiClient) -> None:
    """fieldSelector metadata.name= filters; a malformed labelSelector is 400."""
    batch = k8s_client.BatchV1Api(api)
    await batch.create_namespaced_job("default", job("a"))
    await batch.create_namespaced_job("default", job("b"))
    listed = await batch.list_job_for_all_namespaces(field_selector="metadata.name=b")
    assert [item.metadata.name for item in listed.items] == ["b"]
    with pytest.raises(k8s_client.ApiException) as bad:
        await batch.list_namespaced_job("default", label_selector="app in (x")
    assert bad.value.status == 400


async def test_watch_from_resource_version_sends_only_later_events(api: k8s_client.ApiClient) -> None:
    """watch=True with resourceVersion=N streams changes after N only, no initial ADDEDs."""
    batch = k8s_client.BatchV1Api(api)
    await batch.create_namespaced_job("default", job("before"))
    listed = await batch.list_namespaced_job("default")
    await batch.create_namespaced_job("default", job("after"))
    await batch.patch_namespaced_job("before", "default", {"metadata": {"labels": {"x": "1"}}})
    await batch.delete_namespaced_job("after", "default")
    events = await collect_watch(
        batch.list_namespaced_job, "default", resource_version=listed.metadata.resource_version, timeout_seconds=1
    )
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "after"),
        ("MODIFIED", "before"),
        ("DELETED", "after"),
    ]
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions) and versions[0] > int(listed.metadata.resource_version)


async def test_watch_without_resource_version_starts_with_existing_objects(api: k8s_client.ApiClient) -> None:
    """No resourceVersion: ADDED for every existing object, then the stream ends at timeoutSeconds."""
    batch = k8s_client.BatchV1Api(api)
    await batch.create_namespaced_job("default", job("a"))
    await batch.create_namespaced_job("default", job("b"))
    events = await collect_watch(batch.list_namespaced_job, "default", timeout_seconds=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("ADDED", "b")]


async def test_watch_with_expired_resource_version_gets_410() -> None:
    """A resourceVersion older than the kept history gets an ERROR event with a 410 Expired Status."""
    async with emulator.serve_emulator(history_limit=2) as cluster:
        api = await client.make_api_client(server=str(cluster.url))
        try:
            batch = k8s_client.BatchV1Api(api)
            first = await batch.create_namespaced_job("default", job("j0"))
            for index in range(1, 4):
                await batch.create_namespaced_job("default", job(f"j{index}"))
            with pytest.raises(k8s_client.ApiException) as expired:
                await collect_watch(
                    batch.list_namespaced_job,
                    "default",
                    resource_version=first.metadata.resource_version,
                    timeout_seconds=1,
                )
            assert expired.value.status == 410
            assert "Expired" in expired.value.reason
        finally:
            await api.close()


async def test_reset_history_expires_every_older_resource_version(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    """After reset_history() a watch from an earlier resourceVersion is 410; from the current one it works."""
    batch = k8s_client.BatchV1Api(api)
    created = await batch.create_namespaced_job("default", job("j"))
    cluster.reset_history()
    with pytest.raises(k8s_client.ApiException) as expired:
        await collect_watch(
            batch.list_namespaced_job, "default", resource_version=created.metadata.resource_version, timeout_seconds=1
        )
    assert expired.value.status == 410
    events = await collect_watch(
        batch.list_namespaced_job, "default", resource_version=str(cluster.resource_version), timeout_seconds=1
    )
    assert events == []


async def test_bookmarks_carry_the_current_resource_version(api: k8s_client.ApiClient) -> None:
    """allowWatchBookmarks=true yields BOOKMARK events (every 0.2 s here) with the latest resourceVersion."""
    batch = k8s_client.BatchV1Api(api)
    created = await batch.create_namespaced_job("default", job("j"))
    events = await collect_watch(
        batch.list_namespaced_job,
        "default",
        allow_watch_bookmarks=True,
        resource_version=created.metadata.resource_version,
        timeout_seconds=1,
    )
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert len(bookmarks) >= 3
    assert bookmarks[-1]["object"]["metadata"]["resourceVersion"] == created.metadata.resource_version
    no_bookmarks = await collect_watch(
        batch.list_namespaced_job, "default", resource_version=created.metadata.resource_version, timeout_seconds=1
    )
    assert no_bookmarks == []


async def test_label_filtered_watch_sees_objects_enter_and_leave(api: k8s_client.ApiClient) -> None:
    """An object whose labels stop matching is DELETED for a filtered watch, and ADDED when they match again."""
    batch = k8s_client.BatchV1Api(api)
    created = await batch.create_namespaced_job("default", job("j", labels={"team": "a"}))
    await batch.patch_namespaced_job("j", "default", {"metadata": {"labels": {"team": "b"}}})
    await batch.patch_namespaced_job("j", "default", {"metadata": {"labels": {"team": "a"}}})
    events = await collect_watch(
        batch.list_namespaced_job,
        "default",
        label_selector="team=a",
        resource_version=created.metadata.resource_version,
        timeout_seconds=1,
    )
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]


async def test_status_subresource_isolates_status_from_spec(api: k8s_client.ApiClient) -> None:
    """Writes to .../status change only .status; writes to the object never change .status."""
    batch = k8s_client.BatchV1Api(api)
    await batch.create_namespaced_job("default", {**job("j"), "status": {"active": 7}})
    stored = await client.get_object(api, resources.JOBS, namespace="default", name="j")
    assert "status" not in stored
    after_status = await client.patch_object(
        api,
        resources.JOBS,
        namespace="default",
        name="j",
        subresource="status",
        patch={"status": {"active": 1}, "spec": {"suspend": True}},
    )
    assert after_status["status"] == {"active": 1}
    assert after_status["spec"]["suspend"] is False
    assert after_status["metadata"]["generation"] == 1
    after_main = await client.patch_object(
        api, resources.JOBS, namespace="default", name="j", patch={"status": {"active": 99}, "spec": {"suspend": True}}
    )
    assert after_main["status"] == {"active": 1}
    assert after_main["spec"]["suspend"] is True
    assert after_main["metadata"]["generation"] == 2
    replaced = await batch.replace_namespaced_job_status("j", "default", {**after_main, "status": {"succeeded": 1}})
    assert replaced.status.succeeded == 1 and replaced.status.active is None


async def test_merge_patch_null_deletes_and_noop_patch_keeps_resource_version(api: k8s_client.ApiClient) -> None:
    """A merge patch with null removes the key; a patch that changes nothing bumps nothing."""
    created = await client.create_object(
        api, resources.JOBS, namespace="default", body=job("j", labels={"a": "1", "b": "2"})
    )
    patched = await client.patch_object(
        api, resources.JOBS, namespace="default", name="j", patch={"metadata": {"labels": {"a": None}}}
    )
    assert patched["metadata"]["labels"] == {"b": "2"}
    again = await client.patch_object(
        api, resources.JOBS, namespace="default", name="j", patch={"metadata": {"labels": {"b": "2"}}}
    )
    assert again["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


async def test_json_patch_and_put_with_stale_resource_version(api: k8s_client.ApiClient) -> None:
    """JSON patch applies; PUT with an outdated metadata.resourceVersion is 409 Conflict."""
    created = await client.create_object(api, resources.JOBS, namespace="default", body=job("j"))
    patched = await client.patch_object(
        api,
        resources.JOBS,
        namespace="default",
        name="j",
        content_type=client.JSON_PATCH,
        patch=[{"op": "replace", "path": "/spec/suspend", "value": True}],
    )
    assert patched["spec"]["suspend"] is True
    with pytest.raises(client.errors.ConflictError):
        await client.replace_object(api, resources.JOBS, namespace="default", name="j", body=created)
    fresh = await client.replace_object(
        api,
        resources.JOBS,
        namespace="default",
        name="j",
        body={**patched, "metadata": {**patched["metadata"], "labels": {"put": "yes"}}},
    )
    assert fresh["metadata"]["labels"] == {"put": "yes"} and fresh["metadata"]["uid"] == created["metadata"]["uid"]


async def test_delete_honours_finalizers(api: k8s_client.ApiClient) -> None:
    """With finalizers, delete only marks deletionTimestamp, bumping the generation once as kube-apiserver's
    markAsDeleting does (a second delete changes nothing); removing them deletes the object."""
    created = await client.create_object(
        api,
        resources.JOBS,
        namespace="default",
        body={**job("j"), "metadata": {"name": "j", "finalizers": ["kueue-es.dev/test"]}},
    )
    deleting = await client.delete_object(api, resources.JOBS, namespace="default", name="j")
    assert deleting["metadata"]["deletionTimestamp"]
    assert deleting["metadata"]["generation"] == created["metadata"]["generation"] + 1
    again = await client.delete_object(api, resources.JOBS, namespace="default", name="j")
    assert again["metadata"]["generation"] == deleting["metadata"]["generation"]
    assert (await client.get_object(api, resources.JOBS, namespace="default", name="j"))["metadata"][
        "deletionTimestamp"
    ]
    await client.patch_object(
        api, resources.JOBS, namespace="default", name="j", patch={"metadata": {"finalizers": None}}
    )
    with pytest.raises(client.errors.NotFoundError):
        await client.get_object(api, resources.JOBS, namespace="default", name="j")


HOLD = "example.com/hold"


def held(ref: resources.ResourceRef, name: str, *finalizers: str) -> dict[str, Any]:
    """An object of ``ref``'s kind named ``name`` held by ``finalizers`` (a Job, a Secret or a LocalQueue)."""
    meta = {"name": name, "finalizers": list(finalizers)}
    if ref == resources.JOBS:
        return {**job(name), "metadata": meta}
    if ref == resources.LOCAL_QUEUES:
        return {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta, "spec": {"clusterQueue": "cq"}}
    return {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta, "data": {}}


async def watched_until(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient, ref: resources.ResourceRef, since: str
) -> list[tuple[str, dict[str, Any]]]:
    """The watch events of ``ref``'s kind in ``default`` after ``since``, up to a ``sentinel`` object created
    now: its ADDED ends the stream, so no timeout decides what was seen."""
    await client.create_object(api, ref, namespace="default", body=held(ref, "sentinel"))
    url = f"{cluster.url}{ref.path(namespace='default')}"
    seen: list[tuple[str, dict[str, Any]]] = []
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, params={"watch": "true", "resourceVersion": since}) as response,
    ):
        assert response.status == 200
        async for line in response.content:
            event = json.loads(line)
            if event["object"]["metadata"]["name"] == "sentinel":
                return seen
            seen.append((event["type"], event["object"]))
    raise AssertionError(f"the watch ended before the sentinel: {seen}")


async def _merge_patch(api: k8s_client.ApiClient, ref: resources.ResourceRef, obj: dict[str, Any]) -> dict[str, Any]:
    return await client.patch_object(
        api, ref, namespace="default", name=obj["metadata"]["name"], patch={"metadata": {"finalizers": None}}
    )


async def _json_patch(api: k8s_client.ApiClient, ref: resources.ResourceRef, obj: dict[str, Any]) -> dict[str, Any]:
    return await client.patch_object(
        api,
        ref,
        namespace="default",
        name=obj["metadata"]["name"],
        content_type=client.JSON_PATCH,
        patch=[{"op": "remove", "path": "/metadata/finalizers"}],
    )


async def _replace(api: k8s_client.ApiClient, ref: resources.ResourceRef, obj: dict[str, Any]) -> dict[str, Any]:
    body = {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "finalizers"}}
    return await client.replace_object(api, ref, namespace="default", name=obj["metadata"]["name"], body=body)


async def _apply(api: k8s_client.ApiClient, ref: resources.ResourceRef, obj: dict[str, Any]) -> dict[str, Any]:
    # the manager that applied the finalizer stops applying it (server-side apply removes what it owned)
    body = held(ref, obj["metadata"]["name"])
    del body["metadata"]["finalizers"]
    return await client.apply_object(
        api, ref, namespace="default", name=obj["metadata"]["name"], body=body, field_manager="holder"
    )


@pytest.mark.parametrize(
    ("ref", "write"),
    [
        (resources.JOBS, _merge_patch),
        (resources.JOBS, _json_patch),
        (resources.JOBS, _replace),
        (resources.SECRETS, _replace),
        (resources.SECRETS, _merge_patch),
        (resources.LOCAL_QUEUES, _merge_patch),
        (resources.LOCAL_QUEUES, _apply),
    ],
    ids=["job-merge", "job-json", "job-put", "secret-put", "secret-merge", "localqueue-merge", "localqueue-apply"],
)
async def test_removing_the_last_finalizer_of_a_deleting_object_is_only_deleted(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient, ref: resources.ResourceRef, write: Any
) -> None:
    """As a real API server (k8s.io/apiserver registry/store.go Update, ShouldDeleteDuringUpdate): the write
    taking the last finalizer off an object being deleted is not stored; the writer gets the object it asked
    for, and a watch sees one DELETED carrying the object as last stored (finalizer and all), no MODIFIED."""
    if write is _apply:
        body = held(ref, "x", HOLD)
        await client.apply_object(api, ref, namespace="default", name="x", body=body, field_manager="holder")
    else:
        await client.create_object(api, ref, namespace="default", body=held(ref, "x", HOLD))
    marked = await client.delete_object(api, ref, namespace="default", name="x")
    assert marked["metadata"]["deletionTimestamp"] and marked["metadata"]["finalizers"] == [HOLD]
    answer = await write(api, ref, marked)
    assert "finalizers" not in answer["metadata"] and answer["metadata"]["deletionTimestamp"]
    assert answer["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]
    with pytest.raises(client.errors.NotFoundError):
        await client.get_object(api, ref, namespace="default", name="x")
    [(event_type, last)] = await watched_until(cluster, api, ref, marked["metadata"]["resourceVersion"])
    assert event_type == "DELETED"
    assert last["metadata"]["finalizers"] == [HOLD]
    assert last["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
    assert int(last["metadata"]["resourceVersion"]) > int(marked["metadata"]["resourceVersion"])


async def test_finalizers_left_or_a_status_write_keep_a_deleting_object(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    """Taking off one of two finalizers is a MODIFIED; a status write cannot take finalizers off (the status
    strategies keep the metadata, ResetObjectMetaForStatus); the last one going is the DELETED alone."""
    await client.create_object(api, resources.JOBS, namespace="default", body=held(resources.JOBS, "x", HOLD, "b/c"))
    marked = await client.delete_object(api, resources.JOBS, namespace="default", name="x")
    one_left = await client.patch_object(
        api, resources.JOBS, namespace="default", name="x", patch={"metadata": {"finalizers": ["b/c"]}}
    )
    status = await client.patch_object(
        api,
        resources.JOBS,
        namespace="default",
        name="x",
        subresource="status",
        patch={"metadata": {"finalizers": None}, "status": {"active": 1}},
    )
    assert status["metadata"]["finalizers"] == ["b/c"] and status["status"] == {"active": 1}
    await _merge_patch(api, resources.JOBS, status)
    events = await watched_until(cluster, api, resources.JOBS, marked["metadata"]["resourceVersion"])
    assert [(kind, obj["metadata"].get("finalizers")) for kind, obj in events] == [
        ("MODIFIED", ["b/c"]),
        ("MODIFIED", ["b/c"]),
        ("DELETED", ["b/c"]),
    ]
    assert events[0][1]["metadata"]["resourceVersion"] == one_left["metadata"]["resourceVersion"]


async def test_custom_resources_and_discovery(api: k8s_client.ApiClient) -> None:
    """Kueue kinds are served with the right scope; discovery lists them; unknown kinds are 404."""
    custom = k8s_client.CustomObjectsApi(api)
    await custom.create_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {}},
    )
    await custom.create_namespaced_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "default",
        "localqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "lq"},
            "spec": {"clusterQueue": "cq"},
        },
    )
    listed = await custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "localqueues")
    assert [item["metadata"]["namespace"] for item in listed["items"]] == ["default"]
    discovery = await api.call_api(
        "/apis/kueue.x-k8s.io/v1beta2", "GET", response_types_map={200: "object"}, _return_http_data_only=True
    )
    scopes = {entry["name"]: (entry["kind"], entry["namespaced"]) for entry in discovery["resources"]}
    assert scopes["workloads"] == ("Workload", True)
    assert scopes["clusterqueues"] == ("ClusterQueue", False)
    assert "workloads/status" in scopes and "resourceflavors/status" not in scopes
    with pytest.raises(k8s_client.ApiException) as unknown:
        await custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "nonsense")
    assert unknown.value.status == 404
