"""The simulated JobSet controller's pure rules (kueue_es/sim/jobsets.py, jobset v0.12.0 jobset_controller.go)."""

from __future__ import annotations

from typing import Any

from kueue_es.sim import jobsets

NOW = "2026-01-01T00:00:00Z"


def jobset(*, suspend: bool = False, **spec: Any) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ns", "uid": "u1"},
        "spec": {
            "suspend": suspend,
            "replicatedJobs": [
                {"name": "a", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": pod}}},
                {"name": "b", "template": {"spec": {"template": pod}}},
            ],
            **spec,
        },
    }


def finished(job: dict[str, Any], kind: str) -> dict[str, Any]:
    return {**job, "status": {"conditions": [{"type": kind, "status": "True"}]}}


def test_a_jobsets_jobs_are_named_labelled_and_owned_as_the_controller_makes_them() -> None:
    out = jobsets.sync(jobset(suspend=True), [], now=NOW)
    assert [j["metadata"]["name"] for j in out.create] == ["js-a-0", "js-a-1", "js-b-0"]
    last = out.create[-1]
    labels = last["metadata"]["labels"]
    assert labels[jobsets.JOB_GLOBAL_INDEX_LABEL] == "2" and labels[jobsets.GLOBAL_REPLICAS_LABEL] == "3"
    assert labels[jobsets.GROUP_NAME_LABEL] == "default" and labels[jobsets.JOB_GROUP_INDEX_LABEL] == "2"
    assert last["spec"]["template"]["metadata"]["labels"] == labels == last["metadata"]["annotations"]
    assert last["spec"]["suspend"] is True
    assert last["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert out.status["conditions"][0]["reason"] == "SuspendedJobs"


def test_resuming_merges_the_replicated_jobs_template_into_a_suspended_job() -> None:
    js = jobset()
    js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"flavor": "spot"}
    job = jobsets.child_job(jobset(suspend=True), jobsets._replicated_jobs(js)[1], 0)
    job["spec"]["template"]["spec"]["nodeSelector"] = {"old": "x"}
    job["status"] = {"startTime": NOW}
    out = jobsets.sync(js, [job], now=NOW)
    [(patched, patch)] = out.patch
    assert patched["metadata"]["name"] == "js-b-0" and out.clear_start == [job]
    assert patch["spec"]["suspend"] is False
    assert patch["spec"]["template"]["spec"]["nodeSelector"] == {"old": "x", "flavor": "spot"}
    assert "tolerations" not in patch["spec"]["template"]["spec"]  # none on either side: nothing written


def test_status_counts_and_the_end_conditions() -> None:
    js = jobset()
    jobs = [jobsets.child_job(js, r, i) for r in jobsets._replicated_jobs(js) for i in range(r["replicas"])]
    jobs[0]["status"] = {"active": 2, "ready": 2}
    jobs[1] = finished(jobs[1], "Complete")
    out = jobsets.sync(js, jobs, now=NOW)
    assert out.status["replicatedJobsStatus"] == [
        {"name": "a", "ready": 1, "succeeded": 1, "failed": 0, "active": 1, "suspended": 0},
        {"name": "b", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0},
    ]
    assert "terminalState" not in out.status
    done = jobsets.sync(js, [finished(j, "Complete") for j in jobs], now=NOW)
    assert done.status["terminalState"] == "Completed"
    assert done.status["conditions"] == [
        {"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
         "message": "jobset completed successfully", "lastTransitionTime": NOW},
    ]  # fmt: skip
    anyone = jobsets.sync(jobset(successPolicy={"operator": "Any", "targetReplicatedJobs": ["b"]}), jobs, now=NOW)
    assert "terminalState" not in anyone.status  # only a Job of b counts
    failed = jobsets.sync(js, [finished(jobs[2], "Failed")], now=NOW)
    assert (failed.status["terminalState"], failed.status["conditions"][0]["reason"]) == ("Failed", "FailedJobs")
    assert failed.create == []
    with_policy = jobsets.sync(jobset(failurePolicy={"maxRestarts": 3}), [finished(jobs[2], "Failed")], now=NOW)
    assert "terminalState" not in with_policy.status  # restarts are not simulated


def test_a_finished_jobset_deletes_its_active_jobs_and_a_manager_copy_is_left_alone() -> None:
    js = jobset()
    js["status"] = {"conditions": [{"type": "Completed", "status": "True"}]}
    job = jobsets.child_job(js, jobsets._replicated_jobs(js)[0], 0)
    assert jobsets.sync(js, [job], now=NOW).delete == [job]
    remote = jobset(managedBy="kueue.x-k8s.io/multikueue")
    out = jobsets.sync(remote, [], now=NOW)
    assert (out.create, out.patch, out.status) == ([], [], {})


def test_the_jobset_webhook_defaults_replicated_jobs_to_indexed_completion() -> None:
    """jobset_webhook.go Default: a replicated job's Job template without a completionMode is Indexed (its pods
    then carry the completion index Kueue's TAS ranks them by); one that names NonIndexed keeps it."""
    from kueue_es.services.kube import resources
    from kueue_es.sim import store

    jobset: dict[str, Any] = {
        "metadata": {"name": "js", "namespace": "ns"},
        "spec": {
            "replicatedJobs": [
                {"name": "a", "replicas": 1, "template": {"spec": {"parallelism": 2}}},
                {"name": "b", "replicas": 1, "template": {"spec": {"completionMode": "NonIndexed"}}},
            ]
        },
    }
    store.apply_defaults(resources.JOBSETS, jobset)
    modes = [rjob["template"]["spec"].get("completionMode") for rjob in jobset["spec"]["replicatedJobs"]]
    assert modes == ["Indexed", "NonIndexed"]
