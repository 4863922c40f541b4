"""Kueue's MultiKueue e2e cases (test/e2e/multikueue/baseline/e2e_test.go), as steps on one multi-cluster demo.

Each step builds what Kueue's ``BeforeEach`` builds, under its own names so the steps run at once on one manager
and two workers (:mod:`kueue_es.multikueue_demo`): a namespace of the same name on the three clusters, two
MultiKueueClusters reaching the demo's workers through their kubeconfig Secrets, a MultiKueueConfig listing
both, a MultiKueue AdmissionCheck, and on each cluster a ResourceFlavor, a ClusterQueue (the manager's with the
check; the workers' with Kueue's asymmetric quotas, worker 1 cpu 2 / memory 1G and worker 2 cpu 1200m / memory
4G) and a LocalQueue. A Job's pods "terminate" here when their simulated duration ends (the
``kueue-es.dev/sim-duration-seconds`` annotation), where Kueue's test kills the agnhost container.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kueue_es.multikueue_demo import Cluster, secret_name
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors, resources
from tests.e2e.waiting import eventually

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
DURATION = "kueue-es.dev/sim-duration-seconds"
GPU_HIGH, GPU_LOW = "example.com/gpu-h100", "example.com/gpu-v100s"
#: Kueue's ClusterQueue quotas (e2e_test.go BeforeEach): what makes a 2G Job fit worker 2 only, and two h100s
#: worker 1 only.
MANAGER_QUOTAS = {"cpu": "2", "memory": "4G", "ephemeral-storage": "100G", GPU_HIGH: "2", GPU_LOW: "2"}
WORKER_QUOTAS = (
    {"cpu": "2", "memory": "1G", "ephemeral-storage": "15G", GPU_HIGH: "2", GPU_LOW: "1"},
    {"cpu": "1200m", "memory": "4G", "ephemeral-storage": "5G", GPU_HIGH: "1", GPU_LOW: "2"},
)


@dataclass
class System:
    """The running multi-cluster demo: the manager and its workers, in the order of ``WORKERS``."""

    manager: Cluster
    workers: list[Cluster]


@dataclass
class Setup:
    """What one step's ``BeforeEach`` made: the namespace (same name everywhere), the manager's LocalQueue and
    ClusterQueue, the AdmissionCheck, and the MultiKueueCluster names of the workers (in ``workers`` order)."""

    ns: str
    high: str
    low: str
    lq: str
    cq: str
    check: str
    clusters: list[str]
    flavor: str


def _cq(name: str, flavor: str, quotas: dict[str, str], checks: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": list(quotas),
                "flavors": [{"name": flavor, "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()]}],
            }
        ],
        "preemption": {"withinClusterQueue": "LowerPriority"},
    }
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _queues(
    ns: str, cq: str, flavor: str, quotas: dict[str, str], checks: list[str], priorities: dict[str, int]
) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        *(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
            for name, value in priorities.items()
        ),
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        _cq(cq, flavor, quotas, checks),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": cq, "namespace": ns},
            "spec": {"clusterQueue": cq},
        },
    ]


async def setup(system: System, name: str) -> Setup:
    """Kueue's ``BeforeEach`` for step ``name`` (a DNS label prefix): everything made, the check and the
    manager's queues active."""
    ns, cq, flavor = f"mk-{name}", f"{name}-q1", f"{name}-default"
    clusters = [f"{name}-worker{i + 1}" for i in range(len(system.workers))]
    check, config = f"{name}-ac1", f"{name}-config"
    priorities = {f"{name}-high": 300, f"{name}-low": 100}
    manager_docs: list[dict[str, Any]] = [
        *(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": cluster},
                "spec": {
                    "clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret_name(worker.name)}}
                },
            }
            for cluster, worker in zip(clusters, system.workers, strict=True)
        ),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueConfig",
            "metadata": {"name": config},
            "spec": {"clusters": clusters},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": check},
            "spec": {
                "controllerName": MULTIKUEUE_CONTROLLER,
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config},
            },
        },
        *_queues(ns, cq, flavor, MANAGER_QUOTAS, [check], priorities),
    ]
    for doc in manager_docs:
        await kube.apply_manifest(system.manager.api, doc)
    for worker, quotas in zip(system.workers, WORKER_QUOTAS, strict=True):
        for doc in _queues(ns, cq, flavor, quotas, [], priorities):
            await kube.apply_manifest(worker.api, doc)
    await eventually(
        lambda: kube.get_object(system.manager.api, resources.ADMISSION_CHECKS, name=check),
        lambda ac: _condition(ac, "Active") == "True",
        what=f"AdmissionCheck {check} Active",
    )
    return Setup(
        ns=ns, high=f"{name}-high", low=f"{name}-low", lq=cq, cq=cq, check=check, clusters=clusters, flavor=flavor
    )


def _condition(obj: dict[str, Any] | None, kind: str) -> str:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return str(c.get("status"))
    return ""


def _job(
    name: str, ns: str, queue: str, *, requests: dict[str, str], seconds: float, priority_class: str = ""
) -> dict[str, Any]:
    """testingjob.MakeJob(name, ns).Queue(queue).RequestAndLimit(...) for each of ``requests``, with
    .WorkloadPriorityClass(``priority_class``) if given: one pod, running ``seconds``."""
    labels = {QUEUE_LABEL: queue, **({PRIORITY_CLASS_LABEL: priority_class} if priority_class else {})}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels,
            "annotations": {DURATION: str(seconds)},
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "suspend": True,
            "template": {
                "metadata": {"annotations": {DURATION: str(seconds)}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {"name": "c", "image": "agnhost", "resources": {"requests": requests, "limits": requests}}
                    ],
                },
            },
        },
    }


async def _get(cluster: Cluster, ref: resources.ResourceRef, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return await kube.get_object(cluster.api, ref, namespace=ns, name=name)
    except errors.NotFoundError:
        return None


async def _workload_of(cluster: Cluster, ns: str, owner: str) -> dict[str, Any] | None:
    items, _ = await kube.list_objects(cluster.api, resources.WORKLOADS, namespace=ns)
    for wl in items:
        if any(o.get("name") == owner for o in wl["metadata"].get("ownerReferences") or []):
            return wl
    return None


def _check_state(wl: dict[str, Any] | None, check: str) -> tuple[str, str]:
    for c in ((wl or {}).get("status") or {}).get("admissionChecks") or []:
        if c.get("name") == check:
            return c.get("state", ""), c.get("message", "")
    return "", ""


async def _admitted_on(system: System, s: Setup, ns: str, job: str) -> tuple[str, dict[str, Any]]:
    """util.ExpectWorkloadsToBeAdmittedAndGetWorkerName plus the check's message: the worker (MultiKueueCluster
    name) the manager's Workload of ``job`` was admitted on, and that Workload."""
    wl = await eventually(
        lambda: _workload_of(system.manager, ns, job),
        lambda w: _condition(w, "Admitted") == "True" and _check_state(w, s.check)[0] == "Ready",
        what=f"{ns}/{job}'s workload admitted, its MultiKueue check Ready",
    )
    message = _check_state(wl, s.check)[1]
    [worker] = [c for c in s.clusters if message == f'The workload was admitted on "{c}"']
    return worker, wl


async def _gone_from_workers(system: System, ns: str, ref: resources.ResourceRef, name: str) -> None:
    """util.ExpectObjectToBeDeletedOnClusters on both workers."""
    for worker in system.workers:
        await eventually(
            lambda w=worker: _get(w, ref, ns, name), lambda o: o is None, what=f"{name} gone from {worker.name}"
        )


async def run_a_job_on_worker(system: System) -> None:
    """e2e_test.go "Should run a job on worker if admitted": managed by MultiKueue, admitted on a worker (the
    check's message names it), the manager's Job unsuspended and Active=1 with a start time while the remote pod
    runs, Finished Succeeded when it ends, then no Workload or Job left on the workers and the Job Complete."""
    s = await setup(system, "runjob")
    created = await kube.create_object(
        system.manager.api,
        resources.JOBS,
        namespace=s.ns,
        body=_job("job", s.ns, s.lq, requests={"cpu": "100m", "memory": "100M"}, seconds=4),
    )
    assert created["spec"].get("managedBy") == MULTIKUEUE_CONTROLLER
    _, wl = await _admitted_on(system, s, s.ns, "job")
    await eventually(
        lambda: _get(system.manager, resources.JOBS, s.ns, "job"),
        lambda j: not (j or {}).get("spec", {}).get("suspend"),
        what="the manager's Job unsuspended",
    )
    await eventually(
        lambda: _get(system.manager, resources.JOBS, s.ns, "job"),
        lambda j: (
            (j or {}).get("status", {}).get("startTime") is not None
            and j["status"].get("active") == 1
            and j["status"].get("completionTime") is None
        ),
        what="the manager's Job Active with the remote pod's status",
    )
    name = wl["metadata"]["name"]
    await eventually(
        lambda: _get(system.manager, resources.WORKLOADS, s.ns, name),
        lambda w: any(
            (c["type"], c["status"], c.get("reason")) == ("Finished", "True", "Succeeded")
            for c in ((w or {}).get("status") or {}).get("conditions") or []
        ),
        what=f"{name} Finished Succeeded",
    )
    await _gone_from_workers(system, s.ns, resources.WORKLOADS, name)
    await _gone_from_workers(system, s.ns, resources.JOBS, "job")
    job = await _get(system.manager, resources.JOBS, s.ns, "job")
    assert _condition(job, "Complete") == "True", job


async def multikueue_and_regular_job_on_one_cluster(system: System) -> None:
    """e2e_test.go "Cluster Role Sharing": a ClusterQueue without the check beside the MultiKueue one on the
    manager; a Job in each (1 cpu, 2G): the MultiKueue one managed by MultiKueue and run on worker 2 (the only
    one with 2G of memory), the regular one not managed by it and run on the manager; both complete."""
    s = await setup(system, "roles")
    regular = "roles-q2"
    await kube.apply_manifest(system.manager.api, _cq(regular, s.flavor, {"cpu": "1", "memory": "2G"}, []))
    await kube.apply_manifest(
        system.manager.api,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": regular, "namespace": s.ns},
            "spec": {"clusterQueue": regular},
        },
    )
    mk = await kube.create_object(
        system.manager.api,
        resources.JOBS,
        namespace=s.ns,
        body=_job("job-mk", s.ns, s.lq, requests={"cpu": "1", "memory": "2G"}, seconds=4),
    )
    assert mk["spec"].get("managedBy") == MULTIKUEUE_CONTROLLER
    plain = await kube.create_object(
        system.manager.api,
        resources.JOBS,
        namespace=s.ns,
        body=_job("job-regular", s.ns, regular, requests={"cpu": "1", "memory": "2G"}, seconds=4),
    )
    assert not plain["spec"].get("managedBy"), plain["spec"]

    def ran(job: Any) -> bool:
        # running, or already done: the jobs run 4 s, and job-regular may finish while job-mk is waited for
        status = (job or {}).get("status", {})
        return not (job or {}).get("spec", {}).get("suspend") and (status.get("active") == 1 or status.get("succeeded"))

    for name in ("job-mk", "job-regular"):
        await eventually(
            lambda n=name: _get(system.manager, resources.JOBS, s.ns, n), ran, what=f"{name} unsuspended and running"
        )
    worker, _ = await _admitted_on(system, s, s.ns, "job-mk")
    assert worker == s.clusters[1], worker
    assert await _get(system.workers[1], resources.JOBS, s.ns, "job-mk") is not None
    for name in ("job-mk", "job-regular"):
        await eventually(
            lambda n=name: _get(system.manager, resources.JOBS, s.ns, n),
            lambda j: _condition(j, "Complete") == "True",
            what=f"{name} Complete",
        )


async def preempt_on_the_same_worker(system: System) -> None:
    """e2e_test.go "Should preempt a running low-priority workload when a high-priority workload is admitted (same
    worker)": a low-priority Job of two h100s is admitted on the manager and on worker 1 only (worker 2 has one),
    its copy's spec the manager's; a high-priority one of two h100s preempts it on the manager (Evicted,
    Preempted) and is admitted on worker 1 in its place; the low one's copies are gone from both workers."""
    s = await setup(system, "preempt")
    w1, w2 = system.workers
    wls: dict[str, str] = {}
    for job, pc in (("low-job", s.low), ("high-job", s.high)):
        await kube.create_object(
            system.manager.api,
            resources.JOBS,
            namespace=s.ns,
            body=_job(job, s.ns, s.lq, requests={GPU_HIGH: "2"}, seconds=120, priority_class=pc),
        )
        wl = await eventually(
            lambda j=job: _workload_of(system.manager, s.ns, j),
            lambda w: _condition(w, "Admitted") == "True",
            what=f"{job}'s workload admitted on the manager",
        )
        name = wls[job] = wl["metadata"]["name"]
        copy = await eventually(
            lambda n=name: _get(w1, resources.WORKLOADS, s.ns, n),
            lambda w: _condition(w, "Admitted") == "True",
            what=f"{name} admitted on worker 1",
        )
        wl = await _get(system.manager, resources.WORKLOADS, s.ns, name)
        assert wl is not None and _same_spec(copy["spec"], wl["spec"]), (copy["spec"], wl["spec"])
        # Kueue checks this in an Eventually: worker 2's copy goes once worker 1's admission is chosen
        await eventually(
            lambda n=name: _get(w2, resources.WORKLOADS, s.ns, n), lambda w: w is None, what=f"no {name} on worker 2"
        )
    low = wls["low-job"]
    await eventually(
        lambda: _get(system.manager, resources.WORKLOADS, s.ns, low),
        lambda w: _condition(w, "Evicted") == "True" and _condition(w, "Preempted") == "True",
        what=f"{low} preempted on the manager",
    )
    await _gone_from_workers(system, s.ns, resources.WORKLOADS, low)


async def readmit_after_an_eviction_on_the_worker(system: System) -> None:
    """e2e_test.go "Should re-do admission process when workload gets evicted in the worker": a Job of two h100s
    runs on worker 1 only; the workers' quotas are swapped (worker 1 one h100, worker 2 two) and worker 1's copy
    is Evicted (Preempted, "By test"); the manager admits it again on worker 2 (``status.clusterName``), its copy
    there admitted with the manager's spec, none left on worker 1."""
    s = await setup(system, "readmit")
    w1, w2 = system.workers
    await kube.create_object(
        system.manager.api,
        resources.JOBS,
        namespace=s.ns,
        body=_job(
            "job",
            s.ns,
            s.lq,
            requests={"cpu": "100m", "memory": "0.1G", GPU_HIGH: "2"},
            seconds=120,
            priority_class=s.low,
        ),
    )
    wl = await eventually(
        lambda: _workload_of(system.manager, s.ns, "job"),
        lambda w: _condition(w, "Admitted") == "True",
        what="the job's workload admitted on the manager",
    )
    name = wl["metadata"]["name"]
    copy = await eventually(
        lambda: _get(w1, resources.WORKLOADS, s.ns, name),
        lambda w: _condition(w, "Admitted") == "True",
        what=f"{name} admitted on worker 1",
    )
    assert _same_spec(copy["spec"], wl["spec"]), (copy["spec"], wl["spec"])
    await eventually(lambda: _get(w2, resources.WORKLOADS, s.ns, name), lambda w: w is None, what="no copy on worker 2")
    swapped = (dict(WORKER_QUOTAS[0]) | {GPU_HIGH: "1"}, dict(WORKER_QUOTAS[1]) | {GPU_HIGH: "2"})
    for worker, quotas in zip(system.workers, swapped, strict=True):
        await kube.apply_manifest(worker.api, _cq(s.cq, s.flavor, quotas, []))
    copy = await _get(w1, resources.WORKLOADS, s.ns, name)
    assert copy is not None
    evicted = {
        "type": "Evicted",
        "status": "True",
        "reason": "Preempted",
        "message": "By test",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    conditions = [c for c in copy["status"].get("conditions") or [] if c["type"] != "Evicted"] + [evicted]
    await kube.patch_object(
        w1.api,
        resources.WORKLOADS,
        namespace=s.ns,
        name=name,
        subresource="status",
        patch={"status": {"conditions": conditions}},
    )
    await eventually(
        lambda: _get(system.manager, resources.WORKLOADS, s.ns, name),
        lambda w: ((w or {}).get("status") or {}).get("clusterName") == s.clusters[1],
        what=f"{name} admitted again, on worker 2",
    )
    manager_wl = await _get(system.manager, resources.WORKLOADS, s.ns, name)
    copy = await eventually(
        lambda: _get(w2, resources.WORKLOADS, s.ns, name),
        lambda w: _condition(w, "Admitted") == "True",
        what=f"{name} admitted on worker 2",
    )
    assert manager_wl is not None and _same_spec(copy["spec"], manager_wl["spec"]), copy["spec"]
    await eventually(lambda: _get(w1, resources.WORKLOADS, s.ns, name), lambda w: w is None, what="no copy on worker 1")


def _same_spec(copy: dict[str, Any], manager: dict[str, Any]) -> bool:
    """BeComparableTo(manager's Spec) of a copy: the podSets, queue and priority as the manager has them."""
    keys = ("podSets", "queueName", "priority", "priorityClassRef")
    return {k: copy.get(k) for k in keys} == {k: manager.get(k) for k in keys}


STEPS: list[Callable[[System], Awaitable[None]]] = [
    run_a_job_on_worker,
    multikueue_and_regular_job_on_one_cluster,
    preempt_on_the_same_worker,
    readmit_after_an_eviction_on_the_worker,
]
