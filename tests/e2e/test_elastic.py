"""Live, through real processes: an elastic Job scaled from 2 to 4 pods while it runs (issue 21).

nats-server, the five services with ElasticJobsViaWorkloadSlices on, the emulated API server
(its Kueue Job webhook gates an elastic Job's pod template) and its simulated controllers (which
make an elastic Job's pods). Job ``elastic`` (2 pods of 1 CPU, ``kueue.x-k8s.io/elastic-job:
"true"``) is admitted in a ClusterQueue of 4 CPU and its two pods released; then the real
``kubectl patch`` sets its parallelism to 4. A replacement slice is admitted for the 2 CPU more
without the Job ever being suspended, the first slice is finished ``WorkloadSliceReplaced``, the
two new pods are released and the first two keep running with the same UIDs. Then a scale-down
to 1 gives quota back at once. Every decision replays.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kueue_es import deciders
from kueue_es.events import slices
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.server import NatsServer
from kueue_es.replay import replay_bus
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim.controllers import SimulatedControllers
from kueue_es.sim.emulator import serve_emulator
from kueue_es.supervisor import Supervisor
from tests.e2e.test_reclaim import cpu_usage
from tests.e2e.waiting import eventually
from tests.integration.harness import cluster_queue, flavor, job, local_queue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

JOB_REF = kube.ref_for("batch/v1", "Job")
KUBECTL = shutil.which("kubectl")


def elastic_job(name: str, *, parallelism: int) -> dict[str, Any]:
    """A queued batch/v1 Job annotated elastic."""
    manifest = job(name, parallelism=parallelism, completions=10)
    manifest["metadata"]["annotations"] = {slices.ELASTIC_JOB_ANNOTATION: "true"}
    return manifest


def running_pods(pods: list[dict[str, Any]], job_name: str) -> dict[str, str]:
    """Name -> UID of the job's pods that run (released: no scheduling gate, phase Running)."""
    return {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in pods
        if (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == job_name
        and not (p.get("spec") or {}).get("schedulingGates")
        and (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    }


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The status condition of type ``kind`` ({} when absent)."""
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


@pytest.mark.skipif(KUBECTL is None, reason="the real kubectl is not on PATH")
async def test_elastic_job_scales_up_without_restarting_its_pods_live(tmp_path: Path) -> None:
    assert KUBECTL is not None
    async with NatsServer(store_dir=tmp_path / "nats") as server, serve_emulator(elastic_jobs=True) as emulator:
        supervisor = Supervisor(
            nats_url=server.url,
            log_dir=tmp_path / "logs",
            kube_args=["--kube-server", emulator.url],
            watcher_args=["--feature-gates", f"{slices.GATE}=true"],
        )
        await supervisor.start()
        api = await kube.make_api_client(server=emulator.url)
        controllers = asyncio.create_task(SimulatedControllers(api, lws=False).run())
        kubeconfig = tmp_path / "kubeconfig"
        kube.write_kubeconfig(kubeconfig, server=emulator.url)
        bus = await nats_bus.connect(server.url)
        try:
            for manifest in (flavor("default-flavor"), cluster_queue("cq", cpu=4), local_queue("user-queue", "cq")):
                await kube.apply_manifest(api, manifest)
            await kube.apply_manifest(api, elastic_job("elastic", parallelism=2))

            async def get(ref: resources.ResourceRef, name: str, namespace: str | None = None) -> dict[str, Any]:
                try:
                    return await kube.get_object(api, ref, namespace=namespace, name=name)
                except kube_errors.NotFoundError:
                    return {}

            async def pods() -> list[dict[str, Any]]:
                return (await kube.list_objects(api, resources.PODS, namespace="default"))[0]

            async def workloads() -> list[dict[str, Any]]:
                return (await kube.list_objects(api, resources.WORKLOADS, namespace="default"))[0]

            created = await get(JOB_REF, "elastic", "default")
            gates = created["spec"]["template"]["spec"].get("schedulingGates")
            assert gates == [{"name": slices.ELASTIC_JOB_GATE}]  # Kueue's Job webhook, in the emulator
            first_pods = running_pods(
                await eventually(pods, lambda ps: len(running_pods(ps, "elastic")) == 2, what="two pods running"),
                "elastic",
            )
            (first_slice,) = [w["metadata"]["name"] for w in await workloads()]

            # the real kubectl, as a process: the emulator serves it from this event loop
            patch = await asyncio.create_subprocess_exec(
                KUBECTL,
                "patch",
                "job",
                "elastic",
                "--type=merge",
                "-p",
                '{"spec":{"parallelism":4}}',
                env={**os.environ, "KUBECONFIG": str(kubeconfig)},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(patch.communicate(), timeout=60)
            assert patch.returncode == 0, err.decode()
            assert out.decode().strip() == "job.batch/elastic patched"
            four = await eventually(pods, lambda ps: len(running_pods(ps, "elastic")) == 4, what="four pods running")
            now_running = running_pods(four, "elastic")
            assert first_pods.items() <= now_running.items()  # the first two kept running: same names, same UIDs
            assert (await get(JOB_REF, "elastic", "default"))["spec"]["suspend"] is False

            listed = await eventually(
                workloads,
                lambda ws: any(condition(w, "Finished").get("status") == "True" for w in ws),
                what="the first slice finished",
            )
            by_name = {w["metadata"]["name"]: w for w in listed}
            old = by_name.pop(first_slice)
            assert condition(old, "Finished")["reason"] == slices.REPLACED_REASON
            ((new_name, new),) = by_name.items()
            assert new["metadata"]["annotations"][slices.REPLACEMENT_FOR_ANNOTATION] == f"default/{first_slice}"
            assert new["metadata"]["annotations"][slices.SLICE_NAME_ANNOTATION] == first_slice
            # Kueue's message names the new slice's Workload object (its UID), not the Job's UID
            job_uid = created["metadata"]["uid"]
            assert new["metadata"]["uid"] != job_uid
            assert condition(old, "Finished")["message"] == slices.replaced_message(
                uid=new["metadata"]["uid"], job_uid=job_uid
            )
            admitted = await eventually(
                lambda: get(resources.WORKLOADS, new_name, "default"),
                lambda w: condition(w, "Admitted").get("status") == "True",
                what="the replacement slice admitted",
            )
            assert admitted["status"]["admission"]["podSetAssignments"][0]["count"] == 4
            cq = await eventually(
                lambda: get(resources.CLUSTER_QUEUES, "cq"),
                lambda o: cpu_usage(o) == "4",
                what="ClusterQueue cq using 4 CPU (not 6: the first slice is not counted twice)",
            )
            assert cpu_usage(cq) == "4"
            # the replacement's PodsReady holds for the new count: the Job's status follows its four pods
            # (the emulated Job kept active=ready=2, so the slice waited for start for ever: found by a new user)
            await eventually(
                lambda: get(resources.WORKLOADS, new_name, "default"),
                lambda w: condition(w, "PodsReady").get("status") == "True",
                what="the replacement slice PodsReady",
            )

            await kube.patch_object(
                api, JOB_REF, namespace="default", name="elastic", patch={"spec": {"parallelism": 1}}
            )
            await eventually(
                lambda: get(resources.CLUSTER_QUEUES, "cq"),
                lambda o: cpu_usage(o) == "1",
                what="quota given back at once on the scale-down",
            )
            assert len(await workloads()) == 2  # updated in place: no new slice
        finally:
            await cancel_and_wait([controllers])
            codes = await supervisor.stop()
            await api.close()
        assert codes == {name: 0 for name in codes}, codes
        report = await replay_bus(bus, deciders.BY_ROLE)
        await bus.close()
        assert report.ok and report.matched == report.decisions
