"""The deciders' standby lease (services/standby.py) on a real nats-server's KV bucket KQ_LEASES.

Every replica here runs on one injected clock that the test moves by hand, and each
round is one explicit :meth:`DeciderLease.attempt`, so the timings are exact: a
standby takes an unrenewed lease only once its revision has stood still for the
lease duration; a holder that cannot renew stops being active at its renew
deadline, before any standby may take over; a release hands over at once; two
candidates racing for a free key never both win. Then the users of
events/bus/permissions.py: each decider may hold its own keys and no other's.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import AsyncIterator

import nats
import nats.errors
import nats.js.errors
import pytest

from kueue_es.events.bus import leases, permissions, server
from kueue_es.events.bus.base import BusError, NotFoundError
from kueue_es.services import health, standby
from kueue_es.services.runtime import cancel_and_wait

SETTINGS = standby.StandbySettings(lease_duration=1.5, renew_deadline=1.0, retry_period=0.5)
KEY = leases.key_for("admitter", "p0")


class Clock:
    """Monotonic seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def fresh_key(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key of its own per test: a replica left renewing by an earlier test on the session's server
    (slow to stop on a loaded machine) must not hold this test's key."""
    monkeypatch.setattr(
        sys.modules[__name__], "KEY", leases.key_for(re.sub(r"[^-_a-zA-Z0-9]", "-", request.node.name)[:60], "p0")
    )


@pytest.fixture
async def store(nats_server: server.NatsServer) -> AsyncIterator[leases.LeaseStore]:
    """The lease bucket, empty, on the session's nats-server (a connection without a user may create it)."""
    nc = await nats.connect(nats_server.url)
    with contextlib.suppress(nats.js.errors.NotFoundError):
        await nc.jsm().delete_stream(leases.STREAM)
    opened = await leases.open_store(nc, create=True)
    yield opened
    await nc.close()


def replica(store: leases.LeaseStore, clock: Clock, name: str) -> standby.DeciderLease:
    return standby.DeciderLease(store, key=KEY, identity=name, settings=SETTINGS, clock=clock, wall=lambda: 0)


async def test_a_lone_replica_holds_the_lease_at_once(store: leases.LeaseStore) -> None:
    clock = Clock()
    a = replica(store, clock, "a")
    assert not a.active()
    assert await a.attempt() is True
    entry = await store.get(KEY)
    assert entry is not None and entry.record.holder == "a" and entry.record.lease_duration_ms == 1500
    clock.advance(0.5)
    assert await a.attempt() is True  # a renewal: the revision moves
    renewed = await store.get(KEY)
    assert renewed is not None and renewed.revision > entry.revision and renewed.record.holder == "a"


async def test_a_standby_takes_over_only_after_the_lease_duration_without_renewal(store: leases.LeaseStore) -> None:
    clock = Clock()
    a, b = replica(store, clock, "a"), replica(store, clock, "b")
    changes: list[bool] = []
    b.on_change = changes.append
    assert await a.attempt() is True
    assert await b.attempt() is False  # held by a: b starts timing a's revision now
    assert b.readiness() == (True, {"role": "standby", "lease": KEY, "holder": "a"})
    for _ in range(6):  # a renews every retry period: b never takes over
        clock.advance(0.5)
        assert await a.attempt() is True
        assert await b.attempt() is False
    # a stops renewing (killed): b waits a full lease duration from when it last saw the key move
    clock.advance(1.4)
    assert await b.attempt() is False
    clock.advance(0.1)
    assert await b.attempt() is True
    assert changes == [True]
    entry = await store.get(KEY)
    assert entry is not None and entry.record.holder == "b" and entry.record.transitions == 1
    # a comes back: its renewal is refused (b wrote since), it is a standby now and says so
    assert await a.attempt() is False
    assert a.revision is None and a.holder == "b"


async def test_a_holder_that_cannot_renew_steps_down_before_anyone_may_take_over(
    store: leases.LeaseStore,
) -> None:
    clock = Clock()
    a, b = replica(store, clock, "a"), replica(store, clock, "b")
    assert await a.attempt() is True
    assert await b.attempt() is False
    # a makes no renewal (it cannot reach the bucket, or its loop is held up): active until its renew deadline only
    clock.advance(0.99)
    assert a.active()
    clock.advance(0.02)
    assert not a.active()  # renew deadline (1.0 s) passed: no more commits from a
    assert await b.attempt() is False  # but b may not take over yet (1.01 s < 1.5 s)
    assert a.readiness()[1]["role"] == "standby"
    # a renews again before b took over: nobody wrote in between, so a holds it again
    assert await a.attempt() is True
    clock.advance(1.5)
    assert await b.attempt() is False  # the key moved at a's renewal: b times it from there
    clock.advance(1.5)
    assert await b.attempt() is True
    assert not await a.attempt()


async def test_a_release_hands_over_at_once(store: leases.LeaseStore) -> None:
    clock = Clock()
    a, b = replica(store, clock, "a"), replica(store, clock, "b")
    assert await a.attempt() is True
    assert await b.attempt() is False
    await a.release()
    assert not a.active()
    entry = await store.get(KEY)
    assert entry is not None and entry.record.holder == ""
    assert await b.attempt() is True  # no waiting: the holder is empty
    await a.release()  # releasing what it no longer holds writes nothing
    entry = await store.get(KEY)
    assert entry is not None and entry.record.holder == "b"


async def test_a_released_key_is_not_released_again_over_a_new_holder(store: leases.LeaseStore) -> None:
    clock = Clock()
    a, b = replica(store, clock, "a"), replica(store, clock, "b")
    assert await a.attempt() is True
    assert await b.attempt() is False
    clock.advance(1.5)
    assert await b.attempt() is True  # a was frozen: b took over
    await a.release()  # a's release is a compare-and-set on a's revision: refused, b keeps it
    entry = await store.get(KEY)
    assert entry is not None and entry.record.holder == "b"


async def test_candidates_racing_for_a_free_key_never_both_win(store: leases.LeaseStore) -> None:
    clock = Clock()
    for round_ in range(5):
        contenders = [replica(store, clock, f"r{round_}-{i}") for i in range(4)]
        won = await asyncio.gather(*(c.attempt() for c in contenders))
        assert sum(won) == 1, won
        winner = contenders[won.index(True)]
        await winner.release()


async def test_a_standby_wakes_on_a_release(store: leases.LeaseStore) -> None:
    """With real time: run() follows the key, so a released lease is taken long before the standby's
    next poll. The periods are long (a poll every 20 s, a lease of 60 s), so that the only way to take
    over within 10 s of the release is the release's write, however loaded the machine (with 0.5 s
    polls and a 1.5 s bound a loaded run failed, and polling alone could have passed it)."""
    slow = standby.StandbySettings(lease_duration=60.0, renew_deadline=40.0, retry_period=20.0)
    a = standby.DeciderLease(store, key=KEY, identity="a", settings=slow)
    b = standby.DeciderLease(store, key=KEY, identity="b", settings=slow)
    runs = [asyncio.create_task(a.run())]
    try:
        async with asyncio.timeout(5):
            while not a.active():
                await asyncio.sleep(0.01)
        runs.append(asyncio.create_task(b.run()))
        await asyncio.sleep(1.0)
        assert a.active() and not b.active()
        await cancel_and_wait(runs[:1])
        released = asyncio.get_running_loop().time()
        await a.release()
        async with asyncio.timeout(10.0):  # woken by the write: its next poll is 19 s away
            while not b.active():
                await asyncio.sleep(0.005)
        took = asyncio.get_running_loop().time() - released
        print(f"standby took over {took * 1000:.0f} ms after the release")
    finally:
        await cancel_and_wait(runs)


class LaggingStore(leases.LeaseStore):
    """A bucket that serves a write to reads only some time after passing it on (the server passes a
    write on to subscribers before the stream stores it): once a key is armed, reads of it keep answering
    with the key as it stood for ``lag`` seconds."""

    def __init__(self, store: leases.LeaseStore, *, lag: float) -> None:
        super().__init__(nc=store.nc, kv=store.kv)
        self.lag = lag
        self.frozen: dict[str, tuple[float, leases.LeaseEntry | None]] = {}
        self.reads = 0

    async def arm(self, key: str) -> None:
        self.frozen[key] = (asyncio.get_running_loop().time() + self.lag, await super().get(key))

    async def get(self, key: str) -> leases.LeaseEntry | None:
        self.reads += 1
        until, entry = self.frozen.get(key, (0.0, None))
        if asyncio.get_running_loop().time() < until:
            return entry
        return await super().get(key)


async def test_a_standby_reads_again_a_release_the_bucket_did_not_serve_yet(store: leases.LeaseStore) -> None:
    """The release is passed on before a read shows it (CI saw this: the standby read the old holder,
    and waited for its next poll, 19 s on). It reads again soon until it sees the write it was told of."""
    slow = standby.StandbySettings(lease_duration=60.0, renew_deadline=40.0, retry_period=20.0)
    lagging = LaggingStore(store, lag=0.3)
    a = standby.DeciderLease(store, key=KEY, identity="a", settings=slow)
    b = standby.DeciderLease(lagging, key=KEY, identity="b", settings=slow)
    assert await a.attempt() is True
    run = asyncio.create_task(b.run())
    try:
        async with asyncio.timeout(5):
            while b.observed is None:
                await asyncio.sleep(0.01)
        assert not b.active()
        await lagging.arm(KEY)
        reads = lagging.reads
        await a.release()
        async with asyncio.timeout(10.0):  # its next poll is 20 s away
            while not b.active():
                await asyncio.sleep(0.005)
        assert lagging.reads - reads >= 2  # the stale read, then the one that showed the release
    finally:
        await cancel_and_wait([run])


async def test_a_slot_release_the_bucket_did_not_serve_yet_is_read_again(store: leases.LeaseStore) -> None:
    """The same for slot leases: b, short of its share once a releases its slot and member key, reads a's slot
    still held (the release passed on, not served yet) and reads it again soon, not a retry period (20 s) on."""
    slow = standby.StandbySettings(lease_duration=60.0, renew_deadline=40.0, retry_period=20.0)
    user = KEY.split(".")[0]
    lagging = LaggingStore(store, lag=0.3)
    a = standby.SlotLeases(store, user=user, slots=2, identity="a", settings=slow)
    b = standby.SlotLeases(lagging, user=user, slots=2, identity="b", settings=slow)
    runs = [asyncio.create_task(a.run())]
    try:
        async with asyncio.timeout(5):
            while a.held() != [0, 1]:
                await asyncio.sleep(0.01)
        runs.append(asyncio.create_task(b.run()))
        async with asyncio.timeout(5):  # a hands b its share: one slot each
            while a.held() != [0] or b.held() != [1]:
                await asyncio.sleep(0.01)
        await cancel_and_wait(runs[:1])
        await lagging.arm(f"{user}.s0")
        await a.release()
        async with asyncio.timeout(10.0):  # its next round is 20 s away
            while b.held() != [0, 1]:
                await asyncio.sleep(0.005)
    finally:
        await cancel_and_wait(runs)


async def test_the_metrics_and_readiness_follow_the_lease(store: leases.LeaseStore) -> None:
    clock = Clock()
    probe = health.Health(service="admitter")
    a = replica(store, clock, "a")
    standby.observe(a, probe, role="admit")
    assert b'kueue_es_lease_holder{role="admit",service="admitter"} 0.0' in probe.metrics()
    assert b'kueue_es_leader{service="admitter"} 0.0' in probe.metrics()
    await a.attempt()
    text = probe.metrics()
    assert b'kueue_es_lease_holder{role="admit",service="admitter"} 1.0' in text
    assert b'kueue_es_leader{service="admitter"} 1.0' in text
    assert b'kueue_es_lease_transitions_total{role="admit",service="admitter"} 1.0' in text
    clock.advance(1.0)
    await a.release()
    assert b'kueue_es_lease_transitions_total{role="admit",service="admitter"} 2.0' in probe.metrics()


def test_timings_must_leave_the_holder_time_to_step_down() -> None:
    with pytest.raises(ValueError, match="lease duration > renew deadline > retry period"):
        standby.StandbySettings(lease_duration=1.0, renew_deadline=1.0, retry_period=0.5)


# -- the users of events/bus/permissions.py ---------------------------------------------------------


@pytest.fixture(scope="module")
def auth(tmp_path_factory: pytest.TempPathFactory) -> server.LocalAuth:
    return server.LocalAuth.create(tmp_path_factory.mktemp("auth") / "creds")


@pytest.fixture(scope="module")
def secured(auth: server.LocalAuth) -> server.NatsServer:
    with server.NatsServer(auth=auth) as running:
        yield running


async def connect_as(running: server.NatsServer, auth: server.LocalAuth, user: str) -> nats.aio.client.Client:
    credentials = auth.credentials(user)
    return await nats.connect(running.url, user=user, password=credentials.password(), max_reconnect_attempts=0)


async def test_each_decider_holds_only_its_own_lease(secured: server.NatsServer, auth: server.LocalAuth) -> None:
    admitter = await connect_as(secured, auth, "admitter")
    admin = await connect_as(secured, auth, permissions.ADMIN)
    try:
        with pytest.raises(NotFoundError, match="kueue-es nats-setup"):  # only admin creates the bucket
            await leases.open_store(admitter, create=False, timeout=0.3, wait=0.5)
        await leases.ensure_bucket(admin, replicas=1)
        store = await leases.open_store(admitter, create=False, timeout=0.5)
        clock = Clock()
        mine = standby.DeciderLease(store, key="admitter.p0", identity="x", settings=SETTINGS, clock=clock)
        woke = asyncio.Event()
        unsubscribe = await store.subscribe("admitter.p0", lambda _: woke.set())
        assert await mine.attempt() is True
        async with asyncio.timeout(2):
            await woke.wait()  # it may follow its own key
        await unsubscribe()
        theirs = standby.DeciderLease(store, key="preemptor.p0", identity="x", settings=SETTINGS, clock=clock)
        with pytest.raises(BusError):  # refused: no ack comes
            await theirs.attempt()
        assert (await store.get("preemptor.p0")) is None
    finally:
        await admitter.close()
        await admin.close()


async def test_a_holder_retries_at_its_pace_when_renewals_fail(store: leases.LeaseStore) -> None:
    clock = Clock()
    a = replica(store, clock, "a")
    assert await a.attempt() is True
    clock.advance(0.7)
    assert a.next_delay() == 0  # a round is due
    await store.nc.close()  # the bucket is unreachable from now on
    with pytest.raises(BusError):
        await a.attempt()
    assert a.active()  # 0.7 s after the last renewal: still within the renew deadline
    assert a.next_delay() == pytest.approx(0.5)  # the next try a retry period later, not at once
    clock.advance(0.31)
    assert not a.active()
