"""The admitter's pure core: which pending workloads get quota this cycle.

``decide(state, now_ms=...)`` reads a :class:`projections.cluster.ClusterState`
and returns the cycle's decisions; it has no I/O, no clock and no randomness,
so replay can re-run it at any recorded basis and get the same bytes.

This first cut does Kueue's simple case (SEMANTICS §3-§6 without cohorts):
per ClusterQueue, pending workloads ordered by priority, then creation time, then
UID (Kueue pkg/cache/queue/cluster_queue.go); StrictFIFO stops at the first that
does not fit, BestEffortFIFO goes on; for each pod set, each resource group picks
the first flavor in order that fits the nominal quota (flavorassigner.go);
finished or deleted workloads release their quota first (SEMANTICS §9.3).
"""

from __future__ import annotations

from collections.abc import Iterable

from events import models, types
from events.quantities import format_amount
from projections.cluster import ClusterState, WorkloadState, shift_usage

LOGIC_VERSION = 1
ROLE = "admit"

Usage = dict[str, dict[str, int]]  # flavor -> resource -> amount


class NoFit(Exception):
    """A workload cannot be admitted now; ``reason`` and ``message`` are Kueue's condition fields."""

    def __init__(self, *, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


def decide(state: ClusterState, *, now_ms: int) -> list[types.Decision]:
    """One admission cycle over ``state`` at time ``now_ms`` (ms since the epoch).

    Returns per-workload decisions in a deterministic order: QuotaReleased for
    finished or deleted workloads, then per ClusterQueue (by name) QuotaReserved +
    WorkloadAdmitted for each workload admitted, and WorkloadInadmissible for one
    whose pending message changed. Empty when nothing changes.
    """
    decisions: list[types.Decision] = []
    usage = {cq: {f: dict(r) for f, r in flavors.items()} for cq, flavors in state.usage.items()}
    for wl in _sorted(state.workloads.values()):
        if wl.reservation is not None and wl.gone:
            decisions.append(_release(wl, now_ms=now_ms))
            shift_usage(usage.setdefault(wl.reservation.cluster_queue, {}), wl.reservation, sign=-1)
    queues, unqueued = _queue_pending(state)
    for wl, problem in unqueued:
        decisions.extend(_inadmissible(wl, problem, now_ms=now_ms))
    for cq_name in sorted(queues):
        cq = state.cluster_queues[cq_name]
        cq_usage = usage.setdefault(cq_name, {})
        for wl in queues[cq_name]:
            try:
                assignments = assign_flavors(wl.workload, cq, state=state, usage=cq_usage)
            except NoFit as nofit:
                decisions.extend(_inadmissible(wl, nofit, now_ms=now_ms))
                if cq.spec.queueing_strategy == "StrictFIFO":
                    break
                continue
            reserved = types.QuotaReserved(
                workload=wl.ref, cluster_queue=cq_name, pod_set_assignments=assignments, at_ms=now_ms
            )
            shift_usage(cq_usage, reserved, sign=1)
            decisions.append(reserved)
            decisions.append(types.WorkloadAdmitted(workload=wl.ref, cluster_queue=cq_name, at_ms=now_ms))
    return decisions


def queue_order_key(wl: WorkloadState, state: ClusterState) -> tuple[int, int, str, str]:
    """Kueue's ClusterQueue heap order: higher priority, earlier creation, then UID (then name)."""
    meta = wl.workload.metadata
    return (-priority_of(wl.workload, state), meta.creation_timestamp_ms, meta.uid, wl.workload.key)


def priority_of(workload: models.Workload, state: ClusterState) -> int:
    """Effective priority (SEMANTICS §2.4): ``spec.priority``, else the value of the referenced
    WorkloadPriorityClass, else 0."""
    if workload.spec.priority is not None:
        return workload.spec.priority
    ref = workload.spec.priority_class_ref
    if ref is not None and ref.kind == "WorkloadPriorityClass" and ref.name in state.priority_classes:
        return state.priority_classes[ref.name].value
    return 0


def assign_flavors(
    workload: models.Workload, cq: models.ClusterQueue, *, state: ClusterState, usage: Usage
) -> list[types.PodSetAssignment]:
    """Pick a flavor per resource group for every pod set, within nominal quota.

    ``usage`` is the ClusterQueue's current usage (flavor -> resource -> amount).
    Returns Kueue's podSetAssignments; raises NoFit with Kueue's message
    ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in
    flavor default-flavor, 1 more needed") when some pod set cannot be placed.
    Source: Kueue pkg/scheduler/flavorassigner/flavorassigner.go (SEMANTICS §5.2-§5.5).
    """
    taken: Usage = {}  # what earlier pod sets of this workload already claimed
    assignments = []
    for pod_set in workload.spec.pod_sets:
        totals = {res: per_pod * pod_set.count for res, per_pod in pod_set.requests.items() if per_pod > 0}
        flavors: dict[str, str] = {}
        for resource in totals:
            if resource in flavors:
                continue
            group = _group_covering(cq, resource)
            if group is None:
                raise NoFit(
                    reason="Pending",
                    message=f"couldn't assign flavors to pod set {pod_set.name}: "
                    f"resource {resource} unavailable in ClusterQueue",
                )
            chosen = _first_fitting_flavor(group, totals, state=state, usage=usage, taken=taken, pod_set=pod_set.name)
            flavors.update({res: chosen for res in group.covered_resources if res in totals})
        for resource, amount in totals.items():
            per_flavor = taken.setdefault(flavors[resource], {})
            per_flavor[resource] = per_flavor.get(resource, 0) + amount
        assignments.append(
            types.PodSetAssignment(
                name=pod_set.name,
                flavors=dict(sorted(flavors.items())),
                resource_usage=dict(sorted(totals.items())),
                count=pod_set.count,
            )
        )
    return assignments


def _first_fitting_flavor(
    group: models.ResourceGroup,
    totals: dict[str, int],
    *,
    state: ClusterState,
    usage: Usage,
    taken: Usage,
    pod_set: str,
) -> str:
    problems = []
    for flavor in group.flavors:
        if flavor.name not in state.flavors:
            problems.append(f"flavor {flavor.name} not found")
            continue
        problem = _flavor_problem(flavor, totals, usage=usage, taken=taken)
        if problem is None:
            return flavor.name
        problems.append(problem)
    raise NoFit(reason="Pending", message=f"couldn't assign flavors to pod set {pod_set}: {'; '.join(problems)}")


def _flavor_problem(flavor: models.FlavorQuotas, totals: dict[str, int], *, usage: Usage, taken: Usage) -> str | None:
    """Why ``totals`` do not fit in ``flavor`` (Kueue's wording), or None when they fit."""
    for quota in flavor.resources:
        if quota.name not in totals:
            continue
        earlier = taken.get(flavor.name, {}).get(quota.name, 0)
        want = earlier + totals[quota.name]
        if want > quota.nominal_quota:
            return (
                f"insufficient quota for {quota.name} in flavor {flavor.name}, previously considered podsets "
                f"requests ({format_amount(quota.name, earlier)}) + current podset request "
                f"({format_amount(quota.name, totals[quota.name])}) > maximum capacity "
                f"({format_amount(quota.name, quota.nominal_quota)})"
            )
        used = usage.get(flavor.name, {}).get(quota.name, 0)
        missing = used + want - quota.nominal_quota
        if missing > 0:
            return (
                f"insufficient unused quota for {quota.name} in flavor {flavor.name}, "
                f"{format_amount(quota.name, missing)} more needed"
            )
    return None


def _group_covering(cq: models.ClusterQueue, resource: str) -> models.ResourceGroup | None:
    for group in cq.spec.resource_groups:
        if resource in group.covered_resources:
            return group
    return None


def _queue_pending(state: ClusterState) -> tuple[dict[str, list[WorkloadState]], list[tuple[WorkloadState, NoFit]]]:
    """Pending workloads per ClusterQueue in heap order, and those that cannot queue (and why)."""
    queues: dict[str, list[WorkloadState]] = {}
    unqueued: list[tuple[WorkloadState, NoFit]] = []
    for wl in _sorted(state.workloads.values()):
        if wl.reservation is not None or wl.gone or not wl.workload.spec.active:
            continue
        spec, namespace = wl.workload.spec, wl.workload.metadata.namespace
        ref = spec.priority_class_ref
        if (
            ref is not None
            and spec.priority is None
            and ref.kind == "WorkloadPriorityClass"
            and ref.name not in state.priority_classes
        ):
            unqueued.append((wl, NoFit(reason="Inadmissible", message=f"WorkloadPriorityClass {ref.name} not found")))
            continue
        lq = state.local_queues.get((namespace, spec.queue_name))
        if lq is None:
            unqueued.append((wl, NoFit(reason="Inadmissible", message=f"LocalQueue {spec.queue_name} doesn't exist")))
            continue
        cq = state.cluster_queues.get(lq.spec.cluster_queue)
        if cq is None:
            unqueued.append(
                (wl, NoFit(reason="Inadmissible", message=f"ClusterQueue {lq.spec.cluster_queue} doesn't exist"))
            )
            continue
        if cq.spec.namespace_selector is None:
            unqueued.append(
                (wl, NoFit(reason="Inadmissible", message="Workload namespace doesn't match ClusterQueue selector"))
            )
            continue
        queues.setdefault(cq.metadata.name, []).append(wl)
    for pending in queues.values():
        pending.sort(key=lambda wl: queue_order_key(wl, state))
    return queues, unqueued


def _inadmissible(wl: WorkloadState, nofit: NoFit, *, now_ms: int) -> list[types.Decision]:
    if nofit.message == wl.pending_message:
        return []  # recorded when it changes, not every cycle
    return [types.WorkloadInadmissible(workload=wl.ref, reason=nofit.reason, message=nofit.message, at_ms=now_ms)]


def _release(wl: WorkloadState, *, now_ms: int) -> types.QuotaReleased:
    assert wl.reservation is not None
    if wl.finished is not None:
        reason, cause = "Finished", wl.finished_seq
    else:
        reason, cause = "Deleted", wl.deleted_seq
    return types.QuotaReleased(
        workload=wl.ref, cluster_queue=wl.reservation.cluster_queue, reason=reason, cause_seq=cause, at_ms=now_ms
    )


def _sorted(workloads: Iterable[WorkloadState]) -> list[WorkloadState]:
    return sorted(workloads, key=lambda wl: wl.workload.key)
