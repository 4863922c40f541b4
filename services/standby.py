"""Standby deciders: of the replicas of a decider, only the lease holder decides and commits.

Two hot replicas of a decider are safe (the head check refuses a batch built on a
stale view, whole) but waste work: both decide every cycle on the same basis and
one commit of the two is refused (31-41 % of commit attempts with deploy's two
replicas, issue 15). So the replicas take turns through a lease on the NATS
key-value bucket ``KQ_LEASES`` (:mod:`kueue_es.events.bus.leases`; key
``<user>.<partition>``, e.g. ``admitter.p0``), much as client-go's leader election
takes turns on a coordination.k8s.io Lease (``services/leader.py``, which the
watcher uses, and the dispatcher with ``--leader-elect``; the dispatcher's warm standby,
``--standby-lease``, takes this lease too, key ``dispatcher.<partition>``:
``services/dispatcher/service.py`` ``consume_while_leading``):

- a candidate takes a key that is missing or released (empty holder) at once, by
  compare-and-set on its revision;
- the holder renews it every ``retry_period`` (a compare-and-set on the revision it
  wrote last); a standby times the key's revisions on its own clock, and takes the
  key over (compare-and-set on the revision it saw) once the revision has not moved
  for ``lease_duration``. It follows the key's subject, so it sees each write (a
  renewal, a release) as it happens;
- the holder counts as active only while its last successful renewal was sent less
  than ``renew_deadline`` ago (``renew_deadline < lease_duration``): a holder that
  cannot renew in time stops committing before any standby may take over, as
  client-go's leader does; it renews again (and is active again) if nobody took the
  key meanwhile;
- a clean stop releases the key (an empty holder, compare-and-set), and the standby
  takes over at once.

Nothing depends on the lease for safety: that stays with the head check of every
batch. A standby keeps folding the log (``DeciderLoop`` with this lease as its
``gate``), so a takeover needs no re-fold: the new holder decides on its next cycle.

Timings default to 1.5 s / 1.0 s / 0.5 s (lease duration, renew deadline, retry
period): a killed holder is replaced 1.0-1.5 s after its last renewal; the cost is
one key write per holder every 0.5 s, and a read per standby at each write.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from prometheus_client import Counter, Gauge

from kueue_es.events import subjects
from kueue_es.events.bus import leases
from kueue_es.events.bus.base import Bus, BusError, ConflictError
from kueue_es.services.health import Health

log = structlog.get_logger(__name__)


@dataclass(frozen=True, kw_only=True)
class StandbySettings:
    """The lease's timings, in seconds: see the module. Raises ValueError unless
    ``lease_duration > renew_deadline > retry_period > 0``."""

    lease_duration: float = 1.5
    renew_deadline: float = 1.0
    retry_period: float = 0.5

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(
                "standby lease timings must satisfy lease duration > renew deadline > retry period > 0, got"
                f" {self.lease_duration:g}s, {self.renew_deadline:g}s, {self.retry_period:g}s"
            )


def default_identity() -> str:
    """A holder identity unique to this process: host (pod) name, pid and a random suffix."""
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def _rfc3339(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat(timespec="milliseconds")


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class DeciderLease:
    """One replica's side of a decider's lease: acquire, renew, take over, step down, release.

    ``store``: the lease bucket; ``key``: this decider's key (``leases.key_for``);
    ``clock``: monotonic seconds (injectable: every timing decision reads it, never the
    wall clock); ``wall``: ms since the epoch, only for the record's RFC 3339 times.
    ``on_change(active)`` is told when this replica starts or stops being the active one,
    as :meth:`attempt` finds it.

    :meth:`attempt` is one round (what :meth:`run` repeats); :meth:`active` is the gate
    the decider loop asks before deciding and before committing.
    """

    def __init__(
        self,
        store: leases.LeaseStore,
        *,
        key: str,
        identity: str | None = None,
        settings: StandbySettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], int] = _wall_ms,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.store, self.key = store, key
        self.identity = identity or default_identity()
        self.settings = settings or StandbySettings()
        self.clock, self.wall, self.on_change = clock, wall, on_change
        self.revision: int | None = None  # the revision of our last write while we hold the key
        self.renewed_at = 0.0  # clock() when that write was sent
        self.record = leases.LeaseRecord()  # what we wrote last
        self.observed: leases.LeaseEntry | None = None  # the key as a candidate last read it
        self.observed_at = 0.0  # clock() when that revision was first seen
        self.was_active = False
        self.attempted_at = 0.0  # clock() when the last round began
        self.transitions = 0  # times this replica became active or stopped being it

    # -- the gate --------------------------------------------------------------------------------

    def active(self) -> bool:
        """True while this replica holds the key and renewed it less than ``renew_deadline`` ago."""
        return self.revision is not None and self.clock() - self.renewed_at < self.settings.renew_deadline

    @property
    def holder(self) -> str:
        """Who holds the key as far as this replica knows (its own identity while it holds it)."""
        if self.revision is not None:
            return self.identity
        return self.observed.record.holder if self.observed is not None else ""

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Always ready (a standby is healthy: it folds and waits); the facts say which it is."""
        return True, {"role": "active" if self.active() else "standby", "lease": self.key, "holder": self.holder}

    # -- one round -------------------------------------------------------------------------------

    async def attempt(self) -> bool:
        """Renew the key if we hold it, else acquire it if it is free or expired; returns :meth:`active`.

        Raises BusError when the bucket cannot be reached (the holder stays active until its
        renew deadline passes).
        """
        self.attempted_at = self.clock()
        try:
            if self.revision is not None:
                await self._renew()
            if self.revision is None:
                await self._acquire()
        finally:
            self._note()
        return self.active()

    async def _renew(self) -> None:
        assert self.revision is not None
        sent = self.clock()
        record = leases.LeaseRecord(
            holder=self.identity,
            acquired=self.record.acquired,
            renewed=_rfc3339(self.wall()),
            lease_duration_ms=round(self.settings.lease_duration * 1000),
            transitions=self.record.transitions,
        )
        try:
            revision = await self.store.update(self.key, record, last=self.revision)
        except ConflictError:
            log.warning("lease_lost", lease=self.key, identity=self.identity, revision=self.revision)
            self.revision, self.observed = None, None
            return
        self.revision, self.renewed_at, self.record = revision, sent, record

    async def _acquire(self) -> None:
        now = self.clock()
        entry = await self.store.get(self.key)
        if entry is None:
            await self._take(None, now=now, why="free")
            return
        holder = entry.record.holder
        if self.observed is None or self.observed.revision != entry.revision:
            self.observed, self.observed_at = entry, now
        if not holder:
            await self._take(entry, now=now, why="released")
        elif holder == self.identity:
            await self._take(entry, now=now, why="ours")  # our own write whose answer we missed
        elif now - self.observed_at >= self.settings.lease_duration:
            await self._take(entry, now=now, why="expired")

    async def _take(self, entry: leases.LeaseEntry | None, *, now: float, why: str) -> None:
        """Write ourselves as holder over ``entry`` (None: the key has no value); a lost race is no error."""
        previous = entry.record if entry is not None else leases.LeaseRecord()
        stamp = _rfc3339(self.wall())
        changes_hands = previous.holder != self.identity
        record = leases.LeaseRecord(
            holder=self.identity,
            acquired=stamp if changes_hands else previous.acquired,
            renewed=stamp,
            lease_duration_ms=round(self.settings.lease_duration * 1000),
            transitions=previous.transitions + (1 if changes_hands and previous.holder else 0),
        )
        try:
            if entry is None:
                revision = await self.store.create(self.key, record)
            else:
                revision = await self.store.update(self.key, record, last=entry.revision)
        except ConflictError:
            self.observed = None  # someone else wrote first: read it again next round
            return
        self.revision, self.renewed_at, self.record, self.observed = revision, now, record, None
        log.info(
            "lease_acquired",
            lease=self.key,
            identity=self.identity,
            why=why,
            previous_holder=previous.holder,
            revision=revision,
        )

    def _note(self) -> None:
        active = self.active()
        if active == self.was_active:
            return
        self.was_active = active
        self.transitions += 1
        if not active and self.revision is not None:
            log.warning(
                "lease_stepped_down",
                lease=self.key,
                identity=self.identity,
                renewed_s_ago=round(self.clock() - self.renewed_at, 3),
            )
        if self.on_change is not None:
            self.on_change(active)

    def next_delay(self) -> float:
        """Seconds until the next round: a retry period after the last round began for the holder
        (renewed or not); for a candidate, a retry period, or less when the observed revision expires
        sooner."""
        now = self.clock()
        period = self.settings.retry_period
        if self.revision is not None:
            return max(0.0, self.attempted_at + period - now)
        if self.observed is not None and self.observed.record.holder:
            return max(0.0, min(period, self.observed_at + self.settings.lease_duration - now))
        return period

    # -- running ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Run rounds forever (cancel to stop; then call :meth:`release`). A standby also wakes on
        every write to the key, so a release or a renewal is seen as it happens."""
        wake = asyncio.Event()
        unsubscribe = None
        try:
            unsubscribe = await self.store.subscribe(self.key, wake.set)
        except BusError as err:
            log.warning("lease_not_followed", lease=self.key, error=str(err))
        failing = False
        try:
            while True:
                wake.clear()
                try:
                    await self.attempt()
                    if failing:
                        log.info("lease_reachable", lease=self.key)
                    failing = False
                except BusError as err:
                    if not failing:
                        log.warning("lease_unreachable", lease=self.key, error=str(err))
                    failing = True
                delay = self.next_delay()
                if self.revision is not None:
                    await asyncio.sleep(delay)  # our own renewals wake us too: the holder keeps its pace
                    continue
                try:
                    async with asyncio.timeout(delay):
                        await wake.wait()
                except TimeoutError:
                    pass
        finally:
            if unsubscribe is not None:
                await unsubscribe()

    async def release(self) -> None:
        """Clear the holder if it is still us (compare-and-set), so a standby takes over at once;
        errors are only logged."""
        if self.revision is None:
            return
        revision, self.revision = self.revision, None
        record = leases.LeaseRecord(
            renewed=_rfc3339(self.wall()),
            lease_duration_ms=self.record.lease_duration_ms,
            transitions=self.record.transitions,
        )
        try:
            await self.store.update(self.key, record, last=revision)
            log.info("lease_released", lease=self.key, identity=self.identity)
        except BusError as err:
            log.warning("lease_release_failed", lease=self.key, error=str(err))
        self._note()


async def open_lease(
    bus: Bus,
    *,
    role: str,
    settings: StandbySettings,
    partition: str = subjects.DEFAULT_PARTITION,
    user: str | None = None,
) -> DeciderLease | None:
    """The lease of decider ``role`` (a DecisionRecord role: admit, preempt, place) in ``partition`` on
    ``bus``'s NATS connection; None on a bus that is not NATS (in memory: one process, nothing to share).
    ``user``: the key's first token when it is not the role's head token (the dispatcher's
    ``dispatcher``: ``services/dispatcher/service.py``, ``--standby-lease``).

    Raises NotFoundError when the bucket is missing and this connection may not create it, BusError.
    """
    from kueue_es.events.bus.nats import NatsBus  # nats-py only where a NATS bus is used

    inner = getattr(bus, "inner", bus)  # an ObservedBus wraps the bus
    if not isinstance(inner, NatsBus):
        return None
    store = await leases.open_store(
        inner.nc, create=inner.creates_streams, replicas=inner.replicas, timeout=settings.retry_period
    )
    key = leases.key_for(user or subjects.HEAD_TOKENS[role], partition)
    return DeciderLease(store, key=key, settings=settings)


def observe(lease: DeciderLease, health: Health, *, role: str) -> None:
    """Report ``lease`` through ``health``: readiness facts (role active or standby, always ready),
    ``kueue_es_leader`` from the lease, and the metrics ``kueue_es_lease_holder{service,role}`` (1 while
    active) and ``kueue_es_lease_transitions_total{service,role}`` (times this replica became active or
    stopped being it)."""
    health.add_check(lease.readiness)
    health.working = lease.active
    labels = (health.service, role)
    gauge = Gauge(
        "kueue_es_lease_holder",
        "1 while this replica holds its decider's lease and may commit.",
        ["service", "role"],
        registry=health.registry,
    )
    gauge.labels(*labels).set_function(lambda: float(lease.active()))
    transitions = Counter(
        "kueue_es_lease_transitions",
        "Times this replica became the active one of its decider, or stopped being it.",
        ["service", "role"],
        registry=health.registry,
    ).labels(*labels)
    previous = lease.on_change

    def changed(active: bool) -> None:
        transitions.inc()
        if previous is not None:
            previous(active)

    lease.on_change = changed
