"""A check reported Retry while its workload's eviction is carried out is reset with it (admitter logic 54).

The log's order when a controller's Retry is folded after the admitter's eviction of the same workload (a second
write, or the second entry of one write on a log written before the watcher published a write's changes
together): Kueue's evict.go Evict resets every check not Pending (resetChecksOnEviction), so the workload goes
back to its queue with every check Pending. Left in Retry, the workload was never nominated again. A log whose
admitter is logic 53 or older folds it as it did, so it replays as decided.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.jobframework import jobs
from kueue_es.projections.cluster import LATE_RETRY_RESET_LOGIC
from kueue_es.scheduling import lifecycle
from kueue_es.services.admitter import core as admitter_core
from kueue_es.services.dispatcher import core, status
from kueue_es.services.watcher import convert
from tests.integration.harness import cluster_queue, flavor, job, local_queue
from tests.integration.test_kueue_status import Log, at, released, reserved, ts

RESET = "Reset to Pending after eviction. Previously: Retry"


def decision_record(logic: int, seq: int) -> types.DecisionRecord:
    """An admitter DecisionRecord of logic ``logic`` deciding nothing (the fold reads its role and logic)."""
    return types.DecisionRecord(
        decision_id=f"admit:p0:{seq}",
        partition="p0",
        role="admit",
        basis_seq=seq,
        expected_head_seq=0,
        now_ms=at(1),
        logic_version=logic,
        output_count=0,
        outputs_sha256="",
    )


def check(ref: types.WorkloadRef, name: str, state: str, seconds: int, **more: Any) -> types.AdmissionCheckStateChanged:
    return types.AdmissionCheckStateChanged(workload=ref, check=name, state=state, at_ms=at(seconds), **more)  # type: ignore[arg-type]


def eviction(ref: types.WorkloadRef, seconds: int) -> types.EvictionRequested:
    return types.EvictionRequested(
        workload=ref,
        cluster_queue="cluster-queue",
        reason="AdmissionCheck",
        message='Evicted due to AdmissionCheck in Retry state: "my-check"',
        at_ms=at(seconds),
    )


def late_retry_log(logic: int) -> tuple[list[types.Event], types.WorkloadRef]:
    """Job sample's workload holds quota in a ClusterQueue naming my-check and my-check2 on a log whose admitter
    is logic ``logic``; my-check turns Retry, the admitter evicts on it, and only then is my-check2's Retry folded
    (requeueAfterSeconds 30), before the job stopped and the quota was released."""
    manifest = job("sample", parallelism=2)
    manifest["metadata"] |= {"uid": "uid-sample", "creationTimestamp": "2026-01-01T00:00:00Z"}
    observed = jobs.job_facts(manifest)
    assert isinstance(observed, types.WorkloadObserved)
    meta = observed.workload.metadata
    ref = types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
    queue = cluster_queue("cluster-queue")
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "my-check"}, {"name": "my-check2"}]}
    events = [
        convert.kueue_fact(flavor("default-flavor")),
        convert.kueue_fact(queue),
        convert.kueue_fact(local_queue("user-queue", "cluster-queue")),
        observed,
        decision_record(logic, 4),
        reserved(ref, 10),
        check(ref, "my-check", "Retry", 11),
        eviction(ref, 12),
        check(ref, "my-check2", "Retry", 13, message="busy", requeue_after_seconds=30),
    ]
    return events, ref


def folded(logic: int, *, track_objects: bool = True) -> tuple[Log, types.WorkloadRef]:
    """:func:`late_retry_log` folded by the dispatcher's full fold (the cluster fold and the status records), or
    its lean one."""
    events, ref = late_retry_log(logic)
    log = Log()
    log.view = core.DispatchState(track_objects=track_objects)
    log.add(*events)
    return log, ref


def test_a_retry_folded_during_its_workloads_eviction_is_reset_with_it() -> None:
    """Logic 54: my-check2's Retry, folded while the eviction holds the quota, goes Pending at once with Kueue's
    reset message and retryCount 1, its retry time in the backoff; once released the workload fails no check, so
    it is queued again (before, it stayed Retry and the workload was never nominated)."""
    log, ref = folded(LATE_RETRY_RESET_LOGIC)
    wl = log.view.cluster.workloads[ref.key]
    assert {name: (c.state, c.message) for name, c in wl.checks.items()} == {
        "my-check": ("Pending", RESET),
        "my-check2": ("Pending", RESET),
    }
    assert wl.check_retries == {"my-check": 1, "my-check2": 1}
    entries = {c["name"]: c for c in log.status(ref)["admissionChecks"]}
    assert entries["my-check2"] == {
        "name": "my-check2",
        "state": "Pending",
        "lastTransitionTime": ts(13),
        "message": RESET,
        "requeueAfterSeconds": 30,
        "retryCount": 1,
    }
    assert entries["my-check"]["retryCount"] == 1
    assert log.status(ref)["requeueState"] == {"requeueAt": ts(43)}
    log.add(released(ref, "AdmissionCheck", 14))
    wl = log.view.cluster.workloads[ref.key]
    cq = log.view.cluster.cluster_queues["cluster-queue"]
    assert not lifecycle.failed_checks(wl, cq)
    assert wl.backoff and wl.requeue_at_ms == at(43)  # queued again once my-check2's retry time has come


@pytest.mark.parametrize("logic", [53, 45])
def test_a_log_of_an_older_admitter_folds_the_late_retry_as_it_did(logic: int) -> None:
    """A log whose admitter is logic 53 or older keeps the late Retry, as that admitter decided on it: its
    records replay as they were written."""
    assert logic in admitter_core.EARLIER_LOGIC_VERSIONS
    log, ref = folded(logic)
    wl = log.view.cluster.workloads[ref.key]
    assert (wl.checks["my-check2"].state, wl.check_retries.get("my-check2")) == ("Retry", None)
    assert {c["name"]: c["state"] for c in log.status(ref)["admissionChecks"]}["my-check2"] == "Retry"
    log.add(released(ref, "AdmissionCheck", 14))
    assert lifecycle.failed_checks(
        log.view.cluster.workloads[ref.key], log.view.cluster.cluster_queues["cluster-queue"]
    )


def test_the_lean_fold_resets_the_late_retry_too() -> None:
    """The dispatcher's lean fold keeps the checks its plans read as the full fold does (status.late_reset)."""
    log, ref = folded(LATE_RETRY_RESET_LOGIC, track_objects=False)
    record = log.view.records[ref.key]
    assert {name: (e.state, e.retry_count) for name, e in record.checks.items()} == {
        "my-check": ("Pending", 1),
        "my-check2": ("Pending", 1),
    }
    assert status.RESET_MESSAGE.format(state="Retry") == RESET
