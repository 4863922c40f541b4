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

from pathlib import Path
from typing import Any

import pytest

from kueue_es.events import slices
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.sim.controllers import RAYCLUSTER_REF
from tests.e2e.elastic_system import KUBECTL, elastic_system
from tests.e2e.test_elastic import condition
from tests.e2e.test_reclaim import cpu_usage
from tests.e2e.waiting import eventually
from tests.integration.harness import cluster_queue, flavor, local_queue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


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
    async with elastic_system(
        tmp_path, feature_gates=f"{slices.GATE}=true", extra_resources=(RAYCLUSTER_REF,)
    ) as system:
        for manifest in (flavor("default-flavor"), cluster_queue("cq", cpu=5), local_queue("user-queue", "cq")):
            await kube.apply_manifest(system.api, manifest)
        await kube.apply_manifest(system.api, elastic_cluster("elastic", workers=1))

        created = await system.get(RAYCLUSTER_REF, "elastic", "default")
        for template in (created["spec"]["headGroupSpec"], created["spec"]["workerGroupSpecs"][0]):
            # Kueue's RayCluster webhook, in the emulator
            assert template["template"]["spec"]["schedulingGates"] == [{"name": slices.ELASTIC_JOB_GATE}]
        first_pods = running_pods(
            await eventually(
                system.pods, lambda ps: len(running_pods(ps, "elastic")) == 2, what="head and worker running"
            ),
            "elastic",
        )
        (first_slice,) = [w["metadata"]["name"] for w in await system.workloads()]
        assert first_slice.startswith("raycluster-elastic-")
        await eventually(
            lambda: system.get(resources.CLUSTER_QUEUES, "cq"),
            lambda o: cpu_usage(o) == "2500m",
            what="head (1 CPU + the 500m autoscaler) and one worker charged",
        )

        # the real kubectl, as a process (what the Ray autoscaler writes): the emulator serves it from this loop
        patch = '[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":3}]'
        out = await system.kubectl("patch", "raycluster", "elastic", "--type=json", "-p", patch)
        assert out.strip() == "raycluster.ray.io/elastic patched"
        four = await eventually(system.pods, lambda ps: len(running_pods(ps, "elastic")) == 4, what="four pods running")
        now_running = running_pods(four, "elastic")
        assert first_pods.items() <= now_running.items()  # head and first worker kept: same names, same UIDs
        assert (await system.get(RAYCLUSTER_REF, "elastic", "default"))["spec"]["suspend"] is False

        listed = await eventually(
            system.workloads,
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
            lambda: system.get(resources.WORKLOADS, new_name, "default"),
            lambda w: condition(w, "Admitted").get("status") == "True",
            what="the replacement slice admitted",
        )
        counts = {a["name"]: a["count"] for a in admitted["status"]["admission"]["podSetAssignments"]}
        assert counts == {"head": 1, "workers": 3}
        await eventually(
            lambda: system.get(resources.CLUSTER_QUEUES, "cq"),
            lambda o: cpu_usage(o) == "4500m",
            what="ClusterQueue cq using 4.5 CPU (not 7: the first slice is not counted twice)",
        )

        await kube.patch_object(
            system.api,
            RAYCLUSTER_REF,
            namespace="default",
            name="elastic",
            patch=[{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 1}],
            content_type=kube.JSON_PATCH,
        )
        await eventually(
            lambda: system.get(resources.CLUSTER_QUEUES, "cq"),
            lambda o: cpu_usage(o) == "2500m",
            what="quota given back at once on the scale-down",
        )
        assert len(await system.workloads()) == 2  # updated in place: no new slice
