"""Kueue's Job webhook integration tests, on the emulated API server.

Ported from Kueue test/integration/singlecluster/webhook/jobs/job_webhook_test.go: what Kueue's Job webhook
defaults (suspend, the ``default`` LocalQueue, the ``default`` WorkloadPriorityClass label) and refuses (403
``admission webhook "vjob.kb.io" denied the request: ...``) as a Job is created and updated, with
``manageJobsWithoutQueueName`` on (and a namespace the ``managedJobsNamespaceSelector`` leaves out) and off.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import jsonpatch
import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import models
from kueue_es.events.manager_config import FEATURE_GATE_DEPENDENCIES
from kueue_es.jobframework import webhooks
from kueue_es.services.kube import client, errors, resources
from kueue_es.services.webhook import server
from kueue_es.sim import emulator
from tests.kube.test_webhook_updates import answer

QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
STOPPING = "kueue.x-k8s.io/stopping"
MANAGED, UNMANAGED = "job-ns", "unmanaged-ns"


def job(
    name: str, namespace: str = MANAGED, *, queue: str | None = None, suspend: bool | None = False, **spec: Any
) -> dict[str, Any]:
    """testingjob.MakeJob(name, ns): one pod of a busybox container, unsuspended unless said."""
    container = {"name": "c", "image": "pause", "resources": {"requests": {}}}
    body: dict[str, Any] = {
        "parallelism": 1,
        "completions": 1,
        "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        **spec,
    }
    if suspend is not None:
        body["suspend"] = suspend
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {QUEUE: queue} if queue else {}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": body}


async def serve(**options: Any) -> AsyncIterator[k8s_client.ApiClient]:
    async with emulator.serve_emulator(bookmark_interval=0.2, **options) as cluster:
        api = await client.make_api_client(server=str(cluster.url))
        try:
            for name in (MANAGED, UNMANAGED):
                await client.apply_manifest(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            yield api
        finally:
            await api.close()


@pytest.fixture
async def managing() -> AsyncIterator[k8s_client.ApiClient]:
    """manageJobsWithoutQueueName on, the selector leaving out the unmanaged namespace
    (util.NewNamespaceSelectorExcluding)."""
    selector = models.LabelSelector(
        match_expressions=(
            models.LabelSelectorRequirement(key="kubernetes.io/metadata.name", operator="NotIn", values=[UNMANAGED]),
        )
    )
    async for api in serve(manage_jobs_without_queue_name=True, managed_jobs_namespace_selector=selector):
        yield api


@pytest.fixture
async def queued_only() -> AsyncIterator[k8s_client.ApiClient]:
    """manageJobsWithoutQueueName off."""
    async for api in serve():
        yield api


async def create(api: k8s_client.ApiClient, obj: dict[str, Any]) -> dict[str, Any]:
    return await client.create_object(api, resources.JOBS, namespace=obj["metadata"]["namespace"], body=obj)


async def replace(api: k8s_client.ApiClient, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return await client.replace_object(api, resources.JOBS, namespace=meta["namespace"], name=meta["name"], body=obj)


async def refused(write: Any) -> errors.ApiError:
    with pytest.raises(errors.ApiError) as refusal:
        await write
    assert refusal.value.status == 403 and refusal.value.reason == "Forbidden", refusal.value.body
    return refusal.value


# -- manageJobsWithoutQueueName enabled ---------------------------------------------------------------------


async def test_an_invalid_min_parallelism_is_refused(managing: k8s_client.ApiClient) -> None:
    """Kueue's case "checking the workload is not created when JobMinParallelismAnnotation is invalid"."""
    obj = job("job-with-queue-name", queue="foo")
    obj["metadata"]["annotations"] = {MIN_PARALLELISM: "a"}
    refusal = await refused(create(managing, obj))
    assert refusal.message.startswith(
        f'admission webhook "vjob.kb.io" denied the request: metadata.annotations[{MIN_PARALLELISM}]: Invalid value: "a"'
    ), refusal.message


async def test_a_job_without_queue_is_suspended_in_a_managed_namespace_only(managing: k8s_client.ApiClient) -> None:
    """Kueue's case "Should suspend a Job even no queue name specified" and "Should not suspend a Job with no queue name
    specified in an unmanaged namespace"."""
    assert (await create(managing, job("job-without-queue-name")))["spec"]["suspend"] is True
    assert (await create(managing, job("job-without-queue-name-unmanaged", UNMANAGED)))["spec"]["suspend"] is False


async def test_no_default_local_queue_in_an_unmanaged_namespace(managing: k8s_client.ApiClient) -> None:
    """Kueue's case "Should not inject default queue label for a Job in an unmanaged namespace"."""
    queue = {"metadata": {"name": "default"}, "spec": {"clusterQueue": "cluster-queue"}}
    await client.create_object(managing, resources.LOCAL_QUEUES, namespace=UNMANAGED, body=queue)
    created = await create(managing, job("job-default-lq-unmanaged", UNMANAGED))
    assert created["spec"]["suspend"] is False and QUEUE not in (created["metadata"].get("labels") or {})


async def test_a_queue_name_is_not_added_while_unsuspending(managing: k8s_client.ApiClient) -> None:
    """Kueue's case "Should not update unsuspend Job successfully when adding queue name"."""
    created = await create(managing, job("job-without-queue-name"))
    created["metadata"]["labels"] = {QUEUE: "queue"}
    created["spec"]["suspend"] = False
    await refused(replace(managing, created))


# -- manageJobsWithoutQueueName disabled ----------------------------------------------------------------------


async def test_a_queued_job_is_suspended_and_an_unqueued_one_not(queued_only: k8s_client.ApiClient) -> None:
    """Kueue's case "should suspend a Job when created in unsuspend state" and "should not suspend a Job when no queue name
    specified"."""
    assert (await create(queued_only, job("job-with-queue-name", queue="default")))["spec"]["suspend"] is True
    assert (await create(queued_only, job("job-without-queue-name")))["spec"]["suspend"] is False


async def test_the_queue_is_not_changed_while_unsuspending(queued_only: k8s_client.ApiClient) -> None:
    """Kueue's case "should not update unsuspend Job successfully when changing queue name"."""
    created = await create(queued_only, job("job-with-queue-name", queue="queue"))
    created["metadata"]["labels"][QUEUE] = "queue2"
    created["spec"]["suspend"] = False
    await refused(replace(queued_only, created))


@pytest.mark.parametrize("parallelism", [4, 3])
async def test_a_partially_admissible_job_is_unsuspended_with_less_parallelism(
    queued_only: k8s_client.ApiClient, parallelism: int
) -> None:
    """Kueue's case "should allow unsuspending a partially admissible job with its minimum parallelism" and "... with a
    parallelism lower then minimum" (a job re-admitted after its reclaimable pods counted)."""
    obj = job("job-with-queue-name", queue="queue", parallelism=6, completions=6)
    obj["metadata"]["annotations"] = {MIN_PARALLELISM: "4"}
    created = await create(queued_only, obj)
    created["spec"].update(parallelism=parallelism, suspend=False)
    assert (await replace(queued_only, created))["spec"]["parallelism"] == parallelism


async def test_parallelism_is_restored(queued_only: k8s_client.ApiClient) -> None:
    """Kueue's case "should allow restoring parallelism": the stopping annotation removed and the parallelism set back."""
    obj = job("job-with-queue-name", queue="queue", parallelism=3, completions=6)
    obj["metadata"]["annotations"] = {STOPPING: "true", MIN_PARALLELISM: "2"}
    created = await create(queued_only, obj)
    created["spec"]["parallelism"] = 6
    del created["metadata"]["annotations"][STOPPING]
    assert (await replace(queued_only, created))["spec"]["parallelism"] == 6


# -- WorkloadPriorityClassDefaulting ---------------------------------------------------------------------------


async def default_class(api: k8s_client.ApiClient, name: str = "default", value: int = 100) -> None:
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    await client.create_object(api, resources.WORKLOAD_PRIORITY_CLASSES, body=body)


async def test_the_default_workload_priority_class_labels_a_job(queued_only: k8s_client.ApiClient) -> None:
    """Kueue's case "Should set the default WorkloadPriorityClass label when the default WPC exists", "Should not override
    an existing WorkloadPriorityClass label" and "Should not set the label when the default WPC does not exist":
    Kueue's Job webhook labels the Job itself (jobframework/defaults.go ApplyDefaultWorkloadPriorityClass)."""
    without = await create(queued_only, job("job-no-default-wpc", queue="test-queue"))
    assert PRIORITY_CLASS not in without["metadata"]["labels"]
    await default_class(queued_only)
    await default_class(queued_only, "high", 1000)
    labelled = await create(queued_only, job("job-without-wpc", queue="test-queue"))
    assert labelled["metadata"]["labels"][PRIORITY_CLASS] == "default"
    kept = job("job-with-wpc", queue="test-queue")
    kept["metadata"]["labels"][PRIORITY_CLASS] = "high"
    assert (await create(queued_only, kept))["metadata"]["labels"][PRIORITY_CLASS] == "high"


async def test_no_default_workload_priority_class_label_with_the_gate_off() -> None:
    """Kueue's case "Should not set the default WorkloadPriorityClass label when the feature gate is disabled"."""
    async for api in serve(feature_gates={"WorkloadPriorityClassDefaulting": False}):
        await default_class(api)
        created = await create(api, job("job-without-wpc-gate-off", queue="test-queue"))
        assert PRIORITY_CLASS not in created["metadata"]["labels"]


@pytest.mark.parametrize(
    ("exists", "gates", "labels", "want"),
    [
        pytest.param(True, {}, {}, "default", id="the class exists"),
        pytest.param(False, {}, {}, None, id="no such class"),
        pytest.param(True, {"WorkloadPriorityClassDefaulting": False}, {}, None, id="the gate off"),
        pytest.param(True, {}, {PRIORITY_CLASS: "high"}, "high", id="a class named already"),
    ],
)
async def test_the_webhook_service_labels_as_the_emulator(
    exists: bool, gates: dict[str, bool], labels: dict[str, str], want: str | None
) -> None:
    """``kueue-es service webhook`` asks for the WorkloadPriorityClass ``default`` (its ``priority_class``
    lookup) and labels an unqueued Job with it, as Kueue's Job webhook; asked only when the label would be set."""
    asked: list[bool] = []

    async def lookup() -> bool:
        asked.append(True)
        return exists

    application = server.app(priority_class=lookup, feature_gates=gates)
    obj = job("j")
    obj["metadata"]["labels"] = labels
    response = await answer(application, "mutate", obj, None, operation="CREATE")
    out = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"]))) if "patch" in response else obj
    assert out["metadata"]["labels"].get(PRIORITY_CLASS) == want
    assert asked == ([True] if not labels and not gates else [])


# -- pod_webhook_test.go ----------------------------------------------------------------------------------------

GATE, MANAGED_LABEL = "kueue.x-k8s.io/admission", "kueue.x-k8s.io/managed"


def pod(name: str, namespace: str = MANAGED, *, queue: str | None = None) -> dict[str, Any]:
    """testingpod.MakePod(name, ns): one container, the queue-name label when given."""
    metadata = {"name": name, "namespace": namespace, "labels": {QUEUE: queue} if queue else {}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
    }


async def create_pod(api: k8s_client.ApiClient, obj: dict[str, Any]) -> bool:
    """Create the pod; whether Kueue's pod webhook took it: its gate, the managed label and finalizer, all or none."""
    created = await client.create_object(api, resources.PODS, namespace=obj["metadata"]["namespace"], body=obj)
    marks = (
        GATE in [gate["name"] for gate in created["spec"].get("schedulingGates") or []],
        (created["metadata"].get("labels") or {}).get(MANAGED_LABEL) == "true",
        MANAGED_LABEL in (created["metadata"].get("finalizers") or []),
    )
    assert len(set(marks)) == 1, created
    return marks[0]


async def test_a_queued_pod_is_taken_but_not_in_kube_system(queued_only: k8s_client.ApiClient) -> None:
    """Kueue's case "with manageJobsWithoutQueueName disabled": "Should inject scheduling gate, 'managed' label and finalizer
    into created pod", "Should skip a Pod created in the forbidden 'kube-system' namespace", and without the
    queue-name label "Should not inject ..." (the same marks)."""
    assert await create_pod(queued_only, pod("pod-with-queue-name", queue="user-queue"))
    assert not await create_pod(queued_only, pod("pod-with-queue-name", "kube-system", queue="user-queue"))
    assert not await create_pod(queued_only, pod("pod-without-queue-name"))


TAS_OFF = {  # TopologyAwareScheduling off, with the gates on by default that depend on it (manager_config)
    "TopologyAwareScheduling": False,
    **{gate: False for gate, needs in FEATURE_GATE_DEPENDENCIES.items() if "TopologyAwareScheduling" in needs},
}


def scheduling_gates(obj: dict[str, Any]) -> list[str]:
    return [gate["name"] for gate in obj["spec"].get("schedulingGates") or []]


async def test_a_queued_pod_gets_the_topology_gate_only_with_tas_on() -> None:
    """pod_webhook.go Default adds ``kueue.x-k8s.io/topology`` only with the gate TopologyAwareScheduling on: off,
    the watcher builds the pod's pod set without a topology request, so no placer would ever lift that gate
    and the pod would never be scheduled. The emulated API server and ``kueue-es service webhook`` both."""
    async for api in serve(feature_gates=TAS_OFF):
        created = await client.create_object(api, resources.PODS, namespace=MANAGED, body=pod("p", queue="q"))
        assert scheduling_gates(created) == [GATE]
    async for api in serve():
        created = await client.create_object(api, resources.PODS, namespace=MANAGED, body=pod("p", queue="q"))
        assert scheduling_gates(created) == [GATE, "kueue.x-k8s.io/topology"]
    for gates, want in ((TAS_OFF, [GATE]), ({}, [GATE, "kueue.x-k8s.io/topology"])):
        obj = pod("p", queue="q")
        response = await answer(server.app(feature_gates=gates), "mutate", obj, None, operation="CREATE")
        assert scheduling_gates(jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))) == want


async def test_every_pod_is_taken_under_manage_jobs_without_queue_name() -> None:
    """Kueue's case "with manageJobsWithoutQueueName enabled": a pod without the queue-name label is taken, not in
    kube-system."""
    async for api in serve(manage_jobs_without_queue_name=True):
        assert await create_pod(api, pod("pod-integration"))
        assert not await create_pod(api, pod("pod-integration", "kube-system"))


async def test_a_pod_of_a_queued_job_is_left_to_the_job(queued_only: k8s_client.ApiClient) -> None:
    """Kueue's case "the pod is owned by a job": "Should not manage the pod when the ownerReference UID matches the parent
    job" (the other case, a UID that does not match: tests/kube/test_webhook_ancestors.py)."""
    parent = await create(queued_only, job("parent-job", queue="user-queue"))
    obj = pod("pod-with-matching-owner-uid", queue="user-queue")
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "parent-job", "uid": parent["metadata"]["uid"]}
    obj["metadata"]["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
    assert not await create_pod(queued_only, obj)


# -- the other kinds' webhook tests (jobset, mpijob, pytorchjob, appwrapper, rayjob, raycluster, trainjob) ----------

POD_TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "pause"}]}}
TAS_BOTH = {
    "kueue.x-k8s.io/podset-required-topology": "cloud.com/block",
    "kueue.x-k8s.io/podset-preferred-topology": "cloud.com/block",
}


def kind_object(
    api_version: str, kind: str, spec: dict[str, Any], *, queue: str | None = "indexed_job"
) -> dict[str, Any]:
    metadata = {"name": kind.lower(), "namespace": MANAGED, "labels": {QUEUE: queue} if queue else {}}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


def jobset(annotations: dict[str, str] | None = None, *, replicas: int = 1, parallelism: int = 1) -> dict[str, Any]:
    template = {"metadata": {"annotations": annotations or {}}, **POD_TEMPLATE}
    job_spec = {"parallelism": parallelism, "completions": parallelism, "template": template}
    replicated = {"name": "leader", "replicas": replicas, "template": {"spec": job_spec}}
    return kind_object("jobset.x-k8s.io/v1alpha2", "JobSet", {"replicatedJobs": [replicated]})


def mpijob() -> dict[str, Any]:
    replica = {"replicas": 1, "template": POD_TEMPLATE}
    return kind_object("kubeflow.org/v2beta1", "MPIJob", {"mpiReplicaSpecs": {"Launcher": replica, "Worker": replica}})


def pytorchjob(annotations: dict[str, str]) -> dict[str, Any]:
    replica = {"replicas": 1, "template": {"metadata": {"annotations": annotations}, **POD_TEMPLATE}}
    return kind_object("kubeflow.org/v1", "PyTorchJob", {"pytorchReplicaSpecs": {"Master": replica}})


def appwrapper(queue: str) -> dict[str, Any]:
    wrapped = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": POD_TEMPLATE["spec"]}
    spec = {"suspend": False, "components": [{"template": wrapped}]}
    return kind_object("workload.codeflare.dev/v1beta2", "AppWrapper", spec, queue=queue)


def rayjob(**spec: Any) -> dict[str, Any]:
    return kind_object("ray.io/v1", "RayJob", {"entrypoint": "python -c pass", **spec})


SLICE_LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
TAS_REQUIRED = {"kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-block"}
SLICE = {
    "kueue.x-k8s.io/podset-preferred-topology": "cloud.com/topology-block",
    "kueue.x-k8s.io/podset-slice-required-topology": "cloud.com/topology-block",
    "kueue.x-k8s.io/podset-slice-size": "30",
}
REFUSED_KINDS = [
    # (Kueue's case, the object, a part of the 403's message)
    ("jobset: the creation doesn't succeed if the queue name is invalid", jobset(), 'Invalid value: "indexed_job"'),
    (
        "jobset: shouldn't create JobSet if both podset-required-topology and podset-preferred-topology are set",
        jobset(TAS_BOTH),
        "must not contain more than one topology annotation",
    ),
    (
        "jobset: should reject a JobSet whose pod-slice size exceeds total pod count",
        jobset(SLICE, replicas=2, parallelism=3),
        'Invalid value: "30": must not be greater than pod set count 6',
    ),
    (
        "jobset: a multi-layer outermost slice larger than the pod set is refused (kueue-es)",
        jobset(
            {**TAS_REQUIRED, SLICE_LAYERS: '[{"topology":"kubernetes.io/hostname","size":8}]'},
            replicas=2,
            parallelism=3,
        ),
        f"spec.replicatedJobs[0].template.spec.template.metadata.annotations[{SLICE_LAYERS}]: Invalid value: 8: must not"
        " be greater than pod set count 6",
    ),
    ("mpijob: the creation doesn't succeed if the queue name is invalid", mpijob(), 'Invalid value: "indexed_job"'),
    (
        "pytorchjob: the creation doesn't succeed if job contain both topology annotations",
        pytorchjob(TAS_BOTH),
        "must not contain more than one topology annotation",
    ),
    (
        "appwrapper: the creation doesn't succeed if the queue name is invalid",
        appwrapper("indexed_job"),
        'Invalid value: "indexed_job"',
    ),
]


@pytest.mark.parametrize(
    ("layers", "detail"),
    [
        pytest.param('[{"topology":"kubernetes.io/hostname","size":32}]', "Invalid value: 32: must not be greater than pod set count 16", id="outermost-above-count"),
        pytest.param("[]", 'Invalid value: "[]": topology constraints must contain between 1 and 3 entries', id="no-layer"),
    ],
)  # fmt: skip
async def test_a_job_s_multi_layer_slices_are_checked_as_kueue_does(
    queued_only: k8s_client.ApiClient, layers: str, detail: str
) -> None:
    """A user's trial with kubectl: an Indexed Job of 16 pods in slices of 32 hosts (or of no layer) was
    let in, admitted with an empty topology assignment, and its pods stayed gated holding quota; Kueue's Job
    webhook refuses it (tas_validation.go ValidateSliceSizeAnnotationUpperBound's constraints branch,
    validateSliceRequiredTopologyConstraintsAnnotation)."""
    obj = job("sliced", queue="main", parallelism=16, completions=16, completionMode="Indexed")
    obj["spec"]["template"]["metadata"] = {"annotations": {**TAS_REQUIRED, SLICE_LAYERS: layers}}
    refusal = await refused(create(queued_only, obj))
    assert refusal.message == (
        f'admission webhook "vjob.kb.io" denied the request: spec.template.metadata.annotations[{SLICE_LAYERS}]: '
        + detail
    ), refusal.message


@pytest.mark.parametrize(("obj", "message"), [pytest.param(obj, text, id=name) for name, obj, text in REFUSED_KINDS])
async def test_kueue_s_refusals_of_other_kinds(
    queued_only: k8s_client.ApiClient, obj: dict[str, Any], message: str
) -> None:
    """Each refused 403 by its kind's validating webhook with Kueue's message: through the emulated API server
    for a JobSet, which it serves without CRDs, by the webhook's rules (:func:`webhooks.validate_create`, what
    the server and the emulator answer with) for the kinds that need their CRDs installed."""
    if obj["kind"] == "JobSet":
        ref = resources.ref_for(obj["apiVersion"], obj["kind"])
        refusal = await refused(client.create_object(queued_only, ref, namespace=MANAGED, body=obj))
        assert message in refusal.message, refusal.message
        return
    errors_ = webhooks.validate_create(obj["apiVersion"], obj["kind"], obj)
    assert message in webhooks.message(errors_), webhooks.message(errors_)


def test_an_appwrapper_is_created_suspended() -> None:
    """Kueue's case "should suspend an AppWrapper when created in unsuspend state"."""
    obj = appwrapper("queue")
    assert webhooks.default(obj["apiVersion"], obj["kind"], obj)["spec"]["suspend"] is True


def test_an_mpijob_s_refusal_lists_its_errors_by_field() -> None:
    """Kueue's MPIJob webhook sorts its errors by field path, on create and on update (#14483: ValidateUpdate sorted
    another slice than the one it returned, so an update's errors came in check order): a running MPIJob moved to
    another queue with a bad ``max-exec-time-seconds`` label and a bad TAS annotation lists the label errors
    (``metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]`` before ``metadata.labels[...queue-name]``) ahead of
    the template's, whichever rule found them first."""
    old = mpijob()
    old["metadata"]["labels"] = {QUEUE: "a"}
    old["spec"]["runPolicy"] = {"suspend": False}
    new = json.loads(json.dumps(old))
    new["metadata"]["labels"] = {QUEUE: "b", "kueue.x-k8s.io/max-exec-time-seconds": "0"}
    new["spec"]["mpiReplicaSpecs"]["Worker"]["template"] = {"metadata": {"annotations": TAS_BOTH}, **POD_TEMPLATE}
    context = webhooks.Context(topology_aware_scheduling=True)
    created = webhooks.validate_create(new["apiVersion"], new["kind"], new, context=context)
    updated = webhooks.validate_update(new["apiVersion"], new["kind"], old, new, context=context)
    for found in (created, updated):
        assert [e.field for e in found] == sorted(e.field for e in found), [e.field for e in found]
    # ValidateJobOnUpdate's errors first, then validateCommon's: the two on one field stay in that order
    assert [(e.field, e.detail) for e in updated][:3] == [
        ("metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]", "field is immutable"),
        ("metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]", "should be greater than 0"),
        ("metadata.labels[kueue.x-k8s.io/queue-name]", "field is immutable"),
    ]
    # a replica type is a map key: in brackets, as Kueue's field.Path.Key writes it
    assert updated[-1].field == "spec.mpiReplicaSpecs[Worker].template.metadata.annotations"
