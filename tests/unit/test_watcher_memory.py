"""What the watcher remembers of the facts on the log (services/watcher/publishing.py: ``remember``), so that a
restarted watcher publishes only what differs from the log. Found by a new user's trial: every restart
published a fact again for every unchanged object (a second WorkloadFinished for each finished Workload)."""

from __future__ import annotations

import msgspec

from kueue_es.events import codec, subjects, types
from kueue_es.services.watcher import publishing
from kueue_es.services.watcher.convert import kueue_fact
from tests import builders as b


def _data(fact: types.Fact) -> bytes:
    return subjects.fact_message(fact).data


def test_the_last_fact_about_each_object_is_remembered_as_publish_compares_it() -> None:
    queue = kueue_fact(b.cluster_queue("cq", flavors={"f": {"cpu": 4}}))
    observed = kueue_fact(b.workload("w", cpu="1"))
    assert isinstance(observed, types.WorkloadObserved)
    ref = types.WorkloadRef(namespace="default", name="w", uid=observed.workload.metadata.uid)
    finished = types.WorkloadFinished(workload=ref, succeeded=True, reason="Succeeded", message="done", at_ms=5)
    memory: dict[tuple[str, str, str], bytes] = {}
    for fact in (queue, observed, finished):
        publishing.remember(memory, _data(fact))
    batch = types.FactBatch(facts=[finished])  # a FactBatch's facts count as each alone
    publishing.remember(memory, codec.encode(batch))
    assert memory == {
        ("ClusterQueue", "", "cq"): publishing.compared(queue),
        ("Workload", "default", "w"): publishing.compared(finished),  # the last one about it
    }
    # a finish is the same finish whenever seen: a Job whose condition carries no time converts with "now"
    later = msgspec.structs.replace(finished, at_ms=99)
    assert publishing.compared(later) == memory[("Workload", "default", "w")]
    assert publishing.compared(msgspec.structs.replace(finished, succeeded=False)) != publishing.compared(finished)

    # a fact published by its own rule changes nothing; a deletion forgets the object; a bad message is skipped
    stopped = types.WorkloadStopped(workload=ref, at_ms=7)
    publishing.remember(memory, _data(stopped))
    publishing.remember(memory, b"not an event")
    assert ("Workload", "default", "w") in memory
    publishing.remember(memory, _data(types.ObjectDeleted(kind="ClusterQueue", namespace="", name="cq", uid="u")))
    assert set(memory) == {("Workload", "default", "w")}


async def test_a_publisher_that_learned_the_log_publishes_only_what_differs() -> None:
    from kueue_es.events.bus.memory import MemoryBus
    from kueue_es.projections.cluster import ClusterState
    from kueue_es.projections.topology import TopologyState
    from kueue_es.services.watcher.kinds import LOGGED_KINDS

    queue = kueue_fact(b.cluster_queue("cq", flavors={"f": {"cpu": 4}}))
    bigger = kueue_fact(b.cluster_queue("cq", flavors={"f": {"cpu": 8}}))
    memory: dict[tuple[str, str, str], bytes] = {}
    publishing.remember(memory, _data(queue))
    bus = MemoryBus()
    publisher = publishing.Publisher(bus=bus, kinds=LOGGED_KINDS)
    publisher.learn(state=ClusterState(), topology=TopologyState(), memory=memory)
    await publisher.publish(queue, version="1")
    assert publisher.published == 0 and await bus.last_seq() == 0  # unchanged: nothing
    await publisher.publish(bigger, version="2")
    assert publisher.published == 1 and await bus.last_seq() == 1  # changed: published
    await bus.close()


def test_a_snapshots_watcher_section_keeps_what_the_reporter_learns_of_evictions_by_others() -> None:
    """The reporter keeps the version of the last WorkloadEvictionObserved of each workload, so a restarted
    watcher reports a condition once; a snapshot's watcher section dropped those facts, so a watcher started
    from a snapshot reported them again. It now keeps them, and the facts' memory, as folding from #1 does."""
    from kueue_es import snapshots
    from kueue_es.events.bus.base import LogMessage
    from kueue_es.events.bus.memory import MemoryBus
    from kueue_es.services.watcher.reporting import ProgressReporter

    ref = types.WorkloadRef(namespace="default", name="w", uid="u")
    queue = kueue_fact(b.cluster_queue("cq", flavors={"f": {"cpu": 4}}))
    facts: list[types.Fact] = [
        queue,
        types.WorkloadEvictionObserved(workload=ref, reason="ByTest", message="first", at_ms=1),
        types.WorkloadEvictionObserved(workload=ref, reason="ByTest", message="again", at_ms=2),
    ]
    messages = []
    for seq, fact in enumerate(facts, start=1):
        out = subjects.fact_message(fact, version=f"v{seq}")
        messages.append(
            LogMessage(seq=seq, subject=out.subject, data=out.data, headers={**out.headers, "Nats-Msg-Id": out.msg_id})
        )
    fold = snapshots.WatcherFold()
    for message in messages:
        fold.feed(message)
    _, _, learned, _, memory = snapshots.WatcherFold.start_view(fold.dumps(), where="test")

    def reporter_of(seen: list[LogMessage]) -> ProgressReporter:
        reporter = ProgressReporter(publisher=publishing.Publisher(bus=MemoryBus(), kinds=()), clock=lambda: 0)
        for message in seen:
            reporter.learn(message)
        return reporter

    assert reporter_of(learned).evicted == reporter_of(messages).evicted == {("default", "w"): "v3"}
    assert memory == {("ClusterQueue", "", "cq"): publishing.compared(queue)}
