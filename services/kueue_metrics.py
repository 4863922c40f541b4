"""Kueue's Prometheus metrics on a service's ``/metrics``, read from its folded :class:`ClusterState`.

:class:`KueueCollector` is a prometheus-client collector: at each scrape it turns the state into
every family of :data:`kueue_es.projections.kueue_metrics.FAMILIES`, with Kueue's names, types,
labels and buckets. The counters and histograms come from the fold (``state.metrics``, the same in
every replica and after a restart); the gauges of the present (pending workloads active and
inadmissible, reserving and admitted workloads, usage, quotas, ClusterQueue and LocalQueue status,
cohorts, weighted shares, unadmitted workloads) from the state as it is; every pending workload of a ClusterQueue that
cannot admit (stopped, or otherwise inactive: :func:`kueue_es.scheduling.readiness.admits`) is ``inadmissible``, as in Kueue.
Kueue's leader alone updates its metrics, so the collector exports Kueue's families only while
``active()`` says this replica does the work (the decider's standby lease,
:mod:`kueue_es.services.standby`): a Prometheus scraping two replicas does not count twice. ``replica_role`` is ``leader`` under a lease and ``standalone`` without one, as in Kueue.

The admitter registers it (:mod:`kueue_es.services.deciding`); ``docs/metrics.md`` lists every family.
"""

from __future__ import annotations

import math
import platform
import sys
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from kueue_es import __version__
from kueue_es.events import quantities
from kueue_es.events.models import ClusterQueue
from kueue_es.projections import afs, quota
from kueue_es.projections.cluster import ClusterState, WorkloadState, priority_of
from kueue_es.projections.kueue_metrics import BY_NAME, FAMILIES, Family, Histogram, cohort_path
from kueue_es.scheduling import concurrent_admission as ca
from kueue_es.scheduling import fairsharing, queues, readiness, visibility

Labels = tuple[str, ...]

UNADMITTED_GATE = "UnadmittedWorkloadsObservability"
"""Kueue's gate (on by default since 0.19) for the unadmitted workloads gauges and condition reasons."""

HASHING_GATE = "SchedulingEquivalenceHashing"
"""Kueue's gate (on by default since 0.18) for ``kueue_pending_scheduling_hashes``."""


def scheduling_shape(state: ClusterState, wl: WorkloadState) -> bytes:
    """What Kueue's scheduling equivalence hash of a pending workload covers (workload.go
    ``computeSchedulingHash``), as canonical bytes: two workloads have the same hash iff these are equal.
    Its effective priority, and per pod set its name, count, minCount, topology request and its pods'
    scheduling shape as the log knows it (effective per-pod requests in millicores and bytes, nodeSelector,
    tolerations, required node affinity, resource claims). Kueue hashes each container's requests and ports
    apart: two templates with the same per-pod total split over containers differently are one shape here."""
    pod_sets = [msgspec.structs.replace(ps, misconfigured="") for ps in wl.workload.spec.pod_sets]
    return msgspec.json.encode((priority_of(wl.workload, state), pod_sets), order="sorted")


def amount(resource: str, value: int) -> float:
    """A quantity as Kueue's gauges give it (Quantity.AsApproximateFloat64): cpu in cores (from
    millicores), anything else in its unit (memory in bytes)."""
    return value / 1000 if quantities.is_milli_resource(resource) else float(value)


class _Series:
    """The samples of every family for one scrape: label values (without ``replica_role``) -> value."""

    def __init__(self) -> None:
        self.values: dict[str, dict[Labels, float]] = {family.name: {} for family in FAMILIES}

    def set(self, family: str, labels: Labels, value: float) -> None:
        self.values[family][labels] = value

    def add(self, family: str, labels: Labels, value: float) -> None:
        series = self.values[family]
        series[labels] = series.get(labels, 0.0) + value


def gauges(state: ClusterState) -> dict[str, dict[Labels, float]]:
    """The gauges of the present, per family and label values (``replica_role`` left out): what the state
    says now. Pure: the same state gives the same values (see the module for what each means)."""
    out = _Series()
    tree = quota.cached(state)
    held = _Held(state)
    _cluster_queues(state, tree, held, out)
    _pending(state, tree, out)
    _local_queues(state, held, out)
    _cohorts(state, tree, held, out)
    _unadmitted(state, out)
    return out.values


FRUsage = dict[tuple[str, str], int]
LQRef = tuple[str, str]  # (namespace, name)


class _Held:
    """Who holds quota now: counts and usage per ClusterQueue and per LocalQueue (``usage``: admitted only)."""

    def __init__(self, state: ClusterState) -> None:
        self.reserving: dict[str, int] = {}
        self.admitted: dict[str, int] = {}
        self.usage: dict[str, FRUsage] = {}
        self.lq_reserving: dict[LQRef, int] = {}
        self.lq_admitted: dict[LQRef, int] = {}
        self.lq_reserved: dict[LQRef, FRUsage] = {}
        self.lq_usage: dict[LQRef, FRUsage] = {}
        for cq_name, keys in state.reserved.items():
            for key in keys:
                wl = state.workloads.get(key)
                if wl is None or wl.reservation is None:
                    continue
                lq_ref = (wl.workload.metadata.namespace, wl.workload.spec.queue_name)
                usage = quota.reservation_usage(wl.held or wl.reservation)  # after dynamic reclaim
                self.reserving[cq_name] = self.reserving.get(cq_name, 0) + 1
                self.lq_reserving[lq_ref] = self.lq_reserving.get(lq_ref, 0) + 1
                _merge(self.lq_reserved.setdefault(lq_ref, {}), usage)
                if wl.admitted:
                    self.admitted[cq_name] = self.admitted.get(cq_name, 0) + 1
                    self.lq_admitted[lq_ref] = self.lq_admitted.get(lq_ref, 0) + 1
                    _merge(self.usage.setdefault(cq_name, {}), usage)
                    _merge(self.lq_usage.setdefault(lq_ref, {}), usage)


def _cluster_queues(state: ClusterState, tree: quota.QuotaTree, held: _Held, out: _Series) -> None:
    """Status, hierarchy, quotas and limits, reservation and usage, weighted share of every ClusterQueue."""
    weights = fairsharing.Weights(state) if state.configuration.fair_sharing is not None else None
    for cq_name, cq in sorted(state.cluster_queues.items()):
        cohort = cq.spec.cohort_name or ""
        path = cohort_path(state, cohort) if cohort else []
        out.set("kueue_cluster_queue_info", (cq_name, cohort, path[-1] if path else ""), 1)
        active = readiness.cluster_queue_active(cq, state=state).status
        status = "terminating" if cq.terminating else "active" if active else "pending"
        for value in ("pending", "active", "terminating"):
            out.set("kueue_cluster_queue_status", (cq_name, value), float(value == status))
        out.set("kueue_reserving_active_workloads", (cq_name,), held.reserving.get(cq_name, 0))
        out.set("kueue_admitted_active_workloads", (cq_name,), held.admitted.get(cq_name, 0))
        out.set("kueue_replaced_workload_slices_total", (cq_name,), 0)  # present at 0; the fold counts (state.metrics)
        for group in cq.spec.resource_groups:
            for fq in group.flavors:
                for rq in fq.resources:
                    labels = (cohort, cq_name, fq.name, rq.name)
                    out.set("kueue_cluster_queue_nominal_quota", labels, amount(rq.name, rq.nominal_quota))
                    borrowing = math.inf if rq.borrowing_limit is None else amount(rq.name, rq.borrowing_limit)
                    lending = math.inf if rq.lending_limit is None else amount(rq.name, rq.lending_limit)
                    out.set("kueue_cluster_queue_borrowing_limit", labels, borrowing)
                    out.set("kueue_cluster_queue_lending_limit", labels, lending)
                    reserved = state.usage_of(cq_name, fq.name, rq.name)
                    used = held.usage.get(cq_name, {}).get((fq.name, rq.name), 0)
                    out.set("kueue_cluster_queue_resource_reservation", labels, amount(rq.name, reserved))
                    out.set("kueue_cluster_queue_resource_usage", labels, amount(rq.name, used))
        node = tree.cluster_queues.get(cq_name)
        # every ClusterQueue while fair sharing is on, 0 for one in no cohort (Kueue's
        # dominantResourceShare of a node without a parent), as Kueue's reportWeightedShare
        if weights is not None and node is not None and not node.in_cycle:
            share = fairsharing.share(node, weights).weighted
            out.set("kueue_cluster_queue_weighted_share", (cq_name, cohort), math.nan if share == math.inf else share)


def _pending(state: ClusterState, tree: quota.QuotaTree, out: _Series) -> None:
    """Pending workloads per ClusterQueue and LocalQueue, ``active`` or ``inadmissible``, their requests, and
    per ClusterQueue the number of their unique scheduling shapes (:func:`scheduling_shape`) in each status
    (gate SchedulingEquivalenceHashing).

    ``inadmissible``: every pending workload of a ClusterQueue that cannot admit now (:func:`readiness.admits`:
    stopped or otherwise inactive; Kueue reportCQPendingWorkloads / reportLQPendingWorkloads count a whole
    inactive ClusterQueue so), else those parked since the latest requeue trigger of its cohort tree
    (Kueue's inadmissible list); ``active``: the rest. A stopped LocalQueue's workloads count nowhere:
    Kueue takes them out of the queue (manager.go DeleteLocalQueue) and its series stay at 0, and so do the
    workloads :func:`visibility.counted` leaves out (ConcurrentAdmission's parents, workloads refused for DRA
    reasons: never in Kueue's queue manager)."""
    triggers = queues.requeue_triggers(state, tree)
    admitting = {cq_name: readiness.admits(state, tree, cq_name) for cq_name in state.cluster_queues}
    hashing = state.configuration.feature_gates.get(HASHING_GATE, True)
    # per ClusterQueue, the scheduling shapes of its active and of its inadmissible pending workloads
    shapes: dict[str, tuple[set[bytes], set[bytes]]] = {name: (set(), set()) for name in state.cluster_queues}
    for cq_name, cq in state.cluster_queues.items():
        for status in ("active", "inadmissible"):
            out.add("kueue_pending_workloads", (cq_name, status), 0)
        # every resource of its quotas at 0 with nothing pending, as Kueue's PendingWorkloads
        # UpdateConfiguredResources seeds pendingResourcesTotal
        for _, resource in _quota_pairs(cq):
            out.add("kueue_cluster_queue_resource_pending", (cq_name, resource), 0)
    for namespace, lq_name in state.local_queues:
        for status in ("active", "inadmissible"):
            out.add("kueue_local_queue_pending_workloads", (lq_name, namespace, status), 0)
    for (namespace, lq_name), queued in state.queued.items():
        feeding = state.local_queues.get((namespace, lq_name))
        if feeding is None or feeding.spec.cluster_queue not in state.cluster_queues:
            continue
        if feeding.spec.stop_policy != "None":  # Kueue takes a stopped LocalQueue's workloads out of the queue
            continue
        target = feeding.spec.cluster_queue
        trigger = triggers.get(target, 0)
        counts = [0, 0]  # active, inadmissible
        for order in queued:
            key = order[-1]
            # ConcurrentAdmission's parents and the workloads refused for DRA reasons are never in Kueue's queues
            if not visibility.counted(state, key):
                continue
            inadmissible = readiness.counts_inadmissible(queued, key, admitting=admitting[target], trigger=trigger)
            counts[int(inadmissible)] += 1
            wl = state.workloads.get(key)
            if wl is None:
                continue
            if hashing:
                shapes[target][int(inadmissible)].add(scheduling_shape(state, wl))
            for pod_set in wl.workload.spec.pod_sets:
                # the pods its job reported reclaimable are not asked for (Kueue sums Info.TotalRequests, the
                # counts after reclaim: pending_workloads.go addPendingResources, podSetsCountsAfterReclaim)
                count = pod_set.count - min(wl.reclaimable.get(pod_set.name, 0), pod_set.count)
                for resource, per_pod in pod_set.requests.items():
                    if per_pod:
                        pending = amount(resource, per_pod * count)
                        out.add("kueue_cluster_queue_resource_pending", (target, resource), pending)
        for status, count in (("active", counts[0]), ("inadmissible", counts[1])):
            out.add("kueue_pending_workloads", (target, status), count)
            out.add("kueue_local_queue_pending_workloads", (lq_name, namespace, status), count)
    if hashing:  # Kueue reportPendingSchedulingHashes: unique hashes, an inactive ClusterQueue's all inadmissible
        for cq_name, (active_shapes, parked_shapes) in shapes.items():
            out.set("kueue_pending_scheduling_hashes", (cq_name, "active"), len(active_shapes))
            out.set("kueue_pending_scheduling_hashes", (cq_name, "inadmissible"), len(parked_shapes))


def _local_queues(state: ClusterState, held: _Held, out: _Series) -> None:
    """Status, workloads holding quota, finished workloads, reservation and usage, and admission fair
    sharing usage of every LocalQueue (those but its status and finished workloads only while its ClusterQueue
    exists); finished workloads per ClusterQueue (by their LocalQueue's)."""
    for cq_name in state.cluster_queues:
        out.add("kueue_finished_workloads", (cq_name,), 0)
    for namespace, lq_name in state.local_queues:
        out.add("kueue_local_queue_finished_workloads", (lq_name, namespace), 0)
    for wl in state.workloads.values():
        if wl.finished is None or wl.deleted_seq:
            continue
        lq_ref = (wl.workload.metadata.namespace, wl.workload.spec.queue_name)
        finished_in = state.local_queues.get(lq_ref)
        if finished_in is None:
            continue
        if finished_in.spec.cluster_queue in state.cluster_queues:  # Kueue's queue manager reports its own CQs
            out.add("kueue_finished_workloads", (finished_in.spec.cluster_queue,), 1)
        out.add("kueue_local_queue_finished_workloads", (lq_ref[1], lq_ref[0]), 1)
    now_ms = max((ledger.last_ms for ledger in state.afs_ledgers.values()), default=0)
    for lq_ref, lq in sorted(state.local_queues.items()):
        namespace, name = lq_ref
        status = "True" if readiness.local_queue_active(lq, state=state).status else "False"
        for value in ("True", "False", "Unknown"):
            out.set("kueue_local_queue_status", (name, namespace, value), float(value == status))
        cq = state.cluster_queues.get(lq.spec.cluster_queue)
        # Kueue's scheduler cache reports these from the LocalQueues of a ClusterQueue it holds, and clears them
        # when the ClusterQueue is deleted (cache.go DeleteClusterQueue, ClearLocalQueueCacheMetrics): none while
        # the LocalQueue's ClusterQueue does not exist; its status (False) and counters stay
        if cq is not None:
            reserving, admitted = held.lq_reserving.get(lq_ref, 0), held.lq_admitted.get(lq_ref, 0)
            out.set("kueue_local_queue_reserving_active_workloads", (name, namespace), reserving)
            out.set("kueue_local_queue_admitted_active_workloads", (name, namespace), admitted)
        # every flavor and resource of its ClusterQueue's quotas, 0 when the LocalQueue holds none, as
        # Kueue's LocalQueue.reportResourceMetrics (pkg/cache/scheduler) walks the ClusterQueue's quotas
        for flavor, resource in _quota_pairs(cq) if cq is not None else ():
            reserved = held.lq_reserved.get(lq_ref, {}).get((flavor, resource), 0)
            used = held.lq_usage.get(lq_ref, {}).get((flavor, resource), 0)
            labels = (name, namespace, flavor, resource)
            out.set("kueue_local_queue_resource_reservation", labels, amount(resource, reserved))
            out.set("kueue_local_queue_resource_usage", labels, amount(resource, used))
        if cq is not None and afs.active(cq, state.configuration):
            ledger = state.afs_ledgers.get(lq_ref)
            # Kueue's reportAfsUsage counts the entry penalties still pending (localqueue_controller.go)
            usage = afs.usage_value(ledger, now_ms=now_ms, config=state.configuration, lq=lq, pending=True)
            out.set("kueue_local_queue_admission_fair_sharing_usage", (name, namespace, lq.spec.cluster_queue), usage)


def _unadmitted(state: ClusterState, out: _Series) -> None:
    """Workloads not admitted, per ClusterQueue and per LocalQueue, by the reason of their Admitted condition
    and the underlying cause (their QuotaReserved reason; "" while they hold quota), as Kueue's queue manager
    counts them (pkg/cache/queue/unadmitted_workloads.go) with its gate UnadmittedWorkloadsObservability on
    (the default; off: no samples). Every workload that is not admitted, finished or deleted counts, in the
    ClusterQueue its LocalQueue names (none when its LocalQueue is missing or stopped: Kueue's queue manager
    does not have it; nor when its LocalQueue names no ClusterQueue: Kueue skips the name ""). Not reserved: ``NoReservation`` and its pending reason (``PendingEvaluation`` before
    the admitter first looked at it); reserved and waiting for its admission checks or topology:
    ``UnsatisfiedAdmissionChecks`` and "". A ConcurrentAdmission variant never counts (its parent does: Kueue's
    getUnadmittedWorkloadStatus), and a parent counts until one of its variants is admitted (the fold holds no
    admission of the parent itself: the controller writes it on the object from that variant's)."""
    if not state.configuration.feature_gates.get(UNADMITTED_GATE, True):
        return
    admitted_parents = {uid for wl in state.workloads.values() if wl.admitted and (uid := ca.parent_uid(wl.workload))}
    for wl in state.workloads.values():
        if wl.admitted or wl.gone or ca.parent_uid(wl.workload):
            continue
        if admitted_parents and wl.workload.metadata.uid in admitted_parents:
            continue
        meta = wl.workload.metadata
        lq = state.local_queues.get((meta.namespace, wl.workload.spec.queue_name))
        if lq is None or lq.spec.stop_policy != "None" or not lq.spec.cluster_queue:
            continue
        if wl.reservation is not None:
            reason, cause = "UnsatisfiedAdmissionChecks", ""
        else:
            reason, cause = "NoReservation", wl.pending_reason or "PendingEvaluation"
        cq_name = lq.spec.cluster_queue
        out.add("kueue_unadmitted_workloads", (cq_name, reason, cause), 1)
        out.add("kueue_local_queue_unadmitted_workloads", (lq.metadata.name, meta.namespace, cq_name, reason, cause), 1)


def _cohorts(state: ClusterState, tree: quota.QuotaTree, held: _Held, out: _Series) -> None:
    """Hierarchy, subtree quota, reservations and admitted workloads of every Cohort (named by a Cohort object or
    by a ClusterQueue's cohortName), the weighted share of every Cohort object."""
    weights = fairsharing.Weights(state) if state.configuration.fair_sharing is not None else None
    for name, node in sorted(tree.cohorts.items()):
        path = cohort_path(state, name)
        obj = state.cohorts.get(name)
        parent = (obj.spec.parent_name or "") if obj is not None else ""
        out.set("kueue_cohort_info", (name, parent, path[-1] if path else name), 1)
        if node.in_cycle:
            continue
        for (flavor, resource), nominal in sorted(node.subtree.items()):
            out.set("kueue_cohort_subtree_quota", (name, flavor, resource), amount(resource, nominal))
        subtree_admitted = 0
        for leaf in _cluster_queues_under(node):
            subtree_admitted += held.admitted.get(leaf.name, 0)
            for leaf_flavor, resources in state.usage.get(leaf.name, {}).items():
                for resource, reserved in resources.items():
                    labels = (name, leaf_flavor, resource)
                    out.add("kueue_cohort_subtree_resource_reservations", labels, amount(resource, reserved))
        out.set("kueue_cohort_subtree_admitted_active_workloads", (name,), subtree_admitted)
        if weights is not None and obj is not None:
            # every Cohort object the cohort controller reconciles (cohort_controller.go updateCohortStatusIfChanged),
            # a root at 0 (no parent: dominantResourceShare's zero); the share as CohortStats gives it, +Inf for a
            # zero weight that borrows (only the ClusterQueue's reportWeightedShare makes that NaN)
            out.set("kueue_cohort_weighted_share", (name,), fairsharing.share(node, weights).weighted)


def _quota_pairs(cq: ClusterQueue) -> list[tuple[str, str]]:
    """(flavor, resource) of every quota of ``cq``, in its resource groups' order."""
    return [(fq.name, rq.name) for group in cq.spec.resource_groups for fq in group.flavors for rq in fq.resources]


def _merge(into: dict[tuple[str, str], int], usage: dict[tuple[str, str], int]) -> None:
    for fr, value in usage.items():
        into[fr] = into.get(fr, 0) + value


def _cluster_queues_under(node: quota.Node) -> Iterator[quota.Node]:
    for child in node.children:
        if child.is_cohort:
            yield from _cluster_queues_under(child)
        else:
            yield child


def build_info() -> Labels:
    """``kueue_build_info``'s label values: kueue-es's version as git_version, the Python version as
    go_version (there is no Go), the interpreter as compiler, OS/architecture as platform."""
    return (
        __version__,
        "",
        "",
        platform.python_version(),
        sys.implementation.name,
        f"{sys.platform}/{platform.machine()}",
    )


def families(
    state: ClusterState, *, replica_role: str, present: dict[str, dict[Labels, float]] | None = None
) -> list[Metric]:
    """Every Kueue family of :data:`FAMILIES` for ``state``, ``replica_role`` added to the labels of the
    families that have it; histograms with Kueue's buckets (stored in ms, exported in seconds).
    ``present``: the gauges to export (default :func:`gauges` of ``state``, which has every family whatever the
    Configuration). The families of :data:`CLUSTER_QUEUE_RESOURCE_FAMILIES` carry series only with the
    Configuration's ``metrics.enableClusterQueueResources``, and the ``kueue_local_queue_*`` ones only of the
    LocalQueues ``metrics.localQueueMetrics`` picks."""
    present = gauges(state) if present is None else present
    present["kueue_build_info"] = {build_info(): 1.0}
    metrics = state.metrics
    out: list[Metric] = []
    exposed = _exposed_local_queues(state)
    resources = state.configuration.enable_cluster_queue_resources
    for family in FAMILIES:
        role = (replica_role,) if family.labels and family.labels[-1] == "replica_role" else ()
        counters = metrics.counters.get(family.name, {})
        histograms = metrics.histograms.get(family.name, {})
        gauge = present.get(family.name, {})
        if not resources and family.name in CLUSTER_QUEUE_RESOURCE_FAMILIES:
            gauge = {}  # metrics.enableClusterQueueResources off (Kueue's default): none of their series
        if family.name.startswith(LOCAL_QUEUE_PREFIX):
            # only the LocalQueues metrics.localQueueMetrics picks (ShouldExposeLocalQueueMetrics)
            name_at, namespace_at = family.labels.index("name"), family.labels.index("namespace")

            def kept(labels: Labels, name_at: int = name_at, namespace_at: int = namespace_at) -> bool:
                return exposed(labels[namespace_at], labels[name_at])

            counters = {k: v for k, v in counters.items() if kept(k)}
            histograms = {k: v for k, v in histograms.items() if kept(k)}
            gauge = {k: v for k, v in gauge.items() if kept(k)}
        out.append(_family(family, counters, histograms, gauge, role))
    return out


CLUSTER_QUEUE_RESOURCE_FAMILIES = frozenset(
    {
        "kueue_cluster_queue_nominal_quota",
        "kueue_cluster_queue_borrowing_limit",
        "kueue_cluster_queue_lending_limit",
        "kueue_cluster_queue_resource_reservation",
        "kueue_cluster_queue_resource_usage",
        "kueue_cluster_queue_resource_pending",
        "kueue_cluster_queue_weighted_share",
    }
)
"""The families Kueue reports only with ``metrics.enableClusterQueueResources`` (cmd/kueue/main.go
WithResourceMetrics, core.go WithReportResourceMetrics): a ClusterQueue's quotas, limits, reservation and usage
(pkg/cache/scheduler clusterqueue.go reportResourceMetrics), its pending requests (pkg/cache/queue metrics.go)
and its weighted share (reportResourceMetrics and clusterqueue_controller.go, with fair sharing on too). The
Cohort and LocalQueue resource gauges are not gated."""

LOCAL_QUEUE_PREFIX = "kueue_local_queue_"
LOCAL_QUEUE_METRICS_GATE = "LocalQueueMetrics"
"""Kueue's gate (beta, on by default since 0.17) for the ``kueue_local_queue_*`` families."""


def _exposed_local_queues(state: ClusterState) -> Callable[[str, str], bool]:
    """Whether LocalQueue ``(namespace, name)`` has its ``kueue_local_queue_*`` series exported: the gate
    LocalQueueMetrics on, ``metrics.localQueueMetrics.enable`` (the whole section absent: Kueue's default, on; a
    section without ``enable``: off, as Kueue's defaults.go fills in only a missing section) and its
    ``localQueueSelector`` matching the LocalQueue's labels (one not in the state has none). Kueue
    pkg/metrics/localqueue.go ShouldExposeLocalQueueMetrics."""
    configuration = state.configuration
    if not configuration.feature_gates.get(LOCAL_QUEUE_METRICS_GATE, True):
        return lambda namespace, name: False
    section = configuration.local_queue_metrics
    if section is not None and not section.enable:
        return lambda namespace, name: False
    selector = section.local_queue_selector if section is not None else None
    if selector is None:
        return lambda namespace, name: True

    def exposed(namespace: str, name: str) -> bool:
        lq = state.local_queues.get((namespace, name))
        return selector.matches(lq.metadata.labels if lq is not None else {})

    return exposed


def _family(
    family: Family,
    counters: dict[Labels, int],
    histograms: dict[Labels, Histogram],
    gauge: dict[Labels, float],
    role: Labels,
) -> Metric:
    """One family's samples: ``counters`` plus the ``gauge`` values of a counter family, ``gauge`` of a gauge,
    ``histograms`` of a histogram (stored in ms, exported in seconds); ``role`` appended to each label set."""
    metric: Any
    if family.kind == "counter":
        metric = CounterMetricFamily(family.name, family.help, labels=family.labels)
        values = dict(gauge)
        for labels, count in counters.items():
            values[labels] = values.get(labels, 0.0) + count
        for labels, total in sorted(values.items()):
            metric.add_metric([*labels, *role], total)
    elif family.kind == "gauge":
        metric = GaugeMetricFamily(family.name, family.help, labels=family.labels)
        for labels, value in sorted(gauge.items()):
            metric.add_metric([*labels, *role], value)
    else:
        metric = HistogramMetricFamily(family.name, family.help, labels=family.labels)
        for labels, hist in sorted(histograms.items()):
            buckets = []
            running = 0
            for bound, count in zip(family.buckets, hist.counts, strict=False):
                running += count
                buckets.append((_le(bound), float(running)))
            running += hist.counts[-1]
            buckets.append(("+Inf", float(running)))
            metric.add_metric([*labels, *role], buckets, hist.sum_ms / 1000)
    return metric


WEIGHTED_SHARE = "kueue_cluster_queue_weighted_share"


def _le(bound_ms: int) -> str:
    return repr(bound_ms / 1000)


class KueueCollector(Collector):
    """Kueue's families from ``state()`` at each scrape, while ``active()`` (None: always; then
    ``replica_role`` is ``standalone``, else ``leader``)."""

    def __init__(self, state: Callable[[], ClusterState], *, active: Callable[[], bool] | None = None) -> None:
        self.state, self.active = state, active
        self._shares: dict[Labels, float] = {}  # the weighted shares last exported, by (cluster_queue, cohort)

    def collect(self) -> Iterator[Metric]:
        if self.active is not None and not self.active():
            return
        state = self.state()
        present = gauges(state)
        if state.configuration.enable_cluster_queue_resources:  # exported: the last ones exported are kept
            present[WEIGHTED_SHARE] = self._with_deleted_shares(state, present.get(WEIGHTED_SHARE, {}))
        yield from families(state, replica_role="standalone" if self.active is None else "leader", present=present)

    def _with_deleted_shares(self, state: ClusterState, shares: dict[Labels, float]) -> dict[Labels, float]:
        """``shares``, and the last exported share of each ClusterQueue deleted since: Kueue's gauge is cleared
        only when a ClusterQueue's cohort or custom labels change (metrics.go
        ClearClusterQueueMetricsOnLabelChange), not when it is deleted, so a deleted one's last share stays
        until the process restarts (Kueue's e2e metrics_test.go expects it after the deletion). A
        ClusterQueue still there keeps only its present series (a cohort change drops the old one)."""
        kept = {
            labels: value
            for labels, value in self._shares.items()
            if labels not in shares and labels[0] not in state.cluster_queues
        }
        self._shares = {**kept, **shares}
        return dict(self._shares)

    def describe(self) -> Iterator[Metric]:
        """The families without samples (so registering does not run a scrape)."""
        for family in FAMILIES:
            yield _empty(family)


def _empty(family: Family) -> Metric:
    if family.kind == "counter":
        return CounterMetricFamily(family.name, family.help, labels=family.labels)
    if family.kind == "gauge":
        return GaugeMetricFamily(family.name, family.help, labels=family.labels)
    return HistogramMetricFamily(family.name, family.help, labels=family.labels)


__all__ = ["BY_NAME", "CLUSTER_QUEUE_RESOURCE_FAMILIES", "KueueCollector", "amount", "families", "gauges"]
