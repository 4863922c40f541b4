"""Kueue's own end-to-end cases (test/e2e/singlecluster/) on ``kueue-es demo --keep``, through the real kubectl.

The objects are those Kueue's e2e tests build with its wrappers (pkg/util/testingjobs/*, pkg/util/testing/v1beta2),
written out as manifests: a ResourceFlavor with node labels, a ClusterQueue of its quotas, a LocalQueue, a Job with
the queue-name label, plain pods and pod groups, StatefulSets and Deployments. Each case gets its own namespace and
its own ClusterQueue (named after the namespace, as Kueue's do), so the cases of a module share one system and do
not see each other's quota.

Kueue's agnhost behaviours map to the simulated kubelet's run time (:data:`SIM_DURATION_ANNOTATION`): "exit fast" is
the demo's ``--duration`` (no annotation), "wait for deletion" is :data:`FOREVER` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kueue_es.services import ports
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.sim.controllers import APPWRAPPER_REF, LWS_REF, RAYCLUSTER_REF, RAYJOB_REF, TRAINING_REFS, TRAINJOB_REF
from kueue_es.sim.kubelet import SIM_DURATION_ANNOTATION
from tests.e2e.demo_process import Demo, eventually
from tests.e2e.waiting import eventually as _eventually
from tests.kube.test_kubectl import Kubectl

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
IMAGE = "registry.k8s.io/e2e-test-images/agnhost:2.53"
FOREVER = 3600  # seconds: Kueue's BehaviorWaitForDeletion, a container that runs until its pod is deleted
KUEUE = "kueue.x-k8s.io/v1beta2"


#: The kinds the steps read, by the name they give them.
KINDS = {
    "job": resources.JOBS,
    "jobs": resources.JOBS,
    "cronjob": resources.CRON_JOBS,
    "pod": resources.PODS,
    "pods": resources.PODS,
    "events": resources.EVENTS,
    "workload": resources.WORKLOADS,
    "workloads": resources.WORKLOADS,
    "clusterqueue": resources.CLUSTER_QUEUES,
    "localqueue": resources.LOCAL_QUEUES,
    "resourceflavor": resources.RESOURCE_FLAVORS,
    "statefulset": resources.STATEFUL_SETS,
    "deployment": resources.DEPLOYMENTS,
    "jobset": resources.JOBSETS,
    "leaderworkerset": LWS_REF,
    "rayjob": RAYJOB_REF,
    "raycluster": RAYCLUSTER_REF,
    "appwrapper": APPWRAPPER_REF,
    "pytorchjob": TRAINING_REFS["PyTorchJob"],
    "jaxjob": TRAINING_REFS["JAXJob"],
    "mpijob": TRAINING_REFS["MPIJob"],
    "trainjob": TRAINJOB_REF,
}


class E2E:
    """kubectl on the demo's API server for what a user does (create, label, patch, delete), and an API client for
    the reads Kueue's e2e helpers (test/util/e2e.go) poll (a kubectl process per poll would load the machine)."""

    def __init__(self, kubectl: Kubectl, api: Any, run_dir: Path | None = None) -> None:
        self.kubectl = kubectl
        self.api = api
        self.run_dir = run_dir

    def metrics_url(self) -> str:
        """The admitter's ``/metrics`` (Kueue's families, docs/metrics.md), where Kueue's e2e GetKueueMetrics curls
        the controller's: the demo's admitter reports the health port it bound under ``logs/ports/admitter`` of the
        run directory (kueue_es/services/ports.py), read again at each call as a restarted admitter binds another."""
        assert self.run_dir is not None, "metrics_url: this E2E was made without the demo's run directory"
        port = ports.read(self.run_dir / "logs" / "ports" / "admitter", ports.HEALTH)
        assert port, f"metrics_url: the admitter has reported no health port under {self.run_dir}"
        return f"http://127.0.0.1:{port}/metrics"

    async def ready_metrics_url(self) -> str:
        """:meth:`metrics_url` once the admitter has said where it serves (a step may start before the demo's
        admitter has bound its health port)."""
        assert self.run_dir is not None, "ready_metrics_url: this E2E was made without the demo's run directory"
        where = self.run_dir / "logs" / "ports" / "admitter"

        async def reported() -> int | None:
            return ports.read(where, ports.HEALTH)

        await eventually(reported, what="the admitter's health port")
        return self.metrics_url()

    async def kueue_metrics(self) -> str:
        """The text of the admitter's ``/metrics`` (:meth:`ready_metrics_url`)."""
        url = await self.ready_metrics_url()
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            response.raise_for_status()
            return await response.text()

    async def apply(self, *objects: Mapping[str, Any]) -> None:
        """``kubectl apply`` the objects (as a user does with a manifest)."""
        await self.kubectl.ok("apply", "-f", "-", stdin=yaml.safe_dump_all([dict(o) for o in objects]))

    async def create(self, *objects: Mapping[str, Any]) -> None:
        """``kubectl create`` the objects."""
        await self.kubectl.ok("create", "-f", "-", stdin=yaml.safe_dump_all([dict(o) for o in objects]))

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """The object, None when it is not there."""
        try:
            return await kube.get_object(self.api, KINDS[kind], namespace=namespace, name=name)
        except kube_errors.NotFoundError:
            return None

    async def must_get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The object; AssertionError when it is not there."""
        found = await self.get(kind, name, namespace)
        assert found is not None, f"{kind} {namespace}/{name} not found"
        return found

    async def list(self, kind: str, namespace: str, *selector: str) -> list[dict[str, Any]]:
        """The objects of ``kind`` in ``namespace`` (label ``selector`` when given)."""
        found, _ = await kube.list_objects(
            self.api, KINDS[kind], namespace=namespace, label_selector=",".join(selector) or None
        )
        return found

    async def workload_of(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        """The Workload Kueue made for the job ``kind``/``name`` (found by its ``kueue.x-k8s.io/job-uid`` label, as
        GetWorkloadNameForJob's hash names it), None while there is none."""
        job = await self.get(kind, name, namespace)
        if job is None:
            return None
        found = await self.list("workloads", namespace, f"{JOB_UID_LABEL}={job['metadata']['uid']}")
        return found[0] if found else None

    async def wait_workload_of(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        """:meth:`workload_of`, waited for."""
        return dict(
            await eventually(
                lambda: self.workload_of(kind, name, namespace), what=f"the Workload of {kind} {namespace}/{name}"
            )
        )

    async def wait(self, kind: str, name: str, namespace: str | None, check: Any, *, what: str) -> dict[str, Any]:
        """The object once ``check(object)`` holds (the object may be missing meanwhile)."""

        # the object itself is what eventually() reads, so that a timeout shows it as last seen
        found = await _eventually(
            lambda: self.get(kind, name, namespace),
            lambda obj: obj is not None and bool(check(obj)),
            what=what,
            timeout=90,
            interval=0.5,
        )
        return dict(found)

    async def wait_gone(self, kind: str, name: str, namespace: str | None) -> None:
        """Until the object is gone (ExpectObjectToBeDeleted)."""

        async def gone() -> bool:
            return await self.get(kind, name, namespace) is None

        await eventually(gone, what=f"{kind} {namespace}/{name} deleted")

    async def job_unsuspended_with(self, name: str, namespace: str, node_selector: Mapping[str, str]) -> None:
        """util.ExpectJobUnsuspendedWithNodeSelectors: the Job runs, its template's nodeSelector is the flavor's."""
        await self.wait(
            "job",
            name,
            namespace,
            lambda j: (
                j["spec"].get("suspend") is False and j["spec"]["template"]["spec"].get("nodeSelector") == node_selector
            ),
            what=f"Job {namespace}/{name} unsuspended with nodeSelector {dict(node_selector)}",
        )

    async def status_patch(self, kind: str, name: str, namespace: str | None, status: Mapping[str, Any]) -> None:
        """A merge patch of the status subresource (what a controller, or Kueue's test client, writes)."""
        patch = json.dumps({"status": dict(status)})
        await self.kubectl.ok("patch", kind, name, *_ns(namespace), "--subresource=status", "--type=merge", "-p", patch)


def _ns(namespace: str | None) -> list[str]:
    return ["-n", namespace] if namespace else []


@contextlib.asynccontextmanager
async def demo_system(
    run_dir: Path, *, feature_gates: str | None = None, config: Path | None = None
) -> AsyncIterator[E2E]:
    """``kueue-es demo --keep --jobs 0`` in ``run_dir`` for the block (``--feature-gates``, ``--config`` when
    given), and :class:`E2E` on it; stopped after."""
    demo = Demo(run_dir, jobs=0, feature_gates=feature_gates, config=config)
    waiting: list[str] = []
    try:
        kubectl = await demo.start()
        api = await kube.make_api_client(kubeconfig=run_dir / "kubeconfig")
        try:
            yield E2E(kubectl, api, run_dir)
        except Exception:
            waiting = await _show_workloads(kubectl)
            raise
        finally:
            await api.close()
    finally:
        await demo.stop()
        await _explain_stopped(run_dir, waiting)


#: How many of the Workloads not admitted when a case failed :func:`_explain_stopped` tells the story of.
EXPLAINED_AT_MOST = 8


async def _show_workloads(kubectl: Kubectl) -> list[str]:
    """After a failure: print every Workload with its conditions (pytest shows it with the failure: a case that
    failed once in CI is then explained by its own run); returns those not admitted, ``namespace/name``."""
    code, out, _ = await kubectl.run("get", "workloads", "-A", "-o", "json")
    if code != 0:
        print("post-mortem: kubectl get workloads failed")
        return []
    waiting = []
    print("post-mortem: the Workloads when the case failed")
    for item in json.loads(out).get("items", []):
        meta, conditions = item["metadata"], (item.get("status") or {}).get("conditions") or []
        key = f"{meta['namespace']}/{meta['name']}"
        said = "; ".join(f"{c['type']}={c['status']} {c.get('reason', '')}: {c.get('message', '')}" for c in conditions)
        print(f"  {key} queue={item['spec'].get('queueName')} {said}")
        if not any(c["type"] == "Admitted" and c["status"] == "True" for c in conditions):
            waiting.append(key)
    return waiting


async def _explain_stopped(run_dir: Path, waiting: list[str]) -> None:
    """After a failure, once the demo stopped: ``kueue-es explain`` of the Workloads not admitted, from the
    log the demo left in ``run_dir``."""
    for key in waiting[:EXPLAINED_AT_MOST]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kueue_es", "explain", key, "--store", str(run_dir / "nats"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
        out, _ = await process.communicate()
        print(f"post-mortem: kueue-es explain {key}\n{out.decode(errors='replace')}")


Step = Callable[[E2E], Awaitable[None]]


async def run_steps(e2e: E2E, steps: Sequence[Step]) -> None:
    """Run the steps at once: each has its own namespace and ClusterQueue, so none sees another's quota (Kueue
    runs its cases one by one on a cluster they each leave empty). The first failure cancels the others."""
    async with asyncio.TaskGroup() as group:
        for step in steps:
            group.create_task(step(e2e), name=step.__name__)


# -- the objects (Kueue's testing wrappers, as manifests) -------------------------------------------------------------


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The condition ``kind`` of the object's status ({} when it has none)."""
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return {}


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    """The object's condition ``kind`` is True."""
    return condition(obj, kind).get("status") == "True"


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def flavor(
    name: str, *, node_labels: Mapping[str, str] | None = None, tolerations: Iterable[Any] = ()
) -> dict[str, Any]:
    """MakeResourceFlavor(name).NodeLabel(...).Toleration(...)."""
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(node_labels)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(
    name: str,
    flavors: Mapping[str, Mapping[str, str]],
    *,
    preemption: str | None = None,
    admission_checks: Iterable[str] = (),
) -> dict[str, Any]:
    """MakeClusterQueue(name).ResourceGroup(one MakeFlavorQuotas per flavor: resource -> nominal quota)."""
    covered = sorted({r for quotas in flavors.values() for r in quotas})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": covered,
                "flavors": [
                    {"name": f, "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()]}
                    for f, quotas in flavors.items()
                ],
            }
        ],
    }
    if preemption:
        spec["preemption"] = {"withinClusterQueue": preemption}
    if admission_checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in admission_checks]}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, ns: str, cq: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"clusterQueue": cq},
    }


def priority_class(name: str, value: int) -> dict[str, Any]:
    """MakeWorkloadPriorityClass(name).PriorityValue(value)."""
    return {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def container(
    requests: Mapping[str, str], *, limits: bool = True, image: str = IMAGE, name: str = "c", env: Iterable[Any] = ()
) -> dict[str, Any]:
    """A container asking ``requests`` (and as limits, RequestAndLimit)."""
    resources: dict[str, Any] = {"requests": dict(requests)}
    if limits:
        resources["limits"] = dict(requests)
    out: dict[str, Any] = {"name": name, "image": image, "resources": resources}
    if env:
        out["env"] = list(env)
    return out


def run_for(seconds: float | None) -> dict[str, str]:
    """The annotation giving a pod or Job its simulated run time (None: the demo's default, Kueue's exit fast)."""
    return {} if seconds is None else {SIM_DURATION_ANNOTATION: f"{seconds:g}"}


def job(
    name: str,
    ns: str,
    *,
    queue: str | None = "main",
    requests: Mapping[str, str] | None = None,
    parallelism: int | None = None,
    completions: int | None = None,
    seconds: float | None = FOREVER,
    node_selector: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    containers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """testingjob.MakeJob(name, ns).Queue(queue).RequestAndLimit(...)...: a batch/v1 Job of one container."""
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": dict(labels or {})}
    if queue is not None:
        meta["labels"][QUEUE_LABEL] = queue
    meta["annotations"] = {**run_for(seconds), **(annotations or {})}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": containers or [container(requests or {"cpu": "200m", "memory": "20Mi"})],
    }
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    spec: dict[str, Any] = {"template": {"spec": pod_spec}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def pod(
    name: str,
    ns: str,
    *,
    queue: str | None,
    cpu: str,
    seconds: float | None = None,
    group: tuple[str, int] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """podtesting.MakePod(name, ns).Queue(queue).RequestAndLimit(cpu) (.MakeGroup: ``group`` = (name, count))."""
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": dict(labels or {})}
    if queue is not None:
        meta["labels"][QUEUE_LABEL] = queue
    meta["annotations"] = {**run_for(seconds), **(annotations or {})}
    if group is not None:
        meta["labels"][POD_GROUP_LABEL] = group[0]
        meta["annotations"][POD_GROUP_TOTAL] = str(group[1])
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [container({"cpu": cpu})]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def serving(
    kind: str, name: str, ns: str, *, queue: str | None, replicas: int, cpu: str = "200m", image: str = IMAGE
) -> dict[str, Any]:
    """deploymenttesting.MakeDeployment / statefulsettesting.MakeStatefulSet(name, ns).Replicas(n).Queue(queue)
    .RequestAndLimit(cpu, ...): pods that run until deleted."""
    labels = {"app": f"{name}-pod"}
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": {}}
    if queue is not None:
        meta["labels"][QUEUE_LABEL] = queue
    template = {
        "metadata": {"labels": labels},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [container({"cpu": cpu}, image=image)]},
    }
    spec: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": spec}
