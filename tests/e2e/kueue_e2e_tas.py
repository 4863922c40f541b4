"""The steps of Kueue's Topology-Aware Scheduling e2e cases: test/e2e/singlecluster/baseline/tas_test.go (Describe
"TopologyAwareScheduling") and test/e2e/tas/baseline/ (job_test.go, pod_group_test.go, statefulset_test.go,
hotswap_test.go), run by tests/e2e/test_kueue_e2e_tas.py on one ``kueue-es demo --keep`` with Kueue's e2e manager
Configuration (tests/fixtures/kueue-e2e/, as both suites run with test/e2e/config/default).

The Nodes are made as Kueue's kind clusters label theirs, with the status their kubelet writes (the emulator keeps a
Node's status given at create):

- the singlecluster cases run on hack/testing/kind-cluster.yaml's workers: ``kind-worker`` (``instance-type:
  on-demand``) and ``kind-worker2`` (``instance-type: spot``), shared by those cases as in Kueue (each asks well
  under a node's CPU);
- the TAS cases run on hack/testing/kind-cluster-tas.yaml's eight workers, ``cloud.provider.com/node-group:
  tas-group``, blocks b1 (racks r1, r2) and b2 (r1, r2) of two hosts each, one ``example.com/gpu`` each (the TAS
  suite's BeforeSuite patches it into every node's capacity). Kueue runs its cases one after another on those eight
  nodes; here they run at once, so each step gets nodes of its own, ``<step>-worker`` .. ``<step>-worker4`` (block
  b1's: :data:`MADE_WORKERS` says why not b2's too), in a node group ``tas-group-<step>`` its flavor selects: the
  placements Kueue expects on ``kind-workerN`` are expected on ``<step>-workerN``.

Each step has its own namespace, Topology, flavor and ClusterQueue (Kueue's cluster-wide "datacenter", "tas-flavor"
and "cluster-queue" get the step's name as suffix). The docstring of each step quotes Kueue's ``When`` and ``It``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from events import models, tas
from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import (
    E2E,
    POD_GROUP_LABEL,
    POD_GROUP_TOTAL,
    QUEUE_LABEL,
    Step,
    cluster_queue,
    is_true,
    local_queue,
    namespace,
    run_for,
)
from tests.e2e.kueue_e2e import (
    job as make_job,
)
from tests.e2e.kueue_e2e import (
    serving as make_serving,
)

HOSTNAME = "kubernetes.io/hostname"
BLOCK = "cloud.provider.com/topology-block"  # utiltesting.DefaultBlockTopologyLevel
RACK = "cloud.provider.com/topology-rack"  # utiltesting.DefaultRackTopologyLevel
NODE_GROUP = "cloud.provider.com/node-group"  # helpers_test.go tasNodeGroupLabel
GPU = "example.com/gpu"  # helpers_test.go extraResource
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
POD_GROUP_INDEX = "kueue.x-k8s.io/pod-group-pod-index"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"
STS_INDEX = "apps.kubernetes.io/pod-index"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
KUEUE = "kueue.x-k8s.io/v1beta2"

#: hack/testing/kind-cluster-tas.yaml's workers in order: (block, rack) of kind-worker .. kind-worker8.
TAS_WORKERS = (("b1", "r1"), ("b1", "r1"), ("b1", "r2"), ("b1", "r2"), ("b2", "r1"), ("b2", "r1"), ("b2", "r2"))
TAS_WORKERS += (("b2", "r2"),)
#: The workers each step makes: block b1's four. Every placement Kueue's cases expect lies in b1 (b1 and b2 are
#: alike and b1 sorts first), so b2's four only added a step's worth of Node facts each to a loaded 2-core demo:
#: with them the steps ran at over twice the wall, past CI's budget.
MADE_WORKERS = TAS_WORKERS[:4]


def node(name: str, labels: Mapping[str, str], *, gpu: bool) -> dict[str, Any]:
    """A kind worker Node as its kubelet reports it: Ready, 8 CPUs, 16Gi, 110 pods (one ``example.com/gpu`` as the
    TAS suite's BeforeSuite patches in when ``gpu``), labelled ``labels`` and with its hostname label."""
    capacity = {"cpu": "8", "memory": "16Gi", "pods": "110", **({GPU: "1"} if gpu else {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {**labels, HOSTNAME: name}},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def worker(prefix: str, n: int) -> str:
    """kind's name of the ``n``-th worker (1-based: ``kind-worker``, ``kind-worker2``, ...), with our prefix."""
    return f"{prefix}-worker" if n == 1 else f"{prefix}-worker{n}"


async def kind_cluster_nodes(e2e: E2E) -> None:
    """hack/testing/kind-cluster.yaml's workers: kind-worker (on-demand) and kind-worker2 (spot)."""
    await e2e.create(
        node("kind-worker", {"instance-type": "on-demand"}, gpu=False),
        node("kind-worker2", {"instance-type": "spot"}, gpu=False),
    )


async def _tas_cluster(e2e: E2E, step: str, *, cpu: str | None = None) -> tuple[str, str]:
    """The TAS suite's BeforeEach on eight nodes of the step's own (module docstring): Topology ``datacenter``
    (MakeDefaultThreeLevelTopology: block, rack, hostname), flavor ``tas-flavor`` on the node group, ClusterQueue of
    8 GPUs (and ``cpu`` when given, as hotswap_test.go's), LocalQueue ``main``. Returns (namespace, ClusterQueue)."""
    ns, group = f"e2e-tas-{step}", f"tas-group-{step}"
    await e2e.create(
        *(
            node(worker(step, i + 1), {NODE_GROUP: group, BLOCK: block, RACK: rack}, gpu=True)
            for i, (block, rack) in enumerate(MADE_WORKERS)
        )
    )
    topology = f"datacenter-{step}"
    # in coveredResources' (sorted) order, as the ClusterQueue webhook wants the flavor's resources
    quotas = {**({"cpu": cpu} if cpu else {}), GPU: "8"}
    cq = f"cluster-queue-{step}"
    await e2e.apply(
        namespace(ns),
        _topology(topology, BLOCK, RACK, HOSTNAME),
        _tas_flavor(f"tas-flavor-{step}", {NODE_GROUP: group}, topology),
        cluster_queue(cq, {f"tas-flavor-{step}": quotas}),
        local_queue("main", ns, cq),
    )
    await _active(e2e, cq, ns)
    return ns, cq


def _topology(name: str, *levels: str) -> dict[str, Any]:
    """MakeTopology(name).Levels(levels...)."""
    return {
        "apiVersion": KUEUE,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def _tas_flavor(name: str, node_labels: Mapping[str, str], topology: str) -> dict[str, Any]:
    """MakeResourceFlavor(name).NodeLabel(...).TopologyName(topology)."""
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": dict(node_labels), "topologyName": topology},
    }


async def _active(e2e: E2E, cq: str, ns: str) -> None:
    """CreateClusterQueuesAndWaitForActive, CreateLocalQueuesAndWaitForActive."""
    await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    await e2e.wait("localqueue", "main", ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {ns}/main active")


def assignment(workload: Mapping[str, Any]) -> tas.Assignment | None:
    """The topology assignment of the Workload's only pod set (None while it has none)."""
    psas = ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    assert len(psas) <= 1, psas
    raw = psas[0].get("topologyAssignment") if psas else None
    return tas.decode(msgspec.convert(raw, models.TopologyAssignment)) if raw else None


def domains(workload: Mapping[str, Any]) -> list[tuple[tuple[str, ...], int]] | None:
    """``(values, count)`` of each domain of the assignment, in order (None while there is none)."""
    found = assignment(workload)
    return None if found is None else [(d.values, d.count) for d in found.domains]


def hosts(*names: str, count: int = 1) -> list[tuple[tuple[str, ...], int]]:
    """The domains Kueue's tests expect: ``count`` pods on each hostname (levels: hostname only)."""
    return [((name,), count) for name in names]


async def _admitted_with(e2e: E2E, kind: str, name: str, ns: str, want: Sequence[Any]) -> dict[str, Any]:
    """Await the Workload of ``kind``/``name`` to have an admission and its pod set the hostname domains ``want``."""
    workload = await e2e.wait_workload_of(kind, name, ns)
    return await _topology_is(e2e, workload["metadata"]["name"], ns, want)


async def _topology_is(e2e: E2E, wl: str, ns: str, want: Sequence[Any]) -> dict[str, Any]:
    """expectWorkloadTopologyAssignment: levels [hostname], the domains ``want`` in order."""

    def placed(w: dict[str, Any]) -> bool:
        found = assignment(w)
        return found is not None and found.levels == (HOSTNAME,) and domains(w) == list(want)

    return await e2e.wait("workload", wl, ns, placed, what=f"Workload {ns}/{wl} placed on {list(want)}")


async def _finished(e2e: E2E, wl: str, ns: str) -> None:
    """ExpectWorkloadToFinishWithTimeout."""
    await e2e.wait("workload", wl, ns, lambda w: is_true(w, "Finished"), what=f"Workload {ns}/{wl} finished")


async def _scheduled(e2e: E2E, ns: str, count: int, *selector: str) -> list[dict[str, Any]]:
    """The namespace's pods (``selector``) once ``count`` of them are bound to a node (spec.nodeName != "") and
    there are no more."""

    async def read() -> list[dict[str, Any]] | None:
        pods = [p for p in await e2e.list("pods", ns, *selector) if not p["metadata"].get("deletionTimestamp")]
        bound = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
        return bound if len(bound) == count == len(pods) else None

    return list(await eventually(read, what=f"{count} pods of {ns} scheduled", timeout=90))


def _by_index(pods: Sequence[Mapping[str, Any]], label: str) -> dict[str, str]:
    """Pod index label -> node name (the ranks-ordering checks)."""
    return {p["metadata"]["labels"][label]: p["spec"]["nodeName"] for p in pods}


def _tas_job(name: str, ns: str, *, pods: int, completions: int | None = None, **kw: Any) -> dict[str, Any]:
    """testingjob.MakeJob(name, ns).Queue("main").Parallelism(pods).Completions(...).RequestAndLimit(gpu, 1) with
    the pod annotations ``pod_annotations`` (and ``cpu``, ``indexed``, ``seconds``, ``tolerations`` when given)."""
    annotations = dict(kw.pop("pod_annotations", {}))
    requests = {GPU: "1", **({"cpu": kw.pop("cpu")} if "cpu" in kw else {})}
    indexed, tolerations = kw.pop("indexed", False), kw.pop("tolerations", ())
    out = make_job(
        name, ns, parallelism=pods, completions=completions or pods, requests=requests, seconds=kw.pop("seconds")
    )
    assert not kw, kw
    template = out["spec"]["template"]
    template["metadata"] = {"annotations": annotations, "labels": {"job-name": name}}
    if indexed:
        out["spec"]["completionMode"] = "Indexed"
    if tolerations:
        template["spec"]["tolerations"] = list(tolerations)
    return out


# -- test/e2e/singlecluster/baseline/tas_test.go ----------------------------------------------------------------------


async def _singlecluster(e2e: E2E, ns: str) -> None:
    """tas_test.go's BeforeEach: Topology ``hostname-<ns>`` (MakeDefaultOneLevelTopology), flavor ``on-demand-<ns>``
    (instance-type on-demand) of 1 CPU and 1Gi, LocalQueue ``main``."""
    cq, rf, topology = f"cluster-queue-{ns}", f"on-demand-{ns}", f"hostname-{ns}"
    await e2e.apply(
        namespace(ns),
        _topology(topology, HOSTNAME),
        _tas_flavor(rf, {"instance-type": "on-demand"}, topology),
        cluster_queue(cq, {rf: {"cpu": "1", "memory": "1Gi"}}),
        local_queue("main", ns, cq),
    )
    await _active(e2e, cq, ns)


async def job_via_tas(e2e: E2E) -> None:
    """tas_test.go, When "Creating a Job requesting TAS", It "should admit a Job via TAS"."""
    ns = "e2e-tas-sc-job"
    await _singlecluster(e2e, ns)
    job = make_job("test-job", ns, requests={"cpu": "700m", "memory": "20Mi"}, seconds=None)
    job["spec"]["template"]["metadata"] = {"annotations": {REQUIRED: HOSTNAME}}
    await e2e.create(job)
    workload = await _admitted_with(e2e, "job", "test-job", ns, hosts("kind-worker"))
    await e2e.job_unsuspended_with("test-job", ns, {"instance-type": "on-demand"})
    await _finished(e2e, workload["metadata"]["name"], ns)


def _tas_pod(name: str, ns: str, *, group: tuple[str, int] | None = None) -> dict[str, Any]:
    """testingpod.MakePod(name, ns).Queue("main").Annotation(required: hostname).RequestAndLimit(cpu 200m, memory
    200Mi), exit fast (MakeGroup when ``group``)."""
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: "main"}}
    meta["annotations"] = {REQUIRED: HOSTNAME, **run_for(None)}
    if group is not None:
        meta["labels"][POD_GROUP_LABEL] = group[0]
        meta["annotations"][POD_GROUP_TOTAL] = str(group[1])
    res = {"cpu": "200m", "memory": "200Mi"}
    spec = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "agnhost", "resources": {"requests": res, "limits": res}}],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _gates(pod: Mapping[str, Any]) -> set[str]:
    return {g["name"] for g in (pod.get("spec") or {}).get("schedulingGates") or []}


async def single_pod_via_tas(e2e: E2E) -> None:
    """tas_test.go, When "Creating a Pod requesting TAS", It "should admit a single Pod via TAS"."""
    ns = "e2e-tas-sc-pod"
    await _singlecluster(e2e, ns)
    await e2e.create(_tas_pod("test-pod", ns))
    # the webhook's gates, as the create returns the Pod (read back at once: it may be ungated by now)
    created = await e2e.must_get("pod", "test-pod", ns)
    assert {ADMISSION_GATE, TOPOLOGY_GATE} <= _gates(created) or not _gates(created), created["spec"]
    want = {"instance-type": "on-demand", HOSTNAME: "kind-worker"}
    await e2e.wait("pod", "test-pod", ns, lambda p: p["spec"].get("nodeSelector") == want, what="Pod ungated")
    workload = await _admitted_with(e2e, "pod", "test-pod", ns, hosts("kind-worker"))
    await _finished(e2e, workload["metadata"]["name"], ns)


async def pod_group_via_tas(e2e: E2E) -> None:
    """tas_test.go, When "Creating a Pod requesting TAS", It "should admit a Pod group via TAS"."""
    ns = "e2e-tas-sc-group"
    await _singlecluster(e2e, ns)
    names = ["group-0", "group-1"]
    await e2e.create(*(_tas_pod(n, ns, group=("group", 2)) for n in names))
    want = {"instance-type": "on-demand", HOSTNAME: "kind-worker"}
    for name in names:
        await e2e.wait(
            "pod",
            name,
            ns,
            lambda p: not _gates(p) and p["spec"].get("nodeSelector") == want,
            what=f"Pod {ns}/{name} ungated onto kind-worker",
        )
    await _topology_is(e2e, "group", ns, hosts("kind-worker", count=2))
    await _finished(e2e, "group", ns)


# -- test/e2e/tas/baseline/job_test.go ---------------------------------------------------------------------------------


async def job_rack_required_not_admitted(e2e: E2E) -> None:
    """job_test.go, When "Creating a Job", It "Should not admit a Job if Rack required" (three pods of one GPU; a
    rack has two nodes of one GPU)."""
    step = "rackreq"
    ns, _ = await _tas_cluster(e2e, step)
    await e2e.create(_tas_job("test-job", ns, pods=3, pod_annotations={REQUIRED: RACK}, seconds=None))
    workload = await e2e.wait_workload_of("job", "test-job", ns)
    wl = workload["metadata"]["name"]
    # Kueue's Eventually sees no admission; here: the Workload is found inadmissible, and still has none
    pending = await e2e.wait(
        "workload", wl, ns, lambda w: (w.get("status") or {}).get("conditions"), what=f"Workload {ns}/{wl} tried"
    )
    assert not (pending.get("status") or {}).get("admission"), pending["status"]


async def job_rack_preferred(e2e: E2E) -> None:
    """job_test.go, When "Creating a Job", It "should admit a Job to TAS Block if Rack preferred"."""
    step = "rackpref"
    ns, _ = await _tas_cluster(e2e, step)
    await e2e.create(_tas_job("test-job", ns, pods=3, pod_annotations={PREFERRED: RACK}, seconds=None))
    want = hosts(worker(step, 1), worker(step, 2), worker(step, 3))
    workload = await _admitted_with(e2e, "job", "test-job", ns, want)
    await _finished(e2e, workload["metadata"]["name"], ns)


async def job_block_required(e2e: E2E) -> None:
    """job_test.go, When "Creating a Job", It "Should admit a Job to TAS Block if Block required"."""
    step = "blockreq"
    ns, _ = await _tas_cluster(e2e, step)
    await e2e.create(_tas_job("test-job", ns, pods=3, pod_annotations={REQUIRED: BLOCK}, seconds=None))
    want = hosts(worker(step, 1), worker(step, 2), worker(step, 3))
    workload = await _admitted_with(e2e, "job", "test-job", ns, want)
    await _finished(e2e, workload["metadata"]["name"], ns)


async def job_parallelism_below_completions(e2e: E2E) -> None:
    """job_test.go, When "Creating a Job", It "Should allow to run a Job with parallelism < completions"."""
    step = "waves"
    ns, _ = await _tas_cluster(e2e, step)
    job = _tas_job("test-job", ns, pods=2, completions=3, pod_annotations={REQUIRED: BLOCK}, seconds=2)
    await e2e.create(job)
    workload = await e2e.wait_workload_of("job", "test-job", ns)
    await _finished(e2e, workload["metadata"]["name"], ns)


async def _ranks(e2e: E2E, step: str, annotations: Mapping[str, str]) -> None:
    """job_test.go's two ranks-ordering cases: an Indexed Job of four pods, each on the worker of its rank."""
    ns, _ = await _tas_cluster(e2e, step)
    job = _tas_job("ranks-job", ns, pods=4, indexed=True, pod_annotations=annotations, seconds=3600)
    await e2e.create(job)
    await e2e.wait(
        "job",
        "ranks-job",
        ns,
        lambda j: j["spec"].get("suspend") is False and (j.get("status") or {}).get("ready") == 4,
        what="Job unsuspended, four pods active and ready",
    )
    pods = await _scheduled(e2e, ns, 4, "job-name=ranks-job")
    assert _by_index(pods, JOB_INDEX) == {str(i): worker(step, i + 1) for i in range(4)}, _by_index(pods, JOB_INDEX)


async def job_ranks_ordering(e2e: E2E) -> None:
    """job_test.go, When "Creating a Job", It "Should place pods based on the ranks-ordering"."""
    await _ranks(e2e, "ranks", {REQUIRED: BLOCK})


async def job_ranks_ordering_implicit(e2e: E2E) -> None:
    """job_test.go, When "Creating a Job", It "Should place pods based on the ranks-ordering even if the Job has
    no TAS annotation (Implicit TAS)"."""
    await _ranks(e2e, "implicit", {})


async def elastic_job_keeps_topology(e2e: E2E) -> None:
    """job_test.go, When "Creating a Job", It "should preserve topology assignment during scale-up with elastic
    jobs" (ElasticJobsViaWorkloadSlices is on in the suite's Configuration)."""
    step = "elastic"
    ns, _ = await _tas_cluster(e2e, step)
    job = _tas_job("test-job", ns, pods=1, completions=10, pod_annotations={UNCONSTRAINED: "true"}, seconds=3600)
    job["metadata"]["annotations"]["kueue.x-k8s.io/elastic-job"] = "true"
    await e2e.create(job)

    async def admitted(count: int) -> dict[str, Any] | None:
        for w in await e2e.list("workloads", ns):
            found = assignment(w)
            if found is not None and found.pod_count == count and is_true(w, "Admitted"):
                return w
        return None

    first = await eventually(lambda: admitted(1), what="the elastic Job's Workload placed")
    await e2e.kubectl.ok("patch", "job", "test-job", "-n", ns, "--type=merge", "-p", '{"spec":{"parallelism":2}}')
    scaled = await eventually(lambda: admitted(2), what="the scaled slice placed on two pods")
    assert scaled["metadata"]["name"] != first["metadata"]["name"], scaled["metadata"]
    await e2e.wait(
        "job", "test-job", ns, lambda j: (j.get("status") or {}).get("ready") == 2, what="both job pods ready"
    )


# -- test/e2e/tas/baseline/pod_group_test.go ---------------------------------------------------------------------------


def _gpu_pod(name: str, ns: str, *, index: int, count: int, annotations: Mapping[str, str], seconds: float | None):
    """testingpod.MakePod("test-pod", ns).Queue("main").RequestAndLimit(gpu, 1)...MakeIndexedGroup(count)[index]."""
    meta: dict[str, Any] = {
        "name": f"{name}-{index}",
        "namespace": ns,
        "labels": {QUEUE_LABEL: "main", POD_GROUP_LABEL: name, POD_GROUP_INDEX: str(index)},
        "annotations": {**annotations, **run_for(seconds), POD_GROUP_TOTAL: str(count)},
    }
    res = {GPU: "1"}
    spec = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": "agnhost", "resources": {"requests": res, "limits": res}}],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


async def pod_group_ranks_ordering(e2e: E2E) -> None:
    """pod_group_test.go, When "Creating a Pod group", It "Should place pods based on the ranks-ordering" (exit
    fast: here a minute, so that the check sees them bound; Kueue's list reads nodeName, kept after they end)."""
    step = "pgranks"
    ns, _ = await _tas_cluster(e2e, step)
    await e2e.create(
        *(_gpu_pod("test-pod", ns, index=i, count=4, annotations={REQUIRED: BLOCK}, seconds=60) for i in range(4))
    )
    pods = await _scheduled(e2e, ns, 4, f"{POD_GROUP_LABEL}=test-pod")
    got = _by_index(pods, POD_GROUP_INDEX)
    assert got == {str(i): worker(step, i + 1) for i in range(4)}, got


async def pod_group_implicit_tas(e2e: E2E) -> None:
    """pod_group_test.go, When "Creating a Pod group", It "Should schedule Pods without explicit TAS annotation"."""
    step = "pgimplicit"
    ns, _ = await _tas_cluster(e2e, step)
    await e2e.create(*(_gpu_pod("test-pod", ns, index=i, count=4, annotations={}, seconds=3600) for i in range(4)))
    pods = await _scheduled(e2e, ns, 4, f"{POD_GROUP_LABEL}=test-pod")
    assert sorted(p["spec"]["nodeName"] for p in pods) == [worker(step, i) for i in range(1, 5)], pods


async def pod_group_without_tas(e2e: E2E) -> None:
    """pod_group_test.go, When "Creating a Pod group which is not using TAS", It "Should let the Job scheduled"."""
    step = "pgnotas"
    ns, group = f"e2e-tas-{step}", f"tas-group-{step}"
    await e2e.create(
        *(
            node(worker(step, i + 1), {NODE_GROUP: group, BLOCK: block, RACK: rack}, gpu=True)
            for i, (block, rack) in enumerate(MADE_WORKERS)
        )
    )
    cq = f"cluster-queue-{step}"
    rf = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"flavor-{step}"}}
    rf["spec"] = {"nodeLabels": {NODE_GROUP: group}}
    await e2e.apply(namespace(ns), rf, cluster_queue(cq, {f"flavor-{step}": {GPU: "8"}}), local_queue("main", ns, cq))
    await _active(e2e, cq, ns)
    await e2e.create(*(_gpu_pod("test-pod", ns, index=i, count=4, annotations={}, seconds=3600) for i in range(4)))
    await _scheduled(e2e, ns, 4, f"{POD_GROUP_LABEL}=test-pod")


# -- test/e2e/tas/baseline/statefulset_test.go -------------------------------------------------------------------------


async def statefulset_ranks_ordering(e2e: E2E) -> None:
    """statefulset_test.go, When "Creating a StatefulSet", It "Should place pods based on the ranks-ordering"."""
    step = "sts"
    ns, _ = await _tas_cluster(e2e, step)
    sts = make_serving("StatefulSet", "sts", ns, queue="main", replicas=3)
    template = sts["spec"]["template"]
    template["metadata"]["annotations"] = {REQUIRED: BLOCK}
    template["spec"]["containers"][0]["resources"] = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    await e2e.create(sts)
    await e2e.wait(
        "statefulset",
        "sts",
        ns,
        lambda s: (s.get("status") or {}).get("readyReplicas") == 3,
        what="StatefulSet replicas ready",
    )
    pods = await _scheduled(e2e, ns, 3)
    assert _by_index(pods, STS_INDEX) == {str(i): worker(step, i + 1) for i in range(3)}, _by_index(pods, STS_INDEX)


# -- test/e2e/tas/baseline/hotswap_test.go -----------------------------------------------------------------------------


async def _hotswap_running(e2e: E2E, step: str, annotations: Mapping[str, str], pods: int, **kw: Any) -> str:
    """hotswap_test.go's start: the Job (200m CPU and one GPU a pod, waits for deletion) unsuspended, its pods bound
    and Running; returns the Workload's name (the pods' ``kueue.x-k8s.io/workload`` annotation in Kueue's)."""
    ns = f"e2e-tas-{step}"
    job = _tas_job("ranks-job", ns, pods=pods, pod_annotations=annotations, cpu="200m", seconds=3600, **kw)
    await e2e.create(job)
    await e2e.wait("job", "ranks-job", ns, lambda j: j["spec"].get("suspend") is False, what="Job unsuspended")
    running = await _scheduled(e2e, ns, pods, "job-name=ranks-job")
    assert any(p["spec"]["nodeName"] == worker(step, 1) for p in running), running
    workload = await e2e.wait_workload_of("job", "ranks-job", ns)
    return str(workload["metadata"]["name"])


async def hotswap_replaces_deleted_node(e2e: E2E) -> None:
    """hotswap_test.go, When "Creating a Job with slices", It "Should replace a failed node with a new one within
    the same domain"."""
    step = "swapdel"
    ns, _ = await _tas_cluster(e2e, step, cpu="8")
    annotations = {PREFERRED: BLOCK, SLICE_REQUIRED: BLOCK, SLICE_SIZE: "3"}
    wl = await _hotswap_running(e2e, step, annotations, 3)
    await _topology_is(e2e, wl, ns, hosts(worker(step, 1), worker(step, 2), worker(step, 3)))
    await e2e.kubectl.ok("delete", "node", worker(step, 1))
    await _topology_is(e2e, wl, ns, hosts(worker(step, 2), worker(step, 3), worker(step, 4)))


async def hotswap_evicts_without_replacement(e2e: E2E) -> None:
    """hotswap_test.go, When "Creating a Job with slices", It "Should evict the workload if replacement is not
    possible"."""
    step = "swapevict"
    ns, _ = await _tas_cluster(e2e, step, cpu="8")
    annotations = {PREFERRED: BLOCK, SLICE_REQUIRED: RACK, SLICE_SIZE: "2"}
    wl = await _hotswap_running(e2e, step, annotations, 2)
    await _topology_is(e2e, wl, ns, hosts(worker(step, 1), worker(step, 2)))
    await e2e.kubectl.ok("delete", "node", worker(step, 1))
    await _topology_is(e2e, wl, ns, hosts(worker(step, 3), worker(step, 4)))


async def _taint(e2e: E2E, name: str, effect: str) -> None:
    """Update the node's taints to [key1=value1:effect]."""
    taints = [{"key": "key1", "value": "value1", "effect": effect}]
    patch = msgspec.json.encode({"spec": {"taints": taints}}).decode()
    await e2e.kubectl.ok("patch", "node", name, "--type=merge", "-p", patch)


async def hotswap_evicts_on_taint(e2e: E2E) -> None:
    """hotswap_test.go, Context "with TASReplaceNodeOnNodeTaints enabled", It "Should evict the workload if
    replacement is not possible due to taint"."""
    step = "swaptaint"
    ns, _ = await _tas_cluster(e2e, step, cpu="8")
    annotations = {PREFERRED: BLOCK, SLICE_REQUIRED: RACK, SLICE_SIZE: "2"}
    wl = await _hotswap_running(e2e, step, annotations, 2, indexed=True)
    await _topology_is(e2e, wl, ns, hosts(worker(step, 1), worker(step, 2)))
    await _taint(e2e, worker(step, 1), "NoExecute")
    chosen = [
        p for p in await e2e.list("pods", ns, "job-name=ranks-job") if p["spec"].get("nodeName") == worker(step, 1)
    ]
    # Kueue's test deletes it at once; here the eviction the taint brings may have taken it first (then there is no
    # pod on the host left to list, a CI failure of list index 0): the same end
    for pod in chosen:
        await e2e.kubectl.ok(
            "delete", "pod", pod["metadata"]["name"], "-n", ns, "--grace-period=0", "--ignore-not-found"
        )
    await _topology_is(e2e, wl, ns, hosts(worker(step, 3), worker(step, 4)))


async def hotswap_replaces_tolerated_no_execute(e2e: E2E) -> None:
    """hotswap_test.go, Context "with TASReplaceNodeOnNodeTaints enabled", It "Should replace a node when it becomes
    tainted with NoExecute and tolerationSeconds"."""
    step = "swaptol"
    ns, _ = await _tas_cluster(e2e, step, cpu="8")
    toleration = {"key": "key1", "operator": "Equal", "value": "value1", "effect": "NoExecute"}
    toleration["tolerationSeconds"] = 0
    wl = await _hotswap_running(e2e, step, {REQUIRED: BLOCK}, 3, indexed=True, tolerations=[toleration])
    await _topology_is(e2e, wl, ns, hosts(worker(step, 1), worker(step, 2), worker(step, 3)))
    await _taint(e2e, worker(step, 1), "NoExecute")
    want = [worker(step, 2), worker(step, 3), worker(step, 4)]
    await _topology_is(e2e, wl, ns, hosts(*want))
    await _pods_on(e2e, ns, want)


async def hotswap_replaces_no_schedule_after_pod_fails(e2e: E2E) -> None:
    """hotswap_test.go, Context "with TASReplaceNodeOnNodeTaints enabled", It "Should replace a node when it becomes
    tainted with NoSchedule and pod fails"."""
    step = "swapnosched"
    ns, _ = await _tas_cluster(e2e, step, cpu="8")
    wl = await _hotswap_running(e2e, step, {REQUIRED: BLOCK}, 3, indexed=True)
    await _topology_is(e2e, wl, ns, hosts(worker(step, 1), worker(step, 2), worker(step, 3)))
    await _taint(e2e, worker(step, 1), "NoSchedule")
    chosen = [
        p for p in await e2e.list("pods", ns, "job-name=ranks-job") if p["spec"].get("nodeName") == worker(step, 1)
    ]
    await e2e.kubectl.ok("delete", "pod", chosen[0]["metadata"]["name"], "-n", ns, "--ignore-not-found")
    want = [worker(step, 2), worker(step, 3), worker(step, 4)]
    await _topology_is(e2e, wl, ns, hosts(*want))
    await _pods_on(e2e, ns, want)


async def _pods_on(e2e: E2E, ns: str, want: Sequence[str]) -> None:
    """expectPodsOnNodes: the Job's Running pods not being deleted are on the nodes ``want`` (any order)."""

    async def read() -> list[str] | None:
        pods = await e2e.list("pods", ns, "job-name=ranks-job")
        got = sorted(
            p["spec"]["nodeName"]
            for p in pods
            if p["spec"].get("nodeName")
            and (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        )
        return got if got == sorted(want) else None

    await eventually(read, what=f"the Job's pods on {list(want)}", timeout=60)


STEPS: tuple[Step, ...] = (
    job_via_tas,
    single_pod_via_tas,
    pod_group_via_tas,
    job_rack_required_not_admitted,
    job_rack_preferred,
    job_block_required,
    job_parallelism_below_completions,
    job_ranks_ordering,
    job_ranks_ordering_implicit,
    elastic_job_keeps_topology,
    pod_group_ranks_ordering,
    pod_group_implicit_tas,
    pod_group_without_tas,
    statefulset_ranks_ordering,
    hotswap_replaces_deleted_node,
    hotswap_evicts_without_replacement,
    hotswap_evicts_on_taint,
    hotswap_replaces_tolerated_no_execute,
    hotswap_replaces_no_schedule_after_pod_fails,
)
