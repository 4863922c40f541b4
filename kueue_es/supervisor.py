"""Starting the five services as their own processes, restarting them, stopping them; ``kueue-es up``.

``kueue-es up`` and ``kueue-es demo`` run each service as
``python -m kueue_es.cli service NAME ...`` with its JSON log in a file, so a
crash of one is visible and the others carry on. Stopping sends SIGTERM (each
service exits cleanly) and kills what is still alive after a grace period.

:meth:`Supervisor.supervise` restarts, as a process supervisor does, a service
that exits on its own (and the nats-server given to :meth:`Supervisor.watch_server`,
on the same store and client port): after an exponential backoff (1 s doubling to
30 s, back to 1 s once the process stayed up 60 s; :class:`RestartPolicy`), appending
to the same log file; every exit and restart is logged (``service_exited``,
``service_restarted``) and counted (:class:`SupervisorMetrics`). It gives up with
:class:`CrashLoopError` when one process exited more than N times within M minutes
(5 in 2 min by default).

Ports the supervisor is given as 0 (the demo's and ``up``'s visibility API and dashboard by default,
the demo's health ports) are not picked up front, where another process could take one before the
service binds it: the service binds port 0 and reports the port it got (:mod:`kueue_es.services.ports`),
the supervisor learns it (:meth:`Supervisor.wait_ports`, :attr:`Supervisor.on_port`) and passes that
port again when it restarts the process, or 0 again if another process took it meanwhile.

``kueue-es up --kubeconfig PATH [--context NAME]`` (:func:`run_up`) first checks
that the cluster serves the kueue.x-k8s.io/v1beta2 CRDs (:func:`missing_crds`),
then starts nats-server (JetStream store under ``--dir``) and the services, and
supervises them until Ctrl-C or SIGTERM, or until one is in a crash loop.

The nats-server ``up`` starts requires a user: every user of
:mod:`kueue_es.events.bus.permissions` gets a random password in
``<dir>/creds/<user>.password`` (mode 0600), the log stream is created as
``admin``, and each service connects as its own user, told through its
environment (``KUEUE_ES_NATS_USER``, ``KUEUE_ES_NATS_PASSWORD_FILE``: never the
password in argv). ``up`` prints how to connect as the read-only ``reader``.

A run directory belongs to one ``up`` or ``demo`` at a time (:func:`hold_run_dir`): before either writes
anything into it (passwords, kubeconfig, logs, the store) it takes an exclusive lock on ``<dir>/run.lock``,
held until the process ends (the kernel drops it then, a SIGKILL included); a second one on the same
directory is refused at once, naming the directory and the holder's PID, and writes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import fcntl
import functools
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest

from kueue_es import current
from kueue_es.events.bus.server import (
    PASSWORD_SUFFIX,
    LocalAuth,
    NatsServer,
    ServerError,
    die_with_parent,
    write_secret,
)
from kueue_es.services import ports

log = structlog.get_logger(__name__)

SERVICES = ("watcher", "admitter", "preemptor", "tas-placer", "dispatcher", "multikueue")
DECIDERS = "deciders"
"""``kueue-es service deciders``: the admitter, preemptor and TAS placer in one process over one fold
(``up --deciders cohosted``, ``bench --deciders cohosted``); it takes the admitter's health port."""
COHOSTED_ROLES = ("admitter", "preemptor", "tas-placer")
PASSWORD_DIR_ENV = "KUEUE_ES_NATS_PASSWORD_DIR"
COMPACTOR = "compactor"  # kueue-es compact, started by up --compact (kueue_es.snapshots); health port after up's own
VISIBILITY = (
    "visibility"  # Kueue's visibility API (services/visibility), as NATS user reader; health port after the compactor's
)
DASHBOARD = "dashboard"  # kueue-es dashboard (kueue_es/dashboard), as NATS user reader; serves its own /healthz
PUBLISHER = (
    "publisher"  # the public stream KQ_PUB (services/publisher), as NATS user publisher; port after visibility's
)
PROVISIONING = "provisioning"  # Kueue's ProvisioningRequest check controller (services/provisioning): API only, no NATS
MULTIKUEUE_EDGE = (
    "multikueue-edge"  # the link to MultiKueue's workers (services/multikueue_edge); port after the publisher's
)
#: as kueue_es.events.bus.nats reads them (not imported here: nats-py would slow down every command's start)
USER_ENV, PASSWORD_FILE_ENV = "KUEUE_ES_NATS_USER", "KUEUE_ES_NATS_PASSWORD_FILE"
CREDS_DIR = "creds"
RUN_LOCK = "run.lock"
"""The file in a run directory that ``up`` and ``demo`` lock (:func:`hold_run_dir`); it holds the holder's PID."""


class RunDirBusy(Exception):
    """Another process (``pid``, None when it has not written it yet) holds the run directory ``run_dir``."""

    def __init__(self, run_dir: Path, pid: int | None) -> None:
        self.run_dir, self.pid = run_dir, pid
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(
            f"{run_dir} is in use by {holder} (a kueue-es up or demo; lock {run_dir / RUN_LOCK}): "
            "stop it first, or give this one a --dir of its own"
        )


def hold_run_dir(run_dir: Path) -> int:
    """Lock the run directory ``run_dir`` (made if missing) for this process; returns the lock's file descriptor.

    An exclusive ``flock`` on ``<run_dir>/run.lock``, which then holds this process's PID: keep the
    descriptor open as long as the directory is used (closing it releases the lock; so does the process's
    end, however it ends, so a killed holder leaves no stale lock). The descriptor is not inherited by
    the processes started later. Raises :class:`RunDirBusy` without changing anything in the directory
    when another process holds it.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / RUN_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        written = os.read(fd, 32).decode(errors="replace").strip()
        os.close(fd)
        raise RunDirBusy(run_dir, int(written) if written.isdigit() else None) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


async def in_held_run_dir(run_dir: Path, body: Callable[[], Awaitable[int]]) -> int:
    """Run ``body`` (a command's work, returning its exit code) while this process holds ``run_dir``
    (:func:`hold_run_dir`), and return what it returns; the lock is released after. While another process
    holds the directory: 2, the reason printed to stderr, nothing written there."""
    from rich.console import Console  # as up: only the commands print

    try:
        lock = hold_run_dir(run_dir)
    except (RunDirBusy, OSError) as err:
        Console(soft_wrap=True, stderr=True).print(f"error: {err}", style="bold red", highlight=False)
        return 2
    try:
        return await body()
    finally:
        os.close(lock)


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
    """One running service: its name, process and log file (``process`` is replaced when it is restarted)."""

    name: str
    process: asyncio.subprocess.Process
    log_path: Path


@dataclass(frozen=True, kw_only=True)
class RestartPolicy:
    """When :meth:`Supervisor.supervise` restarts a process that exited, and when it gives up.

    The n-th consecutive restart waits ``backoff_initial * 2**(n-1)`` seconds, at most
    ``backoff_max``; a process that stayed up ``reset_after`` seconds or more starts
    again from ``backoff_initial`` when it next exits (in the manner of Kubernetes'
    CrashLoopBackOff, with shorter times). More than ``crash_loop_restarts`` exits of one
    process within ``crash_loop_window`` seconds is a crash loop. Times in seconds.
    """

    backoff_initial: float = 1.0
    backoff_max: float = 30.0
    reset_after: float = 60.0
    crash_loop_restarts: int = 5
    crash_loop_window: float = 120.0

    def __post_init__(self) -> None:
        if self.backoff_initial <= 0 or self.backoff_max < self.backoff_initial:
            raise ValueError(f"RestartPolicy: backoff {self.backoff_initial}s..{self.backoff_max}s is not a range")
        if self.crash_loop_restarts < 1 or self.crash_loop_window <= 0:
            raise ValueError(
                f"RestartPolicy: a crash loop of {self.crash_loop_restarts} exits in {self.crash_loop_window}s "
                "needs at least one exit and a positive window"
            )

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before restart number ``attempt`` (1, 2, ...) since the process last ran long enough."""
        return min(self.backoff_initial * 2 ** min(attempt - 1, 62), self.backoff_max)


@dataclass(kw_only=True)
class CrashHistory:
    """The exits of one supervised process, on a monotonic clock in seconds (pure: the caller gives the times)."""

    policy: RestartPolicy
    started_at: float
    attempt: int = 0
    exits: collections.deque[float] = field(default_factory=collections.deque)

    def started(self, now: float) -> None:
        """The process was (re)started at ``now``."""
        self.started_at = now

    def exited(self, now: float) -> tuple[int, float, bool]:
        """The process exited at ``now``: returns (restart attempt, backoff in seconds, crash loop or not)."""
        if now - self.started_at >= self.policy.reset_after:
            self.attempt = 0
        self.attempt += 1
        self.exits.append(now)
        while self.exits and self.exits[0] <= now - self.policy.crash_loop_window:
            self.exits.popleft()
        return self.attempt, self.policy.backoff(self.attempt), len(self.exits) > self.policy.crash_loop_restarts


def describe_exit(code: int | None) -> str:
    """``exited with code 1``, ``killed by SIGKILL`` (a negative code is asyncio's and subprocess's signal)."""
    if code is None:
        return "exited"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exited with code {code}"


def log_tail(path: Path, *, lines: int = 10) -> list[str]:
    """The last ``lines`` lines of the file at ``path`` (its last 64 KiB read; [] if it cannot be read)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 65536))
            return f.read().decode(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


EXPLAINING_ERRORS = ("authorization violation", "permissions violation", "address already in use")
"""Errors (lowercase) that say why a process cannot work, which its last lines may hide behind what followed:
a client refused its password by nats-server goes on to fail with ``NoServersError``."""


def explaining_line(lines: Sequence[str]) -> str | None:
    """The last of ``lines`` naming one of :data:`EXPLAINING_ERRORS`, or None."""
    for line in reversed(lines):
        lowered = line.lower()
        if any(error in lowered for error in EXPLAINING_ERRORS):
            return line
    return None


@dataclass(frozen=True, kw_only=True)
class SupervisorEvent:
    """What :meth:`Supervisor.supervise` reports: a process ``exited`` (restart after ``backoff`` s),
    was ``restarted`` (``pid``), or could not be restarted (``restart_failed``, ``error``)."""

    kind: str
    service: str
    code: int | None
    attempt: int
    backoff: float
    log_path: Path
    pid: int | None = None
    error: str = ""

    def describe(self) -> str:
        """One line for a console."""
        if self.kind == "exited":
            return (
                f"{self.service} {describe_exit(self.code)}; restarting it in {self.backoff:g}s "
                f"(attempt {self.attempt}); log {self.log_path}"
            )
        if self.kind == "restarted":
            return f"{self.service} restarted (pid {self.pid}, attempt {self.attempt})"
        return f"{self.service} could not be restarted: {self.error}; log {self.log_path}"


class CrashLoopError(Exception):
    """A supervised process exited more than the policy allows within its window: ``up`` gives up.

    ``tail``: the last lines of its log; ``cause``: an earlier line of its last runs that says why
    (:func:`explaining_line`, e.g. nats-server refusing its password) when the tail does not show it, or None.
    """

    def __init__(self, *, service: str, code: int | None, exits: int, window: float, log_path: Path) -> None:
        self.service, self.code, self.exits, self.window, self.log_path = service, code, exits, window, log_path
        self.tail = log_tail(log_path)
        cause = explaining_line(log_tail(log_path, lines=200))  # its last runs: what the tail may hide
        self.cause = cause if cause is not None and cause not in self.tail else None
        super().__init__(
            f"{service} is in a crash loop: {exits} exits within {window:g}s, the last {describe_exit(code)}; "
            f"see {log_path}"
        )


class SupervisorMetrics:
    """The supervisor's own Prometheus metrics, on a registry of their own (``service`` label: a service's
    name, or ``nats-server``):

    - ``kueue_es_service_restarts_total``: restarts after the process exited on its own;
    - ``kueue_es_service_up``: 1 while the process runs, 0 while it is down (waiting for its restart);
    - ``kueue_es_service_crash_loop``: 1 once the supervisor gave up on it.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.restarts = Counter(
            "kueue_es_service_restarts",
            "Restarts of a supervised process that exited on its own.",
            ["service"],
            registry=self.registry,
        )
        self.up = Gauge(
            "kueue_es_service_up", "1 while the supervised process runs.", ["service"], registry=self.registry
        )
        self.crash_loop = Gauge(
            "kueue_es_service_crash_loop",
            "1 once the supervisor gave up on the process.",
            ["service"],
            registry=self.registry,
        )

    def watch(self, service: str, is_up: Callable[[], bool]) -> None:
        """Export ``service``'s state (its restarts start at 0)."""
        self.restarts.labels(service)
        self.crash_loop.labels(service)
        self.up.labels(service).set_function(lambda: float(is_up()))

    def text(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)


@dataclass(kw_only=True)
class _Watched:
    """One supervised process, as :meth:`Supervisor.supervise` sees it."""

    name: str
    log_path: Path
    wait: Callable[[], Awaitable[int | None]]  # until the process has exited; its exit code
    respawn: Callable[[], Awaitable[int | None]]  # start it again; its pid
    is_up: Callable[[], bool]


def _port_offset(name: str) -> int:
    """Where process ``name`` serves its health endpoints, counted from ``--health-port``: the services
    in ``SERVICES`` order, then ``up``'s own (the supervisor, ``len(SERVICES)``), the compactor, the
    visibility server, the publisher, the MultiKueue edge, the ProvisioningRequest controller (the
    dashboard serves on its own port)."""
    if name == PROVISIONING:
        return len(SERVICES) + 5
    if name == MULTIKUEUE_EDGE:
        return len(SERVICES) + 4
    if name == PUBLISHER:
        return len(SERVICES) + 3
    if name == VISIBILITY:
        return len(SERVICES) + 2
    if name == DECIDERS:
        return SERVICES.index(COHOSTED_ROLES[0])
    return len(SERVICES) + 1 if name == COMPACTOR else SERVICES.index(name)


def cohosted(names: tuple[str, ...]) -> tuple[str, ...]:
    """``names`` with the admitter, preemptor and TAS placer replaced by the one co-hosted process
    (:data:`DECIDERS`, where the admitter was); the others as they are."""
    out: list[str] = []
    for name in names:
        if name in COHOSTED_ROLES:
            if DECIDERS not in out:
                out.append(DECIDERS)
        else:
            out.append(name)
    return tuple(out)


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``host:port`` now (bound as aiohttp binds, address reuse on, so a
    port its own last process left in TIME_WAIT counts as free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen()
        except OSError:
            return False
    return True


@dataclass(kw_only=True)
class Supervisor:
    """Starts, restarts and stops the services; ``log_dir`` receives ``<service>.log`` files.

    ``kube_args`` go to the watcher, dispatcher and MultiKueue edge (``--kube-server`` or
    ``--kubeconfig``, ``--leader-elect``), ``watcher_args`` to the watcher only
    (``--config FILE``, ``--feature-gates``), ``decider_args`` to the others.
    ``health_port``: the first service (in ``SERVICES`` order) serves /healthz,
    /readyz and /metrics on it, the next on the port after, and so on; 0: each
    process on a port of its own choosing, learned from it (so are a
    ``visibility_port`` or ``dashboard_port`` of 0; see :meth:`port`).
    ``on_port(name, kind, port, previous)``: told each port learned that way (kind: a
    :mod:`kueue_es.services.ports` kind; ``previous`` None the first time), and
    again when a restart moved it (the port it had was taken while it was down).
    ``auth``: each service connects as its own NATS user with the password file
    there (through its environment); None: as the environment says (no user
    on a server without authentication).
    ``program``: what runs a service, its :meth:`service_args` appended (tests give another).
    ``policy``: restarts and crash loops for :meth:`supervise`; ``clock``: monotonic seconds.
    """

    nats_url: str
    log_dir: Path
    kube_args: list[str] = field(default_factory=list)
    watcher_args: list[str] = field(default_factory=list)
    decider_args: list[str] = field(default_factory=list)
    compact_args: list[str] = field(default_factory=list)
    multikueue_args: list[str] = field(default_factory=list)  # the edge's own (--multikueue-namespace)
    health_port: int | None = None
    visibility_port: int | None = None  # the visibility API's HTTPS port (127.0.0.1; 0: its own choice)
    dashboard_port: int | None = None  # the dashboard's HTTP port (127.0.0.1; 0: its own choice), when it runs
    on_port: Callable[[str, str, int, int | None], None] | None = None
    auth: LocalAuth | None = None
    running: list[ServiceProcess] = field(default_factory=list)
    program: Sequence[str] = (sys.executable, "-m", "kueue_es.cli")
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    clock: Callable[[], float] = time.monotonic
    metrics: SupervisorMetrics = field(default_factory=SupervisorMetrics)
    stopping: bool = False
    _servers: list[NatsServer] = field(default_factory=list)
    _watchers: list[asyncio.Task[None]] = field(default_factory=list)
    _supervising: list[asyncio.Event] = field(default_factory=list)
    _learned: dict[tuple[str, str], int] = field(default_factory=dict)  # (process, kind): the port it reported
    _reported: dict[tuple[str, str], int] = field(default_factory=dict)  # the same, kept when a port is taken
    _learning: dict[str, asyncio.Task[None]] = field(default_factory=dict)  # process: reading its ports

    def _configured_port(self, name: str, kind: str) -> int | None:
        """The port process ``name`` is configured to serve ``kind`` on (0: one of its choosing), None if
        it serves no such thing."""
        if kind == ports.HTTP:
            return None if name != DASHBOARD else (self.dashboard_port or 0)
        if kind == ports.API:
            return self.visibility_port if name == VISIBILITY else None
        if self.health_port is None or name == DASHBOARD:  # the dashboard serves /healthz on its own port
            return None
        return 0 if self.health_port == 0 else self.health_port + _port_offset(name)

    def port(self, name: str, kind: str) -> int | None:
        """The port process ``name`` serves ``kind`` (:mod:`kueue_es.services.ports`) on: the configured
        one, or, configured as 0, the one it reported (0 until it has); None if it serves no such thing."""
        configured = self._configured_port(name, kind)
        if configured == 0:
            return self._learned.get((name, kind), 0)
        return configured

    def _chosen_by_process(self, name: str) -> tuple[str, ...]:
        """The kinds of port process ``name`` chooses itself (configured as 0), which the supervisor learns."""
        return tuple(kind for kind in ports.KINDS if self._configured_port(name, kind) == 0)

    def health_url(self, name: str) -> str | None:
        """Where service ``name`` serves its health endpoints, if it does (and, chosen by it, has said where)."""
        if name == DASHBOARD:
            return self.dashboard_url.rstrip("/") if self.dashboard_url else None
        port = self.port(name, ports.HEALTH)
        return None if not port else f"http://127.0.0.1:{port}"

    @property
    def dashboard_url(self) -> str | None:
        """Where the dashboard serves (``dashboard_port`` on 127.0.0.1), when it runs (and has said where)."""
        port = self.port(DASHBOARD, ports.HTTP) if self.dashboard_port is not None else None
        return None if not port else f"http://127.0.0.1:{port}/"

    @property
    def visibility_url(self) -> str | None:
        """Where the visibility API serves (HTTPS on 127.0.0.1), when it has a port (and has said which)."""
        port = self.port(VISIBILITY, ports.API)
        return None if not port else f"https://127.0.0.1:{port}"

    @property
    def supervisor_port(self) -> int | None:
        """Where ``up`` serves the supervisor's /healthz, /readyz and /metrics: the port after the services'
        (0 with a ``health_port`` of 0: one of its own)."""
        if self.health_port is None:
            return None
        return 0 if self.health_port == 0 else self.health_port + len(SERVICES)

    def taken_health_ports(self, names: Sequence[str]) -> list[tuple[str, int]]:
        """The fixed health ports (``health_port`` P > 0: process ``name`` on P + its offset, the supervisor's
        own on P + ``len(SERVICES)``) of processes ``names`` that cannot be bound now, as ``(process, port)``;
        ``[]`` with ``health_port`` None or 0 (each process binds one of the kernel's choosing). ``up`` checks
        them before it starts anything: a process whose port is taken would only restart until its crash loop
        ends the run."""
        if not self.health_port:
            return []
        wanted = [(name, self.port(name, ports.HEALTH)) for name in names]
        wanted.append(("up", self.supervisor_port))
        return [(name, port) for name, port in wanted if port and not port_free(port)]

    def service_args(self, name: str) -> list[str]:
        """The ``kueue-es`` arguments service ``name`` runs with: the edges get ``kube_args`` (the watcher also
        ``watcher_args``), the deciders ``decider_args``; all the NATS URL and their health port."""
        health_port = self.port(name, ports.HEALTH)
        if name == PROVISIONING:  # the Kubernetes API only: no NATS URL, no credentials
            health = [] if health_port is None else ["--health-port", str(health_port)]
            return ["service", name, *self.kube_args, *health, *(["--health-host", "127.0.0.1"] if health else [])]
        args = ["service", name, "--nats", self.nats_url]
        if name == VISIBILITY:
            args += ["--cert-dir", str(self.log_dir.parent / "visibility-cert")]
            if (api_port := self.port(name, ports.API)) is not None:
                args += ["--api-port", str(api_port)]
        elif name == COMPACTOR:
            args = ["compact", "--nats", self.nats_url, *self.compact_args]
        elif name == PUBLISHER:
            pass  # the NATS URL only
        elif name == DASHBOARD:
            port = self.port(name, ports.HTTP)
            return ["dashboard", "--nats", self.nats_url, "--host", "127.0.0.1", "--port", str(port)]
        elif name == MULTIKUEUE_EDGE:
            args += self.kube_args + self.multikueue_args  # --leader-elect too: one edge writes to the workers
        elif name in ("watcher", "dispatcher"):
            args += self.kube_args
            if name == "watcher":
                args += self.watcher_args
        else:
            args += self.decider_args
        if health_port is not None:
            args += ["--health-port", str(health_port), "--health-host", "127.0.0.1"]
        return args

    def ports_dir(self, name: str) -> Path:
        """Where process ``name`` reports the ports it bound (:mod:`kueue_es.services.ports`): under this
        supervisor's ``log_dir``, so that supervisors beside each other (the bench's replicas, each with a
        log directory of its own) never share one."""
        return self.log_dir / "ports" / name

    def _prepare_ports(self, name: str) -> Path:
        """Before (re)starting process ``name``: forget a port it chose last time that another process has
        taken since (it then chooses again), and empty its ports directory; returns the directory."""
        for kind in self._chosen_by_process(name):
            learned = self._learned.get((name, kind))
            if learned is not None and not port_free(learned):
                log.warning("port_taken", service=name, kind=kind, port=learned)
                del self._learned[(name, kind)]
        directory = self.ports_dir(name)
        directory.mkdir(parents=True, exist_ok=True)
        for kind in ports.KINDS:
            (directory / kind).unlink(missing_ok=True)
        return directory

    def _learn_ports(self, name: str, process: asyncio.subprocess.Process) -> None:
        """Read, in the background, the ports process ``name`` chose (until it reported them all or exited)."""
        kinds = self._chosen_by_process(name)
        if previous := self._learning.pop(name, None):
            previous.cancel()
        if kinds:
            self._learning[name] = asyncio.create_task(self._read_ports(name, process, kinds), name=f"ports {name}")

    async def _read_ports(self, name: str, process: asyncio.subprocess.Process, kinds: tuple[str, ...]) -> None:
        directory = self.ports_dir(name)
        missing = list(kinds)
        while missing:
            for kind in list(missing):
                try:
                    port = ports.read(directory, kind)
                except ValueError as err:
                    log.error("port_unreadable", service=name, kind=kind, error=str(err))
                    missing.remove(kind)
                    continue
                if port is None:
                    continue
                missing.remove(kind)
                previous = self._reported.get((name, kind))
                self._learned[(name, kind)] = self._reported[(name, kind)] = port
                if port != previous:
                    log.info("port_learned", service=name, kind=kind, port=port, previous=previous)
                    if self.on_port is not None:
                        self.on_port(name, kind, port, previous)
            if missing:
                if process.returncode is not None:  # exited before binding: its restart reports them
                    return
                await asyncio.sleep(0.05)

    async def wait_ports(self, *, timeout: float = 60.0) -> list[str]:
        """Wait until every started process reported the ports it chose, or ``timeout`` seconds passed;
        returns what is still unknown, as ``"<process> <kind>"`` ([] when all are known). A process that
        exits before it reports them is waited for again while :meth:`supervise` runs (its restart reports
        them: on a loaded machine a service may exit while starting), and given up otherwise (nothing will
        restart it)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            unknown = self.unknown_ports()
            remaining = deadline - loop.time()
            if not unknown or remaining <= 0:
                return unknown
            pending = [task for task in self._learning.values() if not task.done()]
            if pending:  # a short wait at a time: a restart starts another task to wait for
                await asyncio.wait(pending, timeout=min(remaining, 0.5))
            elif self._supervising and not self.stopping:
                await asyncio.sleep(min(remaining, 0.2))  # exited: supervise restarts it after its backoff
            else:
                return unknown

    def unknown_ports(self) -> list[str]:
        """The ports started processes chose that they have not reported (yet), as ``"<process> <kind>"``."""
        return [
            f"{service.name} {kind}"
            for service in self.running
            for kind in self._chosen_by_process(service.name)
            if not self.port(service.name, kind)
        ]

    async def start(self, names: tuple[str, ...] = SERVICES) -> None:
        """Start every named service (all five by default)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for name in names:
            log_path = self.log_dir / f"{name}.log"
            process = await self._spawn(name, log_path)
            self.running.append(ServiceProcess(name=name, process=process, log_path=log_path))
            log.info("service_spawned", service=name, pid=process.pid)

    async def _spawn(self, name: str, log_path: Path) -> asyncio.subprocess.Process:
        """Start service ``name``'s process, its output appended to ``log_path``."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1", ports.PORTS_DIR_ENV: str(self._prepare_ports(name))}
        if self.auth is not None and name == DECIDERS:  # each role as its own user: their passwords only
            env[PASSWORD_DIR_ENV] = str(self._cohosted_passwords())
        elif self.auth is not None and name != PROVISIONING:
            credentials = self.auth.credentials("reader" if name in (VISIBILITY, DASHBOARD) else name)
            env.update({USER_ENV: credentials.user, PASSWORD_FILE_ENV: str(credentials.password_file)})
        with log_path.open("ab") as sink:
            process = await asyncio.create_subprocess_exec(
                *self.program,
                *self.service_args(name),
                stdout=sink,
                stderr=sink,
                stdin=asyncio.subprocess.DEVNULL,
                env=env,
                # a service must not outlive whoever started it, even one killed abruptly
                preexec_fn=functools.partial(die_with_parent, os.getpid(), signal.SIGTERM),
            )
        self._learn_ports(name, process)
        return process

    def _cohosted_passwords(self) -> Path:
        """A directory holding the co-hosted roles' password files only (copies of ``auth``'s, mode 0600)."""
        assert self.auth is not None
        directory = self.auth.directory / DECIDERS
        for user in COHOSTED_ROLES:
            write_secret(directory / f"{user}{PASSWORD_SUFFIX}", self.auth.credentials(user).password_file.read_text())
        os.chmod(directory, 0o700)
        return directory

    def dead(self) -> list[ServiceProcess]:
        """Services whose process has exited (and, under :meth:`supervise`, is not restarted yet)."""
        return [s for s in self.running if s.process.returncode is not None]

    def watch_server(self, server: NatsServer) -> None:
        """Make :meth:`supervise` also restart ``server`` (started by the caller) when it exits on its own,
        on the same store directory and client port (:meth:`NatsServer.restart_async`)."""
        self._servers.append(server)

    def _watched(self) -> list[_Watched]:
        return [self._service_target(s) for s in self.running] + [self._server_target(s) for s in self._servers]

    def _service_target(self, service: ServiceProcess) -> _Watched:
        async def wait() -> int | None:
            return await service.process.wait()

        async def respawn() -> int | None:
            service.process = await self._spawn(service.name, service.log_path)
            return service.process.pid

        def is_up() -> bool:
            return service.process.returncode is None

        return _Watched(name=service.name, log_path=service.log_path, wait=wait, respawn=respawn, is_up=is_up)

    def _server_target(self, server: NatsServer) -> _Watched:
        async def wait() -> int | None:
            while server.running:
                await asyncio.sleep(0.2)
            return server.returncode

        async def respawn() -> int | None:
            await server.restart_async(timeout=60.0)
            return server.pid

        def is_up() -> bool:
            return server.running

        return _Watched(name="nats-server", log_path=server.log_path, wait=wait, respawn=respawn, is_up=is_up)

    async def supervise(self, on_event: Callable[[SupervisorEvent], None] | None = None) -> None:
        """Restart every started service (and watched server) that exits on its own, until cancelled.

        Each exit is logged (``service_exited``: service, exit_code, signal, attempt,
        backoff_s, log_path), reported to ``on_event``, counted in :attr:`metrics`;
        after the backoff of :attr:`policy` the process is started again, its output
        appended to the same log (``service_restarted``). Exits while :attr:`stopping`
        are not restarts; :meth:`stop` makes it return. Raises :class:`CrashLoopError` (the other watchers stopped,
        the processes left as they are for :meth:`stop`) when one process is in a
        crash loop.
        """
        watched = self._watched()
        for target in watched:
            self.metrics.watch(target.name, target.is_up)
        tasks = [asyncio.create_task(self._watch(target, on_event), name=f"watch {target.name}") for target in watched]
        self._watchers.extend(tasks)
        finished = asyncio.Event()
        self._supervising.append(finished)
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                if not (self.stopping and task.cancelled()):  # stop() cancels them: then supervise returns
                    task.result()  # a CrashLoopError, or what else broke a watcher
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._watchers[:] = [t for t in self._watchers if t not in tasks]
            finished.set()
            self._supervising.remove(finished)

    async def _watch(self, target: _Watched, on_event: Callable[[SupervisorEvent], None] | None) -> None:
        history = CrashHistory(policy=self.policy, started_at=self.clock())
        while True:
            code = await target.wait()
            if self.stopping:
                return
            attempt, backoff, crash_loop = history.exited(self.clock())
            facts = {
                "service": target.name,
                "exit_code": code,
                "signal": describe_exit(code).removeprefix("killed by ") if code is not None and code < 0 else None,
                "attempt": attempt,
                "backoff_s": backoff,
                "log_path": str(target.log_path),
            }
            if crash_loop:
                self.metrics.crash_loop.labels(target.name).set(1)
                log.error(
                    "service_crash_loop", exits=len(history.exits), window_s=self.policy.crash_loop_window, **facts
                )
                raise CrashLoopError(
                    service=target.name,
                    code=code,
                    exits=len(history.exits),
                    window=self.policy.crash_loop_window,
                    log_path=target.log_path,
                )
            log.warning("service_exited", **facts)
            event = SupervisorEvent(
                kind="exited",
                service=target.name,
                code=code,
                attempt=attempt,
                backoff=backoff,
                log_path=target.log_path,
            )
            if on_event is not None:
                on_event(event)
            await asyncio.sleep(backoff)
            if self.stopping:
                return
            history.started(self.clock())
            try:
                pid = await target.respawn()
            except (OSError, ServerError) as err:  # counted as one more exit when the loop waits again
                log.warning("service_restart_failed", error=str(err), **facts)
                if on_event is not None:
                    on_event(_replace_kind(event, "restart_failed", error=str(err)))
                continue
            self.metrics.restarts.labels(target.name).inc()
            log.info("service_restarted", pid=pid, **facts)
            if on_event is not None:
                on_event(_replace_kind(event, "restarted", pid=pid))

    async def stop(self, *, grace: float = 10.0) -> dict[str, int | None]:
        """Stop restarting, SIGTERM every service, wait up to ``grace`` seconds, then kill; returns exit codes."""
        self.stopping = True
        for task in [*self._watchers, *self._learning.values()]:
            task.cancel()
        await asyncio.gather(*self._learning.values(), return_exceptions=True)
        self._learning.clear()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        for finished in list(self._supervising):  # a supervise() running in another task returns first
            await finished.wait()
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


def _replace_kind(event: SupervisorEvent, kind: str, **changes: Any) -> SupervisorEvent:
    return dataclasses.replace(event, kind=kind, **changes)


@contextlib.asynccontextmanager
async def serve_supervisor_health(supervisor: Supervisor, *, port: int, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve the supervisor's ``/healthz`` (200 while its loop runs), ``/readyz`` (200 while every supervised
    process runs; the body lists them) and ``/metrics`` (:class:`SupervisorMetrics`) on ``host:port``;
    yields the base URL (port 0: a free one, in the URL). Raises OSError when the port cannot be bound."""
    import aiohttp.web

    async def healthz(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.json_response({"service": "supervisor", "alive": True})

    async def readyz(_: aiohttp.web.Request) -> aiohttp.web.Response:
        up = {target.name: target.is_up() for target in supervisor._watched()}
        ready = all(up.values()) and not supervisor.stopping
        return aiohttp.web.json_response(
            {"ready": ready, "service": "supervisor", "up": up}, status=200 if ready else 503
        )

    async def metrics(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(body=supervisor.metrics.text(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = aiohttp.web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    runner = aiohttp.web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await aiohttp.web.TCPSite(runner, host=host, port=port).start()
        bound = int(runner.addresses[0][1]) if runner.addresses else port  # port 0: the one the system chose
        yield f"http://{host}:{bound}"
    finally:
        await runner.cleanup()


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


def emulator_webhook_options(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of Kueue's webhooks in the emulated API server ``up --emulator`` starts, as ``up``'s
    command line left them on ``args`` (kueue_es.cli ``_run_up``, from ``--config``, ``--feature-gates`` and
    ``--manage-jobs-without-queue-name``), so its webhooks manage what the watcher it starts manages:
    ClusterEmulator's ``elastic_jobs``, ``feature_gates`` (its Workload webhooks), ``managed_kinds``,
    ``manage_jobs_without_queue_name`` and ``managed_jobs_namespace_selector`` (None: Kueue's default), and the
    ``resource-in-use`` finalizer at creation (``resource_in_use_finalizer``: the dispatcher ``up`` starts takes it
    off)."""
    return {
        "elastic_jobs": getattr(args, "elastic_jobs", None),
        "feature_gates": getattr(args, "emulator_feature_gates", {}),
        "managed_kinds": getattr(args, "managed_kinds", None),
        "manage_jobs_without_queue_name": getattr(args, "emulator_manage_jobs_without_queue_name", False),
        "managed_jobs_namespace_selector": getattr(args, "managed_jobs_namespace_selector", None),
        "resource_in_use_finalizer": True,  # Kueue's mclusterqueue/mresourceflavor; the dispatcher takes it off
    }


def partition_args(args: argparse.Namespace) -> list[str]:
    """The deciders' ``--partition-slots`` as ``up`` was given it (none: their default, 16 slots); ``up`` runs
    one replica of each decider, deciding every partition (the CLI refuses a static ``--partitions LIST``
    there: it would leave every other partition undecided). A static list, were one given, goes without
    ``--partition-slots``, which the deciders refuse beside it."""
    partitions = getattr(args, "partitions", None)
    if partitions:
        return ["--partitions", ",".join(partitions)]
    slots = getattr(args, "partition_slots", None)
    return ["--partition-slots", str(slots)] if slots is not None else []


def register_visibility(emulator: Any, port: int) -> None:
    """Point the emulated API server's APIServices for visibility.kueue.x-k8s.io at ``127.0.0.1:port``,
    as deploy/ registers the visibility server in a cluster (replacing an earlier registration)."""
    from kueue_es.sim import aggregator

    emulator.put_objects(aggregator.visibility_objects(host="127.0.0.1", port=port))


def port_changed(console: Any, emulator: Any, name: str, kind: str, port: int, previous: int | None) -> None:
    """``up``'s and the demo's :attr:`Supervisor.on_port`: register the visibility server with the emulated
    API server (None: a real cluster, which deploy/ registers it in) where it serves, so kubectl reaches it,
    and say on ``console`` where a process serves now when a restart moved it (its port was taken meanwhile)."""
    if emulator is not None and name == VISIBILITY and kind == ports.API:
        register_visibility(emulator, port)
    if previous is not None:
        console.print(
            f"{name}'s {kind} port {previous} was taken while it was down: it serves on 127.0.0.1:{port} now",
            style="yellow",
            highlight=False,
        )


def _processes(args: argparse.Namespace) -> tuple[str, ...]:
    """What ``up`` runs: the five services, the compactor with ``--compact``, the visibility server, the
    publisher, the ProvisioningRequest check controller, the MultiKueue edge, the dashboard with ``--dashboard``."""
    dashboard = (DASHBOARD,) if getattr(args, "dashboard", None) is not None else ()
    compactor = (COMPACTOR,) if getattr(args, "compact", None) else ()
    services = cohosted(SERVICES) if getattr(args, "deciders", "separate") == "cohosted" else SERVICES
    return (*services, *compactor, VISIBILITY, PUBLISHER, PROVISIONING, MULTIKUEUE_EDGE, *dashboard)


async def run_up(args: argparse.Namespace) -> int:
    """``kueue-es up``: nats-server (unless ``--nats``) and the five services, supervised, until Ctrl-C or SIGTERM.

    A service (or the nats-server ``up`` started) that exits on its own is restarted
    (:meth:`Supervisor.supervise`, ``--crash-loop-restarts N --crash-loop-window MINUTES``).
    Returns 2 when there is no cluster to run against (no ``--kubeconfig`` nor
    ``--emulator``), it lacks the CRDs, another ``up`` or ``demo`` holds ``--dir`` (:func:`hold_run_dir`:
    nothing is written there then), or a port of the --health-port block is taken; 1 when a
    process is in a crash loop (it names the process, its log and the log's last lines);
    and 130 after Ctrl-C or SIGTERM (every process started is stopped first). The
    supervisor's own JSON log is ``<dir>/logs/up.log``.

    With ``--emulator`` it also runs, in this process, what the demo runs beside the emulated API server:
    the simulated controllers, the simulated kubelet (``args.duration``: seconds a Job or plain Pod runs
    without the ``kueue-es.dev/sim-duration-seconds`` annotation, set by the CLI) and the fake
    cluster-autoscaler.
    """
    from rich.console import Console

    from kueue_es import user_roles
    from kueue_es.events.bus import nats as nats_bus
    from kueue_es.services.kube import client as kube
    from kueue_es.services.runtime import cancel_and_wait, cancel_on_stop_signals, configure_logging
    from kueue_es.sim.autoscaler import FakeAutoscaler
    from kueue_es.sim.controllers import SimulatedControllers
    from kueue_es.sim.emulator import serve_emulator
    from kueue_es.sim.kubelet import SimulatedKubelet

    console = Console(soft_wrap=True, stderr=True)
    cancel_on_stop_signals()
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
    try:
        policy = RestartPolicy(
            crash_loop_restarts=getattr(args, "crash_loop_restarts", RestartPolicy.crash_loop_restarts),
            crash_loop_window=60.0 * getattr(args, "crash_loop_window", RestartPolicy.crash_loop_window / 60.0),
        )
    except ValueError as err:
        console.print(f"error: --crash-loop-restarts/--crash-loop-window: {err}", style="bold red", highlight=False)
        return 2
    if kube_args and (problem := await _check_cluster(args, kube_args)):
        console.print(f"error: {problem}", style="bold red", highlight=False)
        return 2
    if args.leader_elect:
        kube_args.append("--leader-elect")
    try:  # before anything is written there: another up or demo on the directory would lose its passwords
        lock = hold_run_dir(run_dir)
    except (RunDirBusy, OSError) as err:
        console.print(f"error: {err}", style="bold red", highlight=False)
        return 2
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    up_log = (run_dir / "logs" / "up.log").open("a")
    configure_logging(service="kueue-es up", file=up_log, cache=False)
    async with contextlib.AsyncExitStack() as stack:
        stack.callback(os.close, lock)  # the last thing closed: after nats-server and every service stopped
        stack.callback(up_log.close)
        nats_url = args.nats
        auth: LocalAuth | None = None
        server: NatsServer | None = None
        if nats_url is None:
            auth = LocalAuth.create(run_dir / CREDS_DIR)
            server = await stack.enter_async_context(NatsServer(store_dir=run_dir / "nats", auth=auth))
            nats_url = server.url
        elif args.nats_auth_dir is not None:
            auth = LocalAuth(args.nats_auth_dir.resolve())
        if auth is not None and (admin := auth.credentials("admin")).password_file.is_file():
            await nats_bus.ensure_log_stream(nats_url, credentials=admin)  # the services only check it exists
        if args.emulator:
            emulator = await stack.enter_async_context(serve_emulator(**emulator_webhook_options(args)))
            emulator.install_crds(getattr(args, "crd_documents", None) or [])
            emulator.put_objects(user_roles.cluster_roles())  # as Kueue's installation (docs/rbac.md)
            kube.write_kubeconfig(run_dir / "kubeconfig", server=emulator.url)
            kube_args = ["--kube-server", emulator.url] + kube_args
            console.print(f"emulated cluster: kubeconfig {run_dir / 'kubeconfig'}", highlight=False)
            # as in the demo: Deployments, StatefulSets, LeaderWorkerSets make pods there, ungated pods run,
            # and unsuspended Jobs and started plain Pods finish after --duration (or their annotation's time)
            sim_api = await kube.make_api_client(server=emulator.url)
            stack.push_async_callback(sim_api.close)
            simulated = [
                asyncio.create_task(SimulatedControllers(sim_api).run(), name="sim-controllers"),
                asyncio.create_task(
                    SimulatedKubelet(sim_api, default_duration_seconds=args.duration).run(), name="sim-kubelet"
                ),
                asyncio.create_task(FakeAutoscaler(sim_api).run(), name="fake-autoscaler"),
            ]
            stack.push_async_callback(cancel_and_wait, simulated)
        checkpoint_dir = getattr(args, "checkpoints", None)
        supervisor = Supervisor(
            nats_url=nats_url,
            log_dir=run_dir / "logs",
            kube_args=kube_args,
            watcher_args=watcher_config_args(args),
            decider_args=(["--checkpoints", str(checkpoint_dir.resolve())] if checkpoint_dir else [])
            + partition_args(args),
            compact_args=getattr(args, "compact", None) or [],
            health_port=args.health_port,
            # 0: the process binds a free port itself and says which (no port picked here for another to take)
            visibility_port=getattr(args, "visibility_port", None) or 0,
            dashboard_port=getattr(args, "dashboard", None),  # --dashboard without a PORT is 0
            auth=auth,
            policy=policy,
            on_port=functools.partial(port_changed, console, emulator if args.emulator else None),
        )
        if server is not None:
            supervisor.watch_server(server)
        if taken := supervisor.taken_health_ports(_processes(args)):
            listed = ", ".join(f"{port} ({name})" for name, port in taken)
            console.print(
                f"error: --health-port {args.health_port} gives each process a port from {args.health_port} on, "
                f"and these are taken: {listed}. Name a free block below the ephemeral range "
                "(/proc/sys/net/ipv4/ip_local_port_range), or --health-port 0 for ports the processes choose",
                style="bold red",
                highlight=False,
            )
            return 2
        own_health = ""
        if supervisor.supervisor_port is not None:
            try:
                own_health = await stack.enter_async_context(
                    serve_supervisor_health(supervisor, port=supervisor.supervisor_port)
                )
            except OSError as err:
                console.print(
                    f"error: the supervisor's health port {supervisor.supervisor_port} (--health-port + "
                    f"{len(SERVICES)}): {err}",
                    style="bold red",
                    highlight=False,
                )
                return 2
        try:
            await supervisor.start(_processes(args))
            if unknown := await supervisor.wait_ports():
                console.print(f"warning: no port reported yet by {', '.join(unknown)}", style="yellow")
            target = args.kube_server or args.kubeconfig or "the emulator"
            if args.context:
                target += f" (context {args.context})"
            console.print(
                f"kueue-es is up: NATS {nats_url}, Kubernetes {target}, logs in {run_dir / 'logs'}; Ctrl-C stops it",
                highlight=False,
            )
            if auth is not None:
                console.print(reader_help(nats_url, auth), highlight=False)
            console.print(
                f"visibility API (Kueue's visibility.kueue.x-k8s.io, HTTPS, self-signed): {supervisor.visibility_url}"
                + (
                    ", and through the emulated API server (kubectl get --raw /apis/visibility.kueue.x-k8s.io/...)"
                    if args.emulator
                    else ""
                ),
                highlight=False,
            )
            if supervisor.dashboard_url is not None:
                console.print(f"dashboard {supervisor.dashboard_url} (read-only, docs/dashboard.md)", highlight=False)
            reader = auth.credentials("reader") if auth is not None else None
            kubeconfig = run_dir / "kubeconfig" if args.emulator else args.kubeconfig
            with contextlib.suppress(OSError):  # only a convenience for the log readers (kueue_es.current)
                current.record(nats_url=nats_url, reader=reader, kubeconfig=kubeconfig, run_dir=run_dir, command="up")
            if args.health_port is not None:
                names = _processes(args)
                urls = ", ".join(f"{name} {url}" for name in names if (url := supervisor.health_url(name)) is not None)
                console.print(f"health and metrics: {urls}, supervisor {own_health}", highlight=False)
            console.print(
                f"a process that exits is restarted (backoff {policy.backoff_initial:g}s to {policy.backoff_max:g}s); "
                f"up gives up after more than {policy.crash_loop_restarts} exits of one within "
                f"{policy.crash_loop_window / 60:g} min",
                highlight=False,
            )

            def report(event: SupervisorEvent) -> None:
                style = "yellow" if event.kind == "exited" else ("green" if event.kind == "restarted" else "red")
                console.print(event.describe(), style=style, highlight=False)

            try:
                await supervisor.supervise(report)
            except CrashLoopError as err:
                console.print(f"error: {err}", style="bold red", highlight=False)
                if err.cause is not None:
                    console.print(f"the error behind it, in {err.log_path}:", highlight=False)
                    console.print(f"  {err.cause}", highlight=False, markup=False)
                if err.tail:
                    console.print(f"last lines of {err.log_path}:", highlight=False)
                    console.print("\n".join(f"  {line}" for line in err.tail), highlight=False, markup=False)
                else:
                    console.print(f"{err.log_path} is empty", highlight=False)
                return 1
            raise AssertionError("supervise returned without a crash loop")  # it runs until cancelled
        finally:
            current.forget()
            codes = await supervisor.stop()
            console.print(f"stopped: {', '.join(f'{name} {code}' for name, code in codes.items())}", highlight=False)
