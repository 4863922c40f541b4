"""Why a workload waits, and what happened to it: ``kueue-es explain``'s pure core.

Two parts, both pure (no I/O, no clock):

- :class:`StoryCollector` is fed every event a fold accepts (with its log sequence and the state just
  before it) and keeps the lines of one workload's story (and of the rejections of objects of its name,
  ObjectRejected: a Job no Workload could be made for): submitted, each change of its pending reason
  with Kueue's message (Kueue's QuotaReserved=False condition, SEMANTICS §3.5), nominations and
  preemptions by it and of it (Kueue's Preempted condition and Evicted events, §7), quota reserved with
  flavors and topology, admission checks, admitted, the dispatcher's start, eviction, requeue, finish,
  deletion. A workload is named as ``namespace/name`` of the Workload, or of the Job (JobSet, Pod...)
  that owns it: Kueue names a Job's Workload ``job-<name>-<hash>`` (jobframework GetWorkloadNameForOwner).
- :func:`needs` says, for a workload still pending in a folded state, what would have to change for it
  to fit: per flavor of its ClusterQueue that covers what it asks, how much more free quota it needs,
  what its cohort could lend now and which limit stops it, what lower-priority workloads of its
  ClusterQueue hold that preemption (``withinClusterQueue``) could take, what borrowers in its cohort
  hold above their nominal quota that reclaim (``reclaimWithinCohort``) could take, by the rule that
  applies: classical preemption's candidates (:func:`kueue_es.scheduling.preemption.classical_candidates`:
  a ClusterQueue that borrows to fit reclaims only what ``borrowWithinCohort`` allows) or, with fair
  sharing, dominant resource shares and the strategies
  (:func:`kueue_es.scheduling.fairsharing.fair_view`); or what else blocks
  it (a stopped queue, a missing object, a StrictFIFO head, a backoff, admission checks). The quota
  figures come from the admitter's own quota tree (:mod:`kueue_es.projections.quota`, Kueue's
  resource_node.go / clusterqueue_snapshot.go), the requests from the admitter's pod set requests
  (:func:`kueue_es.scheduling.queues.pod_set_requests`, SEMANTICS §2.3), the preemption policies from
  :func:`kueue_es.scheduling.preemption.satisfies` (Kueue's preemption_policy.go, §7.2).

Priorities: a workload's ``priority`` is its base priority (``spec.priority`` or its
WorkloadPriorityClass's value, what Kueue's visibility API shows); ``effective_priority`` the one the
admitter and the preemptor decide with, the ``kueue.x-k8s.io/priority-boost`` annotation added under
the feature gate PriorityBoost (Kueue's pkg/util/priority EffectivePriority). The rules here (who
preemption could take) use the effective one, and the texts show both when they differ
(:func:`priority_text`).

Amounts are integers as the fold keeps them (CPU millicores, memory bytes); times ms since the epoch.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from kueue_es.events import job_owners, manifests, models, tas, types
from kueue_es.events.quantities import format_amount
from kueue_es.projections import kueue_metrics, quota
from kueue_es.projections.cluster import (
    ON_HOLD_MESSAGE,
    ON_HOLD_REASON,
    PRIORITY_BOOST_ANNOTATION,
    PRIORITY_BOOST_GATE,
    ClusterState,
    WorkloadState,
    effective_priority,
    priority_of,
    queue_order_ts,
)
from kueue_es.scheduling import (
    concurrent_admission,
    dra,
    fairsharing,
    lifecycle,
    preemption,
    provisioning,
    queues,
    readiness,
    slices,
    visibility,
)

_INACTIVE_SAID_ELSEWHERE = frozenset({"Stopped", "FlavorNotFound", "AdmissionCheckNotFound"})
"""Reasons a ClusterQueue is inactive that :func:`needs` says in its own words (stopPolicy, a missing flavor, a
missing admission check)."""

FINISH_OUTCOMES: dict[str, str] = {
    "Succeeded": "succeeded",  # kueue.WorkloadFinishedReasonSucceeded: its job succeeded
    "Failed": "failed",  # kueue.WorkloadFinishedReasonFailed: its job failed
    # jobframework reconciler.go FailedToStartFinishedReason: the job could not be started
    "FailedToStart": "failed to start",
    # kueue.WorkloadFinishedReasonOutOfSync: a prebuilt Workload its job no longer matches
    "OutOfSync": "ended out of sync with its job",
    # kueue.WorkloadFinishedReasonOwnerNotFound: its owner was deleted (the Workload left orphaned)
    "OwnerNotFound": "orphaned: its owner was deleted",
    # kueue.WorkloadSliceReplaced: an elastic job's slice a newer one replaced
    "WorkloadSliceReplaced": "replaced by a new workload slice",
}
"""What each reason of Kueue's Finished condition (status True) says happened to the workload
(apis/kueue/v1beta2/workload_types.go WorkloadFinishedReason*, WorkloadSliceReplaced)."""


def finish_outcome(reason: str) -> str:
    """A Finished condition's ``reason`` in words (:data:`FINISH_OUTCOMES`); ``"finished"`` for another reason
    (a standalone Workload's user writes its own), which says nothing about success."""
    return FINISH_OUTCOMES.get(reason, "finished")


_STARTED = frozenset({"Started", "Recovered", "WaitForRecovery"})
"""PodsReady reasons only a job whose pods started reports (Kueue's generatePodsReadyCondition)."""


@dataclass(frozen=True, kw_only=True)
class StoryLine:
    """One step of a workload's story: its log sequence, its time (ms since the epoch; ``approximate``
    when the event carries none and the time the log stored its message stands in, or, where that is not
    known, the latest time seen before it), a short verb, the text for people and the facts for tools
    (``detail``)."""

    seq: int
    time_ms: int
    what: str
    text: str
    approximate: bool = False
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class StoryCollector:
    """Collects the story of workload ``namespace/name`` (or of the workloads a job of that name owns).

    Feed it with :meth:`observe` (a :data:`kueue_es.logsource.Observer`), telling it each message's stored
    time first (:meth:`stored_at`). ``keys`` are the workload keys found, in the order first seen; ``lines``
    every step of each, in log order."""

    namespace: str
    name: str
    keys: list[str] = field(default_factory=list)
    owners: dict[str, str] = field(default_factory=dict)  # workload key -> "Kind name" of its owner
    lines: dict[str, list[StoryLine]] = field(default_factory=dict)
    now_ms: int = 0  # the latest time seen in the log
    message_ms: int = 0  # when the log stored the message being observed (ms since the epoch; 0: not known)
    # key -> the latest WorkloadDeactivated (Kueue's reason and message for the deactivated header)
    deactivations: dict[str, types.WorkloadDeactivated] = field(default_factory=dict)
    # (kind, namespace, name) of an object of this name refused (a Job whose Workload could not be made, say) ->
    # its story: each ObjectRejected ("rejected") and its deletion ("deleted"), in log order
    rejections: dict[tuple[str, str, str], list[StoryLine]] = field(default_factory=dict)
    # (kind, namespace, name) -> the latest ObjectRejected of it (its field and problem)
    last_rejections: dict[tuple[str, str, str], types.ObjectRejected] = field(default_factory=dict)
    _pending: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (reason, message) last told
    _repeats: dict[str, int] = field(default_factory=dict)

    def stored_at(self, time_ms: int) -> None:
        """The time (ms since the epoch; 0: not known) JetStream stored the message whose events are observed
        next (``LogMessage.time_ms``): the time of those that carry none of their own, such as an
        ObjectDeleted or a dispatch result (shown approximate)."""
        self.message_ms = time_ms
        if time_ms > self.now_ms:
            self.now_ms = time_ms

    def _line(self, seq: int, event: types.Event, what: str, text: str, **detail: Any) -> StoryLine:
        own = _time_of(event)
        return StoryLine(
            seq=seq,
            time_ms=own or self.message_ms or self.now_ms,
            what=what,
            text=text,
            approximate=not own,
            detail=detail,
        )

    def _add(self, key: str, seq: int, event: types.Event, what: str, text: str, **detail: Any) -> None:
        self.lines.setdefault(key, []).append(self._line(seq, event, what, text, **detail))

    def _rejected(self, seq: int, event: types.ObjectRejected) -> None:
        """An object of this name refused (kueue-es made nothing of it): a line of its rejection story."""
        identity = (event.kind, event.namespace, event.name)
        where = f"field {event.field}: " if event.field else ""
        self.last_rejections[identity] = event
        self.rejections.setdefault(identity, []).append(
            self._line(
                seq,
                event,
                "rejected",
                f"{event.kind} {event.namespace}/{event.name}: {where}{event.problem}",
                kind=event.kind,
                field=event.field,
                problem=event.problem,
            )
        )

    def _started_since_admitted(self, key: str) -> bool | None:
        """Whether the story of ``key`` shows its job started since its latest admission; None when it shows no
        admission (a story begun from a snapshot, say)."""
        for line in reversed(self.lines.get(key, [])):
            if line.what in ("started", "pods ready") or (line.what == "pods not ready" and line.text in _STARTED):
                return True  # pods that started: also a start that answers no decision (an adopted prebuilt)
            if line.what == "admitted":
                return False
        return None

    def ended_in_deletion(self, key: str) -> bool:
        """The Workload of ``key`` was deleted and not made again since (the fold may have forgotten it): its story
        has a deletion with no submission after it (its quota's release and its job's stop may follow it)."""
        for line in reversed(self.lines.get(key, [])):
            if line.what == "deleted":
                return True
            if line.what == "submitted":
                return False
        return False

    def _mine(self, key: str) -> bool:
        return key in self.lines

    def observe(self, seq: int, event: types.Event, before: ClusterState) -> None:
        """Take one accepted event (sequence ``seq``; ``before``: the state just before it is applied)."""
        if isinstance(event, types.DispatchBatchApplied):  # one record's results: each as its own
            for applied in event.applied():
                self.observe(seq, applied, before)
            return
        moment = _time_of(event)
        if moment > self.now_ms:
            self.now_ms = moment
        if isinstance(event, types.WorkloadObserved):
            self._observed(seq, event, before)
            return
        if isinstance(event, types.ObjectRejected):
            if (event.namespace, event.name) == (self.namespace, self.name):
                self._rejected(seq, event)
            return
        if isinstance(event, types.ObjectDeleted):
            identity = (event.kind, event.namespace, event.name)
            if identity in self.rejections:
                self.rejections[identity].append(self._line(seq, event, "deleted", f"the {event.kind} was deleted"))
            key = f"{event.namespace}/{event.name}"
            if event.kind == "Workload" and self._mine(key):
                self._add(key, seq, event, "deleted", "the Workload was deleted")
            return
        ref = getattr(event, "workload", None)
        if isinstance(event, types.EvictionRequested) and event.preemptor is not None:
            if self._mine(event.preemptor.key):
                self._add(
                    event.preemptor.key,
                    seq,
                    event,
                    "preempting",
                    f"evicts {event.workload.key} of ClusterQueue {event.cluster_queue}"
                    f" ({event.preemption_reason or event.reason}): {event.message}",
                    victim=event.workload.key,
                    victimClusterQueue=event.cluster_queue,
                    preemptionReason=event.preemption_reason,
                    message=event.message,
                )
        if not isinstance(ref, types.WorkloadRef) or not self._mine(ref.key):
            return
        self._workload_event(ref.key, seq, event, before)

    def start_from(self, state: ClusterState, seq: int) -> None:
        """Begin with the workloads of this name already in ``state``, a snapshot's fold at ``seq`` (the log
        before it is not read): a line each saying where it stood there."""
        for key, wl in state.workloads.items():
            meta = wl.workload.metadata
            owner = job_owners.job_of(wl.workload)
            if meta.namespace != self.namespace or (meta.name != self.name and not self._owned(wl.workload)):
                continue
            if key not in self.keys:
                self.keys.append(key)
            if owner is not None:
                self.owners[key] = f"{owner.kind} {owner.name}"
            if wl.finished is not None:
                where = "finished"
            elif wl.admitted:
                where = f"admitted in ClusterQueue {wl.reservation.cluster_queue if wl.reservation else '?'}"
            elif wl.reservation is not None:
                where = f"holding quota in ClusterQueue {wl.reservation.cluster_queue}"
            else:
                where = f"pending ({wl.pending_reason}: {wl.pending_message})" if wl.pending_reason else "pending"
            self.lines.setdefault(key, []).append(
                StoryLine(
                    seq=seq,
                    time_ms=meta.creation_timestamp_ms,
                    what="snapshot",
                    text=f"the log before #{seq} is read from a snapshot: the Workload was submitted then and was {where}",
                    approximate=True,
                )
            )

    def _owned(self, wl: models.Workload) -> bool:
        """Whether ``wl`` is the workload of the job named: its job (:func:`~kueue_es.events.job_owners.job_of`:
        a serving group's StatefulSet or LeaderWorkerSet) or the log's owner (such a group's first pod)."""
        return any(ref is not None and ref.name == self.name for ref in (job_owners.job_of(wl), wl.owner))

    def _observed(self, seq: int, event: types.WorkloadObserved, before: ClusterState) -> None:
        wl = event.workload
        meta = wl.metadata
        if meta.namespace != self.namespace:
            return
        if meta.name != self.name and not self._owned(wl):
            return
        key = wl.key
        known = before.workloads.get(key)
        job = job_owners.job_of(wl)
        if key not in self.lines or known is None:
            if key not in self.keys:
                self.keys.append(key)
            if job is not None:
                self.owners[key] = f"{job.kind} {job.name}"
            self.lines.setdefault(key, [])
            owner = f" for {job.kind} {meta.namespace}/{job.name}" if job is not None else ""
            base, effective = priority_of(wl, before), effective_priority(wl, before)
            self.lines[key].append(
                StoryLine(
                    seq=seq,
                    time_ms=meta.creation_timestamp_ms or self.message_ms or self.now_ms,
                    what="submitted",
                    text=f"Workload {key}{owner} to LocalQueue {wl.spec.queue_name},"
                    f" {priority_text(base, effective)}: {shape(wl)}",
                    approximate=not meta.creation_timestamp_ms,
                    detail={
                        "localQueue": wl.spec.queue_name,
                        "priority": base,
                        "effectivePriority": effective,
                        "shape": shape(wl),
                    },
                )
            )
            return
        old = known.workload.spec
        new = wl.spec
        changes = []
        if old.active != new.active:
            changes.append("spec.active " + ("true (reactivated)" if new.active else "false (deactivated)"))
        if old.queue_name != new.queue_name:
            changes.append(f"LocalQueue {old.queue_name} -> {new.queue_name}")
        was, now = priority_of(known.workload, before), priority_of(wl, before)
        if was != now:  # not a class dropped for the same value (a what-if's override to it): nothing changed
            changes.append(f"priority {was} -> {now}")
        changes.extend(_boost_change(known.workload, wl, before))
        if old.pod_sets != new.pod_sets:
            changes.append(f"pod sets now {shape(wl)}")
        if changes:
            self._add(key, seq, event, "updated", "; ".join(changes))

    def _workload_event(self, key: str, seq: int, event: types.Event, before: ClusterState) -> None:
        match event:
            case types.WorkloadInadmissible():
                told = (event.reason, event.message)
                if self._pending.get(key) == told:
                    self._repeats[key] = self._repeats.get(key, 0) + 1
                    return
                self._pending[key] = told
                parked = " (parked until a requeue trigger)" if event.parked else ""
                self._add(
                    key,
                    seq,
                    event,
                    "pending",
                    f"{event.reason}: {event.message}{parked}",
                    reason=event.reason,
                    message=event.message,
                    parked=event.parked,
                )
            case types.PreemptionRequired():
                targets = ", ".join(f"{t.workload.key} ({t.reason})" for t in event.targets) or "none"
                self._add(
                    key,
                    seq,
                    event,
                    "nominated",
                    f"in ClusterQueue {event.cluster_queue} with flavors {_flavors(event.pod_set_assignments)};"
                    f" needs the preemption of {targets}: {event.message}",
                    clusterQueue=event.cluster_queue,
                    targets=[{"workload": t.workload.key, "reason": t.reason} for t in event.targets],
                    message=event.message,
                )
            case types.PreemptionIssued():
                targets = ", ".join(f"{t.workload.key} ({t.reason})" for t in event.targets) or "none"
                self._add(
                    key,
                    seq,
                    event,
                    "preemption",
                    f"the preemptor evicts {targets}" + (f": {event.message}" if event.message else ""),
                    targets=[{"workload": t.workload.key, "reason": t.reason} for t in event.targets],
                )
            case types.QuotaReserved():
                self._pending.pop(key, None)
                usage = _usage(event.pod_set_assignments)
                self._add(
                    key,
                    seq,
                    event,
                    "quota reserved",
                    f"in ClusterQueue {event.cluster_queue}, flavors {_flavors(event.pod_set_assignments)} ({usage})",
                    clusterQueue=event.cluster_queue,
                    podSetAssignments=[
                        {"name": a.name, "count": a.count, "flavors": a.flavors, "resourceUsage": a.resource_usage}
                        for a in event.pod_set_assignments
                    ],
                )
            case types.TopologyAssigned():
                parts = []
                for pod_set, assignment in sorted(event.assignments.items()):
                    try:
                        counts = tas.decode(assignment).counts_by_domain()
                    except ValueError:
                        counts = {}
                    where = ", ".join(f"{domain}: {count}" for domain, count in sorted(counts.items()))
                    parts.append(f"{pod_set} on {'/'.join(assignment.levels)} [{where}]")
                self._add(key, seq, event, "topology", "; ".join(parts))
            case types.WorkloadAdmitted():
                known = before.workloads.get(key)
                if known is not None and types.reserves(event, known.reservation is not None):
                    # reserved and admitted by one message (issue 18): the reservation's line first
                    self._workload_event(key, seq, types.reservation_of(event), before)
                self._add(key, seq, event, "admitted", f"in ClusterQueue {event.cluster_queue}")
            case types.AdmissionCheckStateChanged():
                detail = f": {event.message}" if event.message else ""
                self._add(
                    key,
                    seq,
                    event,
                    "check",
                    f"admission check {event.check} is {event.state}{detail}{_check_story(event)}",
                    check=event.check,
                )
            case types.DispatchApplied(action="Evict") if self._started_since_admitted(key) is False:
                # admitted, then evicted before the dispatcher reached its start: nothing was written
                self._add(key, seq, event, "suspended", f"{event.target} was never started: it stays suspended")
            case types.DispatchApplied(action="Evict"):
                self._add(key, seq, event, "suspended", f"{event.target} suspended again (its template restored)")
            case types.DispatchApplied() if "-remote-" in event.action:
                # the MultiKueue edge's write on a worker cluster (docs/multikueue.md), not a local start
                self._add(key, seq, event, "remote", f"{event.action} on {event.target}")
            case types.DispatchApplied():
                selector = f" with nodeSelector {event.node_selector}" if event.node_selector else ""
                self._add(key, seq, event, "started", f"{event.target or 'the job'} unsuspended{selector}")
            case types.DispatchFailed():
                retry = " (will retry)" if event.retryable else ""
                self._add(
                    key,
                    seq,
                    event,
                    "dispatch failed",
                    f"{event.action}: {event.status} {event.reason} {event.message}{retry}".rstrip(),
                )
            case types.EvictionRequested():
                by = f" by {event.preemptor.key}" if event.preemptor is not None else ""
                why = f"{event.reason}" + (f"/{event.preemption_reason}" if event.preemption_reason else "")
                self._add(
                    key,
                    seq,
                    event,
                    "evicted",
                    f"{why}{by} in ClusterQueue {event.cluster_queue}: {event.message}",
                    reason=event.reason,
                    preemptionReason=event.preemption_reason,
                    preemptor=event.preemptor.key if event.preemptor is not None else None,
                    message=event.message,
                )
            case types.WorkloadEvictionObserved():
                self._add(
                    key,
                    seq,
                    event,
                    "evicted by someone else",
                    f"Evicted=True written on the Workload ({event.reason}): {event.message}",
                    reason=event.reason,
                    message=event.message,
                )
            case types.WorkloadStopped():
                self._add(key, seq, event, "stopped", f"its pods stopped ({event.reason})")
            case types.QuotaReleased():
                known = before.workloads.get(key)
                implied = kueue_metrics.implied_eviction(known, event) if known is not None else None
                if implied is not None:
                    # evicted and released by one message (a reservation deactivated by hand): the eviction first
                    self._workload_event(key, seq, implied, before)
                self._add(key, seq, event, "released", f"quota given back to {event.cluster_queue} ({event.reason})")
            case types.WorkloadRequeued():
                self._add(key, seq, event, "requeued", f"{event.reason}: {event.message}")
            case types.WorkloadDeactivated():
                self.deactivations[key] = event
                self._add(key, seq, event, "deactivated", f"{event.reason}: {event.message}")
            case types.WorkloadPodsReady():
                self._add(key, seq, event, "pods ready" if event.ready else "pods not ready", event.reason or "")
            case types.WorkloadReclaimablePods():
                listed = ", ".join(f"{p.name}: {p.count}" for p in event.reclaimable_pods) or "none"
                self._add(key, seq, event, "reclaimable pods", f"quota no longer needed for pods ({listed})")
            case types.WorkersNominated():
                step = f" (step {event.step})" if event.step else ""
                self._add(
                    key,
                    seq,
                    event,
                    "workers nominated",
                    f"MultiKueue check {event.check}: copies go to {', '.join(event.clusters)}{step}",
                    check=event.check,
                    clusters=list(event.clusters),
                )
            case types.RemoteWorkloadObserved():
                state = "gone" if not event.present else _remote_state(event)
                self._add(key, seq, event, "remote copy", f"on {event.cluster}: {state}", cluster=event.cluster)
            case types.RemoteAdmissionChosen():
                self._add(
                    key,
                    seq,
                    event,
                    "worker chosen",
                    f"{event.cluster}: its copy was admitted first (check {event.check} Ready: {event.message})",
                    cluster=event.cluster,
                )
            case types.MultiKueueCheckRetry() | types.MultiKueueCheckRejected():
                state = "Retry" if isinstance(event, types.MultiKueueCheckRetry) else "Rejected"
                self._add(key, seq, event, "check", f"MultiKueue check {event.check} is {state}: {event.message}")
            case types.WorkloadFinished():
                outcome = finish_outcome(event.reason)
                message = f": {event.message}" if event.message else ""
                self._add(
                    key,
                    seq,
                    event,
                    "finished",
                    f"{outcome} ({event.reason}){message}",
                    reason=event.reason,
                    outcome=outcome,
                )

    def repeats(self, key: str) -> int:
        """How many pending outcomes repeated the reason and message already told (not shown as lines)."""
        return self._repeats.get(key, 0)


def _remote_state(copy: types.RemoteWorkloadObserved) -> str:
    """A remote copy's state in words: finished, evicted, admitted (when), reserving or pending."""
    if copy.finished:
        return f"finished ({copy.finish_reason})"
    if copy.evicted:
        return f"evicted ({copy.eviction_reason})"
    if copy.admitted:
        return f"admitted at {manifests.format_time_ms(copy.admitted_at_ms)}"
    return "quota reserved" if copy.quota_reserved else "pending"


def _time_of(event: types.Event) -> int:
    if isinstance(event, types.DecisionRecord):
        return event.now_ms
    value = getattr(event, "at_ms", 0)
    return value if isinstance(value, int) else 0


def shape(wl: models.Workload) -> str:
    """``3 pods x (cpu 1, memory 200Mi)`` per pod set, ``;``-separated."""
    parts = []
    for ps in wl.spec.pod_sets:
        req = ", ".join(f"{r} {format_amount(r, v)}" for r, v in sorted(ps.requests.items()))
        parts.append(f"{ps.count} pods x ({req})")
    return "; ".join(parts)


def _flavors(assignments: list[types.PodSetAssignment]) -> str:
    return ", ".join(sorted({f for a in assignments for f in a.flavors.values()})) or "none"


def _usage(assignments: list[types.PodSetAssignment]) -> str:
    total: dict[str, int] = {}
    for a in assignments:
        for resource, amount in a.resource_usage.items():
            total[resource] = total.get(resource, 0) + amount
    return ", ".join(f"{r} {format_amount(r, v)}" for r, v in sorted(total.items()))


def priority_text(base: int, effective: int) -> str:
    """A workload's priority as the texts give it: ``priority 5``, or, when its priority boost (gate
    PriorityBoost) moves the effective priority the deciders use away from the base one, that first
    and both parts: ``priority 105 (5, boost +100)``."""
    if effective == base:
        return f"priority {base}"
    return f"priority {effective} ({base}, boost {effective - base:+d})"


def _boost_change(old: models.Workload, new: models.Workload, before: ClusterState) -> list[str]:
    """The story's words for a change of the ``kueue.x-k8s.io/priority-boost`` annotation from ``old`` to
    ``new`` ([] when it did not change): the effective priority before and after while the gate
    PriorityBoost is on (Kueue requeues the workload, cluster_queue.go priorityBoostAnnotationChanged),
    else that the boost does not count."""
    was = old.metadata.annotations.get(PRIORITY_BOOST_ANNOTATION, "")
    now = new.metadata.annotations.get(PRIORITY_BOOST_ANNOTATION, "")
    if was == now:
        return []
    if not before.configuration.feature_gates.get(PRIORITY_BOOST_GATE, False):
        return [
            f"priority-boost annotation {was or '(none)'} -> {now or '(none)'} (not counted: gate PriorityBoost off)"
        ]
    was_effective, now_effective = effective_priority(old, before), effective_priority(new, before)
    was_boost, now_boost = was_effective - priority_of(old, before), now_effective - priority_of(new, before)
    return [f"priority boost {was_boost:+d} -> {now_boost:+d}: effective priority {was_effective} -> {now_effective}"]


# --- what it would take ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Holder:
    """A workload holding quota that preemption or reclaim could take: its key, ClusterQueue, base and
    effective priority (the one preemption compares, its priority boost included) and the amount of
    the resource in question it holds."""

    key: str
    cluster_queue: str
    priority: int
    amount: int
    reason: str = ""  # the preemption reason Kueue would give (InCohortReclamation...), for reclaim
    effective_priority: int = 0


@dataclass(frozen=True, kw_only=True)
class ResourceNeed:
    """One resource of a workload against one flavor of its ClusterQueue (amounts as the fold keeps them).

    ``asks`` the workload's total; ``nominal`` and ``used`` the ClusterQueue's; ``available`` what it may
    take now, borrowing included (the admitter's figure); ``short`` = asks - available when positive;
    ``lendable`` what the cohort could lend now beyond the ClusterQueue's own free nominal quota;
    ``potential`` the most it could ever hold (nominal + what the cohort could lend, within its
    borrowingLimit); ``borrowing_limit`` None: unlimited; ``preemptible``: lower-priority workloads of the
    ClusterQueue that its ``withinClusterQueue`` policy lets it preempt; ``reclaimable``: workloads of other
    ClusterQueues of the cohort, over their nominal quota, that Kueue's preemption would consider taking
    for it: classical, those ``reclaimWithinCohort`` allows and the classical rules consider
    (:func:`kueue_es.scheduling.preemption.classical_candidates`: a ClusterQueue that borrows to fit
    reclaims only what ``borrowWithinCohort`` allows); under fair sharing, those a strategy allows
    (:func:`kueue_es.scheduling.fairsharing.fair_view`); with ``reclaim_amount`` what they hold above their
    nominal (at most what those workloads hold). ``borrowers_hold``: the same for every workload of a
    borrower that ``reclaimWithinCohort`` allows, considered or not; ``borrows_to_fit``: the ClusterQueue
    would exceed its nominal quota with the request. ``fair``: fair
    sharing's view (None: classical preemption, or no cohort)."""

    resource: str
    flavor: str
    asks: int
    nominal: int
    used: int
    available: int
    short: int
    lendable: int
    potential: int
    borrowing_limit: int | None
    preemptible: tuple[Holder, ...] = ()
    reclaimable: tuple[Holder, ...] = ()
    reclaim_amount: int = 0
    borrowers_hold: int = 0
    borrows_to_fit: bool = False
    fair: fairsharing.FairView | None = None

    @property
    def fits(self) -> bool:
        """Whether it fits now, borrowing included."""
        return self.short <= 0

    @property
    def never(self) -> bool:
        """Whether it can never fit in this flavor (beyond the potential capacity)."""
        return self.asks > self.potential


@dataclass(frozen=True, kw_only=True)
class FlavorNeed:
    """One flavor tried for a resource group: the flavor, whether it exists, why it is not eligible
    ("" when it is; not checked here beyond existence), and one :class:`ResourceNeed` per resource asked."""

    flavor: str
    exists: bool
    resources: tuple[ResourceNeed, ...]

    @property
    def fits(self) -> bool:
        """Every resource fits now."""
        return self.exists and all(r.fits for r in self.resources)


@dataclass(frozen=True, kw_only=True)
class Needs:
    """What a workload waits for: ``state`` (pending, admitted, quota reserved, finished, deleted, unknown),
    its ClusterQueue, cohort, queueing strategy and policies, its base and effective priority, the admitter's
    last message, the blockers that are not quota (``blocked``), and per resource group the flavors in order
    (``groups``)."""

    key: str
    status: str
    cluster_queue: str = ""
    cohort: str = ""
    strategy: str = ""
    within_cluster_queue: str = ""
    reclaim_within_cohort: str = ""
    borrow_within_cohort: str = ""
    max_priority_threshold: int | None = None
    fair_sharing: tuple[str, ...] = ()  # the fair-sharing preemption strategies; () classical preemption
    priority: int = 0  # the base priority (spec.priority, or its WorkloadPriorityClass's value)
    effective_priority: int = 0  # the deciders' (with the priority boost, gate PriorityBoost)
    message: str = ""
    reason: str = ""
    blocked: tuple[str, ...] = ()
    groups: tuple[tuple[FlavorNeed, ...], ...] = ()
    nominated: tuple[str, ...] = ()  # victims of its nomination in force, if any
    devices: tuple[str, ...] = ()  # the DRA device quota it is charged, or why it is refused (dra.describe)

    def summary(self) -> list[str]:
        """One sentence a line: the blockers, then per flavor what it would take (Kueue's units)."""
        out = list(self.blocked)
        if self.nominated:
            out.append(f"nominated: waits for the preemption of {', '.join(self.nominated)}")
        cq, cohort = self.cluster_queue, self.cohort
        for group in self.groups:
            for flavor in group:
                if not flavor.exists:
                    out.append(f"flavor {flavor.flavor}: the ResourceFlavor does not exist")
                    continue
                for r in flavor.resources:
                    out.extend(_need_sentences(r, cq=cq, cohort=cohort, policies=self))
        if (
            self.status == "pending"
            and not self.blocked
            and self.groups
            and all(any(flavor.fits for flavor in group) for group in self.groups)
        ):
            out.append("it fits now: the admitter tries it again in its next cycle")
        return out


def _need_sentences(r: ResourceNeed, *, cq: str, cohort: str, policies: Needs) -> list[str]:
    fmt = _formatter(r.resource)
    where = f"in flavor {r.flavor} of {cq}"
    head = f"{r.resource}: asks {fmt(r.asks)}; {fmt(r.nominal)} nominal, {fmt(r.used)} in use, {fmt(r.available)} available"
    if r.fits:
        return [f"{head}: fits {where} now"]
    if r.never:  # no amount freed makes it fit: the shortfall of now would mislead (a new user's finding)
        limit = "no borrowingLimit" if r.borrowing_limit is None else f"borrowingLimit {fmt(r.borrowing_limit)}"
        source = f"with what cohort {cohort} could lend ({limit})" if cohort else "(no cohort to borrow from)"
        return [
            f"{head}: never fits {where}",
            f"  asks {fmt(r.asks)}, at most {fmt(r.potential)} could ever be held there {source}",
        ]
    lines = [f"{head}: {fmt(r.short)} {r.resource} more free {where}"]
    if cohort:
        limit = "no borrowingLimit" if r.borrowing_limit is None else f"borrowingLimit {fmt(r.borrowing_limit)}"
        lines.append(f"  borrowing: cohort {cohort} can lend {fmt(r.lendable)} now ({limit})")
    else:
        lines.append(f"  borrowing: {cq} is in no cohort")
    if r.preemptible:
        held = sum(h.amount for h in r.preemptible)
        names = ", ".join(
            f"{h.key} ({priority_text(h.priority, h.effective_priority)}, {fmt(h.amount)})" for h in r.preemptible
        )
        lines.append(
            f"  preemption: lower-priority workloads in {cq} hold {fmt(held)} {r.resource} that preemption could"
            f" take ({policies.within_cluster_queue}): {names}"
        )
    elif policies.within_cluster_queue == "Never":
        lines.append(f"  preemption: {cq} never preempts within itself (withinClusterQueue: Never)")
    else:
        lines.append(
            f"  preemption: no workload in {cq} that {policies.within_cluster_queue} lets it preempt holds any"
        )
    if cohort:
        lines.extend(_reclaim_sentences(r, cq=cq, cohort=cohort, policies=policies))
    return lines


def _reclaim_sentences(r: ResourceNeed, *, cq: str, cohort: str, policies: Needs) -> list[str]:
    """What reclaim from the cohort could take, told by the rule that applies: fair sharing's shares
    and strategies, or classical preemption's (within nominal quota, or ``borrowWithinCohort``)."""
    fmt = _formatter(r.resource)
    names = ", ".join(f"{h.key} in {h.cluster_queue} ({fmt(h.amount)})" for h in r.reclaimable)
    if policies.reclaim_within_cohort == "Never":
        return [f"  reclaim: {cq} never reclaims from its cohort (reclaimWithinCohort: Never)"]
    if r.fair is not None:
        return _fair_sentences(r, cq=cq, cohort=cohort, policies=policies)
    if r.reclaimable:
        borrowing = any(h.reason == preemption.IN_COHORT_RECLAIM_WHILE_BORROWING for h in r.reclaimable)
        why = f", {_borrow_policy(policies)}" if borrowing else ""
        return [
            f"  reclaim: borrowers in cohort {cohort} hold {fmt(r.reclaim_amount)} {r.resource} that reclaim"
            f" could take ({policies.reclaim_within_cohort}{why}): {names}"
        ]
    if r.borrowers_hold <= 0:
        return [f"  reclaim: no ClusterQueue of cohort {cohort} borrows {r.resource} in {r.flavor}"]
    if r.borrows_to_fit:
        return [
            f"  reclaim: borrowers in cohort {cohort} hold {fmt(r.borrowers_hold)} {r.resource}, but {cq} would"
            f" borrow to fit ({fmt(r.used)} in use, asks {fmt(r.asks)}, {fmt(r.nominal)} nominal): classical"
            f" preemption reclaims for it only what borrowWithinCohort allows ({_borrow_policy(policies)}),"
            " none of theirs"
        ]
    return [
        f"  reclaim: borrowers in cohort {cohort} hold {fmt(r.borrowers_hold)} {r.resource}, none that classical"
        " preemption would take for it"
    ]


def _borrow_policy(policies: Needs) -> str:
    """``borrowWithinCohort`` as the classical rules read it (classical/hierarchical_preemption.go
    classifyPreemptionVariant: while borrowing, only lower priority, at most maxPriorityThreshold)."""
    if policies.borrow_within_cohort != "LowerPriority":
        return "borrowWithinCohort: Never"
    limit = policies.max_priority_threshold
    bound = f" and at most {limit}" if limit is not None else ""
    return f"borrowWithinCohort: LowerPriority, priority below {policies.effective_priority}{bound}"


def _share(value: fairsharing.Share) -> str:
    """A dominant resource share as Kueue reports it (weighted), with its dominant resource."""
    if not value.borrowing or value.ratio == 0:
        return "0"
    weighted = "inf" if math.isinf(value.weighted) else f"{value.weighted:g}"
    return f"{weighted} ({value.dominant})"


def _fair_sentences(r: ResourceNeed, *, cq: str, cohort: str, policies: Needs) -> list[str]:
    fmt = _formatter(r.resource)
    view = r.fair
    assert view is not None
    strategies = ", ".join(policies.fair_sharing)
    head = (
        f"  reclaim (fair sharing, {strategies}): {cq}'s dominant resource share with it would be {_share(view.share)}"
    )
    if not view.queues:
        return [f"{head}; no ClusterQueue of cohort {cohort} borrows {r.resource} in {r.flavor}"]
    if view.within_nominal:
        head += "; within its nominal quota it reclaims from borrowers whatever their share"
    lines = [head]
    for q in view.queues:
        where = "    " + _side(q.cluster_queue, q.side, q.share, common=q.common, own=q.own_share)
        allowed = [(c, s) for c, s in q.allowed if c.usage.get(_fr(r), 0) > 0 and not c.evicted]
        if allowed:
            by_rule: dict[tuple[str, ...], list[str]] = {}
            for c, rules in allowed:  # in the order fair preemption takes them
                by_rule.setdefault(rules, []).append(f"{c.key} ({fmt(c.usage.get(_fr(r), 0))})")
            taken = "; ".join(f"{', '.join(names)} ({', '.join(rules)})" for rules, names in by_rule.items())
            lines.append(f"{where}: fair sharing could take {taken}")
        else:
            whose = "its" if q.side in ("", q.cluster_queue) else f"{q.cluster_queue}'s"
            lines.append(
                f"{where}: no strategy lets {_side(cq, q.preemptor_side, q.preemptor_share, common=q.common)}"
                f" take {whose} {len(q.refused)} workload{'s' if len(q.refused) != 1 else ''}"
            )
    return lines


def _side(cq: str, side: str, value: fairsharing.Share, *, common: str, own: fairsharing.Share | None = None) -> str:
    """ClusterQueue ``cq`` as fair preemption weighs it: by its own share (``value``) when it is the node compared
    (``side``, below the cohort ``common``), else by the share of ``side``, its cohort at the level compared,
    named as such (with ``own``, the ClusterQueue's own share, when given): Kueue's target.go ComputeShares
    compares the two nodes just below the lowest cohort the preemptor and the target both descend from."""
    if side in ("", cq):
        return f"{cq} (share {_share(value)})"
    mine = f" (share {_share(own)})" if own is not None else ""
    return f"{cq}{mine} through {side} ({cq}'s cohort at the level compared, below {common}: share {_share(value)})"


def _fr(r: ResourceNeed) -> quota.FR:
    return (r.flavor, r.resource)


def _formatter(resource: str) -> Any:
    def fmt(amount: int) -> str:
        return format_amount(resource, amount) if amount >= 0 else "-" + format_amount(resource, -amount)

    return fmt


DEACTIVATED = "deactivated"
"""The status of a workload whose ``spec.active`` is false and that holds no quota."""


ON_HOLD = "on hold"
"""The status of a workload its job holds unqueued, its quota released (a StatefulSet scaled to zero):
Kueue's QuotaReserved=False reason ``OnHold``."""


def deactivated_condition(wl: WorkloadState, deactivation: types.WorkloadDeactivated | None) -> tuple[str, str]:
    """The ``Evicted`` reason and message Kueue's workload controller writes on a deactivated workload:
    ``Deactivated``, "The workload is deactivated" when a user set ``spec.active`` false; when Kueue did
    (``wl.deactivated``, the reason of ``deactivation``, the latest WorkloadDeactivated)
    ``DeactivatedDueTo<reason>``, "The workload is deactivated due to <its message>"
    (workload_controller.go, workloadevict.Evict)."""
    if not wl.deactivated:
        return "Deactivated", "The workload is deactivated"
    message = deactivation.message if deactivation is not None and deactivation.reason == wl.deactivated else ""
    text = f"The workload is deactivated due to {message}" if message else "The workload is deactivated"
    return f"DeactivatedDueTo{wl.deactivated}", text


def needs(
    state: ClusterState,
    key: str,
    *,
    now_ms: int = 0,
    deleted: bool = False,
    deactivation: types.WorkloadDeactivated | None = None,
) -> Needs:
    """What workload ``key`` (``namespace/name``) waits for in ``state`` (see :class:`Needs`); ``now_ms`` is
    the fold's time (ms; a backoff's end is compared with it). ``deleted``: the log recorded the Workload's
    deletion (:meth:`StoryCollector.ended_in_deletion`); the fold forgets a deleted Workload that holds no
    quota (projections/cluster.py), so without it such a key is ``unknown``. A workload with ``spec.active``
    false holding no quota is ``deactivated``, not pending: ``reason`` and ``message`` are then Kueue's
    Evicted condition (:func:`deactivated_condition`, ``deactivation`` the latest WorkloadDeactivated of
    it, :attr:`StoryCollector.deactivations`). Never raises for a known or unknown key."""
    wl = state.workloads.get(key)
    if wl is None:
        return Needs(key=key, status="deleted" if deleted else "unknown")
    if wl.deleted_seq:
        return Needs(key=key, status="deleted")
    if wl.finished is not None:
        return Needs(key=key, status="finished")
    if wl.on_hold and wl.reservation is None:
        # not queued until its job clears the hold (Kueue's IsAdmissible refuses an IsOnHold workload)
        return Needs(
            key=key,
            status=ON_HOLD,
            priority=priority_of(wl.workload, state),
            effective_priority=effective_priority(wl.workload, state),
            reason=ON_HOLD_REASON,
            message=wl.workload.on_hold or ON_HOLD_MESSAGE,
            blocked=(f"on hold: {wl.workload.on_hold or ON_HOLD_MESSAGE}",),
        )
    if concurrent_admission.queued_parent(wl.workload, state.configuration.feature_gates):
        return _parent_needs(state, wl)
    found = _needs(state, wl, now_ms=now_ms)
    if found.status == "pending" and not wl.active:
        reason, message = deactivated_condition(wl, deactivation)
        found = dataclasses.replace(found, status=DEACTIVATED, reason=reason, message=message)
    devices = dra.describe(wl.workload, dra.charge_in(state, wl.workload))
    return dataclasses.replace(found, devices=tuple(devices)) if devices else found


def _parent_needs(state: ClusterState, wl: WorkloadState) -> Needs:
    """A ConcurrentAdmission parent is never queued itself (Kueue's queue manager keeps it out): admitted while a
    variant of it is, pending otherwise, with one line per variant (its flavor and what the log says of it) as
    what it waits for; run ``explain`` on a variant for its quota."""
    variants = sorted(concurrent_admission.variants_of(state.workloads, wl.workload), key=lambda v: v.key)
    base, effective = priority_of(wl.workload, state), effective_priority(wl.workload, state)
    admitted = next((v for v in variants if v.admitted and v.reservation is not None), None)
    lines = []
    for variant in variants:
        flavor = concurrent_admission.variant_flavor(variant.workload.metadata.annotations)
        if variant.reservation is not None:
            where = (
                "being evicted"
                if variant.eviction is not None
                else "admitted"
                if variant.admitted
                else "quota reserved"
            )
        elif not variant.active:
            where = "deactivated"
        else:
            where = (
                f"pending ({variant.pending_reason}: {variant.pending_message})"
                if variant.pending_reason
                else "pending"
            )
        lines.append(f"variant {variant.workload.metadata.name} (flavor {flavor}): {where}")
    head = "a ConcurrentAdmission parent: admitted through one of its variants (explain a variant for its quota)"
    if not variants:
        lines.append("no variant of it on the log yet (the controller makes them)")
    cq = admitted.reservation.cluster_queue if admitted is not None and admitted.reservation is not None else ""
    return Needs(
        key=wl.key,
        status="pending" if admitted is None else "admitted",
        cluster_queue=cq,
        priority=base,
        effective_priority=effective,
        blocked=(head, *lines),
    )


def _needs(state: ClusterState, wl: WorkloadState, *, now_ms: int) -> Needs:
    key = wl.key
    lq_key = (wl.workload.metadata.namespace, wl.workload.spec.queue_name)
    lq = state.local_queues.get(lq_key)
    # both priorities: the rules below compare the effective one, as the deciders do (PriorityBoost)
    base, effective = priority_of(wl.workload, state), effective_priority(wl.workload, state)
    if wl.reservation is not None:
        cq_name = wl.reservation.cluster_queue
        if wl.admitted:
            return Needs(key=key, status="admitted", cluster_queue=cq_name, priority=base, effective_priority=effective)
        cq_obj = state.cluster_queues.get(cq_name)
        blocked: list[str] = []
        if cq_obj is not None:
            required = lifecycle.required_checks(cq_obj, lifecycle.assigned_flavors(wl.reservation))
            waiting = [c for c in required if c not in wl.checks or wl.checks[c].state != "Ready"]
            if waiting:
                states = ", ".join(f"{c} ({wl.checks[c].state if c in wl.checks else 'no state yet'})" for c in waiting)
                blocked.append(f"quota reserved; waits for admission checks {states}")
        return Needs(
            key=key,
            status="quota reserved",
            cluster_queue=cq_name,
            blocked=tuple(blocked),
            priority=base,
            effective_priority=effective,
        )
    blocked = []
    if not wl.active:
        blocked.append(f"inactive: spec.active is false{f' ({wl.deactivated})' if wl.deactivated else ''}")
    if wl.backoff:
        blocked.append(f"in backoff after an eviction until {wl.requeue_at_ms} ms (requeue count {wl.requeue_count})")
    if lq is None:
        blocked.append(f"LocalQueue {lq_key[0]}/{lq_key[1]} does not exist")
        return Needs(
            key=key,
            status="pending",
            blocked=tuple(blocked),
            message=wl.pending_message,
            priority=base,
            effective_priority=effective,
        )
    if lq.spec.stop_policy != "None":
        blocked.append(f"LocalQueue {lq_key[0]}/{lq_key[1]} is stopped (stopPolicy {lq.spec.stop_policy})")
    cq_name = lq.spec.cluster_queue
    cq = state.cluster_queues.get(cq_name)
    if cq is None:
        # spec.clusterQueue is optional: a LocalQueue naming none is said so, not as a ClusterQueue of no name
        if cq_name:
            blocked.append(f"ClusterQueue {cq_name} does not exist")
        else:
            blocked.append(f"LocalQueue {lq_key[0]}/{lq_key[1]} names no ClusterQueue (spec.clusterQueue)")
        return Needs(
            key=key,
            status="pending",
            cluster_queue=cq_name,
            blocked=tuple(blocked),
            message=wl.pending_message,
            priority=base,
            effective_priority=effective,
        )
    active = readiness.cluster_queue_active(cq, state=state)
    if cq.terminating:
        blocked.append(
            f"ClusterQueue {cq_name} is terminating: it admits nothing more, and goes once its workloads end"
        )
    elif not active.status and active.reason not in _INACTIVE_SAID_ELSEWHERE:
        blocked.append(f"ClusterQueue {cq_name} is inactive ({active.reason}): {active.message}")
    if cq.spec.stop_policy != "None":
        blocked.append(f"ClusterQueue {cq_name} is stopped (stopPolicy {cq.spec.stop_policy})")
    if cq.spec.queueing_strategy == "StrictFIFO":
        head = _strict_head(state, cq_name)
        if head is not None and head != key:
            blocked.append(f"StrictFIFO: {head} is at the head of {cq_name} and waits first")
    missing_checks = [c for c in lifecycle.required_checks(cq) if c not in state.admission_checks]
    if missing_checks:
        blocked.append(f"admission checks {', '.join(missing_checks)} of {cq_name} do not exist")
    tree = quota.build(state)
    devices = dra.charge_in(state, wl.workload)
    if devices.problem:
        blocked.append(f"devices (DRA): refused: {devices.problem}")
    requests = queues.pod_set_requests(
        wl.workload, cq=cq, config=state.configuration, reclaimable=wl.reclaimable, devices=devices
    )
    asks: dict[str, int] = {}
    for ps in requests:
        for resource, amount in ps.totals().items():
            asks[resource] = asks.get(resource, 0) + amount
    old = slices.replaced_slice(state, wl, cq_name) if slices.enabled(state) else None
    if old is not None and old.reservation is not None:
        # an elastic replacement slice asks only what its job grew by (SEMANTICS-ADVANCED D.3)
        for (_, resource), amount in quota.reservation_usage(old.held or old.reservation).items():
            asks[resource] = max(0, asks.get(resource, 0) - amount)
    covered = {r for group in cq.spec.resource_groups for r in group.covered_resources}
    for resource in sorted(asks):
        if resource not in covered and asks[resource] > 0:
            blocked.append(f"{resource}: {cq_name} has no quota for it (no resource group covers it)")
    pool = preemption.CandidatePool(state, now_ms=now_ms, afs_pending=True)
    preemptor = preemption.Preemptor(  # as the deciders' search makes it (search.Search.preemptor)
        key=key,
        cq=cq,
        priority=effective,
        queue_ts_ms=queue_order_ts(wl, state.configuration),
        usage={},
        frs_need=frozenset(),
    )
    fair = state.configuration.fair_sharing
    strategies = tuple(fair.preemption_strategies or fairsharing.DEFAULT_STRATEGIES) if fair is not None else ()
    groups = []
    for group in cq.spec.resource_groups:
        asked = [r for r in group.covered_resources if asks.get(r, 0) > 0]
        if not asked:
            continue
        tried = []
        for fq in group.flavors:
            exists = fq.name in state.flavors
            resources = (
                tuple(_resource_need(state, tree, pool, preemptor, cq, fq.name, r, asks[r]) for r in asked)
                if exists
                else ()
            )
            tried.append(FlavorNeed(flavor=fq.name, exists=exists, resources=resources))
        groups.append(tuple(tried))
    nomination = state.nominations.get(key)
    issued = state.preemptors.get(key)
    victims: tuple[str, ...] = ()
    if nomination is not None:
        victims = tuple(t.workload.key for t in nomination[1].targets)
    elif issued is not None:
        victims = tuple(t.workload.key for t in issued.targets)
    node = tree.cluster_queues.get(cq_name)
    cohort = node.parent.name if node is not None and node.parent is not None else (cq.spec.cohort_name or "")
    return Needs(
        key=key,
        status="pending",
        cluster_queue=cq_name,
        cohort=cohort,
        strategy=cq.spec.queueing_strategy,
        within_cluster_queue=cq.spec.preemption.within_cluster_queue,
        reclaim_within_cohort=cq.spec.preemption.reclaim_within_cohort,
        borrow_within_cohort=cq.spec.preemption.borrow_within_cohort.policy,
        max_priority_threshold=cq.spec.preemption.borrow_within_cohort.max_priority_threshold,
        fair_sharing=strategies,
        message=wl.pending_message,
        reason=wl.pending_reason,
        blocked=tuple(blocked),
        groups=tuple(groups),
        nominated=victims,
        priority=base,
        effective_priority=effective,
    )


def _strict_head(state: ClusterState, cq_name: str) -> str | None:
    """The first workload of a StrictFIFO ClusterQueue in queue order (parked ones included: under
    StrictFIFO they stay at the head, SEMANTICS §3.5)."""
    pending = visibility.pending_in_cluster_queue(state, cq_name)
    if not pending:
        return None
    return f"{pending[0].namespace}/{pending[0].name}"


def _resource_need(
    state: ClusterState,
    tree: quota.QuotaTree,
    pool: preemption.CandidatePool,
    preemptor: preemption.Preemptor,
    cq: models.ClusterQueue,
    flavor: str,
    resource: str,
    asks: int,
) -> ResourceNeed:
    cq_name = cq.metadata.name
    fr = tree.fr(flavor, resource)
    node = tree.cluster_queues[cq_name]
    limits = node.quotas.get(fr) or quota.Quota()
    used = node.usage.get(fr, 0)
    available = tree.available(cq_name, fr) if tree.declares(cq_name, fr) else 0
    free_nominal = max(0, limits.nominal - used)
    potential = tree.potential_available(cq_name, fr) if tree.declares(cq_name, fr) else 0
    short = max(0, asks - available)
    preemptible: list[Holder] = []
    reclaimable: list[Holder] = []
    reclaim_amount = borrowers_hold = 0
    borrows_to_fit = False
    fair: fairsharing.FairView | None = None
    if short > 0:
        policy = cq.spec.preemption.within_cluster_queue
        if policy != "Never":
            for candidate in pool.of(cq_name):
                held = candidate.usage.get(fr, 0)
                if held > 0 and not candidate.evicted and preemption.satisfies(policy, preemptor, candidate):
                    preemptible.append(_holder(state, candidate, cq_name, held))
        reclaim = cq.spec.preemption.reclaim_within_cohort
        if reclaim != "Never" and node.parent is not None:
            # the preemptor as the search sees it when this flavor needs preemption for this resource
            asking = dataclasses.replace(preemptor, usage={fr: asks}, frs_need=frozenset({fr}))
            borrows_to_fit = used + asks > limits.nominal
            config = state.configuration.fair_sharing
            if config is not None:
                fair = fairsharing.fair_view(tree, pool, asking, config, fairsharing.Weights(state))
                considered = {c.key: preemption.IN_COHORT_FAIR_SHARING for q in fair.queues for c, _ in q.allowed}
            else:
                considered = {
                    t.key: t.reason
                    for t in preemption.classical_candidates(tree, pool, asking)
                    if t.candidate.cluster_queue != cq_name
                }
            root = node.root()
            for other_name, other in tree.cluster_queues.items():
                if other_name == cq_name or other.root() is not root:
                    continue
                other_nominal = (other.quotas.get(fr) or quota.Quota()).nominal
                over = other.usage.get(fr, 0) - other_nominal
                if over <= 0:
                    continue
                taken = held_by_borrower = 0
                for candidate in pool.of(other_name):
                    held = candidate.usage.get(fr, 0)
                    if held <= 0 or candidate.evicted or not preemption.satisfies(reclaim, preemptor, candidate):
                        continue
                    held_by_borrower += held
                    if candidate.key in considered:
                        reclaimable.append(
                            _holder(state, candidate, other_name, held, reason=considered[candidate.key])
                        )
                        taken += held
                reclaim_amount += min(over, taken)
                borrowers_hold += min(over, held_by_borrower)
    return ResourceNeed(
        resource=resource,
        flavor=flavor,
        asks=asks,
        nominal=limits.nominal,
        used=used,
        available=available,
        short=short,
        lendable=max(0, available - free_nominal),
        potential=potential,
        borrowing_limit=limits.borrowing_limit,
        preemptible=tuple(sorted(preemptible, key=lambda h: (h.effective_priority, h.key))),
        reclaimable=tuple(sorted(reclaimable, key=lambda h: (h.cluster_queue, h.key))),
        reclaim_amount=reclaim_amount,
        borrowers_hold=borrowers_hold,
        borrows_to_fit=borrows_to_fit,
        fair=fair,
    )


def _holder(
    state: ClusterState, candidate: preemption.Candidate, cluster_queue: str, amount: int, *, reason: str = ""
) -> Holder:
    """A candidate as a :class:`Holder`: the pool's priority is the effective one (the rules compare it)."""
    return Holder(
        key=candidate.key,
        cluster_queue=cluster_queue,
        priority=priority_of(candidate.workload.workload, state),
        amount=amount,
        reason=reason,
        effective_priority=candidate.priority,
    )


def _check_story(event: types.AdmissionCheckStateChanged) -> str:
    """What a check's state adds to its line: the backoff of a Retry, the retry count, the
    ProvisioningRequest (and class, node selector) a Ready check's pods will consume."""
    parts = []
    if event.state == "Retry" and event.requeue_after_seconds is not None:
        parts.append(f"requeued after {event.requeue_after_seconds}s")
    for update in event.pod_set_updates:
        request = update.annotations.get(provisioning.CONSUME_ANNOTATION)
        if request:
            klass = update.annotations.get(provisioning.CLASS_ANNOTATION, "")
            selector = f", nodeSelector {dict(sorted(update.node_selector.items()))}" if update.node_selector else ""
            parts.append(f"pod set {update.name} consumes ProvisioningRequest {request} ({klass}{selector})")
    return f" ({'; '.join(parts)})" if parts else ""
