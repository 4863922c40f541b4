"""Invalid objects don't slip in: the emulated API server refuses what a real one with kueue-es's CRDs
refuses, kubectl prints it as it prints a real server's refusal, and ``kueue-es apply`` reads
files, directories and stdin as ``kubectl apply -f`` does, refusing the same objects first.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client, errors, resources
from kueue_es.sim import emulator, rbac
from tests.kube import examples

pytestmark = pytest.mark.timeout(120)  # several CLI processes per test on a shared machine

KUBECTL = shutil.which("kubectl")
QUOTA_FIELD = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"


def cluster_queue(name: str = "cq", quota: Any = "4", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": quota}]}],
                }
            ],
            **spec,
        },
    }


def job(cpu: str, name: str = "neg") -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}},
    }


async def test_negative_quota_is_denied_by_kueues_webhook_with_its_field_path(api: k8s_client.ApiClient) -> None:
    """Kueue's CRD takes any quantity; its ClusterQueue webhook refuses a negative one (clusterqueue_webhook.go
    validateResourceQuantity): 403, kube-apiserver's denial of ``vclusterqueue.kb.io`` with the field error."""
    with pytest.raises(errors.ApiError) as refused:
        await client.create_object(api, resources.CLUSTER_QUEUES, body=cluster_queue(quota=-1))
    assert refused.value.status == 403 and refused.value.reason == "Forbidden"
    assert refused.value.body["message"] == (
        'admission webhook "vclusterqueue.kb.io" denied the request: '
        f'{QUOTA_FIELD}: Invalid value: "-1": must be greater than or equal to 0'
    )
    with pytest.raises(errors.NotFoundError):
        await client.get_object(api, resources.CLUSTER_QUEUES, name="cq")


async def test_an_update_is_validated_too(api: k8s_client.ApiClient) -> None:
    """A merge patch that makes the quota negative is refused and the stored object is unchanged."""
    await client.create_object(api, resources.CLUSTER_QUEUES, body=cluster_queue())
    patch = {"spec": {"resourceGroups": cluster_queue(quota="-2")["spec"]["resourceGroups"]}}
    with pytest.raises(errors.ApiError) as refused:
        await client.patch_object(api, resources.CLUSTER_QUEUES, name="cq", patch=patch)
    assert refused.value.status == 403
    stored = await client.get_object(api, resources.CLUSTER_QUEUES, name="cq")
    assert stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "4"


async def test_a_local_queues_cluster_queue_is_optional_and_immutable_between_two_names(
    api: k8s_client.ApiClient,
) -> None:
    """Kueue's ``spec.clusterQueue`` is ``+optional`` with the transition rule ``self == oldSelf``, which a
    Kubernetes API server runs only when the old and the new object both have the field: created without one,
    a LocalQueue may name one later and leave it out again, but not change one name into another; ``""`` written
    is refused by the pattern of ClusterQueueReference."""
    where = {"namespace": "default", "name": "lq"}
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": where, "spec": {}}
    created = await client.create_object(api, resources.LOCAL_QUEUES, namespace="default", body=body)
    assert "clusterQueue" not in created["spec"]
    named = await client.patch_object(api, resources.LOCAL_QUEUES, **where, patch={"spec": {"clusterQueue": "cq-a"}})
    assert named["spec"]["clusterQueue"] == "cq-a"
    with pytest.raises(errors.ApiError) as refused:
        await client.patch_object(api, resources.LOCAL_QUEUES, **where, patch={"spec": {"clusterQueue": "cq-b"}})
    [cause] = refused.value.body["details"]["causes"]
    assert (refused.value.status, cause["field"]) == (422, "spec.clusterQueue")
    assert cause["message"].endswith(": field is immutable")
    left_out = await client.patch_object(api, resources.LOCAL_QUEUES, **where, patch={"spec": {"clusterQueue": None}})
    assert "clusterQueue" not in left_out["spec"]
    with pytest.raises(errors.ApiError, match=r"spec.clusterQueue in body should match") as refused:
        await client.patch_object(api, resources.LOCAL_QUEUES, **where, patch={"spec": {"clusterQueue": ""}})
    assert refused.value.status == 422


async def test_a_misspelt_field_is_refused_under_strict_and_pruned_otherwise(cluster: emulator.ClusterEmulator) -> None:
    url = f"{cluster.url}{resources.CLUSTER_QUEUES.path()}"
    typo = cluster_queue(cohrtName="team")
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{url}?fieldValidation=Strict", json=typo) as response:
            assert response.status == 400
            status = await response.json()
        assert status["message"] == 'strict decoding error: unknown field "spec.cohrtName"'
        async with session.post(url, json=typo) as response:
            assert response.status == 201
            stored = await response.json()
    assert "cohrtName" not in stored["spec"] and stored["spec"]["namespaceSelector"] == {}


ACTIVE = {
    "type": "Active",
    "status": "True",
    "reason": "Ready",
    "message": "Can admit new workloads",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


async def test_a_status_write_is_held_to_kueues_status_schema(api: k8s_client.ApiClient) -> None:
    """A write through the status subresource is checked against Kueue's status schema, as a real API server
    with Kueue's CRDs checks it: 422 with the field paths, and the stored status unchanged."""
    await client.create_object(api, resources.CLUSTER_QUEUES, body=cluster_queue())
    usage = [{"name": "default", "resources": [{"name": "cpu", "total": "1", "borrowed": "0"}]}]
    written = {"pendingWorkloads": 0, "conditions": [ACTIVE], "flavorsUsage": usage, "flavorsReservation": usage}
    stored = await client.patch_object(
        api, resources.CLUSTER_QUEUES, name="cq", subresource="status", patch={"status": written}
    )
    assert stored["status"] == written
    wrong = {"pendingWorkloads": "three", "conditions": [{**ACTIVE, "status": "Maybe", "reason": ""}]}
    with pytest.raises(errors.ApiError) as refused:
        await client.patch_object(
            api, resources.CLUSTER_QUEUES, name="cq", subresource="status", patch={"status": wrong}
        )
    assert refused.value.status == 422
    assert [(c["field"], c["message"]) for c in refused.value.body["details"]["causes"]] == [
        (
            "status.conditions[0].reason",
            'Invalid value: "": status.conditions[0].reason in body should be at least 1 chars long',
        ),
        (
            "status.conditions[0].reason",
            'Invalid value: "": status.conditions[0].reason in body should match '
            "'^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'",
        ),
        ("status.conditions[0].status", 'Unsupported value: "Maybe": supported values: "True", "False", "Unknown"'),
        (
            "status.pendingWorkloads",
            'Invalid value: "string": status.pendingWorkloads in body must be of type integer: "string"',
        ),
    ]
    assert (await client.get_object(api, resources.CLUSTER_QUEUES, name="cq"))["status"] == written


async def test_a_workloads_status_keeps_kueues_cel_rules(api: k8s_client.ApiClient) -> None:
    """The CEL rules of Kueue's Workload status (clusterName is immutable once set, and excludes
    nominatedClusterNames) refuse a status write that breaks them."""
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "default"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
    }
    await client.create_object(api, resources.WORKLOADS, namespace="default", body=workload)

    async def write(status: dict[str, Any]) -> dict[str, Any]:
        return await client.patch_object(
            api, resources.WORKLOADS, namespace="default", name="wl", subresource="status", patch={"status": status}
        )

    await write({"nominatedClusterNames": ["w1", "w2"]})
    with pytest.raises(errors.ApiError) as both:
        await write({"clusterName": "w1"})
    assert both.value.body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "object": clusterName and nominatedClusterNames are mutually exclusive',
            "field": "status",
        }
    ]
    assert (await write({"clusterName": "w1", "nominatedClusterNames": None}))["status"] == {"clusterName": "w1"}
    with pytest.raises(errors.ApiError) as moved:
        await write({"clusterName": "w2"})
    assert moved.value.status == 422
    assert moved.value.body["details"]["causes"][0]["message"].endswith("clusterName is immutable once set")


async def test_an_unknown_status_field_is_refused_under_strict_and_pruned_otherwise(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    await client.create_object(api, resources.CLUSTER_QUEUES, body=cluster_queue())
    url = f"{cluster.url}{resources.CLUSTER_QUEUES.path(name='cq', subresource='status')}"
    typo = {"status": {"pendingWorkloads": 2, "pendingWorkload": 2}}
    headers = {"Content-Type": "application/merge-patch+json"}
    async with aiohttp.ClientSession() as session:
        async with session.patch(f"{url}?fieldValidation=Strict", json=typo, headers=headers) as response:
            assert response.status == 400
            assert (await response.json())["message"] == 'strict decoding error: unknown field "status.pendingWorkload"'
        async with session.patch(url, json=typo, headers=headers) as response:
            assert response.status == 200
            stored = await response.json()
    assert stored["status"] == {"pendingWorkloads": 2}


async def test_a_job_requesting_negative_cpu_is_refused(api: k8s_client.ApiClient) -> None:
    with pytest.raises(errors.ApiError) as refused:
        await client.create_object(api, resources.JOBS, namespace="default", body=job("-1"))
    assert refused.value.status == 422
    assert refused.value.body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "-1": must be greater than or equal to 0',
            "field": "spec.template.spec.containers[0].resources.requests[cpu]",
        }
    ]
    await client.create_object(api, resources.JOBS, namespace="default", body=job("500m", name="fine"))


async def test_an_emulator_without_validation_stores_what_it_is_given() -> None:
    """``validate=False`` plays a cluster without kueue-es's CRDs (the watcher must cope with what it stores)."""
    async with emulator.serve_emulator(validate=False) as bare:
        api = await client.make_api_client(server=bare.url)
        try:
            stored = await client.create_object(api, resources.CLUSTER_QUEUES, body=cluster_queue(quota=-1))
        finally:
            await api.close()
    assert stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == -1


# -- the real kubectl and kueue-es apply, as processes --------------------------------------


async def run(*argv: str, stdin: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await process.communicate(stdin.encode() if stdin is not None else None)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def write(path: Path, *docs: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not on PATH")
async def test_kubectl_prints_the_refusal(cluster: emulator.ClusterEmulator, tmp_path: Path) -> None:
    assert KUBECTL is not None
    kubeconfig = tmp_path / "kubeconfig"
    client.write_kubeconfig(kubeconfig, server=cluster.url)
    bad = write(tmp_path / "cq.yaml", cluster_queue(quota=-1))
    # --validate=false: client-side validation needs /openapi, which this emulator does not serve yet
    code, _, err = await run(KUBECTL, "--kubeconfig", str(kubeconfig), "apply", "--validate=false", "-f", str(bad))
    assert code == 1
    assert (
        'Error from server (Forbidden): error when creating "' + str(bad) + '": admission webhook '
        f'"vclusterqueue.kb.io" denied the request: {QUOTA_FIELD}: Invalid value: "-1": must be greater than or '
        "equal to 0"
    ) in err
    bad_job = write(tmp_path / "job.yaml", job("-1"))
    code, _, err = await run(KUBECTL, "--kubeconfig", str(kubeconfig), "create", "--validate=false", "-f", str(bad_job))
    assert code == 1
    assert (
        'The Job "neg" is invalid: spec.template.spec.containers[0].resources.requests[cpu]: Invalid value: "-1"' in err
    )


def kueue_es(*argv: str) -> list[str]:
    return [sys.executable, "-m", "kueue_es.cli", *argv]


@pytest.mark.slow  # about 10 s on 2 cores: run by .ci/run's slow stage
async def test_apply_reads_a_tree_and_stdin_and_says_what_it_did(
    cluster: emulator.ClusterEmulator, tmp_path: Path
) -> None:
    top = write(tmp_path / "in" / "queues.yaml", cluster_queue("a"), cluster_queue("b"))
    write(tmp_path / "in" / "deeper" / "more.yml", cluster_queue("c"))
    (tmp_path / "in" / "notes.txt").write_text("not a manifest")
    server = ("--kube-server", cluster.url)

    code, out, err = await run(*kueue_es("apply", "-f", str(top.parent), *server))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "clusterqueue.kueue.x-k8s.io/a created",
        "clusterqueue.kueue.x-k8s.io/b created",
        "2 created, 0 configured, 0 unchanged",
    ]
    code, out, _ = await run(*kueue_es("apply", "-f", str(top.parent), "-R", *server))
    assert code == 0 and out.splitlines()[-1] == "1 created, 0 configured, 2 unchanged"
    changed = yaml.safe_dump(cluster_queue("a", quota="8"))
    code, out, _ = await run(*kueue_es("apply", "-f", "-", *server), stdin=changed)
    assert code == 0 and out.splitlines() == [
        "clusterqueue.kueue.x-k8s.io/a configured",
        "0 created, 1 configured, 0 unchanged",
    ]


async def test_apply_names_file_document_object_and_field(cluster: emulator.ClusterEmulator, tmp_path: Path) -> None:
    path = write(tmp_path / "mixed.yaml", cluster_queue("ok"), cluster_queue("bad", quota="-1"), job("-1"))
    code, out, err = await run(*kueue_es("apply", "-f", str(path), "--kube-server", cluster.url))
    assert code == 1
    assert err.splitlines() == [
        f'error: {path} (document 2): ClusterQueue bad: {QUOTA_FIELD}: Invalid value: "-1": must be greater than or '
        "equal to 0 (not applied)",
        f"error: {path} (document 3): Job default/neg: spec.template.spec.containers[0].resources.requests[cpu]: "
        'Invalid value: "-1": must be greater than or equal to 0 (not applied)',
    ]
    assert out.splitlines()[-1] == "1 created, 0 configured, 0 unchanged, 2 failed"


@pytest.mark.slow  # about 10 s on 2 cores: run by .ci/run's slow stage
async def test_a_large_input_gets_a_summary_not_a_line_per_object(
    cluster: emulator.ClusterEmulator, tmp_path: Path
) -> None:
    path = write(tmp_path / "many.yaml", *(cluster_queue(f"cq-{i}") for i in range(150)))
    code, out, _ = await run(*kueue_es("apply", "-f", str(path), "--kube-server", cluster.url))
    assert code == 0 and out.splitlines() == ["150 created, 0 configured, 0 unchanged"]
    code, out, _ = await run(*kueue_es("apply", "-f", str(path), "-v", "--kube-server", cluster.url))
    assert len(out.splitlines()) == 151 and out.splitlines()[0] == "clusterqueue.kueue.x-k8s.io/cq-0 unchanged"


async def test_apply_without_a_kubeconfig_or_server_is_one_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path / "cq.yaml", cluster_queue())
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    code, _, err = await run(*kueue_es("apply", "-f", str(path)), env={**env, "HOME": str(tmp_path)})
    assert code == 2 and "Traceback" not in err
    assert err.strip() == "error: no kubeconfig: pass --kubeconfig FILE or --kube-server URL, or set KUBECONFIG"
    code, _, err = await run(*kueue_es("apply", "-f", str(path), "--kube-server", "http://127.0.0.1:9"))
    assert (
        code == 2
        and "Traceback" not in err
        and err.startswith("error: cannot reach the API server at http://127.0.0.1:9")
    )


WIDGETS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}
WIDGET = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}}
VISIBILITY_EXAMPLES = examples.EXAMPLES / "visibility"
APPWRAPPERS_CRD = Path(__file__).resolve().parents[1] / "fixtures" / "crds" / "workload.codeflare.dev_appwrappers.yaml"


async def test_apply_takes_every_kind_the_server_serves_as_kubectl_does(
    cluster: emulator.ClusterEmulator, tmp_path: Path
) -> None:
    """``kueue-es apply`` maps kinds by the server's discovery, as kubectl does (found by a new user's trial: a
    kueue.x-k8s.io/v1beta1 ClusterQueue, Kueue's visibility RBAC example and CRD files were refused as kinds
    "kueue-es does not handle"): Kueue's v1beta1, RBAC, a CRD and, once it is applied, the kind it serves; a
    cluster-scoped object is named without the namespace its manifest carries, and stored without it."""
    v1beta1 = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "old"},
        "spec": {
            "namespaceSelector": {},
            "cohort": "team",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
                }
            ],
        },
    }
    roles = VISIBILITY_EXAMPLES / "cluster-role-and-binding.yaml"
    path = write(tmp_path / "mixed.yaml", v1beta1, WIDGETS_CRD, WIDGET)
    server = ("--kube-server", cluster.url)
    code, out, err = await run(
        *kueue_es("apply", "-f", str(path), "-f", str(roles), "-f", str(APPWRAPPERS_CRD), *server)
    )
    assert (code, err) == (0, ""), err
    assert out.splitlines() == [
        "clusterqueue.kueue.x-k8s.io/old created",
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created",
        "widget.example.com/w created",
        "clusterrole.rbac.authorization.k8s.io/kueue-visibility-server-api created",
        "clusterrolebinding.rbac.authorization.k8s.io/kueue-visibility-server-api created",
        "customresourcedefinition.apiextensions.k8s.io/appwrappers.workload.codeflare.dev created",
        "6 created, 0 configured, 0 unchanged",
    ]
    api = await client.make_api_client(server=cluster.url)
    try:
        stored = await client.get_object(api, resources.CLUSTER_QUEUES, name="old")
        binding = await client.get_object(api, rbac.CLUSTER_ROLE_BINDINGS, name="kueue-visibility-server-api")
    finally:
        await api.close()
    assert stored["spec"]["cohortName"] == "team"  # converted from v1beta1's spec.cohort
    assert "namespace" not in binding["metadata"]
    code, out, err = await run(*kueue_es("apply", "-f", str(path), "-f", str(roles), *server))
    assert (code, err) == (0, "") and out.splitlines()[-1] == "0 created, 0 configured, 5 unchanged"


async def test_apply_reports_refusals_in_document_order(cluster: emulator.ClusterEmulator, tmp_path: Path) -> None:
    """Refusals, whether kueue-es's own (before sending), the server's or a kind it does not serve, come in
    document order (found by a new user's trial: 2, 5, 6, 3, 4), a cluster-scoped object named without a
    namespace."""
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok", "namespace": "default"}}
    elsewhere = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lost", "namespace": "nowhere"}}
    unnamed = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
    }
    path = write(
        tmp_path / "mixed.yaml",
        config_map,
        cluster_queue("bad", quota="-1"),
        WIDGET,
        elsewhere,
        unnamed,
        cluster_queue("worse", quota="-2"),
    )
    code, out, err = await run(*kueue_es("apply", "-f", str(path), "--kube-server", cluster.url))
    assert code == 1
    lines = err.splitlines()
    assert [line.split(": ", 2)[1] for line in lines] == [
        f"{path} (document 2)",
        f"{path} (document 3)",
        f"{path} (document 4)",
        f"{path} (document 5)",
        f"{path} (document 6)",
    ], err
    assert lines[1].endswith(
        ': Widget default/w: no matches for kind "Widget" in version "example.com/v1": ensure CRDs are installed '
        "first (not applied)"
    )
    assert ": ConfigMap nowhere/lost: 404 NotFound: " in lines[2]
    assert lines[3].startswith(f"error: {path} (document 5): ClusterRoleBinding <unnamed>: ")
    assert out.splitlines() == ["configmap/ok created", "1 created, 0 configured, 0 unchanged, 5 failed"]


async def test_apply_of_malformed_yaml_exits_1_as_kubectl(tmp_path: Path) -> None:
    """Input that cannot be read (YAML that does not parse, a missing file) applies nothing and exits 1, as
    kubectl apply -f exits (the README said 1 only for refused objects; found by a new user's trial)."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [\n")
    code, out, err = await run(*kueue_es("apply", "-f", str(broken), "--kube-server", "http://127.0.0.1:9"))
    assert (code, out) == (1, "") and err.startswith(f"error: {broken}: ")
    code, out, err = await run(*kueue_es("apply", "-f", str(tmp_path / "absent.yaml")))
    assert (code, out) == (1, "") and "does not exist" in err
