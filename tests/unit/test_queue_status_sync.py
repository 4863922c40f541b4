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
