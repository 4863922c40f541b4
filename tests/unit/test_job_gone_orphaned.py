"""A start that lags behind ``kubectl delete job --cascade=orphan`` does not delete the orphaned Workload.

The dispatcher reports a job it finds gone (a 404 on its write) as the workload's ObjectDeleted, so its quota is
released. But a job deleted with ``propagationPolicy: Orphan`` leaves its Workload behind: the garbage collector
takes the owner reference off first, and Kueue finishes it ``OwnerNotFound`` and keeps it (workload_controller.go
isOrphanedWorkload), as the watcher does here. Kueue's e2e "Should finish workload if the job is deleted with
DeletePropagationOrphan" failed in CI when the job's start was dispatched after that delete: the ObjectDeleted made
the dispatcher delete the very Workload the test waited for.
"""

from __future__ import annotations

from typing import Any

from kueue_es.events import codec, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework import workloads
from kueue_es.services.dispatcher import core
from kueue_es.services.dispatcher.service import Dispatcher
from kueue_es.services.kube import errors as kube_errors

REF = types.WorkloadRef(namespace="ns", name="job-job-abcde", uid="job-uid-1")


class WorkloadReader:
    """A KubeApi that holds one Workload object (or none) and answers reads of it."""

    def __init__(self, workload: dict[str, Any] | None) -> None:
        self.workload = workload

    async def get_object(self, _ref: Any, *, namespace: str | None = None, name: str) -> dict[str, Any]:
        if self.workload is None:
            raise kube_errors.NotFoundError(status=404, reason="NotFound", message=f'workloads "{name}" not found')
        return self.workload


def _workload(*, owned: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": REF.name, "namespace": REF.namespace, "labels": {workloads.JOB_UID_LABEL: REF.uid}}
    if owned:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": REF.uid}]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta}


async def _reported(workload: dict[str, Any] | None) -> list[types.Event]:
    bus = MemoryBus()
    dispatcher = Dispatcher(bus=bus, api=WorkloadReader(workload))  # type: ignore[arg-type]
    start = core.StartJob(workload=REF, namespace="ns", name="job")
    await dispatcher._report_gone(start, seq=7)
    last, out = await bus.last_seq(), []
    if last:
        async for message in bus.read():
            out.append(codec.decode(message.data))
            if message.seq >= last:
                break
    return out


async def test_an_orphaned_workload_outlives_its_job() -> None:
    assert await _reported(_workload(owned=False)) == []


async def test_a_workload_still_owned_or_gone_goes_with_its_job() -> None:
    for workload in (_workload(owned=True), None):
        [deleted] = await _reported(workload)
        assert isinstance(deleted, types.ObjectDeleted) and (deleted.kind, deleted.name) == ("Workload", REF.name)


async def test_another_jobs_namesake_is_not_this_workload() -> None:
    other = _workload(owned=False)
    other["metadata"]["labels"][workloads.JOB_UID_LABEL] = "another-job"
    [deleted] = await _reported(other)
    assert isinstance(deleted, types.ObjectDeleted)
