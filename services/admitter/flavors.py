"""Flavor assignment: which ResourceFlavor each pod set gets, and whether it fits now.

Follows Kueue's flavor assigner (pkg/scheduler/flavorassigner/flavorassigner.go,
SEMANTICS §5): pod sets in spec order; for each requested resource, the search
runs over its whole resource group (all requested resources of a group get the
same flavor); flavors in the listed order; a flavor must exist, have its taints
tolerated and match the pod set's node selector / required node affinity on the
keys it labels; then each resource is classified against the quota tree
(:mod:`projections.quota`): beyond potential capacity (never fits), beyond what
is available now (waits), or fits, possibly by borrowing. flavorFungibility
decides whether a borrowing fit stops the search. Preemption modes arrive with
the preemption issue: here a flavor that does not fit is NoFit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(frozen=True, kw_only=True)
class Assignment:
    """The outcome for a workload: Fit with pod sets, or NoFit with Kueue's message.

    ``borrowing`` is the highest borrowing level of the chosen flavors (0: none).
    """

    fits: bool
    pod_sets: tuple[PodSetResult, ...] = ()
    borrowing: int = 0
    message: str = ""

    def usage(self) -> dict[FR, int]:
        """Total usage per (flavor, resource)."""
        out: dict[FR, int] = {}
        for ps in self.pod_sets:
            for resource, amount in ps.usage.items():
                fr = (ps.flavors[resource], resource)
                out[fr] = out.get(fr, 0) + amount
        return out


@dataclass(frozen=True)
class _FlavorOutcome:
    fits: bool
    borrowing: int
    problem: str


def assign(
    pod_sets: list[PodSetRequest],
    *,
    cq: models.ClusterQueue,
    tree: QuotaTree,
    flavors: dict[str, models.ResourceFlavor],
) -> Assignment:
    """Assign flavors to every pod set of a workload for ClusterQueue ``cq``.

    ``pod_sets`` carry already-filtered requests (excluded resources removed, the
    ``pods`` resource added when the ClusterQueue covers it). Returns an Assignment;
    never raises for a workload that does not fit.
    """
    taken: dict[FR, int] = {}
    results: list[PodSetResult] = []
    borrowing = 0
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
                    fits=False,
                    message=f"couldn't assign flavors to pod set {ps.name}: "
                    f"resource {resource} unavailable in ClusterQueue",
                )
            wanted = {r: totals[r] for r in group.covered_resources if r in totals}
            flavor, level, problems = _pick_flavor(ps, group, wanted, cq=cq, tree=tree, flavors=flavors, taken=taken)
            if flavor is None:
                return Assignment(
                    fits=False, message=f"couldn't assign flavors to pod set {ps.name}: {'; '.join(problems)}"
                )
            borrowing = max(borrowing, level)
            chosen.update({r: flavor for r in wanted})
        for resource, amount in totals.items():
            fr = (chosen[resource], resource)
            taken[fr] = taken.get(fr, 0) + amount
        results.append(
            PodSetResult(
                name=ps.name, count=ps.count, flavors=dict(sorted(chosen.items())), usage=dict(sorted(totals.items()))
            )
        )
    return Assignment(fits=True, pod_sets=tuple(results), borrowing=borrowing)


def _pick_flavor(
    ps: PodSetRequest,
    group: models.ResourceGroup,
    wanted: dict[str, int],
    *,
    cq: models.ClusterQueue,
    tree: QuotaTree,
    flavors: dict[str, models.ResourceFlavor],
    taken: dict[FR, int],
) -> tuple[str | None, int, list[str]]:
    """The flavor of ``group`` for ``wanted`` (SEMANTICS §5.3-§5.7): (flavor, borrowing level, problems)."""
    problems: list[str] = []
    best: tuple[str, int] | None = None
    try_next_when_borrowing = cq.spec.flavor_fungibility.when_can_borrow == "TryNextFlavor"
    for flavor_quotas in group.flavors:
        flavor = flavors.get(flavor_quotas.name)
        if flavor is None:
            problems.append(f"flavor {flavor_quotas.name} not found")
            continue
        mismatch = _eligibility_problem(ps, flavor)
        if mismatch:
            problems.append(mismatch)
            continue
        outcome = _classify(cq.metadata.name, flavor.metadata.name, wanted, tree=tree, taken=taken)
        if not outcome.fits:
            problems.append(outcome.problem)
            continue
        if outcome.borrowing > 0 and try_next_when_borrowing:
            if best is None or outcome.borrowing < best[1]:
                best = (flavor.metadata.name, outcome.borrowing)
            continue
        return flavor.metadata.name, outcome.borrowing, problems
    if best is not None:
        return best[0], best[1], problems
    return None, 0, problems


def _classify(cq: str, flavor: str, wanted: dict[str, int], *, tree: QuotaTree, taken: dict[FR, int]) -> _FlavorOutcome:
    """Fit of ``wanted`` in ``flavor`` of ``cq``; the worst resource decides (SEMANTICS §5.5)."""
    borrowing = 0
    for resource, amount in wanted.items():
        fr = (flavor, resource)
        earlier = taken.get(fr, 0)
        value = earlier + amount
        if not tree.declares(cq, fr):
            return _FlavorOutcome(False, 0, f"flavor {flavor} has no quota for {resource}")
        potential = tree.potential_available(cq, fr)
        if value > potential:
            return _FlavorOutcome(
                False,
                0,
                (
                    f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
                    f"({format_amount(resource, earlier)}) + current podset request ({format_amount(resource, amount)}) "
                    f"> maximum capacity ({format_amount(resource, potential)})"
                ),
            )
        available = tree.available(cq, fr)
        if value > available:
            return _FlavorOutcome(
                False,
                0,
                (
                    f"insufficient unused quota for {resource} in flavor {flavor}, "
                    f"{format_amount(resource, value - available)} more needed"
                ),
            )
        borrowing = max(borrowing, tree.borrowing_level(cq, fr, value))
    return _FlavorOutcome(True, borrowing, "")


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
