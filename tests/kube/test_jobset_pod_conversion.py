"""JobSet, Pod and pod group -> Workload, as tables: each case is one of Kueue's rules, named with its source.

Pure conversion (jobframework/jobsets.py, pods.py); no server. Amounts are
integers: cpu in millicores, memory in bytes.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueue_es.events import models, quantities, types
from kueue_es.jobframework import jobsets, pods, webhooks, workloads
from kueue_es.jobframework.annotations import IS_GROUP_WORKLOAD_ANNOTATION, SCHEDULING_GATE
from tests.kube import examples

Mi = 2**20
QUEUE = workloads.QUEUE_LABEL
GROUP = pods.GROUP_NAME_KEY
TOTAL = pods.GROUP_TOTAL_COUNT_ANNOTATION


def workload_of(fact: types.Fact | None) -> models.Workload:
    assert isinstance(fact, types.WorkloadObserved), fact
    return fact.workload


def shapes(fact: types.Fact | None) -> list[tuple[str, int, dict[str, int]]]:
    """(name, count, requests) of every pod set, in order."""
    return [(ps.name, ps.count, ps.requests) for ps in workload_of(fact).spec.pod_sets]


# -- JobSet ----------------------------------------------------------------------------------------


def sample_jobset(uid: str = "js-uid") -> dict[str, Any]:
    """Kueue's jobs/sample-jobset.yaml, named ``sleep-job-x`` as generateName would."""
    [manifest] = examples.load("jobs/sample-jobset.yaml")
    manifest["metadata"].update(name="sleep-job-x", namespace="default", uid=uid)
    manifest["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    return manifest


def replicated(
    name: str, *, replicas: Any = None, parallelism: Any = None, completions: Any = None, **pod: Any
) -> dict:
    """One replicated job of a JobSet, its pods requesting 1 cpu unless ``pod`` says otherwise."""
    job_spec: dict[str, Any] = {
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **pod}}
    }
    for key, value in (("parallelism", parallelism), ("completions", completions)):
        if value is not None:
            job_spec[key] = value
    out: dict[str, Any] = {"name": name, "template": {"spec": job_spec}}
    if replicas is not None:
        out["replicas"] = replicas
    return out


def a_jobset(*rjobs: dict, labels: dict | None = None, status: dict | None = None) -> dict[str, Any]:
    meta = {"name": "js", "namespace": "default", "uid": "js-uid", "labels": {QUEUE: "user-queue", **(labels or {})}}
    out = {
        "apiVersion": jobsets.JOBSET_API,
        "kind": "JobSet",
        "metadata": meta,
        "spec": {"replicatedJobs": list(rjobs)},
    }
    if status:
        out["status"] = status
    return out


def test_kueue_sample_jobset() -> None:
    """sample-jobset.yaml: pod sets ``workers`` (1 pod, 1 cpu) and ``driver`` (replicas defaulted to 1, 2 cpu)."""
    fact = jobsets.jobset_facts(sample_jobset())
    assert shapes(fact) == [
        ("workers", 1, {"cpu": 1000, "memory": 200 * Mi}),
        ("driver", 1, {"cpu": 2000, "memory": 200 * Mi}),
    ]
    wl = workload_of(fact)
    assert wl.metadata.name == jobsets.workload_name_for_jobset("sleep-job-x", "js-uid")
    assert wl.metadata.name.startswith("jobset-sleep-job-x-")
    assert wl.spec.queue_name == "user-queue"
    assert wl.owner == models.OwnerReference(
        api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", name="sleep-job-x", uid="js-uid"
    )


@pytest.mark.parametrize(
    ("rjob", "want_count"),
    [
        pytest.param(replicated("w", replicas=3, parallelism=2), 6, id="count is replicas x parallelism [podsCount]"),
        pytest.param(
            replicated("w", replicas=2, parallelism=4, completions=3),
            6,
            id="pods of one Job are min(parallelism, completions) [PodsCountPerReplica]",
        ),
        pytest.param(replicated("w"), 1, id="replicas and parallelism default to 1"),
        pytest.param(replicated("w", replicas=0), 0, id="zero replicas give an empty pod set"),
    ],
)
def test_jobset_pod_set_count(rjob: dict, want_count: int) -> None:
    """jobset_controller.go PodSets: one pod set per replicated job, named after it."""
    [(name, count, _)] = shapes(jobsets.jobset_facts(a_jobset(rjob)))
    assert (name, count) == ("w", want_count)


def test_jobset_priority_from_the_first_replicated_job_naming_a_class() -> None:
    """ExtractPriority over pod sets in order: the first template with a priorityClassName (SEMANTICS §2.4)."""
    classes = {"high": workloads.PriorityClass(name="high", value=100)}
    manifest = a_jobset(replicated("a"), replicated("b", priorityClassName="high"))
    spec = workload_of(jobsets.jobset_facts(manifest, context=workloads.Context(priority_classes=classes))).spec
    assert (spec.priority_class_ref.name, spec.priority) == ("high", 100)  # type: ignore[union-attr]
    fact = jobsets.jobset_facts(manifest)
    assert isinstance(fact, types.ObjectRejected)
    assert fact.field == "spec.replicatedJobs[1].template.spec.template.spec.priorityClassName"


@pytest.mark.parametrize(
    ("manifest", "ctx", "want"),
    [
        pytest.param(
            a_jobset(replicated("w"), labels={QUEUE: ""}), workloads.Context(), None, id="no queue: not managed"
        ),
        pytest.param(
            a_jobset(replicated("w"), labels={QUEUE: ""}),
            workloads.Context(manage_jobs_without_queue_name=True, local_queues={("default", "default")}),
            "",
            id="no queue, manageJobsWithoutQueueName: no queue (only Kueue's webhook gives the default LocalQueue)",
        ),
    ],
)
def test_jobset_managed(manifest: dict, ctx: workloads.Context, want: str | None) -> None:
    """A JobSet is managed as a Job is (jobframework reconciler.go)."""
    fact = jobsets.jobset_facts(manifest, context=ctx)
    assert (fact is None) if want is None else workload_of(fact).spec.queue_name == want


@pytest.mark.parametrize(
    ("condition", "want_succeeded"),
    [
        pytest.param("Completed", True, id="Completed=True: finished, succeeded [jobset_controller.go Finished]"),
        pytest.param("Failed", False, id="Failed=True: finished, failed"),
    ],
)
def test_finished_jobset(condition: str, want_succeeded: bool) -> None:
    """A finished JobSet gives WorkloadFinished for its workload."""
    status = {"conditions": [{"type": condition, "status": "True", "message": "m"}]}
    fact = jobsets.jobset_facts(a_jobset(replicated("w"), status=status), now_ms=7)
    assert isinstance(fact, types.WorkloadFinished)
    assert (fact.succeeded, fact.message, fact.at_ms) == (want_succeeded, "m", 7)
    assert fact.workload.name == jobsets.workload_name_for_jobset("js", "js-uid")


@pytest.mark.parametrize(
    ("manifest", "want_field", "want_problem"),
    [
        pytest.param(
            a_jobset(*(replicated(f"r{i}") for i in range(19))),
            "spec.replicatedJobs",
            "at most 18",
            id="more than 18 replicated jobs [MaxPodSets]",
        ),
        pytest.param(
            a_jobset(replicated("w"), replicated("w")), "spec.replicatedJobs", "repeated: w", id="one name twice"
        ),
        pytest.param(a_jobset(), "spec.replicatedJobs", "at least one", id="no replicated jobs"),
        pytest.param(
            a_jobset(replicated("w", replicas="many")),
            "spec.replicatedJobs[0].replicas",
            "'many'",
            id="replicas not a number",
        ),
        pytest.param(
            a_jobset({"template": {}}), "spec.replicatedJobs[0].name", "required", id="a replicated job without a name"
        ),
        pytest.param(
            a_jobset(replicated("w", containers=[{"name": "c", "resources": {"requests": {"memory": "lots"}}}])),
            "spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.memory",
            "lots",
            id="a bad quantity names the replicated job's container",
        ),
    ],
)
def test_bad_jobsets_are_rejected(manifest: dict, want_field: str, want_problem: str) -> None:
    """ObjectRejected names the JobSet and the field."""
    fact = jobsets.jobset_facts(manifest)
    assert isinstance(fact, types.ObjectRejected), fact
    assert (fact.kind, fact.namespace, fact.name, fact.field) == ("JobSet", "default", "js", want_field)
    assert want_problem in fact.problem


# -- single Pods -----------------------------------------------------------------------------------


def pod(
    name: str = "p",
    *,
    cpu: Any = "1",
    labels: dict | None = None,
    annotations: dict | None = None,
    group: str | None = None,
    total: Any = None,
    phase: str | None = None,
    gated: bool = True,
    created: str = "2026-01-01T00:00:00Z",
    queue: str | None = "user-queue",
    **spec: Any,
) -> dict[str, Any]:
    """A Pod in ``default`` as Kueue's webhook leaves it (queue label, managed label, scheduling gate)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"{name}-uid",
        "creationTimestamp": created,
        "labels": {**({QUEUE: queue, workloads.MANAGED_LABEL: "true"} if queue else {}), **(labels or {})},
        "annotations": dict(annotations or {}),
    }
    if group is not None:
        meta["labels"][GROUP] = group
    if total is not None:
        meta["annotations"][TOTAL] = str(total)
    requests = {"cpu": cpu} if cpu is not None else {}
    body: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
        **spec,
    }
    if gated:
        body["schedulingGates"] = [{"name": SCHEDULING_GATE}]
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}
    if phase:
        out["status"] = {"phase": phase}
    return out


def unmarked(manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` without the ``kueue.x-k8s.io/managed`` label: a pod Kueue's webhook did not mark."""
    del manifest["metadata"]["labels"][workloads.MANAGED_LABEL]
    return manifest


def parented(manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` marked by a Deployment's template (``kueue.x-k8s.io/pod-suspending-parent``)."""
    manifest["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] = "deployment"
    return manifest


def owned_by_job(manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` controlled by Job ``j`` (UID ``job-uid``)."""
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-uid", "controller": True}
    manifest["metadata"]["ownerReferences"] = [owner]
    return manifest


def test_kueue_sample_pod() -> None:
    """pods-kueue/kueue-pod.yaml: one workload ``pod-<name>-<hash>`` with pod set ``main`` of one 3-cpu pod."""
    [manifest] = examples.load("pods-kueue/kueue-pod.yaml")
    manifest["metadata"].update(name="kueue-sleep-x", namespace="default", uid="pod-uid")
    manifest = webhooks.default("v1", "Pod", manifest)  # as the API server stores it: marked, gated
    fact = pods.pod_facts(manifest)
    assert shapes(fact) == [("main", 1, {"cpu": 3000})]
    wl = workload_of(fact)
    assert wl.metadata.name == pods.workload_name_for_pod("kueue-sleep-x", "pod-uid")
    assert wl.metadata.name.startswith("pod-kueue-sleep-x-")
    assert wl.owner == models.OwnerReference(api_version="v1", kind="Pod", name="kueue-sleep-x", uid="pod-uid")


@pytest.mark.parametrize(
    ("manifest", "ctx", "managed"),
    [
        pytest.param(pod(), workloads.Context(), True, id="a pod with the queue label, marked, is managed"),
        pytest.param(pod(queue=None), workloads.Context(), False, id="without either, not"),
        pytest.param(
            unmarked(pod(gated=False)),
            workloads.Context(),
            False,
            id="a queue-labelled pod the webhook did not mark is never taken over [Skip]",
        ),
        pytest.param(
            pod(labels={workloads.MANAGED_LABEL: "false"}),
            workloads.Context(),
            False,
            id="the mark is only 'true' [Skip]",
        ),
        pytest.param(
            pod(queue=None, labels={workloads.MANAGED_LABEL: "true"}),
            workloads.Context(manage_jobs_without_queue_name=True),
            True,
            id="a marked pod without a queue, under manageJobsWithoutQueueName [ReconcileGenericJob]",
        ),
        pytest.param(
            pod(queue=None, labels={workloads.MANAGED_LABEL: "true"}),
            workloads.Context(),
            False,
            id="a marked pod without a queue, without that option: ignored [ReconcileGenericJob]",
        ),
        pytest.param(
            pod(),
            workloads.Context(pod_integration_implicit=True),
            False,
            id="pod integration only implied by deployment: a plain pod is skipped [Skip]",
        ),
        pytest.param(
            parented(pod()),
            workloads.Context(pod_integration_implicit=True),
            True,
            id="pod integration only implied by deployment: the Deployment's pod is managed [Skip]",
        ),
        pytest.param(
            owned_by_job(pod()),
            workloads.Context(
                owners={
                    "job-uid": workloads.Owner(
                        api_version="batch/v1",
                        kind="Job",
                        namespace="default",
                        name="owner",
                        uid="job-uid",
                        labels={"kueue.x-k8s.io/queue-name": "q"},
                    )
                }
            ),
            False,
            id="a pod of a managed Job belongs to the Job's workload [FindAncestorJobManagedByKueue]",
        ),
        pytest.param(
            owned_by_job(pod()),
            workloads.Context(),
            True,
            id="a marked pod whose Job the watcher has not seen is its own: the webhook walked it [IsTopLevel]",
        ),
        pytest.param(
            owned_by_job(pod()),
            workloads.Context(
                owners={
                    "job-uid": workloads.Owner(
                        api_version="batch/v1", kind="Job", namespace="default", name="owner", uid="job-uid"
                    )
                }
            ),
            True,
            id="a marked pod of a Job without the queue-name label is its own [FindAncestorJobManagedByKueue]",
        ),
        pytest.param(
            owned_by_job(pod()),
            workloads.Context(
                owners={
                    "other-uid": workloads.Owner(
                        api_version="batch/v1",
                        kind="Job",
                        namespace="default",
                        name="j",
                        uid="other-uid",
                        labels={"kueue.x-k8s.io/queue-name": "q"},
                    )
                }
            ),
            True,
            id="a marked pod whose reference's UID is not the queued Job's is its own [pod_webhook_test.go]",
        ),
    ],
)
def test_pod_managed(manifest: dict, ctx: workloads.Context, managed: bool) -> None:
    """pod_webhook.go Default, pod_controller.go Skip: which pods are Kueue's."""
    assert pods.is_managed(manifest, ctx) is managed
    assert (pods.pod_facts(manifest, context=ctx) is not None) is managed


@pytest.mark.parametrize(
    ("phase", "want_succeeded"),
    [
        pytest.param("Succeeded", True, id="Succeeded: finished, succeeded [pod_controller.go Finished]"),
        pytest.param("Failed", False, id="Failed: finished, failed"),
    ],
)
def test_finished_pod(phase: str, want_succeeded: bool) -> None:
    """A terminated pod gives WorkloadFinished with its status message and the time its container finished."""
    manifest = pod(phase=phase)
    manifest["status"]["message"] = "bye"
    manifest["status"]["containerStatuses"] = [{"state": {"terminated": {"finishedAt": "2026-01-01T00:01:00Z"}}}]
    fact = pods.pod_facts(manifest, now_ms=1)
    assert isinstance(fact, types.WorkloadFinished)
    assert (fact.succeeded, fact.message, fact.at_ms) == (want_succeeded, "bye", 1_767_225_660_000)


@pytest.mark.parametrize(
    ("phase", "want_reason"),
    [
        pytest.param("Succeeded", "Succeeded", id="Succeeded, no status.message: an empty message"),
        pytest.param("Failed", "Failed", id="Failed, no status.message: an empty message"),
    ],
)
def test_finished_pod_without_a_status_message(phase: str, want_reason: str) -> None:
    """Kueue's Finished condition of a single pod carries the pod's status.message (pod_controller.go Finished),
    which a kubelet leaves empty for a pod whose containers exited: no message of kueue-es's own. Before, the
    workload finished "Pod succeeded" / "Pod failed"."""
    fact = pods.pod_facts(pod(phase=phase), now_ms=1)
    assert isinstance(fact, types.WorkloadFinished)
    assert (fact.reason, fact.message) == (want_reason, "")


def test_total_count_without_group_name_is_rejected() -> None:
    """pod_webhook.go validatePodGroupMetadata: the total count needs the group name."""
    fact = pods.pod_facts(pod(total=2))
    assert isinstance(fact, types.ObjectRejected) and (fact.kind, fact.name) == ("Pod", "p")
    assert "should be set" in fact.problem


# -- role hash and canonical quantities -------------------------------------------------------------


@pytest.mark.parametrize(
    ("requests", "want"),
    [
        pytest.param({"cpu": "1"}, "dc85db45", id="cpu 1: dc85db45 [pod_controller_test.go]"),
        pytest.param(
            {"cpu": "1", "memory": "1Gi"}, "4ebdd4a6", id="cpu 1, memory 1Gi: 4ebdd4a6 [pod_controller_test.go]"
        ),
        pytest.param({"cpu": "1000m", "memory": "1024Mi"}, "4ebdd4a6", id="the same quantities written otherwise"),
        pytest.param(None, "7aa6c7b8", id="no requests"),
    ],
)
def test_role_hash_matches_kueue(requests: dict | None, want: str) -> None:
    """GenerateRoleHash: SHA-256 over Go's JSON of the spec shape; Kueue's own tests give these values."""
    manifest = pod(cpu=None)
    manifest["spec"]["containers"][0]["resources"] = {"requests": requests} if requests else {}
    assert pods.role_hash(manifest) == want


def test_role_hash_ignores_what_is_not_shape_and_reads_the_annotation() -> None:
    """Command, image, names and labels are not part of a role; a role-hash annotation wins."""
    a, b = pod("a", cpu="2"), pod("b", cpu="2", labels={"x": "y"})
    b["spec"]["containers"][0].update(image="other", command=["sleep"])
    assert pods.role_hash(a) == pods.role_hash(b)
    assert pods.role_hash(pod(cpu="3")) != pods.role_hash(a)
    assert pods.role_hash(pod(annotations={pods.ROLE_HASH_ANNOTATION: "cafe0001"})) == "cafe0001"


@pytest.mark.parametrize(
    ("quantity", "want"),
    [
        ("1", "1"),
        ("1000m", "1"),
        ("0.5", "500m"),
        (0.5, "500m"),
        (3, "3"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("1.5Gi", "1536Mi"),
        ("0.1Ki", "102400m"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("1e3", "1e3"),
        ("12e2", "1200"),
        ("0.0000000001", "1n"),
        ("0", "0"),
    ],
)
def test_canonical_quantity(quantity: Any, want: str) -> None:
    """k8s.io/apimachinery resource.Quantity String(): the format kept, the largest exact suffix."""
    assert quantities.canonical(quantity) == want


# -- pod groups ------------------------------------------------------------------------------------


def group(*members: dict[str, Any]) -> list[dict[str, Any]]:
    return [copy.deepcopy(m) for m in members]


def test_kueue_sample_pod_group() -> None:
    """pods-kueue/kueue-pod-group.yaml: leader and worker share a shape, so one pod set of 2 pods, named by role."""
    leader, worker = examples.load("pods-kueue/kueue-pod-group.yaml")
    leader["metadata"].update(name="sample-leader-x", namespace="default", uid="l-uid")
    worker["metadata"].update(name="sample-worker-x", namespace="default", uid="w-uid")
    fact = pods.group_facts([leader, worker])
    role = pods.role_hash(leader)
    assert shapes(fact) == [(role, 2, {"cpu": 3000})]
    wl = workload_of(fact)
    assert (wl.metadata.name, wl.spec.queue_name) == ("sample-group", "user-queue")
    # the group marker, and the log's list of every member (kueue-es list names them all)
    assert wl.metadata.annotations == {
        IS_GROUP_WORKLOAD_ANNOTATION: "true",
        models.POD_GROUP_MEMBERS_ANNOTATION: "sample-leader-x,sample-worker-x",
    }
    assert workloads.JOB_UID_LABEL not in wl.metadata.labels


def test_group_pod_sets_per_role_sorted_by_name() -> None:
    """constructGroupPodSets: one pod set per role hash counting its pods, sorted by name."""
    members = group(
        pod("driver", cpu="2", group="g", total=3),
        pod("w1", cpu="1", group="g", total=3),
        pod("w2", cpu="1", group="g", total=3),
    )
    got = shapes(pods.group_facts(members))
    want = sorted([(pods.role_hash(members[0]), 1, {"cpu": 2000}), (pods.role_hash(members[1]), 2, {"cpu": 1000})])
    assert got == want


@pytest.mark.parametrize(
    ("members", "want"),
    [
        pytest.param(group(pod("a", group="g", total=2)), None, id="fewer pods than the count: no workload yet"),
        pytest.param(
            group(pod("a", group="g", total=2), pod("b", group="g", total=2, phase="Failed")),
            None,
            id="a Failed pod does not count as runnable [isPodRunnableOrSucceeded]",
        ),
        pytest.param(
            group(pod("a", group="g", total=3, annotations={pods.FAST_ADMISSION_ANNOTATION: "true"})),
            3,
            id="fast admission: one pod set of the whole count before the group is complete",
        ),
        pytest.param(
            group(
                pod("old", group="g", total=2, created="2026-01-01T00:00:00Z", gated=False),
                pod("young", group="g", total=2, created="2026-01-01T00:02:00Z"),
                pod("mid", group="g", total=2, created="2026-01-01T00:01:00Z"),
            ),
            2,
            id="excess pods are left out as Kueue deletes them (gated, youngest) [sortActivePods]",
        ),
    ],
)
def test_group_completeness(members: list[dict], want: int | None) -> None:
    """pod_controller.go ConstructComposableWorkload: a workload only for a complete group (or fast admission)."""
    fact = pods.group_facts(members)
    if want is None:
        assert fact is None
    else:
        [(_, count, _)] = shapes(fact)
        assert count == want


def test_a_group_short_of_pods_gets_kueues_warning_until_it_has_a_workload() -> None:
    """validatePodGroupMetadata: while a group with no Workload has fewer runnable pods than its count (no fast
    admission), Kueue's ErrWorkloadCompose on its first pod; nothing for a complete group, a fast-admission one,
    a finished one, one whose Workload exists, or one whose count does not parse (group_facts rejects it)."""
    waiting = pods.incomplete_group(
        group(
            pod("young", group="g", total=3, created="2026-01-01T00:01:00Z"),
            pod("old", group="g", total=3),
            pod("failed", group="g", total=3, phase="Failed", created="2026-01-01T00:02:00Z"),
        ),
        now_ms=7,
    )
    assert waiting is not None
    assert (waiting.kind, waiting.namespace, waiting.name, waiting.at_ms) == ("Pod", "default", "old", 7)
    assert waiting.problem == "'g' group has fewer runnable pods than expected"
    assert pods.kueue_reason(waiting) == pods.GROUP_INCOMPLETE_REASON
    quiet = [
        group(pod("a", group="g", total=2), pod("b", group="g", total=2)),
        group(pod("a", group="g", total=3, annotations={pods.FAST_ADMISSION_ANNOTATION: "true"})),
        group(pod("a", group="g", total=2, phase="Succeeded"), pod("b", group="g", total=2, phase="Succeeded")),
        group(pod("a", group="g", total="x")),
        [],
    ]
    for members in quiet:
        assert pods.incomplete_group(members) is None, members
    previous = workload_of(pods.group_facts(group(pod("a", group="g", total=1))))
    assert (
        pods.incomplete_group(group(pod("a", group="g", total=2)), context=workloads.Context(previous=previous)) is None
    )


def test_a_group_whose_name_another_workload_holds_is_refused() -> None:
    """FindMatchingWorkloads (PodIntegrationValidateGroupOwner): a Workload named after the group that the pod group
    framework did not make (no is-group-workload annotation) refuses the group, WorkloadNameConflict on its first
    pod; the group's own Workload, or none, does not."""
    members = group(pod("b", group="taken", total=2), pod("a", group="taken", total=2))
    own = workload_of(pods.group_facts(members))
    other = models.Workload(
        metadata=models.ObjectMeta(name="taken", namespace="default", uid="u"),
        spec=models.WorkloadSpec(pod_sets=[models.PodSet(name="main", count=1)]),
    )
    refused = pods.name_conflict(members, other, now_ms=3)
    assert refused is not None
    assert (refused.kind, refused.name, refused.at_ms) == ("Pod", "a", 3)
    assert refused.problem == (
        'A Workload named "taken" already exists but is not a pod group workload; this pod group cannot be admitted'
    )
    assert pods.kueue_reason(refused) == pods.NAME_CONFLICT_REASON
    assert pods.name_conflict(members, own) is None
    assert pods.name_conflict(members, None) is None
    assert pods.name_conflict([], other) is None
    other_rejection = types.ObjectRejected(kind="Pod", name="a", field=refused.field, problem="something else")
    assert pods.kueue_reason(other_rejection) is None


def test_group_uid_and_creation_from_the_first_pod_and_the_last_arrival() -> None:
    """No Workload object exists yet: the UID is the oldest pod's, the creation time when the group became
    complete; once published both are kept (``previous``)."""
    members = group(
        pod("b", group="g", total=2, created="2026-01-01T00:01:00Z"),
        pod("a", group="g", total=2, created="2026-01-01T00:00:00Z"),
    )
    wl = workload_of(pods.group_facts(members))
    assert (wl.metadata.uid, wl.metadata.creation_timestamp_ms) == ("a-uid", 1_767_225_660_000)
    assert wl.owner is not None and wl.owner.name == "a"
    replaced = group(pod("b", group="g", total=2), pod("c", group="g", total=2, created="2026-01-01T00:05:00Z"))
    again = workload_of(pods.group_facts(replaced, context=workloads.Context(previous=wl)))
    assert (again.metadata.uid, again.metadata.creation_timestamp_ms) == ("a-uid", 1_767_225_660_000)


@pytest.mark.parametrize(
    ("members", "succeeded"),
    [
        pytest.param(
            group(pod("a", group="g", total=2, phase="Succeeded"), pod("b", group="g", total=2, phase="Succeeded")),
            True,
            id="every pod succeeded: finished [pod_controller.go Finished]",
        ),
        pytest.param(
            group(
                pod(
                    "a",
                    group="g",
                    total=2,
                    phase="Succeeded",
                    annotations={pods.RETRIABLE_IN_GROUP_ANNOTATION: "false"},
                ),
                pod("b", group="g", total=2, phase="Failed"),
            ),
            True,
            id="an unretriable group with no pod running: finished (Kueue reports success)",
        ),
        pytest.param(
            group(pod("a", group="g", total=2, phase="Succeeded"), pod("b", group="g", total=2, phase="Failed")),
            None,
            id="a retriable group waits for a replacement pod",
        ),
        pytest.param(
            group(
                pod("a", group="g", total=1, phase="Succeeded", annotations={pods.SERVING_ANNOTATION: "true"}),
            ),
            None,
            id="a serving group never finishes",
        ),
    ],
)
def test_group_finished(members: list[dict], succeeded: bool | None) -> None:
    """WorkloadFinished for a group, with Kueue's message ``Pods succeeded: n/total.``."""
    fact = pods.group_facts(members)
    if succeeded is None:
        assert not isinstance(fact, types.WorkloadFinished)
    else:
        assert isinstance(fact, types.WorkloadFinished)
        done = sum(1 for m in members if m.get("status", {}).get("phase") == "Succeeded")
        assert (fact.succeeded, fact.message, fact.workload.name) == (succeeded, f"Pods succeeded: {done}/2.", "g")


@pytest.mark.parametrize(
    ("members", "want_pod", "want_field", "want_problem"),
    [
        pytest.param(
            group(pod("a", group="g", total=2), pod("b", group="g", total=2, queue="other-queue")),
            "b",
            f"metadata.labels[{QUEUE}]",
            "different queue names: user-queue!=other-queue",
            id="pods of one group name different queues [validatePodGroupMetadata]",
        ),
        pytest.param(
            group(pod("a", group="g", total=2), pod("b", group="g", total=3)),
            "b",
            f"metadata.annotations[{TOTAL}]",
            "different 'kueue.x-k8s.io/pod-group-total-count' values: 2!=3",
            id="pods of one group count it differently",
        ),
        pytest.param(group(pod("a", group="g")), "a", f"metadata.annotations[{TOTAL}]", "should be set", id="no count"),
        pytest.param(
            group(pod("a", group="g", total="zero")),
            "a",
            f"metadata.annotations[{TOTAL}]",
            'strconv.Atoi: parsing "zero": invalid syntax',
            id="bad count",
        ),
        pytest.param(
            group(pod("a", group="g", total="0")),
            "a",
            f"metadata.annotations[{TOTAL}]",
            f"incorrect annotation value '{TOTAL}=0': group total count should be greater than zero",
            id="count below one [groupTotalCount]",
        ),
        pytest.param(
            group(pod("a", group="G_1", total=1)), "a", f"metadata.labels[{GROUP}]", "not a valid", id="bad name"
        ),
        pytest.param(
            group(pod("a", group="g", total=1, cpu="lots")),
            "a",
            "spec.containers[0].resources.cpu",
            "lots",
            id="a bad quantity names the pod",
        ),
        pytest.param(
            group(*(pod(f"p{i}", cpu=f"{i + 1}", group="g", total=19) for i in range(19))),
            "p0",
            "",
            "can't include more than 18 roles",
            id="more than 18 roles [errMsgIncorrectGroupRoleCount]",
        ),
    ],
)
def test_bad_groups_are_rejected(members: list[dict], want_pod: str, want_field: str, want_problem: str) -> None:
    """ObjectRejected names the pod at fault and the field."""
    fact = pods.group_facts(members)
    assert isinstance(fact, types.ObjectRejected), fact
    assert (fact.kind, fact.namespace, fact.name, fact.field) == ("Pod", "default", want_pod, want_field)
    assert want_problem in fact.problem


def test_group_name_from_the_annotation() -> None:
    """WorkloadIdentifierAnnotations (beta, on): the group name annotation is read before the label."""
    member = pod("a", total=1, annotations={GROUP: "from-annotation"}, labels={GROUP: "from-label"})
    assert pods.group_name(member) == "from-annotation"
    assert workload_of(pods.group_facts([member])).metadata.name == "from-annotation"


COPYING = workloads.Context(
    label_keys_to_copy=frozenset({"toCopyKey"}), annotations_to_copy=frozenset({"toCopyAnnotation"})
)


def test_a_single_pod_s_configured_labels_and_annotations_are_copied() -> None:
    """pod_controller_test.go "Pod controller with CustomMetricLabels", "Should copy labels and annotations for a
    single pod": ``toCopyKey`` and ``toCopyAnnotation`` reach the Workload, ``dontCopy*`` do not."""
    single = pod(
        "p",
        labels={"toCopyKey": "toCopyValue", "dontCopyKey": "ignored"},
        annotations={"toCopyAnnotation": "toCopyValue", "dontCopyAnnotation": "ignored"},
    )
    wl = workload_of(pods.pod_facts(single, context=COPYING))
    assert wl.metadata.labels == {"toCopyKey": "toCopyValue", workloads.JOB_UID_LABEL: "p-uid"}
    assert wl.metadata.annotations == {"toCopyAnnotation": "toCopyValue"}


def test_a_pod_group_copies_the_configured_keys_from_any_member() -> None:
    """ "Should copy labels and annotations for a pod group": ``toCopyKey`` only the second pod has, and the
    annotation both have alike, reach the group's Workload (pod_controller.go getByKey)."""
    members = group(
        pod("p1", group="g", total=2, labels={"dontCopyKey": "a"}, annotations={"toCopyAnnotation": "v"}),
        pod("p2", group="g", total=2, labels={"toCopyKey": "toCopyValue"}, annotations={"toCopyAnnotation": "v"}),
    )
    wl = workload_of(pods.group_facts(members, context=COPYING))
    assert wl.metadata.labels == {"toCopyKey": "toCopyValue"}
    assert wl.metadata.annotations["toCopyAnnotation"] == "v"
    assert "dontCopyKey" not in wl.metadata.labels


def test_a_pod_group_whose_members_disagree_on_a_copied_annotation_gets_no_workload() -> None:
    """ "Should not create workload for a pod group if there is an annotation mismatch": Kueue's
    ConstructComposableWorkload fails ("pods have different annotation values"), no Workload is made."""
    members = group(
        pod("p1", group="g", total=2, annotations={"toCopyAnnotation": "value1"}),
        pod("p2", group="g", total=2, annotations={"toCopyAnnotation": "value2"}),
    )
    fact = pods.group_facts(members, context=COPYING)
    assert isinstance(fact, types.ObjectRejected), fact
    assert fact.field == "metadata.annotations[toCopyAnnotation]"
    assert fact.problem == "constructing workload: pods have different annotation values"
