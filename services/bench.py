"""``kueue-es bench core``: how fast the pure admission core decides, on Kueue's large-scale shape.

The shape is ``shared/perf/large-scale/generator.yaml``: 10 cohorts of 100
ClusterQueues (20 CPU nominal, borrowingLimit 100), each with 50 pending
workloads (35 small of 1 CPU, 11 medium of 5 CPU, 4 large of 20 CPU, priorities
50/100/200) — 50,000 workloads. No bus and no services: the admitter's
``decide`` and the projection fold run in-process, cycle after cycle. When a
cycle decides nothing, every admitted workload finishes (a WorkloadFinished
fact), as if its runtime had passed, until every workload has run.

Reported: decisions (per-workload decision events: QuotaReserved,
WorkloadAdmitted, WorkloadInadmissible, QuotaReleased), cycles, seconds spent
in decide and in folding, decisions per second, and peak memory (RSS, MiB).
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass

from events import models, types
from projections.cluster import ClusterState, apply
from services import deciders

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
CLASSES = (("small", 35, 1, 50), ("medium", 11, 5, 100), ("large", 4, 20, 200))


@dataclass(kw_only=True)
class CoreBenchResult:
    """What one core bench run measured; times in seconds, memory in MiB."""

    cluster_queues: int
    workloads: int
    decisions: int
    cycles: int
    decide_seconds: float
    fold_seconds: float
    peak_rss_mib: float

    @property
    def decisions_per_second(self) -> float:
        """Decisions over the time spent deciding and folding them."""
        return self.decisions / max(self.decide_seconds + self.fold_seconds, 1e-9)


def large_scale_facts(*, cohorts: int = 10, queues_per_cohort: int = 100, scale: float = 1.0) -> list[types.Fact]:
    """The objects and pending workloads of the large-scale shape, as facts (``scale`` shrinks
    the per-queue workload counts, for quick runs)."""
    facts: list[types.Fact] = [
        types.ResourceFlavorObserved(flavor=models.ResourceFlavor(metadata=models.ObjectMeta(name="rf")))
    ]
    created = 0
    for c in range(cohorts):
        for q in range(queues_per_cohort):
            name = f"cq-{q}-cohort-{c}"
            quota = models.ResourceQuota(name="cpu", nominal_quota=20_000, borrowing_limit=100_000)
            spec = models.ClusterQueueSpec(
                cohort_name=f"cohort-{c}",
                namespace_selector=models.LabelSelector(),
                resource_groups=[
                    models.ResourceGroup(
                        covered_resources=["cpu"], flavors=[models.FlavorQuotas(name="rf", resources=[quota])]
                    )
                ],
            )
            facts.append(
                types.ClusterQueueObserved(
                    cluster_queue=models.ClusterQueue(metadata=models.ObjectMeta(name=name), spec=spec)
                )
            )
            facts.append(
                types.LocalQueueObserved(
                    local_queue=models.LocalQueue(
                        metadata=models.ObjectMeta(name=name, namespace=name),
                        spec=models.LocalQueueSpec(cluster_queue=name),
                    )
                )
            )
            for class_name, count, cpu, priority in CLASSES:
                for i in range(max(1, round(count * scale))):
                    created += 1
                    facts.append(
                        types.WorkloadObserved(
                            workload=models.Workload(
                                metadata=models.ObjectMeta(
                                    name=f"{class_name}-{i}",
                                    namespace=name,
                                    uid=f"uid-{created:06d}",
                                    creation_timestamp_ms=BASE_MS + created,
                                ),
                                spec=models.WorkloadSpec(
                                    queue_name=name,
                                    priority=priority,
                                    pod_sets=[models.PodSet(name="main", count=1, requests={"cpu": cpu * 1000})],
                                ),
                            )
                        )
                    )
    return facts


def run_core_bench(*, cohorts: int = 10, queues_per_cohort: int = 100, scale: float = 1.0) -> CoreBenchResult:
    """Run the admitter core to completion on the large-scale shape and measure it."""
    state = ClusterState()
    facts = large_scale_facts(cohorts=cohorts, queues_per_cohort=queues_per_cohort, scale=scale)
    seq = 0
    for fact in facts:
        seq += 1
        apply(state, fact, seq=seq)
    workloads = sum(isinstance(f, types.WorkloadObserved) for f in facts)
    del facts, fact  # folded: a service would not keep them either (and the collector need not walk them)
    decide_s = fold_s = 0.0
    decisions = cycles = 0
    now = BASE_MS + 60_000
    while True:
        started = time.perf_counter()
        out = deciders.ADMITTER.decide(state, now_ms=now)
        decide_s += time.perf_counter() - started
        cycles += 1
        now += 1_000
        started = time.perf_counter()
        for event in out:
            seq += 1
            apply(state, event, seq=seq)
        fold_s += time.perf_counter() - started
        decisions += len(out)
        if out:
            continue
        running = [wl.ref for wl in state.workloads.values() if wl.reservation is not None and not wl.gone]
        if not running:
            break
        for ref in running:  # their runtime has passed
            seq += 1
            apply(state, types.WorkloadFinished(workload=ref, at_ms=now), seq=seq)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return CoreBenchResult(
        cluster_queues=cohorts * queues_per_cohort,
        workloads=workloads,
        decisions=decisions,
        cycles=cycles,
        decide_seconds=decide_s,
        fold_seconds=fold_s,
        peak_rss_mib=peak,
    )
