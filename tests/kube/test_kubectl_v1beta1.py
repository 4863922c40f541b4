"""Kueue's deprecated v1beta1 through the real kubectl against the emulated API server.

Kueue serves ``kueue.x-k8s.io/v1beta1`` beside v1beta2 (storage v1beta2, converted by its webhook,
deprecated with a warning), and so does the emulator (:mod:`kueue_es.events.v1beta1`): writes of
every kind (create, client- and server-side apply, patch, status) land as the v1beta2 object, reads
and watches through v1beta1 show it converted, and kubectl prints the deprecation warning.
"""

from __future__ import annotations

import json
import shutil
import textwrap

import aiohttp
import pytest

from kueue_es.events import v1beta1
from kueue_es.sim import emulator
from tests.kube.test_kubectl import Kubectl
from tests.kube.test_kubectl import kubectl as kubectl  # noqa: F401 -- the fixture

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: these tests run the real one"),
]

SETUP = textwrap.dedent(
    """\
    apiVersion: kueue.x-k8s.io/v1beta1
    kind: ResourceFlavor
    metadata:
      name: default-flavor
    ---
    apiVersion: kueue.x-k8s.io/v1beta1
    kind: ClusterQueue
    metadata:
      name: cluster-queue
    spec:
      cohort: team
      namespaceSelector: {}
      admissionChecks: [check-a]
      flavorFungibility:
        whenCanBorrow: Borrow
        whenCanPreempt: Preempt
      resourceGroups:
      - coveredResources: ["cpu", "memory"]
        flavors:
        - name: default-flavor
          resources:
          - name: cpu
            nominalQuota: 9
          - name: memory
            nominalQuota: 36Gi
    ---
    apiVersion: kueue.x-k8s.io/v1beta1
    kind: LocalQueue
    metadata:
      namespace: default
      name: user-queue
    spec:
      clusterQueue: cluster-queue
    """
)
DEPRECATION = f"Warning: {v1beta1.DEPRECATION_WARNING}"


async def get_json(kubectl: Kubectl, *args: str) -> dict:
    return json.loads(await kubectl.ok("get", *args, "-o", "json"))


async def test_apply_v1beta1_then_read_in_both_versions(cluster: emulator.ClusterEmulator, kubectl: Kubectl) -> None:
    """A v1beta1 ClusterQueue, LocalQueue and ResourceFlavor applied with kubectl are stored as v1beta2 by Kueue's
    rules; read as v1beta2 they show the v1beta2 fields, read as v1beta1 the v1beta1 ones; kubectl prints the
    deprecation warning; discovery lists both versions, v1beta2 preferred."""
    code, out, err = await kubectl.run("apply", "-f", "-", stdin=SETUP)
    assert code == 0, err
    assert "clusterqueue.kueue.x-k8s.io/cluster-queue created" in out
    assert DEPRECATION in err
    cq = await get_json(kubectl, "clusterqueues.v1beta2.kueue.x-k8s.io", "cluster-queue")
    assert cq["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert cq["spec"]["cohortName"] == "team" and "cohort" not in cq["spec"]
    assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "check-a"}]}
    assert "admissionChecks" not in cq["spec"]
    assert cq["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    old = await get_json(kubectl, "clusterqueues.v1beta1.kueue.x-k8s.io", "cluster-queue")
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert old["spec"]["cohort"] == "team" and "cohortName" not in old["spec"]
    assert old["metadata"]["resourceVersion"] == cq["metadata"]["resourceVersion"]
    lq = await get_json(kubectl, "localqueues.v1beta1.kueue.x-k8s.io", "-n", "default", "user-queue")
    assert lq["apiVersion"] == "kueue.x-k8s.io/v1beta1" and lq["spec"]["clusterQueue"] == "cluster-queue"
    flavor = await get_json(kubectl, "resourceflavors", "default-flavor")  # the preferred version
    assert flavor["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    # a table through v1beta1 has Kueue's v1beta1 columns (.spec.cohort)
    table = await kubectl.ok("get", "clusterqueues.v1beta1.kueue.x-k8s.io")
    assert table.split("\n")[1].split()[:2] == ["cluster-queue", "team"]
    versions = json.loads(await kubectl.ok("get", "--raw", "/apis/kueue.x-k8s.io"))
    assert [v["version"] for v in versions["versions"]] == ["v1beta2", "v1beta1"]
    assert versions["preferredVersion"]["version"] == "v1beta2"
    resources = await kubectl.ok("api-resources", "--api-group=kueue.x-k8s.io", "-o", "name")
    assert "clusterqueues.kueue.x-k8s.io" in resources.split()
    # kubectl explain reads Kueue's v1beta1 schema from /openapi/v3
    explained = await kubectl.ok("explain", "clusterqueues.spec.cohort", "--api-version=kueue.x-k8s.io/v1beta1")
    assert "FIELD: cohort" in explained
    code, _, err = await kubectl.run("explain", "clusterqueues.spec.cohort", "--api-version=kueue.x-k8s.io/v1beta2")
    assert code != 0 and "cohort" in err
    # a second client-side apply is a merge patch computed on the v1beta1 object; the names Kueue's conversion
    # rewrites (Borrow, admissionChecks) are sent again, as to Kueue, and convert to the object already stored
    code, out, err = await kubectl.run("apply", "-f", "-", stdin=SETUP)
    assert code == 0, err
    assert "localqueue.kueue.x-k8s.io/user-queue unchanged" in out
    again = await get_json(kubectl, "clusterqueues.v1beta2.kueue.x-k8s.io", "cluster-queue")
    assert again["metadata"]["resourceVersion"] == cq["metadata"]["resourceVersion"]


async def test_patch_server_side_apply_and_status_through_v1beta1(
    cluster: emulator.ClusterEmulator, kubectl: Kubectl
) -> None:
    """A merge patch, a server-side apply and a status patch through v1beta1 land as the v1beta2 fields."""
    await kubectl.ok("apply", "-f", "-", stdin=SETUP)
    await kubectl.ok(
        "patch",
        "clusterqueues.v1beta1.kueue.x-k8s.io",
        "cluster-queue",
        "--type=merge",
        "-p",
        '{"spec":{"cohort":"other"}}',
    )
    cq = await get_json(kubectl, "clusterqueues.v1beta2.kueue.x-k8s.io", "cluster-queue")
    assert cq["spec"]["cohortName"] == "other"
    workload = textwrap.dedent(
        """\
        apiVersion: kueue.x-k8s.io/v1beta1
        kind: Workload
        metadata: {name: wl, namespace: default}
        spec:
          queueName: user-queue
          priorityClassSource: kueue.x-k8s.io/workloadpriorityclass
          priorityClassName: high
          priority: 100
          podSets:
          - name: main
            count: 1
            template:
              spec:
                restartPolicy: Never
                containers:
                - name: c
                  image: busybox
                  resources: {requests: {cpu: "1"}}
        """
    )
    code, _, err = await kubectl.run("apply", "--server-side", "-f", "-", stdin=workload)
    assert code == 0, err
    assert DEPRECATION in err
    stored = await get_json(kubectl, "workloads.v1beta2.kueue.x-k8s.io", "-n", "default", "wl")
    assert stored["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }
    assert "priorityClassSource" not in stored["spec"]
    shown = await get_json(kubectl, "workloads.v1beta1.kueue.x-k8s.io", "-n", "default", "wl")
    assert shown["spec"]["priorityClassSource"] == "kueue.x-k8s.io/workloadpriorityclass"
    assert shown["spec"]["priorityClassName"] == "high"
    status = {"status": {"accumulatedPastExexcutionTimeSeconds": 7}}
    await kubectl.ok(
        "patch", "workloads.v1beta1.kueue.x-k8s.io", "-n", "default", "wl",
        "--subresource=status", "--type=merge", "-p", json.dumps(status),
    )  # fmt: skip
    stored = await get_json(kubectl, "workloads.v1beta2.kueue.x-k8s.io", "-n", "default", "wl")
    assert stored["status"]["accumulatedPastExecutionTimeSeconds"] == 7
    assert "accumulatedPastExexcutionTimeSeconds" not in stored["status"]


async def test_strict_fields_are_checked_by_the_v1beta1_schema(
    cluster: emulator.ClusterEmulator, kubectl: Kubectl
) -> None:
    """A v1beta2 field name written through v1beta1 is an unknown field there (kubectl's strict validation)."""
    wrong = SETUP.replace("cohort: team", "cohortName: team")
    code, _, err = await kubectl.run("apply", "-f", "-", stdin=wrong)
    assert code != 0
    assert 'unknown field "spec.cohortName"' in err


async def test_a_watch_through_v1beta1_sees_objects_converted(
    cluster: emulator.ClusterEmulator, kubectl: Kubectl
) -> None:
    """A watch of v1beta1 LocalQueues sees a v1beta2 write converted (status.flavorsUsage as flavorUsage), with the
    deprecation warning in the response's headers."""
    await kubectl.ok("apply", "-f", "-", stdin=SETUP)
    usage = [{"name": "default-flavor", "resources": [{"name": "cpu", "total": "1"}]}]
    status = {"status": {"flavorsUsage": usage}}
    await kubectl.ok(
        "patch", "localqueues.v1beta2.kueue.x-k8s.io", "-n", "default", "user-queue",
        "--subresource=status", "--type=merge", "-p", json.dumps(status),
    )  # fmt: skip
    path = "/apis/kueue.x-k8s.io/v1beta1/namespaces/default/localqueues"
    async with aiohttp.ClientSession() as session:
        params = {"watch": "true", "timeoutSeconds": "1"}
        async with session.get(cluster.url + path, params=params) as response:
            warning = response.headers.get("Warning", "")
            lines = [json.loads(line) for line in (await response.text()).splitlines() if line.strip()]
    assert v1beta1.DEPRECATION_WARNING in warning
    [added] = [event["object"] for event in lines if event["type"] == "ADDED"]
    assert added["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert added["status"]["flavorUsage"] == usage and "flavorsUsage" not in added["status"]
