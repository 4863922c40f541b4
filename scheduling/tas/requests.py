"""Placement requests and results: what one TAS placement is asked and what it answers.

Why this module exists: the admission cycle, the preemptor's topology check and the node
replacement all build the same request (a pod set's count, per-pod requests, topology request,
filters and podSetUpdates) and read the same answer; this is that vocabulary, with no placement
logic. Kueue: pkg/cache/scheduler/tas_flavor_snapshot.go (TASPodSetRequests, the result of
FindTopologyAssignmentsForFlavor), pkg/util/tas (ComputeUsagePerDomain); SEMANTICS-ADVANCED A.2,
A.3, A.6.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from kueue_es.events import models
from kueue_es.events.tas import Assignment, domain_id

Requests = dict[str, int]


@dataclass(frozen=True)
class TASGates:
    """The feature gates that change placement (A.0), with Kueue's defaults."""

    profile_mixed: bool = True  # TASProfileMixed: unconstrained uses LeastFreeCapacity
    balanced_placement: bool = False  # TASBalancedPlacement (alpha): balanced preferred (A.6.9)
    # Not a gate: which logic chooses balanced placement's domains above the slice level. True:
    # sized in pods of whole slices, as Kueue's applyBalancedPlacementAlgorithm; False: in single
    # pods (admitter logic 23 and placer logic 6 and earlier, kept for replay).
    balanced_slice_size: bool = True
    preferred_affinity: bool = False  # TASRespectNodeAffinityPreferred (alpha): preferred node affinity scores (A.3.4)

    @classmethod
    def from_feature_gates(cls, gates: Mapping[str, bool], *, balanced_slice_size: bool = True) -> TASGates:
        """The placement gates from a Configuration's ``featureGates`` (missing ⇒ Kueue default);
        ``balanced_slice_size`` False only to re-run an earlier logic version (replay)."""
        return cls(
            profile_mixed=gates.get("TASProfileMixed", True),
            balanced_placement=gates.get("TASBalancedPlacement", False),
            balanced_slice_size=balanced_slice_size,
            preferred_affinity=gates.get("TASRespectNodeAffinityPreferred", False),
        )


DEFAULT_GATES = TASGates()
"""Kueue's default feature gates, one frozen instance."""


@dataclass(frozen=True)
class PodSetPlacementRequest:
    """One pod set to place: ``count`` pods each requesting ``requests`` (raw pod-template
    requests, integer amounts, without ``pods``; A.2.2), its topology request (None with
    ``implied`` for a pod set of a TAS-only ClusterQueue without a request, A.4.3), its template's
    node selector / tolerations / required node affinity (filters) and preferred node affinity
    (scores, A.3.4), and the podSetUpdates of Ready admission checks (A.3)."""

    name: str
    count: int
    requests: Mapping[str, int]
    topology_request: models.PodSetTopologyRequest | None = None
    implied: bool = False
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[models.Toleration, ...] = ()
    required_node_affinity: tuple[models.NodeSelectorTerm, ...] = ()
    preferred_node_affinity: tuple[models.PreferredSchedulingTerm, ...] = ()
    pod_set_updates: tuple[models.PodSetUpdate, ...] = ()
    previous: Assignment | None = None
    """The assignment of the elastic slice this workload replaces, for this pod set (gate
    ElasticJobsViaWorkloadSlicesWithTAS, A.14): its pods keep their domains and only the
    difference is placed (:func:`kueue_es.scheduling.tas.placement.find_assignments`)."""

    @classmethod
    def from_pod_set(
        cls,
        pod_set: models.PodSet,
        *,
        count: int | None = None,
        implied: bool = False,
        pod_set_updates: Sequence[models.PodSetUpdate] = (),
        previous: Assignment | None = None,
    ) -> PodSetPlacementRequest:
        """The request for a Workload pod set, with ``count`` (default the pod set's; partial
        admission passes a smaller one), the Ready checks' updates for this pod set and the
        replaced elastic slice's assignment of it (``previous``, A.14)."""
        return cls(
            name=pod_set.name,
            count=pod_set.count if count is None else count,
            requests=dict(pod_set.requests),
            topology_request=pod_set.topology_request,
            implied=implied,
            node_selector=dict(pod_set.node_selector),
            tolerations=tuple(pod_set.tolerations),
            required_node_affinity=tuple(pod_set.required_node_affinity),
            preferred_node_affinity=tuple(pod_set.preferred_node_affinity),
            pod_set_updates=tuple(u for u in pod_set_updates if u.name == pod_set.name),
            previous=previous,
        )


def request_key(request: PodSetPlacementRequest) -> Hashable:
    """A hashable equal for equal requests (the memo key of a placement's inputs)."""
    return (
        request.name,
        request.count,
        request.implied,
        tuple(sorted(request.requests.items())),
        repr(request.topology_request),
        tuple(sorted(request.node_selector.items())),
        repr(request.tolerations),
        repr(request.required_node_affinity),
        repr(request.preferred_node_affinity),
        repr(request.pod_set_updates),
        repr(request.previous),
    )


@dataclass(frozen=True)
class Placement:
    """A successful placement: per pod set name its assignment, and the TAS usage it adds per
    leaf ID (sum of :func:`assignment_usage` over the pod sets)."""

    assignments: dict[str, Assignment]
    usage: dict[str, Requests]


@dataclass(frozen=True)
class PlacementFailure:
    """Placement failed for ``pod_set`` (the first pod set of the failing group) with Kueue's
    ``message`` (e.g. ``topology "default" allows to fit only 3 out of 4 pod(s)``).
    ``fits_when_empty``: whether the same request fits with all TAS usage removed (A.5.6: True ⇒
    Preempt, False ⇒ NoFit / TopologyPlacementFailed); None when the run was already on an empty
    tree or the empty check was not asked for."""

    pod_set: str
    message: str
    fits_when_empty: bool | None = None


def assignment_usage(assignment: Assignment, requests: Mapping[str, int]) -> dict[str, Requests]:
    """TAS usage of ``assignment`` per leaf ID: per-pod ``requests`` × count plus ``pods: count``
    (Kueue utiltas.ComputeUsagePerDomain). Zero requests are left out."""
    usage: dict[str, Requests] = {}
    for domain in assignment.domains:
        bucket = usage.setdefault(domain_id(domain.values), {})
        for res, amount in requests.items():
            if amount and res != "pods":
                bucket[res] = bucket.get(res, 0) + amount * domain.count
        bucket["pods"] = bucket.get("pods", 0) + domain.count
    return usage


def add_usage(into: dict[str, Requests], extra: Mapping[str, Mapping[str, int]]) -> None:
    """Add per-leaf usage ``extra`` into ``into`` in place."""
    for leaf, requests in extra.items():
        bucket = into.setdefault(leaf, {})
        for res, amount in requests.items():
            bucket[res] = bucket.get(res, 0) + amount


@dataclass(frozen=True, eq=False)
class UsageToken:
    """Names the contents of a ``tas_usage`` mapping that changes in steps (one admission
    cycle's, :class:`kueue_es.scheduling.tas.cycle.CycleTopology`): equal ``key`` and ``version``
    ⇒ equal contents. ``changes[v - 1]`` holds the leaf IDs whose usage changed from version
    ``v - 1`` to ``v`` (a superset is fine; the sequence may grow later, never change)."""

    key: Hashable
    version: int = 0
    changes: Sequence[Collection[str]] = ()
