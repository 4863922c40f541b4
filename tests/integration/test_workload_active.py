"""``spec.active`` on a job's Workload object: written by the dispatcher only as Kueue's deactivation, once.

Kueue's workload controller sets ``spec.active`` false once, with an Update of the object it read
(pkg/controller/core/workload_controller.go, the DeactivationTarget branch), and its job reconciler keeps the value
it reads when it rewrites a Workload (jobframework/reconciler.go prepareWorkload): from then on the field is the
user's, who reactivates the workload by setting it true (Kueue's "Deactivate/reactivate a workload"). kueue-es's
dispatcher used to server-side apply the field, with force, from the log's value: a value the watcher had not yet
reported changed again, so a reactivation made soon after a deactivation was written back to false (the race that
kept Kueue's "shouldn't delete deactivated Workload" e2e cases out of the run).

Each test drives the dispatcher's Workload writer (:class:`~kueue_es.services.dispatcher.object_sync.WorkloadSync`)
by hand against the emulated API server, which keeps field ownership as kube-apiserver does, and folds the log's
events itself: the moment of each write is the test's, so the race is the same at every run.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher.kube_api import KubeClient, WriteLimiter
from kueue_es.services.dispatcher.object_sync import StoredObjects, WorkloadSync
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from tests.unit.dispatch_log import DispatchLog, job_workload

pytestmark = pytest.mark.timeout(30)

MESSAGE = "exceeding the maximum execution time"


def workload_sync(dlog: DispatchLog, api: Any, bus: MemoryBus) -> WorkloadSync:
    """The dispatcher's Workload writer over ``dlog``'s view, writing to ``api`` as the dispatcher's manager."""
    stored = StoredObjects(
        api=KubeClient(client=api), limiter=WriteLimiter(qps=1000, burst=100), field_manager="kueue-es"
    )
    return WorkloadSync(bus=bus, cluster="local", view=dlog.view, stored=stored, created=lambda key, item, uid: None)


async def set_active(api: Any, name: str, active: bool) -> None:
    """``kubectl patch workload NAME --type=merge -p '{"spec":{"active":...}}'``."""
    await kube.patch_object(
        api, resources.WORKLOADS, namespace="default", name=name, patch={"spec": {"active": active}}
    )


async def active_of(api: Any, name: str) -> Any:
    obj = await kube.get_object(api, resources.WORKLOADS, namespace="default", name=name)
    return obj["spec"].get("active")


async def test_a_reactivation_by_hand_is_not_written_back_from_an_older_log(api, bus: MemoryBus) -> None:
    """Deactivated by hand and reactivated before the dispatcher wrote the Workload again: the watcher's report of
    the ``false`` reaches the dispatcher after the user's ``true``, and the write that follows leaves the user's
    value alone. Before, the dispatcher applied the log's ``false`` with force over it."""
    dlog = DispatchLog()
    sync = workload_sync(dlog, api, bus)
    dlog.add(job_workload("w"))
    dlog.admit(1_000)
    assert await sync.sync()
    assert await active_of(api, "w") is True  # defaulted by the API server (the CRD's default)

    await set_active(api, "w", False)
    await set_active(api, "w", True)
    dlog.add(job_workload("w", active=False))  # the watcher's report of the first patch, folded late
    assert await sync.sync()

    assert await active_of(api, "w") is True


async def test_kueues_deactivation_is_written_once_and_a_reactivation_stays(api, bus: MemoryBus) -> None:
    """WorkloadDeactivated (maximumExecutionTimeSeconds): the dispatcher sets ``spec.active`` false. The user sets it
    true before the watcher's report of the ``false`` reaches the log, and the workload then finishes (its finalizer
    comes off: the Workload is written again): the ``true`` stays. Once the watcher has reported both values, a
    second deactivation is written again."""
    dlog = DispatchLog()
    sync = workload_sync(dlog, api, bus)
    dlog.add(job_workload("w"))
    ref = dlog.admit(1_000).workload
    assert await sync.sync()

    dlog.add(
        types.WorkloadDeactivated(workload=ref, reason="MaximumExecutionTimeExceeded", message=MESSAGE, at_ms=2_000),
        types.EvictionRequested(
            workload=ref,
            cluster_queue="cq",
            reason="DeactivatedDueToMaximumExecutionTimeExceeded",
            message=f"The workload is deactivated due to {MESSAGE}",
            at_ms=2_000,
        ),
    )
    assert await sync.sync()
    assert await active_of(api, "w") is False

    await set_active(api, "w", True)  # kubectl kueue resume workload w
    dlog.add(types.WorkloadFinished(workload=ref, at_ms=3_000))
    assert await sync.sync()
    written = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="w")
    assert "kueue.x-k8s.io/resource-in-use" not in (written["metadata"].get("finalizers") or [])  # written again
    assert written["spec"]["active"] is True


async def test_each_deactivation_is_written_once_the_last_was_seen(api, bus: MemoryBus) -> None:
    """A workload deactivated, seen inactive, reactivated by its user (both seen) and deactivated again: the second
    WorkloadDeactivated writes ``false`` again; between them the dispatcher writes no ``spec.active``."""
    dlog = DispatchLog()
    sync = workload_sync(dlog, api, bus)
    dlog.add(job_workload("w"))
    ref = dlog.admit(1_000).workload
    assert await sync.sync()
    deactivated = types.WorkloadDeactivated(
        workload=ref, reason="MaximumExecutionTimeExceeded", message=MESSAGE, at_ms=2_000
    )
    dlog.add(deactivated)
    assert await sync.sync()
    assert await active_of(api, "w") is False

    dlog.add(job_workload("w", active=False))  # the watcher saw it
    await set_active(api, "w", True)
    dlog.add(job_workload("w"))  # and the reactivation
    assert await sync.sync()
    assert await active_of(api, "w") is True

    dlog.add(deactivated)
    assert await sync.sync()
    assert await active_of(api, "w") is False


async def test_an_earlier_dispatchers_deactivation_survives_the_first_apply_without_the_field(
    api, bus: MemoryBus
) -> None:
    """A Workload object an earlier dispatcher applied with ``spec.active: false`` (its deactivation, before this
    version): its field manager owns the field, so an apply that leaves the field out would remove it and the API
    server default it to true (server-side apply removes what a manager applied before and no longer applies).
    The dispatcher first takes the field out of its apply entry; the Workload stays inactive, and no one owns the
    field until its user sets it."""
    dlog = DispatchLog()
    sync = workload_sync(dlog, api, bus)
    dlog.add(job_workload("w"))
    assert await sync.sync()
    written = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="w")
    legacy = {
        "apiVersion": written["apiVersion"],
        "kind": "Workload",
        "metadata": {
            k: written["metadata"][k] for k in ("name", "namespace", "labels", "finalizers", "ownerReferences")
        },
        "spec": {**written["spec"], "active": False},
    }
    await kube.apply_object(
        api, resources.WORKLOADS, namespace="default", name="w", body=legacy, field_manager="kueue-es"
    )
    fresh = workload_sync(dlog, api, bus)  # a restarted dispatcher of this version: it lists the objects
    await fresh.stored.prime()
    dlog.add(job_workload("w", cpu="1"))  # the waiting job shrank: its Workload is applied again
    assert await fresh.sync()

    after = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="w")
    assert after["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1"
    assert after["spec"]["active"] is False
    applied = [
        e for e in after["metadata"]["managedFields"] if e["manager"] == "kueue-es" and e["operation"] == "Apply"
    ]
    assert not any("f:active" in (e["fieldsV1"].get("f:spec") or {}) for e in applied)
