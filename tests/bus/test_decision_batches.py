"""Issue 13 on every bus (memory, one nats-server, a 3-node cluster): garbage on a partition's
head does not fence the deciders, decisions published outside a batch are never folded, nor is a
batch of decisions its role does not make."""

from __future__ import annotations

import asyncio

import nats
import pytest

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import base
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState
from kueue_es.replay import replay_bus
from kueue_es.services.runtime import DeciderLoop, build_batch, cancel_and_wait, fold_message
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload
from tests.bus.conftest import Harness

pytestmark = pytest.mark.timeout(60)


async def publish_raw(harness: Harness, bus: base.Bus, subject: str, data: bytes) -> None:
    """Publish ``data`` as an outsider would: plain nats-py on NATS, no Msg-Id, no headers."""
    if not harness.urls:
        await bus.publish(base.OutgoingMessage(subject=subject, data=data, msg_id=f"raw:{subject}:{hash(data)}"))
        return
    nc = await nats.connect(harness.urls)
    try:
        await nc.jetstream().publish(subject, data)
    finally:
        await nc.close()


async def publish_facts(bus: base.Bus, *docs: dict) -> None:
    for doc in docs:
        await bus.publish(subjects.fact_message(kueue_fact(doc)))


async def wait_reserved(loop: DeciderLoop, key: str, *, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while (wl := loop.state.workloads.get(key)) is None or wl.reservation is None:
            await asyncio.sleep(0.05)


async def test_garbage_on_the_head_does_not_stop_admission(harness: Harness, bus: base.Bus) -> None:
    """One non-JSON message on a head of p0 (the TAS placer's: the admitter's token covers every role's
    head); a workload submitted after it is admitted within seconds."""
    await publish_facts(bus, flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 4}}), local_queue("lq", "cq"))
    await publish_facts(bus, workload("before", cpu="1"))
    loop = DeciderLoop(bus=bus, decider=deciders.ADMITTER, wakeup=0.05)
    task = asyncio.create_task(loop.run())
    try:
        await wait_reserved(loop, "default/before", timeout=10)
        await publish_raw(harness, bus, subjects.head_subject("place"), b"\xffthis is not json")
        await publish_facts(bus, workload("after", cpu="1"))
        await wait_reserved(loop, "default/after", timeout=5)
        assert loop.readiness()[0]
    finally:
        await cancel_and_wait([task])
    state = ClusterState()
    async for message in bus.read(start_seq=1):
        fold_message(state, message)
        if message.pending == 0:
            break
    assert state.workloads["default/after"].reservation is not None  # its batch verifies for every reader


async def test_decisions_outside_a_batch_are_not_folded(harness: Harness, bus: base.Bus) -> None:
    """QuotaReserved + WorkloadAdmitted with plain nats-py, no record: no reader folds them, and
    the admitter still decides as if they were not there (an 8-CPU workload in 4 CPU stays pending)."""
    await publish_facts(bus, flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 4}}), local_queue("lq", "cq"))
    await publish_facts(bus, workload("big", cpu="8"))
    ref = types.WorkloadRef(namespace="default", name="big", uid="uid-big")
    subject = subjects.workload_decision_subject(ref)
    usage = {"cpu": 8000}
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "f"}, resource_usage=usage, count=1)
    reserved = types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=1)
    await publish_raw(harness, bus, subject, codec.encode(reserved))
    admitted = types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=1)
    await publish_raw(harness, bus, subject, codec.encode(admitted))
    orphans = []
    loop = DeciderLoop(bus=bus, decider=deciders.ADMITTER, wakeup=0.05, on_orphan=orphans.append)
    task = asyncio.create_task(loop.run())
    try:
        await publish_facts(bus, workload("small", cpu="1"))
        await wait_reserved(loop, "default/small", timeout=10)
    finally:
        await cancel_and_wait([task])
    big = loop.state.workloads["default/big"]
    assert big.reservation is None and not big.admitted
    assert loop.state.usage["cq"]["f"]["cpu"] == 1000
    assert [o.reason for o in orphans] == ["outside_batch", "outside_batch"]


@pytest.mark.parametrize("schema_version", [16, 17])
async def test_a_batch_on_the_preemptors_head_carrying_reservations_is_not_folded(
    bus: base.Bus, schema_version: int
) -> None:
    """A well-formed batch of role ``preempt`` on the preemptor's head, committed by a connection that may
    publish anything (an admin's), carrying QuotaReserved + WorkloadAdmitted for an 8-CPU workload in a
    4-CPU ClusterQueue: the preemptor makes no such decisions, so no reader folds it; the admitter reports
    it (reason wrong_role) and decides as if it were not there; replay reports it and exits non-zero. In
    either layout: output messages after the record (schema 16) or decisions the record carries (17)."""
    await publish_facts(bus, flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 4}}), local_queue("lq", "cq"))
    await publish_facts(bus, workload("big", cpu="8"))
    ref = types.WorkloadRef(namespace="default", name="big", uid="uid-big")
    usage = {"cpu": 8000}
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "f"}, resource_usage=usage, count=1)
    forged = [
        types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=1),
        types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=1),
    ]
    head, rest = build_batch(
        deciders.PREEMPTOR, outputs=forged, basis_seq=4, head_seq=0, now_ms=1, schema_version=schema_version
    )
    assert head.subject == "kq.dec.p0.head.preemptor"
    last = await bus.commit_batch(head=head, expected_head_seq=0, rest=rest, head_filter=subjects.heads_of())
    assert last == 5 + len(rest) and len(rest) == (2 if schema_version == 16 else 0)
    forged_seqs = list(range(5, last + 1))
    orphans: list[batches.Orphan] = []
    loop = DeciderLoop(bus=bus, decider=deciders.ADMITTER, wakeup=0.05, on_orphan=orphans.append)
    task = asyncio.create_task(loop.run())
    try:
        await publish_facts(bus, workload("small", cpu="1"))
        await wait_reserved(loop, "default/small", timeout=10)
    finally:
        await cancel_and_wait([task])
    big = loop.state.workloads["default/big"]
    assert big.reservation is None and not big.admitted
    assert loop.state.usage["cq"]["f"]["cpu"] == 1000
    assert [(o.seq, o.reason) for o in orphans] == [(seq, "wrong_role") for seq in forged_seqs]
    report = await replay_bus(bus, deciders.BY_ROLE)
    assert report.exit_code == 4
    assert [(o.seq, o.why.split(":")[0]) for o in report.orphans] == [(seq, "wrong_role") for seq in forged_seqs]
    assert "which role 'preempt' does not make" in report.orphans[0].why
