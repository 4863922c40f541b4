"""services/leader.py: one replica works while it holds the Lease; the other takes over when it stops.

Against the emulated API server over HTTP, with kubernetes-asyncio's leader election:
in-process replicas (intervals of work never overlap; a clean stop hands over at
once; a leader that loses its lease stops working and raises), then two
``kueue-es service dispatcher --leader-elect`` (and ``multikueue-edge``) processes on a real nats-server.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from kueue_es.events.bus.server import NatsServer
from kueue_es.events.bus.server import free_ports as server_ports
from kueue_es.services import health, leader
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors, resources
from kueue_es.sim.emulator import serve_emulator

FAST = {"lease_duration": 3, "renew_deadline": 2.0, "retry_period": 1.0}
LEASE = "kueue-es-dispatcher"


class Replica:
    """One in-process candidate whose work records when it ran."""

    def __init__(self, name: str, api: object, log: list[tuple[float, str, str]]) -> None:
        self.name, self.log = name, log
        self.health = health.Health(service="dispatcher", lease_duration=FAST["lease_duration"])
        self.stop = asyncio.Event()
        settings = leader.LeaseSettings(name=LEASE, namespace="default", identity=name, **FAST)
        self.task = asyncio.create_task(
            leader.run_with_lease(self.work, api=api, settings=settings, stop=self.stop, health=self.health)
        )

    async def work(self, service_stop: asyncio.Event) -> None:
        self.log.append((time.monotonic(), self.name, "start"))
        try:
            await service_stop.wait()
        finally:
            self.log.append((time.monotonic(), self.name, "stop"))


async def wait_until(predicate, *, timeout: float, what: str) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


def never_overlap(log: list[tuple[float, str, str]]) -> None:
    running: set[str] = set()
    for _, name, change in sorted(log):
        if change == "start":
            assert not running, f"{name} started while {running} ran: {log}"
            running.add(name)
        else:
            running.discard(name)


@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
async def test_one_works_and_a_clean_stop_hands_over_at_once() -> None:
    log: list[tuple[float, str, str]] = []
    async with serve_emulator() as emulator:
        api = await kube.make_api_client(server=emulator.url)
        try:
            first = Replica("a", api, log)
            await wait_until(lambda: first.health.role == "leader", timeout=5, what="a leads")
            second = Replica("b", api, log)
            await wait_until(lambda: second.health.role == "standby", timeout=5, what="b stands by")
            await asyncio.sleep(FAST["lease_duration"] + 1)  # a renews: b never gets in
            assert [entry[1:] for entry in log] == [("a", "start")]
            assert second.health.readiness()[0] is True  # a standby is ready: healthy, waiting
            lease = await kube.get_object(api, resources.LEASES, namespace="default", name=LEASE)
            assert lease["spec"]["holderIdentity"] == "a"

            first.stop.set()
            await first.task  # a clean stop: the work stopped, the lease released
            stopped_at = log[-1][0]
            await wait_until(lambda: second.health.role == "leader", timeout=5, what="b takes over")
            started_at = next(t for t, name, change in log if name == "b" and change == "start")
            # released, so b did not wait for the lease to expire
            assert started_at - stopped_at < FAST["lease_duration"]
            lease = await kube.get_object(api, resources.LEASES, namespace="default", name=LEASE)
            assert lease["spec"]["holderIdentity"] == "b"
            second.stop.set()
            await second.task
        finally:
            await api.close()
    never_overlap(log)
    assert [entry[1:] for entry in log] == [("a", "start"), ("a", "stop"), ("b", "start"), ("b", "stop")]


async def test_a_leader_that_loses_its_lease_stops_working() -> None:
    """Someone else holds the Lease now (a partition healed, say): the work is stopped and LeadershipLost raised."""
    log: list[tuple[float, str, str]] = []
    async with serve_emulator() as emulator:
        api = await kube.make_api_client(server=emulator.url)
        try:
            only = Replica("a", api, log)
            await wait_until(lambda: only.health.role == "leader", timeout=5, what="a leads")
            while True:  # the leader may renew between our read and our write (409): read again
                lease = await kube.get_object(api, resources.LEASES, namespace="default", name=LEASE)
                lease["spec"]["holderIdentity"] = "intruder"
                try:
                    await kube.replace_object(api, resources.LEASES, namespace="default", name=LEASE, body=lease)
                    break
                except errors.ConflictError:
                    continue
            with pytest.raises(leader.LeadershipLost, match="lost the lease default/kueue-es-dispatcher"):
                async with asyncio.timeout(FAST["renew_deadline"] + 5):
                    await only.task
            await asyncio.sleep(0.1)  # the library cancels the work without waiting for it
            assert [entry[1:] for entry in log] == [("a", "start"), ("a", "stop")]
            lease = await kube.get_object(api, resources.LEASES, namespace="default", name=LEASE)
            assert lease["spec"]["holderIdentity"] == "intruder"  # not ours to release
        finally:
            await api.close()


def free_port() -> int:
    """A --health-port for a dispatcher process, below the ephemeral range (server.free_ports)."""
    return server_ports(1)[0]


async def probe(session: aiohttp.ClientSession, port: int) -> dict:
    try:
        async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
            return json.loads(await response.text())
    except aiohttp.ClientError:
        return {}


@pytest.mark.slow
@pytest.mark.parametrize("service", ["dispatcher", "multikueue-edge"])
async def test_two_service_processes_one_acts_and_the_other_takes_over(tmp_path: Path, service: str) -> None:
    """Two ``service NAME --leader-elect`` processes: one works, the other stands by and takes over. The
    MultiKueue edge too: `up --leader-elect` gave it no lease and two instances both wrote to the workers
    (found by a new user's ops trial)."""
    async with NatsServer(store_dir=tmp_path / "nats") as server, serve_emulator() as emulator:
        ports = [free_port(), free_port()]
        processes = []
        for port in ports:
            args = ["service", service, "--nats", server.url, "--kube-server", emulator.url, "--leader-elect"]
            args += ["--leader-elect-namespace", "default", "--health-port", str(port), "--health-host", "127.0.0.1"]
            args += [f"--leader-elect-{key.replace('_', '-')}={value}" for key, value in FAST.items()]
            with (tmp_path / f"{service}-{port}.log").open("wb") as sink:
                processes.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "kueue_es.cli", *args, stdout=sink, stderr=sink, env=dict(os.environ)
                    )
                )
            await asyncio.sleep(1.0 if port == ports[0] else 0)  # the first one leads
        try:
            async with aiohttp.ClientSession() as session:
                states: list[dict] = []
                async with asyncio.timeout(30):
                    while sorted(s.get("role", "") for s in states) != ["leader", "standby"] or not all(
                        s.get("ready") for s in states
                    ):
                        await asyncio.sleep(0.2)
                        states = [await probe(session, port) for port in ports]
                lead = next(i for i, s in enumerate(states) if s["role"] == "leader")
                assert states[lead]["nats_connected"] is True  # the leader works ...
                assert "nats_connected" not in states[1 - lead]  # ... the standby does not even connect
                async with session.get(f"http://127.0.0.1:{ports[1 - lead]}/metrics") as response:
                    metrics = await response.text()
                assert f'kueue_es_nats_connected{{service="{service}"}} 0.0' in metrics
                assert f'kueue_es_leader{{service="{service}"}} 0.0' in metrics

                processes[lead].send_signal(signal.SIGTERM)
                assert await asyncio.wait_for(processes[lead].wait(), timeout=15) == 0
                async with asyncio.timeout(FAST["lease_duration"] + 10):
                    while (state := await probe(session, ports[1 - lead])).get("role") != "leader" or not state.get(
                        "ready"
                    ):
                        await asyncio.sleep(0.2)
                assert state["nats_connected"] is True
            api = await kube.make_api_client(server=emulator.url)
            try:
                name = f"kueue-es-{service}"
                lease = await kube.get_object(api, resources.LEASES, namespace="default", name=name)
            finally:
                await api.close()
            log = (tmp_path / f"{service}-{ports[1 - lead]}.log").read_text()
            assert lease["spec"]["holderIdentity"] in log  # the survivor's identity holds it
        finally:
            for process in processes:
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
            for process in processes:
                await asyncio.wait_for(process.wait(), timeout=15)


def test_cli_lease_defaults_are_the_settings_defaults() -> None:
    from kueue_es import cli

    defaults = leader.LeaseSettings(name="x")
    assert (cli.LEASE_DURATION, cli.RENEW_DEADLINE, cli.RETRY_PERIOD) == (
        defaults.lease_duration,
        defaults.renew_deadline,
        defaults.retry_period,
    )
