"""The dispatcher's queue status writer (services/dispatcher/object_sync.py QueueStatusSync): its backlog
counts a write under way, so "nothing left to write" means the server has every status (CI found a test
reading the LocalQueues while the backlog's last write, the one that mattered, was still in flight)."""

import asyncio
from typing import Any

from kueue_es.events import types
from kueue_es.services.dispatcher import core
from kueue_es.services.dispatcher.kube_api import WriteLimiter
from kueue_es.services.dispatcher.object_sync import QueueStatusSync, StoredObjects
from tests.builders import cluster_queue, flavor, local_queue, parse


class HeldApi:
    """An API whose status applies wait until :attr:`release` is set; notes each one as it starts."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: list[str] = []

    async def apply_object(self, ref: Any, *, namespace: Any, name: str, body: Any, **_: Any) -> dict[str, Any]:
        self.started.append(f"{ref.kind}/{name}")
        await self.release.wait()
        return {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": body["metadata"], "status": body["status"]}

    async def patch_object(self, ref: Any, *, namespace: Any, name: str, patch: Any) -> dict[str, Any]:
        """Kueue's finalizer put on the ClusterQueue or the ResourceFlavor: answered at once."""
        return {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": {"name": name, **patch["metadata"]}}

    async def get_object(self, ref: Any, *, namespace: Any, name: str) -> dict[str, Any]:
        """The ResourceFlavor, read before its finalizer is put on: answered at once."""
        return {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": {"name": name, "resourceVersion": "1"}}


def folded_view() -> core.DispatchState:
    view = core.DispatchState()
    events: list[types.Event] = [
        types.ResourceFlavorObserved(flavor=parse(flavor("rf"))),
        types.ClusterQueueObserved(cluster_queue=parse(cluster_queue("cq", flavors={"rf": {"cpu": "1"}}))),
        types.LocalQueueObserved(local_queue=parse(local_queue("lq", "cq"))),
    ]
    for seq, event in enumerate(events, start=1):
        core.fold(view, event, seq=seq)
    return view


async def test_a_status_write_under_way_is_still_pending() -> None:
    view = folded_view()
    api = HeldApi()
    stored = StoredObjects(api=api, limiter=WriteLimiter(qps=100, burst=10), field_manager="t")  # type: ignore[arg-type]
    sync = QueueStatusSync(view=view, stored=stored, interval=0.0)
    assert sync.pending() == 3  # the flavor (its finalizer), the ClusterQueue and the LocalQueue, as folded

    writer = asyncio.create_task(sync.sync())
    while len(api.started) < 1:
        await asyncio.sleep(0)
    # the dirty sets are empty now, the write is not answered: still pending
    assert not view.dirty_queues and len(sync.dirty) == 1
    assert sync.pending() == 2 and sync.writing == 1

    api.release.set()
    await writer
    assert sorted(api.started) == ["ClusterQueue/cq", "LocalQueue/lq"]
    assert sync.pending() == 0 and sync.writing == 0 and sync.writes == 2


class AnsweringApi(HeldApi):
    """Answers every write at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release.set()
        self.applied: list[tuple[str, dict[str, Any]]] = []

    async def apply_object(self, ref: Any, *, namespace: Any, name: str, body: Any, **kw: Any) -> dict[str, Any]:
        self.applied.append((f"{ref.kind}/{name}", body["status"]))
        return await super().apply_object(ref, namespace=namespace, name=name, body=body, **kw)


async def test_local_queue_consumed_resources_are_sampled_every_interval() -> None:
    """Kueue's LocalQueue controller writes consumedResources every usageSamplingInterval (1 s here), decayed
    towards the admitted usage (fair_sharing_test.go 'should maintain non-zero CPU ConsumedResources across
    sampling intervals'): lq-a holds 4 CPU with 2 consumed at its admission; a tick 1 s later (half-life 1 s)
    shows 3, with no event on the log in between, and a look within the same tick writes nothing."""
    from kueue_es.scenarios import specs
    from tests.unit.test_afs import _run_a1

    state = _run_a1(specs.CheckEvent(workload="default/a-1", check="check1", state="Ready"))
    last = state.afs_ledgers[("default", "lq-a")].last_ms
    view = core.DispatchState()
    view.cluster = state
    view.dirty_queues[("LocalQueue", "default", "lq-a")] = None
    api = AnsweringApi()
    stored = StoredObjects(api=api, limiter=WriteLimiter(qps=100, burst=10), field_manager="t")  # type: ignore[arg-type]
    now = [last + 200]
    sync = QueueStatusSync(view=view, stored=stored, interval=0.0, clock=lambda: now[0])

    def consumed() -> list[dict[str, Any]]:
        return [s["fairSharing"]["admissionFairSharingStatus"] for kind, s in api.applied if kind == "LocalQueue/lq-a"]

    await sync.sync()
    assert consumed()[-1]["consumedResources"] == {"cpu": "2"}
    now[0] = last + 1_500
    await sync.sync()
    assert consumed()[-1] == {"consumedResources": {"cpu": "3"}, "lastUpdate": "2026-01-01T00:01:03Z"}
    writes = len(api.applied)
    now[0] = last + 1_900
    await sync.sync()
    assert len(api.applied) == writes
