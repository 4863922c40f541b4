"""``kubectl kueue`` (kueue_es/kueuectl) against the emulated API server, as kueuectl's own tests use it.

The plugin runs as a process (``python -m kueue_es.kueuectl.cli``, what the ``kubectl-kueue`` script runs)
with a kubeconfig naming an emulator on a free port; one test runs it through the real kubectl found on
PATH, as ``kubectl kueue ...``. Expected tables are kueuectl's (its integration tests,
test/integration/singlecluster/kueuectl/list_test.go), with the age cells read back from the output.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_es.kueuectl import cli, printing, specs
from kueue_es.kueuectl.connect import Failure
from kueue_es.services.kube import client, resources
from kueue_es.sim import emulator
from tests.kube import examples
from tests.kube.test_custom_resources import FIXTURES

pytestmark = pytest.mark.timeout(120)

POD_GROUP = "kueue.x-k8s.io/pod-group-name"


class Plugin:
    """Runs ``kubectl-kueue`` (or ``kubectl kueue``) as a process against one emulator."""

    def __init__(self, server: str, directory: Path) -> None:
        self.kubeconfig = directory / "kubeconfig"
        client.write_kubeconfig(self.kubeconfig, server=server, context="emulator")
        self.env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "KUEUE_ES_CURRENT": str(directory / "no-current.json"),  # never a demo another test left running
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.env.pop("KUEUE_ES_NATS_URL", None)

    async def run(self, *args: str, stdin: str | None = None, kubectl: bool = False) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of the plugin with ``args``; through kubectl when ``kubectl``."""
        command = ["kubectl", "kueue", *args] if kubectl else [sys.executable, "-m", "kueue_es.kueuectl.cli", *args]
        process = await asyncio.create_subprocess_exec(
            *command,
            env=self.env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate(stdin.encode() if stdin is not None else None)
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()

    async def ok(self, *args: str, stdin: str | None = None, kubectl: bool = False) -> str:
        code, out, err = await self.run(*args, stdin=stdin, kubectl=kubectl)
        assert code == 0, f"kubectl kueue {' '.join(args)} exited {code}: {err}"
        return out


@pytest.fixture
async def plugin(cluster: emulator.ClusterEmulator, tmp_path: Path) -> Plugin:
    return Plugin(cluster.url, tmp_path)


def ages(text: str) -> list[str]:
    """The last cell of every row under the header (AGE)."""
    return [line.rsplit(" ", 1)[-1] for line in text.splitlines()[1:]]


async def _job_and_workload(api: Any, name: str, *, queue: str = "user-queue") -> dict[str, Any]:
    job = await client.create_object(
        api,
        resources.JOBS,
        namespace="default",
        body={
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        },
    )
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": name,
        "uid": job["metadata"]["uid"],
        "controller": True,
    }
    return await client.create_object(
        api,
        resources.WORKLOADS,
        namespace="default",
        body={
            "apiVersion": resources.KUEUE_V1BETA2,
            "kind": "Workload",
            "metadata": {"name": f"job-{name}", "ownerReferences": [owner]},
            "spec": {
                "queueName": queue,
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                    }
                ],
            },
        },
    )


# -- the flags as kueuectl parses them ------------------------------------------------------------------


def test_quota_flags_merge_by_flavor_and_group_by_covered_resources() -> None:
    """kueuectl's example: two flavors with the same resources form one group; a borrowing limit joins the
    flavor's nominal quota; values are written in canonical form."""
    cq = specs.cluster_queue(
        "cq",
        cohort="co",
        nominal_quota=["alpha:cpu=9;memory=36Gi;nvidia.com/gpu=10,beta:cpu=18;memory=72Gi;nvidia.com/gpu=20"],
        borrowing_limit=["alpha:cpu=1;memory=1024Mi;nvidia.com/gpu=1"],
    )
    assert cq["spec"]["cohortName"] == "co"
    assert cq["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert cq["spec"]["preemption"] == {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"}
    (group,) = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    assert [f["name"] for f in group["flavors"]] == ["alpha", "beta"]
    assert group["flavors"][0]["resources"][1] == {"name": "memory", "nominalQuota": "36Gi", "borrowingLimit": "1Gi"}
    assert "borrowingLimit" not in group["flavors"][1]["resources"][0]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"nominal_quota": ["alpha:cpu=1.5"]}, "invalid resources specification"),
        ({"nominal_quota": ["alpha"]}, "invalid resources specification"),
        ({"nominal_quota": ["alpha:cpu=1"], "lending_limit": ["alpha:memory=1"]}, "invalid flavor"),
        ({"nominal_quota": ["alpha:cpu=1;memory=1", "beta:cpu=1"]}, "invalid resource group"),
    ],
)
def test_bad_quota_flags_are_refused_with_kueuectls_messages(flags: dict[str, list[str]], message: str) -> None:
    with pytest.raises(Failure, match=f"^{message}$"):
        specs.cluster_queue("cq", **flags)  # type: ignore[arg-type]


def test_taints_and_tolerations_as_kueuectl_reads_them() -> None:
    rf = specs.resource_flavor(
        "rf",
        node_labels={"kubernetes.io/arch": "arm64"},
        node_taints=["key1=value:NoSchedule,key2:NoExecute"],
        tolerations=["key1=value:NoSchedule,key2:NoExecute,key3=value,key4,:PreferNoSchedule"],
    )
    assert rf["spec"]["nodeTaints"] == [
        {"key": "key1", "value": "value", "effect": "NoSchedule"},
        {"key": "key2", "effect": "NoExecute"},
    ]
    assert rf["spec"]["tolerations"] == [
        {"operator": "Equal", "key": "key1", "value": "value", "effect": "NoSchedule"},
        {"operator": "Exists", "key": "key2", "effect": "NoExecute"},
        {"operator": "Equal", "key": "key3", "value": "value"},
        {"operator": "Exists", "key": "key4"},
        {"operator": "Exists", "effect": "PreferNoSchedule"},
    ]
    with pytest.raises(Failure, match="invalid taint spec: key1"):
        specs.resource_flavor("rf", node_taints=["key1"])
    with pytest.raises(Failure, match="invalid taint effect: Sometimes"):
        specs.resource_flavor("rf", node_taints=["key1:Sometimes"])
    with pytest.raises(Failure, match="duplicated taints with the same key and effect"):
        specs.resource_flavor("rf", node_taints=["k=a:NoSchedule", "k=b:NoSchedule"])


def test_table_lays_out_as_kueuectls_tabwriter() -> None:
    """kueuectl's own expected output (list_test.go, "Should print local queues list with paging")."""
    rows = [
        ["lq1", "cq1", 0, 0, "5s"],
        ["lq2", "very-long-cluster-queue-name", 0, 0, "5s"],
        ["very-long-local-queue-name", "cq1", 0, 0, "5s"],
    ]
    text = printing.table(["Name", "ClusterQueue", "Pending Workloads", "Admitted Workloads", "Age"], rows)
    assert text == (
        "NAME                         CLUSTERQUEUE                   PENDING WORKLOADS   ADMITTED WORKLOADS   AGE\n"
        "lq1                          cq1                            0                   0                    5s\n"
        "lq2                          very-long-cluster-queue-name   0                   0                    5s\n"
        "very-long-local-queue-name   cq1                            0                   0                    5s\n"
    )
    cq = printing.table(
        ["Name", "Cohort", "Pending Workloads", "Admitted Workloads", "Active", "Age"], [["cq1", "", 0, 0, True, "1s"]]
    )
    assert cq.splitlines()[1] == "cq1             0                   0                    true     1s"


def test_yaml_and_json_are_written_as_kubectls_go_printers_write_them() -> None:
    """sigs.k8s.io/yaml (go-yaml v2): strings that would read back as another type double-quoted (its YAML 1.1
    booleans y/n, Go's floats like 1e3, timestamps, ""), several lines as a literal block, keys in its order
    (digit runs as numbers, other characters before letters). Go's json.MarshalIndent: four spaces, non-ASCII as
    is, <, > and & escaped."""
    obj = {
        "b10": "y",
        "b9": "1e3",
        "a_": "2026-01-02T03:04:05Z",
        "aZ": "",
        "a": "line one\nline two\n",
        "c": ["None", "true", "*", "é"],
    }
    assert printing.to_yaml(obj) == (
        "a: |\n  line one\n  line two\n"
        'a_: "2026-01-02T03:04:05Z"\n'
        'aZ: ""\n'
        'b9: "1e3"\n'
        'b10: "y"\n'
        "c:\n- None\n- \"true\"\n- '*'\n- é\n"
    )
    assert printing.to_json({"k": "<a&b>", "e": "é", "n": {}}) == (
        '{\n    "k": "\\u003ca\\u0026b\\u003e",\n    "e": "é",\n    "n": {}\n}\n'
    )


def test_typed_objects_drop_managed_fields_and_fill_kueues_zero_fields() -> None:
    """What kueuectl's typed clientset holds: TypeMeta then ObjectMeta in Go's order, managedFields only when
    asked, a LocalQueue's status counters (int32, not omitempty) as 0."""
    stored = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"uid": "u", "name": "lq", "managedFields": [{"manager": "m"}], "namespace": "ns"},
        "spec": {"clusterQueue": "cq"},
        "status": {"pendingWorkloads": 2},
    }
    shown = printing.typed(stored)
    assert list(shown) == ["kind", "apiVersion", "metadata", "spec", "status"]
    assert list(shown["metadata"]) == ["name", "namespace", "uid"]
    assert shown["status"] == {"pendingWorkloads": 2, "reservingWorkloads": 0, "admittedWorkloads": 0}
    assert printing.typed(stored, show_managed_fields=True)["metadata"]["managedFields"] == [{"manager": "m"}]
    assert "managedFields" in stored["metadata"]  # not changed in place


def test_log_commands_are_forwarded_to_kueue_es_with_the_same_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    """explain, what-if, diff, status and list --at run `kueue-es` with the same words; the rest do not."""
    seen: list[list[str]] = []
    from kueue_es import cli as kueue_es_cli

    monkeypatch.setattr(kueue_es_cli, "main", lambda argv, prog: seen.append(argv) or 7)
    assert cli.main(["explain", "default/job", "--at", "12"]) == 7
    assert cli.main(["list", "workload", "--at=2026-01-01T00:00:00Z"]) == 7
    assert cli.main(["what-if", "-f", "changes.yaml"]) == 7
    assert seen == [
        ["explain", "default/job", "--at", "12"],
        ["list", "workload", "--at=2026-01-01T00:00:00Z"],
        ["what-if", "-f", "changes.yaml"],
    ]


@pytest.mark.parametrize(
    ("argv", "forwarded"),
    [
        (["-n", "team", "explain", "job-x"], ["explain", "--namespace", "team", "job-x"]),
        (["explain", "-n", "team", "job-x"], ["explain", "--namespace", "team", "job-x"]),
        (
            ["explain", "job-x", "--namespace=team", "-o", "json"],
            ["explain", "--namespace", "team", "job-x", "-o", "json"],
        ),
        (["-nteam", "explain", "job-x"], ["explain", "--namespace", "team", "job-x"]),
        (["--kubeconfig", "/k", "status"], ["status"]),
        (["status", "--context=c", "-n", "team", "-A"], ["status"]),
        (
            ["--kubeconfig=/k", "list", "workload", "-A", "--at", "5"],
            ["list", "--all-namespaces", "workload", "--at", "5"],
        ),
        (["list", "workload", "-n", "team", "--at", "5"], ["list", "--namespace", "team", "workload", "--at", "5"]),
        (["what-if", "-f", "c.yaml", "--context", "c", "-n", "x"], ["what-if", "-f", "c.yaml"]),
        (["-n", "explain", "explain", "x"], ["explain", "--namespace", "explain", "x"]),
    ],
)
def test_kubectls_global_flags_anywhere_are_read_before_forwarding(argv: list[str], forwarded: list[str]) -> None:
    """kubectl's -n/--namespace, --kubeconfig, --context and -A stand anywhere; kueue-es gets what it takes."""
    assert cli._forwarded(argv)
    assert cli.forwarded_argv(argv) == forwarded


def test_forwarded_usage_errors_name_kubectl_kueue(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A usage error of a forwarded command names `kubectl kueue`; -A with explain is refused; -n NS NAME
    reaches kueue-es's explain as NS/NAME (here a log file without that workload: its not-found error)."""
    assert cli.main(["explain", "-A", "x"]) == 1
    assert "Error: explain takes one workload, in one namespace" in capsys.readouterr().err
    assert cli.main(["explain", "-n"]) == 1
    assert "Error: flag needs an argument: -n" in capsys.readouterr().err
    assert cli.main(["status", "--bogus"]) == 2
    err = capsys.readouterr().err
    assert "usage: kubectl kueue" in err and "kubectl kueue: error: unrecognized arguments: --bogus" in err
    assert "kueue-es" not in err
    assert cli.main(["-n", "team", "explain", "x", "-o", "xml"]) == 2
    err = capsys.readouterr().err
    assert "usage: kubectl kueue explain" in err and "kubectl kueue explain: error: argument -o/--output" in err
    assert "kueue-es" not in err
    log = tmp_path / "empty.jsonl"
    log.write_text("")
    assert cli.main(["--kubeconfig", str(tmp_path / "k"), "-n", "team", "explain", "job-x", "--file", str(log)]) == 1
    assert "no Workload team/job-x" in capsys.readouterr().err


def test_get_describe_edit_patch_of_kueue_kinds_run_kubectl(monkeypatch: pytest.MonkeyPatch) -> None:
    """kueuectl's pass-through: `kubectl kueue get cq x -o yaml` is `kubectl get cq x -o yaml`."""
    calls: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(cli.shutil, "which", lambda name: f"/bin/{name}")
    assert cli._passthrough_kind(["get", "cq", "x"]) == "clusterqueue"
    assert cli._passthrough_kind(["delete", "workload", "x"]) is None  # kueuectl's own delete workload
    cli.pass_through(["get", "cq", "x", "-o", "yaml"], execvpe=lambda path, argv, env: calls.append((path, argv)))
    assert calls == [("/bin/kubectl", ["kubectl", "get", "cq", "x", "-o", "yaml"])]


# -- through the emulated API server --------------------------------------------------------------------


@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
async def test_create_then_list_queues_and_flavors(plugin: Plugin) -> None:
    """create resourceflavor / clusterqueue / localqueue as kueuectl prints them; the list tables have
    kueuectl's columns; --dry-run stores nothing; an unknown ClusterQueue fails the LocalQueue (exit 1)."""
    assert await plugin.ok("create", "rf", "default-flavor", "--node-labels", "zone=a,arch=arm") == (
        "resourceflavor.kueue.x-k8s.io/default-flavor created\n"
    )
    out = await plugin.ok(
        "create", "cq", "cluster-queue", "--cohort", "all", "--nominal-quota", "default-flavor:cpu=9;memory=36Gi"
    )
    assert out == "clusterqueue.kueue.x-k8s.io/cluster-queue created\n"
    assert await plugin.ok("create", "cq", "other", "--dry-run", "server") == (
        "clusterqueue.kueue.x-k8s.io/other created (server dry run)\n"
    )
    code, _, err = await plugin.run("create", "lq", "user-queue", "-c", "missing")
    assert (code, err) == (1, 'Error: clusterqueues.kueue.x-k8s.io "missing" not found\n')
    assert await plugin.ok("create", "lq", "user-queue", "-c", "cluster-queue") == (
        "localqueue.kueue.x-k8s.io/user-queue created\n"
    )

    cqs = await plugin.ok("list", "clusterqueue")
    assert cqs.splitlines()[0] == "NAME            COHORT   PENDING WORKLOADS   ADMITTED WORKLOADS   ACTIVE   AGE"
    assert cqs.splitlines()[1].startswith("cluster-queue   all      0                   0                    ")
    assert len(cqs.splitlines()) == 2  # the server dry run stored nothing
    stored = yaml.safe_load(await plugin.ok("list", "cq", "-o", "yaml"))
    assert stored["kind"] == "ClusterQueueList"
    assert stored["items"][0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "9"
    lqs = await plugin.ok("list", "lq", "-A")
    assert (
        lqs.splitlines()[0] == "NAMESPACE   NAME         CLUSTERQUEUE    PENDING WORKLOADS   ADMITTED WORKLOADS   AGE"
    )
    assert lqs.splitlines()[1].startswith(
        "default     user-queue   cluster-queue   0                   0                    "
    )
    rfs = await plugin.ok("list", "rf")
    assert rfs.splitlines()[1].startswith("default-flavor   arch=arm, zone=a   ")
    code, out, err = await plugin.run("list", "lq", "-c", "nope")
    assert (code, out, err) == (0, "", "No resources found in default namespace.\n")


def _managers(obj: dict[str, Any]) -> dict[str, list[str]]:
    """Each manager of ``obj``'s ``metadata.managedFields`` and the top fields of ``spec`` it owns."""
    out: dict[str, list[str]] = {}
    for entry in obj["metadata"].get("managedFields") or []:
        spec = (entry.get("fieldsV1") or {}).get("f:spec") or {}
        out.setdefault(entry["manager"], []).extend(sorted(k for k in spec if k.startswith("f:")))
    return out


async def test_writes_are_recorded_as_kubectl_kueues(plugin: Plugin, cluster: emulator.ClusterEmulator) -> None:
    """kueuectl writes with client-go's default User-Agent, ``kubectl-kueue/<version> (<os>/<arch>) kubernetes/
    <commit>``, and sets no fieldManager: the API server names the manager of each of its writes after the
    User-Agent's first word, ``kubectl-kueue`` (``kubectl get kwl X --show-managed-fields``). Before, the
    requests went with kubernetes-asyncio's User-Agent, and the writes were ``OpenAPI-Generator``'s."""
    await plugin.ok("create", "cq", "cluster-queue")
    await plugin.ok("create", "lq", "user-queue", "-c", "cluster-queue")
    api = await client.make_api_client(server=cluster.url)
    try:
        await _job_and_workload(api, "first")
        await plugin.ok("stop", "workload", "job-first")
        await plugin.ok("resume", "workload", "job-first")
        await plugin.ok("stop", "cq", "cluster-queue")
        wl = await client.get_object(api, resources.WORKLOADS, namespace="default", name="job-first")
        cq = await client.get_object(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        lq = await client.get_object(api, resources.LOCAL_QUEUES, namespace="default", name="user-queue")
    finally:
        await api.close()
    assert "f:active" in _managers(wl)["kubectl-kueue"]
    assert "f:stopPolicy" in _managers(cq)["kubectl-kueue"]
    assert list(_managers(lq)) == ["kubectl-kueue"]
    assert not any("OpenAPI-Generator" in _managers(obj) for obj in (wl, cq, lq))


@pytest.mark.slow  # an end-to-end run of several seconds: CI runs it after the README command
async def test_list_workload_columns_filters_and_stop_resume_delete(
    plugin: Plugin, cluster: emulator.ClusterEmulator
) -> None:
    """kueuectl's workload table (JOB TYPE from discovery, the LocalQueue's ClusterQueue, STATUS); --status
    and --for filter; stop/resume merge-patch spec.active and spec.stopPolicy; delete workload asks, then
    deletes the Job, as kueuectl."""
    await plugin.ok("create", "cq", "cluster-queue")
    await plugin.ok("create", "lq", "user-queue", "-c", "cluster-queue")
    api = await client.make_api_client(server=cluster.url)
    try:
        await _job_and_workload(api, "first")
        await _job_and_workload(api, "second")
        out = await plugin.ok("list", "workload")
        assert out.splitlines()[0] == (
            "NAME         JOB TYPE   JOB NAME   LOCALQUEUE   CLUSTERQUEUE    STATUS    POSITION IN QUEUE   EXEC TIME   AGE"
        )
        assert out.splitlines()[1].startswith(  # JOB TYPE: no group, the discovery entry names none
            "job-first    job        first      user-queue   cluster-queue   PENDING                                   "
        )
        assert (await plugin.ok("list", "workload", "--status", "admitted")) == ""
        only = await plugin.ok("list", "kwl", "--for", "job/second")
        assert [line.split()[0] for line in only.splitlines()[1:]] == ["job-second"]
        code, _, err = await plugin.run("list", "workload", "--status", "sleeping")
        assert (
            code == 1 and 'invalid status value (sleeping). Must be "all", "pending", "admitted" or "finished"' in err
        )

        assert await plugin.ok("stop", "workload", "job-first") == "workload.kueue.x-k8s.io/job-first stopped\n"
        wl = await client.get_object(api, resources.WORKLOADS, namespace="default", name="job-first")
        assert wl["spec"]["active"] is False
        await plugin.ok("resume", "kwl", "job-first")
        wl = await client.get_object(api, resources.WORKLOADS, namespace="default", name="job-first")
        assert wl["spec"]["active"] is True
        assert await plugin.ok("stop", "cq", "cluster-queue", "--keep-already-running") == (
            "clusterqueue.kueue.x-k8s.io/cluster-queue\n"
        )
        cq = await client.get_object(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        assert cq["spec"]["stopPolicy"] == "Hold"
        await plugin.ok("stop", "lq", "user-queue", "--keep-already-running=true")
        lq = await client.get_object(api, resources.LOCAL_QUEUES, namespace="default", name="user-queue")
        assert lq["spec"]["stopPolicy"] == "Hold"
        # cobra's bool flags take =false (kubectl kueue's, too): the drain, not Hold
        await plugin.ok("stop", "lq", "user-queue", "--keep-already-running=false")
        lq = await client.get_object(api, resources.LOCAL_QUEUES, namespace="default", name="user-queue")
        assert lq["spec"]["stopPolicy"] == "HoldAndDrain"
        code, _, err = await plugin.run("stop", "lq", "user-queue", "--keep-already-running=maybe")
        assert (
            code == 1
            and (
                'Error: invalid argument "maybe" for "--keep-already-running" flag: strconv.ParseBool: parsing "maybe": '
                "invalid syntax"
            )
            in err
        )
        await plugin.ok("resume", "cq", "cluster-queue")
        cq = await client.get_object(api, resources.CLUSTER_QUEUES, name="cluster-queue")
        assert cq["spec"]["stopPolicy"] == "None"

        asked = await plugin.ok("delete", "workload", "job-first", stdin="n\n")
        assert asked == (
            "This operation will also delete:\n"
            "  - jobs.batch/first associated with the default/job-first workload\n"
            "Do you want to proceed (y/n)? Deletion is canceled\n"
        )
        await client.get_object(api, resources.JOBS, namespace="default", name="first")  # still there
        assert await plugin.ok("delete", "workload", "job-first", "--yes") == "jobs.batch/first deleted\n"
        jobs, _ = await client.list_objects(api, resources.JOBS, namespace="default")
        assert [j["metadata"]["name"] for j in jobs] == ["second"]
        code, _, err = await plugin.run("stop", "workload", "nope")
        assert (code, err) == (1, 'Error: workloads.kueue.x-k8s.io "nope" not found\n')
    finally:
        await api.close()


@pytest.mark.slow  # about 10 s on 2 cores: run by .ci/run's slow stage
async def test_no_kubeconfig_and_unreachable_server_are_clear_errors(plugin: Plugin, tmp_path: Path) -> None:
    """Without any kubeconfig (and no running demo) the plugin says where it looked; a server that does not
    answer is named; both exit 1 as kueuectl."""
    plugin.env["KUBECONFIG"] = str(tmp_path / "absent")
    plugin.env["HOME"] = str(tmp_path)
    code, _, err = await plugin.run("list", "workload")
    assert code == 1
    assert err.startswith("Error: no kubeconfig found ($KUBECONFIG names no existing file), and no running kueue-es")
    dead = tmp_path / "dead"
    client.write_kubeconfig(dead, server="http://127.0.0.1:9")
    code, _, err = await plugin.run("--kubeconfig", str(dead), "list", "cq")
    assert code == 1 and "http://127.0.0.1:9" in err and err.startswith("Error: ")
    code, _, err = await plugin.run("list", "cq", "--context", "nope", "--kubeconfig", str(dead))
    assert (code, err) == (1, "Error: context was not found for specified context: nope\n")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_the_real_kubectl_runs_the_plugin(plugin: Plugin, cluster: emulator.ClusterEmulator) -> None:
    """`kubectl kueue list workload` (kubectl finds kubectl-kueue on PATH) prints kueuectl's columns."""
    await plugin.ok("create", "cq", "cluster-queue", kubectl=True)
    await plugin.ok("create", "lq", "user-queue", "-c", "cluster-queue", kubectl=True)
    api = await client.make_api_client(server=cluster.url)
    try:
        await _job_and_workload(api, "sample")
    finally:
        await api.close()
    out = await plugin.ok("list", "workload", kubectl=True)
    header, row = out.splitlines()
    assert re.split(r"\s{2,}", header) == [
        "NAME",
        "JOB TYPE",
        "JOB NAME",
        "LOCALQUEUE",
        "CLUSTERQUEUE",
        "STATUS",
        "POSITION IN QUEUE",
        "EXEC TIME",
        "AGE",
    ]
    assert row.split()[:6] == ["job-sample", "job", "sample", "user-queue", "cluster-queue", "PENDING"]
    assert ages(out)[0].endswith("s")


@pytest.mark.slow  # about 10 s on 2 cores: run by .ci/run's slow stage
async def test_positions_come_from_the_visibility_api(plugin: Plugin, cluster: emulator.ClusterEmulator) -> None:
    """POSITION IN QUEUE is the visibility API's positionInLocalQueue for each pending workload (kueuectl's
    source), asked once for the ClusterQueue of the workloads' LocalQueue."""
    await plugin.ok("create", "cq", "cluster-queue")
    await plugin.ok("create", "lq", "user-queue", "-c", "cluster-queue")
    api = await client.make_api_client(server=cluster.url)
    try:
        await _job_and_workload(api, "early")
        await _job_and_workload(api, "late")
    finally:
        await api.close()
    summary = {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "items": [
            {
                "metadata": {"name": name, "namespace": "default"},
                "priority": 0,
                "localQueueName": "user-queue",
                "positionInClusterQueue": index,
                "positionInLocalQueue": index,
            }
            for index, name in enumerate(["job-late", "job-early"])
        ],
    }
    cluster["get /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/pendingworkloads"] << summary
    out = await plugin.ok("list", "workload")
    column = out.splitlines()[0].index("POSITION IN QUEUE")
    assert {line.split()[0]: line[column:].split()[0] for line in out.splitlines()[1:]} == {
        "job-early": "1",
        "job-late": "0",
    }


@pytest.mark.slow  # about 10 s on 2 cores: run by .ci/run's slow stage
async def test_without_a_kubeconfig_the_running_demos_is_used(plugin: Plugin, tmp_path: Path) -> None:
    """No --kubeconfig, no $KUBECONFIG, no ~/.kube/config: the kubeconfig the running demo recorded
    (kueue_es.current's file) names the cluster, and pass-through commands get it too."""
    import json

    record = tmp_path / "current.json"
    record.write_text(
        json.dumps({"natsUrl": "nats://127.0.0.1:9", "kubeconfig": str(plugin.kubeconfig), "pid": os.getpid()})
    )
    plugin.env.pop("KUBECONFIG")
    plugin.env.update(HOME=str(tmp_path / "home"), KUEUE_ES_CURRENT=str(record))
    await plugin.ok("create", "cq", "cluster-queue")
    assert (await plugin.ok("list", "cq", "-o", "name")) == "clusterqueue.kueue.x-k8s.io/cluster-queue\n"
    if shutil.which("kubectl") is not None:
        out = await plugin.ok("get", "cq", "cluster-queue", "-o", "name")
        assert out == "clusterqueue.kueue.x-k8s.io/cluster-queue\n"


def test_dry_run_and_connection_flags_before_or_after_the_kind() -> None:
    """kueuectl's --dry-run is a flag of create/stop/resume/delete, given before or after the kind; the
    connection flags may come first (kubectl kueue -n team list workload)."""
    parse = cli.parser().parse_args
    assert parse(["create", "--dry-run", "client", "cq", "a"]).dry_run == "client"
    assert parse(["stop", "cq", "a", "--dry-run=server"]).dry_run == "server"
    assert not hasattr(parse(["resume", "cq", "a"]), "dry_run")  # commands read it as "none"
    args = parse(["-n", "team", "list", "workload", "--context", "c"])
    assert (args.namespace, args.context, args.kind) == ("team", "c", "workload")
    assert cli._forwarded(["-n", "team", "explain", "team/job"])
    assert not cli._forwarded(["-n", "explain", "list", "workload"])


@pytest.mark.slow  # about 10 s on 2 cores: run by .ci/run's slow stage
async def test_list_pods_for_a_job_prints_the_servers_columns(
    plugin: Plugin, cluster: emulator.ClusterEmulator
) -> None:
    """`list pods --for job/NAME` selects the Job's pods by batch.kubernetes.io/job-name and prints the
    server's Table (kueuectl's expected header: NAME READY STATUS RESTARTS AGE)."""
    api = await client.make_api_client(server=cluster.url)
    try:
        await _job_and_workload(api, "first")
        for pod, job in (("first-abc", "first"), ("other-xyz", "other")):
            await client.create_object(
                api,
                resources.PODS,
                namespace="default",
                body={
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": pod, "labels": {"batch.kubernetes.io/job-name": job}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            )
    finally:
        await api.close()
    out = await plugin.ok("list", "pods", "--for", "job/first")
    assert re.split(r"\s{2,}", out.splitlines()[0]) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["first-abc"]
    code, _, err = await plugin.run("list", "pods", "--for", "first")
    assert code == 1 and "value must be in the format TYPE[.API-GROUP]/NAME" in err
    code, out, err = await plugin.run("list", "pods", "--for", "job/missing")
    assert (code, out, err) == (0, "", "No resources found in default namespace.\n")


async def test_list_pods_for_an_integrations_job_uses_its_pod_label_selector(
    plugin: Plugin, cluster: emulator.ClusterEmulator
) -> None:
    """`list pods --for pytorchjob/NAME` selects the pods by the PyTorchJob's PodLabelSelector (job name and
    operator labels: Kueue's pytorchjob_controller.go), as kueuectl does for every integration."""
    pytorchjobs = client.ref_for("kubeflow.org/v1", "PyTorchJob")
    cluster.register_resource(pytorchjobs)
    api = await client.make_api_client(server=cluster.url)
    try:
        await client.create_object(
            api,
            pytorchjobs,
            namespace="default",
            body={"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "mnist"}, "spec": {}},
        )
        labels = {
            "mnist-master-0": {"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/operator-name": "pytorchjob-controller"},
            "mnist-other-0": {"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/operator-name": "tfjob-controller"},
        }  # fmt: skip
        for pod, pod_labels in labels.items():
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod, "labels": pod_labels},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            }
            await client.create_object(api, resources.PODS, namespace="default", body=body)
    finally:
        await api.close()
    out = await plugin.ok("list", "pods", "--for", "pytorchjob/mnist")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["mnist-master-0"]
    out = await plugin.ok("list", "pods", "--for", "pytorchjobs.kubeflow.org/mnist")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["mnist-master-0"]


@pytest.mark.slow  # a dozen plugin processes: run by .ci/run's slow stage
async def test_for_takes_the_short_names_discovery_gives_and_refuses_kinds_without_pods(
    plugin: Plugin, cluster: emulator.ClusterEmulator
) -> None:
    """``--for`` names its type as kubectl does (kueuectl's decodeResourceTypeName asks the discovery REST mapper,
    which expands short names): ``lws/X``, ``sts/X``, ``deploy/X``, ``cj/X``, ``po/X`` are found. ``list pods``
    then says ``unsupported kind: KIND`` for a kind no integration selects pods of (list_pods.go), ``list
    workload`` lists the object's Workloads (none here); a type discovery does not serve is the mapper's ``no
    matches for GROUP/, Resource=TYPE``. Found by a user's trial: every short name was "the server doesn't have a
    resource type" though ``kubectl api-resources`` lists it."""
    [crd] = yaml.safe_load_all((FIXTURES / "leaderworkerset.x-k8s.io_leaderworkersets.yaml").read_text())
    cluster.install_crds([crd])
    api = await client.make_api_client(server=cluster.url)
    try:
        [lws] = examples.load("serving-workloads/sample-leaderworkerset.yaml")
        [deployment] = examples.load("serving-workloads/sample-deployment.yaml")
        [sts] = examples.load("serving-workloads/sample-statefulset.yaml")
        [cronjob] = examples.load("jobs/sample-cronjob.yaml")
        for doc in (lws, deployment, sts, cronjob):
            doc["metadata"]["namespace"] = "default"
            await client.apply_manifest(api, doc)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "lone",
                "namespace": "default",
                "labels": {POD_GROUP: "grp"},
                "annotations": {"kueue.x-k8s.io/pod-group-total-count": "1"},
            },
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        await client.create_object(api, resources.PODS, namespace="default", body=pod)
    finally:
        await api.close()
    lws_name, sts_name = lws["metadata"]["name"], sts["metadata"]["name"]
    unsupported = {
        f"lws/{lws_name}": "LeaderWorkerSet",
        f"sts/{sts_name}": "StatefulSet",
        f"deploy/{deployment['metadata']['name']}": "Deployment",
        f"cj/{cronjob['metadata']['name']}": "CronJob",
    }
    for target, kind in unsupported.items():
        code, out, err = await plugin.run("list", "pods", "--for", target)
        assert (code, out, err) == (1, "", f"Error: unsupported kind: {kind}\n"), target
    for target in (f"LWS.leaderworkerset.x-k8s.io/{lws_name}", f"statefulsets.v1.apps/{sts_name}"):
        code, out, err = await plugin.run("list", "workload", "--for", target)
        assert (code, out, err) == (0, "", "No resources found in default namespace.\n"), target
    code, out, err = await plugin.run("list", "pods", "--for", "lws/missing")
    assert (code, out, err) == (0, "", "No resources found in default namespace.\n")
    out = await plugin.ok("list", "pods", "--for", "po/lone")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["lone"]
    code, out, err = await plugin.run("list", "pods", "--for", "nosuch/x")
    assert (code, err) == (1, "Error: no matches for /, Resource=nosuch\n")
    code, out, err = await plugin.run("list", "workload", "--for", "lws.example.com/x")
    assert (code, err) == (1, "Error: no matches for example.com/, Resource=lws\n")
