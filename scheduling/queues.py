"""Queues: which pending workloads a cycle looks at, and in what order (SEMANTICS §3).

Kueue keeps, per ClusterQueue, a heap of pending workloads and an inadmissible
list. Here both are derived from the folded log: a workload is *queued* when its
LocalQueue and ClusterQueue exist and are usable; it is *parked* (inadmissible)
from the WorkloadInadmissible decision that parked it until a requeue trigger in
its cohort tree comes later on the log (quota released, a queue, cohort, flavor,
namespace or configuration changed; SEMANTICS §3.6). Heads are one workload per
active ClusterQueue per cycle (§4.1), in Kueue's heap order (§3.2).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, localcontext

import msgspec

from kueue_es.events import manifests, models
from kueue_es.events.quantities import UNLIMITED, is_milli_resource, parse_decimal, to_amount
from kueue_es.events.tas_requests import requests_tas
from kueue_es.projections import afs, cluster, quota
from kueue_es.projections.cluster import PRIORITY_TRIGGER, ClusterState, WorkloadState
from kueue_es.scheduling import concurrent_admission as ca
from kueue_es.scheduling import dra
from kueue_es.scheduling.flavors import PodSetRequest

METADATA_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Why:
    """A condition reason and message for a workload that is not admitted; ``parked``
    when it goes to the inadmissible list rather than staying queued."""

    reason: str
    message: str
    parked: bool = False


@dataclass(kw_only=True)
class Plan:
    """A cycle's heads (per ClusterQueue name, in name order, its workload), their queue order
    keys (:func:`queue_order_key`, as the fold keeps them) and the workloads that cannot queue,
    with why."""

    heads: dict[str, WorkloadState] = field(default_factory=dict)
    orders: dict[str, tuple[int, int, str, str]] = field(default_factory=dict)
    unqueued: list[tuple[WorkloadState, Why]] = field(default_factory=list)


priority_of = cluster.priority_of
queue_order_key = cluster.queue_order_key


def plan(
    state: ClusterState,
    *,
    tree: quota.QuotaTree,
    now_ms: int = 0,
    whole_tree_triggers: bool = True,
    deferred_sticky: bool = True,
    priority_triggers: bool = True,
    afs_pending: bool = True,
    admission_gated_by: bool = True,
    kueue_misconfigured: bool = True,
    concurrent_admission: bool = True,
    tas_topologies: bool = True,
    released_in: Iterable[str] = (),
    kueue_namespace_message: bool = True,
) -> Plan:
    """The heads of this cycle and the workloads that cannot be queued at all.

    Reads the fold's per-LocalQueue queues (already in Kueue's heap order, parked
    workloads kept apart until a requeue trigger), with what depends on the objects
    alone remembered until one changes (:class:`_Layout`), so a cycle costs about one
    step per ClusterQueue (SEMANTICS §3.2, §3.6). ``whole_tree_triggers`` False (admitter
    logic 18 and earlier, for replay): a cohort's trigger reaches only the ClusterQueues below
    it (see :func:`requeue_triggers`). ``deferred_sticky`` False (admitter logic 19 and earlier, for
    replay): a workload waiting for the cycle's preemptions (``state.deferred``) is not its
    ClusterQueue's sticky head (:func:`sticky_preemptors`). ``priority_triggers`` False (admitter logic 29
    and earlier, for replay): a quota-holding workload's priority change requeues nothing.
    ``afs_pending`` False (admitter logic 31 and earlier, for replay): under admission fair sharing a
    LocalQueue's usage leaves out the entry penalties of its workloads that reserved quota but are not
    admitted yet (:func:`lq_usage`). ``admission_gated_by`` False (admitter logic 32 and earlier, for
    replay): the ``kueue.x-k8s.io/admission-gated-by`` annotation is not read (:func:`admission_gate`).
    ``kueue_misconfigured`` False (admitter logic 40 and earlier, for replay): a misconfigured workload's
    message is its first misconfigured pod set's, after ``pod set <name>: `` (:func:`misconfigured_message`).
    ``concurrent_admission`` False (admitter logic 42 and earlier, for replay): with the gate ConcurrentAdmission
    on, a parent Workload (:func:`kueue_es.scheduling.concurrent_admission.is_parent`) is queued like any other;
    True keeps it out of the heads, as Kueue's queue manager never pushes a parent (its variants are queued
    instead), and notes it in ``unqueued`` with :data:`PARENT` (no decision is written for it).
    ``tas_topologies`` False (admitter logic 50 and earlier, for replay): see :func:`inactive_reason`.
    ``kueue_namespace_message`` False (admitter logic 52 and earlier, for replay): a workload whose namespace its
    ClusterQueue does not select is pending with :data:`NAMESPACE_MISMATCH_BEFORE_53`'s message, not Kueue's.
    ``released_in``: the ClusterQueues whose quota this cycle gave back before planning (a finished or deleted
    workload's, :func:`kueue_es.scheduling.cycle.run`): the workloads parked in their cohort trees are requeued
    for this cycle already (:func:`with_releases`), as Kueue's workload controller requeues a tree's inadmissible
    workloads while it takes a finished or deleted workload out of its cache, "before the next scheduling cycle"
    (workload_controller.go Update and Delete, QueueAssociatedInadmissibleWorkloadsAfter). Empty (admitter logic
    51 and earlier, for replay): they wait for the release's own trigger, once its record is folded.
    """
    result = Plan()
    gated = admission_gated_by and state.configuration.feature_gates.get(ADMISSION_GATED_BY_GATE, True)
    parents = concurrent_admission and ca.enabled(state.configuration.feature_gates)
    apart = _apart_by_queue(state)
    boost = bool(state.configuration.feature_gates.get(cluster.PRIORITY_BOOST_GATE, False))
    layout = _layout(state, tree, whole_tree=whole_tree_triggers, priority=priority_triggers, boost=boost)
    if layout.tas_topologies != tas_topologies:  # the inactive ClusterQueues of another logic version
        layout.inactive.clear()
        layout.tas_topologies = tas_topologies
    queued_now = tuple(state.queued)
    if layout.grouped_for != queued_now:
        layout.grouped_for, layout.grouped = queued_now, _group(state, layout, queued_now)
    unusable, by_cq = layout.grouped
    for queue, why in unusable:
        result.unqueued.extend((state.workloads[order[-1]], why) for order in state.queued[queue])
    triggers = with_releases(layout.triggers, released_in, state=state, tree=tree)
    sticky = (
        sticky_preemptors(state, deferred=deferred_sticky, apart=apart)
        if state.preemptors or state.nominations or (deferred_sticky and state.deferred)
        else {}
    )
    known_inactive, mismatches, workloads, cluster_queues = (
        layout.inactive,
        layout.mismatches,
        state.workloads,
        state.cluster_queues,
    )
    heads, orders, queued_by_lq, priority_classes = result.heads, result.orders, state.queued, state.priority_classes
    mismatches_by_queue = layout.mismatches_by_queue
    for cq_name, local_queues in by_cq.items():
        inactive = known_inactive.get(cq_name, _UNKNOWN)
        if inactive is _UNKNOWN:
            inactive = known_inactive[cq_name] = inactive_reason(
                cluster_queues[cq_name], state=state, tree=tree, tas_topologies=tas_topologies
            )
        if inactive is not None:
            result.unqueued.extend(
                (workloads[order[-1]], inactive) for queue in local_queues for order in state.queued[queue]
            )
            continue
        cq = cluster_queues[cq_name]
        head_order: tuple[int, int, str, str] | None
        memo = None
        if sticky and (preemptor := sticky.get(cq_name)) is not None and cq.spec.queueing_strategy == "BestEffortFIFO":
            head_order = preemptor  # SEMANTICS §3.9: the nominated preemptor is tried first
        elif len(local_queues) == 1 and local_queues[0] in apart:
            head_order = _front(
                state, local_queues[0], triggers[cq_name], result, gated=gated, apart=apart, parents=parents
            )
            if head_order is None:
                continue
        elif len(local_queues) == 1:
            # _front, inline for the common case of one LocalQueue (once per ClusterQueue a cycle)
            queued = queued_by_lq[local_queues[0]]
            trigger = triggers[cq_name]
            head_order = (queued.requeue(trigger) if trigger != queued.trigger else queued.ready).first()
            if head_order is None:
                continue
            head = workloads[head_order[-1]]
            memo = head.shape_memo
            if memo is None or memo[0] is not head.workload:
                memo = _shape(head)
            if (
                (memo[2] is not None and memo[2] not in priority_classes)
                or (gated and memo[4] is not None)
                or (parents and ca.is_parent(head.workload))
            ):
                memo = None
                head_order = _front(state, local_queues[0], trigger, result, gated=gated, parents=parents)
                if head_order is None:
                    continue
        else:
            trigger = triggers[cq_name]
            fronts = [
                (q, c)
                for q in local_queues
                if (c := _front(state, q, trigger, result, gated=gated, apart=apart, parents=parents))
            ]
            if not fronts:
                continue
            if afs.active(cq, state.configuration) and len(fronts) > 1:
                # SEMANTICS §8: the LocalQueue that consumed least comes first, before priority
                head_order = min(
                    fronts, key=lambda f: (lq_usage(state, f[0], now_ms=now_ms, pending=afs_pending), f[1])
                )[1]
            else:
                head_order = min(c for _, c in fronts)
        head = workloads[head_order[-1]]
        if memo is not None:  # the head of the one LocalQueue: its namespace is the queue's
            mismatch = mismatches_by_queue.get(local_queues[0], _UNKNOWN)
            if mismatch is _UNKNOWN:
                mismatch = mismatches_by_queue[local_queues[0]] = _namespace_mismatch(head, cq, state)
        else:
            selected = (cq_name, head.key.partition("/")[0])  # the workload's namespace
            mismatch = mismatches.get(selected, _UNKNOWN)
            if mismatch is _UNKNOWN:
                mismatch = mismatches[selected] = _namespace_mismatch(head, cq, state)
        if mismatch is NAMESPACE_MISMATCH and not kueue_namespace_message:
            mismatch = NAMESPACE_MISMATCH_BEFORE_53
        if mismatch is None:  # misconfigured (SEMANTICS §4.3)
            shape = memo if memo is not None else _shape(head)
            mismatch = None if shape[1] is None else shape[1][1 if kueue_misconfigured else 0]
            # DRA (SEMANTICS-ADVANCED F): nothing to charge without device classes or claims (dra.charge_in)
            if (
                mismatch is None
                and (shape[3] or state.device_classes)
                and (problem := dra.charge_in(state, head.workload).problem)
            ):
                mismatch = Why("Misconfigured", problem, parked=True)
        if mismatch is not None:
            result.unqueued.append((head, mismatch))  # parked, even under StrictFIFO (SEMANTICS §10.3)
            continue
        heads[cq_name] = head
        orders[cq_name] = head_order
    result.unqueued.sort(key=lambda pair: pair[0].workload.key)
    return result


def _group(
    state: ClusterState, layout: _Layout, queues: tuple[tuple[str, str], ...]
) -> tuple[list[tuple[tuple[str, str], Why]], dict[str, list[tuple[str, str]]]]:
    """The LocalQueues that hold workloads, as :func:`plan` reads them: those that cannot feed
    a ClusterQueue, with why, and the others per ClusterQueue, in ClusterQueue name order."""
    unusable: list[tuple[tuple[str, str], Why]] = []
    by_cq: dict[str, list[tuple[str, str]]] = {}
    for queue in queues:
        resolved = layout.local_queues.get(queue)
        if resolved is None:
            resolved = layout.local_queues[queue] = _resolve_local_queue(state, namespace=queue[0], queue_name=queue[1])
        cq_name, why = resolved
        if why is not None:
            unusable.append((queue, why))
        elif cq_name in by_cq:
            by_cq[cq_name].append(queue)
        else:
            by_cq[cq_name] = [queue]
    return unusable, {name: by_cq[name] for name in sorted(by_cq)}


@dataclass(kw_only=True)
class _Layout:
    """What :func:`plan` derives from the objects alone: which ClusterQueue each
    LocalQueue feeds (or why it cannot), inactive ClusterQueues, namespace selector
    mismatches; and from the requeue triggers, each ClusterQueue's latest. Kept in
    ``state.caches`` for as long as the quota tree and ``state.objects_version`` stay
    the same (every change of those objects is a requeue trigger, ``cluster.apply``),
    ``triggers`` as long as ``state.triggers_version`` does; ``grouped`` as long as the
    LocalQueues that hold workloads stay the same (the resolution it reads stays with the objects)."""

    objects_version: int
    tree: quota.QuotaTree
    triggers_version: int = -1
    triggers: dict[str, int] = field(default_factory=dict)
    whole_tree: bool = True  # how ``triggers`` were computed (:func:`_trigger_seq_by_cq`)
    priority: bool = True  # the same
    boost: bool = False  # the same
    local_queues: dict[tuple[str, str], tuple[str, Why | None]] = field(default_factory=dict)
    inactive: dict[str, Why | None] = field(default_factory=dict)
    tas_topologies: bool = True  # how ``inactive`` was judged (:func:`inactive_reason`)
    mismatches: dict[tuple[str, str], Why | None] = field(default_factory=dict)
    # The same per LocalQueue (namespace, name) that feeds a ClusterQueue on its own.
    mismatches_by_queue: dict[tuple[str, str], Why | None] = field(default_factory=dict)
    # :func:`_group` of the LocalQueues in ``state.queued`` (in its order) it was made for.
    grouped_for: tuple[tuple[str, str], ...] | None = None
    grouped: tuple[list[tuple[tuple[str, str], Why]], dict[str, list[tuple[str, str]]]] = ([], {})


def _layout(
    state: ClusterState, tree: quota.QuotaTree, *, whole_tree: bool = True, priority: bool = True, boost: bool = False
) -> _Layout:
    layout = state.caches.get("admitter.layout")
    if not isinstance(layout, _Layout) or layout.objects_version != state.objects_version or layout.tree is not tree:
        layout = state.caches["admitter.layout"] = _Layout(objects_version=state.objects_version, tree=tree)
    if (
        layout.triggers_version != state.triggers_version
        or layout.whole_tree != whole_tree
        or layout.priority != priority
        or layout.boost != boost
    ):
        layout.triggers = _trigger_seq_by_cq(state, tree, whole_tree=whole_tree, priority=priority, boost=boost)
        layout.triggers_version, layout.whole_tree, layout.priority = state.triggers_version, whole_tree, priority
        layout.boost = boost
    return layout


def lq_usage(state: ClusterState, queue: tuple[str, str], *, now_ms: int, pending: bool = True) -> float:
    """A LocalQueue's admission-fair-sharing usage at ``now_ms`` (SEMANTICS §8), with the entry penalties
    of its workloads reserved but not admitted yet (``pending`` False: without them, as admitter logic 28
    and earlier ordered the queue; Kueue's ComputeLocalQueueFSUsage adds them, pkg/workload/workload.go)."""
    return afs.usage_value(
        state.afs_ledgers.get(queue),
        now_ms=now_ms,
        config=state.configuration,
        lq=state.local_queues.get(queue),
        pending=pending,
    )


def _apart_by_queue(state: ClusterState) -> dict[tuple[str, str], set[str]]:
    """Per LocalQueue, the keys of its queued workloads whose queue order a feature gate of the Configuration
    moves now (``ClusterState.ordered_apart``, :func:`cluster.order_gates_move`); empty when no gate does, as
    always for the deciders before those gates were read (:func:`without_ordering_gates`)."""
    if not state.ordered_apart or not cluster.order_gates_move(state.configuration):
        return {}
    out: dict[tuple[str, str], set[str]] = {}
    workloads = state.workloads
    for key in state.ordered_apart:
        wl = workloads.get(key)  # None: in another partition (its view keeps only its own workloads)
        if wl is not None and wl.queued_as is not None:
            out.setdefault(wl.queued_as[0], set()).add(key)
    return out


def _in_effective_order(
    queued: cluster.Queued, ready: cluster.Ready, state: ClusterState, apart: set[str]
) -> Iterator[cluster.Order]:
    """The order keys of ``ready`` (``queued``'s for the cycle's trigger) in Kueue's heap order under the
    Configuration's feature gates: those of ``apart`` as :func:`cluster.effective_order` gives them, merged
    with the others, whose fold order is already theirs (SEMANTICS §2.4, §3.3). With the gate PriorityBoost
    on, a workload of ``apart`` parked before its priority-boost annotation last changed is among them: Kueue
    moves it off the inadmissible list (cluster_queue.go priorityBoostAnnotationChanged)."""
    workloads, live = state.workloads, ready.live
    boosting = state.configuration.feature_gates.get(cluster.PRIORITY_BOOST_GATE, False)
    moved = []
    for key in apart:
        if key in live:
            moved.append(cluster.effective_order(workloads[key], state))
        elif boosting and (parked := queued.parked.get(key)) is not None:
            if workloads[key].boost_changed_seq > parked[0]:
                moved.append(cluster.effective_order(workloads[key], state))
    moved.sort()
    return heapq.merge((order for order in ready if order[-1] not in apart), moved)


def sticky_preemptors(
    state: ClusterState, *, deferred: bool = True, apart: Mapping[tuple[str, str], set[str]] | None = None
) -> dict[str, tuple[int, int, str, str]]:
    """Per ClusterQueue, the queue order of its nominated preemptor still queued there
    (Kueue's preemptorWorkload, SEMANTICS §3.9); the earliest in queue order if several.
    ``apart``: per LocalQueue, the workloads whose order a feature gate moves (:func:`_apart_by_queue`),
    whose order is :func:`cluster.effective_order`.

    ``deferred``: a workload waiting for the preemptions of the cycle that deferred it
    (``state.deferred``, Kueue's DeferredFit) counts too, as Kueue requeues it with reason
    PendingPreemption, which sets it as its ClusterQueue's preemptor workload
    (pkg/scheduler/scheduler.go processEntry, pkg/cache/queue/cluster_queue.go
    requeueIfNotPresent); False: admitter logic 19 and earlier, which did not."""
    out: dict[str, tuple[int, int, str, str]] = {}
    keys = {*state.preemptors, *state.nominations, *(state.deferred if deferred else ())}
    for key in sorted(keys):
        wl = state.workloads.get(key)
        if wl is None or wl.queued_as is None or wl.parked_seq:
            continue
        issued = state.preemptors.get(key)
        nomination = state.nominations.get(key)
        if issued is not None:
            cq = issued.cluster_queue
        elif nomination is not None:
            cq = nomination[1].cluster_queue
        else:
            cq = state.deferred[key]
        lq = state.local_queues.get(wl.queued_as[0])
        if lq is None or lq.spec.cluster_queue != cq:
            continue
        order = wl.queued_as[1]
        if apart and key in apart.get(wl.queued_as[0], ()):
            order = cluster.effective_order(wl, state)
        if cq not in out or order < out[cq]:
            out[cq] = order
    return out


_UNKNOWN = Why("", "")  # not yet in a layout map (whose values may be None)


def _front(
    state: ClusterState,
    queue: tuple[str, str],
    trigger: int,
    plan: Plan,
    *,
    gated: bool = False,
    apart: Mapping[tuple[str, str], set[str]] | None = None,
    parents: bool = False,
) -> tuple[int, int, str, str] | None:
    """The first workload of a LocalQueue that may be tried now (not parked since the
    last requeue trigger), noting on the way those whose priority class is missing and,
    when ``gated`` (the AdmissionGatedBy rule is on), those whose admission is gated.
    ``apart`` (:func:`_apart_by_queue`): the queue's workloads whose order a feature gate moves are
    put in their place (:func:`_in_effective_order`). ``parents``: ConcurrentAdmission's parents are passed
    over too (:data:`PARENT`).

    The fold keeps parked workloads apart; bringing back those parked before ``trigger``
    only re-arranges that index, the queue it stands for stays the same."""
    queued = state.queued[queue]
    ready = queued.requeue(trigger) if trigger != queued.trigger else queued.ready
    moved = apart.get(queue) if apart else None
    orders: Iterable[cluster.Order]
    if moved:
        orders = _in_effective_order(queued, ready, state, moved)
        first = next(iter(orders), None)  # a generator: the loop below goes on after it
        if first is None or _not_queued(state.workloads[first[-1]], state, gated=gated, parents=parents) is None:
            return first
        orders = itertools.chain((first,), orders)
    else:
        first = ready.first()
        if first is None or _not_queued(state.workloads[first[-1]], state, gated=gated, parents=parents) is None:
            return first
        orders = ready
    for order in orders:  # rarely: past those whose priority class is missing or that are gated
        wl = state.workloads[order[-1]]
        why = _not_queued(wl, state, gated=gated, parents=parents)
        if why is not None:
            plan.unqueued.append((wl, why))
            continue
        return order
    return None


ADMISSION_GATED_BY_GATE = "AdmissionGatedBy"
ADMISSION_GATED_BY_ANNOTATION = "kueue.x-k8s.io/admission-gated-by"
ADMISSION_GATED_REASON = "AdmissionGated"


def admission_gate(workload: models.Workload) -> str | None:
    """The controllers a workload's admission waits for: its ``kueue.x-k8s.io/admission-gated-by``
    annotation when set and not empty, else None (Kueue pkg/workload/workload.go HasAdmissionGate;
    the feature gate AdmissionGatedBy, beta and on by default since v0.19, is the caller's to check)."""
    value = workload.metadata.annotations.get(ADMISSION_GATED_BY_ANNOTATION)
    return value or None


PARENT = Why("ConcurrentAdmissionParent", "", parked=False)
"""Why a ConcurrentAdmission parent is not queued: its variants are (no decision is written for it; the
controller writes its status from its admitted variant, :func:`kueue_es.scheduling.concurrent_admission.reconcile`)."""


def _not_queued(wl: WorkloadState, state: ClusterState, *, gated: bool, parents: bool = False) -> Why | None:
    """Why a queued workload is not in its ClusterQueue's heap at all, None when it is: a
    missing WorkloadPriorityClass, or (``gated``) an admission gate. Kueue keeps a gated
    workload out of the queues (pkg/workload IsAdmissible), so it blocks nothing, not even
    under StrictFIFO, and its workload controller writes QuotaReserved False, reason
    AdmissionGated, "Admission is gated by: <value>" (workload_controller.go); removing the
    annotation queues it again. Not parked: it is looked at again each cycle. ``parents``: a
    ConcurrentAdmission parent is not queued either (:data:`PARENT`)."""
    if parents and ca.is_parent(wl.workload):
        return PARENT
    missing = _missing_priority_class(wl, state)
    if missing is not None or not gated:
        return missing
    value = _shape(wl)[4]
    return None if value is None else Why(ADMISSION_GATED_REASON, f"Admission is gated by: {value}")


def missing_tas_topologies(cq: models.ClusterQueue, *, state: ClusterState) -> list[tuple[str, str]]:
    """``(flavor, topology)`` of each TAS flavor of ``cq`` (one naming a Topology) whose Topology does not
    exist, by flavor name: they make the ClusterQueue inactive, ``TopologyNotFound`` (Kueue
    pkg/cache/scheduler/clusterqueue.go isTASViolated, inactiveReason). None with the gate
    TopologyAwareScheduling off (no flavor is a TAS flavor) or with a MultiKueue admission check (the workers
    place the pods, on their Topologies)."""
    if not state.configuration.feature_gates.get("TopologyAwareScheduling", True):
        return []
    names = sorted({fq.name for group in cq.spec.resource_groups for fq in group.flavors})
    tas = [(name, flavor.spec.topology_name) for name in names if (flavor := state.flavors.get(name)) is not None]
    tas = [(name, topology) for name, topology in tas if topology]
    if not tas or any(
        (check := state.admission_checks.get(c)) is not None
        and check.spec.controller_name == models.MULTIKUEUE_CONTROLLER
        for c in _named_checks(cq)
    ):
        return []
    return [(name, topology) for name, topology in tas if topology and topology not in state.topology.topologies]


def _named_checks(cq: models.ClusterQueue) -> list[str]:
    """Every admission check ``cq`` names, whatever flavors it is for."""
    strategy = cq.spec.admission_checks_strategy
    return [rule.name for rule in strategy.admission_checks] if strategy is not None else []


def inactive_reason(
    cq: models.ClusterQueue, *, state: ClusterState, tree: quota.QuotaTree, tas_topologies: bool = True
) -> Why | None:
    """Why a ClusterQueue admits nothing now (SEMANTICS §10.1-§10.2), or None when it is active.

    ``tas_topologies`` False (admitter logic 50 and earlier, for replay): a TAS flavor whose Topology does not
    exist leaves the ClusterQueue active (:func:`missing_tas_topologies`); Kueue holds its workloads."""
    name = cq.metadata.name
    if cq.spec.stop_policy != "None" or cq.terminating or tree.cluster_queues[name].in_cycle:
        return Why("Suspended", f"ClusterQueue {name} is inactive")
    for group in cq.spec.resource_groups:
        for flavor in group.flavors:
            if flavor.name not in state.flavors:
                return Why("Suspended", f"ClusterQueue {name} is inactive")
    for check in required_checks(cq):
        if check not in state.admission_checks or not state.admission_checks[check].active:
            return Why("Suspended", f"ClusterQueue {name} is inactive")
    if multikueue_problems(cq, state.admission_checks):
        return Why("Suspended", f"ClusterQueue {name} is inactive")
    if tas_topologies and missing_tas_topologies(cq, state=state):
        return Why("Suspended", f"ClusterQueue {name} is inactive")
    return None


PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"


def multikueue_problems(
    cq: models.ClusterQueue, admission_checks: dict[str, models.AdmissionCheck]
) -> list[tuple[str, str]]:
    """Kueue's MultiKueue rules for a ClusterQueue's admission checks (SEMANTICS-ADVANCED E.1), as
    ``(reason, message part)`` in Kueue's order: more than one MultiKueue check
    (``MultipleMultiKueueAdmissionChecks``), a MultiKueue check on only some flavors
    (``MultiKueueAdmissionCheckAppliedPerFlavor``), a MultiKueue check with a ProvisioningRequest one
    (``MultiKueueWithProvisioningRequest``). Any of them makes the ClusterQueue inactive. Names sorted,
    joined by ``,`` (Kueue pkg/cache/scheduler/clusterqueue.go updateWithAdmissionChecks, inactiveReason)."""
    strategy = cq.spec.admission_checks_strategy
    if strategy is None:
        return []
    all_flavors = {fq.name for group in cq.spec.resource_groups for fq in group.flavors}
    multi: set[str] = set()
    per_flavor: set[str] = set()
    provisioning: set[str] = set()
    for rule in strategy.admission_checks:
        check = admission_checks.get(rule.name)
        if check is None:
            continue
        if check.spec.controller_name == PROVISIONING_CONTROLLER:
            provisioning.add(rule.name)
        if check.spec.controller_name == models.MULTIKUEUE_CONTROLLER:
            multi.add(rule.name)
            if rule.on_flavors and set(rule.on_flavors) != all_flavors:
                per_flavor.add(rule.name)
    out: list[tuple[str, str]] = []
    if len(multi) > 1:
        out.append(
            (
                "MultipleMultiKueueAdmissionChecks",
                "Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: "
                + ",".join(sorted(multi)),
            )
        )
    if per_flavor:
        out.append(
            (
                "MultiKueueAdmissionCheckAppliedPerFlavor",
                "Cannot specify MultiKueue AdmissionCheck per flavor, found: " + ",".join(sorted(per_flavor)),
            )
        )
    if multi and provisioning:
        out.append(
            (
                "MultiKueueWithProvisioningRequest",
                "Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: "
                f"{','.join(sorted(multi))}, {','.join(sorted(provisioning))}",
            )
        )
    return out


def required_checks(cq: models.ClusterQueue) -> list[str]:
    """Names of every admission check a ClusterQueue names, on any flavor (a missing or
    inactive one makes the ClusterQueue inactive, SEMANTICS §10.2)."""
    strategy = cq.spec.admission_checks_strategy
    return [rule.name for rule in strategy.admission_checks] if strategy else []


def ignores_undeclared(config: models.Configuration) -> bool:
    """Whether requests for resources a ClusterQueue does not cover are left out of the quota check
    (SEMANTICS §10.4): ``resources.quotaCheckStrategy`` IgnoreUndeclared, and the feature gate
    QuotaCheckStrategy (beta, on by default) on, as Kueue's IgnoreUndeclaredResources
    (pkg/scheduler/flavorassigner/flavorassigner.go); with the gate off the strategy counts for nothing."""
    resources = config.resources
    return (
        resources is not None
        and resources.quota_check_strategy == "IgnoreUndeclared"
        and config.feature_gates.get("QuotaCheckStrategy", True)
    )


def without_quota_check_gate(state: ClusterState) -> ClusterState:
    """``state`` as the deciders before the gate QuotaCheckStrategy was read saw it (admitter logic 30 and
    preemptor 13 and earlier, for replay): with quotaCheckStrategy IgnoreUndeclared and the gate off, a
    view whose Configuration has the gate on, so :func:`ignores_undeclared` holds as they applied it;
    ``state`` itself otherwise. The view's Configuration object is kept in ``state.caches`` while the
    fold's stays the same, so the request memos compared by identity stay valid."""
    config = state.configuration
    if (
        ignores_undeclared(config)
        or config.resources is None
        or config.resources.quota_check_strategy != "IgnoreUndeclared"
    ):
        return state
    kept = state.caches.get("queues.quota_check_gate_on")
    if not isinstance(kept, tuple) or kept[0] is not config:
        gates = {**config.feature_gates, "QuotaCheckStrategy": True}
        kept = state.caches["queues.quota_check_gate_on"] = (
            config,
            msgspec.structs.replace(config, feature_gates=gates),
        )
    return dataclasses.replace(state, configuration=kept[1])


def with_afs_history_kept(state: ClusterState) -> ClusterState:
    """``state`` as the deciders before Kueue PR #12891 was followed saw it (admitter logic 47 and preemptor
    19 and earlier, for replay): a LocalQueue deleted and created again keeps its admission-fair-sharing
    history and its pending entry penalties (:func:`kueue_es.projections.afs.with_history_kept`); ``state``
    itself when no LocalQueue was."""
    ledgers = afs.with_history_kept(state.afs_ledgers)
    if ledgers is state.afs_ledgers:
        return state
    return dataclasses.replace(state, afs_ledgers=ledgers)


ORDERING_GATES_BEFORE = {
    cluster.PRIORITY_BOOST_GATE: False,
    cluster.PRIORITY_SORTING_GATE: True,
    cluster.PRIORITIZE_PREEMPTORS_GATE: False,
}
"""The feature gates that order queues, entries and preemption candidates, as the deciders before they were
read behaved whatever the Configuration said (admitter logic 36 and preemptor logic 16 and earlier): no
priority boost, priority sorting within a cohort, and kueue-es's own preemptor-first order
(docs/preemption.md), which is what PrioritizePreemptorWorkloads off means now too."""


def without_ordering_gates(state: ClusterState) -> ClusterState:
    """``state`` as the deciders before the ordering gates were read saw it (admitter logic 36 and preemptor
    16 and earlier, for replay): a view whose Configuration sets the gates of :data:`ORDERING_GATES_BEFORE` as
    they behaved, so neither :func:`cluster.priority_boost`, :func:`cluster.queue_order_ts` nor the entry order
    reads what the log's Configuration says; ``state`` itself when it says that already. The view's
    Configuration object is kept in ``state.caches`` while the fold's stays the same (request memos compare
    it by identity)."""
    config = state.configuration
    gates = config.feature_gates
    if all(gates.get(gate, value) == value for gate, value in ORDERING_GATES_BEFORE.items()):
        return state
    kept = state.caches.get("queues.ordering_gates_before")
    if not isinstance(kept, tuple) or kept[0] is not config:
        before = msgspec.structs.replace(config, feature_gates={**gates, **ORDERING_GATES_BEFORE})
        kept = state.caches["queues.ordering_gates_before"] = (config, before)
    return dataclasses.replace(state, configuration=kept[1])


def pod_set_requests(
    workload: models.Workload,
    *,
    cq: models.ClusterQueue,
    config: models.Configuration,
    reclaimable: Mapping[str, int] | None = None,
    devices: dra.Charge = dra.NO_CHARGE,
) -> list[PodSetRequest]:
    """Per-pod requests the quota check uses (SEMANTICS §2.3, §10.4): excluded prefixes
    dropped, transformations applied, the DRA ``devices`` charge added (:func:`dra.charge_in`,
    SEMANTICS-ADVANCED F), undeclared resources ignored when configured,
    and ``pods`` = 1 per pod when the ClusterQueue covers it. ``reclaimable``: the pods per
    pod set its job reported as done (dynamic reclaim), which a pod set no longer asks for
    (Kueue pkg/workload podSetsCountsAfterReclaim)."""
    resources = config.resources or _NO_RESOURCES_CONFIG
    covered = {r for group in cq.spec.resource_groups for r in group.covered_resources}
    out = []
    for ps in workload.spec.pod_sets:
        if resources.exclude_resource_prefixes or resources.transformations:
            requests = {
                r: v
                for r, v in ps.requests.items()
                if not any(r.startswith(prefix) for prefix in resources.exclude_resource_prefixes)
            }
            requests = _transform(requests, resources.transformations)
        else:  # what the two steps above leave of them: a copy, negative amounts as 0
            requests = {r: v if v > 0 else 0 for r, v in ps.requests.items()}
        if devices.charged or devices.replaced:
            requests = dra.apply(requests, ps, devices)
        if ignores_undeclared(config):
            requests = {r: v for r, v in requests.items() if r in covered}
        if "pods" in covered:
            requests["pods"] = 1
        count = ps.count
        if reclaimable and ps.name in reclaimable:
            count -= min(reclaimable[ps.name], count)
        out.append(
            PodSetRequest(
                name=ps.name,
                count=count,
                requests=dict(sorted(requests.items())),
                node_selector=ps.node_selector,
                tolerations=tuple(ps.tolerations),
                affinity=tuple(ps.required_node_affinity),
                topology_request=ps.topology_request,
                raw_resources=frozenset(ps.requests),
                min_count=ps.min_count if ps.min_count is None else min(ps.min_count, count),
            )
        )
    return out


_NO_RESOURCES_CONFIG = models.ResourcesConfig()


def cached_pod_set_requests(
    wl: WorkloadState,
    *,
    cq: models.ClusterQueue,
    config: models.Configuration,
    shared: dict[tuple[object, ...], list[PodSetRequest]] | None = None,
    state: ClusterState | None = None,
) -> list[PodSetRequest]:
    """:func:`pod_set_requests`, remembered on the workload's state for as long as the same
    workload, ClusterQueue and Configuration objects are in force (compared by identity:
    the fold replaces an object when it changes, so a stale entry can never match).

    ``shared`` (the admitter's, in ``state.caches``): equal request lists of pod sets without
    node selector, tolerations, affinity or topology request, so that workloads asking the
    same share one list (and the flavor picker's memo of it); up to 4,096 of them."""
    memo = wl.requests_memo
    if (
        memo is not None
        and wl.requests_memo_workload is wl.workload
        and wl.requests_memo_cq is cq
        and wl.requests_memo_config is config
        and wl.requests_memo_devices == (state.devices_version if state is not None else -1)
    ):
        return memo
    devices = dra.charge_in(state, wl.workload) if state is not None else dra.NO_CHARGE
    found = _plain_shared(wl, cq=cq, config=config, shared=shared) if devices is dra.NO_CHARGE else None
    if found is not None:
        requests = found
    else:
        requests = pod_set_requests(wl.workload, cq=cq, config=config, reclaimable=wl.reclaimable, devices=devices)
        if shared is not None:
            requests = _shared(requests, shared)
    wl.requests_memo = requests
    wl.requests_memo_workload, wl.requests_memo_cq, wl.requests_memo_config = wl.workload, cq, config
    wl.requests_memo_devices = state.devices_version if state is not None else -1
    return requests


def _plain_shared(
    wl: WorkloadState,
    *,
    cq: models.ClusterQueue,
    config: models.Configuration,
    shared: dict[tuple[object, ...], list[PodSetRequest]] | None,
) -> list[PodSetRequest] | None:
    """The list in ``shared`` that :func:`pod_set_requests` then :func:`_shared` would return for
    ``wl`` (charged no devices), found from its pod sets' signature alone without building the
    requests; None when that takes more than a copy of the requests (resource exclusions,
    transformations, undeclared resources ignored, ``pods`` covered, reclaimable pods, a pod set
    :func:`_shared` does not share) or when ``shared`` has no such list yet. Most heads of
    ``kueue-es bench core`` ask what an earlier workload asked: building their requests was a
    twentieth of the cycle (issue 18)."""
    if not shared or wl.reclaimable:
        return None
    resources = config.resources
    if resources is not None and (
        resources.exclude_resource_prefixes or resources.transformations or ignores_undeclared(config)
    ):
        return None
    for group in cq.spec.resource_groups:
        if "pods" in group.covered_resources:
            return None
    signature: list[object] = []
    for ps in wl.workload.spec.pod_sets:
        if ps.node_selector or ps.tolerations or ps.required_node_affinity or requests_tas(ps.topology_request):
            return None
        count, min_count = ps.count, ps.min_count
        requests = tuple(sorted((r, v if v > 0 else 0) for r, v in ps.requests.items()))
        signature.append(
            (
                ps.name,
                count,
                requests,
                frozenset(ps.requests),
                min_count if min_count is None else min(min_count, count),
                _rank_hints(ps.topology_request),
            )
        )
    return shared.get(tuple(signature))


def _rank_hints(request: models.PodSetTopologyRequest | None) -> tuple[str | None, str | None, int | None] | None:
    """The rank hints of a request that asks for no topology (Kueue writes them on every Job's pod sets), which
    two pod sets must share to share their requests; None for no request."""
    if request is None:
        return None
    return request.pod_index_label, request.sub_group_index_label, request.sub_group_count


def _shared(
    requests: list[PodSetRequest], shared: dict[tuple[object, ...], list[PodSetRequest]]
) -> list[PodSetRequest]:
    """The list in ``shared`` equal to ``requests`` (added when there is none and room)."""
    signature: list[object] = []
    for ps in requests:
        if ps.node_selector or ps.tolerations or ps.affinity or requests_tas(ps.topology_request):
            return requests  # compared by value only where that is cheap and certain
        signature.append(
            (
                ps.name,
                ps.count,
                tuple(ps.requests.items()),
                ps.raw_resources,
                ps.min_count,
                _rank_hints(ps.topology_request),
            )
        )
    key = tuple(signature)
    found = shared.get(key)
    if found is not None:
        return found
    if len(shared) < _SHARED_LIMIT:
        shared[key] = requests
    return requests


_SHARED_LIMIT = 4096


class LegacyResourceTransformation(models.ResourceTransformation, frozen=True, kw_only=True):
    """A ``resources.transformations`` entry as admitter logic 37 and preemptor 17 and earlier applied it
    (:func:`with_legacy_transformations`): in whole amounts (an output factor rounded up to one, a CPU
    product rounded down), the generated outputs summed with what the pod requests before any was floored
    at zero. Never folded nor written: it lives in the replay view's Configuration only."""


def with_legacy_transformations(state: ClusterState) -> ClusterState:
    """``state`` as the deciders before Kueue #12953 and #14032 were followed saw it (admitter logic 37 and
    preemptor 17 and earlier, for replay): a view whose Configuration holds its transformations as
    :class:`LegacyResourceTransformation`, so :func:`_transform` applies them as they did; ``state`` itself
    when there are none. The view's Configuration is kept in ``state.caches`` while the fold's stays the
    same, so the request memos compared by identity stay valid."""
    config = state.configuration
    if config.resources is None or not config.resources.transformations:
        return state
    kept = state.caches.get("queues.legacy_transformations")
    if not isinstance(kept, tuple) or kept[0] is not config:
        legacy = [
            LegacyResourceTransformation(
                input=rule.input, strategy=rule.strategy, outputs=rule.outputs, multiply_by=rule.multiply_by
            )
            for rule in config.resources.transformations
        ]
        resources = msgspec.structs.replace(config.resources, transformations=legacy)
        kept = state.caches["queues.legacy_transformations"] = (
            config,
            msgspec.structs.replace(config, resources=resources),
        )
    return dataclasses.replace(state, configuration=kept[1])


def _transform(requests: dict[str, int], transformations: list[models.ResourceTransformation]) -> dict[str, int]:
    """Kueue's resource transformations (SEMANTICS §10.4; pkg/workload/workload.go
    applyResourceTransformations): per-pod ``requests`` (amounts: CPU in millicores, the rest in whole
    units) to the amounts the quota check counts.

    Each rule whose input the pod requests adds input x (the ``multiplyBy`` resource's request, when the pod
    asks for it) x factor to each output, as exact decimals, so a milli factor or a milli request is not
    rounded before it is multiplied (Kueue #12953: 100m CPU x 3000 is 300, 100M x 3m is 300k); Replace drops
    the input, Retain keeps it as requested. What the rules generate is kept apart and a negative total of
    one output counts as zero, so an allowance written as a negative factor offsets other outputs but never
    a request under the same name (Kueue #14032). The sums are then rounded up into amounts, as Kueue's
    MilliValue/Value do, and a negative request counts as zero (Kueue's FloorToZero)."""
    if transformations and isinstance(transformations[0], LegacyResourceTransformation):
        return _transform_legacy(requests, transformations)
    out = dict(requests)
    generated: dict[str, Decimal] = {}
    with localcontext(_EXACT):  # products of int64 amounts and factors, kept whole
        for rule in transformations:
            if rule.input not in requests:
                continue
            value = _exact(rule.input, requests[rule.input])
            if rule.multiply_by and rule.multiply_by in requests:
                value *= _exact(rule.multiply_by, requests[rule.multiply_by])
            for resource, factor in rule.outputs.items():
                generated[resource] = generated.get(resource, _ZERO) + value * parse_decimal(factor)
            if rule.strategy == "Replace":
                out.pop(rule.input, None)
        for resource, total in generated.items():  # a negative total counts as zero, but is there
            out[resource] = out.get(resource, 0) + (_ceil_amount(resource, total) if total > 0 else 0)
    return {r: max(v, 0) for r, v in out.items()}


_ZERO = Decimal(0)
_EXACT = Context(prec=200, Emax=MAX_EMAX, Emin=MIN_EMIN)


def _exact(resource: str, amount: int) -> Decimal:
    """The quantity an amount of ``resource`` stands for (CPU amounts are millicores)."""
    return Decimal(amount).scaleb(-3) if is_milli_resource(resource) else Decimal(amount)


def _ceil_amount(resource: str, value: Decimal) -> int:
    """``value`` of ``resource`` as an amount, rounded up (MilliValue/Value), saturating at int64."""
    scaled = value.scaleb(3) if is_milli_resource(resource) else value
    return min(math.ceil(scaled), UNLIMITED)


def _transform_legacy(requests: dict[str, int], transformations: list[models.ResourceTransformation]) -> dict[str, int]:
    """:func:`_transform` as admitter logic 37 and preemptor 17 and earlier applied it, for replay."""
    out = dict(requests)
    for rule in transformations:
        if rule.input not in requests:
            continue
        amount = requests[rule.input]
        if rule.multiply_by and rule.multiply_by in requests:
            amount *= requests[rule.multiply_by]
        for resource, factor in rule.outputs.items():
            # factors are quantities of the output resource per input unit
            out[resource] = out.get(resource, 0) + _scaled(rule.input, amount, resource, factor)
        if rule.strategy == "Replace":
            out.pop(rule.input, None)
    return {r: max(v, 0) for r, v in out.items()}


def _scaled(input_resource: str, amount: int, output_resource: str, factor: str) -> int:
    per_unit = to_amount(output_resource, factor, allow_negative=True)
    if input_resource == "cpu":  # cpu amounts are millicores: scale back to cores
        return (amount * per_unit) // 1000
    return amount * per_unit


def _missing_priority_class(wl: WorkloadState, state: ClusterState) -> Why | None:
    """Misconfigured when the workload names a WorkloadPriorityClass that does not exist and
    sets no priority of its own (SEMANTICS §2.4)."""
    memo = _shape(wl)
    name = memo[2]
    if name is None or name in state.priority_classes:
        return None
    return Why("Misconfigured", f"WorkloadPriorityClass {name} not found")


_Shape = tuple[models.Workload, tuple[Why, Why] | None, str | None, bool, str | None]


def _shape(wl: WorkloadState) -> _Shape:
    """What :func:`plan` checks of the workload object alone, remembered on the state
    (``WorkloadState.shape_memo``, the admitter's cache: never folded, never written to a
    checkpoint) for as long as that object is in force (compared by identity: the fold replaces
    the object when the workload changes): the object, why it is misconfigured as admitter logic 40
    and earlier wrote it and as Kueue does (:func:`misconfigured_message`; None: it is not), the
    WorkloadPriorityClass it depends on (None: it sets its priority or names no class), whether a pod
    set names a resource claim (:func:`dra.uses_dra`) and its admission gate (:func:`admission_gate`)."""
    workload = wl.workload
    memo = wl.shape_memo
    if memo is not None and memo[0] is workload:
        return memo
    misconfigured = None
    if any(ps.misconfigured for ps in workload.spec.pod_sets):
        misconfigured = (
            Why("Misconfigured", misconfigured_message(workload, kueue=False), parked=True),
            Why("Misconfigured", misconfigured_message(workload, kueue=True), parked=True),
        )
    ref = workload.spec.priority_class_ref
    needs = (
        ref.name if ref is not None and workload.spec.priority is None and ref.kind == "WorkloadPriorityClass" else None
    )
    memo = (workload, misconfigured, needs, dra.uses_dra(workload), admission_gate(workload))
    wl.shape_memo = memo
    return memo


def misconfigured_message(workload: models.Workload, *, kueue: bool = True) -> str:
    """The Misconfigured message of a workload whose pod sets fail Kueue's admissibility checks (each pod
    set's ``misconfigured``, set by the watcher: ``resources validation failed: <errors>`` or ``resources
    didn't satisfy LimitRange constraints: <errors>``); "" when none does.

    As Kueue's pkg/workload/resources.go ValidateAdmissibility: the requests-over-limits errors of every
    pod set, aggregated, else the LimitRange errors of every pod set, aggregated (apimachinery's
    ``[a, b]`` for several). A pod set's text of another shape (an older watcher's) stands alone.
    ``kueue`` False (admitter logic 40 and earlier, for replay): the first misconfigured pod set's text
    after ``pod set <name>: ``.
    """
    texts = [(ps.name, ps.misconfigured) for ps in workload.spec.pod_sets if ps.misconfigured]
    if not texts:
        return ""
    if not kueue:
        name, text = texts[0]
        return f"pod set {name}: {text}"
    for prefix in (manifests.INVALID_RESOURCES, manifests.LIMIT_RANGE_PROBLEM):
        head = f"{prefix}: "
        errors = [e for _, text in texts if text.startswith(head) for e in _field_errors(text[len(head) :])]
        if errors:
            return head + manifests.aggregate_errors(errors)
    return texts[0][1]


def _field_errors(aggregate: str) -> list[str]:
    """The field errors :func:`manifests.aggregate_errors` joined: each starts with the Workload's
    ``spec.podSets[`` path, so a ``, `` before one is a separator."""
    if not (aggregate.startswith("[") and aggregate.endswith("]")):
        return [aggregate]
    parts = aggregate[1:-1].split(", spec.podSets[")
    return [parts[0], *("spec.podSets[" + part for part in parts[1:])]


def _resolve_local_queue(state: ClusterState, *, namespace: str, queue_name: str) -> tuple[str, Why | None]:
    """The ClusterQueue a LocalQueue feeds, or why its workloads cannot queue."""
    lq = state.local_queues.get((namespace, queue_name))
    if lq is None:
        return "", Why("Misconfigured", f"LocalQueue {queue_name} doesn't exist")
    if lq.spec.stop_policy != "None":
        return "", Why("Suspended", f"LocalQueue {queue_name} is inactive")
    if lq.spec.cluster_queue not in state.cluster_queues:
        return "", Why("Misconfigured", f"ClusterQueue {lq.spec.cluster_queue} doesn't exist")
    return lq.spec.cluster_queue, None


NAMESPACE_MISMATCH = Why("Misconfigured", "workload namespace doesn't match ClusterQueue selector", parked=True)
"""Kueue's pending reason for a workload whose namespace its ClusterQueue's namespaceSelector does not select
(pkg/workload/resources.go ErrNamespaceMismatch, written as it is)."""
NAMESPACE_MISMATCH_BEFORE_53 = Why(
    "Misconfigured", "Workload namespace doesn't match ClusterQueue selector", parked=True
)
"""The same as admitter logic 52 and earlier wrote it, for replay."""


def _namespace_mismatch(wl: WorkloadState, cq: models.ClusterQueue, state: ClusterState) -> Why | None:
    selector = cq.spec.namespace_selector
    namespace = wl.workload.metadata.namespace
    obj = state.namespaces.get(namespace)
    labels = {**(obj.metadata.labels if obj else {}), METADATA_NAME_LABEL: namespace}
    if selector is None or not matches(selector, labels):
        return NAMESPACE_MISMATCH
    return None


def matches(selector: models.LabelSelector, labels: dict[str, str]) -> bool:
    """Kubernetes LabelSelector semantics (matchLabels AND matchExpressions): :meth:`models.LabelSelector.matches`."""
    return selector.matches(labels)


def requeue_triggers(state: ClusterState, tree: quota.QuotaTree) -> dict[str, int]:
    """Per ClusterQueue, the log sequence of the latest requeue trigger in its cohort tree (SEMANTICS
    §3.6): a workload parked at or after it is still on Kueue's inadmissible list."""
    return _trigger_seq_by_cq(state, tree)


def with_releases(
    triggers: dict[str, int], released_in: Iterable[str], *, state: ClusterState, tree: quota.QuotaTree
) -> dict[str, int]:
    """``triggers`` (ClusterQueue -> its latest requeue trigger) with a trigger just past the fold's last
    sequence for every ClusterQueue in the cohort tree of one of ``released_in``, whose quota the cycle
    gave back: everything parked so far there is tried again. The fold records the release's own trigger
    at its record's sequence, later still, so what this cycle requeues stays requeued. ``triggers`` itself
    is left as it is (it is the layout's)."""
    roots = {id(tree.cluster_queues[name].root()) for name in released_in if name in tree.cluster_queues}
    if not roots:
        return triggers
    now = state.last_seq + 1
    out = dict(triggers)
    for name, node in tree.cluster_queues.items():
        if id(node.root()) in roots and out.get(name, 0) < now:
            out[name] = now
    return out


def _trigger_seq_by_cq(
    state: ClusterState, tree: quota.QuotaTree, *, whole_tree: bool = True, priority: bool = True, boost: bool = False
) -> dict[str, int]:
    """Per ClusterQueue, the latest requeue trigger anywhere in its cohort tree (SEMANTICS §3.6):
    on any ClusterQueue of the tree or on any of its cohorts, also one that no ClusterQueue hangs
    under. Kueue's queue manager requeues the whole tree of a Cohort's root when the Cohort is
    created or changed (pkg/cache/queue/manager.go AddOrUpdateCohort): a new Cohort with quota
    under a sibling branch is new capacity for every ClusterQueue of the tree.

    ``whole_tree`` False (admitter logic 18 and earlier, for replay): only the cohorts above one of
    the tree's ClusterQueues counted, so a cohort with none under it requeued nothing.

    ``priority`` False (admitter logic 28 and earlier, for replay): the trigger a quota-holding workload's
    priority change records (``cluster.PRIORITY_TRIGGER``; Kueue's workload controller requeues the
    inadmissible workloads of its tree) is not read.

    ``boost`` (the gate PriorityBoost on; never for admitter logic 36 and earlier, which read no gate of it):
    the trigger a quota-holding workload's change of effective priority through its priority-boost
    annotation records (``cluster.BOOST_TRIGGER``) counts as a priority change does."""
    triggers = state.requeue_triggers
    everything = triggers.get("*", 0)
    by_root: dict[int, int] = {}
    if whole_tree:
        for name, node in tree.cohorts.items():
            seq = triggers.get(f"cohort:{name}", 0)
            if seq:
                root = id(node.root())
                by_root[root] = max(seq, by_root.get(root, 0))
    roots: dict[str, int] = {}
    for name, node in tree.cluster_queues.items():
        root = roots[name] = id(node.root())
        latest = max(triggers.get(f"cq:{name}", 0), by_root.get(root, 0))
        if priority:
            latest = max(latest, triggers.get(f"{PRIORITY_TRIGGER}{name}", 0))
        if boost:
            latest = max(latest, triggers.get(f"{cluster.BOOST_TRIGGER}{name}", 0))
        if not whole_tree:
            ancestor = node.parent
            while ancestor is not None:
                latest = max(latest, triggers.get(f"cohort:{ancestor.name}", 0))
                ancestor = ancestor.parent
        by_root[root] = latest
    return {name: max(everything, by_root[root]) for name, root in roots.items()}
