"""Kubeflow Trainer v1 jobs to Workloads (jobframework/integrations/kubeflow.py), pure.

Kueue's samples (jobs/sample-*job.yaml) give the pod sets Kueue's kubeflowjob adapter gives them: one per
replica type present, in the kind's fixed order, lower-cased, ``replicas`` pods (1 when absent); the
PriorityClass of ``runPolicy.schedulingPolicy`` wins over the templates'; bad input names the field.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.jobframework import integrations, workloads
from tests.kube import examples


def sample(name: str) -> dict[str, Any]:
    [doc] = examples.load(f"jobs/{name}.yaml")
    doc["metadata"].update(uid="uid-1", creationTimestamp="2026-01-01T00:00:00Z")
    return doc


def converted(job: dict[str, Any], context: workloads.Context | None = None) -> types.Fact | None:
    return integrations.facts(integrations.registry()[job["kind"]], job, context=context)


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("sample-pytorchjob", [("master", 1), ("worker", 1)]),
        ("sample-tfjob", [("ps", 1), ("worker", 2)]),
        ("sample-xgboostjob", [("master", 1), ("worker", 2)]),
        ("sample-paddlejob", [("worker", 2)]),
        ("sample-jaxjob", [("worker", 2)]),
    ],
)
def test_kueue_samples(name: str, want: list[tuple[str, int]]) -> None:
    job = sample(name)
    fact = converted(job)
    assert isinstance(fact, types.WorkloadObserved), fact
    wl = fact.workload
    assert [(ps.name, ps.count) for ps in wl.spec.pod_sets] == want
    assert wl.spec.queue_name == "user-queue"
    assert wl.metadata.name.startswith(f"{job['kind'].lower()}-{job['metadata']['name']}-")
    assert (wl.owner.api_version, wl.owner.kind) == ("kubeflow.org/v1", job["kind"])  # type: ignore[union-attr]


def test_replicas_default_to_one_and_the_run_policy_priority_class_wins() -> None:
    job = sample("sample-pytorchjob")
    del job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["priorityClassName"] = "low"
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": "high"}}
    classes = {
        "low": workloads.PriorityClass(name="low", value=1),
        "high": workloads.PriorityClass(name="high", value=100),
    }
    fact = converted(job, workloads.Context(priority_classes=classes))
    assert isinstance(fact, types.WorkloadObserved)
    assert [ps.count for ps in fact.workload.spec.pod_sets] == [1, 1]
    assert (fact.workload.spec.priority_class_ref.name, fact.workload.spec.priority) == ("high", 100)  # type: ignore[union-attr]
    missing = converted(job)
    assert isinstance(missing, types.ObjectRejected)
    assert missing.field == "spec.runPolicy.schedulingPolicy.priorityClass"


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (lambda s: s.update(pytorchReplicaSpecs="x"), "spec.pytorchReplicaSpecs", "mapping"),
        (lambda s: s["pytorchReplicaSpecs"].update(Launcher={}), "spec.pytorchReplicaSpecs[Launcher]", "replica type"),
        (
            lambda s: s["pytorchReplicaSpecs"]["Worker"].update(replicas="two"),
            "spec.pytorchReplicaSpecs[Worker].replicas",
            "'two'",
        ),
        (lambda s: s.update(pytorchReplicaSpecs={}), "spec.pytorchReplicaSpecs", "at least one"),
    ],
)
def test_bad_jobs_are_rejected_naming_the_field(change: Any, field: str, problem: str) -> None:
    job = sample("sample-pytorchjob")
    change(job["spec"])
    fact = converted(job)
    assert isinstance(fact, types.ObjectRejected), fact
    assert (fact.kind, fact.name, fact.field) == ("PyTorchJob", "pytorch-simple", field)
    assert problem in fact.problem


def test_finished_and_status_readers() -> None:
    integration = integrations.registry()["PyTorchJob"]
    job = sample("sample-pytorchjob")
    running = copy.deepcopy(job)
    running["status"] = {
        "replicaStatuses": {"Master": {"active": 1}},
        "conditions": [{"type": "Running", "status": "True"}],
    }
    assert integration.active(running) and integration.pods_ready(running)
    assert integration.finished(running) is None
    failed = copy.deepcopy(job)
    failed["status"] = {"conditions": [{"type": "Failed", "status": "True", "message": "oom"}]}
    fact = converted(failed)
    assert isinstance(fact, types.WorkloadFinished)
    assert (fact.succeeded, fact.reason, fact.message) == (False, "Failed", "oom")
    assert not integration.active(failed) and not integration.pods_ready(failed)
