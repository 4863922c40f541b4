"""``kueue-es bench core``: how fast the pure admission core decides, on Kueue's large-scale shape;
``kueue-es bench fold``: how fast a log file folds as every service folds it (:func:`run_fold_bench`).

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
import statistics
import time
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from kueue_es import deciders
from kueue_es.events import codec, models, subjects, types
from kueue_es.events.bus.base import Bus, LogMessage, OutgoingMessage, PublishAck
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState, apply, apply_outputs
from kueue_es.services.runtime import MAX_BATCH, build_batch, fold_message

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
        seq = apply_outputs(state, out, seq=seq)
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


# --- kueue-es bench core --write-log ------------------------------------------------------------


@dataclass(kw_only=True)
class LogBenchResult:
    """What writing a log took: messages, decision records, workloads, rounds, seconds, MiB."""

    messages: int
    records: int
    workloads: int
    rounds: int
    seconds: float
    peak_rss_mib: float


def core_log(
    *,
    events: int,
    cohorts: int = 10,
    queues_per_cohort: int = 100,
    scale: float = 1.0,
    schema_version: int = types.SCHEMA_VERSION,
) -> Iterator[LogMessage]:
    """A log of at least ``events`` messages as the services would write it, made in-process.

    The large-scale shape (:func:`large_scale_facts`) as facts, then admitter cycles, each
    one batch as ``build_batch`` encodes it (cut at ``MAX_BATCH``), folded through
    ``fold_message`` as the services fold; every WorkloadAdmitted is answered by a
    DispatchApplied (StartJob), and when a cycle decides nothing every running workload
    finishes (a WorkloadFinished fact). When every workload has run, a new round of the
    same workloads (new names) is created, until the log holds ``events`` messages; it
    ends after the cycle that reaches it, with the last round's work done or not.
    ``schema_version`` < 17 writes the batches as older kueue-es did (one message per decision after
    its record, not the decisions carried in the record).
    """
    state = ClusterState()
    seq = 0
    now = BASE_MS + 60_000

    def stored(out: OutgoingMessage) -> LogMessage:
        nonlocal seq
        seq += 1
        message = LogMessage(
            seq=seq, subject=out.subject, data=out.data, headers={**out.headers, "Nats-Msg-Id": out.msg_id}
        )
        fold_message(state, message)
        return message

    round_no = 0
    while seq < events:
        facts = large_scale_facts(cohorts=cohorts, queues_per_cohort=queues_per_cohort, scale=scale)
        for fact in facts:
            if round_no and not isinstance(fact, types.WorkloadObserved):
                continue
            if round_no and isinstance(fact, types.WorkloadObserved):
                meta = fact.workload.metadata
                meta = msgspec.structs.replace(
                    meta, name=f"{meta.name}-r{round_no}", uid=f"{meta.uid}-r{round_no}", creation_timestamp_ms=now
                )
                fact = types.WorkloadObserved(workload=msgspec.structs.replace(fact.workload, metadata=meta))
            yield stored(subjects.fact_message(fact))
        del facts
        while seq < events:
            outputs = deciders.ADMITTER.decide(state, now_ms=now)
            if outputs:
                head, rest = build_batch(
                    deciders.ADMITTER,
                    outputs=outputs,
                    basis_seq=state.last_seq,
                    head_seq=state.heads.get(subjects.DEFAULT_PARTITION, 0),
                    now_ms=now,
                    max_outputs=MAX_BATCH,
                    schema_version=schema_version,
                )
                admitted: list[tuple[int, int, types.WorkloadRef]] = []  # (decision seq, index, workload)
                record = stored(head)
                yield record
                # since event schema 17 the record carries the decisions (each at its sequence, with its
                # 1-based index); before, one message each followed it
                carried = codec.decode(record.data)
                assert isinstance(carried, types.DecisionRecord)
                for index, decision in enumerate(carried.carried, start=1):
                    if isinstance(decision, types.WorkloadAdmitted):
                        admitted.append((record.seq, index, decision.workload))
                for out in rest:
                    message = stored(out)
                    output = codec.decode(message.data)
                    if isinstance(output, types.WorkloadAdmitted):
                        admitted.append((message.seq, 0, output.workload))
                    yield message
                for decision_seq, index, ref in admitted:
                    result = types.DispatchApplied(workload=ref, decision_seq=decision_seq, action="StartJob")
                    yield stored(
                        subjects.message(
                            result,
                            subject=subjects.dispatch_subject(ref),
                            # the dispatcher's Msg-Id: a carried decision's names its place in its record
                            msg_id=f"disp:{subjects.DEFAULT_CLUSTER}:{decision_seq}" + (f":{index}" if index else ""),
                        )
                    )
                now += 1_000
                continue
            now += 1_000
            running = [wl.ref for wl in state.workloads.values() if wl.reservation is not None and not wl.gone]
            if not running:
                break
            for ref in running:  # their runtime has passed
                yield stored(subjects.fact_message(types.WorkloadFinished(workload=ref, at_ms=now)))
        round_no += 1


def write_core_log(
    path: Path, *, events: int, cohorts: int = 10, queues_per_cohort: int = 100, scale: float = 1.0
) -> LogBenchResult:
    """Write :func:`core_log` to ``path`` as JSON lines (:mod:`kueue_es.logfile`) and measure it."""
    from kueue_es.logfile import LogWriter

    started = time.perf_counter()
    records = workloads = 0
    with path.open("wb") as out:
        writer = LogWriter(out)
        for message in core_log(events=events, cohorts=cohorts, queues_per_cohort=queues_per_cohort, scale=scale):
            writer.write(message)
            kind = message.headers.get("Kq-Type")
            records += kind == "DecisionRecord"
            workloads += kind == "WorkloadObserved"
    return LogBenchResult(
        messages=writer.written,
        records=records,
        workloads=workloads,
        rounds=0,
        seconds=time.perf_counter() - started,
        peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )


async def load_into_bus(bus: Bus, messages: Iterator[LogMessage], *, window: int = 256) -> int:
    """Publish a log file's ``messages`` onto an empty ``bus`` so each gets the same sequence:
    facts and dispatch results as single publishes (up to ``window`` in flight, in order), each
    DecisionRecord with its outputs as one batch. Returns the last sequence; raises
    RuntimeError when a message lands elsewhere than its sequence."""
    import asyncio

    in_flight: list[tuple[int, Awaitable[PublishAck]]] = []

    async def settle() -> None:
        for expected, ack in in_flight:
            got = (await ack).seq
            if got != expected:
                raise RuntimeError(f"message #{expected} was stored at #{got}: is the store empty?")
        in_flight.clear()

    batch: list[LogMessage] = []
    need = 0
    last = 0
    for message in messages:
        last = message.seq
        out = OutgoingMessage(
            subject=message.subject,
            data=message.data,
            msg_id=message.headers.get("Nats-Msg-Id", ""),
            headers={k: v for k, v in message.headers.items() if k != "Nats-Msg-Id"},
        )
        if batch:
            batch.append(message)
            if len(batch) == need + 1:
                await _commit(bus, batch)
                batch = []
            continue
        if message.headers.get("Kq-Type") == "DecisionRecord":
            await settle()
            record = codec.decode(message.data)
            assert isinstance(record, types.DecisionRecord)
            need = record.output_count  # 0 for a record carrying its decisions (schema 17): committed alone
            if need:
                batch = [message]
            else:
                await _commit(bus, [message])
            continue
        in_flight.append((message.seq, asyncio.ensure_future(bus.publish(out))))
        if len(in_flight) >= window:
            await settle()
    await settle()
    if batch:
        raise RuntimeError(f"the log ends inside the batch of #{batch[0].seq}")
    return last


async def _commit(bus: Bus, batch: list[LogMessage]) -> None:
    def outgoing(message: LogMessage) -> OutgoingMessage:
        headers = {k: v for k, v in message.headers.items() if k != "Nats-Msg-Id"}
        return OutgoingMessage(
            subject=message.subject, data=message.data, msg_id=message.headers["Nats-Msg-Id"], headers=headers
        )

    head, *rest = batch
    heads = subjects.heads_of(batches.partition_of(head.subject) or subjects.DEFAULT_PARTITION)
    expected = await bus.last_subject_seq(heads)
    last = await bus.commit_batch(
        head=outgoing(head), expected_head_seq=expected, rest=[outgoing(m) for m in rest], head_filter=heads
    )
    if last != batch[-1].seq:
        raise RuntimeError(f"the batch of #{head.seq} was stored ending at #{last}")


async def load_store(path: Path, store_dir: Path) -> int:
    """Load the log file at ``path`` into a new nats store at ``store_dir`` (:func:`load_into_bus`)."""
    from kueue_es.events.bus import nats as nats_bus
    from kueue_es.events.bus.server import NatsServer
    from kueue_es.logfile import read_lines

    async with NatsServer(store_dir=store_dir) as server:
        bus = await nats_bus.connect(server.url)
        try:
            if await bus.last_seq():
                raise RuntimeError(f"the nats store {store_dir} is not empty")
            return await load_into_bus(bus, read_lines(path))
        finally:
            await bus.close()


# --- kueue-es bench fold ------------------------------------------------------------------------


@dataclass(kw_only=True)
class FoldBenchResult:
    """What folding a log file took, per run: CPU and wall seconds over ``messages`` messages, the
    state digest each run ended with (:func:`kueue_es.checkpoints.state_digest`), peak RSS in MiB."""

    messages: int
    cpu_seconds: list[float]
    wall_seconds: list[float]
    digests: list[str]
    peak_rss_mib: float

    @property
    def cpu_median(self) -> float:
        """The median of the runs' CPU seconds."""
        return statistics.median(self.cpu_seconds)

    @property
    def wall_median(self) -> float:
        """The median of the runs' wall seconds."""
        return statistics.median(self.wall_seconds)

    @property
    def messages_per_second(self) -> float:
        """Messages folded per CPU second (median run)."""
        return self.messages / max(self.cpu_median, 1e-9)

    @property
    def cpu_seconds_per_1000(self) -> float:
        """CPU seconds per 1,000 messages (median run); times 1,000: CPU µs a message."""
        return self.cpu_median * 1000 / max(self.messages, 1)


def run_fold_bench(path: Path, *, runs: int = 3) -> FoldBenchResult:
    """Fold the log file at ``path`` (JSON lines, :mod:`kueue_es.logfile`) ``runs`` times, each from
    an empty state, as every service folds it: decode each message once, the batch verifier, the
    projection with Kueue's metrics (:class:`kueue_es.logsource.Folder`, ``runtime.fold_decoded``).

    The file is read into memory first and not timed (a service receives its messages one by one);
    the messages read are moved out of the collector's generations (``gc.freeze``), so collections
    during a run walk the fold's own objects, as in a service, not the bench's copy of the log. The
    collector runs as in a service (:func:`kueue_es.services.collector.install`), as Python sets it
    again after. Raises FileNotFoundError when there is no such file, ValueError when ``runs`` < 1."""
    import gc

    from kueue_es import checkpoints, logfile, logsource
    from kueue_es.services import collector

    if runs < 1:
        raise ValueError(f"runs {runs}: at least one run")
    if not path.is_file():
        raise FileNotFoundError(f"no log file {path}")
    messages = list(logfile.read_lines(path))
    gc.collect()
    gc.freeze()
    collector.install()
    cpu: list[float] = []
    wall: list[float] = []
    digests: list[str] = []
    try:
        for _ in range(runs):
            folder = logsource.Folder()
            started_cpu, started_wall = time.process_time(), time.perf_counter()
            for message in messages:
                folder.feed(message)
            cpu.append(time.process_time() - started_cpu)
            wall.append(time.perf_counter() - started_wall)
            digests.append(checkpoints.state_digest(folder.state))
            del folder
            gc.collect()
    finally:
        collector.uninstall()  # and every object unfrozen
    return FoldBenchResult(
        messages=len(messages),
        cpu_seconds=cpu,
        wall_seconds=wall,
        digests=digests,
        peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
