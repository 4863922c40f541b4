"""Watcher, admitter and dispatcher in one process on one MemoryBus and one emulated API server.

A Job flows from the cluster to a fact, to an admission decision, and back to the
cluster as an unsuspended Job with its flavor's node labels and tolerations. The
edge cases: a missing LocalQueue, a redelivered decision, a Job deleted before its
decision is executed, an undecodable message among the decisions, decisions
published outside any DecisionRecord's batch (never executed), and a rogue record
as the last message of the log (no stall).
"""

from __future__ import annotations

import asyncio

import pytest

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import OutgoingMessage
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.projections import batches
from kueue_es.services.kube import client as kube
from kueue_es.services.runtime import build_batch
from kueue_es.services.watcher.service import Watcher
from tests.integration.harness import (
    JOBS,
    SPOT_TOLERATION,
    admitter,
    cluster_queue,
    decision_entries,
    dispatcher_with_consumer,
    events_of,
    flavor,
    job,
    local_queue,
    log_entries,
    redeliver,
    running,
    wait_for,
    wait_until,
    watch_all,
)

pytestmark = pytest.mark.timeout(20)


async def message_of(bus: MemoryBus, cls: type[types.Event], **fields) -> tuple:
    """The one log message holding an event of type ``cls`` with ``fields`` (a decision's record, when it carries
    it: event schema 17), and the event."""
    found = [
        (m, e)
        for m, e in await decision_entries(bus)
        if isinstance(e, cls) and all(getattr(e, k) == v for k, v in fields.items())
    ]
    assert len(found) == 1, found
    return found[0]


# -- 4. a Job whose LocalQueue does not exist --------------------------------------------------


async def test_missing_local_queue_is_inadmissible_until_it_is_created(api, bus: MemoryBus) -> None:
    """A Job naming a LocalQueue that does not exist waits with Kueue's message, and is admitted once it does."""
    async with running(*watch_all(Watcher(bus=bus, api=api)), admitter(bus).run()):
        await kube.apply_manifest(api, flavor("default-flavor"))
        await kube.apply_manifest(api, cluster_queue("cluster-queue"))
        await kube.apply_manifest(api, job("early", queue="late-queue"))
        [observed] = await wait_for(bus, types.WorkloadObserved)
        ref = types.WorkloadRef(
            namespace="default", name=observed.workload.metadata.name, uid=observed.workload.metadata.uid
        )

        [waiting] = await wait_for(bus, types.WorkloadInadmissible)
        assert waiting.workload == ref
        assert waiting.message == "LocalQueue late-queue doesn't exist"
        assert await events_of(bus, types.QuotaReserved) == []
        assert await events_of(bus, types.WorkloadAdmitted) == []

        await kube.apply_manifest(api, local_queue("late-queue", "cluster-queue"))
        [admitted] = await wait_for(bus, types.WorkloadAdmitted)  # no checks: one message reserves and admits
        reserved = types.reservation_of(admitted)

    assert reserved.workload == ref and reserved.cluster_queue == "cluster-queue"
    [assignment] = reserved.pod_set_assignments
    assert assignment.flavors == {"cpu": "default-flavor", "memory": "default-flavor"}
    assert assignment.resource_usage == {"cpu": 1000, "memory": 200 * 2**20}
    assert len(await events_of(bus, types.WorkloadInadmissible)) == 1  # recorded once, not every cycle


# -- 5. the dispatcher starts admitted Jobs, once ------------------------------------------------


async def test_admitted_job_is_started_on_its_flavor_and_a_redelivery_changes_nothing(api, bus: MemoryBus) -> None:
    """The admitted Job is unsuspended with the flavor's nodeSelector and toleration added to its own; handling the
    same decision again writes no second DispatchApplied, does not duplicate the toleration, and acks."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    own_toleration = {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}
    async with running(
        *watch_all(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await kube.apply_manifest(
            api, flavor("spot", node_labels={"instance-type": "spot"}, tolerations=[SPOT_TOLERATION])
        )
        await kube.apply_manifest(api, cluster_queue("cluster-queue", flavor_name="spot"))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        await kube.apply_manifest(api, job("sample", parallelism=3, completions=3, tolerations=[own_toleration]))

        [applied] = await wait_for(bus, types.DispatchApplied)
        admitted_message, admitted = await message_of(bus, types.WorkloadAdmitted)
        started = await kube.get_object(api, JOBS, namespace="default", name="sample")
        await wait_until(lambda: admitted_message.seq in consumer.acked, what="the ack of the admission")

        # At-least-once delivery: the same decision handled again (its record delivered again).
        fresh = await redeliver(dispatcher, bus, admitted_message.seq)
        again = await kube.get_object(api, JOBS, namespace="default", name="sample")

    assert applied.workload == admitted.workload and applied.decision_seq == admitted_message.seq
    assert applied.action == "StartJob" and applied.target == "Job default/sample"
    assert applied.node_selector == {"instance-type": "spot"}
    # one result, on the admission's record subject, naming it (schema version 5: DispatchBatchApplied)
    batches = [(m, e) for m, e in await log_entries(bus) if isinstance(e, types.DispatchBatchApplied)]
    [(message, batch)] = batches
    assert [(entry.decision_seq, entry.decision_index) for entry in batch.entries] == [(admitted_message.seq, 1)]
    assert message.subject == subjects.record_dispatch_subject(batch.partition, batch.record_seq)
    assert message.headers["Nats-Msg-Id"].startswith(f"disp:local:rec:{batch.partition}:{batch.record_seq}:0:")

    assert started["spec"]["suspend"] is False
    pod_spec = started["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"instance-type": "spot"}
    assert pod_spec["tolerations"] == [own_toleration, SPOT_TOLERATION]
    assert pod_spec["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "200Mi"}

    assert fresh.acked == [admitted_message.seq] and fresh.naked == []
    assert len(await events_of(bus, types.DispatchApplied)) == 1
    assert again["spec"]["template"]["spec"]["tolerations"] == [own_toleration, SPOT_TOLERATION]
    assert again["spec"]["suspend"] is False


# -- 6. the Job is gone before its decision is executed ----------------------------------------


async def test_job_deleted_before_dispatch_gives_dispatch_failed_404_and_ack(api, bus: MemoryBus) -> None:
    """A WorkloadAdmitted whose Job was deleted meanwhile (the watcher lagging) is recorded as DispatchFailed 404, acked."""
    async with running(*watch_all(Watcher(bus=bus, api=api)), admitter(bus).run()):
        await kube.apply_manifest(api, flavor("default-flavor"))
        await kube.apply_manifest(api, cluster_queue("cluster-queue"))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        await kube.apply_manifest(api, job("fleeting"))
        await wait_for(bus, types.WorkloadAdmitted)
    # The watcher is down, so the deletion does not reach the log before the dispatcher acts.
    await kube.delete_object(api, JOBS, namespace="default", name="fleeting")

    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(dispatcher.fold_forever(), dispatcher.consume(consumer)):
        [failed] = await wait_for(bus, types.DispatchFailed)
        admitted_message, admitted = await message_of(bus, types.WorkloadAdmitted)
        await wait_until(lambda: admitted_message.seq in consumer.acked, what="the ack of the failed decision")

    assert failed.workload == admitted.workload and failed.decision_seq == admitted_message.seq
    assert (failed.action, failed.status, failed.reason) == ("StartJob", 404, "NotFound")
    assert not failed.retryable
    assert admitted_message.seq in consumer.acked and consumer.naked == []
    assert await events_of(bus, types.DispatchApplied) == []
    assert (dispatcher.applied, dispatcher.failed) == (0, 1)


# -- 7. an undecodable decision ----------------------------------------------------------------


async def test_undecodable_decision_is_acked_and_later_decisions_still_run(api, bus: MemoryBus) -> None:
    """Garbage on a per-workload decision subject is acked and skipped; the next admitted Job is still started."""
    broken = await bus.publish(
        OutgoingMessage(subject="kq.dec.p0.wl.default.broken", data=b"{broken", msg_id="broken-1")
    )
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_all(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ) as tasks:
        await kube.apply_manifest(api, flavor("default-flavor", node_labels={"pool": "a"}))
        await kube.apply_manifest(api, cluster_queue("cluster-queue"))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        await kube.apply_manifest(api, job("after-garbage"))
        [applied] = await wait_for(bus, types.DispatchApplied)
        started = await kube.get_object(api, JOBS, namespace="default", name="after-garbage")
        # acks follow the batch's Events (at least once across a crash), so they may land after its result
        await wait_until(lambda: broken.seq in consumer.acked, what="the ack of the broken decision")
        assert not any(t.done() for t in tasks)

    assert consumer.acked[0] == broken.seq
    with pytest.raises(codec.DecodeError):
        codec.decode((await bus.get(broken.seq)).data)
    assert started["spec"]["suspend"] is False
    assert started["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "a"}
    assert applied.node_selector == {"pool": "a"}
    assert dispatcher.state.last_seq >= applied.decision_seq > broken.seq


# -- 8. decisions outside any batch (issue 13) -------------------------------------------------


async def test_decisions_published_without_a_record_never_start_a_job(api, bus: MemoryBus) -> None:
    """QuotaReserved + WorkloadAdmitted for an 8-CPU Job in a 4-CPU ClusterQueue, published with no
    DecisionRecord: no service folds them, the dispatcher acks them unexecuted, the Job stays
    suspended; a Job the admitter admits afterwards still starts."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    async with running(
        *watch_all(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await kube.apply_manifest(api, flavor("default-flavor"))
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=4))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        await kube.apply_manifest(api, job("big", cpu="8"))
        [observed] = await wait_for(bus, types.WorkloadObserved)
        meta = observed.workload.metadata
        ref = types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
        assignment = types.PodSetAssignment(
            name="main",
            flavors={"cpu": "default-flavor", "memory": "default-flavor"},
            resource_usage={"cpu": 8000, "memory": 200 * 2**20},
            count=1,
        )
        subject = subjects.workload_decision_subject(ref)
        forged = [
            types.QuotaReserved(workload=ref, cluster_queue="cluster-queue", pod_set_assignments=[assignment], at_ms=1),
            types.WorkloadAdmitted(workload=ref, cluster_queue="cluster-queue", at_ms=1),
        ]
        acks = [
            await bus.publish(OutgoingMessage(subject=subject, data=codec.encode(e), msg_id=f"forged:{i}"))
            for i, e in enumerate(forged)
        ]
        await kube.apply_manifest(api, job("small"))
        for _ in range(250):  # the small Job is admitted and started after the forgery
            small = await kube.get_object(api, JOBS, namespace="default", name="small")
            if small["spec"]["suspend"] is False:
                break
            await asyncio.sleep(0.02)
        await wait_until(lambda: all(a.seq in consumer.acked for a in acks), what="the forged decisions acked")
        big = await kube.get_object(api, JOBS, namespace="default", name="big")

    assert small["spec"]["suspend"] is False
    assert big["spec"]["suspend"] is True
    assert [e.workload.name for e in await events_of(bus, types.DispatchApplied)] == [small_name(dispatcher)]
    assert await events_of(bus, types.EvictionRequested) == []  # nor did the admitter see an overcommitted queue
    assert dispatcher.state.workloads[ref.key].reservation is None
    assert {a.seq for a in acks} <= dispatcher.orphaned_seqs


def small_name(dispatcher) -> str:
    names = [wl.workload.metadata.name for wl in dispatcher.state.workloads.values()]
    [name] = [n for n in names if "small" in n]
    return name


# -- 9. a rogue record as the last message (issue 13) -------------------------------------------


async def test_a_rogue_record_as_the_last_message_does_not_stall_the_dispatcher(api, bus: MemoryBus) -> None:
    """A DecisionRecord claiming two outputs with only the first stored, the last message of the log:
    its second output can never come (a batch is stored whole), so the dispatcher, having read to the
    end, reports the batch broken (batch_incomplete), acks the stored output unexecuted (the running
    Job is not evicted) and goes on, as the deciders do; before, its fold held the batch, and with it
    the delivered output, until some later message broke it."""
    dispatcher, consumer = await dispatcher_with_consumer(bus, api)
    orphans: list[batches.Orphan] = []
    dispatcher.on_orphan = orphans.append
    async with running(
        *watch_all(Watcher(bus=bus, api=api)),
        admitter(bus).run(),
        dispatcher.fold_forever(),
        dispatcher.consume(consumer),
    ):
        await kube.apply_manifest(api, flavor("default-flavor"))
        await kube.apply_manifest(api, cluster_queue("cluster-queue"))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        await kube.apply_manifest(api, job("first"))
        [applied] = await wait_for(bus, types.DispatchApplied)
        ref = applied.workload
        outputs = [
            types.EvictionRequested(workload=ref, cluster_queue="cluster-queue", message="rogue", at_ms=1),
            types.QuotaReleased(workload=ref, cluster_queue="cluster-queue", reason="Rogue", cause_seq=1, at_ms=1),
        ]
        # in the workload's own partition, so that the fold judges the batch only by its missing output
        # (a p0 record whose basis is older than another partition's last record is wrong_partition)
        partition = dispatcher.state.partitions.of_workload(f"{ref.namespace}/{ref.name}")
        assert partition is not None
        basis = await bus.last_seq()
        head, rest = build_batch(
            deciders.ADMITTER,
            outputs=outputs,
            basis_seq=basis,
            head_seq=dispatcher.state.heads.get(partition, 0),
            now_ms=1,
            partition=partition,
            schema_version=16,  # a record followed by its outputs (before event schema 17)
        )
        record = await bus.publish(head)  # published one by one, not as a batch: the second never comes
        stored = await bus.publish(rest[0])
        assert await bus.last_seq() == stored.seq == record.seq + 1
        await wait_until(lambda: stored.seq in consumer.acked, what="the stored output acked unexecuted")
        assert dispatcher.state.last_seq >= stored.seq
        await kube.apply_manifest(api, job("second"))  # and the dispatcher goes on
        await wait_for(bus, types.DispatchApplied, count=2)
        first = await kube.get_object(api, JOBS, namespace="default", name="first")

    assert [(o.seq, o.reason) for o in orphans] == [
        (record.seq, batches.BATCH_INCOMPLETE),
        (stored.seq, batches.BATCH_INCOMPLETE),
    ]
    assert "would end at" in orphans[0].detail
    assert {record.seq, stored.seq} <= dispatcher.orphaned_seqs
    assert first["spec"]["suspend"] is False  # the rogue eviction was never executed
    assert await events_of(bus, types.DispatchApplied, action="StopJob") == []
