"""The TAS ungater's pure core: which gated pod of a workload goes to which topology domain.

Kueue's topology ungater (pkg/controller/tas/topology_ungater.go; SEMANTICS-ADVANCED A.12)
runs for every Admitted workload with a topology assignment. A job started with a TA has
the ``kueue.x-k8s.io/topology`` scheduling gate on its pod templates, so each pod its
controller creates waits; the ungater gives each gated pod one domain of the assignment
(the domain's level labels as ``nodeSelector``) and removes the gate, so that every domain
gets exactly as many pods as the assignment says. This module decides that from the pods
as listed; :mod:`kueue_es.services.dispatcher.ungating` watches the pods and writes the patches.

1. Rank mode, when the pod set's request names a ``podIndexLabel`` and every pod carries
   a valid rank: rank = pod index - offset (+ job index x pods per job with a
   ``subGroupIndexLabel``); the domains, each repeated ``count`` times, give rank -> domain.
   A missing or bad label, a duplicate rank, a rank beyond the assignment, or an ungated
   pod whose nodeSelector disagrees with its rank's domain falls back to:
2. Greedy: count the ungated pods per domain (by their nodeSelector), then walk the domains
   in order and give each (count - already there) of the remaining gated pods, in list order.

A pod whose domain is a node the Workload lists in ``status.unhealthyNodes`` stays gated
(:func:`without_unhealthy`): the assignment still names that node until the TAS placer's
replacement swaps in another domain, and a pod ungated there would never schedule.

Leader+workers groups (``podSetGroupName``): the smaller pod set ranks from 0, the other is
offset by its count; a ``kueue.x-k8s.io/pod-index-offset`` annotation on the pods adds to
the offset.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kueue_es.events import models, slices, tas

TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
POD_INDEX_OFFSET_ANNOTATION = "kueue.x-k8s.io/pod-index-offset"


@dataclass(frozen=True, kw_only=True)
class PodSetTopology:
    """One admitted pod set with a topology assignment: ``count`` admitted pods (podSetAssignment
    count), its decoded ``assignment`` and its ``request`` (rank hints, group name) or None."""

    name: str
    count: int
    assignment: tas.Assignment
    request: models.PodSetTopologyRequest | None = None


@dataclass(frozen=True, kw_only=True)
class Ungate:
    """Remove the topology gate of pod ``name`` and add ``node_selector`` (its domain's level labels)."""

    name: str
    node_selector: dict[str, str]


def rank_bounds(pod_sets: Sequence[PodSetTopology]) -> dict[str, tuple[int, int]]:
    """``(offset, max rank)`` per pod set name before any pod-index-offset annotation (topology_ungater.go):
    a pod set alone ranks 0..count; in a group of two, the smaller one (the leader) ranks from 0 and
    the other from the leader's count."""
    groups: dict[str, list[PodSetTopology]] = {}
    for i, ps in enumerate(pod_sets):
        group = ps.request.pod_set_group_name if ps.request and ps.request.pod_set_group_name else str(i)
        groups.setdefault(group, []).append(ps)
    out: dict[str, tuple[int, int]] = {}
    for members in groups.values():
        if len(members) > 1:
            small, large = members[0], members[1]
            if small.count > large.count:
                small, large = large, small
            out[small.name] = (0, small.count)
            out[large.name] = (small.count, large.count + small.count)
        else:
            out[members[0].name] = (0, members[0].count)
    return out


def is_gated(pod: Mapping[str, Any]) -> bool:
    """Whether the topology gate still holds ``pod``."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(isinstance(g, dict) and g.get("name") == TOPOLOGY_GATE for g in gates)


def plan_pod_set(
    pod_set: PodSetTopology, pods: Sequence[Mapping[str, Any]], *, offset: int = 0, max_rank: int | None = None
) -> list[Ungate]:
    """The pods of ``pod_set`` to ungate now, each with its domain's node selector.

    ``pods``: the pod set's pods that are not terminated, in list order (gated and ungated).
    ``offset`` / ``max_rank`` from :func:`rank_bounds`; the pods' ``pod-index-offset``
    annotation (read from the first pod, as Kueue does) is added to both. Raises ValueError
    for a pod-index-offset annotation that is not an integer.
    """
    if max_rank is None:
        max_rank = pod_set.count
    if pods:
        raw = ((pods[0].get("metadata") or {}).get("annotations") or {}).get(POD_INDEX_OFFSET_ANNOTATION)
        if raw is not None:
            try:
                extra = int(raw)
            except ValueError:
                raise ValueError(f"annotation {POD_INDEX_OFFSET_ANNOTATION}={raw!r} is not an integer") from None
            offset, max_rank = offset + extra, max_rank + extra
    domains = [d.values for d in pod_set.assignment.domains for _ in range(d.count)]
    levels = pod_set.assignment.levels
    by_rank = _ranks(pod_set, pods, offset=offset, max_rank=max_rank, domains=domains)
    if by_rank is not None:
        return [
            Ungate(name=_name(pod), node_selector=dict(zip(levels, domains[rank], strict=True)))
            for rank, pod in sorted(by_rank.items())
            if is_gated(pod)
        ]
    return _greedy(pod_set.assignment, pods)


def without_unhealthy(
    plan: Sequence[Ungate], levels: Sequence[str], unhealthy: Collection[str]
) -> tuple[list[Ungate], list[Ungate]]:
    """Split ``plan`` into the pods to ungate now and those held back: a pod whose domain is one of the
    ``unhealthy`` nodes (the Workload's ``status.unhealthyNodes``) stays gated until the replacement domain
    is assigned (Kueue pkg/controller/tas/topology_ungater.go Reconcile: "skipping ungate; the assigned node
    is unhealthy and awaiting replacement", with utiltas.NodeNameFromDomainID: a domain names a node only
    when the lowest level is ``kubernetes.io/hostname``). Without that, a pod recreated after a node failure
    was ungated onto the failed node and stayed Pending for good (found by a new user's TAS trial)."""
    if not unhealthy or not levels or levels[-1] != tas.HOSTNAME_LABEL:
        return list(plan), []
    now = [step for step in plan if step.node_selector.get(tas.HOSTNAME_LABEL) not in unhealthy]
    held = [step for step in plan if step.node_selector.get(tas.HOSTNAME_LABEL) in unhealthy]
    return now, held


#: Kueue's TAS node controller's mark on a pending pod it fails (pkg/controller/tas/node_controller.go).
TERMINATED_BY_KUEUE = "TerminatedByKueue"
UNSCHEDULABLE_ON_ASSIGNED_NODE = "UnschedulableOnAssignedNode"
TERMINATED_BY_KUEUE_MESSAGE = "Pod terminated by Kueue NodeController due to node taint"


def pending_on_selected_node(pod: Mapping[str, Any]) -> str | None:
    """The node a pod's ``kubernetes.io/hostname`` nodeSelector names when the pod waits for it: phase Pending,
    not bound (no ``spec.nodeName``), no topology gate left (Kueue node_controller.go getPodsToTerminate); else
    None."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    host = (spec.get("nodeSelector") or {}).get(tas.HOSTNAME_LABEL)
    if not host or spec.get("nodeName") or status.get("phase") != "Pending" or is_gated(pod):
        return None
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    return str(host)


def terminated_by_kueue_status(pod: Mapping[str, Any], *, now: str) -> dict[str, Any]:
    """The status Kueue's TAS node controller writes on a pending pod stranded on its assigned node
    (node_controller.go markPodsFailed): phase Failed and the TerminatedByKueue condition, the others kept."""
    conditions = [
        c
        for c in (pod.get("status") or {}).get("conditions") or []
        if isinstance(c, dict) and c.get("type") != TERMINATED_BY_KUEUE
    ]
    condition = {
        "type": TERMINATED_BY_KUEUE,
        "status": "True",
        "reason": UNSCHEDULABLE_ON_ASSIGNED_NODE,
        "message": TERMINATED_BY_KUEUE_MESSAGE,
        "lastTransitionTime": now,
    }
    return {"phase": "Failed", "conditions": [*conditions, condition]}


def _ranks(
    pod_set: PodSetTopology,
    pods: Sequence[Mapping[str, Any]],
    *,
    offset: int,
    max_rank: int,
    domains: list[tuple[str, ...]],
) -> dict[int, Mapping[str, Any]] | None:
    """rank -> pod, or None when ranks cannot be used (readRanksIfAvailable, readRanksForLabels)."""
    request = pod_set.request
    if request is None or not request.pod_index_label:
        return None
    single_job = pod_set.count
    if request.sub_group_index_label:
        if not request.sub_group_count or request.sub_group_count <= 0:
            return None
        single_job = pod_set.count // request.sub_group_count
    result: dict[int, Mapping[str, Any]] = {}
    for pod in pods:
        index = _label_int(pod, request.pod_index_label, bound=max_rank)
        if index is None:
            return None
        rank = index - offset
        if request.sub_group_index_label:
            job = _label_int(pod, request.sub_group_index_label, bound=request.sub_group_count or 0)
            if job is None or index >= single_job:
                return None
            rank = index + job * single_job - offset
        if not 0 <= rank < pod_set.count or rank in result:
            return None
        result[rank] = pod
    levels = pod_set.assignment.levels
    for rank, pod in result.items():
        if rank >= len(domains):
            return None  # the assignment covers fewer pods than the pod set count
        if not is_gated(pod) and _domain_of(pod, levels) != domains[rank]:
            return None  # a running pod is not where its rank says
    return result


def _greedy(assignment: tas.Assignment, pods: Sequence[Mapping[str, Any]]) -> list[Ungate]:
    """assignGatedPodsToDomainsGreedy: fill each domain up to its count, gated pods in list order."""
    gated = [pod for pod in pods if is_gated(pod)]
    placed: dict[tuple[str, ...], int] = {}
    for pod in pods:
        if not is_gated(pod):
            where = _domain_of(pod, assignment.levels)
            placed[where] = placed.get(where, 0) + 1
    out: list[Ungate] = []
    for domain in assignment.domains:
        wanted = max(domain.count - placed.get(domain.values, 0), 0)
        take = gated[len(out) : len(out) + wanted]
        out += [
            Ungate(name=_name(pod), node_selector=dict(zip(assignment.levels, domain.values, strict=True)))
            for pod in take
        ]
    return out


def _domain_of(pod: Mapping[str, Any], levels: Sequence[str]) -> tuple[str, ...]:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    return tuple(str(selector.get(level, "")) for level in levels)


def _label_int(pod: Mapping[str, Any], label: str, *, bound: int) -> int | None:
    """utilpod.ReadUIntFromLabelBelowBound: the label as a non-negative integer below ``bound``, else None."""
    raw = ((pod.get("metadata") or {}).get("labels") or {}).get(label)
    if raw is None or not str(raw).isdigit():
        return None
    value = int(raw)
    return value if value < bound else None


def _name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


WORKLOAD_ANNOTATION = slices.WORKLOAD_ANNOTATION  # the Workload a started pod belongs to (reconciler.go)


def chain_name(pod: Mapping[str, Any]) -> str | None:
    """The name the ungaters find ``pod`` by: its ``kueue.x-k8s.io/workload-slice-name`` annotation when
    it has one (an elastic job's pods: the chain's first slice), else its ``kueue.x-k8s.io/workload``
    annotation, None with neither (Kueue's IndexPodWorkloadSliceName, indexer.go). The Workload annotation
    alone names the slice that started the job, which is not the chain's first when that slice was replaced
    before its start was written."""
    return slices.pod_slice_name((pod.get("metadata") or {}).get("annotations") or {})


def is_elastic_gated(pod: Mapping[str, Any]) -> bool:
    """Whether the elastic-job gate still holds ``pod`` (SEMANTICS-ADVANCED D.4)."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(isinstance(g, dict) and g.get("name") == slices.ELASTIC_JOB_GATE for g in gates)


def elastic_release(count: int, pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Which gated pods of one pod set of an elastic job to release: room = ``count`` (the pod set's
    count in the chain's newest admitted slice) less the pods already released, filled with the
    gated pods of lowest name first (elastic_job_ungater.go). ``pods``: the pod set's live pods."""
    released = sum(1 for pod in pods if not is_elastic_gated(pod))
    room = count - released
    if room <= 0:
        return []
    gated = sorted(_name(pod) for pod in pods if is_elastic_gated(pod))
    return gated[:room]
