"""Kueue's kueuectl integration tests (test/integration/singlecluster/kueuectl/: create_test.go, delete_test.go,
list_test.go, passthrough_test.go, resume_test.go, stop_test.go) for ``kubectl kueue`` on the emulated API server.

Kueue runs its ``kueuectl`` command (``app.NewKueuectlCmd``) in the test process against envtest; so do these:
``kueue_es.kueuectl.cli.main`` runs in a thread (its own event loop, the emulator's stays free) with its streams
captured and ``--kubeconfig`` naming the emulator. Envtest runs no Kueue controller and no garbage collector; the
emulator has no Kueue controller either, so a status Kueue's helpers set (util.SetQuotaReservation,
ExpectClusterQueuesToBeActive) is written to the status subresource here as there. Where Kueue compares output
exactly, so do these; ages are read back from the output (Kueue computes them with a fake clock) and checked to be
ages. The pass-through cases hand the command to kubectl (an exec); which argv kubectl gets is checked here, and
the real kubectl runs them in tests/e2e/kueue_e2e_kueuectl.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_es.kueuectl import cli
from kueue_es.services.kube import client, errors, resources
from kueue_es.sim import emulator

pytestmark = pytest.mark.timeout(120)

KUEUE = resources.KUEUE_V1BETA2
AGE = re.compile(r"^(\d+[smhdy])+$|^<invalid>$")


class Kueuectl:
    """``kubectl kueue`` in this process (what Kueue's tests do with app.NewKueuectlCmd), one command at a time."""

    def __init__(self, server: str, directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.kubeconfig = directory / "kubeconfig"
        client.write_kubeconfig(self.kubeconfig, server=server, context="emulator")
        # never the log of a demo running on this machine (positions), nor its kubeconfig
        monkeypatch.setenv("KUEUE_ES_CURRENT", str(directory / "no-current.json"))
        monkeypatch.delenv("KUEUE_ES_NATS_URL", raising=False)
        monkeypatch.delenv("KUEUECTL_LIST_REQUEST_LIMIT", raising=False)
        self.monkeypatch = monkeypatch

    def _main(self, argv: list[str], stdin: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        saved = sys.stdin
        sys.stdin = io.StringIO(stdin)  # an empty stdin: fmt.Fscan fails, the prompt reads it as "no"
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = cli.main([*argv, "--kubeconfig", str(self.kubeconfig)])
                except SystemExit as done:  # a usage error
                    code = done.code if isinstance(done.code, int) else 1
        finally:
            sys.stdin = saved
        return code, out.getvalue(), err.getvalue()

    async def run(self, *argv: str, stdin: str = "") -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of ``kubectl kueue ARGV``."""
        return await asyncio.to_thread(self._main, list(argv), stdin)

    async def ok(self, *argv: str, stdin: str = "") -> str:
        """stdout of a command that must succeed with nothing on stderr (Kueue: ``errOutput`` empty)."""
        code, out, err = await self.run(*argv, stdin=stdin)
        assert (code, err) == (0, ""), f"kubectl kueue {' '.join(argv)} exited {code}: {err}"
        return out


@pytest.fixture
async def kueuectl(cluster: emulator.ClusterEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Kueuectl:
    return Kueuectl(cluster.url, tmp_path, monkeypatch)


@pytest.fixture
async def ns(api: Any) -> str:
    """util.CreateNamespaceFromPrefixWithLog(ctx, k8sClient, "ns-")."""
    await client.create_object(
        api, resources.NAMESPACES, body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns-test"}}
    )
    return "ns-test"


async def _create(
    api: Any, ref: resources.ResourceRef, body: dict[str, Any], namespace: str | None = None
) -> dict[str, Any]:
    return await client.create_object(api, ref, namespace=namespace, body=body)


async def _get(api: Any, ref: resources.ResourceRef, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    try:
        return await client.get_object(api, ref, namespace=namespace, name=name)
    except errors.NotFoundError:
        return None


def cluster_queue(name: str, stop_policy: str | None = None) -> dict[str, Any]:
    """utiltestingapi.MakeClusterQueue(name)[.StopPolicy(p)]."""
    spec: dict[str, Any] = {"namespaceSelector": {}}
    if stop_policy:
        spec["stopPolicy"] = stop_policy
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, ns: str, cq: str = "", stop_policy: str | None = None) -> dict[str, Any]:
    """utiltestingapi.MakeLocalQueue(name, ns)[.ClusterQueue(cq)][.StopPolicy(p)]."""
    spec: dict[str, Any] = {"clusterQueue": cq} if cq else {}  # omitempty
    if stop_policy:
        spec["stopPolicy"] = stop_policy
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def workload(
    name: str, ns: str, *, queue: str = "", active: bool | None = None, owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    """utiltestingapi.MakeWorkload(name, ns)[.Queue(q)][.Active(a)][.OwnerReference(...)]: one pod set "main"."""
    spec: dict[str, Any] = {
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "pause"}]}},
            }
        ]
    }
    if queue:
        spec["queueName"] = queue
    if active is not None:
        spec["active"] = active
    metadata: dict[str, Any] = {"name": name, "namespace": ns}
    if owner:
        metadata["ownerReferences"] = [owner]
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": metadata, "spec": spec}


def flavor(name: str, node_labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec = {"nodeLabels": node_labels} if node_labels else {}
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def ages(text: str, column: int) -> list[str]:
    """The cells under the header from character ``column`` on (the AGE column), each checked to be an age."""
    found = [line[column:] for line in text.splitlines()[1:]]
    assert all(AGE.match(age) for age in found), found
    return found


def with_ages(expected: str, out: str) -> str:
    """``expected`` (Kueue's table, its AGE column ``{age}`` each row) with the ages the output shows."""
    column = out.splitlines()[0].index("AGE")
    return expected.format(*ages(out, column))


# -- create_test.go ----------------------------------------------------------------------------------------------------


async def test_create_local_queue_with_full_flags_in_the_default_namespace_and_unknown_cq(
    kueuectl: Kueuectl, api: Any, ns: str
) -> None:
    """ "Should create a local queue", "... with unknown cluster queue", "... with default namespace", "Should not
    create a local queue with unknown cluster queue"."""
    await _create(api, resources.CLUSTER_QUEUES, cluster_queue("cq"))
    out = await kueuectl.ok("create", "localqueue", "lq", "--clusterqueue", "cq", "--namespace", ns)
    assert out == "localqueue.kueue.x-k8s.io/lq created\n"
    assert (await _get(api, resources.LOCAL_QUEUES, "lq", ns) or {})["spec"]["clusterQueue"] == "cq"

    await kueuectl.ok(
        "create", "localqueue", "lq-unknown", "--clusterqueue", "cq-unknown", "--namespace", ns, "--ignore-unknown-cq"
    )
    assert (await _get(api, resources.LOCAL_QUEUES, "lq-unknown", ns) or {})["spec"]["clusterQueue"] == "cq-unknown"

    await kueuectl.ok("--namespace", ns, "create", "lq", "lq-default", "-c", "cq")  # configFlags.Namespace
    assert (await _get(api, resources.LOCAL_QUEUES, "lq-default", ns) or {})["spec"]["clusterQueue"] == "cq"

    code, out, err = await kueuectl.run(
        "create", "localqueue", "lq-refused", "--clusterqueue", "cq-unknown", "--namespace", ns
    )
    assert (code, out, err) == (1, "", 'Error: clusterqueues.kueue.x-k8s.io "cq-unknown" not found\n')
    assert await _get(api, resources.LOCAL_QUEUES, "lq-refused", ns) is None


async def test_create_local_queue_prints_yaml_and_json_as_kueuectls_typed_client(
    kueuectl: Kueuectl, api: Any, ns: str
) -> None:
    """ "Should print the created local queue as YAML" / "... as JSON": the stored object as kueuectl's typed
    clientset decodes it (the LocalQueue's status counters, not omitempty, written as 0) and cli-runtime prints it,
    without managedFields, YAML as sigs.k8s.io/yaml writes it, JSON in Go's field order."""
    await _create(api, resources.CLUSTER_QUEUES, cluster_queue("cq"))
    out = await kueuectl.ok("create", "localqueue", "lq-yaml", "--clusterqueue", "cq", "--namespace", ns, "-o", "yaml")
    stored = await _get(api, resources.LOCAL_QUEUES, "lq-yaml", ns)
    assert stored is not None and stored["metadata"].get("managedFields")
    meta = stored["metadata"]
    assert out == (
        "apiVersion: kueue.x-k8s.io/v1beta2\n"
        "kind: LocalQueue\n"
        "metadata:\n"
        f'  creationTimestamp: "{meta["creationTimestamp"]}"\n'
        f"  generation: {meta['generation']}\n"
        "  name: lq-yaml\n"
        f"  namespace: {ns}\n"
        f'  resourceVersion: "{meta["resourceVersion"]}"\n'
        f"  uid: {meta['uid']}\n"
        "spec:\n"
        "  clusterQueue: cq\n"
        "  stopPolicy: None\n"
        "status:\n"
        "  admittedWorkloads: 0\n"
        "  pendingWorkloads: 0\n"
        "  reservingWorkloads: 0\n"
    )
    with_fields = yaml.safe_load(
        await kueuectl.ok("create", "lq", "lq-fields", "-c", "cq", "-n", ns, "-o", "yaml", "--show-managed-fields")
    )
    assert with_fields["metadata"]["managedFields"]

    out = await kueuectl.ok("create", "localqueue", "lq-json", "--clusterqueue", "cq", "--namespace", ns, "-o", "json")
    created = json.loads(out)
    assert (created["metadata"]["name"], created["spec"]["clusterQueue"]) == ("lq-json", "cq")
    assert list(created) == ["kind", "apiVersion", "metadata", "spec", "status"]
    assert list(created["metadata"])[:3] == ["name", "namespace", "uid"] and "managedFields" not in created["metadata"]
    assert out.startswith('{\n    "kind": "LocalQueue",\n    "apiVersion": "kueue.x-k8s.io/v1beta2",\n')
    assert await _get(api, resources.LOCAL_QUEUES, "lq-json", ns) is not None


async def test_create_local_queue_client_dry_run_stores_nothing(kueuectl: Kueuectl, api: Any, ns: str) -> None:
    """ "Should not create a local queue with --dry-run=client": nothing stored, the object still printed."""
    await _create(api, resources.CLUSTER_QUEUES, cluster_queue("cq"))
    out = await kueuectl.ok(
        "create", "localqueue", "lq-dryrun", "--clusterqueue", "cq", "--namespace", ns, "--dry-run=client"
    )
    assert out == "localqueue.kueue.x-k8s.io/lq-dryrun created (client dry run)\n"
    assert await _get(api, resources.LOCAL_QUEUES, "lq-dryrun", ns) is None


def _quotas(name: str, **resources_: tuple[str, ...]) -> dict[str, Any]:
    """utiltestingapi.MakeFlavorQuotas(name).Resource(r, nominal[, borrowing[, lending]])..."""
    found = []
    for resource, (nominal, *limits) in resources_.items():
        entry = {"name": resource, "nominalQuota": nominal}
        for key, value in zip(("borrowingLimit", "lendingLimit"), limits, strict=False):
            entry[key] = value
        found.append(entry)
    return {"name": name, "resources": found}


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        pytest.param(
            ["--cohort", "cohort", "--queuing-strategy", "StrictFIFO", "--namespace-selector", "fooX=barX,fooY=barY",
             "--reclaim-within-cohort", "Any", "--preemption-within-cluster-queue", "LowerPriority",
             "--nominal-quota", "alpha:cpu=0;memory=0"],
            [{"coveredResources": ["cpu", "memory"], "flavors": [_quotas("alpha", cpu=("0",), memory=("0",))]}],
            id="nominal quota and a single resource flavor",
        ),
        pytest.param(
            ["--nominal-quota", "alpha:cpu=0;memory=0,beta:cpu=0;memory=0"],
            [{"coveredResources": ["cpu", "memory"],
              "flavors": [_quotas("alpha", cpu=("0",), memory=("0",)), _quotas("beta", cpu=("0",), memory=("0",))]}],
            id="nominal quota, a single resource group and multiple flavors",
        ),
        pytest.param(
            ["--nominal-quota", "alpha:cpu=0;memory=0,beta:gpu=0,gamma:cpu=0;memory=0"],
            [{"coveredResources": ["cpu", "memory"],
              "flavors": [_quotas("alpha", cpu=("0",), memory=("0",)), _quotas("gamma", cpu=("0",), memory=("0",))]},
             {"coveredResources": ["gpu"], "flavors": [_quotas("beta", gpu=("0",))]}],
            id="nominal quota, multiple resource groups and multiple flavors",
        ),
        pytest.param(
            ["--cohort", "cohort", "--queuing-strategy", "StrictFIFO", "--namespace-selector", "foo=bar",
             "--reclaim-within-cohort", "Any", "--preemption-within-cluster-queue", "LowerPriority",
             "--nominal-quota", "alpha:cpu=0;memory=0", "--borrowing-limit", "alpha:cpu=0;memory=0",
             "--lending-limit", "alpha:cpu=0;memory=0"],
            [{"coveredResources": ["cpu", "memory"],
              "flavors": [_quotas("alpha", cpu=("0", "0", "0"), memory=("0", "0", "0"))]}],
            id="all options, a single resource group and a single flavor",
        ),
        pytest.param(
            ["--cohort", "cohort", "--queuing-strategy", "StrictFIFO", "--namespace-selector", "fooX=barX,fooY=barY",
             "--reclaim-within-cohort", "Any", "--preemption-within-cluster-queue", "LowerPriority",
             "--nominal-quota", "alpha:cpu=2;memory=2", "--nominal-quota", "beta:gpu=2",
             "--nominal-quota", "gamma:cpu=2;memory=2",
             "--borrowing-limit", "alpha:cpu=1;memory=1,gamma:cpu=1;memory=1", "--borrowing-limit", "beta:gpu=1",
             "--lending-limit", "alpha:cpu=0;memory=0,beta:gpu=0,gamma:cpu=0;memory=0"],
            [{"coveredResources": ["cpu", "memory"],
              "flavors": [_quotas("alpha", cpu=("2", "1", "0"), memory=("2", "1", "0")),
                          _quotas("gamma", cpu=("2", "1", "0"), memory=("2", "1", "0"))]},
             {"coveredResources": ["gpu"], "flavors": [_quotas("beta", gpu=("2", "1", "0"))]}],
            id="all options, multiple resource groups and multiple flavors",
        ),
    ],
)  # fmt: skip
async def test_create_cluster_queue_with_quota_flags(
    kueuectl: Kueuectl, api: Any, flags: list[str], expected: list[dict[str, Any]]
) -> None:
    """ "Should create a cluster queue with ..." (create_test.go): the flags become Kueue's spec."""
    assert (
        await kueuectl.ok("create", "cq", "cluster-queue", *flags)
        == "clusterqueue.kueue.x-k8s.io/cluster-queue created\n"
    )
    spec = (await _get(api, resources.CLUSTER_QUEUES, "cluster-queue") or {})["spec"]
    assert spec["resourceGroups"] == expected
    if "--cohort" in flags:
        assert (spec["cohortName"], spec["queueingStrategy"]) == ("cohort", "StrictFIFO")
        assert (spec["preemption"]["reclaimWithinCohort"], spec["preemption"]["withinClusterQueue"]) == (
            "Any",
            "LowerPriority",
        )
        selector = flags[flags.index("--namespace-selector") + 1]
        assert spec["namespaceSelector"] == {"matchLabels": dict(kv.split("=") for kv in selector.split(","))}


async def test_create_cluster_queue_with_default_values(kueuectl: Kueuectl, api: Any) -> None:
    """ "Should create a cluster queue with default values"."""
    await kueuectl.ok("create", "cq", "cluster-queue")
    spec = (await _get(api, resources.CLUSTER_QUEUES, "cluster-queue") or {})["spec"]
    assert "cohortName" not in spec and spec["queueingStrategy"] == "BestEffortFIFO"
    assert spec["namespaceSelector"] == {}
    assert (spec["preemption"]["reclaimWithinCohort"], spec["preemption"]["withinClusterQueue"]) == ("Never", "Never")


async def test_create_resource_flavor_plain_with_flags_and_server_dry_run(kueuectl: Kueuectl, api: Any) -> None:
    """ "Should create a resource flavor", "... with optional flags", "Shouldn't create a resource flavor with server
    dry-run strategy": Kueue compares stdout exactly and wants stderr empty."""
    assert (
        await kueuectl.ok("create", "resourceflavor", "resource-flavor")
        == "resourceflavor.kueue.x-k8s.io/resource-flavor created\n"
    )
    spec = (await _get(api, resources.RESOURCE_FLAVORS, "resource-flavor") or {}).get("spec") or {}
    assert not spec.get("nodeLabels") and not spec.get("nodeTaints") and not spec.get("tolerations")

    out = await kueuectl.ok(
        "create", "resourceflavor", "rf-flags",
        "--node-labels", "kubernetes.io/arch=arm64,kubernetes.io/os=linux",
        "--node-taints", "key1=value1:NoSchedule,key2=value2:NoSchedule",
        "--tolerations", "key1=value1:NoSchedule,key2:NoSchedule",
    )  # fmt: skip
    assert out == "resourceflavor.kueue.x-k8s.io/rf-flags created\n"
    spec = (await _get(api, resources.RESOURCE_FLAVORS, "rf-flags") or {})["spec"]
    assert spec["nodeLabels"] == {"kubernetes.io/arch": "arm64", "kubernetes.io/os": "linux"}
    assert {(t["key"], t["value"], t["effect"]) for t in spec["nodeTaints"]} == {
        ("key1", "value1", "NoSchedule"),
        ("key2", "value2", "NoSchedule"),
    }
    assert {(t["key"], t["operator"], t.get("value"), t["effect"]) for t in spec["tolerations"]} == {
        ("key1", "Equal", "value1", "NoSchedule"),
        ("key2", "Exists", None, "NoSchedule"),
    }

    out = await kueuectl.ok("create", "resourceflavor", "rf-dry", "--dry-run", "server")
    assert out == "resourceflavor.kueue.x-k8s.io/rf-dry created (server dry run)\n"
    assert await _get(api, resources.RESOURCE_FLAVORS, "rf-dry") is None


# -- delete_test.go ----------------------------------------------------------------------------------------------------


async def test_delete_workload_standalone_with_yes_and_owned_declined(kueuectl: Kueuectl, api: Any, ns: str) -> None:
    """ "Should delete a standalone workload with --yes"; "Should not delete a workload with owner references when
    confirmation is declined" (empty stdin: "Deletion is canceled", the Workload stays)."""
    await _create(api, resources.WORKLOADS, workload("wl-delete", ns), ns)
    out = await kueuectl.ok("delete", "workload", "wl-delete", "--namespace", ns, "--yes")
    assert out == "workload.kueue.x-k8s.io/wl-delete deleted\n"
    assert await _get(api, resources.WORKLOADS, "wl-delete", ns) is None

    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j-protected", "uid": "j-protected-uid"}
    await _create(api, resources.WORKLOADS, workload("wl-protected", ns, owner=owner), ns)
    out = await kueuectl.ok("delete", "workload", "wl-protected", "--namespace", ns)
    assert out == (
        "This operation will also delete:\n"
        f"  - jobs.batch/j-protected associated with the {ns}/wl-protected workload\n"
        "Do you want to proceed (y/n)? Deletion is canceled\n"
    )
    assert await _get(api, resources.WORKLOADS, "wl-protected", ns) is not None


# -- list_test.go ------------------------------------------------------------------------------------------------------


async def _local_queues(api: Any, ns: str) -> None:
    for name, cq in (("lq1", "cq1"), ("lq2", "very-long-cluster-queue-name"), ("very-long-local-queue-name", "cq1")):
        await _create(api, resources.LOCAL_QUEUES, local_queue(name, ns, cq), ns)


async def test_list_local_queues_by_field_selector_with_paging_as_json_and_across_namespaces(
    kueuectl: Kueuectl, api: Any, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """List LocalQueue: "... filtered by field selector", "... with paging" (a request limit of 1), "... as JSON",
    "... across all namespaces with -A"."""
    await _local_queues(api, ns)
    out = await kueuectl.ok("list", "localqueue", "--field-selector", "metadata.name=lq1", "--namespace", ns)
    assert out == with_ages(
        "NAME   CLUSTERQUEUE   PENDING WORKLOADS   ADMITTED WORKLOADS   AGE\n"
        "lq1    cq1            0                   0                    {}\n",
        out,
    )
    monkeypatch.setenv("KUEUECTL_LIST_REQUEST_LIMIT", "1")
    out = await kueuectl.ok("list", "localqueue", "--namespace", ns)
    assert out == with_ages(
        "NAME                         CLUSTERQUEUE                   PENDING WORKLOADS   ADMITTED WORKLOADS   AGE\n"
        "lq1                          cq1                            0                   0                    {}\n"
        "lq2                          very-long-cluster-queue-name   0                   0                    {}\n"
        "very-long-local-queue-name   cq1                            0                   0                    {}\n",
        out,
    )
    monkeypatch.delenv("KUEUECTL_LIST_REQUEST_LIMIT")

    listed = json.loads(await kueuectl.ok("list", "localqueue", "--namespace", ns, "-o", "json"))
    assert listed["kind"] == "LocalQueueList" and len(listed["items"]) == 3
    assert {"name": "lq1", "cq": "cq1"} in [
        {"name": i["metadata"]["name"], "cq": i["spec"]["clusterQueue"]} for i in listed["items"]
    ]
    assert listed["metadata"]["resourceVersion"]  # the page's ListMeta, as the typed list keeps it

    await client.create_object(
        api, resources.NAMESPACES, body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns-other"}}
    )
    await _create(api, resources.LOCAL_QUEUES, local_queue("lq-other", "ns-other", "cq1"), "ns-other")
    await _create(api, resources.LOCAL_QUEUES, local_queue("lq-primary", ns, "cq1"), ns)
    listed = json.loads(await kueuectl.ok("list", "localqueue", "-A", "-o", "json"))
    found = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]}
    assert {(ns, "lq-primary"), ("ns-other", "lq-other")} <= found


async def test_list_output_prints_each_page_and_an_empty_list(
    kueuectl: Kueuectl, api: Any, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kueuectl prints every page it reads through the printer (list_localqueue.go Run): with -o yaml and a request
    limit of 2, two lists, the second after ``---``; a filter leaving nothing still prints the (empty) list, then
    "No resources found" on stderr."""
    await _local_queues(api, ns)
    monkeypatch.setenv("KUEUECTL_LIST_REQUEST_LIMIT", "2")
    out = await kueuectl.ok("list", "lq", "-n", ns, "-o", "yaml")
    pages = list(yaml.safe_load_all(out))
    assert [[i["metadata"]["name"] for i in page["items"]] for page in pages] == [
        ["lq1", "lq2"],
        ["very-long-local-queue-name"],
    ]
    assert pages[0]["metadata"]["continue"] and "continue" not in pages[1]["metadata"]
    assert "\n---\napiVersion: kueue.x-k8s.io/v1beta2\nitems:\n" in out
    monkeypatch.delenv("KUEUECTL_LIST_REQUEST_LIMIT")
    code, out, err = await kueuectl.run("list", "lq", "-n", ns, "-c", "nope", "-o", "json")
    assert (code, err) == (0, f"No resources found in {ns} namespace.\n")
    assert json.loads(out)["items"] == [] and out.startswith('{\n    "kind": "LocalQueueList",\n')


async def _active(api: Any, name: str) -> None:
    """util.ExpectClusterQueuesToBeActive: Kueue's controller has set Active (envtest runs the manager)."""
    condition = {
        "type": "Active",
        "status": "True",
        "reason": "Ready",
        "message": "Can admit new workloads",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status = {"status": {"conditions": [condition]}}
    await client.patch_object(api, resources.CLUSTER_QUEUES, name=name, patch=status, subresource="status")


async def test_list_cluster_queues_by_field_selector_and_with_paging(
    kueuectl: Kueuectl, api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """List ClusterQueue: "... filtered by field selector", "... with paging"."""
    for name in ("cq1", "very-long-cluster-queue-name"):
        await _create(api, resources.CLUSTER_QUEUES, cluster_queue(name))
        await _active(api, name)
    out = await kueuectl.ok("list", "clusterqueue", "--field-selector", "metadata.name=cq1")
    assert out == with_ages(
        "NAME   COHORT   PENDING WORKLOADS   ADMITTED WORKLOADS   ACTIVE   AGE\n"
        "cq1             0                   0                    true     {}\n",
        out,
    )
    monkeypatch.setenv("KUEUECTL_LIST_REQUEST_LIMIT", "1")
    out = await kueuectl.ok("list", "clusterqueue")
    assert out == with_ages(
        "NAME                           COHORT   PENDING WORKLOADS   ADMITTED WORKLOADS   ACTIVE   AGE\n"
        "cq1                                     0                   0                    true     {}\n"
        "very-long-cluster-queue-name            0                   0                    true     {}\n",
        out,
    )


async def _reserve(api: Any, ns: str, name: str, cq: str) -> None:
    """util.SetQuotaReservation(wl, MakeAdmission(cq)): status.admission and QuotaReserved."""
    condition = {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": f"Quota reserved in ClusterQueue {cq}",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    admission = {"clusterQueue": cq, "podSetAssignments": [{"name": "main", "count": 1}]}
    status = {"status": {"admission": admission, "conditions": [condition]}}
    await client.patch_object(api, resources.WORKLOADS, namespace=ns, name=name, patch=status, subresource="status")


async def test_list_workloads_by_field_selectors_and_with_paging(
    kueuectl: Kueuectl, api: Any, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """List Workloads: "... filtered by field selector", "... with paging", "Should filter workloads by
    status.admission.clusterQueue field selector" (=cq2, != empty, = empty)."""
    for name, queue in (("wl1", "lq1"), ("wl2", "very-long-local-queue-name"), ("very-long-workload-name", "lq1")):
        await _create(api, resources.WORKLOADS, workload(name, ns, queue=queue), ns)
    out = await kueuectl.ok("list", "workload", "--field-selector", "metadata.name=wl1", "--namespace", ns)
    assert out == with_ages(
        "NAME   JOB TYPE   JOB NAME   LOCALQUEUE   CLUSTERQUEUE   STATUS    POSITION IN QUEUE   EXEC TIME   AGE\n"
        "wl1                          lq1                         PENDING                                   {}\n",
        out,
    )
    monkeypatch.setenv("KUEUECTL_LIST_REQUEST_LIMIT", "1")
    out = await kueuectl.ok("list", "workload", "--namespace", ns)
    assert out == with_ages(
        "NAME                      JOB TYPE   JOB NAME   LOCALQUEUE                   CLUSTERQUEUE   STATUS    POSITION IN QUEUE   EXEC TIME   AGE\n"
        "very-long-workload-name                         lq1                                         PENDING                                   {}\n"
        "wl1                                             lq1                                         PENDING                                   {}\n"
        "wl2                                             very-long-local-queue-name                  PENDING                                   {}\n",
        out,
    )
    monkeypatch.delenv("KUEUECTL_LIST_REQUEST_LIMIT")

    for name, cq in (("wl-cq1", "cq1"), ("wl-cq2a", "cq2"), ("wl-cq2b", "cq2"), ("wl-pending", "")):
        await _create(api, resources.WORKLOADS, workload(name, ns, queue="lq1"), ns)
        if cq:
            await _reserve(api, ns, name, cq)

    async def names(selector: str) -> set[str]:
        out = await kueuectl.ok("list", "workload", "--field-selector", selector, "--namespace", ns)
        return {line.split()[0] for line in out.splitlines()[1:]}

    assert await names("status.admission.clusterQueue=cq2") == {"wl-cq2a", "wl-cq2b"}
    assert await names("status.admission.clusterQueue!=") == {"wl-cq1", "wl-cq2a", "wl-cq2b"}
    assert await names("status.admission.clusterQueue=") == {"wl-pending", "wl1", "wl2", "very-long-workload-name"}


async def test_list_resource_flavors_by_field_selector_and_with_paging(
    kueuectl: Kueuectl, api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """List ResourceFlavors: "... filtered by field selector", "... with paging"."""
    for name in ("rf1", "very-long-resource-flavor-name"):
        await _create(api, resources.RESOURCE_FLAVORS, flavor(name))
    out = await kueuectl.ok("list", "resourceflavor", "--field-selector", "metadata.name=rf1")
    assert out == with_ages("NAME   NODE LABELS   AGE\nrf1                  {}\n", out)
    monkeypatch.setenv("KUEUECTL_LIST_REQUEST_LIMIT", "1")
    out = await kueuectl.ok("list", "resourceflavor")
    assert out == with_ages(
        "NAME                             NODE LABELS   AGE\n"
        "rf1                                            {}\n"
        "very-long-resource-flavor-name                 {}\n",
        out,
    )


async def test_list_workload_job_type_is_the_discovery_entrys_singular_name(
    kueuectl: Kueuectl, api: Any, ns: str
) -> None:
    """JOB TYPE is the owner kind's singularName and, only when its discovery entry names one, its group
    (list_workload_printer.go apiResourceType): an API server names none for a batch/v1 Job, so ``job``."""
    job = await client.create_object(
        api,
        resources.JOBS,
        namespace=ns,
        body={
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "sample"},
            "spec": {
                "suspend": True,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "pause"}]}},
            },
        },
    )
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "sample",
        "uid": job["metadata"]["uid"],
        "controller": True,
    }
    await _create(api, resources.WORKLOADS, workload("job-sample", ns, queue="lq1", owner=owner), ns)
    out = await kueuectl.ok("list", "workload", "-n", ns)
    assert out.splitlines()[1].split()[:3] == ["job-sample", "job", "sample"]


# -- stop_test.go, resume_test.go ----------------------------------------------------------------------------------------


async def test_stop_and_resume_workload(kueuectl: Kueuectl, api: Any, ns: str) -> None:
    """ "Should stop the Workload" (active, then stopped) and "Should resume the Workload" (created inactive)."""
    await _create(api, resources.WORKLOADS, workload("wl", ns), ns)
    assert await kueuectl.ok("stop", "workload", "wl", "--namespace", ns) == "workload.kueue.x-k8s.io/wl stopped\n"
    assert (await _get(api, resources.WORKLOADS, "wl", ns) or {})["spec"]["active"] is False
    await _create(api, resources.WORKLOADS, workload("wl-inactive", ns, active=False), ns)
    assert (
        await kueuectl.ok("resume", "workload", "wl-inactive", "--namespace", ns)
        == "workload.kueue.x-k8s.io/wl-inactive resumed\n"
    )
    assert (await _get(api, resources.WORKLOADS, "wl-inactive", ns) or {})["spec"]["active"] is True


@pytest.mark.parametrize("kind", ["localqueue", "clusterqueue"])
async def test_stop_and_resume_queues_and_their_dry_runs(kueuectl: Kueuectl, api: Any, ns: str, kind: str) -> None:
    """ "Should stop a LocalQueue|ClusterQueue" (drain: HoldAndDrain; --keep-already-running: Hold), "Should not
    stop ... with --dry-run" (client, server), "Should resume ..." (from HoldAndDrain and from Hold), "Should not
    resume ... with --dry-run"."""
    ref = resources.LOCAL_QUEUES if kind == "localqueue" else resources.CLUSTER_QUEUES
    namespace = ns if kind == "localqueue" else None
    where = ["--namespace", ns] if namespace else []

    async def make(name: str, stop_policy: str | None = None) -> None:
        # Kueue's LocalQueues here name no ClusterQueue (MakeLocalQueue(name, ns), spec.clusterQueue optional)
        body = local_queue(name, ns, stop_policy=stop_policy) if namespace else cluster_queue(name, stop_policy)
        created = await _create(api, ref, body, namespace)
        assert "clusterQueue" not in created.get("spec", {})

    async def policy(name: str) -> str:
        return str((await _get(api, ref, name, namespace) or {})["spec"].get("stopPolicy") or "None")

    for name, flags, wanted in (("q-drain", [], "HoldAndDrain"), ("q-hold", ["--keep-already-running"], "Hold")):
        await make(name)
        assert await kueuectl.ok("stop", kind, name, *where, *flags) == f"{kind}.kueue.x-k8s.io/{name}\n"
        assert await policy(name) == wanted
    for strategy in ("client", "server"):
        await make(f"q-stop-{strategy}")
        out = await kueuectl.ok("stop", kind, f"q-stop-{strategy}", *where, "--dry-run", strategy)
        assert out == f"{kind}.kueue.x-k8s.io/q-stop-{strategy}  ({strategy} dry run)\n"  # NamePrinter: " " + " (...)"
        assert await policy(f"q-stop-{strategy}") == "None"
    for initial in ("HoldAndDrain", "Hold"):
        await make(f"q-from-{initial.lower()}", initial)
        await kueuectl.ok("resume", kind, f"q-from-{initial.lower()}", *where)
        assert await policy(f"q-from-{initial.lower()}") == "None"
    for strategy in ("client", "server"):
        await make(f"q-resume-{strategy}", "HoldAndDrain")
        await kueuectl.ok("resume", kind, f"q-resume-{strategy}", *where, "--dry-run", strategy)
        assert await policy(f"q-resume-{strategy}") == "HoldAndDrain"


async def test_list_local_queues_prints_an_empty_cluster_queue_for_a_queue_without_one(
    kueuectl: Kueuectl, api: Any, ns: str
) -> None:
    """A LocalQueue as stop_test.go's (MakeLocalQueue(name, ns): no ClusterQueue) lists with an empty ClusterQueue
    cell (list_localqueue_printer.go prints ``Spec.ClusterQueue``, ""), and ``--clusterqueue`` leaves it out."""
    await _create(api, resources.LOCAL_QUEUES, local_queue("lq-none", ns), ns)
    await _create(api, resources.LOCAL_QUEUES, local_queue("lq-cq", ns, "cq1"), ns)
    out = await kueuectl.ok("list", "localqueue", "--namespace", ns)
    assert out == with_ages(
        "NAME      CLUSTERQUEUE   PENDING WORKLOADS   ADMITTED WORKLOADS   AGE\n"
        "lq-cq     cq1            0                   0                    {}\n"
        "lq-none                  0                   0                    {}\n",
        out,
    )
    out = await kueuectl.ok("list", "localqueue", "--namespace", ns, "-c", "cq1", "-o", "name")
    assert out == "localqueue.kueue.x-k8s.io/lq-cq\n"


# -- passthrough_test.go ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "name", "get_path", "patch", "delete_args"),
    [
        ("workload", "pass-through-wl", "{.spec.active}", '{"spec":{"active":false}}', ["--yes"]),
        ("kwl", "pass-through-wl", "{.spec.active}", '{"spec":{"active":false}}', ["--yes"]),
        ("localqueue", "pass-through-lq", "{.spec.stopPolicy}", '{"spec":{"stopPolicy":"Hold"}}', []),
        ("lq", "pass-through-lq", "{.spec.stopPolicy}", '{"spec":{"stopPolicy":"Hold"}}', []),
        ("clusterqueue", "pass-through-cq", "{.spec.stopPolicy}", '{"spec":{"stopPolicy":"Hold"}}', []),
        ("cq", "pass-through-cq", "{.spec.stopPolicy}", '{"spec":{"stopPolicy":"Hold"}}', []),
        ("resourceflavor", "pass-through-resource-flavor", "{.spec.nodeLabels.type}", '{"spec":{"nodeLabels":{"type":"large"}}}', []),
        ("rf", "pass-through-resource-flavor", "{.spec.nodeLabels.type}", '{"spec":{"nodeLabels":{"type":"large"}}}', []),
    ],
)  # fmt: skip
def test_pass_through_commands_run_kubectl_with_the_same_arguments(
    monkeypatch: pytest.MonkeyPatch, kind: str, name: str, get_path: str, patch: str, delete_args: list[str]
) -> None:
    """ "Pass-through commands": get and patch of every kind and its short name are kubectl's, argument for argument
    (passthrough.go execs kubectl with os.Args); delete too, but of a Workload, which is kueuectl's own."""
    calls: list[list[str]] = []
    monkeypatch.setattr(cli.shutil, "which", lambda program: f"/bin/{program}")
    monkeypatch.setattr(cli, "pass_through", lambda argv: calls.append(list(argv)) or 0)
    where = ["-n", "ns"] if kind in ("workload", "kwl", "localqueue", "lq") else []
    commands = [
        ["get", kind, name, *where, f"-o=jsonpath='{get_path}'"],
        ["patch", kind, name, *where, "--type=merge", "-p", patch],
        ["delete", kind, name, *where, *delete_args],
    ]
    for argv in commands:
        if argv[0] == "delete" and kind in ("workload", "kwl"):
            assert cli._passthrough_kind(argv) is None  # delete workload: kueuectl's (delete_workload.go)
            continue
        assert cli.main(argv) == 0
    assert calls == [argv for argv in commands if not (argv[0] == "delete" and kind in ("workload", "kwl"))]


async def test_an_output_format_it_cannot_print_is_refused_as_cli_runtime_words_it(kueuectl: Kueuectl) -> None:
    """cli-runtime's NoCompatiblePrinterError: the formats joined by a bare comma (here the three kubectl kueue
    prints; kueuectl lists its template formats too), exit 1, nothing created."""
    code, out, err = await kueuectl.run("create", "rf", "rf-xml", "-o", "xml")
    assert (code, out) == (1, "")
    assert (
        err
        == 'Error: unable to match a printer suitable for the output format "xml", allowed formats are: json,yaml,name\n'
    )
