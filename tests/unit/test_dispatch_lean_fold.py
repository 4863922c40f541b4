"""The dispatcher's lean fold (no Workload objects, no queue status) plans exactly what the full fold plans."""

import json
from pathlib import Path

import pytest

from kueue_es.events import codec, models, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher import core
from kueue_es.services.dispatcher.service import Dispatcher
from kueue_es.services.dispatcher.simulated import SimulatedApi, SimulatedDispatcher, UnlimitedWrites

LOGS = Path(__file__).parent.parent / "fixtures" / "logs"

RF = types.ResourceFlavorObserved(
    flavor=models.ResourceFlavor(
        metadata=models.ObjectMeta(name="rf"), spec=models.ResourceFlavorSpec(node_labels={"pool": "a"})
    )
)


def _workload(name: str, uid: str) -> types.WorkloadObserved:
    return types.WorkloadObserved(
        workload=models.Workload(
            metadata=models.ObjectMeta(name=name, namespace="ns", uid=uid),
            spec=models.WorkloadSpec(queue_name="lq", pod_sets=[models.PodSet(requests={"cpu": 1000})]),
            owner=models.OwnerReference(api_version="batch/v1", kind="Job", name=name, uid=f"job-{uid}"),
        )
    )


def _log() -> list[types.Event]:
    """One workload through two admissions (the first with a topology, evicted, parked, re-admitted without
    one), a redelivered eviction, the deciders' bookkeeping, a dispatch result and a re-created namesake."""
    ref = types.WorkloadRef(namespace="ns", name="w", uid="u1")
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 1000}, count=1)
    reserved = types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=1)
    topology = models.TopologyAssignment(levels=["kubernetes.io/hostname"])
    eviction = types.EvictionRequested(workload=ref, cluster_queue="cq", message="preempted", at_ms=3)
    parked = types.WorkloadInadmissible(workload=ref, reason="Pending", message="no quota", at_ms=5, parked=True)
    record = types.DecisionRecord(
        decision_id="d",
        partition="p",
        role="admit",
        basis_seq=1,
        expected_head_seq=0,
        now_ms=1,
        logic_version=1,
        output_count=0,
        outputs_sha256="",
    )
    return [
        RF,
        _workload("w", "u1"),
        types.WorkloadInadmissible(workload=ref, reason="Pending", message="no quota", at_ms=1),
        types.SchedulingRequested(request_id="r", mode="cycle"),
        reserved,
        types.TopologyAssigned(workload=ref, cluster_queue="cq", assignments={"main": topology}, at_ms=1),
        types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=2),
        types.DispatchApplied(workload=ref, decision_seq=7, action="StartJob", target="Job ns/w"),
        record,
        eviction,
        types.QuotaReleased(workload=ref, cluster_queue="cq", reason="Preempted", cause_seq=10, at_ms=4),
        parked,
        parked,
        types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=6),
        types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=6),
        eviction,  # logged again after the second reservation: it stops that one (at its old seq: nothing)
        types.ObjectDeleted(kind="Workload", namespace="ns", name="w", uid="u1"),
        _workload("w", "u2"),
        types.WorkloadInadmissible(
            workload=types.WorkloadRef(namespace="ns", name="w", uid="u2"), reason="Pending", message="m", at_ms=7
        ),
    ]


def _plan_records(view: core.DispatchState, live: set[str]) -> dict[str, tuple[object, ...]]:
    """What plan reads of the records of the ``live`` workloads: their topology and admission checks."""
    return {k: (r.uid, r.topology, r.checks) for k, r in view.records.items() if k in live and (r.topology or r.checks)}


def test_the_lean_fold_plans_what_the_full_fold_plans() -> None:
    full, lean = core.DispatchState(), core.DispatchState(track_objects=False)
    planned = []
    events = _log()
    for seq, event in enumerate(events, start=1):
        core.fold(full, event, seq=seq)
        core.fold(lean, event, seq=seq)
        assert lean.last_seq == full.last_seq == seq
        # every decision so far, planned again now (redeliveries included)
        for at, earlier in enumerate(events[:seq], start=1):
            assert core.plan(lean, earlier, seq=at) == core.plan(full, earlier, seq=at), (seq, at)
        planned.append(core.plan(full, event, seq=seq))
        live = {k for k, wl in full.cluster.workloads.items() if not wl.gone}
        assert {k: v for k, v in lean.started.items() if k in live} == {
            k: v for k, v in full.started.items() if k in live
        }
        assert lean.reserved_seq == full.reserved_seq
        # the lean fold keeps a record only once it has checks or a topology, and none of a gone workload
        assert _plan_records(lean, live) == _plan_records(full, live)
    starts = [action for action in planned if isinstance(action, core.StartJob)]
    assert [bool(action.scheduling_gates) for action in starts] == [True, False]  # the topology went with the eviction
    assert sum(isinstance(action, core.StopJob) for action in planned) == 2
    assert core.plan(full, events[9], seq=10) is None  # the first eviction, redelivered after the re-admission
    assert not lean.dirty_workloads and not lean.dirty_queues
    assert full.dirty_workloads


def _queues_requiring_a_check() -> tuple[types.ClusterQueueObserved, types.LocalQueueObserved]:
    """ClusterQueue cq (cpu in flavor rf), which requires the admission check ``prov``, and LocalQueue ns/lq feeding
    it. The flavor counts: a check is required of a reservation on the ClusterQueue's flavors (Kueue's
    AdmissionChecksForWorkload), and a report about a check not required is not listed."""
    rule = models.AdmissionCheckStrategyRule(name="prov")
    group = models.ResourceGroup(
        covered_resources=["cpu"],
        flavors=[models.FlavorQuotas(name="rf", resources=[models.ResourceQuota(name="cpu", nominal_quota=10_000)])],
    )
    cq = types.ClusterQueueObserved(
        cluster_queue=models.ClusterQueue(
            metadata=models.ObjectMeta(name="cq"),
            spec=models.ClusterQueueSpec(
                resource_groups=[group],
                admission_checks_strategy=models.AdmissionChecksStrategy(admission_checks=[rule]),
            ),
        )
    )
    lq = types.LocalQueueObserved(
        local_queue=models.LocalQueue(
            metadata=models.ObjectMeta(name="lq", namespace="ns"), spec=models.LocalQueueSpec(cluster_queue="cq")
        )
    )
    return cq, lq


def _checks_log() -> list[types.Event]:
    """A ClusterQueue requiring a check: reserved, the check Ready with podSetUpdates, admitted (started with
    them), evicted (the check reset), released, reserved and admitted again with the check Ready again; a second
    workload deleted while it holds quota, then released; a third finished, then its admission redelivered."""
    cq, lq = _queues_requiring_a_check()
    refs = [types.WorkloadRef(namespace="ns", name=n, uid=f"u-{n}") for n in ("a", "b", "c")]
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 1000}, count=1)
    update = models.PodSetUpdate(name="main", labels={"prov": "yes"}, node_selector={"zone": "z1"})

    def reserved(ref: types.WorkloadRef, at: int) -> types.QuotaReserved:
        return types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=at)

    def ready(ref: types.WorkloadRef, at: int) -> types.AdmissionCheckStateChanged:
        return types.AdmissionCheckStateChanged(
            workload=ref, check="prov", state="Ready", pod_set_updates=[update], at_ms=at
        )

    a, b, c = refs
    return [
        RF,
        cq,
        lq,
        *(_workload(ref.name, ref.uid) for ref in refs),
        reserved(a, 1),
        ready(a, 2),
        types.WorkloadAdmitted(workload=a, cluster_queue="cq", at_ms=3),
        types.EvictionRequested(workload=a, cluster_queue="cq", reason="AdmissionCheck", message="m", at_ms=4),
        types.QuotaReleased(workload=a, cluster_queue="cq", reason="AdmissionCheck", cause_seq=0, at_ms=5),
        reserved(a, 6),
        ready(a, 7),
        types.WorkloadAdmitted(workload=a, cluster_queue="cq", at_ms=8),
        reserved(b, 9),
        types.ObjectDeleted(kind="Workload", namespace="ns", name="b", uid="u-b"),
        types.WorkloadAdmitted(workload=b, cluster_queue="cq", at_ms=10),
        types.QuotaReleased(workload=b, cluster_queue="cq", reason="Deleted", cause_seq=0, at_ms=11),
        reserved(c, 12),
        types.WorkloadAdmitted(workload=c, cluster_queue="cq", at_ms=13),
        types.WorkloadFinished(workload=c, succeeded=True, reason="Succeeded", at_ms=14),
        types.QuotaReleased(workload=c, cluster_queue="cq", reason="Finished", cause_seq=0, at_ms=15),
        _workload("c", "u-c"),  # the finished workload seen again: it stays gone
        types.EvictionRequested(workload=c, cluster_queue="cq", reason="Preempted", message="m", at_ms=16),
    ]


def test_admission_checks_deletions_and_finished_workloads_plan_the_same() -> None:
    full, lean = core.DispatchState(), core.DispatchState(track_objects=False)
    events = _checks_log()
    starts = []
    for seq, event in enumerate(events, start=1):
        core.fold(full, event, seq=seq)
        core.fold(lean, event, seq=seq)
        for at, earlier in enumerate(events[:seq], start=1):
            assert core.plan(lean, earlier, seq=at) == core.plan(full, earlier, seq=at), (seq, at)
        live = {k for k, wl in full.cluster.workloads.items() if not wl.gone}
        assert _plan_records(lean, live) == _plan_records(full, live), seq
        action = core.plan(full, event, seq=seq)
        if isinstance(action, core.StartJob):
            starts.append(action)
    own = {core.PODSET_LABEL: "main", core.LOCAL_QUEUE_LABEL: "lq", core.CLUSTER_QUEUE_LABEL: "cq"}  # every start's
    assert [(s.workload.name, s.labels, s.node_selector) for s in starts] == [
        ("a", {**own, "prov": "yes"}, {"pool": "a", "zone": "z1"}),
        ("a", {**own, "prov": "yes"}, {"pool": "a", "zone": "z1"}),
        ("c", own, {"pool": "a"}),
    ]  # b was deleted before its admission: no start
    assert set(full.cluster.workloads) == set(lean.cluster.workloads) == {"ns/a", "ns/c"}
    # the finished workload: no Workload object, record or pod set information kept by the lean view
    gone = lean.cluster.workloads["ns/c"]
    assert gone.gone and gone.workload.metadata.uid == "u-c" and not gone.workload.spec.pod_sets
    assert "ns/c" not in lean.records and "ns/c" not in lean.started
    assert full.cluster.workloads["ns/c"].workload.spec.pod_sets


def _recorded(name: str) -> list[LogMessage]:
    return [
        LogMessage(seq=raw["seq"], subject=raw["subject"], data=raw["data"].encode(), headers=raw["headers"])
        for raw in map(json.loads, (LOGS / name).read_text().splitlines())
    ]


@pytest.mark.parametrize("log_name", ["demo-preempt.jsonl", "demo-preempt-v2.jsonl"])
def test_a_recorded_log_plans_the_same_through_the_dispatchers_lean_fold(log_name: str) -> None:
    """The recorded demo logs (admissions, preemptions, evictions, stops, finishes) read message by message by
    a real dispatcher's fold and a simulated one's (lean, skipping PodsReady undecoded): after every message,
    every decision so far plans the same write in both (a redelivery at any point)."""
    bus = MemoryBus()
    full = Dispatcher(bus=bus, api=SimulatedApi())
    lean = SimulatedDispatcher(bus=bus, limiter=UnlimitedWrites())
    assert full.view.track_objects and not lean.view.track_objects
    decisions: list[tuple[int, types.Event]] = []
    planned = 0
    for message in _recorded(log_name):
        full.fold_message(message)
        lean.fold_message(message)
        assert lean.view.last_seq == full.view.last_seq
        # what the batch verifier's partition rule reads
        assert lean.view.cluster.heads == full.view.cluster.heads
        assert lean.view.cluster.partitions.wl_part == full.view.cluster.partitions.wl_part
        if message.subject.startswith("kq.dec.") and message.headers.get("Kq-Type") in (
            "WorkloadAdmitted",
            "EvictionRequested",
        ):
            decisions.append((message.seq, codec.decode(message.data)))
        for seq, decision in decisions:
            expected = core.plan(full.view, decision, seq=seq)
            assert core.plan(lean.view, decision, seq=seq) == expected, (message.seq, seq)
            planned += expected is not None
    assert lean.orphaned_seqs == full.orphaned_seqs == set()
    assert planned and full.view.last_seq == message.seq
    finished = [k for k, wl in full.view.cluster.workloads.items() if wl.gone and wl.reservation is None]
    assert finished
    for key in finished:  # the lean view keeps no Workload object, record or start of a finished workload
        assert not lean.view.cluster.workloads[key].workload.spec.pod_sets
        assert key not in lean.view.records and key not in lean.view.started
        assert key in full.view.records


def _deleted_by_hand_log() -> list[types.Event]:
    """Two Jobs whose Workloads are deleted by hand while they hold quota (kubectl delete workload): ``run``
    started (its job is stopped at the release, then observed again, made anew), ``held`` reserved and waiting
    for a check (observed again at once, before its release); both are admitted again afterwards."""
    cq, lq = _queues_requiring_a_check()
    run, held = (types.WorkloadRef(namespace="ns", name=n, uid=f"u-{n}") for n in ("run", "held"))
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 1000}, count=1)

    def reserved(ref: types.WorkloadRef, at: int) -> types.QuotaReserved:
        return types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=at)

    def ready(ref: types.WorkloadRef, at: int) -> types.AdmissionCheckStateChanged:
        return types.AdmissionCheckStateChanged(workload=ref, check="prov", state="Ready", at_ms=at)

    def deleted(ref: types.WorkloadRef) -> types.ObjectDeleted:
        return types.ObjectDeleted(kind="Workload", namespace="ns", name=ref.name, uid=ref.uid)

    def released(ref: types.WorkloadRef, at: int) -> types.QuotaReleased:
        return types.QuotaReleased(workload=ref, cluster_queue="cq", reason="Deleted", cause_seq=0, at_ms=at)

    return [
        RF,
        cq,
        lq,
        _workload("run", "u-run"),
        _workload("held", "u-held"),
        reserved(run, 1),
        ready(run, 2),
        types.WorkloadAdmitted(workload=run, cluster_queue="cq", at_ms=3),
        reserved(held, 4),
        deleted(run),
        deleted(held),
        _workload("held", "u-held"),  # its job never ran: its new Workload at once
        released(run, 5),  # plans the stop of run's job
        released(held, 6),  # held made anew, pending
        _workload("run", "u-run"),  # run's job stopped: its new Workload
        reserved(held, 7),
        ready(held, 8),
        types.WorkloadAdmitted(workload=held, cluster_queue="cq", at_ms=9),
        reserved(run, 10),
        ready(run, 11),
        types.WorkloadAdmitted(workload=run, cluster_queue="cq", at_ms=12),
    ]


def test_workloads_deleted_by_hand_while_holding_quota_stop_their_job_and_are_made_anew() -> None:
    """The QuotaReleased ``Deleted`` of a started workload plans the stop of its job (Kueue reconciler.go: a
    Workload marked for deletion stops its job, "Workload is deleted"), in the lean fold as in the full one; a
    workload observed again after its deletion is pending afresh once released, and is started again."""
    full, lean = core.DispatchState(), core.DispatchState(track_objects=False)
    events = _deleted_by_hand_log()
    planned: list[tuple[int, core.Action]] = []
    for seq, event in enumerate(events, start=1):
        core.fold(full, event, seq=seq)
        core.fold(lean, event, seq=seq)
        assert core.plan(lean, event, seq=seq) == core.plan(full, event, seq=seq), seq
        action = core.plan(full, event, seq=seq)
        if action is not None:
            planned.append((seq, action))
            if isinstance(event, types.QuotaReleased):
                core.forget_deleted_stop(full, event.workload.key, seq=seq)
                core.forget_deleted_stop(lean, event.workload.key, seq=seq)
        if seq == 13:  # run released, not observed again yet: forgotten (its job is being stopped)
            assert "ns/run" not in full.cluster.workloads and "ns/run" not in lean.cluster.workloads
        if seq == 15:  # both released and observed again: made anew, pending, nothing of the old admission kept
            for view in (full, lean):
                for key in ("ns/run", "ns/held"):
                    wl = view.cluster.workloads[key]
                    assert (wl.gone, wl.reservation, wl.admitted) == (False, None, False), key
                    assert key not in view.started
            held_status = full.records["ns/held"]
            assert held_status.admission is None and "Evicted" not in held_status.conditions
    kinds = [(seq, type(a).__name__, a.workload.name) for seq, a in planned]
    assert kinds == [(8, "StartJob", "run"), (13, "StopJob", "run"), (18, "StartJob", "held"), (21, "StartJob", "run")]
    stop = planned[1][1]
    assert isinstance(stop, core.StopJob)
    assert (stop.reason, stop.decision_seq, stop.node_selector) == ("Deleted", 13, {"pool": None})
    assert full.deleted_stops == lean.deleted_stops == {}
    # a redelivered release plans nothing once carried out
    assert core.plan(full, events[12], seq=13) is None
    assert full.cluster.workloads["ns/run"].admitted and full.cluster.workloads["ns/held"].admitted
