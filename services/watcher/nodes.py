"""What Topology-Aware Scheduling reads from the cluster, as facts (SEMANTICS-ADVANCED A.1, A.2).

Why this module exists: TAS places pods on nodes, so the log must know the Topology
objects (their levels), the Nodes (labels, taints, allocatable, Ready, unschedulable)
and the pods already taking node capacity that TAS does not count through an
assignment. This is the watcher's pure conversion for those three kinds; the runner
(:mod:`kueue_es.services.watcher.service`) lists and watches them and publishes a fact only
when its content changes, so a kubelet heartbeat (a new resourceVersion, new
condition timestamps) publishes nothing: :class:`kueue_es.events.models.Node` keeps only the
status of the Ready condition.

Which pods: every pod bound to a node (``spec.nodeName`` set; the watch uses the field
selector :data:`BOUND_PODS`) that is not a TAS pod, i.e. carries none of Kueue's
topology annotations (``kueue.x-k8s.io/podset-*-topology``: Kueue utiltas.IsTAS). That
includes pods of workloads admitted without TAS, DaemonSets and static pods, as
Kueue's non-TAS pod cache does (A.2.2; pkg/cache/scheduler/tas_non_tas_pod_cache.go).
The pods of TAS workloads carry the annotation (their template's, or the
``podset-unconstrained-topology`` the dispatcher injects for implied TAS, A.4.3) and
are counted from their workload's topology assignment instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueue_es.events import manifests, tas, types
from kueue_es.jobframework import workloads
from kueue_es.services.kube import resources

#: The kinds this module converts, as the watcher names its watches (``PodUsage``: the pods bound to nodes).
TAS_KINDS = ("Topology", "Node", "PodUsage")
#: The kind each watch's facts and deletions name (ObjectDeleted ``kind``).
FACT_KIND = {"Topology": "Topology", "Node": "Node", "PodUsage": "Pod"}
#: Field selector of the pods that may take node capacity: those bound to a node.
BOUND_PODS = "spec.nodeName!="
#: The pods, listed and watched as the ``PodUsage`` kind (only the kind name differs from v1 Pod).
BOUND_PODS_REF = resources.ResourceRef(group="", version="v1", plural="pods", kind="PodUsage", namespaced=True)
#: kueue.x-k8s.io/v1alpha1 Topology: read when the cluster's Kueue serves no v1beta2 Topology (older Kueue).
TOPOLOGIES_V1ALPHA1 = resources.ResourceRef(
    group="kueue.x-k8s.io", version="v1alpha1", plural="topologies", kind="Topology", namespaced=False
)
#: The Topology versions the watcher tries, newest first.
TOPOLOGY_REFS = (resources.TOPOLOGIES, TOPOLOGIES_V1ALPHA1)


def key_of(kind: str, obj: Mapping[str, Any]) -> tuple[str, str]:
    """``(namespace, name)`` of an object of watch ``kind`` (namespace "" for Nodes and Topologies)."""
    meta = workloads.as_mapping(obj.get("metadata"))
    namespace = str(meta.get("namespace") or "default") if kind == "PodUsage" else ""
    return namespace, str(meta.get("name") or "")


def tas_fact(kind: str, obj: Mapping[str, Any], *, now_ms: int = 0) -> types.Fact | None:
    """The fact one Topology, Node or bound Pod stands for now.

    Topology -> TopologyObserved, Node -> NodeObserved, Pod -> PodObserved (None for a TAS pod
    or a pod not bound to a node). An object that does not parse gives ObjectRejected naming
    the field (an invalid Topology level, a bad quantity), and its last valid fact stays in force.
    """
    manifest = dict(obj)
    manifest["kind"] = FACT_KIND[kind]
    if kind == "PodUsage":
        manifest["apiVersion"] = "v1"
        if not ((manifest.get("spec") or {}).get("nodeName")):
            return None
    if kind == "Node":
        manifest["apiVersion"] = "v1"
    try:
        fact = tas.tas_fact(manifest)
    except manifests.ManifestError as err:
        return workloads.rejected(manifest, err, now_ms=now_ms)
    return fact
