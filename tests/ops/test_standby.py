"""Standby deciders as processes: two admitters on one nats-server, one commits, the other takes over.

Two ``kueue-es service admitter`` processes (each as NATS user ``admitter`` on a server
with the users of events/bus/permissions.py) share the 16 partition slots ``admitter.s<k>``:
the one holding the slot of the only ClusterQueue's partition admits, the other folds and
commits nothing; after a SIGKILL of that one, the other takes its slots over once they stop
moving (lease duration 1.5 s) and admits the next workload, asking the quota the workloads deleted before the
kill held (Kueue's e2e ha_test.go HA Failover). The takeover time is printed (``pytest -s``); the issue's bound
is 5 s. Kueue's metrics come from the active replica only, and the one that takes over
exports the counts of the whole log (issue 16).
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

from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus import permissions
from kueue_es.events.bus.server import LocalAuth, NatsServer, free_ports
from kueue_es.services.standby import DEFAULT_SLOTS, slot_of
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload
from tests.ops.test_health import samples

PARTITION = "q-cq"  # a ClusterQueue without a cohort is its own partition (docs/design.md, Partitions)
TAKEOVER_BOUND_S = 5.0  # issue 15: a kill of the active replica is taken over within 5 s


async def readyz(session: aiohttp.ClientSession, port: int) -> dict:
    try:
        async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
            return json.loads(await response.text())
    except aiohttp.ClientError:
        return {}


async def metrics(session: aiohttp.ClientSession, port: int) -> dict:
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        return samples(await response.text())


async def decided(bus: nats_bus.NatsBus, name: str) -> str:
    """The type of the last decision about workload ``default/name``, once there is one.

    Since schema 17 a decision is carried in its cycle's DecisionRecord (on ``kq.dec.<p>.head.*``,
    ``types.with_carried``); before, it was a message of its own on ``kq.dec.<p>.wl.<ns>.<name>``:
    every message of the partition's decisions is read, so either layout is found."""
    last = ""
    next_seq = 1
    while True:
        end = await bus.last_seq()
        for seq in range(next_seq, end + 1):
            message = await bus.get(seq)
            if not message.subject.startswith(f"kq.dec.{PARTITION}."):
                continue
            for event in types.with_carried(codec.decode(message.data)):
                ref = getattr(event, "workload", None)
                if isinstance(ref, types.WorkloadRef) and (ref.namespace, ref.name) == ("default", name):
                    last = type(event).__name__
        next_seq = end + 1
        if last:
            return last
        await asyncio.sleep(0.02)


@pytest.mark.slow
async def test_two_admitters_one_commits_and_the_standby_takes_over_a_kill(tmp_path: Path) -> None:
    auth = LocalAuth.create(tmp_path / "creds")
    async with NatsServer(store_dir=tmp_path / "nats", auth=auth) as server:
        admin = auth.credentials(permissions.ADMIN)
        await nats_bus.ensure_log_stream(server.url, credentials=admin)  # and the lease bucket
        bus = await nats_bus.connect(server.url, credentials=admin)
        for doc in (flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 8}}), local_queue("lq", "cq")):
            await bus.publish(subjects.fact_message(kueue_fact(doc)))
        ports = free_ports(2)
        credentials = auth.credentials("admitter")
        env = {
            **os.environ,
            "KUEUE_ES_NATS_USER": "admitter",
            "KUEUE_ES_NATS_PASSWORD_FILE": str(credentials.password_file),
        }
        processes = []
        for port in ports:
            args = ["service", "admitter", "--nats", server.url, "--health-port", str(port)]
            with (tmp_path / f"admitter-{port}.log").open("wb") as sink:
                processes.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "kueue_es.cli", *args, stdout=sink, stderr=sink, env=env
                    )
                )
        cq_slot = slot_of(PARTITION, DEFAULT_SLOTS)
        try:
            async with aiohttp.ClientSession() as session:
                states: list[dict] = []
                async with asyncio.timeout(60):  # the 16 slots split between the two, and both ready
                    while not (
                        all(s.get("ready") and s.get("slots") for s in states)
                        and sum(len(s["slots"]) for s in states) == DEFAULT_SLOTS
                    ):
                        await asyncio.sleep(0.1)
                        states = [await readyz(session, port) for port in ports]
                active = next(i for i, s in enumerate(states) if cq_slot in s["slots"])  # holds the queue's slot
                standby = 1 - active
                kueue = next(i for i, s in enumerate(states) if 0 in s["slots"])  # Kueue's metrics: slot 0's holder
                assert states[standby]["caught_up"] is True

                for i in range(3):
                    await bus.publish(subjects.fact_message(kueue_fact(workload(f"w{i}", created=i, cpu="1"))))
                async with asyncio.timeout(30):
                    kinds = [await decided(bus, f"w{i}") for i in range(3)]
                assert kinds == ["WorkloadAdmitted"] * 3  # each reserved and admitted by one WorkloadAdmitted
                label = (("service", "admitter"),)
                folded = ("kueue_es_events_folded_total", label)
                admitted_cq = (("cluster_queue", "cq"), ("priority_class", ""), ("replica_role", "leader"))
                last_seq = await bus.last_seq()

                def settled(both: list[dict]) -> bool:  # each replica folds on its own pull: it may trail
                    admitted = both[kueue].get(("kueue_admitted_workloads_total", admitted_cq), 0)
                    return both[standby].get(folded, 0) >= last_seq - 1 and admitted >= 3

                async with asyncio.timeout(10):
                    while not settled(both := [await metrics(session, port) for port in ports]):
                        await asyncio.sleep(0.1)
                assert both[active]["kueue_es_decisions_committed_total", label] >= 1
                assert both[standby]["kueue_es_decisions_committed_total", label] == 0  # not its partition ...
                assert both[standby]["kueue_es_commit_conflicts_total", label] == 0
                assert both[standby][folded] >= last_seq - 1  # ... folding
                by_partition = (("partition", PARTITION), ("role", "admit"), ("service", "admitter"))
                assert both[active]["kueue_es_decider_commits_total", by_partition] >= 1
                assert both[standby].get(("kueue_es_decider_commits_total", by_partition), 0) == 0
                # Kueue's metrics (docs/metrics.md): only from the replica holding slot 0
                assert both[kueue]["kueue_admitted_workloads_total", admitted_cq] == 3
                pending = (("cluster_queue", "cq"), ("replica_role", "leader"), ("status", "active"))
                assert both[kueue]["kueue_pending_workloads", pending] == 0
                other = both[1 - kueue]
                assert not [key for key in other if key[0].startswith("kueue_") and "kueue_es_" not in key[0]]

                # Kueue's e2e sequential/baseline/ha_test.go "should admit a workload after leader failover when a
                # previously admitted workload was deleted": the admitted workloads are deleted, then the active
                # replica is killed; the next workload asks the whole quota, which the survivor admits only if its
                # own fold let the deleted ones' usage go
                for i in range(3):
                    await bus.publish(
                        subjects.fact_message(types.ObjectDeleted(kind="Workload", namespace="default", name=f"w{i}"))
                    )
                processes[active].send_signal(signal.SIGKILL)
                killed = time.monotonic()
                await bus.publish(subjects.fact_message(kueue_fact(workload("after-kill", created=9, cpu="8"))))
                async with asyncio.timeout(30):
                    kind = await decided(bus, "after-kill")
                admitted = time.monotonic() - killed
                assert kind == "WorkloadAdmitted"
                async with asyncio.timeout(30):  # the survivor ends up with every slot
                    while len((state := await readyz(session, ports[standby])).get("slots", [])) < DEFAULT_SLOTS:
                        await asyncio.sleep(0.1)
                assert state["role"] == "active" and state["ready"] is True
                survivor = await metrics(session, ports[standby])
                assert survivor["kueue_es_decider_commits_total", by_partition] >= 1
                # the holder of slot 0 now counts the admissions of the old one too: folded from the log
                assert survivor["kueue_admitted_workloads_total", admitted_cq] == 4
                print(f"\nstandby admitter took over and admitted the next workload {admitted:.2f} s after SIGKILL")
                assert admitted < TAKEOVER_BOUND_S
        finally:
            for process in processes:
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
            codes = [await asyncio.wait_for(process.wait(), timeout=15) for process in processes]
            await bus.close()
        assert codes[standby] == 0 and codes[active] == -signal.SIGKILL
        log = (tmp_path / f"admitter-{ports[standby]}.log").read_text()
        assert '"lease_acquired"' in log and '"why": "expired"' in log
        assert '"lease_released"' in log  # a clean stop releases the slots


def test_cli_standby_defaults_are_the_settings_defaults() -> None:
    from kueue_es import cli
    from kueue_es.services.standby import StandbySettings

    defaults = StandbySettings()
    assert (cli.STANDBY_LEASE_DURATION, cli.STANDBY_RENEW_DEADLINE, cli.STANDBY_RETRY_PERIOD) == (
        defaults.lease_duration,
        defaults.renew_deadline,
        defaults.retry_period,
    )


def test_cli_refuses_a_standby_lease_where_it_does_not_apply(capsys: pytest.CaptureFixture[str]) -> None:
    from kueue_es.cli import main

    assert main(["service", "watcher", "--nats", "nats://127.0.0.1:1", "--standby-lease"]) == 2
    assert "--standby-lease is for the deciders" in capsys.readouterr().err
    args = ["service", "admitter", "--nats", "nats://127.0.0.1:1", "--standby-renew-deadline", "2"]
    assert main(args) == 2  # the renew deadline must be below the lease duration (1.5 s)
    assert "lease duration > renew deadline > retry period" in capsys.readouterr().err
    assert main(["service", "admitter", "--nats", "nats://127.0.0.1:1", "--leader-elect"]) == 2
    assert "--standby-lease" in capsys.readouterr().err
