"""The topology-capacity projection (SEMANTICS-ADVANCED A.2): which nodes form a flavor's tree,
leaf capacity, and which facts may unblock which ClusterQueues (A.2.3)."""

from __future__ import annotations

import copy

import msgspec

from kueue_es.events import manifests, models, types
from kueue_es.projections.topology import TopologyState
from tests.unit.tas_fixtures import THREE, TWO, B, H, R, hnode, pod


def _state(levels: list[str], nodes: list[dict], node_labels: dict[str, str] | None = None) -> TopologyState:
    state = TopologyState()
    state.apply(
        types.TopologyObserved(
            topology=models.Topology(
                metadata=models.ObjectMeta(name="default"),
                spec=models.TopologySpec(levels=[models.TopologyLevel(node_label=lvl) for lvl in levels]),
            )
        )
    )
    state.apply(
        types.ResourceFlavorObserved(
            flavor=models.ResourceFlavor(
                metadata=models.ObjectMeta(name="tas"),
                spec=models.ResourceFlavorSpec(topology_name="default", node_labels=node_labels or {}),
            )
        )
    )
    for n in nodes:
        state.apply(types.NodeObserved(node=manifests.parse_node(n)))
    return state


def test_membership_and_leaf_identity() -> None:
    """A.2.1: flavor labels, every level label, Ready, schedulable; hostname leaves vs joined-value leaves."""
    nodes = [
        hnode("n1", "b1", "r1", "h1", cpu="1"),
        hnode("n2", "b1", "r1", "h2", cpu="2"),
        hnode("n3", "b1", "r2", "h3", cpu="4", ready="False"),
        hnode("n4", "b1", "r2", "h4", cpu="4", unschedulable=True),
        hnode("n5", "b2", None, "h5", cpu="4"),
    ]
    for n in nodes[:1]:
        n["metadata"]["labels"]["pool"] = "a"
    state = _state(THREE, nodes)
    tree = state.flavor_topology("tas")
    assert tree is not None and tree.lowest_is_hostname
    assert [(leaf.id, leaf.values) for leaf in tree.leaves] == [("h1", ("b1", "r1", "h1")), ("h2", ("b1", "r1", "h2"))]
    racks = _state(TWO, nodes).flavor_topology("tas")
    assert racks is not None and not racks.lowest_is_hostname
    assert [(leaf.id, leaf.allocatable["cpu"], leaf.nodes) for leaf in racks.leaves] == [("b1,r1", 3000, ("n1", "n2"))]
    only_pool = _state(THREE, nodes, node_labels={"pool": "a"}).flavor_topology("tas")
    assert only_pool is not None and [leaf.id for leaf in only_pool.leaves] == ["h1"]
    assert _state(THREE, nodes).flavor_topology("missing") is None


def test_capacity_and_usage() -> None:
    """A.2.2: non-TAS pods on a node take requests + 1 pod until terminal; TAS usage is subtracted."""
    state = _state(THREE, [hnode("n1", "b1", "r1", "h1", cpu="4", pods="5")])
    for p in (pod("a", "n1", cpu="1"), pod("b", "n1", cpu="1", phase="Succeeded"), pod("c", "", cpu="1")):
        usage = manifests.parse_pod_usage(p)
        assert usage is not None
        state.apply(types.PodObserved(pod=usage))
    tree = state.flavor_topology("tas")
    assert tree is not None
    assert tree.leaves[0].free == {"cpu": 3000, "pods": 4}
    assert tree.free_capacity({"h1": {"cpu": 2000, "pods": 2}, "gone": {"cpu": 1}}) == {"h1": {"cpu": 1000, "pods": 2}}
    state.apply(types.ObjectDeleted(kind="Pod", namespace="test-ns", name="a"))
    tree = state.flavor_topology("tas")
    assert tree is not None and tree.leaves[0].free == {"cpu": 4000, "pods": 5}


def test_refresh_scope() -> None:
    """A.2.3: a matching node ⇒ all ClusterQueues; a node of no TAS flavor ⇒ none; a Topology ⇒ its
    flavors; a non-TAS pod freeing capacity ⇒ the flavors holding its node; one taking more ⇒ none."""
    state = _state([B, R, H], [hnode("n1", "b1", "r1", "h1", cpu="4")])
    matching = types.NodeObserved(node=manifests.parse_node(hnode("n2", "b1", "r1", "h2", cpu="1")))
    state.apply(matching)
    assert state.refresh_scope(matching) == "*"
    other = types.NodeObserved(node=manifests.parse_node(hnode("n9", None, "r1", "h9", cpu="1")))
    state.apply(other)
    assert state.refresh_scope(other) == frozenset()
    topo = types.TopologyObserved(topology=state.topologies["default"])
    assert state.refresh_scope(topo) == frozenset({"tas"})
    running = manifests.parse_pod_usage(pod("p", "n1", cpu="1"))
    assert running is not None
    state.apply(types.PodObserved(pod=running))
    before = copy.deepcopy(state)
    done = types.PodObserved(pod=msgspec.structs.replace(running, phase="Succeeded"))
    state.apply(done)
    assert state.refresh_scope(done, before=before) == frozenset({"tas"})
    before = copy.deepcopy(state)
    grown = types.PodObserved(pod=running)
    state.apply(grown)
    assert state.refresh_scope(grown, before=before) == frozenset()
