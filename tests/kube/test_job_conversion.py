"""batch/v1 Job -> Workload, as tables: each case is one of Kueue's rules, named with its source file.

Pure conversion (jobframework/jobs.py over workloads.py); no server.
Amounts are integers: cpu in millicores, memory in bytes (SEMANTICS §0.1).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kueue_es.events import models, types
from kueue_es.jobframework import jobs, workloads
from tests.kube import examples

Gi, Mi = 2**30, 2**20
QUEUE = workloads.QUEUE_LABEL


def container(cpu: Any = None, memory: Any = None, *, limits: dict | None = None, **extra: Any) -> dict[str, Any]:
    """A container requesting ``cpu``/``memory`` (omitted when None), with optional ``limits``."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: dict[str, Any] = {"requests": requests} if requests else {}
    if limits:
        resources["limits"] = limits
    return {"name": "c", "image": "busybox", "resources": resources, **extra}


def job(
    name: str = "sample",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    parallelism: Any = None,
    completions: Any = None,
    containers: list[dict] | None = None,
    pod: dict[str, Any] | None = None,
    owners: list[dict] | None = None,
    status: dict[str, Any] | None = None,
    uid: str = "uid-1",
    queue: str | None = "user-queue",
) -> dict[str, Any]:
    """A batch/v1 Job in namespace ``default``; ``pod`` adds to its pod spec; ``queue`` None drops the label."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": uid,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {**({QUEUE: queue} if queue else {}), **(labels or {})},
    }
    if annotations:
        meta["annotations"] = annotations
    if owners:
        meta["ownerReferences"] = owners
    spec: dict[str, Any] = {
        "template": {
            "spec": {"restartPolicy": "Never", "containers": containers or [container("1", "200Mi")], **(pod or {})}
        }
    }
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    out = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}
    if status:
        out["status"] = status
    return out


def workload_of(fact: types.Fact | None) -> models.Workload:
    assert isinstance(fact, types.WorkloadObserved), fact
    return fact.workload


def the_pod_set(fact: types.Fact | None) -> models.PodSet:
    [pod_set] = workload_of(fact).spec.pod_sets
    return pod_set


# -- pod set: count and partial admission ----------------------------------------------------------


@pytest.mark.parametrize(
    ("manifest", "want_count", "want_min"),
    [
        pytest.param(
            job(parallelism=4, completions=2), 2, None, id="count is min(parallelism, completions) [podsCount]"
        ),
        pytest.param(job(parallelism=3, completions=5), 3, None, id="completions above parallelism do not count"),
        pytest.param(job(), 1, None, id="parallelism defaults to 1 [podsCount]"),
        pytest.param(job(completions=5), 1, None, id="completions alone give parallelism 1"),
        pytest.param(job(parallelism=0), 0, None, id="parallelism 0 gives an empty pod set"),
        pytest.param(
            job(parallelism=5, annotations={jobs.MIN_PARALLELISM_ANNOTATION: "2"}),
            5,
            2,
            id="job-min-parallelism gives minCount [minPodsCount, partial admission]",
        ),
        pytest.param(
            job(parallelism=20, completions=20, annotations={jobs.MIN_PARALLELISM_ANNOTATION: "5"}),
            20,
            5,
            id="Kueue's sample-job-partial-admission: 20 pods, at least 5",
        ),
    ],
)
def test_job_pod_set_count(manifest: dict, want_count: int, want_min: int | None) -> None:
    """job_controller.go PodSets: one pod set ``main`` of podsCount pods, minCount from the annotation."""
    pod_set = the_pod_set(jobs.job_facts(manifest))
    assert (pod_set.name, pod_set.count, pod_set.min_count) == ("main", want_count, want_min)


# -- pod set: per-pod requests (SEMANTICS §2.3) ---------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(
            {"containers": [container("1", "200Mi"), container("500m", "100Mi")]},
            {"cpu": 1500, "memory": 300 * Mi},
            id="containers are summed [resources.go, PodRequests]",
        ),
        pytest.param(
            {"initContainers": [container("2", "100Mi")], "containers": [container("1", "1Gi")]},
            {"cpu": 2000, "memory": Gi},
            id="each resource is the max of an init container and the containers' sum",
        ),
        pytest.param(
            {
                "initContainers": [
                    container("500m", restartPolicy="Always"),
                    container("1200m"),
                ],
                "containers": [container("1")],
            },
            {"cpu": 1700},
            id="sidecars add to the containers and to the init containers after them",
        ),
        pytest.param(
            {"containers": [container("1")], "overhead": {"cpu": "250m", "memory": "64Mi"}},
            {"cpu": 1250, "memory": 64 * Mi},
            id="pod overhead is added [RuntimeClass overhead]",
        ),
        pytest.param(
            {"containers": [container(limits={"cpu": "2", "memory": "1Gi"})]},
            {"cpu": 2000, "memory": Gi},
            id="limits stand in for missing requests [limits as requests]",
        ),
        pytest.param(
            {"containers": [container("1", limits={"cpu": "2", "nvidia.com/gpu": 1})]},
            {"cpu": 1000, "nvidia.com/gpu": 1},
            id="a request wins over its limit; a limit alone is the request",
        ),
        pytest.param(
            {"containers": [container("1")], "resources": {"requests": {"cpu": "3"}}},
            {"cpu": 3000},
            id="pod-level requests win where set",
        ),
    ],
)
def test_job_requests(pod: dict, want: dict[str, int]) -> None:
    """The per-pod request of the pod set follows the Kubernetes pod request formula (SEMANTICS §2.3)."""
    pod_set = the_pod_set(jobs.job_facts(job(pod=pod)))
    assert pod_set.requests == want


def test_requests_over_limits_mark_the_pod_set_misconfigured() -> None:
    """A request above its limit makes the pod set inadmissible (SEMANTICS §2.3, admissibility check)."""
    pod_set = the_pod_set(jobs.job_facts(job(containers=[container("2", limits={"cpu": "1"})])))
    assert pod_set.misconfigured == (
        "resources validation failed: "
        'spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu"]: requests must not exceed its limits'
    )


def test_pod_level_requests_over_limits_mark_the_pod_set_misconfigured() -> None:
    """Pod-level resources (KEP-2837) are checked like a container's: a pod-level request above the
    pod-level limit makes the pod set inadmissible (Kueue pkg/workload/resources.go ValidateResources)."""
    pod = {"resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "2"}}}
    pod_set = the_pod_set(jobs.job_facts(job(containers=[container("1", limits={"cpu": "2"})], pod=pod)))
    assert pod_set.misconfigured == (
        "resources validation failed: "
        'spec.podSets[0].template.spec.resources: Invalid value: ["cpu"]: requests must not exceed its limits'
    )
    within = {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "3"}}}
    assert the_pod_set(jobs.job_facts(job(containers=[container("1")], pod=within))).misconfigured == ""


def test_node_selector_tolerations_and_affinity_are_kept() -> None:
    """Flavor assignment reads the template's nodeSelector, tolerations and required node affinity."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
            }
        }
    }
    pod = {
        "nodeSelector": {"instance-type": "spot"},
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": affinity,
    }
    pod_set = the_pod_set(jobs.job_facts(job(pod=pod)))
    assert pod_set.node_selector == {"instance-type": "spot"}
    assert pod_set.tolerations == [models.Toleration(key="spot", operator="Exists", effect="NoSchedule")]
    [term] = pod_set.required_node_affinity
    assert term.match_expressions == [models.NodeSelectorRequirement(key="zone", operator="In", values=["a"])]


# -- managed or not, and the queue ---------------------------------------------------------------


def context(**fields: Any) -> workloads.Context:
    return workloads.Context(**fields)


@pytest.mark.parametrize(
    ("manifest", "ctx", "want_queue"),
    [
        pytest.param(job(), context(), "user-queue", id="the queue-name label names the LocalQueue [QueueName]"),
        pytest.param(job(queue=None), context(), None, id="no label: not managed [manageJobsWithoutQueueName=false]"),
        pytest.param(
            job(queue=None),
            context(manage_jobs_without_queue_name=True, local_queues={("default", "default")}),
            "",
            id="no label, manageJobsWithoutQueueName: no queue; the default LocalQueue comes only from Kueue's "
            "create webhook as the label [ApplyDefaultLocalQueue]",
        ),
        pytest.param(
            job(queue=None),
            context(manage_jobs_without_queue_name=True, local_queues={("other", "default")}),
            "",
            id="no label, manageJobsWithoutQueueName, no default LocalQueue here: no queue, it waits",
        ),
        pytest.param(
            job(),
            context(manage_jobs_without_queue_name=True, local_queues={("default", "default")}),
            "user-queue",
            id="the label wins over the default LocalQueue",
        ),
        pytest.param(
            job(
                owners=[
                    {
                        "apiVersion": "jobset.x-k8s.io/v1alpha2",
                        "kind": "JobSet",
                        "name": "js",
                        "uid": "js-uid",
                        "controller": True,
                    }
                ]
            ),
            context(
                owners={
                    "js-uid": workloads.Owner(
                        api_version="jobset.x-k8s.io/v1alpha2",
                        kind="JobSet",
                        namespace="default",
                        name="js",
                        uid="js-uid",
                        labels={"kueue.x-k8s.io/queue-name": "q"},
                    )
                }
            ),
            None,
            id="a Job controlled by a managed JobSet is part of its workload [FindAncestorJobManagedByKueue]",
        ),
        pytest.param(
            job(
                owners=[
                    {
                        "apiVersion": "jobset.x-k8s.io/v1alpha2",
                        "kind": "JobSet",
                        "name": "js",
                        "uid": "js-uid",
                        "controller": True,
                    }
                ]
            ),
            context(),
            "user-queue",
            id="a Job whose JobSet Kueue does not manage is managed on its own",
        ),
        pytest.param(
            job(
                "sample-cronjob-29000000",
                owners=[
                    {
                        "apiVersion": "batch/v1",
                        "kind": "CronJob",
                        "name": "sample-cronjob",
                        "uid": "cj-uid",
                        "controller": True,
                    }
                ],
            ),
            context(
                owners={
                    "other": workloads.Owner(
                        api_version="batch/v1",
                        kind="Job",
                        namespace="default",
                        name="owner",
                        uid="other",
                        labels={"kueue.x-k8s.io/queue-name": "q"},
                    )
                }
            ),
            "user-queue",
            id="a Job created by a CronJob is managed (its label comes from the jobTemplate)",
        ),
    ],
)
def test_job_managed_and_queue(manifest: dict, ctx: workloads.Context, want_queue: str | None) -> None:
    """jobframework reconciler.go ReconcileGenericJob and defaults.go: which Jobs are managed, and their queue."""
    fact = jobs.job_facts(manifest, context=ctx)
    if want_queue is None:
        assert fact is None
    else:
        assert workload_of(fact).spec.queue_name == want_queue


def test_a_default_local_queue_created_later_does_not_take_a_job_without_the_label() -> None:
    """Kueue defaults the queue only in its create webhook (defaults.go ApplyDefaultLocalQueue): a job created
    before its namespace's ``default`` LocalQueue keeps a workload with no queue until it is labelled."""
    ctx = context(manage_jobs_without_queue_name=True)
    first = workload_of(jobs.job_facts(job(queue=None), context=ctx))
    later_ctx = context(manage_jobs_without_queue_name=True, local_queues={("default", "default")}, previous=first)
    assert workload_of(jobs.job_facts(job(queue=None), context=later_ctx)).spec.queue_name == ""


def test_cronjob_job_from_kueue_example() -> None:
    """Kueue's sample-cronjob.yaml: the Job its controller creates carries the jobTemplate's label and spec."""
    manifest = examples.cronjob_job(uid="cj-job-uid")
    wl = workload_of(jobs.job_facts(manifest))
    assert wl.spec.queue_name == "user-queue"
    assert wl.owner == models.OwnerReference(
        api_version="batch/v1", kind="Job", name=manifest["metadata"]["name"], uid="cj-job-uid"
    )
    [pod_set] = wl.spec.pod_sets
    assert (pod_set.count, pod_set.requests) == (3, {"cpu": 1000, "memory": 200 * Mi})


# -- priority (SEMANTICS §2.4) ----------------------------------------------------------------------

WPC = workloads.PRIORITY_CLASS_LABEL
PCS = {
    "high": workloads.PriorityClass(name="high", value=1000),
    "low-default": workloads.PriorityClass(name="low-default", value=10, global_default=True),
    "lower-default": workloads.PriorityClass(name="lower-default", value=5, global_default=True),
}


def pc_ref(name: str) -> models.PriorityClassRef:
    return models.PriorityClassRef(group="scheduling.k8s.io", kind="PriorityClass", name=name)


@pytest.mark.parametrize(
    ("manifest", "ctx", "want_ref", "want_priority"),
    [
        pytest.param(
            job(labels={WPC: "team-a"}),
            context(workload_priority_classes={"team-a"}),
            models.PriorityClassRef(name="team-a"),
            None,
            id="the priority-class label names a WorkloadPriorityClass; the fold reads its value [ExtractPriority 1]",
        ),
        pytest.param(
            job(),
            context(workload_priority_classes={"default"}),
            None,
            None,
            id="no label: no WorkloadPriorityClass, default or not (Kueue's webhook labels a new job) [ExtractPriority]",
        ),
        pytest.param(
            job(labels={WPC: "team-a"}, pod={"priorityClassName": "high"}),
            context(priority_classes=PCS, workload_priority_classes={"team-a"}),
            models.PriorityClassRef(name="team-a"),
            None,
            id="the label wins over the pod's priorityClassName",
        ),
        pytest.param(
            job(pod={"priorityClassName": "high"}),
            context(priority_classes=PCS),
            pc_ref("high"),
            1000,
            id="the template's priorityClassName names a PriorityClass and its value [ExtractPriority 2]",
        ),
        pytest.param(
            job(),
            context(priority_classes=PCS),
            pc_ref("lower-default"),
            5,
            id="else the global-default PriorityClass, the lowest value of several [getDefaultPriorityClass]",
        ),
        pytest.param(job(), context(), None, None, id="else no class, priority 0 [DefaultPriority]"),
    ],
)
def test_job_priority(
    manifest: dict, ctx: workloads.Context, want_ref: models.PriorityClassRef | None, want_priority: int | None
) -> None:
    """jobframework reconciler.go ExtractPriority, util/priority/priority.go."""
    spec = workload_of(jobs.job_facts(manifest, context=ctx)).spec
    assert (spec.priority_class_ref, spec.priority) == (want_ref, want_priority)


def test_missing_priority_class_gives_no_workload_yet() -> None:
    """Kueue creates no Workload while the named PriorityClass is missing: ObjectRejected names the field."""
    fact = jobs.job_facts(job(pod={"priorityClassName": "missing"}), context=context(priority_classes=PCS))
    assert isinstance(fact, types.ObjectRejected)
    assert (fact.kind, fact.namespace, fact.name) == ("Job", "default", "sample")
    assert fact.field == "spec.template.spec.priorityClassName"
    assert fact.problem == 'PriorityClass "missing" not found'


def test_missing_workload_priority_class_gives_no_workload_yet() -> None:
    """Kueue's ExtractPriority: a job naming a WorkloadPriorityClass that does not exist gets no Workload
    (job_controller_test.go "a warning names the WorkloadPriorityClass that does not exist")."""
    fact = jobs.job_facts(job(labels={WPC: "missing-wpc"}), context=context())
    assert isinstance(fact, types.ObjectRejected)
    assert (fact.kind, fact.name, fact.field) == ("Job", "sample", workloads.MISSING_WPC_FIELD)
    assert fact.problem == 'WorkloadPriorityClass "missing-wpc" not found'


def test_a_workload_moved_to_a_missing_workload_priority_class_is_left_as_it_is() -> None:
    """UpdateWorkloadPriority resolves the new class before it writes: missing, the job's workload keeps its
    class (the job is rejected, its last workload stays); one already naming a class deleted since keeps it."""
    first = workload_of(
        jobs.job_facts(job(labels={WPC: "team-a"}), context=context(workload_priority_classes={"team-a"}))
    )
    moved = jobs.job_facts(
        job(labels={WPC: "team-b"}), context=context(workload_priority_classes={"team-a"}, previous=first)
    )
    assert isinstance(moved, types.ObjectRejected)
    assert moved.problem == 'WorkloadPriorityClass "team-b" not found'
    kept = jobs.job_facts(job(labels={WPC: "team-a"}), context=context(previous=first))
    assert workload_of(kept).spec.priority_class_ref == models.PriorityClassRef(name="team-a")


def test_priority_class_value_is_fixed_at_creation() -> None:
    """Kueue never updates a PriorityClass-based priority: the value first published stays."""
    first = workload_of(jobs.job_facts(job(pod={"priorityClassName": "high"}), context=context(priority_classes=PCS)))
    changed = {"high": dataclasses.replace(PCS["high"], value=1)}
    later = jobs.job_facts(
        job(pod={"priorityClassName": "high"}), context=context(priority_classes=changed, previous=first)
    )
    assert workload_of(later).spec.priority == 1000
    gone = jobs.job_facts(job(pod={"priorityClassName": "high"}), context=context(previous=first))
    assert workload_of(gone).spec.priority == 1000


def test_an_existing_workload_keeps_its_priority_where_kueue_leaves_it() -> None:
    """Kueue reconciler.go classifyWorkloadsForPriorityUpdate: a workload that reserved quota with no class is
    not given one (the API refuses), a pod PriorityClass-backed one does not follow the label, and one with no
    class and a job with no label keeps none (a default WorkloadPriorityClass or a global-default PriorityClass
    created later changes nothing); a pending one with no class moves to a label set later, and one whose
    label was taken off leaves its WorkloadPriorityClass."""
    wpcs = {"default", "team-a"}
    plain = workload_of(jobs.job_facts(job(), context=context()))
    assert plain.spec.priority_class_ref is None
    later = context(workload_priority_classes=wpcs, priority_classes=PCS, previous=plain)
    unchanged = workload_of(jobs.job_facts(job(), context=later)).spec
    assert (unchanged.priority_class_ref, unchanged.priority) == (None, None)
    reserved = context(workload_priority_classes=wpcs, previous=plain, previous_reserved=True)
    held = workload_of(jobs.job_facts(job(labels={WPC: "team-a"}), context=reserved)).spec
    assert (held.priority_class_ref, held.priority) == (None, None)
    pending = context(workload_priority_classes=wpcs, previous=plain)
    moved = workload_of(jobs.job_facts(job(labels={WPC: "team-a"}), context=pending)).spec
    assert moved.priority_class_ref == models.PriorityClassRef(name="team-a")

    backed = workload_of(jobs.job_facts(job(pod={"priorityClassName": "high"}), context=context(priority_classes=PCS)))
    relabelled = context(workload_priority_classes=wpcs, priority_classes=PCS, previous=backed)
    kept = workload_of(
        jobs.job_facts(job(labels={WPC: "team-a"}, pod={"priorityClassName": "high"}), context=relabelled)
    )
    assert (kept.spec.priority_class_ref, kept.spec.priority) == (pc_ref("high"), 1000)

    labelled = workload_of(jobs.job_facts(job(labels={WPC: "team-a"}), context=context(workload_priority_classes=wpcs)))
    unlabelled = context(workload_priority_classes=wpcs, priority_classes=PCS, previous=labelled)
    left = workload_of(jobs.job_facts(job(pod={"priorityClassName": "high"}), context=unlabelled)).spec
    assert (left.priority_class_ref, left.priority) == (pc_ref("high"), 1000)


# -- metadata, names, owner -------------------------------------------------------------------------


def test_workload_name_matches_kueue() -> None:
    """workload_names_test.go: Job ``name`` with UID ``uid`` gives ``job-name-ef3a1``; long names are cut to 253."""
    assert jobs.workload_name_for_job("name", "uid") == "job-name-ef3a1"
    long_name = jobs.workload_name_for_job("x" * 300, "uid")
    assert len(long_name) == 253 and long_name.startswith("job-xxx")


def test_workload_metadata_from_the_job() -> None:
    """ConstructWorkload: namespace, UID, creation time, the job-uid label and no other (none is copied without
    ``labelKeysToCopy``, not even Kueue's own: NewWorkload filters by those keys only), owner reference, max exec
    time."""
    wl = workload_of(jobs.job_facts(job(labels={workloads.MAX_EXEC_TIME_LABEL: "600", "app": "x"})))
    assert wl.metadata.name == jobs.workload_name_for_job("sample", "uid-1")
    assert (wl.metadata.namespace, wl.metadata.uid) == ("default", "uid-1")
    assert wl.metadata.creation_timestamp_ms == 1_767_225_600_000
    assert wl.metadata.labels == {workloads.JOB_UID_LABEL: "uid-1"}
    assert wl.spec.maximum_execution_time_seconds == 600
    assert wl.owner == models.OwnerReference(api_version="batch/v1", kind="Job", name="sample", uid="uid-1")


# -- finished -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("condition", "want_succeeded", "want_reason"),
    [
        pytest.param(
            "Complete", True, "Succeeded", id="Complete=True: finished, succeeded [job_controller.go Finished]"
        ),
        pytest.param("Failed", False, "Failed", id="Failed=True: finished, failed"),
    ],
)
def test_finished_job(condition: str, want_succeeded: bool, want_reason: str) -> None:
    """A finished Job gives WorkloadFinished with the condition's message and time."""
    status = {
        "conditions": [
            {"type": condition, "status": "True", "message": "done", "lastTransitionTime": "2026-01-01T00:00:05Z"}
        ]
    }
    fact = jobs.job_facts(job(status=status))
    assert isinstance(fact, types.WorkloadFinished)
    assert (fact.succeeded, fact.reason, fact.message, fact.at_ms) == (
        want_succeeded,
        want_reason,
        "done",
        1_767_225_605_000,
    )
    assert fact.workload == types.WorkloadRef(
        namespace="default", name=jobs.workload_name_for_job("sample", "uid-1"), uid="uid-1"
    )


# -- bad input: ObjectRejected naming the object and the field -----------------------------------------


@pytest.mark.parametrize(
    ("manifest", "want_field", "want_problem"),
    [
        pytest.param(
            job(containers=[container("lots")]),
            "spec.template.spec.containers[0].resources.cpu",
            "lots",
            id="a bad quantity names the container field",
        ),
        pytest.param(job(parallelism=-1), "spec.parallelism", "-1", id="a negative parallelism"),
        pytest.param(job(completions="x"), "spec.completions", "'x'", id="completions not an integer"),
        pytest.param(
            job(parallelism=5, annotations={jobs.MIN_PARALLELISM_ANNOTATION: "5"}),
            f"metadata.annotations[{jobs.MIN_PARALLELISM_ANNOTATION}]",
            "between 0 and 4",
            id="job-min-parallelism not below the count [validatePartialAdmissionCreate]",
        ),
        pytest.param(
            job(parallelism=5, annotations={jobs.MIN_PARALLELISM_ANNOTATION: "two"}),
            f"metadata.annotations[{jobs.MIN_PARALLELISM_ANNOTATION}]",
            'strconv.Atoi: parsing "two": invalid syntax',
            id="job-min-parallelism not an integer [validatePartialAdmissionCreate: strconv.Atoi's words]",
        ),
        pytest.param(
            job(labels={workloads.MAX_EXEC_TIME_LABEL: "0"}),
            f"metadata.labels[{workloads.MAX_EXEC_TIME_LABEL}]",
            "positive",
            id="max-exec-time-seconds not positive [validateCreateForMaxExecTime]",
        ),
        pytest.param(
            job(queue="Not_A_Name"),
            f"metadata.labels[{QUEUE}]",
            "not a valid LocalQueue name",
            id="a queue name that is no DNS subdomain [ValidateQueueName]",
        ),
        pytest.param(
            job(pod={"tolerations": [{"key": "a", "operator": "Sometimes"}]}),
            "spec.template.spec.tolerations",
            "Sometimes",
            id="a toleration operator Kubernetes does not know",
        ),
        pytest.param(
            job(pod={"nodeSelector": ["a"]}), "spec.template.spec.nodeSelector", "strings", id="a nodeSelector list"
        ),
        pytest.param(job(pod={"containers": "c"}), "spec.template.spec.containers", "list", id="containers not a list"),
    ],
)
def test_bad_jobs_are_rejected(manifest: dict, want_field: str, want_problem: str) -> None:
    """Bad input never crashes the conversion: ObjectRejected names the Job and the field."""
    fact = jobs.job_facts(manifest)
    assert isinstance(fact, types.ObjectRejected), fact
    assert (fact.kind, fact.namespace, fact.name, fact.field) == ("Job", "default", "sample", want_field)
    assert want_problem in fact.problem


def test_job_whose_template_is_not_a_mapping_is_rejected() -> None:
    """``spec.template`` that is not a pod template is named."""
    manifest = job()
    manifest["spec"]["template"] = "pod"
    fact = jobs.job_facts(manifest)
    assert isinstance(fact, types.ObjectRejected) and fact.field == "spec.template"


# -- RuntimeClass overhead and LimitRange defaults (SEMANTICS §2.3 steps 1-2) ---------------------

KATA = {"kata": {"cpu": "250m", "memory": "160Mi"}}
CONTAINER_RANGE = {
    "type": "Container",
    "default": {"cpu": "2", "memory": "1Gi"},
    "defaultRequest": {"cpu": "500m"},
    "max": {"cpu": "4"},
    "min": {"memory": "64Mi"},
}


@pytest.mark.parametrize(
    ("pod", "ctx", "want_requests", "want_misconfigured"),
    [
        pytest.param(
            {"runtimeClassName": "kata", "containers": [container("1")]},
            context(runtime_classes=KATA),
            {"cpu": 1250, "memory": 160 * Mi},
            "",
            id="a RuntimeClass's fixed overhead counts when the pod declares none [handlePodOverhead]",
        ),
        pytest.param(
            {"runtimeClassName": "kata", "overhead": {"cpu": "100m"}, "containers": [container("1")]},
            context(runtime_classes=KATA),
            {"cpu": 1100},
            "",
            id="the pod's own overhead wins over its RuntimeClass's",
        ),
        pytest.param(
            {"runtimeClassName": "gone", "containers": [container("1")]},
            context(runtime_classes=KATA),
            {"cpu": 1000},
            "",
            id="an unknown RuntimeClass adds nothing",
        ),
        pytest.param(
            {"containers": [container(memory="128Mi")]},
            context(limit_ranges=[CONTAINER_RANGE]),
            {"cpu": 500, "memory": 128 * Mi},
            "",
            id="LimitRange defaultRequest fills a missing request [handlePodLimitRange]",
        ),
        pytest.param(
            {"containers": [container()]},
            context(limit_ranges=[{"type": "Container", "default": {"cpu": "2", "memory": "1Gi"}}]),
            {"cpu": 2000, "memory": 2**30},
            "",
            id="a LimitRange default limit becomes the request when none is set [limits as requests]",
        ),
        pytest.param(
            {"containers": [container("1", "128Mi")]},
            context(limit_ranges=[{"type": "Container", "defaultRequest": {"cpu": "3"}}, CONTAINER_RANGE]),
            {"cpu": 1000, "memory": 128 * Mi},
            "",
            id="the container's own request wins; of several LimitRanges the first default counts [Summarize]",
        ),
        pytest.param(
            {"containers": [container("1", "128Mi", limits={"cpu": "8"})]},
            context(limit_ranges=[CONTAINER_RANGE]),
            {"cpu": 1000, "memory": 128 * Mi},
            'resources didn\'t satisfy LimitRange constraints: spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu"]: requests must not be above the limitRange max',
            id="a limit above the LimitRange max is inadmissible [ValidateLimitRange]",
        ),
        pytest.param(
            {"containers": [container("1", "32Mi")]},
            context(limit_ranges=[CONTAINER_RANGE]),
            {"cpu": 1000, "memory": 32 * Mi},
            'resources didn\'t satisfy LimitRange constraints: spec.podSets[0].template.spec.containers[0]: Invalid value: ["memory"]: requests must not be below the limitRange min',
            id="a request below the LimitRange min is inadmissible",
        ),
        pytest.param(
            {"containers": [container("3", "128Mi")]},
            context(limit_ranges=[{"type": "Container", "default": {"cpu": "2"}}]),
            {"cpu": 3000, "memory": 128 * Mi},
            'resources validation failed: spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu"]: requests must not exceed its limits',
            id="a default limit below the request makes requests exceed limits",
        ),
        pytest.param(
            {"containers": [container("1"), container("1")]},
            context(limit_ranges=[{"type": "Pod", "max": {"cpu": "1500m"}}]),
            {"cpu": 2000},
            'resources didn\'t satisfy LimitRange constraints: spec.podSets[0].template.spec: Invalid value: ["cpu"]: requests must not be above the limitRange max',
            id="the pod's total above the Pod max is inadmissible",
        ),
        # Kueue's scheduler integration test 'The workload's podSet pod-level resource requests are not valid':
        # pod-level requests (2 CPU over containers' 500m) are what a Pod LimitRange bounds
        pytest.param(
            {
                "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "3"}},
                "containers": [container("500m", limits={"cpu": "500m"})],
            },
            context(limit_ranges=[{"type": "Pod", "max": {"cpu": "1"}}]),
            {"cpu": 2000},
            'resources didn\'t satisfy LimitRange constraints: spec.podSets[0].template.spec: Invalid value: ["cpu"]: requests must not be above the limitRange max',
            id="pod-level requests above the Pod max are inadmissible",
        ),
        pytest.param(
            {
                "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "3"}},
                "containers": [container("500m", limits={"cpu": "500m"})],
            },
            context(limit_ranges=[{"type": "Pod", "min": {"cpu": "3"}}]),
            {"cpu": 2000},
            'resources didn\'t satisfy LimitRange constraints: spec.podSets[0].template.spec: Invalid value: ["cpu"]: requests must not be below the limitRange min',
            id="pod-level requests below the Pod min are inadmissible",
        ),
        pytest.param(
            {
                "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "3"}},
                "containers": [container("500m", limits={"cpu": "500m"})],
            },
            context(limit_ranges=[{"type": "Pod", "min": {"cpu": "1"}, "max": {"cpu": "4"}}]),
            {"cpu": 2000},
            "",
            id="pod-level requests within the Pod LimitRange are admissible",
        ),
    ],
)
def test_adjusted_requests(pod: dict, ctx: workloads.Context, want_requests: dict, want_misconfigured: str) -> None:
    """Kueue pkg/workload/resources.go AdjustResources then the admissibility checks."""
    pod_set = the_pod_set(jobs.job_facts(job(pod=pod), context=ctx))
    assert (pod_set.requests, pod_set.misconfigured) == (want_requests, want_misconfigured)


def test_provisioning_request_annotations_are_copied_to_the_workload() -> None:
    """The Job's ``provreq.kueue.x-k8s.io/`` annotations become the Workload's (the parameters of its
    ProvisioningRequests, Kueue's FilterProvReqAnnotations); other annotations are not copied."""
    manifest = job(annotations={"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600", "team": "a"})
    wl = workload_of(jobs.job_facts(manifest))
    assert wl.metadata.annotations == {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600"}
    assert workload_of(jobs.job_facts(job())).metadata.annotations == {}


def test_label_keys_to_copy_are_copied_once_when_the_workload_is_made() -> None:
    """job_controller_test.go "Should reconcile workload and job for all jobs" (the manager runs with
    ``WithLabelKeysToCopy("toCopyKey")``): the Workload gets ``toCopyKey`` and not ``doNotCopyKey``, and keeps the
    value it got when the Job's label changes later (utils.go NewWorkload copies into a new Workload only)."""
    ctx = context(label_keys_to_copy=frozenset({"toCopyKey"}))
    labels = {"toCopyKey": "toCopyValue", "doNotCopyKey": "doNotCopyValue"}
    first = workload_of(jobs.job_facts(job(labels=labels), context=ctx))
    assert first.metadata.labels == {"toCopyKey": "toCopyValue", workloads.JOB_UID_LABEL: "uid-1"}
    changed = job(labels={**labels, "toCopyKey": "updatedValue"})
    later = workload_of(jobs.job_facts(changed, context=dataclasses.replace(ctx, previous=first)))
    assert later.metadata.labels == first.metadata.labels


def test_custom_metric_label_sources_are_copied_to_the_workload() -> None:
    """job_controller_test.go Describe "Job controller with CustomMetricLabels": the Workload gets the Job's label
    ``job-label`` and annotation ``job-annotation`` (the sources of the customLabels entries of sourceKind
    Workload), not ``dont-copy-label`` nor ``dont-copy-annotation``."""
    ctx = context(label_keys_to_copy=frozenset({"job-label"}), annotations_to_copy=frozenset({"job-annotation"}))
    manifest = job(
        labels={"job-label": "label-value", "dont-copy-label": "ignored"},
        annotations={"job-annotation": "annotation-value", "dont-copy-annotation": "ignored"},
    )
    wl = workload_of(jobs.job_facts(manifest, context=ctx))
    assert wl.metadata.labels == {"job-label": "label-value", workloads.JOB_UID_LABEL: "uid-1"}
    assert wl.metadata.annotations == {"job-annotation": "annotation-value"}
