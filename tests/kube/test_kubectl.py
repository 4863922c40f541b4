"""The real kubectl against the emulated API server: discovery, OpenAPI, validation, dry runs, printing.

kubectl validates what it applies against the server's OpenAPI (v3 first: a
server whose PATCH operations take ``fieldValidation`` validates server-side),
maps names through discovery (short names, categories), and prints the Tables
the server returns. These tests run the kubectl on PATH (skipped, saying so,
where there is none) with its discovery cache in the test's directory, against
an emulator on a free port, without ``--validate=false``.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from kueue_es.services.kube import resources
from kueue_es.sim import emulator, tables
from tests.kube.examples import EXAMPLES, REFUSED_BY_KUEUE

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: these tests run the real one"),
]

SETUP = EXAMPLES / "admin" / "single-clusterqueue-setup.yaml"
SAMPLE_JOB = EXAMPLES / "jobs" / "sample-job.yaml"


class Kubectl:
    """Runs the real kubectl against one emulator, with its own kubeconfig and discovery cache."""

    def __init__(self, server: str, directory: Path) -> None:
        self.kubeconfig = directory / "kubeconfig"
        self.cache = directory / "kube-cache"
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "emulator", "cluster": {"server": server}}],
                    "users": [{"name": "user", "user": {}}],
                    "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "user"}}],
                    "current-context": "emulator",
                }
            )
        )

    async def run(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of ``kubectl ARGS`` (not blocking the emulator's event loop)."""
        process = await asyncio.create_subprocess_exec(
            "kubectl",
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.cache}",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate(stdin.encode() if stdin is not None else None)
        assert process.returncode is not None
        return process.returncode, out.decode(), err.decode()

    async def ok(self, *args: str, stdin: str | None = None) -> str:
        """stdout of a kubectl command that must succeed."""
        code, out, err = await self.run(*args, stdin=stdin)
        assert code == 0, f"kubectl {' '.join(args)} exited {code}: {err}"
        return out


@pytest.fixture
async def kubectl(cluster: emulator.ClusterEmulator, tmp_path: Path) -> Kubectl:
    return Kubectl(cluster.url, tmp_path)


def supported_examples() -> list[Path]:
    """Kueue's example files whose every object is of a kind kueue-es serves (the others need Ray, Kubeflow, ...),
    but those Kueue's own webhooks refuse (``REFUSED_BY_KUEUE``)."""
    found = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        if str(path.relative_to(EXAMPLES)) in REFUSED_BY_KUEUE:
            continue
        docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        if docs and all((doc.get("apiVersion"), doc.get("kind")) in resources.RESOURCES for doc in docs):
            found.append(path)
    return found


def generates_names(path: Path) -> bool:
    """Whether a file has objects named by generateName (``kubectl create`` only, as Kueue's docs say)."""
    return any("generateName" in doc.get("metadata", {}) for doc in yaml.safe_load_all(path.read_text()) if doc)


def table(text: str) -> list[list[str]]:
    """kubectl's printed table as rows of cells (split on runs of two or more spaces)."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.strip().splitlines()]


async def test_discovery_lists_core_kinds_so_kubectl_gets_pods_events_nodes_namespaces(kubectl: Kubectl) -> None:
    """/api/v1 answers groupVersion v1, so kubectl finds the core kinds; the four namespaces kubectl
    users expect are listed with STATUS Active."""
    raw = json.loads(await kubectl.ok("get", "--raw", "/api/v1"))
    assert raw["groupVersion"] == "v1"
    assert {"pods", "events", "nodes", "namespaces"} <= {r["name"] for r in raw["resources"]}
    out = await kubectl.ok("get", "pods,events,nodes,namespaces")
    rows = table(out)
    assert rows[0] == ["NAME", "STATUS", "AGE"]
    assert [row[:2] for row in rows[1:]] == [
        ["namespace/default", "Active"],
        ["namespace/kube-node-lease", "Active"],
        ["namespace/kube-public", "Active"],
        ["namespace/kube-system", "Active"],
    ]


async def test_apply_and_create_as_kueue_docs_type_them_then_short_names_and_columns(
    kubectl: Kubectl, cluster: emulator.ClusterEmulator
) -> None:
    """`kubectl apply -f single-clusterqueue-setup.yaml` and `kubectl create -f sample-job.yaml` work without
    --validate=false; `kubectl get cq` prints Kueue's columns, `-o wide` adds Strategy and Admitted Workloads;
    `kubectl get pods` prints READY and STATUS."""
    out = await kubectl.ok("apply", "-f", str(SETUP))
    assert "clusterqueue.kueue.x-k8s.io/cluster-queue created" in out
    out = await kubectl.ok("create", "-f", str(SAMPLE_JOB))
    assert out.startswith("job.batch/sample-job-")
    rows = table(await kubectl.ok("get", "cq"))
    assert rows == [["NAME", "COHORT", "PENDING WORKLOADS"], ["cluster-queue"]]
    wide = table(await kubectl.ok("get", "cq", "-o", "wide"))
    assert wide[0] == ["NAME", "COHORT", "STRATEGY", "PENDING WORKLOADS", "ADMITTED WORKLOADS"]
    # the manifest sets no strategy: Kueue's CRD defaults it, and the column shows it (no cohort: empty)
    assert wide[1] == ["cluster-queue", "BestEffortFIFO"]
    spec = json.loads(await kubectl.ok("get", "cq", "cluster-queue", "-o", "jsonpath={.spec}"))
    assert spec["stopPolicy"] == "None" and spec["preemption"]["withinClusterQueue"] == "Never"
    rows = table(await kubectl.ok("get", "queues", "-n", "default"))
    assert rows[0] == ["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS"]
    assert rows[1][:2] == ["user-queue", "cluster-queue"]
    assert table(await kubectl.ok("get", "rf"))[1][0] == "default-flavor"
    job = (await kubectl.ok("get", "jobs", "-o", "name")).strip()
    # Kueue's webhook suspended it (STATUS reads Suspended only once the Job controller, not running here,
    # has written the condition, as kubectl's printer reads conditions and not the spec)
    assert await kubectl.ok("get", job, "-o", "jsonpath={.spec.suspend}") == "true"


async def test_workload_columns_with_o_wide(kubectl: Kubectl, cluster: emulator.ClusterEmulator) -> None:
    """A Workload prints Kueue's columns: Queue, Reserved in, Admitted, Finished (JSONPath filters on
    conditions), Age."""
    await kubectl.ok("apply", "-f", str(SETUP))
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "default"},
        "spec": {
            "queueName": "user-queue",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
        },
    }
    await kubectl.ok("create", "-f", "-", stdin=json.dumps(workload))
    status = {
        "status": {
            "admission": {"clusterQueue": "cluster-queue", "podSetAssignments": []},
            "conditions": [
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                },
                {
                    "type": "Finished",
                    "status": "False",
                    "reason": "Pending",  # Kueue's status schema wants a reason (a CamelCase word)
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                },
            ],
        }
    }
    await kubectl.ok("patch", "workload", "wl", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    rows = table(await kubectl.ok("get", "kwl", "-o", "wide"))
    assert rows[0] == ["NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"]
    assert rows[1][:5] == ["wl", "user-queue", "cluster-queue", "True", "False"]


async def test_kueues_workload_webhook_refuses_invalid_workloads_naming_the_field(kubectl: Kubectl) -> None:
    """``kubectl create``, ``apply`` and ``patch`` (main resource and ``status``) of a Workload Kueue's
    ``vworkload.kb.io`` refuses are denied with its field path and message, and change nothing; the same
    Workload without the fault is stored (pkg/webhooks/workload_webhook.go)."""
    await kubectl.ok("apply", "-f", str(SETUP))

    def workload(name: str, *pod_sets: dict[str, object]) -> str:
        spec = {"queueName": "user-queue", "podSets": list(pod_sets)}
        meta = {"name": name, "namespace": "default"}
        return json.dumps({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": meta, "spec": spec})

    def pod_set(name: str, requests: dict[str, str], **extra: object) -> dict[str, object]:
        container = {"name": "c", "image": "busybox", "resources": {"requests": requests}}
        return {"name": name, "count": 2, "template": {"spec": {"containers": [container]}}, **extra}

    denied = 'admission webhook "vworkload.kb.io" denied the request: '
    code, _, err = await kubectl.run("create", "-f", "-", stdin=workload("pods", pod_set("main", {"pods": "1"})))
    assert code == 1 and "Error from server (Forbidden)" in err, err
    assert (
        denied + 'spec.podSets[0].template.spec.containers[0].resources.requests[pods]: Invalid value: "pods": '
        "the key is reserved for internal kueue use"
    ) in err
    two = workload("two", pod_set("a", {"cpu": "1"}, minCount=1), pod_set("b", {"cpu": "1"}, minCount=1))
    code, _, err = await kubectl.run("apply", "-f", "-", stdin=two)
    assert code == 1 and denied + "spec.podSets: Invalid value: 2: at most one podSet can use minCount" in err, err
    assert (await kubectl.ok("get", "workloads", "-o", "name")) == ""

    await kubectl.ok("apply", "-f", "-", stdin=workload("wl", pod_set("main", {"cpu": "1"}, minCount=1)))
    code, _, err = await kubectl.run(
        "patch",
        "workload",
        "wl",
        "--type=json",
        "-p",
        '[{"op": "add", "path": "/spec/podSets/0/template/spec/containers/0/resources/requests/cpu", "value": "-1"}]',
    )
    assert (
        code == 1
        and (
            denied
            + 'spec.podSets[0].template.spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be '
            "greater than or equal to 0"
        )
        in err
    ), err
    reserved = {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": "Quota reserved in ClusterQueue cluster-queue",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    status = json.dumps({"status": {"conditions": [reserved]}})
    code, _, err = await kubectl.run("patch", "workload", "wl", "--subresource=status", "--type=merge", "-p", status)
    assert (
        code == 1
        and (denied + "status.admission: Required value: must be set while the QuotaReserved condition is true") in err
    ), err
    stored = json.loads(await kubectl.ok("get", "workload", "wl", "-o", "json"))
    assert stored["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1"}
    assert "conditions" not in stored.get("status", {})


async def test_explain_reads_the_crd_schema(kubectl: Kubectl) -> None:
    """`kubectl explain clusterqueue.spec` finds the schema in /openapi/v3 and lists its fields."""
    out = await kubectl.ok("explain", "clusterqueue.spec")
    assert "KIND:       ClusterQueue" in out and "VERSION:    v1beta2" in out
    for field in ("resourceGroups", "cohortName", "namespaceSelector", "preemption"):
        assert f"  {field}\t" in out
    out = await kubectl.ok("explain", "job.spec.template.spec.containers.resources")
    assert "  requests\t<map[string]" in out and "  limits\t<map[string]" in out


async def test_explain_reads_kueues_status_schemas(kubectl: Kubectl) -> None:
    """`kubectl explain KIND.status` describes the status of every Kueue kind that has one, down to its
    leaves, as Kueue's CRDs do (their v1beta2 status schemas, taken whole)."""
    fields = {
        "workload": ("admission", "admissionChecks", "conditions", "requeueState", "schedulingStats", "clusterName"),
        "clusterqueue": ("flavorsUsage", "flavorsReservation", "pendingWorkloads", "admittedWorkloads", "fairSharing"),
        "localqueue": ("flavorsUsage", "pendingWorkloads", "reservingWorkloads", "conditions"),
        "cohort": ("fairSharing",),
        "admissioncheck": ("conditions",),
        "multikueuecluster": ("conditions",),
    }
    for kind, names in fields.items():
        out = await kubectl.ok("explain", f"{kind}.status")
        assert "FIELD: status <Object>" in out, kind
        for name in names:
            assert f"  {name}\t<" in out, f"{kind}.status.{name}"
    out = await kubectl.ok("explain", "clusterqueue.status.flavorsUsage.resources")
    assert "  name\t<string> -required-" in out and "  borrowed\t<" in out and "  total\t<" in out
    out = await kubectl.ok("explain", "workload.status.admission.podSetAssignments.topologyAssignment.slices")
    assert "  domainCount\t<integer> -required-" in out and "  valuesPerLevel\t<[]Object> -required-" in out
    out = await kubectl.ok("explain", "workload.status.conditions.status")
    assert "FIELD: status <string>" in out and "ENUM:" in out and "    Unknown" in out


async def job_with_pods(kubectl: Kubectl, *pods: tuple[str, bool, list[str]]) -> str:
    """A Job ``owner`` and pods ``(name, blockOwnerDeletion, finalizers)`` naming it as their controller, as the
    Job controller makes them; returns the Job's UID."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "owner"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
    }
    await kubectl.ok("create", "-f", "-", stdin=json.dumps(job))
    uid = await kubectl.ok("get", "job", "owner", "-o", "jsonpath={.metadata.uid}")
    for name, block, finalizers in pods:
        reference = {"apiVersion": "batch/v1", "kind": "Job", "name": "owner", "uid": uid, "controller": True}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "ownerReferences": [{**reference, "blockOwnerDeletion": block}],
                "finalizers": finalizers,
            },
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        await kubectl.ok("create", "-f", "-", stdin=json.dumps(pod))
    return uid


async def test_delete_cascade_orphan_leaves_the_dependents(kubectl: Kubectl) -> None:
    """`kubectl delete --cascade=orphan` deletes the Job alone: its pods stay, their owner reference to it taken
    off, as the garbage collector orphans them."""
    await job_with_pods(kubectl, ("p1", True, []), ("p2", False, []))
    out = await kubectl.ok("delete", "job", "owner", "--cascade=orphan")
    assert out.strip() == 'job.batch "owner" deleted'
    assert (await kubectl.run("get", "job", "owner"))[0] == 1
    pods = json.loads(await kubectl.ok("get", "pods", "-o", "json"))["items"]
    assert [(p["metadata"]["name"], p["metadata"].get("ownerReferences")) for p in pods] == [("p1", None), ("p2", None)]


async def test_delete_cascade_foreground_deletes_the_dependents_first(kubectl: Kubectl) -> None:
    """`kubectl delete --cascade=foreground` marks the Job (deletionTimestamp, the foregroundDeletion finalizer),
    deletes its pods and keeps it while a pod that blocks its deletion is still there (held by a finalizer); the
    Job goes once that pod does."""
    await job_with_pods(kubectl, ("held", True, ["example.com/hold"]), ("free", True, []))
    await kubectl.ok("delete", "job", "owner", "--cascade=foreground", "--wait=false")
    job = json.loads(await kubectl.ok("get", "job", "owner", "-o", "json"))
    assert job["metadata"]["finalizers"] == ["foregroundDeletion"] and job["metadata"]["deletionTimestamp"]
    pods = json.loads(await kubectl.ok("get", "pods", "-o", "json"))["items"]
    assert [(p["metadata"]["name"], bool(p["metadata"].get("deletionTimestamp"))) for p in pods] == [("held", True)]
    await kubectl.ok("patch", "pod", "held", "--type=json", "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    assert (await kubectl.ok("get", "pods,jobs", "-o", "name")).strip() == ""


async def test_strict_field_validation_refuses_a_misspelt_field(
    kubectl: Kubectl, cluster: emulator.ClusterEmulator
) -> None:
    """kubectl sends fieldValidation=Strict: a misspelt field is refused (400, nothing stored); with
    --validate=warn it is a warning."""
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "typo"},
        "spec": {"namespaceSelector": {}, "cohrtName": "team"},
    }
    code, _, err = await kubectl.run("apply", "-f", "-", stdin=json.dumps(cq))
    assert code == 1
    assert 'strict decoding error: unknown field "spec.cohrtName"' in err
    assert (await kubectl.run("get", "cq", "typo"))[0] == 1
    job = yaml.safe_load(SAMPLE_JOB.read_text())
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    code, _, err = await kubectl.run("create", "-f", "-", stdin=json.dumps(job))
    assert code == 1 and 'unknown field "spec.template.spec.containers[0].imagePullPolicyy"' in err
    code, _, err = await kubectl.run("create", "--validate=warn", "-f", "-", stdin=json.dumps(cq))
    assert code == 0 and 'Warning: unknown field "spec.cohrtName"' in err


async def test_server_dry_run_and_diff_store_nothing(kubectl: Kubectl, cluster: emulator.ClusterEmulator) -> None:
    """`kubectl create --dry-run=server`, `kubectl apply --dry-run=server`, `kubectl diff` and
    `kubectl delete --dry-run=server` change no object and log no watch event (the resourceVersion
    stays)."""
    await kubectl.ok("apply", "-f", str(SETUP))
    version = cluster.resource_version
    out = await kubectl.ok("create", "--dry-run=server", "-f", str(SAMPLE_JOB))
    assert "(server dry run)" in out
    changed = SETUP.read_text().replace("nominalQuota: 9", "nominalQuota: 10")
    assert changed != SETUP.read_text()
    await kubectl.ok("apply", "--dry-run=server", "-f", "-", stdin=changed)
    code, out, err = await kubectl.run("diff", "-f", "-", stdin=changed)
    assert code == 1, err  # 1: differences found
    assert "-        nominalQuota: 9\n+        nominalQuota: 10\n" in out
    await kubectl.ok("delete", "--dry-run=server", "clusterqueue", "cluster-queue")
    assert cluster.resource_version == version
    assert await kubectl.ok("get", "jobs") == ""
    quota = await kubectl.ok(
        "get", "cq", "cluster-queue", "-o", "jsonpath={.spec.resourceGroups[0].flavors[0].resources[0].nominalQuota}"
    )
    assert quota == "9"


async def test_reapplying_a_changed_job_is_refused_and_a_cronjobs_containers_merge_by_name(kubectl: Kubectl) -> None:
    """A Job's pod template is immutable (but the scheduling directives of a suspended Job that never ran): a
    changed container is refused as a real API server refuses it. kubectl apply of a changed CronJob sends a
    strategic merge patch ($setElementOrder, containers by name): the container keeps its other fields and
    takes the new args."""
    job_file = EXAMPLES / "getting-started" / "quick-start-job.yaml"
    await kubectl.ok("apply", "-f", str(job_file))
    changed = job_file.read_text().replace("sleep 30", "sleep 60")
    assert changed != job_file.read_text()
    code, _, err = await kubectl.run("apply", "-f", "-", stdin=changed)
    assert code == 1 and 'The Job "sample-job" is invalid: spec.template: Invalid value' in err, err
    assert "field is immutable" in err
    with_selector = job_file.read_text().replace(
        "restartPolicy: Never", "restartPolicy: Never\n      nodeSelector: {a: b}"
    )
    assert with_selector != job_file.read_text()
    await kubectl.ok("apply", "-f", "-", stdin=with_selector)  # suspended, never started: a directive may change
    cron_file = EXAMPLES / "jobs" / "sample-cronjob.yaml"
    await kubectl.ok("apply", "-f", str(cron_file))
    await kubectl.ok("apply", "-f", "-", stdin=cron_file.read_text().replace('"world"', '"kueue"'))
    path = "jsonpath={.spec.jobTemplate.spec.template.spec.containers}"
    [container] = json.loads(await kubectl.ok("get", "cronjob", "sample-cronjob", "-o", path))
    assert container["args"] == ["entrypoint-tester", "hello", "kueue"]
    # the manifest's cpu: 1 reads back as the API server stores a quantity
    assert container["image"].startswith("registry.k8s.io/") and container["resources"]["requests"]["cpu"] == "1"


@pytest.mark.slow
async def test_every_supported_kueue_example_applies_or_creates_without_validate_false(
    kubectl: Kubectl, cluster: emulator.ClusterEmulator
) -> None:
    """Every file of ../shared/kueue-examples whose kinds kueue-es serves: `kubectl apply -f` (files that
    name their objects, applied twice: the second is a patch that changes nothing) or `kubectl create -f`
    (generateName), as
    Kueue's docs type them; every object is then stored (and deleted before the next file)."""
    files = supported_examples()
    assert len(files) >= 30
    for path in files:
        docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        if generates_names(path):
            out = await kubectl.ok("create", "-f", str(path))
            assert out.count(" created") == len(docs), out
        else:
            out = await kubectl.ok("apply", "-f", str(path))
            assert all(
                word in ("created", "configured", "unchanged")
                for word in (line.split()[-1] for line in out.splitlines())
            ), out
            versions = (await kubectl.ok("get", "-f", str(path), "-o", "jsonpath={..resourceVersion}")).split()
            out = await kubectl.ok("apply", "-f", str(path))
            # "configured" is kube-apiserver's answer too when a merge patch re-sends a list the server
            # defaults (a JobSet's replicated jobs get completionMode): the patch is a no-op, so nothing
            # is written and every resourceVersion stays
            assert all(line.split()[-1] in ("unchanged", "configured") for line in out.splitlines()), out
            after = await kubectl.ok("get", "-f", str(path), "-o", "jsonpath={..resourceVersion}")
            assert after.split() == versions, out
            stored = await kubectl.ok("get", "-f", str(path), "-o", "name")
            assert len(stored.split()) == len(docs), stored
            # examples reuse names (user-queue) with other ClusterQueues; spec.clusterQueue is immutable
            await kubectl.ok("delete", "-f", str(path), "--wait=false")


async def test_examples_kueue_refuses_are_refused_naming_the_field(kubectl: Kubectl) -> None:
    """kubectl apply of an example file Kueue's webhooks refuse (``REFUSED_BY_KUEUE``: admin/minimal-cq.yaml's
    check on a flavor the ClusterQueue has no quota in, Kueue PR #10369) fails with the 403 of Kueue's
    ClusterQueue webhook naming the field, and nothing is stored."""
    for relative, (field, _) in REFUSED_BY_KUEUE.items():
        code, _, err = await kubectl.run("apply", "-f", str(EXAMPLES / relative))
        assert code == 1 and field in err and "Unsupported value" in err, err
        assert (await kubectl.ok("get", "-f", str(EXAMPLES / relative), "--ignore-not-found", "-o", "name")) == ""


async def test_serving_samples_short_names_and_scale(kubectl: Kubectl, cluster: emulator.ClusterEmulator) -> None:
    """Kueue's serving samples apply as they are; `kubectl get deploy,sts` prints kubectl's columns, the templates
    carry Kueue's marks (the webhooks' part), and `kubectl scale` writes spec.replicas through the scale subresource."""
    serving = EXAMPLES / "serving-workloads"
    out = await kubectl.ok(
        "apply", "-f", str(serving / "sample-deployment.yaml"), "-f", str(serving / "sample-statefulset.yaml")
    )
    assert "deployment.apps/nginx-deployment created" in out and "statefulset.apps/nginx-statefulset created" in out
    rows = table(await kubectl.ok("get", "deploy"))
    assert rows[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"] and rows[1][:2] == ["nginx-deployment", "0/3"]
    assert table(await kubectl.ok("get", "sts"))[1][:2] == ["nginx-statefulset", "0/3"]
    annotations = json.loads(
        await kubectl.ok("get", "sts", "nginx-statefulset", "-o", "jsonpath={.spec.template.metadata.annotations}")
    )
    assert annotations == {"kueue.x-k8s.io/pod-suspending-parent": "statefulset"}
    assert "scaled" in await kubectl.ok("scale", "deploy", "nginx-deployment", "--replicas=1")
    assert await kubectl.ok("get", "deploy", "nginx-deployment", "-o", "jsonpath={.spec.replicas}") == "1"
    # Kueue's StatefulSet webhook refuses a replica change of a managed StatefulSet; its webhooks do not see
    # the scale subresource (Kueue's configuration lists statefulsets, not statefulsets/scale)
    code, _, err = await kubectl.run(
        "patch", "sts", "nginx-statefulset", "--type=merge", "-p", '{"spec":{"replicas":5}}'
    )
    assert code != 0 and "spec.replicas: Invalid value: 5: field is immutable" in err
    assert "scaled" in await kubectl.ok("scale", "sts", "nginx-statefulset", "--replicas=0")
    assert await kubectl.ok("get", "sts", "nginx-statefulset", "-o", "jsonpath={.spec.replicas}") == "0"
    code, _, err = await kubectl.run("scale", "deploy", "nginx-deployment", "--replicas=-1")
    assert code != 0 and "replicas" in err


async def test_cronjob_and_priority_class_apply_print_and_validate(kubectl: Kubectl, tmp_path: Path) -> None:
    """Kueue's sample-cronjob.yaml applies as it is (validated against the server's OpenAPI) and prints
    kubectl's CronJob columns under `cj` and `get all`; a misspelt CronJob field is refused. `kubectl create
    priorityclass` works, and `kubectl get pc` prints kubectl's PriorityClass columns."""
    out = await kubectl.ok("apply", "-f", str(EXAMPLES / "jobs" / "sample-cronjob.yaml"))
    assert out.strip() == "cronjob.batch/sample-cronjob created"
    rows = table(await kubectl.ok("get", "cj"))
    assert rows[0] == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"]
    assert rows[1][:6] == ["sample-cronjob", "* * * * *", "<none>", "False", "0", "<none>"]
    assert "cronjob.batch/sample-cronjob" in await kubectl.ok("get", "all")
    assert "concurrencyPolicy" in await kubectl.ok("explain", "cronjob.spec")
    typo = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "typo"},
            "spec": {"schedul": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}}  # fmt: skip
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(typo))
    code, _, err = await kubectl.run("apply", "-f", str(path))
    assert code != 0 and 'unknown field "spec.schedul"' in err
    out = await kubectl.ok("create", "priorityclass", "high", "--value=1000")
    assert out.strip() == "priorityclass.scheduling.k8s.io/high created"
    rows = table(await kubectl.ok("get", "pc"))
    assert rows[0] == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert rows[1][:3] == ["high", "1000", "false"] and rows[1][4] == "PreemptLowerPriority"


# the job template of Kueue's "Setup All-or-nothing with ready Pods" page (tasks/manage/setup_wait_for_pods_ready.md),
# its script cut short: a headless Service, the script's ConfigMap and an Indexed Job mounting it
ALL_OR_NOTHING_TEMPLATE = """\
apiVersion: v1
kind: Service
metadata:
  name: svc_ID_
spec:
  clusterIP: None
  selector:
    job-name: job_ID_
  ports:
  - name: http
    protocol: TCP
    port: 8080
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: script-code_ID_
data:
  main.py: |
    import sys, os, time
    time.sleep(10)
---
apiVersion: batch/v1
kind: Job
metadata:
  name: job_ID_
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  parallelism: 20
  completions: 20
  completionMode: Indexed
  suspend: true
  template:
    spec:
      subdomain: svc_ID_
      volumes:
      - name: script-volume
        configMap:
          name: script-code_ID_
      containers:
      - name: main
        image: python:bullseye
        command: ["python"]
        args:
        - /script-path/main.py
        - "20"
        ports:
        - containerPort: 8080
        imagePullPolicy: IfNotPresent
        resources:
          requests:
            memory: "316Mi"
        volumeMounts:
          - mountPath: /script-path
            name: script-volume
      restartPolicy: Never
  backoffLimit: 0
"""


async def test_the_all_or_nothing_pages_job_template_creates_its_config_map(kubectl: Kubectl, tmp_path: Path) -> None:
    """`sed 's/_ID_/1/g' job-template.yaml > /tmp/job1.yaml; kubectl create -f /tmp/job1.yaml`, as Kueue's
    waitForPodsReady page types it: the Service, the ConfigMap and the Job are created, validated against the
    server's OpenAPI, and `kubectl get configmaps` prints kubectl's columns. Before, ConfigMaps were not served:
    kubectl found no ConfigMap in the OpenAPI document and refused the whole file ("failed to download
    openapi"), so the Job was never created."""
    path = tmp_path / "job1.yaml"
    path.write_text(ALL_OR_NOTHING_TEMPLATE.replace("_ID_", "1"))
    out = await kubectl.ok("create", "-f", str(path))
    assert out.split("\n")[:3] == ["service/svc1 created", "configmap/script-code1 created", "job.batch/job1 created"]
    rows = table(await kubectl.ok("get", "configmaps"))
    assert rows[0] == ["NAME", "DATA", "AGE"] and rows[1][:2] == ["script-code1", "1"]
    assert "main.py" in await kubectl.ok("get", "cm", "script-code1", "-o", "yaml")


PROVISIONING = EXAMPLES / "provisioning" / "provisioning-setup.yaml"


@pytest.mark.skipif(not PROVISIONING.is_file(), reason="../shared/kueue-examples is not beside the repo")
async def test_provisioning_kinds_print_their_columns(kubectl: Kubectl, tmp_path: Path) -> None:
    """Kueue's provisioning-setup.yaml applies unchanged (ProvisioningRequestConfig, short name prc); a
    ProvisioningRequest prints its class and conditions, a PodTemplate its containers (kubectl's columns)."""
    out = await kubectl.ok("apply", "-f", str(PROVISIONING))
    assert "provisioningrequestconfig.kueue.x-k8s.io/prov-test-config created" in out
    assert table(await kubectl.ok("get", "prc"))[1][0] == "prov-test-config"
    objects = [
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "ppt-wl-prov-1-main", "namespace": "default"},
         "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}},
        {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
         "metadata": {"name": "wl-prov-1", "namespace": "default"},
         "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                  "podSets": [{"podTemplateRef": {"name": "ppt-wl-prov-1-main"}, "count": 3}]}},
    ]  # fmt: skip
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    await kubectl.ok("apply", "-f", str(path))
    await kubectl.ok(
        "patch", "provisioningrequest", "wl-prov-1", "--subresource=status", "--type=merge", "-p",
        json.dumps({"status": {"conditions": [
            {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ]}}),
    )  # fmt: skip
    rows = table(await kubectl.ok("get", "provisioningrequests"))
    assert rows[0] == ["NAME", "CLASS", "ACCEPTED", "PROVISIONED", "FAILED", "AGE"]
    assert rows[1][:3] == ["wl-prov-1", "check-capacity.autoscaling.x-k8s.io", "True"]
    rows = table(await kubectl.ok("get", "podtemplates"))
    assert rows == [["NAME", "CONTAINERS", "IMAGES", "POD LABELS"], ["ppt-wl-prov-1-main", "main", "busybox", "<none>"]]


JOBSET_CRD = Path(__file__).resolve().parents[1] / "fixtures" / "crds" / "jobset.x-k8s.io_jobsets.yaml"


async def test_jobsets_print_the_columns_of_jobsets_crd(kubectl: Kubectl) -> None:
    """The emulator serves JobSets without JobSet's CRD; ``kubectl get jobsets`` still prints that CRD's
    additionalPrinterColumns (TerminalState, Restarts, Completed, Suspended, Age), as in a cluster."""
    crd = yaml.safe_load(JOBSET_CRD.read_text())
    published = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    out = await kubectl.ok("create", "-o", "name", "-f", str(EXAMPLES / "jobs" / "sample-jobset.yaml"))
    name = out.strip().split("/", 1)[1]
    await kubectl.ok(
        "patch", "jobset", name, "--subresource=status", "--type=merge", "-p",
        json.dumps({"status": {"terminalState": "Completed", "restarts": 2, "conditions": [
            {"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
             "message": "jobset completed successfully", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ]}}),
    )  # fmt: skip
    rows = table(await kubectl.ok("get", "jobsets"))
    assert rows[0] == ["NAME"] + [column["name"].upper() for column in published]
    assert rows[0] == ["NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED", "AGE"]
    assert rows[1][:5] == [name, "Completed", "2", "True", "true"]  # suspended by Kueue's JobSet webhook
    # descriptions and JSONPaths too, as published (``-o wide`` and clients reading the Table's columns)
    assert list(tables.SERVED_KIND_COLUMNS["jobset.x-k8s.io", "JobSet"]) == published


#: Kueue's examples/visibility/cluster-role-and-binding.yaml, which its "Monitor pending workloads" page applies
VISIBILITY_READER = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kueue-visibility-server-api
rules:
- apiGroups:
  - "visibility.kueue.x-k8s.io"
  resources:
  - "clusterqueues/pendingworkloads"
  - "localqueues/pendingworkloads"
  verbs:
  - get
  - list
  - watch
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kueue-visibility-server-api
  namespace: default
subjects:
- kind: ServiceAccount
  name: default
  namespace: default
roleRef:
  kind: ClusterRole
  name: kueue-visibility-server-api
  apiGroup: rbac.authorization.k8s.io
"""


async def test_rbac_objects_apply_as_in_a_cluster(kubectl: Kubectl) -> None:
    """``kubectl apply`` of Kueue's visibility reader role and binding works (kubectl used to refuse it while
    validating: no rbac.authorization.k8s.io in /openapi/v3, then no protobuf /openapi/v2); the objects are
    stored and listed beside the server's bootstrap bindings, and a namespaced Role and RoleBinding too (what
    they grant is tests/kube/test_rbac.py's). (``kubectl create role`` sends protobuf, which the emulator reads
    for a few kinds only: README.)"""
    out = await kubectl.ok("apply", "-f", "-", stdin=VISIBILITY_READER)
    assert out.split("\n")[:2] == [
        "clusterrole.rbac.authorization.k8s.io/kueue-visibility-server-api created",
        "clusterrolebinding.rbac.authorization.k8s.io/kueue-visibility-server-api created",
    ]
    stored = json.loads(await kubectl.ok("get", "clusterrole", "kueue-visibility-server-api", "-o", "json"))
    assert stored["rules"][0]["resources"] == ["clusterqueues/pendingworkloads", "localqueues/pendingworkloads"]
    binding = json.loads(await kubectl.ok("get", "clusterrolebinding", "kueue-visibility-server-api", "-o", "json"))
    assert binding["roleRef"]["name"] == "kueue-visibility-server-api" and "namespace" not in binding["metadata"]
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "reader"},
        "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
    }
    await kubectl.ok("apply", "-f", "-", stdin=yaml.safe_dump_all([role, binding]))
    assert (await kubectl.ok("get", "roles,rolebindings", "-o", "name")).split() == [
        "role.rbac.authorization.k8s.io/reader",
        "rolebinding.rbac.authorization.k8s.io/reader",
    ]
    listed = table(await kubectl.ok("get", "clusterrolebindings", "-o", "wide"))
    assert listed[0][:3] == ["NAME", "ROLE", "AGE"] and listed[0][-1] == "SERVICEACCOUNTS"
    mine = [row for row in listed[1:] if row[0] == "kueue-visibility-server-api"]
    assert [row[1] for row in mine] == ["ClusterRole/kueue-visibility-server-api"] and mine[0][-1] == "default/default"
    assert table(await kubectl.ok("get", "roles"))[0] == ["NAME", "CREATED AT"]
    assert (await kubectl.ok("auth", "can-i", "delete", "workloads")).strip() == "yes"


#: Kueue's visibility-apf.yaml (config/components/visibility-apf, kustomized into kueue-system)
VISIBILITY_APF = """\
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: visibility
  namespace: kueue-system
spec:
  limited:
    lendablePercent: 90
    limitResponse:
      queuing:
        handSize: 4
        queueLengthLimit: 50
        queues: 16
      type: Queue
    nominalConcurrencyShares: 10
  type: Limited
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: visibility
  namespace: kueue-system
spec:
  distinguisherMethod:
    type: ByUser
  matchingPrecedence: 9000
  priorityLevelConfiguration:
    name: visibility
  rules:
    - resourceRules:
        - apiGroups:
            - 'visibility.kueue.x-k8s.io'
          clusterScope: true
          namespaces:
            - '*'
          resources:
            - '*'
          verbs:
            - '*'
      subjects:
        - group:
            name: system:unauthenticated
          kind: Group
        - group:
            name: system:authenticated
          kind: Group
"""


async def test_the_visibility_apis_flow_control_applies(kubectl: Kubectl) -> None:
    """The first step of Kueue's "Monitor pending workloads on demand" page, ``kubectl apply --server-side -f
    visibility-apf.yaml``, applies (the emulator did not serve flowcontrol.apiserver.k8s.io: "no matches for
    kind"); the cluster-scoped objects keep no namespace, and print with kubectl's columns."""
    out = await kubectl.ok("apply", "--server-side", "-f", "-", stdin=VISIBILITY_APF)
    assert out.split("\n")[:2] == [
        "prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/visibility serverside-applied",
        "flowschema.flowcontrol.apiserver.k8s.io/visibility serverside-applied",
    ]
    stored = json.loads(await kubectl.ok("get", "flowschema", "visibility", "-o", "json"))
    assert "namespace" not in stored["metadata"] and stored["spec"]["matchingPrecedence"] == 9000
    levels = table(await kubectl.ok("get", "prioritylevelconfigurations"))
    assert levels[0][:6] == ["NAME", "TYPE", "NOMINALCONCURRENCYSHARES", "QUEUES", "HANDSIZE", "QUEUELENGTHLIMIT"]
    assert levels[1][:6] == ["visibility", "Limited", "10", "16", "4", "50"]
    schemas = table(await kubectl.ok("get", "flowschemas"))
    assert schemas[0][:4] == ["NAME", "PRIORITYLEVEL", "MATCHINGPRECEDENCE", "DISTINGUISHERMETHOD"]
    assert schemas[1][:4] == ["visibility", "visibility", "9000", "ByUser"]


async def test_a_local_queue_without_a_cluster_queue_prints_an_empty_cluster_queue_cell(kubectl: Kubectl) -> None:
    """Kueue's LocalQueue may name no ClusterQueue (localqueue_types.go ``+optional``): ``kubectl create`` takes
    one without ``spec.clusterQueue`` (or without a spec), and ``kubectl get lq`` prints nothing in the CRD's
    ClusterQueue column (``.spec.clusterQueue``: no value, a null cell; no status here either, as no controller
    runs). ``""`` written is refused by Kueue's pattern."""
    manifest = "".join(
        f"---\n{yaml.safe_dump({'apiVersion': 'kueue.x-k8s.io/v1beta2', 'kind': 'LocalQueue', **body})}"
        for body in (
            {"metadata": {"name": "lq-no-spec", "namespace": "default"}},
            {"metadata": {"name": "lq-empty-spec", "namespace": "default"}, "spec": {}},
        )
    )
    assert await kubectl.ok("create", "-f", "-", stdin=manifest) == (
        "localqueue.kueue.x-k8s.io/lq-no-spec created\nlocalqueue.kueue.x-k8s.io/lq-empty-spec created\n"
    )
    out = await kubectl.ok("get", "lq", "-n", "default")
    assert table(out) == [
        ["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS"],
        ["lq-empty-spec"],
        ["lq-no-spec"],
    ]
    empty = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "lq-empty-name"}}
    code, _, err = await kubectl.run(
        "create", "-n", "default", "-f", "-", stdin=yaml.safe_dump({**empty, "spec": {"clusterQueue": ""}})
    )
    assert code == 1 and "spec.clusterQueue: Invalid value" in err, err


def kind_list(objects: list[dict[str, object]]) -> str:
    """A ``kind: List`` file of ``objects``, as ``kubectl get -o yaml`` writes several objects."""
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects})


def setup_and_job() -> list[dict[str, object]]:
    """Kueue's single ClusterQueue setup (flavor, ClusterQueue, LocalQueue) and its sample Job, named."""
    job = yaml.safe_load(SAMPLE_JOB.read_text())
    job["metadata"] = {**{k: v for k, v in job["metadata"].items() if k != "generateName"}, "name": "sample-job"}
    return [doc for doc in yaml.safe_load_all(SETUP.read_text()) if doc] + [job]


async def test_a_list_file_is_created_got_applied_replaced_and_deleted_with_default_validation(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    """A ``kind: List`` file works with kubectl's default validation (``--validate=strict``), as on a cluster:
    kubectl validates a List client-side from the protobuf ``/openapi/v2`` (cli-runtime's verifiers answer
    "unsupported" for ``v1/List``), which the emulator refused with 406 ("the server was unable to respond
    with a content type that the client supports"). ``create``, ``get``, ``apply``, ``delete -f`` take it,
    and a List saved by ``kubectl get -o yaml`` replaces and applies as it is."""
    listed = tmp_path / "list.yaml"
    listed.write_text(kind_list(setup_and_job()))
    names = [
        "resourceflavor.kueue.x-k8s.io/default-flavor",
        "clusterqueue.kueue.x-k8s.io/cluster-queue",
        "localqueue.kueue.x-k8s.io/user-queue",
        "job.batch/sample-job",
    ]
    assert (await kubectl.ok("create", "-f", str(listed))).splitlines() == [f"{name} created" for name in names]
    assert (await kubectl.ok("get", "-f", str(listed), "-o", "name")).split() == names
    assert (await kubectl.ok("apply", "-f", str(listed))).splitlines() == [f"{name} configured" for name in names]
    saved = tmp_path / "saved.yaml"
    kueue_kinds = "resourceflavors,clusterqueues,localqueues"
    saved.write_text(await kubectl.ok("get", kueue_kinds, "-A", "-o", "yaml"))
    assert yaml.safe_load(saved.read_text())["kind"] == "List"
    assert (await kubectl.ok("replace", "-f", str(saved))).splitlines() == [f"{name} replaced" for name in names[:3]]
    saved.write_text(await kubectl.ok("get", kueue_kinds, "-A", "-o", "yaml"))
    applied = (await kubectl.ok("apply", "-f", str(saved))).splitlines()  # its last-applied is the saved file
    assert applied == [f"{name} configured" for name in names[:3]]
    deleted = (await kubectl.ok("delete", "-f", str(listed))).splitlines()
    assert deleted == [f'{n.split("/")[0]} "{n.split("/")[1]}" deleted' for n in names]
    code, _, err = await kubectl.run("get", "-f", str(listed))
    assert code == 1 and 'resourceflavors.kueue.x-k8s.io "default-flavor" not found' in err, err


async def test_a_list_file_with_unknown_fields_is_refused_naming_them(kubectl: Kubectl, tmp_path: Path) -> None:
    """Strict validation of a List names each unknown field, in a Kueue object and in a Job's pod template
    (kubectl's client-side ValidationError, what it prints for a List against kube-apiserver), and creates
    nothing; ``--validate=false`` sends the objects, and then the server's strict decoding is not asked for."""
    objects = setup_and_job()
    objects[1]["spec"]["cohrtName"] = "research"  # type: ignore[index]
    objects[3]["spec"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Always"  # type: ignore[index]
    listed = tmp_path / "list.yaml"
    listed.write_text(kind_list(objects))
    for verb in ("create", "apply"):
        code, out, err = await kubectl.run(verb, "-f", str(listed))
        assert code == 1 and out == "", (out, err)
        assert 'unknown field "cohrtName" in io.x-k8s.kueue.v1beta2.ClusterQueue.spec' in err, err
        assert 'unknown field "imagePullPolice" in io.k8s.api.core.v1.Container' in err, err
    assert (await kubectl.ok("get", "resourceflavors,clusterqueues,localqueues,jobs", "-A", "-o", "name")) == ""


@pytest.mark.parametrize(
    "path",
    [
        "/apis/foo.example.com",  # an unknown group
        "/apis/foo.example.com/v1",
        "/apis/batch/v9",  # an unknown version of a served group
        "/api/v2",
        "/apis/batch/v1/foos",  # an unknown resource
        "/apis/batch/v1/namespaces/default/foos",
        "/not/an/api/path",
    ],
)
async def test_unknown_paths_get_kube_apiservers_not_found(kubectl: Kubectl, path: str) -> None:
    """A path nothing serves is kube-apiserver's 404 Status (reason NotFound, "the server could not find the
    requested resource"), never the emulator library's own advice to its test authors (found by a new user's
    trial: ``kubectl get --raw /apis/foo.example.com/v1`` printed kmock's "Declare it ..." message)."""
    code, out, err = await kubectl.run("get", "--raw", path)
    assert code == 1
    assert err.strip() == "Error from server (NotFound): the server could not find the requested resource"
    assert out == ""


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
async def test_health_endpoints_answer_ok(kubectl: Kubectl, path: str) -> None:
    """kube-apiserver's health checks answer ``ok`` (the 404 for unknown paths above must not take them)."""
    code, out, _ = await kubectl.run("get", "--raw", path)
    assert (code, out.strip()) == (0, "ok")


def _events_v1(name: str, *, pod: str, uid: str) -> dict[str, object]:
    """An Event as Kueue's recorder writes it, through events.k8s.io/v1 (mgr.GetEventRecorder)."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "eventTime": "2026-12-07T09:40:00.000000Z",
        "reportingController": "kueue-admission",
        "reportingInstance": "kueue-admission-0",
        "action": "Admitted",
        "reason": "QuotaReserved",
        "type": "Normal",
        "note": "Quota reserved in ClusterQueue cq",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": "default", "uid": uid},
    }


async def test_events_k8s_io_serves_the_same_events_as_core_v1(kubectl: Kubectl) -> None:
    """events.k8s.io/v1 is served, as views of the stored core/v1 Events (found by a new user's trial: kubectl get
    events.events.k8s.io said the server has no such resource type, though Kueue writes its Events there): an
    Event written there is core's with Kubernetes' field mapping (note/message, regarding/involvedObject,
    reportingController/reportingComponent), and one written through core/v1 is listed there; kubectl get
    (either group), kubectl events and kubectl describe agree; events.k8s.io's field selectors and patches
    work on the same object."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default"}}
    pod["spec"] = {"containers": [{"name": "c", "image": "busybox"}]}
    await kubectl.ok("create", "-f", "-", stdin=json.dumps(pod))
    uid = await kubectl.ok("get", "pod", "p1", "-o", "jsonpath={.metadata.uid}")
    discovery = json.loads(await kubectl.ok("get", "--raw", "/apis/events.k8s.io/v1"))
    entries = [(r["name"], r["kind"], r["namespaced"]) for r in discovery["resources"]]
    assert discovery["groupVersion"] == "events.k8s.io/v1" and entries == [("events", "Event", True)]
    out = await kubectl.ok("create", "-f", "-", stdin=json.dumps(_events_v1("p1.admitted", pod="p1", uid=uid)))
    assert out.strip() == "event.events.k8s.io/p1.admitted created"
    core_event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "p1.scheduled", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "p1", "namespace": "default", "uid": uid},
        "reason": "Scheduled",
        "message": "Successfully assigned default/p1",
        "type": "Normal",
        "source": {"component": "default-scheduler"},
        "firstTimestamp": "2026-12-07T09:39:00Z",
        "lastTimestamp": "2026-12-07T09:39:00Z",
        "count": 1,
    }
    await kubectl.ok("create", "-f", "-", stdin=json.dumps(core_event))

    stored = json.loads(await kubectl.ok("get", "event", "p1.admitted", "-n", "default", "-o", "json"))
    assert stored["apiVersion"] == "v1"
    assert stored["message"] == "Quota reserved in ClusterQueue cq"
    assert stored["involvedObject"]["name"] == "p1" and stored["reportingComponent"] == "kueue-admission"
    raw = json.loads(await kubectl.ok("get", "--raw", "/apis/events.k8s.io/v1/namespaces/default/events"))
    by_name = {item["metadata"]["name"]: item for item in raw["items"]}
    assert raw["kind"] == "EventList" and set(by_name) == {"p1.admitted", "p1.scheduled"}
    scheduled = by_name["p1.scheduled"]
    assert scheduled["apiVersion"] == "events.k8s.io/v1"
    assert scheduled["note"] == "Successfully assigned default/p1" and "message" not in scheduled
    assert scheduled["regarding"]["name"] == "p1" and scheduled["deprecatedSource"] == {
        "component": "default-scheduler"
    }
    assert scheduled["deprecatedCount"] == 1 and scheduled["deprecatedFirstTimestamp"] == "2026-12-07T09:39:00Z"
    assert by_name["p1.admitted"]["reportingController"] == "kueue-admission"

    columns = ["TYPE", "REASON", "OBJECT", "MESSAGE"]

    def shown(text: str) -> list[list[str]]:
        rows = table(text)
        at = [rows[0].index(column) for column in columns]
        return sorted([row[i] for i in at] for row in rows[1:])

    via_core = shown(await kubectl.ok("get", "events", "-n", "default"))
    assert via_core == [
        ["Normal", "QuotaReserved", "pod/p1", "Quota reserved in ClusterQueue cq"],
        ["Normal", "Scheduled", "pod/p1", "Successfully assigned default/p1"],
    ]
    assert shown(await kubectl.ok("get", "events.events.k8s.io", "-n", "default")) == via_core
    assert shown(await kubectl.ok("events", "-n", "default")) == [
        [row[0], row[1], "Pod/p1", row[3]] for row in via_core
    ]
    described = await kubectl.ok("describe", "pod", "p1", "-n", "default")
    assert "QuotaReserved" in described and "Quota reserved in ClusterQueue cq" in described
    assert "Successfully assigned default/p1" in described

    selected = await kubectl.ok(
        "get",
        "events.events.k8s.io",
        "-n",
        "default",
        "--field-selector",
        "reason=Scheduled,regarding.name=p1",
        "-o",
        "name",
    )
    assert selected.split() == ["event.events.k8s.io/p1.scheduled"]
    code, _, err = await kubectl.run(
        "get", "events.events.k8s.io", "-n", "default", "--field-selector", "involvedObject.name=p1"
    )
    assert code == 1 and "field label not supported: involvedObject.name" in err
    await kubectl.ok(
        "patch", "events.events.k8s.io", "p1.admitted", "-n", "default", "--type", "merge", "-p", '{"note": "again"}'
    )
    patched = json.loads(await kubectl.ok("get", "event", "p1.admitted", "-n", "default", "-o", "json"))
    assert patched["message"] == "again" and patched["reason"] == "QuotaReserved"
