"""A Workload object's own ``spec.priority`` counts (kueue pkg/util/priority Priority), its class unchanged.

The watcher marks a Workload observed as an object that names a WorkloadPriorityClass and has a
``spec.priority`` (``kueue-es.dev/own-priority``); the fold then reads that number, a change by hand included,
until the class's value changes, when it writes that value in (workloadpriorityclass_controller.go). A log
without the mark (a job's workload, every log before it) keeps the class's current value, so its replay is
unchanged."""

from __future__ import annotations

from typing import Any

import msgspec

from kueue_es.events import models, types
from kueue_es.projections.cluster import priority_of
from kueue_es.services.watcher import convert
from tests.builders import Log, workload

CLASS = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "batch"}


def _batch(value: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "batch"},
        "value": value,
    }


def _named(priority: int | None) -> dict[str, Any]:
    doc = workload("w", priority=priority, cpu="1")
    doc["spec"]["priorityClassRef"] = CLASS
    return doc


def test_a_priority_changed_by_hand_with_the_same_class_counts() -> None:
    log = Log()
    log.apply_manifests(_batch(5), _named(5))
    wl = log.state.workloads["default/w"].workload
    assert wl.metadata.annotations == {models.OWN_PRIORITY_ANNOTATION: "true"}
    assert priority_of(wl, log.state) == 5
    log.apply_manifests(_named(100))  # kubectl patch workload w -p '{"spec":{"priority":100}}'
    assert priority_of(log.state.workloads["default/w"].workload, log.state) == 100


def test_a_class_value_change_writes_its_value_in_again() -> None:
    log = Log()
    log.apply_manifests(_batch(5), _named(100))
    log.apply_manifests(_batch(5))  # seen again, the same value: the workload's own priority stays
    assert priority_of(log.state.workloads["default/w"].workload, log.state) == 100
    log.apply_manifests(_batch(7))
    wl = log.state.workloads["default/w"].workload
    assert (wl.spec.priority, priority_of(wl, log.state)) == (7, 7)
    log.apply_manifests(_named(3))  # by hand again
    assert priority_of(log.state.workloads["default/w"].workload, log.state) == 3


def test_a_workload_without_the_mark_takes_the_class_value_as_before() -> None:
    log = Log()
    log.apply_manifests(_batch(5))
    fact = convert.kueue_fact(_named(100))
    assert isinstance(fact, types.WorkloadObserved)
    meta = msgspec.structs.replace(fact.workload.metadata, annotations={})
    unmarked = msgspec.structs.replace(fact.workload, metadata=meta)  # as a log written before the mark
    log.add(types.WorkloadObserved(workload=unmarked))
    assert priority_of(log.state.workloads["default/w"].workload, log.state) == 5


def test_the_mark_is_the_watchers_own() -> None:
    doc = workload("w", priority=100, cpu="1")  # no class: spec.priority counts anyway, no mark
    doc["metadata"]["annotations"] = {models.OWN_PRIORITY_ANNOTATION: "true", "other": "x"}
    fact = convert.kueue_fact(doc)
    assert isinstance(fact, types.WorkloadObserved)
    assert fact.workload.metadata.annotations == {"other": "x"}
    fact = convert.kueue_fact(_named(None))  # a class and no priority of its own: the class's value
    assert isinstance(fact, types.WorkloadObserved)
    assert models.OWN_PRIORITY_ANNOTATION not in fact.workload.metadata.annotations


async def test_the_watcher_keeps_a_users_priority_on_a_jobs_workload_until_kueue_writes_over_it() -> None:
    """The watcher's memory (services/watcher/publishing.py) of a priority a user set on a job's Workload object:
    every workload published for the job carries it, marked, while it names the class it named then; the class
    given another value supersedes it, and the object, which shows the old value until the dispatcher's write of
    the new one, does not bring it back meanwhile; a value the dispatcher wrote (None) ends that, and a user's
    next write counts again."""
    from kueue_es.events.bus.memory import MemoryBus
    from kueue_es.services.watcher.publishing import Publisher

    bus = MemoryBus()
    publisher = Publisher(bus=bus, kinds=("Workload", "WorkloadPriorityClass"))
    made = convert.kueue_fact(_named(5))
    assert isinstance(made, types.WorkloadObserved)
    meta = msgspec.structs.replace(made.workload.metadata, annotations={}, uid="uid-job")  # made for its job
    owner = models.OwnerReference(api_version="batch/v1", kind="Job", name="w", uid="uid-job")
    job_fact = types.WorkloadObserved(workload=msgspec.structs.replace(made.workload, metadata=meta, owner=owner))
    key, own = ("default", "w"), (("WorkloadPriorityClass", "batch"), 5000)

    async def published() -> models.Workload:
        await publisher.publish(job_fact, version="1")
        return publisher.workloads[key]

    await publisher.publish(
        types.WorkloadPriorityClassObserved(
            priority_class=models.WorkloadPriorityClass(metadata=models.ObjectMeta(name="batch"), value=5)
        ),
        version="c1",
    )
    assert (await published()).spec.priority == 5
    assert publisher.object_priority(key, own)  # kubectl patch kwl w -p '{"spec":{"priority":5000}}'
    wl = await published()
    assert (wl.spec.priority, wl.metadata.annotations) == (5000, {models.OWN_PRIORITY_ANNOTATION: "true"})
    await publisher.publish(
        types.WorkloadPriorityClassObserved(
            priority_class=models.WorkloadPriorityClass(metadata=models.ObjectMeta(name="batch"), value=7)
        ),
        version="c2",
    )
    assert not publisher.object_priority(key, own)  # the object before the dispatcher's write: not read back
    assert models.OWN_PRIORITY_ANNOTATION not in (await published()).metadata.annotations
    assert not publisher.object_priority(key, None)  # the dispatcher's write of the class's value
    assert publisher.object_priority(key, own)  # the user sets 5000 again
    assert (await published()).spec.priority == 5000
    await bus.close()
