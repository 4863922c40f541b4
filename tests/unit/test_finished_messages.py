"""The message of a finished job's WorkloadFinished -- the message of its Workload's Finished condition -- is the
one each kind's Finished returns in Kueue (pkg/controller/jobs/*/..._controller.go, read by jobframework
reconciler.go into workloadfinish.Finish), for Kueue's sample of every kind that finishes:

- Job, JobSet, the Kubeflow jobs, MPIJob, TrainJob: the message of the True Complete / Completed / Succeeded /
  Failed condition, as it is;
- RayJob: ``status.message``; SparkApplication: ``status.applicationState.errorMessage``; a single Pod:
  ``status.message``;
- AppWrapper: Kueue's own texts, "AppWrapper finished successfully" and "AppWrapper failed".

So a job that finished without a message gives a Workload finished with an empty message, as in Kueue. Before,
the watcher made one up: "RayJob finished" (any kind's "<Kind> finished", or "failed"), "Job finished
successfully" / "Job failed", "JobSet completed" / "JobSet failed".
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_es.events import types
from kueue_es.jobframework import integrations, jobs, pods, workloads
from tests.kube import examples

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "crds" / "samples"


def _sample(relative: str) -> dict[str, Any]:
    """The first job of one of Kueue's example files (not a ConfigMap beside it), named and given a UID as the API
    server would."""
    [doc] = [d for d in examples.load(relative) if d.get("kind") not in ("ConfigMap", "ClusterQueue", "LocalQueue")]
    doc = copy.deepcopy(doc)
    meta = doc["metadata"]
    meta.setdefault("name", str(meta.get("generateName", "job-")) + "abcde")
    meta.setdefault("namespace", "default")
    meta["uid"] = "uid-1"
    return doc


def _trainjob() -> dict[str, Any]:
    doc = yaml.safe_load((SAMPLES / "trainjob-pytorch-distributed.yaml").read_text())
    doc["metadata"].update(namespace="default", uid="uid-1")
    doc["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "user-queue"
    return doc


def _pod() -> dict[str, Any]:
    [doc] = examples.load("pods-kueue/kueue-pod.yaml")
    doc["metadata"].update(name="kueue-sleep", namespace="default", uid="uid-1")
    doc["metadata"]["labels"][workloads.MANAGED_LABEL] = "true"  # Kueue's pod webhook put it on at creation
    return doc


def _condition(kind: str) -> Callable[[str], dict[str, Any]]:
    def status(message: str) -> dict[str, Any]:
        return {"conditions": [{"type": kind, "status": "True", "reason": "Done", "message": message}]}

    return status


def _rayjob(message: str) -> dict[str, Any]:
    return {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": message}


def _spark(message: str) -> dict[str, Any]:
    return {"applicationState": {"state": "FAILED", "errorMessage": message}}


def _pod_status(message: str) -> dict[str, Any]:
    return {"phase": "Failed", "message": message}


def _appwrapper(_: str) -> dict[str, Any]:
    return {"phase": "Succeeded"}


def _facts(kind: str, job: dict[str, Any]) -> types.Fact | None:
    if kind == "Job":
        return jobs.job_facts(job)
    if kind == "Pod":
        return pods.pod_facts(job)
    return integrations.facts(integrations.registry()[kind], job)


#: (kind, the job, its finished status given a message, the WorkloadFinished message Kueue gives: None for the
#: job's own)
CASES: list[tuple[str, Callable[[], dict[str, Any]], Callable[[str], dict[str, Any]], str | None]] = [
    ("Job", lambda: _sample("jobs/sample-job.yaml"), _condition("Complete"), None),
    ("Job", lambda: _sample("jobs/sample-job.yaml"), _condition("Failed"), None),
    ("JobSet", lambda: _sample("jobs/sample-jobset.yaml"), _condition("Completed"), None),
    ("JobSet", lambda: _sample("jobs/sample-jobset.yaml"), _condition("Failed"), None),
    ("PyTorchJob", lambda: _sample("jobs/sample-pytorchjob.yaml"), _condition("Succeeded"), None),
    ("TFJob", lambda: _sample("jobs/sample-tfjob.yaml"), _condition("Succeeded"), None),
    ("XGBoostJob", lambda: _sample("jobs/sample-xgboostjob.yaml"), _condition("Failed"), None),
    ("PaddleJob", lambda: _sample("jobs/sample-paddlejob.yaml"), _condition("Succeeded"), None),
    ("JAXJob", lambda: _sample("jobs/sample-jaxjob.yaml"), _condition("Succeeded"), None),
    ("MPIJob", lambda: _sample("jobs/sample-mpijob.yaml"), _condition("Succeeded"), None),
    ("TrainJob", _trainjob, _condition("Complete"), None),
    ("RayJob", lambda: _sample("jobs/ray-job-sample.yaml"), _rayjob, None),
    ("SparkApplication", lambda: _sample("jobs/sample-sparkapplication.yaml"), _spark, None),
    ("Pod", _pod, _pod_status, None),
    ("AppWrapper", lambda: _sample("appwrapper/pytorch-sample.yaml"), _appwrapper, "AppWrapper finished successfully"),
]


@pytest.mark.parametrize("message", ["", "the job's own message"])
@pytest.mark.parametrize(("kind", "job", "status", "kueues"), CASES, ids=[f"{c[0]}-{c[2](' ')!s:.40}" for c in CASES])
def test_a_finished_jobs_workload_message_is_kueues(
    kind: str,
    job: Callable[[], dict[str, Any]],
    status: Callable[[str], dict[str, Any]],
    kueues: str | None,
    message: str,
) -> None:
    finished = {**job(), "status": status(message)}
    fact = _facts(kind, finished)
    assert isinstance(fact, types.WorkloadFinished), fact
    assert fact.message == (message if kueues is None else kueues)


def test_an_appwrapper_that_failed_is_kueues_failed_appwrapper() -> None:
    """appwrapper_controller.go Finished: phase Failed, its resources deleted (ResourcesDeployed not True)."""
    failed = {**_sample("appwrapper/pytorch-sample.yaml"), "status": {"phase": "Failed"}}
    fact = integrations.facts(integrations.registry()["AppWrapper"], failed)
    assert isinstance(fact, types.WorkloadFinished)
    assert (fact.succeeded, fact.message) == (False, "AppWrapper failed")
