"""Every quantity of a Workload object's pod templates is written as Kueue's typed client writes it.

Kueue builds a Workload's pod sets from the job's typed pod templates (corev1.PodTemplateSpec), so each
``resource.Quantity`` goes out as its String: ``"1"`` for a JobSet's ``cpu: 1``, ``"500m"`` for ``0.5``,
``"1Gi"`` for ``1024Mi``. kube-apiserver stores a custom resource (JobSet, the Kubeflow jobs, RayJob,
LeaderWorkerSet, ...) as it was sent, so a template copied from one kept the manifest's raw numbers (a new
user's trial: ``{"requests":{"cpu":1,...}}`` on a JobSet's Workload).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from kueue_es.events import quantities
from kueue_es.jobframework import integrations
from kueue_es.projections.cluster import ClusterState, WorkloadState
from kueue_es.services.dispatcher import status
from tests.kube import examples

#: Kueue's examples of custom-resource jobs, whose templates a typed client would canonicalize.
CUSTOM_JOBS = (
    "jobs/sample-jobset.yaml",
    "jobs/sample-pytorchjob.yaml",
    "jobs/sample-tfjob.yaml",
    "jobs/sample-mpijob.yaml",
    "jobs/sample-paddlejob.yaml",
    "jobs/sample-xgboostjob.yaml",
    "jobs/sample-jaxjob.yaml",
    "jobs/ray-job-sample.yaml",
    "serving-workloads/sample-leaderworkerset.yaml",
)


def _quantities_in(spec: Any) -> Iterator[Any]:
    """Every value of a pod spec that is a quantity (containers' requests and limits, overhead, ...)."""
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            for part in ("requests", "limits"):
                yield from ((container.get("resources") or {}).get(part) or {}).values()
    yield from (spec.get("overhead") or {}).values()


def _raw_numbers(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with every container's cpu requests and limits a bare number, as a manifest may write it, and its
    memory ``1024Mi`` (``1Gi`` as a Quantity writes it)."""
    out = copy.deepcopy(doc)

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for part in ("requests", "limits"):
                amounts = (value.get("resources") or {}).get(part) if "image" in value else None
                if isinstance(amounts, dict):
                    amounts.update(cpu=0.5, memory="1024Mi")
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(out)
    return out


@pytest.mark.parametrize("relative", CUSTOM_JOBS)
def test_a_custom_jobs_workload_templates_carry_quantity_strings(relative: str) -> None:
    [doc] = [d for d in examples.load(relative) if integrations.by_kind(d["kind"]) is not None]
    doc = _raw_numbers(doc)
    doc["metadata"].setdefault("name", "sample")
    doc["metadata"].update(namespace="default", uid="uid-sample")
    doc["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "user-queue"
    integration = integrations.by_kind(doc["kind"])
    assert integration is not None
    workload = integrations.to_workload(integration, doc)
    templates = integrations.job_pod_templates(doc["apiVersion"], doc["kind"], doc)
    assert templates, relative
    written = status.workload_object(
        WorkloadState(workload=workload, observed_seq=1), ClusterState(), templates=templates
    )
    values = [v for ps in written["spec"]["podSets"] for v in _quantities_in(ps["template"]["spec"])]
    assert values and all(isinstance(v, str) for v in values), values
    assert {"500m", "1Gi"} <= set(values), values
    # the job's own templates are not touched
    assert any(v == 0.5 for t in templates.values() for v in _quantities_in(t.get("spec") or {})), (
        "the job's template was changed"
    )


def test_every_quantity_of_a_pod_spec_is_canonical_and_the_rest_is_left_alone() -> None:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "resources": {"requests": {"cpu": 1, "memory": "1024Mi"}, "limits": {"cpu": "1000m"}}}
        ],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": 0.25}}}],
        "resources": {"limits": {"memory": 2147483648}},
        "overhead": {"cpu": 0.1},
        "volumes": [
            {"name": "scratch", "emptyDir": {"sizeLimit": 1073741824}},
            {
                "name": "claim",
                "ephemeral": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "1024Gi"}}}}},
            },
            {"name": "cfg", "configMap": {"name": "x"}},
        ],
        "nodeSelector": {"cpu": "1"},
        "terminationGracePeriodSeconds": 30,
    }
    quantities.canonical_pod_spec(spec)
    assert spec["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1"}}
    assert spec["initContainers"][0]["resources"] == {"requests": {"cpu": "250m"}}
    assert spec["resources"] == {"limits": {"memory": "2147483648"}}
    assert spec["overhead"] == {"cpu": "100m"}
    assert spec["volumes"][0]["emptyDir"] == {"sizeLimit": "1073741824"}
    assert spec["volumes"][1]["ephemeral"]["volumeClaimTemplate"]["spec"]["resources"] == {
        "requests": {"storage": "1Ti"}
    }
    assert spec["volumes"][2] == {"name": "cfg", "configMap": {"name": "x"}}
    assert spec["nodeSelector"] == {"cpu": "1"} and spec["terminationGracePeriodSeconds"] == 30
    again = copy.deepcopy(spec)
    quantities.canonical_pod_spec(again)
    assert again == spec  # a fixed point
    odd = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots", "gpu": True}}}]}
    quantities.canonical_pod_spec(odd)
    assert odd["containers"][0]["resources"]["requests"] == {"cpu": "lots", "gpu": True}
