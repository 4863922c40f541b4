"""The steps of Kueue's test/e2e/singlecluster/baseline/job_test.go (Describe "Kueue"), run by
tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo --keep`` (ElasticJobsViaWorkloadSlices on, for the elastic
Job case).

Each of Kueue's cases is a step with its own namespace, flavors and ClusterQueue (Kueue names them after the
namespace; here after the step), so the steps are independent, as Kueue's BeforeEach/AfterEach make them. The
docstring of each step quotes Kueue's ``When`` and ``It``; a step that stops short of Kueue's case says where and why.
"""

from __future__ import annotations

import datetime
from typing import Any

from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import (
    E2E,
    PRIORITY_CLASS_LABEL,
    QUEUE_LABEL,
    Step,
    cluster_queue,
    condition,
    container,
    flavor,
    is_true,
    job,
    local_queue,
    namespace,
    priority_class,
)

ON_DEMAND = {"instance-type": "on-demand"}
SPOT = {"instance-type": "spot"}


async def _queueing(e2e: E2E, ns: str) -> str:
    """When("Creating a Job With Queueing")'s BeforeEach: flavors on-demand and spot (1 CPU, 1Gi each), a
    ClusterQueue preempting lower priorities within it, LocalQueue ``main``. Returns the ClusterQueue's name."""
    cq = f"cluster-queue-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(f"on-demand-{ns}", node_labels=ON_DEMAND),
        flavor(f"spot-{ns}", node_labels=SPOT),
        cluster_queue(
            cq,
            {f"on-demand-{ns}": {"cpu": "1", "memory": "1Gi"}, f"spot-{ns}": {"cpu": "1", "memory": "1Gi"}},
            preemption="LowerPriority",
        ),
        local_queue("main", ns, cq),
    )
    await _active(e2e, cq, ns)
    return cq


async def _active(e2e: E2E, cq: str, ns: str) -> None:
    """CreateClusterQueuesAndWaitForActive, CreateLocalQueuesAndWaitForActive."""
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    await e2e.wait("localqueue", "main", ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {ns}/main active")


def _reserved_in(workload: dict[str, Any], cq: str) -> bool:
    """The Workload reserved quota in ``cq`` (QuotaReserved set to True once; kept once it is finished)."""
    admission = (workload.get("status") or {}).get("admission") or {}
    return admission.get("clusterQueue") == cq and (is_true(workload, "QuotaReserved") or is_true(workload, "Finished"))


def _reserved(workload: dict[str, Any], cq: str) -> bool:
    """ExpectWorkloadsToHaveQuotaReservationByKey: QuotaReserved, in ``cq``."""
    admission = (workload.get("status") or {}).get("admission") or {}
    return is_true(workload, "QuotaReserved") and admission.get("clusterQueue") == cq


async def _finished(e2e: E2E, kind: str, name: str, ns: str) -> dict[str, Any]:
    """ExpectWorkloadToFinishWithTimeout on the job's Workload."""

    async def read() -> dict[str, Any] | None:
        workload = await e2e.workload_of(kind, name, ns)
        return workload if workload is not None and is_true(workload, "Finished") else None

    return dict(await eventually(read, what=f"the Workload of {kind} {ns}/{name} finished", timeout=120))


async def stays_suspended_without_local_queue(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job without a matching LocalQueue", It "Should stay in
    suspended"."""
    ns = "e2e-no-lq"
    await e2e.apply(namespace(ns))
    await e2e.create(job("test-job", ns))
    await e2e.wait("job", "test-job", ns, lambda j: j["spec"].get("suspend") is True, what="Job suspended")
    workload = await e2e.wait_workload_of("job", "test-job", ns)
    assert condition(workload, "QuotaReserved").get("status") != "True", workload
    await e2e.kubectl.ok("delete", "job", "test-job", "-n", ns)


async def cron_job_schedules_jobs(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job With Queueing", It "Should allow to schedule Jobs via
    CronJob"."""
    ns = "e2e-cronjob"
    cq = await _queueing(e2e, ns)
    template = job("unused", ns, requests={"cpu": "1"}, seconds=None)
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "test-cronjob", "namespace": ns},
        "spec": {
            "schedule": "* * * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"metadata": {"labels": {QUEUE_LABEL: "main"}}, "spec": template["spec"]},
        },
    }
    await e2e.create(cron)
    # Patch the last start time to be in the past so that it starts immediately
    created = await e2e.must_get("cronjob", "test-cronjob", ns)
    stamp = datetime.datetime.fromisoformat(created["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    past = (stamp - datetime.timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    await e2e.status_patch("cronjob", "test-cronjob", ns, {"lastScheduleTime": past})
    jobs = await eventually(lambda: e2e.list("jobs", ns), what="the CronJob's Job created")
    assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]
    name = jobs[0]["metadata"]["name"]
    await e2e.job_unsuspended_with(name, ns, ON_DEMAND)
    workload = await e2e.wait_workload_of("job", name, ns)
    # a Job that exits fast may be finished by now: its Workload keeps the admission it had
    await e2e.wait("workload", workload["metadata"]["name"], ns, lambda w: _reserved_in(w, cq), what="quota in cq")
    await e2e.kubectl.ok("delete", "cronjob", "test-cronjob", "-n", ns)


async def unsuspends_with_node_selectors(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job With Queueing", It "Should unsuspend a job and set
    nodeSelectors"."""
    ns = "e2e-unsuspend"
    await _queueing(e2e, ns)
    await e2e.create(job("test-job", ns, seconds=None))  # a binary that ends
    await e2e.job_unsuspended_with("test-job", ns, ON_DEMAND)
    await _finished(e2e, "job", "test-job", ns)


async def orphan_delete_finishes_workload(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job With Queueing", It "Should finish workload if the job is
    deleted with PropagationPolicy=DeletePropagationOrphan"."""
    ns = "e2e-orphan"
    await _queueing(e2e, ns)
    await e2e.create(job("job", ns))
    workload = await e2e.wait_workload_of("job", "job", ns)
    name = workload["metadata"]["name"]
    await e2e.wait("workload", name, ns, lambda w: is_true(w, "Admitted"), what="the Workload admitted")
    await e2e.kubectl.ok("delete", "job", "job", "-n", ns, "--cascade=orphan")
    finished = await e2e.wait(
        "workload", name, ns, lambda w: is_true(w, "Finished"), what="the orphaned Job's Workload finished"
    )
    assert not finished["metadata"].get("finalizers"), finished["metadata"]


async def prebuilt_workload(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job With Queueing", It "Should run with prebuilt workload"
    (up to "Verify pods have queue labels assigned": the last steps delete the pods so that the Job fails, and the
    simulated Job controller does not count a deleted pod as failed)."""
    ns = "e2e-prebuilt"
    cq = await _queueing(e2e, ns)
    main = container({"cpu": "200m", "memory": "20Mi"})
    main.update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log")
    main["terminationMessagePolicy"] = "File"  # SetContainerDefaults: what the API server defaults
    sample = job("test-job", ns, containers=[main], labels={"kueue.x-k8s.io/prebuilt-workload-name": "prebuilt-wl"})
    sample["spec"]["backoffLimit"] = 0
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "prebuilt-wl", "namespace": ns, "finalizers": ["kueue.x-k8s.io/resource-in-use"]},
        "spec": {
            "queueName": "main",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [main]}}}],
        },
    }
    await e2e.create(workload)
    await e2e.create(sample)
    created = await e2e.must_get("job", "test-job", ns)

    def adopted(wl: dict[str, Any]) -> bool:
        return any(ref.get("uid") == created["metadata"]["uid"] for ref in wl["metadata"].get("ownerReferences") or [])

    adopted_wl = await e2e.wait("workload", "prebuilt-wl", ns, adopted, what="the prebuilt Workload adopted")
    assert (
        adopted_wl["spec"]["podSets"][0]["template"]["spec"]["containers"]
        == created["spec"]["template"]["spec"]["containers"]
    )
    await e2e.job_unsuspended_with("test-job", ns, ON_DEMAND)
    await e2e.wait("job", "test-job", ns, lambda j: (j.get("status") or {}).get("active") == 1, what="its pod active")
    pods = await eventually(lambda: e2e.list("pods", ns, "job-name=test-job"), what="the Job's pods")
    for p in pods:
        assert p["metadata"]["labels"].get("kueue.x-k8s.io/cluster-queue-name") == cq, p["metadata"]["labels"]
        assert p["metadata"]["labels"].get("kueue.x-k8s.io/local-queue-name") == "main", p["metadata"]["labels"]
    await e2e.kubectl.ok("delete", "job", "test-job", "-n", ns)


async def preempted_job_readmitted_in_other_flavor(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job With Queueing", It "Should readmit preempted job with
    workloadPriorityClass into a separate flavor"."""
    ns = "e2e-readmit"
    await _queueing(e2e, ns)
    await e2e.create(job("test-job", ns))
    await e2e.apply(priority_class(f"high-workload-{ns}", 300))
    await e2e.job_unsuspended_with("test-job", ns, ON_DEMAND)  # Job is admitted using the first flavor
    high = job(
        "high-with-wpc",
        ns,
        requests={"cpu": "1"},
        node_selector=ON_DEMAND,  # target the same flavor to cause preemption
        labels={PRIORITY_CLASS_LABEL: f"high-workload-{ns}"},
    )
    await e2e.create(high)
    await e2e.job_unsuspended_with("high-with-wpc", ns, ON_DEMAND)
    await e2e.job_unsuspended_with("test-job", ns, SPOT)  # Job is re-admitted using the second flavor
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns)


async def partial_admission(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job With Queueing", It "Should partially admit the Job if
    configured and not fully fits"."""
    ns = "e2e-partial"
    await _queueing(e2e, ns)
    partial = job(
        "job",
        ns,
        requests={"cpu": "500m"},
        parallelism=3,
        completions=4,
        seconds=None,
        annotations={"kueue.x-k8s.io/job-min-parallelism": "1"},
    )
    await e2e.create(partial)
    await e2e.job_unsuspended_with("job", ns, ON_DEMAND)
    started = await e2e.must_get("job", "job", ns)
    assert (started["spec"]["parallelism"], started["spec"]["completions"]) == (2, 4)
    await _finished(e2e, "job", "job", ns)


async def priority_update_through_the_job(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job With Queueing", It "Should allow updating the workload's
    priority through the job"."""
    ns = "e2e-priority"
    cq = await _queueing(e2e, ns)
    low, mid, high = (f"{level}-priority-{ns}" for level in ("low", "mid", "high"))
    await e2e.apply(priority_class(low, 100), priority_class(mid, 200), priority_class(high, 300))
    await e2e.create(job("test-job", ns, node_selector=ON_DEMAND, labels={PRIORITY_CLASS_LABEL: mid}))
    await e2e.job_unsuspended_with("test-job", ns, ON_DEMAND)  # Verify the job-one is running
    pods = await eventually(lambda: e2e.list("pods", ns, "job-name=test-job"), what="job-one's pods")
    for p in pods:  # Verify pods have queue labels assigned
        assert p["metadata"]["labels"].get("kueue.x-k8s.io/cluster-queue-name") == cq, p["metadata"]["labels"]
        assert p["metadata"]["labels"].get("kueue.x-k8s.io/local-queue-name") == "main", p["metadata"]["labels"]
    # Verify priority label is immutable when running
    code, _, err = await e2e.kubectl.run(
        "label", "job", "test-job", "-n", ns, f"{PRIORITY_CLASS_LABEL}=", "--overwrite"
    )
    assert code != 0 and "Forbidden" in err, err
    two = job(
        "test-job-2",
        ns,
        requests={"cpu": "1", "memory": "20Mi"},
        node_selector=ON_DEMAND,
        labels={PRIORITY_CLASS_LABEL: low},
    )
    await e2e.create(two)
    await e2e.wait("job", "test-job-2", ns, lambda j: j["spec"].get("suspend") is True, what="job-two suspended")
    waiting = await e2e.wait_workload_of("job", "test-job-2", ns)
    assert not is_true(waiting, "QuotaReserved"), waiting["status"]  # low priority: not admitted
    await e2e.kubectl.ok("label", "job", "test-job-2", "-n", ns, f"{PRIORITY_CLASS_LABEL}={high}", "--overwrite")
    await e2e.wait(
        "workload", waiting["metadata"]["name"], ns, lambda w: w["spec"].get("priority") == 300, what="priority 300"
    )
    await e2e.wait("job", "test-job-2", ns, lambda j: j["spec"].get("suspend") is False, what="job-two running")
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns)


async def env_deduplicated(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job With Queueing", It "Should deduplicate env variables"."""
    ns = "e2e-env"
    await _queueing(e2e, ns)
    await e2e.apply(priority_class(f"high-{ns}", 100))
    env = [{"name": "TEST_ENV", "value": "test1"}, {"name": "TEST_ENV", "value": "test2"}]
    low = job(
        "low",
        ns,
        parallelism=1,
        node_selector=ON_DEMAND,
        containers=[container({"cpu": "1"}, limits=False, image="sleep", env=env)],
    )
    await e2e.create(low)
    low_wl = await e2e.wait_workload_of("job", "low", ns)
    low_name = low_wl["metadata"]["name"]
    low_wl = await e2e.wait(
        "workload", low_name, ns, lambda w: is_true(w, "Admitted"), what="the low Workload admitted"
    )
    containers = low_wl["spec"]["podSets"][0]["template"]["spec"]["containers"]
    assert [c.get("env") for c in containers] == [[{"name": "TEST_ENV", "value": "test2"}]]
    high = job(
        "high",
        ns,
        parallelism=1,
        node_selector=ON_DEMAND,
        labels={PRIORITY_CLASS_LABEL: f"high-{ns}"},
        containers=[container({"cpu": "1"}, limits=False)],
    )
    await e2e.create(high)
    high_wl = await e2e.wait_workload_of("job", "high", ns)
    await e2e.wait(
        "workload", high_wl["metadata"]["name"], ns, lambda w: is_true(w, "Admitted"), what="the high Workload admitted"
    )
    preempted = await e2e.wait(
        "workload",
        low_name,
        ns,
        lambda w: is_true(w, "Evicted") and is_true(w, "Preempted"),
        what="the low Workload preempted",
    )
    assert preempted["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["env"] == env[1:]
    low_job = await e2e.must_get("job", "low", ns)
    assert low_job["spec"]["template"]["spec"]["containers"][0]["env"] == env  # the Job keeps both
    # the Workload is not updated again and again (an EquivalentToWorkload that never matches)
    events = await e2e.list("events", ns)
    assert not [e for e in events if e.get("reason") == "UpdatedWorkload"], [e.get("message") for e in events]
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns)


async def priority_cannot_be_removed(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job With Queueing", It "Should not allow removing the
    workload's priority through the job"."""
    ns = "e2e-keep-priority"
    await _queueing(e2e, ns)
    sample = f"sample-priority-{ns}"
    await e2e.apply(priority_class(sample, 100))
    # Request more resources than are available to keep the job suspended
    await e2e.create(
        job("test-job", ns, requests={"cpu": "2"}, node_selector=ON_DEMAND, labels={PRIORITY_CLASS_LABEL: sample})
    )
    await e2e.wait("job", "test-job", ns, lambda j: j["spec"].get("suspend") is True, what="Job suspended")
    workload = await e2e.wait_workload_of("job", "test-job", ns)
    workload = await e2e.wait(
        "workload",
        workload["metadata"]["name"],
        ns,
        lambda w: (w["spec"].get("priorityClassRef") or {}).get("name") == sample and w["spec"].get("priority") == 100,
        what="the Workload with its priority class",
    )
    assert not is_true(workload, "QuotaReserved")
    code, _, err = await e2e.kubectl.run(
        "label", "job", "test-job", "-n", ns, f"{PRIORITY_CLASS_LABEL}=", "--overwrite"
    )
    assert code != 0 and "Forbidden" in err, err
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns)


async def _two_step(e2e: E2E, ns: str) -> tuple[str, str]:
    """When("Creating a Job In a Twostepadmission Queue")'s BeforeEach: AdmissionCheck ``check1-NS`` (controller
    ``ac-controller``, set Active by the test as its controller would), flavor on-demand, a ClusterQueue of 1 CPU
    and 1Gi with the check. Returns (ClusterQueue, check)."""
    check, cq = f"check1-{ns}", f"cluster-queue-{ns}"
    await e2e.apply(
        namespace(ns),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": check},
            "spec": {"controllerName": "ac-controller"},
        },
    )
    await e2e.status_patch(
        "admissioncheck",
        check,
        None,
        {"conditions": [_condition("Active", "True", "ByTest", "by test")]},
    )
    await e2e.apply(
        flavor(f"on-demand-{ns}", node_labels=ON_DEMAND),
        cluster_queue(cq, {f"on-demand-{ns}": {"cpu": "1", "memory": "1Gi"}}, admission_checks=[check]),
        local_queue("main", ns, cq),
    )
    await _active(e2e, cq, ns)
    return cq, check


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now}


async def _set_check(e2e: E2E, workload: str, ns: str, check: str, state: str) -> None:
    """util.SetWorkloadsAdmissionCheck: the check's state, as its controller writes it."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = {"name": check, "state": state, "message": "", "lastTransitionTime": now}
    await e2e.status_patch("workload", workload, ns, {"admissionChecks": [entry]})


async def _with_check(e2e: E2E, ns: str, check: str) -> str:
    """ "verify the check is added to the workload": the Workload's name once its status lists the check."""
    workload = await e2e.wait_workload_of("job", "test-job", ns)
    name = workload["metadata"]["name"]
    await e2e.wait(
        "workload",
        name,
        ns,
        lambda w: [c.get("name") for c in (w.get("status") or {}).get("admissionChecks") or []] == [check],
        what="the check added to the Workload",
    )
    return str(name)


async def unsuspended_after_checks(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job In a Twostepadmission Queue", It "Should unsuspend a job
    only after all checks are cleared"."""
    ns = "e2e-two-step"
    cq, check = await _two_step(e2e, ns)
    await e2e.create(job("test-job", ns, seconds=None))
    name = await _with_check(e2e, ns, check)
    await e2e.wait("workload", name, ns, lambda w: _reserved(w, cq), what="the Workload assigned")
    held = await e2e.must_get("job", "test-job", ns)
    assert held["spec"].get("suspend") is True  # checking the job remains suspended
    await _set_check(e2e, name, ns, check, "Ready")
    await e2e.job_unsuspended_with("test-job", ns, ON_DEMAND)
    await _finished(e2e, "job", "test-job", ns)
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns)


async def suspended_when_checks_invalid(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating a Job In a Twostepadmission Queue", It "Should suspend a job
    when its checks become invalid"."""
    ns = "e2e-check-rejected"
    _, check = await _two_step(e2e, ns)
    await e2e.create(job("test-job", ns))
    name = await _with_check(e2e, ns, check)
    await _set_check(e2e, name, ns, check, "Ready")
    await e2e.job_unsuspended_with("test-job", ns, ON_DEMAND)
    await _set_check(e2e, name, ns, check, "Rejected")
    await e2e.wait("job", "test-job", ns, lambda j: j["spec"].get("suspend") is True, what="the Job suspended again")
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns)


async def elastic_job_gets_flavor_labels_and_tolerations(e2e: E2E) -> None:
    """job_test.go, Describe "Kueue", When "Creating an elastic Job with a ResourceFlavor that has nodeLabels and
    tolerations", It "should inject flavor nodeLabels and tolerations into the Job and pods at admission and after
    scale-up"."""
    ns = "e2e-elastic"
    toleration = {"key": "example.com/test-taint", "operator": "Exists", "effect": "NoSchedule"}
    cq = f"cluster-queue-{ns}"
    await e2e.apply(
        namespace(ns),
        flavor(f"on-demand-{ns}", node_labels=ON_DEMAND, tolerations=[toleration]),
        cluster_queue(cq, {f"on-demand-{ns}": {"cpu": "4", "memory": "4Gi"}}),
        local_queue("main", ns, cq),
    )
    await _active(e2e, cq, ns)
    elastic = job(
        "elastic-flavor-injection",
        ns,
        parallelism=2,
        completions=10,
        annotations={"kueue.x-k8s.io/elastic-job": "true"},
    )
    await e2e.create(elastic)
    first = await e2e.wait_workload_of("job", "elastic-flavor-injection", ns)
    first = await e2e.wait(
        "workload", first["metadata"]["name"], ns, lambda w: is_true(w, "Admitted"), what="the workload admitted"
    )
    await e2e.job_unsuspended_with("elastic-flavor-injection", ns, ON_DEMAND)
    started = await e2e.must_get("job", "elastic-flavor-injection", ns)
    assert toleration in started["spec"]["template"]["spec"].get("tolerations", [])
    await _running_pods_with(e2e, ns, "elastic-flavor-injection", 2, ON_DEMAND, toleration)
    await e2e.kubectl.ok(
        "patch", "job", "elastic-flavor-injection", "-n", ns, "--type=merge", "-p", '{"spec":{"parallelism":3}}'
    )

    async def new_slice() -> dict[str, Any] | None:
        for wl in await e2e.list("workloads", ns):
            if wl["metadata"]["name"] != first["metadata"]["name"] and is_true(wl, "Admitted"):
                return wl
        return None

    await eventually(new_slice, what="the replacement slice admitted")
    await e2e.wait(
        "workload", first["metadata"]["name"], ns, lambda w: is_true(w, "Finished"), what="the old slice finished"
    )
    scaled = await e2e.must_get("job", "elastic-flavor-injection", ns)
    assert scaled["spec"]["template"]["spec"].get("nodeSelector") == ON_DEMAND
    assert toleration in scaled["spec"]["template"]["spec"].get("tolerations", [])
    await _running_pods_with(e2e, ns, "elastic-flavor-injection", 3, ON_DEMAND, toleration)
    await e2e.kubectl.ok("delete", "jobs", "--all", "-n", ns)


async def _running_pods_with(
    e2e: E2E, ns: str, job_name: str, count: int, node_selector: dict[str, str], toleration: dict[str, str]
) -> None:
    """ "verifying exactly N running pods carry the flavor nodeSelector and toleration", and the Job's ready count."""

    async def read() -> list[dict[str, Any]] | None:
        pods = await e2e.list("pods", ns, f"batch.kubernetes.io/job-name={job_name}")
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        current = await e2e.must_get("job", job_name, ns)
        return running if len(running) == count and (current.get("status") or {}).get("ready") == count else None

    for p in await eventually(read, what=f"{count} running pods of {job_name}"):
        assert p["spec"].get("nodeSelector") == node_selector, p["spec"]
        assert toleration in p["spec"].get("tolerations", []), p["spec"]


STEPS: list[Step] = [
    stays_suspended_without_local_queue,
    cron_job_schedules_jobs,
    unsuspends_with_node_selectors,
    prebuilt_workload,
    preempted_job_readmitted_in_other_flavor,
    partial_admission,
    priority_update_through_the_job,
    env_deduplicated,
    priority_cannot_be_removed,
    unsuspended_after_checks,
    suspended_when_checks_invalid,
    elastic_job_gets_flavor_labels_and_tolerations,
    orphan_delete_finishes_workload,
]
