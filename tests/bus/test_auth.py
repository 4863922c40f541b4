"""A nats-server with the users of events/bus/permissions.py (what ``up`` and ``demo`` run).

Each finding of issue 13 (7) as a test: a connection without credentials is
refused; no service user may update, purge or delete the log or its messages
(the attack: the watcher set max_msgs=1 and subjects=[junk.>]); the watcher may
not publish decisions; the reader reads and publishes nothing; a nats-server
without the route password cannot join a cluster whose routes require it.

A refused publish or request gets no reply (the server reports a permissions
violation to the client), so refused calls time out after a short timeout, and
the violation is checked in what the client was told.
"""

from __future__ import annotations

import asyncio
import json
import stat
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path

import nats
import nats.errors
import pytest
from nats.aio.client import Client
from nats.js import api

from kueue_es.events.bus import base, permissions, server
from kueue_es.events.bus import nats as nats_bus

# several seconds of services or kubectl per test: .ci/run's slow stage runs them (README command under 10 minutes)
pytestmark = pytest.mark.slow

TIMEOUT = 0.5


@pytest.fixture(scope="module")
def auth(tmp_path_factory: pytest.TempPathFactory) -> server.LocalAuth:
    return server.LocalAuth.create(tmp_path_factory.mktemp("auth") / "creds")


@pytest.fixture(scope="module")
def secured(auth: server.LocalAuth) -> Iterator[server.NatsServer]:
    with server.NatsServer(auth=auth) as running:
        yield running


@pytest.fixture
async def log_stream(secured: server.NatsServer, auth: server.LocalAuth) -> AsyncIterator[None]:
    """An empty KQ_LOG, made by admin."""
    admin = await raw(secured, auth, permissions.ADMIN)
    try:
        for name in (nats_bus.PUBLIC_STREAM_NAME, base.STREAM_NAME):
            try:
                await admin.jsm().delete_stream(name)
            except nats.js.errors.NotFoundError:
                pass
    finally:
        await admin.close()
    await nats_bus.ensure_log_stream(secured.url, credentials=auth.credentials(permissions.ADMIN), public=True)
    yield


class Violations:
    """The errors the server sent a client (its ``error_cb``)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def record(self, err: Exception) -> None:
        self.seen.append(str(err).lower())

    def about(self, subject: str) -> bool:
        return any("permissions violation" in text and subject.lower() in text for text in self.seen)


async def raw(
    running: server.NatsServer, auth: server.LocalAuth, user: str, errors: Violations | None = None
) -> Client:
    credentials = auth.credentials(user)
    return await nats.connect(
        running.url,
        user=credentials.user,
        password=credentials.password(),
        error_cb=(errors or Violations()).record,
        allow_reconnect=False,
    )


async def bus_as(running: server.NatsServer, auth: server.LocalAuth, user: str) -> nats_bus.NatsBus:
    return await nats_bus.connect(running.url, credentials=auth.credentials(user), timeout=TIMEOUT)


def msg(subject: str, msg_id: str) -> base.OutgoingMessage:
    return base.OutgoingMessage(subject=subject, data=b"{}", msg_id=msg_id, headers={"Kq-Type": "Test"})


async def refused(call: Awaitable[object]) -> bool:
    try:
        await asyncio.wait_for(call, 2 * TIMEOUT)  # some nats-py calls wait 5 s whatever the timeout
    except (TimeoutError, nats.errors.TimeoutError, base.BusError):
        return True
    return False


def test_credentials_are_owner_only(auth: server.LocalAuth, secured: server.NatsServer) -> None:
    assert stat.S_IMODE(auth.directory.stat().st_mode) == 0o700
    for user in (*permissions.USERS, server.ROUTE_USER):
        path = auth.credentials(user).password_file
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert len(auth.credentials(user).password()) == 48
    assert len({auth.credentials(u).password() for u in permissions.USERS}) == len(permissions.USERS)
    config = secured.store_dir / server.CONFIG_NAME
    assert stat.S_IMODE(config.stat().st_mode) == 0o600  # it holds the passwords


async def refusal(call: object) -> str:
    """The error ``call`` fails with, as text (nothing else is kept: see below)."""
    try:
        await call  # type: ignore[misc]
    except Exception as err:  # noqa: BLE001
        return f"{type(err).__name__}: {err}"
    return "accepted"


@pytest.mark.parametrize("userinfo", ["", "watcher:wrong@", "nobody:x@"])
async def test_a_connection_without_credentials_is_refused(
    secured: server.NatsServer, userinfo: str, capfd: pytest.CaptureFixture[str]
) -> None:
    url = secured.url.replace("nats://", f"nats://{userinfo}")
    error = await refusal(nats_bus.connect(url, timeout=TIMEOUT))
    assert error.startswith("BusError") and "wrong" not in error, error
    captured = capfd.readouterr()
    assert "Authorization Violation" in captured.out + captured.err  # the server's answer, logged by the bus


@pytest.mark.usefixtures("log_stream")
@pytest.mark.parametrize("user", [*permissions.SERVICE_USERS, permissions.READER])
async def test_no_service_user_may_change_the_log(
    secured: server.NatsServer, auth: server.LocalAuth, user: str
) -> None:
    """The attack of issue 13: the watcher made the log keep one message of junk subjects."""
    admin = await raw(secured, auth, permissions.ADMIN)
    writer = await raw(secured, auth, "watcher")
    await writer.jetstream(timeout=2).publish("kq.in.wl.ns.a", b"{}", headers={"Nats-Msg-Id": "a"})
    before = await admin.jsm().stream_info(base.STREAM_NAME)
    errors = Violations()
    nc = await raw(secured, auth, user, errors)
    jsm = nc.jsm(timeout=TIMEOUT)
    try:
        hostile = api.StreamConfig(name=base.STREAM_NAME, subjects=["junk.>"], max_msgs=1)
        outcomes = await asyncio.gather(  # together: each refusal waits out the timeout
            refused(jsm.update_stream(hostile)),
            refused(jsm.add_stream(api.StreamConfig(name="KQ_OTHER", subjects=["other.>"]))),
            refused(jsm.purge_stream(base.STREAM_NAME)),
            refused(jsm.delete_msg(base.STREAM_NAME, 1)),
            refused(jsm.delete_stream(base.STREAM_NAME)),
            refused(jsm.delete_stream(nats_bus.PUBLIC_STREAM_NAME)),
        )
        assert all(outcomes), outcomes
        await asyncio.sleep(0.1)
        for call in ("UPDATE", "CREATE", "PURGE", "MSG.DELETE", "DELETE"):
            assert errors.about(f"$JS.API.STREAM.{call}."), (call, errors.seen)
        after = await admin.jsm().stream_info(base.STREAM_NAME)
        assert after.config.subjects == before.config.subjects == list(base.STREAM_SUBJECTS)
        assert after.config.max_msgs == before.config.max_msgs and after.state.messages == before.state.messages
        # what it may do: check that the stream is there
        assert (await jsm.stream_info(base.STREAM_NAME)).config.name == base.STREAM_NAME
    finally:
        for client in (nc, writer, admin):
            await client.close()


@pytest.mark.usefixtures("log_stream")
@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
async def test_each_user_publishes_only_its_own_subjects(secured: server.NatsServer, auth: server.LocalAuth) -> None:
    watcher = await bus_as(secured, auth, "watcher")
    admitter = await bus_as(secured, auth, "admitter")
    dispatcher = await bus_as(secured, auth, "dispatcher")
    try:
        await watcher.publish(msg("kq.in.wl.ns.a", "fact:a"))
        for subject in ("kq.dec.p0.head.admitter", "kq.dec.p0.wl.ns.a", "kq.disp.local.wl.ns.a"):
            assert await refused(watcher.publish(msg(subject, f"forged:{subject}")))
        assert await refused(
            watcher.commit_batch(head=msg("kq.dec.p0.head.admitter", "forged:head"), expected_head_seq=0, rest=[])
        )
        await admitter.commit_batch(
            head=msg("kq.dec.p0.head.admitter", "admitter:1:0"),
            expected_head_seq=0,
            rest=[msg("kq.dec.p0.wl.ns.a", "a:1:1")],
            head_filter="kq.dec.p0.head.*",
        )
        for subject in ("kq.in.wl.ns.b", "kq.disp.local.wl.ns.a", "kq.dec.p0.other", "kq.dec.p0.head"):
            assert await refused(admitter.publish(msg(subject, f"forged:{subject}")))
        await dispatcher.publish(msg("kq.disp.local.wl.ns.a", "disp:a"))
        await dispatcher.publish(msg("kq.in.wl.ns.a", "stopped:a"))
        for subject in ("kq.dec.p0.wl.ns.a", "kq.in.cq._.q"):
            assert await refused(dispatcher.publish(msg(subject, f"forged:{subject}")))
        assert [m.subject for m in [await watcher.get(seq) for seq in range(1, 6)]] == [
            "kq.in.wl.ns.a", "kq.dec.p0.head.admitter", "kq.dec.p0.wl.ns.a", "kq.disp.local.wl.ns.a", "kq.in.wl.ns.a",
        ]  # fmt: skip
        assert await watcher.last_seq() == 5
    finally:
        for bus in (watcher, admitter, dispatcher):
            await bus.close()


@pytest.mark.usefixtures("log_stream")
async def test_a_decider_publishes_only_on_its_own_head(secured: server.NatsServer, auth: server.LocalAuth) -> None:
    """Issue 13: the preemptor may not put a record on the admitter's head (nor the TAS placer on
    the preemptor's), plain or in a batch; each commits on its own head against the one token."""
    errors = Violations()
    preemptor_nc = await raw(secured, auth, "preemptor", errors)
    preemptor = await bus_as(secured, auth, "preemptor")
    placer = await bus_as(secured, auth, "tas-placer")
    admitter = await bus_as(secured, auth, "admitter")
    try:
        await admitter.commit_batch(
            head=msg("kq.dec.p0.head.admitter", "admit:p0:0:0"),
            expected_head_seq=0,
            rest=[],
            head_filter="kq.dec.p0.head.*",
        )
        forged = msg("kq.dec.p0.head.admitter", "admit:p0:1:0")
        assert await refused(preemptor.publish(forged))
        assert await refused(
            preemptor.commit_batch(
                head=forged,
                expected_head_seq=1,
                rest=[msg("kq.dec.p0.wl.ns.a", "admit:p0:1:1")],
                head_filter="kq.dec.p0.head.*",
            )
        )
        await preemptor_nc.publish("kq.dec.p1.head.admitter", b"{}")  # any partition
        await preemptor_nc.flush()
        await asyncio.sleep(0.1)
        assert errors.about("kq.dec.p1.head.admitter"), errors.seen
        assert await refused(placer.publish(msg("kq.dec.p0.head.preemptor", "preempt:p0:1:0")))
        assert await admitter.last_seq() == 1  # nothing of the forgeries was stored
        await preemptor.commit_batch(
            head=msg("kq.dec.p0.head.preemptor", "preempt:p0:1:0"),
            expected_head_seq=1,
            rest=[msg("kq.dec.p0.wl.ns.a", "preempt:p0:1:1")],
            head_filter="kq.dec.p0.head.*",
        )
        assert [(await admitter.get(seq)).subject for seq in (2, 3)] == [
            "kq.dec.p0.head.preemptor",
            "kq.dec.p0.wl.ns.a",
        ]
    finally:
        await preemptor_nc.close()
        for bus in (preemptor, placer, admitter):
            await bus.close()


@pytest.mark.usefixtures("log_stream")
@pytest.mark.parametrize("schema_version", [16, 17])
async def test_what_admin_publishes_on_a_head_is_still_checked_by_the_fold(
    secured: server.NatsServer, auth: server.LocalAuth, schema_version: int
) -> None:
    """admin may publish anything, also a batch of role ``preempt`` on the preemptor's head carrying a
    QuotaReserved: the subjects let it through, the fold does not (the preemptor makes no reservations);
    as an output message after the record (schema 16) or a decision the record carries (17)."""
    from kueue_es import deciders
    from kueue_es.events import types
    from kueue_es.projections.cluster import ClusterState
    from kueue_es.services.runtime import build_batch, fold_message

    admin = await bus_as(secured, auth, permissions.ADMIN)
    reader = await bus_as(secured, auth, permissions.READER)
    try:
        ref = types.WorkloadRef(namespace="ns", name="a", uid="u")
        forged = types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[], at_ms=1)
        head, rest = build_batch(
            deciders.PREEMPTOR, outputs=[forged], basis_seq=0, head_seq=0, now_ms=1, schema_version=schema_version
        )
        last = 1 + len(rest)
        assert (
            await admin.commit_batch(head=head, expected_head_seq=0, rest=rest, head_filter="kq.dec.p0.head.*") == last
        )
        state, orphans = ClusterState(), []
        async for message in reader.read(subjects=("kq.>",)):
            fold_message(state, message, on_orphan=orphans.append)
            if message.pending == 0:
                break
        expected = [("kq.dec.p0.head.preemptor", "wrong_role"), ("kq.dec.p0.wl.ns.a", "wrong_role")]
        assert [(o.subject, o.reason) for o in orphans] == expected[:last]
        assert not state.heads and state.last_seq == last
    finally:
        await admin.close()
        await reader.close()


@pytest.mark.usefixtures("log_stream")
async def test_the_reader_reads_and_publishes_nothing(secured: server.NatsServer, auth: server.LocalAuth) -> None:
    watcher = await bus_as(secured, auth, "watcher")
    reader = await bus_as(secured, auth, permissions.READER)
    try:
        await watcher.publish(msg("kq.in.wl.ns.a", "fact:a"))
        seen = []
        async for message in reader.read(subjects=("kq.>",)):
            seen.append(message.subject)
            if message.pending == 0:
                break
        assert seen == ["kq.in.wl.ns.a"] and (await reader.get(1)).subject == "kq.in.wl.ns.a"
        for subject in ("kq.in.wl.ns.b", "kq.dec.p0.head.admitter", "kq.disp.local.wl.ns.a", "kq.pub.wl.ns.a"):
            assert await refused(reader.publish(msg(subject, f"reader:{subject}")))
        assert await refused(reader.durable(name="dispatcher", subjects=("kq.dec.*.wl.>",)))
        info = await reader._jsm.stream_info(nats_bus.PUBLIC_STREAM_NAME)  # the public stream: readable
        assert info.config.name == nats_bus.PUBLIC_STREAM_NAME
        assert await watcher.last_seq() == 1
    finally:
        await watcher.close()
        await reader.close()


@pytest.mark.usefixtures("log_stream")
async def test_only_the_publisher_writes_the_public_stream(secured: server.NatsServer, auth: server.LocalAuth) -> None:
    """The publisher reads KQ_LOG and writes KQ_PUB (and finds its last message there); it may publish nothing
    on the log. No other service user may write KQ_PUB."""
    watcher = await bus_as(secured, auth, "watcher")
    publisher = await bus_as(secured, auth, permissions.PUBLISHER)
    admitter = await bus_as(secured, auth, "admitter")
    try:
        await watcher.publish(msg("kq.in.wl.ns.a", "fact:a"))
        assert (await publisher.get(1)).subject == "kq.in.wl.ns.a"
        ack = await publisher.publish_public(msg("kq.pub.wl.ns.a", "fact:a"))
        assert ack.seq == 1 and (await publisher.publish_public(msg("kq.pub.wl.ns.a", "fact:a"))).duplicate
        last = await publisher.last_public()
        assert last is not None and last.subject == "kq.pub.wl.ns.a"
        for subject in ("kq.in.wl.ns.b", "kq.dec.p0.wl.ns.a", "kq.disp.local.wl.ns.a"):
            assert await refused(publisher.publish(msg(subject, f"publisher:{subject}")))
        for other in (watcher, admitter):
            assert await refused(other.publish_public(msg("kq.pub.wl.ns.b", "forged:b")))
        assert (await publisher.last_public()) == last
    finally:
        await watcher.close()
        await publisher.close()
        await admitter.close()


async def test_services_wait_for_the_admin_to_create_the_stream(
    secured: server.NatsServer, auth: server.LocalAuth
) -> None:
    admin = await raw(secured, auth, permissions.ADMIN)
    try:
        for name in (nats_bus.PUBLIC_STREAM_NAME, base.STREAM_NAME):
            try:
                await admin.jsm().delete_stream(name)
            except nats.js.errors.NotFoundError:
                pass
    finally:
        await admin.close()
    with pytest.raises(base.NotFoundError, match="an admin creates it"):
        await bus_as(secured, auth, "admitter")
    waiting = asyncio.create_task(nats_bus.connect(secured.url, credentials=auth.credentials("admitter"), timeout=1.0))
    await asyncio.sleep(0.3)
    await nats_bus.ensure_log_stream(secured.url, credentials=auth.credentials(permissions.ADMIN))
    bus = await waiting
    await bus.close()


def test_credentials_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(nats_bus.USER_ENV, raising=False)
    monkeypatch.delenv(nats_bus.PASSWORD_FILE_ENV, raising=False)
    assert nats_bus.credentials_from_env() is None
    monkeypatch.setenv(nats_bus.USER_ENV, "watcher")
    with pytest.raises(base.BusError, match="KUEUE_ES_NATS_PASSWORD_FILE"):
        nats_bus.credentials_from_env()
    monkeypatch.setenv(nats_bus.PASSWORD_FILE_ENV, str(tmp_path / "w"))
    assert nats_bus.credentials_from_env() == server.Credentials(user="watcher", password_file=tmp_path / "w")


def routes(running: server.NatsServer) -> list[str]:
    assert running._monitor is not None
    with urllib.request.urlopen(f"{running._monitor}/routez", timeout=2) as response:
        return [route.get("remote_name", "") for route in json.load(response).get("routes") or []]


@pytest.mark.slow  # about 10 s on 2 cores: run by .ci/run's slow stage
def test_a_server_without_the_route_password_cannot_join(tmp_path: Path) -> None:
    """The rogue nats-server of issue 13: it routed to the cluster and stored a message."""
    auth = server.LocalAuth.create(tmp_path / "creds")
    route = (server.ROUTE_USER, auth.credentials(server.ROUTE_USER).password())
    first, good, rogue = server.free_ports(3)
    member = server.NatsServer(
        tmp_path / "member",
        name="member",
        cluster=server.ClusterSpec(name="kq", port=first, peer_ports=(good,), route_auth=route),
        auth=auth,
    )
    peer = server.NatsServer(
        tmp_path / "peer",
        name="peer",
        cluster=server.ClusterSpec(name="kq", port=good, peer_ports=(first,), route_auth=route),
        auth=auth,
    )
    intruder = server.NatsServer(  # same users and cluster name, no route password
        tmp_path / "rogue", name="rogue", cluster=server.ClusterSpec(name="kq", port=rogue, peer_ports=(first, good))
    )
    nodes = [member, peer, intruder]
    try:
        for node in nodes:
            node.spawn()
        deadline = time.monotonic() + 15
        while not (member.check_ready() and peer.check_ready() and "peer" in routes(member)):
            assert time.monotonic() < deadline, member.log_tail()
            time.sleep(0.1)
        # the rogue retries its routes every second, later on a loaded machine: wait for its refusal
        deadline = time.monotonic() + 15
        while "Authentication Failure" not in member.log_path.read_text():
            assert time.monotonic() < deadline, member.log_tail()
            time.sleep(0.1)
        assert set(routes(member)) == {"peer"} and set(routes(peer)) == {"member"}
    finally:
        for node in nodes:
            node.stop()
