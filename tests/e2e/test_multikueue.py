"""Issue 20's done-when with real processes: a manager and two worker clusters, each its own kueue-es.

Each cluster is an emulated API server with its own nats-server and kueue-es services as processes
(:mod:`kueue_es.multikueue_demo`); the manager also runs the ``multikueue`` decider and the MultiKueue
edge, and has Kueue's ``multikueue-setup.yaml`` applied unchanged (plus the second worker). Checked
here, on the API servers and on the manager's log:

- a Job is copied to the workers, runs on one, and its finish comes back to the manager's Job
  (status mirrored: the manager's watcher sees it Complete and the workload finishes);
- a JobSet is dispatched the same way (the remote JobSet, ``managedBy`` cleared and naming the
  Workload it adopts; finished here by writing its status, as the JobSet controller would);
- a worker that becomes unreachable is marked inactive, its workload is dispatched again to the other
  worker after ``workerLostTimeout``, and once it is back its stale copy is removed;
- an orphan (a Workload of this origin the manager does not know) is collected by the GC;
- a MultiKueueCluster whose Secret is missing is Active=False ``BadKubeConfig`` (setup_test.go);
- the admission on a worker is a ``MultiKueue`` Event on the manager's Workload (jobs_test.go);
- a plain Pod runs on a worker only: the manager's stays gated and takes the remote one's status (pod_test.go);
- a pod group runs whole on a worker, each manager Pod taking its copy's status, and finishes (pod_test.go);
- a running Job's priority class changed on the manager reaches its copy on the worker (scheduler_test.go).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from kueue_es.events import codec, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.multikueue_demo import (
    WORKERS,
    Cluster,
    demo_manifests,
    manager_configuration,
    setup_manifests,
    start_system,
)
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors, resources
from kueue_es.services.multikueue_edge import remote
from kueue_es.sim import custom_resources
from tests.e2e.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "kueue_es" / "demo_manifests" / "multikueue-setup.yaml"
JOBSET_CRD = ROOT / "tests" / "fixtures" / "crds" / "jobset.x-k8s.io_jobsets.yaml"
ORIGIN = remote.ORIGIN_LABEL


async def _log(cluster: Cluster) -> list[tuple[str, types.Event]]:
    assert cluster.auth is not None
    bus = await nats_bus.connect(cluster.nats_url, credentials=cluster.auth.credentials("reader"))
    try:
        last = await bus.last_seq()
        out: list[tuple[str, types.Event]] = []
        if last == 0:
            return out
        async for message in bus.read(subjects=("kq.>",), start_seq=1):
            # a DecisionRecord's carried decisions (schema 17) under its own subject, kq.dec.<p>.head.*
            out.extend((message.subject, event) for event in types.with_carried(codec.decode(message.data)))
            if message.seq >= last:
                break
        return out
    finally:
        await bus.close()


async def _workloads(cluster: Cluster) -> dict[str, dict[str, Any]]:
    items, _ = await kube.list_objects(cluster.api, resources.WORKLOADS, namespace="default")
    return {item["metadata"]["name"]: item for item in items}


async def _get(cluster: Cluster, ref: resources.ResourceRef, name: str) -> dict[str, Any] | None:
    """The object, or None while it does not exist (yet)."""
    try:
        return await kube.get_object(cluster.api, ref, namespace="default" if ref.namespaced else None, name=name)
    except errors.NotFoundError:
        return None


def _conditions(obj: dict[str, Any] | None) -> dict[str, str]:
    if obj is None:
        return {}
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def _job(name: str, *, seconds: float) -> dict[str, Any]:
    _, job = demo_manifests()
    job = {**job, "metadata": {**job["metadata"], "name": name}}
    job["metadata"].pop("generateName", None)
    job["metadata"]["annotations"] = {"kueue-es.dev/sim-duration-seconds": str(seconds)}
    return job


async def _unsuspended(cluster: Any, resource: Any, name: str) -> bool:
    """Whether the object ``name`` on ``cluster`` exists with ``spec.suspend`` false."""
    obj = await _get(cluster, resource, name)
    return obj is not None and not (obj.get("spec") or {}).get("suspend")


def _jobset(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                                    ],
                                }
                            },
                        }
                    },
                }
            ]
        },
    }


PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {"kueue-es.dev/sim-duration-seconds": "1"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


async def _a_pod_runs_on_a_worker(manager: Cluster, workers: list[Cluster]) -> None:
    """A plain Pod through MultiKueue (pod_test.go): copied to the winner, which runs it; the manager's Pod stays
    gated (Kueue skips a ComposableJob's local start) and takes the remote one's status."""
    await kube.create_object(manager.api, resources.PODS, namespace="default", body=_pod("lone"))
    lone = await _manager_workload_of(manager, "lone")
    [winner] = await eventually(lambda: _chosen(manager, f"default/{lone}"), what="the Pod's worker")
    cluster = {w.name: w for w in workers}[winner]
    remote_pod = await eventually(lambda: _get(cluster, resources.PODS, "lone"), what="the remote Pod")
    assert remote_pod["metadata"]["labels"][remote.PREBUILT_WORKLOAD_LABEL] == lone
    # the worker's kueue-es starts it (ungates it); it is finished by its (absent) kubelet's status
    await eventually(
        lambda: _get(cluster, resources.PODS, "lone"),
        lambda p: {"name": "kueue.x-k8s.io/admission"} not in ((p or {}).get("spec") or {}).get("schedulingGates", []),
        what="the remote Pod ungated by its worker",
    )
    await kube.patch_object(
        cluster.api,
        resources.PODS,
        namespace="default",
        name="lone",
        subresource="status",
        patch={"status": {"phase": "Succeeded"}},
    )
    local_pod = await eventually(
        lambda: _get(manager, resources.PODS, "lone"),
        lambda p: (p.get("status") or {}).get("phase") == "Succeeded",
        what="the manager's Pod Succeeded (mirrored)",
        timeout=60,
    )
    assert {"name": "kueue.x-k8s.io/admission"} in local_pod["spec"]["schedulingGates"]
    # waitForWorkloadToFinishAndRemoteWorkloadToBeDeleted(key, ""): a single Pod's finish has no message
    await _finished_and_gone(manager, workers, lone, message="")


async def _finished_and_gone(manager: Cluster, workers: list[Cluster], workload: str, *, message: str) -> None:
    """pod_test.go's waitForWorkloadToFinishAndRemoteWorkloadToBeDeleted: the manager's Workload Finished, True,
    Succeeded with ``message``, and no copy of it left on any worker."""
    await eventually(
        lambda: _get(manager, resources.WORKLOADS, workload),
        lambda wl: any(
            (c["type"], c["status"], c["reason"], c.get("message") or "") == ("Finished", "True", "Succeeded", message)
            for c in ((wl or {}).get("status") or {}).get("conditions") or []
        ),
        what=f"the manager's {workload} finished",
        timeout=60,
    )
    for worker in workers:
        await eventually(
            lambda w=worker: _workloads(w), lambda wls: workload not in wls, what=f"{workload}'s copies gone"
        )


async def _a_pod_group_runs_on_a_worker(manager: Cluster, workers: list[Cluster]) -> None:
    """A pod group through MultiKueue (pod_test.go "Should create a pod group on worker if admitted"): every Pod of
    it is copied to the winner; each finished there, the manager's take their statuses and stay gated, the workload
    finishes "Pods succeeded: 3/3." and the copies and their Pods leave the workers."""
    names = [f"test-group-{i}" for i in range(3)]
    for name in names:
        pod = _pod(name)
        pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "test-group"
        pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "3"
        await kube.create_object(manager.api, resources.PODS, namespace="default", body=pod)
    [winner] = await eventually(lambda: _chosen(manager, "default/test-group"), what="the pod group's worker")
    cluster = {w.name: w for w in workers}[winner]
    admitted_on = f'The workload was admitted on "{winner}"'
    await eventually(
        lambda: _get(manager, resources.WORKLOADS, "test-group"),
        lambda wl: (
            any(
                (c.get("state"), c.get("message")) == ("Ready", admitted_on)
                for c in ((wl or {}).get("status") or {}).get("admissionChecks") or []
            )
            and _conditions(wl).get("Admitted") == "True"
        ),
        what="the group admitted, its MultiKueue check Ready",
    )
    await eventually(
        lambda: _events_about(manager, "test-group"),
        lambda found: ("Normal", "MultiKueue", admitted_on) in found,
        what="the group's MultiKueue Event",
    )
    gate = {"name": "kueue.x-k8s.io/admission"}
    for name in names:
        remote_pod = await eventually(
            lambda n=name: _get(cluster, resources.PODS, n),
            lambda p: p is not None and gate not in (p.get("spec") or {}).get("schedulingGates", []),
            what=f"the remote Pod {name} ungated by its worker",
        )
        assert remote_pod["metadata"]["labels"][remote.PREBUILT_WORKLOAD_LABEL] == "test-group"
        await kube.patch_object(
            cluster.api,
            resources.PODS,
            namespace="default",
            name=name,
            subresource="status",
            patch={"status": {"phase": "Succeeded"}},
        )
    await _finished_and_gone(manager, workers, "test-group", message="Pods succeeded: 3/3.")
    for name in names:
        local_pod = await _get(manager, resources.PODS, name)
        assert local_pod is not None and local_pod["status"]["phase"] == "Succeeded"
        assert gate in local_pod["spec"]["schedulingGates"]
    await eventually(
        lambda: kube.list_objects(cluster.api, resources.PODS, namespace="default"),
        lambda listed: not {p["metadata"]["name"] for p in listed[0]} & set(names),
        what="the group's Pods gone from the worker",
    )


async def _events_about(cluster: Cluster, workload: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the Events about Workload ``workload`` on ``cluster``."""
    items, _ = await kube.list_objects(cluster.api, resources.EVENTS, namespace="default")
    return [
        (e.get("type", ""), e.get("reason", ""), e.get("note") or e.get("message") or "")
        for e in items
        if (e.get("regarding") or e.get("involvedObject") or {}).get("name") == workload
    ]


async def _chosen(manager: Cluster, key: str) -> list[str]:
    return [
        e.cluster
        for _, e in await _log(manager)
        if isinstance(e, types.RemoteAdmissionChosen) and e.workload.key == key
    ]


async def _manager_workload_of(manager: Cluster, owner: str) -> str:
    async def read() -> str:
        for name, wl in (await _workloads(manager)).items():
            if any(o.get("name") == owner for o in wl["metadata"].get("ownerReferences") or []):
                return name
        return ""

    return await eventually(read, what=f"the manager's Workload of {owner}")


async def test_multikueue_end_to_end(tmp_path: Path) -> None:
    setup = setup_manifests(SETUP)
    config = tmp_path / "manager-config.yaml"
    config.write_text(manager_configuration(worker_lost_timeout="4s", gc_interval="2s"))
    crds = custom_resources.load([JOBSET_CRD])
    manager = Cluster(name="manager", run_dir=tmp_path / "manager")
    workers = [Cluster(name=name, run_dir=tmp_path / name) for name in WORKERS]
    w1, w2 = workers
    async with contextlib.AsyncExitStack() as stack:
        await start_system(
            stack, manager=manager, workers=workers, setup=setup, duration=2.0, config_file=config, crds=crds
        )
        # an orphan on worker 2: a copy of this origin whose workload the manager never had
        orphan = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "orphan", "namespace": "default", "labels": {ORIGIN: "multikueue"}},
            "spec": {
                "queueName": "no-such-queue",
                "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}],
            },
        }
        await kube.create_object(w2.api, resources.WORKLOADS, namespace="default", body=orphan)

        # both workers connected: the clusters' Active condition on the manager
        for worker in workers:
            await eventually(
                lambda w=worker: kube.get_object(manager.api, resources.MULTIKUEUE_CLUSTERS, name=w.name),
                lambda c: _conditions(c).get("Active") == "True",
                what=f"{worker.name} Active",
            )
        await eventually(lambda: _workloads(w2), lambda wls: "orphan" not in wls, what="the orphan collected")
        # a cluster whose kubeconfig Secret does not exist: Kueue's reason and message (setup_test.go)
        broken = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueCluster",
            "metadata": {"name": "broken"},
            "spec": {"clusterSource": {"kubeConfig": {"location": "no-such-secret"}}},
        }
        await kube.create_object(manager.api, resources.MULTIKUEUE_CLUSTERS, body=broken)
        await eventually(
            lambda: kube.get_object(manager.api, resources.MULTIKUEUE_CLUSTERS, name="broken"),
            lambda c: any(
                (x["status"], x["reason"], x["message"])
                == ("False", "BadKubeConfig", 'load client config failed: Secret "no-such-secret" not found')
                for x in (c.get("status") or {}).get("conditions") or []
            ),
            what="the broken cluster BadKubeConfig",
        )

        # a Job: the webhook makes it MultiKueue's, it runs on a worker, its finish comes back
        created = await kube.create_object(
            manager.api, resources.JOBS, namespace="default", body=_job("first", seconds=2)
        )
        assert created["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        first = await _manager_workload_of(manager, "first")
        [winner] = await eventually(lambda: _chosen(manager, f"default/{first}"), what="the first Job's worker")
        cluster = {w.name: w for w in workers}[winner]
        remote_job = await eventually(
            lambda: _get(cluster, resources.JOBS, "first"),
            what="the remote Job",
            timeout=60,
        )
        assert "managedBy" not in remote_job["spec"]
        assert remote_job["metadata"]["labels"][remote.PREBUILT_WORKLOAD_LABEL] == first
        assert remote_job["metadata"]["labels"][ORIGIN] == "multikueue"
        local_job = await eventually(
            lambda: kube.get_object(manager.api, resources.JOBS, namespace="default", name="first"),
            lambda j: _conditions(j).get("Complete") == "True",
            what="the manager's Job Complete (mirrored)",
            timeout=90,
        )
        assert local_job["status"]["succeeded"] == 3
        await eventually(
            lambda: _events_about(manager, first),
            lambda found: ("Normal", "MultiKueue", f'The workload was admitted on "{winner}"') in found,
            what="the MultiKueue Event",
        )
        events = [e for _, e in await _log(manager)]
        assert any(isinstance(e, types.WorkloadFinished) and e.workload.name == first for e in events)
        # finished: no copy left on either worker, and the job on the winner gone
        for worker in workers:
            await eventually(lambda w=worker: _workloads(w), lambda wls: first not in wls, what=f"{first} gone")
        applied = [
            (s, e) for s, e in await _log(manager) if isinstance(e, types.DispatchApplied) and e.workload.name == first
        ]
        assert any(s.startswith(f"kq.disp.{winner}.wl.") and e.action == "create-remote-job" for s, e in applied)

        # a plain Pod, beside the JobSet (pod_test.go): run by a worker only, the manager's stays gated
        pod_step = asyncio.create_task(_a_pod_runs_on_a_worker(manager, workers))
        group_step = asyncio.create_task(_a_pod_group_runs_on_a_worker(manager, workers))
        # a JobSet, dispatched the same way; finished by its (absent) controller's status on the worker
        await kube.create_object(manager.api, resources.JOBSETS, namespace="default", body=_jobset("js"))
        js = await _manager_workload_of(manager, "js")
        [js_winner] = await eventually(lambda: _chosen(manager, f"default/{js}"), what="the JobSet's worker")
        js_cluster = {w.name: w for w in workers}[js_winner]
        remote_js = await eventually(
            lambda: _get(js_cluster, resources.JOBSETS, "js"),
            what="the remote JobSet",
            timeout=60,
        )
        assert (
            "managedBy" not in remote_js["spec"]
            and remote_js["metadata"]["labels"][remote.PREBUILT_WORKLOAD_LABEL] == js
        )
        # the worker runs it: unsuspended as the remote Job is (a suspended copy never ran: found by a new user)
        await eventually(
            lambda: _unsuspended(js_cluster, resources.JOBSETS, "js"), what="the remote JobSet unsuspended", timeout=60
        )
        done = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "jobset completed"}
        await kube.patch_object(
            js_cluster.api,
            resources.JOBSETS,
            namespace="default",
            name="js",
            subresource="status",
            patch={"status": {"conditions": [{**done, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        )
        await eventually(
            lambda: kube.get_object(manager.api, resources.JOBSETS, namespace="default", name="js"),
            lambda j: _conditions(j).get("Completed") == "True",
            what="the manager's JobSet Completed (mirrored)",
            timeout=60,
        )

        await pod_step  # ran beside the JobSet's
        await group_step

        # a worker lost while it runs a Job: dispatched again to the other one after workerLostTimeout;
        # first its priority class is changed on the manager, and its copy gets it (scheduler_test.go)
        for cluster in (manager, *workers):
            for name, value in (("high", 1000), ("low", 10)):
                await kube.apply_manifest(cluster.api, _priority_class(name, value))
        long_job = _job("long", seconds=30)
        long_job["metadata"].setdefault("labels", {})[PRIORITY_CLASS_LABEL] = "high"
        await kube.create_object(manager.api, resources.JOBS, namespace="default", body=long_job)
        long = await _manager_workload_of(manager, "long")
        [long_winner] = await eventually(lambda: _chosen(manager, f"default/{long}"), what="the long Job's worker")
        lost = {w.name: w for w in workers}[long_winner]
        other = w2 if lost is w1 else w1
        await eventually(
            lambda: _get(lost, resources.JOBS, "long"),
            what="the long Job on its worker",
        )
        await kube.patch_object(
            manager.api,
            resources.JOBS,
            namespace="default",
            name="long",
            patch={"metadata": {"labels": {PRIORITY_CLASS_LABEL: "low"}}},
        )
        await eventually(
            lambda: _get(lost, resources.WORKLOADS, long),
            lambda wl: (
                wl is not None
                and (wl["spec"].get("priorityClassRef") or {}).get("name") == "low"
                and wl["spec"].get("priority") == 10
            ),
            what="the copy's new priority class",
        )
        await lost.pause()
        await eventually(
            lambda: kube.get_object(manager.api, resources.MULTIKUEUE_CLUSTERS, name=lost.name),
            lambda c: _conditions(c).get("Active") == "False",
            what=f"{lost.name} inactive",
        )
        await eventually(
            lambda: _chosen(manager, f"default/{long}"),
            lambda chosen: chosen[-1:] == [other.name],
            what="the long Job dispatched again to the other worker",
            timeout=120,
        )
        events = [e for _, e in await _log(manager)]
        assert any(isinstance(e, types.MultiKueueCheckRetry) and e.workload.name == long for e in events)
        # the lost worker comes back: its stale copy (and job) are removed
        await lost.resume()
        await eventually(
            lambda: kube.get_object(manager.api, resources.MULTIKUEUE_CLUSTERS, name=lost.name),
            lambda c: _conditions(c).get("Active") == "True",
            what=f"{lost.name} active again",
            timeout=400,
        )
        await eventually(lambda: _workloads(lost), lambda wls: long not in wls, what="the stale copy removed")
