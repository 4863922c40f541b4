"""The steps of Kueue's test/e2e/singlecluster/baseline/metrics_test.go (Describe "Metrics") and of what
prometheus_test.go (Describe "Prometheus") checks that runs without a Prometheus, run by
tests/e2e/test_kueue_e2e_baseline.py on ``kueue-es demo --keep`` with Kueue's e2e manager Configuration
(tests/fixtures/kueue-e2e/: ``metrics.enableClusterQueueResources``, the gate LocalQueueMetrics, fair sharing on).

prometheus_test.go runs a Prometheus (the Prometheus Operator's, test/e2e/config/prometheus/) that finds Kueue
through its ServiceMonitor and scrapes it with a token the ClusterRole kueue-metrics-reader lets through; then it
asks the Prometheus API for the target's health and PromQL queries. No Prometheus runs here, so the steps check
what a scrape gets (:func:`kueue_target_up_with_build_info`, :func:`admission_metrics_scraped`), and
tests/deploy/test_monitoring.py what makes a Prometheus find the admitter (deploy/monitoring's PodMonitor).

Kueue curls its controller's /metrics from a pod (test/util/e2e.go GetKueueMetrics); here the admitter's /metrics
is read over HTTP (:meth:`E2E.kueue_metrics`, docs/metrics.md). Kueue's matcher (pkg/util/testing/metrics_matchers.go
ContainMetrics, ExcludeMetrics) looks for a line holding every given string; its cases run one at a time on a
cluster they leave empty, so a bare family name stands for "a series of this family". The steps here run beside
other steps on one system, so each expectation names a family and the label values of the step's own objects
(:class:`Series`), and only sample lines count (prometheus_client writes ``# HELP``/``# TYPE`` lines for a family
without samples, client_golang does not).

Where kueue-es differs from Kueue, on purpose (docs/metrics.md says why):

- ``kueue_admission_attempt_duration_seconds`` and ``kueue_admission_cycle_preemption_skips`` are declared but
  carry no samples (neither a cycle's duration nor its skipped preemptions are on the log): for those the steps
  check the family is declared (:data:`NO_SAMPLES`).

``kueue_cluster_queue_weighted_share`` stays after its ClusterQueue is deleted, as Kueue's case expects: Kueue clears
it only when the ClusterQueue's cohort or custom labels change (metrics.go ClearClusterQueueMetricsOnLabelChange).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.demo_process import eventually
from tests.e2e.kueue_e2e import (
    E2E,
    KUEUE,
    PRIORITY_CLASS_LABEL,
    Step,
    cluster_queue,
    condition,
    container,
    flavor,
    is_true,
    job,
    local_queue,
    namespace,
    priority_class,
)
from tests.e2e.waiting import eventually as _eventually

NO_SAMPLES = frozenset({"kueue_admission_attempt_duration_seconds", "kueue_admission_cycle_preemption_skips"})
"""Families kueue-es declares without samples (docs/metrics.md, "carry no value"): checked for their
``# TYPE`` line where Kueue's case expects a series."""

_SUFFIXES = ("", "_total", "_bucket", "_count", "_sum")


class Series:
    """An expected series: ``family`` with these label values (a tuple: any one of them). Kueue's
    ``{"kueue_pending_workloads", cq.Name}`` is ``Series("kueue_pending_workloads", cluster_queue=cq)``."""

    def __init__(self, family: str, /, **labels: str | tuple[str, ...]) -> None:
        self.family = family
        self.labels = labels

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        """The sample ``name``{``labels``} is one of this series (a histogram's buckets, count and sum too)."""
        if not any(name == self.family + suffix for suffix in _SUFFIXES):
            return False
        for key, wanted in self.labels.items():
            options = wanted if isinstance(wanted, tuple) else (wanted,)
            if labels.get(key) not in options:
                return False
        return True

    def __repr__(self) -> str:
        return f"{self.family}{self.labels}"


def _values(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of the exposition ``text`` as Prometheus parses it: (sample name, labels, value)."""
    return [
        (s.name, dict(s.labels), s.value) for family in text_string_to_metric_families(text) for s in family.samples
    ]


def _present(text: str, samples: Sequence[tuple[str, dict[str, str], float]], series: Series) -> bool:
    if series.family in NO_SAMPLES:
        return f"# TYPE {series.family} " in text
    return any(series.matches(name, labels) for name, labels, _ in samples)


async def expect_metrics(e2e: E2E, expected: Iterable[Series], *, available: bool) -> None:
    """util.ExpectMetricsToBeAvailable (``available``) / ExpectMetricsNotToBeAvailable: until every series of
    ``expected`` is on the admitter's /metrics (is on it no more); the AssertionError names those that are not."""
    wanted = list(expected)

    async def wrong() -> list[Series]:
        text = await e2e.kueue_metrics()
        samples = _values(text)
        return [s for s in wanted if _present(text, samples, s) != available]

    what = f"every series {'on' if available else 'gone from'} the admitter's /metrics (wrong: last seen)"
    await _eventually(wrong, lambda left: not left, what=what, timeout=90, interval=0.5)


def _workload(name: str, ns: str, queue: str, cpu: str) -> dict[str, Any]:
    """MakeWorkload(name, ns).Queue(queue).PodSets(MakePodSet("ps1", 1)).RequestAndLimit(cpu)."""
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "ps1",
                    "count": 1,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container({"cpu": cpu})]}},
                }
            ],
        },
    }


async def _active(e2e: E2E, cqs: Sequence[str], lqs: Sequence[str], ns: str) -> None:
    """CreateClusterQueuesAndWaitForActive, CreateLocalQueuesAndWaitForActive."""
    for cq in cqs:
        await e2e.wait("clusterqueue", cq, None, lambda o: is_true(o, "Active"), what=f"ClusterQueue {cq} active")
    for lq in lqs:
        await e2e.wait("localqueue", lq, ns, lambda o: is_true(o, "Active"), what=f"LocalQueue {ns}/{lq} active")


async def _delete(e2e: E2E, *what: str, ns: str | None = None) -> None:
    """util.ExpectObjectToBeDeleted: kubectl delete, waiting until the objects are gone (their finalizers too)."""
    args = ["delete", *what, "--ignore-not-found", "--wait=true", "--timeout=90s"]
    await e2e.kubectl.ok(*args, *(["-n", ns] if ns else []))


async def default_metrics(e2e: E2E) -> None:
    """metrics_test.go, When "workload is admitted", It "should ensure the default metrics are available": a
    Workload of 1 CPU admitted in a ClusterQueue of 1 CPU and 1Gi; every ClusterQueue and LocalQueue series there;
    the ClusterQueue deleted: its series and the LocalQueue's workloads holding quota go, the LocalQueue's pending
    workloads stay at 0 and its counters and status stay; the LocalQueue deleted: its series go."""
    ns = "e2e-metrics"
    rf, cq, lq = f"test-flavor-{ns}", f"test-cq-{ns}", "test-lq"
    await e2e.apply(namespace(ns), flavor(rf), cluster_queue(cq, {rf: {"cpu": "1", "memory": "1Gi"}}))
    await _active(e2e, [cq], [], ns)
    await e2e.apply(local_queue(lq, ns, cq))
    await _active(e2e, [], [lq], ns)
    await e2e.create(_workload("test-workload", ns, lq, "1"))
    await e2e.wait("workload", "test-workload", ns, lambda w: is_true(w, "Admitted"), what="test-workload admitted")

    in_cq = {"cluster_queue": cq}
    in_lq = {"namespace": ns, "name": lq}
    cluster_queue_series = [
        Series("kueue_pending_workloads", **in_cq),
        Series("kueue_pending_scheduling_hashes", **in_cq),
        Series("kueue_reserving_active_workloads", **in_cq),
        Series("kueue_admitted_active_workloads", **in_cq),
        Series("kueue_quota_reserved_workloads_total", **in_cq),
        Series("kueue_quota_reserved_wait_time_seconds", **in_cq),
        Series("kueue_admitted_workloads_total", **in_cq),
        Series("kueue_admission_wait_time_seconds", **in_cq),
        Series("kueue_cluster_queue_resource_usage", **in_cq),
        Series("kueue_cluster_queue_status", **in_cq),
        Series("kueue_cluster_queue_resource_reservation", **in_cq),
        Series("kueue_cluster_queue_resource_pending", **in_cq),
        Series("kueue_cluster_queue_nominal_quota", **in_cq),
        Series("kueue_cluster_queue_borrowing_limit", **in_cq),
        Series("kueue_cluster_queue_lending_limit", **in_cq),
    ]
    local_queue_counters = [
        Series("kueue_local_queue_quota_reserved_workloads_total", **in_lq),
        Series("kueue_local_queue_quota_reserved_wait_time_seconds", **in_lq),
        Series("kueue_local_queue_admitted_workloads_total", **in_lq, priority_class=""),
        Series("kueue_local_queue_admission_wait_time_seconds", **in_lq),
    ]
    held = [
        Series("kueue_local_queue_reserving_active_workloads", **in_lq),
        Series("kueue_local_queue_admitted_active_workloads", **in_lq),
    ]
    await expect_metrics(
        e2e,
        [
            Series("kueue_admission_attempts_total"),
            Series("kueue_admission_attempt_duration_seconds"),
            *cluster_queue_series,
            Series("kueue_cluster_queue_weighted_share", **in_cq),
            # LocalQueueMetrics
            Series("kueue_local_queue_pending_workloads", **in_lq),
            *held,
            *local_queue_counters,
            Series("kueue_local_queue_status", **in_lq),
        ],
        available=True,
    )

    # "deleting the cluster queue"
    await _delete(e2e, "workload/test-workload", ns=ns)
    await _delete(e2e, f"clusterqueue/{cq}")
    # the LocalQueue series the scheduler cache reports go with the ClusterQueue
    await expect_metrics(e2e, [*cluster_queue_series, *held], available=False)
    await expect_metrics(
        e2e,
        [
            Series("kueue_admission_attempts_total"),
            Series("kueue_admission_attempt_duration_seconds"),
            Series("kueue_cluster_queue_weighted_share", **in_cq),
            # cleared to 0
            Series("kueue_local_queue_pending_workloads", **in_lq, status="active"),
            Series("kueue_local_queue_pending_workloads", **in_lq, status="inadmissible"),
            # the counters stay until the LocalQueue goes, its status is False (ClusterQueueDoesNotExist)
            *local_queue_counters,
            Series("kueue_local_queue_status", **in_lq, active="False"),
        ],
        available=True,
    )
    text = await e2e.kueue_metrics()
    zeroes = [
        value
        for name, labels, value in _values(text)
        if name == "kueue_local_queue_pending_workloads" and labels.get("namespace") == ns and labels.get("name") == lq
    ]
    assert zeroes and all(v == 0 for v in zeroes), zeroes

    # "deleting the local queue"
    await _delete(e2e, f"localqueue/{lq}", ns=ns)
    await expect_metrics(
        e2e, [Series("kueue_local_queue_pending_workloads", **in_lq), *local_queue_counters], available=False
    )
    await _delete(e2e, f"resourceflavor/{rf}")


async def admission_check_metrics(e2e: E2E) -> None:
    """metrics_test.go, When "workload is admitted with admission checks", It "should ensure the admission check
    metrics are available": a Job's Workload holding quota in a ClusterQueue with an AdmissionCheck, the check set
    Ready: the admission checks wait time of the ClusterQueue and of the LocalQueue; the Job, Workload, LocalQueue
    and ClusterQueue deleted: both go."""
    ns = "e2e-metrics-checks"
    rf, check = f"test-flavor-{ns}", f"check1-{ns}"
    cq, lq = f"test-admission-check-cq-{ns}", "test-admission-checked-lq"
    await e2e.apply(
        namespace(ns),
        flavor(rf),
        {
            "apiVersion": KUEUE,
            "kind": "AdmissionCheck",
            "metadata": {"name": check},
            "spec": {"controllerName": "ac-controller"},
        },
    )
    await e2e.status_patch("admissioncheck", check, None, {"conditions": [_condition("Active", "True")]})
    await e2e.apply(cluster_queue(cq, {rf: {"cpu": "1", "memory": "1Gi"}}, admission_checks=[check]))
    await _active(e2e, [cq], [], ns)
    await e2e.apply(local_queue(lq, ns, cq))
    await _active(e2e, [], [lq], ns)
    await e2e.create(job("admission-checked-job", ns, queue=lq, requests={"cpu": "1"}))
    workload = await e2e.wait_workload_of("job", "admission-checked-job", ns)
    name = workload["metadata"]["name"]

    def reserved_with_check(w: Mapping[str, Any]) -> bool:
        admission = (w.get("status") or {}).get("admission") or {}
        checks = [c.get("name") for c in (w.get("status") or {}).get("admissionChecks") or []]
        return is_true(w, "QuotaReserved") and admission.get("clusterQueue") == cq and checks == [check]

    # ExpectWorkloadsToHaveQuotaReservationByKey, and the check on the Workload's status to set
    await e2e.wait("workload", name, ns, reserved_with_check, what=f"{name} holding quota in {cq}")
    entry = {"name": check, "state": "Ready", "message": "", "lastTransitionTime": _now()}
    await e2e.status_patch("workload", name, ns, {"admissionChecks": [entry]})
    await e2e.wait("workload", name, ns, lambda w: is_true(w, "Admitted"), what=f"{name} admitted")

    series = [
        Series("kueue_admission_checks_wait_time_seconds", cluster_queue=cq),
        Series("kueue_local_queue_admission_checks_wait_time_seconds", namespace=ns, name=lq),
    ]
    await expect_metrics(e2e, series, available=True)
    await _delete(e2e, "job/admission-checked-job", f"workload/{name}", f"localqueue/{lq}", ns=ns)
    await _delete(e2e, f"clusterqueue/{cq}")
    await expect_metrics(e2e, series, available=False)
    await _delete(e2e, f"admissioncheck/{check}", f"resourceflavor/{rf}")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, status: str) -> dict[str, str]:
    """util.SetAdmissionCheckActive's condition, as the check's controller writes it."""
    return {"type": kind, "status": status, "reason": "ByTest", "message": "by test", "lastTransitionTime": _now()}


def _preempting(name: str, cpu: str, cohort: str, rf: str) -> dict[str, Any]:
    """MakeClusterQueue(name).Cohort(cohort).ResourceGroup(rf: cpu).Preemption(LowerPriority within the
    ClusterQueue and reclaiming within the cohort, BorrowWithinCohort LowerPriority)."""
    cq = cluster_queue(name, {rf: {"cpu": cpu}})
    cq["spec"]["cohortName"] = cohort
    cq["spec"]["preemption"] = {
        "reclaimWithinCohort": "LowerPriority",
        "withinClusterQueue": "LowerPriority",
        "borrowWithinCohort": {"policy": "LowerPriority"},
    }
    return cq


async def eviction_and_preemption_metrics(e2e: E2E) -> None:
    """metrics_test.go, When "workload is admitted with eviction and preemption", It "should ensure the eviction
    and preemption metrics are available": two ClusterQueues of a cohort (2 and 3 CPU) full with a 1 CPU Job in
    each and a high-priority 3 CPU blocker in the second; two high-priority 4 CPU Jobs, one per ClusterQueue, wait;
    the blocker deactivated, both preempt, at least one is admitted: the eviction and preemption series of the
    ClusterQueues, the LocalQueue evictions of the second queue, the LocalQueue reservation and usage of the
    first; everything deleted: they go."""
    ns = "e2e-metrics-preemption"
    rf, cohort, high = f"test-flavor-{ns}", f"test-cohort-{ns}", f"high-{ns}"
    cq1, cq2, lq1, lq2 = f"test-cq-1-{ns}", f"test-cq-2-{ns}", "test-lq-1", "test-lq-2"
    await e2e.apply(
        namespace(ns),
        flavor(rf),
        _preempting(cq1, "2", cohort, rf),
        _preempting(cq2, "3", cohort, rf),
        priority_class(high, 100),
    )
    await _active(e2e, [cq1, cq2], [], ns)
    await e2e.apply(local_queue(lq1, ns, cq1), local_queue(lq2, ns, cq2))
    await _active(e2e, [], [lq1, lq2], ns)

    async def admitted(name: str, lq: str, cpu: str, *, priority: bool = False) -> dict[str, Any]:
        labels = {PRIORITY_CLASS_LABEL: high} if priority else {}
        await e2e.create(job(name, ns, queue=lq, requests={"cpu": cpu}, labels=labels))
        workload = await e2e.wait_workload_of("job", name, ns)
        wl_name = workload["metadata"]["name"]
        return await e2e.wait("workload", wl_name, ns, lambda w: is_true(w, "Admitted"), what=f"{name} admitted")

    await admitted("lower-job-1", lq1, "1")
    await admitted("lower-job-2", lq2, "1")
    blocker = await admitted("blocker", lq2, "3", priority=True)
    for name, lq in (("high-large-1", lq1), ("high-large-2", lq2)):
        await e2e.create(job(name, ns, queue=lq, requests={"cpu": "4"}, labels={PRIORITY_CLASS_LABEL: high}))

    # "Wait for higher-priority workloads to be pending (inadmissible)" (ExpectWorkloadsToBePending)
    highs = []
    for name in ("high-large-1", "high-large-2"):
        workload = await e2e.wait_workload_of("job", name, ns)
        wl_name = workload["metadata"]["name"]
        highs.append(wl_name)
        await e2e.wait(
            "workload",
            wl_name,
            ns,
            lambda w: condition(w, "QuotaReserved").get("status") == "False",
            what=f"{name} pending",
        )

    # "Deactivate the blocker workload"
    blocker_name = blocker["metadata"]["name"]
    patch = json.dumps({"spec": {"active": False}})
    await e2e.kubectl.ok("patch", "workload", blocker_name, "-n", ns, "--type=merge", "-p", patch)

    def deactivated(w: Mapping[str, Any]) -> bool:
        evicted = condition(w, "Evicted")
        return (evicted.get("status"), evicted.get("reason")) == ("True", "Deactivated")

    await e2e.wait("workload", blocker_name, ns, deactivated, what="the blocker evicted, Deactivated")

    # "Expecting at least one of the high-priority jobs to be admitted" (ExpectWorkloadsToBeAdmittedCount 1)
    async def admitted_highs() -> int:
        found = [await e2e.get("workload", name, ns) for name in highs]
        return sum(1 for w in found if w is not None and is_true(w, "Admitted"))

    await eventually(admitted_highs, what="a high-priority workload admitted")

    mine = (cq1, cq2)
    series = [
        Series("kueue_admission_cycle_preemption_skips"),
        Series("kueue_evicted_workloads_total", cluster_queue=mine),
        Series("kueue_evicted_workloads_once_total", cluster_queue=mine),
        Series("kueue_preempted_workloads_total", preempting_cluster_queue=mine),
        Series("kueue_local_queue_evicted_workloads_total", namespace=ns, name=lq2),
        Series("kueue_local_queue_resource_reservation", namespace=ns, name=lq1),
        Series("kueue_local_queue_resource_usage", namespace=ns, name=lq1),
    ]
    await expect_metrics(e2e, series, available=True)

    # "delete the cluster queue"
    await _delete(e2e, "jobs", "--all", ns=ns)
    await _delete(e2e, "workloads", "--all", ns=ns)
    await _delete(e2e, f"localqueue/{lq1}", f"localqueue/{lq2}", ns=ns)
    await _delete(e2e, f"clusterqueue/{cq1}", f"clusterqueue/{cq2}")
    await expect_metrics(e2e, [s for s in series if s.family not in NO_SAMPLES], available=False)
    await _delete(e2e, f"workloadpriorityclass/{high}", f"resourceflavor/{rf}")


async def kueue_target_up_with_build_info(e2e: E2E) -> None:
    """prometheus_test.go, Describe "Prometheus", It "should discover Kueue target and report it as up" and It
    "should scrape kueue_build_info metric via PromQL", without a Prometheus (none runs here): what makes a
    scrape of the admitter succeed (up = 1) is checked, an HTTP 200 in Prometheus's text format that parses, with
    ``kueue_build_info`` at 1. How a Prometheus finds the target (Kueue's ServiceMonitor; kueue-es's pod
    annotations and PodMonitor) is tests/deploy/test_monitoring.py's."""
    url = await e2e.ready_metrics_url()

    async def scraped() -> list[float] | None:
        # the families are exported once the admitter holds its lease (a demo just started may not yet)
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            assert response.status == 200, response.status
            assert response.headers["Content-Type"].startswith("text/plain; version="), response.headers
            text = await response.text()
        return [value for name, _, value in _values(text) if name == "kueue_build_info"] or None

    build_info = await eventually(scraped, what="kueue_build_info on the admitter's /metrics")
    assert build_info == [1.0], build_info


async def admission_metrics_scraped(e2e: E2E) -> None:
    """prometheus_test.go, Describe "Prometheus", It "should report workload admission metrics via PromQL": a
    Workload admitted, then ``kueue_admitted_workloads_total{cluster_queue="<its ClusterQueue>"}`` is scraped
    (here: on the admitter's /metrics, at 1)."""
    ns = "e2e-prom"
    rf, cq, lq = f"prom-test-flavor-{ns}", f"prom-test-cq-{ns}", "prom-test-lq"
    await e2e.apply(namespace(ns), flavor(rf), cluster_queue(cq, {rf: {"cpu": "1", "memory": "1Gi"}}))
    await _active(e2e, [cq], [], ns)
    await e2e.apply(local_queue(lq, ns, cq))
    await _active(e2e, [], [lq], ns)
    await e2e.create(_workload("prom-test-workload", ns, lq, "1"))
    await e2e.wait("workload", "prom-test-workload", ns, lambda w: is_true(w, "Admitted"), what="admitted")

    async def admitted() -> list[float]:
        text = await e2e.kueue_metrics()
        return [
            value
            for name, labels, value in _values(text)
            if name == "kueue_admitted_workloads_total" and labels.get("cluster_queue") == cq
        ]

    what = f"kueue_admitted_workloads_total{{cluster_queue={cq!r}}} at 1"
    await _eventually(admitted, lambda values: values == [1.0], what=what, timeout=90, interval=0.5)
    await _delete(e2e, "workload/prom-test-workload", ns=ns)
    await _delete(e2e, f"localqueue/{lq}", ns=ns)
    await _delete(e2e, f"clusterqueue/{cq}", f"resourceflavor/{rf}")


STEPS: list[Step] = [
    default_metrics,
    admission_check_metrics,
    eviction_and_preemption_metrics,
    kueue_target_up_with_build_info,
    admission_metrics_scraped,
]
