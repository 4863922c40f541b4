"""One run of Kueue's scheduler scalability test on kueue-es: the system under test and its harness.

The system under test is the real thing: a nats-server and the admitter,
preemptor, TAS placer and dispatcher as their own processes
(:class:`kueue_es.supervisor.Supervisor`); the dispatcher writes to a simulated
Kubernetes API (``service dispatcher --simulate-api``, :mod:`kueue_es.services.dispatcher.simulated`),
optionally capped at ``api_qps`` writes a second. The watcher is left out: there
is no cluster to watch (its relist of an empty API server would even report the
bench's objects deleted); the harness publishes what it would have seen.

The harness (this process) plays Kueue's test runner:

1. publishes the configuration's objects (in TAS mode first the nodes and the
   Topology, as the watcher's NodeObserved / TopologyObserved facts; then the
   flavor, then each ClusterQueue, its Namespace and LocalQueue) as facts, and waits
   until every service has started;
2. runs every creation stream at once (as Kueue's generator does, one stream per
   ClusterQueue and workload set): the k-th workload of a stream is published as a
   ``WorkloadObserved`` fact (creationTimestamp = when it is published)
   ``(k+1) x creationIntervalMs`` after the streams start; the streams are merged
   into one timed schedule, since a publish does not wait (Kueue's creates drift by
   their API latency, ours by the harness's own delays, which the creation
   timestamps record);
3. runs the simulated executor (:mod:`.executor`) on the dispatch results;
4. reads the decisions and dispatch results, feeding the recorder (:mod:`.metrics`),
   and samples the log's length (events per second);
5. samples the memory of every process, and draws a progress bar;
6. stops when every workload finished and released its quota (or at the timeout).

Facts from the harness are published without waiting for each JetStream ack
(core NATS publish with a ``Nats-Msg-Id``; the stream still stores and dedups
them: :class:`.chaos.FactPublisher`), so the harness keeps up with 15,000 creations a second.

With ``chaos_seed`` (``--chaos SEED``) :mod:`.chaos` kills services and nats-server
during the run, and the stopped store is checked afterwards (:mod:`.invariants`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import BusError
from kueue_es.perfbench import chaos as chaos_mod
from kueue_es.perfbench import generator, ideal, metrics
from kueue_es.perfbench.executor import FACT_SOURCE, Executor
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.supervisor import COMPACTOR, Supervisor, cohosted

SERVICES = ("admitter", "preemptor", "tas-placer", "dispatcher")
DECIDERS = ("admitter", "preemptor", "tas-placer")
DECODED = frozenset(
    {
        "QuotaReserved",
        "TopologyAssigned",
        "WorkloadAdmitted",
        "QuotaReleased",
        "EvictionRequested",
        "DispatchApplied",
        "DispatchBatchApplied",
    }
)
RELEASED_KEY = b'"released":'
"""How an encoded DecisionRecord carrying finished releases (``DecisionRecord.released``) starts that field."""
CARRIED_KEY = b'"decisions":'
"""How an encoded DecisionRecord carrying its cycle's decisions (event schema 17, ``DecisionRecord.decisions``)
starts that field."""
SAMPLE_SECONDS = 0.25
OUTBOX_GATHER = 0.005
STALL_SECONDS = 60.0
"""A run whose log has not grown for this long while no workload runs and every one was created is
stalled: nothing left in the system would ever produce another event."""
STALL_SHOWN = 10
CHAOS_COMPACT_ARGS = ("--every", "10000", "--interval", "10s")
"""The compactor's arguments in a chaos run unless ``compact_args`` says otherwise: deploy/'s compactor
(every 50,000 messages or 10 minutes) scaled to a run of minutes, so a restarted service starts from a
snapshot seconds old, as one in a cluster starts from one minutes old (``kueue_es.snapshots``)."""
CHAOS_HEALTH_PORT = 0
"""The supervisors' ``health_port`` in a chaos run, whose kills read each service's /readyz and /metrics:
0, each process binds a port of the kernel's choosing and reports it (``kueue_es.services.ports``). A block
picked free up front could be taken by any other process before the services bind it."""


def wall_ms() -> int:
    """The real clock, ms since the epoch."""
    return time.time_ns() // 1_000_000


@dataclass(kw_only=True)
class ProcessStats:
    """One process: peak resident memory (MiB, the kernel's VmHWM) and CPU seconds (user + system)."""

    pid: int
    peak_rss_mib: float = 0.0
    cpu_seconds: float = 0.0


@dataclass(kw_only=True)
class DeciderStats:
    """One decider process's commit attempts, as it logged them when it stopped (``service_stopped``)."""

    commits: int = 0
    conflicts: int = 0


@dataclass(kw_only=True)
class RunResult:
    """Everything one run measured; times in ms."""

    config_path: str
    api_qps: float | None
    api_burst: int | None
    workloads: int
    complete: bool
    started_ms: int  # the system under test starts (nats-server spawned)
    streams_ms: int  # the creation streams start
    end_ms: int  # the last quota release
    recorder: metrics.Recorder
    ideal: ideal.IdealResult
    processes: dict[str, ProcessStats] = field(default_factory=dict)
    peak_total_rss_mib: float = 0.0
    log_messages: int = 0
    run_dir: str = ""
    stalled: list[str] = field(default_factory=list)  # why each unfinished workload is stuck, when the run stalled
    replicas: int = 1  # processes of each decider
    standby_lease: bool = True  # whether they take turns through the standby lease
    compact_args: list[str] = field(default_factory=list)  # the compactor's arguments; [] when none ran
    deciders: dict[str, DeciderStats] = field(default_factory=dict)  # by process name: admitter, admitter-2, ...
    chaos: chaos_mod.ChaosResult | None = None  # with --chaos: the kills, recoveries and invariant checks
    partitions: int | None = None  # with --partitions N: the admitter processes sharing the partitions
    cohosted: bool = False  # with --deciders cohosted: the three deciders in one process (``deciders``)

    @property
    def wall_ms(self) -> int:
        """Kueue's wall time: from the start of the system under test to the last release."""
        return self.end_ms - self.started_ms

    @property
    def startup_ms(self) -> int:
        """From the start of the system under test to the start of the creation streams."""
        return self.streams_ms - self.started_ms

    @property
    def workload_wall_ms(self) -> int:
        """From the start of the creation streams to the last release: what the ideal bound bounds."""
        return self.end_ms - self.streams_ms


class _Sampler:
    """Reads /proc for the peak memory and CPU time of a set of processes."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.stats = {name: ProcessStats(pid=pid) for name, pid in pids.items()}
        self.peak_total_mib = 0.0
        self._tick = os.sysconf("SC_CLK_TCK")
        self._cpu_before: dict[str, float] = {}  # CPU seconds of the earlier processes of a restarted one

    def replace(self, name: str, pid: int) -> None:
        """``name`` runs as a new process ``pid`` now (chaos restarted it): its CPU time adds up, its peak
        memory is the highest of its processes."""
        stats = self.stats.get(name)
        if stats is None:
            self.stats[name] = ProcessStats(pid=pid)
            return
        self._cpu_before[name] = stats.cpu_seconds
        stats.pid = pid

    def sample(self) -> None:
        total = 0.0
        for stats in self.stats.values():
            rss, hwm = _status_mib(stats.pid)
            total += rss
            stats.peak_rss_mib = max(stats.peak_rss_mib, hwm)
        for name, stats in self.stats.items():
            cpu = _cpu_seconds(stats.pid, self._tick)
            if cpu is not None:
                stats.cpu_seconds = self._cpu_before.get(name, 0.0) + cpu
        self.peak_total_mib = max(self.peak_total_mib, total)


def _status_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MiB; zeros when it is gone."""
    rss = hwm = 0.0
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) / 1024
    except OSError:
        pass
    return rss, hwm


def _cpu_seconds(pid: int, tick: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / tick


def refuse_used_run_dir(run_dir: Path) -> None:
    """Refuse a run directory whose nats store (``RUN_DIR/nats``) holds an earlier run's log.

    The run's workloads carry the same names and Msg-Ids as the earlier run's: JetStream drops
    them as duplicates and the figures mix both runs (negative times to admission, a stall).

    Raises:
        ValueError: ``RUN_DIR/nats`` exists and is not empty; the message names the directory.
    """
    store = run_dir / "nats"
    if store.is_dir() and any(store.iterdir()):
        raise ValueError(f"--dir {run_dir}: {store} holds an earlier run's log; give a new directory or remove it")


async def run_bench(
    *,
    config_path: Path,
    api_qps: float | None = None,
    api_burst: int | None = None,
    run_dir: Path | None = None,
    timeout: float = 1800.0,
    stall_seconds: float = STALL_SECONDS,
    console: Console | None = None,
    progress: bool = True,
    replicas: int = 1,
    standby_lease: bool = True,
    chaos_seed: int | None = None,
    kill_every: float = 10.0,
    compact_args: list[str] | None = None,
    partitions: int | None = None,
    deciders: str = "separate",
) -> RunResult:
    """Run the configuration at ``config_path`` through nats-server and the services; returns what was measured.

    ``replicas``: processes of each decider (admitter, preemptor, TAS placer) and of the dispatcher, as
    deploy/ runs two: one holds the service's standby lease and works, the others fold and stand by
    (the dispatcher's ``--standby-lease`` from 2 replicas on); the logs of replica N are in
    ``logs/replica-N/``. ``standby_lease`` False: every decider replica decides and commits (the deciders'
    ``--no-standby-lease``), as before standby deciders, and one dispatcher runs (two hot dispatchers
    would share the durable consumer's decisions and write them out of order).
    ``chaos_seed``: kill a service about every ``kill_every`` seconds, and nats-server once, during
    the run (:mod:`.chaos`), then check the stopped store (the result's ``chaos``).
    ``compact_args``: also run the compactor (``kueue-es compact`` with these arguments: verified
    snapshots that restarted services start from), as deploy/ does; [] runs none. None: a chaos run
    runs it with :data:`CHAOS_COMPACT_ARGS`, any other none. It is never a chaos victim.

    ``partitions``: run this many admitter processes (``admitter``, ``admitter-2``, ...; one of each other
    service), every one with ``--partitions all`` over the slot leases, so they share the partitions
    (docs/design.md, Partitions); ``replicas`` is then ignored.

    ``deciders``: ``separate`` (the admitter, preemptor and TAS placer each in its own process) or
    ``cohosted`` (the three in one process over one fold, ``kueue-es service deciders``, shown as
    ``deciders`` in the process table; its replicas likewise; not with ``partitions``).

    Raises generator.ConfigError for a bad configuration, ValueError for ``replicas`` or ``partitions``
    below 1, a ``kill_every`` <= 0, an unknown ``deciders`` or ``cohosted`` with ``partitions``.
    """
    if deciders not in ("separate", "cohosted"):
        raise ValueError(f"deciders must be separate or cohosted, got {deciders!r}")
    if deciders == "cohosted" and partitions is not None:
        raise ValueError("partitions (N admitter processes) needs separate deciders")
    if partitions is not None:
        if partitions < 1:
            raise ValueError(f"partitions must be at least 1, got {partitions}")
        replicas = partitions
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    console = console or Console(stderr=True)
    generated = generator.generate(generator.load_config(config_path))
    planned = generated.planned()
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="kueue-es-bench-"))
    refuse_used_run_dir(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    kube_args = ["--simulate-api"]
    dispatcher_replicas = replicas if standby_lease and partitions is None else 1
    if dispatcher_replicas > 1:
        kube_args.append("--standby-lease")
    if api_qps:
        kube_args += ["--api-qps", str(api_qps)]
        if api_burst:
            kube_args += ["--api-burst", str(api_burst)]
    recorder = metrics.Recorder()
    started_ms = wall_ms()
    _dump_tasks_on_sigusr1()
    if chaos_seed is not None and kill_every <= 0:
        raise ValueError(f"--kill-every must be positive, not {kill_every:g}")
    server = chaos_mod.RestartableNatsServer(store_dir=run_dir / "nats")
    await server.start_async()
    decider_args = [] if standby_lease else ["--no-standby-lease"]
    if compact_args is None:
        compact_args = list(CHAOS_COMPACT_ARGS) if chaos_seed is not None else []
    supervisor = Supervisor(
        nats_url=server.url,
        log_dir=run_dir / "logs",
        kube_args=kube_args,
        decider_args=decider_args,
        compact_args=compact_args,
        health_port=CHAOS_HEALTH_PORT if chaos_seed is not None else None,
    )
    standbys = {
        n: Supervisor(
            nats_url=server.url,
            log_dir=run_dir / "logs" / f"replica-{n}",
            kube_args=kube_args,
            decider_args=decider_args,
            health_port=CHAOS_HEALTH_PORT if chaos_seed is not None else None,
        )
        for n in range(2, replicas + 1)
    }
    replica_services: tuple[str, ...] = (*DECIDERS, "dispatcher") if dispatcher_replicas > 1 else DECIDERS
    if partitions is not None:
        replica_services = ("admitter",)  # N admitters share the partitions; one preemptor, placer, dispatcher
    services: tuple[str, ...] = SERVICES
    if deciders == "cohosted":
        services, replica_services = cohosted(SERVICES), cohosted(replica_services)
    supervisors = [supervisor, *standbys.values()]
    bus = None
    tasks: list[asyncio.Task[Any]] = []
    executor: Executor | None = None
    stalled: list[str] = []
    chaos: chaos_mod.Chaos | None = None
    try:
        await supervisor.start(services)
        for standby in standbys.values():
            await standby.start(replica_services)
        pids = {"nats-server": server.pid or 0, "bench harness": os.getpid()}
        pids.update({s.name: s.process.pid for s in supervisor.running})
        for n, standby in standbys.items():
            pids.update({f"{s.name}-{n}": s.process.pid for s in standby.running})
        sampler = _Sampler(pids)
        bus = await nats_bus.connect(server.url)
        if compact_args:
            await bus.ensure_snapshot_bucket()  # as nats-setup makes it beside the log
        publisher = chaos_mod.FactPublisher(bus)
        now = wall_ms()
        facts = generator.object_facts(generated, now_ms=now)
        recorder.topology = metrics.TopologyCheck.from_facts(facts, generated.flavor.name)
        for fact in facts:
            recorder.record(fact)
            await publisher.publish(subjects.fact_message(fact, version="bench"))
        await bus.nc.flush()
        for started in supervisors:
            await _wait_started(started, timeout=60.0)
        if compact_args:
            await supervisor.start((COMPACTOR,))
            sampler.replace(COMPACTOR, supervisor.running[-1].process.pid)
        executor = Executor(
            runtime_ms={f"{wl.namespace}/{wl.name}": wl.runtime_ms for wl in planned},
            clock=wall_ms,
            on_fact=recorder.record,
        )
        streams_ms = wall_ms()
        done = asyncio.Event()
        last_decisions: dict[str, tuple[int, str]] = {}
        tasks = [
            asyncio.create_task(_create(publisher, planned, start_ms=streams_ms, recorder=recorder)),
            asyncio.create_task(_read(bus, recorder, executor, total=len(planned), done=done, last=last_decisions)),
            asyncio.create_task(_flush_outbox(publisher, executor)),
            asyncio.create_task(_count_log(bus, recorder)),
        ]
        if chaos_seed is not None:
            chaos = chaos_mod.Chaos(
                seed=chaos_seed,
                kill_every=kill_every,
                supervisor=supervisor,
                server=server,
                publisher=publisher,
                services=services,
                clock_zero=time.monotonic(),
                on_restart=sampler.replace,
                replicas=standbys.values(),
                replica_services=replica_services,
                bus=bus,
            )
            tasks.append(asyncio.create_task(chaos.run()))
        complete = await _watch(
            done,
            tasks,
            supervisors,
            sampler,
            recorder,
            executor,
            total=len(planned),
            timeout=timeout,
            stall_seconds=stall_seconds,
            console=console,
            progress=progress,
            recovering=(lambda: chaos.recovering) if chaos is not None else None,
        )
        if chaos is not None:  # stop killing; a victim still recovering is awaited
            await chaos.stop(tasks[-1])
        if not complete:
            stalled = await _why_unfinished(bus, recorder, last_decisions)
            for line in stalled:
                console.print(f"  {line}")
        end_ms = recorder.last_release_ms or wall_ms()
        sampler.sample()
        log_messages = await bus.last_seq()
    finally:
        if executor is not None:
            executor.cancel_all()
        # cancel again until they stop: on Python 3.11 a cancel racing a nats request's
        # wait_for is swallowed, and a loop like _count_log then runs on (a run that never ended)
        await cancel_and_wait(tasks)
        for running in supervisors:
            await running.stop()
        if bus is not None:
            await bus.close()
        await asyncio.to_thread(server.stop)
    chaos_result = None
    if chaos is not None:
        chaos_result = chaos.result
        console.print(f"checking the log of {len(chaos_result.kills)} kills: replay and invariants ...")
        checked = time.monotonic()
        report, checker = await chaos_mod.check_store(
            run_dir / "nats", expected=[f"{wl.namespace}/{wl.name}" for wl in planned]
        )
        chaos_result.violations = chaos_mod.violations_of(report, checker)
        chaos_result.replay = report
        chaos_result.checked_messages, chaos_result.checked_batches = checker.messages, checker.batches_folded
        chaos_result.check_seconds = round(time.monotonic() - checked, 1)
    harness = sampler.stats["bench harness"]
    harness.peak_rss_mib = max(harness.peak_rss_mib, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    # Only the report needs the ideal bound: worked out once the services are stopped, its CPU is not
    # the harness's share of the two cores the run had (issue 18), and its memory not the run's peak.
    bound = ideal.ideal_bound(generated, planned)
    return RunResult(
        config_path=str(config_path),
        api_qps=api_qps or None,
        api_burst=(api_burst or 100) if api_qps else None,
        workloads=len(planned),
        complete=complete,
        started_ms=started_ms,
        streams_ms=streams_ms,
        end_ms=end_ms,
        recorder=recorder,
        ideal=bound,
        processes=sampler.stats,
        peak_total_rss_mib=sampler.peak_total_mib,
        log_messages=log_messages,
        run_dir=str(run_dir),
        stalled=stalled,
        replicas=replicas,
        standby_lease=standby_lease,
        compact_args=compact_args,
        deciders=_decider_stats(run_dir / "logs", replicas),
        partitions=partitions,
        cohosted=deciders == "cohosted",
        chaos=chaos_result,
    )


def _decider_stats(log_dir: Path, replicas: int) -> dict[str, DeciderStats]:
    """Each decider process's commits and conflicts, from the ``service_stopped`` line of its log
    (none for a process that did not stop cleanly)."""
    import json

    found: dict[str, DeciderStats] = {}
    for n in range(1, replicas + 1):
        for name in (*DECIDERS, "deciders"):  # a co-hosted process logs one service_stopped per role
            path = (log_dir if n == 1 else log_dir / f"replica-{n}") / f"{name}.log"
            with contextlib.suppress(OSError):
                for line in path.read_text(errors="replace").splitlines():
                    if '"service_stopped"' in line:
                        with contextlib.suppress(ValueError):
                            entry = json.loads(line)
                            process = name if n == 1 else f"{name}-{n}"
                            if entry.get("cohosted"):
                                process += f"/{entry.get('user')}"
                            found[process] = DeciderStats(
                                commits=int(entry.get("commits") or 0), conflicts=int(entry.get("conflicts") or 0)
                            )
    return found


def _dump_tasks_on_sigusr1() -> None:
    """``kill -USR1 <harness pid>`` prints where every task of the harness waits (to stderr): what a
    run that seems stuck is waiting for."""
    import signal
    import sys

    def dump() -> None:
        for task in asyncio.all_tasks():
            task.print_stack(file=sys.stderr)
        sys.stderr.flush()

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump)


async def _wait_started(supervisor: Supervisor, *, timeout: float) -> None:
    """Wait until every service logged ``service_started`` (connected to the bus, consumer bound)."""
    deadline = time.monotonic() + timeout
    waiting = {s.name: s.log_path for s in supervisor.running}
    while waiting:
        for name, path in list(waiting.items()):
            with contextlib.suppress(OSError):
                if b'"service_started"' in path.read_bytes():
                    del waiting[name]
        if dead := supervisor.dead():
            raise RuntimeError(
                f"services exited at start: {[s.name for s in dead]} (logs in {dead[0].log_path.parent})"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"services not started after {timeout:g}s: {sorted(waiting)}")
        await asyncio.sleep(0.05)


async def _create(
    publisher: chaos_mod.FactPublisher,
    planned: list[generator.PlannedWorkload],
    *,
    start_ms: int,
    recorder: metrics.Recorder,
) -> None:
    """Publish every planned workload at its stream's time (the merged schedule of all streams)."""
    order = sorted(range(len(planned)), key=lambda i: planned[i].offset_ms)  # stable: stream order within a tick
    pos = 0
    while pos < len(order):
        due = start_ms + planned[order[pos]].offset_ms
        delay = due - wall_ms()
        if delay > 0:
            await asyncio.sleep(delay / 1000)
        now = wall_ms()
        created: list[tuple[types.BatchedFact, str]] = []
        while pos < len(order) and start_ms + planned[order[pos]].offset_ms <= now:
            index = order[pos]
            fact = generator.workload_fact(planned[index], uid=f"wl-{index:07d}", now_ms=now)
            recorder.record(fact)
            created.append((fact, "1"))
            pos += 1
        # the workloads created in one tick, as the watcher publishes a burst of them: FactBatch messages
        for message in subjects.fact_batches(created, source=FACT_SOURCE):
            await publisher.publish(message)


async def _read(
    bus: nats_bus.NatsBus,
    recorder: metrics.Recorder,
    executor: Executor,
    *,
    total: int,
    done: asyncio.Event,
    last: dict[str, tuple[int, str]],
) -> None:
    """Follow the decisions and dispatch results; decode the ones the recorder and executor need.

    ``last`` gets the sequence and type of the latest message on each subject (read back
    only when the run stalls, to say why)."""
    async for message in bus.read(subjects=(subjects.DECISIONS, subjects.DISPATCH), start_seq=1):
        kind = message.headers.get("Kq-Type", "")
        last[message.subject] = (message.seq, kind)
        if kind not in DECODED:
            # a record carrying finished releases (admitter logic 15) or its cycle's decisions (event schema
            # 17): decoded only then, for those
            if kind != "DecisionRecord" or (RELEASED_KEY not in message.data and CARRIED_KEY not in message.data):
                continue
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            continue
        if isinstance(event, types.DecisionRecord):
            for released in event.released_decisions():
                recorder.record(released)
            for decision in event.carried:  # after its releases, as their own messages followed the record
                recorder.record(decision)
                executor.observe(decision)
                # for _why_unfinished: under the subject its own message would have had
                last[subjects.workload_decision_subject(decision.workload, event.partition)] = (
                    message.seq,
                    codec.type_name(decision),
                )
        elif isinstance(event, types.DispatchBatchApplied):
            # its entries made into DispatchApplied once, for both (each would make them all again)
            for applied in event.applied():
                recorder.record(applied)
                executor.observe(applied)
        else:
            recorder.record(event)
            executor.observe(event)
        if recorder.finished >= total and not recorder.held:
            done.set()


async def _count_log(bus: nats_bus.NatsBus, recorder: metrics.Recorder) -> None:
    """Sample the log's length for the events per second through the bus (no sample while it does not
    answer: nats-server killed by the chaos bench)."""
    while True:
        with contextlib.suppress(BusError, TimeoutError):
            recorder.note_log(await bus.last_seq(), wall_ms())
        await asyncio.sleep(SAMPLE_SECONDS)


async def _flush_outbox(publisher: chaos_mod.FactPublisher, executor: Executor) -> None:
    """Publish the executor's facts as they come, gathered for up to OUTBOX_GATHER seconds: one socket
    write carries all of them (a write per fact cost the harness a quarter of its time)."""
    while True:
        await executor.wake.wait()
        await asyncio.sleep(OUTBOX_GATHER)
        executor.wake.clear()
        batch, executor.outbox = executor.outbox, []
        for message in executor.messages(batch):
            await publisher.publish(message)


async def _watch(
    done: asyncio.Event,
    tasks: list[asyncio.Task[Any]],
    supervisors: list[Supervisor],
    sampler: _Sampler,
    recorder: metrics.Recorder,
    executor: Executor,
    *,
    total: int,
    timeout: float,
    stall_seconds: float,
    console: Console,
    progress: bool,
    recovering: Callable[[], bool] | None = None,
) -> bool:
    """Sample memory and draw the progress bar until done; False on timeout, a stall or a crashed service.

    ``recovering`` (the chaos bench): a crashed service is started again, not the end of the run, and
    no stall is counted while it says a victim is being restarted or awaited."""
    deadline = time.monotonic() + timeout
    progress_mark: tuple[int, ...] = ()
    last_progress = time.monotonic()
    bar = Progress(
        TextColumn("{task.description:<9}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not progress,
    )
    with bar:
        created = bar.add_task("created", total=total)
        admitted = bar.add_task("admitted", total=total)
        finished = bar.add_task("finished", total=total)
        while not done.is_set():
            sampler.sample()
            bar.update(created, completed=len(recorder.workloads))
            bar.update(admitted, completed=recorder.admitted)
            bar.update(finished, completed=recorder.finished)
            for task in tasks:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            if (dead := [s for supervisor in supervisors for s in supervisor.dead()]) and recovering is None:
                console.print(f"[bold red]services exited[/bold red]: {[s.name for s in dead]}")
                return False
            if time.monotonic() > deadline:
                console.print(f"[bold red]timeout[/bold red] after {timeout:g}s: {recorder.finished}/{total} finished")
                return False
            mark = (
                recorder.messages,
                len(recorder.workloads),
                recorder.finished,
                executor.started,
                len(executor.running),
            )
            if mark != progress_mark or (recovering is not None and recovering()):
                progress_mark, last_progress = mark, time.monotonic()
            elif (
                not executor.running
                and len(recorder.workloads) >= total
                and time.monotonic() - last_progress > stall_seconds
            ):
                console.print(
                    f"[bold red]stalled[/bold red]: no new event for {stall_seconds:g}s with no workload running; "
                    f"{recorder.finished}/{total} finished"
                )
                return False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SAMPLE_SECONDS):
                    await done.wait()
    return True


async def _why_unfinished(
    bus: nats_bus.NatsBus, recorder: metrics.Recorder, last: dict[str, tuple[int, str]]
) -> list[str]:
    """One line per workload that is not done (the first STALL_SHOWN): unfinished, or finished with its
    quota still held. Each says what it got so far, its latest decision (with the pending message when
    that is WorkloadInadmissible) and the latest fact about it in the log."""
    lines = []
    stuck = [key for key, record in recorder.workloads.items() if not record.finished_ms or key in recorder.held]
    for key in stuck[:STALL_SHOWN]:
        namespace, name = key.split("/", 1)
        ref = types.WorkloadRef(namespace=namespace, name=name)
        record = recorder.workloads[key]
        if record.finished_ms:
            state = "finished, quota still reserved"
        else:
            state = "admitted" if record.admitted_ms else "quota reserved" if key in recorder.held else "pending"
        subject = subjects.workload_decision_subject(ref, "*")  # whichever partition decided it
        suffix = subject.removeprefix("kq.dec.*")
        # a decision of its own message (older logs) or one a record carries (event schema 17), which _read
        # keeps under the subject its message would have had
        seen_seq, kind = max(
            (v for s, v in last.items() if s.startswith("kq.dec.") and s.endswith(suffix)), default=(0, "")
        )
        seq = seen_seq
        with contextlib.suppress(Exception):  # the log itself, in case the harness's reader fell behind
            stored = await bus.last_subject_seq(subject)  # only decisions of their own message are there
            if stored > seen_seq:
                seq = stored
                kind = (await bus.get(seq)).headers.get("Kq-Type", "?")
        detail = f"latest decision #{seq} {kind}" if seq else "no decision"
        if seq != seen_seq:
            detail += f" (the harness read only up to #{seen_seq} of this workload's decisions)"
        if kind == "WorkloadInadmissible":
            with contextlib.suppress(Exception):
                event = codec.decode((await bus.get(seq)).data)
                found = event.all_decisions() if isinstance(event, types.DecisionRecord) else [event]
                for one in found:
                    if isinstance(one, types.WorkloadInadmissible) and one.workload.key == key:
                        detail += f" ({one.reason}: {one.message})"
                        break
        with contextlib.suppress(Exception):
            fact_seq = await bus.last_subject_seq(subjects.fact_subject(types.WorkloadFinished(workload=ref, at_ms=0)))
            fact = (await bus.get(fact_seq)).headers.get("Kq-Type", "?") if fact_seq else ""
            detail += f"; latest fact #{fact_seq} {fact}" if fact_seq else "; no fact in the log"
        lines.append(f"{key}: {state}, {record.evictions} evictions; {detail}")
    if len(stuck) > STALL_SHOWN:
        lines.append(f"... and {len(stuck) - STALL_SHOWN} more not done")
    return lines


def machine() -> dict[str, Any]:
    """The machine a run was on."""
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpuModel": model,
        "arch": platform.machine(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "loadAverage1m": round(load[0], 2),
    }
