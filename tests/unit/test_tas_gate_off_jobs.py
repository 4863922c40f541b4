"""A job's pod sets ask for no topology with the gate TopologyAwareScheduling off (Kueue PR #4742,
"configure PodSetTopologyRequests only when TAS enabled": jobs/job/job_controller.go PodSets and the
other integrations' build the PodSetTopologyRequest only with the gate on; job_controller_test.go
TestPodSets "without required and preferred topology annotation if TAS is disabled")."""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import manager_config, manifests, models
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework import integrations, jobs, workloads
from kueue_es.services.watcher.service import ApiReader, Watcher

REQUIRED = {"kueue.x-k8s.io/podset-required-topology": "cloud.com/block"}
PREFERRED = {"kueue.x-k8s.io/podset-preferred-topology": "cloud.com/rack"}
OFF = workloads.Context(topology_aware_scheduling=False)


def template(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"annotations": dict(annotations)},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }


def job(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "job", "namespace": "default", "uid": "job-uid", "labels": {workloads.QUEUE_LABEL: "lq"}},
        "spec": {"parallelism": 2, "template": template(annotations)},
    }


def jobset(annotations: dict[str, str]) -> dict[str, Any]:
    replicated = {
        "name": "w",
        "replicas": 1,
        "template": {"spec": {"parallelism": 2, "template": template(annotations)}},
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "default", "uid": "js-uid", "labels": {workloads.QUEUE_LABEL: "lq"}},
        "spec": {"replicatedJobs": [replicated]},
    }


@pytest.mark.parametrize("annotations", [REQUIRED, PREFERRED])
def test_a_job_asks_for_no_topology_with_the_gate_off(annotations: dict[str, str]) -> None:
    on = jobs.job_to_workload(job(annotations))
    assert on.spec.pod_sets[0].topology_request is not None  # the gate on (default): what the annotations ask
    [pod_set] = jobs.job_to_workload(job(annotations), context=OFF).spec.pod_sets
    assert pod_set.topology_request is None


def test_an_integrations_pod_sets_ask_for_no_topology_with_the_gate_off() -> None:
    integration = integrations.by_kind("JobSet")
    assert integration is not None
    on = integrations.to_workload(integration, jobset(REQUIRED))
    assert [ps.topology_request is not None for ps in on.spec.pod_sets] == [True]
    off = integrations.to_workload(integration, jobset(REQUIRED), context=OFF)
    assert [ps.topology_request for ps in off.spec.pod_sets] == [None]


def test_the_annotations_are_not_checked_with_the_gate_off() -> None:
    """Kueue's job webhook checks them only with the gate on (job_webhook.go validateTopologyRequest)."""
    both = {**REQUIRED, **PREFERRED}
    with pytest.raises(manifests.ManifestError, match="must not be set together"):
        jobs.job_to_workload(job(both))
    [pod_set] = jobs.job_to_workload(job(both), context=OFF).spec.pod_sets
    assert pod_set.topology_request is None


def test_the_watcher_takes_the_gate_from_the_configuration() -> None:
    off = models.Configuration(feature_gates={"TopologyAwareScheduling": False})
    reader = ApiReader(None)  # type: ignore[arg-type]  # never read: only the conversion inputs are looked at
    watcher = Watcher(bus=MemoryBus(), api=reader, config=manager_config.ManagerConfig(configuration=off))
    assert watcher.inputs.context(("default", "wl"), previous=None).topology_aware_scheduling is False
    default = Watcher(bus=MemoryBus(), api=reader)
    assert default.inputs.context(("default", "wl"), previous=None).topology_aware_scheduling is True
