"""End to end through real processes: nats-server, the five services, the emulated API server.

Kueue's own manifests are applied as they are with ``kueue-es apply -f``; the job
must be admitted, started, finished, and its quota released; then replay must
re-check every decision.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import codec, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.server import NatsServer
from kueue_es.replay import replay_bus
from kueue_es.services.kube import client as kube
from kueue_es.sim.emulator import serve_emulator
from kueue_es.sim.kubelet import SimulatedKubelet
from kueue_es.supervisor import Supervisor

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "kueue-examples"


async def kueue_es(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kueue_es.cli", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await process.communicate()
    return process.returncode or 0, out.decode()


async def wait_for_events(bus, want: dict[str, int], *, timeout: float) -> dict[str, list[types.Event]]:
    """Read the log until it holds at least ``want[type]`` events of each type."""
    seen: dict[str, list[types.Event]] = {name: [] for name in want}

    async def read() -> None:
        async for message in bus.read(start_seq=1):
            decoded = codec.decode(message.data)
            # a DispatchBatchApplied counts as the DispatchApplied of each entry, a record as itself and the
            # QuotaReleased of each finished release it carries
            for event in (
                types.dispatch_results(decoded)
                if isinstance(decoded, types.DispatchBatchApplied)
                else types.with_carried(decoded)
            ):
                name = type(event).__name__
                if name in seen:
                    seen[name].append(event)
            if all(len(seen[n]) >= k for n, k in want.items()):
                return

    try:
        async with asyncio.timeout(timeout):
            await read()
    except TimeoutError:
        counts = {name: len(events) for name, events in seen.items()}
        raise AssertionError(f"wanted {want} events within {timeout}s, saw {counts}") from None
    return seen


async def test_kueue_examples_admitted_and_finished(tmp_path: Path) -> None:
    """single-clusterqueue-setup.yaml + sample-job.yaml, applied with kueue-es apply: admitted, run, released."""
    async with NatsServer(store_dir=tmp_path / "nats") as server, serve_emulator() as emulator:
        kube.write_kubeconfig(tmp_path / "kubeconfig", server=emulator.url)
        supervisor = Supervisor(
            nats_url=server.url, log_dir=tmp_path / "logs", kube_args=["--kube-server", emulator.url]
        )
        await supervisor.start()
        api = await kube.make_api_client(server=emulator.url)
        kubelet = asyncio.create_task(SimulatedKubelet(api, default_duration_seconds=1.5).run())
        bus = await nats_bus.connect(server.url)
        try:
            kubeconfig = str(tmp_path / "kubeconfig")
            code, out = await kueue_es(
                "apply", "-f", str(EXAMPLES / "admin/single-clusterqueue-setup.yaml"), "--kubeconfig", kubeconfig
            )
            assert code == 0, out
            assert "clusterqueue.kueue.x-k8s.io/cluster-queue created" in out and "3 created," in out
            job = str(EXAMPLES / "jobs/sample-job.yaml")  # generateName: each -f creates a new Job
            code, out = await kueue_es("apply", "-f", job, "-f", job, "-f", job, "-f", job, "--kubeconfig", kubeconfig)
            assert code == 0, out  # 4 x 3 CPU on 9 CPU: one must wait
            seen = await wait_for_events(
                bus,
                {
                    "WorkloadAdmitted": 4,  # no checks: each reserved and admitted by one message
                    "DispatchApplied": 4,
                    "WorkloadFinished": 4,
                    "QuotaReleased": 4,
                    "WorkloadInadmissible": 1,
                },
                timeout=60,
            )
            assert all(r.cluster_queue == "cluster-queue" for r in seen["WorkloadAdmitted"])
            assert (
                "insufficient unused quota for cpu in flavor default-flavor, 3 more needed"
                in seen["WorkloadInadmissible"][0].message
            )
            jobs, _ = await kube.list_objects(api, kube.ref_for("batch/v1", "Job"), namespace="default")
            assert len(jobs) == 4 and all(j["spec"].get("suspend") is False for j in jobs)
            assert all(any(c["type"] == "Complete" for c in j["status"]["conditions"]) for j in jobs)
        finally:
            kubelet.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await kubelet
            codes = await supervisor.stop()
            await api.close()
        assert codes == {name: 0 for name in codes}, codes  # every service exits cleanly on SIGTERM
        report = await replay_bus(bus, deciders.BY_ROLE)
        await bus.close()
        assert report.ok and report.decisions >= 2 and report.matched == report.decisions


async def test_demo_command_runs_and_replays(tmp_path: Path) -> None:
    """`kueue-es demo` finishes every Job, prints the timeline, and replay matches every decision."""
    code, out = await kueue_es("demo", "--jobs", "4", "--duration", "1", "--dir", str(tmp_path / "demo"))
    assert code == 0, out
    for needle in (
        "submitted",
        "admitted",
        "waiting",
        "finished",
        "every decision matched",
        "3 more needed",
        "flavor default-flavor",
    ):
        assert needle in out, (needle, out)


async def test_demo_with_no_jobs_stops_cleanly_after_the_queues_are_logged(tmp_path: Path) -> None:
    """`kueue-es demo --jobs 0` has no Job to wait for: it still waits for the services to be up and the quick
    start's queues to be on the log, so no service is stopped while starting (it died of the SIGTERM, exit 1)."""
    code, out = await kueue_es("demo", "--jobs", "0", "--dir", str(tmp_path / "demo"))
    assert code == 0, out
    assert "exited with errors" not in out, out
    for needle in ("applied   ClusterQueue cluster-queue", "applied   LocalQueue default/user-queue"):
        assert needle in out, (needle, out)
    assert "every decision matched; the log is complete" in out, out


async def test_demo_with_preemption_evicts_and_recovers(tmp_path: Path) -> None:
    """`kueue-es demo --preempt`: the urgent Job preempts two sample Jobs through the whole
    path (nomination, eviction, suspended Job, WorkloadStopped, release), every Job still
    finishes, and replay matches every decision."""
    code, out = await kueue_es("demo", "--preempt", "--jobs", "4", "--duration", "1", "--dir", str(tmp_path / "demo"))
    assert code == 0, out
    for needle in ("nominated", "InClusterQueue", "suspended", "no longer runs (Preempted)", "every decision matched"):
        assert needle in out, (needle, out)
    assert "2 evicted by preemption, 5 finished" in out, out
    assert out.count("nominated") == 1, out  # decided once, not again on half of the preemptor's batch
