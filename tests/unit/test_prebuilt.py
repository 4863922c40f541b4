"""A job's prebuilt Workload: which job adopts it, what the log holds for it, when it is out of sync with the job,
and the patch that makes the object the job's (Kueue jobframework/reconciler.go ensureOneWorkload,
EnsurePrebuiltWorkloadOwnership, ensurePrebuiltWorkloadInSync, EquivalentToWorkload; pkg/util/equality)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueue_es.events import manifests, models, types
from kueue_es.jobframework import jobs, prebuilt, workloads
from kueue_es.projections.cluster import WorkloadState
from kueue_es.services.dispatcher import core, status

JOB_UID = "0b9a5c1e-0000-4000-8000-000000000001"
CONTAINERS = [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "200Mi"}}}]
TOLERATION = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


def job(*, parallelism: int = 3, annotations: dict[str, str] | None = None, **pod_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "job-a",
            "namespace": "default",
            "uid": JOB_UID,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {workloads.QUEUE_LABEL: "user-queue", workloads.PREBUILT_WORKLOAD_LABEL: "wl-a"},
            "annotations": annotations or {},
        },
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "suspend": True,
            "template": {"spec": {"restartPolicy": "Never", "containers": copy.deepcopy(CONTAINERS), **pod_spec}},
        },
    }


def workload_object(*, count: int = 3, status_: dict[str, Any] | None = None, **pod_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl-a", "namespace": "default", "uid": "wl-uid"},
        "spec": {
            "queueName": "user-queue",
            "podSets": [{"name": "main", "count": count, "template": {"spec": {"containers": CONTAINERS, **pod_spec}}}],
        },
        "status": status_ or {},
    }


def why(job_obj: dict[str, Any], wl: dict[str, Any], *, suspended: bool = True) -> str:
    converted = jobs.job_to_workload(job_obj)
    return prebuilt.out_of_sync(converted, {"main": job_obj["spec"]["template"]}, wl, suspended=suspended)


ADMITTED = {
    "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 2}]},
    "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}],
}


def test_a_workload_like_its_job_is_in_sync() -> None:
    assert why(job(), workload_object()) == ""


def test_semantic_equality_quantities_by_value_and_empty_is_absent() -> None:
    """Kubernetes' semantic equality: 1 CPU is 1000m, an empty list is no list."""
    wl = workload_object(initContainers=[])
    wl["spec"]["podSets"][0]["template"]["spec"]["containers"] = [
        {"name": "c", "image": "busybox", "env": [], "resources": {"requests": {"cpu": "1000m", "memory": "200Mi"}}}
    ]
    assert why(job(), wl) == ""


@pytest.mark.parametrize(
    ("wl", "expected"),
    [
        (workload_object(count=2), "spec.podSets[0].count is 2, the job has 3 pods"),
        (
            workload_object(containers=[{"name": "other", "image": "busybox"}]),
            "spec.podSets[0].template.spec.containers",
        ),
        (workload_object(initContainers=[{"name": "init"}]), "spec.podSets[0].template.spec.initContainers"),
        (workload_object(tolerations=[TOLERATION]), "spec.podSets[0].template.spec.tolerations"),
    ],
)
def test_what_puts_a_workload_out_of_sync(wl: dict[str, Any], expected: str) -> None:
    assert expected in why(job(), wl)


def test_min_count_and_maximum_execution_time_are_compared() -> None:
    partial = job(annotations={jobs.MIN_PARALLELISM_ANNOTATION: "1"})
    assert "minCount is unset, the job's is 1" in why(partial, workload_object())
    wl = workload_object()
    wl["spec"]["maximumExecutionTimeSeconds"] = 60
    assert why(job(), wl) == "maximumExecutionTimeSeconds is 60, the job's is unset"


def test_tolerations_are_not_compared_once_admitted() -> None:
    """A start adds the flavors' tolerations to the job: Kueue ignores tolerations of an admitted Workload."""
    status_ = {**ADMITTED, "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 3}]}}
    running = job(tolerations=[TOLERATION])
    running["spec"]["suspend"] = False
    assert why(running, workload_object(status_=status_), suspended=False) == ""
    assert "tolerations" in why(job(tolerations=[TOLERATION]), workload_object())


def test_a_partially_admitted_pod_set_runs_with_its_admitted_count() -> None:
    """expectedRunningPodSets: a pod set with minCount runs with the admission's count; a suspended job is also
    compared with the spec (a stop gave the job its count back)."""
    wl = workload_object(status_=ADMITTED)
    wl["spec"]["podSets"][0]["minCount"] = 1
    annotations = {jobs.MIN_PARALLELISM_ANNOTATION: "1"}
    started = job(parallelism=2, annotations=annotations)
    assert why(started, wl, suspended=False) == ""
    assert why(job(parallelism=3, annotations=annotations), wl, suspended=True) == ""
    assert "count is 2, the job has 3" in why(job(parallelism=3, annotations=annotations), wl, suspended=False)


def test_the_adopter_is_the_controller_else_the_one_the_log_names_else_the_oldest() -> None:
    older, newer = job(), job()
    newer["metadata"] |= {"name": "job-b", "uid": "uid-b", "creationTimestamp": "2026-01-02T00:00:00Z"}
    wl = workload_object()
    assert prebuilt.adopter(wl, [newer, older]) == 1
    assert prebuilt.adopter(wl, [newer, older], adopted_by="uid-b") == 0
    wl["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "job-b", "uid": "uid-b", "controller": True}]
    assert prebuilt.adopter(wl, [older, newer]) == 1
    wl["metadata"]["ownerReferences"] = [{"kind": "Thing", "name": "t", "uid": "uid-t", "controller": True}]
    assert prebuilt.adopter(wl, [older, newer]) is None  # controlled by another object: every job waits


def test_the_adopted_workload_is_owned_by_the_job_and_moves_to_its_queue_while_it_holds_no_quota() -> None:
    obj = workload_object()
    obj["spec"]["queueName"] = "other-queue"
    obj["metadata"]["labels"] = {workloads.JOB_UID_LABEL: JOB_UID, "team": "a"}
    parsed = manifests.parse_object(obj, strict=False)
    assert isinstance(parsed, models.Workload)
    ref = workloads.job_ref(job(), kind="Job", api_version="batch/v1")
    adopted = prebuilt.adopted(parsed, ref, queue="user-queue", reserved=False)
    assert adopted.owner == models.OwnerReference(api_version="batch/v1", kind="Job", name="job-a", uid=JOB_UID)
    assert adopted.spec.queue_name == "user-queue" and adopted.metadata.labels == {"team": "a"}
    assert adopted.metadata.uid == "wl-uid" and prebuilt.is_adopted(adopted)
    assert prebuilt.adopted(parsed, ref, queue="user-queue", reserved=True).spec.queue_name == "other-queue"
    made = jobs.job_to_workload(job())
    assert not prebuilt.is_adopted(made)  # a workload made for the job carries the job's UID


def test_the_prebuilt_name_is_read_from_the_annotation_first() -> None:
    labelled = job()
    assert workloads.prebuilt_workload(labelled) == "wl-a"
    labelled["metadata"]["annotations"] = {workloads.PREBUILT_WORKLOAD_LABEL: "wl-annotated"}
    assert workloads.prebuilt_workload(labelled) == "wl-annotated"
    assert workloads.prebuilt_workload({"metadata": {"labels": {}}}) == ""


def test_the_adoption_patch_makes_the_object_the_jobs_and_nothing_else() -> None:
    parsed = manifests.parse_object(workload_object(), strict=False)
    assert isinstance(parsed, models.Workload)
    ref = workloads.job_ref(job(), kind="Job", api_version="batch/v1")
    wl = WorkloadState(workload=prebuilt.adopted(parsed, ref, queue="user-queue", reserved=False), observed_seq=1)
    current = workload_object()
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "uid-cm"}
    current["metadata"]["ownerReferences"] = [other, {"apiVersion": "batch/v1", "kind": "Job", "uid": JOB_UID}]
    current["spec"]["queueName"] = "other-queue"
    patch = status.adoption_patch(current, wl)
    mine = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "job-a",
        "uid": JOB_UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert patch == {
        "metadata": {"ownerReferences": [other, mine], "labels": {workloads.JOB_UID_LABEL: JOB_UID}},
        "spec": {"queueName": "user-queue"},
    }
    written = copy.deepcopy(current)
    written["metadata"] |= {"ownerReferences": [other, mine], "labels": {workloads.JOB_UID_LABEL: JOB_UID}}
    written["spec"]["queueName"] = "user-queue"
    assert status.adoption_patch(written, wl) == {}


def _admission(ref: types.WorkloadRef) -> types.WorkloadAdmitted:
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "f"}, resource_usage={"cpu": 3000}, count=3)
    return types.WorkloadAdmitted(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=1)


@pytest.mark.parametrize("adopted_first", [True, False])
def test_one_start_whichever_came_first_the_adoption_or_the_admission(adopted_first: bool) -> None:
    """Adopted before its admission, the job is started by the admission's plan; admitted before its adoption, by
    the adoption (the dispatcher's Suspension), and the admission's plan, run on a fold that has the adoption
    already, starts nothing: one start, one Started Event."""
    parsed = manifests.parse_object(workload_object(), strict=False)
    assert isinstance(parsed, models.Workload)
    ref = types.WorkloadRef(namespace="default", name="wl-a", uid="wl-uid")
    job_ref = workloads.job_ref(job(), kind="Job", api_version="batch/v1")
    adoption = types.WorkloadObserved(workload=prebuilt.adopted(parsed, job_ref, queue="user-queue", reserved=True))
    standalone = types.WorkloadObserved(workload=parsed)
    steps = [standalone, adoption, _admission(ref)] if adopted_first else [standalone, _admission(ref), adoption]
    view = core.DispatchState()
    for seq, event in enumerate(steps, start=1):
        core.fold(view, event, seq=seq)
    admission_seq = 3 if adopted_first else 2
    action = core.plan(view, steps[admission_seq - 1], seq=admission_seq)
    if adopted_first:
        assert isinstance(action, core.StartJob) and action.name == "job-a" and action.uid == JOB_UID
        assert view.adopted_admitted == {}
    else:
        assert action is None and view.adopted_admitted == {"default/wl-a": 3}
