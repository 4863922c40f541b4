"""A readable timeline of the log, for people: what was submitted, admitted, why waiting.

``kueue-es demo`` prints it live; it is also a small example of an outside tool
that folds the same events every service folds (:func:`describe` is pure).
"""

from __future__ import annotations

from kueue_es.events import models, tas, types
from kueue_es.events.quantities import format_amount
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling import dra, lifecycle

STARTED_REASONS = frozenset({"Started", "Recovered", "WaitForRecovery"})
"""PodsReady reasons only a job whose pods started reports (Kueue's generatePodsReadyCondition)."""


class JobStarts:
    """The workloads whose admission a timeline saw and whose job it has not seen started since, so an
    eviction's stop can say the job never ran (the dispatcher then writes nothing to it). Feed it every
    event after describing it (:meth:`note`)."""

    def __init__(self) -> None:
        self.unstarted: set[str] = set()

    def note(self, event: types.Event) -> None:
        """Take one event: an admission adds its workload, its job's start or stop takes it out, and so do pods that
        started (a start that answers no decision leaves no dispatch result: a job adopting its admitted prebuilt
        Workload, a job suspended by hand started again)."""
        match event:
            case types.QuotaReserved() | types.WorkloadAdmitted():
                self.unstarted.add(event.workload.key)
            case types.DispatchApplied() if "-remote-" not in event.action:
                self.unstarted.discard(event.workload.key)
            case types.WorkloadPodsReady() if event.ready or event.reason in STARTED_REASONS:
                self.unstarted.discard(event.workload.key)
            case types.DispatchBatchApplied():
                for applied in event.applied():
                    self.note(applied)


def describe(event: types.Event, before: ClusterState, starts: JobStarts | None = None) -> tuple[str, str] | None:
    """``(verb, text)`` for an event, given the state folded up to just before it; None to skip.

    ``before`` tells a first submission from an update and lets a release name its queue; ``starts`` (fed
    every event after this) tells a stop of a job that never started from one that suspends it again.
    """
    match event:
        case types.WorkloadObserved(workload=wl):
            if wl.key in before.workloads:
                return None
            return "submitted", f"{wl.key} to queue {wl.spec.queue_name}: {_shape(wl, before)}"
        case types.QuotaReserved():
            flavors = sorted({f for a in event.pod_set_assignments for f in a.flavors.values()})
            usage = ", ".join(
                f"{r} {format_amount(r, v)}" for a in event.pod_set_assignments for r, v in a.resource_usage.items()
            )
            cq = before.cluster_queues.get(event.cluster_queue)
            checks = lifecycle.required_checks(cq, flavors) if cq is not None else []
            verb = "reserved" if checks else "admitted"  # with checks, admitted once they are all Ready
            waits = f", waiting for admission checks {', '.join(checks)}" if checks else ""
            return verb, (
                f"{event.workload.key} in ClusterQueue {event.cluster_queue}, flavor {', '.join(flavors)} ({usage})"
                f"{_borrowing(event, cq, before)}{waits}"
            )
        case types.WorkloadAdmitted():
            known = before.workloads.get(event.workload.key)
            cq = before.cluster_queues.get(event.cluster_queue)
            if known is not None and types.reserves(event, known.reservation is not None):
                return describe(types.reservation_of(event), before)  # reserved and admitted by this one message
            if known is None or known.reservation is None or cq is None:
                return None
            if not lifecycle.required_checks(cq, lifecycle.assigned_flavors(known.reservation)):
                return None  # admitted with its reservation, said there
            return "admitted", f"{event.workload.key}: every admission check is Ready"
        case types.AdmissionCheckStateChanged():
            detail = f": {event.message}" if event.message else ""
            return "check", f"{event.workload.key}: {event.check} is {event.state}{detail}"
        case types.WorkloadPodsReady():
            return ("ready" if event.ready else "not ready"), f"{event.workload.key} pods ({event.reason})"
        case types.WorkloadReclaimablePods():
            listed = ", ".join(f"{p.count} of pod set {p.name}" for p in event.reclaimable_pods) or "none"
            return "reclaimed", f"{event.workload.key}: quota no longer needed for {listed}"
        case types.WorkloadRequeued():
            return "requeued", f"{event.workload.key}: {event.message}"
        case types.WorkloadDeactivated():
            return "deactivated", f"{event.workload.key} ({event.reason}): {event.message}"
        case types.WorkloadInadmissible():
            return "waiting", f"{event.workload.key}: {event.message}"
        case types.TopologyAssigned():
            return "placed", f"{event.workload.key}: {_placement(event, before)}"
        case types.DispatchBatchApplied():  # one record's results: one line, each entry as its own
            lines = [describe(applied, before, starts) for applied in event.applied()]
            return "dispatched", "; ".join(line[1] for line in lines if line is not None)
        case types.DispatchApplied(action="Evict") if starts is not None and event.workload.key in starts.unstarted:
            return "suspended", f"{event.target} of {event.workload.key} was never started: it stays suspended"
        case types.DispatchApplied(action="Evict"):
            return "suspended", f"{event.target} suspended for {event.workload.key} (template restored)"
        case types.DispatchApplied():
            selector = f" with nodeSelector {event.node_selector}" if event.node_selector else ""
            return "started", f"{event.target} unsuspended for {event.workload.key}{selector}"
        case types.DispatchFailed():
            return "failed", f"could not start {event.workload.key}: {event.status} {event.reason} {event.message}"
        case types.WorkloadFinished():
            if event.workload.key not in before.workloads:
                return None
            return "finished", f"{event.workload.key} ({event.reason})"
        case types.PreemptionRequired():
            victims = ", ".join(t.workload.key for t in event.targets)
            return "nominated", f"{event.workload.key} needs the preemption of {victims or 'nothing'}"
        case types.EvictionRequested(preemptor=types.WorkloadRef() as preemptor):
            return "evicted", (
                f"{event.workload.key} preempted ({event.preemption_reason}) for {preemptor.key} "
                f"in ClusterQueue {event.cluster_queue}"
            )
        case types.EvictionRequested():
            return "evicted", f"{event.workload.key} evicted ({event.reason}): {event.message}"
        case types.WorkloadEvictionObserved():
            return "evicted", f"{event.workload.key}: Evicted written by someone else ({event.reason}): {event.message}"
        case types.WorkloadStopped():
            return "stopped", f"{event.workload.key} no longer runs ({event.reason})"
        case types.QuotaReleased():
            return "released", f"quota of {event.workload.key} back to ClusterQueue {event.cluster_queue}"
        case types.ObjectRejected():
            where = f" {event.field}:" if event.field else ""
            name = f"{event.namespace}/{event.name}" if event.namespace else event.name
            return "rejected", f"{event.kind} {name}:{where} {event.problem}"
        case (
            types.ResourceFlavorObserved()
            | types.ClusterQueueObserved()
            | types.LocalQueueObserved()
            | types.CohortObserved()
            | types.WorkloadPriorityClassObserved()
        ):
            obj = getattr(event, next(f for f in event.__struct_fields__))
            if models.is_terminating(obj.metadata):  # deleted, held by Kueue's finalizer while in use
                return "deleting", f"{_object_name(event)} (held by its finalizer while in use)"
            return "applied", _object_name(event)
        case types.ObjectDeleted():
            return "deleted", f"{event.kind} {event.namespace + '/' if event.namespace else ''}{event.name}"
    return None


def _shape(wl: models.Workload, before: ClusterState) -> str:
    """Each pod set's pods and per-pod requests, with the DRA devices it is charged (the extended resources
    they replace left out, :func:`kueue_es.scheduling.dra.charge_in`) as the objects ``before`` has them."""
    devices = dra.charge_in(before, wl)
    parts = []
    for ps in wl.spec.pod_sets:
        requests = dra.apply(dict(ps.requests), ps, devices) if not devices.problem else ps.requests
        req = ", ".join(f"{r} {format_amount(r, v)}" for r, v in requests.items())
        parts.append(f"{ps.count} pods x ({req})")
    return "; ".join(parts)


def _object_name(event: types.Fact) -> str:
    obj = getattr(event, next(f for f in event.__struct_fields__))
    meta = obj.metadata
    name = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
    return f"{type(obj).__name__} {name}"


def _placement(event: types.TopologyAssigned, before: ClusterState) -> str:
    """Where each pod set's pods go (lowest-level domains with their pod counts) and, when it replaces an
    earlier placement (a failed node's pods placed again, SEMANTICS-ADVANCED A.13), the domains it leaves."""
    known = before.workloads.get(event.workload.key)
    earlier = (known.topology or {}) if known is not None else {}
    parts = []
    for name, assignment in sorted(event.assignments.items()):
        now = {d.values[-1]: d.count for d in tas.decode(assignment).domains}
        text = f"pod set {name} on " + ", ".join(
            f"{domain} ({count} pod{'' if count == 1 else 's'})" for domain, count in sorted(now.items())
        )
        if name in earlier:
            left = sorted(set(d.values[-1] for d in tas.decode(earlier[name]).domains) - set(now))
            if left:
                text += f" (no longer on {', '.join(left)})"
        parts.append(text)
    return "; ".join(parts)


def _borrowing(reservation: types.QuotaReserved, cq: models.ClusterQueue | None, before: ClusterState) -> str:
    """``, borrowing cpu 1 from cohort team`` when the reservation takes its ClusterQueue above its nominal quota
    (what ``status.flavorsUsage[].resources[].borrowed`` grows by), else ``""``."""
    if cq is None or not cq.spec.cohort_name:
        return ""
    tree = quota.cached(before)
    if reservation.cluster_queue not in tree.cluster_queues:
        return ""
    taken = []
    for fr, amount in sorted(quota.reservation_usage(reservation).items()):
        used, nominal = tree.usage(reservation.cluster_queue, fr), tree.nominal(reservation.cluster_queue, fr)
        borrowed = max(0, used + amount - nominal) - max(0, used - nominal)
        if borrowed > 0:
            taken.append(f"{fr[1]} {format_amount(fr[1], borrowed)}")
    return f", borrowing {', '.join(taken)} from cohort {cq.spec.cohort_name}" if taken else ""
