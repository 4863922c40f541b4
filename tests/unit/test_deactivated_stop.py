"""The dispatcher's plan stops the job of a workload deactivated by hand on its release (core.plan).

The admitter releases such a workload's quota at once (QuotaReleased ``Deactivated``, no eviction before it);
that release is what stops its job. Any other release, a redelivery after the workload reserved again, and a
workload the dispatcher does not start, plan nothing."""

from __future__ import annotations

from kueue_es.events import types
from kueue_es.services.dispatcher import core
from tests.unit.dispatch_log import DispatchLog, job_workload


def admitted_then_released(reason: str, *, owner_kind: str = "Job") -> tuple[DispatchLog, types.QuotaReleased]:
    """Workload w admitted, then seen with spec.active false, then released with ``reason``."""
    dlog = DispatchLog()
    dlog.add(job_workload("w", owner_kind=owner_kind))
    admission = dlog.admit(1_000)
    dlog.add(job_workload("w", owner_kind=owner_kind, active=False))
    release = types.QuotaReleased(workload=admission.workload, cluster_queue="cq", reason=reason, cause_seq=0, at_ms=9)
    dlog.add(release)
    return dlog, release


def test_the_release_of_a_workload_deactivated_by_hand_stops_its_job() -> None:
    dlog, release = admitted_then_released("Deactivated")
    action = core.plan(dlog.view, release, seq=dlog.seq)
    assert isinstance(action, core.StopJob)
    assert (action.name, action.reason, action.decision_seq) == ("w", "Deactivated", dlog.seq)
    assert action.workload == release.workload


def test_other_releases_and_redeliveries_stop_nothing() -> None:
    dlog, release = admitted_then_released("Preempted")
    assert core.plan(dlog.view, release, seq=dlog.seq) is None  # its eviction's stop came before it
    dlog, release = admitted_then_released("Deactivated", owner_kind="Unregistered")
    assert core.plan(dlog.view, release, seq=dlog.seq) is None  # not a job the dispatcher starts
    dlog, release = admitted_then_released("Deactivated")
    seq = dlog.seq
    dlog.add(job_workload("w"))  # reactivated
    dlog.admit(5_000)
    assert core.plan(dlog.view, release, seq=seq) is None  # reserved again since: a redelivery of the old release


def test_a_workload_never_admitted_stops_nothing_and_does_not_fail() -> None:
    """A reservation waiting for its admission checks, released ``Deactivated`` (a check Rejected: Kueue's own
    deactivation, whose release has that reason too): no job ran, so nothing is planned. The plan used to
    compute the pod set information of a workload without a reservation and failed the dispatcher (CI,
    tests/e2e/test_provisioning.py)."""
    dlog = DispatchLog()
    dlog.add(job_workload("w"))
    workload = dlog.log.state.workloads["default/w"].ref
    release = types.QuotaReleased(workload=workload, cluster_queue="cq", reason="Deactivated", cause_seq=0, at_ms=9)
    dlog.add(job_workload("w", active=False), release)
    assert core.plan(dlog.view, release, seq=dlog.seq) is None


def test_a_workload_deactivated_by_hand_shows_no_requeue_state() -> None:
    """Kueue's workload controller drops ``status.requeueState`` of a workload whose ``spec.active`` is false
    (workload_controller.go, Kueue PR #7734), so a reactivation counts PodsReady timeouts from 0; the decisions
    did (admitter logic 22) but the Workload object written kept ``requeueState.count``."""
    dlog = DispatchLog()
    dlog.add(job_workload("w"))
    admission = dlog.admit(1_000)
    eviction = types.EvictionRequested(
        workload=admission.workload,
        cluster_queue="cq",
        reason="PodsReadyTimeout",
        message="Exceeded the PodsReady timeout default/w",
        requeue_count=1,
        requeue_at_ms=70_000,
        at_ms=61_000,
    )
    dlog.add(eviction)
    record = dlog.view.records["default/w"]
    assert (record.requeue_count, record.requeue_at_ms) == (1, 70_000)
    dlog.add(job_workload("w", active=False))
    assert (record.requeue_count, record.requeue_at_ms) == (None, None)
