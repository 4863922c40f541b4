"""Kueue's job webhooks walk a job's owners through the API server (FindAncestorJobManagedByKueue in
WorkloadShouldBeSuspended), not only look at the owner's kind: the webhook service answering AdmissionReviews
with the emulated API server behind it, and the emulated API server's own webhooks.

A queue-labelled Job whose controller is a JobSet without the queue-name label is a workload of its own, so it
is created suspended; one under a labelled JobSet, directly or through an unlabelled Job, is part of the
JobSet's workload and left alone; an owner that does not exist refuses the create (404 NotFound), as does a
chain deeper than Kueue walks (403 "managed owner chain limit reached").
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, errors, resources
from kueue_es.services.webhook import certs, server
from kueue_es.sim import emulator
from tests.kube.test_webhook_server import admission_review, post

QUEUE = "kueue.x-k8s.io/queue-name"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def jobset(name: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "team", "labels": labels or {}},
        "spec": {
            "suspend": True,  # not run by the emulated JobSet controller meanwhile
            "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": template}}}],
        },
    }


def job(name: str, *, owner: dict[str, Any] | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team", "labels": labels or {}}
    if owner is not None:
        owner_meta = owner["metadata"]
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner_meta["name"],
                "uid": owner_meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}},
    }


@pytest.fixture
async def api() -> AsyncIterator[k8s_client.ApiClient]:
    async with emulator.serve_emulator() as cluster:
        api_client = await client.make_api_client(server=str(cluster.url))
        try:
            await client.apply_manifest(
                api_client, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
            )
            yield api_client
        finally:
            await api_client.close()


@pytest.fixture
async def webhook(api: k8s_client.ApiClient, tmp_path: Path) -> AsyncIterator[tuple[str, ssl.SSLContext]]:
    """The webhook service reading the emulated API server."""
    stop = asyncio.Event()
    urls: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.create_task(
        server.serve_webhook(stop=stop, cert_dir=tmp_path, port=0, api=api, started=urls.put_nowait)
    )
    url = await asyncio.wait_for(urls.get(), 30)
    try:
        yield url, ssl.create_default_context(cafile=str(tmp_path / certs.CA_CERT))
    finally:
        stop.set()
        await task


async def create(api: k8s_client.ApiClient, obj: dict[str, Any]) -> dict[str, Any]:
    ref = resources.ref_for(obj["apiVersion"], obj["kind"])
    return await client.create_object(api, ref, namespace="team", body=obj)


async def mutate_job(webhook: tuple[str, ssl.SSLContext], obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The mutating webhook's response for creating ``obj``, and ``obj`` with its patch applied."""
    url, trust = webhook
    review = admission_review(group="batch", version="v1", kind="Job", resource="jobs", operation="CREATE", obj=obj)
    response = (await post(url, trust, "/mutate-batch-v1-job", review))["response"]
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return response, jsonpatch.apply_patch(obj, patch)


async def test_a_queued_job_of_an_unqueued_jobset_is_suspended(
    api: k8s_client.ApiClient, webhook: tuple[str, ssl.SSLContext]
) -> None:
    """The JobSet is not managed, so the Job is a workload of its own and must wait for admission; by the
    owner's kind alone it was left running, then stopped by the dispatcher."""
    parent = await create(api, jobset("plain"))
    response, patched = await mutate_job(webhook, job("child", owner=parent, labels={QUEUE: "user-queue"}))
    assert response["allowed"] is True
    assert patched["spec"].get("suspend") is True


async def test_a_job_of_a_queued_jobset_is_left_alone(
    api: k8s_client.ApiClient, webhook: tuple[str, ssl.SSLContext]
) -> None:
    parent = await create(api, jobset("queued", labels={QUEUE: "user-queue"}))
    response, patched = await mutate_job(webhook, job("child", owner=parent, labels={QUEUE: "user-queue"}))
    assert response == {"uid": response["uid"], "allowed": True}
    assert "suspend" not in patched["spec"]


async def test_three_levels_the_topmost_managed_owner_decides(
    api: k8s_client.ApiClient, webhook: tuple[str, ssl.SSLContext]
) -> None:
    """A queued Job under an unlabelled Job: part of a labelled JobSet above them, its own under an unlabelled
    one (the walk goes through the unlabelled middle Job to the JobSet, as Kueue's)."""
    queued = await create(api, jobset("queued", labels={QUEUE: "user-queue"}))
    middle = await create(api, job("middle", owner=queued))
    _, under_queued = await mutate_job(webhook, job("leaf", owner=middle, labels={QUEUE: "user-queue"}))
    assert "suspend" not in under_queued["spec"]

    plain = await create(api, jobset("plain"))
    plain_middle = await create(api, job("plain-middle", owner=plain))
    _, under_plain = await mutate_job(webhook, job("leaf2", owner=plain_middle, labels={QUEUE: "user-queue"}))
    assert under_plain["spec"].get("suspend") is True


async def test_an_owner_that_does_not_exist_refuses_the_create(webhook: tuple[str, ssl.SSLContext]) -> None:
    """ErrWorkloadOwnerNotFound joined with the GET's NotFound: controller-runtime answers the API status."""
    ghost = {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": {"name": "ghost", "uid": "u-ghost"}}
    response, _ = await mutate_job(webhook, job("child", owner=ghost, labels={QUEUE: "user-queue"}))
    assert response["allowed"] is False
    status = response["status"]
    assert (status["code"], status["reason"]) == (404, "NotFound")
    assert status["message"] == 'jobsets.jobset.x-k8s.io "ghost" not found'
    assert status["details"] == {"name": "ghost", "group": "jobset.x-k8s.io", "kind": "jobsets"}


async def test_a_chain_deeper_than_kueue_walks_refuses_the_create(
    api: k8s_client.ApiClient, webhook: tuple[str, ssl.SSLContext]
) -> None:
    owner = await create(api, job("level-0", owner=None))
    for level in range(1, 11):  # eleven owners above the new Job: one more than Kueue walks
        owner = await create(api, job(f"level-{level}", owner=owner))
    response, _ = await mutate_job(webhook, job("leaf", owner=owner, labels={QUEUE: "user-queue"}))
    assert response["allowed"] is False
    assert (response["status"]["code"], response["status"]["reason"]) == (403, "Forbidden")
    assert response["status"]["message"] == "managed owner chain limit reached"


async def test_an_owner_reference_to_another_uid_ends_the_walk(
    api: k8s_client.ApiClient, webhook: tuple[str, ssl.SSLContext]
) -> None:
    """A stale reference (the JobSet of that name was made again): Kueue stops at it, the Job is its own."""
    queued = await create(api, jobset("queued", labels={QUEUE: "user-queue"}))
    stale = {**queued, "metadata": {**queued["metadata"], "uid": "an-older-uid"}}
    _, patched = await mutate_job(webhook, job("child", owner=stale, labels={QUEUE: "user-queue"}))
    assert patched["spec"].get("suspend") is True


async def test_the_emulated_api_server_walks_the_owners_too(api: k8s_client.ApiClient) -> None:
    """The emulator's create hooks play the same webhook: stored suspended under an unlabelled JobSet, as it is
    under a labelled one only through its own label; a missing owner is refused as kube-apiserver relays it."""
    plain = await create(api, jobset("plain"))
    stored = await create(api, job("child", owner=plain, labels={QUEUE: "user-queue"}))
    assert stored["spec"]["suspend"] is True

    queued = await create(api, jobset("queued", labels={QUEUE: "user-queue"}))
    middle = await create(api, job("middle", owner=queued))
    leaf = await create(api, job("leaf", owner=middle, labels={QUEUE: "user-queue"}))
    assert leaf["spec"].get("suspend") is not True

    ghost = {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": {"name": "ghost", "uid": "u-ghost"}}
    with pytest.raises(errors.NotFoundError) as refused:
        await create(api, job("orphan", owner=ghost, labels={QUEUE: "user-queue"}))
    assert 'admission webhook "mjob.kb.io" denied the request: jobsets.jobset.x-k8s.io "ghost" not found' in str(
        refused.value
    )


def _owner(kind: str, api_version: str, name: str, *, queued: bool, enabled: bool = True, above: Any = None) -> Any:
    from kueue_es.jobframework import workloads

    controller = None
    if above is not None:
        controller = {"apiVersion": above.api_version, "kind": above.kind, "name": above.name, "uid": above.uid,
                      "controller": True}  # fmt: skip
    return workloads.Owner(
        api_version=api_version,
        kind=kind,
        namespace="team",
        name=name,
        uid=f"u-{name}",
        labels={QUEUE: "q"} if queued else {},
        controller=controller,
        enabled=enabled,
    )


def test_an_owner_of_a_disabled_integration_is_walked_through_never_the_ancestor() -> None:
    """Kueue's walk reads an owner whose integration is off (GetEmptyOwnerObject is nil for it) and goes on
    to its own controller; it is never the ancestor, a managed owner above it is."""
    from kueue_es.jobframework import webhooks

    wrapper = _owner("AppWrapper", "workload.codeflare.dev/v1beta2", "aw", queued=True)
    disabled = _owner("JobSet", JOBSET_API, "js", queued=True, enabled=False)
    via = _owner("JobSet", JOBSET_API, "js", queued=True, enabled=False, above=wrapper)
    child = job("child", owner={"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": {"name": "js", "uid": "u-js"}},
                labels={QUEUE: "q"})  # fmt: skip
    alone = webhooks.walk(child, {(JOBSET_API, "JobSet", "js"): disabled}, manage_jobs_without_queue_name=False)
    assert not alone.child
    read = {(JOBSET_API, "JobSet", "js"): via, (wrapper.api_version, "AppWrapper", "aw"): wrapper}
    above = webhooks.walk(child, read, manage_jobs_without_queue_name=False)
    assert above.ancestor == wrapper
    # what the webhook reads, one at a time: the JobSet, then (it has a controller) the AppWrapper
    assert webhooks.owner_to_read(child, {}, manage_jobs_without_queue_name=False)["name"] == "js"
    assert (
        webhooks.owner_to_read(child, {(JOBSET_API, "JobSet", "js"): via}, manage_jobs_without_queue_name=False)["name"]
        == "aw"
    )
    assert webhooks.owner_to_read(child, read, manage_jobs_without_queue_name=False) is None


async def test_an_object_being_deleted_is_not_walked(webhook: tuple[str, ssl.SSLContext]) -> None:
    """WithDeletingObjectTolerance: a StatefulSet update while it is deleted, its owner gone already, is not
    refused (the garbage collector's patch of a terminating object must go through)."""
    url, trust = webhook
    ghost = {"apiVersion": "batch/v1", "kind": "Job", "name": "gone", "uid": "u-gone", "controller": True}
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "s", "namespace": "team", "ownerReferences": [ghost], "labels": {QUEUE: "q"}},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }
    deleting = {**sts, "metadata": {**sts["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    for verb in ("mutate", "validate"):
        review = admission_review(group="apps", version="v1", kind="StatefulSet", resource="statefulsets",
                                  operation="UPDATE", obj=deleting, old=sts)  # fmt: skip
        response = (await post(url, trust, f"/{verb}-apps-v1-statefulset", review))["response"]
        assert response["allowed"] is True, (verb, response)
        review = admission_review(group="apps", version="v1", kind="StatefulSet", resource="statefulsets",
                                  operation="UPDATE", obj=sts, old=sts)  # fmt: skip
        response = (await post(url, trust, f"/{verb}-apps-v1-statefulset", review))["response"]
        assert response["allowed"] is False and response["status"]["code"] == 404, (verb, response)


async def test_without_an_api_the_owners_kind_decides(tmp_path: Path) -> None:
    """A server with no API (tests, by hand) cannot read owners: a child of a job is left alone, not refused."""
    stop = asyncio.Event()
    urls: asyncio.Queue[str] = asyncio.Queue()
    task = asyncio.create_task(server.serve_webhook(stop=stop, cert_dir=tmp_path, port=0, started=urls.put_nowait))
    try:
        url = await asyncio.wait_for(urls.get(), 30)
        trust = ssl.create_default_context(cafile=str(tmp_path / certs.CA_CERT))
        ghost = {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": {"name": "ghost", "uid": "u-ghost"}}
        response, patched = await mutate_job((url, trust), job("child", owner=ghost, labels={QUEUE: "user-queue"}))
        assert response["allowed"] is True and "suspend" not in patched["spec"]
    finally:
        stop.set()
        await task


# -- Pods: Kueue's pod webhook walks a pod's owners too (pod_webhook.go Default, FindAncestorJobManagedByKueue) ----


def owned_pod(name: str, owner: dict[str, Any], *, uid: str | None = None) -> dict[str, Any]:
    """testingpod.MakePod(name, ns).Queue("user-queue").OwnerReference(owner, Job): a queued Pod whose controller
    is ``owner`` (its reference's UID ``uid``, the owner's by default)."""
    owner_meta = owner["metadata"]
    reference = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner_meta["name"],
        "uid": uid or owner_meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "labels": {QUEUE: "user-queue"},
            "ownerReferences": [reference],
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def is_gated_by_kueue(pod: dict[str, Any]) -> bool:
    """The three marks pod_webhook_test.go looks for: the admission gate, the managed label and finalizer."""
    gates = [g.get("name") for g in pod["spec"].get("schedulingGates") or []]
    marks = (
        "kueue.x-k8s.io/admission" in gates,
        (pod["metadata"].get("labels") or {}).get("kueue.x-k8s.io/managed") == "true",
        "kueue.x-k8s.io/managed" in (pod["metadata"].get("finalizers") or []),
    )
    assert len(set(marks)) == 1, marks  # all or none
    return marks[0]


async def mutate_pod(webhook: tuple[str, ssl.SSLContext], obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    url, trust = webhook
    review = admission_review(group="", version="v1", kind="Pod", resource="pods", operation="CREATE", obj=obj)
    response = (await post(url, trust, "/mutate--v1-pod", review))["response"]
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return response, jsonpatch.apply_patch(obj, patch)


async def test_a_pod_whose_owner_reference_uid_does_not_match_its_job_is_managed(
    api: k8s_client.ApiClient, webhook: tuple[str, ssl.SSLContext]
) -> None:
    """pod_webhook_test.go "the pod is owned by a job": "Should manage the pod when the ownerReference UID doesn't
    match the parent job" (the walk stops at the stale reference: the pod is a workload of its own), and "Should
    not manage the pod when the ownerReference UID matches the parent job" (part of the queued Job's workload),
    through the webhook service and the emulated API server alike. By the owner's kind alone both were left
    alone."""
    parent = await create(api, job("parent-job", owner=None, labels={QUEUE: "user-queue"}))
    _, mismatched = await mutate_pod(webhook, owned_pod("pod-with-mismatched-owner-uid", parent, uid="x-mismatched"))
    assert is_gated_by_kueue(mismatched)
    _, matching = await mutate_pod(webhook, owned_pod("pod-with-matching-owner-uid", parent))
    assert not is_gated_by_kueue(matching)

    stored = await create(api, owned_pod("stored-mismatched", parent, uid="x-mismatched"))
    assert is_gated_by_kueue(stored)
    stored = await create(api, owned_pod("stored-matching", parent))
    assert not is_gated_by_kueue(stored)


async def test_a_queued_pod_of_an_unqueued_job_is_managed(
    api: k8s_client.ApiClient, webhook: tuple[str, ssl.SSLContext]
) -> None:
    """FindAncestorJobManagedByKueue finds no managed ancestor above a Job without the queue-name label (and
    manageJobsWithoutQueueName off), so Kueue's pod webhook gates the queued pod as a plain one."""
    parent = await create(api, job("plain-job", owner=None))
    _, patched = await mutate_pod(webhook, owned_pod("p", parent))
    assert is_gated_by_kueue(patched)
    assert is_gated_by_kueue(await create(api, owned_pod("stored", parent)))


async def test_a_pod_whose_job_does_not_exist_is_refused(
    api: k8s_client.ApiClient, webhook: tuple[str, ssl.SSLContext]
) -> None:
    """ErrWorkloadOwnerNotFound: the pod webhook's walk GETs the Job, and its NotFound is the answer (404); in a
    namespace managedJobsNamespaceSelector leaves out the pod webhook returns before the walk: allowed as it is."""
    ghost = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ghost", "uid": "u-ghost"}}
    response, _ = await mutate_pod(webhook, owned_pod("orphan", ghost))
    assert (response["allowed"], response["status"]["code"]) == (False, 404)
    assert response["status"]["message"] == 'jobs.batch "ghost" not found'
    with pytest.raises(errors.NotFoundError) as refused:
        await create(api, owned_pod("orphan", ghost))
    assert 'admission webhook "mpod.kb.io" denied the request: jobs.batch "ghost" not found' in str(refused.value)

    url, trust = webhook
    elsewhere = {
        **owned_pod("orphan", ghost),
        "metadata": {**owned_pod("orphan", ghost)["metadata"], "namespace": "kube-system"},
    }
    review = admission_review(
        group="", version="v1", kind="Pod", resource="pods", operation="CREATE", obj=elsewhere, namespace="kube-system"
    )
    response = (await post(url, trust, "/mutate--v1-pod", review))["response"]
    assert response == {"uid": response["uid"], "allowed": True}
