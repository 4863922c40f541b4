"""Whether a job still matches its Workload, as the watcher decides it (services/watcher/job_tracking.py).

Kueue's EquivalentToWorkload (jobframework/reconciler.go) compares the job's pod sets with those its Workload is
expected to run while it holds quota (expectedRunningPodSets: a pod set with a minCount of a Workload that can be
partially admitted at the admitted count) and, for a suspended job, with the Workload's own; equality.ComparePodSets
compares counts both ways. Found by a new user's trial: a partially admitted Job stopped (deactivated, preempted,
suspended by hand) before its parallelism came back lost its Workload, and a running Job shrunk kept its.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kueue_es.events import manifests
from kueue_es.jobframework import jobs
from kueue_es.services.watcher.job_tracking import HeldWorkload, _not_equivalent, _not_matching

MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def job_workload(parallelism: int, *, min_parallelism: int | None = None, suspend: bool = True) -> Any:
    """The workload of a Job of ``parallelism`` pods (at least ``min_parallelism``: partial admission)."""
    manifest: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "partial",
            "namespace": "default",
            "uid": "uid-partial",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {MIN_PARALLELISM: str(min_parallelism)} if min_parallelism is not None else {},
        },
        "spec": {
            "parallelism": parallelism,
            "completions": 20,
            "suspend": suspend,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
        },
    }
    return jobs.job_to_workload(manifest)


def workload_object(count: int, *, min_count: int | None, assigned: int | None, evicted: str = "") -> dict[str, Any]:
    """A Workload object holding quota for one pod set ``main`` of ``count`` (``assigned``: its admission's
    count; ``evicted``: the reason of an Evicted condition)."""
    pod_set: dict[str, Any] = {"name": "main", "count": count, "template": {}}
    if min_count is not None:
        pod_set["minCount"] = min_count
    assignment: dict[str, Any] = {"name": "main", "flavors": {"cpu": "default-flavor"}}
    if assigned is not None:
        assignment["count"] = assigned
    conditions = [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]
    if evicted:
        conditions.append({"type": "Evicted", "status": "True", "reason": evicted})
    return {
        "metadata": {"name": "job-partial", "namespace": "default", "uid": "wl-uid"},
        "spec": {"podSets": [pod_set]},
        "status": {
            "conditions": conditions,
            "admission": {"clusterQueue": "cluster-queue", "podSetAssignments": [assignment]},
        },
    }


def test_the_running_pod_sets_of_a_partially_admitted_workload_have_the_admitted_count() -> None:
    """expectedRunningPodSets: the pod set with a minCount at its assignment's count; a missing count is the pod
    set's (podset.FromAssignment); a Workload that cannot be partially admitted keeps its counts."""
    held = HeldWorkload.of(workload_object(20, min_count=5, assigned=9), admitted=True)
    assert held.counts == (("main", 20, 5),)
    assert held.running == (("main", 9, 5),)
    assert HeldWorkload.of(workload_object(20, min_count=5, assigned=None), admitted=True).running == (("main", 20, 5),)
    assert HeldWorkload.of(workload_object(4, min_count=None, assigned=2), admitted=True).running == (
        ("main", 4, None),
    )
    no_admission = workload_object(20, min_count=5, assigned=9)
    del no_admission["status"]["admission"]
    assert HeldWorkload.of(no_admission, admitted=False).running is None


def test_a_preempted_partially_admitted_job_stopped_before_its_parallelism_is_back_still_matches() -> None:
    """The dispatcher's stop of a preempted (or deactivated) Job admitted with 9 of 20 pods suspends it first,
    its parallelism still 9: it matches the running pod sets, so its Workload is kept; once its parallelism is
    20 again it matches the Workload's own. Before, the suspended Job of 9 was found not matching."""
    held = HeldWorkload.of(workload_object(20, min_count=5, assigned=9, evicted="Preempted"), admitted=True)
    previous = job_workload(20, min_parallelism=5)
    assert _not_equivalent(held, previous, job_workload(9, min_parallelism=5)) == ""
    assert _not_equivalent(held, previous, job_workload(20, min_parallelism=5)) == ""
    assert _not_equivalent(held, previous, job_workload(12, min_parallelism=5)) == (
        "pod set main: 12 pods, the workload reserved quota for 20"
    )


def test_a_running_job_with_another_count_than_it_runs_with_no_longer_matches() -> None:
    """ComparePodSets compares counts both ways: a running Job lowered from 3 to 1 no longer matches its
    workload (before, only a count grown past it did); one with a minCount may run with any count from it to
    its workload's (a partial admission's start), not more."""
    three = job_workload(3)
    assert _not_matching(three, job_workload(3)) == ""
    assert _not_matching(three, job_workload(1)) == "pod set main: 1 pods, the workload has 3"
    assert _not_matching(three, job_workload(4)) == "pod set main: 4 pods, the workload has 3"
    partial = job_workload(20, min_parallelism=5)
    for running in (5, 9, 20):
        assert _not_matching(partial, with_count(partial, running)) == "", running
    assert _not_matching(partial, with_count(partial, 4)) == "pod set main: 4 pods, the workload admits 5 to 20"
    assert _not_matching(partial, with_count(partial, 21)) == "pod set main: 21 pods, the workload admits 5 to 20"


def with_count(workload: Any, count: int) -> Any:
    """``workload`` with its one pod set of ``count`` pods (a Job's conversion refuses a minCount not below its
    count, the webhook's rule at creation, so a Job started with its minCount is built here)."""
    pod_set = msgspec.structs.replace(workload.spec.pod_sets[0], count=count)
    return msgspec.structs.replace(workload, spec=msgspec.structs.replace(workload.spec, pod_sets=[pod_set]))


def test_a_job_running_at_its_min_parallelism_converts_and_matches_its_workload() -> None:
    """Admitted at exactly its ``job-min-parallelism`` (2 of 20), a started Job runs with parallelism 2 ==
    min-parallelism: Kueue's minPodsCount reads the annotation unchecked (its webhook bounds it at creation
    only), so the watcher's conversion keeps it and it matches its Workload. Before, the running Job became
    an ObjectRejected with a Warning Event. A suspended Job so made is still refused, as at creation."""
    at_minimum = job_workload(2, min_parallelism=2, suspend=False)
    [pod_set] = at_minimum.spec.pod_sets
    assert (pod_set.count, pod_set.min_count) == (2, 2)
    held = HeldWorkload.of(workload_object(20, min_count=2, assigned=2), admitted=True)
    assert _not_equivalent(held, job_workload(20, min_parallelism=2), at_minimum) == ""
    with pytest.raises(manifests.ManifestError, match="between 0 and 1"):
        job_workload(2, min_parallelism=2)
    with pytest.raises(manifests.ManifestError, match="between 0 and 1"):
        job_workload(2, min_parallelism=3, suspend=False)
