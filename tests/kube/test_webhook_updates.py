"""Kueue's Deployment, StatefulSet and LeaderWorkerSet webhooks on UPDATE, in the server and the emulator.

Their mutating webhooks are registered for create and update, and Default does not look at the operation
(deployment_webhook.go, statefulset_webhook.go, leaderworkerset_webhook.go): an update of one without the
queue-name label gives it the namespace's ``default`` LocalQueue (ApplyDefaultLocalQueue) and marks its
pod template, and under ``manageJobsWithoutQueueName`` marks the template of any in a selected namespace
(WorkloadShouldBeSuspended), so the pods it makes from then on are Kueue's. Their ValidateUpdate counts
the object suspended while none of its replicas is ready: the queue-name label may change only then (a
running one is refused the ``default`` LocalQueue), and may never be removed. Before, kueue-es defaulted
only queue-labelled objects on update and refused any change of their queue label. The reviews are
shaped as kube-apiserver sends them (:func:`tests.kube.test_webhook_server.admission_review`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp.test_utils
import jsonpatch
import pytest

from kueue_es.events import models
from kueue_es.jobframework import webhooks, workloads
from kueue_es.jobframework.integrations import serving
from kueue_es.services.kube import client, errors, resources
from kueue_es.services.webhook import server
from kueue_es.sim import emulator
from tests.kube.test_webhook_server import QUEUE, admission_review

SELECTED = {"kueue-managed": "true"}
TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def apps(kind: str, *, namespace: str = "team", queue: str | None = None, ready: int = 0) -> dict[str, Any]:
    """A Deployment or StatefulSet of two replicas, ``ready`` of them ready."""
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "web", "namespace": namespace, "labels": {QUEUE: queue} if queue else {}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": json.loads(json.dumps(TEMPLATE)),
        },
        "status": {"replicas": 2, "readyReplicas": ready},
    }


def lws(*, namespace: str = "team", queue: str | None = None, ready: int = 0) -> dict[str, Any]:
    """A LeaderWorkerSet of groups of two, without a leader template."""
    return {
        "apiVersion": serving.LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "web", "namespace": namespace, "labels": {QUEUE: queue} if queue else {}},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {"size": 2, "workerTemplate": json.loads(json.dumps(TEMPLATE))},
        },
        "status": {"replicas": 1, "readyReplicas": ready},
    }


KINDS = [
    pytest.param(lambda **kw: apps("Deployment", **kw), ("spec", "template"), "deployment", id="Deployment"),
    pytest.param(lambda **kw: apps("StatefulSet", **kw), ("spec", "template"), "statefulset", id="StatefulSet"),
    pytest.param(lws, ("spec", "leaderWorkerTemplate", "workerTemplate"), serving.LWS_FRAMEWORK, id="LeaderWorkerSet"),
]

Make = Callable[..., dict[str, Any]]


def template_of(obj: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any]:
    for step in path:
        obj = obj[step]
    return obj


def parent_mark(obj: Mapping[str, Any], path: tuple[str, ...]) -> str | None:
    """The template's ``kueue.x-k8s.io/pod-suspending-parent``: which framework's webhook marked it."""
    return (template_of(obj, path)["metadata"].get("annotations") or {}).get(serving.SUSPENDED_BY_PARENT_ANNOTATION)


def patched(obj: dict[str, Any], response: Mapping[str, Any]) -> dict[str, Any]:
    assert response["allowed"] is True and response.get("patchType") == "JSONPatch", response
    return jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))


async def answer(
    application: Any, verb: str, new: dict[str, Any], old: dict[str, Any], *, operation: str = "UPDATE"
) -> dict[str, Any]:
    """The webhook's ``response`` for changing ``old`` into ``new`` (uid checked and dropped)."""
    served = webhooks.target(new["apiVersion"], new["kind"])
    assert served is not None
    group, _, version = new["apiVersion"].rpartition("/")
    review = admission_review(
        group=group,
        version=version,
        kind=new["kind"],
        resource=served.plural,
        operation=operation,
        obj=new,
        old=old,
        namespace=new["metadata"]["namespace"],
    )
    async with aiohttp.test_utils.TestServer(application) as test_server, aiohttp.ClientSession() as session:
        async with session.post(test_server.make_url(served.path(verb)), json=review) as reply:
            assert reply.status == 200, await reply.text()
            response = dict((await reply.json())["response"])
    assert response.pop("uid") == review["request"]["uid"]
    return response


def has_default(*namespaces: str) -> Callable[[str], Awaitable[bool]]:
    async def lookup(namespace: str) -> bool:
        return namespace in namespaces

    return lookup


def labelled(labels: Mapping[str, Mapping[str, str]]) -> Callable[[str], Awaitable[Mapping[str, str] | None]]:
    async def lookup(namespace: str) -> Mapping[str, str] | None:
        return labels.get(namespace)

    return lookup


@pytest.mark.parametrize(("make", "path", "framework"), KINDS)
async def test_an_update_gives_the_default_local_queue_and_marks_the_template(
    make: Make, path: tuple[str, ...], framework: str
) -> None:
    """An update of one without the queue-name label, in a namespace with a ``default`` LocalQueue: the label
    and the template's marks; allowed while no replica is ready, refused once one is (Kueue refuses it
    too: the label it gave may not change on a running one)."""
    application = server.app(default_queue=has_default("team"))
    old = make()
    new = patched(make(), await answer(application, "mutate", make(), old))
    assert new["metadata"]["labels"] == {QUEUE: "default"}
    assert parent_mark(new, path) == framework
    assert await answer(application, "validate", new, old) == {"allowed": True}

    running = make(ready=1)
    refused = await answer(application, "validate", new, running)
    assert refused["allowed"] is False
    assert refused["status"]["message"] == (f'metadata.labels[{QUEUE}]: Invalid value: "default": field is immutable')

    # a kind Kueue defaults at creation only is left as it is on update
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "team"},
        "spec": {"template": json.loads(json.dumps(TEMPLATE))},
    }
    assert await answer(application, "mutate", job, job) == {"allowed": True}


async def test_under_manage_jobs_without_queue_name_an_update_marks_those_of_a_selected_namespace() -> None:
    """manageJobsWithoutQueueName with managedJobsNamespaceSelector: the update of an unlabelled Deployment in
    a selected namespace marks its template (its pods are Kueue's from then on); in another namespace it is
    left as it is. The server reads the Namespace for it, as for a create."""
    application = server.app(
        manage_jobs_without_queue_name=True,
        namespace_selector=models.LabelSelector(match_labels=SELECTED),
        namespace_labels=labelled({"team": SELECTED, "other": {}}),
    )
    deployment = apps("Deployment")
    marked = patched(deployment, await answer(application, "mutate", apps("Deployment"), deployment))
    labels = marked["spec"]["template"]["metadata"]["labels"]
    assert labels[workloads.MANAGED_LABEL] == "true" and QUEUE not in labels
    assert parent_mark(marked, ("spec", "template")) == "deployment"
    elsewhere = apps("Deployment", namespace="other")
    assert await answer(application, "mutate", elsewhere, elsewhere) == {"allowed": True}


async def test_a_namespace_that_cannot_be_read_fails_an_update_too() -> None:
    """The Namespace read for an update fails the call (500), as for a create."""

    async def broken(namespace: str) -> Mapping[str, str] | None:
        raise errors.ConnectionFailedError("the API server is down")

    application = server.app(
        manage_jobs_without_queue_name=True,
        namespace_selector=models.LabelSelector(match_labels=SELECTED),
        namespace_labels=broken,
    )
    deployment = apps("Deployment")
    review = admission_review(
        group="apps", version="v1", kind="Deployment", resource="deployments", operation="UPDATE", obj=deployment,
        old=deployment,
    )  # fmt: skip
    async with aiohttp.test_utils.TestServer(application) as test_server, aiohttp.ClientSession() as session:
        async with session.post(test_server.make_url("/mutate-apps-v1-deployment"), json=review) as reply:
            assert reply.status == 500 and "cannot read the namespace" in await reply.text()


@pytest.mark.parametrize(("make", "path", "framework"), KINDS)
async def test_the_queue_label_follows_the_ready_replicas(make: Make, path: tuple[str, ...], framework: str) -> None:
    """ValidateUpdate of the kinds run through their pods: the queue may move while no replica is ready,
    never once one is, and may not be removed; a priority class may be added only while none is ready."""
    application = server.app()
    for old, new, refused in (
        (make(queue="a"), make(queue="b"), False),
        (make(queue="a", ready=1), make(queue="b"), True),
        (make(queue="a"), make(), True),
    ):
        response = await answer(application, "validate", new, old)
        assert response["allowed"] is not refused, (old, new, response)
        if refused:
            assert "field is immutable" in response["status"]["message"]
    classed = make(queue="a")
    classed["metadata"]["labels"][workloads.PRIORITY_CLASS_LABEL] = "high"
    assert (await answer(application, "validate", classed, make(queue="a")))["allowed"] is True
    refused_class = await answer(application, "validate", classed, make(queue="a", ready=2))
    assert "WorkloadPriorityClass cannot be added to a non-suspended workload" in refused_class["status"]["message"]


async def test_a_managed_statefulset_keeps_its_replicas_and_pod_spec() -> None:
    """statefulset_webhook.go ValidateUpdate, while Kueue manages the StatefulSet: spec.replicas changes only
    to or from 0, and the pod spec keeps what its Workload was admitted for; an unlabelled one is held only
    under manageJobsWithoutQueueName in a selected namespace, which the server reads the Namespace for.
    Before, the server checked none of it (only the emulated API server did, as a 422)."""
    application = server.app()
    old = apps("StatefulSet", queue="q")
    grown = apps("StatefulSet", queue="q")
    grown["spec"]["replicas"] = 3
    refused = await answer(application, "validate", grown, old)
    assert refused["allowed"] is False and refused["status"]["code"] == 403
    assert refused["status"]["message"] == "spec.replicas: Invalid value: 3: field is immutable"
    zero = apps("StatefulSet", queue="q")
    zero["spec"]["replicas"] = 0
    assert await answer(application, "validate", zero, old) == {"allowed": True}
    resized = apps("StatefulSet", queue="q")
    resized["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
    refused = await answer(application, "validate", resized, old)
    assert refused["status"]["message"] == (
        'spec.template.spec.containers[0].resources.requests: Invalid value: {"cpu":"2"}: field is immutable'
    )

    selected = server.app(
        manage_jobs_without_queue_name=True,
        namespace_selector=models.LabelSelector(match_labels=SELECTED),
        namespace_labels=labelled({"team": SELECTED, "other": {}}),
    )
    unlabelled, grown = apps("StatefulSet"), apps("StatefulSet")
    grown["spec"]["replicas"] = 3
    assert (await answer(selected, "validate", grown, unlabelled))["status"]["message"] == (
        "spec.replicas: Invalid value: 3: field is immutable"
    )
    elsewhere, grown_elsewhere = apps("StatefulSet", namespace="other"), apps("StatefulSet", namespace="other")
    grown_elsewhere["spec"]["replicas"] = 3
    assert await answer(selected, "validate", grown_elsewhere, elsewhere) == {"allowed": True}


async def test_a_managed_leaderworkerset_keeps_its_group_size_and_templates() -> None:
    """leaderworkerset_webhook.go ValidateUpdate, while managed: the group size (LWSImmutableGroupSize, on by
    default) and the worker pod spec's shape are immutable, a leader template may not be added; the number of
    groups may change. Before, the server allowed all of it."""
    application = server.app()
    old = lws(queue="q")
    bigger = lws(queue="q")
    bigger["spec"]["leaderWorkerTemplate"]["size"] = 4
    refused = await answer(application, "validate", bigger, old)
    assert refused["allowed"] is False
    assert refused["status"]["message"] == "spec.leaderWorkerTemplate.size: Invalid value: 4: field is immutable"
    led = lws(queue="q")
    led["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = json.loads(json.dumps(TEMPLATE))
    led["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["nodeSelector"] = {"pool": "a"}
    refused = await answer(application, "validate", led, old)
    assert refused["status"]["message"] == (
        "[spec.leaderWorkerTemplate.leaderTemplate: Invalid value: v1.PodTemplateSpec{...}: field is immutable, "
        'spec.leaderWorkerTemplate.workerTemplate.spec.nodeSelector: Invalid value: {"pool":"a"}: field is immutable]'
    )
    more = lws(queue="q")
    more["spec"]["replicas"] = 3
    assert await answer(application, "validate", more, old) == {"allowed": True}
    negative = lws(queue="q")
    negative["spec"]["replicas"] = -1
    refused = await answer(application, "validate", negative, old)
    assert refused["status"]["message"] == (
        "spec.replicas: Invalid value: -1: invalid LeaderWorkerSet replicas: must be >= 0, got -1"
    )


# -- the emulated API server applies the same rules -----------------------------------------------


async def test_the_emulator_defaults_an_update_as_kueue_s_webhook() -> None:
    """``demo``/``up --emulator``: a Deployment created before its namespace had a ``default`` LocalQueue gets
    it, and its template marked, with its next update; one that has a ready replica is refused that update
    with Kueue's message, as kube-apiserver relays the webhook's denial."""
    async with emulator.serve_emulator() as cluster:
        api = await client.make_api_client(server=str(cluster.url))
        try:
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
            await client.apply_manifest(api, namespace)
            for name in ("idle", "busy"):
                body = apps("Deployment")
                body["metadata"]["name"] = name
                del body["status"]
                created = await client.create_object(api, resources.DEPLOYMENTS, namespace="team", body=body)
                assert QUEUE not in (created["metadata"].get("labels") or {})
                assert parent_mark(created, ("spec", "template")) is None
            await client.patch_object(
                api,
                resources.DEPLOYMENTS,
                namespace="team",
                name="busy",
                subresource="status",
                patch={"status": {"replicas": 2, "readyReplicas": 1}},
            )
            queue = {"metadata": {"name": "default"}, "spec": {"clusterQueue": "cq"}}
            await client.create_object(api, resources.LOCAL_QUEUES, namespace="team", body=queue)

            touch = {"metadata": {"annotations": {"touched": "yes"}}}
            updated = await client.patch_object(api, resources.DEPLOYMENTS, namespace="team", name="idle", patch=touch)
            assert updated["metadata"]["labels"][QUEUE] == "default"
            assert parent_mark(updated, ("spec", "template")) == "deployment"
            assert updated["spec"]["template"]["metadata"]["labels"][QUEUE] == "default"

            with pytest.raises(errors.KubeError) as refused:
                await client.patch_object(api, resources.DEPLOYMENTS, namespace="team", name="busy", patch=touch)
            assert refused.value.status == 403
            assert str(refused.value).endswith(
                f'admission webhook "vdeployment.kb.io" denied the request: '
                f'metadata.labels[{QUEUE}]: Invalid value: "default": field is immutable'
            )
        finally:
            await api.close()


async def test_the_emulator_relays_the_statefulset_webhook_s_denial() -> None:
    """``demo``/``up --emulator``: a managed StatefulSet's replica change is refused as kube-apiserver relays
    Kueue's webhook (403, ``admission webhook "vstatefulset.kb.io" denied the request``), not as an invalid
    object (422: before, the emulator's own validation refused it so); scaling it to 0 is allowed."""
    async with emulator.serve_emulator() as cluster:
        api = await client.make_api_client(server=str(cluster.url))
        try:
            await client.apply_manifest(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
            body = apps("StatefulSet", queue="q")
            del body["status"]
            await client.create_object(api, resources.STATEFUL_SETS, namespace="team", body=body)
            with pytest.raises(errors.KubeError) as refused:
                await client.patch_object(
                    api, resources.STATEFUL_SETS, namespace="team", name="web", patch={"spec": {"replicas": 3}}
                )
            assert refused.value.status == 403
            assert str(refused.value).endswith(
                'admission webhook "vstatefulset.kb.io" denied the request: '
                "spec.replicas: Invalid value: 3: field is immutable"
            )
            scaled = await client.patch_object(
                api, resources.STATEFUL_SETS, namespace="team", name="web", patch={"spec": {"replicas": 0}}
            )
            assert scaled["spec"]["replicas"] == 0
        finally:
            await api.close()


def scaled_down(*, queue: str | None = "q") -> dict[str, Any]:
    """A StatefulSet ``web`` (UID ``sts-uid``) scaled to 0, its pods gone."""
    sts = apps("StatefulSet", queue=queue)
    sts["metadata"]["uid"] = "sts-uid"
    sts["spec"]["replicas"] = 0
    sts["status"] = {"replicas": 0, "readyReplicas": 0}
    return sts


def scale_down_workload(*, on_hold: bool) -> dict[str, Any]:
    """The Workload of ``scaled_down()``'s group, on hold (QuotaReserved False, reason OnHold) or still admitted."""
    reason = {"status": "False", "reason": "OnHold"} if on_hold else {"status": "True", "reason": "QuotaReserved"}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": serving.statefulset_workload_name("web", "sts-uid"), "namespace": "team"},
        "status": {"conditions": [{"type": "QuotaReserved", "message": "", **reason}]},
    }


SCALE_UP_REFUSAL = "spec.replicas: Forbidden: workload from previous scale-down is still being deleted"


async def test_a_statefulset_is_not_scaled_up_while_its_scale_down_workload_is_not_on_hold() -> None:
    """Kueue #7479 (statefulset_webhook.go ValidateUpdate): a managed StatefulSet scaled up from 0 with no pod
    left is refused while its group's Workload (findWorkload: statefulset-<name>-<hash of its UID>) exists
    without being on hold; allowed when that Workload is on hold (the scale-up lets it go) or gone. The server
    reads the Workload only for such a scale-up. Before, kueue-es never read it and let every scale-up through."""
    read: list[tuple[str, str]] = []
    found: dict[str, Any] | None = None

    async def workload(namespace: str, name: str) -> Mapping[str, Any] | None:
        read.append((namespace, name))
        return found

    application = server.app(workload_read=workload)
    old = scaled_down()
    up = scaled_down()
    up["spec"]["replicas"] = 2
    name = serving.statefulset_workload_name("web", "sts-uid")

    found = scale_down_workload(on_hold=False)
    refused = await answer(application, "validate", up, old)
    assert refused["allowed"] is False and refused["status"]["code"] == 403
    assert refused["status"]["message"] == SCALE_UP_REFUSAL
    assert read == [("team", name)]
    found = scale_down_workload(on_hold=True)
    assert await answer(application, "validate", up, old) == {"allowed": True}
    found = None
    assert await answer(application, "validate", up, old) == {"allowed": True}

    read.clear()
    found = scale_down_workload(on_hold=False)
    still_zero = scaled_down()
    still_zero["metadata"]["labels"]["app"] = "web"
    assert await answer(application, "validate", still_zero, old) == {"allowed": True}
    going = scaled_down()
    going["spec"]["replicas"] = 2
    going["status"]["replicas"] = 1
    refused = await answer(application, "validate", going, scaled_down())
    assert refused["status"]["message"] == "spec.replicas: Forbidden: scaling down is still in progress"
    unmanaged, unmanaged_up = scaled_down(queue=None), scaled_down(queue=None)
    unmanaged_up["spec"]["replicas"] = 2
    assert await answer(application, "validate", unmanaged_up, unmanaged) == {"allowed": True}
    assert read == []


async def test_the_emulator_reads_the_scale_down_workload_of_a_statefulset_scaled_up() -> None:
    """``demo``/``up --emulator``: a managed StatefulSet patched up from 0 is refused as Kueue's webhook refuses it
    while the Workload of its scale-down is there without being on hold, and let through once it is on hold."""
    async with emulator.serve_emulator() as cluster:
        api = await client.make_api_client(server=str(cluster.url))
        try:
            await client.apply_manifest(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
            body = apps("StatefulSet", queue="q")
            del body["status"]
            created = await client.create_object(api, resources.STATEFUL_SETS, namespace="team", body=body)
            await client.patch_object(
                api, resources.STATEFUL_SETS, namespace="team", name="web", patch={"spec": {"replicas": 0}}
            )
            name = serving.statefulset_workload_name("web", created["metadata"]["uid"])
            pod_set = {"name": "main", "count": 2, "template": TEMPLATE}
            await client.create_object(
                api,
                resources.WORKLOADS,
                namespace="team",
                body={
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Workload",
                    "metadata": {"name": name, "namespace": "team"},
                    "spec": {"queueName": "q", "podSets": [pod_set]},
                },
            )
            with pytest.raises(errors.KubeError) as refused:
                await client.patch_object(
                    api, resources.STATEFUL_SETS, namespace="team", name="web", patch={"spec": {"replicas": 2}}
                )
            assert refused.value.status == 403
            assert str(refused.value).endswith(
                f'admission webhook "vstatefulset.kb.io" denied the request: {SCALE_UP_REFUSAL}'
            )
            on_hold = {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "OnHold",
                "message": serving.STATEFULSET_ON_HOLD_MESSAGE,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
            await client.patch_object(
                api,
                resources.WORKLOADS,
                namespace="team",
                name=name,
                subresource="status",
                patch={"status": {"conditions": [on_hold]}},
            )
            scaled = await client.patch_object(
                api, resources.STATEFUL_SETS, namespace="team", name="web", patch={"spec": {"replicas": 2}}
            )
            assert scaled["spec"]["replicas"] == 2
        finally:
            await api.close()
