"""Property-based tests (Hypothesis) of every registered job integration: bad input is a rejection, never a crash.

Every registered kind needs a shape in :data:`SHAPES` (the test fails, naming the kind, until it has one).

Whatever a user or a controller writes into a job of a registered kind (any JSON shape where the spec,
its replica specs, counts, templates or status should be), the conversion gives None, a fact, or an
ObjectRejected naming the object -- never another exception, which would stop the watcher's handling of
the object; the status readers (finished, active, PodsReady, reclaimable pods, pod label selector)
answer for any status; and a start or stop of a job that converts gives a merge patch that, applied,
yields the job with its suspend field set. Run over the registry, so a new kind is covered by adding it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueue_es.events import manifests, types
from kueue_es.jobframework import integrations, jobs, workloads

KINDS = sorted(integrations.registry())

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 5) | st.sampled_from(["", "1", "x", "2Gi", "Worker", "True"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=12,
)


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 applied to ``target`` (a copy)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _mutations(job: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``job`` with one value somewhere in it (or in a new place) replaced by arbitrary JSON."""
    paths: list[tuple[Any, ...]] = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(value, dict):
            for key, child in value.items():
                walk(child, (*path, key))
        elif isinstance(value, list):
            for index, child in enumerate(value):
                walk(child, (*path, index))

    walk(job, ())
    candidates = [p for p in paths if p and p[0] in ("spec", "status")] + [("status",)]

    @st.composite
    def mutated(draw: st.DrawFn) -> dict[str, Any]:
        out = copy.deepcopy(job)
        path = draw(st.sampled_from(candidates))
        value = draw(JSON)
        target: Any = out
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
        return out

    return mutated()


def _sample(kind: str) -> dict[str, Any]:
    """A small valid job of ``kind``: the registry has no samples, so build one from the kind's first pod set
    template path, two replicas of a 1-cpu container where a count is read."""
    integration = integrations.registry()[kind]
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    template = {"spec": {"containers": [container]}}
    base = {
        "apiVersion": integration.api_version,
        "kind": kind,
        "metadata": {
            "name": "j",
            "namespace": "default",
            "uid": "uid-1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {workloads.QUEUE_LABEL: "user-queue"},
        },
        "spec": {},
    }
    assert kind in SHAPES, f"no sample shape for {kind}: add one to SHAPES"
    for candidate in SHAPES[kind]:
        job = copy.deepcopy(base)
        job["spec"] = candidate(template)
        fact = integrations.facts(integration, job, context=CONTEXTS.get(kind))
        if integration.suspend_path is None or isinstance(fact, types.WorkloadObserved):
            return job
    raise AssertionError(f"no shape in SHAPES gives {kind} a workload")


def _replicas(field: str, *types_: str) -> Any:
    return lambda template: {field: {t: {"replicas": 2, "template": template} for t in types_}}


SHAPES: dict[str, list[Any]] = {
    "JobSet": [lambda t: {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {"template": t}}}]}],
    "PyTorchJob": [_replicas("pytorchReplicaSpecs", "Master", "Worker")],
    "TFJob": [_replicas("tfReplicaSpecs", "PS", "Worker")],
    "XGBoostJob": [_replicas("xgbReplicaSpecs", "Master", "Worker")],
    "PaddleJob": [_replicas("paddleReplicaSpecs", "Worker")],
    "JAXJob": [_replicas("jaxReplicaSpecs", "Worker")],
    "MPIJob": [_replicas("mpiReplicaSpecs", "Launcher", "Worker")],
    # the template is the runtime's (CONTEXTS): a TrainJob names it and sets the node count
    "TrainJob": [
        lambda t: {"runtimeRef": {"name": "rt", "kind": "ClusterTrainingRuntime"}, "trainer": {"numNodes": 2}}
    ],
    "Deployment": [lambda t: {"replicas": 2, "template": t}],
    "StatefulSet": [lambda t: {"replicas": 2, "template": t}],
    "LeaderWorkerSet": [
        lambda t: {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "leaderTemplate": t, "workerTemplate": t}}
    ],
    "AppWrapper": [
        lambda t: {
            "components": [
                {"podSets": [{"path": "template.spec.template", "replicas": 2}], "template": {"spec": {"template": t}}},
                {"template": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": 2, "template": t}}},
            ]
        }
    ],
    "SparkApplication": [
        lambda t: {
            "mode": "cluster",
            "driver": {"coreRequest": "1", "memory": "1g"},
            "executor": {"instances": 2, "coreRequest": "1", "memory": "1g", "tolerations": []},
        }
    ],
    "RayCluster": [lambda t: _ray_cluster(t)],
    "RayJob": [lambda t: {"shutdownAfterJobFinishes": True, "rayClusterSpec": _ray_cluster(t)}],
    "RayService": [lambda t: {"rayClusterConfig": _ray_cluster(t)}],
}


def _ray_cluster(template: Any) -> dict[str, Any]:
    return {
        "headGroupSpec": {"template": template},
        "workerGroupSpecs": [{"groupName": "w", "replicas": 2, "numOfHosts": 1, "template": template}],
    }


def _runtime(template: dict[str, Any]) -> dict[str, Any]:
    """A ClusterTrainingRuntime ``rt`` whose one replicated job, the trainer step, runs ``template``."""
    step = {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}}}
    replicated = [{"name": "node", "template": {**step, "spec": {"template": template}}}]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "rt"},
        "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": {"replicatedJobs": replicated}}},
    }


#: What a kind's conversion reads besides the job (Integration.inputs), when it reads anything.
CONTEXTS: dict[str, workloads.Context] = {
    "TrainJob": workloads.Context(
        objects={
            "ClusterTrainingRuntime": {
                ("", "rt"): _runtime(
                    {"spec": {"containers": [{"name": "node", "resources": {"requests": {"cpu": "1"}}}]}}
                )
            }
        }
    ),
}


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_job_of_a_registered_kind_converts_or_is_rejected(kind: str, data: st.DataObject) -> None:
    integration = integrations.registry()[kind]
    job = data.draw(_mutations(_sample(kind)))
    if integration.on_create is not None:
        integration.on_create(copy.deepcopy(job))  # the webhook's defaulting takes any shape too
    context = CONTEXTS.get(kind, workloads.Context())
    fact = integrations.facts(integration, job, context=context)
    assert fact is None or isinstance(fact, types.WorkloadObserved | types.WorkloadFinished | types.ObjectRejected), (
        fact
    )
    if isinstance(fact, types.ObjectRejected):
        assert (fact.kind, fact.name) == (kind, "j")
    integration.active(job)
    integrations.pods_ready(integration, job, context=context)
    integration.finished(job)
    if integration.reclaimable_pods is not None:
        integration.reclaimable_pods(job)
    if integration.pod_label_selector is not None:
        assert isinstance(integration.pod_label_selector(job), str)
    if isinstance(fact, types.WorkloadObserved) and integration.suspend_path is not None:
        for suspend in (True, False):
            try:
                desired = integrations.changed_job(integration, job, templates={}, suspend=suspend)
            except manifests.ManifestError:
                continue
            applied = _merge(job, integrations.merge_patch(job, desired))
            assert applied == desired
            assert integrations.get_at(applied, integration.suspend_path) is suspend


def _job() -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "default",
            "uid": "uid-1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {workloads.QUEUE_LABEL: "user-queue"},
            "annotations": {jobs.MIN_PARALLELISM_ANNOTATION: "1"},
        },
        "spec": {"parallelism": 2, "completions": 4, "template": {"spec": {"containers": [container]}}},
        "status": {"conditions": [{"type": "Complete", "status": "False", "lastTransitionTime": "x"}]},
    }


@settings(max_examples=150, deadline=None)
@given(job=_mutations(_job()))
def test_any_batch_job_converts_or_is_rejected(job: dict[str, Any]) -> None:
    """The same for batch/v1 Jobs, which keep their own converter (jobframework/jobs.py)."""
    fact = jobs.job_facts(job, context=workloads.Context())
    assert fact is None or isinstance(fact, types.WorkloadObserved | types.WorkloadFinished | types.ObjectRejected)
    jobs.stopped_fact(job)
