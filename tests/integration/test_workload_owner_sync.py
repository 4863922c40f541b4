"""A job's owner reference taken off its Workload object is never written back by the dispatcher.

The garbage collector's part of ``kubectl delete job --cascade=orphan`` takes the Job's reference off its
Workload before the Job goes; Kueue's job reconciler never puts it back, and its workload controller finishes
the Workload OwnerNotFound (pkg/controller/core/workload_controller.go isOrphanedWorkload). The dispatcher's
Workload writer is driven by hand against the emulated API server (as in
:mod:`tests.integration.test_workload_active`), so the moment of each write is the test's.
"""

from __future__ import annotations

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from tests.integration.test_workload_active import workload_sync
from tests.unit.dispatch_log import DispatchLog, job_workload

pytestmark = pytest.mark.timeout(30)


async def test_a_job_reference_taken_off_is_never_written_back(api, bus: MemoryBus) -> None:
    """The garbage collector takes the Job's reference off its admitted Workload (``kubectl delete job
    --cascade=orphan``) while the dispatcher still writes the workload's changes (its PodsReady): the status write
    returns the object without the reference, and no later write of the workload puts it back -- Kueue's job
    reconciler never does, its workload controller finishes such a Workload OwnerNotFound (workload_controller.go
    isOrphanedWorkload), which the watcher reports. Before, the dispatcher applied the object again to restore
    "its" reference, and the garbage collector then deleted the Workload (its owner gone) instead."""
    dlog = DispatchLog()
    sync = workload_sync(dlog, api, bus)
    dlog.add(job_workload("w"))
    ref = dlog.admit(1_000).workload
    assert await sync.sync()
    made = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="w")
    assert [r["name"] for r in made["metadata"]["ownerReferences"]] == ["w"]

    # the garbage collector's part of the orphaning deletion: an update of the metadata alone
    await kube.patch_object(
        api, resources.WORKLOADS, namespace="default", name="w", patch={"metadata": {"ownerReferences": None}}
    )
    dlog.add(types.WorkloadPodsReady(workload=ref, ready=True, reason="Started", at_ms=2_000))
    assert await sync.sync()
    dlog.add(types.WorkloadPodsReady(workload=ref, ready=False, reason="WaitForRecovery", at_ms=3_000))
    assert await sync.sync()

    written = await kube.get_object(api, resources.WORKLOADS, namespace="default", name="w")
    assert "ownerReferences" not in written["metadata"]
    assert written["metadata"]["uid"] == made["metadata"]["uid"]
