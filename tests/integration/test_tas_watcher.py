"""The watcher's TAS facts against the emulated API server (SEMANTICS-ADVANCED A.1, A.2, A.4).

Topologies, Nodes and the pods bound to nodes become TopologyObserved / NodeObserved /
PodObserved, published only when something TAS reads changed (a kubelet heartbeat
publishes nothing), deletions seen live, after a 410 relist and across a restart; a
Job's TAS annotations become its pod set's topologyRequest, and bad ones are rejected
naming the annotation.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kueue_es.events import models, tas, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.services.watcher import nodes
from kueue_es.services.watcher.kinds import TAS_KINDS
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import ClusterEmulator, serve_emulator
from tests.integration.harness import events_of, folded, job, running, wait_for, wait_until

pytestmark = pytest.mark.timeout(60)

HOST = tas.HOSTNAME_LABEL
RACK = "cloud.example.com/rack"


def topology(name: str, *levels: str) -> dict[str, Any]:
    """A kueue.x-k8s.io/v1beta2 Topology manifest."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def node(name: str, *, rack: str = "r1", cpu: str = "4", heartbeat: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    """A Ready v1 Node with rack and hostname labels."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {RACK: rack, HOST: name}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat, "reason": "KubeletReady"}
            ],
        },
    }


def pod(name: str, *, node_name: str = "", cpu: str = "500m", annotations: dict[str, str] | None = None):
    """A v1 Pod in namespace default (bound to ``node_name`` when given)."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": spec,
    }


async def add_node(api: Any, manifest: dict[str, Any]) -> None:
    """Create a Node, then write its status (the API server ignores status on create)."""
    await kube.create_object(api, resources.NODES, body=manifest)
    name = manifest["metadata"]["name"]
    await kube.patch_object(api, resources.NODES, name=name, patch={"status": manifest["status"]}, subresource="status")


async def latest_nodes_with_status(bus: MemoryBus, *names: str, timeout: float = 5.0) -> dict[str, Any]:
    """Wait until the last NodeObserved of each named Node carries its status; return those Nodes by name."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        latest = {e.node.metadata.name: e.node for e in await events_of(bus, types.NodeObserved)}
        if all(name in latest and latest[name].status.allocatable for name in names):
            return latest
        if loop.time() > deadline:
            raise AssertionError(f"no NodeObserved with status for all of {names} within {timeout}s: {latest}")
        await asyncio.sleep(0.02)


async def node_fact_where(bus: MemoryBus, name: str, holds: Any, timeout: float = 5.0) -> Any:
    """Wait for a NodeObserved of Node ``name`` whose node satisfies ``holds``; return that event."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        for event in await events_of(bus, types.NodeObserved, node__metadata__name=name):
            if holds(event.node):
                return event
        if loop.time() > deadline:
            raise AssertionError(f"no matching NodeObserved for Node {name} within {timeout}s")
        await asyncio.sleep(0.02)


def tas_watches(watcher: Watcher) -> list[Any]:
    return [watcher.watch(kind) for kind in (*TAS_KINDS, "Job")]


async def test_nodes_topologies_and_bound_pods_become_facts_heartbeats_do_not(api, bus: MemoryBus) -> None:
    watcher = Watcher(bus=bus, api=api)
    async with running(*tas_watches(watcher)):
        await kube.apply_manifest(api, topology("default", RACK, HOST))
        await add_node(api, node("n1"))
        await add_node(api, node("n2", rack="r2", cpu="8"))
        await kube.create_object(api, resources.PODS, namespace="default", body=pod("daemon", node_name="n1"))
        await kube.create_object(api, resources.PODS, namespace="default", body=pod("pending"))
        tas_pod = pod("tas", node_name="n2", annotations={tas.REQUIRED_ANNOTATION: RACK})
        await kube.create_object(api, resources.PODS, namespace="default", body=tas_pod)

        [topo] = await wait_for(bus, types.TopologyObserved)
        # Each Node is created, then its status written; whether the first list sees one or
        # both writes depends on timing, so wait for the state, not for a count of facts.
        by_name = await latest_nodes_with_status(bus, "n1", "n2")
        [usage] = await wait_for(bus, types.PodObserved)
        assert topo.topology.level_keys == [RACK, HOST]
        assert by_name["n2"].status.allocatable["cpu"] == 8000
        assert by_name["n2"].metadata.labels[RACK] == "r2"
        assert by_name["n1"].schedulable_and_ready
        assert (usage.pod.name, usage.pod.node_name, usage.pod.requests) == ("daemon", "n1", {"cpu": 500, "pods": 1})

        # kubelet heartbeats: new resourceVersions, nothing TAS reads -> nothing on the log
        before = await bus.last_seq()
        for beat in ("2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"):
            status = node("n1", heartbeat=beat)["status"]
            await kube.patch_object(api, resources.NODES, name="n1", patch={"status": status}, subresource="status")
        # a taint and a pod finishing do matter
        taint = {"key": "maintenance", "value": "yes", "effect": "NoSchedule"}
        await kube.patch_object(api, resources.NODES, name="n1", patch={"spec": {"taints": [taint]}})
        await kube.patch_object(
            api,
            resources.PODS,
            namespace="default",
            name="daemon",
            patch={"status": {"phase": "Succeeded"}},
            subresource="status",
        )
        tainted = await node_fact_where(bus, "n1", lambda n: bool(n.spec.taints))
        await wait_for(bus, types.PodObserved, count=2)
        await kube.delete_object(api, resources.PODS, namespace="default", name="daemon")
        await kube.delete_object(api, resources.NODES, name="n2")
        await wait_for(bus, types.ObjectDeleted, kind="Pod", name="daemon")
        await wait_for(bus, types.ObjectDeleted, kind="Node", name="n2")

    new = [(await bus.get(s)).headers["Kq-Type"] for s in range(before + 1, await bus.last_seq() + 1)]
    assert sorted(new) == ["NodeObserved", "ObjectDeleted", "ObjectDeleted", "PodObserved"], (
        new
    )  # taint, pod Succeeded, two deletions: no heartbeat fact
    assert tainted.node.spec.taints[0].key == "maintenance"
    finished = (await events_of(bus, types.PodObserved))[-1].pod
    assert finished.phase == "Succeeded" and not finished.takes_capacity
    assert not await events_of(bus, types.PodObserved, pod__name="tas")
    assert not await events_of(bus, types.PodObserved, pod__name="pending")


async def test_relist_and_restart_find_deletions_and_republish_nothing(
    emu: ClusterEmulator, api, bus: MemoryBus
) -> None:
    first = Watcher(bus=bus, api=api)
    async with running(*tas_watches(first)):
        await kube.apply_manifest(api, topology("default", HOST))
        for name in ("a", "b", "c"):
            await add_node(api, node(name))
        await latest_nodes_with_status(bus, "a", "b", "c")
        emu.reset_history()  # 410 for every open watch: relist
        await kube.delete_object(api, resources.NODES, name="a")
        await wait_for(bus, types.ObjectDeleted, kind="Node", name="a")

    await kube.delete_object(api, resources.NODES, name="b")
    before = await bus.last_seq()
    node_facts_before = len(await events_of(bus, types.NodeObserved))
    second = Watcher(bus=bus, api=api)
    await second.learn_from_log()
    assert second.publisher.known["Node"] == {("", "b"), ("", "c")}
    async with running(*tas_watches(second)):
        await wait_for(bus, types.ObjectDeleted, kind="Node", name="b")
        await asyncio.sleep(0.3)
    after = [await bus.get(s) for s in range(before + 1, await bus.last_seq() + 1)]
    assert [m.headers["Kq-Type"] for m in after] == ["ObjectDeleted"]  # c and the Topology are not published again
    assert len(await events_of(bus, types.NodeObserved)) == node_facts_before


async def test_invalid_topology_is_rejected_naming_the_level(emu: ClusterEmulator, api, bus: MemoryBus) -> None:
    emu.validate = False  # a cluster without kueue-es's CRDs stores it; the watcher must not fold it
    watcher = Watcher(bus=bus, api=api)
    async with running(*tas_watches(watcher)):
        await kube.apply_manifest(api, topology("bad", HOST, RACK))
        [rejected] = await wait_for(bus, types.ObjectRejected, kind="Topology")
    assert rejected.name == "bad" and rejected.field == "spec.levels[0].nodeLabel"
    assert "last level" in rejected.problem
    assert not await events_of(bus, types.TopologyObserved)


def tas_job(name: str, annotations: dict[str, str], *, parallelism: int = 4) -> dict[str, Any]:
    manifest = job(name, parallelism=parallelism, cpu="500m")
    manifest["spec"]["template"]["metadata"] = {"annotations": annotations}
    return manifest


async def test_job_tas_annotations_become_the_topology_request(emu: ClusterEmulator, api, bus: MemoryBus) -> None:
    emu.kueue_validation = False  # a cluster without Kueue's validating webhook stores the bad ones
    watcher = Watcher(bus=bus, api=api)
    async with running(*tas_watches(watcher)):
        await kube.apply_manifest(
            api,
            tas_job(
                "slices",
                {tas.PREFERRED_ANNOTATION: RACK, tas.SLICE_REQUIRED_ANNOTATION: HOST, tas.SLICE_SIZE_ANNOTATION: "2"},
            ),
        )
        await kube.apply_manifest(api, tas_job("plain", {}))
        await kube.apply_manifest(
            api, tas_job("two-modes", {tas.REQUIRED_ANNOTATION: RACK, tas.UNCONSTRAINED_ANNOTATION: "true"})
        )
        await kube.apply_manifest(
            api,
            tas_job(
                "too-big-slice",
                {tas.REQUIRED_ANNOTATION: RACK, tas.SLICE_REQUIRED_ANNOTATION: HOST, tas.SLICE_SIZE_ANNOTATION: "5"},
            ),
        )
        observed = await wait_for(bus, types.WorkloadObserved, count=2)
        rejected = await wait_for(bus, types.ObjectRejected, count=2)

    requests = {wl.workload.owner.name: wl.workload.spec.pod_sets[0].topology_request for wl in observed}
    # no annotation: the rank hint alone, which asks for no topology (Kueue's job_controller.go PodSets)
    assert requests["plain"] == models.PodSetTopologyRequest(pod_index_label="batch.kubernetes.io/job-completion-index")
    assert not tas.requests_tas(requests["plain"])
    slices = requests["slices"]
    assert slices is not None and slices.preferred == RACK
    assert (slices.pod_set_slice_required_topology, slices.pod_set_slice_size) == (HOST, 2)
    assert slices.pod_index_label == "batch.kubernetes.io/job-completion-index"
    fields = {r.name: (r.field, r.problem) for r in rejected}
    where = "spec.template.metadata.annotations"
    assert fields["two-modes"][0] == f"{where}[{tas.UNCONSTRAINED_ANNOTATION}]"
    assert fields["too-big-slice"][0] == f"{where}[{tas.SLICE_SIZE_ANNOTATION}]"
    assert "4" in fields["too-big-slice"][1]
    state = await folded(bus)
    assert len(state.workloads) == 2
    await wait_until(lambda: True)


async def test_v1alpha1_topologies_are_read_when_v1beta2_is_not_served(bus: MemoryBus) -> None:
    """An older Kueue serves Topology only as v1alpha1: the watcher falls back to it."""
    async with serve_emulator(bookmark_interval=0.2, extra_resources=(nodes.TOPOLOGIES_V1ALPHA1,)) as emu:
        emu["get /apis/kueue.x-k8s.io/v1beta2/topologies"] << 404
        api = await kube.make_api_client(server=emu.url)
        try:
            old = {**topology("old", HOST), "apiVersion": "kueue.x-k8s.io/v1alpha1"}
            await kube.create_object(api, nodes.TOPOLOGIES_V1ALPHA1, body=old)
            watcher = Watcher(bus=bus, api=api)
            async with running(watcher.watch("Topology")):
                [observed] = await wait_for(bus, types.TopologyObserved)
            assert watcher.topology_ref == nodes.TOPOLOGIES_V1ALPHA1
            assert observed.topology.level_keys == [HOST]
        finally:
            await api.close()


async def test_a_failing_nodes_fact_lists_the_workloads_whose_pods_still_run_there(
    emu: ClusterEmulator, api, bus: MemoryBus
) -> None:
    """A.13.2 (TASReplaceNodeOnPodTermination): a NotReady node's fact lists the workloads with a pod progressing
    on it, again when one stops; a healthy node's lists none; a watcher restarted meanwhile reports the same list,
    never an empty one before it has listed the pods."""
    first = Watcher(bus=bus, api=api)
    running_pod = pod("wl1-a", node_name="n1", annotations={"kueue.x-k8s.io/workload": "wl1"})
    async with running(*tas_watches(first)):
        await add_node(api, node("n1"))
        await kube.create_object(api, resources.PODS, namespace="default", body=running_pod)
        other = pod("wl2-a", node_name="n1", annotations={"kueue.x-k8s.io/workload": "wl2"})
        await kube.create_object(api, resources.PODS, namespace="default", body=other)
        await latest_nodes_with_status(bus, "n1")
        not_ready = node("n1")["status"]
        not_ready["conditions"][0]["status"] = "False"
        await kube.patch_object(api, resources.NODES, name="n1", patch={"status": not_ready}, subresource="status")
        both = await node_fact_where(bus, "n1", lambda n: n.status.ready == "False")
        assert both.node.progressing_workloads == ["default/wl1", "default/wl2"]
        done = {"status": {"phase": "Succeeded"}}
        await kube.patch_object(
            api, resources.PODS, namespace="default", name="wl2-a", patch=done, subresource="status"
        )
        await node_fact_where(bus, "n1", lambda n: n.progressing_workloads == ["default/wl1"])
    healthy_facts = await events_of(bus, types.NodeObserved, node__metadata__name="n1")
    assert all(not e.node.progressing_workloads for e in healthy_facts if e.node.status.ready == "True")

    before = await bus.last_seq()
    second = Watcher(bus=bus, api=api)
    await second.learn_from_log()
    async with running(*tas_watches(second)):
        await asyncio.sleep(0.5)
        assert [(await bus.get(s)).headers["Kq-Type"] for s in range(before + 1, await bus.last_seq() + 1)] == []
        await kube.delete_object(api, resources.PODS, namespace="default", name="wl1-a")
        gone = await node_fact_where(bus, "n1", lambda n: n.status.ready == "False" and not n.progressing_workloads)
    assert gone.node.status.ready == "False"
