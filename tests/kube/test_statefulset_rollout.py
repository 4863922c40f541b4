"""A StatefulSet's rollout on the simulated StatefulSet controller, triggered with the real kubectl.

kube-controller-manager's StatefulSet controller (pkg/controller/statefulset stateful_set_control.go) keeps
``status.currentRevision`` at the revision its pods had before a new template until the rollout completes, and
``updateRevision`` at the new template's; a ``RollingUpdate`` ``partition`` keeps the pods below that ordinal at
the current revision. Kueue's StatefulSet reconciler reads the two (util/statefulset ShouldUngatePod), so the
emulator must report them as the real controller does; ``kubectl set image`` and ``kubectl rollout restart``
are how a user starts a rollout.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.jobframework.integrations import serving
from kueue_es.services.kube import client, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import emulator
from kueue_es.sim.controllers import SimulatedControllers
from tests.kube.test_kubectl import Kubectl

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: these tests run the real one"),
]

STATEFULSET = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {
        "replicas": 3,
        "podManagementPolicy": "Parallel",
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "v1"}]}},
    },
}


async def until(
    api: k8s_client.ApiClient, check: Callable[[dict[str, Any], list[dict[str, Any]]], bool]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Poll StatefulSet web and its live pods until ``check(sts, pods)`` holds."""
    async with asyncio.timeout(20):
        while True:
            sts = await client.get_object(api, resources.STATEFUL_SETS, namespace="default", name="web")
            listed, _ = await client.list_objects(api, resources.PODS, namespace="default")
            pods = sorted(
                (p for p in listed if not p["metadata"].get("deletionTimestamp")), key=lambda p: p["metadata"]["name"]
            )
            if check(sts, pods):
                return sts, pods
            await asyncio.sleep(0.05)


def revisions(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["labels"][serving.REVISION_LABEL] for p in pods]


def running(pods: list[dict[str, Any]]) -> bool:
    return len(pods) == 3 and all(p.get("status", {}).get("phase") == "Running" for p in pods)


async def test_set_image_rolls_down_to_the_partition_then_rollout_completes(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient, tmp_path: Path
) -> None:
    """``kubectl set image`` with partition 1: pods 2 and 1 are made again at the new revision, pod 0 stays at
    the old one, currentRevision the old and updateRevision the new (currentReplicas 1, updatedReplicas 2); the
    partition lowered to 0, pod 0 follows and currentRevision becomes updateRevision; ``kubectl rollout restart``
    starts another rollout that completes the same way. Before, the emulator always reported currentRevision
    equal to updateRevision and ignored the partition."""
    kubectl = Kubectl(cluster.url, tmp_path)
    controllers = asyncio.create_task(SimulatedControllers(api, lws=False, ray=False).run())
    try:
        await kubectl.ok("apply", "-f", "-", stdin=json.dumps(STATEFULSET))
        sts, pods = await until(api, lambda s, ps: running(ps) and s.get("status", {}).get("readyReplicas") == 3)
        first = sts["status"]["updateRevision"]
        assert sts["status"]["currentRevision"] == first and revisions(pods) == [first] * 3

        await kubectl.ok("set", "image", "statefulset/web", "c=v2")

        def partitioned(s: dict[str, Any], ps: list[dict[str, Any]]) -> bool:
            status = s.get("status", {})
            update = status.get("updateRevision")
            return running(ps) and update != first and revisions(ps) == [first, update, update]

        sts, pods = await until(api, partitioned)
        status = sts["status"]
        assert status["currentRevision"] == first
        assert (status["currentReplicas"], status["updatedReplicas"]) == (1, 2)
        assert [p["spec"]["containers"][0]["image"] for p in pods] == ["v1", "v2", "v2"]

        await kubectl.ok(
            "patch", "statefulset", "web", "-p", '{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}'
        )
        second = status["updateRevision"]

        def complete(s: dict[str, Any], ps: list[dict[str, Any]]) -> bool:
            status = s.get("status", {})
            update = status.get("updateRevision")
            # a status written while the last pod was being made again counts two live pods, both updated, and
            # names the update revision current already: wait for the one written after it came back
            return (
                running(ps)
                and revisions(ps) == [update] * 3
                and status.get("currentRevision") == update
                and status.get("replicas") == 3
            )

        sts, pods = await until(api, complete)
        assert sts["status"]["updateRevision"] == second and sts["status"]["currentReplicas"] == 3

        await kubectl.ok("rollout", "restart", "statefulset/web")
        sts, pods = await until(api, lambda s, ps: complete(s, ps) and s["status"]["updateRevision"] != second)
        assert all("kubectl.kubernetes.io/restartedAt" in p["metadata"]["annotations"] for p in pods)
    finally:
        await cancel_and_wait([controllers])
