"""The steps of Kueue's test/e2e/singlecluster/extended/jobset_test.go (Describe "JobSet"), run by
tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo --keep`` once the JobSet CRD is installed (the simulated
controllers then run JobSets: their child Jobs, and the JobSet's Completed condition when those complete).

Each case is a step with its own namespace, flavors and ClusterQueue (its When's BeforeEach).
"""

from __future__ import annotations

from typing import Any

from tests.e2e.kueue_e2e import (
    E2E,
    FOREVER,
    QUEUE_LABEL,
    Step,
    cluster_queue,
    container,
    flavor,
    is_true,
    local_queue,
    namespace,
    run_for,
)

ON_DEMAND = {"instance-type": "on-demand"}


def jobset(name: str, ns: str, *, replicas: int, parallelism: int, seconds: float | None) -> dict[str, Any]:
    """testingjobset.MakeJobSet(name, ns).Queue("main").ReplicatedJobs(replicated-job-1: replicas, parallelism =
    completions) .RequestAndLimit(cpu 500m, memory 200M)."""
    pod_spec = {
        "restartPolicy": "Never",
        "containers": [container({"cpu": "500m", "memory": "200M"})],
    }
    job_spec = {"parallelism": parallelism, "completions": parallelism, "template": {"spec": pod_spec}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "main"}, "annotations": run_for(seconds)},
        "spec": {
            "replicatedJobs": [{"name": "replicated-job-1", "replicas": replicas, "template": {"spec": job_spec}}]
        },
    }


async def _active(e2e: E2E, cq: str, ns: str) -> None:
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    await e2e.wait("localqueue", "main", ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {ns}/main active")


async def runs_an_admitted_jobset(e2e: E2E) -> None:
    """jobset_test.go, Describe "JobSet", When "Creating a JobSet", It "Should run a jobSet if admitted"."""
    ns = "e2e-jobset-run"
    cq = f"cluster-queue-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(f"default-{ns}"),
        cluster_queue(cq, {f"default-{ns}": {"cpu": "2", "memory": "2G"}}),
        local_queue("main", ns, cq),
    )
    await _active(e2e, cq, ns)
    await e2e.create(jobset("job-set", ns, replicas=2, parallelism=2, seconds=None))
    workload = await e2e.wait_workload_of("jobset", "job-set", ns)
    await e2e.wait(
        "workload", workload["metadata"]["name"], ns, lambda w: is_true(w, "Finished"), what="the JobSet finished"
    )
    await e2e.kubectl.ok("delete", "jobsets", "--all", "-n", ns)


async def suspends_a_jobset_with_injected_node_selector(e2e: E2E) -> None:
    """jobset_test.go, Describe "JobSet", When "Using resource flavors with node selectors", It "Should allow to
    suspend a JobSet when injected nodeSelector" (its pods run until stopped here: Kueue's exit fast outruns the
    ClusterQueue's stop on the emulator, whose pods start at once)."""
    ns = "e2e-jobset-stop"
    cq = f"cluster-queue-{ns}"
    quotas = {"cpu": "1", "memory": "1Gi"}
    await e2e.apply(
        namespace(ns),
        flavor(f"on-demand-{ns}", node_labels=ON_DEMAND),
        flavor(f"spot-{ns}", node_labels={"instance-type": "spot"}),
        cluster_queue(cq, {f"on-demand-{ns}": quotas, f"spot-{ns}": quotas}, preemption="LowerPriority"),
        local_queue("main", ns, cq),
    )
    await _active(e2e, cq, ns)
    await e2e.create(jobset("job-set-suspend", ns, replicas=1, parallelism=1, seconds=FOREVER))
    started = await e2e.wait(
        "jobset", "job-set-suspend", ns, lambda j: j["spec"].get("suspend") is False, what="the JobSet unsuspended"
    )
    template = started["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert template.get("nodeSelector") == ON_DEMAND, template
    # Stopping the ClusterQueue to make the JobSet be stopped and suspended
    await e2e.kubectl.ok("patch", "clusterqueue", cq, "--type=merge", "-p", '{"spec":{"stopPolicy":"HoldAndDrain"}}')
    await e2e.wait(
        "jobset", "job-set-suspend", ns, lambda j: j["spec"].get("suspend") is True, what="the JobSet suspended"
    )
    await e2e.kubectl.ok("delete", "jobsets", "--all", "-n", ns)


STEPS: list[Step] = [runs_an_admitted_jobset, suspends_a_jobset_with_injected_node_selector]
