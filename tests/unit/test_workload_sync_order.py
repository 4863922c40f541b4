"""The dispatcher writes a released workload's status before any other workload's (object_sync.WorkloadSync).

Kueue admits a workload only once the quota it needs is released, and the victim's Workload status says
so first. The dispatcher writes the workloads that changed in the order they last changed; a preempted
workload that also waits again (a pending outcome after its release) changed last, so the preemptor's
admission was written before the victim's release: with a small write budget, kubectl showed both
Admitted in a ClusterQueue too small for the two (found with KUEUE_ES_DISPATCHER_QPS=0.5)."""

from __future__ import annotations

from typing import Any

import msgspec

from kueue_es.events import models, types
from kueue_es.services.dispatcher import core
from kueue_es.services.dispatcher.kube_api import WriteLimiter
from kueue_es.services.dispatcher.object_sync import StoredObjects, WorkloadSync
from kueue_es.services.kube import errors as kube_errors
from tests.builders import Log, cluster_queue, flavor, local_queue, parse, workload


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


def job_workload(name: str, *, priority: int) -> types.WorkloadObserved:
    made = parse(workload(name, priority=priority, cpu="2"))
    owner = models.OwnerReference(api_version="batch/v1", kind="Job", name=name, uid=f"uid-{name}")
    return types.WorkloadObserved(workload=msgspec.structs.replace(made, owner=owner))


def admitted_names(api: RecordingApi) -> set[str]:
    """The workloads whose last written status says Admitted."""
    last = dict(api.written)
    return {name for name, conditions in last.items() if conditions.get("Admitted") == "True"}


async def test_a_release_is_written_before_the_admission_that_follows_it_on_the_log() -> None:
    log = Log()
    view = core.DispatchState()
    api = RecordingApi()
    stored = StoredObjects(api=api, limiter=WriteLimiter(qps=1000, burst=100), field_manager="t")  # type: ignore[arg-type]
    sync = WorkloadSync(bus=None, cluster="local", view=view, stored=stored, created=lambda item: None)  # type: ignore[arg-type]

    def add(*events: types.Event) -> None:
        for event in events:
            log.add(event)
            core.fold(view, event, seq=len(log.events))

    add(
        types.ResourceFlavorObserved(flavor=parse(flavor("rf"))),
        types.ClusterQueueObserved(cluster_queue=parse(cluster_queue("cq", flavors={"rf": {"cpu": "2"}}))),
        types.LocalQueueObserved(local_queue=parse(local_queue("lq", "cq"))),
        job_workload("low", priority=1),
    )
    [admission] = [d for d in log.cycle(1_000) if isinstance(d, types.WorkloadAdmitted)]
    core.fold(view, admission, seq=len(log.events))
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
    [high_admission] = [d for d in log.cycle(5_000) if isinstance(d, types.WorkloadAdmitted)]
    core.fold(view, high_admission, seq=len(log.events))
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
    view = core.DispatchState()
    api = RecordingApi()
    stored = StoredObjects(api=api, limiter=WriteLimiter(qps=1000, burst=100), field_manager="t")  # type: ignore[arg-type]
    sync = WorkloadSync(bus=None, cluster="local", view=view, stored=stored, created=lambda item: None)  # type: ignore[arg-type]
    log = Log()
    for event in (
        types.ResourceFlavorObserved(flavor=parse(flavor("rf"))),
        types.ClusterQueueObserved(cluster_queue=parse(cluster_queue("cq", flavors={"rf": {"cpu": "2"}}))),
        types.LocalQueueObserved(local_queue=parse(local_queue("lq", "cq"))),
        job_workload("low", priority=1),
    ):
        log.add(event)
        core.fold(view, event, seq=len(log.events))
    [admission] = [d for d in log.cycle(1_000) if isinstance(d, types.WorkloadAdmitted)]
    core.fold(view, admission, seq=len(log.events))
    await sync.sync()
    release = types.QuotaReleased(
        workload=admission.workload, cluster_queue="cq", reason="Preempted", cause_seq=0, at_ms=4
    )
    log.add(job_workload("high", priority=100), release)
    core.fold(view, log.events[-2], seq=len(log.events) - 1)
    core.fold(view, release, seq=len(log.events))
    assert view.unwritten_releases == {"default/low": len(log.events)}
    [high_admission] = [d for d in log.cycle(5_000) if isinstance(d, types.WorkloadAdmitted)]
    core.fold(view, high_admission, seq=len(log.events))

    before = len(api.written)
    await sync.sync(["default/high"])  # the batch of high's admission
    assert [name for name, _ in api.written[before:]] == ["low", "high"]
    assert "default/low" not in view.dirty_workloads and not view.unwritten_releases
