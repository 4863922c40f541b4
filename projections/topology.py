"""Topology-capacity projection: Topology, Node, non-TAS Pod and ResourceFlavor facts folded into,
per TAS ResourceFlavor, the leaves of its topology tree and their free capacity.

Pure: events in, state out; no clock. The TAS placer (scheduling/tas/placement.py) builds
its domain tree from a :class:`FlavorTopology`; the admitter supplies the TAS usage of the
workloads holding quota with a topology assignment (it knows the reservations), and the
placement subtracts it from each :class:`Leaf`'s ``free``.

Rules (SEMANTICS-ADVANCED A.2; Kueue pkg/cache/scheduler/tas_nodes_cache.go, tas_topology_tree.go,
tas_flavor.go, tas_non_tas_pod_cache.go, pkg/util/tas/tas.go NodeMatchesFlavor):

- A.2.1 a node is in flavor F's tree iff it carries every ``F.spec.nodeLabels`` pair, a label for
  every topology level, its Ready condition is True and it is not ``spec.unschedulable``.
  Taints are NOT a membership rule: they are a per-placement filter (A.3) against the pod set's
  tolerations plus the flavor's ``spec.tolerations`` (kept here in ``tolerations``).
- Leaf ID: the hostname when the lowest level is ``kubernetes.io/hostname``, else the level values
  joined with ``,``; nodes sharing a non-hostname leaf add their allocatable.
- A.2.2 a leaf's free capacity = Σ allocatable − Σ requests (incl. ``pods: 1``) of the non-TAS
  pods bound to its nodes and not terminal; the placement subtracts the TAS usage.

Refresh semantics (A.2.3), for the admitter's inadmissible-requeue, are the requeue triggers the
cluster fold records (``cluster._apply_topology_fact``, with :func:`frees_capacity` from here). A
node fact (create, delete, or a change of labels, taints, allocatable, unschedulable or Ready)
for a node that matches some TAS flavor, a flavor fact or a Topology fact ⇒ all ClusterQueues; a
non-TAS pod that frees capacity (terminal, deleted, moved, requests shrank) ⇒ the ClusterQueues
using flavors whose tree holds that node (Kueue batches these every 10 s; kueue-es folds them at
once, which is only earlier). Facts identical to the current state change nothing (kubelet
heartbeats are not facts at all: the Node model keeps no timestamps).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeGuard

from kueue_es.events import models, types
from kueue_es.events.tas import HOSTNAME_LABEL, domain_id

Requests = dict[str, int]


@dataclass(frozen=True)
class Leaf:
    """One leaf domain of a flavor's tree.

    ``values``: one value per topology level (widest first); ``id``: hostname or joined values;
    ``nodes``: names of the nodes in it; ``node``: the node itself when the lowest level is
    hostname (the per-node filters of A.3 need it), else None; ``allocatable``: summed;
    ``free``: allocatable − non-TAS pods' requests (may be negative; placement clamps).
    """

    id: str
    values: tuple[str, ...]
    nodes: tuple[str, ...]
    node: models.Node | None
    allocatable: Mapping[str, int]
    free: Mapping[str, int]


@dataclass(frozen=True)
class FlavorTopology:
    """The topology tree of one TAS ResourceFlavor, without TAS usage.

    ``leaves`` sorted by ID; ``node_to_leaf`` maps node names to leaf IDs; ``tolerations`` are
    the flavor's ``spec.tolerations`` (added to every pod set's, A.3).
    """

    flavor: str
    topology_name: str
    levels: tuple[str, ...]
    leaves: tuple[Leaf, ...]
    tolerations: tuple[models.Toleration, ...] = ()
    node_to_leaf: Mapping[str, str] = field(default_factory=dict)

    @property
    def lowest_is_hostname(self) -> bool:
        """Whether each leaf is one node (per-node filters apply, A.3)."""
        return self.levels[-1] == HOSTNAME_LABEL

    @cached_property
    def leaf_by_id(self) -> dict[str, Leaf]:
        """Leaves by ID."""
        return {leaf.id: leaf for leaf in self.leaves}

    @cached_property
    def ancestors(self) -> dict[str, list[tuple[int, str, tuple[str, ...]]]]:
        """Per leaf ID, its inner domains from the parent up: (level index, domain ID, values)."""
        last = len(self.levels) - 1
        return {
            leaf.id: [
                (level, domain_id(leaf.values[: level + 1]), leaf.values[: level + 1])
                for level in range(last - 1, -1, -1)
            ]
            for leaf in self.leaves
        }


def node_matches(node: models.Node, node_labels: Mapping[str, str], levels: tuple[str, ...]) -> bool:
    """A.2.1 membership: flavor labels, every level label, Ready=True, schedulable."""
    labels = node.metadata.labels
    return (
        node.schedulable_and_ready
        and all(labels.get(k) == v for k, v in node_labels.items())
        and all(level in labels for level in levels)
    )


@dataclass
class TopologyState:
    """What TAS needs from the cluster, folded from facts: Topologies, ResourceFlavors, Nodes and
    non-TAS pods. ``apply`` takes any event and ignores those it does not need."""

    topologies: dict[str, models.Topology] = field(default_factory=dict)
    flavors: dict[str, models.ResourceFlavor] = field(default_factory=dict)
    nodes: dict[str, models.Node] = field(default_factory=dict)
    pods: dict[tuple[str, str], models.PodUsage] = field(default_factory=dict)
    _cache: dict[str, FlavorTopology | None] = field(default_factory=dict, repr=False)

    def apply(self, event: types.Event) -> None:
        """Fold one event (facts are full-state snapshots: folding one twice changes nothing)."""
        match event:
            case types.TopologyObserved(topology=obj):
                self.topologies[obj.metadata.name] = obj
            case types.ResourceFlavorObserved(flavor=obj):
                self.flavors[obj.metadata.name] = obj
            case types.NodeObserved(node=obj):
                self.nodes[obj.metadata.name] = obj
            case types.PodObserved(pod=obj):
                self.pods[(obj.namespace, obj.name)] = obj
            case types.ObjectDeleted(kind="Topology"):
                self.topologies.pop(event.name, None)
            case types.ObjectDeleted(kind="ResourceFlavor"):
                self.flavors.pop(event.name, None)
            case types.ObjectDeleted(kind="Node"):
                self.nodes.pop(event.name, None)
            case types.ObjectDeleted(kind="Pod"):
                self.pods.pop((event.namespace, event.name), None)
            case _:
                return
        self._cache.clear()

    def tas_flavors(self) -> list[str]:
        """Names of the flavors with a ``topologyName``, sorted."""
        return sorted(n for n, f in self.flavors.items() if f.spec.topology_name)

    def flavor_topology(self, flavor: str) -> FlavorTopology | None:
        """The tree of TAS flavor ``flavor``; None when the flavor is unknown, not a TAS flavor, or
        its Topology does not exist (its ClusterQueues are then inactive, TopologyNotFound, A.1)."""
        if flavor not in self._cache:
            self._cache[flavor] = self._build(flavor)
        return self._cache[flavor]

    def _build(self, flavor_name: str) -> FlavorTopology | None:
        flavor = self.flavors.get(flavor_name)
        if flavor is None or not flavor.spec.topology_name:
            return None
        topology = self.topologies.get(flavor.spec.topology_name)
        if topology is None:
            return None
        levels = tuple(topology.level_keys)
        hostname_leaves = levels[-1] == HOSTNAME_LABEL
        members: dict[str, list[models.Node]] = {}
        values_of: dict[str, tuple[str, ...]] = {}
        for name in sorted(self.nodes):
            node = self.nodes[name]
            if not node_matches(node, flavor.spec.node_labels, levels):
                continue
            values = tuple(node.metadata.labels[level] for level in levels)
            leaf_id = values[-1] if hostname_leaves else domain_id(values)
            members.setdefault(leaf_id, []).append(node)
            values_of.setdefault(leaf_id, values)
        node_to_leaf = {node.metadata.name: leaf_id for leaf_id, nodes in members.items() for node in nodes}
        used: dict[str, Requests] = {}
        for pod in self.pods.values():
            pod_leaf = node_to_leaf.get(pod.node_name)
            if pod_leaf is not None and pod.takes_capacity:
                bucket = used.setdefault(pod_leaf, {})
                for res, amount in pod.requests.items():
                    bucket[res] = bucket.get(res, 0) + amount
        leaves = []
        for leaf_id in sorted(members):
            allocatable: Requests = {}
            for node in members[leaf_id]:
                for res, amount in node.status.allocatable.items():
                    allocatable[res] = allocatable.get(res, 0) + amount
            free = dict(allocatable)
            for res, amount in used.get(leaf_id, {}).items():
                free[res] = free.get(res, 0) - amount
            leaves.append(
                Leaf(
                    id=leaf_id,
                    values=values_of[leaf_id],
                    nodes=tuple(n.metadata.name for n in members[leaf_id]),
                    node=members[leaf_id][0] if hostname_leaves else None,
                    allocatable=allocatable,
                    free=free,
                )
            )
        return FlavorTopology(
            flavor=flavor_name,
            topology_name=topology.metadata.name,
            levels=levels,
            leaves=tuple(leaves),
            tolerations=tuple(flavor.spec.tolerations),
            node_to_leaf=node_to_leaf,
        )


def frees_capacity(old: models.PodUsage | None, new: models.PodUsage | None) -> TypeGuard[models.PodUsage]:
    """Whether a non-TAS pod going from ``old`` to ``new`` (None: gone) gives node capacity
    back: it stopped taking capacity, moved, or asks for less (A.2.3). True implies ``old`` is
    a pod (the type guard says so to the type checker)."""
    if old is None or not old.takes_capacity:
        return False
    return (
        new is None
        or not new.takes_capacity
        or new.node_name != old.node_name
        or any(new.requests.get(r, 0) < v for r, v in old.requests.items())
    )
