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
import contextlib
import datetime
import os
import socket
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import msgspec
import structlog
from prometheus_client import Counter, Gauge

from kueue_es.events import subjects
from kueue_es.events.bus import leases
from kueue_es.events.bus.base import Bus, BusError, ConflictError
from kueue_es.services.health import Health

log = structlog.get_logger(__name__)
_T = TypeVar("_T")


async def attempt_noting_reachability(attempt: Callable[[], Awaitable[object]], *, key: str, failing: bool) -> bool:
    """Run one lease ``attempt()``; log ``lease_unreachable`` when it starts failing on the bus and
    ``lease_reachable`` when it works again (once each, not every retry). Returns whether it failed."""
    try:
        await attempt()
    except BusError as err:
        if not failing:
            log.warning("lease_unreachable", lease=key, error=str(err))
        return True
    if failing:
        log.info("lease_reachable", lease=key)
    return False


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


REREAD_FIRST_S = 0.01
"""Seconds before a standby reads its key again when the last write passed on is not what it read."""
REREADS = 8
"""Rereads at most per write passed on (0.01 s doubling: about 2.5 s in all)."""


class DeciderLease:
    """One replica's side of a decider's lease: acquire, renew, take over, step down, release.

    ``store``: the lease bucket; ``key``: this decider's key (``leases.key_for``);
    ``clock``: monotonic seconds (injectable: every timing decision reads it, never the
    wall clock); ``wall``: ms since the epoch, only for the record's RFC 3339 times.
    ``on_change(active)`` is told when this replica starts or stops being the active one,
    as :meth:`attempt` finds it. ``seen_since(entry)``: since when (``clock()``) this replica has
    known the revision ``entry`` read, when it saw that very write passed on before reading it
    (:class:`SlotLeases` follows every key); None when it cannot tell (then: since the read).

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
        seen_since: Callable[[leases.LeaseEntry], float | None] | None = None,
    ) -> None:
        self.store, self.key = store, key
        self.seen_since = seen_since
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
        self.writes = 0  # writes to the key this replica sent: the records' serial

    def _serial(self) -> int:
        self.writes += 1
        return self.writes

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
            serial=self._serial(),
        )
        try:
            revision = await self.store.update(self.key, record, last=self.revision)
        except ConflictError:
            # our previous write may have landed after its answer timed out: still ours, at its revision
            entry = await self.store.get(self.key)
            if entry is not None and entry.record.holder == self.identity:
                self.revision = entry.revision
                record = msgspec.structs.replace(record, serial=self._serial())  # never two writes alike
                revision = await self.store.update(self.key, record, last=entry.revision)
                self.revision, self.renewed_at, self.record = revision, sent, record
                return
            log.warning("lease_lost", lease=self.key, identity=self.identity, revision=self.revision)
            self.revision, self.observed = None, None
            return
        self.revision, self.renewed_at, self.record = revision, sent, record

    async def _acquire(self) -> None:
        entry = await self.store.get(self.key)
        now = self.clock()  # after the read: a revision written during it is timed from its answer
        self.note_read(entry, now=now)
        why = self.takeable(entry, now=now)
        if why:
            await self._take(entry, now=now, why=why)

    def note_read(self, entry: leases.LeaseEntry | None, *, now: float) -> None:
        """Note the key as read at ``now`` (``clock()``): a revision not seen before starts its expiry timer,
        from when it was first known (``seen_since``, never later than ``now``), else from ``now``."""
        if entry is None or (self.observed is not None and self.observed.revision == entry.revision):
            return
        since = self.seen_since(entry) if self.seen_since is not None else None
        self.observed, self.observed_at = entry, now if since is None else min(since, now)

    def takeable(self, entry: leases.LeaseEntry | None, *, now: float) -> str:
        """Why this candidate may take the key as read (``entry``, noted by :meth:`note_read`) at ``now``:
        ``free`` (no value), ``released`` (empty holder), ``ours`` (our own write whose answer we missed),
        ``expired`` (another holder's revision has not moved for ``lease_duration`` on our clock);
        ``""`` when it may not."""
        if entry is None:
            return "free"
        holder = entry.record.holder
        if not holder:
            return "released"
        if holder == self.identity:
            return "ours"
        observed = self.observed is not None and self.observed.revision == entry.revision
        if observed and now - self.observed_at >= self.settings.lease_duration:
            return "expired"
        return ""

    async def take(self, entry: leases.LeaseEntry | None, *, why: str) -> bool:
        """Take the key over ``entry`` as this replica read it (``why``: what :meth:`takeable` said of it);
        returns :meth:`active`. A lost race is no error (someone wrote first: read again next round).
        Raises BusError."""
        self.attempted_at = now = self.clock()
        try:
            await self._take(entry, now=now, why=why)
        finally:
            self._note()
        return self.active()

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
            serial=self._serial(),
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
        every write to the key, so a release or a renewal is seen as it happens.

        The server passes a write on to subscribers before the bucket may serve it to a read (the
        stream stores it after), so a standby woken by a write whose record its read did not show
        reads again soon (:data:`REREAD_FIRST_S`, doubling, :data:`REREADS` times at most: a refused
        compare-and-set is passed on too, and is never read), not a retry period later."""
        wake = asyncio.Event()
        passed: list[leases.LeaseRecord] = []  # the last write passed on, if any

        def on_write(record: leases.LeaseRecord) -> None:
            passed[:] = [record]
            wake.set()

        unsubscribe = None
        try:
            unsubscribe = await self.store.subscribe(self.key, on_write)
        except BusError as err:
            log.warning("lease_not_followed", lease=self.key, error=str(err))
        failing = False
        rereads = 0
        try:
            while True:
                if wake.is_set():
                    rereads = 0  # a new write: its own rereads
                wake.clear()
                failing = await attempt_noting_reachability(self.attempt, key=self.key, failing=failing)
                delay = self.next_delay()
                if self.revision is not None:
                    await asyncio.sleep(delay)  # our own renewals wake us too: the holder keeps its pace
                    continue
                unread = bool(passed) and (self.observed is None or self.observed.record != passed[0])
                if unread and rereads < REREADS:
                    delay = min(delay, REREAD_FIRST_S * 2**rereads)
                    rereads += 1
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
            serial=self._serial(),
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


def observe(lease: DeciderLease | SlotLeases, health: Health, *, role: str) -> None:
    """Report ``lease`` through ``health``: readiness facts (role active or standby, always ready),
    ``kueue_es_leader`` from the lease, and the metrics ``kueue_es_lease_holder{service,role}`` (1 while
    active) and ``kueue_es_lease_transitions_total{service,role}`` (times this replica became active or
    stopped being it)."""
    health.add_check(lease.readiness)
    health.working = lease.active
    gauge, counter = _lease_families(health)
    labels = (health.service, role)
    gauge.labels(*labels).set_function(lambda: float(lease.active()))
    _count_transitions(lease, counter.labels(*labels))


def observe_roles(leases_by_role: dict[str, DeciderLease | SlotLeases], health: Health) -> None:
    """:func:`observe` for the leases of several roles co-hosted in one process (``kueue-es service
    deciders``): the same metrics, one ``role`` label each; ``kueue_es_leader`` is 1 while any role is
    active; the readiness facts are each role's, under ``leases`` by role."""
    gauge, counter = _lease_families(health)
    for role, lease in leases_by_role.items():
        gauge.labels(health.service, role).set_function(_active_of(lease))
        _count_transitions(lease, counter.labels(health.service, role))
    health.working = lambda: any(lease.active() for lease in leases_by_role.values())

    def readiness() -> tuple[bool, dict[str, Any]]:
        facts = {role: lease.readiness()[1] for role, lease in leases_by_role.items()}
        return True, {"leases": facts}

    health.add_check(readiness)


def _active_of(lease: DeciderLease | SlotLeases) -> Callable[[], float]:
    return lambda: float(lease.active())


def _lease_families(health: Health) -> tuple[Gauge, Counter]:
    """``kueue_es_lease_holder`` and ``kueue_es_lease_transitions_total`` in ``health``'s registry (once a process)."""
    gauge = Gauge(
        "kueue_es_lease_holder",
        "1 while this replica holds its decider's lease and may commit.",
        ["service", "role"],
        registry=health.registry,
    )
    counter = Counter(
        "kueue_es_lease_transitions",
        "Times this replica became the active one of its decider, or stopped being it.",
        ["service", "role"],
        registry=health.registry,
    )
    return gauge, counter


def _count_transitions(lease: DeciderLease | SlotLeases, transitions: Any) -> None:
    previous = lease.on_change

    def changed(active: bool) -> None:
        transitions.inc()
        if previous is not None:
            previous(active)

    lease.on_change = changed


DEFAULT_SLOTS = 16
"""Lease slots a decider's partitions are spread over by default (``--partition-slots``)."""


def slot_of(partition: str, slots: int) -> int:
    """The lease slot of ``partition`` among ``slots``: ``crc32(partition) % slots`` (stable across
    processes and versions, unlike ``hash``)."""
    return zlib.crc32(partition.encode()) % slots


EXPIRY_MARGIN = 0.01
"""Seconds past a key's expiry that :meth:`SlotLeases.next_delay` wakes a round (a timer may fire a
little early; at the expiry itself the key would still count)."""


class Seen(NamedTuple):
    """A write to one of a decider user's lease keys as this replica saw it: its record and ``clock()``
    when the subscription passed it on (or when :meth:`SlotLeases.seed` read the key)."""

    record: leases.LeaseRecord
    at: float

    @property
    def holder(self) -> str:
        """Who the write names as holder (``""``: released)."""
        return self.record.holder


class SlotLeases:
    """Dynamic assignment of a decider's partitions among its replicas (issue 18).

    Partitions are spread over ``slots`` lease keys (``<user>.s<k>``, :func:`slot_of`); a replica
    decides the partitions of the slots it holds. Each slot key is a :class:`DeciderLease` (the
    same compare-and-set, renewals, renew deadline and expiry as a standby lease). To share the slots
    fairly, each replica also holds one member key (``<user>.m<j>``, ``j < slots``: a bounded set, so
    restarts never fill the bucket) and follows every write to its user's keys (``$KV.KQ_LEASES.<user>.>``):
    the members written less than ``lease_duration`` ago are the live replicas, and of ``n`` of them,
    the one ranked ``r`` (by identity) keeps ``slots // n`` slots, plus one when ``r < slots % n``.
    A replica above its share releases slots (the highest first), one below it takes free, released
    or expired ones; so N replicas end with about ``slots / N`` each, a new one gets its share within a
    few retry periods, and a dead one's slots are taken over once their keys have not moved for
    ``lease_duration`` (as a standby takes a lease). Fairness rests on what the subscription
    passes on (a hint); ownership rests on the keys; safety on neither: two replicas deciding one
    partition are refused by the head check, as two hot replicas are.

    A dead replica's slots are taken within about ``lease_duration`` of its last renewal: a key's
    expiry is timed from when this replica saw the write it reads passed on (:meth:`since`; the
    write was sent before, so the holder's renewal is never later than that), not from a later
    read; a round also runs as soon as another replica's member or slot key comes due
    (:meth:`next_delay`), not up to a retry period later; and the slots of a round are read, then
    taken, together (:meth:`take_some`), not one read and write after another.
    """

    def __init__(
        self,
        store: leases.LeaseStore,
        *,
        user: str,
        slots: int = DEFAULT_SLOTS,
        identity: str | None = None,
        settings: StandbySettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], int] = _wall_ms,
    ) -> None:
        if slots < 1:
            raise ValueError(f"partition slots must be at least 1, got {slots}")
        self.store, self.user, self.count = store, user, slots
        self.identity = identity or default_identity()
        self.settings = settings or StandbySettings()
        self.clock = clock

        def lease(key: str) -> DeciderLease:
            return DeciderLease(
                store,
                key=key,
                identity=self.identity,
                settings=self.settings,
                clock=clock,
                wall=wall,
                seen_since=lambda entry: self.since(key, entry),
            )

        self.slots = [lease(f"{user}.s{k}") for k in range(slots)]
        self.members = [lease(f"{user}.m{j}") for j in range(slots)]
        self.seen: dict[str, Seen] = {}  # key -> the last write passed on (or read at start)
        self.on_change: Callable[[bool], None] | None = None
        self.transitions = 0
        self._was_active = False

    # -- the gate --------------------------------------------------------------------------------

    def slot(self, partition: str) -> int:
        """The slot of ``partition`` (:func:`slot_of`)."""
        return slot_of(partition, self.count)

    def owns(self, partition: str) -> bool:
        """True while this replica holds the slot of ``partition`` as far as it knows: from taking the
        key until a renewal finds it taken or it is released. Unlike a standby lease's :meth:`active`,
        no renew deadline: a replica whose event loop was busy deciding past the deadline keeps
        deciding until its next renewal says otherwise, rather than dropping the work it did (a busy
        machine did that for a third of the batches); a replica that took the slot over meanwhile
        races it for at most one batch, which the partition's head check refuses."""
        return self.slots[slot_of(partition, self.count)].revision is not None

    def active(self) -> bool:
        """True while this replica holds at least one slot (:meth:`owns`)."""
        return any(lease.revision is not None for lease in self.slots)

    def held(self) -> list[int]:
        """The slots this replica holds (active or not yet stepped down), in order."""
        return [k for k, lease in enumerate(self.slots) if lease.revision is not None]

    @property
    def key(self) -> str:
        """The keys, for log lines: ``<user>.s*``."""
        return f"{self.user}.s*"

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Always ready (a replica holding no slot folds and waits); the facts say which slots it holds."""
        held = self.held()
        return True, {
            "role": "active" if held else "standby",
            "lease": self.key,
            "slots": held,
            "of": self.count,
            "share": self.share(),
            "identity": self.identity,
        }

    # -- sharing ---------------------------------------------------------------------------------

    def live_members(self) -> list[str]:
        """The identities of the live replicas (member keys written less than ``lease_duration`` ago,
        as the subscription passed them on), this one included, sorted."""
        now = self.clock()
        live = {self.identity}
        for key, seen in self.seen.items():
            if seen.holder and key.startswith(f"{self.user}.m") and now - seen.at < self.settings.lease_duration:
                live.add(seen.holder)
        return sorted(live)

    def share(self) -> int:
        """How many slots this replica should hold: see the class."""
        live = self.live_members()
        n, rank = len(live), live.index(self.identity)
        return self.count // n + (1 if rank < self.count % n else 0)

    def _candidate(self, lease: DeciderLease) -> bool:
        """Worth a read: the key is not known to be held by a live other replica (free, released, ours,
        unknown, or not written for a retry period: it may be expiring)."""
        seen = self.seen.get(lease.key)
        if seen is None or not seen.holder or seen.holder == self.identity:
            return True
        return self.clock() - seen.at >= self.settings.retry_period * 2 or lease.observed is not None

    def _stale(self, lease: DeciderLease) -> bool:
        """Held by another replica whose last write to it was passed on two retry periods ago or more."""
        seen = self.seen.get(lease.key)
        return (
            seen is not None
            and bool(seen.holder)
            and seen.holder != self.identity
            and self.clock() - seen.at >= self.settings.retry_period * 2
        )

    async def _observe(self, lease: DeciderLease) -> None:
        """Read ``lease``'s key and note its revision (what :meth:`DeciderLease.takeable` times an expiry
        from), without taking it."""
        entry = await self.store.get(lease.key)
        lease.note_read(entry, now=self.clock())

    def since(self, key: str, entry: leases.LeaseEntry) -> float | None:
        """``clock()`` when this replica saw the write that ``entry`` (``key`` as read) holds: when the last
        write to ``key`` passed on carries the very record read (each write's record carries its writer's
        identity and time, so two writes' records differ), else None (a write not passed on yet, or a
        refused one passed on after it). The write was sent before it was passed on, so a holder's renewal
        is never later than this: timing an expiry from it is as safe as timing it from a read."""
        seen = self.seen.get(key)
        return seen.at if seen is not None and seen.record == entry.record else None

    def _seen(self, key: str, data: bytes) -> None:
        self.seen[key] = Seen(leases.decode_record(data), self.clock())

    async def seed(self) -> None:
        """Read every key once (who holds what at start). Raises BusError."""
        for lease in (*self.members, *self.slots):
            entry = await self.store.get(lease.key)
            if entry is not None:
                self.seen[lease.key] = Seen(entry.record, self.clock())

    # -- one round -------------------------------------------------------------------------------

    async def attempt(self) -> bool:
        """Renew what this replica holds, hold a member key, then move towards its share: release
        slots above it, take free or expired ones below it. Returns :meth:`active`. Raises BusError."""
        try:
            await self._member()
            held = [lease for lease in self.slots if lease.revision is not None]
            await asyncio.gather(*(lease.attempt() for lease in held))
            held = [lease for lease in self.slots if lease.revision is not None]
            share = self.share()
            for lease in reversed(held[share:]):
                await lease.release()
                log.info("slot_released", lease=lease.key, identity=self.identity, share=share)
            want = share - min(len(held), share)
            candidates = [lease for lease in self.slots if lease.revision is None and self._candidate(lease)]
            if want > 0:
                await self.take_some(candidates, want)
            else:  # start timing the stale ones now: taken at once if their holder turns out dead
                await _every(self._observe(lease) for lease in candidates if self._stale(lease))
        finally:
            self._note()
        return self.active()

    async def take_some(self, candidates: list[DeciderLease], want: int) -> int:
        """Take up to ``want`` of ``candidates`` (slot leases this replica does not hold), in slot order:
        read them all at once, then take at once those free, released, ours or expired
        (:meth:`DeciderLease.takeable`). Returns how many it took. Raises BusError."""
        entries = await _every(self.store.get(lease.key) for lease in candidates)
        now = self.clock()
        takes: list[Awaitable[bool]] = []
        for lease, entry in zip(candidates, entries, strict=True):
            lease.note_read(entry, now=now)
            why = lease.takeable(entry, now=now)
            if why and len(takes) < want:
                takes.append(lease.take(entry, why=why))
        return sum(await _every(takes))

    async def _member(self) -> None:
        mine = [lease for lease in self.members if lease.revision is not None]
        if mine:
            await mine[0].attempt()
            if mine[0].revision is not None:
                return
        for lease in self.members:
            if self._candidate(lease) and await lease.attempt():
                return

    def _note(self) -> None:
        active = self.active()
        if active != self._was_active:
            self._was_active = active
            self.transitions += 1
            if self.on_change is not None:
                self.on_change(active)

    def next_delay(self, began: float) -> float:
        """Seconds until the next round of :meth:`run`, the last one having begun at ``began`` (``clock()``):
        a retry period after it, or sooner (plus :data:`EXPIRY_MARGIN`) when another replica's key comes due
        first: a member key leaving the live set, a slot key expiring (``lease_duration`` after the write
        last seen, or the read that started its timer). A live replica rewrites its keys every retry
        period, so its keys never come due before the next round: only a dead (or stalled) one's do."""
        now = self.clock()
        due = began + self.settings.retry_period
        duration = self.settings.lease_duration + EXPIRY_MARGIN
        times = [seen.at for seen in self.seen.values() if seen.holder and seen.holder != self.identity]
        times += [
            lease.observed_at
            for lease in self.slots
            if lease.revision is None and lease.observed is not None and lease.observed.record.holder
        ]
        for at in times:
            if now < at + duration < due:
                due = at + duration
        return max(0.0, due - now)

    async def run(self) -> None:
        """Run rounds every retry period until cancelled, sooner when another replica's key comes due
        (:meth:`next_delay`), a write to any of the user's keys changes its holder, or a release passed on
        was not read yet (:meth:`unread_release`: after :data:`REREAD_FIRST_S`, doubling, :data:`REREADS`
        times at most); then call :meth:`release`."""
        wake = asyncio.Event()
        sub = None

        async def on_write(msg: Any) -> None:
            self._on_write(msg, wake)

        try:
            sub = await self.store.nc.subscribe(f"{leases.SUBJECT_PREFIX}{self.user}.>", cb=on_write)
        except Exception as err:  # noqa: BLE001 - nats-py raises its own errors and OSError
            log.warning("slots_not_followed", user=self.user, error=str(err))
        failing = False
        try:
            with contextlib.suppress(BusError):
                await self.seed()
            rereads = 0
            while True:
                if wake.is_set():
                    rereads = 0  # a new write: its own rereads
                wake.clear()
                began = self.clock()
                failing = await attempt_noting_reachability(self.attempt, key=self.key, failing=failing)
                delay = self.next_delay(began)
                if rereads < REREADS and self.unread_release():
                    delay = min(delay, REREAD_FIRST_S * 2**rereads)
                    rereads += 1
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await wake.wait()
        finally:
            if sub is not None:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()

    def unread_release(self) -> bool:
        """Whether a slot's release was passed on that this replica, short of its share, read still held: the
        server passes a write on before the bucket serves it to a read, so :meth:`run` reads again soon
        (as :meth:`DeciderLease.run` does), not a retry period later."""
        if len(self.held()) >= self.share():
            return False
        for lease in self.slots:
            seen = self.seen.get(lease.key)
            if lease.revision is None and seen is not None and not seen.holder and lease.observed is not None:
                if lease.observed.record != seen.record:
                    return True
        return False

    def _on_write(self, msg: Any, wake: asyncio.Event) -> None:
        key = msg.subject.removeprefix(leases.SUBJECT_PREFIX)
        before = self.seen[key].holder if key in self.seen else ""
        self._seen(key, msg.data)
        holder = self.seen[key].holder
        if holder != before and holder != self.identity:  # a release, a newcomer, a takeover: act soon
            wake.set()

    async def release(self) -> None:
        """Release every slot and the member key (so the others take them at once); errors only logged."""
        await asyncio.gather(*(lease.release() for lease in (*self.slots, *self.members)))
        self._note()


async def _every(aws: Iterable[Awaitable[_T]]) -> list[_T]:
    """Await ``aws`` together and return their results in order; when any raised, raise the first error
    once all are done (none left running behind the caller's back)."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


async def open_slots(
    bus: Bus, *, role: str, settings: StandbySettings, slots: int = DEFAULT_SLOTS, user: str | None = None
) -> SlotLeases | None:
    """The slot leases of decider ``role`` (admit, preempt, place) on ``bus``'s NATS connection; None on a
    bus that is not NATS (in memory: one process decides every partition). Raises NotFoundError when the
    bucket is missing and this connection may not create it, BusError, ValueError for ``slots`` < 1."""
    from kueue_es.events.bus.nats import NatsBus  # nats-py only where a NATS bus is used

    inner = getattr(bus, "inner", bus)
    if not isinstance(inner, NatsBus):
        return None
    store = await leases.open_store(
        inner.nc, create=inner.creates_streams, replicas=inner.replicas, timeout=settings.retry_period
    )
    return SlotLeases(store, user=user or subjects.HEAD_TOKENS[role], slots=slots, settings=settings)
