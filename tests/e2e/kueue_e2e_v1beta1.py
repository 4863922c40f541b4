"""The steps of Kueue's test/e2e/singlecluster/baseline/e2e_v1beta1_test.go (Describe "Kueue v1beta1"), run by
tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo --keep``.

Kueue's test drives the cluster with its v1beta1 API (apis/kueue/v1beta1, pkg/util/testing/v1beta1): the
ResourceFlavors, ClusterQueue and LocalQueue are created as v1beta1 objects, and the Workload is read as one. Here
the objects are v1beta1 manifests created with kubectl, and every Kueue object the steps read or delete is
addressed as v1beta1 (``kind.v1beta1.kueue.x-k8s.io``), so each write and read goes through the API server's
conversion (kueue_es.events.v1beta1) while kueue-es itself reads and writes v1beta2.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import E2E, JOB_UID_LABEL, Step, condition, is_true, job, namespace

V1BETA1 = "kueue.x-k8s.io/v1beta1"
ON_DEMAND = {"instance-type": "on-demand"}
SPOT = {"instance-type": "spot"}
#: The Kueue kinds the steps read, as v1beta1 (what Kueue's test client, with the v1beta1 scheme, reads).
WORKLOADS = dataclasses.replace(resources.WORKLOADS, version="v1beta1")
CLUSTER_QUEUES = dataclasses.replace(resources.CLUSTER_QUEUES, version="v1beta1")
LOCAL_QUEUES = dataclasses.replace(resources.LOCAL_QUEUES, version="v1beta1")


def sample_job(ns: str, *, seconds: float | None) -> dict[str, Any]:
    """BeforeEach's sampleJob: testingjob.MakeJob("test-job", ns).Queue("main").RequestAndLimit(cpu 1, memory 20Mi)
    .TerminationGracePeriod(1) (``seconds``: its agnhost behaviour, None for exit fast)."""
    return job("test-job", ns, requests={"cpu": "1", "memory": "20Mi"}, seconds=seconds)


async def _workload(e2e: E2E, ns: str, job_name: str) -> dict[str, Any] | None:
    """The job's Workload read as v1beta1 (by its job-uid label), None while there is none."""
    found = await e2e.get("job", job_name, ns)
    if found is None:
        return None
    selector = f"{JOB_UID_LABEL}={found['metadata']['uid']}"
    items, _ = await kube.list_objects(e2e.api, WORKLOADS, namespace=ns, label_selector=selector)
    return items[0] if items else None


async def _read(e2e: E2E, ref: resources.ResourceRef, name: str, ns: str | None = None) -> dict[str, Any] | None:
    try:
        return await kube.get_object(e2e.api, ref, namespace=ns, name=name)
    except kube_errors.NotFoundError:
        return None


async def stays_suspended_without_local_queue(e2e: E2E) -> None:
    """e2e_v1beta1_test.go, Describe "Kueue v1beta1", When "Creating a Job without a matching LocalQueue", It
    "Should stay in suspended": the Job stays suspended and its Workload, read as v1beta1, has no quota
    reservation."""
    ns = "e2e-v1beta1-no-lq"
    await e2e.apply(namespace(ns))
    await e2e.create(sample_job(ns, seconds=None))
    await e2e.wait("job", "test-job", ns, lambda j: j["spec"].get("suspend") is True, what="Job suspended")

    async def pending() -> dict[str, Any] | None:
        workload = await _workload(e2e, ns, "test-job")
        return workload if workload is not None and workload["apiVersion"] == V1BETA1 else None

    workload = await eventually(pending, what=f"the v1beta1 Workload of Job {ns}/test-job")
    assert condition(workload, "QuotaReserved").get("status") != "True", workload
    await e2e.kubectl.ok("delete", "job", "test-job", "-n", ns)


async def unsuspends_with_node_selectors(e2e: E2E) -> None:
    """e2e_v1beta1_test.go, Describe "Kueue v1beta1", When "Creating a Job With Queueing", It "Should unsuspend a
    job and set nodeSelectors": v1beta1 flavors on-demand and spot (1 CPU, 1Gi each), a v1beta1 ClusterQueue
    preempting lower priorities within it and LocalQueue ``main``; the Job runs on on-demand's node labels and
    its Workload, read as v1beta1, finishes. AfterEach's deletions go through v1beta1 too."""
    ns = "e2e-v1beta1-unsuspend"
    cq = f"cluster-queue-{ns}"
    flavors = {f"on-demand-{ns}": ON_DEMAND, f"spot-{ns}": SPOT}
    manifests: list[dict[str, Any]] = [namespace(ns)]
    manifests += [
        {"apiVersion": V1BETA1, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {"nodeLabels": labels}}
        for name, labels in flavors.items()
    ]
    manifests.append(
        {
            "apiVersion": V1BETA1,
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {"name": name, "resources": [{"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "1Gi"}]}
                            for name in flavors
                        ],
                    }
                ],
            },
        }
    )  # fmt: skip
    manifests.append(
        {
            "apiVersion": V1BETA1,
            "kind": "LocalQueue",
            "metadata": {"name": "main", "namespace": ns},
            "spec": {"clusterQueue": cq},
        }
    )
    await e2e.create(*manifests)

    async def active(ref: resources.ResourceRef, name: str, where: str | None) -> dict[str, Any] | None:
        found = await _read(e2e, ref, name, where)
        return found if found is not None and is_true(found, "Active") else None

    await eventually(lambda: active(CLUSTER_QUEUES, cq, None), what=f"v1beta1 ClusterQueue {cq} active")
    await eventually(lambda: active(LOCAL_QUEUES, "main", ns), what=f"v1beta1 LocalQueue {ns}/main active")

    await e2e.create(sample_job(ns, seconds=None))  # a binary that ends
    await e2e.job_unsuspended_with("test-job", ns, ON_DEMAND)

    async def finished() -> dict[str, Any] | None:
        workload = await _workload(e2e, ns, "test-job")
        return workload if workload is not None and is_true(workload, "Finished") else None

    workload = await eventually(finished, what=f"the v1beta1 Workload of Job {ns}/test-job finished", timeout=120)
    assert workload["apiVersion"] == V1BETA1
    assignment = workload["status"]["admission"]["podSetAssignments"][0]
    assert assignment["flavors"] == {"cpu": f"on-demand-{ns}", "memory": f"on-demand-{ns}"}, assignment

    # AfterEach: the jobs and workloads go, then the LocalQueue, ClusterQueue and flavors, deleted as v1beta1
    await e2e.kubectl.ok("delete", "job", "test-job", "-n", ns)
    await e2e.kubectl.ok("delete", "workloads.v1beta1.kueue.x-k8s.io", "--all", "-n", ns)
    await e2e.kubectl.ok("delete", "localqueues.v1beta1.kueue.x-k8s.io", "main", "-n", ns)
    await e2e.kubectl.ok("delete", "clusterqueues.v1beta1.kueue.x-k8s.io", cq)
    await e2e.kubectl.ok("delete", "resourceflavors.v1beta1.kueue.x-k8s.io", *flavors)
    await e2e.wait_gone("clusterqueue", cq, None)
    for name in flavors:
        await e2e.wait_gone("resourceflavor", name, None)


STEPS: list[Step] = [stays_suspended_without_local_queue, unsuspends_with_node_selectors]
