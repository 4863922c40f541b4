"""Topology-Aware Scheduling inside the admission cycle (SEMANTICS-ADVANCED A.5, A.7, A.10, A.11).

Quota picks each pod set's flavor first (:mod:`kueue_es.scheduling.flavors`); then the pod sets
that request TAS (explicitly, or implied in a TAS-only ClusterQueue, A.4.3) are placed on their
TAS flavor's tree by the placement (:func:`kueue_es.scheduling.tas.placement.find_assignments`)
with the free capacity the log knows: nodes and non-TAS pods (``ClusterState.topology``), minus the
TAS usage of the workloads holding quota (``ClusterState.tas_usage``), minus what earlier entries of
this cycle took (:class:`CycleTopology`). Kueue's rules (flavorassigner.go assignFlavors):

- mode Fit and the placement fails ⇒ that pod set (all its flavors) becomes Preempt, with the
  placement's message; it never moves to another flavor (A.5.2, A.5.5);
- mode Preempt ⇒ placement on an empty tree (TAS usage removed, non-TAS pods kept): failure ⇒
  NoFit with reason TopologyPlacementFailed; success ⇒ every TAS pod set is Preempt (A.5.6).

Pure: no I/O, no clock. One :class:`CycleTopology` per cycle.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Collection, Iterable, Mapping

import msgspec

from kueue_es.events import models, slices, tas, types
from kueue_es.projections.cluster import ClusterState, WorkloadState, tas_flavor_of
from kueue_es.scheduling import flavors
from kueue_es.scheduling.tas.placement import find_assignments
from kueue_es.scheduling.tas.requests import (
    Placement,
    PlacementFailure,
    PodSetPlacementRequest,
    TASGates,
    UsageToken,
    add_usage,
    request_key,
)

Requests = dict[str, int]
Usage = dict[str, dict[str, Requests]]  # flavor -> leaf ID -> resource -> amount

TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
_SERIALS = itertools.count(1)  # CycleTopology / _UsageHistory serials (tokens for the placer's phase-1 cache)
_HISTORY_LIMIT = 100_000  # versions before a usage history starts afresh (its memory stays bounded)


class Placed(msgspec.Struct, frozen=True, gc=False):
    """The TAS outcome of an assignment: per pod set name its flavor and assignment (plain
    form), and the usage they take per flavor and leaf (A.5.8)."""

    assignments: tuple[tuple[str, str, tas.Assignment], ...]
    usage: Usage

    def encoded(self) -> dict[str, models.TopologyAssignment]:
        """Per pod set name, Kueue's v1beta2 encoding (A.8.3)."""
        return {name: tas.encode(assignment) for name, _, assignment in self.assignments}


class _Wanted(msgspec.Struct, frozen=True, gc=False):
    flavor: str
    request: PodSetPlacementRequest


class TASPart(msgspec.Struct, frozen=True, gc=False):
    """What an assignment's TAS pod sets need (``wanted``: flavor and request per pod set, in
    pod-set order) and, in mode Fit, where they go (``placed``). ``delayed``: the TAS pod sets
    whose topology waits for the second pass (A.9), by name, placed neither now nor in ``wanted``."""

    wanted: tuple[_Wanted, ...]
    placed: Placed | None = None
    delayed: tuple[str, ...] = ()


class _UsageHistory:
    """One TAS flavor's usage as successive cycles see it (:meth:`CycleTopology.usage`), for
    the placer's phase-1 cache (:class:`~kueue_es.scheduling.tas.requests.UsageToken`):
    ``changes[v - 1]`` = the leaf IDs that differ between versions ``v - 1`` and ``v``;
    ``content`` = the latest version (the owning cycle's usage dict, kept in step by its
    :meth:`CycleTopology.add`); ``owner`` = the serial of that cycle. Only the owner extends
    it; a new cycle takes it over by diffing its usage against ``content``."""

    def __init__(self) -> None:
        self.serial = next(_SERIALS)
        self.changes: list[frozenset[str]] = []
        self.content: dict[str, Requests] | None = None
        self.owner = 0


class CycleTopology:
    """The TAS view of one cycle: the trees of the TAS flavors, the TAS usage of the workloads
    holding quota, and what this cycle's admissions and reservations added (A.10).

    ``released``: keys of workloads whose quota the cycle gives back (finished, deleted,
    deactivated, evicted with the job stopped): Kueue's cache holds no TAS usage for them
    either (SEMANTICS §6.4), so their usage is left out of every placement.

    ``elastic_slices`` (default on; off: admitter logic 13, before A.14): with the Configuration's
    gate ElasticJobsViaWorkloadSlicesWithTAS, an elastic workload's TAS pod sets must be
    unconstrained and a replacement slice keeps its old slice's assignment (:meth:`wanted`).

    ``balanced_slice_size`` (default on; off: admitter logic 23 and earlier, for replay): balanced
    placement sizes its domains above the slice level in whole slices (:class:`TASGates`).

    ``needs_tas_flavors`` (default on; off: admitter logic 28 and earlier, preemptor logic 12 and
    earlier, for replay): a pod set asking for TAS in a ClusterQueue with no TAS flavor is refused
    (:meth:`wanted`); off, it is admitted without a topology assignment.

    ``reads_tas_gate`` (default on; off: admitter logic 49 and earlier, preemptor logic 22 and earlier,
    for replay): with the Configuration's gate TopologyAwareScheduling off, nothing is TAS (``enabled``
    False): Kueue's cache then takes no flavor as a TAS flavor (cache.go ``handleTASFlavor``) and its
    flavor assigner neither checks nor places topology requests (flavorassigner.go, every TAS step
    behind the gate), so a pod set is assigned flavors and admitted on quota alone, a topology request
    or a flavor's ``topologyName`` notwithstanding, and preemption searches by quota alone (Kueue PR
    #8167). Off, the gate was not read."""

    def __init__(
        self,
        state: ClusterState,
        *,
        released: Collection[str] = (),
        elastic_slices: bool = True,
        balanced_slice_size: bool = True,
        preferred_affinity: bool = True,
        needs_tas_flavors: bool = True,
        reads_tas_gate: bool = True,
    ) -> None:
        self.state = state
        self.needs_tas_flavors = needs_tas_flavors
        self.enabled = not reads_tas_gate or state.configuration.feature_gates.get("TopologyAwareScheduling", True)
        # A.14: replacement slices placed around the slice they replace (admitter logic 14 on)
        self.elastic = elastic_slices and slices.tas_gate_enabled(state.configuration.feature_gates)
        self.released = tuple(k for k in released if (wl := state.workloads.get(k)) is not None and wl.tas_usage)
        self.active = (
            self.enabled
            and bool(state.topology.topologies)
            and any(f.spec.topology_name for f in state.flavors.values())
        )
        self.added: Usage = {}
        # Names the contents of :meth:`usage`: a serial per instance and a version bumped by
        # every :meth:`add` (the placer reuses phase-1 capacities while they stay equal).
        self.serial = next(_SERIALS)
        self.version = 0
        self.changes: list[frozenset[str]] = []  # per version: the leaf IDs its add touched
        self._usage: dict[tuple[str, frozenset[str]], dict[str, Requests]] = {}
        self._histories: dict[str, _UsageHistory] = {}
        self.gates = TASGates.from_feature_gates(
            state.configuration.feature_gates, balanced_slice_size=balanced_slice_size
        )
        if not preferred_affinity:
            # deciders of logic versions before preferred node affinity scores (A.3.4) ignore the gate
            self.gates = dataclasses.replace(self.gates, preferred_affinity=False)

    # --- who requests TAS ---------------------------------------------------------------------

    def wanted(
        self,
        wl: WorkloadState,
        assignment: flavors.Assignment,
        picker: flavors.Picker,
        *,
        replaced: WorkloadState | None = None,
    ) -> list[_Wanted] | str:
        """The pod sets of ``assignment`` to place, with their TAS flavor, in pod-set order; a
        message when a TAS pod set has no (or more than one) TAS flavor.

        With ElasticJobsViaWorkloadSlicesWithTAS (A.14; Kueue tas_flavorassigner.go
        WorkloadsTopologyRequests): an elastic workload's TAS pod set with a required or
        preferred topology request is refused with Kueue's message (only unconstrained, explicit
        or implied, is supported), and each pod set of a slice replacing ``replaced`` carries that
        slice's assignment of it as ``previous``. A ClusterQueue without TAS flavors: see
        :meth:`without_tas_flavors`. With the gate TopologyAwareScheduling off (not ``enabled``): none."""
        if not self.enabled:
            return []
        if not picker.tas_levels:
            return self.without_tas_flavors(wl, assignment) or []
        specs = {ps.name: ps for ps in wl.workload.spec.pod_sets}
        out: list[_Wanted] = []
        ready_updates = _ready_updates(wl)
        elastic = self.elastic and slices.is_elastic(wl.workload.metadata.annotations)
        previous = replaced.topology if elastic and replaced is not None and replaced.topology else {}
        for result in assignment.pod_sets:
            spec = specs.get(result.name)
            if spec is None or result.count == 0:
                continue
            explicit = tas.requests_tas(spec.topology_request)
            if not explicit and not picker.tas_only:
                continue
            if elastic and spec.topology_request is not None:
                for kind, value in (
                    ("required", spec.topology_request.required),
                    ("preferred", spec.topology_request.preferred),
                ):
                    if value is not None:
                        return (
                            f"failed to assign flavors to pod set {result.name}: "
                            f"{kind} topology is not supported with ElasticJobsViaWorkloadSlices"
                        )
            prior = previous.get(result.name)
            chosen = sorted({f for f in result.flavors.values() if f in picker.tas_levels})
            if len(chosen) != 1:
                if picker.kueue_reasons:  # Kueue's errors (flavorassigner/errors.go), admitter logic 17
                    why = (
                        "no TAS flavor assigned"
                        if not chosen
                        else f"more than one TAS flavor assigned: {', '.join(chosen)}"
                    )
                    return f"failed to assign flavors to pod set {result.name}: {why}"
                if not chosen:
                    return f"pod set {result.name}: no TAS flavor assigned"
                return f"pod set {result.name}: multiple TAS flavors assigned: {', '.join(chosen)}"
            request = PodSetPlacementRequest.from_pod_set(
                spec,
                count=result.count,
                implied=not explicit,
                pod_set_updates=ready_updates,
                previous=tas.decode(prior) if prior is not None else None,
            )
            out.append(_Wanted(chosen[0], request))
        return out

    def without_tas_flavors(self, wl: WorkloadState, assignment: flavors.Assignment) -> str:
        """For an ``assignment`` in a ClusterQueue with no TAS flavor: with ``needs_tas_flavors``, the
        message refusing its first pod set (count above 0) that asks for TAS, Kueue's
        ErrNoTASCacheInformation (tas_flavorassigner.go podSetTopologyRequest); else, or when none
        asks, "". Only an explicit request counts (a ClusterQueue without TAS flavors implies none).
        A pod set requesting a resource is refused a non-TAS flavor by the flavor check already; a
        grouped leader requesting nothing, whose group took non-TAS flavors, gets here
        (flavorassigner_test.go 'leader in group where peer resolves to non-TAS flavor is rejected')."""
        if not self.needs_tas_flavors or not self.enabled:
            return ""
        pod_sets = wl.workload.spec.pod_sets
        for ps in pod_sets:  # the common case first: no pod set asks, so the assignment is not unflattened
            if ps.topology_request is not None and tas.requests_tas(ps.topology_request):
                break
        else:
            return ""
        specs = {ps.name: ps for ps in pod_sets}
        for result in assignment.pod_sets:
            spec = specs.get(result.name)
            if spec is not None and result.count > 0 and tas.requests_tas(spec.topology_request):
                return (
                    f"failed to assign flavors to pod set {result.name}: "
                    "workload requires Topology, but there is no TAS cache information"
                )
        return ""

    # --- usage ----------------------------------------------------------------------------------

    def usage(self, flavor: str, removed: frozenset[str] = frozenset()) -> dict[str, Requests]:
        """TAS usage per leaf on ``flavor``: the workloads holding quota (for hostname trees, over
        every hostname TAS flavor, A.2.4), plus this cycle's additions, minus the workloads
        ``removed`` (preemption candidates, A.11)."""
        key = (flavor, removed)
        found = self._usage.get(key) if not removed else None
        if found is not None:
            return found
        state = self.state
        tree = state.topology.flavor_topology(flavor)
        shared = [flavor]
        if tree is not None and tree.lowest_is_hostname:
            shared = [
                f
                for f in state.tas_usage.keys() | self.added.keys()
                if (t := state.topology.flavor_topology(f)) is not None and t.lowest_is_hostname
            ]
        out: dict[str, Requests] = {}
        for name in shared:
            add_usage(out, state.tas_usage.get(name, {}))
            add_usage(out, self.added.get(name, {}))
        for key_removed in removed.union(self.released) if self.released else removed:
            victim = state.workloads.get(key_removed)
            if victim is None or not victim.tas_usage:
                continue
            for name in shared:
                _subtract(out, victim.tas_usage.get(name, {}))
        if not removed:
            self._usage[key] = out
            self._follow(flavor, out)
        return out

    def _follow(self, flavor: str, content: dict[str, Requests]) -> None:
        """Continue ``flavor``'s usage history (kept in ``state.caches`` across cycles) with
        ``content``: the leaves that differ from the last content it saw make one version."""
        histories: dict[str, _UsageHistory] = self.state.caches.setdefault("tas.usage_history", {})
        history = histories.get(flavor)
        if history is None or len(history.changes) >= _HISTORY_LIMIT:
            history = histories[flavor] = _UsageHistory()
        elif history.content is not None:
            last = history.content
            changed = frozenset(leaf for leaf in content.keys() | last.keys() if content.get(leaf) != last.get(leaf))
            if changed:
                history.changes.append(changed)
        history.content, history.owner = content, self.serial
        self._histories[flavor] = history

    def _token(self, flavor: str, removed: frozenset[str]) -> UsageToken:
        """The placer's name for :meth:`usage` of ``flavor`` without ``removed``: its usage
        history's while this cycle owns it (phase-1 capacities then carry over from one cycle
        to the next), else this cycle's own."""
        history = self._histories.get(flavor)
        if not removed and history is not None and history.owner == self.serial:
            return UsageToken((history.serial, flavor), len(history.changes), history.changes)
        return UsageToken((self.serial, flavor, removed), self.version, self.changes)

    def add(self, usage: Usage) -> None:
        """Count ``usage`` (an admitted or reserving entry's, A.10) for the rest of the cycle."""
        topo = self.state.topology
        self.version += 1
        self.changes.append(frozenset(leaf for leaves in usage.values() for leaf in leaves))
        for flavor, leaves in usage.items():
            add_usage(self.added.setdefault(flavor, {}), leaves)
            tree = topo.flavor_topology(flavor)
            hostname = tree is not None and tree.lowest_is_hostname
            for (cached, _), merged in self._usage.items():  # kept in step rather than rebuilt
                if cached == flavor or (
                    hostname and (other := topo.flavor_topology(cached)) is not None and other.lowest_is_hostname
                ):
                    add_usage(merged, leaves)
                    history = self._histories.get(cached)
                    if history is not None and history.owner == self.serial:
                        history.changes.append(frozenset(leaves))

    def remove(self, usage: Usage) -> None:
        """Stop counting ``usage`` that :meth:`add` counted: a claim held for one search only (the
        domains of a workload the preemptor's batch leaves waiting for its evictions, DeferredFit,
        :func:`kueue_es.scheduling.nominations.targets_after`). Done as an :meth:`add` of the negated
        amounts, so the versions and change lists the placer's phase-1 cache reads stay in step."""
        self.add(
            {
                flavor: {leaf: {res: -amount for res, amount in requests.items()} for leaf, requests in leaves.items()}
                for flavor, leaves in usage.items()
            }
        )

    # --- placement ------------------------------------------------------------------------------

    def place(
        self,
        wanted: Iterable[_Wanted],
        *,
        simulate_empty: bool = False,
        removed: frozenset[str] = frozenset(),
    ) -> Placed | PlacementFailure:
        """Place ``wanted`` flavor by flavor in name order (A.7), later flavors seeing the earlier
        ones' usage on shared hostnames (A.2.4). The first failure is returned (no empty check)."""
        wanted = list(wanted)
        by_flavor: dict[str, list[PodSetPlacementRequest]] = {}
        for item in wanted:
            by_flavor.setdefault(item.flavor, []).append(item.request)
        assumed: dict[str, Requests] = {}
        placed: list[tuple[str, str, tas.Assignment]] = []
        usage: Usage = {}
        gates = self.gates
        for flavor in sorted(by_flavor):
            tree = self.state.topology.flavor_topology(flavor)
            requests = by_flavor[flavor]
            if tree is None:
                return PlacementFailure(
                    pod_set=requests[0].name, message=f'flavor "{flavor}" information missing in TAS cache'
                )
            if simulate_empty and len(by_flavor) == 1:
                # On an empty tree the result depends on the tree and the requests only: kept
                # with the tree (a new tree object comes with every topology fact).
                memo = tree.__dict__.setdefault("_empty_placements", {})
                key = (tuple(request_key(r) for r in requests), gates)
                result = memo.get(key)
                if result is None:
                    result = memo[key] = find_assignments(
                        tree, requests, simulate_empty=True, check_empty=False, gates=gates
                    )
            else:
                result = find_assignments(
                    tree,
                    requests,
                    tas_usage=self.usage(flavor, removed),
                    assumed_usage=assumed if tree.lowest_is_hostname else None,
                    simulate_empty=simulate_empty,
                    check_empty=False,
                    gates=gates,
                    usage_token=self._token(flavor, removed),
                )
            if isinstance(result, PlacementFailure):
                return result
            for request in requests:
                if request.name in result.assignments:
                    placed.append((request.name, flavor, result.assignments[request.name]))
            usage[flavor] = result.usage
            if tree.lowest_is_hostname:
                add_usage(assumed, result.usage)
        order = {item.request.name: i for i, item in enumerate(wanted)}
        placed.sort(key=lambda item: order[item[0]])
        return Placed(tuple(placed), usage)

    def still_fits(self, placed: Placed, *, removed: frozenset[str] = frozenset()) -> bool:
        """Kueue's Fits for the TAS part (A.10): every leaf of ``placed`` still has room for its
        pods given this cycle's earlier admissions, without the usage of ``removed`` (the
        elastic slice a replacement replaces: Kueue counts it among the entry's targets)."""
        for flavor, leaves in placed.usage.items():
            tree = self.state.topology.flavor_topology(flavor)
            if tree is None:
                return False
            used = self.usage(flavor, removed)
            for leaf_id, requests in leaves.items():
                leaf = tree.leaf_by_id.get(leaf_id)
                if leaf is None:
                    return False
                taken = used.get(leaf_id, {})
                for res, amount in requests.items():
                    if amount and leaf.free.get(res, 0) - taken.get(res, 0) < amount:
                        return False
        return True


PROVISIONING_REQUEST_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
PENDING = "Pending"


def delayed_flavors(state: ClusterState, cq: models.ClusterQueue) -> frozenset[str]:
    """The flavors of ``cq`` covered by an admission check whose AdmissionCheck's controllerName is
    ``kueue.x-k8s.io/provisioning-request`` (an empty ``onFlavors`` covers every flavor of the
    ClusterQueue): a TAS pod set assigned one of them gets its topology in the second pass, once
    the checks are Ready (A.5.4, A.9; Kueue clusterqueue.go flavorsWithProvReqAdmissionCheck).
    A ClusterQueue with a MultiKueue check delays every flavor, at every pass: see
    :func:`multikueue_delays`."""
    strategy = cq.spec.admission_checks_strategy
    if strategy is None:
        return frozenset()
    out: set[str] = set()
    for rule in strategy.admission_checks:
        check = state.admission_checks.get(rule.name)
        if check is None or check.spec.controller_name != PROVISIONING_REQUEST_CONTROLLER:
            continue
        out.update(rule.on_flavors or (f.name for group in cq.spec.resource_groups for f in group.flavors))
    return frozenset(out)


def multikueue_delays(state: ClusterState, cq: models.ClusterQueue) -> bool:
    """Whether ``cq`` names an admission check whose AdmissionCheck's controllerName is MultiKueue's
    (Kueue clusterqueue.go ``hasMultiKueueAC``): its TAS pod sets are never placed on the manager, their
    topology request is delayed (``Pending``) at every pass and the worker that admits the copy places
    them (tas_flavorassigner.go podSetTopologyRequest); the manager marks them Ready with the check
    (multikueue/workload.go updateDelayedTopologyRequest), so no second pass places them here."""
    strategy = cq.spec.admission_checks_strategy
    if strategy is None:
        return False
    for rule in strategy.admission_checks:
        check = state.admission_checks.get(rule.name)
        if check is not None and check.spec.controller_name == models.MULTIKUEUE_CONTROLLER:
            return True
    return False


def pending_delayed(wl: WorkloadState) -> list[types.PodSetAssignment]:
    """The pod set assignments of ``wl``'s reservation whose delayed topology request is still
    Pending: marked Pending and not yet named by a TopologyAssigned (A.9)."""
    if wl.reservation is None:
        return []
    assigned = wl.topology or {}
    return [
        psa
        for psa in wl.reservation.pod_set_assignments
        if psa.delayed_topology_request == PENDING and psa.name not in assigned
    ]


def second_pass(
    cycle: CycleTopology, wl: WorkloadState, *, now_ms: int
) -> types.TopologyAssigned | PlacementFailure | None:
    """The second pass for ``wl`` (A.9; Kueue scheduler.go, second-pass entries): place the pod
    sets whose delayed topology request is Pending, on the flavors of the reservation (no quota
    check, no new quota), with the Ready admission checks' podSetUpdates (their nodeSelector and
    tolerations) as node filters, on the free capacity the cycle knows. Success: the
    TopologyAssigned, whose usage counts for the rest of the cycle; a placement failure is
    returned (the next cycle tries again; the admitter records it as a ``SecondPassFailed``
    WorkloadInadmissible when its message changes); None when nothing is pending."""
    pending = pending_delayed(wl)
    if not pending:
        return None
    assert wl.reservation is not None
    specs = {ps.name: ps for ps in wl.workload.spec.pod_sets}
    ready_updates = _ready_updates(wl)
    wanted: list[_Wanted] = []
    for psa in pending:
        spec = specs.get(psa.name)
        flavor = tas_flavor_of(cycle.state, psa)
        if spec is None or flavor is None:
            return PlacementFailure(pod_set=psa.name, message=f"pod set {psa.name}: no TAS flavor assigned")
        implied = not tas.requests_tas(spec.topology_request)
        request = PodSetPlacementRequest.from_pod_set(
            spec, count=psa.count, implied=implied, pod_set_updates=ready_updates
        )
        wanted.append(_Wanted(flavor, request))
    result = cycle.place(wanted)
    if isinstance(result, PlacementFailure):
        return result
    cycle.add(result.usage)
    return topology_assigned(wl, wl.reservation.cluster_queue, result, now_ms=now_ms)


def reserved_wanted(
    state: ClusterState, wl: WorkloadState, pod_set_assignments: Iterable[types.PodSetAssignment]
) -> list[_Wanted]:
    """The TAS pod sets of ``pod_set_assignments`` (a reservation's or a nomination's, of
    ``wl``) with their TAS flavor, in pod-set order: those assigned a TAS flavor (a pod set
    only gets one when it requests TAS, explicitly or implied in a TAS-only ClusterQueue,
    A.5.1), with count > 0 and no delayed topology request pending (A.5.3, A.9). What the
    preemptor's recomputation places with the victims removed (A.11)."""
    specs = {ps.name: ps for ps in wl.workload.spec.pod_sets}
    ready_updates = _ready_updates(wl)
    out: list[_Wanted] = []
    for psa in pod_set_assignments:
        spec = specs.get(psa.name)
        flavor = tas_flavor_of(state, psa)
        if spec is None or flavor is None or psa.count == 0 or psa.delayed_topology_request == PENDING:
            continue
        implied = not tas.requests_tas(spec.topology_request)
        request = PodSetPlacementRequest.from_pod_set(
            spec, count=psa.count, implied=implied, pod_set_updates=ready_updates
        )
        out.append(_Wanted(flavor, request))
    return out


def _subtract(into: dict[str, Requests], usage: Mapping[str, Mapping[str, int]]) -> None:
    for leaf, requests in usage.items():
        bucket = into.setdefault(leaf, {})
        for res, amount in requests.items():
            bucket[res] = bucket.get(res, 0) - amount


def _ready_updates(wl: WorkloadState) -> tuple[models.PodSetUpdate, ...]:
    """The podSetUpdates of the workload's Ready admission checks (A.3)."""
    out: list[models.PodSetUpdate] = []
    for check in wl.checks.values():
        if check.state == "Ready":
            out.extend(check.pod_set_updates)
    return tuple(out)


def with_preempt(assignment: flavors.Assignment, pod_sets: Iterable[str]) -> flavors.Flat:
    """``assignment.flat`` with every FR of ``pod_sets`` marked as needing preemption (a
    topology-driven Preempt marks all FRs of the pod set, A.11)."""
    names = set(pod_sets)
    flat = list(assignment.flat)
    i = 0
    while i < len(flat):
        name, n = flat[i], flat[i + 2]
        i += 3
        for _ in range(n):  # type: ignore[call-overload]
            if name in names:
                flat[i + 3] = True
            i += 4
    return tuple(flat)


def topology_assigned(wl: WorkloadState, cluster_queue: str, placed: Placed, *, now_ms: int) -> types.TopologyAssigned:
    """The decision recording ``placed`` (committed with the QuotaReserved, A.5)."""
    return types.TopologyAssigned(
        workload=wl.ref, cluster_queue=cluster_queue, assignments=placed.encoded(), at_ms=now_ms
    )


__all__ = [
    "PENDING",
    "PROVISIONING_REQUEST_CONTROLLER",
    "TOPOLOGY_PLACEMENT_FAILED",
    "CycleTopology",
    "Placed",
    "TASPart",
    "delayed_flavors",
    "multikueue_delays",
    "pending_delayed",
    "reserved_wanted",
    "second_pass",
    "Placement",
    "PlacementFailure",
    "topology_assigned",
    "with_preempt",
]
