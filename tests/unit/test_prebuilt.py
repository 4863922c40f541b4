"""A job's prebuilt Workload: which job adopts it, what the log holds for it, when it is out of sync with the job,
and the patch that makes the object the job's (Kueue jobframework/reconciler.go ensureOneWorkload,
EnsurePrebuiltWorkloadOwnership, ensurePrebuiltWorkloadInSync, EquivalentToWorkload; pkg/util/equality)."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from kueue_es.events import manifests, models, types
from kueue_es.jobframework import jobs, pods, prebuilt, workloads
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


# -- Pods and pod groups (pod_controller.go) -------------------------------------------------------

POD_UID = "0b9a5c1e-0000-4000-8000-00000000000a"


def pod(name: str = "p-a", *, uid: str = POD_UID, group: str = "", workload: str = "wl-a", cpu: str = "1") -> dict:
    """A queue-labelled pod naming prebuilt Workload ``workload``; of a pod group of 2 ``group``."""
    labels = {workloads.QUEUE_LABEL: "user-queue", workloads.PREBUILT_WORKLOAD_LABEL: workload}
    annotations = {}
    if group:
        labels[pods.GROUP_NAME_KEY] = group
        annotations[pods.GROUP_TOTAL_COUNT_ANNOTATION] = "2"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": labels,
            "annotations": annotations,
        },
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]},
    }


def group_workload(*pod_sets: tuple[str, int]) -> dict[str, Any]:
    return {
        "metadata": {"name": "wl-a", "namespace": "default", "uid": "wl-uid"},
        "spec": {"podSets": [{"name": name, "count": count} for name, count in pod_sets]},
    }


def test_a_pod_runs_on_the_prebuilt_workload_it_names_but_a_statefulsets_pod_on_its_groups_own() -> None:
    """pod_controller.go workloadName: the prebuilt name first. A StatefulSet's pod names its serving group's,
    which kueue-es makes from the pods (Kueue's StatefulSet reconciler prebuilds it): not one it adopts."""
    assert pods.workload_key(pod()) == ("default", "wl-a")
    assert pods.prebuilt_workload(pod(group="g", workload="g")) == "g"
    serving = pod(group="sts-g", workload="sts-g")
    serving["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] = "statefulset"
    assert pods.prebuilt_workload(serving) == "" and pods.workload_key(serving) == ("default", "sts-g")


@pytest.mark.parametrize(
    ("roles", "pod_sets", "expected"),
    [
        ([("r1", 2)], [("r1", 2)], ""),
        ([("r1", 1)], [("r1", 2)], ""),  # a group still being made, or whose pods failed
        ([("r1", 1), ("r2", 1)], [("r0", 1), ("r1", 1), ("r2", 3)], ""),  # in order, the Workload may have more
        ([], [("r1", 2)], ""),
        ([("r1", 3)], [("r1", 2)], "spec.podSets[0].count is 2, the group has 3 pods of role r1"),
        ([("r1", 1)], [("main", 1)], "spec.podSets has no pod set 'r1'"),
        ([("r1", 1), ("r2", 1)], [("r2", 1), ("r1", 1)], "spec.podSets has no pod set 'r2'"),
        ([("r1", 1), ("r2", 1)], [("r1", 2)], "the Workload has 1 pod sets, the group's pods make 2"),
    ],
)
def test_a_pod_group_matches_its_workload_by_roles_and_counts(
    roles: list[tuple[str, int]], pod_sets: list[tuple[str, int]], expected: str
) -> None:
    """pod_controller.go equivalentToWorkload: each role a pod set of that name, in order, holding its pods."""
    why = prebuilt.group_out_of_sync(roles, group_workload(*pod_sets))
    assert why.startswith(expected) and bool(why) == bool(expected)


def test_a_groups_roles_are_its_runnable_pods_by_role_and_a_started_pod_keeps_its_role() -> None:
    """constructGroupPodSets: pods counted per role hash, a Failed one left out; a started pod (the flavor's node
    selector merged into its spec, its pod set in the ``kueue.x-k8s.io/podset`` label) keeps the role it had,
    as the role-hash annotation Kueue's webhook writes keeps it; fast admission counts the group as one role."""
    a, b, failed = pod("a", group="g"), pod("b", group="g", cpu="2"), pod("c", group="g")
    failed["status"] = {"phase": "Failed"}
    role_a, role_b = pods.role_hash(a), pods.role_hash(b)
    assert pods.group_roles([a, b, failed], total=2) == sorted([(role_a, 1), (role_b, 1)])
    started = copy.deepcopy(a)
    started["spec"]["nodeSelector"] = {"instance-type": "spot"}
    started["metadata"]["labels"]["kueue.x-k8s.io/podset"] = role_a
    assert pods.role_hash(started) == role_a
    a["metadata"]["annotations"][pods.FAST_ADMISSION_ANNOTATION] = "true"
    assert pods.group_roles([a, b], total=2) == [(role_a, 2)]


def test_a_pods_adopted_workload_is_told_apart_from_one_made_for_pods() -> None:
    """A workload made for a pod group keeps its first pod's UID while its owner becomes the oldest pod left, and
    a StatefulSet's pods' one carries their prebuilt label: neither is adopted; a prebuilt one adopted by a pod,
    or by a group (then read as the group's), is."""
    parsed = manifests.parse_object(workload_object(), strict=False)
    assert isinstance(parsed, models.Workload)
    made = pods.group_facts([pod("a", group="wl-a"), pod("b", uid="uid-b", group="wl-a")])
    assert isinstance(made, types.WorkloadObserved)
    later = msgspec.structs.replace(
        made.workload, owner=models.OwnerReference(api_version="v1", kind="Pod", name="b", uid="uid-b")
    )
    labelled = msgspec.structs.replace(
        made.workload,
        metadata=msgspec.structs.replace(
            made.workload.metadata, labels={workloads.PREBUILT_WORKLOAD_LABEL: made.workload.metadata.name}
        ),
    )
    assert not prebuilt.is_adopted(later) and not prebuilt.is_adopted(labelled)
    ref = workloads.job_ref(pod(), kind="Pod", api_version="v1")
    single = prebuilt.adopted(parsed, ref, queue="user-queue", reserved=False)
    group = prebuilt.adopted(parsed, ref, queue="user-queue", reserved=False, group=True)
    assert prebuilt.is_adopted(single) and prebuilt.is_adopted(group)
    assert "kueue.x-k8s.io/is-group-workload" not in single.metadata.annotations
    assert group.metadata.annotations["kueue.x-k8s.io/is-group-workload"] == "true"


def test_the_adoption_patch_of_a_pod_and_of_a_pod_group() -> None:
    """EnsurePrebuiltWorkloadOwnership for a single pod (its controller, the job-uid label);
    EnsureWorkloadOwnedByAllMembers for a group: each pod an owner, not the controller, added to those there,
    and no label."""
    parsed = manifests.parse_object(workload_object(), strict=False)
    assert isinstance(parsed, models.Workload)
    ref = workloads.job_ref(pod(), kind="Pod", api_version="v1")
    single = WorkloadState(workload=prebuilt.adopted(parsed, ref, queue="user-queue", reserved=True), observed_seq=1)
    mine = {"apiVersion": "v1", "kind": "Pod", "name": "p-a", "uid": POD_UID, "controller": True}
    assert status.adoption_patch(workload_object(), single) == {
        "metadata": {
            "ownerReferences": [mine | {"blockOwnerDeletion": True}],
            "labels": {workloads.JOB_UID_LABEL: POD_UID},
        }
    }
    adopted = prebuilt.adopted(parsed, ref, queue="user-queue", reserved=True, group=True)
    group = WorkloadState(workload=adopted, observed_seq=1)
    current = workload_object()
    current["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p-a", "uid": POD_UID}]
    members = [("p-a", POD_UID), ("p-b", "uid-b")]
    assert status.adoption_patch(current, group, members=members) == {
        "metadata": {
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p-a", "uid": POD_UID},
                {"apiVersion": "v1", "kind": "Pod", "name": "p-b", "uid": "uid-b"},
            ]
        }
    }
    current["metadata"]["ownerReferences"].append({"apiVersion": "v1", "kind": "Pod", "name": "p-b", "uid": "uid-b"})
    assert status.adoption_patch(current, group, members=members[1:]) == {}  # a pod that went stays named
