"""Live, through real processes: dynamic reclaim frees quota while the job still runs (Kueue's reclaimablePods).

nats-server, the five services and the emulated API server; Jobs created through the
API. Job ``first`` (3 pods at a time, 6 completions, 1 CPU each) is admitted in a
ClusterQueue of 4 CPU; Job ``second`` (2 pods) waits. Its pods are then reported done as
the Job controller would (``status.succeeded`` 4 of 6, written by hand: no simulated
kubelet runs, so nothing else finishes): two remain for three slots, one pod is
reclaimable, and ``second`` is admitted and started while ``first`` still runs. The
Workload of ``first`` shows ``status.reclaimablePods``, the ClusterQueue's usage counts
what is held after reclaim, and every decision replays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kueue_es import deciders
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.server import NatsServer
from kueue_es.jobframework import jobs
from kueue_es.replay import replay_bus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.sim.emulator import serve_emulator
from kueue_es.supervisor import Supervisor
from tests.e2e.waiting import eventually
from tests.integration.harness import cluster_queue, flavor, job, local_queue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

JOB_REF = kube.ref_for("batch/v1", "Job")


def cpu_usage(cq: dict[str, Any]) -> str | None:
    """The ClusterQueue status's cpu total in its one flavor (None before it has one)."""
    for flavor_usage in (cq.get("status") or {}).get("flavorsUsage") or []:
        for entry in flavor_usage.get("resources") or []:
            if entry.get("name") == "cpu":
                return str(entry.get("total"))
    return None


async def test_reclaimed_pods_admit_the_next_job_live(tmp_path: Path) -> None:
    async with NatsServer(store_dir=tmp_path / "nats") as server, serve_emulator() as emulator:
        supervisor = Supervisor(
            nats_url=server.url, log_dir=tmp_path / "logs", kube_args=["--kube-server", emulator.url]
        )
        await supervisor.start()
        api = await kube.make_api_client(server=emulator.url)
        bus = await nats_bus.connect(server.url)
        try:
            for manifest in (flavor("default-flavor"), cluster_queue("cq", cpu=4), local_queue("user-queue", "cq")):
                await kube.apply_manifest(api, manifest)
            await kube.apply_manifest(api, job("first", parallelism=3, completions=6))

            async def get(ref: resources.ResourceRef, name: str, namespace: str | None = None) -> dict[str, Any]:
                try:
                    return await kube.get_object(api, ref, namespace=namespace, name=name)
                except kube_errors.NotFoundError:
                    return {}  # not yet: the Workload exists once the watcher has seen the Job

            first = await eventually(
                lambda: get(JOB_REF, "first", "default"),
                lambda j: j["spec"].get("suspend") is False,
                what="Job first started",
            )
            await kube.apply_manifest(api, job("second", parallelism=2))
            first_wl = jobs.workload_name_for_job("first", first["metadata"]["uid"])
            second = await get(JOB_REF, "second", "default")
            second_wl = jobs.workload_name_for_job("second", second["metadata"]["uid"])
            pending = await eventually(
                lambda: get(resources.WORKLOADS, second_wl, "default"),
                lambda w: any(
                    c["type"] == "QuotaReserved" and c["status"] == "False"
                    for c in (w.get("status") or {}).get("conditions") or []
                ),
                what="Workload of second waiting for quota",
            )
            assert "insufficient unused quota for cpu" in str(pending["status"]["conditions"])
            assert (await get(JOB_REF, "second", "default"))["spec"]["suspend"] is True

            # Four of six pods succeeded, two run: two left for three slots, so one pod is reclaimable.
            await kube.patch_object(
                api,
                JOB_REF,
                namespace="default",
                name="first",
                subresource="status",
                patch={"status": {"active": 2, "ready": 2, "succeeded": 4}},
            )
            await eventually(
                lambda: get(JOB_REF, "second", "default"),
                lambda j: j["spec"].get("suspend") is False,
                what="Job second started after the reclaim",
            )
            first_obj = await eventually(
                lambda: get(resources.WORKLOADS, first_wl, "default"),
                lambda w: "reclaimablePods" in (w.get("status") or {}),
                what="Workload of first with its reclaimable pods",
            )
            assert first_obj["status"]["reclaimablePods"] == [{"name": "main", "count": 1}]
            assert first_obj["status"]["admission"]["podSetAssignments"][0]["count"] == 3  # the admission stays
            assert (await get(JOB_REF, "first", "default"))["spec"]["suspend"] is False  # still running
            cq = await eventually(
                lambda: get(resources.CLUSTER_QUEUES, "cq"),
                lambda o: (o.get("status") or {}).get("admittedWorkloads") == 2,
                what="ClusterQueue cq with both admitted",
            )
            assert cpu_usage(cq) == "4"  # 2 of first (3 admitted, 1 reclaimed) + 2 of second
        finally:
            codes = await supervisor.stop()
            await api.close()
        assert codes == {name: 0 for name in codes}, codes
        report = await replay_bus(bus, deciders.BY_ROLE)
        await bus.close()
        assert report.ok and report.matched == report.decisions
