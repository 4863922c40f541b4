"""Flavor assignment: which ResourceFlavor each pod set gets, and whether it fits now.

Follows Kueue's flavor assigner (pkg/scheduler/flavorassigner/flavorassigner.go,
SEMANTICS §5): pod sets in spec order; for each requested resource, the search
runs over its whole resource group (all requested resources of a group get the
same flavor); flavors in the listed order; a flavor must exist, have its taints
tolerated and match the pod set's node selector / required node affinity on the
keys it labels; then each resource is classified against the quota tree
(:mod:`projections.quota`): beyond potential capacity (never fits), beyond what
is available now (waits, unless preemption could help: the oracle says whether
there are candidates, SEMANTICS §7.7), or fits, possibly by borrowing. Each
flavor gets Kueue's granular mode (preemption mode, borrowing level) and
flavorFungibility (whenCanBorrow, whenCanPreempt, preference) decides whether it
stops the search.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from events import models
from events.quantities import format_amount
from projections.quota import FR, QuotaTree


@dataclass(frozen=True, kw_only=True)
class PodSetRequest:
    """What one pod set asks for: ``requests`` are per-pod amounts, ``count`` pods."""

    name: str
    count: int
    requests: dict[str, int]
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[models.Toleration, ...] = ()
    affinity: tuple[models.NodeSelectorTerm, ...] = ()

    def totals(self) -> dict[str, int]:
        """Per-resource totals for all ``count`` pods."""
        return {res: amount * self.count for res, amount in self.requests.items()}


@dataclass(frozen=True, kw_only=True)
class PodSetResult:
    """A pod set's chosen flavors (resource -> flavor) and total usage per resource."""

    name: str
    count: int
    flavors: dict[str, str]
    usage: dict[str, int]


# Kueue's preemption modes, worst to best (flavorassigner.go preemptionMode)
NO_FIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)
GranularMode = tuple[int, int]  # (preemption mode, borrowing level)
WORST: GranularMode = (NO_FIT, 1 << 30)
BEST: GranularMode = (FIT, 0)

Oracle = Callable[[FR, int], tuple[int, int]]
"""``oracle(fr, amount)``: (NO_CANDIDATES | PREEMPT | RECLAIM, borrowing level after the
preemptions) for a request of ``amount`` of ``fr`` that does not fit now (SEMANTICS §7.7)."""


def no_preemption(fr: FR, amount: int) -> tuple[int, int]:
    """An oracle for ClusterQueues that can never preempt: no candidates."""
    del fr, amount
    return NO_CANDIDATES, 0


@dataclass(frozen=True, kw_only=True)
class Assignment:
    """The outcome for a workload: ``mode`` Fit, Preempt or NoFit (Kueue's
    RepresentativeMode), the pod sets' flavors, and Kueue's message when not Fit.

    ``borrowing`` is the highest borrowing level of the chosen flavors (0: none);
    ``frs_need_preemption`` the FRs whose chosen flavor needs preemption (§7.1).
    """

    mode: str
    pod_sets: tuple[PodSetResult, ...] = ()
    borrowing: int = 0
    message: str = ""
    frs_need_preemption: frozenset[FR] = frozenset()

    @property
    def fits(self) -> bool:
        """Mode Fit: admissible now without preempting anybody."""
        return self.mode == "Fit"

    def usage(self) -> dict[FR, int]:
        """Total usage per (flavor, resource)."""
        out: dict[FR, int] = {}
        for ps in self.pod_sets:
            for resource, amount in ps.usage.items():
                fr = (ps.flavors[resource], resource)
                out[fr] = out.get(fr, 0) + amount
        return out


class _Choice(NamedTuple):
    flavor: str | None
    mode: GranularMode
    need_preemption: tuple[str, ...]


def assign(
    pod_sets: list[PodSetRequest],
    *,
    cq: models.ClusterQueue,
    tree: QuotaTree,
    flavors: dict[str, models.ResourceFlavor],
    oracle: Oracle = no_preemption,
    fair_sharing: bool = False,
) -> Assignment:
    """Assign flavors to every pod set of a workload for ClusterQueue ``cq``.

    ``pod_sets`` carry already-filtered requests (excluded resources removed, the
    ``pods`` resource added when the ClusterQueue covers it); ``oracle`` says what
    preemption could do where quota is short (default: nothing). Returns an
    Assignment; never raises for a workload that does not fit.
    """
    taken: dict[FR, int] = {}
    results: list[PodSetResult] = []
    borrowing = 0
    worst: GranularMode = BEST
    need: set[FR] = set()
    problems_all: list[str] = []
    for ps in pod_sets:
        # A zero request of a covered resource still gets a flavor (with zero usage); of an
        # uncovered one it is ignored (SEMANTICS §10.4).
        totals = {r: v for r, v in ps.totals().items() if v > 0 or _group_covering(cq, r) is not None}
        chosen: dict[str, str] = {}
        for resource in sorted(totals):
            if resource in chosen:
                continue
            group = _group_covering(cq, resource)
            if group is None:
                return Assignment(
                    mode="NoFit",
                    message=f"couldn't assign flavors to pod set {ps.name}: "
                    f"resource {resource} unavailable in ClusterQueue",
                )
            wanted = {r: totals[r] for r in group.covered_resources if r in totals}
            choice, problems = _pick_flavor(
                ps, group, wanted, cq=cq, tree=tree, flavors=flavors, taken=taken, oracle=oracle, fair=fair_sharing
            )
            if choice.flavor is None or choice.mode[0] == NO_FIT:
                return Assignment(
                    mode="NoFit", message=f"couldn't assign flavors to pod set {ps.name}: {'; '.join(problems)}"
                )
            if choice.mode[0] != FIT:
                problems_all.append(f"couldn't assign flavors to pod set {ps.name}: {'; '.join(problems)}")
            if (choice.mode[0], -choice.mode[1]) < (worst[0], -worst[1]):
                worst = choice.mode
            borrowing = max(borrowing, choice.mode[1])
            chosen.update({r: choice.flavor for r in wanted})
            need.update((choice.flavor, r) for r in choice.need_preemption)
        for resource, amount in totals.items():
            fr = (chosen[resource], resource)
            taken[fr] = taken.get(fr, 0) + amount
        results.append(
            PodSetResult(
                name=ps.name, count=ps.count, flavors=dict(sorted(chosen.items())), usage=dict(sorted(totals.items()))
            )
        )
    mode = "Fit" if worst[0] == FIT else "Preempt"
    return Assignment(
        mode=mode,
        pod_sets=tuple(results),
        borrowing=borrowing,
        message="; ".join(problems_all),
        frs_need_preemption=frozenset(need),
    )


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


def _pick_flavor(
    ps: PodSetRequest,
    group: models.ResourceGroup,
    wanted: dict[str, int],
    *,
    cq: models.ClusterQueue,
    tree: QuotaTree,
    flavors: dict[str, models.ResourceFlavor],
    taken: dict[FR, int],
    oracle: Oracle,
    fair: bool,
) -> tuple[_Choice, list[str]]:
    """The flavor of ``group`` for ``wanted`` (SEMANTICS §5.3-§5.7) and the problems seen."""
    problems: list[str] = []
    best = _Choice(None, WORST, ())
    fungibility = cq.spec.flavor_fungibility
    for flavor_quotas in group.flavors:
        flavor = flavors.get(flavor_quotas.name)
        if flavor is None:
            problems.append(f"flavor {flavor_quotas.name} not found")
            continue
        mismatch = _eligibility_problem(ps, flavor)
        if mismatch:
            problems.append(mismatch)
            continue
        representative: GranularMode = BEST
        need: list[str] = []
        for resource in sorted(wanted):
            mode, problem = _classify(
                cq, flavor.metadata.name, resource, wanted[resource], tree=tree, taken=taken, oracle=oracle, fair=fair
            )
            if problem:
                problems.append(problem)
            if is_preferred(representative, mode, fungibility.preference):
                representative = mode
            if representative[0] == NO_FIT:
                break
            if mode[0] != FIT:
                need.append(resource)
        choice = _Choice(flavor.metadata.name, representative, tuple(need))
        if not _try_next(representative, fungibility):
            return choice, problems
        if is_preferred(representative, best.mode, fungibility.preference):
            best = choice
    return best, problems


def _classify(
    cq: models.ClusterQueue,
    flavor: str,
    resource: str,
    amount: int,
    *,
    tree: QuotaTree,
    taken: dict[FR, int],
    oracle: Oracle,
    fair: bool,
) -> tuple[GranularMode, str]:
    """flavorassigner.go fitsResourceQuota: the mode of one FR and the problem, if any (SEMANTICS §5.5)."""
    name = cq.metadata.name
    fr = (flavor, resource)
    earlier = taken.get(fr, 0)
    value = earlier + amount
    if not tree.declares(name, fr):
        return WORST, f"flavor {flavor} has no quota for {resource}"
    potential = tree.potential_available(name, fr)
    if value > potential:
        return WORST, (
            f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
            f"({format_amount(resource, earlier)}) + current podset request ({format_amount(resource, amount)}) "
            f"> maximum capacity ({format_amount(resource, potential)})"
        )
    available = tree.available(name, fr)
    if value <= available:
        return (FIT, tree.borrowing_level(name, fr, value)), ""
    problem = (
        f"insufficient unused quota for {resource} in flavor {flavor}, "
        f"{format_amount(resource, value - available)} more needed"
    )
    preemption = cq.spec.preemption
    can_preempt_while_borrowing = preemption.borrow_within_cohort.policy != "Never" or (
        fair and preemption.reclaim_within_cohort != "Never"
    )
    if tree.nominal(name, fr) >= value or can_preempt_while_borrowing:
        return oracle(fr, value), problem
    borrow, may_reclaim = tree.lowest_subtree_that_fits(name, fr, value)
    if may_reclaim:
        return oracle(fr, value), problem
    return (NO_FIT, borrow), problem


def _eligibility_problem(ps: PodSetRequest, flavor: models.ResourceFlavor) -> str:
    """Why ``flavor`` cannot host the pod set (taints, node labels), or "" (SEMANTICS §5.4)."""
    tolerations = [*ps.tolerations, *flavor.spec.tolerations]
    for taint in flavor.spec.node_taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in tolerations):
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


def _group_covering(cq: models.ClusterQueue, resource: str) -> models.ResourceGroup | None:
    for group in cq.spec.resource_groups:
        if resource in group.covered_resources:
            return group
    return None
