"""The NATS users of deploy/base/nats-accounts.conf, on a real nats-server.

The server runs with the deployment's own accounts file and passwords from the
environment, as the StatefulSet does; each service's user then does what that
service does on the bus (events/bus/nats.py: connect and ensure the stream, read
through an ordered consumer, single reads, publish, commit a batch, the
dispatcher's durable consumer) and is refused what it must not do. A refused
publish gets no answer (the server reports a permissions violation), so those
calls time out after the short bus timeout used here; the violations are then
checked in the server's log.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kueue_es.events.bus import base, permissions, server
from kueue_es.events.bus import nats as nats_bus

ACCOUNTS = Path(__file__).resolve().parents[2] / "deploy" / "base" / "nats-accounts.conf"
USERS = (
    "admin",
    "watcher",
    "admitter",
    "preemptor",
    "tas-placer",
    "multikueue",
    "dispatcher",
    "multikueue-edge",
    "reader",
    "compactor",
    "publisher",
)
TIMEOUT = 0.5


def env_name(user: str) -> str:
    return f"KQ_{user.upper().replace('-', '_')}_PASSWORD"


PASSWORDS = {user: f"pw-{user}-0123456789abcdef" for user in USERS}


class AccountsServer(server.NatsServer):
    """A NatsServer whose config includes the deployment's accounts file, passwords in its environment."""

    def spawn(self) -> None:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(ACCOUNTS, self.store_dir / ACCOUNTS.name)
        lines = [f"{key}: {value!r}".replace("'", '"') for key, value in self._config().items() if key != "jetstream"]
        lines.append(f'jetstream {{ store_dir: "{self.store_dir}" }}')
        lines.append(f"include {ACCOUNTS.name}")
        config = self.store_dir / "nats-server.conf"
        config.write_text("\n".join(lines) + "\n")
        env = {**os.environ, **{env_name(u): p for u, p in PASSWORDS.items()}}
        preexec = functools.partial(server.die_with_parent, os.getpid())
        with self.log_path.open("ab") as log_file:
            self._process = subprocess.Popen(
                [str(server.find_binary()), "-c", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                preexec_fn=preexec,  # noqa: PLW1509 - as NatsServer.spawn
            )
        server._LIVE.add(self)


@pytest.fixture(scope="module")
def nats_server() -> AsyncIterator[AccountsServer]:
    with AccountsServer() as running:
        asyncio.run(nats_bus.ensure_log_stream(url(running, "admin"), timeout=5.0))  # as the Job nats-setup does
        yield running


def test_the_accounts_file_is_generated_from_the_permission_table() -> None:
    """The deployment's users are the ones `up` and `demo` run (tests/bus/test_auth.py checks those)."""
    assert ACCOUNTS.read_text() == permissions.accounts_conf(), (
        "deploy/base/nats-accounts.conf is not up to date: "
        "python -m kueue_es.events.bus.permissions > deploy/base/nats-accounts.conf"
    )
    assert USERS == permissions.USERS
    assert all(env_name(user) == permissions.password_variable(user) for user in USERS)


def url(running: AccountsServer, user: str) -> str:
    return running.url.replace("nats://", f"nats://{user}:{PASSWORDS[user]}@")


def msg(subject: str, msg_id: str) -> base.OutgoingMessage:
    return base.OutgoingMessage(subject=subject, data=b"{}", msg_id=msg_id, headers={"Kq-Type": "Test"})


async def refused(call: object) -> bool:
    """Whether awaiting ``call`` fails (a refused publish times out and becomes BusError)."""
    try:
        await call  # type: ignore[misc]
    except (TimeoutError, base.BusError):
        return True
    return False


async def read_all(bus: base.Bus, *, subjects: tuple[str, ...] = ("kq.>",)) -> list[str]:
    out = []
    last = await bus.last_seq()
    if not last:
        return out
    async for message in bus.read(subjects=subjects):
        out.append(message.subject)
        if message.seq >= last or message.pending == 0:
            break
    return out


@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
async def test_each_service_does_its_part_and_only_that(
    nats_server: AccountsServer, capfd: pytest.CaptureFixture[str]
) -> None:
    watcher = await nats_bus.connect(url(nats_server, "watcher"), timeout=TIMEOUT)
    admitter = await nats_bus.connect(url(nats_server, "admitter"), timeout=TIMEOUT)
    dispatcher = await nats_bus.connect(url(nats_server, "dispatcher"), timeout=TIMEOUT)
    reader = await nats_bus.connect(url(nats_server, "reader"), timeout=TIMEOUT)
    try:
        # watcher: facts
        await watcher.publish(msg("kq.in.wl.ns.a", "fact:a"))
        assert await refused(watcher.publish(msg("kq.dec.p0.wl.ns.a", "forged:decision")))
        assert await refused(watcher.publish(msg("kq.disp.local.wl.ns.a", "forged:dispatch")))
        # admitter: reads the facts, commits a decision batch under the head
        assert await read_all(admitter) == ["kq.in.wl.ns.a"]
        head_seq = await admitter.last_subject_seq("kq.dec.p0.head.*")
        await admitter.commit_batch(
            head=msg("kq.dec.p0.head.admitter", "admitter:p0:1:0"),
            expected_head_seq=head_seq,
            rest=[msg("kq.dec.p0.wl.ns.a", "admitter:p0:1:1")],
            head_filter="kq.dec.p0.head.*",
        )
        assert (await admitter.get(2)).subject == "kq.dec.p0.head.admitter"
        assert await refused(admitter.publish(msg("kq.dec.p0.head.preemptor", "forged:other-head")))
        assert await refused(admitter.publish(msg("kq.in.wl.ns.b", "forged:fact")))
        # dispatcher: its durable consumer on the decisions, dispatch results, facts of gone workloads
        consumer = await dispatcher.durable(name="dispatcher", subjects=("kq.dec.*.wl.>",))
        deliveries = await consumer.fetch(batch=10, timeout=2.0)
        assert [d.message.subject for d in deliveries] == ["kq.dec.p0.wl.ns.a"]
        for delivery in deliveries:
            await consumer.ack(delivery)
        await dispatcher.publish(msg("kq.disp.local.wl.ns.a", "disp:local:3"))
        await dispatcher.publish(msg("kq.in.wl.ns.a", "stopped:a"))
        assert await refused(dispatcher.publish(msg("kq.in.cq._.q", "forged:queue")))
        assert await refused(dispatcher.publish(msg("kq.dec.p0.head.admitter", "forged:head")))
        # reader (replay): reads everything, writes nothing, cannot take the dispatcher's consumer
        assert len(await read_all(reader)) == 5
        assert await refused(reader.publish(msg("kq.in.wl.ns.c", "forged:reader")))
        assert await refused(reader.durable(name="dispatcher", subjects=("kq.dec.*.wl.>",)))
        assert await refused(watcher.durable(name="dispatcher", subjects=("kq.dec.*.wl.>",)))
    finally:
        for bus in (watcher, admitter, dispatcher, reader):
            await bus.close()
    captured = capfd.readouterr()  # the bus logs each violation the server reports to the client
    reported = captured.out + captured.err  # stdout by default, stderr once a CLI configured logging
    for subject in ("kq.dec.p0.wl.ns.a", "kq.in.wl.ns.b", "kq.dec.p0.head.preemptor", "kq.in.cq._.q", "kq.in.wl.ns.c"):
        assert f'permissions violation for publish to "{subject}"' in reported, reported
    assert "consumer.info.kq_log.dispatcher" in reported


@pytest.mark.parametrize("user", ["admitter", "preemptor", "tas-placer", "multikueue"])
async def test_deciders_commit_decisions(nats_server: AccountsServer, user: str) -> None:
    bus = await nats_bus.connect(url(nats_server, user), timeout=TIMEOUT)
    try:
        partition = user.replace("-", "")
        head = f"kq.dec.{partition}.head.{user}"
        await bus.commit_batch(
            head=msg(head, f"{user}:0"), expected_head_seq=0, rest=[], head_filter=f"kq.dec.{partition}.head.*"
        )
        assert await bus.last_subject_seq(head) > 0
        assert await refused(bus.publish(msg("kq.disp.local.wl.ns.x", f"{user}:forged")))
        other = next(u for u in permissions.DECIDERS if u != user)
        assert await refused(bus.publish(msg(f"kq.dec.{partition}.head.{other}", f"{user}:forged-head")))
    finally:
        await bus.close()


async def test_the_multikueue_edge_writes_worker_facts_and_remote_dispatch_results_only(
    nats_server: AccountsServer,
) -> None:
    """The MultiKueue edge publishes its facts about the workers and the results of its remote writes;
    not the dispatcher's results for the local cluster, nor another fact, nor a decision."""
    bus = await nats_bus.connect(url(nats_server, "multikueue-edge"), timeout=TIMEOUT)
    try:
        for subject in ("kq.in.remote.worker1.ns.wl", "kq.in.worker.worker1", "kq.disp.worker1.wl.ns.wl"):
            await bus.publish(msg(subject, f"edge:{subject}"))
        for subject in ("kq.disp.local.wl.ns.wl", "kq.in.wl.ns.wl", "kq.dec.p0.wl.ns.wl", "kq.dec.p0.head.multikueue"):
            assert await refused(bus.publish(msg(subject, f"edge:forged:{subject}"))), subject
    finally:
        await bus.close()


async def test_wrong_password_is_refused(nats_server: AccountsServer) -> None:
    with pytest.raises(base.BusError) as err:
        await nats_bus.connect(nats_server.url.replace("nats://", "nats://watcher:wrong@"), timeout=TIMEOUT)
    assert "wrong" not in str(err.value)
