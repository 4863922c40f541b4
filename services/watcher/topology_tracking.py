"""What Topology-Aware Scheduling reads, as the watcher follows it: Topologies, Nodes, pods bound to nodes.

Why this module exists: TAS places pods on the nodes of a topology, so the log
must know the Topologies, the Nodes (labels, allocatable, taints, readiness) and
the pods already bound to nodes (what they take of a node's capacity). Nodes
change all the time in ways TAS does not read (kubelet heartbeats, status
writes), so :class:`TopologyTracker` publishes a fact only when its content
changes (:meth:`kueue_es.services.watcher.publishing.Publisher.publish` compares
it with the last one), and after a relist deletes the ones gone. The conversion
is pure: :mod:`kueue_es.services.watcher.nodes`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import msgspec

from kueue_es.events import models, slices, types
from kueue_es.services.kube import objects
from kueue_es.services.watcher import nodes
from kueue_es.services.watcher.kueue_tracking import terminating_marked
from kueue_es.services.watcher.publishing import Publisher, log_rejection


class TopologyTracker:
    """Publishes TopologyObserved, NodeObserved, PodObserved and their ObjectDeleted through ``publisher``.

    A Node that may count as failed (not Ready, or a NoSchedule / NoExecute taint) carries the workloads whose
    pods still progress on it (``Node.progressing_workloads``: not terminated, not being deleted; Kueue's node
    controller waits for them, TASReplaceNodeOnPodTermination), so its fact is published again when that set
    changes, and not before the bound pods were listed once: a watcher that restarts must not report a failed
    node's running pods gone."""

    def __init__(self, *, publisher: Publisher, clock: Callable[[], int]) -> None:
        self.publisher, self.clock = publisher, clock
        self.nodes: dict[str, objects.KubeObject] = {}  # the live Nodes as last seen
        self.pods_listed = False
        # pod (namespace, name) -> (node, workload key) of the pods of kueue-es's workloads progressing on a node
        self.progressing: dict[tuple[str, str], tuple[str, str]] = {}
        self.on_node: dict[str, dict[str, int]] = {}  # node -> workload key -> its pods progressing there

    async def resynced(self, kind: str, listed: list[objects.KubeObject], *, version: str) -> None:
        """A fresh list of Topologies, Nodes or bound pods: the ones gone are deleted, the rest published if changed."""
        fact_kind = nodes.FACT_KIND[kind]
        live = {nodes.key_of(kind, obj) for obj in listed}
        for namespace, name in sorted(self.publisher.known[fact_kind] - live):
            await self.publisher.publish(
                types.ObjectDeleted(kind=fact_kind, namespace=namespace, name=name), version=version
            )
        if kind == "Node":
            for gone in set(self.nodes) - {name for _, name in live}:
                del self.nodes[gone]
        touched: set[str] = set()
        if kind == "PodUsage":
            for pod in set(self.progressing) - live:  # gone while no watch ran
                touched |= self._track(pod, None)
        for obj in listed:
            await self.changed(kind, "ADDED", obj)
        if kind == "PodUsage":
            first, self.pods_listed = not self.pods_listed, True
            await self._republish(set(self.nodes) if first else touched)

    async def changed(self, kind: str, change: str, obj: objects.KubeObject) -> None:
        """A Topology, Node or bound pod changed: its fact, published only if it differs from the last one
        (``Publisher.publish``), so heartbeats and status writes that TAS does not read publish nothing."""
        fact_kind = nodes.FACT_KIND[kind]
        namespace, name = nodes.key_of(kind, obj)
        version = objects.resource_version(obj)
        if kind == "PodUsage":
            entry = None if change == "DELETED" else _progressing_on(obj)
            await self._republish(self._track((namespace, name), entry))
        if change == "DELETED":
            if kind == "Node":
                self.nodes.pop(name, None)
            await self.publisher.publish(
                types.ObjectDeleted(kind=fact_kind, namespace=namespace, name=name, uid=objects.uid_of(obj)),
                version=version,
            )
            return
        if kind == "Node":
            self.nodes[name] = obj
            await self._publish_node(obj)
            return
        if kind == "Topology":  # held by Kueue's finalizer while a ResourceFlavor names it
            obj = terminating_marked(obj)
        fact = nodes.tas_fact(kind, obj, now_ms=self.clock())
        if fact is None:
            return  # a TAS pod: counted through its workload's assignment
        log_rejection(fact)
        await self.publisher.publish(fact, version=version)

    async def _publish_node(self, obj: objects.KubeObject) -> None:
        fact = nodes.tas_fact("Node", obj, now_ms=self.clock())
        if isinstance(fact, types.NodeObserved) and _may_fail(fact.node):
            if not self.pods_listed:
                return  # published once the pods are known (resynced)
            running = sorted(self.on_node.get(fact.node.metadata.name, {}))
            fact = types.NodeObserved(node=msgspec.structs.replace(fact.node, progressing_workloads=running))
        if fact is None:
            return
        log_rejection(fact)
        await self.publisher.publish(fact, version=objects.resource_version(obj))

    async def _republish(self, node_names: set[str]) -> None:
        """The facts of the Nodes whose progressing workloads may have changed (only a failing one's changes)."""
        for name in sorted(node_names):
            if (obj := self.nodes.get(name)) is not None:
                await self._publish_node(obj)

    def _track(self, pod: tuple[str, str], entry: tuple[str, str] | None) -> set[str]:
        """Record where ``pod`` progresses now (``entry``: node and workload key; None: nowhere); returns the
        nodes whose set of progressing workloads changed."""
        before = self.progressing.get(pod)
        if before == entry:
            return set()
        changed: set[str] = set()
        if before is not None:
            del self.progressing[pod]
            counts = self.on_node[before[0]]
            counts[before[1]] -= 1
            if not counts[before[1]]:
                del counts[before[1]]
                changed.add(before[0])
                if not counts:
                    del self.on_node[before[0]]
        if entry is not None:
            self.progressing[pod] = entry
            counts = self.on_node.setdefault(entry[0], {})
            if entry[1] not in counts:
                changed.add(entry[0])
            counts[entry[1]] = counts.get(entry[1], 0) + 1
        return changed


def _progressing_on(pod: objects.KubeObject) -> tuple[str, str] | None:
    """``(node, namespace/slice-name)`` of a bound pod of a workload that is neither terminated nor being
    deleted (Kueue node_controller.go hasProgressingPods), None for any other pod."""
    meta = objects.meta(pod)
    bound = cast(objects.Pod, pod)
    phase = str((bound.get("status") or {}).get("phase") or "")
    node = str((bound.get("spec") or {}).get("nodeName") or "")
    if not node or meta.get("deletionTimestamp") or phase in ("Succeeded", "Failed"):
        return None
    name = slices.pod_slice_name(meta.get("annotations") or {})
    if name is None:
        return None
    return node, f"{meta.get('namespace') or 'default'}/{name}"


def _may_fail(node: models.Node) -> bool:
    """Whether ``node`` may count as failed for a workload with pods on it (A.13.2): not Ready, or a
    NoSchedule / NoExecute taint (tolerations are the TAS placer's to weigh)."""
    return node.status.ready != "True" or any(t.effect in ("NoSchedule", "NoExecute") for t in node.spec.taints)
