"""A LeaderWorkerSet's rolling update on the simulated LWS controller, driven with the real kubectl.

LWS (sigs.k8s.io/lws leaderworkerset_controller.go rollingUpdateParameters) rolls a new template out group by
group: the leader StatefulSet grows by ``maxSurge`` groups at the new revision, its ``partition`` drops as the
groups above it become ready and updated, ``maxUnavailable`` at a time, and the surge groups go once every group is
updated and ready. Kueue gates every new pod until it admits its group, so a rollout whose new groups are not
admitted stalls with the old groups running -- what Kueue's e2e cases "should allow to update the PodTemplate in
LeaderWorkerSet" and "Rolling update with maxSurge ..." rely on. Here a scheduling gate in the new template stands
for Kueue's, and a loop taking gates off stands for its admissions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.jobframework.integrations import serving
from kueue_es.services.kube import client, errors, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import custom_resources, emulator, leaderworkersets
from kueue_es.sim.controllers import LWS_REF, SimulatedControllers
from tests.kube.test_kubectl import Kubectl

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: these tests run the real one"),
]

CRD = Path(__file__).parents[1] / "fixtures" / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
CONTAINER = {"name": "c", "image": "v1"}
LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "lws", "namespace": "default"},
    "spec": {
        "replicas": 4,
        "rolloutStrategy": {
            "type": "RollingUpdate",
            "rollingUpdateConfiguration": {"maxSurge": 2, "maxUnavailable": 2},
        },
        "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {"containers": [CONTAINER]}}},
    },
}
GATED_V2 = {
    "spec": {
        "leaderWorkerTemplate": {
            "workerTemplate": {
                "spec": {
                    "containers": [{**CONTAINER, "image": "v2"}],
                    "schedulingGates": [{"name": "example.com/held"}],
                }
            }
        }
    }
}

State = tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]


async def until(api: k8s_client.ApiClient, check: Callable[[State], bool]) -> State:
    """Poll LeaderWorkerSet lws, its leader StatefulSet and its live pods (by name) until ``check`` holds."""
    async with asyncio.timeout(30):
        while True:
            with contextlib.suppress(errors.NotFoundError):
                lws = await client.get_object(api, LWS_REF, namespace="default", name="lws")
                sts = await client.get_object(api, resources.STATEFUL_SETS, namespace="default", name="lws")
                listed, _ = await client.list_objects(api, resources.PODS, namespace="default")
                pods = sorted(
                    (p for p in listed if not p["metadata"].get("deletionTimestamp")),
                    key=lambda p: p["metadata"]["name"],
                )
                state = lws, sts, pods
                if check(state):
                    return state
            await asyncio.sleep(0.05)


def leaders(pods: list[dict[str, Any]]) -> dict[str, str]:
    """Leader pod name -> its image."""
    return {
        p["metadata"]["name"]: p["spec"]["containers"][0]["image"]
        for p in pods
        if p["metadata"]["labels"].get(serving.LWS_WORKER_INDEX_LABEL) == "0"
    }


def condition(lws: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in lws.get("status", {}).get("conditions") or [] if c["type"] == kind), {})


async def admit_all(api: k8s_client.ApiClient) -> None:
    """Take the gate off every gated pod, as Kueue does once it admits a group."""
    while True:
        listed, _ = await client.list_objects(api, resources.PODS, namespace="default")
        for pod in listed:
            if pod.get("spec", {}).get("schedulingGates") and not pod["metadata"].get("deletionTimestamp"):
                with contextlib.suppress(errors.KubeError):
                    await client.patch_object(
                        api,
                        resources.PODS,
                        namespace="default",
                        name=pod["metadata"]["name"],
                        patch={"spec": {"schedulingGates": None}},
                    )
        await asyncio.sleep(0.05)


async def test_rolling_update_surges_new_groups_and_stalls_until_they_run(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient, tmp_path: Path
) -> None:
    """replicas 4, size 2, maxSurge 2, maxUnavailable 2: a new template whose pods stay gated makes surge groups 4
    and 5 at the new revision (leader StatefulSet replicas 6, partition 4, then 2) while groups 0-3 keep running the
    old one (readyReplicas 4, updatedReplicas 2, Progressing); once the new pods run, the partition drops to 0, every
    group is replaced, the surge groups go and the LeaderWorkerSet is Available with updatedReplicas 4. Before, the
    simulated LWS controller never changed its leader StatefulSet after creating it: no group was replaced."""
    kubectl = Kubectl(cluster.url, tmp_path)
    cluster.install_crds(custom_resources.load([CRD]))  # too large for kubectl apply's annotation, as in a real cluster
    controllers = asyncio.create_task(SimulatedControllers(api, ray=False).run())
    admitting: asyncio.Task[None] | None = None
    try:
        await kubectl.ok("apply", "-f", "-", stdin=json.dumps(LWS))
        lws, sts, pods = await until(api, lambda s: s[0].get("status", {}).get("readyReplicas") == 4 and len(s[2]) == 8)
        first = sts["metadata"]["labels"][leaderworkersets.REVISION_LABEL]
        assert condition(lws, "Available").get("status") == "True"

        await kubectl.ok("patch", "leaderworkerset", "lws", "--type=merge", "-p", json.dumps(GATED_V2))

        def stalled(s: State) -> bool:
            return len(leaders(s[2])) == 6 and s[0].get("status", {}).get("updatedReplicas") == 2

        lws, sts, pods = await until(api, stalled)
        assert leaders(pods) == {**{f"lws-{i}": "v1" for i in range(4)}, "lws-4": "v2", "lws-5": "v2"}
        # LWS lowers the partition by maxUnavailable + maxSurge at once (4 -> 2), but the StatefulSet controller
        # replaces a leader only while those above it are Ready: groups 2 and 3 wait for 4 and 5
        assert sts["spec"]["replicas"] == 6 and sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
        second = sts["metadata"]["labels"][leaderworkersets.REVISION_LABEL]
        assert second != first
        assert lws["status"]["readyReplicas"] == 4
        assert condition(lws, "Progressing").get("status") == "True"
        assert condition(lws, "Available").get("status") == "False"

        admitting = asyncio.create_task(admit_all(api))

        def done(s: State) -> bool:
            status = s[0].get("status", {})
            return (
                leaders(s[2]) == {f"lws-{i}": "v2" for i in range(4)}
                and len(s[2]) == 8
                and all(p.get("status", {}).get("phase") == "Running" for p in s[2])
                and status.get("updatedReplicas") == 4
                and status.get("readyReplicas") == 4
            )

        lws, sts, pods = await until(api, done)
        assert sts["spec"]["replicas"] == 4 and sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 0
        assert condition(lws, "Available").get("status") == "True"
        assert {p["metadata"]["labels"][leaderworkersets.REVISION_LABEL] for p in pods} == {second}
    finally:
        await cancel_and_wait([t for t in (controllers, admitting) if t is not None])
