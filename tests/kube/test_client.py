"""The dict-based client: apply, kubeconfig, kinds, and the list+watch loop that never loses a change."""

from __future__ import annotations

import asyncio
import json
import pathlib
from collections.abc import AsyncGenerator
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, errors, resources
from kueue_es.sim import emulator
from tests.kube import examples

pytestmark = pytest.mark.timeout(20)

EXAMPLES = examples.EXAMPLES  # ../shared beside the repo (or beside the main checkout of a worktree)
FAST_WATCH = {"timeout_seconds": 30, "backoff_seconds": 0.05, "max_backoff_seconds": 0.2}


def job(name: str, **labels: str) -> dict[str, Any]:
    """A minimal Job manifest in the default namespace."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
    }


async def next_item(
    stream: AsyncGenerator[client.WatchEvent | client.Resynced, None],
) -> client.WatchEvent | client.Resynced:
    """The next item of a watch_objects stream, failing the test if none comes within 5 s."""
    return await asyncio.wait_for(anext(stream), timeout=5)


def names(objects: tuple[dict[str, Any], ...]) -> set[str]:
    """The metadata.name of each object."""
    return {obj["metadata"]["name"] for obj in objects}


def test_ref_for_names_unknown_kinds() -> None:
    """Known kinds resolve to their plural and scope; unknown kinds raise UnknownKindError naming them."""
    assert client.ref_for("kueue.x-k8s.io/v1beta2", "LocalQueue") == resources.LOCAL_QUEUES
    assert (
        resources.LOCAL_QUEUES.path(namespace="ns", name="q", subresource="status")
        == "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/localqueues/q/status"
    )
    assert resources.NODES.path(namespace="ignored", name="n1") == "/api/v1/nodes/n1"
    pytorchjobs = client.ref_for("kubeflow.org/v1", "PyTorchJob")  # an integration's kind, served by its CRD
    assert (pytorchjobs.plural, pytorchjobs.namespaced) == ("pytorchjobs", True)
    with pytest.raises(errors.UnknownKindError, match="Widget"):
        client.ref_for("example.com/v1", "Widget")
    with pytest.raises(errors.UnknownKindError, match="PyTorchJob"):
        client.ref_for("kubeflow.org/v2", "PyTorchJob")  # not at the integration's apiVersion


async def test_kubeconfig_written_for_the_emulator_loads_in_the_client(
    cluster: emulator.ClusterEmulator, tmp_path: pathlib.Path
) -> None:
    """write_kubeconfig produces a file that kubernetes-asyncio's loader accepts and that reaches the server."""
    path = tmp_path / "kubeconfig"
    client.write_kubeconfig(path, server=str(cluster.url))
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "kueue-es-demo"
    assert config["clusters"][0]["cluster"]["server"] == str(cluster.url)
    api = await client.make_api_client(kubeconfig=path)
    try:
        namespaces, _ = await client.list_objects(api, resources.NAMESPACES)
        assert "default" in names(tuple(namespaces))
    finally:
        await api.close()
    with pytest.raises(ValueError):
        await client.make_api_client(server="http://x", kubeconfig=path)


async def test_a_missing_kubeconfig_is_named(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kubeconfig that does not exist is refused naming its path, whether given or from $KUBECONFIG
    (the library alone says only that a current-context is missing)."""
    missing = tmp_path / "nowhere" / "kubeconfig"
    with pytest.raises(FileNotFoundError, match=f"kubeconfig file {missing} does not exist"):
        await client.make_api_client(kubeconfig=missing)
    monkeypatch.setenv("KUBECONFIG", str(missing))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        await client.make_api_client()


async def test_apply_manifest_creates_then_merges(api: k8s_client.ApiClient) -> None:
    """The first apply creates (namespace defaults to default), the second merge-patches the same object."""
    created = await client.apply_manifest(api, job("j", team="a"))
    assert created["metadata"]["namespace"] == "default"
    second = job("j", team="b")
    second["spec"]["suspend"] = True
    updated = await client.apply_manifest(api, second)
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert updated["metadata"]["labels"] == {"team": "b"}
    assert updated["spec"]["suspend"] is True
    assert updated["spec"]["template"] == created["spec"]["template"]


async def test_apply_manifest_keeps_the_last_applied_manifest_as_kubectl_does(api: k8s_client.ApiClient) -> None:
    """The manifest is recorded in kubectl's last-applied annotation; a field dropped from the manifest
    is removed from the object, one set by someone else (not in any applied manifest) is kept."""
    first = job("k", team="a", tier="gold")
    first["spec"]["backoffLimit"] = 2
    created = await client.apply_manifest(api, first)
    recorded = json.loads(created["metadata"]["annotations"][client.LAST_APPLIED])
    assert recorded["metadata"]["labels"] == {"team": "a", "tier": "gold"}
    assert client.LAST_APPLIED not in recorded["metadata"].get("annotations", {})
    await client.patch_object(
        api, resources.JOBS, namespace="default", name="k", patch={"metadata": {"labels": {"owner": "ops"}}}
    )
    updated = await client.apply_manifest(api, job("k", team="a"))
    assert updated["metadata"]["labels"] == {"team": "a", "owner": "ops"}
    assert updated["spec"]["backoffLimit"] == 6  # removed, so defaulted again as the API server does
    assert json.loads(updated["metadata"]["annotations"][client.LAST_APPLIED])["metadata"]["labels"] == {"team": "a"}


async def test_apply_manifest_with_generate_name_always_creates(api: k8s_client.ApiClient) -> None:
    """A generateName manifest without a name creates a new object on every apply."""
    manifest = {**job("unused"), "metadata": {"generateName": "sample-job-"}}
    first = await client.apply_manifest(api, manifest)
    second = await client.apply_manifest(api, manifest)
    assert first["metadata"]["name"] != second["metadata"]["name"]
    assert first["metadata"]["name"].startswith("sample-job-")
    with pytest.raises(errors.InvalidManifestError):
        await client.apply_manifest(api, {**job("x"), "metadata": {}})


async def test_apply_the_kueue_examples(api: k8s_client.ApiClient) -> None:
    """Every kueue.x-k8s.io and batch/v1 document of the single-ClusterQueue setup and the sample Job applies."""
    documents = client.read_manifests(EXAMPLES / "admin/single-clusterqueue-setup.yaml")
    documents += client.read_manifests(EXAMPLES / "jobs/sample-job.yaml")
    wanted = [doc for doc in documents if doc["apiVersion"].startswith(("kueue.x-k8s.io/", "batch/v1"))]
    assert {doc["kind"] for doc in wanted} == {"ResourceFlavor", "ClusterQueue", "LocalQueue", "Job"}
    applied = [await client.apply_manifest(api, doc) for doc in wanted]
    for doc in applied:
        assert doc["metadata"]["uid"] and doc["metadata"]["resourceVersion"]
    queue = await client.get_object(api, resources.CLUSTER_QUEUES, name="cluster-queue")
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] == "36Gi"
    jobs, _ = await client.list_objects(api, resources.JOBS, label_selector="kueue.x-k8s.io/queue-name=user-queue")
    assert len(jobs) == 1 and jobs[0]["metadata"]["name"].startswith("sample-job-")
    assert jobs[0]["spec"]["suspend"] is True  # the emulator's default hook plays Kueue's Job webhook
    again = [await client.apply_manifest(api, doc) for doc in wanted[:3]]
    assert [doc["metadata"]["resourceVersion"] for doc in again] == [
        doc["metadata"]["resourceVersion"] for doc in applied[:3]
    ]


async def test_watch_objects_lists_then_streams_changes(api: k8s_client.ApiClient) -> None:
    """The loop yields a Resynced with existing objects, then ADDED/MODIFIED/DELETED in order."""
    await client.create_object(api, resources.JOBS, namespace="default", body=job("old"))
    stream = client.watch_objects(api, resources.JOBS, **FAST_WATCH)
    try:
        first = await next_item(stream)
        assert isinstance(first, client.Resynced) and names(first.objects) == {"old"}
        await client.create_object(api, resources.JOBS, namespace="default", body=job("new"))
        await client.patch_object(
            api, resources.JOBS, namespace="default", name="old", patch={"metadata": {"labels": {"x": "1"}}}
        )
        await client.delete_object(api, resources.JOBS, namespace="default", name="new")
        seen = [await next_item(stream) for _ in range(3)]
        assert [
            (item.type, item.object["metadata"]["name"]) for item in seen if isinstance(item, client.WatchEvent)
        ] == [("ADDED", "new"), ("MODIFIED", "old"), ("DELETED", "new")]
    finally:
        await stream.aclose()


async def test_watch_objects_resumes_after_a_dropped_stream_without_relisting(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    """When the server ends the stream, the loop re-watches from the last resourceVersion: no Resynced, no loss."""
    stream = client.watch_objects(api, resources.JOBS, **FAST_WATCH)
    try:
        assert isinstance(await next_item(stream), client.Resynced)
        pending = asyncio.ensure_future(next_item(stream))  # the generator opens its watch when asked for more
        await asyncio.sleep(0.1)
        cluster.drop_watches()
        await client.create_object(api, resources.JOBS, namespace="default", body=job("while-down"))
        item = await pending
        assert isinstance(item, client.WatchEvent) and (item.type, item.object["metadata"]["name"]) == (
            "ADDED",
            "while-down",
        )
    finally:
        await stream.aclose()


async def test_watch_objects_relists_after_410_and_shows_deletions(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    """A deletion while the watch is down and the history is gone surfaces as a Resynced without the object."""
    await client.create_object(api, resources.JOBS, namespace="default", body=job("stays"))
    await client.create_object(api, resources.JOBS, namespace="default", body=job("goes"))
    stream = client.watch_objects(api, resources.JOBS, **FAST_WATCH)
    try:
        first = await next_item(stream)
        assert isinstance(first, client.Resynced) and names(first.objects) == {"stays", "goes"}
        cluster.reset_history()
        await client.delete_object(api, resources.JOBS, namespace="default", name="goes")
        relisted = await next_item(stream)
        assert isinstance(relisted, client.Resynced)
        assert names(relisted.objects) == {"stays"}
        assert int(relisted.resource_version) > int(first.resource_version)
        await client.create_object(api, resources.JOBS, namespace="default", body=job("later"))
        item = await next_item(stream)
        assert isinstance(item, client.WatchEvent) and item.object["metadata"]["name"] == "later"
    finally:
        await stream.aclose()


async def test_watch_objects_resumes_from_bookmarks(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    """Bookmarks move the loop's resourceVersion on: the next watch request resumes from the bookmark.

    Any kmock reaction (here an unrelated /healthz) makes every request go
    through kmock's dispatcher, which records them -- and runs the emulation
    as a fallback, the fault-injection path.
    """
    cluster["get /healthz"] << b"ok"
    stream = client.watch_objects(api, resources.JOBS, **FAST_WATCH)
    try:
        assert isinstance(await next_item(stream), client.Resynced)
        pending = asyncio.ensure_future(next_item(stream))  # the generator opens its watch when asked for more
        for index in range(3):
            await client.create_object(api, resources.NAMESPACES, body={"metadata": {"name": f"ns-{index}"}})
        after_namespaces = cluster.resource_version
        await asyncio.sleep(0.5)  # more than two bookmark intervals
        cluster.drop_watches()
        await client.create_object(api, resources.JOBS, namespace="ns-2", body=job("after-bookmark"))
        item = await pending
        assert isinstance(item, client.WatchEvent) and item.object["metadata"]["namespace"] == "ns-2"
    finally:
        await stream.aclose()
    watches = [request.params for request in cluster if request.params.get("watch") == "true"]
    assert len(watches) == 2 and watches[0]["allowWatchBookmarks"] == "true"
    assert int(watches[1]["resourceVersion"]) >= after_namespaces > int(watches[0]["resourceVersion"])


async def test_watch_objects_reconnects_with_backoff_after_the_server_restarts() -> None:
    """While the API server is down the loop retries; when a (new) server is up it relists there."""
    async with emulator.serve_emulator(bookmark_interval=0.2) as first_server:
        port = int(first_server.url.rsplit(":", 1)[1])
        api = await client.make_api_client(server=str(first_server.url))
        await client.create_object(api, resources.JOBS, namespace="default", body=job("on-first"))
        stream = client.watch_objects(api, resources.JOBS, **FAST_WATCH)
        first = await next_item(stream)
        assert isinstance(first, client.Resynced) and names(first.objects) == {"on-first"}
    try:
        pending = asyncio.ensure_future(next_item(stream))
        await asyncio.sleep(0.3)  # a few failed reconnects
        assert not pending.done()
        async with emulator.serve_emulator(port=port) as second_server:
            await client.create_object(api, resources.JOBS, namespace="default", body=job("on-second"))
            second_server.reset_history()  # another cluster: the loop's resourceVersion means nothing there
            relisted = await pending
            assert isinstance(relisted, client.Resynced) and names(relisted.objects) == {"on-second"}
            await stream.aclose()
    finally:
        await api.close()


async def test_delete_object_sends_delete_options(api: k8s_client.ApiClient) -> None:
    """``options`` go as the DeleteOptions body, as client-go sends them: a UID precondition keeps a namesake (409),
    and a ``propagationPolicy`` (Background, as Kueue deletes a deactivated job) is accepted."""
    created = await client.create_object(api, resources.JOBS, namespace="default", body=job("twice"))
    with pytest.raises(errors.ConflictError):
        await client.delete_object(
            api, resources.JOBS, namespace="default", name="twice", options={"preconditions": {"uid": "another"}}
        )
    await client.get_object(api, resources.JOBS, namespace="default", name="twice")  # still there
    uid = created["metadata"]["uid"]
    options = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
    await client.delete_object(api, resources.JOBS, namespace="default", name="twice", options=options)
    with pytest.raises(errors.NotFoundError):
        await client.get_object(api, resources.JOBS, namespace="default", name="twice")
