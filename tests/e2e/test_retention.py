"""A bounded log end to end (issue 15, point 6): nats-server with a user per service, the five
services as processes, the emulated API server. Jobs are admitted and finish; ``kueue-es compact
--once`` (as NATS user compactor) verifies and writes a snapshot and purges the log below it; every
service is restarted and starts from the snapshot; new Jobs are admitted and finish; ``kueue-es
replay`` (as reader) re-checks every decision after the snapshot and exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path

import pytest

from kueue_es.events import codec, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.server import LocalAuth, NatsServer
from kueue_es.services.kube import client as kube
from kueue_es.sim.emulator import serve_emulator
from kueue_es.sim.kubelet import SimulatedKubelet
from kueue_es.supervisor import SERVICES, Supervisor
from tests.e2e.test_pipeline import EXAMPLES, kueue_es

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def count_after(bus: nats_bus.NatsBus, after: int, want: dict[str, int], *, timeout: float) -> dict[str, int]:
    """Read the log past ``after`` until it holds ``want[type]`` events of each type."""
    seen = dict.fromkeys(want, 0)

    async def read() -> None:
        async for message in bus.read(start_seq=after + 1):
            event = codec.decode(message.data)
            # a DispatchBatchApplied counts as the DispatchApplied of each entry, a record as itself and the
            # QuotaReleased of each finished release it carries
            carried = types.with_carried(event)
            for one in types.dispatch_results(event) if isinstance(event, types.DispatchBatchApplied) else carried:
                name = type(one).__name__
                if name in seen:
                    seen[name] += 1
            if all(seen[n] >= k for n, k in want.items()):
                return

    try:
        async with asyncio.timeout(timeout):
            await read()
    except TimeoutError:
        raise AssertionError(f"wanted {want} after #{after} within {timeout}s, saw {seen}") from None
    return seen


async def as_user(auth: LocalAuth, user: str, *args: str) -> tuple[int, str]:
    """``kueue-es ARGS`` connecting to NATS as ``user`` (through the environment, as replay reads it)."""
    credentials = auth.credentials(user)
    env = {**os.environ, "KUEUE_ES_NATS_USER": user, "KUEUE_ES_NATS_PASSWORD_FILE": str(credentials.password_file)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kueue_es.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    out, _ = await process.communicate()
    return process.returncode or 0, out.decode()


async def test_snapshot_purge_restart_and_replay(tmp_path: Path) -> None:
    auth = LocalAuth.create(tmp_path / "creds")
    async with (
        NatsServer(store_dir=tmp_path / "nats", auth=auth) as server,
        serve_emulator() as emulator,
    ):
        await nats_bus.ensure_log_stream(server.url, credentials=auth.credentials("admin"))
        kube.write_kubeconfig(tmp_path / "kubeconfig", server=emulator.url)
        kubeconfig = str(tmp_path / "kubeconfig")
        services = Supervisor(
            nats_url=server.url, log_dir=tmp_path / "logs", kube_args=["--kube-server", emulator.url], auth=auth
        )
        await services.start()
        api = await kube.make_api_client(server=emulator.url)
        kubelet = asyncio.create_task(SimulatedKubelet(api, default_duration_seconds=1.0).run())
        bus = await nats_bus.connect(server.url, credentials=auth.credentials("admin"))
        try:
            code, out = await kueue_es(
                "apply", "-f", str(EXAMPLES / "admin/single-clusterqueue-setup.yaml"), "--kubeconfig", kubeconfig
            )
            assert code == 0, out
            job = str(EXAMPLES / "jobs/sample-job.yaml")
            code, out = await kueue_es("apply", "-f", job, "-f", job, "-f", job, "-f", job, "--kubeconfig", kubeconfig)
            assert code == 0, out
            await count_after(bus, 0, {"WorkloadAdmitted": 4, "WorkloadFinished": 4, "QuotaReleased": 4}, timeout=90)
            await asyncio.sleep(2)  # the dispatcher's last results and acks

            code, out = await as_user(
                auth, "compactor", "compact", "--nats", server.url, "--once", "--retain-bytes", "1", "--settle", "1s"
            )
            assert code == 0, out
            written = int(out.split("snapshot #", 1)[1].split(" ", 1)[0])
            assert f"log starts at #{written}" in out, out
            assert await bus.first_seq() == written > 1

            codes = await services.stop()
            assert codes == {name: 0 for name in codes}, codes
            services.running.clear()
            await services.start()
            code, out = await kueue_es("apply", "-f", job, "-f", job, "--kubeconfig", kubeconfig)
            assert code == 0, out
            seen = await count_after(
                bus, written, {"WorkloadAdmitted": 2, "DispatchApplied": 2, "WorkloadFinished": 2}, timeout=90
            )
            assert seen["WorkloadAdmitted"] == 2  # the four before the snapshot are not admitted again
        finally:
            kubelet.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await kubelet
            codes = await services.stop()
            await api.close()
            await bus.close()
        assert codes == {name: 0 for name in codes}, codes
        for name in SERVICES:
            text = (tmp_path / "logs" / f"{name}.log").read_text()
            assert '"started_from_checkpoint"' in text and f"KQ_SNAPSHOTS/{written:012d}" in text, name
        code, out = await as_user(auth, "reader", "replay", "--nats", server.url)
        assert code == 0, out
        assert f"log starts at #{written}, covered by snapshot" in out, out
        assert "0 differed, 0 not re-checked" in out, out
