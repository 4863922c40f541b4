"""Which jobs are children of a job Kueue manages: the walk up their controller owners (jobframework
reconciler.go FindAncestorJobManagedByKueue), fed as the watcher feeds it (ConversionInputs.remember_owner)."""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import models, types
from kueue_es.jobframework import jobs, jobsets, workloads
from kueue_es.services.watcher.inputs import ConversionInputs

QUEUE = "kueue.x-k8s.io/queue-name"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def manifest(
    kind: str, name: str, *, owner: dict[str, Any] | None = None, queue: str | None = "q", namespace: str = "default"
) -> dict[str, Any]:
    """A Job or JobSet ``name`` (UID ``<name>-uid``), controlled by ``owner`` when given."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"{name}-uid"}
    if queue:
        meta["labels"] = {QUEUE: queue}
    if owner is not None:
        owner_meta = owner["metadata"]
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner_meta["name"],
                "uid": owner_meta["uid"],
                "controller": True,
            }
        ]
    pod = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    if kind == "JobSet":
        spec: dict[str, Any] = {
            "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": pod}}}]
        }
        return {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": meta, "spec": spec}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"template": pod}}


def job_fact(job: dict[str, Any], seen: list[dict[str, Any]], **options: Any) -> types.Fact | None:
    """What the watcher publishes for Job ``job`` once it has seen the jobs ``seen`` (``options``: the
    ConversionInputs' manageJobsWithoutQueueName and managedJobsNamespaceSelector)."""
    inputs = ConversionInputs(**options)
    for obj in [*seen, job]:
        inputs.remember_owner(obj["kind"], obj)
    namespace = job["metadata"]["namespace"]
    return jobs.job_facts(job, context=inputs.context((namespace, "wl"), previous=None))


def chain(depth: int, *, queue: str | None = "q") -> list[dict[str, Any]]:
    """Jobs ``j0`` .. ``j<depth>``, each controlled by the one before: the last has ``depth`` ancestors."""
    made = [manifest("Job", "j0", queue=queue)]
    for i in range(1, depth + 1):
        made.append(manifest("Job", f"j{i}", owner=made[-1], queue=queue))
    return made


def test_a_job_whose_jobset_is_not_managed_is_managed_on_its_own() -> None:
    """(a) A queue-labelled Job controlled by a JobSet without the label (manageJobsWithoutQueueName off): the
    JobSet is seen but not managed, so the Job has no managed ancestor and gets its own Workload."""
    jobset = manifest("JobSet", "js", queue=None)
    fact = job_fact(manifest("Job", "j", owner=jobset), [jobset])
    assert isinstance(fact, types.WorkloadObserved)
    assert fact.workload.spec.queue_name == "q"


def test_a_job_of_a_managed_jobset_is_its_child() -> None:
    """(b) The same JobSet with the queue-name label: the Job is part of its workload, none of its own."""
    jobset = manifest("JobSet", "js")
    assert job_fact(manifest("Job", "j", owner=jobset), [jobset]) is None
    # the JobSet itself is the workload
    assert isinstance(jobsets.jobset_facts(jobset), types.WorkloadObserved)


@pytest.mark.parametrize(
    ("jobset_queue", "middle_queue", "child"),
    [
        pytest.param("q", None, True, id="labelled JobSet, unlabelled Job between: a grand-child"),
        pytest.param("q", "q", True, id="both labelled: a grand-child"),
        pytest.param(None, "q", True, id="the labelled Job between is the managed ancestor"),
        pytest.param(None, None, False, id="no managed ancestor: a workload of its own"),
    ],
)
def test_a_grandchild(jobset_queue: str | None, middle_queue: str | None, child: bool) -> None:
    """(c) Job -> Job -> JobSet: the walk goes through an owner that is not managed (Kueue: every known kind,
    managed or not) and stops at none; the last managed owner found is the ancestor."""
    jobset = manifest("JobSet", "js", queue=jobset_queue)
    middle = manifest("Job", "middle", owner=jobset, queue=middle_queue)
    fact = job_fact(manifest("Job", "j", owner=middle), [jobset, middle])
    if child:
        assert fact is None
    else:
        assert isinstance(fact, types.WorkloadObserved)


def test_ten_ancestors_are_walked() -> None:
    """(d) A Job with 10 managed Job ancestors is within Kueue's limit: a child, no Workload, no refusal."""
    made = chain(10)
    assert job_fact(made[-1], made[:-1]) is None


def test_more_than_ten_ancestors_is_job_nesting_too_deep() -> None:
    """(d) 11 ancestors: Kueue stops the walk with ErrManagedOwnersChainLimitReached and records JobNestingTooDeep
    on the Job; it gets no Workload (a refusal here, which keeps one it had) and is not suspended."""
    made = chain(11)
    fact = job_fact(made[-1], made[:-1])
    assert isinstance(fact, types.ObjectRejected)
    assert (fact.kind, fact.namespace, fact.name, fact.field, fact.problem) == (
        "Job",
        "default",
        "j11",
        "metadata.ownerReferences",
        "Terminated search for Kueue-managed Job because ancestor depth exceeded limit of 10",
    )
    # unmanaged owners count too: Kueue walks every owner of a known kind
    unlabelled = chain(11, queue=None)
    last = manifest("Job", "last", owner=unlabelled[-1])
    assert isinstance(job_fact(last, unlabelled), types.ObjectRejected)


def test_job_nesting_comes_after_the_namespace_selector() -> None:
    """(e) Kueue's reconciler ignores a namespace managedJobsNamespaceSelector leaves out before it walks owners:
    no Workload and no refusal there, with manageJobsWithoutQueueName too."""
    selector = models.LabelSelector(
        match_expressions=[
            models.LabelSelectorRequirement(key="kubernetes.io/metadata.name", operator="NotIn", values=["skipped"])
        ]
    )
    made = [manifest("Job", "j0", namespace="skipped", queue=None)]
    for i in range(1, 12):
        made.append(manifest("Job", f"j{i}", owner=made[-1], namespace="skipped", queue=None))
    options = {"manage_jobs_without_queue_name": True, "managed_jobs_namespace_selector": selector}
    assert job_fact(made[-1], made[:-1], **options) is None
    jobset = manifest("JobSet", "js", namespace="skipped", queue=None)
    assert job_fact(manifest("Job", "j", owner=jobset, namespace="skipped"), [jobset], **options) is None
    # selected, the unlabelled JobSet is managed (manageJobsWithoutQueueName): its Job is a child
    jobset = manifest("JobSet", "js", queue=None)
    assert job_fact(manifest("Job", "j", owner=jobset), [jobset], **options) is None


def test_an_owner_reference_not_matching_what_was_seen_ends_the_walk() -> None:
    """Kueue stops at an owner reference whose UID does not match, or whose apiVersion and kind are not the
    integration's: the JobSet seen with that UID is not the ancestor if the reference names another kind or
    the object lives elsewhere."""
    jobset = manifest("JobSet", "js")
    job = manifest("Job", "j", owner=jobset)
    job["metadata"]["ownerReferences"][0]["apiVersion"] = "jobset.x-k8s.io/v1"
    assert isinstance(job_fact(job, [jobset]), types.WorkloadObserved)
    elsewhere = manifest("JobSet", "js", namespace="other")
    assert isinstance(job_fact(manifest("Job", "j", owner=elsewhere), [elsewhere]), types.WorkloadObserved)


def test_an_ownership_cycle_gives_no_workload_and_no_event() -> None:
    """Kueue fails the reconcile with ErrCyclicOwnership (no Event): the job gets nothing."""
    a = manifest("Job", "a")
    b = manifest("Job", "b", owner=a)
    a["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "b", "uid": "b-uid", "controller": True}
    ]
    assert job_fact(b, [a]) is None
    ref = workloads.job_ref(b, kind="Job", api_version="batch/v1")
    inputs = ConversionInputs()
    for obj in (a, b):
        inputs.remember_owner("Job", obj)
    assert workloads.ancestry(ref, inputs.managed_context()) == workloads.Ancestry(cyclic=True)
