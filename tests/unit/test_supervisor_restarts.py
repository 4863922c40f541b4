"""Issue 15 point 1: the supervisor restarts what exits on its own, with backoff, and gives up on a crash loop.

The backoff and crash-loop arithmetic is tested on given times (:class:`CrashHistory`);
the supervision loop on real processes: a tiny stand-in for ``kueue-es service NAME``
(the supervisor's ``program``) that writes a line to its log and then sleeps or exits,
with backoffs of a few tens of milliseconds. The nats-server restart runs the real
server on its store.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from kueue_es.events.bus.server import NatsServer
from kueue_es.supervisor import (
    CrashHistory,
    CrashLoopError,
    RestartPolicy,
    Supervisor,
    SupervisorEvent,
    describe_exit,
)

# argv: ["-c", "service", NAME, "--nats", URL, ...]; the behaviour is in the environment
FAKE_SERVICE = """
import os, sys, time
print(f"fake {sys.argv[2]} started pid {os.getpid()}", flush=True)
code = os.environ.get("FAKE_EXIT")
if os.environ.get("FAKE_REFUSED"):  # as a service whose password nats-server no longer takes
    print("[warning  ] nats connection error  error=nats: Authorization Violation", flush=True)
    for _ in range(12):
        print("nats.errors.NoServersError: nats: no servers available", flush=True)
if code is not None:
    print(f"fake {sys.argv[2]} giving up with {code}", flush=True)
    sys.exit(int(code))
time.sleep(3600)
"""

FAST = RestartPolicy(backoff_initial=0.05, backoff_max=0.2, reset_after=60.0, crash_loop_restarts=5)


def fake_supervisor(tmp_path: Path, policy: RestartPolicy = FAST, **kwargs: object) -> Supervisor:
    return Supervisor(
        nats_url="nats://127.0.0.1:9",
        log_dir=tmp_path / "logs",
        program=(sys.executable, "-c", FAKE_SERVICE),
        policy=policy,
        **kwargs,  # type: ignore[arg-type]
    )


def metric(supervisor: Supervisor, name: str, service: str) -> float:
    for line in supervisor.metrics.text().decode().splitlines():
        if line.startswith(f'{name}{{service="{service}"}} '):
            return float(line.split()[-1])
    raise AssertionError(f"no {name} for {service}:\n{supervisor.metrics.text().decode()}")


async def until(check: object, *, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():  # type: ignore[operator]
            await asyncio.sleep(0.02)


# -- the arithmetic ---------------------------------------------------------------------------------


def test_backoff_doubles_from_one_second_to_thirty() -> None:
    policy = RestartPolicy()
    assert [policy.backoff(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 30, 30, 30]
    assert policy.backoff(10_000) == 30


def test_backoff_grows_while_the_process_keeps_exiting_and_resets_once_it_stayed_up() -> None:
    history = CrashHistory(policy=RestartPolicy(crash_loop_restarts=100), started_at=0.0)
    delays = []
    now = 0.0
    for _ in range(4):  # each run lasts 5 s: far below the 60 s that resets the backoff
        now += 5.0
        attempt, delay, loop = history.exited(now)
        delays.append((attempt, delay))
        now += delay
        history.started(now)
    assert delays == [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0)]
    now += 60.0  # this run lasted 60 s
    assert history.exited(now) == (1, 1.0, False)
    history.started(now + 1.0)
    assert history.exited(now + 2.0)[:2] == (2, 2.0)


def test_a_crash_loop_is_more_than_n_exits_within_the_window() -> None:
    policy = RestartPolicy(crash_loop_restarts=5, crash_loop_window=120.0)
    history = CrashHistory(policy=policy, started_at=0.0)
    verdicts = [history.exited(t)[2] for t in (10.0, 20.0, 30.0, 40.0, 50.0)]
    assert verdicts == [False] * 5
    assert history.exited(60.0)[2] is True  # the sixth within two minutes

    spread = CrashHistory(policy=policy, started_at=0.0)
    assert not any(spread.exited(t)[2] for t in range(0, 30 * 60, 30))  # one every 30 s: four per window


def test_a_policy_that_cannot_work_is_refused() -> None:
    with pytest.raises(ValueError, match="needs at least one exit"):
        RestartPolicy(crash_loop_restarts=0)
    with pytest.raises(ValueError, match="is not a range"):
        RestartPolicy(backoff_initial=5.0, backoff_max=1.0)


def test_exits_are_described_by_code_or_signal() -> None:
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(0) == "exited with code 0"


# -- the loop, on processes ---------------------------------------------------------------------------


async def test_a_killed_service_is_restarted_into_the_same_log_and_counted(tmp_path: Path) -> None:
    supervisor = fake_supervisor(tmp_path)
    events: list[SupervisorEvent] = []
    await supervisor.start(("admitter", "preemptor"))
    [admitter, preemptor] = supervisor.running
    first_pid, preemptor_pid = admitter.process.pid, preemptor.process.pid
    task = asyncio.create_task(supervisor.supervise(events.append))
    try:
        await until(lambda: "started" in admitter.log_path.read_text())
        os.kill(first_pid, signal.SIGKILL)
        await until(lambda: any(e.kind == "restarted" for e in events))
        assert [(e.kind, e.service, e.code, e.attempt, e.backoff) for e in events] == [
            ("exited", "admitter", -signal.SIGKILL, 1, 0.05),
            ("restarted", "admitter", -signal.SIGKILL, 1, 0.05),
        ]
        assert "admitter killed by SIGKILL; restarting it in 0.05s (attempt 1)" in events[0].describe()
        assert admitter.process.pid == events[1].pid != first_pid and admitter.process.returncode is None
        assert preemptor.process.pid == preemptor_pid  # the others carry on
        await until(lambda: admitter.log_path.read_text().count("started") == 2)
        assert f"fake admitter started pid {first_pid}" in admitter.log_path.read_text()  # appended, not truncated
        assert metric(supervisor, "kueue_es_service_restarts_total", "admitter") == 1.0
        assert metric(supervisor, "kueue_es_service_restarts_total", "preemptor") == 0.0
        assert metric(supervisor, "kueue_es_service_up", "admitter") == 1.0
    finally:
        codes = await supervisor.stop()
    assert task.done() and task.exception() is None  # stop() ends supervise()
    assert codes == {"admitter": -signal.SIGTERM, "preemptor": -signal.SIGTERM}
    assert [e.kind for e in events] == ["exited", "restarted"]  # the SIGTERMs of stop are no exits to restart


async def test_a_service_that_keeps_exiting_backs_off_then_is_a_crash_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_EXIT", "3")
    policy = RestartPolicy(backoff_initial=0.01, backoff_max=0.04, crash_loop_restarts=4, crash_loop_window=60.0)
    supervisor = fake_supervisor(tmp_path, policy)
    events: list[SupervisorEvent] = []
    await supervisor.start(("tas-placer",))
    try:
        with pytest.raises(CrashLoopError) as raised:
            await asyncio.wait_for(supervisor.supervise(events.append), timeout=30)
    finally:
        await supervisor.stop()
    exits = [(e.code, e.attempt, e.backoff) for e in events if e.kind == "exited"]
    assert exits == [(3, 1, 0.01), (3, 2, 0.02), (3, 3, 0.04), (3, 4, 0.04)]
    err = raised.value
    assert err.service == "tas-placer" and err.code == 3 and err.exits == 5
    assert err.log_path == tmp_path / "logs" / "tas-placer.log"
    assert "tas-placer is in a crash loop: 5 exits within 60s, the last exited with code 3" in str(err)
    assert str(err.log_path) in str(err)
    assert err.tail[-1] == "fake tas-placer giving up with 3"
    assert metric(supervisor, "kueue_es_service_restarts_total", "tas-placer") == 4.0
    assert metric(supervisor, "kueue_es_service_crash_loop", "tas-placer") == 1.0


async def test_a_crash_loop_names_the_error_its_last_lines_hide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ops trial: the crash-loop summary showed only ``NoServersError`` lines, hiding the ``Authorization
    Violation`` before them (another ``up`` had rewritten the passwords)."""
    monkeypatch.setenv("FAKE_EXIT", "1")
    monkeypatch.setenv("FAKE_REFUSED", "1")
    supervisor = fake_supervisor(tmp_path, RestartPolicy(backoff_initial=0.01, backoff_max=0.02, crash_loop_restarts=1))
    await supervisor.start(("admitter",))
    try:
        with pytest.raises(CrashLoopError) as raised:
            await asyncio.wait_for(supervisor.supervise(lambda _event: None), timeout=30)
    finally:
        await supervisor.stop()
    err = raised.value
    assert not any("Authorization Violation" in line for line in err.tail), err.tail
    assert err.cause is not None and "Authorization Violation" in err.cause


async def test_a_crash_loop_whose_tail_says_why_names_nothing_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_EXIT", "3")
    supervisor = fake_supervisor(tmp_path, RestartPolicy(backoff_initial=0.01, backoff_max=0.02, crash_loop_restarts=1))
    await supervisor.start(("admitter",))
    try:
        with pytest.raises(CrashLoopError) as raised:
            await asyncio.wait_for(supervisor.supervise(lambda _event: None), timeout=30)
    finally:
        await supervisor.stop()
    assert raised.value.cause is None


async def test_the_backoff_resets_on_the_supervisors_clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run lasts 100 s on the injected clock: above ``reset_after``, so every restart is attempt 1,
    and the exits are never within one window of each other (no crash loop)."""
    monkeypatch.setenv("FAKE_EXIT", "1")
    ticks = iter(range(0, 10**9, 100))
    policy = RestartPolicy(backoff_initial=0.01, backoff_max=1.0, reset_after=60.0, crash_loop_window=60.0)
    supervisor = fake_supervisor(tmp_path, policy, clock=lambda: float(next(ticks)))
    events: list[SupervisorEvent] = []
    await supervisor.start(("watcher",))
    task = asyncio.create_task(supervisor.supervise(events.append))
    try:
        await until(lambda: sum(e.kind == "restarted" for e in events) >= 8)
        assert not task.done()
    finally:
        await supervisor.stop()
    assert {(e.attempt, e.backoff) for e in events} == {(1, 0.01)}


async def test_a_killed_nats_server_is_restarted_on_its_store_and_port(tmp_path: Path) -> None:
    from kueue_es.events.bus import base
    from kueue_es.events.bus import nats as nats_bus

    async with NatsServer(store_dir=tmp_path / "nats") as server:
        url = server.url
        await nats_bus.ensure_log_stream(url)
        bus = await nats_bus.connect(url)
        try:
            await bus.publish(base.OutgoingMessage(subject="kq.in.wl.ns.a", data=b"{}", msg_id="m1", headers={}))
        finally:
            await bus.close()
        supervisor = fake_supervisor(tmp_path)
        supervisor.watch_server(server)
        events: list[SupervisorEvent] = []
        task = asyncio.create_task(supervisor.supervise(events.append))
        try:
            first = server.pid
            assert first is not None
            await asyncio.sleep(0.3)
            os.kill(first, signal.SIGKILL)
            await until(lambda: any(e.kind == "restarted" for e in events))
            assert events[0].service == "nats-server" and events[0].code == -signal.SIGKILL
            assert events[0].log_path == tmp_path / "nats" / "nats-server.log"
            assert server.running and server.pid != first and server.url == url
            assert metric(supervisor, "kueue_es_service_restarts_total", "nats-server") == 1.0
            bus = await nats_bus.connect(url)
            try:
                assert await bus.last_seq() == 1  # the same store: the message published before the kill
            finally:
                await bus.close()
        finally:
            await supervisor.stop()
            assert task.done() and task.exception() is None
