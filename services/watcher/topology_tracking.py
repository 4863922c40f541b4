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

from kueue_es.events import types
from kueue_es.services.kube import objects
from kueue_es.services.watcher import nodes
from kueue_es.services.watcher.kueue_tracking import terminating_marked
from kueue_es.services.watcher.publishing import Publisher, log_rejection


class TopologyTracker:
    """Publishes TopologyObserved, NodeObserved, PodObserved and their ObjectDeleted through ``publisher``."""

    def __init__(self, *, publisher: Publisher, clock: Callable[[], int]) -> None:
        self.publisher, self.clock = publisher, clock

    async def resynced(self, kind: str, listed: list[objects.KubeObject], *, version: str) -> None:
        """A fresh list of Topologies, Nodes or bound pods: the ones gone are deleted, the rest published if changed."""
        fact_kind = nodes.FACT_KIND[kind]
        live = {nodes.key_of(kind, obj) for obj in listed}
        for namespace, name in sorted(self.publisher.known[fact_kind] - live):
            await self.publisher.publish(
                types.ObjectDeleted(kind=fact_kind, namespace=namespace, name=name), version=version
            )
        for obj in listed:
            await self.changed(kind, "ADDED", obj)

    async def changed(self, kind: str, change: str, obj: objects.KubeObject) -> None:
        """A Topology, Node or bound pod changed: its fact, published only if it differs from the last one
        (``Publisher.publish``), so heartbeats and status writes that TAS does not read publish nothing."""
        fact_kind = nodes.FACT_KIND[kind]
        namespace, name = nodes.key_of(kind, obj)
        version = objects.resource_version(obj)
        if change == "DELETED":
            await self.publisher.publish(
                types.ObjectDeleted(kind=fact_kind, namespace=namespace, name=name, uid=objects.uid_of(obj)),
                version=version,
            )
            return
        if kind == "Topology":  # held by Kueue's finalizer while a ResourceFlavor names it
            obj = terminating_marked(obj)
        fact = nodes.tas_fact(kind, obj, now_ms=self.clock())
        if fact is None:
            return  # a TAS pod: counted through its workload's assignment
        log_rejection(fact)
        await self.publisher.publish(fact, version=version)
