"""A Ready admission check's podSetUpdates on a batch/v1 Job's start: merged in, or refused when they contradict it.

Kueue's job_controller_test.go, When "the queue has admission checks": "labels and annotations should be
propagated from admission check to job" (the update's labels, annotations, nodeSelector and tolerations join the
Job's own template at its start and leave with its stop), and "should not admit workload if there is a conflict
in labels" and "... in annotations": the Job's template sets a label (annotation) that the check's podSetUpdate
sets to another value; once the Workload is admitted Kueue's reconciler cannot merge the start into the template
(pkg/podset/podset.go Merge), so the Job stays suspended with its own value and the Workload is finished
``FailedToStart`` naming the conflict (reconciler.go, podset.IsPermanent).

Watcher (Kueue's kinds, AdmissionChecks, the Job and the Workload objects, where the check's controller writes
its state), admitter and dispatcher in one process on one MemoryBus and one emulated API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kueue_es.events import slices, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework import pods as pod_integration
from kueue_es.services.dispatcher import core
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher.kinds import OBSERVED_KINDS, WORKLOAD_KIND
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    JOBS,
    QUEUE_LABEL,
    admitter,
    cluster_queue,
    commit,
    dispatcher_with_consumer,
    events_of,
    eviction,
    flavor,
    job,
    local_queue,
    running,
    wait_for,
)

pytestmark = pytest.mark.timeout(30)

CHECK = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "AdmissionCheck",
    "metadata": {"name": "check"},
    "spec": {"controllerName": "example.com/check"},
}
SLICE, WORKLOAD = slices.SLICE_NAME_ANNOTATION, core.WORKLOAD_ANNOTATION
ACTIVE = {
    "type": "Active",
    "status": "True",
    "reason": "Active",
    "message": "",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


async def _reserved_workload(api: Any) -> dict[str, Any]:
    """The Workload object once it holds its quota reservation (its check Pending)."""
    async with asyncio.timeout(10):
        while True:
            items, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
            for wl in items:
                if (wl.get("status") or {}).get("admissionChecks"):
                    return wl
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def _kueue(api: Any, bus: MemoryBus) -> AsyncIterator[None]:
    """The watcher (Kueue's kinds, AdmissionChecks, Jobs, Pods, Workload objects), admitter and dispatcher, with
    ClusterQueue cluster-queue (3 CPU) checked by the active AdmissionCheck ``check`` and LocalQueue user-queue."""
    queue = cluster_queue("cluster-queue", cpu=3)
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "check"}]}
    watcher = Watcher(bus=bus, api=api)
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watches = [watcher.watch(kind) for kind in (*OBSERVED_KINDS, "Job", "Pod", WORKLOAD_KIND)]
    async with running(*watches, admitter(bus).run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        for obj in (flavor("default-flavor"), CHECK, queue, local_queue("user-queue", "cluster-queue")):
            await kube.apply_manifest(api, obj)
        patch = {"status": {"conditions": [ACTIVE]}}
        await kube.patch_object(api, resources.ADMISSION_CHECKS, name="check", patch=patch, subresource="status")
        await wait_for(bus, types.AdmissionCheckObserved, count=2)
        yield


async def _admitted_with(
    api: Any, bus: MemoryBus, manifest: dict[str, Any], update: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """Create job ``manifest`` (a Job or a Pod); once its Workload reserves quota, set check ``check`` Ready with ``update`` as
    its podSetUpdate, as the check's controller would; returns the Workload's name once it is admitted, and the
    Job as created."""
    created = await kube.apply_manifest(api, manifest)
    wl = await _reserved_workload(api)
    ready = {
        "name": "check",
        "state": "Ready",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:01:00Z",
        "podSetUpdates": [update],
    }
    name = wl["metadata"]["name"]
    await kube.patch_object(
        api,
        resources.WORKLOADS,
        namespace="default",
        name=name,
        patch={"status": {"admissionChecks": [ready]}},
        subresource="status",
    )
    await wait_for(bus, types.WorkloadAdmitted)
    return str(name), dict(created)


async def test_pod_set_updates_reach_the_job_and_go_with_its_stop(api, bus: MemoryBus) -> None:
    """job_controller_test.go When "the queue has admission checks", It "labels and annotations should be
    propagated from admission check to job": the check's labels, annotations, nodeSelector and toleration join
    the Job's own template at its start (the template's own label and annotation kept); evicted, the Job is
    suspended with exactly its own template back."""
    manifest = job("propagated")
    own = {"labels": {"old-label-key": "old-label-value"}, "annotations": {"old-ann-key": "old-ann-value"}}
    manifest["spec"]["template"]["metadata"] = copy.deepcopy(own)  # the API server adds the Job's labels
    toleration = {"key": "selector0", "operator": "Equal", "value": "selector-value1", "effect": "NoSchedule"}
    update = {
        "name": "main",
        "labels": {"label1": "label-value1"},
        "annotations": {"ann1": "ann-value1"},
        "nodeSelector": {"selector1": "selector-value1"},
        "tolerations": [toleration],
    }
    async with _kueue(api, bus):
        name, created = await _admitted_with(api, bus, manifest, update)
        started = await _job_until(api, "propagated", lambda j: j["spec"].get("suspend") is False)
        ref = (await wait_for(bus, types.WorkloadAdmitted))[0].workload
        await commit(bus, eviction(ref))
        # a running Job's template is immutable: the stop suspends it, then gives the template back (two writes)
        stopped = await _job_until(
            api,
            "propagated",
            lambda j: j["spec"].get("suspend") is True and "nodeSelector" not in j["spec"]["template"]["spec"],
        )
    template = started["spec"]["template"]
    assert template["metadata"]["labels"]["label1"] == "label-value1"
    assert template["metadata"]["labels"]["old-label-key"] == "old-label-value"
    assert template["metadata"]["annotations"]["ann1"] == "ann-value1"
    assert template["metadata"]["annotations"]["old-ann-key"] == "old-ann-value"
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == name
    assert template["spec"]["nodeSelector"] == {"selector1": "selector-value1"}
    assert template["spec"]["tolerations"] == [toleration]
    assert stopped["spec"]["template"]["metadata"] == created["spec"]["template"]["metadata"]  # own + defaulted
    assert own["labels"].items() <= stopped["spec"]["template"]["metadata"]["labels"].items()
    assert "nodeSelector" not in stopped["spec"]["template"]["spec"]
    assert "tolerations" not in stopped["spec"]["template"]["spec"]


async def _job_until(api: Any, name: str, check: Any) -> dict[str, Any]:
    """Job default/``name`` once ``check`` holds of it."""
    async with asyncio.timeout(10):
        while not check(found := await kube.get_object(api, JOBS, namespace="default", name=name)):
            await asyncio.sleep(0.02)
    return dict(found)


@pytest.mark.parametrize(
    ("field", "want"),
    [
        pytest.param(
            "labels",
            "invalid admission check PodSetUpdate: conflict for labels: "
            "conflict for key=label-key, value1=old-value, value2=new-value",
            id='"should not admit workload if there is a conflict in labels"',
        ),
        pytest.param(
            "annotations",
            "invalid admission check PodSetUpdate: conflict for annotations: "
            "conflict for key=label-key, value1=old-value, value2=new-value",
            id='"should not admit workload if there is a conflict in annotations"',
        ),
    ],
)
async def test_a_pod_set_update_against_the_templates_own_value_fails_the_start(
    api, bus: MemoryBus, field: str, want: str
) -> None:
    """The Job's template has ``label-key: old-value`` as a label (an annotation); check ``check`` turns Ready
    with a podSetUpdate setting it to ``new-value``: the Workload is admitted, the Job is never unsuspended and
    keeps ``old-value``, and the Workload finishes FailedToStart with Kueue's message. Before, the dispatcher
    compared the update with the flavors' and Kueue's own labels only, and unsuspended the Job with
    ``new-value``."""
    manifest = job("conflicting")
    manifest["spec"]["template"]["metadata"] = {field: {"label-key": "old-value"}}
    async with _kueue(api, bus):
        await _admitted_with(api, bus, manifest, {"name": "main", field: {"label-key": "new-value"}})
        [finished] = await wait_for(bus, types.WorkloadFinished)
        stored = await kube.get_object(api, JOBS, namespace="default", name="conflicting")
    assert (finished.succeeded, finished.reason, finished.message) == (False, "FailedToStart", want)
    assert stored["spec"]["suspend"] is True
    assert stored["spec"]["template"]["metadata"][field]["label-key"] == "old-value"
    assert await events_of(bus, types.DispatchApplied, action="StartJob") == []


async def test_a_pod_set_update_against_a_pods_own_label_leaves_it_gated(api, bus: MemoryBus) -> None:
    """The same for a plain Pod (pod_controller.go Run merges the start into the pod with podset.Merge): the pod's
    label ``team: b`` against the check's ``team: a`` leaves it gated with its own label, and its Workload
    finishes FailedToStart. Before, the dispatcher ungated it with ``team: a``."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "single", "namespace": "default", "labels": {QUEUE_LABEL: "user-queue", "team": "b"}},
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
            "restartPolicy": "Never",
        },
    }
    async with _kueue(api, bus):
        await _admitted_with(api, bus, pod, {"name": "main", "labels": {"team": "a"}})
        [finished] = await wait_for(bus, types.WorkloadFinished)
        stored = await kube.get_object(api, resources.PODS, namespace="default", name="single")
    assert (finished.succeeded, finished.reason) == (False, "FailedToStart")
    assert finished.message == (
        "invalid admission check PodSetUpdate: conflict for labels: conflict for key=team, value1=b, value2=a"
    )
    assert stored["metadata"]["labels"]["team"] == "b"
    assert pod_integration.is_gated(stored)


def test_kueue_s_own_annotations_of_an_elastic_jobs_earlier_chain_are_replaced_not_a_conflict() -> None:
    """podset.go overrideableAnnotations: the start of an elastic job's slice (it sets the workload-slice name)
    replaces a stale slice name and Workload name on the template; any other start, and other keys, conflict in
    Kueue's order (annotations, labels, nodeSelector)."""
    stale = {
        "metadata": {"annotations": {SLICE: "old-chain", WORKLOAD: "old-slice"}, "labels": {"team": "a"}},
        "spec": {"nodeSelector": {"zone": "a"}},
    }
    elastic = {SLICE: "new-chain", WORKLOAD: "new-slice"}
    assert core.template_conflict(stale, labels={}, annotations=elastic, node_selector={}) is None
    assert core.template_conflict(stale, labels={}, annotations={WORKLOAD: "new-slice"}, node_selector={}) == (
        "invalid admission check PodSetUpdate: conflict for annotations: "
        "conflict for key=kueue.x-k8s.io/workload, value1=old-slice, value2=new-slice"
    )
    assert core.template_conflict(stale, labels={"team": "b"}, annotations=elastic, node_selector={"zone": "b"}) == (
        "invalid admission check PodSetUpdate: conflict for labels: conflict for key=team, value1=a, value2=b"
    )
    assert core.template_conflict(stale, labels={}, annotations={}, node_selector={"zone": "b"}) == (
        "invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for key=zone, value1=a, value2=b"
    )
