"""``managedJobsNamespaceSelector`` in ``kueue-es service webhook --config FILE``, read from the Namespace.

Kueue's webhooks apply the Configuration's selector to the labels of the job's Namespace, which they read
from the API server (jobframework/utils.go namespaceMatchesSelector, pods/pod_webhook.go Default): a Pod
in a namespace it does not select is not gated, queue label or not; a job without the queue-name label
gets neither the ``default`` LocalQueue nor, under ``manageJobsWithoutQueueName``, suspension there. A
queue-labelled job is suspended wherever it is (WorkloadShouldBeSuspended does not ask the selector).
Before, the server ignored the file's selector: only the webhook configurations' fixed namespaceSelector
(kube-system, kueue-system, kueue-es) left namespaces out, so a queue-labelled pod in a namespace the
watcher ignores was gated for ever. The requests are shaped as kube-apiserver sends them.
"""

from __future__ import annotations

import base64
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp.test_utils
import jsonpatch
import pytest

from kueue_es.events import models
from kueue_es.jobframework import webhooks
from kueue_es.services.kube import client, errors, resources
from kueue_es.services.webhook import server
from kueue_es.sim import emulator
from tests.kube.test_webhook_noop import ALLOWED, command, configuration
from tests.kube.test_webhook_server import QUEUE, admission_review, post

SELECTED_LABEL = "kueue-managed"
OPTED_IN = (
    configuration("batch/job", "pod")
    + "manageJobsWithoutQueueName: true\n"
    + f'managedJobsNamespaceSelector:\n  matchLabels:\n    {SELECTED_LABEL}: "true"\n'
)


def pod(namespace: str, *, queue: str | None = "user-queue") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace, "labels": {QUEUE: queue} if queue else {}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def job(namespace: str, *, queue: str | None = None, name: str = "j") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE: queue} if queue else {}},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}},
    }


async def mutate(webhook: tuple[str, ssl.SSLContext], obj: dict[str, Any]) -> dict[str, Any]:
    """The mutating webhook's ``response`` for creating ``obj`` in its namespace (uid checked and dropped)."""
    url, trust = webhook
    served = webhooks.target(obj["apiVersion"], obj["kind"])
    assert served is not None
    group, _, version = obj["apiVersion"].rpartition("/")
    review = admission_review(
        group=group,
        version=version,
        kind=obj["kind"],
        resource=served.plural,
        operation="CREATE",
        obj=obj,
        namespace=obj["metadata"]["namespace"],
    )
    response = dict((await post(url, trust, served.path("mutate"), review))["response"])
    assert response.pop("uid") == review["request"]["uid"]
    return response


def patched(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    assert response["allowed"] is True and response["patchType"] == "JSONPatch", response
    return jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))


def gates(obj: dict[str, Any]) -> list[str]:
    return [g["name"] for g in obj["spec"].get("schedulingGates") or []]


async def test_the_configuration_s_selector_is_matched_against_the_namespace_s_labels(tmp_path: Path) -> None:
    """Namespace ``opted`` carries the label the file's selector asks for, ``other`` not; both have a
    ``default`` LocalQueue."""
    async with emulator.serve_emulator() as cluster:
        api = await client.make_api_client(server=str(cluster.url))
        try:
            for name, labels in (("opted", {SELECTED_LABEL: "true"}), ("other", {})):
                namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
                await client.apply_manifest(api, namespace)
                queue = {"metadata": {"name": "default"}, "spec": {"clusterQueue": "cq"}}
                await client.create_object(api, resources.LOCAL_QUEUES, namespace=name, body=queue)
            async with command(tmp_path, OPTED_IN, kube_server=str(cluster.url)) as webhook:
                opted_pod = patched(pod("opted"), await mutate(webhook, pod("opted")))
                assert gates(opted_pod) == [webhooks.ADMISSION_GATE, webhooks.TOPOLOGY_GATE]
                assert await mutate(webhook, pod("other")) == ALLOWED  # not gated, not marked
                assert await mutate(webhook, pod("other", queue=None)) == ALLOWED
                # a plain Pod gets the default LocalQueue too (pod_webhook.go Default), then is gated
                defaulted = patched(pod("opted", queue=None), await mutate(webhook, pod("opted", queue=None)))
                assert defaulted["metadata"]["labels"][QUEUE] == "default" and gates(defaulted)

                opted_job = patched(job("opted"), await mutate(webhook, job("opted")))
                assert opted_job["metadata"]["labels"] == {QUEUE: "default"} and opted_job["spec"]["suspend"] is True
                assert await mutate(webhook, job("other")) == ALLOWED  # no default queue, not suspended
                # a queue-labelled job is suspended wherever it is, as Kueue's WorkloadShouldBeSuspended has it
                queued = patched(job("other", queue="q"), await mutate(webhook, job("other", queue="q")))
                assert queued["spec"]["suspend"] is True

                # the Namespace is read for each request: labelled now, its pods are gated from now on
                await client.patch_object(
                    api, resources.NAMESPACES, name="other", patch={"metadata": {"labels": {SELECTED_LABEL: "true"}}}
                )
                assert gates(patched(pod("other"), await mutate(webhook, pod("other"))))[0] == webhooks.ADMISSION_GATE
        finally:
            await api.close()


@pytest.mark.slow  # about 10 s on 2 cores: run by .ci/run's slow stage
async def test_without_an_api_a_namespace_has_only_its_name(tmp_path: Path) -> None:
    """No Kubernetes API: Kueue's default selector still leaves kube-system out (it names namespaces only),
    and a selector on other labels selects no namespace."""
    for run in ("default", "labels"):
        (tmp_path / run).mkdir()
    async with command(tmp_path / "default", configuration("pod")) as webhook:
        assert await mutate(webhook, pod("kube-system")) == ALLOWED
        assert gates(patched(pod("team"), await mutate(webhook, pod("team"))))[0] == webhooks.ADMISSION_GATE
    async with command(tmp_path / "labels", OPTED_IN) as webhook:
        assert await mutate(webhook, pod("team")) == ALLOWED


async def test_a_namespace_that_cannot_be_read_fails_the_call() -> None:
    """Kueue's webhook fails the request when its Namespace read fails; the server answers 500, and asks
    nothing for a request whose answer the namespace cannot change (a queue-labelled Job)."""
    asked: list[str] = []

    async def broken(namespace: str) -> dict[str, str] | None:
        asked.append(namespace)
        raise errors.ConnectionFailedError("the API server is down")

    application = server.app(
        namespace_selector=models.LabelSelector(match_labels={SELECTED_LABEL: "true"}), namespace_labels=broken
    )
    async with aiohttp.test_utils.TestServer(application) as test_server, aiohttp.ClientSession() as session:
        review = admission_review(
            group="", version="v1", kind="Pod", resource="pods", operation="CREATE", obj=pod("team")
        )
        async with session.post(test_server.make_url("/mutate--v1-pod"), json=review) as response:
            assert response.status == 500 and "cannot read the namespace" in await response.text()
        queued_job = job("team", queue="q")
        review = admission_review(
            group="batch", version="v1", kind="Job", resource="jobs", operation="CREATE", obj=queued_job
        )
        async with session.post(test_server.make_url("/mutate-batch-v1-job"), json=review) as response:
            assert response.status == 200
    assert asked == ["team"]


# -- the emulated API server applies the same rule -----------------------------------------------


async def test_the_emulator_s_webhooks_follow_the_selector_and_manage_option() -> None:
    """``demo``/``up --emulator`` with ``--config``: the emulated API server's webhooks take the file's
    selector and ``manageJobsWithoutQueueName`` (ClusterEmulator's settings) and read the stored Namespace's
    labels, so its pods and jobs are created as the webhook server above creates them."""
    selector = models.LabelSelector(match_labels={SELECTED_LABEL: "true"})
    async with emulator.serve_emulator(
        managed_jobs_namespace_selector=selector, manage_jobs_without_queue_name=True
    ) as cluster:
        api = await client.make_api_client(server=str(cluster.url))
        try:
            for name, labels in (("opted", {SELECTED_LABEL: "true"}), ("other", {})):
                namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
                await client.apply_manifest(api, namespace)
                queue = {"metadata": {"name": "default"}, "spec": {"clusterQueue": "cq"}}
                await client.create_object(api, resources.LOCAL_QUEUES, namespace=name, body=queue)

            async def create(obj: dict[str, Any]) -> dict[str, Any]:
                ref = resources.PODS if obj["kind"] == "Pod" else resources.JOBS
                return await client.create_object(api, ref, namespace=obj["metadata"]["namespace"], body=obj)

            assert gates(await create(pod("opted"))) == [webhooks.ADMISSION_GATE, webhooks.TOPOLOGY_GATE]
            other_pod = await create(pod("other"))
            assert gates(other_pod) == [] and webhooks.MANAGED_LABEL not in other_pod["metadata"]["labels"]
            defaulted = await create({**pod("opted", queue=None), "metadata": {"name": "q", "namespace": "opted"}})
            assert defaulted["metadata"]["labels"][QUEUE] == "default" and gates(defaulted)  # as the server's

            opted_job = await create(job("opted"))
            assert opted_job["metadata"]["labels"] == {QUEUE: "default"} and opted_job["spec"]["suspend"] is True
            other_job = await create(job("other"))
            assert QUEUE not in other_job["metadata"]["labels"] and not other_job["spec"].get("suspend")
            queued = await create(job("other", queue="q", name="k"))  # suspended wherever it is, as above
            assert queued["spec"]["suspend"] is True
        finally:
            await api.close()


async def test_the_emulator_calls_no_job_webhook_in_the_namespaces_its_configurations_leave_out() -> None:
    """Kueue's webhook configurations leave kube-system and kueue-system out of every job and Pod webhook
    (config/components/webhook/kustomization.yaml namespaceSelector), kueue-es's its own namespace too
    (deploy/base/webhook-configurations.yaml): kube-apiserver never calls them there, so a queue-labelled Job,
    JobSet, Deployment or Pod is stored as written and, the namespace being one no managedJobsNamespaceSelector may
    select, runs unmanaged. The emulator played the webhooks there too: such a Job was suspended for good, with no
    Workload. Kueue's Workload webhooks have no namespaceSelector and still apply."""
    async with emulator.serve_emulator() as cluster:
        api = await client.make_api_client(server=str(cluster.url))
        try:
            for name in ("kueue-system", "kueue-es"):
                await client.apply_manifest(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

            async def create(ref: resources.ResourceRef, obj: dict[str, Any]) -> dict[str, Any]:
                return await client.create_object(api, ref, namespace=obj["metadata"]["namespace"], body=obj)

            def deployment(namespace: str) -> dict[str, Any]:
                template = {"metadata": {"labels": {"app": "d"}}, "spec": pod(namespace)["spec"]}
                spec = {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": template}
                meta = {"name": "d", "namespace": namespace, "labels": {QUEUE: "user-queue"}}
                return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}

            def jobset(namespace: str) -> dict[str, Any]:
                meta = {"name": "js", "namespace": namespace, "labels": {QUEUE: "user-queue"}}
                replicated = [{"name": "w", "replicas": 1, "template": {"spec": job(namespace)["spec"]}}]
                return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta,
                        "spec": {"replicatedJobs": replicated}}  # fmt: skip

            # in a namespace the configurations let through, the webhooks act (the control)
            assert (await create(resources.JOBS, job("default", queue="user-queue")))["spec"]["suspend"] is True
            assert gates(await create(resources.PODS, pod("default")))[0] == webhooks.ADMISSION_GATE
            for namespace in ("kube-system", "kueue-system", "kueue-es"):
                created = await create(resources.JOBS, job(namespace, queue="user-queue"))
                assert not created["spec"].get("suspend"), namespace  # mjob.kb.io not called
                stored = await create(resources.PODS, pod(namespace))
                assert gates(stored) == [] and webhooks.MANAGED_LABEL not in stored["metadata"]["labels"], namespace
                assert not stored["metadata"].get("finalizers"), namespace
                assert not (await create(resources.JOBSETS, jobset(namespace)))["spec"].get("suspend"), namespace
                made = await create(resources.DEPLOYMENTS, deployment(namespace))
                assert made["spec"]["template"]["metadata"]["labels"] == {"app": "d"}, namespace
                made["spec"]["replicas"] = 2  # mdeployment.kb.io, which also defaults updates: not called either
                updated = await client.replace_object(
                    api, resources.DEPLOYMENTS, namespace=namespace, name="d", body=made
                )
                assert updated["spec"]["template"]["metadata"]["labels"] == {"app": "d"}, namespace
                # vjob.kb.io is not called either: what it refuses elsewhere is stored
                invalid = job(namespace, queue="user-queue", name="invalid")
                invalid["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "a"}
                await create(resources.JOBS, invalid)
            elsewhere = job("default", queue="user-queue", name="invalid")
            elsewhere["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "a"}
            with pytest.raises(errors.ApiError) as refused:
                await create(resources.JOBS, elsewhere)
            assert refused.value.status == 403 and "vjob.kb.io" in refused.value.message
            # a Workload in kube-system still meets Kueue's Workload webhooks (no namespaceSelector): two pod sets
            # with minCount are refused by vworkload.kb.io
            pod_sets = [
                {"name": name, "count": 2, "minCount": 1, "template": {"spec": pod("kube-system")["spec"]}}
                for name in ("a", "b")
            ]
            workload = {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {"name": "w", "namespace": "kube-system"},
                "spec": {"podSets": pod_sets},
            }
            with pytest.raises(errors.ApiError) as refused:
                await create(resources.WORKLOADS, workload)
            assert refused.value.status == 403 and "vworkload.kb.io" in refused.value.message, refused.value.message
        finally:
            await api.close()
