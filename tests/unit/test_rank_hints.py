"""Every job's Workload pod set carries its integration's rank hints with the gate TopologyAwareScheduling on,
whether or not its template asks for a topology, as Kueue writes them (jobframework/tas.go Build returns nil only
when there are no hints either; job_controller.go PodSets, pod_controller.go constructPodSet,
jobset_controller.go, statefulset_reconciler.go). Such a request asks for no topology: the admitter treats the
pod set as one with no request (tas_requests.requests_tas), and two workloads share their requests only when
their hints are the same."""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import models, tas_requests
from kueue_es.jobframework import integrations, jobs, pods, workloads
from kueue_es.scheduling import queues
from kueue_es.services.dispatcher import status

OFF = workloads.Context(topology_aware_scheduling=False)
QUEUE = {workloads.QUEUE_LABEL: "lq"}


def template(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"annotations": dict(annotations or {})},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }


def job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job", "namespace": "default", "uid": "job-uid", "labels": dict(QUEUE)},
        "spec": {"parallelism": 2, "template": template()},
    }


def jobset() -> dict[str, Any]:
    replicated = {"name": "w", "replicas": 3, "template": {"spec": {"parallelism": 2, "template": template()}}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "default", "uid": "js-uid", "labels": dict(QUEUE)},
        "spec": {"replicatedJobs": [replicated]},
    }


def statefulset() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "sts", "namespace": "default", "uid": "sts-uid", "labels": dict(QUEUE)},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": template()},
    }


def pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "p-uid", "labels": dict(QUEUE)},
        "spec": template()["spec"],
    }


def test_a_jobs_pod_set_carries_the_completion_index_label_and_asks_for_no_topology() -> None:
    [pod_set] = jobs.job_to_workload(job()).spec.pod_sets
    assert pod_set.topology_request == models.PodSetTopologyRequest(
        pod_index_label="batch.kubernetes.io/job-completion-index"
    )
    assert not tas_requests.requests_tas(pod_set.topology_request)
    # as the Workload object shows it (kubectl get workload -o yaml)
    assert status._pod_set(pod_set)["topologyRequest"] == {"podIndexLabel": "batch.kubernetes.io/job-completion-index"}


def test_an_explicit_request_keeps_its_level_and_gets_the_hint() -> None:
    explicit = job()
    explicit["spec"]["template"] = template({"kueue.x-k8s.io/podset-required-topology": "cloud.com/rack"})
    [pod_set] = jobs.job_to_workload(explicit).spec.pod_sets
    assert pod_set.topology_request == models.PodSetTopologyRequest(
        required="cloud.com/rack", pod_index_label="batch.kubernetes.io/job-completion-index"
    )


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (
            jobset(),
            models.PodSetTopologyRequest(
                pod_index_label="batch.kubernetes.io/job-completion-index",
                sub_group_index_label="jobset.sigs.k8s.io/job-index",
                sub_group_count=3,
            ),
        ),
        (statefulset(), models.PodSetTopologyRequest(pod_index_label="apps.kubernetes.io/pod-index")),
    ],
    ids=["JobSet", "StatefulSet"],
)
def test_an_integrations_pod_sets_carry_its_hints(manifest: dict[str, Any], expected: Any) -> None:
    integration = integrations.by_kind(manifest["kind"])
    assert integration is not None
    workload = integrations.to_workload(integration, manifest)
    assert [ps.topology_request for ps in workload.spec.pod_sets] == [expected]
    off = integrations.to_workload(integration, manifest, context=OFF)
    assert [ps.topology_request for ps in off.spec.pod_sets] == [None]


def test_a_pods_pod_set_carries_the_pod_group_index_label_and_none_with_the_gate_off() -> None:
    [pod_set] = pods.pod_workload(pod(), context=workloads.Context()).spec.pod_sets
    assert pod_set.topology_request == models.PodSetTopologyRequest(
        pod_index_label="kueue.x-k8s.io/pod-group-pod-index"
    )
    [off] = pods.pod_workload(pod(), context=OFF).spec.pod_sets
    assert off.topology_request is None


def test_a_jobs_pod_set_carries_no_hint_with_the_gate_off() -> None:
    [pod_set] = jobs.job_to_workload(job(), context=OFF).spec.pod_sets
    assert pod_set.topology_request is None
    assert "topologyRequest" not in status._pod_set(pod_set)


def test_requests_are_shared_only_between_pod_sets_with_the_same_hints() -> None:
    """The admitter's cache of pod set requests (queues._shared) keys on the hints: a Job's and a pod's pod set
    asking for the same resources keep their own requests, two Jobs' share theirs."""
    [job_set] = jobs.job_to_workload(job()).spec.pod_sets
    [pod_set] = pods.pod_workload(pod(), context=workloads.Context()).spec.pod_sets
    assert queues._rank_hints(job_set.topology_request) != queues._rank_hints(pod_set.topology_request)
    assert queues._rank_hints(None) is None
    shared: dict[tuple[object, ...], list[Any]] = {}
    first = [
        queues.PodSetRequest(name="main", count=1, requests={"cpu": 1000}, topology_request=job_set.topology_request)
    ]
    again = [
        queues.PodSetRequest(name="main", count=1, requests={"cpu": 1000}, topology_request=job_set.topology_request)
    ]
    other = [
        queues.PodSetRequest(name="main", count=1, requests={"cpu": 1000}, topology_request=pod_set.topology_request)
    ]
    assert queues._shared(first, shared) is first
    assert queues._shared(again, shared) is first
    assert queues._shared(other, shared) is other
