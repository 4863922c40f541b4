"""Kueue's messages name workloads by their Workload object UIDs, the log by their jobs' (status.with_object_uid)."""

from __future__ import annotations

from pathlib import Path

from kueue_es.events import types
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.dispatcher import status

SCENARIOS = Path(__file__).parents[1] / "scenarios"

OBJECTS = {"job-uid-high": "wl-uid-high", "job-uid-low": "wl-uid-low"}


def object_uid(log_uid: str) -> str:
    return OBJECTS.get(log_uid, "")


def test_the_preemptor_and_the_victim_are_named_by_their_objects() -> None:
    message = (
        "Preempted to accommodate a workload (UID: job-uid-high, JobUID: job-uid-high) due to prioritization in the"
        " ClusterQueue; preemptor path: /cq; preemptee path: /cq"
    )
    assert status.with_object_uid(message, object_uid) == message.replace("(UID: job-uid-high,", "(UID: wl-uid-high,")
    assert status.with_object_uid(f"Previously: {message}", object_uid).startswith(
        "Previously: Preempted to accommodate a workload (UID: wl-uid-high, JobUID: job-uid-high)"
    )
    on_preemptor = "Preempted workload default/low (UID: job-uid-low) in ClusterQueue cq; preemptor effective ..."
    assert status.with_object_uid(on_preemptor, object_uid) == on_preemptor.replace("job-uid-low", "wl-uid-low")


def test_an_unknown_uid_and_other_messages_stay_as_they_are() -> None:
    unknown = "Preempted to accommodate a workload (UID: job-uid-other, JobUID: job-uid-other) due to ..."
    assert status.with_object_uid(unknown, object_uid) == unknown
    assert (
        status.with_object_uid("Quota reserved in ClusterQueue cq", object_uid) == "Quota reserved in ClusterQueue cq"
    )


def test_a_status_is_rewritten_only_where_a_message_changes() -> None:
    wanted = {
        "conditions": [
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "waiting"},
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "(UID: job-uid-high, JobUID: x)"},
        ]
    }
    rewritten = status.with_object_uids(wanted, object_uid)
    assert [c["message"] for c in rewritten["conditions"]] == ["waiting", "(UID: wl-uid-high, JobUID: x)"]
    assert wanted["conditions"][1]["message"] == "(UID: job-uid-high, JobUID: x)"  # not changed in place
    untouched = {"conditions": [wanted["conditions"][0]]}
    assert status.with_object_uids(untouched, object_uid) is untouched
    assert status.with_object_uids({}, object_uid) == {}


def test_the_preempted_condition_names_the_preemptors_job_uid() -> None:
    """preemption_test.go 'Should include job UID in preemption condition when the label is set': the message on
    the victim carries the preemptor's kueue.x-k8s.io/job-uid label (preemption.go preemptionMessage)."""
    run = run_scenario(load_scenario(SCENARIOS / "preemption/preempted-condition-names-preemptor-job-uid.yaml"))
    (evicted,) = [e for _, e in run.log if isinstance(e, types.EvictionRequested) and e.workload.name == "low"]
    assert evicted.message == (
        "Preempted to accommodate a workload (UID: high-uid, JobUID: job-uid) due to prioritization in the"
        " ClusterQueue; preemptor path: /cq; preemptee path: /cq"
    )
