"""The topology-capacity projection (SEMANTICS-ADVANCED A.2): which nodes form a flavor's tree,
leaf capacity, and which ClusterQueues the cluster fold requeues on a topology fact (A.2.3)."""

from __future__ import annotations

import msgspec

from kueue_es.events import manifests, models, types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.projections.topology import TopologyState
from tests.builders import cluster_queue, parse
from tests.unit.tas_fixtures import THREE, TWO, B, H, R, hnode, pod


def _events(levels: list[str], nodes: list[dict], node_labels: dict[str, str] | None = None) -> list[types.Event]:
    """A Topology named default of ``levels``, a TAS flavor ``tas`` on it, and ``nodes``."""
    return [
        types.TopologyObserved(
            topology=models.Topology(
                metadata=models.ObjectMeta(name="default"),
                spec=models.TopologySpec(levels=[models.TopologyLevel(node_label=lvl) for lvl in levels]),
            )
        ),
        types.ResourceFlavorObserved(
            flavor=models.ResourceFlavor(
                metadata=models.ObjectMeta(name="tas"),
                spec=models.ResourceFlavorSpec(topology_name="default", node_labels=node_labels or {}),
            )
        ),
        *(types.NodeObserved(node=manifests.parse_node(n)) for n in nodes),
    ]


def _state(levels: list[str], nodes: list[dict], node_labels: dict[str, str] | None = None) -> TopologyState:
    state = TopologyState()
    for event in _events(levels, nodes, node_labels):
        state.apply(event)
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
    """A.2.2: non-TAS pods on a node take requests + 1 pod until terminal."""
    state = _state(THREE, [hnode("n1", "b1", "r1", "h1", cpu="4", pods="5")])
    for p in (pod("a", "n1", cpu="1"), pod("b", "n1", cpu="1", phase="Succeeded"), pod("c", "", cpu="1")):
        usage = manifests.parse_pod_usage(p)
        assert usage is not None
        state.apply(types.PodObserved(pod=usage))
    tree = state.flavor_topology("tas")
    assert tree is not None
    assert tree.leaves[0].free == {"cpu": 3000, "pods": 4}
    state.apply(types.ObjectDeleted(kind="Pod", namespace="test-ns", name="a"))
    tree = state.flavor_topology("tas")
    assert tree is not None and tree.leaves[0].free == {"cpu": 4000, "pods": 5}


def test_requeue_triggers_of_topology_facts() -> None:
    """A.2.3, as the cluster fold records it: a node matching a TAS flavor ⇒ all ClusterQueues; a node
    of no TAS flavor ⇒ none; a non-TAS pod freeing capacity ⇒ the ClusterQueues using a flavor whose
    tree holds its node; one taking capacity again ⇒ none."""
    state = ClusterState()
    queues = [
        cluster_queue("cq-tas", flavors={"tas": {"cpu": 9}}),
        cluster_queue("cq-plain", flavors={"plain": {"cpu": 9}}),
    ]
    setup = [*_events([B, R, H], [hnode("n1", "b1", "r1", "h1", cpu="4")])]
    setup += [types.ClusterQueueObserved(cluster_queue=parse(doc)) for doc in queues]
    for seq, event in enumerate(setup, start=1):
        apply(state, event, seq=seq)
    triggers = dict(state.requeue_triggers)
    apply(state, types.NodeObserved(node=manifests.parse_node(hnode("n2", "b1", "r1", "h2", cpu="1"))), seq=10)
    assert state.requeue_triggers == {**triggers, "*": 10}
    apply(state, types.NodeObserved(node=manifests.parse_node(hnode("n9", None, "r1", "h9", cpu="1"))), seq=11)
    assert state.requeue_triggers == {**triggers, "*": 10}
    running = manifests.parse_pod_usage(pod("p", "n1", cpu="1"))
    assert running is not None
    apply(state, types.PodObserved(pod=running), seq=12)
    assert state.requeue_triggers == {**triggers, "*": 10}
    apply(state, types.PodObserved(pod=msgspec.structs.replace(running, phase="Succeeded")), seq=13)
    assert state.requeue_triggers == {**triggers, "*": 10, "cq:cq-tas": 13}
    apply(state, types.PodObserved(pod=running), seq=14)
    assert state.requeue_triggers == {**triggers, "*": 10, "cq:cq-tas": 13}
