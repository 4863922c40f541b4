"""The cluster as the log says it is: objects, workloads and the quota ledger.

``state = fold(events)``: :func:`apply` folds one logged event into a
:class:`ClusterState`. It is the single projection every decider and replay use,
so a decision's basis (a log prefix) always gives the same state. No I/O, no
clock: times come from the events.

For speed the fold updates the state in place; a decider never mutates it
otherwise (its own decisions come back through the log, ARCHITECTURE.md §3).

The quota ledger is decision-only: a ClusterQueue's usage is the sum of
QuotaReserved minus QuotaReleased, per flavor and resource (research §5.7).
"""

from __future__ import annotations

import heapq
import re
import sys
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Never, NoReturn, cast

import msgspec

from kueue_es.events import models, slices, subjects, tas, types
from kueue_es.projections import afs, kueue_metrics, multikueue, partitions, quota, topology
from kueue_es.projections.batches import BatchVerifier
from kueue_es.projections.partitions import Partitions
from kueue_es.projections.topology import TopologyState


@dataclass(slots=True)
class WorkloadState:
    """One workload and what the log says happened to it.

    ``reservation`` is the live QuotaReserved (None when the workload holds no
    quota); the ``*_seq`` fields are log sequences: the latest observation, the
    facts that matter for release (``cause_seq`` of QuotaReleased), and the
    decision that parked it as inadmissible (0: not parked). ``eviction`` is the
    EvictionRequested in force (quota still held until ``stopped_seq``, the
    WorkloadStopped); ``preempted_count`` how often it was evicted by preemption.
    """

    workload: models.Workload
    observed_seq: int
    reservation: types.QuotaReserved | None = None
    admitted: bool = False
    # Dynamic reclaim (Kueue's status.reclaimablePods): the pods per pod set whose quota is no
    # longer needed, as the job last reported them (WorkloadReclaimablePods); ``held`` is the
    # reservation as it counts against quota, its pod set assignments scaled down by them
    # (:func:`held_reservation`; the reservation itself when nothing is reclaimable).
    reclaimable: dict[str, int] = field(default_factory=dict)
    held: types.QuotaReserved | None = None
    finished: types.WorkloadFinished | None = None
    finished_seq: int = 0
    deleted_seq: int = 0
    pending_message: str = ""
    pending_reason: str = ""  # the reason of the WorkloadInadmissible that set pending_message ("": none did)
    parked_seq: int = 0
    eviction: types.EvictionRequested | None = None
    stopped_seq: int = 0
    preempted_count: int = 0
    afs_usage: tuple[tuple[str, str], dict[str, int]] | None = None  # (LocalQueue, usage) counted in its ledger
    afs_pending: tuple[str, str] | None = None  # the LocalQueue whose ledger holds its unsettled entry penalty
    # Admission checks (SEMANTICS §9.5): the latest state each check controller reported, and
    # how often each was reset from Retry (Kueue's retryCount).
    checks: dict[str, types.AdmissionCheckStateChanged] = field(default_factory=dict)
    check_retries: dict[str, int] = field(default_factory=dict)
    # PodsReady (SEMANTICS §9.4): the job's latest report while holding quota; when admitted.
    pods_ready: types.WorkloadPodsReady | None = None
    admitted_at_ms: int = 0
    accumulated_ms: int = 0  # admitted time of earlier admissions (accumulatedPastExecutionTimeSeconds)
    # Kueue's requeueState: the PodsReady-timeout count and the end of the backoff after an
    # eviction; ``backoff`` while the workload waits that out, out of its queue (§3.7).
    requeue_count: int = 0
    requeue_at_ms: int = 0
    backoff: bool = False
    # Set ``spec.active`` false by hand since its last requeue count: Kueue's workload controller drops
    # the requeueState of every inactive workload (PR #7734), so the next PodsReady timeout counts from 1
    # and a backoff under way ends. Kept beside the count (not folded into it) for admitter logic 21 and
    # earlier, which kept counting (``lifecycle.decide``'s ``inactive_clears_requeue``).
    requeue_cleared: bool = False
    order_ms: int = 0  # queue-order timestamp after an eviction that moves it back (§3.3); 0: creation
    # When it was last preempted with reason InCohortReclaimWhileBorrowing (its Preempted condition's time), 0:
    # not since its last reservation. Kueue's queue-order timestamp is this + 1 ms while the gate
    # PrioritySortingWithinCohort is off (workload.go GetQueueOrderTimestamp, :func:`queue_order_ts`).
    reclaim_preempted_ms: int = 0
    # The log sequence of the last update that changed its priority-boost annotation (0: none): with the gate
    # PriorityBoost on, a workload parked before it is queued again (:func:`_boost_changed`).
    boost_changed_seq: int = 0
    deactivated: str = ""  # why Kueue set spec.active=false (WorkloadDeactivated), "" when it did not
    # Released for its job's hold (QuotaReleased reason OnHold: a StatefulSet scaled to zero) and not queued
    # until its job clears the hold (a WorkloadObserved without ``on_hold``): Kueue's IsOnHold, which
    # IsAdmissible refuses (pkg/workload/workload.go)
    on_hold: bool = False
    timer_basis: tuple[int, int, int] | None = None  # its entries in ClusterState.timer_heaps (-1: none)
    queued_as: tuple[tuple[str, str], tuple[int, int, str, str]] | None = None
    queued_parked: int = 0  # the parked_seq its place in ``ClusterState.queued`` was chosen by
    queued_for: models.Workload | None = None  # the object ``queued_as`` was computed from
    # The admitter's cache, not state: its per-pod requests and the workload, ClusterQueue and
    # Configuration objects they were made from (fields, not a tuple: one object less to collect).
    # The requests' type (PodSetRequest) lives in the admitter, a layer above: ``Any`` here.
    requests_memo: list[Any] | None = None
    requests_memo_workload: models.Workload | None = None
    requests_memo_cq: models.ClusterQueue | None = None
    requests_memo_config: models.Configuration | None = None
    requests_memo_devices: int = -1  # ClusterState.devices_version the memo was made at (DRA)
    # The admitter's cache too: what its plan checks of the workload object alone (queues._shape),
    # on the state rather than in a map of every workload, which a cycle would look up once a head
    shape_memo: tuple[Any, ...] | None = None
    # TAS (SEMANTICS-ADVANCED A.2.2): the topology assignments of the reservation, per pod set
    # (from TopologyAssigned; gone with the quota), and the TAS usage they take, per flavor and leaf.
    topology: dict[str, models.TopologyAssignment] | None = None
    tas_usage: dict[str, dict[str, dict[str, int]]] | None = None
    # The log sequence of the last TopologyAssigned folded into ``topology`` (0: none): a node's
    # taints count as its failure only when they changed after it (``ClusterState.node_health_seq``).
    topology_seq: int = 0
    # The flavor-scan bookmark in force (SEMANTICS §5.3): the last WorkloadInadmissible's; gone
    # with a reservation, a nomination or a change of the workload's scheduling shape.
    bookmark: types.FlavorBookmark | None = None
    key: str = field(init=False)  # ``workload.key``, which never changes for a state
    _ref: types.WorkloadRef | None = field(default=None, init=False, repr=False)
    _ref_of: models.Workload | None = field(default=None, init=False, repr=False)  # what _ref was made from

    def __post_init__(self) -> None:
        self.key = self.workload.key

    @property
    def ref(self) -> types.WorkloadRef:
        """The workload's reference for decisions (made once per workload object)."""
        if self._ref_of is self.workload and self._ref is not None:
            return self._ref
        meta = self.workload.metadata
        self._ref = types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
        self._ref_of = self.workload
        return self._ref

    @property
    def queue_ts_ms(self) -> int:
        """Kueue's queue-order timestamp (SEMANTICS §3.3): the eviction time after a
        PodsReadyTimeout or AdmissionCheck eviction, else the creation time (ms)."""
        return self.order_ms or self.workload.metadata.creation_timestamp_ms

    @property
    def active(self) -> bool:
        """``spec.active`` as Kueue holds it: false once Kueue deactivated the workload."""
        return self.workload.spec.active and not self.deactivated

    @property
    def gone(self) -> bool:
        """Finished or deleted: must not be admitted, must give back any quota."""
        return self.finished is not None or self.deleted_seq > 0


Order = tuple[int, int, str, str]  # a queue order key (queue_order_key), the workload key last


class Ready:
    """Queue order keys in a binary heap with lazy removal: the first one comes cheaply
    however many were parked or admitted before it. ``live`` maps each workload key to
    its order key; heap entries that are not (any longer) live are dropped when they
    reach the top, and the heap is rebuilt from ``live`` when it holds mostly those."""

    __slots__ = ("heap", "live")

    def __init__(self) -> None:
        self.heap: list[Order] = []
        self.live: dict[str, Order] = {}

    def __len__(self) -> int:
        return len(self.live)

    def first(self) -> Order | None:
        """The first order key in queue order (None when there is none)."""
        heap, live = self.heap, self.live
        while heap:
            top = heap[0]
            if live.get(top[-1]) is top:
                return top  # the smallest live one: every live order key is in the heap
            heapq.heappop(heap)
        return None

    def __iter__(self) -> Iterator[Order]:
        """The order keys in queue order; past the first, from a copy of the heap popped
        only as far as the caller reads (a workload may be in the heap twice)."""
        first = self.first()
        if first is None:
            return
        yield first
        heap, live = self.heap, self.live
        seen = {first[-1]}
        rest = heap[:]
        while rest:
            order = heapq.heappop(rest)
            if live.get(order[-1]) is order and order[-1] not in seen:
                seen.add(order[-1])
                yield order

    def add(self, order: Order) -> None:
        self.live[order[-1]] = order
        heapq.heappush(self.heap, order)

    def remove(self, order: Order) -> None:
        del self.live[order[-1]]
        if len(self.heap) > 2 * len(self.live) + 32:
            self.heap = list(self.live.values())
            heapq.heapify(self.heap)


class Queued:
    """One LocalQueue's active pending workloads, in Kueue's heap order (SEMANTICS §3.2),
    with the parked ones (§3.6) kept apart so a cycle finds the first workload it may try
    without walking past every workload parked before it.

    ``ready`` (:class:`Ready`) holds the queue order keys of the workloads not parked,
    or parked before ``trigger``: the latest requeue trigger of the LocalQueue's cohort
    tree the split was made for (:meth:`requeue`). ``parked`` holds the others, as ``workload key ->
    (parked_seq, order)`` in the order they were parked; ``requeued`` those in ``ready``
    although parked (before ``trigger``), should the trigger go back down (a tree change).
    Which workload comes first for a trigger never depends on how the split got there.
    """

    __slots__ = ("ready", "parked", "requeued", "trigger", "_last_parked")

    def __init__(self) -> None:
        self.ready = Ready()
        self.parked: dict[str, tuple[int, Order]] = {}
        self.requeued: dict[str, tuple[int, Order]] = {}
        self.trigger = 0
        self._last_parked = 0  # highest parked_seq in ``parked``; -1: not in parking order

    def __len__(self) -> int:
        return len(self.ready) + len(self.parked)

    def __iter__(self) -> Iterator[Order]:
        """Every queued workload's order key, ready ones first (not in queue order)."""
        yield from self.ready.live.values()
        for _, order in self.parked.values():
            yield order

    def add(self, order: Order, parked_seq: int) -> None:
        """Queue the workload of ``order``, parked at ``parked_seq`` (0: not parked)."""
        if parked_seq == 0:
            self.ready.add(order)
        elif parked_seq < self.trigger:
            self.ready.add(order)
            self.requeued[order[-1]] = (parked_seq, order)
        else:
            if 0 <= self._last_parked <= parked_seq:
                self._last_parked = parked_seq
            else:
                self._last_parked = -1
            self.parked[order[-1]] = (parked_seq, order)

    def discard(self, order: Order) -> None:
        """Take the workload of ``order`` out of the queue."""
        key = order[-1]
        if self.parked.pop(key, None) is None:
            self.requeued.pop(key, None)
            self.ready.remove(order)
        elif not self.parked:
            self._last_parked = 0

    def requeue(self, trigger: int) -> Ready:
        """``ready`` for the requeue trigger ``trigger`` (a log sequence): workloads parked
        before it are back in the queue, those parked since wait (SEMANTICS §3.6)."""
        if trigger > self.trigger and self.parked:
            if self._last_parked < 0:  # parked out of order (a re-placed workload): sort once
                self.parked = dict(sorted(self.parked.items(), key=lambda item: item[1][0]))
                self._last_parked = next(reversed(self.parked.values()))[0]
            back = []
            for key, (seq, _) in self.parked.items():
                if seq >= trigger:
                    break
                back.append(key)
            for key in back:
                entry = self.requeued[key] = self.parked.pop(key)
                self.ready.add(entry[1])
            if not self.parked:
                self._last_parked = 0
        elif trigger < self.trigger:  # the cohort tree changed: some requeued workloads wait again
            again = [key for key, (seq, _) in self.requeued.items() if seq >= trigger]
            for key in again:
                entry = self.parked[key] = self.requeued.pop(key)
                self.ready.remove(entry[1])
            if again:
                self._last_parked = -1
        self.trigger = trigger
        return self.ready


@dataclass
class ClusterState:
    """Everything folded so far; ``last_seq`` is the last sequence applied.

    ``usage[cluster_queue][flavor][resource]`` is reserved quota (cpu in
    millicores, memory in bytes); ``pending`` and ``releasable`` are ordered sets
    of workload keys (insertion order, so iteration is deterministic) kept by the
    fold so a cycle need not scan every workload: those without quota and not
    gone, and those holding quota that must give it back (finished, deleted,
    deactivated); ``queued[(namespace, localQueue)]`` holds the active pending
    workloads of each LocalQueue by their queue order keys (:func:`queue_order_key`,
    whose last item is the workload key), parked ones apart (:class:`Queued`);
    ``heads[partition]`` the last DecisionRecord
    sequence seen on that partition's head subject; ``rejections`` the latest
    ObjectRejected per ``(kind, namespace, name)`` of an object still refused (one later
    observed valid, a job whose Workload is observed, and one deleted leave it:
    :func:`_clear_rejection`), in the order they were last changed, ``rejection_marks`` the
    value of the counter ``rejections_changed`` when each was (a reader that remembers the
    last mark it saw finds what is new at the end, without scanning every rejection);
    ``batches`` judges which messages
    count (:mod:`kueue_es.projections.batches`: only verified decision batches are
    folded), the batch it holds being part of the fold's progress.

    Preemption (SEMANTICS §7.8): ``reserved[cluster_queue]`` holds the keys of the
    workloads holding quota there (the preemption candidates); ``nominations`` the
    admitter's PreemptionRequired not yet answered by the preemptor, per preemptor
    key, with its sequence; ``preemptors`` the last PreemptionIssued with targets of
    each still-pending preemptor, per preemptor key (its nomination the admitter honours);
    ``deferred`` the ClusterQueue of each workload the admitter left waiting for the cycle's
    preemptions (WaitingForPreemptedWorkloads, Kueue's DeferredFit), per workload key: Kueue
    requeues it with reason PendingPreemption, which makes it its ClusterQueue's sticky head until
    it is admitted or leaves (pkg/cache/queue/cluster_queue.go requeueIfNotPresent); parked, it is
    dropped, as a parked preemptor is (§3.9).
    """

    last_seq: int = 0
    heads: dict[str, int] = field(default_factory=dict)
    batches: BatchVerifier = field(default_factory=BatchVerifier)
    flavors: dict[str, models.ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, models.ClusterQueue] = field(default_factory=dict)
    cohorts: dict[str, models.Cohort] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], models.LocalQueue] = field(default_factory=dict)
    priority_classes: dict[str, models.WorkloadPriorityClass] = field(default_factory=dict)
    workloads: dict[str, WorkloadState] = field(default_factory=dict)
    pending: dict[str, None] = field(default_factory=dict)
    releasable: dict[str, None] = field(default_factory=dict)
    queued: dict[tuple[str, str], Queued] = field(default_factory=dict)
    usage: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    rejections: dict[tuple[str, str, str], types.ObjectRejected] = field(default_factory=dict)
    rejection_marks: dict[tuple[str, str, str], int] = field(default_factory=dict)
    rejections_changed: int = 0
    namespaces: dict[str, models.Namespace] = field(default_factory=dict)
    admission_checks: dict[str, models.AdmissionCheck] = field(default_factory=dict)
    configuration: models.Configuration = field(default_factory=models.Configuration)
    requeue_triggers: dict[str, int] = field(default_factory=dict)
    # The fold of a record carrying its decisions (event schema 17): its sequence, and whether one of them
    # parked a workload yet. Transient (the decisions are folded in one go after their record): see trigger.
    carried_seq: int = 0
    carried_parked: bool = False
    quota_tree: quota.QuotaTree | None = None
    requests: dict[str, tuple[int, types.SchedulingRequested]] = field(default_factory=dict)
    reserved: dict[str, dict[str, None]] = field(default_factory=dict)
    nominations: dict[str, tuple[int, types.PreemptionRequired]] = field(default_factory=dict)
    preemptors: dict[str, types.PreemptionIssued] = field(default_factory=dict)
    deferred: dict[str, str] = field(default_factory=dict)
    # The queued workloads whose queue order an ordering feature gate may move (:func:`order_gates_move`):
    # those with a priority-boost annotation or preempted while their ClusterQueue borrowed. The fold
    # keeps every queue in base order (priority, queue time); the admitter orders these few apart.
    ordered_apart: dict[str, None] = field(default_factory=dict)
    afs_ledgers: dict[tuple[str, str], afs.Ledger] = field(default_factory=dict)
    # Workloads the admitter must look at whatever the queues say (SEMANTICS §9): holding quota
    # and waiting for admission checks or with a check in Retry/Rejected (``checks_due``);
    # admitted and not PodsReady, or with a maximum execution time (``timed``); waiting out a
    # backoff (``backoffs``); holding quota without PodsReady=True (``not_ready``, blockAdmission).
    checks_due: dict[str, None] = field(default_factory=dict)
    timed: dict[str, None] = field(default_factory=dict)
    backoffs: dict[str, None] = field(default_factory=dict)
    not_ready: dict[str, None] = field(default_factory=dict)
    # Pending (no quota, not ended) workloads whose ``spec.active`` and pending reason disagree: inactive with
    # no decision of reason ``Deactivated`` since (Kueue's workload controller evicts every inactive workload, a
    # pending one too: Evicted and QuotaReserved ``Deactivated``), or active again with that reason still in
    # force (Kueue puts it back to PendingEvaluation), or pending AdmissionGated with its admission-gated-by
    # annotation gone (:func:`_admission_gate_cleared`). The admitter records each (admitter logic 44).
    activation_due: dict[str, None] = field(default_factory=dict)
    # Workloads holding quota, not evicted, whose Evicted condition someone other than kueue-es set True (the
    # WorkloadEvictionObserved of each): the admitter carries each out (admitter logic 45); gone with the
    # eviction, the reservation or the workload (:func:`_reindex`).
    evicted_by_others: dict[str, types.WorkloadEvictionObserved] = field(default_factory=dict)
    # The ``timed`` workloads' deadlines, as min-heaps of (basis ms, key) per TIMER_KINDS: when
    # admitted (+ waitForPodsReady.timeout), when PodsReady turned false (+ recoveryTimeout),
    # and the maximum execution time's end. Entries whose basis is no longer the workload's are
    # dropped when met (``WorkloadState.timer_basis`` is the current one).
    timer_heaps: tuple[list[tuple[int, str]], ...] = field(default_factory=lambda: ([], [], []))
    # Counters of trigger() calls, all of them and those for an object change (not a quota
    # release): what deciders derive from the triggers, or from the objects alone, stays valid
    # while the counter it depends on stays the same.
    triggers_version: int = 0
    objects_version: int = 0
    caches: dict[str, Any] = field(default_factory=dict)  # deciders' caches, derived, never state
    # TAS (SEMANTICS-ADVANCED A.2): Topology, Node, non-TAS Pod and ResourceFlavor facts; the TAS
    # usage of the workloads holding quota with a topology assignment, per flavor, leaf ID and
    # resource.
    topology: TopologyState = field(default_factory=TopologyState)
    tas_usage: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    # Per node name, the log sequence of the Node fact that created it or changed its taints or
    # its Ready status: the changes on which Kueue's TAS node controller looks at a node's
    # workloads again (pkg/controller/tas/node_controller.go, the Create/Update predicates).
    node_health_seq: dict[str, int] = field(default_factory=dict)
    # The flavor-scan bookmark's clocks (SEMANTICS §5.3): ``admit_cycles`` counts the admitter's
    # DecisionRecords that decide something, outputs or pending outcomes (Kueue's scheduling
    # cycle, as the log sees it: a cycle that decides nothing leaves no trace);
    # ``cq_generations`` is Kueue's per-ClusterQueue AllocatableResourceGeneration
    # (:meth:`generation`), as the log sequence of the latest of its workload changes
    # (:func:`_bump_generation`) or ``structure_generation``, the latest quota
    # or cohort-tree change anywhere (Kueue bumps only the changed tree: ours is a
    # superset, so an older bookmark may expire sooner after an unrelated object change).
    admit_cycles: int = 0
    admit_cycle_seq: int = 0  # the sequence of the last record counted
    # The highest logic version of the admitter's DecisionRecords folded: what its evictions do to a check
    # reported Retry while they are carried out (:func:`resets_late_retry`) depends on it.
    admit_logic: int = 0
    cq_generations: dict[str, int] = field(default_factory=dict)
    structure_generation: int = 0
    # Kueue's metrics that only history gives (counters, wait-time histograms): folded here, so they
    # are the same after a restart and in every replica (:mod:`kueue_es.projections.kueue_metrics`).
    metrics: kueue_metrics.KueueMetrics = field(default_factory=kueue_metrics.KueueMetrics)
    # Decision partitions (issue 18, :mod:`kueue_es.projections.partitions`): ``partitions`` is
    # derived (rebuilt from the rest after a checkpoint); ``transits`` is state: the objects handed
    # over between partitions and not yet fenced, ``"wl:<key>"``, ``"cq:<name>"`` or ``"cohort:<name>"`` -> (source
    # partition, sequence of the move, target partition).
    partitions: Partitions = field(default_factory=Partitions)
    transits: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    # ``admit_cycles`` per partition: a partition's own scheduling cycles, the clock of its
    # workloads' bookmarks (a partition's view reads its count as ``admit_cycles``).
    partition_cycles: dict[str, int] = field(default_factory=dict)
    # DRA (SEMANTICS-ADVANCED F): the DeviceClasses and ResourceSlices by name and the
    # ResourceClaimTemplates by (namespace, name) the watcher reported; ``devices_version`` counts their changes (what the
    # admitter derives from them stays valid while it stays the same).
    device_classes: dict[str, models.DeviceClass] = field(default_factory=dict)
    claim_templates: dict[tuple[str, str], models.ResourceClaimTemplate] = field(default_factory=dict)
    resource_slices: dict[str, models.ResourceSlice] = field(default_factory=dict)
    devices_version: int = 0
    # MultiKueue (SEMANTICS-ADVANCED E, :mod:`kueue_es.projections.multikueue`): the workers, their
    # connectivity, the remote copies, the nominations and each workload's clusterName.
    multikueue: multikueue.MultiKueueState = field(default_factory=multikueue.MultiKueueState)

    def __post_init__(self) -> None:
        wire(self)

    def generation(self, cluster_queue: str) -> int:
        """Kueue's AllocatableResourceGeneration of ``cluster_queue`` as the log gives it:
        it advances whenever the ClusterQueue's quota, its cohort tree or a workload holding
        quota in it changes (SEMANTICS §5.3); never decreases."""
        return max(self.cq_generations.get(cluster_queue, 0), self.structure_generation)

    def open_request(self, role: str) -> types.SchedulingRequested | None:
        """The oldest unanswered SchedulingRequested for ``role``, if any."""
        waiting = sorted((seq, r) for seq, r in self.requests.values() if r.role == role)
        return waiting[0][1] if waiting else None

    def trigger(self, key: str, seq: int, *, released: bool = False) -> None:
        """Record an event that moves parked workloads back (SEMANTICS §3.6): an object
        changed, or quota was ``released``.

        ``key`` is ``cq:<name>``, ``cohort:<name>`` or ``*`` (everything).

        A workload parked at a sequence waits for a trigger at a later one. The decisions a DecisionRecord
        carries (event schema 17) share its sequence, where their output messages each had their own: a
        trigger among them that follows one of them parking a workload counts from the next sequence, so it
        moves back what was parked before it in the batch, as it did when each was a message (and, unlike
        then, what its batch parks after it: Kueue's requeue of a release comes after the whole cycle).
        """
        if self.carried_parked and seq == self.carried_seq:
            seq += 1
        self.requeue_triggers[key] = max(self.requeue_triggers.get(key, 0), seq)
        self.triggers_version += 1
        if not released:
            self.objects_version += 1

    def usage_of(self, cluster_queue: str, flavor: str, resource: str) -> int:
        """Reserved amount of ``resource`` in ``flavor`` of ``cluster_queue`` (0 when none)."""
        return self.usage.get(cluster_queue, {}).get(flavor, {}).get(resource, 0)


def wire(state: ClusterState) -> None:
    """Give ``state``'s batch verifier the fold's partition rule (a batch deciding a workload
    outside its record's partition is an orphan, :func:`partitions.record_problem`), once: a
    copy of the state (a partition's view) shares the verifier and leaves it as it is.

    The rule holds the state by a weak reference, so the state and its verifier make no reference
    cycle: a state dropped is freed at once by reference counting, never left to the cyclic
    collector (kueue_es.services.collector). Judging for a state that is gone raises ReferenceError."""
    if state.batches.judge is None:
        held = weakref.ref(state)

        def judge(record: types.DecisionRecord, outputs: Sequence[types.Event]) -> str | None:
            folded = held()
            if folded is None:
                raise ReferenceError("the state this batch verifier judges for is gone")
            return partitions.record_problem(folded, record, outputs)

        state.batches.judge = judge


class UnknownEventError(TypeError):
    """An event whose type :func:`apply` neither folds nor names in :data:`IGNORED`.

    Only a build whose event unions grew without a fold for the new type raises it (mypy
    strict and ``tests/unit/test_fold_dispatch.py`` catch that before a release); a
    service that meets it logs it and skips the event (``runtime.fold_message``).
    """


ON_HOLD_REASON: Final = "OnHold"
"""Kueue's QuotaReserved reason (kueue.WorkloadOnHold) for a reservation its job released to hold the workload
unqueued: a StatefulSet scaled to zero; also the reason of the QuotaReleased that stands for it."""
ON_HOLD_MESSAGE: Final = "StatefulSet scaled to zero; workload on hold"
"""Its message (statefulset_reconciler.go releaseScaleDownReservation)."""
ON_HOLD_CLEARED_MESSAGE: Final = "Workload no longer on hold; waiting for quota reservation"
"""The QuotaReserved message once the StatefulSet is scaled up again (statefulset_reconciler.go clearOnHold)."""

# The event types the fold reads and drops: what a ClusterState holds never depends on them.
# DispatchApplied and DispatchFailed are the Kubernetes side's echo of a decision; quota and
# workload status follow the watcher's facts instead. ChildJobObserved is only the dispatcher's cue.
IGNORED: Final[tuple[type[types.Event], ...]] = (
    types.DispatchApplied,
    types.DispatchFailed,
    types.DispatchBatchApplied,
    # a job of a managed ancestor seen running: the dispatcher suspends it (from the fold), no state of its own
    types.ChildJobObserved,
)
_IGNORED_EXACT: Final[frozenset[type[types.Event]]] = frozenset(IGNORED)


def apply_outputs(
    state: ClusterState,
    outputs: Iterable[types.Event | types.PendingOutcome | types.FinishedRelease],
    *,
    seq: int,
) -> int:
    """Fold one decider cycle's ``outputs`` (``Decider.decide``'s list, in its order) into ``state`` in
    the order every reader folds the DecisionRecord they make (:mod:`kueue_es.projections.batches`):
    the releases and decisions first, each at its own sequence from ``seq + 1``, then the pending
    outcomes at the last of those, so a release among the outputs (a requeue trigger) comes before the
    workloads the cycle parked. Returns the last sequence used (``seq`` itself when there were only
    pending outcomes). For callers that run the cores without a log (``kueue-es bench core``,
    ``kueue-es bench rules``); raises what :func:`apply` raises."""
    pending = types.PendingOutcome
    parked: list[types.PendingOutcome] = []
    for event in outputs:
        if type(event) is pending:
            parked.append(event)
        else:
            seq += 1
            apply(state, event, seq=seq)
    for event in parked:
        apply(state, event, seq=seq)
    return seq


def apply(
    state: ClusterState, event: types.Event | types.PendingOutcome | types.FinishedRelease, *, seq: int
) -> ClusterState:
    """Fold one event stored at log sequence ``seq`` into ``state`` and return it.

    Idempotent for facts (full-state snapshots) and for a decision seen twice.
    Raises nothing for events about unknown objects: they are ignored. Every event
    type is either folded or named in :data:`IGNORED`; any other type raises
    :class:`UnknownEventError` before the state is touched. A PendingOutcome (a decider's
    output the record carries) folds as the WorkloadInadmissible it stands for: the log's
    readers get those from the batch verifier, a caller folding ``decide``'s outputs
    directly may pass it as it is; a FinishedRelease likewise folds as its QuotaReleased. A FactBatch
    folds as its facts, in order, each at ``seq``.
    """
    # The frequent types first, by their exact type: a class pattern (isinstance of a msgspec Struct
    # class) costs a call of the metaclass's __instancecheck__, and a workload fact would pass ten.
    state.partitions.seq = seq  # a workload moved by this event moves at ``seq``
    kind = type(event)
    fold = _FOLD_BY_TYPE.get(kind)
    if fold is not None:  # the same function its case below calls
        fold(state, event, seq=seq)
        if seq > state.last_seq:
            state.last_seq = seq
        return state
    if kind is types.PendingOutcome:  # most of a busy cycle's outputs: as the isinstance below, without its call
        _apply_workload_decision(state, cast(types.PendingOutcome, event), seq=seq)
        if seq > state.last_seq:
            state.last_seq = seq
        return state
    if kind in _IGNORED_EXACT:  # a dispatch result per admission: IGNORED, as its case below
        state.last_seq = max(state.last_seq, seq)
        return state
    if isinstance(event, types.PendingOutcome):  # folded as the WorkloadInadmissible it stands for, not made
        _apply_workload_decision(state, event, seq=seq)  # (the fold does not read that one's time)
        state.last_seq = max(state.last_seq, seq)
        return state
    if isinstance(event, types.FinishedRelease):  # a record's finished release, passed as decide made it
        _apply_workload_decision(state, event.quota_released(), seq=seq)
        state.last_seq = max(state.last_seq, seq)
        return state
    if state.rejections and kind in _OBJECT_FACTS:  # observed valid, or gone: no longer refused
        _clear_rejection(state, subjects.fact_identity(event))  # type: ignore[arg-type]
    match event:
        case types.WorkloadInadmissible() | types.QuotaReserved() | types.WorkloadAdmitted() | types.QuotaReleased():
            _apply_workload_decision(state, event, seq=seq)  # the most frequent events first
        case types.DecisionRecord():
            if event.decisions:  # its decisions follow, at its sequence (see ClusterState.trigger)
                state.carried_seq, state.carried_parked = seq, False
            state.heads[event.partition] = seq
            state.partitions.on_record(state, event.partition, event.basis_seq)
            kueue_metrics.on_record(state, event, seq=seq, admitter=event.role == ADMITTER_ROLE)
            if event.role == ADMITTER_ROLE and event.logic_version > state.admit_logic:
                crossed = state.admit_logic < REPLACEMENT_PODS_LOGIC <= event.logic_version
                state.admit_logic = event.logic_version
                if crossed:  # the pod groups already waiting for replacement pods leave their queues now
                    for key in [k for k, w in state.workloads.items() if w.workload.waiting_for_replacement_pods]:
                        _reindex(state, key)
            if event.role == ADMITTER_ROLE and event.decided and seq > state.admit_cycle_seq:
                state.admit_cycles += 1  # once per record, however often it is folded
                state.admit_cycle_seq = seq
                cycles = state.partition_cycles
                cycles[event.partition] = cycles.get(event.partition, 0) + 1
            if event.answers:
                state.requests.pop(event.answers, None)
        case types.SchedulingRequested():
            state.requests.setdefault(event.request_id, (seq, event))
        case types.PreemptionRequired() | types.PreemptionIssued() | types.EvictionRequested():
            _apply_preemption(state, event, seq=seq)
        case types.WorkloadObserved() | types.WorkloadFinished():
            _apply_workload_fact(state, event, seq=seq)
        case types.AdmissionCheckStateChanged():
            _apply_check_fact(state, event, seq=seq)
        case types.WorkloadPodsReady():
            _apply_workload_status_fact(state, event, seq=seq)
        case types.WorkloadReclaimablePods():
            _apply_reclaimable(state, event, seq=seq)
        case types.WorkloadDeactivated() | types.WorkloadRequeued():
            _apply_requeue_decision(state, event)
        case types.WorkloadEvictionObserved():
            current = state.workloads.get(event.workload.key)
            if current is not None and _same_uid(current, event.workload) and _evictable(current):
                state.evicted_by_others[event.workload.key] = event
        case types.WorkloadStopped():
            current = state.workloads.get(event.workload.key)
            if current is not None and current.eviction is not None and _same_uid(current, event.workload):
                current.stopped_seq = current.stopped_seq or seq
                _reindex(state, event.workload.key)
        case types.ObjectDeleted(reason=types.REJECTED_OBJECT_GONE):
            pass  # an object known only by its rejection: it leaves ``rejections`` (above), nothing else
        case types.ObjectDeleted(kind="Node" | "Pod" | "Topology"):
            _apply_topology_fact(state, event, seq=seq)
        case types.ObjectDeleted():
            _apply_deleted(state, event, seq=seq)
            if multikueue.fold_deleted(state.multikueue, event.kind, event.name):
                multikueue.refresh_checks(state.multikueue, state.admission_checks)
            if event.kind != "Workload":
                state.trigger("*", seq)
            if event.kind == "ResourceFlavor":
                state.topology.apply(event)
        case types.ResourceFlavorObserved(flavor=obj):
            old_flavor = state.flavors.get(obj.metadata.name)
            state.flavors[obj.metadata.name] = obj
            state.topology.apply(event)
            state.trigger("*", seq)
            if old_flavor is None or old_flavor.spec.topology_name != obj.spec.topology_name:
                state.partitions.on_flavor(state, seq)
        case types.ClusterQueueObserved(cluster_queue=obj):
            old = state.cluster_queues.get(obj.metadata.name)
            if old is None or (old.spec.resource_groups, old.spec.cohort_name) != (
                obj.spec.resource_groups,
                obj.spec.cohort_name,
            ):
                state.structure_generation = max(state.structure_generation, seq)  # quotas or tree changed (§5.3)
            state.cluster_queues[obj.metadata.name] = obj
            state.quota_tree = None
            state.trigger(f"cq:{obj.metadata.name}", seq)
            state.partitions.on_cluster_queue(state, obj.metadata.name, seq)
        case types.CohortObserved(cohort=obj):
            old_cohort = state.cohorts.get(obj.metadata.name)
            if old_cohort is None or old_cohort.spec != obj.spec:
                state.structure_generation = max(state.structure_generation, seq)
            state.cohorts[obj.metadata.name] = obj
            state.quota_tree = None
            state.trigger(f"cohort:{obj.metadata.name}", seq)
            if (old_cohort.spec.parent_name if old_cohort is not None else None) != obj.spec.parent_name:
                state.partitions.on_cohort(state, seq)
        case types.LocalQueueObserved(local_queue=obj):
            lq_key = (obj.metadata.namespace, obj.metadata.name)
            if lq_key not in state.local_queues and (ledger := state.afs_ledgers.get(lq_key)) is not None:
                afs_config = state.configuration.admission_fair_sharing
                half_life = afs.half_life_s(state.configuration) if afs_config is not None else None
                ledger.recreated(obj.metadata.creation_timestamp_ms, half_life)  # created again: no history
            state.local_queues[lq_key] = obj
            state.trigger(f"cq:{obj.spec.cluster_queue}", seq)
            state.partitions.on_local_queue(state, (obj.metadata.namespace, obj.metadata.name), seq)
        case types.WorkloadPriorityClassObserved(priority_class=obj):
            previous = state.priority_classes.get(obj.metadata.name)
            state.priority_classes[obj.metadata.name] = obj
            if previous is None or previous.value != obj.value:
                _rewrite_own_priorities(state, obj)
            _reorder_priority_class(state, obj.metadata.name)
            state.trigger("*", seq)
        case types.AdmissionCheckObserved(admission_check=obj):
            mk = state.multikueue
            if multikueue.is_multikueue(obj):  # Active from its workers, not as observed (E.1)
                mk.checks[obj.metadata.name] = obj
                obj = multikueue.effective_check(mk, obj)
            elif mk.checks.pop(obj.metadata.name, None) is not None:
                mk.version += 1
            state.admission_checks[obj.metadata.name] = obj
            state.trigger("*", seq)
        case (
            types.MultiKueueClusterObserved()
            | types.MultiKueueConfigObserved()
            | types.WorkerClusterConnectivity()
            | types.RemoteWorkloadObserved()
        ):
            multikueue.fold_fact(state.multikueue, event)
            if not isinstance(event, types.RemoteWorkloadObserved):
                if multikueue.refresh_checks(state.multikueue, state.admission_checks):
                    state.trigger("*", seq)  # a ClusterQueue may have turned (in)active
        case (
            types.WorkersNominated()
            | types.RemoteAdmissionChosen()
            | types.MultiKueueCheckRetry()
            | types.MultiKueueCheckRejected()
        ):
            _apply_multikueue_decision(state, event, seq=seq)
        case types.NamespaceObserved(namespace=obj):
            state.namespaces[obj.metadata.name] = obj
            state.trigger("*", seq)
        case types.ConfigurationObserved(configuration=obj):
            state.configuration = obj
            state.trigger("*", seq)
        case types.DeviceClassObserved(device_class=obj):
            state.device_classes[obj.metadata.name] = obj
            state.devices_version += 1
            state.trigger("*", seq)  # Kueue requeues the workloads DRA made inadmissible
        case types.ResourceClaimTemplateObserved(resource_claim_template=obj):
            state.claim_templates[(obj.metadata.namespace, obj.metadata.name)] = obj
            state.devices_version += 1
            state.trigger("*", seq)
        case types.ResourceSliceObserved(resource_slice=obj):
            state.resource_slices[obj.metadata.name] = obj
            state.devices_version += 1
            state.trigger("*", seq)  # Kueue requeues on ResourceSlice changes (SEMANTICS-ADVANCED F)
        case types.ObjectRejected():
            _fold_rejection(state, event)
        case types.TopologyAssigned():
            _apply_topology_assigned(state, event, seq=seq)
        case types.NodeObserved() | types.PodObserved() | types.TopologyObserved():
            _apply_topology_fact(state, event, seq=seq)
        case types.FactBatch():
            _apply_fact_batch(state, event, seq=seq)
        case types.DispatchApplied() | types.DispatchFailed() | types.DispatchBatchApplied() | types.ChildJobObserved():
            pass  # IGNORED: the Kubernetes side's echo (quota follows the watcher's facts), the dispatcher's cue
        case _:
            _unclassified(event)
    state.last_seq = max(state.last_seq, seq)
    return state


def _unclassified(event: Never) -> NoReturn:
    """The end of :func:`apply`'s dispatch: statically unreachable (mypy proves the ``match``
    exhaustive over ``types.Event``), an explicit error at run time."""
    raise UnknownEventError(
        f"The fold has no case for event type {type(event).__name__}: fold it in cluster.apply "
        "or name it in cluster.IGNORED."
    )


_OBJECT_FACTS: Final[frozenset[type]] = frozenset(
    {
        types.ResourceFlavorObserved,
        types.ClusterQueueObserved,
        types.CohortObserved,
        types.LocalQueueObserved,
        types.WorkloadPriorityClassObserved,
        types.AdmissionCheckObserved,
        types.NamespaceObserved,
        types.ConfigurationObserved,
        types.TopologyObserved,
        types.NodeObserved,
        types.PodObserved,
        types.DeviceClassObserved,
        types.ResourceClaimTemplateObserved,
        types.ResourceSliceObserved,
        types.MultiKueueClusterObserved,
        types.MultiKueueConfigObserved,
        types.ObjectDeleted,
    }
)
"""The facts that say an object is valid as it stands (``*Observed``; WorkloadObserved is folded apart, in
:func:`_apply_workload_fact`), or gone (ObjectDeleted): either ends that object's rejection."""


def _fold_rejection(state: ClusterState, event: types.ObjectRejected) -> None:
    """Keep ``event`` as its object's rejection, at the end of ``rejections`` with a new mark, unless it says what
    the one kept says (the same field and problem, seen again: a resync, a conversion redone), which stays as it
    was, so that a reader of the marks sees each distinct problem once."""
    key = (event.kind, event.namespace, event.name)
    kept = state.rejections.get(key)
    if kept is not None and (kept.field, kept.problem) == (event.field, event.problem):
        return
    _clear_rejection(state, key)
    state.rejections_changed += 1
    state.rejections[key] = event
    state.rejection_marks[key] = state.rejections_changed


def _clear_rejection(state: ClusterState, key: tuple[str, str, str]) -> None:
    """Forget the rejection of the object ``(kind, namespace, name)``, if one is kept: the object was later
    observed valid, or deleted. Without this every pod group seen short of pods, every job refused once, stayed
    in the fold for good."""
    if state.rejections.pop(key, None) is not None:
        state.rejection_marks.pop(key, None)


def _apply_workload_fact(
    state: ClusterState, event: types.WorkloadObserved | types.WorkloadFinished, *, seq: int
) -> None:
    if isinstance(event, types.WorkloadObserved):
        key = event.workload.key
        if state.rejections:  # the Workload, and the job it was made for, are no longer refused
            _clear_rejection(state, ("Workload", event.workload.metadata.namespace, event.workload.metadata.name))
            if (owner := event.workload.owner) is not None:
                _clear_rejection(state, (owner.kind, event.workload.metadata.namespace, owner.name))
        current = state.workloads.get(key)
        if current is None or (
            current.workload.metadata.uid != event.workload.metadata.uid
            and current.gone
            and current.reservation is None
        ):
            if current is not None:
                kueue_metrics.on_forgotten(state, key)
            added = WorkloadState(workload=compact_workload(event.workload), observed_seq=seq)
            state.workloads[added.key] = added  # the one key string, in the map and the state
            kueue_metrics.on_observed(state, added)
        else:
            event = _keep_reserved_pod_sets(state, current, event)
            if current.afs_pending is not None and (
                current.workload.spec.queue_name != event.workload.spec.queue_name
                or (not event.workload.spec.active and current.reservation is None)
            ):
                _afs_drop_pending(state, current)  # moved to another LocalQueue, or inactive without quota
            if current.workload.spec != event.workload.spec:
                current.parked_seq = 0  # a changed workload leaves the inadmissible list
                before, after = current.workload.spec, event.workload.spec
                if (before.pod_sets, before.priority, before.priority_class_ref) != (
                    after.pod_sets,
                    after.priority,
                    after.priority_class_ref,
                ):
                    current.bookmark = None  # its scheduling shape changed (SEMANTICS §3.4, §5.3)
                if current.reservation is not None:
                    _bump_generation(state, current.reservation.cluster_queue, seq)
                    if _priority_changed(before, after):
                        state.trigger(f"{PRIORITY_TRIGGER}{current.reservation.cluster_queue}", seq, released=True)
            elif current.workload.has_closed_preemption_gate != event.workload.has_closed_preemption_gate:
                current.parked_seq = 0  # a gate opened or closed: Kueue queues it again (cluster_queue.go)
            _boost_changed(state, current, event.workload, seq=seq)
            if current.workload.spec.active and not event.workload.spec.active:
                current.requeue_cleared = True  # Kueue clears an inactive workload's requeueState (PR #7734)
            if current.deactivated and not current.workload.spec.active and event.workload.spec.active:
                # Reactivated by its owner (spec.active false -> true): Kueue starts counting anew (§9.2).
                current.deactivated = ""
                current.requeue_count = current.requeue_at_ms = 0
                current.backoff = False
            if current.on_hold and not event.workload.on_hold:
                current.on_hold = False  # its job cleared the hold (statefulset_reconciler.go clearOnHold)
            if current.workload.waiting_for_replacement_pods and not event.workload.waiting_for_replacement_pods:
                # its pod group has its pods again: Kueue's queue manager takes it back into its queue's heap
                # (AddOrUpdateWorkload), not its inadmissible list
                if waits_for_replacement_logic(state):
                    current.parked_seq = 0
            current.workload = compact_workload(event.workload)
            current.observed_seq = seq
            if current.reservation is not None and _elastic(state, event.workload):
                _rescale_elastic(state, current, seq=seq)
        _reindex(state, key)
        return
    current = state.workloads.get(event.workload.key)
    if current is not None and current.finished is None and _same_uid(current, event.workload):
        kueue_metrics.on_finished(state, current, event)
        _afs_drop_pending(state, current)  # finished without admission: it will not settle
        current.finished = _compact_finished(current, event)
        current.finished_seq = seq
        if current.reservation is not None:  # Kueue drops it from the ClusterQueue's cache now (§5.3)
            _bump_generation(state, current.reservation.cluster_queue, seq)
        _reindex(state, event.workload.key)


def _keep_reserved_pod_sets(
    state: ClusterState, current: WorkloadState, event: types.WorkloadObserved
) -> types.WorkloadObserved:
    """``event`` with the pod sets and LocalQueue ``current`` holds quota for, while it holds quota: Kueue's Workload webhook
    refuses a change of ``spec.podSets`` while QuotaReserved is True (workload_webhook.go
    ValidateWorkloadUpdate, SEMANTICS §1.6), so the quota held is always for the shape admitted. Its job's
    reconciler deletes such a Workload and makes a new one instead (jobframework/reconciler.go
    ensureOneWorkload; the watcher's part). Unchanged for a workload with no quota, one deleted (what is
    observed now is its job's new one, folded once the quota is back: :func:`_recreate`) and an elastic slice,
    whose count shrinks in place (:func:`_rescale_elastic`)."""
    if current.reservation is None or current.deleted_seq:
        return event
    kept: dict[str, Any] = {}
    before, after = current.workload.spec.pod_sets, event.workload.spec.pod_sets
    if before != after and not _elastic(state, event.workload):
        kept["pod_sets"] = before
    # spec.queueName too: the Workload CRD's rule "queueName is immutable while workload quota reserved"
    # (Kueue PR #12594 closed its gaps), so a workload drained from its ClusterQueue goes back to its own
    # LocalQueue, not to one an update named while it held quota.
    if current.workload.spec.queue_name != event.workload.spec.queue_name:
        kept["queue_name"] = current.workload.spec.queue_name
    if not kept:
        return event
    spec = msgspec.structs.replace(event.workload.spec, **kept)
    return msgspec.structs.replace(event, workload=msgspec.structs.replace(event.workload, spec=spec))


_intern = sys.intern
_force = msgspec.structs.force_setattr
_EMPTY_DICT: Final[dict[str, str]] = {}
_EMPTY_LIST: Final[list[Any]] = []


def compact_workload(workload: models.Workload) -> models.Workload:
    """``workload`` as the state keeps it, in place: the same values, its repeated strings
    (namespace, label keys and values, queue and pod set names, the owner's kind; not names and
    uids, which are each workload's own) shared through ``sys.intern``, its labels one dict per
    distinct label set (:data:`LABEL_SETS_KEPT`), its empty ``annotations``, ``nodeSelector``,
    ``tolerations`` and ``requiredNodeAffinity`` one shared empty container each (the models are
    frozen: nothing writes to them). A decoded event holds its own copy of every string: 50,000
    workloads of the large-scale bench kept 850,000 ``str`` objects (52 MiB) for 151,000 distinct
    values (docs/benchmarks.md, branch ``leanfold``). Equality, hashing and encoding are unchanged."""
    meta = workload.metadata
    _force(meta, "namespace", _intern(meta.namespace))
    _force(meta, "labels", _shared_labels(meta.labels))
    if not meta.annotations:
        _force(meta, "annotations", _EMPTY_DICT)
    spec = workload.spec
    _force(spec, "queue_name", _intern(spec.queue_name))
    for pod_set in spec.pod_sets:
        _force(pod_set, "name", _intern(pod_set.name))
        if not pod_set.node_selector:
            _force(pod_set, "node_selector", _EMPTY_DICT)
        if not pod_set.tolerations:
            _force(pod_set, "tolerations", _EMPTY_LIST)
        if not pod_set.required_node_affinity:
            _force(pod_set, "required_node_affinity", _EMPTY_LIST)
        if not pod_set.preferred_node_affinity:
            _force(pod_set, "preferred_node_affinity", _EMPTY_LIST)
    owner = workload.owner
    if owner is not None:
        _force(owner, "api_version", _intern(owner.api_version))
        _force(owner, "kind", _intern(owner.kind))
    return workload


LABEL_SETS_KEPT: Final = 4096
"""How many distinct label sets :func:`compact_workload` shares (past that, a workload keeps its own
dict, its strings still interned): a bench's workloads have a handful, a cluster's jobs may each
carry a unique label and must not grow the table without end."""
_label_sets: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}


def _shared_labels(labels: dict[str, str]) -> dict[str, str]:
    """One dict for every workload with the same labels (their strings interned)."""
    if not labels:
        return _EMPTY_DICT
    items = tuple(labels.items())
    shared = _label_sets.get(items)
    if shared is None:
        shared = {_intern(k): _intern(v) for k, v in items}
        if len(_label_sets) < LABEL_SETS_KEPT:
            _label_sets[items] = shared
    return shared


def _compact_finished(current: WorkloadState, event: types.WorkloadFinished) -> types.WorkloadFinished:
    """``event`` (of ``current``'s workload, the same uid) as the state keeps it, in place: its
    reference's strings are the workload's own (:func:`compact_workload`), its reason interned."""
    ref, meta = event.workload, current.workload.metadata
    if ref.namespace == meta.namespace and ref.name == meta.name and ref.uid == meta.uid:
        _force(ref, "namespace", meta.namespace)
        _force(ref, "name", meta.name)
        _force(ref, "uid", meta.uid)
    _force(event, "reason", _intern(event.reason))
    return event


def _elastic(state: ClusterState, workload: models.Workload) -> bool:
    """An elastic slice while ElasticJobsViaWorkloadSlices is on (SEMANTICS-ADVANCED D.1)."""
    return slices.is_elastic(workload.metadata.annotations) and slices.gate_enabled(state.configuration.feature_gates)


def _rescale_elastic(state: ClusterState, current: WorkloadState, *, seq: int) -> None:
    """An elastic slice holding quota scaled down in place (SEMANTICS-ADVANCED D.2): its usage is
    its admission's scaled by the new count over the admitted one, at once (the admission itself
    is not rewritten), and the parked workloads of its cohort tree are requeued. A count above
    the admitted one changes nothing here: a scale-up is a new slice."""
    assert current.reservation is not None
    held = held_reservation(current.reservation, current.workload, current.reclaimable, elastic=True)
    before = current.held or current.reservation
    if held == before:
        return
    cq = current.reservation.cluster_queue
    _add_usage(state, before, sign=-1)
    current.held = held
    _add_usage(state, held, sign=1)
    _bump_generation(state, cq, seq)
    state.trigger(f"cq:{cq}", seq, released=True)


def _apply_workload_status_fact(
    state: ClusterState, event: types.AdmissionCheckStateChanged | types.WorkloadPodsReady, *, seq: int
) -> None:
    current = state.workloads.get(event.workload.key)
    if current is None or current.gone or not _same_uid(current, event.workload):
        return
    if current.reservation is not None:
        _bump_generation(state, current.reservation.cluster_queue, seq)  # an update re-adds it (§5.3)
    if isinstance(event, types.AdmissionCheckStateChanged):
        current.checks[event.check] = event
        current.parked_seq = 0  # a workload update: it leaves the inadmissible list (§3.4)
    elif current.reservation is not None:
        kueue_metrics.on_pods_ready(state, current, event)
        current.pods_ready = event  # reported for this admission; forgotten when the quota goes
    _reindex(state, event.workload.key)


REPLACEMENT_PODS_LOGIC = 57
"""The admitter logic from which a pod group's workload whose group lacks pods (``Workload.
waiting_for_replacement_pods``, the watcher's fact: Kueue's WaitingForReplacementPods True) is kept out of its
queue, neither pending nor tried, until its pods are back (:func:`waits_for_replacement_logic`); a log whose
admitter is older folds it as it did (queued, so admitted again with no pods), so it replays as decided."""


def waits_for_replacement_logic(state: ClusterState) -> bool:
    """Whether the fold keeps a workload waiting for replacement pods out of its queue, as Kueue's IsAdmissible
    (pkg/workload/workload.go) keeps one whose WaitingForReplacementPods condition is True: on a log whose
    admitter is logic 57 or later (``state.admit_logic``; :data:`REPLACEMENT_PODS_LOGIC`). Such a workload holds
    no place in ``pending`` or ``queued``, so it is neither admitted, nor a head, nor counted pending in its
    queues' status and visibility (Kueue's queue manager never holds it)."""
    return state.admit_logic >= REPLACEMENT_PODS_LOGIC


LATE_RETRY_RESET_LOGIC = 54
"""The admitter logic from which an eviction resets a check reported Retry while it is carried out
(:func:`resets_late_retry`); a log whose admitter is older folds such a report as it did, so it replays as
decided."""


def resets_late_retry(state: ClusterState, wl: WorkloadState, event: types.AdmissionCheckStateChanged) -> bool:
    """Whether a check controller's report ``event`` about ``wl`` is reset to Pending by the eviction being carried
    out: a Retry while ``wl`` still holds the quota of an eviction of Kueue's own (not one someone else wrote,
    which resets nothing), on a log whose admitter is logic 54 or later (``state.admit_logic``).

    Kueue's evict.go Evict resets every check it finds not Pending (resetChecksOnEviction), whatever reported
    them, so a second check set to Retry by the same status write as the first, or by one the eviction's own
    status write has not overtaken yet, is reset with it. Here that eviction is decided from the log before the
    dispatcher writes it, so such a report may fold after it; left in Retry it kept the workload, once released,
    out of every cycle for good ("The workload has failed admission checks"). Reset as that eviction resets it,
    the workload is queued again with every check Pending. Pure; the status folds ask it too."""
    return (
        event.state == "Retry"
        and state.admit_logic >= LATE_RETRY_RESET_LOGIC
        and wl.reservation is not None
        and wl.eviction is not None
        and wl.eviction.observed is not True
        and not wl.gone
    )


def late_retry_reset(wl: WorkloadState, event: types.AdmissionCheckStateChanged) -> types.AdmissionCheckStateChanged:
    """The Pending entry a Retry reported while ``wl``'s eviction is carried out becomes (:func:`resets_late_retry`):
    Kueue's reset message, at the report's time (the eviction's, when the report says an earlier one), keeping its
    requeueAfterSeconds."""
    assert wl.eviction is not None
    return types.AdmissionCheckStateChanged(
        workload=event.workload,
        check=event.check,
        state="Pending",
        message=f"{RESET_PREFIX}{event.state}",
        requeue_after_seconds=event.requeue_after_seconds,
        at_ms=max(event.at_ms, wl.eviction.at_ms),
    )


RESET_PREFIX = "Reset to Pending after eviction. Previously: "
"""Kueue's message of a check its eviction reset (evict.go resetChecksOnEviction), before the state it had."""


def _apply_check_fact(state: ClusterState, event: types.AdmissionCheckStateChanged, *, seq: int) -> None:
    """A check controller's report: the workload's check takes it, and a Retry reported while the workload's
    eviction is carried out is reset to Pending at once, a retry counted and its retry time added to the backoff,
    as that eviction resets it (:func:`resets_late_retry`)."""
    current = state.workloads.get(event.workload.key)
    late = current is not None and _same_uid(current, event.workload) and resets_late_retry(state, current, event)
    _apply_workload_status_fact(state, event, seq=seq)
    if not late:
        return
    assert current is not None
    current.check_retries[event.check] = current.check_retries.get(event.check, 0) + 1
    current.checks[event.check] = late_retry_reset(current, event)
    if event.requeue_after_seconds is not None:  # GetMaxRetryTime: the Retry's time counts in the backoff
        current.requeue_at_ms = max(current.requeue_at_ms, event.at_ms + event.requeue_after_seconds * 1000)


def _apply_multikueue_decision(
    state: ClusterState,
    event: types.WorkersNominated
    | types.RemoteAdmissionChosen
    | types.MultiKueueCheckRetry
    | types.MultiKueueCheckRejected,
    *,
    seq: int,
) -> None:
    """A MultiKueue decision (SEMANTICS-ADVANCED E.2, E.3): the nomination and clusterName, and the
    check state it sets, folded as the AdmissionCheckStateChanged it stands for."""
    current = state.workloads.get(event.workload.key)
    if current is None or current.gone or not _same_uid(current, event.workload):
        return
    before = state.multikueue.nominations.get(current.key)
    if isinstance(event, types.WorkersNominated | types.RemoteAdmissionChosen):
        kueue_metrics.on_multikueue(state, current, event, nominated_before=before.clusters if before else ())
    multikueue.fold_decision(state.multikueue, event)
    outcome = multikueue.check_outcome(event)
    if outcome is not None:
        _apply_workload_status_fact(state, outcome, seq=seq)


def _apply_reclaimable(state: ClusterState, event: types.WorkloadReclaimablePods, *, seq: int) -> None:
    """Take the job's reclaimable pods (Kueue's dynamic reclaim): a workload holding quota gives
    back the quota of those pods at once, which wakes the parked workloads of its cohort tree
    (Kueue workload_controller.go: a change of reclaimablePods while admitted requeues them); a
    pending one asks for that many pods fewer (pkg/workload podSetsCountsAfterReclaim).

    Counts above the pod set's size are cut to it (LimitReclaimablePodsToPodSetSizes). Kueue's
    Workload webhook refuses a report naming a pod set the workload does not have, and, while
    the workload holds quota, one lowering or dropping a count (validateReclaimablePodsUpdate):
    such a report is not taken and the counts in force stay. A pod set an elastic slice was
    scaled down in below its admitted count is the exception (scaledDownPodSetNames, Kueue PRs
    #12766, #13044, #13178): its job counts its reclaimable pods again for the smaller pod set,
    and the pods still running keep their quota."""
    current = state.workloads.get(event.workload.key)
    if current is None or current.gone or not _same_uid(current, event.workload):
        return
    sizes = {ps.name: ps.count for ps in current.workload.spec.pod_sets}
    reported = event.counts()
    if any(name not in sizes for name in reported):
        return
    counts = {name: min(count, sizes[name]) for name, count in sorted(reported.items())}
    counts = {name: count for name, count in counts.items() if count > 0}
    before = current.reclaimable
    if counts == before:
        return
    elastic = current.reservation is not None and _elastic(state, current.workload)
    if current.reservation is not None:
        admitted = {psa.name: psa.count for psa in current.reservation.pod_set_assignments} if elastic else {}
        if any(
            counts.get(name, 0) < count and admitted.get(name, 0) <= sizes.get(name, 0)
            for name, count in before.items()
        ):
            return
    current.reclaimable = counts
    current.requests_memo = None  # a pending workload now asks for fewer pods
    if current.reservation is None:
        current.parked_seq = 0  # an update of a pending workload: it leaves the inadmissible list (§3.4)
        current.bookmark = None  # its scheduling shape changed (§5.3)
    else:
        cq = current.reservation.cluster_queue
        _add_usage(state, current.held or current.reservation, sign=-1)
        current.held = held_reservation(current.reservation, current.workload, counts, elastic=elastic)
        _add_usage(state, current.held, sign=1)
        _bump_generation(state, cq, seq)
        state.trigger(f"cq:{cq}", seq, released=True)
    _reindex(state, event.workload.key)


def held_reservation(
    reservation: types.QuotaReserved, workload: models.Workload, reclaimable: dict[str, int], *, elastic: bool = False
) -> types.QuotaReserved:
    """The reservation as it counts against quota once ``reclaimable`` pods (per pod set) are
    given back: a pod set assignment whose pod set, less its reclaimable pods, needs fewer pods
    than were admitted keeps only those, its ``resource_usage`` scaled per pod (integer
    division, as Kueue's Requests.Divide then Mul: pkg/workload totalRequestsFromAdmission);
    a partially admitted pod set that still needs at least its admitted count keeps it all.
    ``elastic``: an elastic slice scaled down in place counts its pod sets' new sizes the same
    way (SEMANTICS-ADVANCED D.2, usage scaled by newCount/admittedCount).
    Returns ``reservation`` itself when nothing changes."""
    if not reclaimable and not elastic:
        return reservation
    sizes = {ps.name: ps.count for ps in workload.spec.pod_sets}
    changed = False
    assignments: list[types.PodSetAssignment] = []
    for psa in reservation.pod_set_assignments:
        size = sizes.get(psa.name, psa.count)
        left = size - min(reclaimable.get(psa.name, 0), size)
        if left < psa.count:
            per_pod = {r: amount // psa.count for r, amount in psa.resource_usage.items()} if psa.count else {}
            psa = msgspec.structs.replace(
                psa, count=left, resource_usage={r: amount * left for r, amount in per_pod.items()}
            )
            changed = True
        assignments.append(psa)
    if not changed:
        return reservation
    return msgspec.structs.replace(reservation, pod_set_assignments=assignments)


def _apply_requeue_decision(state: ClusterState, event: types.WorkloadDeactivated | types.WorkloadRequeued) -> None:
    current = state.workloads.get(event.workload.key)
    if current is None or not _same_uid(current, event.workload):
        return
    current.pending_reason = ""  # its condition changed: the next pending reason is news (issue 15)
    if isinstance(event, types.WorkloadDeactivated):
        kueue_metrics.on_deactivated(state, current, event)
        current.deactivated = event.reason
        current.requeue_count = current.requeue_at_ms = 0  # deactivation clears requeueState (§9.2)
        current.requeue_cleared = False
        current.backoff = False
        current.accumulated_ms = 0
    else:
        kueue_metrics.on_requeued(state, current, event)
        current.backoff = False
    _reindex(state, event.workload.key)


def _evictable(wl: WorkloadState | None) -> bool:
    """Whether an Evicted condition someone else wrote on ``wl`` is news (a WorkloadEvictionObserved to carry out):
    it holds quota, is not being evicted already (an eviction of kueue-es's own, or one carried out) and has not
    ended (finished or deleted)."""
    return (
        wl is not None
        and wl.reservation is not None
        and wl.eviction is None
        and wl.finished is None
        and not wl.deleted_seq
    )


def _reset_checks(wl: WorkloadState, *, at_ms: int) -> None:
    """Kueue's resetChecksOnEviction (evict.go): every check of ``wl`` not Pending goes back to Pending with the
    reset message, a Retry one counting a retry."""
    for name, check in list(wl.checks.items()):
        if check.state != "Pending":
            if check.state == "Retry":
                wl.check_retries[name] = wl.check_retries.get(name, 0) + 1
            wl.checks[name] = types.AdmissionCheckStateChanged(
                workload=check.workload,
                check=name,
                state="Pending",
                message=f"{RESET_PREFIX}{check.state}",
                requeue_after_seconds=check.requeue_after_seconds,
                at_ms=at_ms,
            )


DEACTIVATION_RESET_LOGIC = 56
"""The admitter logic from which the release of a reservation deactivated by hand before it was admitted (one
QuotaReleased ``Deactivated`` standing for the eviction and the release) resets its checks as an eviction does
(:func:`resets_checks_on_release`); a log whose admitter is older folds it as it did, so it replays as decided."""


def resets_checks_on_release(
    state: ClusterState,
    event: types.QuotaReleased,
    *,
    reservation: types.QuotaReserved | None,
    eviction: types.EvictionRequested | None,
) -> bool:
    """Whether ``event``, the release of a workload that held ``reservation`` with ``eviction`` in force just before,
    is also the eviction that resets its admission checks: ``Deactivated`` with no eviction of kueue-es's in force, on a log whose admitter is logic 56 or
    later. Kueue's workload controller evicts every inactive workload (evict.go Evict, which resets every check it
    finds not Pending: resetChecksOnEviction); kueue-es's release of such a reservation stands for that eviction
    (admitter logic 39), and before logic 56 reset nothing, so a check Ready beside one still Pending stayed Ready
    and, once the workload was active again and reserved quota, admitted it without its controller's new answer.
    Pure; the status folds ask it too."""
    return (
        event.reason == "Deactivated"
        and state.admit_logic >= DEACTIVATION_RESET_LOGIC
        and reservation is not None
        and eviction is None
    )


def _evicted(state: ClusterState, wl: WorkloadState, event: types.EvictionRequested) -> None:
    """What an eviction changes at once (SEMANTICS §9.5, §3.3, §3.7): every admission check that is
    not Pending goes back to Pending (a Retry one counts a retry), the requeue state is the
    eviction's, and after a PodsReady timeout or a check's Retry the queue order is by eviction time.
    MultiKueue: the clusterName and the nominated workers go (Kueue evict.go resetClusterNomination). An eviction
    someone else wrote (``observed``, admitter logic 45) changes none of these: only Kueue's evict.go Evict resets
    checks and the nomination, not the job reconciler that carries out an Evicted condition it finds."""
    if event.observed is True:
        return
    multikueue.forget_reservation(state.multikueue, wl.key)
    _reset_checks(wl, at_ms=event.at_ms)
    if event.requeue_count:
        wl.requeue_count = event.requeue_count
        wl.requeue_cleared = False
    if event.requeue_at_ms:
        wl.requeue_at_ms = max(wl.requeue_at_ms, event.requeue_at_ms)
    wait = state.configuration.wait_for_pods_ready or models.WaitForPodsReadyConfig()
    by_eviction = event.reason == "PodsReadyTimeout" and wait.requeuing_strategy.timestamp == "Eviction"
    if by_eviction or event.reason == "AdmissionCheck":
        wl.order_ms = event.at_ms
    if event.reason == "Preempted":  # its Preempted condition, with this preemption's reason (§3.3)
        reclaimed = event.preemption_reason == IN_COHORT_RECLAIM_WHILE_BORROWING
        wl.reclaim_preempted_ms = event.at_ms if reclaimed else 0


def pods_ready_enabled(config: models.Configuration) -> bool:
    """Whether waitForPodsReady is on: Kueue defaults it on (v1beta2, SEMANTICS §0.2)."""
    wait = config.wait_for_pods_ready
    return wait is None or wait.enable


def _reindex(state: ClusterState, key: str, *, gone: WorkloadState | None = None) -> None:
    """Keep ``pending``, ``releasable``, ``queued`` and the §9 indexes in step with the
    workload at ``key`` (``gone``: the state of a workload just removed from ``workloads``)."""
    wl = state.workloads.get(key)
    if wl is None:
        waiting = releasing = active = False
        _index_status(state, key, None)
    else:
        ended = wl.finished is not None or wl.deleted_seq > 0
        active = wl.active and not wl.backoff
        reserved = wl.reservation is not None
        unreserved = not reserved and not ended and not wl.on_hold
        # a pod group waiting for replacement pods is not queued (Kueue's IsAdmissible), though it may be
        # active again (its Requeued ``Reactivated``, :attr:`ClusterState.activation_due`)
        waiting = unreserved and not (wl.workload.waiting_for_replacement_pods and waits_for_replacement_logic(state))
        releasing = reserved and (
            ended or not wl.workload.spec.active or wl.stopped_seq > 0 or bool(wl.workload.on_hold)
        )
        _index_status(state, key, None if ended else wl)
    if state.evicted_by_others and key in state.evicted_by_others and not _evictable(wl):
        del state.evicted_by_others[key]  # evicted, released or gone: nothing left to carry out
    if not (waiting and active):
        state.nominations.pop(key, None)  # a preemptor that got quota or left needs nothing more
        state.preemptors.pop(key, None)
        state.deferred.pop(key, None)
    if waiting:
        state.pending.setdefault(key)
    else:
        state.pending.pop(key, None)
        if wl is not None:  # tried again only if it waits again: the admitter's memo can go
            wl.requests_memo = wl.requests_memo_cq = wl.requests_memo_config = None
    if releasing:
        state.releasable.setdefault(key)
    else:
        state.releasable.pop(key, None)
    if (
        wl is not None
        and unreserved
        and (wl.workload.spec.active == (wl.pending_reason == DEACTIVATED_REASON) or _admission_gate_cleared(wl))
    ):
        state.activation_due.setdefault(key)
    else:
        state.activation_due.pop(key, None)
    current = wl or gone
    if current is not None and (waiting and active or current.queued_as is not None or current.queued_parked):
        _place(state, current, queued=waiting and active)  # (else not queued, nor to be: nothing to move)
    state.partitions.on_workload(state, key)


def _index_status(state: ClusterState, key: str, wl: WorkloadState | None) -> None:
    """Keep ``checks_due``, ``timed``, ``backoffs`` and ``not_ready`` in step (``wl`` None: gone)."""
    if wl is None:
        state.checks_due.pop(key, None)
        state.timed.pop(key, None)
        state.backoffs.pop(key, None)
        state.not_ready.pop(key, None)
        return
    reserved = wl.reservation is not None
    held = reserved and wl.eviction is None
    failed = False
    if wl.checks:
        for check in wl.checks.values():
            if check.state in ("Retry", "Rejected"):
                failed = True
                break
    due = (held and not wl.admitted) or (failed and wl.active)
    ready = wl.pods_ready is not None and wl.pods_ready.ready
    timed = held and wl.admitted and (not ready or bool(wl.workload.spec.maximum_execution_time_seconds))
    backoff = wl.backoff and not reserved
    not_ready = reserved and not ready
    # The four indexes, in and out (written out: a decision of every workload passes here).
    if due:
        state.checks_due[key] = None
    else:
        state.checks_due.pop(key, None)
    if timed:
        state.timed[key] = None
    else:
        state.timed.pop(key, None)
    if backoff:
        state.backoffs[key] = None
    else:
        state.backoffs.pop(key, None)
    if not_ready:
        state.not_ready[key] = None
    else:
        state.not_ready.pop(key, None)
    basis = _timer_basis(wl, ready=ready) if timed else None
    if basis != wl.timer_basis:
        wl.timer_basis = basis
        if basis is not None:
            for heap, base in zip(state.timer_heaps, basis, strict=True):
                if base >= 0:
                    heapq.heappush(heap, (base, key))


TIMER_KINDS = ("start", "recovery", "execution")


def _timer_basis(wl: WorkloadState, *, ready: bool) -> tuple[int, int, int]:
    """The bases of an admitted workload's deadlines, per TIMER_KINDS (-1 where it has none)."""
    recovering = wl.pods_ready is not None and wl.pods_ready.reason == "WaitForRecovery"
    start = wl.admitted_at_ms if not ready and not recovering else -1
    recovery = wl.pods_ready.at_ms if not ready and recovering and wl.pods_ready is not None else -1
    limit = wl.workload.spec.maximum_execution_time_seconds
    execution = wl.admitted_at_ms + limit * 1000 - wl.accumulated_ms if limit else -1
    return start, recovery, execution


def _place(state: ClusterState, wl: WorkloadState, *, queued: bool) -> None:
    """Keep the workload's place in ``state.queued`` in step with its queue, order and parking (and
    ``state.ordered_apart`` with the workloads whose order a feature gate may move)."""
    if queued and (
        wl.reclaim_preempted_ms
        or wl.workload.metadata.annotations.get(PRIORITY_BOOST_ANNOTATION)
        or 0 < wl.parked_seq < wl.boost_changed_seq
    ):
        state.ordered_apart[wl.key] = None
    elif state.ordered_apart:
        state.ordered_apart.pop(wl.key, None)
    placed = wl.queued_as
    if queued:
        workload = wl.workload
        priority = priority_of(workload, state)
        if placed is not None and wl.queued_for is workload and placed[1][:2] == (-priority, wl.queue_ts_ms):
            wanted = placed  # same object, same priority: same queue and order
        else:
            meta = workload.metadata
            order = (-priority, wl.queue_ts_ms, meta.uid, wl.key)  # queue_order_key
            wanted = ((meta.namespace, workload.spec.queue_name), order)
        parked = wl.parked_seq
    else:
        wanted, parked = None, 0
    if wanted is placed and parked == wl.queued_parked:
        return
    if placed is not None and wanted is not None and placed[0] == wanted[0]:
        queue = state.queued[placed[0]]
        queue.discard(placed[1])
        queue.add(wanted[1], parked)
    elif placed != wanted or wl.queued_parked != parked:
        if placed is not None:
            queue = state.queued[placed[0]]
            queue.discard(placed[1])
            if not queue:
                del state.queued[placed[0]]
        if wanted is not None:
            target = state.queued.get(wanted[0])
            if target is None:
                target = state.queued[wanted[0]] = Queued()
            target.add(wanted[1], parked)
    wl.queued_as = wanted
    wl.queued_for = wl.workload if wanted is not None else None
    wl.queued_parked = parked


def _boost_changed(state: ClusterState, current: WorkloadState, after: models.Workload, *, seq: int) -> None:
    """A workload update that changes its ``kueue.x-k8s.io/priority-boost`` annotation. Kueue, with the gate
    PriorityBoost on, moves such a workload off the inadmissible list (cluster_queue.go
    priorityBoostAnnotationChanged) and, for a quota holder whose effective priority changed, requeues the
    inadmissible workloads of its cohort tree (workload.PriorityChanged). Both are kept apart from what older
    deciders read: the change's sequence (``boost_changed_seq``, which the admitter reads as a requeue of that
    workload alone) and a trigger of its own (:data:`BOOST_TRIGGER`), read only while the gate is on."""
    before_value = current.workload.metadata.annotations.get(PRIORITY_BOOST_ANNOTATION, "")
    after_value = after.metadata.annotations.get(PRIORITY_BOOST_ANNOTATION, "")
    if before_value == after_value:
        return
    current.boost_changed_seq = seq
    if current.reservation is None:
        return
    old_ref, new_ref = current.workload.spec.priority_class_ref, after.spec.priority_class_ref
    if old_ref is not None and old_ref.kind == "PriorityClass":
        return  # Kueue does not follow the priority of a workload with a pod PriorityClass
    if new_ref is None or new_ref.kind != "WorkloadPriorityClass" or new_ref.group != "kueue.x-k8s.io":
        return
    if (parse_priority_boost(before_value) or 0) != (parse_priority_boost(after_value) or 0):
        state.trigger(f"{BOOST_TRIGGER}{current.reservation.cluster_queue}", seq, released=True)


BOOST_TRIGGER = "boost:"
"""Prefix of the requeue trigger (``boost:<ClusterQueue>``) that a change of a quota-holding workload's priority boost
records (:func:`_boost_changed`); only admitter logic 37 and later read it, with the gate PriorityBoost on."""

PRIORITY_TRIGGER = "priority:"
"""Prefix of the requeue trigger (``priority:<ClusterQueue>``) that a quota-holding workload's priority change
records; only admitter logic 30 and later read it (``queues.requeue_triggers``), so replay of older logs stays exact."""


def _priority_changed(before: models.WorkloadSpec, after: models.WorkloadSpec) -> bool:
    """Kueue's workload.PriorityChanged (pkg/workload/workload.go): the new spec names a WorkloadPriorityClass
    (never a pod PriorityClass, whose updates Kueue does not support) and either names another one or has
    another effective priority. Kueue then moves the inadmissible workloads of the workload's cohort tree
    back to their queues (workload_controller.go Update): a lower-priority workload holding quota may now be
    a preemption candidate."""
    old_ref, new_ref = before.priority_class_ref, after.priority_class_ref
    if old_ref is not None and old_ref.kind == "PriorityClass":
        return False
    if new_ref is None or new_ref.kind != "WorkloadPriorityClass" or new_ref.group != "kueue.x-k8s.io":
        return False
    if old_ref is None or old_ref.name != new_ref.name:
        return True
    return (before.priority or 0) != (after.priority or 0)


def priority_of(workload: models.Workload, state: ClusterState) -> int:
    """Effective priority (SEMANTICS §1.7, §2.4): a ``spec.priority`` the watcher marked the workload's own
    (:data:`~kueue_es.events.models.OWN_PRIORITY_ANNOTATION`: a Workload observed as an object, or a job's
    whose Workload object's user set it; Kueue's pkg/util/priority Priority reads it, a change by hand
    included); else the current value of the referenced WorkloadPriorityClass (a job's workload: its
    reconciler writes that value in); else ``spec.priority``, else 0."""
    spec = workload.spec
    if spec.priority is not None and models.OWN_PRIORITY_ANNOTATION in workload.metadata.annotations:
        return spec.priority
    ref = spec.priority_class_ref
    if ref is not None and ref.kind == "WorkloadPriorityClass" and ref.name in state.priority_classes:
        # Kueue's WorkloadPriorityClass controller rewrites spec.priority when the class's value changes.
        return state.priority_classes[ref.name].value
    return spec.priority or 0


def _rewrite_own_priorities(state: ClusterState, priority_class: models.WorkloadPriorityClass) -> None:
    """A WorkloadPriorityClass made or given another value: the workloads naming it whose own ``spec.priority``
    counts (:data:`~kueue_es.events.models.OWN_PRIORITY_ANNOTATION`) take its value, as Kueue's
    WorkloadPriorityClass controller writes it into each of them (workloadpriorityclass_controller.go
    Reconcile). A later change of ``spec.priority`` by hand counts again."""
    name, value = priority_class.metadata.name, priority_class.value
    for wl in state.workloads.values():
        workload = wl.workload
        ref = workload.spec.priority_class_ref
        if ref is None or ref.kind != "WorkloadPriorityClass" or ref.name != name:
            continue
        if models.OWN_PRIORITY_ANNOTATION not in workload.metadata.annotations or workload.spec.priority == value:
            continue
        wl.workload = msgspec.structs.replace(workload, spec=msgspec.structs.replace(workload.spec, priority=value))


PRIORITY_BOOST_ANNOTATION: Final = models.PRIORITY_BOOST_ANNOTATION
PRIORITY_BOOST_GATE: Final = "PriorityBoost"
PRIORITY_SORTING_GATE: Final = "PrioritySortingWithinCohort"
PRIORITIZE_PREEMPTORS_GATE: Final = "PrioritizePreemptorWorkloads"
IN_COHORT_RECLAIM_WHILE_BORROWING: Final = "InCohortReclaimWhileBorrowing"
_INT32 = re.compile(r"[+-]?[0-9]+")


def parse_priority_boost(value: str) -> int | None:
    """The ``kueue.x-k8s.io/priority-boost`` annotation's value as Kueue reads it (a signed decimal
    32-bit integer, Go's strconv.ParseInt(value, 10, 32)): 0 for ``""``, None when it is not one."""
    if value == "":
        return 0
    if not _INT32.fullmatch(value):
        return None
    boost = int(value)
    return boost if -(2**31) <= boost < 2**31 else None


def priority_boost(workload: models.Workload, config: models.Configuration) -> int:
    """The boost a workload's ``kueue.x-k8s.io/priority-boost`` annotation adds to its priority (KEP 7990):
    0 while the feature gate PriorityBoost (alpha, off by default) is off, without the annotation, or
    when its value is not an integer (Kueue's webhook refuses such a value; its scheduler reads it as 0).
    Kueue: pkg/util/priority/priority.go PriorityBoost, EffectivePriority."""
    value = workload.metadata.annotations.get(PRIORITY_BOOST_ANNOTATION)
    if not value or not config.feature_gates.get(PRIORITY_BOOST_GATE, False):
        return 0
    return parse_priority_boost(value) or 0


def effective_priority(workload: models.Workload, state: ClusterState) -> int:
    """Kueue's EffectivePriority (pkg/util/priority/priority.go): :func:`priority_of` plus
    :func:`priority_boost`. It orders queues and entries and decides preemption; ``spec.priority``
    and the visibility API show the base priority."""
    return priority_of(workload, state) + priority_boost(workload, state.configuration)


def queue_order_ts(wl: WorkloadState, config: models.Configuration) -> int:
    """Kueue's queue-order timestamp (ms; pkg/workload/workload.go GetQueueOrderTimestamp, SEMANTICS §3.3):
    the eviction time after a PodsReadyTimeout or AdmissionCheck eviction (``order_ms``); else, while the
    gate PrioritySortingWithinCohort is off, 1 ms after a preemption with reason
    InCohortReclaimWhileBorrowing (so the preemptor, created earlier, goes first); else the creation time."""
    if wl.order_ms:
        return wl.order_ms
    if wl.reclaim_preempted_ms and not config.feature_gates.get(PRIORITY_SORTING_GATE, True):
        return wl.reclaim_preempted_ms + 1
    return wl.workload.metadata.creation_timestamp_ms


def order_gates_move(config: models.Configuration) -> bool:
    """Whether a feature gate of ``config`` may move a workload of ``ClusterState.ordered_apart`` away from
    its place in the fold's queue order: PriorityBoost on or PrioritySortingWithinCohort off."""
    gates = config.feature_gates
    return bool(gates.get(PRIORITY_BOOST_GATE, False)) or not gates.get(PRIORITY_SORTING_GATE, True)


def effective_order(wl: WorkloadState, state: ClusterState) -> Order:
    """Kueue's ClusterQueue heap order of ``wl`` under the Configuration's feature gates (cluster_queue.go
    baseCompareFunc): higher :func:`effective_priority`, earlier :func:`queue_order_ts`, UID, then key. The
    fold's order key (:func:`queue_order_key`) when no gate moves it."""
    workload = wl.workload
    config = state.configuration
    return (-effective_priority(workload, state), queue_order_ts(wl, config), workload.metadata.uid, wl.key)


def queue_order_key(workload: models.Workload, state: ClusterState) -> tuple[int, int, str, str]:
    """Kueue's ClusterQueue heap order (SEMANTICS §3.2): higher priority, earlier creation, UID, then name."""
    meta = workload.metadata
    return (-priority_of(workload, state), meta.creation_timestamp_ms, meta.uid, workload.key)


def _reorder_priority_class(state: ClusterState, name: str) -> None:
    """A WorkloadPriorityClass changed: re-place the workloads that name it in their queues."""
    for key, wl in state.workloads.items():
        ref = wl.workload.spec.priority_class_ref
        if ref is not None and ref.name == name:
            wl.bookmark = None  # the effective priority is part of the scheduling shape (§5.3)
            _reindex(state, key)


def _apply_deleted(state: ClusterState, event: types.ObjectDeleted, *, seq: int) -> None:
    match event.kind:
        case "Workload":
            current = state.workloads.get(f"{event.namespace}/{event.name}")
            if current is not None and current.deleted_seq == 0 and _same_uid(current, event):
                current.deleted_seq = seq
                _afs_drop_pending(state, current)  # deleted before it settled (workload_controller.go Delete)
                if current.reservation is not None:  # gone from the ClusterQueue's cache (§5.3)
                    _bump_generation(state, current.reservation.cluster_queue, seq)
                if current.reservation is None:
                    del state.workloads[f"{event.namespace}/{event.name}"]
                    kueue_metrics.on_forgotten(state, current.key)
                    multikueue.forget_workload(state.multikueue, current.key)
                _reindex(state, f"{event.namespace}/{event.name}", gone=current)
        case "ResourceFlavor":
            gone_flavor = state.flavors.pop(event.name, None)
            if gone_flavor is not None and gone_flavor.spec.topology_name:
                state.partitions.on_flavor(state, seq)
        case "ClusterQueue":
            state.cluster_queues.pop(event.name, None)
            kueue_metrics.on_queue_deleted(state, "ClusterQueue", "", event.name)
            state.structure_generation = max(state.structure_generation, seq)
            state.quota_tree = None
            state.partitions.on_cluster_queue(state, event.name, seq)
        case "Cohort":
            gone_cohort = state.cohorts.pop(event.name, None)
            state.structure_generation = max(state.structure_generation, seq)
            state.quota_tree = None
            if gone_cohort is not None and gone_cohort.spec.parent_name:
                state.partitions.on_cohort(state, seq)
        case "LocalQueue":
            state.local_queues.pop((event.namespace, event.name), None)
            kueue_metrics.on_queue_deleted(state, "LocalQueue", event.namespace, event.name)
            state.partitions.on_local_queue(state, (event.namespace, event.name), seq)
        case "WorkloadPriorityClass":
            state.priority_classes.pop(event.name, None)
            _reorder_priority_class(state, event.name)
        case "Namespace":
            state.namespaces.pop(event.name, None)
        case "AdmissionCheck":
            state.admission_checks.pop(event.name, None)
        case "Configuration":
            state.configuration = models.Configuration()
        case "DeviceClass":
            state.device_classes.pop(event.name, None)
            state.devices_version += 1
        case "ResourceClaimTemplate":
            state.claim_templates.pop((event.namespace, event.name), None)
            state.devices_version += 1
        case "ResourceSlice":
            state.resource_slices.pop(event.name, None)
            state.devices_version += 1


def _same_uid(current: WorkloadState, ref: types.WorkloadRef | types.ObjectDeleted) -> bool:
    uid = current.workload.metadata.uid
    return not ref.uid or not uid or ref.uid == uid


def _apply_workload_decision(
    state: ClusterState,
    event: types.QuotaReserved
    | types.WorkloadAdmitted
    | types.WorkloadInadmissible
    | types.PendingOutcome
    | types.QuotaReleased,
    *,
    seq: int,
) -> None:
    key = event.workload.key
    current = state.workloads.get(key)
    if current is None:
        return
    if key in state.metrics.requeue_due and not isinstance(event, types.QuotaReleased):
        kueue_metrics.on_decided(state, current, event)  # waiting for Requeued=True: it may have come
    # By exact type, the most frequent first (a class pattern would call the Struct metaclass's __instancecheck__
    # for each case tried): a record's pending outcomes are most of a busy cycle's decisions. A PendingOutcome
    # folds as the WorkloadInadmissible it stands for.
    if type(event) is types.PendingOutcome or type(event) is types.WorkloadInadmissible:
        if not state.metrics.attempt_counted:  # the first try of the admitter's open cycle
            kueue_metrics.on_attempted(state, reserved=False)
        current.pending_message = event.message
        current.pending_reason = event.reason
        current.bookmark = event.bookmark
        current.parked_seq = seq if event.parked else 0
        if event.parked:
            if seq == state.carried_seq:
                state.carried_parked = True  # parked by a decision its record carries (see trigger)
            state.preemptors.pop(key, None)  # parked: no longer the sticky head (§3.9)
            state.deferred.pop(key, None)
        elif event.reason == WAITING_FOR_PREEMPTED and current.reservation is None and not current.gone:
            lq = state.local_queues.get((key.partition("/")[0], current.workload.spec.queue_name))
            if lq is not None:
                state.deferred[key] = lq.spec.cluster_queue
        if (
            current.reservation is None
            and not current.gone
            and current.active
            and not current.backoff
            and key not in state.activation_due
        ):
            # Still waiting, so every index but its place in the queue is as it was.
            _place(state, current, queued=True)
            return
    elif type(event) is types.QuotaReserved:
        if current.reservation is None:
            _reserve(state, current, event, key=key, seq=seq)
            _afs_reserved(state, current)
    elif type(event) is types.WorkloadAdmitted:
        if types.reserves(event, current.reservation is not None):
            # reserved and admitted by one message (issue 18): its reservation first, as the pair did
            _reserve(state, current, types.reservation_of(event), key=key, seq=seq)
        if current.reservation is not None and not current.admitted:
            kueue_metrics.on_admitted(state, current, event)
            _afs_admitted(state, current, at_ms=event.at_ms)
            current.admitted_at_ms = event.at_ms
            _bump_generation(state, current.reservation.cluster_queue, seq)
        current.admitted = current.reservation is not None
    elif type(event) is types.QuotaReleased:
        if current.reservation is not None:
            kueue_metrics.on_released(state, current, event)
            if not current.workload.spec.active:
                _afs_drop_pending(state, current)  # inactive without quota: it will not settle
            if event.reason == slices.REPLACED_REASON and current.finished is None:
                _slice_replaced(state, current, event, seq=seq)
            _afs_released(state, current, at_ms=event.at_ms)
            _add_usage(state, current.held or current.reservation, sign=-1)
            if current.topology is not None:
                _release_topology(state, current)
            cq = current.reservation.cluster_queue
            state.trigger(f"cq:{cq}", seq, released=True)
            _bump_generation(state, cq, seq)
            held = state.reserved.get(cq, {})
            held.pop(key, None)
            if not held:
                state.reserved.pop(cq, None)
            if current.admitted and current.admitted_at_ms:
                current.accumulated_ms += max(0, event.at_ms - current.admitted_at_ms)
            if current.eviction is not None and current.requeue_at_ms > event.at_ms:
                current.backoff = not current.deactivated  # Requeued=False until requeueAt (§3.7)
            if resets_checks_on_release(state, event, reservation=current.reservation, eviction=current.eviction):
                _reset_checks(current, at_ms=event.at_ms)
            current.on_hold = event.reason == ON_HOLD_REASON
            current.reservation = current.held = None
            current.admitted = False
            current.admitted_at_ms = 0
            current.pods_ready = None
            current.pending_message = current.pending_reason = ""
            current.eviction = None
            current.stopped_seq = 0
            if current.finished is None:
                multikueue.forget_reservation(state.multikueue, key)
        if current.deleted_seq:
            del state.workloads[key]
            kueue_metrics.on_forgotten(state, key)
            multikueue.forget_workload(state.multikueue, key)
            if current.observed_seq > current.deleted_seq:
                _recreate(state, current)
    _reindex(state, key, gone=current)


def _recreate(state: ClusterState, deleted: WorkloadState) -> None:
    """``deleted`` was observed again after its deletion, while it still held quota: its job made a new
    Workload (Kueue's job reconciler creates one for a job that has none, reconciler.go
    handleJobWithNoWorkload; or a namesake Workload object was created). The quota of the deleted one is
    back now, so the new one starts afresh from what was last observed: pending, no record of the old."""
    added = WorkloadState(workload=deleted.workload, observed_seq=deleted.observed_seq)
    state.workloads[added.key] = added
    kueue_metrics.on_observed(state, added)


def replacement_of(state: ClusterState, key: str) -> WorkloadState | None:
    """The slice holding quota that replaces slice ``key`` (``namespace/name``; its
    ``kueue.x-k8s.io/workload-slice-replacement-for`` names it), or None. An elastic one first (all
    admitter logic 35 and earlier replaced a slice with), else one with the annotation alone (logic 36,
    as Kueue's ReplacementForKey: a Workload made by hand). A scan of every workload: asked only when a
    slice is replaced."""
    holders = [wl for wl in state.workloads.values() if wl.reservation is not None]
    found = next((wl for wl in holders if slices.replacement_for(wl.workload) == key), None)
    return found or next((wl for wl in holders if slices.replacement_key(wl.workload) == key), None)


def _slice_replaced(state: ClusterState, current: WorkloadState, event: types.QuotaReleased, *, seq: int) -> None:
    """The admitter released an elastic slice because its replacement was admitted in the same
    batch (SEMANTICS-ADVANCED D.3): the slice is Finished ``WorkloadSliceReplaced``, naming the
    replacement's Workload (namespace/name: its object's UID is not on the log; the dispatcher
    writes it on the object) and its job's UID, and kueue_replaced_workload_slices_total counts it
    (scheduler.go replaceWorkloadSlice)."""
    found = replacement_of(state, current.workload.key)
    new = found.workload if found is not None else None
    new_key = new.key if new is not None else ""
    job_uid = new.metadata.labels.get("kueue.x-k8s.io/job-uid", "") if new is not None else ""
    current.finished = types.WorkloadFinished(
        workload=current.ref,
        succeeded=True,
        reason=slices.REPLACED_REASON,
        message=slices.replaced_by_message(new_key=new_key, job_uid=job_uid),
        at_ms=event.at_ms,
    )
    current.finished_seq = seq
    kueue_metrics.on_slice_replaced(state, event)


def _reserve(state: ClusterState, current: WorkloadState, event: types.QuotaReserved, *, key: str, seq: int) -> None:
    """``current`` (holding no quota) takes the reservation ``event`` stored at ``seq``."""
    kueue_metrics.on_reserved(state, current, event)
    current.reservation = event
    current.parked_seq = 0
    current.bookmark = None
    _bump_generation(state, event.cluster_queue, seq)
    current.order_ms = 0  # Evicted is reset on the next reservation (§9.1)
    current.reclaim_preempted_ms = 0  # and so is Preempted
    current.pods_ready = None
    state.reserved.setdefault(event.cluster_queue, {})[key] = None
    current.held = held_reservation(
        event, current.workload, current.reclaimable, elastic=_elastic(state, current.workload)
    )
    _add_usage(state, current.held, sign=1)


def _apply_preemption(
    state: ClusterState,
    event: types.PreemptionRequired | types.PreemptionIssued | types.EvictionRequested,
    *,
    seq: int,
) -> None:
    current = state.workloads.get(event.workload.key)
    if current is None or not _same_uid(current, event.workload):
        return
    match event:
        case types.PreemptionRequired():
            if not state.metrics.attempt_counted:  # a head the cycle tried: it waits for its preemptions
                kueue_metrics.on_attempted(state, reserved=False)
            if current.reservation is None and not current.gone:
                state.nominations[event.workload.key] = (seq, event)
                current.pending_message, current.pending_reason = event.message, ""
                current.bookmark = None  # preemptions issued: the next scan starts over (§5.3)
                current.parked_seq = 0
                _place(state, current, queued=current.active and not current.backoff)
        case types.PreemptionIssued():
            open_nomination = state.nominations.get(event.workload.key)
            if open_nomination is not None and open_nomination[0] == event.nomination_seq:
                del state.nominations[event.workload.key]
            if event.targets and current.reservation is None and not current.gone:
                state.preemptors[event.workload.key] = event
            else:
                state.preemptors.pop(event.workload.key, None)
        case types.EvictionRequested():
            if current.reservation is not None and current.eviction is None:
                if event.observed is not True:  # one someone else wrote: Kueue counts nothing (only evict.go does)
                    kueue_metrics.on_evicted(state, current, event)
                    if event.reason == "Preempted":
                        current.preempted_count += 1
                current.eviction = event
                _bump_generation(state, current.reservation.cluster_queue, seq)
                _evicted(state, current, event)
                _reindex(state, event.workload.key)


ADMISSION_GATED_REASON = "AdmissionGated"
"""The pending reason of a workload its ``kueue.x-k8s.io/admission-gated-by`` annotation keeps out of its queue."""
ADMISSION_GATED_PREFIX = "Admission is gated by: "
"""Its message's start (workload_controller.go mayUpdateConditionForAdmissionGatedBy); a preemption gate's differs."""
ADMISSION_GATED_BY_ANNOTATION = "kueue.x-k8s.io/admission-gated-by"


def _admission_gate_cleared(wl: WorkloadState) -> bool:
    """Whether ``wl`` is pending ``AdmissionGated`` for its annotation and no longer carries it (an empty value
    gates nothing): Kueue's workload controller then writes QuotaReserved ``PendingEvaluation`` and the Event
    ``AdmissionGateCleared`` before its scheduler looks at it (admitter logic 44)."""
    return (
        wl.pending_reason == ADMISSION_GATED_REASON
        and wl.pending_message.startswith(ADMISSION_GATED_PREFIX)
        and not wl.workload.metadata.annotations.get(ADMISSION_GATED_BY_ANNOTATION)
    )


DEACTIVATED_REASON = "Deactivated"
"""The pending reason the admitter records for a workload set inactive while it holds no quota (Kueue's
kueue.WorkloadDeactivated): the fold keeps it out of ``activation_due`` from then on."""
ADMITTER_ROLE = "admit"
"""The admitter's DecisionRecord role (kueue_es.services.admitter.core.ROLE; the fold imports no service)."""
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
"""The pending reason of a workload that fits once the cycle's preemptions complete (Kueue's DeferredFit,
kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads): the fold makes it ``deferred``."""


def _bump_generation(state: ClusterState, cluster_queue: str, seq: int) -> None:
    """Advance Kueue's AllocatableResourceGeneration of ``cluster_queue`` (SEMANTICS §5.3;
    pkg/cache/scheduler/clusterqueue.go deleteWorkload, resource_node.go
    updateClusterQueueResourceNode): Kueue bumps it whenever a workload leaves the
    ClusterQueue's cache, and every update of a workload holding quota there (its own
    admission's echo, a condition, PodsReady, a check) removes and re-adds it. Here: a
    reservation, admission, eviction, release, or a status or spec fact of a workload holding
    quota there. Only "advanced since the bookmark" matters, so extra bumps are harmless; the value is the
    sequence of the latest bump, not a count, so that the fold stays idempotent."""
    # The log sequence of the latest bump: monotonic, and folding an event twice changes nothing.
    state.cq_generations[cluster_queue] = max(state.cq_generations.get(cluster_queue, 0), seq)


def _usage_by_resource(wl: WorkloadState) -> dict[str, int]:
    """The quota ``wl`` holds, summed over flavors per resource (millicores for CPU, bytes for memory)."""
    assert wl.reservation is not None
    usage: dict[str, int] = {}
    for (_, resource), amount in quota.reservation_usage(wl.held or wl.reservation).items():
        usage[resource] = usage.get(resource, 0) + amount
    return usage


def _afs_reserved(state: ClusterState, wl: WorkloadState) -> None:
    """Admission fair sharing: a workload reserving quota (not admitted by the same message) pushes its entry
    penalty, pending in its LocalQueue's ledger until it is admitted (Kueue's scheduler.go updateEntryPenalty
    at assume time, SEMANTICS §8); a new reservation replaces its earlier record, never stacks on it."""
    assert wl.reservation is not None
    config = state.configuration
    if not afs.active(state.cluster_queues.get(wl.reservation.cluster_queue), config):
        return
    usage = _usage_by_resource(wl)
    _afs_drop_pending(state, wl)
    lq = (wl.workload.metadata.namespace, wl.workload.spec.queue_name)
    ledger = state.afs_ledgers.setdefault(lq, afs.Ledger(last_ms=wl.reservation.at_ms))
    ledger.pending[wl.key] = afs.entry_penalty(usage, config)
    wl.afs_pending = lq


def _afs_drop_pending(state: ClusterState, wl: WorkloadState) -> None:
    """Forget ``wl``'s unsettled entry penalty (settled by its admission, or never to be: Kueue's SubPenalty)."""
    if wl.afs_pending is None:
        return
    ledger = state.afs_ledgers.get(wl.afs_pending)
    if ledger is not None:
        ledger.pending.pop(wl.key, None)
        ledger.dropped.discard(wl.key)
    wl.afs_pending = None


def _afs_admitted(state: ClusterState, wl: WorkloadState, *, at_ms: int) -> None:
    """Admission fair sharing: the LocalQueue's ledger takes the entry penalty and the usage (SEMANTICS §8);
    the penalty pending since its reservation is settled by it."""
    assert wl.reservation is not None
    pending_in = state.afs_ledgers.get(wl.afs_pending) if wl.afs_pending is not None else None
    record_dropped = pending_in is not None and wl.key in pending_in.dropped
    _afs_drop_pending(state, wl)
    config = state.configuration
    if not afs.active(state.cluster_queues.get(wl.reservation.cluster_queue), config):
        return
    usage = _usage_by_resource(wl)
    lq = (wl.workload.metadata.namespace, wl.workload.spec.queue_name)
    ledger = state.afs_ledgers.setdefault(lq, afs.Ledger(last_ms=at_ms))
    ledger.advance(at_ms, afs.half_life_s(config))
    penalties = afs.entry_penalty(usage, config)
    for resource, penalty in penalties.items():
        ledger.consumed[resource] = ledger.consumed.get(resource, 0.0) + penalty
    if record_dropped:  # its record went with the deleted LocalQueue: Kueue settles nothing (SubPenalty)
        ledger.carry(penalties, at_ms, afs.half_life_s(config))
    for resource, amount in usage.items():
        ledger.admitted[resource] = ledger.admitted.get(resource, 0) + amount
    wl.afs_usage = (lq, usage)


def _afs_released(state: ClusterState, wl: WorkloadState, *, at_ms: int) -> None:
    if wl.afs_usage is None:
        return
    lq, usage = wl.afs_usage
    wl.afs_usage = None
    ledger = state.afs_ledgers.get(lq)
    if ledger is None or state.configuration.admission_fair_sharing is None:
        return
    ledger.advance(at_ms, afs.half_life_s(state.configuration))
    for resource, amount in usage.items():
        ledger.admitted[resource] = ledger.admitted.get(resource, 0) - amount


def _add_usage(state: ClusterState, reservation: types.QuotaReserved, *, sign: int) -> None:
    shift_usage(state.usage.setdefault(reservation.cluster_queue, {}), reservation, sign=sign)
    if state.quota_tree is not None:
        state.quota_tree.shift_reservation(reservation.cluster_queue, quota.reservation_usage(reservation), sign=sign)


def shift_usage(usage: dict[str, dict[str, int]], reservation: types.QuotaReserved, *, sign: int) -> None:
    """Add (``sign=1``) or remove (``sign=-1``) a reservation's quota in one ClusterQueue's
    ``usage[flavor][resource]`` map, in place."""
    for assignment in reservation.pod_set_assignments:
        for resource, amount in assignment.resource_usage.items():
            flavor = assignment.flavors.get(resource)
            if flavor is None:
                continue
            resources = usage.setdefault(flavor, {})
            resources[resource] = resources.get(resource, 0) + sign * amount


# --- TAS (SEMANTICS-ADVANCED A.2) ---------------------------------------------------------------


def _apply_topology_fact(
    state: ClusterState,
    event: types.NodeObserved | types.PodObserved | types.TopologyObserved | types.ObjectDeleted,
    *,
    seq: int,
) -> None:
    """Fold a Node, Pod or Topology fact (or deletion) into ``state.topology`` and record the
    requeue trigger A.2.3 asks for: a node matching some TAS flavor ⇒ every ClusterQueue; a
    Topology ⇒ every ClusterQueue (rare: its flavors' queues); a non-TAS pod freeing capacity
    ⇒ the ClusterQueues using a flavor whose tree holds its node. A fact equal to what is
    known changes nothing."""
    topo = state.topology
    match event:
        case types.NodeObserved(node=node):
            old_node = topo.nodes.get(node.metadata.name)
            if old_node == node:
                return
            if old_node is None or (old_node.spec.taints, old_node.status.ready, old_node.progressing_workloads) != (
                node.spec.taints,
                node.status.ready,
                node.progressing_workloads,
            ):
                # Kueue's node controller looks at a node's workloads again when its taints, its Ready
                # status or its pods change (node_controller.go Update, nodeFailurePodHandler)
                state.node_health_seq[node.metadata.name] = seq
            pods_only = old_node is not None and old_node == msgspec.structs.replace(
                node, progressing_workloads=old_node.progressing_workloads
            )
            touches = not pods_only and (_node_in_tas(topo, old_node) or _node_in_tas(topo, node))
            topo.apply(event)
            if touches:
                state.trigger("*", seq, released=True)
        case types.ObjectDeleted(kind="Node"):
            old_node = topo.nodes.get(event.name)
            if old_node is None:
                return
            topo.apply(event)
            if _node_in_tas(topo, old_node):
                state.trigger("*", seq, released=True)
        case types.PodObserved(pod=pod):
            key = (pod.namespace, pod.name)
            old_pod = topo.pods.get(key)
            if old_pod == pod:
                return
            flavors = _freed_flavors(topo, old_pod, pod)
            topo.apply(event)
            _trigger_flavors(state, flavors, seq)
        case types.ObjectDeleted(kind="Pod"):
            old_pod = topo.pods.get((event.namespace, event.name))
            if old_pod is None:
                return
            flavors = _freed_flavors(topo, old_pod, None)
            topo.apply(event)
            _trigger_flavors(state, flavors, seq)
        case types.TopologyObserved(topology=obj):
            if topo.topologies.get(obj.metadata.name) == obj:
                return
            topo.apply(event)
            state.trigger("*", seq)
        case types.ObjectDeleted(kind="Topology"):
            if event.name not in topo.topologies:
                return
            topo.apply(event)
            state.trigger("*", seq)


def _node_in_tas(topo: TopologyState, node: models.Node | None) -> bool:
    """Whether ``node`` carries the labels of some TAS flavor and every level of its topology."""
    if node is None:
        return False
    labels = node.metadata.labels
    for flavor in topo.flavors.values():
        name = flavor.spec.topology_name
        topology = topo.topologies.get(name) if name else None
        if (
            topology is not None
            and all(labels.get(k) == v for k, v in flavor.spec.node_labels.items())
            and all(level in labels for level in topology.level_keys)
        ):
            return True
    return False


def _freed_flavors(topo: TopologyState, old: models.PodUsage | None, new: models.PodUsage | None) -> list[str]:
    """The TAS flavors whose tree holds the node on which a non-TAS pod freed capacity (A.2.3)."""
    if not topology.frees_capacity(old, new):
        return []
    return [
        f
        for f in topo.tas_flavors()
        if (tree := topo.flavor_topology(f)) is not None and old.node_name in tree.node_to_leaf
    ]


def _trigger_flavors(state: ClusterState, flavors: list[str], seq: int) -> None:
    """A requeue trigger for every ClusterQueue naming one of ``flavors``."""
    if not flavors:
        return
    wanted = set(flavors)
    for name, cq in state.cluster_queues.items():
        if any(fq.name in wanted for group in cq.spec.resource_groups for fq in group.flavors):
            state.trigger(f"cq:{name}", seq, released=True)


def _apply_topology_assigned(state: ClusterState, event: types.TopologyAssigned, *, seq: int) -> None:
    """A TopologyAssigned for a workload holding quota: its assignments (merged per pod set
    over earlier ones of the same reservation) and their TAS usage (A.2.2)."""
    current = state.workloads.get(event.workload.key)
    if current is None or current.reservation is None or not _same_uid(current, event.workload):
        return
    assignments = {**(current.topology or {}), **event.assignments}
    if current.topology is not None:
        _release_topology(state, current)
    current.topology = assignments
    current.topology_seq = seq
    current.tas_usage = tas_usage_of(state, current.workload, current.reservation, assignments)
    _shift_tas_usage(state.tas_usage, current.tas_usage, sign=1)


def _release_topology(state: ClusterState, wl: WorkloadState) -> None:
    if wl.tas_usage:
        _shift_tas_usage(state.tas_usage, wl.tas_usage, sign=-1)
    wl.topology = wl.tas_usage = None


def tas_flavor_of(state: ClusterState, assignment: types.PodSetAssignment) -> str | None:
    """The TAS flavor among a pod set assignment's flavors (None when it has none)."""
    for flavor in assignment.flavors.values():
        obj = state.flavors.get(flavor)
        if obj is not None and obj.spec.topology_name:
            return flavor
    return None


def tas_usage_of(
    state: ClusterState,
    workload: models.Workload,
    reservation: types.QuotaReserved,
    assignments: dict[str, models.TopologyAssignment],
) -> dict[str, dict[str, dict[str, int]]]:
    """The TAS usage of ``assignments`` per TAS flavor and leaf ID: the raw per-pod requests
    of the pod set × pods, plus ``pods`` (A.2.2; Kueue utiltas.ComputeUsagePerDomain)."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    pod_sets = {ps.name: ps for ps in workload.spec.pod_sets}
    for psa in reservation.pod_set_assignments:
        ta = assignments.get(psa.name)
        pod_set = pod_sets.get(psa.name)
        flavor = tas_flavor_of(state, psa) if ta is not None else None
        if ta is None or pod_set is None or flavor is None:
            continue
        per_leaf = out.setdefault(flavor, {})
        for domain in tas.decode(ta).domains:
            bucket = per_leaf.setdefault(tas.domain_id(domain.values), {})
            for res, amount in pod_set.requests.items():
                if amount and res != "pods":
                    bucket[res] = bucket.get(res, 0) + amount * domain.count
            bucket["pods"] = bucket.get("pods", 0) + domain.count
    return out


def _shift_tas_usage(
    into: dict[str, dict[str, dict[str, int]]], usage: dict[str, dict[str, dict[str, int]]], *, sign: int
) -> None:
    for flavor, leaves in usage.items():
        per_leaf = into.setdefault(flavor, {})
        for leaf, requests in leaves.items():
            bucket = per_leaf.setdefault(leaf, {})
            for res, amount in requests.items():
                left = bucket.get(res, 0) + sign * amount
                if left:
                    bucket[res] = left
                else:
                    bucket.pop(res, None)
            if not bucket:
                del per_leaf[leaf]
        if not per_leaf:
            del into[flavor]


def _apply_fact_batch(state: ClusterState, event: types.FactBatch, *, seq: int) -> None:
    """A FactBatch (schema 16): its facts in order, each as it would fold alone at the batch's sequence."""
    for fact in event.facts:
        apply(state, fact, seq=seq)


_FOLD_BY_TYPE: Final[dict[type, Any]] = {
    **dict.fromkeys(
        (types.WorkloadInadmissible, types.QuotaReserved, types.WorkloadAdmitted, types.QuotaReleased),
        _apply_workload_decision,
    ),
    **dict.fromkeys((types.WorkloadObserved, types.WorkloadFinished), _apply_workload_fact),
    types.AdmissionCheckStateChanged: _apply_check_fact,
    types.WorkloadPodsReady: _apply_workload_status_fact,
    **dict.fromkeys((types.PreemptionRequired, types.PreemptionIssued, types.EvictionRequested), _apply_preemption),
    types.FactBatch: _apply_fact_batch,
}
"""The event types :func:`apply` hands to one function whatever the event holds (its first cases), by
exact type, called as its ``match`` calls them (``fn(state, event, seq=seq)``)."""
