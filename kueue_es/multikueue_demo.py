"""``kueue-es demo --multikueue``: a manager and two worker clusters, each a kueue-es of its own.

Why this module exists: MultiKueue is only seen working across clusters (SEMANTICS-ADVANCED E,
docs/multikueue.md). Each cluster here is an emulated API server with its own nats-server and
kueue-es services as processes; the manager also runs the ``multikueue`` decider and the MultiKueue
edge. The demo

1. applies Kueue's ``multikueue-setup.yaml`` unchanged on the manager (ClusterQueue ``cluster-queue``
   with the check ``sample-multikueue``, MultiKueueConfig ``multikueue-test``, MultiKueueCluster
   ``multikueue-test-worker1``), then adds ``multikueue-test-worker2`` to the config, and puts each
   worker's kubeconfig into the Secret the MultiKueueCluster names (namespace ``kueue-system``);
2. gives each worker the same ResourceFlavor, ClusterQueue (without the check) and LocalQueue;
3. submits Jobs on the manager: each is copied to both workers, the first to admit it runs it, and
   its status comes back to the manager's Job;
4. stops worker 1 while it runs a Job: after ``workerLostTimeout`` (short here, through the manager's
   configuration) the manager evicts that workload and it runs again on worker 2;
5. waits until every Job finished on the manager and replays the manager's log.

``--keep`` leaves everything running and prints each cluster's kubeconfig.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape

from kueue_es import deciders
from kueue_es.demo import TimelinePrinter, close_bus, demo_manifests
from kueue_es.events import codec, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus
from kueue_es.events.bus.server import LocalAuth, NatsServer
from kueue_es.events.manifests import load_documents
from kueue_es.replay import replay_bus, summary
from kueue_es.services.kube import client as kube
from kueue_es.services.runtime import cancel_and_wait, cancel_on_stop_signals, configure_logging
from kueue_es.sim.autoscaler import FakeAutoscaler
from kueue_es.sim.controllers import SimulatedControllers
from kueue_es.sim.emulator import serve_emulator
from kueue_es.sim.kubelet import SimulatedKubelet
from kueue_es.supervisor import CREDS_DIR, MULTIKUEUE_EDGE, SERVICES, Supervisor, in_held_run_dir

SETUP = "multikueue-setup.yaml"
WORKERS = ("multikueue-test-worker1", "multikueue-test-worker2")
SECRET_NAMESPACE = "kueue-system"
DEMO_TIMEOUT = 120.0
WORKER_SERVICES = ("watcher", "admitter", "tas-placer", "dispatcher")
"""What a worker runs: enough kueue-es to admit and start what it is sent, TAS included (the admitter places a
TAS workload; the TAS placer acts on a failed node of its placement); no preemptor. Its API server also gets the
single-cluster demo's simulated controllers (the scheduler stand-in binds the ungated pods to Nodes) and fake
autoscaler (:meth:`Cluster.start`)."""
MULTIKUEUE_DECIDER = "multikueue"


def setup_manifests(path: Path) -> list[dict[str, Any]]:
    """Kueue's ``multikueue-setup.yaml`` (``path``), documents in order, unchanged."""
    return load_documents(path.read_text(), source=str(path))


def second_worker(setup: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """What the demo adds to Kueue's setup for a second worker: a MultiKueueCluster ``name`` like the
    first one (its own Secret ``<name>-secret``) and the MultiKueueConfig listing both."""
    [config] = [d for d in setup if d.get("kind") == "MultiKueueConfig"]
    cluster = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "MultiKueueCluster",
        "metadata": {"name": name},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": f"{secret_name(name)}"}}},
    }
    clusters = [*config["spec"]["clusters"], name]
    return [cluster, {**config, "spec": {**config["spec"], "clusters": clusters}}]


def secret_name(cluster: str) -> str:
    """The Secret holding a worker's kubeconfig: Kueue's setup names ``worker1-secret`` for worker 1."""
    return cluster.removeprefix("multikueue-test-") + "-secret"


def kubeconfig_secret(*, name: str, namespace: str, kubeconfig: Path) -> dict[str, Any]:
    """A v1 Secret with the kubeconfig file's content under key ``kubeconfig`` (as Kueue reads it)."""
    data = base64.b64encode(kubeconfig.read_bytes()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "type": "Opaque",
        "data": {"kubeconfig": data},
    }


def worker_manifests(setup: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A worker's queues: the setup's ResourceFlavor, ClusterQueue (without its admission checks) and LocalQueue."""
    out = []
    for doc in setup:
        if doc.get("kind") in ("ResourceFlavor", "LocalQueue"):
            out.append(doc)
        elif doc.get("kind") == "ClusterQueue":
            spec = {k: v for k, v in doc["spec"].items() if k not in ("admissionChecks", "admissionChecksStrategy")}
            out.append({**doc, "spec": spec})
    return out


def manager_configuration(*, worker_lost_timeout: str, gc_interval: str) -> str:
    """The manager's Configuration file: Kueue's defaults with a short ``workerLostTimeout`` and ``gcInterval``,
    and the integrations MultiKueue has adapters for here (Job, JobSet, Pod)."""
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "multiKueue": {"workerLostTimeout": worker_lost_timeout, "gcInterval": gc_interval},
        "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset", "pod"]},  # MultiKueue's adapters
    }
    return yaml.safe_dump(config, sort_keys=False)


class Gate:
    """A TCP relay in front of a cluster's API server that can be shut and opened again on the same port:
    what the manager (and kubectl) reach a worker through, so a worker can be lost and come back while its
    emulated API server keeps its objects (the emulators themselves stop only at the end, in order)."""

    def __init__(self, target_port: int) -> None:
        self.target_port, self.port = target_port, 0
        self._server: asyncio.Server | None = None
        self._relays: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    async def open(self) -> None:
        """Listen (on the port of the first opening, after a :meth:`shut`)."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def shut(self) -> None:
        """Stop listening and cut every open connection (watches too)."""
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.close()  # both ends of each relay: its pipes see the end and return
            if self._relays:
                await asyncio.wait(list(self._relays), timeout=5)
            await self._server.wait_closed()
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            self._relays.discard(task)
            self._writers.discard(writer)
            return
        self._writers.add(up_writer)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                w.close()
                self._writers.discard(w)
            self._relays.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError, RuntimeError):
        writer.write_eof()


@dataclass(kw_only=True)
class Cluster:
    """One emulated cluster with its nats-server and kueue-es services.

    ``stack`` (:meth:`stop`) closes the services, the kubelet, the nats-server and the :class:`Gate`;
    the emulated API server is closed by the caller's stack given to :meth:`start` (kmock's servers must
    close in the reverse order of their start). ``url`` and ``kubeconfig`` go through the gate.
    """

    name: str
    run_dir: Path
    url: str = ""
    kubeconfig: Path = Path()
    supervisor: Supervisor | None = None
    api: Any = None
    stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    nats_url: str = ""
    auth: LocalAuth | None = None
    stopped: bool = False
    gate: Gate | None = None

    async def pause(self) -> None:
        """Make the API server unreachable through the gate (a lost worker); its objects are kept."""
        if self.gate is not None:
            await self.gate.shut()

    async def resume(self) -> None:
        """Open the gate again, on the same port."""
        if self.gate is not None:
            await self.gate.open()

    async def start(
        self,
        servers: contextlib.AsyncExitStack,
        *,
        services: tuple[str, ...],
        duration: float,
        watcher_args: list[str],
        extra: list[str],
        crds: list[dict[str, Any]] | None = None,
        controllers: bool = False,
    ) -> None:
        """Start the API server (closed by ``servers``), the nats-server, the services and a simulated kubelet;
        with ``controllers`` (a worker) also what the single-cluster demo runs beside them
        (:class:`~kueue_es.sim.controllers.SimulatedControllers`, whose scheduler stand-in binds pods to Nodes,
        and :class:`~kueue_es.sim.autoscaler.FakeAutoscaler`): without it a TAS workload's pods, ungated with
        their topology's nodeSelector, stayed Pending on the worker (found by a new user's trial)."""
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.auth = LocalAuth.create(self.run_dir / CREDS_DIR)
        emulator = await servers.enter_async_context(serve_emulator())
        if crds:
            emulator.install_crds(crds)
        direct = str(emulator.url)
        self.gate = Gate(int(direct.rsplit(":", 1)[1]))
        await self.gate.open()
        self.stack.push_async_callback(self.pause)
        server = await self.stack.enter_async_context(NatsServer(store_dir=self.run_dir / "nats", auth=self.auth))
        self.url, self.nats_url = self.gate.url, server.url
        self.kubeconfig = self.run_dir / "kubeconfig"
        kube.write_kubeconfig(self.kubeconfig, server=self.url, context=self.name)
        await nats_bus.ensure_log_stream(server.url, credentials=self.auth.credentials("admin"))
        self.supervisor = Supervisor(
            nats_url=server.url,
            log_dir=self.run_dir / "logs",
            kube_args=["--kube-server", direct],
            watcher_args=watcher_args,
            multikueue_args=extra,
            auth=self.auth,
        )
        self.stack.push_async_callback(self.supervisor.stop)
        await self.supervisor.start(services)
        self.api = await kube.make_api_client(server=direct)
        self.stack.push_async_callback(self.api.close)
        background = [asyncio.create_task(SimulatedKubelet(self.api, default_duration_seconds=duration).run())]
        if controllers:
            background.append(asyncio.create_task(SimulatedControllers(self.api).run()))
            background.append(asyncio.create_task(FakeAutoscaler(self.api).run()))
        self.stack.push_async_callback(cancel_and_wait, background)

    async def stop(self) -> None:
        """Stop this cluster's kueue-es, kubelet and gate: the manager cannot reach it any more."""
        self.stopped = True
        await self.stack.aclose()


class MultiKueueTimeline(TimelinePrinter):
    """The manager's timeline, with MultiKueue's events, and which worker ran each workload."""

    def __init__(self, *, bus: Bus, console: Console) -> None:
        super().__init__(bus=bus, console=console)
        self.chosen: dict[str, str] = {}  # workload key -> the worker that won (latest)
        self.running_on: dict[str, str] = {}  # workload key -> the worker its remote job was created on (latest)
        self.retried: set[str] = set()

    async def follow(self) -> None:
        """Print the manager's events forever, MultiKueue's among them (cancel to stop)."""
        async for message in self.bus.read(subjects=("kq.>",), start_seq=1):
            try:
                event = codec.decode(message.data)
            except codec.DecodeError:
                continue
            for one in multikueue_events(event):
                self.note(message.seq, one)
            await self._print_core(message, event)

    def note(self, seq: int, event: types.Event) -> None:
        """Print and keep what MultiKueue's ``event`` (at log sequence ``seq``) says."""
        line = _describe(event)
        if isinstance(event, types.RemoteAdmissionChosen):
            self.chosen[event.workload.key] = event.cluster
        if isinstance(event, types.MultiKueueCheckRetry):
            self.retried.add(event.workload.key)
        if isinstance(event, types.DispatchApplied) and event.action == "create-remote-job":
            self.running_on[event.workload.key] = event.target.split("/", 1)[0]
        if line is not None:
            verb, text = line
            self.console.print(
                f"[dim]{time.monotonic() - self.started:6.2f}s #{seq:<4}[/dim] [bold magenta]{verb:<9}[/bold magenta] {escape(text)}",
                highlight=False,
            )

    async def _print_core(self, message: Any, event: types.Event) -> None:
        from kueue_es import timeline
        from kueue_es.projections.cluster import apply

        for one in types.with_carried(event):
            remote_write = isinstance(one, (types.DispatchApplied, types.DispatchFailed)) and "remote" in one.action
            line = None if remote_write else timeline.describe(one, self.state, self.starts)  # the edge's: above
            apply(self.state, one, seq=message.seq)
            self.starts.note(one)
            self.count(one)
            if line is not None:
                verb, text = line
                self.console.print(
                    f"[dim]{time.monotonic() - self.started:6.2f}s #{message.seq:<4}[/dim] {verb:<9} {escape(text)}",
                    highlight=False,
                )
        self.changed.set()


def multikueue_events(event: types.Event) -> list[types.Event]:
    """What the MultiKueue timeline notes for one message's ``event``: a record's carried decisions (event schema
    17) and a batch's results, each once. A single DispatchApplied or DispatchFailed is its own carried event and
    its own result: listed once (it was noted, and its ``remote`` line printed, twice; found by a new user's trial)."""
    if isinstance(event, types.DispatchBatchApplied):
        return [*types.with_carried(event), *types.dispatch_results(event)]
    return types.with_carried(event)


def _describe(event: types.Event) -> tuple[str, str] | None:
    match event:
        case types.WorkersNominated(workload=ref, clusters=clusters):
            return "copies", f"{ref.key} -> {', '.join(clusters)}"
        case types.RemoteAdmissionChosen(workload=ref, cluster=cluster):
            return "runs on", f"{ref.key}: {cluster}"
        case types.MultiKueueCheckRetry(workload=ref, message=text):
            return "retry", f"{ref.key}: {text}"
        case types.WorkerClusterConnectivity(cluster=cluster, active=active, reason=reason):
            return "worker", f"{cluster} {'connected' if active else 'lost'} ({reason})"
        case types.DispatchApplied(workload=ref, action=action, target=target) if "remote" in action:
            return "remote", f"{action} {target or ref.key}"
    return None


async def start_system(
    stack: contextlib.AsyncExitStack,
    *,
    manager: Cluster,
    workers: list[Cluster],
    setup: list[dict[str, Any]],
    duration: float,
    config_file: Path,
    crds: list[dict[str, Any]] | None = None,
) -> None:
    """Start the workers (their queues from ``setup``), then the manager with the ``multikueue`` decider and
    the edge (``config_file``: its Configuration), the kubeconfig Secrets, ``setup`` unchanged and the
    second worker; ``stack`` stops each cluster (one already stopped is left alone)."""
    for worker in workers:
        await worker.start(
            stack, services=WORKER_SERVICES, duration=duration, watcher_args=[], extra=[], crds=crds, controllers=True
        )
        stack.push_async_callback(_stop_unless_stopped, worker)
        for doc in worker_manifests(setup):
            await kube.apply_manifest(worker.api, doc)
    manager_services = (
        *SERVICES,
        *((MULTIKUEUE_DECIDER,) if MULTIKUEUE_DECIDER not in SERVICES else ()),
        MULTIKUEUE_EDGE,
    )
    await manager.start(
        stack,
        services=manager_services,
        duration=duration,
        watcher_args=["--config", str(config_file)],
        extra=["--multikueue-namespace", SECRET_NAMESPACE],
        crds=crds,
    )
    stack.push_async_callback(_stop_unless_stopped, manager)
    await kube.apply_manifest(
        manager.api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SECRET_NAMESPACE}}
    )
    for worker in workers:
        secret = kubeconfig_secret(
            name=secret_name(worker.name), namespace=SECRET_NAMESPACE, kubeconfig=worker.kubeconfig
        )
        await kube.apply_manifest(manager.api, secret)
    for doc in setup:
        await kube.apply_manifest(manager.api, doc)
    for doc in second_worker(setup, workers[1].name):
        await kube.apply_manifest(manager.api, doc)


async def run_multikueue_demo(*, run_dir: Path | None, **options: Any) -> int:
    """``kueue-es demo --multikueue`` in ``run_dir`` (None: a new temporary directory), once this process holds
    it (:func:`kueue_es.supervisor.hold_run_dir`, as the demo and ``up`` do): 2, writing nothing there, while
    another process does. ``options``: :func:`multikueue_demo_in`'s."""
    held = run_dir or Path(tempfile.mkdtemp(prefix="kueue-es-mk-demo-"))
    return await in_held_run_dir(held, lambda: multikueue_demo_in(run_dir=held, **options))


async def multikueue_demo_in(
    *,
    keep: bool,
    jobs: int,
    duration: float,
    run_dir: Path,
    setup_path: Path,
    worker_lost_timeout: str = "5s",
) -> int:
    """Run the MultiKueue demo in ``run_dir``; 0 when every Job finished on the manager, one was re-dispatched
    after its worker was lost, and the manager's replay matched."""
    console = Console(soft_wrap=True)
    cancel_on_stop_signals()
    log_file = (run_dir / "demo.log").open("a")
    configure_logging(service="demo", file=log_file)
    console.print(
        f"[bold]kueue-es demo --multikueue[/bold]: a manager and {len(WORKERS)} workers, {jobs} Jobs "
        f"({duration:g}s each); logs and stores in {run_dir}"
    )
    setup = setup_manifests(setup_path)
    _, job = demo_manifests()
    config_file = run_dir / "manager-config.yaml"
    config_file.write_text(manager_configuration(worker_lost_timeout=worker_lost_timeout, gc_interval="10s"))
    manager = Cluster(name="manager", run_dir=run_dir / "manager")
    workers = [Cluster(name=name, run_dir=run_dir / name) for name in WORKERS]
    done = relocated = False
    report = None
    async with contextlib.AsyncExitStack() as stack:
        await start_system(
            stack, manager=manager, workers=workers, setup=setup, duration=duration, config_file=config_file
        )
        assert manager.auth is not None
        bus = await nats_bus.connect(manager.nats_url, credentials=manager.auth.credentials("reader"))
        # closed before the servers stop (the stack unwinds last in, first out), however the run ends: left
        # open, the client would try to reconnect to a stopped server for ever (kueue_es.demo.close_bus)
        stack.push_async_callback(close_bus, bus)
        printer = MultiKueueTimeline(bus=bus, console=console)
        follower = asyncio.create_task(printer.follow())
        try:
            for _ in range(jobs):
                await kube.apply_manifest(manager.api, job)
            # once worker 1 runs a Job, stop it: that workload must run again on worker 2
            if await printer.wait_until(lambda: WORKERS[0] in printer.running_on.values(), timeout=DEMO_TIMEOUT):
                lost = sorted(k for k, c in printer.running_on.items() if c == WORKERS[0])
                console.print(f"[bold red]stopping {WORKERS[0]}[/bold red] (it runs {', '.join(lost)})")
                await workers[0].stop()
                relocated = await printer.wait_until(
                    lambda: all(printer.chosen.get(k) == WORKERS[1] for k in lost), timeout=DEMO_TIMEOUT
                )
            done = await printer.wait_released(jobs, timeout=DEMO_TIMEOUT)
            if keep:
                _print_keep(console, manager=manager, workers=workers)
                await asyncio.Event().wait()
        finally:
            await cancel_and_wait([follower])
        console.print(
            f"{len(printer.finished & printer.released)}/{jobs} finished on the manager; "
            f"re-dispatched after the worker was lost: {'yes' if relocated else 'no'}. Stopping, then replaying ..."
        )
        assert manager.supervisor is not None
        await manager.supervisor.stop()
        report = await replay_bus(bus, deciders.BY_ROLE)
    for line, style in summary(report):
        console.print(line, style=style or None, markup=False, highlight=False)
    log_file.close()
    return 0 if done and relocated and report.ok else 1


async def _stop_unless_stopped(cluster: Cluster) -> None:
    if not cluster.stopped:
        await cluster.stop()


def _print_keep(console: Console, *, manager: Cluster, workers: list[Cluster]) -> None:
    lines = [f"  {c.name:<26} {c.url}   kubectl --kubeconfig {c.kubeconfig} get workloads" for c in (manager, *workers)]
    console.print(
        "\n[bold]Still running[/bold] (Ctrl-C stops everything; a stopped worker stays stopped):\n"
        + "\n".join(lines)
        + f"\n  manager's log: KUEUE_ES_NATS_USER=reader KUEUE_ES_NATS_PASSWORD_FILE="
        f"{manager.run_dir / CREDS_DIR / 'reader.password'} kueue-es replay --nats {manager.nats_url}",
        highlight=False,
    )
