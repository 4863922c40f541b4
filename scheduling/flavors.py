"""Flavor assignment: which ResourceFlavor each pod set gets, and whether it fits now.

Follows Kueue's flavor assigner (pkg/scheduler/flavorassigner/flavorassigner.go,
SEMANTICS §5): pod sets in spec order; for each requested resource, the search
runs over its whole resource group (all requested resources of a group get the
same flavor); flavors in the listed order; a flavor must exist, have its taints
tolerated and match the pod set's node selector / required node affinity on the
keys it labels; then each resource is classified against the quota tree
(:mod:`kueue_es.projections.quota`): beyond potential capacity (never fits), beyond what
is available now (waits, unless preemption could help: the oracle says whether
there are candidates, SEMANTICS §7.7), or fits, possibly by borrowing. Each
flavor gets Kueue's granular mode (preemption mode, borrowing level) and
flavorFungibility (whenCanBorrow, whenCanPreempt, preference) decides whether it
stops the search. A resource that never fits makes its flavor's mode noFit, but
the flavor's other resources are still checked and their reasons written (Kueue's
findFlavorForPodSets returns from its per-resource closure only; SEMANTICS §5.6's
"immediately" is about the mode), since admitter logic 55.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kueue_es.events import models, tas
from kueue_es.events.quantities import format_amount
from kueue_es.projections import quota as quota_math
from kueue_es.projections.quota import FR, QuotaTree


@dataclass(frozen=True, kw_only=True, slots=True)
class PodSetRequest:
    """What one pod set asks for: ``requests`` are per-pod amounts, ``count`` pods."""

    name: str
    count: int
    requests: dict[str, int]
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[models.Toleration, ...] = ()
    affinity: tuple[models.NodeSelectorTerm, ...] = ()
    # TAS (SEMANTICS-ADVANCED A.5.1): the pod set's topology request and the resources its pod
    # template requests (before transformations).
    topology_request: models.PodSetTopologyRequest | None = None
    raw_resources: frozenset[str] = frozenset()
    min_count: int | None = None  # partial admission (SEMANTICS §5.9): the fewest pods it may run with
    # An elastic replacement slice (SEMANTICS-ADVANCED D.3): resource -> the flavor the slice it
    # replaces holds (every other flavor is refused for that resource), and resource -> what that
    # slice holds for this pod set, taken off the request (the slice asks only the delta).
    original_flavors: dict[str, str] | None = None
    released: dict[str, int] | None = None
    # The flavors the pod set was nominated with (resource -> flavor), when the cycle computes its
    # assignment again because its preemption targets overlap an earlier entry's (Kueue's
    # NominationMapping): every other flavor is skipped, so the recomputation never moves the
    # workload to another flavor (SEMANTICS §4.5 step 1).
    nominated_flavors: dict[str, str] | None = None
    # The flavors the workload's annotation kueue.x-k8s.io/workload-allowed-resource-flavors lets it
    # take, when the gate ConcurrentAdmission is on (:func:`allowed_by_annotation`): every other flavor
    # is skipped. None: no such annotation (or the gate off), every flavor may be tried.
    allowed_flavors: frozenset[str] | None = None

    def totals(self) -> dict[str, int]:
        """Per-resource totals for all ``count`` pods."""
        return {res: amount * self.count for res, amount in self.requests.items()}


class PodSetResult(msgspec.Struct, frozen=True, gc=False):
    """A pod set's chosen flavors (resource -> flavor) and total usage per resource."""

    name: str
    count: int
    flavors: dict[str, str]
    usage: dict[str, int]


Flat = tuple[object, ...]
"""The pod sets of an :class:`Assignment` as one flat tuple: for each pod set its name,
count and number of resources, then for each resource in name order the resource, its
FR, the pod set's usage of it and whether that FR needs preemption (see :func:`_flatten`)."""


def _flatten(
    out: list[object], name: str, count: int, totals: dict[str, int], frs: dict[str, FR], need: dict[FR, None]
) -> None:
    """Append one pod set's result to ``out`` (``frs``: the chosen FR of each resource)."""
    out += (name, count, len(totals))
    for resource in sorted(totals) if len(totals) > 1 else totals:
        fr = frs[resource]
        out += (resource, fr, totals[resource], fr in need)


def _unflatten(flat: Flat) -> Iterator[tuple[str, int, list[tuple[str, FR, int, bool]]]]:
    """The pod sets of ``flat``: name, count and (resource, FR, usage, needs preemption)."""
    i = 0
    while i < len(flat):
        name, count, n = flat[i], flat[i + 1], flat[i + 2]
        i += 3
        resources = [flat[j : j + 4] for j in range(i, i + 4 * n, 4)]  # type: ignore[operator]
        i += 4 * n  # type: ignore[operator]
        yield name, count, resources  # type: ignore[misc]


# Kueue's preemption modes, worst to best (flavorassigner.go preemptionMode)
NO_FIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)
GranularMode = tuple[int, int]  # (preemption mode, borrowing level)
WORST: GranularMode = (NO_FIT, 1 << 30)
BEST: GranularMode = (FIT, 0)

Oracle = Callable[[FR, int], tuple[int, int]]
"""``oracle(fr, amount)``: (NO_CANDIDATES | PREEMPT | RECLAIM, borrowing level after the
preemptions) for a request of ``amount`` of ``fr`` that does not fit now (SEMANTICS §7.7).
``None`` stands for a ClusterQueue without any candidate: NO_CANDIDATES at the borrowing
level of the request as it is."""


def no_preemption(fr: FR, amount: int) -> tuple[int, int]:
    """An oracle for ClusterQueues that can never preempt: no candidates."""
    del fr, amount
    return NO_CANDIDATES, 0


class Assignment(msgspec.Struct, frozen=True, gc=False):
    """The outcome for a workload: ``mode`` Fit, Preempt or NoFit (Kueue's
    RepresentativeMode), the pod sets' flavors, and Kueue's message when not Fit.

    ``borrowing`` is the highest borrowing level of the chosen flavors (0: none).

    The pod sets' flavors, usage and FRs needing preemption (§7.1) are kept in one flat
    tuple of strings, ints and FR tuples (``flat``, see :data:`Flat`), which the garbage
    collector stops tracking at its first pass: a cycle holds a thousand assignments
    until its end, and most are never read as :attr:`pod_sets`. A frozen Struct without GC
    tracking, like the other per-head records of a cycle (measured quicker than NamedTuples).
    A tuple of per-pod-set and per-resource Structs in place of ``flat`` reads better but was
    measured 3 % slower on ``bench core`` (docs/benchmarks.md, issue 12), so ``flat`` stays.
    """

    mode: str
    flat: Flat = ()
    borrowing: int = 0
    message: str = ""
    reason: str = ""  # NoFit: Kueue's granular QuotaReserved=False reason (see _REASONS)
    # TAS (SEMANTICS-ADVANCED A.5): set by the admitter for workloads with TAS pod sets, a
    # kueue_es.scheduling.tas.cycle.TASPart (what to place, and the placement when mode is Fit).
    tas: Any = None
    # The flavor scan's bookmark (Kueue's LastTriedFlavorIdx, SEMANTICS §5.3): per pod set in
    # spec order, resource -> index of the last flavor examined in its group (-1: the scan
    # reached the last flavor); a pod set without a chosen flavor has {} and the ones after a
    # failed pod set are missing. None when not computed.
    tried: tuple[dict[str, int], ...] | None = None

    @property
    def pending_flavors(self) -> bool:
        """Kueue's PendingFlavors: the bookmark names a flavor the next scan would resume after."""
        tried = self.tried
        if tried is None:
            return False
        for per_pod_set in tried:  # loops, not any() over a generator: asked once per head a cycle
            for index in per_pod_set.values():
                if index != -1:
                    return True
        return False

    @property
    def fits(self) -> bool:
        """Mode Fit: admissible now without preempting anybody."""
        return self.mode == "Fit"

    @property
    def pod_sets(self) -> tuple[PodSetResult, ...]:
        """The pod sets' flavors and usage, in spec order."""
        return tuple(
            PodSetResult(
                name=name,
                count=count,
                flavors={resource: fr[0] for resource, fr, _, _ in resources},
                usage={resource: amount for resource, _, amount, _ in resources},
            )
            for name, count, resources in _unflatten(self.flat)
        )

    @property
    def frs_need_preemption(self) -> frozenset[FR]:
        """The FRs whose chosen flavor needs preemption (§7.1)."""
        return frozenset(fr for _, _, resources in _unflatten(self.flat) for _, fr, _, need in resources if need)

    def usage(self) -> dict[FR, int]:
        """Total usage per (flavor, resource), a new map each time."""
        flat = self.flat
        if len(flat) == 7:  # one pod set of one resource: nothing to add up
            return {flat[4]: flat[5]}  # type: ignore[dict-item]
        out: dict[FR, int] = {}
        for _, _, resources in _unflatten(flat):
            for _, fr, amount, _ in resources:
                out[fr] = out.get(fr, 0) + amount
        return out


class _Choice(msgspec.Struct, frozen=True, gc=False):
    flavor: str | None
    mode: GranularMode
    need_preemption: tuple[str, ...]


def assign(
    pod_sets: list[PodSetRequest],
    *,
    cq: models.ClusterQueue,
    tree: QuotaTree,
    flavors: dict[str, models.ResourceFlavor],
    oracle: Oracle | None = no_preemption,
    fair_sharing: bool = False,
) -> Assignment:
    """Assign flavors to every pod set of a workload for ClusterQueue ``cq``.

    ``pod_sets`` carry already-filtered requests (excluded resources removed, the
    ``pods`` resource added when the ClusterQueue covers it); ``oracle`` says what
    preemption could do where quota is short (default: nothing). Returns an
    Assignment; never raises for a workload that does not fit.
    """
    return Picker(cq, tree, flavors, fair_sharing=fair_sharing).assign(pod_sets, oracle=oracle)


ALLOWED_FLAVORS_ANNOTATION = "kueue.x-k8s.io/workload-allowed-resource-flavors"
"""Kueue's WorkloadAllowedResourceFlavorAnnotation (pkg/controller/constants): the flavors a workload
(a ConcurrentAdmission variant) may be assigned, comma-separated."""


def allowed_by_annotation(workload: models.Workload, gates: dict[str, bool]) -> frozenset[str] | None:
    """The flavors ``workload`` may take by its annotation :data:`ALLOWED_FLAVORS_ANNOTATION`, when
    the feature gate ConcurrentAdmission (alpha, off by default) is on in ``gates`` (the
    Configuration's); None when the gate is off or the annotation absent (every flavor allowed).

    The value is split at commas with spaces around each name trimmed; an empty (or blank) value
    allows no flavor at all, as Kueue's csv.Parse gives no names (pkg/util/csv/csv.go,
    pkg/workload/concurrentadmission IsFlavorAllowedForVariant)."""
    if not gates.get("ConcurrentAdmission", False):
        return None
    value = workload.metadata.annotations.get(ALLOWED_FLAVORS_ANNOTATION)
    if value is None:
        return None
    if not value.strip():
        return frozenset()
    return frozenset(name.strip() for name in value.split(","))


def is_preferred(a: GranularMode, b: GranularMode, preference: str | None) -> bool:
    """flavorassigner.go isPreferred: is mode ``a`` better than ``b`` (SEMANTICS §5.6)."""
    if a[0] == NO_FIT:
        return False
    if b[0] == NO_FIT:
        return True
    if (a[0] == NO_CANDIDATES) != (b[0] == NO_CANDIDATES):
        return a[0] != NO_CANDIDATES
    if preference == "PreemptionOverBorrowing":
        if a[1] != b[1]:
            return a[1] < b[1]
        return a[0] > b[0]
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]


def _try_next(mode: GranularMode, fungibility: models.FlavorFungibility) -> bool:
    """flavorassigner.go shouldTryNextFlavor (SEMANTICS §5.7)."""
    if mode[0] in (NO_FIT, NO_CANDIDATES):
        return True
    if mode[0] in (PREEMPT, RECLAIM) and fungibility.when_can_preempt == "TryNextFlavor":
        return True
    return mode[1] > 0 and fungibility.when_can_borrow == "TryNextFlavor"


_MEMO_SIZE = 64  # request lists a Picker remembers results for (then it starts over)


class _Group(msgspec.Struct, frozen=True, gc=False):
    """A resource group as the picker reads it: covered resources and, per listed flavor,
    its name, its object (None when it does not exist) and whether it has neither taints
    nor node labels (then every pod set is eligible, SEMANTICS §5.4)."""

    covered: tuple[str, ...]
    flavors: tuple[tuple[str, models.ResourceFlavor | None, bool], ...]


class Picker:
    """Flavor assignment in one ClusterQueue against one quota tree (:func:`assign`).

    Holds what does not depend on the workload (resource groups, flavors, quota node,
    policies), so a caller may keep it for as long as none of those changes: the
    admitter keeps one per ClusterQueue until the next requeue trigger.
    """

    __slots__ = (
        "name",
        "node",
        "covering",
        "frs",
        "fungibility",
        "may_preempt_borrowing",
        "tas_levels",
        "tas_only",
        "topology_aware",
        "preempting",
        "memo",
        "kueue_reasons",
        "fit_clears_reasons",
        "kueue_no_fit",
    )

    def __init__(
        self,
        cq: models.ClusterQueue,
        tree: QuotaTree,
        flavors: dict[str, models.ResourceFlavor],
        *,
        fair_sharing: bool,
        topologies: dict[str, models.Topology] | None = None,
        topology_aware: bool = True,
        kueue_reasons: bool = True,
        fit_clears_reasons: bool = True,
        kueue_no_fit: bool = True,
    ) -> None:
        # Pending messages as Kueue writes them (admitter logic 17): a pod set's reasons, of every resource
        # group, sorted and joined with ", " (flavorassigner.go Status.Message), a taint as Go prints it;
        # False: logic 16 and earlier, each resource group's reasons in flavor order joined with "; ".
        self.kueue_reasons = kueue_reasons
        # Admitter logic 46: a resource whose flavor fits carries no reasons (Kueue's findFlavorForPodSets
        # returns a nil status once its best mode is Fit), a resource no group covers gives every member of
        # a pod set group its line (assignFlavors sets the group's status on each), and a NoFit message keeps
        # the lines of the pod sets before it that need preemption (Assignment.Message); False: logic 45 and
        # earlier kept the reasons of the flavors tried before the fitting one, named only the group's first
        # member and wrote the failing pod set's line alone.
        self.fit_clears_reasons = fit_clears_reasons
        # Admitter logic 55: every requested resource of a flavor is checked, and its reasons written, even after
        # one did not fit (Kueue's findFlavorForPodSets returns from the per-resource closure, not the loop), and a
        # NoFit pod set's reason follows Kueue's resolveNoFitReason (the comment at :data:`_REASONS`); False: logic
        # 54 and earlier stopped at a flavor's first resource that did not fit and took the least severe of every
        # problem of the failing resource group (:func:`least_severe_problem`).
        self.kueue_no_fit = kueue_no_fit
        self.name = cq.metadata.name
        self.node = tree.cluster_queues[self.name]
        self.covering: dict[str, _Group] = {}  # resource -> the first group that covers it
        self.frs: dict[str, dict[str, FR]] = {}  # flavor -> resource -> the tree's FR tuple
        for group in cq.spec.resource_groups:
            entry = _Group(
                covered=tuple(group.covered_resources),
                flavors=tuple(
                    (fq.name, flavors.get(fq.name), _open_to_all(flavors.get(fq.name))) for fq in group.flavors
                ),
            )
            for resource in group.covered_resources:
                self.covering.setdefault(resource, entry)
                for fq in group.flavors:
                    self.frs.setdefault(fq.name, {})[resource] = tree.fr(fq.name, resource)
        # TAS flavors of the ClusterQueue -> their topology's levels (None: Topology unknown), and
        # whether every flavor is a TAS flavor (a TAS-only ClusterQueue, A.1).
        # With the gate TopologyAwareScheduling off (``topology_aware`` False) no flavor is a TAS flavor and no
        # pod set's topology request is checked against one (Kueue's cache.go handleTASFlavor, flavorassigner.go).
        self.topology_aware = topology_aware
        self.tas_levels: dict[str, tuple[str, ...] | None] = {}
        listed = [fq.name for group in cq.spec.resource_groups for fq in group.flavors]
        for name in listed:
            obj = flavors.get(name)
            if topology_aware and obj is not None and obj.spec.topology_name:
                topology = (topologies or {}).get(obj.spec.topology_name)
                self.tas_levels[name] = tuple(topology.level_keys) if topology is not None else None
        self.tas_only = bool(listed) and all(name in self.tas_levels for name in listed)
        self.fungibility = cq.spec.flavor_fungibility
        preemption = cq.spec.preemption
        self.may_preempt_borrowing = preemption.borrow_within_cohort.policy != "Never" or (
            fair_sharing and preemption.reclaim_within_cohort != "Never"
        )
        # Whether any policy allows a preemption candidate at all (search.can_preempt).
        self.preempting = preemption.within_cluster_queue != "Never" or (
            preemption.reclaim_within_cohort != "Never" and self.node.parent is not None
        )
        # Recent results of :meth:`assign` without oracle or bookmark, per request list (by
        # identity; the admitter shares one list among workloads that ask the same, see
        # queues.cached_pod_set_requests): the list, the usage stamps of the quota node and its
        # ancestors it was computed at (quota.path_stamps), and the assignment. A picker lives
        # in the admitter's caches, which checkpoints never write (kueue_es/checkpoints.py).
        self.memo: dict[int, tuple[list[PodSetRequest], tuple[int, ...], Assignment]] = {}

    def assign(
        self,
        pod_sets: list[PodSetRequest],
        *,
        oracle: Oracle | None,
        start: tuple[dict[str, int], ...] | None = None,
    ) -> Assignment:
        """:func:`assign` in this ClusterQueue; ``start`` is the bookmark to resume from
        (:attr:`Assignment.tried` of an earlier scan): a group's scan starts after the index
        it names for the pod set and the resource that opens the group (SEMANTICS §5.3).

        Without ``oracle`` and ``start`` the result depends only on ``pod_sets`` and the usage
        of this ClusterQueue's quota node and its ancestors (everything else the picker reads
        is fixed when it is made), so it is remembered until one of those usages changes."""
        if oracle is not None or start is not None:
            return self._assign(pod_sets, oracle=oracle, start=start)
        stamps = quota_math.path_stamps(self.node)
        memo = self.memo
        found = memo.get(id(pod_sets))
        if found is not None and found[0] is pod_sets and found[1] == stamps:
            return found[2]
        result = self._assign(pod_sets, oracle=None, start=None)
        if len(memo) >= _MEMO_SIZE:
            memo.clear()
        memo[id(pod_sets)] = (pod_sets, stamps, result)
        return result

    def _assign(
        self,
        pod_sets: list[PodSetRequest],
        *,
        oracle: Oracle | None,
        start: tuple[dict[str, int], ...] | None,
    ) -> Assignment:
        """:meth:`assign`, computed."""
        if len(pod_sets) > 1 and any(
            ps.topology_request is not None and ps.topology_request.pod_set_group_name is not None for ps in pod_sets
        ):
            return self._assign_units(pod_sets, oracle=oracle, start=start)
        if len(pod_sets) == 1 and len(pod_sets[0].requests) == 1:
            return self._assign_one(pod_sets[0], oracle=oracle, start=start)
        covering, frs = self.covering, self.frs
        tried: list[dict[str, int]] = []
        taken: dict[FR, int] = {}  # what earlier pod sets took, per FR
        flat: list[object] = []
        borrowing = 0
        worst: GranularMode = BEST
        need: dict[FR, None] = {}
        problems_all: list[str] = []
        for index, ps in enumerate(pod_sets):
            resume = start[index] if start is not None and index < len(start) else None
            tried_ps: dict[str, int] = {}
            reasons: list[str] = []
            severity = 0  # the most severe of the pod set's resource groups' no-fit reasons so far
            # A zero request of a covered resource still gets a flavor (with zero usage); of an
            # uncovered one it is ignored (SEMANTICS §10.4).
            count = ps.count
            totals: dict[str, int] = {}
            released = ps.released
            for resource, amount in ps.requests.items():
                total = amount * count
                if released:
                    total = max(0, total - released.get(resource, 0))
                if total > 0 or resource in covering:
                    totals[resource] = total
            chosen: dict[str, str] = {}
            for resource in sorted(totals) if len(totals) > 1 else totals:
                if resource in chosen:
                    continue
                group = covering.get(resource)
                if group is None:
                    return self._after(problems_all, _uncovered(ps.name, resource, tried=(*tried, {})))
                if len(group.covered) == 1:
                    wanted = {resource: totals[resource]}
                else:
                    wanted = {r: totals[r] for r in group.covered if r in totals}
                first = resume.get(resource, -1) + 1 if resume else 0
                choice, problems, last, least = self._pick(ps, group, wanted, taken, oracle, first)
                mode = choice.mode
                severity = max(severity, least)
                if choice.flavor is None or mode[0] == NO_FIT:
                    nofit = _no_flavor(
                        ps.name,
                        problems,
                        tried=(*tried, {}),
                        kueue_reasons=self.kueue_reasons,
                        reason=_REASONS[severity] if self.kueue_no_fit else None,
                    )
                    return self._after(problems_all, nofit)
                if self.kueue_reasons:
                    if mode[0] != FIT or not self.fit_clears_reasons:
                        reasons += problems
                elif mode[0] != FIT:
                    problems_all.append(f"couldn't assign flavors to pod set {ps.name}: {'; '.join(problems)}")
                if mode[0] < worst[0] or (mode[0] == worst[0] and mode[1] > worst[1]):
                    worst = mode
                if mode[1] > borrowing:
                    borrowing = mode[1]
                for r in wanted:
                    chosen[r] = choice.flavor
                    tried_ps[r] = last
                for r in choice.need_preemption:
                    need[frs[choice.flavor][r]] = None
            chosen_frs = {resource: frs[flavor][resource] for resource, flavor in chosen.items()}
            for resource, amount in totals.items():
                fr = chosen_frs[resource]
                taken[fr] = taken.get(fr, 0) + amount
            _flatten(flat, ps.name, count, totals, chosen_frs, need)
            tried.append(tried_ps)
            if reasons:
                problems_all.append(_pod_set_message(ps.name, reasons))
        # Positional (mode, flat, borrowing, message, reason, tas, tried): one for every head of a cycle.
        outcome = "Fit" if worst[0] == FIT else "Preempt"
        message = "; ".join(problems_all) if outcome != "Fit" else ""
        return Assignment(outcome, tuple(flat), borrowing, message, "", None, tuple(tried))

    def _after(self, earlier: list[str], failed: Assignment) -> Assignment:
        """``failed`` (a NoFit) with the lines of the pod sets before it that need preemption first, as Kueue's
        Assignment.Message lists every pod set whose status is not Fit up to the one that failed (admitter logic
        45, :attr:`fit_clears_reasons`); ``failed`` as it is before that logic or when there are none."""
        if not earlier or not (self.kueue_reasons and self.fit_clears_reasons):
            return failed
        return msgspec.structs.replace(failed, message="; ".join([*earlier, failed.message]))

    def _assign_one(
        self, ps: PodSetRequest, *, oracle: Oracle | None, start: tuple[dict[str, int], ...] | None
    ) -> Assignment:
        """:meth:`assign` for one pod set asking one resource (the common case), with the
        same result as the general loop: no maps of earlier pod sets' usage or chosen flavors
        to build, the flat tuple made in one go."""
        ((resource, amount),) = ps.requests.items()
        count = ps.count
        total = amount * count
        if ps.released:
            total = max(0, total - ps.released.get(resource, 0))
        group = self.covering.get(resource)
        if total <= 0 and group is None:  # an uncovered zero request is ignored (SEMANTICS §10.4)
            return Assignment("Fit", (ps.name, count, 0), 0, "", "", None, ({},))
        if group is None:
            return _uncovered(ps.name, resource, tried=({},))
        resume = start[0] if start else None
        first = resume.get(resource, -1) + 1 if resume else 0
        choice, problems, last, least = self._pick(ps, group, {resource: total}, {}, oracle, first)
        mode = choice.mode
        flavor = choice.flavor
        if flavor is None or mode[0] == NO_FIT:
            return _no_flavor(
                ps.name,
                problems,
                tried=({},),
                kueue_reasons=self.kueue_reasons,
                reason=_REASONS[least] if self.kueue_no_fit else None,
            )
        fr = self.frs[flavor][resource]
        flat = (ps.name, count, 1, resource, fr, total, resource in choice.need_preemption)
        borrowing = mode[1] if mode[1] > 0 else 0
        if mode[0] == FIT:
            return Assignment("Fit", flat, borrowing, "", "", None, ({resource: last},))
        if self.kueue_reasons:
            message = _pod_set_message(ps.name, problems) if problems else ""
        else:
            message = f"couldn't assign flavors to pod set {ps.name}: {'; '.join(problems)}"
        return Assignment("Preempt", flat, borrowing, message, "", None, ({resource: last},))

    def _assign_units(
        self,
        pod_sets: list[PodSetRequest],
        *,
        oracle: Oracle | None,
        start: tuple[dict[str, int], ...] | None,
    ) -> Assignment:
        """:meth:`assign` for a workload whose pod sets share a ``podSetGroupName`` (a leader and
        its workers): each group is one unit, in the order of its first pod set, whose requests
        are summed and whose flavor must suit every member; other pod sets are units of their
        own (flavorassigner.go assignFlavors / findFlavorForPodSets, SEMANTICS §5.2). Each member
        gets the unit's flavors for the resources it requests; one requesting nothing gets the
        unit's TAS flavors, with no usage, so it can still be placed (resolvePodSetFlavors).
        The result lists the pod sets in spec order, as the bookmark does (every member of a
        unit records the unit's scan). Kept apart from :meth:`assign`'s own loop, which it
        repeats for units of one, so that the common case (no groups) stays as fast as it was."""
        covering, frs = self.covering, self.frs
        units: dict[str, list[int]] = {}
        for index, ps in enumerate(pod_sets):
            request = ps.topology_request
            key = request.pod_set_group_name if request is not None else None
            units.setdefault(key if key is not None else f"#{index}", []).append(index)
        tried: dict[int, dict[str, int]] = {}
        results: dict[int, tuple[dict[str, int], dict[str, FR]]] = {}
        taken: dict[FR, int] = {}  # what earlier units took, per FR
        borrowing = 0
        worst: GranularMode = BEST
        need: dict[FR, None] = {}
        problems_all: list[str] = []

        def tried_so_far(failed: list[int]) -> tuple[dict[str, int], ...]:
            return tuple(tried.get(i, {}) for i in range(max([*tried, *failed]) + 1))

        for members in units.values():
            lead = pod_sets[members[0]]
            others = tuple(pod_sets[i] for i in members[1:])
            resume = start[members[0]] if start is not None and members[0] < len(start) else None
            own: list[dict[str, int]] = []
            totals: dict[str, int] = {}
            for index in members:
                ps = pod_sets[index]
                mine: dict[str, int] = {}
                for resource, amount in ps.requests.items():
                    total = amount * ps.count
                    if total > 0 or resource in covering:
                        mine[resource] = total
                        totals[resource] = totals.get(resource, 0) + total
                own.append(mine)
            chosen: dict[str, str] = {}
            scanned: dict[str, int] = {}
            reasons: list[str] = []
            severity = 0  # the most severe of the unit's resource groups' no-fit reasons so far
            for resource in sorted(totals):
                if resource in chosen:
                    continue
                group = covering.get(resource)
                if group is None:
                    uncovered = _uncovered(lead.name, resource, tried=tried_so_far(members))
                    if self.kueue_reasons and self.fit_clears_reasons:  # every member carries the group's status
                        reason = [f"resource {resource} unavailable in ClusterQueue"]
                        lines = "; ".join(_pod_set_message(pod_sets[i].name, reason) for i in members)
                        return self._after(problems_all, msgspec.structs.replace(uncovered, message=lines))
                    return uncovered
                wanted = {r: totals[r] for r in group.covered if r in totals}
                first = resume.get(resource, -1) + 1 if resume else 0
                choice, problems, last, least = self._pick(lead, group, wanted, taken, oracle, first, others)
                mode = choice.mode
                severity = max(severity, least)
                if choice.flavor is None or mode[0] == NO_FIT:
                    if self.kueue_reasons:  # every member of the group carries the group's status (Kueue)
                        why = _REASONS[severity] if self.kueue_no_fit else None
                        nofit = _no_flavor(lead.name, problems, tried=tried_so_far(members), reason=why)
                        lines = "; ".join(_pod_set_message(pod_sets[i].name, problems) for i in members)
                        return self._after(problems_all, msgspec.structs.replace(nofit, message=lines))
                    return _no_flavor(lead.name, problems, tried=tried_so_far(members), kueue_reasons=False)
                if self.kueue_reasons:
                    if mode[0] != FIT or not self.fit_clears_reasons:
                        reasons += problems
                elif mode[0] != FIT:
                    problems_all.append(f"couldn't assign flavors to pod set {lead.name}: {'; '.join(problems)}")
                if mode[0] < worst[0] or (mode[0] == worst[0] and mode[1] > worst[1]):
                    worst = mode
                borrowing = max(borrowing, mode[1])
                for r in wanted:
                    chosen[r] = choice.flavor
                    scanned[r] = last
                for r in choice.need_preemption:
                    need[frs[choice.flavor][r]] = None
            for index, mine in zip(members, own, strict=True):
                if not mine and len(members) > 1:
                    mine = {r: 0 for r, flavor in chosen.items() if flavor in self.tas_levels}
                chosen_frs = {resource: frs[chosen[resource]][resource] for resource in mine}
                for resource, amount in mine.items():
                    fr = chosen_frs[resource]
                    taken[fr] = taken.get(fr, 0) + amount
                results[index] = (mine, chosen_frs)
                tried[index] = dict(scanned)
            if reasons:
                problems_all += [_pod_set_message(pod_sets[i].name, reasons) for i in members]
        flat: list[object] = []
        for index, ps in enumerate(pod_sets):
            mine, chosen_frs = results[index]
            _flatten(flat, ps.name, ps.count, mine, chosen_frs, need)
        outcome = "Fit" if worst[0] == FIT else "Preempt"
        message = "; ".join(problems_all) if outcome != "Fit" else ""
        return Assignment(outcome, tuple(flat), borrowing, message, "", None, tried_so_far([]))

    def _pick(
        self,
        ps: PodSetRequest,
        group: _Group,
        wanted: dict[str, int],
        taken: dict[FR, int],
        oracle: Oracle | None,
        first: int = 0,
        others: tuple[PodSetRequest, ...] = (),
    ) -> tuple[_Choice, list[str], int, int]:
        """The flavor of ``group`` for ``wanted`` (SEMANTICS §5.3-§5.7), the problems seen, the
        bookmark index (the last flavor examined, -1 when that was the group's last) and the
        severity of the group's no-fit reason: the least severe among the flavors examined that
        did not fit, each flavor's the most severe among its resources (0: every flavor examined
        fits or was skipped; see the comment at :data:`_REASONS`).
        The scan starts at flavor index ``first`` (the bookmark's + 1). ``others``: the rest of
        a pod set group's members, each of which must be eligible for the flavor too."""
        problems: list[str] = []
        least = 0  # Kueue's rgMinReason, as a severity
        best_flavor: str | None = None
        best_mode: GranularMode = WORST
        best_need: tuple[str, ...] = ()
        fungibility = self.fungibility
        preference = fungibility.preference
        resources = sorted(wanted) if len(wanted) > 1 else wanted
        listed = group.flavors if first == 0 else group.flavors[first:]
        last = len(group.flavors) - 1
        examined = first - 1
        # The nominated flavor of the resource that opens the group (Kueue keys the mapping by it).
        pinned = ps.nominated_flavors.get(next(iter(resources))) if ps.nominated_flavors is not None else None
        for flavor_name, flavor, open_to_all in listed:
            examined += 1
            if ps.nominated_flavors is not None and pinned != flavor_name:
                # flavorassigner.go shouldSkipBasedOnNominationMapping, checked before anything else
                opening = next(iter(resources))
                problems.append(
                    f"skipping flavor {flavor_name} as it is not found in the nomination mapping for resource {opening}"
                )
                continue
            if ps.allowed_flavors is not None and flavor_name not in ps.allowed_flavors:
                # flavorassigner.go findFlavorForPodSets: checked right after the nomination mapping
                problems.append(
                    f"skipping flavor {flavor_name} due to WorkloadAllowedResourceFlavorAnnotation annotation"
                )
                continue
            if flavor is None:
                problems.append(f"flavor {flavor_name} not found")
                least = NO_MATCHING_FLAVOR if least == 0 else min(least, NO_MATCHING_FLAVOR)
                continue
            if ps.original_flavors is not None and (
                held := _held_elsewhere(ps.original_flavors, resources, flavor_name)
            ):
                # flavorassigner.go: a replacement slice keeps the flavors of the slice it replaces
                problems.append(
                    f"could not assign {flavor_name} flavor since the original workload is assigned: {held}"
                )
                least = NO_MATCHING_FLAVOR if least == 0 else min(least, NO_MATCHING_FLAVOR)
                continue
            mismatch = "" if open_to_all else _eligibility_problem(ps, flavor, go_taint=self.kueue_reasons)
            if not mismatch and self.topology_aware and (self.tas_levels or ps.topology_request is not None):
                mismatch = self._tas_problem(ps, flavor_name, flavor, group)
            for other in others:  # a pod set group: the flavor must suit every member (§5.2)
                if mismatch:
                    break
                mismatch = "" if open_to_all else _eligibility_problem(other, flavor, go_taint=self.kueue_reasons)
                if not mismatch and self.topology_aware and (self.tas_levels or other.topology_request is not None):
                    mismatch = self._tas_problem(other, flavor_name, flavor, group)
            if mismatch:
                problems.append(mismatch)
                least = NO_MATCHING_FLAVOR if least == 0 else min(least, NO_MATCHING_FLAVOR)
                continue
            representative: GranularMode = BEST
            need: list[str] = []
            severity = 0  # the flavor's: the most severe of its resources that do not fit
            for resource in resources:
                # once the flavor does not fit, what preemption could do for the rest no longer matters
                asked = oracle if representative[0] != NO_FIT else no_preemption
                mode, problem = self._classify(flavor_name, resource, wanted[resource], taken, asked)
                if problem:
                    problems.append(problem)
                    if mode[0] == NO_FIT:  # preemption may still serve it otherwise: no reason (fitsResourceQuota)
                        severity = max(severity, _problem_severity(problem))
                if is_preferred(representative, mode, preference):
                    representative = mode
                if representative[0] == NO_FIT:
                    if self.kueue_no_fit:
                        continue  # the flavor does not fit, but its other resources are checked too (Kueue)
                    break
                if mode[0] != FIT:
                    need.append(resource)
            if representative[0] == NO_FIT:
                least = severity if least == 0 else min(least, severity)
            if not _try_next(representative, fungibility):
                bookmark = -1 if examined == last else examined
                return _Choice(flavor_name, representative, tuple(need)), problems, bookmark, least
            if is_preferred(representative, best_mode, preference):
                best_flavor, best_mode, best_need = flavor_name, representative, tuple(need)
        return _Choice(best_flavor, best_mode, best_need), problems, -1 if examined == last else examined, least

    def _tas_problem(self, ps: PodSetRequest, name: str, flavor: models.ResourceFlavor, group: _Group) -> str:
        """tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS (SEMANTICS-ADVANCED A.5.1): why a
        pod set's TAS request (or its lack of one) rules ``flavor`` out, or ""."""
        explicit = tas.requests_tas(ps.topology_request)
        if not explicit:
            if self.tas_only:
                return ""  # implied TAS: every flavor of the ClusterQueue is a TAS flavor
            if flavor.spec.topology_name:
                return f'Flavor "{name}" supports only TopologyAwareScheduling'
            return ""
        if not flavor.spec.topology_name:
            if not any(r in ps.raw_resources for r in group.covered):
                return ""  # provides only quota-only resources
            return f'Flavor "{name}" does not support TopologyAwareScheduling'
        levels = self.tas_levels.get(name)
        if levels is None:
            return f'Flavor "{name}" information missing in TAS cache'
        if not has_level(levels, ps.topology_request):
            return f'Flavor "{name}" does not contain the requested level'
        return ""

    def _classify(
        self, flavor: str, resource: str, amount: int, taken: dict[FR, int], oracle: Oracle | None
    ) -> tuple[GranularMode, str]:
        """flavorassigner.go fitsResourceQuota: the mode of one FR and the problem, if any (SEMANTICS §5.5)."""
        fr = self.frs[flavor][resource]
        earlier = taken.get(fr, 0)
        value = earlier + amount
        node = self.node
        quota = node.quotas.get(fr)
        if quota is None:
            return WORST, f"flavor {flavor} has no quota for {resource}"
        potential = quota_math.potential_at(node, fr)
        if value > potential:
            return WORST, (
                f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
                f"({format_amount(resource, earlier)}) + current podset request ({format_amount(resource, amount)}) "
                f"> maximum capacity ({format_amount(resource, potential)})"
            )
        available = quota_math.available_at(node, fr)
        if value <= available:
            return (FIT, quota_math.lowest_subtree_that_fits(node, fr, value)[0]), ""
        problem = (
            f"insufficient unused quota for {resource} in flavor {flavor}, "
            f"{format_amount(resource, value - available)} more needed"
        )
        if quota.nominal >= value or self.may_preempt_borrowing:
            return self._preemption(fr, value, oracle), problem
        borrow, may_reclaim = quota_math.lowest_subtree_that_fits(node, fr, value)
        if may_reclaim:
            return self._preemption(fr, value, oracle), problem
        return (NO_FIT, borrow), problem

    def _preemption(self, fr: FR, value: int, oracle: Oracle | None) -> GranularMode:
        """What preemption could do for ``value`` of ``fr`` (the oracle's answer)."""
        if oracle is None:
            return NO_CANDIDATES, quota_math.lowest_subtree_that_fits(self.node, fr, value)[0]
        return oracle(fr, value)


def _uncovered(pod_set: str, resource: str, *, tried: tuple[dict[str, int], ...]) -> Assignment:
    """NoFit: the pod set requests a resource no resource group of the ClusterQueue covers (§5.2)."""
    return Assignment(
        mode="NoFit",
        message=f"couldn't assign flavors to pod set {pod_set}: resource {resource} unavailable in ClusterQueue",
        reason="NoMatchingFlavor",
        tried=tried,
    )


def _pod_set_message(pod_set: str, reasons: list[str]) -> str:
    """Kueue's line for a pod set that did not simply fit: its reasons sorted, joined with ", "
    (flavorassigner.go Assignment.Message and Status.Message)."""
    return f"couldn't assign flavors to pod set {pod_set}: {', '.join(sorted(reasons))}"


def _no_flavor(
    pod_set: str,
    problems: list[str],
    *,
    tried: tuple[dict[str, int], ...],
    kueue_reasons: bool = True,
    reason: str | None = None,
) -> Assignment:
    """NoFit: no flavor of the group suits the pod set (§5.3-§5.8), with every problem seen
    (``kueue_reasons``: see :class:`Picker`) and ``reason`` (the comment at :data:`_REASONS`; None: the least
    severe of ``problems``, :func:`least_severe_problem`, admitter logic 54 and earlier)."""
    return Assignment(
        mode="NoFit",
        message=(
            _pod_set_message(pod_set, problems)
            if kueue_reasons
            else f"couldn't assign flavors to pod set {pod_set}: {'; '.join(problems)}"
        ),
        reason=least_severe_problem(problems) if reason is None else reason,
        tried=tried,
    )


def has_level(levels: tuple[str, ...], request: models.PodSetTopologyRequest | None) -> bool:
    """tas_flavor_snapshot.go HasLevel: the topology ``levels`` hold the requested level, the
    slice level and every multi-layer slice level (SEMANTICS-ADVANCED A.5.1)."""
    if request is None:
        return False
    layers = tas.slice_layers(request)
    if request.required is not None:
        main = request.required
    elif request.preferred is not None:
        main = request.preferred
    elif layers and not request.unconstrained:
        main = levels[0]
    elif request.unconstrained:
        main = levels[-1]
    else:
        return False
    return main in levels and all(layer.topology in levels for layer in layers)


# Kueue's granular reason for a pod set no flavor of some resource group takes (flavorassigner.go
# resolveNoFitReason, SEMANTICS §5.8), which Picker._pick and its callers compute as severities: each flavor tried
# that does not fit has the most severe reason of its resources' (a resource that fits, or that preemption could
# still serve, has none: fitsResourceQuota clears it; a flavor ruled out before its quota is NoMatchingFlavor; a
# flavor skipped for a nomination or the allowed-flavors annotation is no attempt), a resource group the least
# severe of its flavors', and the pod set the most severe of its groups' so far, those that found a flavor
# included (Kueue merges every attempt of the pod set). With one flavor that has cpu to preempt for but too
# little memory ever, the reason is ExceedsMaxQuota (memory), not WaitingForQuota (cpu). No attempt at all: ""
# (the caller's NoMatchingFlavor). Severities as flavorassigner.go reasonSeverity, 0 for no reason.
WAITING_FOR_QUOTA, EXCEEDS_MAX_QUOTA, NO_MATCHING_FLAVOR = 2, 3, 4
_SEVERITY = {
    "WaitingForQuota": WAITING_FOR_QUOTA,
    "ExceedsMaxQuota": EXCEEDS_MAX_QUOTA,
    "NoMatchingFlavor": NO_MATCHING_FLAVOR,
}
_REASONS = ("", "TopologyPlacementFailed", "WaitingForQuota", "ExceedsMaxQuota", "NoMatchingFlavor")
"""The reason of each severity (index), "" for none."""


def least_severe_problem(problems: list[str]) -> str:
    """Admitter logic 54 and earlier's no-fit reason: the least severe reason of any of ``problems``
    (this module's messages of a resource group, whether or not preemption could serve the resource),
    NoMatchingFlavor when there are none. Kept for replay (Kueue's rule: the comment at :data:`_REASONS`)."""
    reasons = [_problem_reason(p) for p in problems]
    return min(reasons, key=_SEVERITY.__getitem__, default="NoMatchingFlavor")


def _held_elsewhere(original: dict[str, str], resources: Iterable[str], flavor: str) -> str:
    """The flavor the replaced slice holds for one of ``resources`` when it is not ``flavor``, else ""."""
    for resource in resources:
        held = original.get(resource)
        if held is not None and held != flavor:
            return held
    return ""


def _problem_severity(problem: str) -> int:
    """The severity of the reason of ``problem`` (:func:`_problem_reason`)."""
    return _SEVERITY[_problem_reason(problem)]


def _problem_reason(problem: str) -> str:
    if problem.startswith("insufficient unused quota"):
        return "WaitingForQuota"
    if problem.startswith("insufficient quota"):
        return "ExceedsMaxQuota"
    return "NoMatchingFlavor"  # not found, no quota for the resource, taints, node affinity


def _open_to_all(flavor: models.ResourceFlavor | None) -> bool:
    """A flavor with nothing to tolerate and no label to match: every pod set is eligible."""
    return flavor is not None and not flavor.spec.node_taints and not flavor.spec.node_labels


def _eligibility_problem(ps: PodSetRequest, flavor: models.ResourceFlavor, *, go_taint: bool = True) -> str:
    """Why ``flavor`` cannot host the pod set (taints, node labels), or "" (SEMANTICS §5.4). ``go_taint``:
    the taint as Kueue's message prints it, Go's ``%s`` of a corev1.Taint (``{key value effect <nil>}``)."""
    if _open_to_all(flavor):
        return ""
    tolerations = [*ps.tolerations, *flavor.spec.tolerations]
    for taint in flavor.spec.node_taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in tolerations):
            if go_taint:
                return f"untolerated taint {{{taint.key} {taint.value} {taint.effect} <nil>}} in flavor {flavor.metadata.name}"
            return f"untolerated taint {{{taint.key}: {taint.value}}} in flavor {flavor.metadata.name}"
    labels = flavor.spec.node_labels
    mismatch = f"flavor {flavor.metadata.name} doesn't match node affinity"
    for key, value in ps.node_selector.items():
        if key in labels and labels[key] != value:
            return mismatch
    # Only keys the flavor labels count; a term left empty drops the whole required affinity.
    terms = [[e for e in term.match_expressions if e.key in labels] for term in ps.affinity]
    if terms and all(terms) and not any(all(_expression_holds(e, labels) for e in term) for term in terms):
        return mismatch
    return ""


def _expression_holds(expr: models.NodeSelectorRequirement, labels: dict[str, str]) -> bool:
    value = labels.get(expr.key)
    match expr.operator:
        case "In":
            return value in expr.values
        case "NotIn":
            return value not in expr.values
        case "Exists":
            return value is not None
        case "DoesNotExist":
            return value is None
        case "Gt" | "Lt":
            try:
                number, bound = int(value or ""), int(expr.values[0])
            except (ValueError, IndexError):
                return False
            return number > bound if expr.operator == "Gt" else number < bound
    return False


def _tolerates(toleration: models.Toleration, taint: models.Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if not toleration.key:
        return toleration.operator == "Exists"
    if toleration.key != taint.key:
        return False
    return toleration.operator == "Exists" or toleration.value == taint.value
