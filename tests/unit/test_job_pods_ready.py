"""The PodsReady condition of a batch/v1 Job's (and a JobSet's) Workload at each stage of its progress, as tables.

Kueue's job_controller_test.go, Describe "When waitForPodsReady enabled", DescribeTable "Single job at different
stages of progress towards completion": a Job of parallelism 2, admitted and started; its status (and, for some
entries, an earlier status and PodsReady condition first) gives the Workload's PodsReady condition. Here the
watcher's rules (services/watcher/progress.py: job_ready, Kueue job_controller.go PodsReady; next_pods_ready,
reconciler.go generatePodsReadyCondition) and the dispatcher's messages (services/dispatcher/status.py
PODS_READY_MESSAGES) over the same statuses; no server.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.jobframework import integrations
from kueue_es.services.dispatcher.status import PODS_READY_MESSAGES
from kueue_es.services.watcher import progress

NOT_READY = (False, "WaitForStart", "Not all pods are ready or succeeded")
READY = (True, "Started", "All pods reached readiness and the workload is running")
RECOVERING = (False, "WaitForRecovery", "At least one pod has failed, waiting for recovery")
ALL_READY = {"active": 2, "ready": 2}


def job(status: dict[str, Any], *, suspended: bool = False) -> dict[str, Any]:
    """The Job of the table (parallelism 2), started unless ``suspended``, with ``status``."""
    return {"spec": {"parallelism": 2, "suspend": suspended}, "status": status}


def pods_ready(obj: dict[str, Any], previous: tuple[bool, str] | None) -> tuple[bool, str, str]:
    """(status, reason, message) of the PodsReady condition written for ``obj`` after ``previous``."""
    started = progress.started("Job", [obj])
    status, reason = progress.next_pods_ready(previous, started=started, ready=progress.job_ready(obj))
    return status, reason, PODS_READY_MESSAGES[reason]


@pytest.mark.parametrize(
    ("before", "status", "suspended", "want"),
    [
        pytest.param(None, {}, False, NOT_READY, id="No progress"),
        pytest.param(None, {"active": 1, "ready": 1}, False, NOT_READY, id="Single pod ready"),
        pytest.param(None, {"succeeded": 1}, False, NOT_READY, id="Single pod succeeded"),
        pytest.param(None, ALL_READY, False, READY, id="All pods are ready"),
        pytest.param(
            None,
            {"active": 1, "ready": 1, "uncountedTerminatedPods": {"succeeded": ["foo"]}},
            False,
            READY,
            id="One pod ready, one terminating succeeded",
        ),
        pytest.param(None, {"active": 1, "ready": 1, "succeeded": 1}, False, READY, id="One pod ready, one succeeded"),
        pytest.param(
            None,
            {"succeeded": 1, "uncountedTerminatedPods": {"succeeded": ["foo"]}},
            False,
            READY,
            id="One pod succeeded, one terminating succeeded",
        ),
        pytest.param(
            None,
            {"uncountedTerminatedPods": {"succeeded": ["foo", "bar"]}},
            False,
            READY,
            id="All pods terminating succeeded",
        ),
        pytest.param(None, {"ready": 0, "succeeded": 2}, False, READY, id="All pods are succeeded"),
        pytest.param(
            {}, {"ready": 0, "succeeded": 2}, False, READY, id="All pods are succeeded; PodsReady=False before"
        ),
        pytest.param(
            ALL_READY,
            {"active": 1, "ready": 1, "failed": 1},
            False,
            RECOVERING,
            id="One ready pod, one failed; PodsReady=True before",
        ),
        pytest.param(
            ALL_READY, {"failed": 2}, True, NOT_READY, id="Job suspended without ready pods; but PodsReady=True before"
        ),
        pytest.param(
            ALL_READY, ALL_READY, True, NOT_READY, id="Job suspended with all pods ready; PodsReady=True before"
        ),
    ],
)
def test_single_job_at_different_stages_of_progress_towards_completion(
    before: dict[str, Any] | None, status: dict[str, Any], suspended: bool, want: tuple[bool, str, str]
) -> None:
    """Each entry of Kueue's table: ``before`` (when given) is the status the Job reported first, whose condition
    the entry's status then follows; a suspended Job is one whose admission was taken away."""
    previous = None
    if before is not None:
        status_before, reason_before, _ = pods_ready(job(before), None)
        previous = (status_before, reason_before)
    assert pods_ready(job(status, suspended=suspended), previous) == want


def jobset(status: dict[str, Any], *, suspended: bool = False) -> dict[str, Any]:
    """jobset_controller_test.go's JobSet: replicated-job-1 (1 replica) and replicated-job-2 (3), one pod each."""
    replicated = [
        {"name": name, "replicas": replicas, "template": {"spec": {"parallelism": 1, "completions": 1}}}
        for name, replicas in (("replicated-job-1", 1), ("replicated-job-2", 3))
    ]
    return {"spec": {"suspend": suspended, "replicatedJobs": replicated}, "status": status}


RUNNING_JOBSET = {
    "replicatedJobsStatus": [
        {"name": "replicated-job-1", "ready": 1, "succeeded": 0},
        {"name": "replicated-job-2", "ready": 2, "succeeded": 1},
    ]
}


@pytest.mark.parametrize(
    ("before", "status", "suspended", "want"),
    [
        pytest.param(None, {}, False, NOT_READY, id="No progress"),
        pytest.param(None, RUNNING_JOBSET, False, READY, id="Running JobSet"),
        pytest.param({}, RUNNING_JOBSET, False, READY, id="Running JobSet; PodsReady=False before"),
        pytest.param(RUNNING_JOBSET, RUNNING_JOBSET, True, NOT_READY, id="JobSet suspended; PodsReady=True before"),
    ],
)
def test_jobset_at_different_stages_of_progress_towards_completion(
    before: dict[str, Any] | None, status: dict[str, Any], suspended: bool, want: tuple[bool, str, str]
) -> None:
    """jobset_controller_test.go Describe "JobSet controller when waitForPodsReady enabled", the same table for a
    JobSet (jobset_controller.go PodsReady: every replicated Job ready or succeeded)."""
    integration = integrations.by_kind("JobSet")
    assert integration is not None

    def pods_ready_of(obj: dict[str, Any], previous: tuple[bool, str] | None) -> tuple[bool, str, str]:
        started = progress.started("JobSet", [obj])
        status, reason = progress.next_pods_ready(
            previous, started=started, ready=integrations.pods_ready(integration, obj)
        )
        return status, reason, PODS_READY_MESSAGES[reason]

    previous = None
    if before is not None:
        status_before, reason_before, _ = pods_ready_of(jobset(before), None)
        previous = (status_before, reason_before)
    assert pods_ready_of(jobset(status, suspended=suspended), previous) == want


def _pod(name: str, *, ready: bool) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True"}] if ready else []
    return {"metadata": {"name": name}, "status": {"phase": "Running", "conditions": conditions}}


@pytest.mark.parametrize(
    ("members", "want"),
    [
        pytest.param(["driver", "worker-1", "worker-2"], True, id="pod group with all pods ready"),
        pytest.param(["driver"], False, id="pod group with fewer pods than expected"),
        pytest.param(
            ["driver", "-worker-1", "-worker-2"], False, id="pod group with all pods present but not all ready"
        ),
    ],
)
def test_pod_group_pods_ready_counts_its_total(members: list[str], want: bool) -> None:
    """pod_controller_test.go TestPodsReady (Kueue #11654): a pod group of total count 3 is ready only when all 3
    pods exist and each is PodReady; one ready pod of three is not (Kueue said ready before the fix). A name
    starting with ``-`` is a pod not ready."""
    pods = [_pod(m.lstrip("-"), ready=not m.startswith("-")) for m in members]
    assert progress.group_ready(pods, total=3) is want
