"""The dispatcher's lean fold (no Workload objects, no queue status) plans exactly what the full fold plans."""

from kueue_es.events import models, types
from kueue_es.services.dispatcher import core

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
    return {
        k: (r.uid, r.topology, r.checks)
        for k, r in view.records.items()
        if k in live and (r.topology or r.checks)
    }


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
