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

from kueue_es import deciders
from kueue_es.events import models, types
from kueue_es.projections.cluster import ClusterState, apply

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


def queue_facts(name: str, *, flavor: str, quota: models.ResourceQuota, cohort: str | None = None) -> list[types.Fact]:
    """A ClusterQueue ``name`` with ``quota`` of cpu in ``flavor`` (in ``cohort``, if any) and
    a LocalQueue of the same name in the namespace of the same name that feeds it."""
    spec = models.ClusterQueueSpec(
        cohort_name=cohort,
        namespace_selector=models.LabelSelector(),
        resource_groups=[
            models.ResourceGroup(
                covered_resources=["cpu"], flavors=[models.FlavorQuotas(name=flavor, resources=[quota])]
            )
        ],
    )
    return [
        types.ClusterQueueObserved(cluster_queue=models.ClusterQueue(metadata=models.ObjectMeta(name=name), spec=spec)),
        types.LocalQueueObserved(
            local_queue=models.LocalQueue(
                metadata=models.ObjectMeta(name=name, namespace=name), spec=models.LocalQueueSpec(cluster_queue=name)
            )
        ),
    ]


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
            facts.extend(queue_facts(name, flavor="rf", quota=quota, cohort=f"cohort-{c}"))
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


def _run_to_completion(state: ClusterState, *, seq: int) -> tuple[float, float, int, int, int]:
    """Admitter cycles (1 s apart) folded into ``state`` (last log sequence ``seq``) until
    nothing is left: when a cycle decides nothing, every admitted workload finishes (its
    runtime has passed). Returns decide seconds, fold seconds, decisions, cycles and
    TopologyAssigned decisions."""
    decide_s = fold_s = 0.0
    decisions = cycles = placements = 0
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
        placements += sum(isinstance(e, types.TopologyAssigned) for e in out)
        if out:
            continue
        running = [wl.ref for wl in state.workloads.values() if wl.reservation is not None and not wl.gone]
        if not running:
            return decide_s, fold_s, decisions, cycles, placements
        for ref in running:  # their runtime has passed
            seq += 1
            apply(state, types.WorkloadFinished(workload=ref, at_ms=now), seq=seq)


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
    decide_s, fold_s, decisions, cycles, _ = _run_to_completion(state, seq=seq)
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


# --- kueue-es bench core --tas ------------------------------------------------------------------

RACK_LABEL = "cloud.com/topology-rack"
TAS_CLASSES = (  # name, share of the workloads, pods, CPU per pod (cores), topology request
    ("rack-required", 0.4, 8, 1, "required"),
    ("rack-preferred", 0.3, 4, 2, "preferred"),
    ("unconstrained", 0.3, 2, 1, "unconstrained"),
)


@dataclass(kw_only=True)
class TASBenchResult:
    """What one TAS bench run measured; times in seconds, memory in MiB."""

    nodes: int
    cluster_queues: int
    workloads: int
    placements: int
    decisions: int
    cycles: int
    decide_seconds: float
    fold_seconds: float
    peak_rss_mib: float

    @property
    def placements_per_second(self) -> float:
        """Committed placements (TopologyAssigned) over the time spent deciding and folding."""
        return self.placements / max(self.decide_seconds + self.fold_seconds, 1e-9)


def tas_facts(
    *, racks: int = 10, nodes_per_rack: int = 64, workloads: int = 15_000, cluster_queues: int = 40
) -> list[types.Fact]:
    """A TAS cluster as facts: a rack/hostname Topology, ``racks`` × ``nodes_per_rack`` nodes of
    8 CPU, one TAS flavor, ``cluster_queues`` ClusterQueues (no cohort) whose nominal quotas add
    up to 3/4 of the nodes' CPU, and ``workloads`` pending workloads spread over them (rack-required,
    rack-preferred and unconstrained, :data:`TAS_CLASSES`)."""
    hostname = "kubernetes.io/hostname"
    facts: list[types.Fact] = [
        types.TopologyObserved(
            topology=models.Topology(
                metadata=models.ObjectMeta(name="default"),
                spec=models.TopologySpec(
                    levels=[models.TopologyLevel(node_label=RACK_LABEL), models.TopologyLevel(node_label=hostname)]
                ),
            )
        ),
        types.ResourceFlavorObserved(
            flavor=models.ResourceFlavor(
                metadata=models.ObjectMeta(name="tas"),
                spec=models.ResourceFlavorSpec(node_labels={"tas": "true"}, topology_name="default"),
            )
        ),
    ]
    for r in range(racks):
        for n in range(nodes_per_rack):
            name = f"r{r:02d}-n{n:03d}"
            facts.append(
                types.NodeObserved(
                    node=models.Node(
                        metadata=models.ObjectMeta(
                            name=name, labels={"tas": "true", RACK_LABEL: f"r{r:02d}", hostname: name}
                        ),
                        status=models.NodeStatus(allocatable={"cpu": 8_000, "pods": 110}, ready="True"),
                    )
                )
            )
    # Quota is the binding limit (3/4 of the nodes' CPU, no borrowing), as in a cluster sized
    # for its queues: most heads that pass quota find room, and placement rarely fails.
    nominal = racks * nodes_per_rack * 8_000 * 3 // 4 // cluster_queues
    for q in range(cluster_queues):
        name = f"tas-cq-{q}"
        quota = models.ResourceQuota(name="cpu", nominal_quota=nominal)
        facts.extend(queue_facts(name, flavor="tas", quota=quota))
    created = 0
    for class_name, share, pods, cpu, kind in TAS_CLASSES:
        for i in range(round(workloads * share)):
            created += 1
            q = created % cluster_queues
            if kind == "required":
                request = models.PodSetTopologyRequest(required=RACK_LABEL)
            elif kind == "preferred":
                request = models.PodSetTopologyRequest(preferred=RACK_LABEL)
            else:
                request = models.PodSetTopologyRequest(unconstrained=True)
            facts.append(
                types.WorkloadObserved(
                    workload=models.Workload(
                        metadata=models.ObjectMeta(
                            name=f"{class_name}-{i}",
                            namespace=f"tas-cq-{q}",
                            uid=f"uid-{created:06d}",
                            creation_timestamp_ms=BASE_MS + created,
                        ),
                        spec=models.WorkloadSpec(
                            queue_name=f"tas-cq-{q}",
                            pod_sets=[
                                models.PodSet(
                                    name="main", count=pods, requests={"cpu": cpu * 1000}, topology_request=request
                                )
                            ],
                        ),
                    )
                )
            )
    return facts


def run_tas_bench(
    *, racks: int = 10, nodes_per_rack: int = 64, workloads: int = 15_000, cluster_queues: int = 40
) -> TASBenchResult:
    """Run the admitter core with TAS to completion on :func:`tas_facts` and measure it. When a
    cycle decides nothing, every admitted workload finishes (its runtime has passed)."""
    state = ClusterState()
    facts = tas_facts(racks=racks, nodes_per_rack=nodes_per_rack, workloads=workloads, cluster_queues=cluster_queues)
    seq = 0
    for fact in facts:
        seq += 1
        apply(state, fact, seq=seq)
    total = sum(isinstance(f, types.WorkloadObserved) for f in facts)
    del facts, fact
    decide_s, fold_s, decisions, cycles, placements = _run_to_completion(state, seq=seq)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return TASBenchResult(
        nodes=racks * nodes_per_rack,
        cluster_queues=cluster_queues,
        workloads=total,
        placements=placements,
        decisions=decisions,
        cycles=cycles,
        decide_seconds=decide_s,
        fold_seconds=fold_s,
        peak_rss_mib=peak,
    )
