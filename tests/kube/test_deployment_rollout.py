"""A Deployment's rollout on the simulated Deployment controller, driven with the real kubectl.

kube-controller-manager's Deployment controller (pkg/controller/deployment rolling.go) rolls a new template out
through a new ReplicaSet: it makes at most ``maxSurge`` pods above ``spec.replicas`` and scales the old
ReplicaSets down only as the new pods become available, keeping ``replicas - maxUnavailable`` available. Kueue
gates each new pod until it admits it, so a new pod that does not run stalls the rollout with the old pods
running -- what Kueue's e2e rolling-update cases rely on. ``kubectl rollout status``, ``history`` and ``undo``
read the ReplicaSets' ``deployment.kubernetes.io/revision`` annotations and the Deployment's status.
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

from kueue_es.services.kube import client, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import deployments, emulator
from kueue_es.sim.controllers import SimulatedControllers
from tests.kube.test_kubectl import Kubectl

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: these tests run the real one"),
]

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {
        "replicas": 3,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "v1"}]}},
    },
}
GATED = '{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"v2"}],"schedulingGates":[{"name":"example.com/held"}]}}}}'

UNGATED_V3 = [
    {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "v3"},
    {"op": "remove", "path": "/spec/template/spec/schedulingGates"},
]

State = tuple[dict[str, Any], dict[str, dict[str, Any]], list[dict[str, Any]]]


async def until(api: k8s_client.ApiClient, check: Callable[[State], bool]) -> State:
    """Poll Deployment web, its ReplicaSets (by name) and its live pods until ``check`` holds."""
    async with asyncio.timeout(20):
        while True:
            deployment = await client.get_object(api, resources.DEPLOYMENTS, namespace="default", name="web")
            sets, _ = await client.list_objects(api, resources.REPLICA_SETS, namespace="default")
            listed, _ = await client.list_objects(api, resources.PODS, namespace="default")
            pods = [p for p in listed if not p["metadata"].get("deletionTimestamp")]
            state = deployment, {rs["metadata"]["name"]: rs for rs in sets}, pods
            if check(state):
                return state
            await asyncio.sleep(0.05)


def images(pods: list[dict[str, Any]]) -> list[str]:
    return sorted(p["spec"]["containers"][0]["image"] for p in pods)


def running(pods: list[dict[str, Any]], image: str) -> bool:
    return (
        len(pods) == 3
        and images(pods) == [image] * 3
        and all(p.get("status", {}).get("phase") == "Running" for p in pods)
    )


async def test_rolling_update_surges_waits_for_new_pods_and_undoes(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient, tmp_path: Path
) -> None:
    """maxSurge 1, maxUnavailable 0: a template whose pods stay gated gets one new pod and the three old ones keep
    running (`kubectl rollout status` waits); a template whose pods run replaces them one by one through a third
    ReplicaSet, the stalled one scaled to 0 first, and `rollout status` reports success; `rollout undo
    --to-revision=1` re-uses the first ReplicaSet as revision 4. Before, a new template scaled every old
    ReplicaSet to 0 at once, the pods of a gated template left none running, and no revision was written."""
    kubectl = Kubectl(cluster.url, tmp_path)
    controllers = asyncio.create_task(SimulatedControllers(api, lws=False, ray=False).run())
    try:
        await kubectl.ok("apply", "-f", "-", stdin=json.dumps(DEPLOYMENT))
        _, sets, _ = await until(
            api, lambda s: running(s[2], "v1") and s[0].get("status", {}).get("availableReplicas") == 3
        )
        (first,) = sets
        assert sets[first]["metadata"]["annotations"][deployments.REVISION_ANNOTATION] == "1"
        await kubectl.ok("rollout", "status", "deployment/web", "--timeout=10s")

        await kubectl.ok("patch", "deployment", "web", "-p", GATED)

        def stalled(s: State) -> bool:
            return len(s[2]) == 4 and len(s[1]) == 2 and s[0].get("status", {}).get("updatedReplicas") == 1

        deployment, sets, pods = await until(api, stalled)
        (second,) = set(sets) - {first}
        assert {n: rs["spec"]["replicas"] for n, rs in sets.items()} == {first: 3, second: 1}
        assert images(pods) == ["v1", "v1", "v1", "v2"]
        assert deployment["metadata"]["annotations"][deployments.REVISION_ANNOTATION] == "2"
        assert deployment["status"]["unavailableReplicas"] == 1
        waiting = await kubectl.ok("rollout", "status", "deployment/web", "--watch=false")
        assert "1 out of 3 new replicas have been updated" in waiting

        await kubectl.ok("patch", "deployment", "web", "--type=json", "-p", json.dumps(UNGATED_V3))
        _, sets, _ = await until(api, lambda s: running(s[2], "v3") and s[0]["status"].get("updatedReplicas") == 3)
        assert {n: rs["spec"]["replicas"] for n, rs in sets.items() if n in (first, second)} == {first: 0, second: 0}
        done = await kubectl.ok("rollout", "status", "deployment/web", "--timeout=10s")
        assert "successfully rolled out" in done

        await kubectl.ok("rollout", "undo", "deployment/web", "--to-revision=1")
        _, sets, _ = await until(api, lambda s: running(s[2], "v1") and s[0]["status"].get("replicas") == 3)
        assert sets[first]["spec"]["replicas"] == 3
        assert sets[first]["metadata"]["annotations"][deployments.REVISION_ANNOTATION] == "4"
        history = await kubectl.ok("rollout", "history", "deployment/web")
        assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3", "4"]
    finally:
        await cancel_and_wait([controllers])
