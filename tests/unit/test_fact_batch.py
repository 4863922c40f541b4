"""FactBatch (event schema 16): several workloads' facts in one message, folded as if each were alone.

A burst of workloads created or finished was a message per fact on the log, stored by nats-server and
parsed by every reader (docs/benchmarks.md, issue 18); the watcher and the bench harness now publish
such runs as FactBatch messages. These tests pin what every reader must keep: the same state, the same
decisions, the same partitions marked for a cycle, the same public messages, as for the facts alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

import msgspec
import pytest

from kueue_es import checkpoints, deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import BusError, LogMessage, OutgoingMessage
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.perfbench.executor import Executor
from kueue_es.projections.cluster import ClusterState
from kueue_es.services import runtime
from kueue_es.services.publisher import core as publisher_core
from kueue_es.services.watcher.publishing import Publisher
from tests.builders import cluster_queue, flavor, kueue_fact, local_queue, workload

NOW_MS = 1_767_225_600_000


def _observed(name: str, **kw: Any) -> types.WorkloadObserved:
    fact = kueue_fact(workload(name, cpu="1", **kw))
    assert isinstance(fact, types.WorkloadObserved)
    return fact


def _finished(name: str) -> types.WorkloadFinished:
    return types.WorkloadFinished(workload=types.WorkloadRef(namespace="default", name=name, uid=f"uid-{name}"))


def _stored(messages: list[OutgoingMessage]) -> list[LogMessage]:
    return [
        LogMessage(seq=i, subject=m.subject, data=m.data, headers={**m.headers, "Nats-Msg-Id": m.msg_id})
        for i, m in enumerate(messages, 1)
    ]


def _setup() -> list[OutgoingMessage]:
    docs = [flavor("default"), cluster_queue("cq", flavors={"default": {"cpu": "4"}}), local_queue("lq", "cq")]
    return [subjects.fact_message(kueue_fact(doc), version="1") for doc in docs]


def _decisions(state: ClusterState) -> dict[tuple[str, str], list[bytes]]:
    out = {}
    for role, decider in sorted(deciders.BY_ROLE.items()):
        for partition in sorted({subjects.DEFAULT_PARTITION, *state.partitions.all()}):
            out[(role, partition)] = [
                codec.encode(d) for d in decider.decide(state, now_ms=NOW_MS, partition=partition)
            ]
    return out


# -- the message ------------------------------------------------------------------------------------


def test_a_batch_is_its_facts_payloads_in_a_list_and_decodes_to_them() -> None:
    facts = [(_observed("a"), "1"), (_finished("b"), "run-7"), (_observed("c", priority=5), "1")]
    (message,) = subjects.fact_batches(facts, source="watcher")
    assert message.subject == "kq.in.batch.watcher"
    assert message.headers == {"Kq-Type": "FactBatch", "Kq-Schema": str(types.SCHEMA_VERSION)}
    batch = types.FactBatch(facts=[fact for fact, _ in facts])
    assert message.data == codec.encode(batch)  # assembled from the facts' own bytes, as the codec writes it
    assert codec.decode(message.data) == batch
    assert subjects.fact_batches(facts, source="watcher")[0].msg_id == message.msg_id  # a retry dedups
    assert subjects.fact_batches(facts[:2], source="watcher")[0].msg_id != message.msg_id


def test_a_run_of_one_fact_keeps_its_own_subject_and_msg_id() -> None:
    fact = _observed("a")
    assert subjects.fact_batches([(fact, "1")], source="bench") == [subjects.fact_message(fact, version="1")]
    assert subjects.fact_batches([], source="bench") == []


def test_long_runs_are_cut_by_count_and_by_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = [(_observed(f"w{i}"), "1") for i in range(7)]
    monkeypatch.setattr(subjects, "FACT_BATCH_MAX_FACTS", 3)
    out = subjects.fact_batches(facts, source="bench")
    assert [len(codec.decode(m.data).facts) for m in out[:2]] == [3, 3]  # type: ignore[union-attr]
    assert out[2] == subjects.fact_message(facts[6][0], version="1")
    one = len(subjects.fact_message(facts[0][0], version="1").data)
    monkeypatch.setattr(subjects, "FACT_BATCH_MAX_FACTS", 500)
    monkeypatch.setattr(subjects, "FACT_BATCH_MAX_BYTES", 2 * one + 40)  # two facts and the list around them
    sizes = [
        len(codec.decode(m.data).facts) if m.subject.startswith("kq.in.batch.") else 1
        for m in subjects.fact_batches(facts, source="bench")
    ]
    assert sizes == [2, 2, 2, 1]
    assert all(len(m.data) <= 2 * one + 40 for m in subjects.fact_batches(facts, source="bench"))


def test_a_source_that_is_not_one_subject_token_is_refused() -> None:
    for source in ("", "a.b", "*", ">", "a b"):
        with pytest.raises(ValueError, match="fact batch source"):
            subjects.fact_batches([(_observed("a"), "1")], source=source)


def test_only_workloads_observed_and_finished_facts_decode_in_a_batch() -> None:
    """Any other fact inside a batch makes the payload undecodable: every fold skips it as a bad event."""
    data = (
        b'{"type":"FactBatch","facts":['
        + codec.encode(
            types.NamespaceObserved(
                namespace=kueue_fact({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}).namespace
            )
        )
        + b"]}"
    )  # type: ignore[union-attr]
    with pytest.raises(codec.DecodeError):
        codec.decode(data)
    state = ClusterState()
    runtime.fold_message(state, LogMessage(seq=1, subject="kq.in.batch.x", data=data, headers={}))
    assert state.last_seq == 1 and not state.workloads


# -- the folds ------------------------------------------------------------------------------------


def test_a_batch_folds_and_decides_as_its_facts_alone() -> None:
    """Every decider's decisions, byte for byte, after the workloads are observed and after some finish, are
    the same whether their facts came alone or in a batch stored at the same sequence (a decision names
    the sequences it was decided on: a log of more messages would name others)."""
    observed = [_observed(f"w{i}", priority=i % 3) for i in range(6)]
    alone, batched = ClusterState(), ClusterState()
    for message in _stored(_setup()):
        runtime.fold_message(alone, message)
        runtime.fold_message(batched, message)

    def both(facts: list[types.BatchedFact], seq: int) -> None:
        for fact in facts:
            runtime.apply(alone, fact, seq=seq)
        (batch,) = subjects.fact_batches([(f, "v") for f in facts], source="bench")
        runtime.fold_message(
            batched, LogMessage(seq=seq, subject=batch.subject, data=batch.data, headers=batch.headers)
        )

    both(list(observed), 4)
    assert sorted(batched.workloads) == sorted(f"default/w{i}" for i in range(6))
    assert _decisions(alone) == _decisions(batched)
    admitted = deciders.ADMITTER.decide(alone, now_ms=NOW_MS, partition=subjects.DEFAULT_PARTITION)
    held = [d.workload.name for d in admitted if isinstance(d, types.WorkloadAdmitted)]
    assert held
    for state in (alone, batched):
        for output in admitted:
            runtime.apply(state, output, seq=5)
    pending = next(f"w{i}" for i in range(6) if f"w{i}" not in held)
    both([_finished(held[0]), _finished(pending)], 6)
    assert checkpoints.state_digest(alone) == checkpoints.state_digest(batched)
    assert _decisions(alone) == _decisions(batched)
    assert {k for k, wl in batched.workloads.items() if wl.finished} == {f"default/{held[0]}", f"default/{pending}"}


def test_a_batch_gives_the_same_state_digest_as_its_facts_at_one_sequence() -> None:
    observed = [_observed(f"w{i}") for i in range(4)]
    alone, batched = ClusterState(), ClusterState()
    for message in _stored(_setup()):
        runtime.fold_message(alone, message)
        runtime.fold_message(batched, message)
    for fact in observed:  # each alone, all at the sequence the batch is stored at
        runtime.apply(alone, fact, seq=4)
    (batch,) = subjects.fact_batches([(f, "1") for f in observed], source="watcher")
    runtime.fold_message(batched, LogMessage(seq=4, subject=batch.subject, data=batch.data, headers=batch.headers))
    assert checkpoints.state_digest(alone) == checkpoints.state_digest(batched)


def test_explain_and_every_before_apply_hook_see_the_facts_one_by_one() -> None:
    observed = [_observed("a"), _observed("b")]
    (batch,) = subjects.fact_batches([(f, "1") for f in observed], source="watcher")
    seen: list[tuple[int, types.Event]] = []
    state = ClusterState()
    runtime.fold_decoded(
        state,
        LogMessage(seq=9, subject=batch.subject, data=batch.data, headers=batch.headers),
        codec.decode(batch.data),
        before_apply=lambda seq, event, _state: seen.append((seq, event)),
    )
    assert seen == [(9, observed[0]), (9, observed[1])]
    assert state.last_seq == 9


class _Role:
    """Stands in for a DeciderLoop: records what a drain touched."""

    def __init__(self) -> None:
        self.touched: list[tuple[set[str], bool]] = []

    def touch(self, dirty: Collection[str], *, everything: bool, moved: bool, heads: dict[str, int]) -> None:
        self.touched.append((set(dirty), everything))


async def test_a_drain_marks_the_batchs_workloads_partitions_not_every_partition() -> None:
    """A fact on a workload's subject marks that workload's partition for a cycle, not all of them
    (runtime.LogFold.drain); a FactBatch marks each of its workloads' partitions the same way."""
    docs = [
        flavor("default"),
        cluster_queue("cq", flavors={"default": {"cpu": "4"}}),
        cluster_queue("other", flavors={"default": {"cpu": "4"}}),
        local_queue("lq", "cq"),
    ]
    setup = [subjects.fact_message(kueue_fact(doc), version="1") for doc in docs]
    batch = subjects.fact_batches([(_observed("a"), "1"), (_observed("b"), "1")], source="watcher")
    fold = runtime.LogFold(bus=None)  # type: ignore[arg-type]  # drain reads its inbox only
    role = _Role()
    fold.roles = [role]  # type: ignore[list-item]
    for message in _stored(setup):
        fold.inbox.put_nowait(message)
    assert await fold.drain(timeout=1)
    role.touched.clear()
    (stored,) = [LogMessage(seq=5, subject=batch[0].subject, data=batch[0].data, headers=batch[0].headers)]
    fold.inbox.put_nowait(stored)
    assert await fold.drain(timeout=1)
    ((dirty, everything),) = role.touched
    assert not everything
    partition = fold.state.partitions.of_workload("default/a")
    assert partition is not None and dirty == {"", partition}
    assert fold.state.partitions.of_workload("default/b") == partition


# -- the public stream ---------------------------------------------------------------------------------


def test_the_public_stream_gets_each_fact_on_its_workloads_subject() -> None:
    observed = [_observed("a"), _observed("b.c")]
    (batch,) = subjects.fact_batches([(f, "1") for f in observed], source="watcher")
    stored = LogMessage(
        seq=12, subject=batch.subject, data=batch.data, headers={**batch.headers, "Nats-Msg-Id": batch.msg_id}
    )
    out = publisher_core.public_messages(stored, codec.decode(batch.data), record=None, time_ms=NOW_MS)
    assert [m.subject for m in out] == ["kq.pub.wl.default.a", "kq.pub.wl.default.b%2Ec"]
    assert [codec.decode(m.data) for m in out] == observed
    assert [m.headers["Kq-Entry"] for m in out] == ["1/2", "2/2"]
    assert {m.headers["Kq-Seq"] for m in out} == {"12"} and {m.headers["Kq-Log-Subject"] for m in out} == {
        batch.subject
    }
    assert [m.msg_id for m in out] == [f"{batch.msg_id}:1", f"{batch.msg_id}:2"]
    # left half published: all of it again (the Msg-Ids dedupe what was stored)
    assert publisher_core.resume_point(LogMessage(seq=1, subject=out[0].subject, data=b"", headers=out[0].headers)) == (
        11,
        12,
    )


# -- the watcher ---------------------------------------------------------------------------------------


def _log(bus: MemoryBus) -> list[LogMessage]:
    return bus._store.log  # what the memory bus stored, in order


def _published(bus: MemoryBus) -> list[tuple[str, list[str]]]:
    out = []
    for message in _log(bus):
        event = codec.decode(message.data)
        out.append(
            (
                message.subject,
                [
                    type(e).__name__ + ":" + getattr(getattr(e, "workload", None), "key", "")
                    for e in types.unbatched(event)
                ],
            )
        )
    return out


async def test_the_watchers_burst_of_workloads_goes_out_batched_and_in_order() -> None:
    bus = MemoryBus()
    publisher = Publisher(bus=bus, kinds=["Workload", "Namespace"], batch_facts=True)
    for name in ("a", "b", "c"):
        await publisher.publish(_observed(name), version="1")
    assert _log(bus) == []  # queued: published once the watcher waits for its next read
    namespace = kueue_fact({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}})
    await publisher.publish(namespace, version="1")  # another kind of fact: the queued ones go first
    await publisher.publish(_finished("a"), version="run-1")
    await asyncio.sleep(0.01)
    assert [(subject, kinds) for subject, kinds in _published(bus)] == [
        (
            "kq.in.batch.watcher",
            ["WorkloadObserved:default/a", "WorkloadObserved:default/b", "WorkloadObserved:default/c"],
        ),
        ("kq.in.ns._.n", ["NamespaceObserved:"]),
        ("kq.in.wl.default.a", ["WorkloadFinished:default/a"]),  # alone: on its own subject
    ]
    assert publisher.published == 5


async def test_facts_the_bus_refuses_stay_queued_in_order_and_go_out_on_close(monkeypatch: pytest.MonkeyPatch) -> None:
    bus = MemoryBus()
    publisher = Publisher(bus=bus, kinds=["Workload"], batch_facts=True)
    real = bus.publish
    refusals = 1

    async def flaky(message: OutgoingMessage) -> Any:
        nonlocal refusals
        if refusals:
            refusals -= 1
            raise BusError("nats-server down")
        return await real(message)

    monkeypatch.setattr(bus, "publish", flaky)
    monkeypatch.setattr("kueue_es.services.watcher.publishing.RETRY_SECONDS", 0.01)
    await publisher.publish(_observed("a"), version="1")
    await publisher.publish(_observed("b"), version="1")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    await publisher.publish(_observed("c"), version="1")
    await publisher.close()
    keys = [k for _, kinds in _published(bus) for k in kinds]
    assert keys == ["WorkloadObserved:default/a", "WorkloadObserved:default/b", "WorkloadObserved:default/c"]
    assert publisher.unpublished == 0 and publisher.published == 3


async def test_without_batching_each_fact_is_on_the_log_when_publish_returns() -> None:
    bus = MemoryBus()
    publisher = Publisher(bus=bus, kinds=["Workload"])
    await publisher.publish(_observed("a"), version="1")
    assert [m.subject for m in _log(bus)] == ["kq.in.wl.default.a"]


# -- the bench harness -------------------------------------------------------------------------------------


def test_the_harness_batches_finishes_and_keeps_a_stop_in_its_place() -> None:
    ref = types.WorkloadRef(namespace="default", name="c", uid="uid-c")
    stopped = types.WorkloadStopped(workload=ref, reason="Preempted", at_ms=1)
    out = Executor.messages(
        [(_finished("a"), "run-1"), (_finished("b"), "run-2"), (stopped, "evict-3"), (_finished("d"), "run-4")]
    )
    assert [m.headers["Kq-Type"] for m in out] == ["FactBatch", "WorkloadStopped", "WorkloadFinished"]
    assert [m.subject for m in out] == ["kq.in.batch.bench", "kq.in.wl.default.c", "kq.in.wl.default.d"]
    assert msgspec.json.decode(out[0].data)["facts"][1]["workload"]["name"] == "b"


def test_the_publisher_service_releases_a_batch_once_whole() -> None:
    """The publisher folds the log as every service does and is shown a batch's facts one by one; it releases the
    batch once, whole, and public_messages splits it (a second fact of the batch must not cut it short)."""
    from kueue_es.services.publisher.service import Publisher as PublicPublisher

    publisher = PublicPublisher(bus=None)  # type: ignore[arg-type]  # released() does no I/O
    observed = [_observed("a"), _observed("b"), _observed("c")]
    log = _stored(_setup() + subjects.fact_batches([(f, "1") for f in observed], source="watcher"))
    released = [item for message in log for item in publisher.released(message)]
    batches_out = [(raw.seq, event) for raw, event, _ in released if raw.subject.startswith(subjects.FACT_BATCH_PREFIX)]
    assert batches_out == [(4, types.FactBatch(facts=observed))]
    raw, event, record = released[-1]
    out = publisher_core.public_messages(raw, event, record=record, time_ms=NOW_MS)
    assert [m.subject for m in out] == ["kq.pub.wl.default.a", "kq.pub.wl.default.b", "kq.pub.wl.default.c"]


def test_the_dispatchers_fold_keeps_a_status_record_for_each_fact_of_a_batch() -> None:
    """A dispatcher that writes Workload objects keeps a status record per workload: a FactBatch's workloads
    get theirs as if each fact had come alone (dispatcher.core.fold unpacks a batch)."""
    from kueue_es.services.dispatcher import core as dispatch_core

    alone, batched = dispatch_core.DispatchState(track_objects=True), dispatch_core.DispatchState(track_objects=True)
    for i, message in enumerate(_stored(_setup()), 1):
        for view in (alone, batched):
            dispatch_core.fold(view, codec.decode(message.data), seq=i)
    observed = [_observed("a"), _observed("b")]
    for fact in observed:
        dispatch_core.fold(alone, fact, seq=4)
    dispatch_core.fold(batched, types.FactBatch(facts=observed), seq=4)
    assert sorted(batched.records) == sorted(alone.records) == ["default/a", "default/b"]
    assert batched.records == alone.records
