"""Starting the five services as their own processes, and stopping them gracefully; ``kueue-es up``.

``kueue-es up`` and ``kueue-es demo`` run each service as
``python -m kueue_es.cli service NAME ...`` with its JSON log in a file, so a
crash of one is visible and the others carry on. Stopping sends SIGTERM (each
service exits cleanly) and kills what is still alive after a grace period.

``kueue-es up --kubeconfig PATH [--context NAME]`` (:func:`run_up`) first checks
that the cluster serves the kueue.x-k8s.io/v1beta2 CRDs (:func:`missing_crds`),
then starts nats-server (JetStream store under ``--dir``) and the services, and
runs until Ctrl-C or SIGTERM, or until a service exits.

The nats-server ``up`` starts requires a user: every user of
:mod:`kueue_es.events.bus.permissions` gets a random password in
``<dir>/creds/<user>.password`` (mode 0600), the log stream is created as
``admin``, and each service connects as its own user, told through its
environment (``KUEUE_ES_NATS_USER``, ``KUEUE_ES_NATS_PASSWORD_FILE``: never the
password in argv). ``up`` prints how to connect as the read-only ``reader``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from kueue_es.events.bus.server import LocalAuth, die_with_parent

log = structlog.get_logger(__name__)

SERVICES = ("watcher", "admitter", "preemptor", "tas-placer", "dispatcher")
COMPACTOR = "compactor"  # kueue-es compact, started by up --compact (kueue_es.snapshots); health port after SERVICES
#: as kueue_es.events.bus.nats reads them (not imported here: nats-py would slow down every command's start)
USER_ENV, PASSWORD_FILE_ENV = "KUEUE_ES_NATS_USER", "KUEUE_ES_NATS_PASSWORD_FILE"
CREDS_DIR = "creds"


def reader_help(nats_url: str, auth: LocalAuth) -> str:
    """How to connect as the read-only ``reader`` user: what ``up`` and ``demo --keep`` print."""
    reader = auth.credentials("reader")
    return (
        f"read-only NATS user: reader, password in {reader.password_file} (mode 0600), e.g.\n"
        f"  {USER_ENV}=reader {PASSWORD_FILE_ENV}={reader.password_file} kueue-es replay --nats {nats_url}\n"
        f'  nats --server {nats_url} --user reader --password "$(cat {reader.password_file})" stream info KQ_LOG'
    )


@dataclass(kw_only=True)
class ServiceProcess:
    """One running service: its name, process and log file."""

    name: str
    process: asyncio.subprocess.Process
    log_path: Path


@dataclass(kw_only=True)
class Supervisor:
    """Starts and stops the services; ``log_dir`` receives ``<service>.log`` files.

    ``kube_args`` go to the watcher and dispatcher (``--kube-server`` or
    ``--kubeconfig``, ``--leader-elect``), ``watcher_args`` to the watcher only
    (``--config FILE``, ``--feature-gates``), ``decider_args`` to the others.
    ``health_port``: the first service (in ``SERVICES`` order) serves /healthz,
    /readyz and /metrics on it, the next on the port after, and so on.
    ``auth``: each service connects as its own NATS user with the password file
    there (through its environment); None: as the environment says (no user
    on a server without authentication).
    """

    nats_url: str
    log_dir: Path
    kube_args: list[str] = field(default_factory=list)
    watcher_args: list[str] = field(default_factory=list)
    decider_args: list[str] = field(default_factory=list)
    compact_args: list[str] = field(default_factory=list)
    health_port: int | None = None
    auth: LocalAuth | None = None
    running: list[ServiceProcess] = field(default_factory=list)

    def health_url(self, name: str) -> str | None:
        """Where service ``name`` serves its health endpoints, if it does."""
        if self.health_port is None:
            return None
        return f"http://127.0.0.1:{self.health_port + (*SERVICES, COMPACTOR).index(name)}"

    def service_args(self, name: str) -> list[str]:
        """The ``kueue-es`` arguments service ``name`` runs with: the edges get ``kube_args`` (the watcher also
        ``watcher_args``), the deciders ``decider_args``; all the NATS URL and their health port."""
        args = ["service", name, "--nats", self.nats_url]
        if name == COMPACTOR:
            args = ["compact", "--nats", self.nats_url, *self.compact_args]
        elif name in ("watcher", "dispatcher"):
            args += self.kube_args
            if name == "watcher":
                args += self.watcher_args
        else:
            args += self.decider_args
        if self.health_port is not None:
            port = self.health_port + (*SERVICES, COMPACTOR).index(name)
            args += ["--health-port", str(port), "--health-host", "127.0.0.1"]
        return args

    async def start(self, names: tuple[str, ...] = SERVICES) -> None:
        """Start every named service (all five by default)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            args = self.service_args(name)
            log_path = self.log_dir / f"{name}.log"
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            if self.auth is not None:
                credentials = self.auth.credentials(name)
                env.update({USER_ENV: credentials.user, PASSWORD_FILE_ENV: str(credentials.password_file)})
            with log_path.open("ab") as sink:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "kueue_es.cli",
                    *args,
                    stdout=sink,
                    stderr=sink,
                    stdin=asyncio.subprocess.DEVNULL,
                    env=env,
                    # a service must not outlive whoever started it, even one killed abruptly
                    preexec_fn=functools.partial(die_with_parent, os.getpid(), signal.SIGTERM),
                )
            self.running.append(ServiceProcess(name=name, process=process, log_path=log_path))
            log.info("service_spawned", service=name, pid=process.pid)

    def dead(self) -> list[ServiceProcess]:
        """Services whose process has exited."""
        return [s for s in self.running if s.process.returncode is not None]

    async def stop(self, *, grace: float = 10.0) -> dict[str, int | None]:
        """SIGTERM every service, wait up to ``grace`` seconds, then kill; returns exit codes."""
        for service in self.running:
            if service.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    service.process.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for service in self.running:
            try:
                codes[service.name] = await asyncio.wait_for(service.process.wait(), timeout=grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    service.process.kill()
                codes[service.name] = await service.process.wait()
        self.running.clear()
        return codes


# -- kueue-es up ----------------------------------------------------------------------------------


async def missing_crds(api: Any) -> list[str]:
    """The names of the kueue.x-k8s.io/v1beta2 CRDs (``kueue_es.crds.KINDS``) the API server does not serve.

    Reads the group's discovery document, which every authenticated user may read.
    Raises kueue_es.services.kube.errors.ApiError (other than 404) or ConnectionFailedError
    when the server cannot be asked.
    """
    import aiohttp
    from kubernetes_asyncio import client as k8s_client

    from kueue_es import crds
    from kueue_es.services.kube import errors

    group, version = crds.GROUP, "v1beta2"
    try:
        listing = await k8s_client.CustomObjectsApi(api).get_api_resources(group, version)
    except k8s_client.ApiException as err:
        if err.status == 404:
            return [kind.name for kind in crds.KINDS]
        raise errors.error_for_status(
            status=err.status or 0, reason=str(err.reason or "Unknown"), message=str(err.body or ""), body={}
        ) from err
    except (TimeoutError, aiohttp.ClientError, OSError) as err:
        raise errors.ConnectionFailedError(f"GET /apis/{group}/{version} failed: {err!r}") from err
    served = {resource.name for resource in (listing.resources or [])}
    return [kind.name for kind in crds.KINDS if kind.plural not in served]


def _stop_on_sigterm() -> None:
    """Make SIGTERM stop the current task like Ctrl-C does, so every ``finally`` stops the services."""
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


async def _check_cluster(args: argparse.Namespace, kube_args: list[str]) -> str | None:
    """Ask the cluster ``up`` will run against whether it serves the CRDs; returns an error, or None."""
    from kueue_es.services.kube import client as kube
    from kueue_es.services.kube import errors

    where = f"the API server at {args.kube_server}" if args.kube_server else f"the cluster of {args.kubeconfig}"
    try:
        api = await kube.make_api_client(server=args.kube_server, kubeconfig=args.kubeconfig, context=args.context)
    except Exception as err:  # noqa: BLE001 -- a kubeconfig that does not load, whatever the reason
        return f"cannot use {args.kubeconfig}: {err}"
    try:
        missing = await missing_crds(api)
    except errors.KubeError as err:
        return f"cannot ask {where} which kinds it serves: {err}"
    finally:
        await api.close()
    if missing:
        return (
            f"{where} does not serve the CRD{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
            "install them with: kueue-es deploy crds | kubectl apply -f -"
        )
    return None


def watcher_config_args(args: argparse.Namespace) -> list[str]:
    """``--config`` (made absolute, its symlinks kept: a ConfigMap volume swaps one) and ``--feature-gates``
    for the watcher ``up`` and ``demo`` start."""
    config = getattr(args, "config", None)
    out = ["--config", str(Path(config).absolute())] if config is not None else []
    return out + (["--feature-gates", args.feature_gates] if getattr(args, "feature_gates", "") else [])


async def run_up(args: argparse.Namespace) -> int:
    """``kueue-es up``: nats-server (unless ``--nats``) and the five services until Ctrl-C or SIGTERM.

    Returns 2 when there is no cluster to run against (no ``--kubeconfig`` nor
    ``--emulator``) or it lacks the CRDs, 1 when a service exits on its own, and
    130 after Ctrl-C or SIGTERM (every process started is stopped first).
    """
    from rich.console import Console

    from kueue_es.events.bus import nats as nats_bus
    from kueue_es.events.bus.server import NatsServer
    from kueue_es.services.kube import client as kube
    from kueue_es.sim.emulator import serve_emulator

    console = Console(soft_wrap=True, stderr=True)
    _stop_on_sigterm()
    run_dir: Path = args.dir.resolve()
    kube_args: list[str] = []
    if args.emulator:
        pass
    elif args.kube_server:
        kube_args = ["--kube-server", args.kube_server]
    elif args.kubeconfig or os.environ.get("KUBECONFIG"):
        args.kubeconfig = str(Path(args.kubeconfig or os.environ["KUBECONFIG"]).resolve())
        kube_args = ["--kubeconfig", args.kubeconfig] + (["--context", args.context] if args.context else [])
    else:
        console.print("error: give --kubeconfig PATH (a cluster) or --emulator (an emulated one)", style="bold red")
        return 2
    if kube_args and (problem := await _check_cluster(args, kube_args)):
        console.print(f"error: {problem}", style="bold red", highlight=False)
        return 2
    if args.leader_elect:
        kube_args.append("--leader-elect")
    run_dir.mkdir(parents=True, exist_ok=True)
    async with contextlib.AsyncExitStack() as stack:
        nats_url = args.nats
        auth: LocalAuth | None = None
        if nats_url is None:
            auth = LocalAuth.create(run_dir / CREDS_DIR)
            server = await stack.enter_async_context(NatsServer(store_dir=run_dir / "nats", auth=auth))
            nats_url = server.url
        elif args.nats_auth_dir is not None:
            auth = LocalAuth(args.nats_auth_dir.resolve())
        if auth is not None and (admin := auth.credentials("admin")).password_file.is_file():
            await nats_bus.ensure_log_stream(nats_url, credentials=admin)  # the services only check it exists
        if args.emulator:
            emulator = await stack.enter_async_context(serve_emulator())
            kube.write_kubeconfig(run_dir / "kubeconfig", server=emulator.url)
            kube_args = ["--kube-server", emulator.url] + kube_args
            console.print(f"emulated cluster: kubeconfig {run_dir / 'kubeconfig'}", highlight=False)
        checkpoint_dir = getattr(args, "checkpoints", None)
        supervisor = Supervisor(
            nats_url=nats_url,
            log_dir=run_dir / "logs",
            kube_args=kube_args,
            watcher_args=watcher_config_args(args),
            decider_args=["--checkpoints", str(checkpoint_dir.resolve())] if checkpoint_dir else [],
            compact_args=getattr(args, "compact", None) or [],
            health_port=args.health_port,
            auth=auth,
        )
        try:
            await supervisor.start((*SERVICES, COMPACTOR) if getattr(args, "compact", None) else SERVICES)
            target = args.kube_server or args.kubeconfig or "the emulator"
            if args.context:
                target += f" (context {args.context})"
            console.print(
                f"kueue-es is up: NATS {nats_url}, Kubernetes {target}, logs in {run_dir / 'logs'}; Ctrl-C stops it",
                highlight=False,
            )
            if auth is not None:
                console.print(reader_help(nats_url, auth), highlight=False)
            if args.health_port is not None:
                urls = ", ".join(f"{name} {supervisor.health_url(name)}" for name in SERVICES)
                console.print(f"health and metrics: {urls}", highlight=False)
            while not supervisor.dead():
                await asyncio.sleep(0.5)
            for service in supervisor.dead():
                console.print(
                    f"error: {service.name} exited with code {service.process.returncode}; see {service.log_path}",
                    style="bold red",
                    highlight=False,
                )
            return 1
        finally:
            codes = await supervisor.stop()
            console.print(f"stopped: {', '.join(f'{name} {code}' for name, code in codes.items())}", highlight=False)
