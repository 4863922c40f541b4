"""The dispatcher writes a released workload's status before any other workload's (object_sync.WorkloadSync).

Kueue admits a workload only once the quota it needs is released, and the victim's Workload status says
so first. The dispatcher writes the workloads that changed in the order they last changed; a preempted
workload that also waits again (a pending outcome after its release) changed last, so the preemptor's
admission was written before the victim's release: with a small write budget, kubectl showed both
Admitted in a ClusterQueue too small for the two (found with KUEUE_ES_DISPATCHER_QPS=0.5)."""

from __future__ import annotations

from typing import Any

from kueue_es.events import types
from kueue_es.services.dispatcher import core
from kueue_es.services.dispatcher.kube_api import WriteLimiter
from kueue_es.services.dispatcher.object_sync import StoredObjects, WorkloadSync
from kueue_es.services.kube import errors as kube_errors
from tests.unit.dispatch_log import DispatchLog, job_workload


class RecordingApi:
    """An API server that stores every apply and notes the Workload statuses written, in order."""

    def __init__(self) -> None:
        self.written: list[tuple[str, dict[str, str]]] = []  # (name, condition type -> status)

    async def apply_object(
        self, ref: Any, *, namespace: Any, name: str, body: Any, subresource: str | None = None, **_: Any
    ) -> dict[str, Any]:
        if subresource == "status":
            conditions = {c["type"]: c["status"] for c in body["status"].get("conditions") or []}
            self.written.append((name, conditions))
        return {**body, "metadata": {**body["metadata"], "uid": f"object-{name}"}}

    async def get_object(self, ref: Any, *, namespace: Any, name: str) -> dict[str, Any]:
        raise kube_errors.NotFoundError(status=404, reason="NotFound", message=f"{name} not found")


def workload_sync(view: core.DispatchState, api: RecordingApi) -> WorkloadSync:
    stored = StoredObjects(api=api, limiter=WriteLimiter(qps=1000, burst=100), field_manager="t")  # type: ignore[arg-type]
    return WorkloadSync(bus=None, cluster="local", view=view, stored=stored, created=lambda key, item, uid: None)  # type: ignore[arg-type]


def admitted_names(api: RecordingApi) -> set[str]:
    """The workloads whose last written status says Admitted."""
    last = dict(api.written)
    return {name for name, conditions in last.items() if conditions.get("Admitted") == "True"}


async def test_a_release_is_written_before_the_admission_that_follows_it_on_the_log() -> None:
    dlog = DispatchLog()
    view, add = dlog.view, dlog.add
    api = RecordingApi()
    sync = workload_sync(view, api)
    add(job_workload("low", priority=1))
    admission = dlog.admit(1_000)
    await sync.sync()
    assert admitted_names(api) == {"low"}

    add(job_workload("high", priority=100))  # waits: the quota is low's
    low = admission.workload
    add(
        types.EvictionRequested(
            workload=low,
            cluster_queue="cq",
            reason="Preempted",
            preemption_reason="InClusterQueue",
            message="m",
            at_ms=2,
        ),
        types.WorkloadStopped(workload=low, at_ms=3),
        types.QuotaReleased(workload=low, cluster_queue="cq", reason="Preempted", cause_seq=0, at_ms=4),
    )
    dlog.admit(5_000)
    pending_again = types.WorkloadInadmissible(workload=low, reason="Pending", message="no room", at_ms=6)
    add(pending_again)  # low changed last: written last by when it changed
    assert list(view.dirty_workloads)[-1] == "default/low"

    before = len(api.written)
    await sync.sync()
    order = [name for name, _ in api.written[before:]]
    assert order.index("low") < order.index("high"), order
    assert admitted_names(api) == {"high"}
    assert not view.unwritten_releases


async def test_the_releases_go_first_in_a_batch_of_other_workloads_too() -> None:
    """A batch writes only its own decisions' workloads, but a release not written yet goes before them."""
    dlog = DispatchLog()
    view = dlog.view
    api = RecordingApi()
    sync = workload_sync(view, api)
    dlog.add(job_workload("low", priority=1))
    admission = dlog.admit(1_000)
    await sync.sync()
    release = types.QuotaReleased(
        workload=admission.workload, cluster_queue="cq", reason="Preempted", cause_seq=0, at_ms=4
    )
    dlog.add(job_workload("high", priority=100), release)
    assert view.unwritten_releases == {"default/low": dlog.seq}
    dlog.admit(5_000)

    before = len(api.written)
    await sync.sync(["default/high"])  # the batch of high's admission
    assert [name for name, _ in api.written[before:]] == ["low", "high"]
    assert "default/low" not in view.dirty_workloads and not view.unwritten_releases
