"""The TAS Nodes shipped for the demo (``kueue_es/demo_manifests/tas-nodes.yaml``): Kueue's TAS kind cluster's
workers, applied with the real kubectl, are Ready Nodes a TAS sample Job of Kueue's is placed on, as docs/tas.md
("Trying it in the demo") tells a user to do. Found by a new user's TAS trial, who had to write Nodes by hand."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_es.services.kube import client
from kueue_es.sim import emulator
from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import demo_system
from tests.kube.examples import EXAMPLES

NODES = Path(str(resources.files("kueue_es") / "demo_manifests" / "tas-nodes.yaml"))
RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def test_the_shipped_nodes_are_kueues_tas_kind_workers() -> None:
    """The Nodes carry the labels of Kueue's tas/kind-cluster.yaml workers, in order, named as kind names them,
    with a hostname label and a Ready kubelet status with allocatable CPU and memory."""
    kind = yaml.safe_load((EXAMPLES / "tas" / "kind-cluster.yaml").read_text())
    workers = [n["labels"] for n in kind["nodes"] if n["role"] == "worker"]
    nodes = [d for d in yaml.safe_load_all(NODES.read_text()) if d]
    assert [n["metadata"]["name"] for n in nodes] == ["kind-worker", *(f"kind-worker{i}" for i in range(2, 9))]
    for node, labels in zip(nodes, workers, strict=True):
        own = node["metadata"]["labels"]
        assert {k: own.get(k) for k in labels} == labels
        assert own["kubernetes.io/hostname"] == node["metadata"]["name"]
        assert {"type": "Ready", "status": "True"}.items() <= node["status"]["conditions"][0].items()
        assert {"cpu", "memory", "pods"} <= set(node["status"]["allocatable"])


async def test_kubectl_get_nodes_shows_the_shipped_nodes_kubelet_version() -> None:
    """A user's trial: ``kubectl get nodes`` showed an empty VERSION for the shipped Nodes, where a kind cluster's
    show their kubelet's version. Applied to the emulated API server and read as the Table kubectl asks for, each
    row has the kubelet version the emulator reports as its own, and ``-o wide``'s internal IP, OS image, kernel
    and container runtime of a kind node."""
    nodes = [d for d in yaml.safe_load_all(NODES.read_text()) if d]
    async with emulator.serve_emulator() as cluster:
        api = await client.make_api_client(server=str(cluster.url))
        try:
            for node in nodes:
                await client.apply_manifest(api, node)
            response = await api.call_api(
                "/api/v1/nodes", "GET", header_params={"Accept": TABLE}, _preload_content=False
            )
            table = json.loads(await response.read())
        finally:
            await api.close()
    names = [c["name"] for c in table["columnDefinitions"]]
    rows = {row["cells"][0]: dict(zip(names, row["cells"], strict=True)) for row in table["rows"]}
    assert sorted(rows) == sorted(n["metadata"]["name"] for n in nodes)
    for cells in rows.values():
        assert cells["Version"] == f"v{emulator.KUBERNETES_VERSION}", cells
        assert cells["Status"] == "Ready" and cells["Internal-IP"].startswith("172.18.0."), cells
        assert cells["OS-Image"] == "Debian GNU/Linux 12 (bookworm)", cells
        assert cells["Container-Runtime"].startswith("containerd://"), cells


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_kueues_tas_sample_runs_on_the_shipped_nodes(tmp_path: Path) -> None:
    """``kubectl apply`` of the Nodes, Kueue's tas/sample-queues.yaml and tas/sample-job-required.yaml (10 pods of
    1 CPU in one rack) on ``kueue-es demo --keep``: the Nodes are Ready, the Workload is admitted with a topology
    assignment, and the 10 pods run bound to the two Nodes of one rack."""
    async with demo_system(tmp_path / "demo") as e2e:
        await e2e.kubectl.ok("apply", "-f", str(NODES))
        await e2e.kubectl.ok("apply", "-f", str(EXAMPLES / "tas" / "sample-queues.yaml"))
        ready = await e2e.kubectl.ok(
            "get", "nodes", "-o", 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {end}'
        )
        assert ready.split() == ["True"] * 8
        await e2e.kubectl.ok("create", "-f", str(EXAMPLES / "tas" / "sample-job-required.yaml"))

        async def running() -> list[dict[str, Any]] | None:
            out = await e2e.kubectl.ok("get", "pods", "-n", "default", "-o", "json")
            pods = [p for p in json.loads(out)["items"] if p["metadata"]["name"].startswith("tas-sample-required")]
            live = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
            return live if len(live) == 10 else None

        pods = await eventually(running, what="the sample Job's 10 pods Running", timeout=120)
        out = await e2e.kubectl.ok("get", "nodes", "-o", "json")
        labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in json.loads(out)["items"]}
        bound = {p["spec"]["nodeName"] for p in pods}
        assert len({(labels[n][BLOCK], labels[n][RACK]) for n in bound}) == 1, bound  # one rack, as required
        out = await e2e.kubectl.ok("get", "workloads", "-n", "default", "-o", "json")
        [wl] = json.loads(out)["items"]
        [psa] = wl["status"]["admission"]["podSetAssignments"]
        assert psa["topologyAssignment"]["levels"] == ["kubernetes.io/hostname"]
        assert psa["flavors"] == {"cpu": "tas-flavor", "memory": "tas-flavor"}


FAILURE_JOB = Path(str(resources.files("kueue_es") / "demo_manifests" / "tas-node-failure-job.yaml"))


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_the_node_failure_walk_through_moves_the_pods_off_a_tainted_host(tmp_path: Path) -> None:
    """docs/tas.md's node failure steps as typed: the shipped Job's 4 pods run on one host; ``kubectl taint node
    HOST maint=true:NoExecute`` evicts them (the simulated taint-eviction controller), the TAS placer moves the
    pod set off that host, and 4 pods run again elsewhere, in one block, none on the tainted host."""
    async with demo_system(tmp_path / "demo") as e2e:
        await e2e.kubectl.ok("apply", "-f", str(NODES))
        await e2e.kubectl.ok("apply", "-f", str(EXAMPLES / "tas" / "sample-queues.yaml"))
        await e2e.kubectl.ok("create", "-f", str(FAILURE_JOB))

        async def running_on() -> list[str] | None:
            out = await e2e.kubectl.ok("get", "pods", "-n", "default", "-o", "json")
            pods = [p for p in json.loads(out)["items"] if p["metadata"]["name"].startswith("tas-node-failure-")]
            live = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
            return sorted(p["spec"]["nodeName"] for p in live) if len(live) == 4 else None

        first = await eventually(running_on, what="the Job's 4 pods Running", timeout=120)
        host = first[0]
        assert set(first) == {host}  # one host of one block: 4 CPUs of its 8
        await e2e.kubectl.ok("taint", "node", host, "maint=true:NoExecute")

        async def moved() -> list[str] | None:
            now = await running_on()
            return now if now is not None and host not in now else None

        second = await eventually(moved, what="4 pods Running off the tainted host", timeout=180)
        out = await e2e.kubectl.ok("get", "nodes", "-o", "json")
        labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in json.loads(out)["items"]}
        assert len({labels[n][BLOCK] for n in second}) == 1, second  # still one block, as required
