"""Cascading deletion in the emulated API server: a delete's propagation policy (``kubectl delete --cascade``).

Orphan leaves the dependents (the objects whose ownerReferences name the deleted one) with that reference
taken off; Foreground marks the owner (``deletionTimestamp``, ``foregroundDeletion``), deletes the dependents
first and the owner once no dependent with ``blockOwnerDeletion`` is left; Background (the default) deletes
the owner alone, as before. The store's part is tested without HTTP; DeleteOptions through HTTP; the
simulated controllers make nothing for an owner being deleted. tests/kube/test_kubectl.py runs kubectl's
``--cascade`` flags.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import kmock
import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es import validation
from kueue_es.services.kube import client, errors, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import emulator, garbage, store
from kueue_es.sim.controllers import SimulatedControllers

pytestmark = pytest.mark.timeout(30)

FIXED = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
HOLD = "example.com/hold"


def make_store() -> store.ObjectStore:
    return store.ObjectStore(objects=kmock.ObjectsArray(), clock=lambda: FIXED)


def owner_ref(owner: dict[str, Any], *, block: bool = True, controller: bool = True) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": block,
    }


def pod(
    objects: store.ObjectStore, name: str, *owners: dict[str, Any], finalizers: tuple[str, ...] = (), **ref: bool
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "ownerReferences": [owner_ref(o, **ref) for o in owners]}
    if finalizers:
        meta["finalizers"] = list(finalizers)
    body = {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return objects.create(resources.PODS, namespace="default", body=body)


def job(objects: store.ObjectStore, name: str, *owners: dict[str, Any], **ref: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if owners:
        meta["ownerReferences"] = [owner_ref(o, **ref) for o in owners]
    body = {"metadata": meta, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    return objects.create(resources.JOBS, namespace="default", body=body)


def stored(objects: store.ObjectStore, ref: resources.ResourceRef, name: str) -> dict[str, Any] | None:
    found = objects.select(ref, namespace="default", name=name)
    return found[0] if found else None


def release(objects: store.ObjectStore, ref: resources.ResourceRef, name: str) -> None:
    """What the controller owning the ``hold`` finalizer does once it is done: take it off."""

    def without_hold(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["finalizers"] = [f for f in obj["metadata"]["finalizers"] if f != HOLD]
        return obj

    objects.update(ref, namespace="default", name=name, subresource=None, change=without_hold)


def events(objects: store.ObjectStore, ref: resources.ResourceRef, since: int) -> list[tuple[str, str, list[str]]]:
    """(type, name, finalizers) of each watch event of a kind after ``since``."""
    return [
        (e.type, e.object["metadata"]["name"], e.object["metadata"].get("finalizers", []))
        for e in objects.log(ref).since(since) or []
    ]


# -- the store ----------------------------------------------------------------------------------


def test_orphan_leaves_the_dependents_without_their_reference_to_the_owner() -> None:
    objects = make_store()
    owner, other = job(objects, "owner"), job(objects, "other")
    pod(objects, "only", owner)
    pod(objects, "shared", owner, other, controller=False)
    before = objects.resource_version
    deleted = objects.delete(resources.JOBS, namespace="default", name="owner", propagation=garbage.ORPHAN)
    assert deleted["metadata"]["finalizers"] == ["orphan"] and deleted["metadata"]["deletionTimestamp"]
    assert stored(objects, resources.JOBS, "owner") is None
    only, shared = stored(objects, resources.PODS, "only"), stored(objects, resources.PODS, "shared")
    assert only is not None and "ownerReferences" not in only["metadata"]
    assert shared is not None and [r["uid"] for r in shared["metadata"]["ownerReferences"]] == [
        other["metadata"]["uid"]
    ]
    # as the API server and its garbage collector: marked with the finalizer, dependents orphaned, then gone (the
    # collector's patch taking off the finalizer is never stored: only DELETED, still carrying it)
    assert events(objects, resources.JOBS, before) == [
        ("MODIFIED", "owner", ["orphan"]),
        ("DELETED", "owner", ["orphan"]),
    ]
    assert [e[:2] for e in events(objects, resources.PODS, before)] == [("MODIFIED", "only"), ("MODIFIED", "shared")]


def test_foreground_deletes_the_dependents_first_and_waits_for_the_blocking_ones() -> None:
    """A blocking dependent held by a finalizer keeps the owner (deletionTimestamp, foregroundDeletion) until
    it is gone; a non-blocking one is deleted too, without being waited for; one with another live owner
    only loses its reference to the owner."""
    objects = make_store()
    owner, other = job(objects, "owner"), job(objects, "other")
    pod(objects, "held", owner, finalizers=(HOLD,))
    pod(objects, "free", owner)
    pod(objects, "loose", owner, block=False, finalizers=(HOLD,))
    pod(objects, "shared", owner, other, controller=False)
    deleted = objects.delete(resources.JOBS, namespace="default", name="owner", propagation=garbage.FOREGROUND)
    assert deleted["metadata"]["finalizers"] == ["foregroundDeletion"]
    waiting = stored(objects, resources.JOBS, "owner")
    assert waiting is not None and waiting["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert waiting["metadata"]["deletionTimestamp"] == "2026-01-02T03:04:05Z"
    assert stored(objects, resources.PODS, "free") is None
    for name in ("held", "loose"):
        assert (stored(objects, resources.PODS, name) or {})["metadata"]["deletionTimestamp"]
    shared = stored(objects, resources.PODS, "shared")
    assert shared is not None and not shared["metadata"].get("deletionTimestamp")
    assert [r["uid"] for r in shared["metadata"]["ownerReferences"]] == [other["metadata"]["uid"]]

    release(objects, resources.PODS, "loose")  # not blocking: the owner does not wait for it
    assert stored(objects, resources.JOBS, "owner") is not None
    release(objects, resources.PODS, "held")
    assert stored(objects, resources.PODS, "held") is None
    assert stored(objects, resources.JOBS, "owner") is None


def test_foreground_reaches_the_dependents_of_dependents() -> None:
    """A dependent with dependents of its own is deleted in the foreground too: the owner goes after the
    whole chain below it."""
    objects = make_store()
    owner = job(objects, "owner")
    child = job(objects, "child", owner)
    pod(objects, "grandchild", child, finalizers=(HOLD,))
    objects.delete(resources.JOBS, namespace="default", name="owner", propagation=garbage.FOREGROUND)
    assert (stored(objects, resources.JOBS, "child") or {})["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert stored(objects, resources.JOBS, "owner") is not None
    release(objects, resources.PODS, "grandchild")
    assert [stored(objects, resources.JOBS, name) for name in ("owner", "child")] == [None, None]


def test_background_and_no_policy_delete_the_owner_alone() -> None:
    objects = make_store()
    for policy in (garbage.BACKGROUND, None):
        owner = job(objects, "owner")
        pod(objects, "dependent", owner)
        objects.delete(resources.JOBS, namespace="default", name="owner", propagation=policy)
        assert stored(objects, resources.JOBS, "owner") is None
        dependent = stored(objects, resources.PODS, "dependent")
        assert dependent is not None and dependent["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
        objects.delete(resources.PODS, namespace="default", name="dependent")


def test_background_collection_follows_attempt_to_delete_item() -> None:
    """A dependent with every owner there is left alone; with none left it is deleted; with a live one left it
    loses its references to the gone ones and to those being deleted in the foreground."""
    objects = make_store()
    first, second = job(objects, "first"), job(objects, "second")
    dependent = pod(objects, "dependent", first, second, controller=False)
    uid1, uid2 = first["metadata"]["uid"], second["metadata"]["uid"]
    assert garbage.background_collection(dependent, {uid1: first, uid2: second}) is None
    assert garbage.background_collection(dependent, {uid1: None, uid2: second}) == [uid1]
    assert garbage.background_collection(dependent, {uid1: None, uid2: None}) == []
    waiting = {
        **second,
        "metadata": {**second["metadata"], "deletionTimestamp": "x", "finalizers": ["foregroundDeletion"]},
    }
    assert garbage.background_collection(dependent, {uid1: first, uid2: waiting}) == [uid2]
    assert garbage.background_collection({"metadata": {"name": "nobodys"}}, {}) is None


def test_a_reference_from_another_namespace_names_nothing() -> None:
    objects = make_store()
    objects.create(resources.NAMESPACES, namespace=None, body={"metadata": {"name": "elsewhere"}})
    owner = job(objects, "owner")
    body = {
        "metadata": {"name": "stranger", "ownerReferences": [owner_ref(owner)]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    objects.create(resources.PODS, namespace="elsewhere", body=body)
    objects.delete(resources.JOBS, namespace="default", name="owner", propagation=garbage.FOREGROUND)
    assert stored(objects, resources.JOBS, "owner") is None
    [stranger] = objects.select(resources.PODS, namespace="elsewhere")
    assert stranger["metadata"]["ownerReferences"] == [owner_ref(owner)]


def test_a_second_delete_with_a_policy_changes_the_finalizer() -> None:
    """An object held by another finalizer, deleted again with Orphan after Foreground, orphans its
    dependents instead; a delete without a policy keeps what it has."""
    objects = make_store()
    owner = job(objects, "owner")
    objects.update(
        resources.JOBS,
        namespace="default",
        name="owner",
        subresource=None,
        change=lambda obj: {**obj, "metadata": {**obj["metadata"], "finalizers": [HOLD]}},
    )
    pod(objects, "held", owner, finalizers=(HOLD,))
    objects.delete(resources.JOBS, namespace="default", name="owner", propagation=garbage.FOREGROUND)
    assert (stored(objects, resources.JOBS, "owner") or {})["metadata"]["finalizers"] == [HOLD, "foregroundDeletion"]
    objects.delete(resources.JOBS, namespace="default", name="owner")
    assert (stored(objects, resources.JOBS, "owner") or {})["metadata"]["finalizers"] == [HOLD, "foregroundDeletion"]
    objects.delete(resources.JOBS, namespace="default", name="owner", propagation=garbage.ORPHAN)
    assert (stored(objects, resources.JOBS, "owner") or {})["metadata"]["finalizers"] == [HOLD]
    held = stored(objects, resources.PODS, "held")
    assert held is not None and "ownerReferences" not in held["metadata"]


def test_a_dry_run_delete_changes_nothing() -> None:
    objects = make_store()
    owner = job(objects, "owner")
    pod(objects, "dependent", owner)
    before = objects.resource_version
    objects.delete(resources.JOBS, namespace="default", name="owner", propagation=garbage.ORPHAN, dry_run=True)
    assert objects.resource_version == before


# -- DeleteOptions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "policy"),
    [
        ({}, None),
        ({"propagationPolicy": "Foreground"}, "Foreground"),
        ({"propagationPolicy": "Orphan"}, "Orphan"),
        ({"propagationPolicy": "Background"}, "Background"),
        ({"orphanDependents": True}, "Orphan"),
        ({"orphanDependents": False}, "Background"),
    ],
)
def test_propagation_policy_of_delete_options(options: dict[str, Any], policy: str | None) -> None:
    assert garbage.propagation_policy(options) == policy


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"propagationPolicy": "Sometimes"},
            'propagationPolicy: Unsupported value: "Sometimes": supported values: "Foreground", "Background", '
            '"Orphan", "nil"',
        ),
        (
            {"propagationPolicy": "Orphan", "orphanDependents": True},
            'propagationPolicy: Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set',
        ),
    ],
)
def test_invalid_delete_options_are_refused_with_the_api_servers_words(options: dict[str, Any], message: str) -> None:
    with pytest.raises(validation.Invalid) as refused:
        garbage.propagation_policy(options)
    assert refused.value.message == f'DeleteOptions.meta.k8s.io "" is invalid: {message}'


# -- through HTTP ---------------------------------------------------------------------------------


async def test_the_policy_is_read_from_the_body_or_the_query(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    owner = await client.create_object(
        api,
        resources.JOBS,
        namespace="default",
        body={"metadata": {"name": "owner"}, "spec": {"template": {"spec": {"containers": []}}}},
    )
    dependent = {
        "metadata": {
            "name": "dependent",
            "ownerReferences": [owner_ref({"apiVersion": "batch/v1", "kind": "Job", **owner})],
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    await client.create_object(api, resources.PODS, namespace="default", body=dependent)
    url = f"{cluster.url}{resources.JOBS.path(namespace='default', name='owner')}"
    async with aiohttp.ClientSession() as session:
        async with session.delete(url, json={"propagationPolicy": "Sometimes"}) as response:
            assert response.status == 422
            assert (await response.json())["details"]["causes"][0]["field"] == "propagationPolicy"
        async with session.delete(f"{url}?propagationPolicy=Orphan") as response:
            assert response.status == 200
            assert (await response.json())["metadata"]["finalizers"] == ["orphan"]
    left = await client.get_object(api, resources.PODS, namespace="default", name="dependent")
    assert "ownerReferences" not in left["metadata"]


# -- the simulated controllers --------------------------------------------------------------------


async def eventually(check: Callable[[], Any], *, timeout: float = 10.0) -> Any:
    async with asyncio.timeout(timeout):
        while not (result := check()):
            await asyncio.sleep(0.02)
        return result


@pytest.fixture
async def controllers(api: k8s_client.ApiClient) -> AsyncIterator[SimulatedControllers]:
    simulated = SimulatedControllers(api, lws=False, ray=False, watch_options={"timeout_seconds": 5})
    task = asyncio.create_task(simulated.run())
    try:
        yield simulated
    finally:
        await cancel_and_wait([task])


async def test_a_replica_set_deleted_in_the_foreground_gets_no_new_pods(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient, controllers: SimulatedControllers
) -> None:
    """Its pods, held by a finalizer, wait being deleted; the ReplicaSet controller makes no pods in their
    place for a ReplicaSet being deleted, as kube-controller-manager's makes none."""
    replica_set = {
        "metadata": {"name": "rs"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    await client.create_object(api, resources.REPLICA_SETS, namespace="default", body=replica_set)

    def pods() -> list[dict[str, Any]]:
        return [p for p in controllers.objects["Pod"].values() if p["metadata"].get("generateName") == "rs-"]

    for made in await eventually(lambda: len(pods()) == 2 and pods()):
        await client.patch_object(
            api,
            resources.PODS,
            namespace="default",
            name=made["metadata"]["name"],
            patch={"metadata": {"finalizers": [HOLD]}},
        )
    await client.delete_object(
        api, resources.REPLICA_SETS, namespace="default", name="rs", options={"propagationPolicy": "Foreground"}
    )
    # the controllers have seen the deletion: the ReplicaSet marked, its pods deleted and held
    await eventually(
        lambda: (
            all(p["metadata"].get("deletionTimestamp") for p in pods())
            and [
                rs["metadata"].get("deletionTimestamp") is not None for rs in controllers.objects["ReplicaSet"].values()
            ]
            == [True]
        )
    )
    waiting = await client.get_object(api, resources.REPLICA_SETS, namespace="default", name="rs")
    assert waiting["metadata"]["finalizers"] == ["foregroundDeletion"]
    before = cluster.resource_version
    await controllers.reconcile()
    assert cluster.resource_version == before  # no pod made in place of the held ones (and deleted at once)
    listed, _ = await client.list_objects(api, resources.PODS, namespace="default")
    assert len(listed) == 2 and all(p["metadata"].get("deletionTimestamp") for p in listed)
    for held in listed:
        await client.patch_object(
            api,
            resources.PODS,
            namespace="default",
            name=held["metadata"]["name"],
            patch={"metadata": {"finalizers": None}},
        )
    with pytest.raises(errors.NotFoundError):
        await client.get_object(api, resources.REPLICA_SETS, namespace="default", name="rs")


async def test_a_workload_goes_with_its_last_owner_and_keeps_a_live_one(
    api: k8s_client.ApiClient, controllers: SimulatedControllers
) -> None:
    """As kube-controller-manager's garbage collector: a Workload owned by two pods loses its reference to the one
    deleted, and is deleted with the last; one that also names a StatefulSet stays with only that reference once
    its pods are gone (a StatefulSet scaled to zero keeps its held Workload)."""
    made = []
    for name in ("a", "b"):
        body = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        made.append(await client.create_object(api, resources.PODS, namespace="default", body=body))
    sts_body = {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    sts = await client.create_object(api, resources.STATEFUL_SETS, namespace="default", body=sts_body)
    pod_refs = [
        {"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]} for p in made
    ]
    sts_ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": sts["metadata"]["uid"]}
    spec = {
        "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]
    }
    for name, refs in (("group", pod_refs), ("held", [sts_ref, *pod_refs])):
        body = {"metadata": {"name": name, "ownerReferences": refs}, "spec": spec}
        await client.create_object(api, resources.WORKLOADS, namespace="default", body=body)

    async def owners(name: str) -> list[str] | None:
        try:
            wl = await client.get_object(api, resources.WORKLOADS, namespace="default", name=name)
        except errors.NotFoundError:
            return None
        return [r["name"] for r in wl["metadata"].get("ownerReferences", [])]

    async def until(name: str, wanted: list[str] | None) -> None:
        async with asyncio.timeout(10):
            while await owners(name) != wanted:
                await asyncio.sleep(0.02)

    await client.delete_object(api, resources.PODS, namespace="default", name="a")
    await until("group", ["b"])
    await until("held", ["web", "b"])
    await client.delete_object(api, resources.PODS, namespace="default", name="b")
    await until("group", None)
    await until("held", ["web"])
    await controllers.reconcile()
    assert await owners("held") == ["web"]


async def test_the_collector_leaves_what_an_orphaning_deletion_left_whatever_its_watches_show(
    api: k8s_client.ApiClient,
) -> None:
    """A Job deleted with propagationPolicy Orphan while the collector's watches still show its pod and its
    Workload naming it (their change not seen yet) and the Job gone: the collector reads each again, as
    kube-controller-manager's attemptToDeleteItem reads the item before it acts, finds no owner and deletes
    neither. Before, it deleted both from its stale view: an orphaned Job's Workload was then sometimes deleted
    instead of finished OwnerNotFound by Kueue (the "--cascade=orphan" e2e case, under load)."""
    controllers = SimulatedControllers(api, lws=False, ray=False)  # not run: its view is set here, and stays stale
    body = {"metadata": {"name": "runner"}, "spec": {"template": {"spec": {"containers": []}}}}
    owner = await client.create_object(api, resources.JOBS, namespace="default", body=body)
    reference = owner_ref({"apiVersion": "batch/v1", "kind": "Job", **owner})
    pod_body = {
        "metadata": {"name": "runner-x1", "ownerReferences": [reference]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    made_pod = await client.create_object(api, resources.PODS, namespace="default", body=pod_body)
    spec = {
        "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]
    }
    labels = {"kueue.x-k8s.io/job-uid": owner["metadata"]["uid"]}
    wl_body = {"metadata": {"name": "job-runner", "ownerReferences": [reference], "labels": labels}, "spec": spec}
    made_wl = await client.create_object(api, resources.WORKLOADS, namespace="default", body=wl_body)
    controllers._synced.update({"Job", "Pod", "Workload"})
    controllers._remember("Pod", made_pod)
    controllers._remember("Workload", made_wl)

    await client.delete_object(
        api, resources.JOBS, namespace="default", name="runner", options={"propagationPolicy": "Orphan"}
    )
    await controllers._collect_garbage()

    pod_left = await client.get_object(api, resources.PODS, namespace="default", name="runner-x1")
    wl_left = await client.get_object(api, resources.WORKLOADS, namespace="default", name="job-runner")
    assert "ownerReferences" not in pod_left["metadata"] and "ownerReferences" not in wl_left["metadata"]
    assert wl_left["metadata"]["uid"] == made_wl["metadata"]["uid"]


async def test_the_collector_still_deletes_what_a_background_deletion_left_behind(api: k8s_client.ApiClient) -> None:
    """The same view with the Job deleted in the background: the pod and the Workload still name it when read
    again, so both go (a Workload with its last owner gone)."""
    controllers = SimulatedControllers(api, lws=False, ray=False)
    body = {"metadata": {"name": "runner"}, "spec": {"template": {"spec": {"containers": []}}}}
    owner = await client.create_object(api, resources.JOBS, namespace="default", body=body)
    reference = owner_ref({"apiVersion": "batch/v1", "kind": "Job", **owner})
    pod_body = {
        "metadata": {"name": "runner-x1", "ownerReferences": [reference]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    controllers._remember("Pod", await client.create_object(api, resources.PODS, namespace="default", body=pod_body))
    spec = {
        "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]
    }
    wl_body = {"metadata": {"name": "job-runner", "ownerReferences": [reference]}, "spec": spec}
    made_wl = await client.create_object(api, resources.WORKLOADS, namespace="default", body=wl_body)
    controllers._remember("Workload", made_wl)
    controllers._synced.update({"Job", "Pod", "Workload"})

    await client.delete_object(api, resources.JOBS, namespace="default", name="runner")
    await controllers._collect_garbage()

    for ref, name in ((resources.PODS, "runner-x1"), (resources.WORKLOADS, "job-runner")):
        with pytest.raises(errors.NotFoundError):
            await client.get_object(api, ref, namespace="default", name=name)


async def test_a_variant_goes_with_its_parent_workload(api: k8s_client.ApiClient) -> None:
    """A ConcurrentAdmission variant (a Workload owned by its parent Workload) is collected once its parent is
    deleted, as kube-controller-manager collects any dependent whose owners are all gone."""
    controllers = SimulatedControllers(api, lws=False, ray=False)
    spec = {
        "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]
    }
    parent = await client.create_object(
        api, resources.WORKLOADS, namespace="default", body={"metadata": {"name": "parent"}, "spec": spec}
    )
    reference = owner_ref({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", **parent})
    variant_body = {"metadata": {"name": "parent-variant-spot", "ownerReferences": [reference]}, "spec": spec}
    controllers._remember(
        "Workload", await client.create_object(api, resources.WORKLOADS, namespace="default", body=variant_body)
    )
    controllers._synced.update({"Workload"})

    await client.delete_object(api, resources.WORKLOADS, namespace="default", name="parent")
    await controllers._collect_garbage()

    with pytest.raises(errors.NotFoundError):
        await client.get_object(api, resources.WORKLOADS, namespace="default", name="parent-variant-spot")
