"""Kueue's webhooks of an integration the configuration leaves out are no-ops (setup.go WithNoopWebhook).

`kueue-es demo --config FILE` with `integrations.frameworks: [batch/job]` watches only Jobs, so its emulated
API server must not suspend a queue-labelled JobSet either: before, the JobSet was stored suspended and no
Workload was ever made for it (found by a fresh-user check: a JobSet stuck for ever with no message). Kueue
leaves such a job alone and it runs unmanaged.
"""

from __future__ import annotations

from typing import Any

from kueue_es.services.kube import client, resources
from kueue_es.sim import emulator

QUEUE = {"kueue.x-k8s.io/queue-name": "user-queue"}


def pod_template() -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}


def jobset() -> dict[str, Any]:
    template = pod_template()
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "default", "labels": dict(QUEUE)},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": template}}}]},
    }


def batch_job() -> dict[str, Any]:
    metadata = {"name": "j", "namespace": "default", "labels": dict(QUEUE)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {"template": pod_template()}}


async def created(managed: frozenset[str] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    async with emulator.serve_emulator(managed_kinds=managed) as served:
        api = await client.make_api_client(server=str(served.url))
        try:
            js = await client.create_object(api, resources.JOBSETS, namespace="default", body=jobset())
            job = await client.create_object(api, resources.JOBS, namespace="default", body=batch_job())
        finally:
            await api.close()
    return js, job


async def test_a_jobset_is_left_alone_when_only_batch_jobs_are_managed() -> None:
    js, job = await created(frozenset({"Job"}))
    assert not js["spec"].get("suspend")  # its integration is off: a no-op webhook
    assert job["spec"]["suspend"] is True  # the Job's still suspends it


async def test_every_integration_is_managed_by_default() -> None:
    js, job = await created(None)
    assert js["spec"]["suspend"] is True and job["spec"]["suspend"] is True
