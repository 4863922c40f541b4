"""The emulated API server runs kube-apiserver's Priority admission plugin on every Pod it creates, as the real one
does, seen through the real kubectl: ``spec.priority`` and ``spec.preemptionPolicy`` from the PriorityClass (or the
global default one, or 0), and 403 for a class that does not exist or a priority the pod gives itself.

Before, emulated pods had no ``spec.priority``: the emulated kube-scheduler's queue order (higher priority first)
never saw a PriorityClass, and Kueue's pod role hash (which hashes ``priority``) differed from a real cluster's.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_es.jobframework import pods as pod_integration
from kueue_es.services.kube import client, resources
from kueue_es.services.runtime import cancel_and_wait
from kueue_es.sim import emulator
from kueue_es.sim.controllers import SimulatedControllers
from tests.kube.test_kubectl import Kubectl

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: these tests run the real one"),
]


def priority_class(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value, **fields}  # fmt: skip


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}], **spec},
    }


async def apply(kubectl: Kubectl, tmp_path: Path, *objects: dict[str, Any]) -> tuple[int, str, str]:
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return await kubectl.run("apply", "-f", str(path))


async def spec_of(kubectl: Kubectl, name: str) -> dict[str, Any]:
    return dict(json.loads(await kubectl.ok("get", "pod", name, "-o", "json"))["spec"])


async def test_a_pod_gets_its_classs_priority_or_zero(cluster: emulator.ClusterEmulator, tmp_path: Path) -> None:
    kubectl = Kubectl(cluster.url, tmp_path)
    high = priority_class("high", 1000, preemptionPolicy="Never")
    code, _, err = await apply(kubectl, tmp_path, high, pod("plain"), pod("urgent", priorityClassName="high"))
    assert code == 0, err
    plain, urgent = await spec_of(kubectl, "plain"), await spec_of(kubectl, "urgent")
    critical = pod("critical", priorityClassName="system-cluster-critical")
    assert (await apply(kubectl, tmp_path, critical))[0] == 0

    assert (plain.get("priorityClassName"), plain["priority"], plain["preemptionPolicy"]) == (
        None,
        0,
        "PreemptLowerPriority",
    )
    assert (urgent["priority"], urgent["preemptionPolicy"]) == (1000, "Never")
    assert (await spec_of(kubectl, "critical"))["priority"] == 2000000000
    # Kueue's pod webhook, after the plugin, hashes the priority into the role (GenerateRoleHash)
    assert pod_integration.spec_role_hash(plain) != pod_integration.spec_role_hash(urgent)


async def test_the_global_default_class_names_itself(cluster: emulator.ClusterEmulator, tmp_path: Path) -> None:
    kubectl = Kubectl(cluster.url, tmp_path)
    defaults = (priority_class("batch", 50, globalDefault=True), priority_class("low", 10, globalDefault=False))
    assert (await apply(kubectl, tmp_path, *defaults))[0] == 0
    assert (await apply(kubectl, tmp_path, pod("p")))[0] == 0

    spec = await spec_of(kubectl, "p")

    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == (
        "batch",
        50,
        "PreemptLowerPriority",
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"priorityClassName": "nope"}, 'pods "p" is forbidden: no PriorityClass with name nope was found'),
        (
            {"priority": 7},
            'pods "p" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority '
            "admission controller computed 0 from the given PriorityClass name",
        ),
        (
            {"preemptionPolicy": "Never"},
            'pods "p" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; '
            "priority admission controller computed PreemptLowerPriority from the given PriorityClass name",
        ),
    ],
)
async def test_a_pod_the_plugin_refuses_is_not_created(
    cluster: emulator.ClusterEmulator, tmp_path: Path, spec: dict[str, Any], message: str
) -> None:
    kubectl = Kubectl(cluster.url, tmp_path)

    code, _, err = await apply(kubectl, tmp_path, pod("p", **spec))
    listed = await kubectl.ok("get", "pods", "-o", "name")

    assert code != 0
    assert f'Error from server (Forbidden): error when creating "{tmp_path / "objects.yaml"}": {message}' in err
    assert listed.strip() == ""


async def test_an_update_without_the_priority_keeps_it(cluster: emulator.ClusterEmulator, tmp_path: Path) -> None:
    """``kubectl replace`` of a pod as it was written (no ``priority``): the plugin keeps the stored one."""
    kubectl = Kubectl(cluster.url, tmp_path)
    assert (await apply(kubectl, tmp_path, priority_class("high", 1000), pod("p", priorityClassName="high")))[0] == 0
    stored = json.loads(await kubectl.ok("get", "pod", "p", "-o", "json"))
    del stored["spec"]["priority"]
    stored["metadata"].setdefault("labels", {})["edited"] = "yes"
    path = tmp_path / "replace.json"
    path.write_text(json.dumps(stored))

    await kubectl.ok("replace", "-f", str(path))

    assert (await spec_of(kubectl, "p"))["priority"] == 1000


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        (
            [priority_class("system-foo", 5)],
            'The PriorityClass "system-foo" is invalid: metadata.name: Forbidden: priority class names with '
            "'system-' prefix are reserved for system use only. error: system-foo is not a known system priority "
            "class",
        ),
        (
            [priority_class("huge", 2000000000)],
            'The PriorityClass "huge" is invalid: value: Forbidden: maximum allowed value of a user defined '
            "priority is 1000000000",
        ),
        (
            [priority_class("odd", 5, preemptionPolicy="Foo")],
            'The PriorityClass "odd" is invalid: preemptionPolicy: Unsupported value: "Foo": supported values: '
            '"Never", "PreemptLowerPriority"',
        ),
        (
            [priority_class("first", 5, globalDefault=True), priority_class("second", 6, globalDefault=True)],
            'priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass first is already marked as '
            "default. Only one default can exist",
        ),
    ],
)
async def test_a_priority_class_the_api_server_refuses(
    cluster: emulator.ClusterEmulator, tmp_path: Path, objects: list[dict[str, Any]], message: str
) -> None:
    """kube-apiserver's PriorityClass validation (pkg/apis/scheduling/validation) and Priority plugin (one global
    default)."""
    kubectl = Kubectl(cluster.url, tmp_path)

    code, _, err = await apply(kubectl, tmp_path, *objects)

    assert code != 0
    assert message in err


async def test_a_priority_classs_value_and_policy_are_immutable_and_system_ones_stay(
    cluster: emulator.ClusterEmulator, tmp_path: Path
) -> None:
    kubectl = Kubectl(cluster.url, tmp_path)
    await kubectl.ok("create", "priorityclass", "high", "--value=1000")

    value = await kubectl.run("patch", "priorityclass", "high", "--type=merge", "-p", '{"value":2000}')
    policy = await kubectl.run("patch", "priorityclass", "high", "--type=merge", "-p", '{"preemptionPolicy":"Never"}')
    described = await kubectl.ok("patch", "priorityclass", "high", "--type=merge", "-p", '{"description":"d"}')
    system = await kubectl.run("delete", "priorityclass", "system-node-critical")
    left = await kubectl.ok("get", "priorityclass", "system-node-critical", "high", "-o", "name")

    assert (
        value[0] != 0
        and 'The PriorityClass "high" is invalid: value: Forbidden: may not be changed in an update.' in value[2]
    )
    assert (
        policy[0] != 0
        and ('The PriorityClass "high" is invalid: preemptionPolicy: Invalid value: "Never": field is immutable')
        in policy[2]
    )
    assert "patched" in described
    assert (
        system[0] != 0
        and (
            'Error from server (Forbidden): priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: '
            "this is a system priority class and cannot be deleted"
        )
        in system[2]
    )
    assert left.split() == [
        "priorityclass.scheduling.k8s.io/system-node-critical",
        "priorityclass.scheduling.k8s.io/high",
    ]


async def test_a_replica_set_whose_pods_are_refused_holds_up_no_other(api: Any) -> None:
    """A ReplicaSet whose template names a PriorityClass that does not exist gets no pods (each is refused, 403),
    and the simulated controllers go on with the others: another ReplicaSet's pods are made. Before, the
    refusal stopped every reconcile pass at that ReplicaSet, and no controller made anything more."""

    def replica_set(name: str, **spec: Any) -> dict[str, Any]:
        template_spec = {"containers": [{"name": "c", "image": "busybox"}], **spec}
        labels = {"app": name}
        return {
            "metadata": {"name": name},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": template_spec},
            },
        }

    await client.create_object(
        api, resources.REPLICA_SETS, namespace="default", body=replica_set("bad", priorityClassName="nope")
    )
    await client.create_object(api, resources.REPLICA_SETS, namespace="default", body=replica_set("good"))
    sim = SimulatedControllers(api, lws=False, ray=False, watch_options={"timeout_seconds": 5})
    task = asyncio.create_task(sim.run())
    try:
        async with asyncio.timeout(10):
            while True:
                pods, _ = await client.list_objects(api, resources.PODS, namespace="default")
                if len([p for p in pods if p["metadata"]["name"].startswith("good-")]) == 2:
                    break
                await asyncio.sleep(0.05)
    finally:
        await cancel_and_wait([task])

    assert not [p for p in pods if p["metadata"]["name"].startswith("bad-")]


async def test_a_refused_pod_is_a_failed_create_event_of_its_replica_set_or_stateful_set(api: Any) -> None:
    """The ReplicaSet and StatefulSet controllers record Warning ``FailedCreate`` on their object when the API
    server refuses a pod, in their own words (controller_utils.go "Error creating: <err>"; stateful_pod_control.go
    "create Pod <pod> in StatefulSet <set> failed error: <err>"), once per reason however often they retry."""
    labels = {"app": "x"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    template["spec"]["priorityClassName"] = "nope"
    spec = {"replicas": 2, "selector": {"matchLabels": labels}, "template": template}
    await client.create_object(
        api, resources.REPLICA_SETS, namespace="default", body={"metadata": {"name": "rs"}, "spec": spec}
    )
    sts = {"metadata": {"name": "web"}, "spec": {**spec, "serviceName": "web"}}
    await client.create_object(api, resources.STATEFUL_SETS, namespace="default", body=sts)
    sim = SimulatedControllers(api, lws=False, ray=False, watch_options={"timeout_seconds": 5})
    task = asyncio.create_task(sim.run())
    forbidden = "is forbidden: no PriorityClass with name nope was found"
    try:
        async with asyncio.timeout(10):
            while True:
                events, _ = await client.list_objects(api, resources.EVENTS, namespace="default")
                failed = {e["involvedObject"]["kind"]: e for e in events if e["reason"] == "FailedCreate"}
                if len(failed) == 2:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # its retries meanwhile say nothing new
            events, _ = await client.list_objects(api, resources.EVENTS, namespace="default")
    finally:
        await cancel_and_wait([task])
    failed_events = [e for e in events if e["reason"] == "FailedCreate"]
    assert sorted(e["involvedObject"]["name"] for e in failed_events) == ["rs", "web"]
    by_kind = {e["involvedObject"]["kind"]: e for e in failed_events}
    assert by_kind["ReplicaSet"]["type"] == "Warning"
    # a pod made from generateName is named by it in the refusal, as kube-apiserver's admission errors do
    assert by_kind["ReplicaSet"]["message"] == f'Error creating: pods "rs-" {forbidden}'
    assert by_kind["ReplicaSet"]["source"]["component"] == "replicaset-controller"
    assert by_kind["StatefulSet"]["message"] == (
        f'create Pod web-0 in StatefulSet web failed error: pods "web-0" {forbidden}'
    )
    assert by_kind["StatefulSet"]["source"]["component"] == "statefulset-controller"
