"""The dispatcher's plan stops the job of a workload deactivated by hand on its release (core.plan).

The admitter releases such a workload's quota at once (QuotaReleased ``Deactivated``, no eviction before it);
that release is what stops its job. Any other release, a redelivery after the workload reserved again, and a
workload the dispatcher does not start, plan nothing."""

from __future__ import annotations

import msgspec

from kueue_es.events import models, types
from kueue_es.services.dispatcher import core
from tests.builders import Log, cluster_queue, flavor, local_queue, parse, workload


def job_workload(name: str, *, owner_kind: str = "Job", active: bool = True) -> types.WorkloadObserved:
    made = parse(workload(name, cpu="2"))
    owner = models.OwnerReference(api_version="batch/v1", kind=owner_kind, name=name, uid=f"uid-{name}")
    spec = msgspec.structs.replace(made.spec, active=active)
    return types.WorkloadObserved(workload=msgspec.structs.replace(made, owner=owner, spec=spec))


def admitted_then_released(
    reason: str, *, owner_kind: str = "Job"
) -> tuple[core.DispatchState, Log, types.QuotaReleased]:
    log, view = Log(), core.DispatchState()

    def add(*events: types.Event) -> None:
        for event in events:
            log.add(event)
            core.fold(view, event, seq=len(log.events))

    add(
        types.ResourceFlavorObserved(flavor=parse(flavor("rf"))),
        types.ClusterQueueObserved(cluster_queue=parse(cluster_queue("cq", flavors={"rf": {"cpu": "2"}}))),
        types.LocalQueueObserved(local_queue=parse(local_queue("lq", "cq"))),
        job_workload("w", owner_kind=owner_kind),
    )
    [admission] = [d for d in log.cycle(1_000) if isinstance(d, types.WorkloadAdmitted)]
    core.fold(view, admission, seq=len(log.events))
    add(job_workload("w", owner_kind=owner_kind, active=False))
    release = types.QuotaReleased(workload=admission.workload, cluster_queue="cq", reason=reason, cause_seq=0, at_ms=9)
    add(release)
    return view, log, release


def test_the_release_of_a_workload_deactivated_by_hand_stops_its_job() -> None:
    view, log, release = admitted_then_released("Deactivated")
    action = core.plan(view, release, seq=len(log.events))
    assert isinstance(action, core.StopJob)
    assert (action.name, action.reason, action.decision_seq) == ("w", "Deactivated", len(log.events))
    assert action.workload == release.workload


def test_other_releases_and_redeliveries_stop_nothing() -> None:
    view, log, release = admitted_then_released("Preempted")
    assert core.plan(view, release, seq=len(log.events)) is None  # its eviction's stop came before it
    view, log, release = admitted_then_released("Deactivated", owner_kind="Unregistered")
    assert core.plan(view, release, seq=len(log.events)) is None  # not a job the dispatcher starts
    view, log, release = admitted_then_released("Deactivated")
    seq = len(log.events)
    reactivated = job_workload("w")
    log.add(reactivated)
    core.fold(view, reactivated, seq=len(log.events))
    [again] = [d for d in log.cycle(5_000) if isinstance(d, types.WorkloadAdmitted)]
    core.fold(view, again, seq=len(log.events))
    assert core.plan(view, release, seq=seq) is None  # reserved again since: a redelivery of the old release
