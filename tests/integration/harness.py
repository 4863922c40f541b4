"""Helpers for the in-process edge tests: run services as tasks, read and wait on the log, manifests."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

import msgspec

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import Bus, ConflictError, Delivery, DurableConsumer, LogMessage
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.dispatcher.carried import CarriedDecisions
from kueue_es.services.dispatcher.service import Dispatcher, bind_decisions
from kueue_es.services.kube import client as kube
from kueue_es.services.runtime import Decider, DeciderLoop, build_batch, cancel_and_wait, fold_message
from kueue_es.services.watcher.kinds import KUEUE_KINDS, WORKLOAD_KIND
from kueue_es.services.watcher.service import Watcher
from tests.builders import local_queue  # noqa: F401  (re-exported for the edge tests)

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
E = TypeVar("E", bound=types.Event)
JOBS = kube.ref_for("batch/v1", "Job")
SPOT_TOLERATION = {"key": "spot-taint", "operator": "Exists", "effect": "NoSchedule"}
OWN_TOLERATION = {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}
TEST_ROLES = ("preempt", "place", "admit")
"""The roles a test batch may take, the narrowest first: the fold takes a batch only from the role
that makes its kinds of decision (projections/batches.py ROLE_OUTPUTS)."""


def decider_for(outputs: tuple[types.Decision, ...]) -> Decider:
    """A decider that decides nothing, of the first role that makes every kind of ``outputs``."""
    kinds = {type(out) for out in outputs}
    role = next(r for r in TEST_ROLES if kinds <= batches.ROLE_OUTPUTS[r])
    return Decider(role=role, logic_version=1, decide=lambda state, now_ms: [])


NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@contextlib.asynccontextmanager
async def running(*coroutines: Coroutine[Any, Any, Any]) -> AsyncIterator[list[asyncio.Task[Any]]]:
    """Run ``coroutines`` as tasks for the block; cancel them after, and fail if one crashed meanwhile."""
    tasks = [asyncio.create_task(c) for c in coroutines]
    try:
        yield tasks
    finally:
        crashed = [t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
        await cancel_and_wait(tasks)
    assert not crashed, f"a service task crashed: {[t.exception() for t in crashed]!r}"


def watch_all(watcher: Watcher) -> list[Coroutine[Any, Any, None]]:
    """One watch loop per kind, as serve_watcher runs them."""
    return [watcher.watch(kind) for kind in (*KUEUE_KINDS, "Job")]


def watch_with_workloads(watcher: Watcher) -> list[Coroutine[Any, Any, None]]:
    """:func:`watch_all` and the Workload objects (read back for spec.active and check states)."""
    return [*watch_all(watcher), watcher.watch(WORKLOAD_KIND)]


async def log_entries(bus: Bus) -> list[tuple[LogMessage, types.Event | None]]:
    """Every message on the log with its decoded event (None when it does not decode)."""
    entries = []
    for seq in range(1, await bus.last_seq() + 1):
        message = await bus.get(seq)
        try:
            event: types.Event | None = codec.decode(message.data)
        except codec.DecodeError:
            event = None
        entries.append((message, event))
    return entries


async def decision_entries(bus: Bus) -> list[tuple[LogMessage, types.Event | None]]:
    """:func:`log_entries`, each DecisionRecord followed by the decisions it carries (event schema 17), each
    with the record's message: a decision's message is its record, at the record's sequence."""
    entries: list[tuple[LogMessage, types.Event | None]] = []
    for message, event in await log_entries(bus):
        entries.append((message, event))
        if isinstance(event, types.DecisionRecord):
            entries.extend((message, decision) for decision in event.carried)
    return entries


async def events_of(bus: Bus, cls: type[E], **fields: Any) -> list[E]:
    """The events of type ``cls`` on the log whose attributes equal ``fields`` (``a__b`` reaches ``a.b``); a
    DispatchBatchApplied counts as the DispatchApplied of each of its entries, a DecisionRecord as itself
    and the QuotaReleased of each finished release it carries (``types.with_carried``)."""
    found: list[E] = []
    for _, event in await log_entries(bus):
        if event is None:
            continue
        carried = types.with_carried(event)
        for one in types.dispatch_results(event) if isinstance(event, types.DispatchBatchApplied) else carried:
            if isinstance(one, cls) and _matches(one, fields):
                found.append(one)
    return found


def _matches(event: types.Event, fields: dict[str, Any]) -> bool:
    for dotted, want in fields.items():
        value: Any = event
        for part in dotted.split("__"):
            value = getattr(value, part)
        if value != want:
            return False
    return True


async def wait_for(bus: Bus, cls: type[E], *, count: int = 1, timeout: float = 5.0, **fields: Any) -> list[E]:
    """Wait until the log holds at least ``count`` matching events of type ``cls``; return them all."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await events_of(bus, cls, **fields)
        if len(found) >= count:
            return found
        if loop.time() > deadline:
            summary = collections.Counter(type(e).__name__ for _, e in await log_entries(bus))
            raise AssertionError(
                f"wanted {count} {cls.__name__} with {fields} within {timeout}s; log holds {dict(summary)}"
            )
        await asyncio.sleep(0.02)


async def wait_until(condition: Callable[[], bool], *, timeout: float = 5.0, what: str = "condition") -> None:
    """Poll ``condition()`` every 20 ms until it holds; fail naming ``what`` after ``timeout`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        await asyncio.sleep(0.02)


async def until_steady(
    probe: Callable[[], Coroutine[Any, Any, Any]], *, quiet: float = 0.5, timeout: float = 30.0, what: str = "it"
) -> Any:
    """Poll ``await probe()`` every 50 ms until its value has not changed for ``quiet`` s, and return that value.

    A fixed sleep is not enough for "everything is written": on a loaded machine a last status write can land
    seconds later. Fails naming ``what`` if the value still moves after ``timeout`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    value, since = await probe(), loop.time()
    while loop.time() - since < quiet:
        if loop.time() > deadline:
            raise AssertionError(f"{what} kept changing for {timeout}s (last {value!r})")
        await asyncio.sleep(0.05)
        now = await probe()
        if now != value:
            value, since = now, loop.time()
    return value


async def folded(bus: Bus) -> ClusterState:
    """The whole log folded into a ClusterState, as every service folds it."""
    state = ClusterState()
    for message, _ in await log_entries(bus):
        fold_message(state, message)
    return state


class RecordingConsumer(DurableConsumer):
    """A durable consumer that records acks and naks, delegating to ``inner`` when given."""

    def __init__(self, inner: DurableConsumer | None = None) -> None:
        self.inner = inner
        self.acked: list[int] = []
        self.naked: list[int] = []

    async def fetch(self, *, batch: int = 100, timeout: float = 1.0) -> list[Delivery]:
        """Deliveries of the inner consumer (none without one)."""
        if self.inner is None:
            await asyncio.sleep(timeout)
            return []
        return await self.inner.fetch(batch=batch, timeout=timeout)

    async def ack(self, delivery: Delivery) -> None:
        """Record the acked sequence, then ack for real."""
        self.acked.append(delivery.message.seq)
        if self.inner is not None:
            await self.inner.ack(delivery)

    async def nak(self, delivery: Delivery, *, delay: float = 0.0) -> None:
        """Record the nak'ed sequence, then nak for real."""
        self.naked.append(delivery.message.seq)
        if self.inner is not None:
            await self.inner.nak(delivery, delay=delay)


class Redelivery(RecordingConsumer):
    """The server's consumer delivering ``messages`` once more (``attempt``), recording acks and naks."""

    def __init__(self, messages: list[LogMessage], *, attempt: int = 2) -> None:
        super().__init__()
        self.pending = [Delivery(message=message, attempt=attempt) for message in messages]

    async def fetch(self, *, batch: int = 100, timeout: float = 1.0) -> list[Delivery]:
        """The messages not delivered yet, once."""
        out, self.pending = self.pending[:batch], self.pending[batch:]
        return out


async def redeliver(dispatcher: Dispatcher, bus: Bus, seq: int, *, attempt: int = 2) -> Redelivery:
    """Deliver the message at ``seq`` to ``dispatcher`` once more, as its durable consumer would (a record's as
    the decisions it carries: :class:`~kueue_es.services.dispatcher.carried.CarriedDecisions`), and handle it
    until settled; the server's consumer, with the acks it saw (a record's once all its decisions are acked)."""
    server = Redelivery([await bus.get(seq)], attempt=attempt)
    consumer = CarriedDecisions(server)
    await dispatcher.handle_batch(consumer, await consumer.fetch())
    return server


# -- services and decisions ------------------------------------------------------------------


def admitter(bus: Bus) -> DeciderLoop:
    """The admitter decider loop, waking up often."""
    return DeciderLoop(bus=bus, decider=deciders.ADMITTER, wakeup=0.05)


async def dispatcher_with_consumer(bus: Bus, api: Any, **options: Any) -> tuple[Dispatcher, RecordingConsumer]:
    """A Dispatcher (``options`` go to it, ``ack_wait`` to the consumer) and its durable consumer, as
    serve_dispatcher binds it, wrapped to record acks."""
    ack_wait = options.pop("ack_wait", 30.0)
    consumer = await bind_decisions(bus, ack_wait=ack_wait)
    return Dispatcher(bus=bus, api=api, **options), RecordingConsumer(consumer)


def pod_services(bus: Bus, api: Any, dispatcher: Dispatcher, consumer: Any) -> list[Coroutine[Any, Any, Any]]:
    """Watcher, admitter and the dispatcher with its pod watches and ungater: what runs pods end to end."""
    return [
        Watcher(bus=bus, api=api).run(),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
        dispatcher.watch_pods(),
        dispatcher.ungate_forever(),
    ]


async def commit(bus: Bus, *outputs: types.Decision) -> list[int]:
    """Commit ``outputs`` as one batch (of :func:`decider_for`'s role) at the current heads; their log sequences
    (since event schema 17 the record's, once for each decision it carries)."""
    for _ in range(20):
        state = await folded(bus)
        # a p0 (whole-state) batch must not land after any partition's record past its basis (the fold
        # orphans it as wrong_partition), so it expects the last message on every partition's heads
        head_seq = await bus.last_subject_seq(subjects.HEADS)
        head, rest = build_batch(
            decider_for(outputs), outputs=outputs, basis_seq=state.last_seq, head_seq=head_seq, now_ms=NOW_MS
        )
        try:
            last = await bus.commit_batch(head=head, expected_head_seq=head_seq, rest=rest, head_filter=subjects.HEADS)
        except ConflictError:
            continue
        if not rest:  # the record carries them
            record = codec.decode(head.data)
            assert isinstance(record, types.DecisionRecord)
            return [last] * len(record.carried)
        return list(range(last - len(rest) + 1, last + 1))
    raise AssertionError("the test batch kept conflicting")


def eviction(ref: types.WorkloadRef, **fields: Any) -> types.EvictionRequested:
    """The preemptor's eviction of ``ref`` in ClusterQueue cluster-queue, with Kueue's message (``fields`` replace)."""
    event = types.EvictionRequested(
        workload=ref,
        cluster_queue="cluster-queue",
        preemptor=types.WorkloadRef(namespace="default", name="job-urgent-00000", uid="uid-urgent"),
        preemption_reason="InClusterQueue",
        message="Preempted to accommodate a workload (UID: uid-urgent, JobUID: uid-urgent) due to prioritization "
        "in the ClusterQueue",
        at_ms=NOW_MS + 5_000,
    )
    return msgspec.structs.replace(event, **fields) if fields else event


async def set_up_queues(api: Any, *, cpu: Any = 9) -> None:
    """Flavor spot (node label and taint toleration), ClusterQueue cluster-queue on it, LocalQueue user-queue."""
    await kube.apply_manifest(api, flavor("spot", node_labels={"instance-type": "spot"}, tolerations=[SPOT_TOLERATION]))
    await kube.apply_manifest(api, cluster_queue("cluster-queue", flavor_name="spot", cpu=cpu))
    await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))


# -- manifests ----------------------------------------------------------------------------------


def flavor(
    name: str, *, node_labels: dict[str, str] | None = None, tolerations: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A ResourceFlavor manifest."""
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = node_labels
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(
    name: str, *, flavor_name: str = "default-flavor", cpu: Any = 9, memory: Any = "36Gi"
) -> dict[str, Any]:
    """A ClusterQueue with one resource group (cpu, memory) and one flavor."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": flavor_name,
                            "resources": [
                                {"name": "cpu", "nominalQuota": cpu},
                                {"name": "memory", "nominalQuota": memory},
                            ],
                        }
                    ],
                }
            ],
        },
    }


def job(
    name: str,
    *,
    queue: str | None = "user-queue",
    parallelism: int = 1,
    completions: int | None = None,
    cpu: str = "1",
    memory: str = "200Mi",
    tolerations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A batch/v1 Job in namespace default, labelled for ``queue`` (no label when None)."""
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if tolerations:
        pod_spec["tolerations"] = tolerations
    spec: dict[str, Any] = {"parallelism": parallelism, "template": {"spec": pod_spec}}
    if completions is not None:
        spec["completions"] = completions
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": {QUEUE_LABEL: queue} if queue else {}},
        "spec": spec,
    }
