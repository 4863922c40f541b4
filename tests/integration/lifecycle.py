"""One integration's whole life through the edge, the same for every kind: admitted, started, ready,
preempted (suspended, templates given back), admitted again, finished.

Each kind's test gives a manifest (Kueue's sample for it) and the statuses its controller would write
(:class:`Statuses`); :func:`run_lifecycle` drives the watcher, the admitter and the dispatcher on one
MemoryBus and one emulated API server that serves the kind, and checks what Kueue's job framework does
for any integration (jobframework/reconciler.go): the Workload has the kind's pod sets and an owner
reference to the job; the start unsuspends it with the flavor's node labels and toleration in every pod
template; the job's PodsReady becomes WorkloadPodsReady; an eviction suspends it with its templates exactly
as created and marks it; WorkloadStopped comes only once nothing of it is active; it is started again;
its finished status gives WorkloadFinished (for kinds that finish: a RayCluster or a RayService runs until
deleted, and its test stops after the second start).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework import integrations, workloads
from kueue_es.jobframework.annotations import EVICTED_ANNOTATION
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    SPOT_TOLERATION,
    admitter,
    commit,
    dispatcher_with_consumer,
    events_of,
    eviction,
    running,
    set_up_queues,
    wait_for,
)

SPOT_SELECTOR = {"instance-type": "spot"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Statuses:
    """What the kind's controller writes in ``status``: pods running but not ready, all ready, nothing active
    (after a stop), and finished successfully (None for a kind that never finishes)."""

    running: dict[str, Any]
    ready: dict[str, Any]
    inactive: dict[str, Any]
    finished: dict[str, Any] | None


def served(kind: str) -> resources.ResourceRef:
    """The ResourceRef of a registered integration's kind (what the emulator serves, given as an extra kind)."""
    integration = integrations.registry()[kind]
    return resources.ref_for(integration.api_version, kind)


def _as_written(templates: dict[str, Any]) -> dict[str, Any]:
    """``templates`` without empty ``metadata.labels`` / ``metadata.annotations`` maps (nor a metadata left empty)."""
    out: dict[str, Any] = {}
    for name, template in templates.items():
        if isinstance(template, dict) and isinstance(template.get("metadata"), dict):
            meta = {k: v for k, v in template["metadata"].items() if not (k in ("labels", "annotations") and not v)}
            template = (
                {**template, "metadata": meta} if meta else {k: v for k, v in template.items() if k != "metadata"}
            )
        out[name] = template
    return out


def templates_of(kind: str, job: dict[str, Any], context: workloads.Context | None = None) -> dict[str, Any]:
    """What a start changes of each pod set in ``job``, as a pod template, by pod set name: its pod template
    (or the default one when the job has none; for a TrainJob, in the JobSet its runtime and ``context``
    give), or its :class:`~kueue_es.jobframework.integrations.PodSetView` (an AppWrapper's podSetInfos)."""
    integration = integrations.registry()[kind]
    holder, sources = integrations.pod_set_sources(integration, job, context=context)
    return {
        source.name: integrations.start_template(integration, job, source)
        if integration.pod_set_view is not None
        else integrations.template_of(source, holder)
        for source in sources
    }


def context_of(inputs: Sequence[dict[str, Any]]) -> workloads.Context:
    """The conversion context holding ``inputs`` (objects an integration reads, such as a TrainingRuntime)."""
    objects: dict[str, dict[tuple[str, str], Any]] = {}
    for obj in inputs:
        namespaced = resources.ref_for(obj["apiVersion"], obj["kind"]).namespaced
        key = (obj["metadata"].get("namespace", "default") if namespaced else "", obj["metadata"]["name"])
        objects.setdefault(obj["kind"], {})[key] = obj
    return workloads.Context(objects=objects)


async def until(api: Any, ref: resources.ResourceRef, name: str, check: Callable[[dict[str, Any]], bool]) -> Any:
    """Poll object default/``name`` until ``check`` holds (10 s at most)."""
    async with asyncio.timeout(10):
        while True:
            try:
                obj = await kube.get_object(api, ref, namespace="default", name=name)
            except kube_errors.NotFoundError:
                obj = None
            if obj is not None and check(obj):
                return obj
            await asyncio.sleep(0.02)


async def write_status(api: Any, ref: resources.ResourceRef, name: str, status: dict[str, Any]) -> None:
    """Replace the object's status as its controller would."""
    current = await kube.get_object(api, ref, namespace="default", name=name)
    current["status"] = status
    await kube.replace_object(api, ref, namespace="default", name=name, body=current, subresource="status")


async def run_lifecycle(
    api: Any,
    bus: MemoryBus,
    manifest: dict[str, Any],
    *,
    pod_sets: list[tuple[str, int]],
    statuses: Statuses,
    inputs: Sequence[dict[str, Any]] = (),
    finished_message: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Drive ``manifest`` (a queue-labelled job of a registered integration, in namespace default) through its
    life and check each step (module docstring). ``pod_sets``: the (name, count) Kueue gives it, in order.
    ``inputs``: objects its conversion reads (a TrainJob's runtime), created first. ``finished_message``: the
    message its finished Workload must get (its WorkloadFinished and the Workload object's Finished condition).
    Returns the job as ``created``, first ``started`` and ``stopped``, for the kind's own checks."""
    kind = manifest["kind"]
    integration = integrations.registry()[kind]
    assert integration.suspend_path is not None
    ref_kind = served(kind)
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    watcher = Watcher(bus=bus, api=api)
    async with running(watcher.run(), admitter(bus).run(), dispatcher.fold_forever(), dispatcher.consume(consumer)):
        await set_up_queues(api, cpu=64)
        for obj in inputs:
            await kube.apply_manifest(api, copy.deepcopy(obj))
        context = context_of(inputs)
        created = await kube.apply_manifest(api, copy.deepcopy(manifest))
        name, uid = created["metadata"]["name"], created["metadata"]["uid"]
        assert integrations.get_at(created, integration.suspend_path) is True, "created suspended (the webhook)"

        [applied] = await wait_for(bus, types.DispatchApplied, action="StartJob", timeout=10)
        started = await until(api, ref_kind, name, lambda o: integrations.get_at(o, integration.suspend_path) is False)
        ref = applied.workload
        assert ref.name == integration.workload_name(name, uid)
        assert applied.target == f"{kind} default/{name}" and applied.node_selector == SPOT_SELECTOR
        for template in templates_of(kind, started, context).values():
            assert template["spec"]["nodeSelector"] == SPOT_SELECTOR
            assert SPOT_TOLERATION in template["spec"]["tolerations"]
        wl = await until(
            api,
            resources.WORKLOADS,
            ref.name,
            lambda o: any(
                c["type"] == "Admitted" and c["status"] == "True" for c in o.get("status", {}).get("conditions", [])
            ),
        )
        [owner] = wl["metadata"]["ownerReferences"]
        assert (owner["apiVersion"], owner["kind"], owner["name"], owner["uid"]) == (
            integration.api_version,
            kind,
            name,
            uid,
        )
        assert [(ps["name"], ps["count"]) for ps in wl["spec"]["podSets"]] == pod_sets

        await write_status(api, ref_kind, name, statuses.running)
        [waiting] = await wait_for(bus, types.WorkloadPodsReady)
        assert (waiting.ready, waiting.reason) == (False, "WaitForStart")
        await write_status(api, ref_kind, name, statuses.ready)
        [ready] = await wait_for(bus, types.WorkloadPodsReady, ready=True)
        assert (ready.workload.name, ready.reason) == (ref.name, "Started")

        await commit(bus, eviction(ref))
        stopped = await until(api, ref_kind, name, lambda o: integrations.get_at(o, integration.suspend_path) is True)
        # given back as Kueue's restore writes them: an empty labels or annotations map of the job's own template
        # (a RayCluster sample's ``labels: {}``) is gone, as Go's JSON drops empty maps
        assert _as_written(templates_of(kind, stopped, context)) == _as_written(templates_of(kind, created, context)), (
            "templates given back"
        )
        if integration.write_templates is not None:  # written elsewhere (a TrainJob's runtimePatches): all given back
            assert {k: v for k, v in stopped["spec"].items() if k != "suspend"} == {
                k: v for k, v in created["spec"].items() if k != "suspend"
            }
        assert stopped["metadata"]["annotations"][EVICTED_ANNOTATION] == "Preempted"
        await asyncio.sleep(0.2)
        assert await events_of(bus, types.WorkloadStopped) == [], "its pods are still active"
        await write_status(api, ref_kind, name, statuses.inactive)
        [stop] = await wait_for(bus, types.WorkloadStopped)
        assert (stop.workload.name, stop.reason) == (ref.name, "Preempted")

        # back in its queue, the quota free: started again
        applied_all = await wait_for(bus, types.DispatchApplied, count=3, timeout=10)
        assert [e.action for e in applied_all] == ["StartJob", "Evict", "StartJob"]
        await until(api, ref_kind, name, lambda o: integrations.get_at(o, integration.suspend_path) is False)

        if statuses.finished is None:
            assert integration.finished({**created, "status": statuses.ready}) is None
            return {"created": created, "started": started, "stopped": stopped}
        await write_status(api, ref_kind, name, statuses.finished)
        [done] = await wait_for(bus, types.WorkloadFinished, timeout=10)
        assert (done.workload.name, done.succeeded, done.reason) == (ref.name, True, "Succeeded")
        if finished_message is not None:
            assert done.message == finished_message
            finished = await until(
                api,
                resources.WORKLOADS,
                ref.name,
                lambda o: any(c["type"] == "Finished" for c in o.get("status", {}).get("conditions", [])),
            )
            [condition] = [c for c in finished["status"]["conditions"] if c["type"] == "Finished"]
            assert (condition["status"], condition["reason"]) == ("True", "Succeeded")
            assert condition.get("message", "") == finished_message
    return {"created": created, "started": started, "stopped": stopped}
