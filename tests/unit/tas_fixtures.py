"""Builders shared by the TAS tests: nodes, pods and flavors as manifests, folded into a FlavorTopology.

Node sets are those of Kueue's pkg/cache/scheduler/tas_cache_test.go (TestFindTopologyAssignments).
"""

from __future__ import annotations

from typing import Any

from kueue_es.events import manifests, models, types
from kueue_es.projections.topology import FlavorTopology, TopologyState

B = "cloud.com/topology-block"
R = "cloud.com/topology-rack"
H = "kubernetes.io/hostname"
ONE = [H]
TWO = [B, R]
THREE = [B, R, H]


def node(
    name: str,
    labels: dict[str, str],
    *,
    cpu: str | None = None,
    memory: str | None = None,
    pods: str | None = "10",
    extra: dict[str, str] | None = None,
    ready: str | None = "True",
    unschedulable: bool = False,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A v1 Node manifest."""
    allocatable = {k: v for k, v in (("cpu", cpu), ("memory", memory), ("pods", pods)) if v is not None}
    allocatable.update(extra or {})
    status: dict[str, Any] = {"allocatable": allocatable}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]
    spec: dict[str, Any] = {"unschedulable": unschedulable}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": status,
    }


def hnode(name: str, block: str | None, rack: str | None, host: str, **kw: Any) -> dict[str, Any]:
    """A node labelled block / rack / hostname (None leaves a label out)."""
    labels = {k: v for k, v in ((B, block), (R, rack), (H, host)) if v is not None}
    return node(name, labels, **kw)


def pod(name: str, node_name: str = "", *, cpu: str | None = None, phase: str = "Running") -> dict[str, Any]:
    """A v1 Pod manifest (not TAS, not managed)."""
    resources = {"requests": {"cpu": cpu}} if cpu else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "test-ns"},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": phase},
    }


def flavor_topology(
    nodes: list[dict[str, Any]],
    levels: list[str],
    *,
    pods: list[dict[str, Any]] = (),  # type: ignore[assignment]
    node_labels: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
) -> FlavorTopology:
    """Fold the manifests into a TopologyState and return the tree of flavor ``tas`` (topology ``default``)."""
    state = TopologyState()
    topology = manifests.parse_topology(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]},
        }
    )
    state.apply(types.TopologyObserved(topology=topology))
    flavor = models.ResourceFlavor(
        metadata=models.ObjectMeta(name="tas"),
        spec=models.ResourceFlavorSpec(
            node_labels=node_labels or {},
            topology_name="default",
            tolerations=[models.Toleration(**t) for t in tolerations or []],  # type: ignore[arg-type]
        ),
    )
    state.apply(types.ResourceFlavorObserved(flavor=flavor))
    for manifest in nodes:
        state.apply(types.NodeObserved(node=manifests.parse_node(manifest)))
    for manifest in pods:
        usage = manifests.parse_pod_usage(manifest)
        assert usage is not None
        state.apply(types.PodObserved(pod=usage))
    tree = state.flavor_topology("tas")
    assert tree is not None
    return tree


DEFAULT_NODES = [
    hnode("b1-r1-x3", "b1", "r1", "x3", cpu="1", memory="1Gi"),
    hnode("b1-r2-x5", "b1", "r2", "x5", cpu="1", memory="1Gi"),
    hnode("b1-r2-x1", "b1", "r2", "x1", cpu="1", memory="1Gi"),
    hnode("b1-r2-x6", "b1", "r2", "x6", cpu="1", memory="1Gi"),
    hnode("b2-r2-x2", "b2", "r1", "x2", cpu="1", memory="1Gi"),
    hnode("b2-r2-x4", "b2", "r2", "x4", cpu="2", memory="4Gi", pods="40"),
]
SCATTERED_NODES = [
    hnode("b1-r1-x3", "b1", "r1", "x3", cpu="4", memory="1Gi"),
    hnode("b1-r1-x5", "b1", "r1", "x5", cpu="1", memory="1Gi"),
    hnode("b1-r1-x1", "b1", "r1", "x1", cpu="1", memory="1Gi"),
    hnode("b2-r1-x6", "b2", "r1", "x6", cpu="2", memory="1Gi"),
    hnode("b2-r1-x2", "b2", "r1", "x2", cpu="1", memory="1Gi"),
]
MULTIPOD_NODES = [
    hnode("b1-r1-x3", "b1", "r1", "x3", cpu="10", memory="1Gi"),
    hnode("b1-r2-x5", "b1", "r2", "x5", cpu="10", memory="1Gi"),
    hnode("b1-r2-x1", "b1", "r2", "x1", cpu="10", memory="1Gi"),
    hnode("b1-r2-x6", "b1", "r2", "x6", cpu="10", memory="1Gi"),
    hnode("b2-r1-x2", "b2", "r1", "x2", cpu="10", memory="1Gi"),
    hnode("b2-r2-x4", "b2", "r2", "x4", cpu="20", memory="4Gi", pods="40"),
]
BINARY_TREE_NODES = [
    hnode(f"{b}-{r}-{x}", b, r, x, cpu="1", memory="1Gi")
    for b, r, x in (
        ("b1", "r1", "x3"), ("b1", "r1", "x5"), ("b1", "r2", "x1"), ("b1", "r2", "x6"),
        ("b2", "r1", "x2"), ("b2", "r1", "x4"), ("b2", "r2", "x7"), ("b2", "r2", "x8"),
    )
]  # fmt: skip
