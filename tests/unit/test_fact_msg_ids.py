"""A fact's Msg-Id names its object's resourceVersion and its content.

The stream drops a message whose Msg-Id it stored within its duplicate window. Keyed by resourceVersion
alone, the fact of a new object was dropped when an earlier object of that name had had the same
resourceVersion: an API server whose versions started over (the demo's emulated one restarted on the same
run directory, a cluster restored from a backup). A ClusterQueue deleted while in use, then made again
there, stayed Terminating on the log for good.
"""

from __future__ import annotations

from typing import Any

from kueue_es.events import codec, models, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.services.watcher.convert import kueue_fact
from kueue_es.services.watcher.kinds import LOGGED_KINDS
from kueue_es.services.watcher.kueue_tracking import terminating_marked
from kueue_es.services.watcher.publishing import Publisher
from tests.builders import cluster_queue


def _queue(uid: str, *, deleting: bool) -> dict[str, Any]:
    doc = cluster_queue("cq", flavors={"f": {"cpu": 4}})
    doc["metadata"].update(uid=uid, resourceVersion="7", finalizers=["kueue.x-k8s.io/resource-in-use"])
    if deleting:
        doc["metadata"]["deletionTimestamp"] = "2026-12-06T18:00:00Z"
    return terminating_marked(doc)


async def test_a_queue_made_again_at_a_resource_version_the_old_one_had_is_logged() -> None:
    bus = MemoryBus()
    first = Publisher(bus=bus, kinds=LOGGED_KINDS)
    await first.publish(kueue_fact(_queue("old", deleting=True)), version="7")
    restarted = Publisher(bus=bus, kinds=LOGGED_KINDS)  # a watcher of the new API server: its versions anew
    await restarted.publish(kueue_fact(_queue("new", deleting=False)), version="7")
    again = Publisher(bus=bus, kinds=LOGGED_KINDS)  # restarted once more: the same object version is a duplicate
    await again.publish(kueue_fact(_queue("new", deleting=False)), version="7")
    facts = [codec.decode((await bus.get(seq)).data) for seq in range(1, await bus.last_seq() + 1)]
    assert [f.cluster_queue.metadata.uid for f in facts if isinstance(f, types.ClusterQueueObserved)] == ["old", "new"]
    state = ClusterState()
    for seq, fact in enumerate(facts, start=1):
        apply(state, fact, seq=seq)
    cq: models.ClusterQueue = state.cluster_queues["cq"]
    assert not cq.terminating
