"""Node failures after admission: replace the pods of a failed node, or evict (SEMANTICS-ADVANCED A.13).

Why this module exists: these are Kueue's rules for admitted TAS workloads whose node fails;
the TAS placer service (role ``place``) only runs them on each cycle's state. Kueue:
pkg/controller/tas/node_controller.go, pkg/cache/scheduler/tas_flavor_snapshot.go
(findReplacementAssignment, requiredReplacementDomain, findIncompleteSliceDomain),
pkg/scheduler/scheduler.go handleFailedTASReplacement, pkg/workload OwnedBySinglePod.

- the replacement is placed with the configured placement gates (TASProfileMixed,
  TASBalancedPlacement), as at admission (Kueue runs the same findTopologyAssignment,
  :func:`kueue_es.scheduling.tas.placement.find_assignments`);
- a node counts as failed when it is deleted or has no Ready condition; or when it is not Ready, or
  carries a NoSchedule / NoExecute taint the pod set does not tolerate (its template's, its flavor's
  and its admission checks' tolerations) or tolerates only for ``tolerationSeconds``, and (placer
  logic 11, gate TASReplaceNodeOnPodTermination, on) no pod of the workload still runs on it: the
  watcher lists those workloads in the Node's fact (``Node.progressing_workloads``). A taint counts
  only when the node's taints, Ready status or pods changed after the workload's topology was
  assigned (Kueue's node controller looks again only on such a change; placer logic 10). Logic 10
  and earlier, and the gate off, fail a NotReady or untolerated-tainted node at once (Kueue, gate
  off: a NotReady node after 30 s); gate TASReplaceNodeOnNodeTaints off: taints never fail a node;
- two different failed nodes ⇒ the workload is evicted (reason NodeFailures);
- one ⇒ its pods are placed again (same count), inside the required domain of a ``required``
  request (the ancestor of the first remaining domain at the required level), on the current
  free capacity, and merged with the rest of the assignment: a new TopologyAssigned;
- no replacement ⇒ evicted (TASFailedNodeReplacementFailFast, on) or tried again every cycle
  (gate off) until capacity frees.

A replacement of pods that are not whole slices goes to the slice domain they complete, with
the slice size narrowed to the innermost layer dividing their count (A.13.4 step 3).

A workload owned by a single v1 Pod (not a pod group) keeps its assignment when one of its
nodes fails (SkipReassignmentForPodOwnedWorkloads, on; A.13.4 step 1): its pod cannot move.

Pure: state in, decisions out.
"""

from __future__ import annotations

import dataclasses

import msgspec

from kueue_es.events import models, slices, tas, types
from kueue_es.projections.cluster import ClusterState, WorkloadState, tas_flavor_of
from kueue_es.projections.topology import FlavorTopology
from kueue_es.scheduling.tas.placement import find_assignments
from kueue_es.scheduling.tas.requests import Placement, PodSetPlacementRequest, TASGates, add_usage

NODE_FAILURES = "NodeFailures"
SHARED_HOSTNAMES = ""
"""The ``usage`` key of the usage shared by every hostname-level flavor (no flavor is named "")."""


def check(
    state: ClusterState,
    wl: WorkloadState,
    usage: dict[str, dict[str, dict[str, int]]],
    *,
    fail_fast: bool,
    now_ms: int,
    balanced_slice_size: bool = True,
    shared_hostnames: bool = True,
    preferred_affinity: bool = True,
    taints_on_change: bool = True,
    pods_on_node: bool = True,
) -> list[types.Decision]:
    """The decisions for one admitted workload with a topology assignment: none while its
    hostname-level nodes are healthy, else a replacement TopologyAssigned or an eviction.
    ``usage`` (per flavor, per leaf; with ``shared_hostnames`` one entry keyed
    :data:`SHARED_HOSTNAMES` for every flavor) carries this cycle's earlier replacements.

    ``balanced_slice_size`` False: balanced placement as placer logic 6 chose its
    domains above the slice level, in single pods (replay; :class:`TASGates`).
    ``shared_hostnames`` (TAS placer logic 8; False: 7 and earlier, for replay): the replacement
    counts the usage of every hostname-level TAS flavor on a node, as the admission does (A.2.4,
    Kueue TASHandleOverlappingFlavors: flavors selecting the same nodes share their capacity),
    not only its own flavor's.

    ``preferred_affinity`` (TAS placer logic 8; False: 7 and earlier, for replay): the replacement
    honours the gate TASRespectNodeAffinityPreferred (preferred node affinity scores, A.3.4), as
    the admission does; False ignores the gate.

    ``taints_on_change`` (TAS placer logic 10; False: 9 and earlier, for replay): a Ready node's
    untolerated taint fails it for the workload only if the node's taints or Ready status changed
    after the workload's topology was assigned. Kueue's node controller looks at a node's workloads
    only when the node is created, deleted, or changes Ready or taints (or a pod of it changes,
    which kueue-es does not see), so a change of the flavor's tolerations alone does not fail the
    nodes of admitted workloads (Kueue test/integration/singlecluster/tas/tas_test.go, "Updating
    TAS ResourceFlavor tolerations"). False: every cycle checks the taints with today's
    tolerations."""
    assert wl.reservation is not None and wl.topology is not None
    failed = failed_nodes(state, wl, taints_on_change=taints_on_change, pods_on_node=pods_on_node)
    if not failed:
        return []
    cq = wl.reservation.cluster_queue
    if len(failed) > 1:
        names = ", ".join(sorted(failed))
        message = f"Workload eviction triggered due to multiple TAS assigned node failures, including: {names}"
        return [_evict(wl, cq, message, now_ms=now_ms)]
    if _keeps_assignment(state, wl):
        return []  # A.13.4 step 1: the pod cannot move; its assignment stays as it is
    node, ps_name = next(iter(failed.items()))
    replaced = _replace(
        state,
        wl,
        ps_name,
        node,
        usage,
        balanced_slice_size=balanced_slice_size,
        shared_hostnames=shared_hostnames,
        preferred_affinity=preferred_affinity,
    )
    if isinstance(replaced, models.TopologyAssignment):
        assignments = {**wl.topology, ps_name: replaced}
        return [types.TopologyAssigned(workload=wl.ref, cluster_queue=cq, assignments=assignments, at_ms=now_ms)]
    if not fail_fast:
        return []  # tried again next cycle (Kueue: the second-pass queue)
    message = f"Workload was evicted as there was no replacement for unhealthy node(s): {node}"
    return [_evict(wl, cq, message, now_ms=now_ms)]


def failed_nodes(
    state: ClusterState, wl: WorkloadState, *, taints_on_change: bool = True, pods_on_node: bool = True
) -> dict[str, str]:
    """The failed nodes (A.13.2) of an admitted workload's hostname-level topology assignments, each with the pod
    set assigned to it first (node name -> pod set name), in assignment order; {} for a workload without a
    reservation or topology. ``taints_on_change`` and ``pods_on_node``: as for :func:`check`."""
    if wl.reservation is None or wl.topology is None:
        return {}
    gates = state.configuration.feature_gates
    wait_for_pods = pods_on_node and gates.get("TASReplaceNodeOnPodTermination", True)
    see_taints = not pods_on_node or gates.get("TASReplaceNodeOnNodeTaints", True)
    pods_key = f"{wl.workload.metadata.namespace}/{slices.workload_slice_name(wl.workload)}"
    specs = {ps.name: ps for ps in wl.workload.spec.pod_sets}
    updates = [u for c in wl.checks.values() for u in c.pod_set_updates]
    failed: dict[str, str] = {}  # node -> pod set
    for psa in wl.reservation.pod_set_assignments:
        ta = wl.topology.get(psa.name)
        flavor_name = tas_flavor_of(state, psa)
        if ta is None or flavor_name is None or ta.levels[-1:] != [tas.HOSTNAME_LABEL]:
            continue  # A.13.1: only hostname assignments get failure handling
        flavor = state.flavors[flavor_name]
        spec = specs.get(psa.name)
        tolerations = [
            *(spec.tolerations if spec else []),
            *flavor.spec.tolerations,
            *(t for u in updates if u.name == psa.name for t in u.tolerations),
        ]
        tree = state.topology.flavor_topology(flavor_name)
        for domain in tas.decode(ta).domains:
            node = domain.values[-1]
            if node in failed:
                continue
            taints = see_taints and (not taints_on_change or state.node_health_seq.get(node, 0) > wl.topology_seq)
            node_object = _node_of(state, tree, node)
            progressing = None
            if pods_on_node and node_object is not None:
                progressing = pods_key in node_object.progressing_workloads
            if _failed(node_object, tolerations if taints else None, progressing, wait_for_pods=wait_for_pods):
                failed[node] = psa.name
    return failed


def unhealthy_nodes(state: ClusterState, wl: WorkloadState) -> tuple[str, ...]:
    """The Workload's ``status.unhealthyNodes`` names as Kueue's TAS node controller and scheduler leave them
    (A.13.3, A.13.4; pkg/controller/tas/node_controller.go, scheduler.go): the one failed node
    (:func:`failed_nodes`) of an Admitted workload that is neither evicted nor finished, while its pods wait for
    a replacement, which clears it (the new assignment no longer names the node). Empty otherwise: no failed node;
    two or more (the second evicts the workload, NodeFailures, and an eviction clears the list); evicted or
    finished; or a workload owned by a single Pod (SkipReassignmentForPodOwnedWorkloads: Kueue's second pass
    admits it again with its assignment unchanged, which clears the list at once). The TAS placer decides the
    replacement or the eviction in the cycle that sees the failure (:func:`check`), so the node is listed until
    that decision is folded, or, with TASFailedNodeReplacementFailFast off and no room, until a later cycle finds
    one."""
    if not wl.admitted or wl.gone or wl.eviction is not None or wl.finished is not None:
        return ()
    failed = failed_nodes(state, wl)
    if len(failed) != 1 or _keeps_assignment(state, wl):
        return ()
    return tuple(failed)


def _keeps_assignment(state: ClusterState, wl: WorkloadState) -> bool:
    """A.13.4 step 1: a workload owned by a single Pod keeps its assignment when a node fails (gate
    SkipReassignmentForPodOwnedWorkloads, on by default)."""
    gates = state.configuration.feature_gates
    return gates.get("SkipReassignmentForPodOwnedWorkloads", True) and _owned_by_single_pod(wl.workload)


def any_suspect_node(state: ClusterState) -> bool:
    """Whether some node holding TAS usage in a hostname-level tree is deleted, not Ready or carries
    a NoSchedule/NoExecute taint (tolerations ignored: :func:`check` decides per workload). False lets
    the decider skip its walk over every workload, which the folded usage makes exact: a workload's
    assigned hostnames are the leaves its usage sits on."""
    for flavor, per_leaf in state.tas_usage.items():
        tree = state.topology.flavor_topology(flavor)
        if tree is None:
            return True  # its Topology or flavor is gone: let the full check look
        if not tree.lowest_is_hostname:
            continue  # A.13.1: only hostname assignments get failure handling
        for leaf_id in per_leaf:
            if _failed(_node_of(state, tree, leaf_id.rsplit(",", 1)[-1]), []):
                return True
    return False


def terminates_pending_pods(state: ClusterState, wl: WorkloadState, node_name: str) -> bool:
    """Whether Kueue's TAS node controller fails the pending pods of ``wl`` that a nodeSelector binds to node
    ``node_name`` (pkg/controller/tas/node_controller.go getWorkloadStatus, checkPodsOnNode,
    getPodsToTerminate, markPodsFailed: phase Failed, condition TerminatedByKueue
    ``UnschedulableOnAssignedNode``), so that their job makes them again and the ungater places the new ones.
    False for a workload not admitted, evicted or finished, and for a node that is gone or has no Ready
    condition (Kueue marks such a node failed without looking at pods). True when the node is not in the
    workload's topology assignment any more (a late pod with the old selector); when it is not Ready (gate
    TASReplaceNodeOnPodTermination); or when one of its NoSchedule/NoExecute taints is not tolerated for good
    by every pod set assigned there (classifyTaints: untolerated or tolerated only for ``tolerationSeconds``;
    gate TASReplaceNodeOnNodeTaints). Only the dispatcher's pod writes follow from it: no decision changes."""
    if not wl.admitted or wl.reservation is None or wl.eviction is not None or wl.finished is not None:
        return False
    node = state.topology.nodes.get(node_name)
    if node is None or node.status.ready in ("", None):
        return False
    gates = state.configuration.feature_gates
    specs = {ps.name: ps for ps in wl.workload.spec.pod_sets}
    updates = [u for c in wl.checks.values() for u in c.pod_set_updates]
    assigned: list[list[models.Toleration]] = []
    by_hostname = False
    for psa in wl.reservation.pod_set_assignments:
        ta = (wl.topology or {}).get(psa.name)
        if ta is None or ta.levels[-1:] != [tas.HOSTNAME_LABEL]:
            continue
        by_hostname = True
        if not any(d.values[-1] == node_name for d in tas.decode(ta).domains):
            continue
        flavor_name = tas_flavor_of(state, psa)
        spec = specs.get(psa.name)
        assigned.append(
            [
                *(spec.tolerations if spec else []),
                *(state.flavors[flavor_name].spec.tolerations if flavor_name in state.flavors else []),
                *(t for u in updates if u.name == psa.name for t in u.tolerations),
            ]
        )
    if not assigned:
        return by_hostname  # a stray pod: its node is no longer in the hostname assignment
    if node.status.ready != "True":
        return gates.get("TASReplaceNodeOnPodTermination", True)
    if not gates.get("TASReplaceNodeOnNodeTaints", True):
        return False
    for taint in node.spec.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        for tolerations in assigned:
            if not any(_tolerates(t, taint) for t in tolerations if t.toleration_seconds is None):
                return True  # untolerated, or tolerated only for a while
    return False


def node_suspect(node: models.Node | None) -> bool:
    """Whether ``node`` may count as failed for some workload (A.13.2): gone (None), not Ready, or carrying a
    NoSchedule/NoExecute taint (which a workload may tolerate: :func:`failed_nodes` decides per workload)."""
    return _failed(node, [])


def _node_of(state: ClusterState, tree: FlavorTopology | None, hostname: str) -> models.Node | None:
    """The node an assignment's hostname value names: the node of that name (Kueue's node
    controller matches node names against the values), else the tree's node carrying that
    hostname label (nodes whose hostname label is not their name, e.g. Kueue's performance test:
    node-b0-r3-n15 has hostname node-15). None: no such node (deleted, or out of the tree)."""
    node = state.topology.nodes.get(hostname)
    if node is None and tree is not None and (leaf := tree.leaf_by_id.get(hostname)) is not None:
        node = leaf.node
    return node


IS_GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"


def _owned_by_single_pod(workload: models.Workload) -> bool:
    """Owned by one v1 Pod and not a pod group's workload (Kueue workload.OwnedBySinglePod)."""
    owner = workload.owner
    if owner is None or workload.metadata.annotations.get(IS_GROUP_WORKLOAD_ANNOTATION) == "true":
        return False
    return owner.kind == "Pod" and owner.api_version == "v1"


def _failed(
    node: models.Node | None,
    tolerations: list[models.Toleration] | None,
    progressing: bool | None = None,
    *,
    wait_for_pods: bool = False,
) -> bool:
    """A.13.2 (Kueue node_controller.go getWorkloadStatus): deleted or without a Ready condition: failed. Not
    Ready, or a NoSchedule/NoExecute taint not tolerated (taints not looked at when ``tolerations`` is None):
    failed, unless ``wait_for_pods`` (TASReplaceNodeOnPodTermination) and the workload still has a pod
    progressing there. A taint tolerated only for ``tolerationSeconds``: failed once no pod is progressing
    there. ``progressing`` None: the pods are not looked at (placer logic 10 and earlier): not Ready or an
    untolerated taint fail at once, a temporarily tolerated taint never."""
    if node is None or node.status.ready in ("", None):
        return True
    stays = wait_for_pods and bool(progressing)
    if node.status.ready != "True":
        return not stays
    if tolerations is None:
        return False
    temporarily = False
    for taint in node.spec.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return not stays
        if not any(_tolerates(t, taint) for t in tolerations if t.toleration_seconds is None):
            temporarily = True
    return temporarily and progressing is False


def _tolerates(toleration: models.Toleration, taint: models.Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    return toleration.operator == "Exists" or toleration.value == taint.value


def _replace(
    state: ClusterState,
    wl: WorkloadState,
    ps_name: str,
    failed_node: str,
    cycle_usage: dict[str, dict[str, dict[str, int]]],
    *,
    balanced_slice_size: bool,
    shared_hostnames: bool,
    preferred_affinity: bool,
) -> models.TopologyAssignment | str:
    """findReplacementAssignment (A.13.4): the pod set's new assignment, or why there is none."""
    assert wl.reservation is not None and wl.topology is not None
    psa = next(p for p in wl.reservation.pod_set_assignments if p.name == ps_name)
    flavor = tas_flavor_of(state, psa)
    tree = state.topology.flavor_topology(flavor) if flavor else None
    spec = next((p for p in wl.workload.spec.pod_sets if p.name == ps_name), None)
    if tree is None or spec is None:
        return "no topology"
    current = tas.decode(wl.topology[ps_name])
    kept = [d for d in current.domains if d.values[-1] != failed_node]
    count = sum(d.count for d in current.domains) - sum(d.count for d in kept)
    for domain in kept:
        if domain.values[-1] not in tree.leaf_by_id:
            return (
                "Cannot replace the node, because the existing topologyAssignment is invalid, "
                f"as it contains the stale domain {domain.values[-1]}"
            )
    prefix = replacement_domain(tree, spec.topology_request, kept, count)
    restricted = tree
    if prefix is not None:
        restricted = dataclasses.replace(
            tree, leaves=tuple(leaf for leaf in tree.leaves if leaf.values[: len(prefix)] == prefix)
        )
    updates = tuple(u for c in wl.checks.values() if c.state == "Ready" for u in c.pod_set_updates)
    implied = not tas.requests_tas(spec.topology_request)
    request = PodSetPlacementRequest.from_pod_set(spec, count=count, implied=implied, pod_set_updates=updates)
    layers = tas.slice_layers(spec.topology_request)
    if (
        spec.topology_request is not None
        and layers
        and layers[0].size > 0
        and prefix is not None
        and count % layers[0].size
    ):
        # Not whole slices: the innermost layer whose size divides the count, else single pods.
        inner = next((layer for layer in reversed(layers) if layer.size > 0 and count % layer.size == 0), None)
        request = dataclasses.replace(request, topology_request=_with_slices(spec.topology_request, inner))
    assert flavor is not None
    # Every replaced assignment is hostname-level (A.13.1), so its nodes may be shared with other
    # hostname-level flavors (A.2.4): their pods take the same capacity, here as at admission
    # (Kueue passes the same aggregatedDomainUsages to findReplacementAssignment).
    key = SHARED_HOSTNAMES if shared_hostnames else flavor
    usage = cycle_usage.get(key)
    if usage is None:  # the workloads holding quota, then this cycle's replacements (counted once placed)
        usage = cycle_usage[key] = {}
        for name in _hostname_flavors(state) if shared_hostnames else (flavor,):
            add_usage(usage, state.tas_usage.get(name, {}))
    # The placement gates as at admission (TASProfileMixed, TASBalancedPlacement): Kueue's
    # findReplacementAssignment runs the same findTopologyAssignment (tas_flavor_snapshot.go).
    gates = TASGates.from_feature_gates(state.configuration.feature_gates, balanced_slice_size=balanced_slice_size)
    if not preferred_affinity:
        gates = dataclasses.replace(gates, preferred_affinity=False)
    result = find_assignments(restricted, [request], tas_usage=usage, check_empty=False, gates=gates)
    if not isinstance(result, Placement) or not result.assignments.get(ps_name, tas.Assignment((), ())).domains:
        return f"cannot find replacement assignment for unhealthy node: {failed_node}"
    add_usage(usage, result.usage)
    counts: dict[tuple[str, ...], int] = {}
    for domain in [*kept, *result.assignments[ps_name].domains]:
        counts[domain.values] = counts.get(domain.values, 0) + domain.count
    order = {leaf.values[-1]: leaf.values for leaf in tree.leaves}
    merged = sorted(counts.items(), key=lambda item: order.get(item[0][-1], item[0]))
    return tas.encode(
        tas.Assignment(levels=current.levels, domains=tuple(tas.DomainAssignment(v, c) for v, c in merged))
    )


def _hostname_flavors(state: ClusterState) -> list[str]:
    """The flavors holding TAS usage whose topology's lowest level is the hostname."""
    return sorted(
        name
        for name in state.tas_usage
        if (tree := state.topology.flavor_topology(name)) is not None and tree.lowest_is_hostname
    )


def _with_slices(
    request: models.PodSetTopologyRequest, layer: models.PodsetSliceRequiredTopologyConstraint | None
) -> models.PodSetTopologyRequest:
    """``request`` with its slice layers replaced by ``layer`` alone (None: no slices)."""
    return msgspec.structs.replace(
        request,
        podset_slice_required_topology_constraints=[],
        pod_set_slice_required_topology=layer.topology if layer is not None else None,
        pod_set_slice_size=layer.size if layer is not None else None,
    )


def replacement_domain(
    tree: FlavorTopology,
    request: models.PodSetTopologyRequest | None,
    kept: list[tas.DomainAssignment],
    count: int,
) -> tuple[str, ...] | None:
    """The level values of the domain the ``count`` replaced pods must go to (A.13.4 step 3;
    Kueue requiredReplacementDomain, findIncompleteSliceDomain), or None (anywhere):

    - nothing kept ⇒ None;
    - slices and ``count`` not a multiple of the outermost slice size ⇒ the domain, at the
      level of the innermost layer whose size does not divide ``count``, whose kept pods plus
      ``count`` make whole slices of that layer (several: the first by level values; Kueue
      takes any); none ⇒ None;
    - a ``required`` request ⇒ the ancestor, at the required level, of the first kept domain.
    """
    if request is None or not kept:
        return None
    layers = tas.slice_layers(request)
    if layers and any(layer.size <= 0 for layer in layers):
        return None  # invalid slice sizes: no required domain (Kueue getSliceSizeWithSinglePodAsDefault)
    if layers and count % layers[0].size:
        layer = next(layer for layer in reversed(layers) if count % layer.size)
        if layer.topology not in tree.levels:
            return None
        depth = tree.levels.index(layer.topology) + 1
        pods: dict[tuple[str, ...], int] = {}
        for domain in kept:
            leaf = tree.leaf_by_id.get(tas.domain_id(domain.values))
            if leaf is not None:
                pods[leaf.values[:depth]] = pods.get(leaf.values[:depth], 0) + domain.count
        return next((values for values in sorted(pods) if (pods[values] + count) % layer.size == 0), None)
    if request.required is None or request.required not in tree.levels:
        return None
    first = tree.leaf_by_id.get(tas.domain_id(kept[0].values))
    if first is None:
        return None
    return first.values[: tree.levels.index(request.required) + 1]


def _evict(wl: WorkloadState, cluster_queue: str, message: str, *, now_ms: int) -> types.EvictionRequested:
    return types.EvictionRequested(
        workload=wl.ref, cluster_queue=cluster_queue, reason=NODE_FAILURES, message=message, at_ms=now_ms
    )
