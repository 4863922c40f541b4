"""Live, through real processes: an elastic RayCluster whose worker group is scaled from 1 to 3 while it runs
(issue 21, the Ray kinds).

nats-server, the five services with ElasticJobsViaWorkloadSlices on, the emulated API server serving
KubeRay's RayCluster (its Kueue RayCluster webhook gates the head's and the workers' templates) and its
simulated controllers (a KubeRay stand-in making an elastic RayCluster's pods). RayCluster ``elastic``
(head 1 CPU plus the 500m autoscaler sidecar Kueue counts, one worker of 1 CPU, in-tree autoscaling,
``kueue.x-k8s.io/elastic-job: "true"``) is admitted in a ClusterQueue of 5 CPU and its head and worker
released; then the real ``kubectl patch`` sets the worker group's replicas to 3, as the Ray autoscaler
does. A replacement slice is admitted for the 2 CPU more without the RayCluster ever being suspended,
the first slice is finished ``WorkloadSliceReplaced``, the two new workers are released and the head
and first worker keep running with the same UIDs. Then a scale-down to 1 worker gives quota back at
once. Every decision replays.
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
from kueue_es.sim.controllers import RAYCLUSTER_REF, SimulatedControllers
from kueue_es.sim.emulator import serve_emulator
from kueue_es.supervisor import Supervisor
from tests.e2e.test_elastic import condition
from tests.e2e.test_reclaim import cpu_usage
from tests.e2e.waiting import eventually
from tests.integration.harness import cluster_queue, flavor, local_queue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

KUBECTL = shutil.which("kubectl")


def _container(name: str) -> dict[str, Any]:
    cpu = {"cpu": "1", "memory": "1Gi"}
    return {"name": name, "image": "rayproject/ray:2.9.0", "resources": {"requests": cpu, "limits": cpu}}


def elastic_cluster(name: str, *, workers: int) -> dict[str, Any]:
    """A queued, elastic, autoscaling RayCluster: a head and one worker group ``workers``."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {slices.ELASTIC_JOB_ANNOTATION: "true"},
        },
        "spec": {
            "enableInTreeAutoscaling": True,
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [_container("ray-head")]}}},
            "workerGroupSpecs": [
                {
                    "groupName": "workers",
                    "replicas": workers,
                    "minReplicas": 0,
                    "maxReplicas": 5,
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [_container("ray-worker")]}},
                }
            ],
        },
    }


def running_pods(pods: list[dict[str, Any]], cluster: str) -> dict[str, str]:
    """Name -> UID of the cluster's pods that run (released: no scheduling gate, phase Running)."""
    return {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in pods
        if (p["metadata"].get("labels") or {}).get("ray.io/cluster") == cluster
        and not (p.get("spec") or {}).get("schedulingGates")
        and (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    }


@pytest.mark.skipif(KUBECTL is None, reason="the real kubectl is not on PATH")
async def test_elastic_raycluster_scales_up_without_restarting_its_pods_live(tmp_path: Path) -> None:
    assert KUBECTL is not None
    async with (
        NatsServer(store_dir=tmp_path / "nats") as server,
        serve_emulator(elastic_jobs=True, extra_resources=(RAYCLUSTER_REF,)) as emulator,
    ):
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
            for manifest in (flavor("default-flavor"), cluster_queue("cq", cpu=5), local_queue("user-queue", "cq")):
                await kube.apply_manifest(api, manifest)
            await kube.apply_manifest(api, elastic_cluster("elastic", workers=1))

            async def get(ref: resources.ResourceRef, name: str, namespace: str | None = None) -> dict[str, Any]:
                try:
                    return await kube.get_object(api, ref, namespace=namespace, name=name)
                except kube_errors.NotFoundError:
                    return {}

            async def pods() -> list[dict[str, Any]]:
                return (await kube.list_objects(api, resources.PODS, namespace="default"))[0]

            async def workloads() -> list[dict[str, Any]]:
                return (await kube.list_objects(api, resources.WORKLOADS, namespace="default"))[0]

            created = await get(RAYCLUSTER_REF, "elastic", "default")
            for template in (created["spec"]["headGroupSpec"], created["spec"]["workerGroupSpecs"][0]):
                # Kueue's RayCluster webhook, in the emulator
                assert template["template"]["spec"]["schedulingGates"] == [{"name": slices.ELASTIC_JOB_GATE}]
            first_pods = running_pods(
                await eventually(
                    pods, lambda ps: len(running_pods(ps, "elastic")) == 2, what="head and worker running"
                ),
                "elastic",
            )
            (first_slice,) = [w["metadata"]["name"] for w in await workloads()]
            assert first_slice.startswith("raycluster-elastic-")
            await eventually(
                lambda: get(resources.CLUSTER_QUEUES, "cq"),
                lambda o: cpu_usage(o) == "2500m",
                what="head (1 CPU + the 500m autoscaler) and one worker charged",
            )

            # the real kubectl, as a process (what the Ray autoscaler writes): the emulator serves it from this loop
            patch = await asyncio.create_subprocess_exec(
                KUBECTL,
                "patch",
                "raycluster",
                "elastic",
                "--type=json",
                "-p",
                '[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":3}]',
                env={**os.environ, "KUBECONFIG": str(kubeconfig)},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(patch.communicate(), timeout=60)
            assert patch.returncode == 0, err.decode()
            assert out.decode().strip() == "raycluster.ray.io/elastic patched"
            four = await eventually(pods, lambda ps: len(running_pods(ps, "elastic")) == 4, what="four pods running")
            now_running = running_pods(four, "elastic")
            assert first_pods.items() <= now_running.items()  # head and first worker kept: same names, same UIDs
            assert (await get(RAYCLUSTER_REF, "elastic", "default"))["spec"]["suspend"] is False

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
            admitted = await eventually(
                lambda: get(resources.WORKLOADS, new_name, "default"),
                lambda w: condition(w, "Admitted").get("status") == "True",
                what="the replacement slice admitted",
            )
            counts = {a["name"]: a["count"] for a in admitted["status"]["admission"]["podSetAssignments"]}
            assert counts == {"head": 1, "workers": 3}
            await eventually(
                lambda: get(resources.CLUSTER_QUEUES, "cq"),
                lambda o: cpu_usage(o) == "4500m",
                what="ClusterQueue cq using 4.5 CPU (not 7: the first slice is not counted twice)",
            )

            await kube.patch_object(
                api,
                RAYCLUSTER_REF,
                namespace="default",
                name="elastic",
                patch=[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1}],
                content_type=kube.JSON_PATCH,
            )
            await eventually(
                lambda: get(resources.CLUSTER_QUEUES, "cq"),
                lambda o: cpu_usage(o) == "2500m",
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
