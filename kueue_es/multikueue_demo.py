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

import kmock
import yaml
from rich.console import Console

from kueue_es import deciders
from kueue_es.demo import TimelinePrinter, demo_manifests, stop_on_sigterm
from kueue_es.events import codec, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus
from kueue_es.events.bus.server import LocalAuth, NatsServer
from kueue_es.events.manifests import load_documents
from kueue_es.replay import replay_bus, summary
from kueue_es.services.kube import client as kube
from kueue_es.services.runtime import cancel_and_wait, configure_logging
from kueue_es.sim.emulator import ClusterEmulator
from kueue_es.sim.kubelet import SimulatedKubelet
from kueue_es.supervisor import CREDS_DIR, MULTIKUEUE_EDGE, SERVICES, Supervisor

SETUP = "multikueue-setup.yaml"
WORKERS = ("multikueue-test-worker1", "multikueue-test-worker2")
SECRET_NAMESPACE = "kueue-system"
DEMO_TIMEOUT = 120.0
WORKER_SERVICES = ("watcher", "admitter", "dispatcher")
"""What a worker runs: enough kueue-es to admit and start what it is sent (no preemption, no TAS)."""
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
    """The manager's Configuration file: Kueue's defaults with a short ``workerLostTimeout``."""
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "multiKueue": {"workerLostTimeout": worker_lost_timeout, "gcInterval": gc_interval},
    }
    return yaml.safe_dump(config, sort_keys=False)


@dataclass(kw_only=True)
class Cluster:
    """One emulated cluster with its nats-server and kueue-es services (``stack`` closes all of it)."""

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
    emulator: ClusterEmulator | None = None
    port: int = 0
    _server: Any = None

    async def resume(self) -> None:
        """Serve the API server (again, on the same port after :meth:`pause`; its objects are kept)."""
        assert self.emulator is not None
        self._server = kmock.Server(self.emulator, port=self.port or None)
        await self._server.__aenter__()
        self.port = int(self._server.port)

    async def pause(self) -> None:
        """Stop serving the API server (the worker is unreachable) without losing its objects."""
        if self._server is not None and self.emulator is not None:
            self.emulator.drop_watches()
            server, self._server = self._server, None
            await server.__aexit__(None, None, None)

    async def start(
        self,
        *,
        services: tuple[str, ...],
        duration: float,
        watcher_args: list[str],
        extra: list[str],
        crds: list[dict[str, Any]] | None = None,
    ) -> None:
        """Start the API server, the nats-server, the services and a simulated kubelet."""
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.auth = LocalAuth.create(self.run_dir / CREDS_DIR)
        server = await self.stack.enter_async_context(NatsServer(store_dir=self.run_dir / "nats", auth=self.auth))
        self.emulator = await self.stack.enter_async_context(ClusterEmulator())
        if crds:
            self.emulator.install_crds(crds)
        await self.resume()
        self.stack.push_async_callback(self.pause)
        self.url, self.nats_url = str(self.emulator.url), server.url
        self.kubeconfig = self.run_dir / "kubeconfig"
        kube.write_kubeconfig(self.kubeconfig, server=self.url, context=self.name)
        await nats_bus.ensure_log_stream(server.url, credentials=self.auth.credentials("admin"))
        self.supervisor = Supervisor(
            nats_url=server.url,
            log_dir=self.run_dir / "logs",
            kube_args=["--kube-server", self.url],
            watcher_args=watcher_args,
            multikueue_args=extra,
            auth=self.auth,
        )
        self.stack.push_async_callback(self.supervisor.stop)
        await self.supervisor.start(services)
        self.api = await kube.make_api_client(server=self.url)
        self.stack.push_async_callback(self.api.close)
        kubelet = asyncio.create_task(SimulatedKubelet(self.api, default_duration_seconds=duration).run())
        self.stack.push_async_callback(cancel_and_wait, [kubelet])

    async def stop(self) -> None:
        """Stop everything of this cluster (the API server goes away: a lost worker)."""
        self.stopped = True
        await self.stack.aclose()


class MultiKueueTimeline(TimelinePrinter):
    """The manager's timeline, with MultiKueue's events, and which worker ran each workload."""

    def __init__(self, *, bus: Bus, console: Console) -> None:
        super().__init__(bus=bus, console=console)
        self.chosen: dict[str, str] = {}  # workload key -> the worker that won (latest)
        self.retried: set[str] = set()

    async def follow(self) -> None:
        """Print the manager's events forever, MultiKueue's among them (cancel to stop)."""
        async for message in self.bus.read(subjects=("kq.>",), start_seq=1):
            try:
                event = codec.decode(message.data)
            except codec.DecodeError:
                continue
            line = _describe(event)
            if isinstance(event, types.RemoteAdmissionChosen):
                self.chosen[event.workload.key] = event.cluster
            if isinstance(event, types.MultiKueueCheckRetry):
                self.retried.add(event.workload.key)
            if line is not None:
                verb, text = line
                self.console.print(
                    f"[dim]{time.monotonic() - self.started:6.2f}s #{message.seq:<4}[/dim] [bold magenta]{verb:<9}[/bold magenta] {text}",
                    highlight=False,
                )
            await self._print_core(message, event)

    async def _print_core(self, message: Any, event: types.Event) -> None:
        from kueue_es import timeline
        from kueue_es.projections.cluster import apply

        line = timeline.describe(event, self.state)
        apply(self.state, event, seq=message.seq)
        if isinstance(event, types.QuotaReserved):
            self.admitted.add(event.workload.key)
        if isinstance(event, types.QuotaReleased):
            self.released.add(event.workload.key)
        if isinstance(event, types.WorkloadFinished):
            self.finished.add(event.workload.key)
        if isinstance(event, types.EvictionRequested):
            self.evicted.add(event.workload.key)
        if line is not None:
            verb, text = line
            self.console.print(
                f"[dim]{time.monotonic() - self.started:6.2f}s #{message.seq:<4}[/dim] {verb:<9} {text}",
                highlight=False,
            )
        self.changed.set()


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
        await worker.start(services=WORKER_SERVICES, duration=duration, watcher_args=[], extra=[], crds=crds)
        stack.push_async_callback(_stop_unless_stopped, worker)
        for doc in worker_manifests(setup):
            await kube.apply_manifest(worker.api, doc)
    manager_services = (
        *SERVICES,
        *((MULTIKUEUE_DECIDER,) if MULTIKUEUE_DECIDER not in SERVICES else ()),
        MULTIKUEUE_EDGE,
    )
    await manager.start(
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


async def run_multikueue_demo(
    *,
    keep: bool,
    jobs: int,
    duration: float,
    run_dir: Path | None,
    setup_path: Path,
    worker_lost_timeout: str = "5s",
) -> int:
    """Run the MultiKueue demo; 0 when every Job finished on the manager, one was re-dispatched after
    its worker was lost, and the manager's replay matched."""
    console = Console(soft_wrap=True)
    stop_on_sigterm()
    run_dir = run_dir or Path(tempfile.mkdtemp(prefix="kueue-es-mk-demo-"))
    run_dir.mkdir(parents=True, exist_ok=True)
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
        printer = MultiKueueTimeline(bus=bus, console=console)
        follower = asyncio.create_task(printer.follow())
        try:
            for _ in range(jobs):
                await kube.apply_manifest(manager.api, job)
            # once worker 1 runs a Job, stop it: that workload must run again on worker 2
            if await printer.wait_until(lambda: WORKERS[0] in printer.chosen.values(), timeout=DEMO_TIMEOUT):
                lost = sorted(k for k, c in printer.chosen.items() if c == WORKERS[0])
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
        await bus.close()
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
