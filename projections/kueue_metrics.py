"""Kueue's Prometheus metrics as a fold of the log: the counters and histograms only history gives.

Kueue (pkg/metrics/metrics.go, site/content/en/docs/reference/metrics.md; SEMANTICS-ADVANCED §G.1)
counts and times what happens to workloads as its controllers see it. Here the same numbers are
folded from the log, so they are the same after a restart, in every replica and in a replay, and
reproducible from the log alone: :class:`KueueMetrics` lives in :class:`ClusterState` (``metrics``),
goes into checkpoints and snapshots with it, and :mod:`kueue_es.projections.cluster` calls the
``on_*`` functions below at the exact points where its own fold changes a workload (a reservation
taken, an admission, an eviction, a release, a finish), with the state as it is before that change.

Times are the events' own (``at_ms``, ms since the epoch), never a clock; observations are kept in
integer milliseconds, so two folds of one log hold the same bytes. What is a gauge of the present
(pending workloads, usage, quotas, ClusterQueue status) is not folded here: the exporter
(:mod:`kueue_es.services.kueue_metrics`) computes it from the ClusterState at each scrape.

:data:`FAMILIES` is every family on Kueue's reference page, with Kueue's name, type, label names and
histogram buckets; ``docs/metrics.md`` says which carry no value in kueue-es and why.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from kueue_es.events import types

if TYPE_CHECKING:
    from kueue_es.projections.cluster import ClusterState, WorkloadState

Kind = Literal["counter", "gauge", "histogram"]


def _exponential(count: int) -> tuple[int, ...]:
    """Kueue's generateExponentialBuckets(count), in ms: 1 s, then 2.5 s doubling, ``count`` bounds."""
    return (1000, *(2500 * 2**n for n in range(count - 1)))


PROMETHEUS_DEFAULT: Final = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
"""client_golang's prometheus.DefBuckets in ms (Kueue's histograms without buckets of their own): 11
bounds, .005 s to 10 s; not prometheus_client's Python default, which adds .075, .75 and 7.5 s."""
EXP_14: Final = _exponential(14)
EXP_16: Final = _exponential(16)
CREATION_LATENCY: Final = tuple(10 * 2**n for n in range(11))  # prometheus.ExponentialBuckets(0.01, 2, 11)


@dataclass(frozen=True)
class Family:
    """One of Kueue's metric families: its name (``kueue_`` or ``multikueue_`` included), Prometheus
    type, label names in Kueue's order (``replica_role`` included where Kueue has it), help text and,
    for a histogram, its bucket upper bounds in ms."""

    name: str
    kind: Kind
    labels: tuple[str, ...]
    help: str
    buckets: tuple[int, ...] = ()


_R = "replica_role"

# label values Kueue's HELP texts list (pkg/metrics/metrics.go), shared by the families that repeat them
_EVICTION_REASONS = (
    "The label 'reason' can have the following values:\n"
    '- "Preempted" means that the workload was evicted in order to free resources for a workload with a higher priority or reclamation of nominal quota.\n'
    '- "PodsReadyTimeout" means that the eviction took place due to a PodsReady timeout.\n'
    '- "AdmissionCheck" means that the workload was evicted because at least one admission check transitioned to False.\n'
    '- "ClusterQueueStopped" means that the workload was evicted because the ClusterQueue is stopped.\n'
    '- "LocalQueueStopped" means that the workload was evicted because the LocalQueue is stopped.\n'
    '- "NodeFailures" means that the workload was evicted due to node failures when using TopologyAwareScheduling.\n'
    '- "Deactivated" means that the workload was evicted because spec.active is set to false.\n'
)
_CAUSE_ROOT = (
    "The label 'underlying_cause' can have the following values:\n"
    "- \"\" means that the value in 'reason' label is the root cause for eviction.\n"
)
_CAUSES_BY_KUEUE = (
    '- "AdmissionCheck" means that the workload was evicted by Kueue due to a rejected admission check.\n'
    '- "MaximumExecutionTimeExceeded" means that the workload was evicted by Kueue due to maximum execution time exceeded.\n'
    '- "RequeuingLimitExceeded" means that the workload was evicted by Kueue due to requeuing limit exceeded.'
)
_UNDERLYING_CAUSES = _CAUSE_ROOT + _CAUSES_BY_KUEUE
_UNDERLYING_CAUSES_WITH_PODS_READY = (
    _CAUSE_ROOT
    + '- "WaitForStart" means that the pods have not been ready since admission, or the workload is not admitted.\n'
    '- "WaitForRecovery" means that the Pods were ready since the workload admission, but some pod has failed.\n'
    + _CAUSES_BY_KUEUE
)
_PENDING_STATUSES = (
    "'status' can have the following values:\n"
    '- "active" means that the workloads are in the admission queue.\n'
    '- "inadmissible" means there was a failed admission attempt for these workloads and they won\'t be retried until cluster conditions, which could make this workload admissible, change'
)
_CQ_PC = ("cluster_queue", "priority_class", _R)
_LQ_PC = ("name", "namespace", "priority_class", _R)
_CQ_FR = ("cohort", "cluster_queue", "flavor", "resource", _R)
_LQ_FR = ("name", "namespace", "flavor", "resource", _R)


def _f(name: str, kind: Kind, labels: tuple[str, ...], help: str, buckets: tuple[int, ...] = ()) -> Family:
    return Family(name, kind, labels, help, buckets)


FAMILIES: Final[tuple[Family, ...]] = (
    # health
    _f(
        "kueue_admission_attempts_total",
        "counter",
        ("result", _R),
        "The total number of attempts to admit workloads.\n"
        "Each admission attempt might try to admit more than one workload.\n"
        "The label 'result' can have the following values:\n"
        "- 'success' means that at least one workload was admitted.,\n"
        "- 'inadmissible' means that no workload was admitted.",
    ),
    _f(
        "kueue_admission_attempt_duration_seconds",
        "histogram",
        ("result", _R),
        "The latency of an admission attempt.\n"
        "The label 'result' can have the following values:\n"
        "- 'success' means that at least one workload was admitted.,\n"
        "- 'inadmissible' means that no workload was admitted.",
        PROMETHEUS_DEFAULT,
    ),
    _f(
        "kueue_pod_scheduling_gate_removal_seconds",
        "histogram",
        ("name", "cluster_queue", "is_group", _R),
        "Duration from Workload admission to removal of a Pod scheduling gate.",
        PROMETHEUS_DEFAULT,
    ),
    _f(
        "kueue_workload_creation_latency_seconds",
        "histogram",
        ("job_kind", _R),
        "The time between a job was created until its workload was created, per 'job_kind'. Entries are only recorded for objects with generation 1.",
        CREATION_LATENCY,
    ),
    _f(
        "multikueue_workloads_admitted_total",
        "counter",
        ("cluster_queue", "cluster", _R),
        "The total number of remote workload admissions on a worker cluster, per 'cluster_queue' and 'cluster'. A workload may be counted more than once if it is evicted and re-admitted.",
    ),
    _f(
        "multikueue_workloads_dispatched_total",
        "counter",
        ("cluster_queue", "cluster", _R),
        "The total number of remote workloads created by the MultiKueue manager on a worker cluster, per 'cluster_queue' and 'cluster'.",
    ),
    # ClusterQueue
    _f(
        "kueue_admission_checks_wait_time_seconds",
        "histogram",
        _CQ_PC,
        "The time from when a workload got the quota reservation until admission, per 'cluster_queue'",
        EXP_14,
    ),
    _f(
        "kueue_admission_cycle_preemption_skips",
        "gauge",
        ("cluster_queue", _R),
        "The number of Workloads in the ClusterQueue that got preemption candidates but had to be skipped because other ClusterQueues needed the same resources in the same cycle",
    ),
    _f(
        "kueue_admission_wait_time_seconds",
        "histogram",
        _CQ_PC,
        "The time between a workload was created or requeued until admission, per 'cluster_queue'",
        EXP_16,
    ),
    _f(
        "kueue_admitted_active_workloads",
        "gauge",
        ("cluster_queue", _R),
        "The number of admitted Workloads that are active, per 'cluster_queue'",
    ),
    _f(
        "kueue_admitted_workloads_total",
        "counter",
        _CQ_PC,
        "The total number of admitted workloads per 'cluster_queue'",
    ),
    _f(
        "kueue_build_info",
        "gauge",
        ("git_version", "git_commit", "build_date", "go_version", "compiler", "platform"),
        "Kueue build information. 1 labeled by git version, git commit, build date, go version, compiler, platform",
    ),
    _f(
        "kueue_cluster_queue_info",
        "gauge",
        ("cluster_queue", "parent_cohort", "root_cohort", _R),
        "Reports ClusterQueue hierarchy information. The metric has value 1 and can be joined using labels.",
    ),
    _f(
        "kueue_cluster_queue_resource_pending",
        "gauge",
        ("cluster_queue", "resource", _R),
        "Reports the cluster_queue's total pending resource requests. Unlike resource_reservation, pending workloads have not yet been assigned to flavors.",
    ),
    _f(
        "kueue_cluster_queue_status",
        "gauge",
        ("cluster_queue", "status", _R),
        "Reports 'cluster_queue' with its 'status' (with possible values 'pending', 'active' or 'terminated').\n"
        "For a ClusterQueue, the metric only reports a value of 1 for one of the statuses.",
    ),
    _f(
        "kueue_evicted_workloads_once_total",
        "counter",
        ("cluster_queue", "reason", "underlying_cause", "priority_class", _R),
        "The number of unique workload evictions per 'cluster_queue',\n"
        + _EVICTION_REASONS
        + _UNDERLYING_CAUSES_WITH_PODS_READY,
    ),
    _f(
        "kueue_evicted_workloads_total",
        "counter",
        ("cluster_queue", "reason", "underlying_cause", "priority_class", _R),
        "The number of evicted workloads per 'cluster_queue',\n" + _EVICTION_REASONS + _UNDERLYING_CAUSES,
    ),
    _f(
        "kueue_execution_time_seconds",
        "histogram",
        _CQ_PC,
        "The total execution time of a finished admitted workload (from first admission to completion, including time across evict/readmit cycles), per 'cluster_queue'",
        EXP_16,
    ),
    _f(
        "kueue_finished_workloads",
        "gauge",
        ("cluster_queue", _R),
        "The number of finished workloads per 'cluster_queue'.",
    ),
    _f(
        "kueue_finished_workloads_total",
        "counter",
        _CQ_PC,
        "The total number of finished workloads per 'cluster_queue'",
    ),
    _f(
        "kueue_pending_scheduling_hashes",
        "gauge",
        ("cluster_queue", "status", _R),
        "The number of unique pending scheduling equivalence hashes, per 'cluster_queue' and 'status'. Reported only when SchedulingEquivalenceHashing is enabled.\n"
        + _PENDING_STATUSES,
    ),
    _f(
        "kueue_pending_workloads",
        "gauge",
        ("cluster_queue", "status", _R),
        "The number of pending workloads, per 'cluster_queue' and 'status'.\n" + _PENDING_STATUSES,
    ),
    _f(
        "kueue_pods_ready_to_evicted_time_seconds",
        "histogram",
        ("cluster_queue", "reason", "underlying_cause", _R),
        "The number of seconds between a workload's pods being ready and eviction workloads per 'cluster_queue',\n"
        + _EVICTION_REASONS
        + _UNDERLYING_CAUSES,
        EXP_14,
    ),
    _f(
        "kueue_preempted_workloads_total",
        "counter",
        ("preempting_cluster_queue", "reason", _R),
        "The number of preempted workloads per 'preempting_cluster_queue',\n"
        "The label 'reason' can have the following values:\n"
        '- "InClusterQueue" means that the workload was preempted by a workload in the same ClusterQueue.\n'
        '- "InCohortReclamation" means that the workload was preempted by a workload in the same cohort due to reclamation of nominal quota.\n'
        '- "InCohortFairSharing" means that the workload was preempted by a workload in the same cohort Fair Sharing.\n'
        '- "InCohortReclaimWhileBorrowing" means that the workload was preempted by a workload in the same cohort due to reclamation of nominal quota while borrowing.',
    ),
    _f(
        "kueue_preemption_target_recomputations_total",
        "counter",
        ("cluster_queue", "result", _R),
        "The total number of preemption target recomputations triggered when a workload's preemption\n"
        "targets overlap with targets selected by another workload in the same scheduling cycle.\n"
        "The label 'result' can have the following values:\n"
        "- 'new_targets' means the recomputation resolved the overlap by selecting non-overlapping targets.\n"
        "- 'deferred_fit' means the workload will fit only after earlier preemptions in the cycle complete.\n"
        "- 'skipped' means recomputation produced neither a deferred fit nor a fit with non-overlapping targets, including cases where overlap is removed but the workload still fails the fit check.\n"
        "Globally configured custom ClusterQueue labels are also appended to the base labels.",
    ),
    _f(
        "kueue_quota_reserved_wait_time_seconds",
        "histogram",
        _CQ_PC,
        "The time between a workload was created or requeued until it got quota reservation, per 'cluster_queue'",
        EXP_14,
    ),
    _f(
        "kueue_quota_reserved_workloads_total",
        "counter",
        _CQ_PC,
        "The total number of quota reserved workloads per 'cluster_queue'",
    ),
    _f(
        "kueue_replaced_workload_slices_total",
        "counter",
        ("cluster_queue", _R),
        "The number of replaced workload slices per 'cluster_queue'",
    ),
    _f(
        "kueue_reserving_active_workloads",
        "gauge",
        ("cluster_queue", _R),
        "The number of Workloads that are reserving quota, per 'cluster_queue'",
    ),
    _f(
        "kueue_unadmitted_workloads",
        "gauge",
        ("cluster_queue", "reason", "underlying_cause", _R),
        "The number of unadmitted workloads, per 'cluster_queue', 'reason', and 'underlying_cause'. "
        "This metric is only emitted when UnadmittedWorkloadsObservability feature gate is enabled.",
    ),
    _f(
        "kueue_workload_eviction_latency_seconds",
        "histogram",
        ("cluster_queue", "reason", _R),
        "The time from workload eviction (WorkloadEvicted condition becomes True) until the workload returns to Pending (quota released).\n"
        "Observed on status transition from admitted or quota-reserved to pending while WorkloadEvicted remains True.\n"
        "Each matching update observes one latency sample (seconds) into this histogram; Prometheus aggregates samples across workloads.\n"
        "Uses the eviction condition LastTransitionTime on the updated object as the start time; cluster_queue is taken from status.admission.cluster_queue on the pre-update object when set and non-empty (otherwise no sample is recorded for that update).\n"
        + _EVICTION_REASONS.removesuffix("\n"),
        EXP_14,
    ),
    # LocalQueue
    _f(
        "kueue_local_queue_admission_checks_wait_time_seconds",
        "histogram",
        _LQ_PC,
        "The time from when a workload got the quota reservation until admission, per 'local_queue'",
        EXP_14,
    ),
    _f(
        "kueue_local_queue_admission_fair_sharing_usage",
        "gauge",
        ("name", "namespace", "cluster_queue", _R),
        "Reports a value representing the LocalQueue's Admission Fair Sharing usage,\n"
        "calculated from the resource-weighted sum of consumed resources and pending\n"
        "admission penalties, divided by the LocalQueue's fair sharing weight",
    ),
    _f(
        "kueue_local_queue_admission_wait_time_seconds",
        "histogram",
        _LQ_PC,
        "The time between a workload was created or requeued until admission, per 'local_queue'",
        EXP_14,
    ),
    _f(
        "kueue_local_queue_admitted_active_workloads",
        "gauge",
        ("name", "namespace", _R),
        "The number of admitted Workloads that are active, per 'localQueue'",
    ),
    _f(
        "kueue_local_queue_admitted_workloads_total",
        "counter",
        _LQ_PC,
        "The total number of admitted workloads per 'local_queue'",
    ),
    _f(
        "kueue_local_queue_evicted_workloads_total",
        "counter",
        ("name", "namespace", "reason", "underlying_cause", "priority_class", _R),
        "The number of evicted workloads per 'local_queue',\n" + _EVICTION_REASONS + _UNDERLYING_CAUSES,
    ),
    _f(
        "kueue_local_queue_execution_time_seconds",
        "histogram",
        _LQ_PC,
        "The total execution time of a finished admitted workload (from first admission to completion, including time across evict/readmit cycles), per 'local_queue'",
        EXP_16,
    ),
    _f(
        "kueue_local_queue_finished_workloads",
        "gauge",
        ("name", "namespace", _R),
        "The number of finished workloads, per 'local_queue'.",
    ),
    _f(
        "kueue_local_queue_finished_workloads_total",
        "counter",
        _LQ_PC,
        "The total number of finished workloads per 'local_queue'",
    ),
    _f(
        "kueue_local_queue_pending_workloads",
        "gauge",
        ("name", "namespace", "status", _R),
        "The number of pending workloads, per 'local_queue' and 'status'.\n" + _PENDING_STATUSES,
    ),
    _f(
        "kueue_local_queue_quota_reserved_wait_time_seconds",
        "histogram",
        _LQ_PC,
        "The time between a workload was created or requeued until it got quota reservation, per 'local_queue'",
        EXP_14,
    ),
    _f(
        "kueue_local_queue_quota_reserved_workloads_total",
        "counter",
        _LQ_PC,
        "The total number of quota reserved workloads per 'local_queue'",
    ),
    _f(
        "kueue_local_queue_reserving_active_workloads",
        "gauge",
        ("name", "namespace", _R),
        "The number of Workloads that are reserving quota, per 'localQueue'",
    ),
    _f(
        "kueue_local_queue_resource_reservation",
        "gauge",
        _LQ_FR,
        "Reports the localQueue's total resource reservation within all the flavors",
    ),
    _f(
        "kueue_local_queue_resource_usage",
        "gauge",
        _LQ_FR,
        "Reports the localQueue's total resource usage within all the flavors",
    ),
    _f(
        "kueue_local_queue_status",
        "gauge",
        ("name", "namespace", "active", _R),
        "Reports 'localQueue' with its 'active' status (with possible values 'True', 'False', or 'Unknown').\n"
        "For a LocalQueue, the metric only reports a value of 1 for one of the statuses.",
    ),
    _f(
        "kueue_local_queue_unadmitted_workloads",
        "gauge",
        ("name", "namespace", "cluster_queue", "reason", "underlying_cause", _R),
        "The number of unadmitted workloads, per 'name', 'namespace', 'cluster_queue', 'reason', and "
        "'underlying_cause'. This metric is only emitted when UnadmittedWorkloadsObservability feature gate is "
        "enabled.",
    ),
    # Cohort
    _f(
        "kueue_cohort_info",
        "gauge",
        ("cohort", "parent_cohort", "root_cohort", _R),
        "Reports Cohort hierarchy information. The metric has value 1 and can be joined using labels.",
    ),
    _f(
        "kueue_cohort_subtree_admitted_active_workloads",
        "gauge",
        ("cohort", _R),
        "The number of admitted Workloads that are active, per cohort's subtree",
    ),
    _f(
        "kueue_cohort_subtree_admitted_workloads_total",
        "counter",
        ("cohort", "priority_class", _R),
        "The total number of admitted workloads per cohort's subtree",
    ),
    _f(
        "kueue_cohort_subtree_quota",
        "gauge",
        ("cohort", "flavor", "resource", _R),
        "Reports the cohort's nominal quota aggregated within the cohort's subtree. The values are reported per resource and flavor",
    ),
    _f(
        "kueue_cohort_subtree_resource_reservations",
        "gauge",
        ("cohort", "flavor", "resource", _R),
        "Reports the cohort's resource reservations aggregated within the cohort's subtree. The values are reported per resource and flavor",
    ),
    _f(
        "kueue_cohort_weighted_share",
        "gauge",
        ("cohort", _R),
        "Reports a value that representing the maximum of the ratios of usage above nominal\n"
        "quota to the lendable resources in the Cohort, among all the resources provided by\n"
        "the Cohort, and divided by the weight.\n"
        "If zero, it means that the usage of the Cohort is below the nominal quota.\n"
        "If the Cohort has a weight of zero and is borrowing, this will return NaN.",
    ),
    # optional: ClusterQueue resources (Kueue: metrics.enableClusterQueueResources)
    _f(
        "kueue_cluster_queue_borrowing_limit",
        "gauge",
        _CQ_FR,
        "Reports the cluster_queue's resource borrowing limit within all the flavors. If borrowingLimit is unset, this metric reports +Inf.",
    ),
    _f(
        "kueue_cluster_queue_lending_limit",
        "gauge",
        _CQ_FR,
        "Reports the cluster_queue's resource lending limit within all the flavors. If lendingLimit is unset, this metric reports +Inf.",
    ),
    _f(
        "kueue_cluster_queue_nominal_quota",
        "gauge",
        _CQ_FR,
        "Reports the cluster_queue's resource nominal quota within all the flavors",
    ),
    _f(
        "kueue_cluster_queue_resource_reservation",
        "gauge",
        _CQ_FR,
        "Reports the cluster_queue's total resource reservation within all the flavors",
    ),
    _f(
        "kueue_cluster_queue_resource_usage",
        "gauge",
        _CQ_FR,
        "Reports the cluster_queue's total resource usage within all the flavors",
    ),
    _f(
        "kueue_cluster_queue_weighted_share",
        "gauge",
        ("cluster_queue", "cohort", _R),
        "Reports a value that representing the maximum of the ratios of usage above nominal\n"
        "quota to the lendable resources in the cohort, among all the resources provided by\n"
        "the ClusterQueue, and divided by the weight.\n"
        "If zero, it means that the usage of the ClusterQueue is below the nominal quota.\n"
        "If the ClusterQueue has a weight of zero and is borrowing, this will return NaN.",
    ),
    # optional: waitForPodsReady
    _f(
        "kueue_admitted_until_ready_wait_time_seconds",
        "histogram",
        _CQ_PC,
        "The time between a workload was admitted until ready, per 'cluster_queue'",
        EXP_14,
    ),
    _f(
        "kueue_local_queue_admitted_until_ready_wait_time_seconds",
        "histogram",
        _LQ_PC,
        "The time between a workload was admitted until ready, per 'local_queue'",
        EXP_14,
    ),
    _f(
        "kueue_local_queue_ready_wait_time_seconds",
        "histogram",
        _LQ_PC,
        "The time between a workload was created or requeued until ready, per 'local_queue'",
        EXP_14,
    ),
    _f(
        "kueue_ready_wait_time_seconds",
        "histogram",
        _CQ_PC,
        "The time between a workload was created or requeued until ready, per 'cluster_queue'",
        EXP_14,
    ),
)

BY_NAME: Final[dict[str, Family]] = {family.name: family for family in FAMILIES}


class Histogram(msgspec.Struct, array_like=True, gc=False):
    """One histogram series: observations per bucket of its family (not cumulative; the last one is
    +Inf) and their sum in ms. Never tracked by the cyclic collector (``gc=False``): it holds only
    integers, so it can be in no reference cycle."""

    counts: list[int]
    sum_ms: int = 0


class KueueMetrics(msgspec.Struct):
    """The folded part of Kueue's metrics (kept in ``ClusterState.metrics``).

    ``counters[family][label values]`` and ``histograms[family][label values]`` hold every series,
    label values in the family's label order without ``replica_role`` (the exporter adds it).
    ``queued_ms[workload key]`` is when the workload last went (back) to its queue: its creation,
    or after an eviction the release of its quota (the end of its backoff when it had one; after a
    deactivation or a stop policy's drain, the admitter's first decision about it once active again or
    once its queues run again): Kueue's QueuedWaitTime basis (its Requeued condition's
    lastTransitionTime, else its creation). ``requeue_due[workload key]`` is the Requeued=False reason
    (``Deactivated``, ``ClusterQueueStopped``, ``LocalQueueStopped``) whose Requeued=True (``Reactivated``,
    ``...Restarted``) is still to come (:func:`on_decided`). ``executed_s[workload key]`` the whole seconds its
    earlier admissions ran (Kueue's accumulatedPastExecutionTimeSeconds, :func:`on_finished`).
    ``evicted_once[workload key]``
    the (reason, underlying cause) pairs it was already evicted for (Kueue's
    schedulingStats.evictions, for ``evicted_workloads_once_total``). ``attempt_seq`` is the
    admitter's DecisionRecord whose cycle is being counted, ``attempt_counted`` whether that cycle was
    counted yet (it is once it tried a workload: :func:`on_attempted`), ``attempt_success`` whether it
    reserved quota for some workload.
    """

    counters: dict[str, dict[tuple[str, ...], int]] = {}
    histograms: dict[str, dict[tuple[str, ...], Histogram]] = {}
    queued_ms: dict[str, int] = {}
    requeue_due: dict[str, str] = {}
    executed_s: dict[str, int] = {}
    evicted_once: dict[str, list[tuple[str, str]]] = {}
    attempt_seq: int = 0
    attempt_success: bool = False
    attempt_counted: bool = True  # a state folded before this field: its open cycle was counted at its record


_BOUNDS: Final[dict[str, tuple[int, ...]]] = {f.name: f.buckets for f in FAMILIES if f.kind == "histogram"}


def _inc(metrics: KueueMetrics, family: str, labels: tuple[str, ...], by: int = 1) -> None:
    counters = metrics.counters
    series = counters.get(family)
    if series is None:
        series = counters[family] = {}
    series[labels] = series.get(labels, 0) + by


def _observe(metrics: KueueMetrics, family: str, labels: tuple[str, ...], ms: int) -> None:
    if ms < 0:
        ms = 0
    bounds = _BOUNDS[family]
    histograms = metrics.histograms
    series = histograms.get(family)
    if series is None:
        series = histograms[family] = {}
    hist = series.get(labels)
    if hist is None:
        hist = series[labels] = Histogram(counts=[0] * (len(bounds) + 1))
    # the first bucket whose upper bound is at least ``ms`` (the +Inf one past them all)
    hist.counts[bisect_left(bounds, ms)] += 1
    hist.sum_ms += ms


def priority_class(wl: WorkloadState) -> str:
    """Kueue's priority_class label (workloadpatching.PriorityClassName): the name of the workload's
    priorityClassRef, "" without one."""
    ref = wl.workload.spec.priority_class_ref
    return ref.name if ref is not None else ""


def cohort_path(state: ClusterState, cohort: str) -> list[str]:
    """``cohort`` and its ancestors up to the root (each once; a loop stops where it repeats)."""
    out: list[str] = []
    current = cohort
    while current and current not in out:
        out.append(current)
        parent = state.cohorts.get(current)
        current = (parent.spec.parent_name or "") if parent is not None else ""
    return out


def underlying_cause(wl: WorkloadState, event: types.EvictionRequested) -> tuple[str, str]:
    """Kueue's (reason, underlying_cause) labels of an eviction: ``DeactivatedDueTo<cause>`` is reason
    ``Deactivated`` with that cause; a PodsReady timeout's cause is ``WaitForRecovery`` when the pods had
    been ready since admission, else ``WaitForStart`` (pkg/workload/evict, metrics.go)."""
    reason = event.reason
    if reason.startswith("DeactivatedDueTo"):
        return "Deactivated", reason.removeprefix("DeactivatedDueTo")
    if reason == "PodsReadyTimeout":
        recovering = wl.pods_ready is not None and wl.pods_ready.reason == "WaitForRecovery"
        return reason, "WaitForRecovery" if recovering else "WaitForStart"
    return reason, ""


# --- the fold's hooks (called by projections.cluster with the state before its change) ----------


def on_observed(state: ClusterState, wl: WorkloadState) -> None:
    """A workload first seen: it is queued since its creation."""
    state.metrics.queued_ms.setdefault(wl.key, wl.workload.metadata.creation_timestamp_ms)


def on_forgotten(state: ClusterState, key: str) -> None:
    """A workload gone from the fold: its per-workload records go too."""
    state.metrics.queued_ms.pop(key, None)
    state.metrics.requeue_due.pop(key, None)
    state.metrics.executed_s.pop(key, None)
    state.metrics.evicted_once.pop(key, None)


_LABELS: Final[dict[str, tuple[str, ...]]] = {f.name: tuple(n for n in f.labels if n != _R) for f in FAMILIES}
"""Each family's label names as its folded series hold their values (``replica_role`` left out)."""


def on_queue_deleted(state: ClusterState, kind: str, namespace: str, name: str) -> None:
    """A ClusterQueue or LocalQueue is gone: its counter and histogram series go with it, as Kueue's queue
    manager clears them when it deletes the queue (pkg/metrics/metrics.go ClearClusterQueueMetrics: every
    series whose ``cluster_queue`` label, ``preempting_cluster_queue`` for preempted workloads, names it;
    ClearLocalQueueMetrics: the ``kueue_local_queue_*`` series of that ``name`` and ``namespace``). A queue made
    again under its name counts from zero."""
    metrics = state.metrics
    for table in (metrics.counters, metrics.histograms):
        for family, series in table.items():
            labels = _LABELS.get(family, ())
            if kind == "ClusterQueue":
                label = "preempting_cluster_queue" if "preempting_cluster_queue" in labels else "cluster_queue"
                if label not in labels:
                    continue
                index = labels.index(label)
                gone = [values for values in series if values[index] == name]
            elif kind == "LocalQueue" and family.startswith("kueue_local_queue_") and "namespace" in labels:
                at_name, at_namespace = labels.index("name"), labels.index("namespace")
                gone = [values for values in series if values[at_name] == name and values[at_namespace] == namespace]
            else:
                continue
            for values in gone:
                del series[values]


def on_record(state: ClusterState, record: types.DecisionRecord, *, seq: int, admitter: bool) -> None:
    """A DecisionRecord folded: an admitter record that decides something may be an admission attempt
    (Kueue's scheduling cycle, which scheduler.go counts once it had heads to try); it is counted when
    the first of its decisions that tries a workload is folded (:func:`on_attempted`). A record of only
    evictions, releases, admissions after checks or deactivations is no attempt; a cycle that decides
    nothing leaves no trace on the log."""
    metrics = state.metrics
    if admitter and record.decided and seq > metrics.attempt_seq:
        metrics.attempt_seq, metrics.attempt_success, metrics.attempt_counted = seq, False, False
    elif not admitter:
        metrics.attempt_seq = max(metrics.attempt_seq, seq)
        metrics.attempt_success, metrics.attempt_counted = True, True


def on_attempted(state: ClusterState, *, reserved: bool) -> None:
    """A decision of the admitter's open cycle that tried a workload: it reserved quota (``reserved``) or
    left the workload pending (a WorkloadInadmissible or pending outcome). The cycle counts once in
    ``kueue_admission_attempts_total``: ``inadmissible`` until one of its decisions reserves quota, then
    ``success`` (scheduler.go schedule: AdmissionAttempt with success when any head was admitted)."""
    metrics = state.metrics
    if not metrics.attempt_counted:
        metrics.attempt_counted, metrics.attempt_success = True, reserved
        _inc(metrics, "kueue_admission_attempts_total", ("success",) if reserved else ("inadmissible",))
    elif reserved and not metrics.attempt_success:
        metrics.attempt_success = True
        _inc(metrics, "kueue_admission_attempts_total", ("inadmissible",), -1)
        _inc(metrics, "kueue_admission_attempts_total", ("success",))


STOPPED_REASONS: Final = ("ClusterQueueStopped", "LocalQueueStopped")
"""The eviction reasons of a stop policy's drain (``HoldAndDrain``), which Requeued=False keeps until the queue runs
again (workload_controller.go: Requeued=True ``ClusterQueueRestarted`` / ``LocalQueueRestarted``)."""


def on_decided(
    state: ClusterState,
    wl: WorkloadState,
    event: types.QuotaReserved | types.WorkloadAdmitted | types.WorkloadInadmissible | types.PendingOutcome,
) -> None:
    """An admitter's decision about ``wl`` (reserved, admitted or still pending): when it waits for its Requeued=True
    (``requeue_due``) and the reason is gone (active again after a deactivation; its LocalQueue, and for
    ``ClusterQueueStopped`` its ClusterQueue, without a stop policy again), it is queued from this decision's time.

    Kueue's workload controller sets Requeued=True ``Reactivated`` or ``...Restarted`` when it sees the change,
    just before the workload is queued and scheduled again, and QueuedWaitTime counts from that condition's
    lastTransitionTime. The log's facts of the change (a WorkloadObserved, a ClusterQueueObserved or
    LocalQueueObserved) carry no time of their own, so the first decision about the workload after it stands for
    that moment: the same time the dispatcher writes on the condition (services/dispatcher/status.py
    ``_reactivated``, ``_restarted``), so a workload admitted at once waits 0 s, as in Kueue (0 or 1 s there)."""
    metrics = state.metrics
    due = metrics.requeue_due.get(wl.key)
    if due is None or isinstance(event, types.PendingOutcome):
        return  # a bare PendingOutcome (a caller folding decide's outputs without a log) has no time
    if due == DEACTIVATED:
        if not wl.active:
            return
    else:
        lq = state.local_queues.get((wl.workload.metadata.namespace, wl.workload.spec.queue_name))
        if lq is None or lq.spec.stop_policy != "None":
            return
        if due == "ClusterQueueStopped":
            cq = state.cluster_queues.get(lq.spec.cluster_queue)
            if cq is None or cq.spec.stop_policy != "None":
                return
    del metrics.requeue_due[wl.key]
    metrics.queued_ms[wl.key] = event.at_ms


def on_deactivated(state: ClusterState, wl: WorkloadState, event: types.WorkloadDeactivated) -> None:
    """Kueue deactivated ``wl``: past its maximum execution time, its earlier admissions' time is forgotten
    (workload_controller.go reconcileMaxExecutionTime clears accumulatedPastExecutionTimeSeconds). Holding no
    quota: Requeued=False from now on, True again (``Reactivated``) once it is active again (:func:`on_decided`)."""
    if event.reason == "MaximumExecutionTimeExceeded":
        state.metrics.executed_s.pop(wl.key, None)
    if wl.reservation is None:
        state.metrics.queued_ms[wl.key] = event.at_ms
        state.metrics.requeue_due[wl.key] = DEACTIVATED


def on_reserved(state: ClusterState, wl: WorkloadState, event: types.QuotaReserved) -> None:
    """QuotaReserved for a workload holding none: quota_reserved_workloads_total and its wait
    (scheduler.go recordQuotaReservationMetrics)."""
    metrics = state.metrics
    if metrics.attempt_seq:
        on_attempted(state, reserved=True)
    pc = priority_class(wl)
    lq = (wl.workload.spec.queue_name, wl.workload.metadata.namespace, pc)
    wait = event.at_ms - metrics.queued_ms.get(wl.key, wl.workload.metadata.creation_timestamp_ms)
    cq_pc = (event.cluster_queue, pc)
    _inc(metrics, "kueue_quota_reserved_workloads_total", cq_pc)
    _observe(metrics, "kueue_quota_reserved_wait_time_seconds", cq_pc, wait)
    _inc(metrics, "kueue_local_queue_quota_reserved_workloads_total", lq)
    _observe(metrics, "kueue_local_queue_quota_reserved_wait_time_seconds", lq, wait)


def on_multikueue(
    state: ClusterState,
    wl: WorkloadState,
    event: types.WorkersNominated | types.RemoteAdmissionChosen,
    *,
    nominated_before: Sequence[str] = (),
) -> None:
    """MultiKueue's counters (pkg/metrics ReportMultiKueueWorkloadDispatched, ...Admitted), per ClusterQueue
    and worker: a copy dispatched to each worker a nomination adds (the MultiKueue edge creates it; Kueue
    counts the create), an admission when the check turns Ready on a worker."""
    if wl.reservation is None:
        return
    cq = wl.reservation.cluster_queue
    if not hasattr(event, "clusters"):  # RemoteAdmissionChosen
        _inc(state.metrics, "multikueue_workloads_admitted_total", (cq, event.cluster))
        return
    for cluster in event.clusters:
        if cluster not in nominated_before:
            _inc(state.metrics, "multikueue_workloads_dispatched_total", (cq, cluster))


def on_admitted(state: ClusterState, wl: WorkloadState, event: types.WorkloadAdmitted) -> None:
    """WorkloadAdmitted for a workload holding quota: admitted_workloads_total, its wait since queued,
    the admission checks' wait since the reservation, and the cohort subtrees' totals
    (workload_controller.go, scheduler.go recordWorkloadAdmissionEvents)."""
    assert wl.reservation is not None
    metrics = state.metrics
    cq, pc = wl.reservation.cluster_queue, priority_class(wl)
    lq = (wl.workload.spec.queue_name, wl.workload.metadata.namespace, pc)
    wait = event.at_ms - metrics.queued_ms.get(wl.key, wl.workload.metadata.creation_timestamp_ms)
    cq_pc = (cq, pc)
    _inc(metrics, "kueue_admitted_workloads_total", cq_pc)
    _observe(metrics, "kueue_admission_wait_time_seconds", cq_pc, wait)
    _inc(metrics, "kueue_local_queue_admitted_workloads_total", lq)
    _observe(metrics, "kueue_local_queue_admission_wait_time_seconds", lq, wait)
    if wl.checks or event.at_ms > wl.reservation.at_ms:
        checks_wait = event.at_ms - wl.reservation.at_ms
        _observe(metrics, "kueue_admission_checks_wait_time_seconds", cq_pc, checks_wait)
        _observe(metrics, "kueue_local_queue_admission_checks_wait_time_seconds", lq, checks_wait)
    cluster_queue = state.cluster_queues.get(cq)
    if cluster_queue is not None and cluster_queue.spec.cohort_name:
        for cohort in cohort_path(state, cluster_queue.spec.cohort_name):
            _inc(metrics, "kueue_cohort_subtree_admitted_workloads_total", (cohort, pc))


def on_pods_ready(state: ClusterState, wl: WorkloadState, event: types.WorkloadPodsReady) -> None:
    """PodsReady turned True with reason Started for an admitted workload (reconciler.go: once per start,
    not on recovery): ready_wait_time (since queued) and admitted_until_ready_wait_time."""
    previous = wl.pods_ready
    if not (wl.admitted and wl.reservation is not None and event.ready and event.reason in ("Started", "")):
        return
    if previous is not None and previous.ready:
        return
    metrics = state.metrics
    cq, pc = wl.reservation.cluster_queue, priority_class(wl)
    lq = (wl.workload.spec.queue_name, wl.workload.metadata.namespace, pc)
    ready = event.at_ms - metrics.queued_ms.get(wl.key, wl.workload.metadata.creation_timestamp_ms)
    since_admitted = event.at_ms - wl.admitted_at_ms
    cq_pc = (cq, pc)
    _observe(metrics, "kueue_ready_wait_time_seconds", cq_pc, ready)
    _observe(metrics, "kueue_local_queue_ready_wait_time_seconds", lq, ready)
    _observe(metrics, "kueue_admitted_until_ready_wait_time_seconds", cq_pc, since_admitted)
    _observe(metrics, "kueue_local_queue_admitted_until_ready_wait_time_seconds", lq, since_admitted)


def on_evicted(state: ClusterState, wl: WorkloadState, event: types.EvictionRequested) -> None:
    """EvictionRequested for a workload holding quota and not yet evicted (evict.go): evicted_workloads_total
    (and once per reason and cause), the LocalQueue's, pods_ready_to_evicted_time while its pods were
    ready, and for a preemption preempted_workloads_total by the preemptor's ClusterQueue."""
    assert wl.reservation is not None
    metrics = state.metrics
    cq, pc = wl.reservation.cluster_queue, priority_class(wl)
    reason, cause = underlying_cause(wl, event)
    _inc(metrics, "kueue_evicted_workloads_total", (cq, reason, cause, pc))
    lq = (wl.workload.spec.queue_name, wl.workload.metadata.namespace)
    _inc(metrics, "kueue_local_queue_evicted_workloads_total", (*lq, reason, cause, pc))
    seen = metrics.evicted_once.setdefault(wl.key, [])
    if (reason, cause) not in seen:
        seen.append((reason, cause))
        _inc(metrics, "kueue_evicted_workloads_once_total", (cq, reason, cause, pc))
    if wl.pods_ready is not None and wl.pods_ready.ready:
        ready_for = event.at_ms - wl.pods_ready.at_ms
        _observe(metrics, "kueue_pods_ready_to_evicted_time_seconds", (cq, reason, cause), ready_for)
    if event.reason == "Preempted" and event.preemption_reason:
        _inc(
            metrics,
            "kueue_preempted_workloads_total",
            (preempting_cluster_queue(state, event), event.preemption_reason),
        )


def preempting_cluster_queue(state: ClusterState, event: types.EvictionRequested) -> str:
    """The ClusterQueue of an eviction's preemptor: its PreemptionIssued's, else its LocalQueue's; "" when
    unknown."""
    if event.preemptor is None:
        return ""
    issued = state.preemptors.get(event.preemptor.key)
    if issued is not None:
        return issued.cluster_queue
    preemptor = state.workloads.get(event.preemptor.key)
    if preemptor is None:
        return ""
    lq = state.local_queues.get((preemptor.workload.metadata.namespace, preemptor.workload.spec.queue_name))
    return lq.spec.cluster_queue if lq is not None else ""


DEACTIVATED: Final = "Deactivated"
"""Kueue's eviction reason of a workload whose ``spec.active`` was set false by hand (kueue.WorkloadDeactivated)."""
DEACTIVATED_MESSAGE: Final = "The workload is deactivated"
"""Its Evicted message (workload_controller.go)."""


def implied_eviction(wl: WorkloadState, event: types.QuotaReleased) -> types.EvictionRequested | None:
    """The eviction a release stands for, None when it stands for none: a QuotaReleased ``Deactivated`` of a
    workload holding quota and not being evicted (a job's reservation still waiting for its admission checks,
    set inactive by hand) is Kueue's two steps in one: its workload controller evicts every inactive workload
    (Evicted ``Deactivated``, counted by evict.go Evict since the workload has ``status.admission``) and the
    job reconciler, finding the job suspended, clears the reservation at once. The log holds the release alone
    (its job never started: there is nothing to stop), so the metrics, the status and ``explain`` read the
    eviction from it, at the release's time."""
    if event.reason != DEACTIVATED or wl.reservation is None or wl.eviction is not None:
        return None
    return types.EvictionRequested(
        workload=event.workload,
        cluster_queue=wl.reservation.cluster_queue,
        reason=DEACTIVATED,
        message=DEACTIVATED_MESSAGE,
        at_ms=event.at_ms,
    )


def on_released(state: ClusterState, wl: WorkloadState, event: types.QuotaReleased) -> None:
    """QuotaReleased for a workload holding quota: after an eviction, workload_eviction_latency (eviction
    to release) and the workload is queued again from now (or from the end of its backoff). A release that is
    an eviction too (:func:`implied_eviction`) counts that eviction first, as an EvictionRequested would, and
    its latency is 0."""
    if wl.admitted and wl.admitted_at_ms:
        # admissionchecks.go SyncAdmittedCondition: the seconds since the Admitted condition's time, which the
        # object holds in whole seconds, added to accumulatedPastExecutionTimeSeconds when it turns False
        ran = (event.at_ms - _whole_second(wl.admitted_at_ms)) // 1000
        if ran > 0:
            state.metrics.executed_s[wl.key] = state.metrics.executed_s.get(wl.key, 0) + ran
    eviction = wl.eviction
    if eviction is None:
        eviction = implied_eviction(wl, event)
        if eviction is None:
            return
        on_evicted(state, wl, eviction)
    assert wl.reservation is not None
    reason, _ = underlying_cause(wl, eviction)
    latency = event.at_ms - eviction.at_ms
    _observe(state.metrics, "kueue_workload_eviction_latency_seconds", (wl.reservation.cluster_queue, reason), latency)
    state.metrics.queued_ms[wl.key] = event.at_ms
    # Requeued=False until reactivated or restarted: the job reconciler writes the Evicted reason on it
    if eviction.reason.startswith(DEACTIVATED):
        state.metrics.requeue_due[wl.key] = DEACTIVATED
    elif eviction.reason in STOPPED_REASONS:
        state.metrics.requeue_due[wl.key] = eviction.reason
    else:
        state.metrics.requeue_due.pop(wl.key, None)


def on_requeued(state: ClusterState, wl: WorkloadState, event: types.WorkloadRequeued) -> None:
    """The backoff after an eviction is over: the workload is queued again from now (Requeued=True)."""
    state.metrics.queued_ms[wl.key] = event.at_ms
    state.metrics.requeue_due.pop(wl.key, None)


def on_finished(state: ClusterState, wl: WorkloadState, event: types.WorkloadFinished) -> None:
    """WorkloadFinished of a workload holding quota (workload_controller.go reportFinishedWorkload):
    finished_workloads_total and, when it was admitted, its execution time: the earlier admissions' whole seconds
    (Kueue's accumulatedPastExecutionTimeSeconds) plus this one's, the Finished time less the Admitted time, both
    in whole seconds as Kueue reads them from the object's conditions (workload.go TotalExecutionTime), so a job
    that ran 5 s reads 5 s. The admission's ``at_ms`` is the admitter's clock in ms and the finish the job's
    status in whole seconds: taken as they are, a 5 s job read 4.591 s."""
    if wl.reservation is None:
        return
    metrics = state.metrics
    cq, pc = wl.reservation.cluster_queue, priority_class(wl)
    lq = (wl.workload.spec.queue_name, wl.workload.metadata.namespace, pc)
    cq_pc = (cq, pc)
    _inc(metrics, "kueue_finished_workloads_total", cq_pc)
    _inc(metrics, "kueue_local_queue_finished_workloads_total", lq)
    if wl.admitted:
        this = max(0, _whole_second(event.at_ms) - _whole_second(wl.admitted_at_ms))
        total = metrics.executed_s.get(wl.key, 0) * 1000 + this
        _observe(metrics, "kueue_execution_time_seconds", cq_pc, total)
        _observe(metrics, "kueue_local_queue_execution_time_seconds", lq, total)


def _whole_second(ms: int) -> int:
    """``ms`` (since the epoch) down to its whole second, as a metav1.Time on an object holds it."""
    return ms - ms % 1000


def on_slice_replaced(state: ClusterState, event: types.QuotaReleased) -> None:
    """An elastic slice replaced by a newer one of its chain (QuotaReleased ``WorkloadSliceReplaced``):
    replaced_workload_slices_total of its ClusterQueue (scheduler.go replaceWorkloadSlice)."""
    _inc(state.metrics, "kueue_replaced_workload_slices_total", (event.cluster_queue,))
