"""``kueue-es bench --config FILE --chaos SEED``: kill services and nats-server during a run, then check the log.

The harness (:mod:`.driver`) runs as usual; :class:`Chaos` runs beside it, and only
there is randomness (``random.Random(SEED)``: the same seed gives the same victims
and intervals; when each kill lands still depends on the machine):

- about every ``kill_every`` seconds (uniform jitter of +-30 %), and never sooner than half
  that interval after the previous victim recovered (a slow recovery must not turn into a
  service that is never up), it SIGKILLs a victim: one of the services, drawn at
  random, or nats-server, exactly once, at one of the first three kills. A killed
  service is started again at once (``Supervisor.start``, same arguments and log
  file); nats-server again on the same port and JetStream store
  (:class:`RestartableNatsServer`);
- a service that exits on its own is started again too and listed as a crash;
- recovery is measured from the kill: a service has recovered when its new process's
  ``/readyz`` answers 200 (connected to NATS and its fold caught up with the log as it
  was when it connected, :mod:`kueue_es.services.health`); after nats-server, when
  every service answers ``/readyz`` 200 *and* has read a message since the kill
  (its ``kueue_es_events_folded_total`` went up: a green probe alone does not prove a
  consumer that moves again).

The harness's own facts survive the nats-server kill (:class:`FactPublisher`): it
stops publishing before the kill, and after the restart publishes again, in order, what
it published in the last :data:`REPUBLISH_SECONDS` before the kill (what the dead
server may have taken off the socket without storing); the stream's ``Nats-Msg-Id``
dedup drops what it did store.

After the run, with everything stopped, :func:`check_store` reads the store once
(Direct Get, as ``kueue-es replay --store``) into the replay check and the
:class:`~.invariants.InvariantChecker`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import re
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from kueue_es import deciders
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import OutgoingMessage
from kueue_es.events.bus.direct import DirectReader
from kueue_es.events.bus.server import NatsServer, open_stopped_store
from kueue_es.perfbench import invariants
from kueue_es.replay import LogChecker, ReplayReport, direct_records
from kueue_es.supervisor import SERVICES as ALL_SERVICES
from kueue_es.supervisor import Supervisor, free_port_block

log = structlog.get_logger(__name__)

NATS = "nats-server"
JITTER = 0.3
"""Kill intervals are ``kill_every`` x uniform(1 - JITTER, 1 + JITTER)."""
NATS_AMONG_FIRST = 3
"""nats-server is the victim of one of the first this many kills."""
RECOVERY_TIMEOUT = 120.0
"""A victim not recovered after this many seconds is reported as such (a failed run)."""
POLL_SECONDS = 0.05
REPUBLISH_SECONDS = 10.0
"""Facts published this long before a nats-server kill are published again after it."""
_FOLDED = re.compile(rb"^kueue_es_events_folded_total\{[^}]*\} ([0-9.e+]+)$", re.MULTILINE)


# --- nats-server, killed and restarted -----------------------------------------------------------


class RestartableNatsServer(NatsServer):
    """A :class:`NatsServer` the chaos bench can SIGKILL (:meth:`kill`) and start again on the same client
    port and store (:meth:`restart_on_same_port`), so every client's reconnect finds it where it was."""

    _same_port: int | None = None

    def _config(self) -> dict[str, object]:
        config = super()._config()
        if self._same_port is not None:
            config["port"] = self._same_port
        return config

    def kill(self) -> None:
        """SIGKILL the process and reap it (no shutdown: JetStream recovers its store at the next start)."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    async def restart_on_same_port(self, *, timeout: float = 30.0) -> None:
        """Start a new process on the port the first one had (its URL stays valid) and the same store;
        returns once it serves JetStream. Raises ServerError when it does not in ``timeout`` s."""
        self._same_port = int(self.url.rsplit(":", 1)[1])
        self._process = None
        self._monitor = None
        await self.start_async(timeout=timeout)


# --- the harness's publishing --------------------------------------------------------------------


class FactPublisher:
    """Publishes the harness's facts on ``bus`` without waiting for JetStream's ack (core NATS publish
    with a ``Nats-Msg-Id``: the stream stores and dedups them all the same), and can hold them back
    while nats-server is down and publish again what the dead server may have lost."""

    def __init__(self, bus: nats_bus.NatsBus, *, keep_seconds: float = REPUBLISH_SECONDS) -> None:
        self.bus = bus
        self.keep_seconds = keep_seconds
        self.recent: collections.deque[tuple[float, OutgoingMessage]] = collections.deque()
        self.open = asyncio.Event()
        self.open.set()
        self.republished = 0

    async def publish(self, message: OutgoingMessage) -> None:
        """Publish ``message`` (waiting while publishing is paused)."""
        if not self.open.is_set():
            await self.open.wait()
        now = time.monotonic()
        recent = self.recent
        recent.append((now, message))
        while recent and recent[0][0] < now - self.keep_seconds:
            recent.popleft()
        await self._send(message)

    async def _send(self, message: OutgoingMessage) -> None:
        headers = {**message.headers, "Nats-Msg-Id": message.msg_id}
        await self.bus.nc.publish(message.subject, message.data, headers=headers)

    def pause(self) -> None:
        """Hold every publish back from now on (before nats-server is killed)."""
        self.open.clear()

    async def resume(self, *, timeout: float = 30.0) -> None:
        """Once connected again: publish again, in order, what was published in the last
        ``keep_seconds`` before the pause, then let the held publishes through."""
        deadline = time.monotonic() + timeout
        while not self.bus.nc.is_connected and time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
        for _, message in list(self.recent):
            await self._send(message)
            self.republished += 1
        with contextlib.suppress(Exception):
            await self.bus.nc.flush(timeout=5)
        self.open.set()


# --- kills and recovery --------------------------------------------------------------------------


@dataclass(kw_only=True)
class Kill:
    """One kill (or crash) and its recovery: ``at_s`` in seconds since the creation streams started, the
    others in seconds since the kill."""

    at_s: float
    victim: str
    crash: bool = False  # the service exited on its own (the harness only restarted it)
    recovery_s: float | None = None  # None: not recovered
    up_s: float | None = None  # until the new process answered (a service's health endpoint; nats-server ready)
    detail: str = ""
    found_at: float = 0.0  # time.monotonic() of the kill, or when the crash was seen


@dataclass(kw_only=True)
class ChaosResult:
    """Everything the chaos run measured and checked."""

    seed: int
    kill_every_s: float
    kills: list[Kill] = field(default_factory=list)
    violations: list[invariants.Violation] = field(default_factory=list)
    replay: ReplayReport | None = None
    checked_messages: int = 0
    checked_batches: int = 0
    check_seconds: float = 0.0
    republished: int = 0

    @property
    def recoveries(self) -> list[float]:
        """The measured recovery times, s, in kill order."""
        return [k.recovery_s for k in self.kills if k.recovery_s is not None]

    @property
    def p50_s(self) -> float | None:
        """The median recovery, s (None without any)."""
        return statistics.median(self.recoveries) if self.recoveries else None

    @property
    def max_s(self) -> float | None:
        """The longest recovery, s (None without any)."""
        return max(self.recoveries) if self.recoveries else None

    @property
    def unrecovered(self) -> list[Kill]:
        """Kills whose victim never recovered."""
        return [k for k in self.kills if k.recovery_s is None]

    @property
    def ok(self) -> bool:
        """Every invariant held, replay was clean and every victim recovered."""
        return not self.violations and not self.unrecovered


class Chaos:
    """Kills and restarts the system under test during a run (see the module docstring).

    ``services``: the names the supervisor runs (it serves their health endpoints);
    ``clock_zero``: ``time.monotonic()`` when the creation streams started;
    ``on_restart(name, pid)``: told each new process (the memory sampler follows it).
    """

    def __init__(
        self,
        *,
        seed: int,
        kill_every: float,
        supervisor: Supervisor,
        server: RestartableNatsServer,
        publisher: FactPublisher,
        services: tuple[str, ...],
        clock_zero: float,
        on_restart: Callable[[str, int], None] = lambda name, pid: None,
    ) -> None:
        if kill_every <= 0:
            raise ValueError(f"--kill-every must be positive, not {kill_every}")
        self.rng = random.Random(seed)
        self.result = ChaosResult(seed=seed, kill_every_s=kill_every)
        self.kill_every = kill_every
        self.supervisor, self.server, self.publisher = supervisor, server, publisher
        self.services = services
        self.clock_zero = clock_zero
        self.on_restart = on_restart
        self.nats_kill = self.rng.randrange(NATS_AMONG_FIRST)
        self.busy = asyncio.Lock()  # held while a victim is killed, restarted and awaited
        self._session: Any = None

    # -- the loop -----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Kill, restart and await recovery until cancelled."""
        import aiohttp

        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1.0)) as session:
            self._session = session
            watch = asyncio.create_task(self._restart_crashed())
            try:
                index = 0
                next_at = time.monotonic() + self._interval()
                while True:
                    victim = NATS if index == self.nats_kill else self.rng.choice(self.services)
                    await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                    async with self.busy:
                        killed_at = time.monotonic()
                        if victim == NATS:
                            await self._kill_nats(killed_at)
                        else:
                            await self._kill_service(victim, killed_at)
                    index += 1
                    # the system runs at least half an interval between a recovery and the next kill
                    interval = self._interval()
                    next_at = max(killed_at + interval, time.monotonic() + interval / 2)
            finally:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch

    @property
    def recovering(self) -> bool:
        """True while a victim is being killed, restarted or awaited (the run's stall timer waits)."""
        return self.busy.locked()

    def _interval(self) -> float:
        return self.kill_every * self.rng.uniform(1 - JITTER, 1 + JITTER)

    def _since_start(self, at: float) -> float:
        return round(at - self.clock_zero, 3)

    async def _kill_service(self, name: str, killed_at: float) -> None:
        service = next((s for s in self.supervisor.running if s.name == name), None)
        if service is None:
            return
        kill = Kill(at_s=self._since_start(killed_at), victim=name, detail=f"pid {service.process.pid} killed")
        self.result.kills.append(kill)
        self.supervisor.running.remove(service)  # not a dead service for the harness's watch
        with contextlib.suppress(ProcessLookupError):
            service.process.kill()
        await service.process.wait()
        log.info("chaos_killed", victim=name, pid=service.process.pid, at_s=kill.at_s)
        await self._restart(name)
        await self._await_ready(kill, (name,), since=killed_at, folded_since=None)
        log.info("chaos_recovered", victim=name, recovery_s=kill.recovery_s)

    async def _restart(self, name: str) -> None:
        await self.supervisor.start((name,))
        new = next(s for s in self.supervisor.running if s.name == name)
        self.on_restart(name, new.process.pid)

    async def _kill_nats(self, killed_at: float) -> None:
        kill = Kill(at_s=self._since_start(killed_at), victim=NATS)
        self.result.kills.append(kill)
        self.publisher.pause()
        await asyncio.to_thread(self.server.kill)
        log.info("chaos_killed", victim=NATS, at_s=kill.at_s)
        folded = {name: await self._folded(name) for name in self.services}
        await self.server.restart_on_same_port()
        kill.up_s = round(time.monotonic() - killed_at, 3)
        kill.detail = f"pid {self.server.pid}"
        self.on_restart(NATS, self.server.pid or 0)
        await self.publisher.resume()
        await self._await_ready(kill, self.services, since=killed_at, folded_since=folded)
        self.result.republished = self.publisher.republished
        log.info("chaos_recovered", victim=NATS, recovery_s=kill.recovery_s)

    async def _restart_crashed(self) -> None:
        """Start again a service that exited on its own, listed as a crash with its recovery."""
        while True:
            await asyncio.sleep(0.25)
            if not self.supervisor.dead():
                continue
            async with self.busy:
                for kill in await self._restart_dead():
                    await self._await_ready(kill, (kill.victim,), since=kill.found_at, folded_since=None)

    async def _restart_dead(self) -> list[Kill]:
        """Start again every service that exited on its own; each is listed as a crash."""
        crashes = []
        for service in self.supervisor.dead():
            self.supervisor.running.remove(service)
            found_at = time.monotonic()
            kill = Kill(
                at_s=self._since_start(found_at),
                victim=service.name,
                crash=True,
                detail=f"exited with {service.process.returncode}; see {service.log_path}",
                found_at=found_at,
            )
            self.result.kills.append(kill)
            log.warning("chaos_crash", victim=service.name, code=service.process.returncode)
            await self._restart(service.name)
            crashes.append(kill)
        return crashes

    # -- probes -------------------------------------------------------------------------------------

    async def _await_ready(
        self, kill: Kill, names: Iterable[str], *, since: float, folded_since: dict[str, float | None] | None
    ) -> None:
        """Set ``kill.recovery_s``: seconds from ``since`` until every named service is ready (and, with
        ``folded_since``, has read more than it had then); None after RECOVERY_TIMEOUT. ``kill.up_s``: until
        the (last) service's health endpoint first answered at all (its process is up). With several names,
        ``kill.detail`` gets each one's time. A service that exits meanwhile is started again, listed as a
        crash, and awaited too (its recovery: until this wait ends)."""
        waiting = set(names)
        folded_since = dict(folded_since or {})
        crashes: list[Kill] = []
        up: dict[str, float] = {}
        ready: dict[str, float] = {}
        while waiting:
            if time.monotonic() - since > RECOVERY_TIMEOUT:
                log.warning("chaos_not_recovered", waiting=sorted(waiting))
                kill.detail += f"; not ready after {RECOVERY_TIMEOUT:g} s: {', '.join(sorted(waiting))}"
                return
            for crash in await self._restart_dead():
                crashes.append(crash)
                waiting.add(crash.victim)
                folded_since.pop(crash.victim, None)  # a new process: its readiness says it all
            for name in list(waiting):
                status = await self._readyz(name)
                if status is None:
                    continue
                up.setdefault(name, time.monotonic() - since)
                if status != 200:
                    continue
                if name in folded_since:
                    before, now = folded_since[name], await self._folded(name)
                    if now is None or (before is not None and now <= before):
                        continue
                waiting.discard(name)
                ready[name] = time.monotonic() - since
            if waiting:
                await asyncio.sleep(POLL_SECONDS)
        done = time.monotonic()
        for crash in crashes:
            crash.recovery_s = round(done - crash.found_at, 3)
        kill.recovery_s = round(done - since, 3)
        if up and kill.up_s is None:
            kill.up_s = round(max(up.values()), 3)
        if len(ready) > 1:
            kill.detail += "; ready and reading again after: " + ", ".join(
                f"{name} {at:.2f} s" for name, at in sorted(ready.items())
            )

    async def _readyz(self, name: str) -> int | None:
        """The status of the service's ``/readyz`` (200 ready, 503 not), None when it does not answer."""
        url = self.supervisor.health_url(name)
        if url is None or self._session is None:
            return None
        try:
            async with self._session.get(f"{url}/readyz") as response:
                return int(response.status)
        except (OSError, TimeoutError, Exception):  # noqa: BLE001 -- any failure to answer
            return None

    async def _folded(self, name: str) -> float | None:
        """The service's ``kueue_es_events_folded_total``; None when it does not answer."""
        url = self.supervisor.health_url(name)
        if url is None or self._session is None:
            return None
        try:
            async with self._session.get(f"{url}/metrics") as response:
                body = await response.read()
        except (OSError, TimeoutError, Exception):  # noqa: BLE001 -- not answering: no figure
            return None
        found = _FOLDED.search(body)
        return float(found.group(1)) if found else None

    async def stop(self, task: asyncio.Task[None]) -> None:
        """Stop ``task`` (running :meth:`run`) between kills: a victim being restarted is awaited first."""
        async with self.busy:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def health_base_port() -> int:
    """A base health port for the supervisor: every name of ``kueue_es.supervisor.SERVICES`` gets one, then
    ``up``'s own and the compactor's (``kueue_es.supervisor._port_offset``)."""
    return free_port_block(len(ALL_SERVICES) + 3)


# --- after the run -------------------------------------------------------------------------------


async def check_store(store_dir: Path, *, expected: Iterable[str]) -> tuple[ReplayReport, invariants.InvariantChecker]:
    """Read a stopped run's store once into the replay check and the invariant checker.

    The bench's nats-server has no users, so Direct Get always answers (DirectUnavailable
    otherwise). Returns the replay report and the checker, :meth:`~.InvariantChecker.finish`
    not yet called.
    """
    async with open_stopped_store(store_dir) as server:
        return await asyncio.to_thread(_check_url, server.url, list(expected))


def _check_url(url: str, expected: list[str]) -> tuple[ReplayReport, invariants.InvariantChecker]:
    records, last = direct_records(url)
    replay = LogChecker(records, deciders.BY_ROLE)
    checker = invariants.InvariantChecker(expected=expected)
    with DirectReader(url) as reader:
        for message in reader.messages(last=last):
            replay.feed(message)
            checker.feed(message)
    report = replay.finish(last_seq=last)
    checker.last_seq = max(checker.last_seq, last)
    return report, checker


def violations_of(report: ReplayReport, checker: invariants.InvariantChecker) -> list[invariants.Violation]:
    """Every violation: the invariants', then the replay's."""
    return checker.finish() + invariants.replay_violations(report)
