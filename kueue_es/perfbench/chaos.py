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
- with several replicas of each service (``replicas``: deploy/'s topology, two of each
  decider and of the dispatcher, on the NATS standby lease), the victim is one process of
  any replica, the lease holder or a standby;
- recovery is measured from the kill, two ways for a service:

  - *restart*: the killed process's replacement answers ``/readyz`` 200 (connected to
    NATS and its fold caught up with the log as it was when it connected,
    :mod:`kueue_es.services.health`): what a single-replica system waits for;
  - *recovery*, what a user of the system sees, the role served again: with one replica,
    the restart; with several, until some replica of the victim's service answers
    ``/readyz`` 200 as the lease holder (``role`` active; a decider: once the ready replicas hold
    every partition slot between them, the killed one's taken over) and has worked since the kill:
    a decider has read the log (``kueue_es_events_folded_total`` went up), the dispatcher
    has written a decision (``kueue_es_dispatch_writes_total`` went up) or has nothing to
    write (its durable consumer has nothing pending or unacked). A killed standby is
    recovered as soon as the holder is seen so;

  after nats-server, when every process answers ``/readyz`` 200 *and* has read a message
  since the kill (its ``kueue_es_events_folded_total`` went up: a green probe alone does
  not prove a consumer that moves again).

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
import json
import random
import re
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nats.errors
import structlog

from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import OutgoingMessage
from kueue_es.events.bus.server import NatsServer, open_stopped_store
from kueue_es.supervisor import Supervisor

if TYPE_CHECKING:  # the checks after a chaos run import them (see _check_url)
    from kueue_es.perfbench import invariants
    from kueue_es.replay import ReplayReport

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
_DISPATCHED = re.compile(rb"^kueue_es_dispatch_writes_total\{[^}]*\} ([0-9.e+]+)$", re.MULTILINE)
SERVING_ROLES = ("active", "sole", "leader")
"""A ``/readyz`` role that does the service's work (not ``standby`` or ``candidate``)."""
Target = tuple[int, str]
"""One process of the system under test: (replica number from 1, service name)."""


def label(target: Target) -> str:
    """How a process is named in the tables: the service, with ``-N`` for replica N > 1."""
    n, name = target
    return name if n == 1 else f"{name}-{n}"


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
    while nats-server is down and publish again what the dead server may have lost.

    Any comeback of the connection, not only a chaos kill, republishes the last ``keep_seconds``
    of facts: what the client had written to a socket that was then reset (nats-server drops a
    client whose reads lag too far behind, as the harness's may on a ten-times cluster) is gone,
    and a core publish is never answered. The stream's duplicate window makes the repeats
    harmless. A publish refused while the client's reconnect buffer is full waits and is sent again.
    """

    def __init__(self, bus: nats_bus.NatsBus, *, keep_seconds: float = REPUBLISH_SECONDS) -> None:
        self.bus = bus
        self.keep_seconds = keep_seconds
        self.recent: collections.deque[tuple[float, OutgoingMessage]] = collections.deque()
        self.open = asyncio.Event()
        self.open.set()
        self.republished = 0
        self.comebacks = 0  # connection comebacks that republished the recent facts
        self._republishing: set[asyncio.Task[None]] = set()
        bus.reconnect_hooks.append(self._comeback)

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
        while True:
            try:
                await self.bus.nc.publish(message.subject, message.data, headers=headers)
                return
            except nats.errors.OutboundBufferLimitError:
                await asyncio.sleep(POLL_SECONDS)  # reconnecting with a full buffer: wait for the comeback

    def _comeback(self) -> None:
        """The connection is back: publish the recent facts again (unless a chaos pause holds them:
        :meth:`resume` does it then)."""
        if not self.open.is_set():
            return
        self.comebacks += 1
        task = asyncio.get_running_loop().create_task(self._republish(list(self.recent)))
        self._republishing.add(task)
        task.add_done_callback(self._republishing.discard)

    async def _republish(self, recent: list[tuple[float, OutgoingMessage]]) -> None:
        for _, message in recent:
            await self._send(message)
            self.republished += 1

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
    recovery_s: float | None = None  # None: not recovered (with replicas: until the role was served again)
    restart_s: float | None = None  # until the killed process's replacement was ready (None: not measured or not)
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
    def restarts(self) -> list[float]:
        """The killed processes' own restart-to-ready times, s, in kill order (service kills)."""
        return [k.restart_s for k in self.kills if k.restart_s is not None]

    @property
    def unrecovered(self) -> list[Kill]:
        """Kills whose victim never recovered (its role not served again, or its process never ready)."""
        return [k for k in self.kills if k.recovery_s is None or (k.victim != NATS and k.restart_s is None)]

    @property
    def ok(self) -> bool:
        """Every invariant held, replay was clean and every victim recovered."""
        return not self.violations and not self.unrecovered


class Chaos:
    """Kills and restarts the system under test during a run (see the module docstring).

    ``services``: the names the supervisor runs (it serves their health endpoints);
    ``clock_zero``: ``time.monotonic()`` when the creation streams started;
    ``on_restart(name, pid)``: told each new process (the memory sampler follows it; ``name`` as
    :func:`label` gives it);
    ``replicas``: the supervisors of replicas 2, 3, ... (each with its own health ports), running
    ``replica_services`` each; their processes are victims too, and a kill's recovery is its role
    served again (see the module); ``bus``: the harness's connection, to ask the dispatcher's
    durable consumer whether anything is left to write.
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
        replicas: Iterable[Supervisor] = (),
        replica_services: tuple[str, ...] = (),
        bus: nats_bus.NatsBus | None = None,
    ) -> None:
        if kill_every <= 0:
            raise ValueError(f"--kill-every must be positive, not {kill_every}")
        self.rng = random.Random(seed)
        self.result = ChaosResult(seed=seed, kill_every_s=kill_every)
        self.kill_every = kill_every
        self.supervisor, self.server, self.publisher = supervisor, server, publisher
        self.services = services
        self.supervisors = [supervisor, *replicas]
        self.targets: list[Target] = [(1, name) for name in services] + [
            (n, name) for n in range(2, len(self.supervisors) + 1) for name in replica_services
        ]
        self.bus = bus
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
                    victim = None if index == self.nats_kill else self.rng.choice(self.targets)
                    await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                    async with self.busy:
                        killed_at = time.monotonic()
                        if victim is None:
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

    def _supervisor(self, target: Target) -> Supervisor:
        return self.supervisors[target[0] - 1]

    async def _kill_service(self, target: Target, killed_at: float) -> None:
        supervisor, name = self._supervisor(target), target[1]
        service = next((s for s in supervisor.running if s.name == name), None)
        if service is None:
            return
        role = await self._role(target)
        kill = Kill(
            at_s=self._since_start(killed_at),
            victim=label(target),
            detail=f"pid {service.process.pid} killed" + (f" ({role})" if role else ""),
        )
        self.result.kills.append(kill)
        worked = await self._worked_by_replica(name)  # each replica's work counter before the kill
        supervisor.running.remove(service)  # not a dead service for the harness's watch
        with contextlib.suppress(ProcessLookupError):
            service.process.kill()
        await service.process.wait()
        log.info("chaos_killed", victim=kill.victim, pid=service.process.pid, at_s=kill.at_s)
        await self._restart(target)
        restart = Kill(at_s=kill.at_s, victim=kill.victim)
        if len(self.supervisors) == 1:  # the role is the process: the old measure
            await self._await_ready(restart, (target,), since=killed_at, folded_since=None)
            kill.recovery_s = restart.recovery_s
        else:
            await asyncio.gather(
                self._await_ready(restart, (target,), since=killed_at, folded_since=None),
                self._await_served(kill, name, since=killed_at, worked=worked),
            )
        kill.restart_s, kill.up_s = restart.recovery_s, restart.up_s
        if restart.detail:
            kill.detail += restart.detail
        log.info("chaos_recovered", victim=kill.victim, recovery_s=kill.recovery_s, restart_s=kill.restart_s)

    async def _restart(self, target: Target) -> None:
        supervisor, name = self._supervisor(target), target[1]
        await supervisor.start((name,))
        new = next(s for s in supervisor.running if s.name == name)
        self.on_restart(label(target), new.process.pid)

    async def _kill_nats(self, killed_at: float) -> None:
        kill = Kill(at_s=self._since_start(killed_at), victim=NATS)
        self.result.kills.append(kill)
        self.publisher.pause()
        await asyncio.to_thread(self.server.kill)
        log.info("chaos_killed", victim=NATS, at_s=kill.at_s)
        folded = {target: await self._folded(target) for target in self.targets}
        await self.server.restart_on_same_port()
        kill.up_s = round(time.monotonic() - killed_at, 3)
        kill.detail = f"pid {self.server.pid}"
        self.on_restart(NATS, self.server.pid or 0)
        await self.publisher.resume()
        await self._await_ready(kill, self.targets, since=killed_at, folded_since=folded)
        self.result.republished = self.publisher.republished
        log.info("chaos_recovered", victim=NATS, recovery_s=kill.recovery_s)

    async def _restart_crashed(self) -> None:
        """Start again a service that exited on its own, listed as a crash with its recovery."""
        while True:
            await asyncio.sleep(0.25)
            if not any(supervisor.dead() for supervisor in self.supervisors):
                continue
            async with self.busy:
                for target, kill in await self._restart_dead():
                    await self._await_ready(kill, (target,), since=kill.found_at, folded_since=None)
                    kill.restart_s = kill.recovery_s

    async def _restart_dead(self) -> list[tuple[Target, Kill]]:
        """Start again every service that exited on its own; each is listed as a crash."""
        crashes = []
        for n, supervisor in enumerate(self.supervisors, start=1):
            for service in supervisor.dead():
                supervisor.running.remove(service)
                found_at = time.monotonic()
                target = (n, service.name)
                kill = Kill(
                    at_s=self._since_start(found_at),
                    victim=label(target),
                    crash=True,
                    detail=f"exited with {service.process.returncode}; see {service.log_path}",
                    found_at=found_at,
                )
                self.result.kills.append(kill)
                log.warning("chaos_crash", victim=kill.victim, code=service.process.returncode)
                await self._restart(target)
                crashes.append((target, kill))
        return crashes

    # -- probes -------------------------------------------------------------------------------------

    async def _await_ready(
        self, kill: Kill, names: Iterable[Target], *, since: float, folded_since: dict[Target, float | None] | None
    ) -> None:
        """Set ``kill.recovery_s``: seconds from ``since`` until every named service is ready (and, with
        ``folded_since``, has read more than it had then); None after RECOVERY_TIMEOUT. ``kill.up_s``: until
        the (last) service's health endpoint first answered at all (its process is up). With several names,
        ``kill.detail`` gets each one's time. A service that exits meanwhile is started again, listed as a
        crash, and awaited too (its recovery: until this wait ends)."""
        waiting = set(names)
        folded_since = dict(folded_since or {})
        crashes: list[Kill] = []
        up: dict[Target, float] = {}
        ready: dict[Target, float] = {}
        while waiting:
            if time.monotonic() - since > RECOVERY_TIMEOUT:
                names_waiting = sorted(label(t) for t in waiting)
                log.warning("chaos_not_recovered", waiting=names_waiting)
                kill.detail += f"; not ready after {RECOVERY_TIMEOUT:g} s: {', '.join(names_waiting)}"
                return
            for target, crash in await self._restart_dead():
                crashes.append(crash)
                waiting.add(target)
                folded_since.pop(target, None)  # a new process: its readiness says it all
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
            crash.recovery_s = crash.restart_s = round(done - crash.found_at, 3)
        kill.recovery_s = round(done - since, 3)
        if up and kill.up_s is None:
            kill.up_s = round(max(up.values()), 3)
        if len(ready) > 1:
            kill.detail += "; ready and reading again after: " + ", ".join(
                f"{label(target)} {at:.2f} s" for target, at in sorted(ready.items())
            )

    async def _await_served(self, kill: Kill, name: str, *, since: float, worked: dict[int, float | None]) -> None:
        """Set ``kill.recovery_s``: seconds from ``since`` until a replica of service ``name`` serves its role
        (see the module: ready, the lease holder, and worked since the kill; ``worked``: each replica's
        work counter then); None after RECOVERY_TIMEOUT. ``kill.detail`` gets which replica."""
        while time.monotonic() - since <= RECOVERY_TIMEOUT:
            bodies = {n: await self._readyz_body((n, name)) for n in range(1, len(self.supervisors) + 1)}
            if not _slots_covered(bodies.values()):
                await asyncio.sleep(POLL_SECONDS)  # a decider's partitions: every slot held by a live replica
                continue
            for n, body in bodies.items():
                target = (n, name)
                if body is None or not body.get("ready") or body.get("role") not in SERVING_ROLES:
                    continue
                now = await self._work_done(target)
                before = worked.get(n)
                moved = now is not None and (before is None or now > before)
                if moved or (name == "dispatcher" and await self._nothing_to_dispatch()):
                    kill.recovery_s = round(time.monotonic() - since, 3)
                    kill.detail += f"; served by {label(target)}"
                    return
            await asyncio.sleep(POLL_SECONDS)
        log.warning("chaos_role_not_served", victim=kill.victim)
        kill.detail += f"; {name} not served after {RECOVERY_TIMEOUT:g} s"

    async def _worked_by_replica(self, name: str) -> dict[int, float | None]:
        return {n: await self._work_done((n, name)) for n in range(1, len(self.supervisors) + 1)}

    async def _work_done(self, target: Target) -> float | None:
        """The process's work counter: the dispatcher's decisions written, a decider's messages read."""
        return await self._counter(target, _DISPATCHED if target[1] == "dispatcher" else _FOLDED)

    async def _nothing_to_dispatch(self) -> bool:
        """Whether the dispatcher's durable consumer has nothing pending or unacked (no work to show)."""
        if self.bus is None:
            return False
        try:
            done = await self.bus.durable_done_through("dispatcher")
            return done is not None and done >= await self.bus.last_seq()
        except Exception:  # noqa: BLE001 -- no answer: no proof of an idle dispatcher
            return False

    async def _role(self, target: Target) -> str:
        body = await self._readyz_body(target)
        return str(body.get("role", "")) if body is not None else ""

    async def _readyz_body(self, target: Target) -> dict[str, Any] | None:
        """The service's ``/readyz`` JSON body (``ready``, ``role``, ...), None when it does not answer."""
        url = self._supervisor(target).health_url(target[1])
        if url is None or self._session is None:
            return None
        try:
            async with self._session.get(f"{url}/readyz") as response:
                body = json.loads(await response.read())
                return body if isinstance(body, dict) else None
        except (OSError, TimeoutError, Exception):  # noqa: BLE001 -- any failure to answer
            return None

    async def _readyz(self, target: Target) -> int | None:
        """The status of the service's ``/readyz`` (200 ready, 503 not), None when it does not answer."""
        url = self._supervisor(target).health_url(target[1])
        if url is None or self._session is None:
            return None
        try:
            async with self._session.get(f"{url}/readyz") as response:
                return int(response.status)
        except (OSError, TimeoutError, Exception):  # noqa: BLE001 -- any failure to answer
            return None

    async def _folded(self, target: Target) -> float | None:
        """The service's ``kueue_es_events_folded_total``; None when it does not answer."""
        return await self._counter(target, _FOLDED)

    async def _counter(self, target: Target, pattern: re.Pattern[bytes]) -> float | None:
        """The value of the service's metric that ``pattern`` finds; None when it does not answer."""
        url = self._supervisor(target).health_url(target[1])
        if url is None or self._session is None:
            return None
        try:
            async with self._session.get(f"{url}/metrics") as response:
                body = await response.read()
        except (OSError, TimeoutError, Exception):  # noqa: BLE001 -- not answering: no figure
            return None
        found = pattern.search(body)
        return float(found.group(1)) if found else None

    async def stop(self, task: asyncio.Task[None]) -> None:
        """Stop ``task`` (running :meth:`run`) between kills: a victim being restarted is awaited first."""
        async with self.busy:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


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
    # imported here, once per chaos run: every bench run imports this module (FactPublisher), and the
    # replay's deciders cost the harness a tenth of a CPU second before the run (issue 18)
    from kueue_es import deciders
    from kueue_es.events.bus.direct import DirectReader
    from kueue_es.perfbench import invariants
    from kueue_es.replay import LogChecker, direct_records

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
    from kueue_es.perfbench import invariants  # as in _check_url

    return checker.finish() + invariants.replay_violations(report)


def _slots_covered(bodies: Iterable[dict[str, Any] | None]) -> bool:
    """Whether the ready replicas of a decider that shares partition slots (``/readyz`` ``slots`` of ``of``,
    services/standby.py SlotLeases) hold every slot between them; True for a service without slots."""
    ready = [b for b in bodies if b is not None and b.get("ready")]
    count = max((int(b.get("of", 0)) for b in ready), default=0)
    if not count:
        return True
    return {int(k) for b in ready for k in b.get("slots", [])} >= set(range(count))
