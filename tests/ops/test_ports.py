"""Ports the demo and ``up`` give their processes (kueue_es/services/ports.py, kueue_es/supervisor.py).

On a shared machine, a ``demo --keep`` had its visibility server fail to bind the port the supervisor
had picked up front ("127.0.0.1:51345 already in use"): another process took it between the pick and
the bind, the server restarted in a loop and every kubectl call failed. Now the supervisor passes port
0, each process reports the port it bound, and a restart whose port was taken meanwhile gets another,
which the supervisor learns (and the demo registers with the emulated API server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from rich.console import Console

from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.server import LocalAuth, NatsServer
from kueue_es.services import ports
from kueue_es.sim.emulator import serve_emulator
from kueue_es.supervisor import (
    DASHBOARD,
    PROVISIONING,
    VISIBILITY,
    RestartPolicy,
    Supervisor,
    port_changed,
)

# a stand-in for a service: binds the ports it is given (0: any), as aiohttp does, reports them, waits;
# a port it cannot bind ends it with an OSError, as it ends a service
FAKE_SERVICE = """
import socket, sys, time
from kueue_es.services import ports
args, held = sys.argv[1:], []
for flag, kind in (("--health-port", ports.HEALTH), ("--api-port", ports.API), ("--port", ports.HTTP)):
    if flag in args:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", int(args[args.index(flag) + 1])))
        sock.listen()
        held.append(sock)
        ports.report(kind, sock.getsockname()[1])
time.sleep(3600)
"""


# the same, but its first run exits before it binds anything, as a service may on a loaded machine
FLAKY_SERVICE = (
    """
import os, pathlib, sys
started = pathlib.Path(os.environ["KUEUE_ES_PORTS_DIR"]) / "started"
if not started.exists():
    started.write_text("once")
    sys.exit(1)
"""
    + FAKE_SERVICE
)


@contextlib.contextmanager
def taken(port: int) -> Any:
    """Another process's listening socket on 127.0.0.1:``port``, as the one that took the demo's port."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
        yield sock


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextlib.asynccontextmanager
async def supervising(supervisor: Supervisor) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(supervisor.supervise())
    try:
        yield task
    finally:
        await supervisor.stop(grace=5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def until(check: Callable[[], Awaitable[Any]], *, timeout: float, what: str) -> Any:
    """Poll ``check`` until it returns something truthy; fails naming ``what`` after ``timeout`` s."""
    try:
        async with asyncio.timeout(timeout):
            while not (result := await check()):
                await asyncio.sleep(0.1)
            return result
    except TimeoutError:
        raise AssertionError(f"not within {timeout:g}s: {what}") from None


async def test_a_restart_whose_port_was_taken_gets_another_and_says_so(tmp_path: Path) -> None:
    learned: list[tuple[str, str, int, int | None]] = []
    supervisor = Supervisor(
        nats_url="nats://127.0.0.1:1",
        log_dir=tmp_path / "logs",
        program=(sys.executable, "-c", FAKE_SERVICE),
        visibility_port=0,
        dashboard_port=0,
        health_port=0,
        # the backoff leaves the test time to take the port between the exit and the restart
        policy=RestartPolicy(backoff_initial=0.5, backoff_max=0.5),
        on_port=lambda *port: learned.append(port),
    )
    await supervisor.start((VISIBILITY, DASHBOARD, PROVISIONING))
    async with supervising(supervisor):
        assert await supervisor.wait_ports(timeout=60) == []
        api = supervisor.port(VISIBILITY, ports.API)
        health = supervisor.port(VISIBILITY, ports.HEALTH)
        assert api and health and listening(api) and listening(health)
        assert supervisor.visibility_url == f"https://127.0.0.1:{api}"
        assert supervisor.dashboard_url == f"http://127.0.0.1:{supervisor.port(DASHBOARD, ports.HTTP)}/"
        assert supervisor.health_url(PROVISIONING) == f"http://127.0.0.1:{supervisor.port(PROVISIONING, 'health')}"
        assert sorted((name, kind, previous) for name, kind, _, previous in learned) == [
            (DASHBOARD, ports.HTTP, None),
            (PROVISIONING, ports.HEALTH, None),
            (VISIBILITY, ports.API, None),
            (VISIBILITY, ports.HEALTH, None),
        ]

        [visibility] = [s for s in supervisor.running if s.name == VISIBILITY]
        first = visibility.process
        first.send_signal(signal.SIGKILL)
        await first.wait()
        with taken(api):  # another process takes the API port while the server is down
            moved = await until(
                lambda: asyncio.sleep(0, [p for p in learned if p[3] is not None]),
                timeout=60,
                what=f"the visibility server restarted on a port other than {api}",
            )
            assert visibility.process is not first
            [(name, kind, port, previous)] = moved
            assert (name, kind, previous) == (VISIBILITY, ports.API, api) and port != api
            assert supervisor.visibility_url == f"https://127.0.0.1:{port}" and listening(port)
            # its health port was still free: it keeps it, and the URLs printed for it stay right
            assert supervisor.port(VISIBILITY, ports.HEALTH) == health
            assert await until(lambda: asyncio.sleep(0, listening(health)), timeout=60, what="health port again")
            assert supervisor.dead() == []


async def test_wait_ports_waits_for_a_process_restarted_before_it_reported(tmp_path: Path) -> None:
    """``demo --keep`` on a loaded machine printed "dashboard None" and "(no health port)": a process that exited
    while starting ended the wait, though supervise restarted it and it reported its ports later. Supervised,
    the wait goes on for the restarted process; unsupervised, nothing restarts it and the wait ends."""
    supervisor = Supervisor(
        nats_url="nats://127.0.0.1:1",
        log_dir=tmp_path / "supervised",
        program=(sys.executable, "-c", FLAKY_SERVICE),
        dashboard_port=0,
        health_port=0,
        policy=RestartPolicy(backoff_initial=0.5, backoff_max=0.5),
    )
    await supervisor.start((DASHBOARD, PROVISIONING))
    async with supervising(supervisor):
        assert await supervisor.wait_ports(timeout=60) == []
        assert supervisor.dashboard_url == f"http://127.0.0.1:{supervisor.port(DASHBOARD, ports.HTTP)}/"
        assert supervisor.health_url(PROVISIONING) is not None

    alone = Supervisor(
        nats_url="nats://127.0.0.1:1",
        log_dir=tmp_path / "alone",
        program=(sys.executable, "-c", FLAKY_SERVICE),
        dashboard_port=0,
    )
    await alone.start((DASHBOARD,))
    try:
        async with asyncio.timeout(30):  # not the whole minute: it exited, and nothing restarts it
            assert await alone.wait_ports(timeout=60) == [f"{DASHBOARD} {ports.HTTP}"]
    finally:
        await alone.stop(grace=5)


async def test_the_demo_prints_a_port_reported_after_its_list(tmp_path: Path) -> None:
    """``demo --keep``'s list of URLs and ports, printed before a process reported its port, says so (it
    printed "dashboard None" and "(no health port)"), and the port is printed when the process reports it
    (the URL was only in logs/dashboard.log)."""
    from kueue_es.demo import NOT_REPORTED, LatePorts, dashboard_line, health_lines

    out = tmp_path / "console.txt"
    console = Console(file=out.open("w"), soft_wrap=True)
    late = LatePorts(console=console, emulator=None)
    supervisor = Supervisor(
        nats_url="nats://127.0.0.1:1",
        log_dir=tmp_path / "logs",
        program=(sys.executable, "-c", FLAKY_SERVICE),
        dashboard_port=0,
        health_port=0,
        policy=RestartPolicy(backoff_initial=1.0, backoff_max=1.0),
        on_port=late,
    )
    late.supervisor = supervisor
    await supervisor.start((DASHBOARD, PROVISIONING))
    async with supervising(supervisor):
        # listed before either reported: the first runs exit without binding (a loaded machine's slow start)
        listed = [dashboard_line(supervisor), *health_lines(supervisor, (DASHBOARD, PROVISIONING))]
        assert all(NOT_REPORTED in line and "None" not in line for line in listed), listed
        late.listed = True
        assert await supervisor.wait_ports(timeout=60) == []
        console.file.flush()
        printed = out.read_text()
    url = supervisor.dashboard_url
    assert url is not None and f"dashboard              {url}   (read-only web UI" in printed
    assert re.search(r"dashboard\s+(http://127\.0\.0\.1:\d+/)", printed)  # what tests/browser read the URL by
    assert f"health {PROVISIONING}" in printed and "(reported late)" in printed


def test_ports_are_read_only_when_whole_and_refused_with_the_file_named(tmp_path: Path) -> None:
    assert ports.report(ports.API, 8082, environ={}) is None  # not started by a supervisor: nothing written
    path = ports.report(ports.API, 8082, environ={ports.PORTS_DIR_ENV: str(tmp_path)})
    assert path == tmp_path / "api" and ports.read(tmp_path, ports.API) == 8082
    assert ports.read(tmp_path, ports.HEALTH) is None
    (tmp_path / "health").write_text("eighty\n")
    with pytest.raises(ValueError, match=f"{tmp_path / 'health'}: 'eighty' is not a port number"):
        ports.read(tmp_path, ports.HEALTH)
    with pytest.raises(ValueError, match="kind 'metrics'"):
        ports.report("metrics", 1, environ={})
    with pytest.raises(ValueError, match="api port 0 is not a bound TCP port"):
        ports.report(ports.API, 0, environ={})


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_the_demos_visibility_server_is_reached_through_the_api_server_after_its_port_was_taken(
    tmp_path: Path,
) -> None:
    """The real processes the demo runs, as the demo configures them: every port chosen by its process;
    the visibility server's port taken while it is down; kubectl's path (the emulated API server's
    aggregation) reaches it where it serves after its restart."""
    auth = LocalAuth.create(tmp_path / "creds")
    console = Console(file=(tmp_path / "console.txt").open("w"), soft_wrap=True)
    async with NatsServer(store_dir=tmp_path / "nats", auth=auth) as server, serve_emulator() as emulator:
        await nats_bus.ensure_log_stream(server.url, credentials=auth.credentials("admin"))
        supervisor = Supervisor(
            nats_url=server.url,
            log_dir=tmp_path / "logs",
            kube_args=["--kube-server", emulator.url],
            auth=auth,
            visibility_port=0,
            dashboard_port=0,
            health_port=0,
            policy=RestartPolicy(backoff_initial=1.0, backoff_max=1.0),
            on_port=lambda *port: port_changed(console, emulator, *port),
        )
        await supervisor.start((VISIBILITY, DASHBOARD, "admitter"))
        async with supervising(supervisor), aiohttp.ClientSession() as session:

            async def answers(url: str) -> int:
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(url) as answer:
                        return answer.status
                return 0

            async def through_the_api_server() -> dict[str, Any] | None:
                url = f"{emulator.url}/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/none/pendingworkloads"
                async with session.get(url) as answer:
                    body = json.loads(await answer.read())
                return body if answer.status == 404 else None  # the server's own answer: it was reached

            assert await supervisor.wait_ports(timeout=120) == []
            for name in (VISIBILITY, DASHBOARD, "admitter"):
                url = supervisor.health_url(name)
                assert url is not None
                await until(lambda url=url: answers(f"{url}/healthz"), timeout=120, what=f"{name} /healthz")
            body = await until(through_the_api_server, timeout=120, what="the visibility API through kubectl's path")
            assert body["details"]["name"] == "none"

            api = supervisor.port(VISIBILITY, ports.API)
            [visibility] = [s for s in supervisor.running if s.name == VISIBILITY]
            visibility.process.send_signal(signal.SIGKILL)
            await visibility.process.wait()
            with taken(api):
                await until(
                    lambda: asyncio.sleep(0, supervisor.port(VISIBILITY, ports.API) not in (0, api)),
                    timeout=120,
                    what="the visibility server on another port",
                )
                body = await until(through_the_api_server, timeout=120, what="the visibility API after its restart")
                assert body["details"]["name"] == "none"
    console.file.close()
    assert f"visibility's api port {api} was taken while it was down" in (tmp_path / "console.txt").read_text()


def test_ports_chosen_up_front_come_from_below_the_ephemeral_range(tmp_path: Path) -> None:
    """A port that must be known before its server starts (nats-server's cluster routes, a port kept across
    restarts, an explicit --health-port block) is chosen below the kernel's ephemeral range: inside it, any
    outgoing connection's source port can take it after the check (CI 34)."""
    from kueue_es.events.bus import server

    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("20000\t60999\n")
    chosen = server.free_ports(3, range_file=range_file)
    assert chosen == list(range(chosen[0], chosen[0] + 3))  # a block: up's --health-port P gives P, P+1, ...
    assert all(server.LOWEST_CHOSEN_PORT <= port < 20000 for port in chosen)
    assert all(port < server.ephemeral_port_floor() for port in server.free_ports(4))
    assert server.ephemeral_port_floor(tmp_path / "missing") == 32768


def test_supervisors_beside_each_other_have_ports_directories_of_their_own(tmp_path: Path) -> None:
    """The bench runs one supervisor per replica, each with its own log directory under the first's: with
    health ports of 0 each process reports its port in a directory no other supervisor's process shares."""
    logs = tmp_path / "run" / "logs"
    supervisors = [Supervisor(nats_url="nats://127.0.0.1:4222", log_dir=logs, health_port=0)]
    supervisors += [
        Supervisor(nats_url="nats://127.0.0.1:4222", log_dir=logs / f"replica-{n}", health_port=0) for n in (2, 3)
    ]
    assert len({supervisor.ports_dir("admitter") for supervisor in supervisors}) == 3


def test_a_taken_port_of_the_health_port_block_is_found_before_anything_starts(tmp_path: Path) -> None:
    """``up --health-port P`` gives process after process P, P+1, ...: a port of that block already bound is
    named (with its process) before anything starts, instead of leaving that process to crash-loop."""
    from kueue_es.events.bus import server

    base = server.free_ports(12)[0]
    supervisor = Supervisor(nats_url="nats://127.0.0.1:4222", log_dir=tmp_path / "logs", health_port=base)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", base + 2))  # the preemptor's
        holder.listen()
        assert supervisor.taken_health_ports(("watcher", "admitter", "preemptor")) == [("preemptor", base + 2)]
    assert supervisor.taken_health_ports(("watcher", "admitter", "preemptor")) == []
    assert Supervisor(nats_url="x", log_dir=tmp_path, health_port=0).taken_health_ports(("preemptor",)) == []
