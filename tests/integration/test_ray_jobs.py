"""KubeRay's kinds through the edge (jobframework/integrations/ray.py): Kueue's sample RayJob, RayCluster and
RayService, each through its life (:mod:`tests.integration.lifecycle`), and a RayCluster a RayJob created.

The statuses are what KubeRay writes: a RayJob's ``jobDeploymentStatus`` / ``jobStatus`` and its cluster's
state, a RayCluster's ``state``, a RayService's ``Ready`` condition. A RayCluster or RayService never
finishes, so their lives end at the second start.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework import integrations
from kueue_es.jobframework import slices as job_slices
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import serve_emulator
from tests.integration.harness import admitter, dispatcher_with_consumer, events_of, running, set_up_queues, wait_for
from tests.integration.lifecycle import Statuses, run_lifecycle, served, until, write_status
from tests.kube import examples

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def api() -> AsyncIterator[k8s_client.ApiClient]:
    """An emulated API server serving the KubeRay kinds, and a client for it."""
    kinds = tuple(served(kind) for kind in ("RayJob", "RayCluster", "RayService"))
    async with serve_emulator(bookmark_interval=0.2, extra_resources=kinds) as emu:
        client = await kube.make_api_client(server=emu.url)
        try:
            yield client
        finally:
            await client.close()


def sample(name: str) -> dict[str, Any]:
    [doc] = [d for d in examples.load(f"jobs/{name}.yaml") if d["kind"] != "ConfigMap"]
    doc["metadata"].setdefault("namespace", "default")
    return doc


@pytest.mark.parametrize("message", ["", "done"])
async def test_sample_rayjob(api: k8s_client.ApiClient, bus: MemoryBus, message: str) -> None:
    """jobs/ray-job-sample.yaml: head (1), small-group (1), submitter (1); spec.suspend; finished by
    jobDeploymentStatus Complete with jobStatus SUCCEEDED, its Workload's Finished message the RayJob's
    ``status.message`` as it is (rayjob_controller.go Finished), empty when KubeRay wrote none. Before, an
    empty one was made up: "RayJob finished"."""
    ready_cluster = {"state": "ready"}
    await run_lifecycle(
        api,
        bus,
        sample("ray-job-sample"),
        pod_sets=[("head", 1), ("small-group", 1), ("submitter", 1)],
        statuses=Statuses(
            running={"jobDeploymentStatus": "Initializing", "rayClusterStatus": {"state": ""}},
            ready={"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "rayClusterStatus": ready_cluster},
            inactive={"jobDeploymentStatus": "Suspended", "rayClusterStatus": {}},
            finished={"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": message},
        ),
        finished_message=message,
    )


async def test_sample_raycluster(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """jobs/ray-cluster-sample.yaml: head (1), small-group (1); spec.suspend; active while ``ready``."""
    await run_lifecycle(
        api,
        bus,
        sample("ray-cluster-sample"),
        pod_sets=[("head", 1), ("small-group", 1)],
        statuses=Statuses(
            running={"state": ""},
            ready={"state": "ready", "readyWorkerReplicas": 1},
            inactive={"state": "suspended"},
            finished=None,
        ),
    )


async def test_sample_rayservice(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """jobs/ray-service-sample.yaml: head (1), small-group (1); spec.rayClusterConfig.suspend; active while
    its Ready condition is True."""

    def ready(status: str) -> dict[str, Any]:
        return {"conditions": [{"type": "Ready", "status": status, "reason": "x", "message": "x"}]}

    await run_lifecycle(
        api,
        bus,
        sample("ray-service-sample"),
        pod_sets=[("head", 1), ("small-group", 1)],
        statuses=Statuses(running=ready("False"), ready=ready("True"), inactive=ready("False"), finished=None),
    )


async def test_a_rayjobs_raycluster_is_part_of_the_rayjob(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """The RayCluster KubeRay creates for a RayJob carries the RayJob's queue label and a controller owner
    reference to it: Kueue's webhook leaves it unsuspended and it gives no workload of its own; the
    autoscaling sample without its elastic-job annotation is refused by the webhook, naming the field, the gate
    ElasticJobsViaWorkloadSlices on by default (without the webhook the watcher reports the same as an
    ObjectRejected: tests/kube/test_ray_conversion.py)."""
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run()):
        job = await kube.apply_manifest(api, sample("ray-job-sample"))
        cluster = sample("ray-cluster-sample")
        cluster["metadata"]["name"] = "rayjob-sample-raycluster-abcde"
        cluster["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayJob",
                "name": job["metadata"]["name"],
                "uid": job["metadata"]["uid"],
                "controller": True,
            }
        ]
        created = await kube.apply_manifest(api, cluster)
        autoscaling = sample("ray-job-autoscaling-sample")
        del autoscaling["metadata"]["annotations"]  # not elastic: autoscaling is refused
        with pytest.raises(kube_errors.ApiError, match="enableInTreeAutoscaling") as refused:
            await kube.apply_manifest(api, autoscaling)  # Kueue's webhook: 403
        await kube.apply_manifest(api, sample("ray-service-sample"))  # a later marker
        facts = await wait_for(bus, types.WorkloadObserved, count=2)

    assert created["spec"].get("suspend") is not True
    assert sorted(f.workload.owner.kind for f in facts if f.workload.owner) == ["RayJob", "RayService"]
    assert 'admission webhook "vrayjob.kb.io" denied the request' in str(refused.value)
    assert len(await events_of(bus, types.WorkloadObserved)) == 2


ELASTIC_GATES = "ElasticJobsViaWorkloadSlices=true"


@pytest.fixture
async def elastic_api() -> AsyncIterator[k8s_client.ApiClient]:
    """The KubeRay kinds served with ElasticJobsViaWorkloadSlices on in the emulator's Kueue webhooks."""
    kinds = tuple(served(kind) for kind in ("RayJob", "RayCluster", "RayService"))
    async with serve_emulator(bookmark_interval=0.2, extra_resources=kinds, elastic_jobs=True) as emu:
        client = await kube.make_api_client(server=emu.url)
        try:
            yield client
        finally:
            await client.close()


def elastic(doc: dict[str, Any]) -> dict[str, Any]:
    doc["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    return doc


def counts(fact: types.WorkloadObserved) -> dict[str, int]:
    return {ps.name: ps.count for ps in fact.workload.spec.pod_sets}


async def test_an_elastic_rayclusters_scale_up_is_a_replacement_slice(
    elastic_api: k8s_client.ApiClient, bus: MemoryBus
) -> None:
    """ElasticJobsViaWorkloadSlices (SEMANTICS-ADVANCED D.2, raycluster_webhook.go): an elastic RayCluster with
    in-tree autoscaling is accepted, its head and worker templates gated; its first slice is named for its
    generation; once it runs, its worker group scaled from 1 to 3 (what the Ray autoscaler writes) is a new
    slice replacing the first, and a scale-down updates the newest slice in place."""
    cluster = elastic(sample("ray-cluster-sample"))
    cluster["spec"]["enableInTreeAutoscaling"] = True
    watcher = Watcher(bus=bus, api=elastic_api, feature_gates=ELASTIC_GATES)
    async with running(watcher.run()):
        created = await kube.apply_manifest(elastic_api, cluster)
        [first] = await wait_for(bus, types.WorkloadObserved)
        ref = kube.ref_for("ray.io/v1", "RayCluster")
        name, namespace = created["metadata"]["name"], created["metadata"]["namespace"]
        # the dispatcher's start, then the autoscaler's scale-up
        await kube.patch_object(elastic_api, ref, namespace=namespace, name=name, patch={"spec": {"suspend": False}})
        groups = created["spec"]["workerGroupSpecs"]
        groups[0]["replicas"] = 3
        await kube.patch_object(
            elastic_api, ref, namespace=namespace, name=name, patch={"spec": {"workerGroupSpecs": groups}}
        )
        facts = await wait_for(bus, types.WorkloadObserved, count=2)
        groups[0]["replicas"] = 2
        await kube.patch_object(
            elastic_api, ref, namespace=namespace, name=name, patch={"spec": {"workerGroupSpecs": groups}}
        )
        facts = await wait_for(bus, types.WorkloadObserved, count=3)

    templates = [created["spec"]["headGroupSpec"]["template"], groups[0]["template"]]
    assert all(t["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/elastic-job"}] for t in templates)
    assert first.workload.metadata.name.startswith("raycluster-raycluster-complete-")
    assert first.workload.metadata.annotations["kueue.x-k8s.io/workload-slice-name"] == first.workload.metadata.name
    assert counts(first) == {"head": 1, "small-group": 1}
    assert first.workload.spec.pod_sets[0].requests["cpu"] == 1500, "the head counts the autoscaler sidecar"
    replacement = facts[1].workload
    assert replacement.metadata.name != first.workload.metadata.name
    assert replacement.metadata.annotations["kueue.x-k8s.io/workload-slice-replacement-for"] == (
        f"{namespace}/{first.workload.metadata.name}"
    )
    assert replacement.metadata.annotations["kueue.x-k8s.io/workload-slice-name"] == first.workload.metadata.name
    assert counts(facts[1]) == {"head": 1, "small-group": 3}
    # the replacement holds no quota yet: the scale-down follows it in place
    assert facts[2].workload.metadata.name == replacement.metadata.name and counts(facts[2])["small-group"] == 2


async def test_an_elastic_rayjob_takes_its_worker_counts_from_its_raycluster(
    elastic_api: k8s_client.ApiClient, bus: MemoryBus
) -> None:
    """rayjob_controller.go PodSets / raycluster UpdatePodSets: an elastic autoscaling RayJob's workers are
    counted from the RayCluster KubeRay made for it (``status.rayClusterName``), which the Ray autoscaler
    scales; the replacement slice's name hashes ``<generation>_<the RayCluster's generation>``."""
    rayjob = elastic(sample("ray-job-sample"))
    rayjob["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    watcher = Watcher(bus=bus, api=elastic_api, feature_gates=ELASTIC_GATES)
    async with running(watcher.run()):
        job = await kube.apply_manifest(elastic_api, rayjob)
        [first] = await wait_for(bus, types.WorkloadObserved)
        job_ref = kube.ref_for("ray.io/v1", "RayJob")
        namespace = job["metadata"]["namespace"]
        started = await kube.patch_object(
            elastic_api,
            job_ref,
            namespace=namespace,
            name=job["metadata"]["name"],
            patch={"spec": {"suspend": False}},
        )
        cluster = {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {
                "name": "rayjob-sample-raycluster-abcde",
                "namespace": namespace,
                "labels": dict(job["metadata"]["labels"]),
                "annotations": dict(job["metadata"]["annotations"]),
                "ownerReferences": [
                    {
                        "apiVersion": "ray.io/v1",
                        "kind": "RayJob",
                        "name": job["metadata"]["name"],
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": job["spec"]["rayClusterSpec"],
        }
        created = await kube.apply_manifest(elastic_api, cluster)
        await kube.patch_object(
            elastic_api,
            job_ref,
            namespace=namespace,
            name=job["metadata"]["name"],
            patch={"status": {"rayClusterName": created["metadata"]["name"], "jobDeploymentStatus": "Running"}},
            subresource="status",
        )
        groups = created["spec"]["workerGroupSpecs"]
        groups[0]["replicas"] = 3
        scaled = await kube.patch_object(
            elastic_api,
            kube.ref_for("ray.io/v1", "RayCluster"),
            namespace=namespace,
            name=created["metadata"]["name"],
            patch={"spec": {"workerGroupSpecs": groups}},
        )
        facts = await wait_for(bus, types.WorkloadObserved, count=2)

    # the RayJob's own cluster is gated by the RayCluster webhook (it carries the RayJob's annotations)
    assert created["spec"]["headGroupSpec"]["template"]["spec"]["schedulingGates"]
    assert counts(first) == {"head": 1, "small-group": 1, "submitter": 1}
    assert counts(facts[1]) == {"head": 1, "small-group": 3, "submitter": 1}
    extra = f"{started['metadata']['generation']}_{scaled['metadata']['generation']}"
    assert facts[1].workload.metadata.name == job_slices.slice_name(
        job_name=job["metadata"]["name"],
        job_uid=job["metadata"]["uid"],
        generation=started["metadata"]["generation"],
        kind="RayJob",
        group="ray.io",
        extra=extra,
    )
    assert len(await events_of(bus, types.WorkloadObserved)) == 2, "the RayCluster is no workload of its own"


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), {})


async def test_a_rayjob_kuberay_refused_puts_its_workload_on_hold(api: k8s_client.ApiClient, bus: MemoryBus) -> None:
    """Kueue #14192 (rayjob_controller.go IsOnHold, reconciler.go JobWithOnHold): an admitted RayJob whose
    ``jobDeploymentStatus`` turns ``ValidationFailed`` (KubeRay will not run its spec) gives its quota back,
    QuotaReserved=False ``OnHold`` "Job is on hold", and its workload is not queued again; before, it kept the
    quota for good. The job itself is left as it is: Kueue's reconciler returns at its on-hold step."""
    rayjob = served("RayJob")
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(Watcher(bus=bus, api=api).run(), admitter(bus).run(), dispatcher.fold_forever()):
        async with running(dispatcher.consume(consumer)):
            await set_up_queues(api, cpu=64)
            created = await kube.apply_manifest(api, sample("ray-job-sample"))
            name = integrations.registry()["RayJob"].workload_name("rayjob-sample", created["metadata"]["uid"])
            await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
            await write_status(api, rayjob, "rayjob-sample", {"jobDeploymentStatus": "Initializing"})
            await write_status(api, rayjob, "rayjob-sample", {"jobDeploymentStatus": "ValidationFailed"})
            [released] = await wait_for(bus, types.QuotaReleased, workload__name=name, timeout=10)
            assert released.reason == "OnHold"
            held = await until(
                api, resources.WORKLOADS, name, lambda w: _condition(w, "QuotaReserved").get("reason") == "OnHold"
            )
            reserved = _condition(held, "QuotaReserved")
            assert (reserved["status"], reserved["message"]) == ("False", "Job is on hold")
            assert "admission" not in held.get("status", {})
            await write_status(
                api, rayjob, "rayjob-sample", {"jobDeploymentStatus": "ValidationFailed", "message": "x"}
            )
            await asyncio.sleep(1)
            assert (
                len(await events_of(bus, types.QuotaReserved)) + len(await events_of(bus, types.WorkloadAdmitted)) == 1
            )
            assert len(await events_of(bus, types.WorkloadObserved, workload__on_hold="Job is on hold")) == 1
            job = await until(api, rayjob, "rayjob-sample", lambda o: True)
            assert job["spec"]["suspend"] is False
