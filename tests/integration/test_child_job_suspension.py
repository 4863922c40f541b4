"""A running child of a managed job is suspended while its ancestor's workload is not admitted.

Kueue's job reconciler, for a job that is not top-level (jobframework/reconciler.go ReconcileGenericJob, the
branch after FindAncestorJobManagedByKueue; shouldSuspendChildJob), suspends a child that runs while its
managed ancestor's latest Workload is missing or not admitted, with the Event ``Suspended`` "Kueue managed child
job suspended" on it, and leaves it alone once that Workload is admitted. Watcher, admitter and dispatcher on one
MemoryBus and one emulated API server, the child made with the real kubectl (the emulator's webhook does not
suspend a child of a managed owner). Before, the child ran on with no quota.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher.suspension import CHILD_SUSPENDED_MESSAGE, CHILD_SUSPENDED_REASON
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import ClusterEmulator
from tests.integration.harness import (
    JOBS,
    QUEUE_LABEL,
    admitter,
    cluster_queue,
    dispatcher_with_consumer,
    flavor,
    job,
    local_queue,
    running,
    wait_for,
    wait_until,
    watch_with_workloads,
)
from tests.integration.test_jobset_pod_dispatch import JOBSETS, until
from tests.kube.test_kubectl import Kubectl

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one"),
]


def jobset(name: str, *, cpu: str) -> dict[str, Any]:
    """A queue-labelled JobSet of one replicated Job of one pod asking for ``cpu``."""
    pod = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
        }
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "default", "labels": {QUEUE_LABEL: "user-queue"}},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": pod}}}]},
    }


def child(name: str, owner: dict[str, Any], *, labelled: bool) -> str:
    """A running Job (``suspend: false``) controlled by ``owner``, as JSON for ``kubectl create``."""
    manifest = job(name, queue="user-queue" if labelled else None)
    manifest["spec"]["suspend"] = False
    meta = owner["metadata"]
    manifest["metadata"]["ownerReferences"] = [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
        }
    ]
    return json.dumps(manifest)


@pytest.mark.parametrize("labelled", [False, True], ids=["unlabelled", "queue-labelled"])
async def test_a_running_child_of_an_unadmitted_jobset_is_suspended(
    api: Any, emu: ClusterEmulator, bus: MemoryBus, tmp_path: Path, labelled: bool
) -> None:
    """A labelled JobSet waiting for quota (2 CPU in a 1 CPU queue) and a Job created running with a controller
    reference to it: the Job is suspended with Kueue's ``Suspended`` Event. Once the JobSet is admitted (the queue
    grown), a child running again is left alone. Its Job is seen through the watch of the unlabelled jobs or
    the queue-labelled one's; it gets no Workload of its own either way."""
    kubectl = Kubectl(emu.url, tmp_path)
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    async with running(
        *watch_with_workloads(watcher),
        watcher.watch("JobSet"),
        watcher.watch_unqueued_owners("Job"),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await kube.apply_manifest(api, flavor("default-flavor"))
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=1))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        stored = await kube.apply_manifest(api, jobset("js", cpu="2"))
        [observed] = await wait_for(bus, types.WorkloadObserved)
        name = observed.workload.metadata.name
        await wait_for(bus, types.WorkloadInadmissible, workload__name=name)
        await kubectl.ok("create", "-f", "-", stdin=child("js-w-0", stored, labelled=labelled))
        [seen] = await wait_for(bus, types.ChildJobObserved, name="js-w-0")
        suspended = await until(api, JOBS, "js-w-0", lambda o: o["spec"].get("suspend") is True)
        await wait_until(lambda: dispatcher.suspension.children_suspended == 1, what="the child's suspension")
        await wait_until(lambda: dispatcher.events_written >= 1, what="the Suspended Event")
        await asyncio.sleep(0.3)  # the Event is written after the patch
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
        on_child = [
            (e["type"], e["reason"], e["message"], e["involvedObject"]["kind"])
            for e in listed
            if e["involvedObject"]["name"] == "js-w-0"
        ]
        assert ("Normal", CHILD_SUSPENDED_REASON, CHILD_SUSPENDED_MESSAGE, "Job") in on_child
        assert CHILD_SUSPENDED_MESSAGE == "Kueue managed child job suspended"
        assert seen.ancestor.kind == "JobSet" and seen.ancestor.uid == stored["metadata"]["uid"]
        assert seen.uid == suspended["metadata"]["uid"]
        # the JobSet's workload is the only one: the child has none of its own
        assert {e.workload.key for e in await wait_for(bus, types.WorkloadObserved)} == {observed.workload.key}
        assert observed.workload.owner is not None and observed.workload.owner.kind == "JobSet"

        # the queue grows: the JobSet is admitted and started; its child run again is left alone
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=4))
        await wait_for(bus, types.WorkloadAdmitted, workload__name=name)
        await until(api, JOBSETS, "js", lambda o: o["spec"].get("suspend") is False)
        await kubectl.ok("patch", "job", "js-w-0", "--type=merge", "-p", '{"spec":{"suspend":false}}')
        # a Job of its own after the patch, on the same watch as a labelled child: once its Workload is on the
        # log the watcher has seen the child run again, and once the dispatcher has folded it, past both (an
        # unlabelled child's watch is another stream: it may be seen later, and is left alone then too)
        await kube.apply_manifest(api, job("marker", queue="user-queue"))
        both = await wait_for(bus, types.WorkloadObserved, count=2)
        [marker] = [e for e in both if e.workload.owner is not None and e.workload.owner.name == "marker"]
        await wait_until(
            lambda: (
                dispatcher.view.cluster.workloads.get(marker.workload.key) is not None
                and not dispatcher.suspension.children
            ),
            what="the dispatcher past the marker",
        )
        again = await kube.get_object(api, JOBS, namespace="default", name="js-w-0")
    assert again["spec"]["suspend"] is False
    assert dispatcher.suspension.children_suspended == 1
