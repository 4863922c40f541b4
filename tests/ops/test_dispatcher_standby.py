"""The dispatcher's warm standby as processes: two dispatchers on the NATS lease, a kill, the next Job start.

nats-server with the users of events/bus/permissions.py, the emulated API server, the
watcher and the admitter (``Supervisor``), and two ``kueue-es service dispatcher
--standby-lease`` processes as NATS user ``dispatcher``: one holds ``dispatcher.p0`` in
KQ_LEASES and starts Jobs, the other folds the log and stands by. After a SIGKILL of the
holder a new Job is applied: the standby takes the lease over and starts it. The bound
(issue 15, the dispatcher's part of recovery within 2 s): the Job's DispatchApplied
follows the later of the kill and the Job's admission by less than 2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from kueue_es.events import codec, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus import permissions
from kueue_es.events.bus.server import LocalAuth, NatsServer, free_ports
from kueue_es.services.kube import client as kube
from kueue_es.sim.emulator import serve_emulator
from kueue_es.supervisor import Supervisor
from tests.kube import examples
from tests.ops.test_standby import metrics, readyz

pytestmark = pytest.mark.slow
EXAMPLES = examples.EXAMPLES
START_BOUND_S = 2.0


async def kueue_es(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kueue_es.cli", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, out.decode()
    return out.decode()


async def first(bus: nats_bus.NatsBus, kind: type, *, after: int, timeout: float = 60) -> tuple[float, types.Event]:
    """The first event of ``kind`` after sequence ``after`` (an entry of a DispatchBatchApplied as its
    DispatchApplied, a decision carried in a DecisionRecord as that decision: schema 17), and
    time.monotonic() when it was read."""
    async with asyncio.timeout(timeout):
        async for message in bus.read(start_seq=after + 1):
            event = codec.decode(message.data)
            for one in types.dispatch_results(event) or types.with_carried(event):
                if isinstance(one, kind):
                    return time.monotonic(), one
    raise AssertionError("unreachable")


async def test_the_standby_dispatcher_starts_the_next_job_after_a_kill(tmp_path: Path) -> None:
    auth = LocalAuth.create(tmp_path / "creds")
    async with NatsServer(store_dir=tmp_path / "nats", auth=auth) as server, serve_emulator() as emulator:
        admin = auth.credentials(permissions.ADMIN)
        await nats_bus.ensure_log_stream(server.url, credentials=admin)  # and the lease bucket
        bus = await nats_bus.connect(server.url, credentials=admin)
        kubeconfig = tmp_path / "kubeconfig"
        kube.write_kubeconfig(kubeconfig, server=emulator.url)
        supervisor = Supervisor(
            nats_url=server.url, log_dir=tmp_path / "logs", kube_args=["--kube-server", emulator.url], auth=auth
        )
        await supervisor.start(("watcher", "admitter"))
        ports = free_ports(2)
        credentials = auth.credentials("dispatcher")
        env = {
            **os.environ,
            "KUEUE_ES_NATS_USER": "dispatcher",
            "KUEUE_ES_NATS_PASSWORD_FILE": str(credentials.password_file),
        }
        processes = []
        for port in ports:
            args = ["service", "dispatcher", "--nats", server.url, "--kube-server", emulator.url, "--standby-lease"]
            args += ["--health-port", str(port)]
            with (tmp_path / f"dispatcher-{port}.log").open("wb") as sink:
                processes.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "kueue_es.cli", *args, stdout=sink, stderr=sink, env=env
                    )
                )
        try:
            async with aiohttp.ClientSession() as session:
                states: list[dict] = []
                async with asyncio.timeout(60):
                    while sorted(s.get("role", "") for s in states) != ["active", "standby"] or not all(
                        s.get("ready") for s in states
                    ):
                        await asyncio.sleep(0.1)
                        states = [await readyz(session, port) for port in ports]
                active = next(i for i, s in enumerate(states) if s["role"] == "active")
                standby = 1 - active
                assert states[standby]["lease"] == "dispatcher.p0"

                await kueue_es(
                    "apply",
                    "-f",
                    str(EXAMPLES / "admin/single-clusterqueue-setup.yaml"),
                    "--kubeconfig",
                    str(kubeconfig),
                )
                await kueue_es("apply", "-f", str(EXAMPLES / "jobs/sample-job.yaml"), "--kubeconfig", str(kubeconfig))
                await first(bus, types.DispatchApplied, after=0)
                label = (("service", "dispatcher"),)
                writes, folded = ("kueue_es_dispatch_writes_total", label), ("kueue_es_events_folded_total", label)
                async with asyncio.timeout(10):  # each replica counts on its own loop: it may trail the bus
                    while not (
                        (both := [await metrics(session, port) for port in ports])[active].get(writes, 0) >= 1
                        and both[standby].get(folded, 0) >= 3
                    ):
                        await asyncio.sleep(0.1)
                assert both[active]["kueue_es_dispatch_writes_total", label] == 1
                assert both[standby]["kueue_es_dispatch_writes_total", label] == 0  # it stands by ...
                assert both[standby]["kueue_es_events_folded_total", label] >= 3  # ... folding

                after = await bus.last_seq()
                processes[active].send_signal(signal.SIGKILL)
                killed = time.monotonic()
                await kueue_es("apply", "-f", str(EXAMPLES / "jobs/sample-job.yaml"), "--kubeconfig", str(kubeconfig))
                (admitted_at, _), (started_at, applied) = await asyncio.gather(
                    first(bus, types.WorkloadAdmitted, after=after), first(bus, types.DispatchApplied, after=after)
                )
                assert isinstance(applied, types.DispatchApplied) and applied.action == "StartJob"
                state = await readyz(session, ports[standby])
                assert state["role"] == "active" and state["ready"] is True
                survivor = await metrics(session, ports[standby])
                assert survivor["kueue_es_dispatch_writes_total", label] == 1
                waited = started_at - max(killed, admitted_at)
                print(
                    f"\nstandby dispatcher started the next Job {started_at - killed:.2f} s after the SIGKILL,"
                    f" {waited:.2f} s after the later of the kill and its admission"
                    f" ({admitted_at - killed:.2f} s after the kill)"
                )
                assert waited < START_BOUND_S
            api = await kube.make_api_client(server=emulator.url)
            try:
                jobs, _ = await kube.list_objects(api, kube.ref_for("batch/v1", "Job"), namespace="default")
            finally:
                await api.close()
            assert len(jobs) == 2 and all(job["spec"].get("suspend") is False for job in jobs)
            # the killed holder's results and the standby's: each decision answered once on the log (a decision
            # carried in a DecisionRecord, schema 17, is its record's sequence and its place in the record)
            answered = []
            for seq in range(1, await bus.last_seq() + 1):
                message = await bus.get(seq)
                if message.subject.startswith("kq.disp."):
                    event = codec.decode(message.data)
                    if isinstance(event, types.DispatchBatchApplied):
                        answered += [(e.decision_seq, e.decision_index) for e in event.entries]
                    else:
                        answered += [(r.decision_seq, 0) for r in types.dispatch_results(event)]
            assert len(answered) >= 2 and len(answered) == len(set(answered)), answered
        finally:
            for process in processes:
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
            codes = [await asyncio.wait_for(process.wait(), timeout=15) for process in processes]
            with contextlib.suppress(Exception):
                await supervisor.stop()
            await bus.close()
        assert codes[standby] == 0 and codes[active] == -signal.SIGKILL
        log = (tmp_path / f"dispatcher-{ports[standby]}.log").read_text()
        assert '"lease_acquired"' in log and '"why": "expired"' in log and '"dispatcher_leading"' in log
        assert '"lease_released"' in log  # a clean stop releases the lease
