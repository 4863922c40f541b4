"""An elastic Job's replacement slice has an identity of its own, through the services and the emulated API server.

Kueue's job reconciler makes a new Workload object for a scale-up's replacement slice, with a UID of its own, and the
preemption it causes names that object (preemption.go preemptionMessage: ``(UID: <the preemptor's Workload UID>,
JobUID: <its job's UID>)``). The log gives the replacement a UID of its own too (events/slices.py replacement_uid),
which the dispatcher maps to its Workload object's; before, the replacement kept the first slice's (the Job's) and
the victim's conditions named the first slice's Workload object once that was written again.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es import deciders
from kueue_es.events import slices, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher import status
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.runtime import DeciderLoop
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    JOBS,
    admitter,
    cluster_queue,
    dispatcher_with_consumer,
    events_of,
    flavor,
    job,
    local_queue,
    running,
    until_steady,
    wait_for,
    wait_until,
    watch_with_workloads,
)
from tests.integration.test_workload_objects import _priority_class, conditions, eventually

pytestmark = pytest.mark.timeout(90)


async def test_a_scale_up_preemption_names_the_replacement_slices_workload_object(api: Any, bus: MemoryBus) -> None:
    """Elastic Job ej-high (priority high, 2 pods of 1 CPU) and Job low (priority low, 2 CPU) fill a ClusterQueue
    of 4 CPU; ``kubectl patch job ej-high -p '{"spec":{"parallelism":4}}'`` makes a replacement slice that
    preempts low. The replacement has its own UID on the log; the victim's Evicted and Preempted conditions and
    its Preempted Event name the replacement's Workload object and the Job's UID, and so does every later
    rendering of them by the dispatcher, the old slice finished WorkloadSliceReplaced and written since (before,
    the log's replacement had the Job's UID, which the dispatcher took for the last of the Job's Workload objects
    it wrote: the old slice's then). Deleting the Job deletes the replacement by its UID."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    preemptor = DeciderLoop(bus=bus, decider=deciders.PREEMPTOR, wakeup=0.05)
    async with running(
        *watch_with_workloads(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        preemptor.run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await kube.apply_manifest(api, _priority_class("low", 100))
        await kube.apply_manifest(api, _priority_class("high", 1000))
        await kube.apply_manifest(api, flavor("default-flavor"))
        queue = cluster_queue("cluster-queue", cpu=4)
        queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        await kube.apply_manifest(api, queue)
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))

        elastic = job("ej-high", parallelism=2, completions=10)
        elastic["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
        elastic["metadata"]["annotations"] = {slices.ELASTIC_JOB_ANNOTATION: "true"}
        created = await kube.create_object(api, JOBS, namespace="default", body=elastic)
        job_uid = created["metadata"]["uid"]
        [first] = await wait_for(bus, types.WorkloadAdmitted)
        await eventually(api, JOBS, namespace="default", name="ej-high", check=lambda o: o["spec"]["suspend"] is False)
        # the watcher makes a replacement only for a slice its Workload object says holds quota
        await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=first.workload.name,
            check=lambda o: conditions(o).get("QuotaReserved", {}).get("status") == "True",
        )
        low = job("low", cpu="2")
        low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
        await kube.apply_manifest(api, low)
        await wait_for(bus, types.WorkloadAdmitted, count=2)
        await eventually(api, JOBS, namespace="default", name="low", check=lambda o: o["spec"]["suspend"] is False)

        await kube.patch_object(api, JOBS, namespace="default", name="ej-high", patch={"spec": {"parallelism": 4}})
        [evicted] = await wait_for(bus, types.EvictionRequested, timeout=20)
        replacement = evicted.preemptor
        assert replacement is not None and replacement.name != first.workload.name
        [observed] = [e for e in await events_of(bus, types.WorkloadObserved) if e.workload.key == replacement.key][:1]
        assert observed.workload.metadata.uid == replacement.uid != first.workload.uid == job_uid
        await wait_for(bus, types.WorkloadAdmitted, timeout=20, workload__name=replacement.name)

        replacement_object = await eventually(
            api, resources.WORKLOADS, namespace="default", name=replacement.name, check=lambda o: True
        )
        first_object = await eventually(
            api,
            resources.WORKLOADS,
            namespace="default",
            name=first.workload.name,
            check=lambda o: conditions(o).get("Finished", {}).get("reason") == slices.REPLACED_REASON,
        )

        async def victim_messages() -> dict[str, str]:
            obj = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=evicted.workload.name)
            found = conditions(obj)
            return {kind: found[kind]["message"] for kind in ("Evicted", "Preempted") if kind in found}

        messages = await until_steady(victim_messages, quiet=2.5, what="the victim's conditions")
        listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
        # how the dispatcher names them in every write to come (the victim's conditions are rendered again at each
        # change of its status), though the first slice's object was written after the replacement's
        rendered = status.with_object_uid(evicted.message, dispatcher.stored.object_uid)
        assert dispatcher.stored.object_uid(job_uid) == first_object["metadata"]["uid"]

        # the Job deleted: its slices go, the replacement by its own UID (the fold forgets it, its quota released)
        await kube.delete_object(api, JOBS, namespace="default", name="ej-high")
        await wait_for(bus, types.ObjectDeleted, kind="Workload", name=replacement.name, uid=replacement.uid)
        await wait_until(lambda: replacement.key not in dispatcher.view.cluster.workloads, what="the slice forgotten")

    new_uid = replacement_object["metadata"]["uid"]
    named = f"Preempted to accommodate a workload (UID: {new_uid}, JobUID: {job_uid}) due to prioritization"
    assert rendered.startswith(named), rendered
    assert set(messages) == {"Evicted", "Preempted"}
    for kind, message in messages.items():
        assert message.startswith(named), (kind, message)
    preempted = [
        e["message"]
        for e in listed
        if e["involvedObject"]["name"] == evicted.workload.name and e["reason"] == "Preempted"
    ]
    assert preempted and all(m.startswith(named) for m in preempted), preempted
