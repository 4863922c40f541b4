"""Rejections leave the fold once their object is valid or gone, and the dispatcher reads only the new ones.

Every pod group seen short of pods, every job refused once, added an ObjectRejected to ``ClusterState.rejections``
for good, and the dispatcher looked at the whole map after each batch. Now a rejection goes when its object is
observed valid (a job: when its Workload is observed), or deleted (an object known only by its rejection: the
watcher's ObjectDeleted with reason ``Rejected``), and the dispatcher reads the rejections whose mark is newer than
the last one it saw."""

from __future__ import annotations

from typing import Any

from kueue_es.events import codec, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.services.dispatcher import core
from kueue_es.services.dispatcher.kube_api import WriteLimiter
from kueue_es.services.dispatcher.object_sync import StoredObjects
from kueue_es.services.dispatcher.recording import Recording
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.watcher.kinds import LOGGED_KINDS
from kueue_es.services.watcher.publishing import Publisher
from tests.builders import cluster_queue, parse
from tests.unit.dispatch_log import job_workload

SHORT = "'g' group has fewer runnable pods than expected"


def rejected(kind: str, name: str, *, problem: str = "bad", namespace: str = "default") -> types.ObjectRejected:
    return types.ObjectRejected(kind=kind, namespace=namespace, name=name, field="f", problem=problem, at_ms=1)


def fold(state: ClusterState, *events: types.Event) -> None:
    for event in events:
        apply(state, event, seq=state.last_seq + 1)


def test_a_rejection_goes_once_its_object_is_valid_or_deleted() -> None:
    state = ClusterState()
    fold(
        state,
        rejected("Job", "j"),
        rejected("ClusterQueue", "cq", namespace=""),
        rejected("Pod", "p-0", problem=SHORT),
        rejected("Job", "stays"),
    )
    assert len(state.rejections) == 4
    fold(state, job_workload("j"))  # the Job's Workload: the Job is no longer refused
    fold(state, types.ClusterQueueObserved(cluster_queue=parse(cluster_queue("cq", flavors={"rf": {"cpu": "1"}}))))
    fold(state, types.ObjectDeleted(kind="Pod", namespace="default", name="p-0", reason=types.REJECTED_OBJECT_GONE))
    assert list(state.rejections) == [("Job", "default", "stays")]
    assert list(state.rejection_marks) == [("Job", "default", "stays")]


def test_the_deletion_of_a_rejected_object_changes_nothing_else() -> None:
    """Its ObjectDeleted (reason Rejected) folds to the state without the rejection: no trigger, no queue."""
    with_it, without = ClusterState(), ClusterState()
    fold(with_it, rejected("ClusterQueue", "cq", namespace=""))
    fold(without, rejected("ClusterQueue", "other", namespace=""))
    fold(with_it, types.ObjectDeleted(kind="ClusterQueue", name="cq", reason=types.REJECTED_OBJECT_GONE))
    fold(without, types.SchedulingRequested(request_id="r", mode="cycle"))
    assert not with_it.rejections
    assert with_it.requeue_triggers == without.requeue_triggers


def test_the_same_rejection_seen_again_gets_no_new_mark() -> None:
    state = ClusterState()
    fold(state, rejected("Job", "j"), rejected("Job", "k"))
    fold(state, rejected("Job", "j"))  # a resync: the same problem
    assert state.rejections_changed == 2 and list(state.rejections) == [
        ("Job", "default", "j"),
        ("Job", "default", "k"),
    ]
    fold(state, rejected("Job", "j", problem="worse"))  # news: moves to the end with a new mark
    assert state.rejections_changed == 3 and list(state.rejections)[-1] == ("Job", "default", "j")
    assert state.rejection_marks[("Job", "default", "j")] == 3


class EventsApi:
    """An API server that notes the Events created and has no other object."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def create_object(self, ref: Any, *, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.events.append(body["metadata"]["name"])
        return body

    async def get_object(self, ref: Any, *, namespace: Any, name: str) -> dict[str, Any]:
        raise kube_errors.NotFoundError(status=404, reason="NotFound", message=f"{name} not found")


async def test_the_dispatcher_writes_each_new_rejection_once_and_reads_only_the_new_ones() -> None:
    view, api = core.DispatchState(), EventsApi()
    stored = StoredObjects(api=api, limiter=WriteLimiter(qps=1000, burst=100), field_manager="t")  # type: ignore[arg-type]
    recording = Recording(api=api, limiter=WriteLimiter(qps=1000, burst=100), view=view, stored=stored)  # type: ignore[arg-type]
    seq = 0

    def add(*events: types.Event) -> None:
        nonlocal seq
        for event in events:
            seq += 1
            core.fold(view, event, seq=seq)

    add(rejected("Job", "a"), rejected("Job", "b"))
    await recording.rejections()
    assert [name.split(".")[0] for name in api.events] == ["a", "b"]
    add(rejected("Job", "a"))  # seen again: nothing new
    await recording.rejections()
    assert len(api.events) == 2

    class NoScan(dict[Any, Any]):
        """The rejections map, failing any read beyond the newest entries."""

        def items(self) -> Any:
            raise AssertionError("every rejection read")

        def __iter__(self) -> Any:
            raise AssertionError("every rejection read")

    view.cluster.rejections = NoScan(view.cluster.rejections)
    add(rejected("Job", "c"))
    await recording.rejections()
    assert [name.split(".")[0] for name in api.events] == ["a", "b", "c"]


async def test_the_watcher_tells_the_deletion_of_an_object_known_only_by_its_rejection() -> None:
    bus = MemoryBus()
    publisher = Publisher(bus=bus, kinds=LOGGED_KINDS)
    await publisher.publish(rejected("Job", "j"), version="1")
    await publisher.rejected_gone("Job", "default", "j", uid="u", version="2")
    await publisher.rejected_gone("Job", "default", "never-refused", uid="v", version="3")
    facts = [codec.decode((await bus.get(seq)).data) for seq in range(1, await bus.last_seq() + 1)]
    assert facts[1:] == [
        types.ObjectDeleted(kind="Job", namespace="default", name="j", uid="u", reason=types.REJECTED_OBJECT_GONE)
    ]
    state = ClusterState()
    fold(state, *facts)
    assert not state.rejections
