"""The emulated API server answers as kube-apiserver does where clients read the answer: status codes,
Status bodies (reason, message, details and causes, which kubectl prints), and the semantics of custom
resources (Kueue's kinds are CRDs in a real cluster) as opposed to built-in kinds.

Each test names the real API server's behaviour it holds the emulator to (k8s.io/apiserver's handlers and
generic registry, apimachinery's errors package, the API conventions).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es import crds
from kueue_es.services.kube import client, resources
from kueue_es.sim import emulator
from tests.kube.test_kubectl import Kubectl, table

pytestmark = pytest.mark.timeout(30)

CQ = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
LQ = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues"
JOBS = "/apis/batch/v1/namespaces/default/jobs"


def local_queue(name: str = "lq", **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, **metadata} if name else dict(metadata),
        "spec": {"clusterQueue": "cq"},
    }


def cluster_queue(name: str = "cq", cohort: str = "a") -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"cohortName": cohort},
    }


def job(name: str = "j") -> dict[str, Any]:
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": template}}


async def call(
    cluster: emulator.ClusterEmulator,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    params: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One raw HTTP request: (status, decoded JSON body)."""
    async with aiohttp.ClientSession() as session:
        async with session.request(
            method,
            cluster.url + path,
            json=body,
            params=params,
            headers={"Content-Type": content_type} if body is not None else {},
        ) as response:
            return response.status, await response.json(content_type=None)


async def test_a_bad_name_is_invalid_with_a_cause_kubectl_can_print(cluster: emulator.ClusterEmulator) -> None:
    """NewInvalid: the message qualifies the kind, details name the kind (not the plural) and carry the cause;
    kubectl prints the causes, so without one a user saw only ``The localqueues "Bad_Name" is invalid``."""
    status, body = await call(cluster, "POST", LQ, local_queue("Bad_Name"))
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"].startswith(
        'LocalQueue.kueue.x-k8s.io "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters"
    )
    assert body["details"]["kind"] == "LocalQueue" and body["details"]["name"] == "Bad_Name"
    [cause] = body["details"]["causes"]
    assert cause["field"] == "metadata.name" and cause["reason"] == "FieldValueInvalid"
    status, body = await call(cluster, "POST", JOBS, {**job(), "metadata": {}})
    assert status == 422
    assert body["message"] == (
        'Job.batch "" is invalid: metadata.name: Required value: name or generateName is required'
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: name or generateName is required",
            "field": "metadata.name",
        }
    ]


async def test_a_json_patch_that_does_not_apply_is_422_with_the_reason_as_its_cause(
    cluster: emulator.ClusterEmulator,
) -> None:
    """The patch handler answers a failed JSON patch with NewGenericServerResponse(422): a generic message
    and the reason as an UnexpectedServerResponse cause (what kubectl prints); a body of the wrong shape
    for its type is 400 BadRequest."""
    assert (await call(cluster, "POST", CQ, cluster_queue()))[0] == 201
    test_op = [{"op": "test", "path": "/spec/cohortName", "value": "b"}]
    status, body = await call(cluster, "PATCH", f"{CQ}/cq", test_op, content_type="application/json-patch+json")
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == "the server rejected our request due to an error in our request"
    [cause] = body["details"]["causes"]
    assert cause["reason"] == "UnexpectedServerResponse" and "b" in cause["message"]
    status, body = await call(cluster, "PATCH", f"{CQ}/cq", [{"spec": {}}], content_type="application/merge-patch+json")
    assert (status, body["reason"]) == (400, "BadRequest")


async def test_custom_resources_refuse_strategic_merge_patches(cluster: emulator.ClusterEmulator) -> None:
    """Kueue's kinds are CRDs in a real cluster, and the API server takes no strategic merge patch for a
    custom resource (415, naming the types it takes), through the status subresource neither; a Job takes one."""
    await call(cluster, "POST", CQ, cluster_queue())
    smp = "application/strategic-merge-patch+json"
    status, body = await call(cluster, "PATCH", f"{CQ}/cq", {"spec": {"cohortName": "b"}}, content_type=smp)
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")
    assert "application/merge-patch+json" in body["message"]
    status, _ = await call(cluster, "PATCH", f"{CQ}/cq/status", {"status": {}}, content_type=smp)
    assert status == 415
    status, body = await call(
        cluster, "PATCH", f"{CQ}/cq", {"spec": {"cohortName": "b"}}, content_type="application/merge-patch+json"
    )
    assert (status, body["spec"]["cohortName"]) == (200, "b")
    await call(cluster, "POST", JOBS, job())
    status, body = await call(cluster, "PATCH", f"{JOBS}/j", {"metadata": {"labels": {"a": "b"}}}, content_type=smp)
    assert (status, body["metadata"]["labels"]["a"]) == (200, "b")


async def test_replacing_a_custom_resource_needs_its_resource_version(api: k8s_client.ApiClient) -> None:
    """A custom resource's update strategy refuses an unconditional update (no metadata.resourceVersion):
    422 naming the resource; a built-in Job may be replaced without one."""
    await client.create_object(api, resources.LOCAL_QUEUES, namespace="default", body=local_queue())
    with pytest.raises(client.errors.ApiError) as refused:
        await client.replace_object(api, resources.LOCAL_QUEUES, namespace="default", name="lq", body=local_queue())
    assert refused.value.status == 422
    assert refused.value.message == (
        'localqueues.kueue.x-k8s.io "lq" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
        "must be specified for an update"
    )
    current = await client.get_object(api, resources.LOCAL_QUEUES, namespace="default", name="lq")
    body = {**local_queue(resourceVersion=current["metadata"]["resourceVersion"]), "metadata": current["metadata"]}
    body["metadata"]["labels"] = {"a": "b"}
    replaced = await client.replace_object(api, resources.LOCAL_QUEUES, namespace="default", name="lq", body=body)
    assert replaced["metadata"]["labels"] == {"a": "b"}
    created = await client.create_object(api, resources.JOBS, namespace="default", body=job())
    # the spec as stored: the selector the API server generated is immutable, as on a real one
    unconditional = {**job(), "metadata": {"name": "j", "labels": {"put": "yes"}}, "spec": created["spec"]}
    stored = await client.replace_object(api, resources.JOBS, namespace="default", name="j", body=unconditional)
    assert stored["metadata"]["labels"] == {"put": "yes"}


@pytest.mark.parametrize(
    ("path", "selector", "message"),
    [
        (CQ, "spec.cohortName=a", "field label not supported: spec.cohortName"),
        (CQ, "metadata.namespace=default", "field label not supported: metadata.namespace"),
        (LQ, "status.phase=x", "field label not supported: status.phase"),
        (JOBS, "spec.suspend=true", 'field label "spec.suspend" not supported for Job'),
        ("/api/v1/pods", "spec.priority=1", "field label not supported: spec.priority"),
        (
            "/apis/apps/v1/deployments",
            "spec.replicas=1",
            '"spec.replicas" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
    ],
)
async def test_a_field_selector_names_only_fields_the_kind_selects_by(
    cluster: emulator.ClusterEmulator, path: str, selector: str, message: str
) -> None:
    """A custom resource selects by metadata.name (and metadata.namespace when namespaced), a built-in kind by
    its conversion's list; any other field is 400 BadRequest, for a list and a watch alike (the emulator used
    to compare any dotted path, so ``kubectl get workloads --field-selector status.phase=x`` listed nothing
    where a cluster refuses it)."""
    for params in ({"fieldSelector": selector}, {"fieldSelector": selector, "watch": "true"}):
        status, body = await call(cluster, "GET", path, params=params)
        assert (status, body["reason"], body["message"]) == (400, "BadRequest", message)


async def test_selectable_fields_still_select(cluster: emulator.ClusterEmulator) -> None:
    """metadata.name on a custom resource, status.successful on Jobs, involvedObject.* on Events."""
    await call(cluster, "POST", CQ, cluster_queue("a"))
    await call(cluster, "POST", CQ, cluster_queue("b"))
    status, body = await call(cluster, "GET", CQ, params={"fieldSelector": "metadata.name!=a"})
    assert (status, [item["metadata"]["name"] for item in body["items"]]) == (200, ["b"])
    for path, selector in (
        (JOBS, "status.successful=1,metadata.namespace=default"),
        ("/api/v1/namespaces/default/events", "involvedObject.kind=Workload,involvedObject.name=w,type=Normal"),
        ("/api/v1/pods", "spec.nodeName!=,status.phase=Running"),
    ):
        status, body = await call(cluster, "GET", path, params={"fieldSelector": selector})
        assert (status, body["items"]) == (200, [])


async def test_a_workload_is_selected_by_the_clusterqueue_reserving_it(cluster: emulator.ClusterEmulator) -> None:
    """Kueue's Workload CRD declares ``selectableFields: .status.admission.clusterQueue``, so on a cluster
    ``kubectl get workloads --field-selector status.admission.clusterQueue=cq`` lists the workloads holding
    quota in ``cq``; the emulator refused it (400, field label not supported), as it
    refused every selectableFields path of an installed CRD."""
    workloads = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"
    pod_set = {"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
    for name in ("held", "waiting"):
        body = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": name},
            "spec": {"queueName": "lq", "podSets": [pod_set]},
        }
        assert (await call(cluster, "POST", workloads, body))[0] == 201
    assignment = {"name": "main", "count": 1, "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "1"}}
    admission = {"status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [assignment]}}}
    merge = "application/merge-patch+json"
    status, _ = await call(cluster, "PATCH", f"{workloads}/held/status", admission, content_type=merge)
    assert status == 200
    for selector, want in (
        ("status.admission.clusterQueue=cq", ["held"]),
        ("status.admission.clusterQueue!=cq", ["waiting"]),
        ("status.admission.clusterQueue=other", []),
    ):
        status, body = await call(cluster, "GET", workloads, params={"fieldSelector": selector})
        assert (status, [item["metadata"]["name"] for item in body["items"]]) == (200, want)
    # and the CRD kueue-es deploys (deploy/crds) declares it in v1beta2, as Kueue's does (not in v1beta1: nor Kueue's)
    versions = crds.crd(next(kind for kind in crds.KINDS if kind.kind == "Workload"))["spec"]["versions"]
    assert [v.get("selectableFields") for v in versions] == [[{"jsonPath": ".status.admission.clusterQueue"}], None]
    v1beta1_workloads = workloads.replace("/v1beta2/", "/v1beta1/")
    status, _ = await call(
        cluster, "GET", v1beta1_workloads, params={"fieldSelector": "status.admission.clusterQueue=cq"}
    )
    assert status == 400


async def test_an_installed_crd_selects_by_its_selectable_fields(cluster: emulator.ClusterEmulator) -> None:
    """A CRD's ``selectableFields`` may be named by a field selector of its kind; its other fields may not."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "shirts.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "shirts", "singular": "shirt", "kind": "Shirt"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    "selectableFields": [{"jsonPath": ".spec.color"}],
                }
            ],
        },
    }
    assert (await call(cluster, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd))[0] == 201
    shirts = "/apis/example.com/v1/namespaces/default/shirts"
    async with asyncio.timeout(5):
        while (await call(cluster, "GET", shirts))[0] != 200:
            await asyncio.sleep(0.05)
    for name, color in (("a", "blue"), ("b", "red")):
        body = {"apiVersion": "example.com/v1", "kind": "Shirt", "metadata": {"name": name}, "spec": {"color": color}}
        assert (await call(cluster, "POST", shirts, body))[0] == 201
    status, body = await call(cluster, "GET", shirts, params={"fieldSelector": "spec.color=red"})
    assert (status, [item["metadata"]["name"] for item in body["items"]]) == (200, ["b"])
    status, body = await call(cluster, "GET", shirts, params={"fieldSelector": "spec.size=m"})
    assert (status, body["message"]) == (400, "field label not supported: spec.size")


async def test_a_limited_list_comes_in_pages_joined_by_continue_tokens(api: k8s_client.ApiClient) -> None:
    """``limit`` cuts a list into pages (``kubectl get --chunk-size``, client-go's pager): each but the last
    has ``metadata.continue`` and ``remainingItemCount``, every page the first page's resourceVersion; a
    token this server did not make is 400. The emulator used to answer every list whole."""
    custom = k8s_client.CustomObjectsApi(api)
    for name in ("a", "b", "c", "d", "e"):
        await custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", cluster_queue(name))
    names, token, versions, remaining = [], None, set(), []
    while True:
        page = await custom.list_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "clusterqueues", limit=2, **({"_continue": token} if token else {})
        )
        names.append([item["metadata"]["name"] for item in page["items"]])
        versions.add(page["metadata"]["resourceVersion"])
        remaining.append(page["metadata"].get("remainingItemCount"))
        token = page["metadata"].get("continue")
        if not token:
            break
    assert names == [["a", "b"], ["c", "d"], ["e"]]
    assert remaining == [3, 1, None] and len(versions) == 1
    batch = k8s_client.BatchV1Api(api)
    with pytest.raises(k8s_client.ApiException) as bad:
        await batch.list_namespaced_job("default", _continue="not-a-token")
    assert bad.value.status == 400 and "invalid continue token" in bad.value.body


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_kubectl_prints_every_page_of_a_chunked_get(cluster: emulator.ClusterEmulator, tmp_path: Path) -> None:
    """``kubectl get --chunk-size=2`` asks for Tables two rows at a time and follows their continue tokens."""
    for name in ("a", "b", "c", "d", "e"):
        await call(cluster, "POST", CQ, cluster_queue(name))
    kubectl = Kubectl(cluster.url, tmp_path)
    out = await kubectl.ok("get", "cq", "--chunk-size=2", "-v=6")
    assert [row[0] for row in table(out)[1:]] == ["a", "b", "c", "d", "e"]
    code, _, log = await kubectl.run("get", "cq", "--chunk-size=2", "-v=6")
    assert code == 0 and log.count("limit=2") == 3, log


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_kubectl_auth_can_i_and_whoami_are_answered(cluster: emulator.ClusterEmulator, tmp_path: Path) -> None:
    """``kubectl auth can-i`` POSTs a SelfSubjectAccessReview (``--list`` a SelfSubjectRulesReview), ``auth
    whoami`` a SelfSubjectReview: for the emulator's own kubeconfig, the cluster administrator, they answer
    yes, every rule, and the administrator (they were 404, so can-i said ``Error from server (NotFound)``).
    Nothing is stored."""
    kubectl = Kubectl(cluster.url, tmp_path)
    assert (await kubectl.ok("auth", "can-i", "create", "jobs")).strip() == "yes"
    assert (await kubectl.ok("auth", "can-i", "patch", "workloads.kueue.x-k8s.io/status", "-n", "team-a")).strip() == (
        "yes"
    )
    assert "*.*" in await kubectl.ok("auth", "can-i", "--list")
    assert "system:masters" in await kubectl.ok("auth", "whoami")
    resources_out = await kubectl.ok("api-resources", "--api-group=authorization.k8s.io", "-o", "wide")
    assert re.search(r"^selfsubjectaccessreviews .* create\s*$", resources_out, re.MULTILINE), resources_out
    status, _ = await call(cluster, "GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert status == 405


async def test_a_delete_answers_a_status_for_built_in_kinds_and_the_object_for_custom_resources(
    api: k8s_client.ApiClient,
) -> None:
    """The generic registry answers a delete that removes the object with a Status (Success, details naming
    it); custom resources (ReturnDeletedObject) and Pods answer with the object, and so does a delete held
    by a finalizer (the object, marked). ``BatchV1Api.delete_namespaced_job`` reads a V1Status: the emulator
    answered the Job, so ``.status`` was the Job's status."""
    batch = k8s_client.BatchV1Api(api)
    created = await batch.create_namespaced_job("default", job())
    answer = await batch.delete_namespaced_job("j", "default", propagation_policy="Background")
    assert (answer.kind, answer.status) == ("Status", "Success")
    assert (answer.details.name, answer.details.group, answer.details.kind) == ("j", "batch", "jobs")
    assert answer.details.uid == created.metadata.uid
    await client.create_object(api, resources.LOCAL_QUEUES, namespace="default", body=local_queue())
    deleted = await client.delete_object(api, resources.LOCAL_QUEUES, namespace="default", name="lq")
    assert deleted["kind"] == "LocalQueue" and deleted["metadata"]["name"] == "lq"
    held = {**job("k"), "metadata": {"name": "k", "finalizers": ["example.com/hold"]}}
    await client.create_object(api, resources.JOBS, namespace="default", body=held)
    marked = await client.delete_object(api, resources.JOBS, namespace="default", name="k")
    assert marked["kind"] == "Job" and marked["metadata"]["deletionTimestamp"]


async def test_empty_metadata_maps_and_lists_are_not_stored(api: k8s_client.ApiClient) -> None:
    """ObjectMeta's labels, annotations, finalizers and owner references are ``omitempty``: written empty (a
    client-side apply's ``annotations: {}``, a patch removing the last finalizer) they are read back absent,
    so ``kubectl diff`` and ``get -o yaml`` show no ``annotations: {}``."""
    body = {**local_queue(), "metadata": {"name": "lq", "labels": {}, "annotations": {}, "finalizers": []}}
    created = await client.create_object(api, resources.LOCAL_QUEUES, namespace="default", body=body)
    assert not {"labels", "annotations", "finalizers"} & set(created["metadata"])
    patched = await client.patch_object(
        api,
        resources.LOCAL_QUEUES,
        namespace="default",
        name="lq",
        patch={"metadata": {"labels": {"a": "b"}, "annotations": {}}},
    )
    assert patched["metadata"]["labels"] == {"a": "b"} and "annotations" not in patched["metadata"]
    emptied = await client.patch_object(
        api, resources.LOCAL_QUEUES, namespace="default", name="lq", patch={"metadata": {"labels": {"a": None}}}
    )
    assert "labels" not in emptied["metadata"]


async def watch_lines(cluster: emulator.ClusterEmulator, path: str, params: dict[str, str]) -> tuple[int, list[Any]]:
    """(status, the decoded lines) of a watch request that ends by its timeoutSeconds."""
    async with aiohttp.ClientSession() as session:
        async with session.get(cluster.url + path, params={"watch": "true", **params}) as response:
            text = await response.text()
    return response.status, [json.loads(line) for line in text.splitlines() if line.strip()]


async def test_a_watch_sends_initial_events_then_the_bookmark_that_ends_them(
    cluster: emulator.ClusterEmulator,
) -> None:
    """sendInitialEvents=true (client-go's streaming list) gets the objects as ADDED, then a BOOKMARK annotated
    ``k8s.io/initial-events-end``, whatever resourceVersion it names (NotOlderThan); the ListOptions rules
    are 422: it needs resourceVersionMatch=NotOlderThan and allowWatchBookmarks, and resourceVersionMatch
    needs it. The emulator ignored both parameters."""
    await call(cluster, "POST", CQ, cluster_queue("a"))
    await call(cluster, "POST", CQ, cluster_queue("b"))
    params = {
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "resourceVersion": "1",
        "timeoutSeconds": "1",
    }
    status, events = await watch_lines(cluster, CQ, params)
    assert status == 200
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events[:3]] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("BOOKMARK", None),
    ]
    assert events[2]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(events[2]["object"]["metadata"]["resourceVersion"]) == cluster.resource_version
    for missing, field in (
        ("resourceVersionMatch", "resourceVersionMatch"),
        ("allowWatchBookmarks", "allowWatchBookmarks"),
    ):
        status, body = await call(
            cluster, "GET", CQ, params={"watch": "true", **{k: v for k, v in params.items() if k != missing}}
        )
        assert (status, body["reason"]) == (422, "Invalid")
        assert body["message"].startswith('ListOptions.meta.k8s.io "" is invalid: ' + field)
    status, body = await call(cluster, "GET", CQ, params={"watch": "true", "resourceVersionMatch": "NotOlderThan"})
    assert status == 422 and "forbidden for watch unless sendInitialEvents is provided" in body["message"]


async def test_a_watch_from_a_resource_version_not_reached_is_504_and_the_client_relists(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    """A resourceVersion newer than the server's (a client resuming from another server's history) is 504
    Timeout with the cause ResourceVersionTooLarge, as the watch cache answers; the emulator used to stream
    nothing. kueue-es's client maps it to an error that relists (as client-go's reflector does)."""
    ahead = str(cluster.resource_version + 100)
    status, body = await call(cluster, "GET", CQ, params={"watch": "true", "resourceVersion": ahead})
    assert (status, body["reason"]) == (504, "Timeout")
    assert body["message"] == f"Too large resource version: {ahead}, current: {cluster.resource_version}"
    assert body["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    with pytest.raises(client.errors.ExpiredError) as relist:
        await client._start_watch(  # the one step of watch_objects that meets it
            api,
            resources.CLUSTER_QUEUES,
            namespace=None,
            resource_version=ahead,
            label_selector=None,
            bookmarks=True,
            timeout_seconds=1,
        )
    assert isinstance(relist.value, client.errors.TooLargeResourceVersionError)


CQ_MANIFEST = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: cq
spec:
  cohortName: {cohort}
  namespaceSelector: {{}}
"""


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_server_side_apply_conflicts_with_other_managers_unless_forced(
    cluster: emulator.ClusterEmulator, tmp_path: Path
) -> None:
    """Field ownership as kube-apiserver keeps it: ``kubectl apply --server-side`` of a field another manager
    set (kubectl edit, here a merge patch) is 409 naming the manager and the field, ``--force-conflicts``
    takes it over, and ``--show-managed-fields`` shows who owns what. The emulator had no managedFields and
    let every apply win."""
    kubectl = Kubectl(cluster.url, tmp_path)
    await kubectl.ok("apply", "--server-side", "-f", "-", stdin=CQ_MANIFEST.format(cohort="a"))
    await kubectl.ok("patch", "cq", "cq", "--type=merge", "-p", '{"spec":{"cohortName":"b"}}')
    code, _, err = await kubectl.run("apply", "--server-side", "-f", "-", stdin=CQ_MANIFEST.format(cohort="c"))
    assert code == 1
    assert re.search(
        r'Apply failed with 1 conflict: conflict with "kubectl-patch" using kueue.x-k8s.io/v1beta2 at \S+: '
        r"\.spec\.cohortName",
        err,
    ), err
    assert "--force-conflicts" in err  # kubectl's advice, printed for a 409 of an apply
    assert (await kubectl.ok("get", "cq", "cq", "-o", "jsonpath={.spec.cohortName}")) == "b"
    await kubectl.ok("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=CQ_MANIFEST.format(cohort="c"))
    stored = json.loads(await kubectl.ok("get", "cq", "cq", "-o", "json", "--show-managed-fields"))
    assert stored["spec"]["cohortName"] == "c"
    owners = {(e["manager"], e["operation"]): e["fieldsV1"] for e in stored["metadata"]["managedFields"]}
    assert owners[("kubectl", "Apply")]["f:spec"] == {"f:cohortName": {}, "f:namespaceSelector": {}}
    assert ("kubectl-patch", "Update") not in owners  # it owned only the field taken over
    # the same value another manager set is no conflict: both own it
    await kubectl.ok("label", "cq", "cq", "team=x")
    labelled = CQ_MANIFEST.format(cohort="c").replace("  name: cq\n", "  name: cq\n  labels:\n    team: x\n")
    await kubectl.ok("apply", "--server-side", "-f", "-", stdin=labelled)
    # and a field the applier stops applying, owned by nobody else, is removed
    await kubectl.ok(
        "apply", "--server-side", "-f", "-", stdin=CQ_MANIFEST.format(cohort="c").replace("  cohortName: c\n", "")
    )
    assert (await kubectl.ok("get", "cq", "cq", "-o", "jsonpath={.spec.cohortName}")) == ""


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_a_client_side_applied_object_moves_to_server_side_apply(
    cluster: emulator.ClusterEmulator, tmp_path: Path
) -> None:
    """kubectl apply (client-side) then ``kubectl apply --server-side`` of the same manifest changed: kubectl
    first hands the kubectl-client-side-apply fields to its apply manager by rewriting managedFields (a JSON
    patch), so the second apply is no conflict, as with a real server."""
    kubectl = Kubectl(cluster.url, tmp_path)
    await kubectl.ok("apply", "-f", "-", stdin=CQ_MANIFEST.format(cohort="a"))
    await kubectl.ok("apply", "--server-side", "-f", "-", stdin=CQ_MANIFEST.format(cohort="b"))
    stored = json.loads(await kubectl.ok("get", "cq", "cq", "-o", "json", "--show-managed-fields"))
    assert stored["spec"]["cohortName"] == "b"
    managers = {e["manager"] for e in stored["metadata"]["managedFields"]}
    assert "kubectl" in managers and "kubectl-client-side-apply" not in managers


async def test_writes_record_their_field_manager(api: k8s_client.ApiClient) -> None:
    """A create or update is recorded as an Update by its ``fieldManager``, else by the first word of its
    User-Agent (kueue-es's client sends ``kueue-es/python``, the generated client's default was
    OpenAPI-Generator); a status write as one through the subresource."""
    custom = k8s_client.CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "default", "localqueues", local_queue(), field_manager="team-tool"
    )
    patched = await custom.patch_namespaced_custom_object_status(
        "kueue.x-k8s.io",
        "v1beta2",
        "default",
        "localqueues",
        "lq",
        {"status": {"pendingWorkloads": 3}},
        _content_type="application/merge-patch+json",
    )
    entries = {(e["manager"], e.get("subresource", "")): e for e in patched["metadata"]["managedFields"]}
    assert entries[("team-tool", "")]["operation"] == "Update"
    assert entries[("team-tool", "")]["fieldsV1"] == {"f:spec": {"f:clusterQueue": {}, "f:stopPolicy": {}}}
    assert entries[("kueue-es", "status")]["fieldsV1"] == {"f:status": {"f:pendingWorkloads": {}}}


async def test_an_apply_that_no_longer_sets_a_map_removes_it_whole(api: k8s_client.ApiClient) -> None:
    """Fields are leaves: an apply that drops a map its manager applied before removes the map, not only its
    keys (a Workload's ``status.admission`` after a requeue, not ``admission: {}``)."""
    body = {**local_queue(), "metadata": {"name": "lq", "namespace": "default"}}
    await client.apply_object(api, resources.LOCAL_QUEUES, namespace="default", name="lq", body=body, field_manager="m")
    status = {"flavorsReservation": [], "fairSharing": {"weightedShare": 1}, "pendingWorkloads": 1}
    await client.apply_object(
        api,
        resources.LOCAL_QUEUES,
        namespace="default",
        name="lq",
        body={**body, "status": status},
        field_manager="m",
        subresource="status",
    )
    stored = await client.apply_object(
        api,
        resources.LOCAL_QUEUES,
        namespace="default",
        name="lq",
        body={**body, "status": {"pendingWorkloads": 2}},
        field_manager="m",
        subresource="status",
    )
    assert stored["status"] == {"pendingWorkloads": 2}


async def test_conditions_are_merged_and_owned_one_by_one(api: k8s_client.ApiClient) -> None:
    """A ``conditions`` list is ``listType=map`` keyed by ``type``: one manager's apply of its conditions leaves
    another writer's alone (a controller's status update beside the dispatcher's apply), each condition is owned
    as ``k:{"type":...}``, and a condition its manager no longer applies goes alone."""

    def condition(kind: str, status: str = "True") -> dict[str, str]:
        return {
            "type": kind,
            "status": status,
            "reason": "R",
            "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }

    body = {**local_queue(), "metadata": {"name": "lq", "namespace": "default"}}
    await client.apply_object(api, resources.LOCAL_QUEUES, namespace="default", name="lq", body=body, field_manager="m")

    async def apply_status(*conditions: dict[str, str]) -> dict[str, Any]:
        status = {"conditions": list(conditions)}
        return await client.apply_object(
            api, resources.LOCAL_QUEUES, namespace="default", name="lq", body={**body, "status": status},
            field_manager="m", subresource="status",
        )  # fmt: skip

    await apply_status(condition("Active"), condition("Stale", "False"))
    await client.patch_object(
        api, resources.LOCAL_QUEUES, namespace="default", name="lq", subresource="status",
        patch={"status": {"conditions": [condition("Active"), condition("Stale", "False"), condition("Other")]}},
    )  # fmt: skip
    stored = await apply_status(condition("Active", "False"))  # Stale no longer applied, Other another's
    assert [(c["type"], c["status"]) for c in stored["status"]["conditions"]] == [
        ("Active", "False"),
        ("Other", "True"),
    ]
    owners = {e["manager"]: e["fieldsV1"] for e in stored["metadata"]["managedFields"] if e.get("subresource")}
    assert owners["m"] == {"f:status": {"f:conditions": {'k:{"type":"Active"}': {}}}}
    assert owners["kueue-es"] == {"f:status": {"f:conditions": {'k:{"type":"Other"}': {}}}}


async def test_a_jobs_pod_template_is_immutable_but_its_directives_before_it_starts(
    api: k8s_client.ApiClient,
) -> None:
    """ValidateJobSpecUpdate: a Job's template changes only in its scheduling directives (labels, annotations,
    nodeSelector, tolerations, scheduling gates, node affinity), and only while it is suspended with no
    startTime, which is what Kueue writes at a start; completions and the completion mode never change (an
    Indexed Job's completions with its parallelism: elastic). A PUT that leaves defaulted fields out is
    defaulted first, so it changes nothing there. The emulator took any change (``kubectl apply`` of a
    running Job's new image said ``configured``)."""

    def patch(body: dict[str, Any]) -> Any:
        return client.patch_object(api, resources.JOBS, namespace="default", name="j", patch=body)

    await client.create_object(
        api, resources.JOBS, namespace="default", body={**job(), "spec": {**job()["spec"], "suspend": True}}
    )
    directives = {
        "metadata": {"labels": {"kueue.x-k8s.io/podset": "main"}},
        "spec": {"nodeSelector": {"pool": "spot"}, "tolerations": [{"key": "spot", "operator": "Exists"}]},
    }
    await patch({"spec": {"template": directives}})
    with pytest.raises(client.errors.ApiError) as image:
        await patch({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "other"}]}}}})
    assert image.value.status == 422
    assert image.value.message == (
        'Job.batch "j" is invalid: spec.template: Invalid value: core.PodTemplateSpec{...}: field is immutable'
    )
    assert image.value.body["details"]["causes"][0]["field"] == "spec.template"
    await patch({"spec": {"suspend": False}})
    await client.patch_object(
        api,
        resources.JOBS,
        namespace="default",
        name="j",
        patch={"status": {"startTime": "2026-01-01T00:00:00Z"}},
        subresource="status",
    )
    with pytest.raises(client.errors.ApiError) as running:
        await patch({"spec": {"suspend": True, "template": {"spec": {"nodeSelector": None}}}})
    assert running.value.status == 422 and "spec.template" in running.value.message
    await patch({"spec": {"parallelism": 3}})  # mutable at any time
    with pytest.raises(client.errors.ApiError) as completions:
        await patch({"spec": {"completions": 5}})
    assert "spec.completions: Invalid value: 5: field is immutable" in completions.value.message
    indexed = {**job("i"), "spec": {**job()["spec"], "completionMode": "Indexed", "completions": 2, "parallelism": 2}}
    await client.create_object(api, resources.JOBS, namespace="default", body=indexed)
    grown = await client.patch_object(
        api, resources.JOBS, namespace="default", name="i", patch={"spec": {"completions": 4, "parallelism": 4}}
    )
    assert grown["spec"]["completions"] == 4


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_kubectls_create_generators_make_jobs_cronjobs_and_deployments(
    cluster: emulator.ClusterEmulator, tmp_path: Path
) -> None:
    """``kubectl create job NAME --image=...`` (then labelled), ``create cronjob`` and ``create deployment``
    send protobuf; they were refused with 415."""
    kubectl = Kubectl(cluster.url, tmp_path)
    assert "job.batch/j created" in await kubectl.ok("create", "job", "j", "--image=busybox", "--", "sleep", "5")
    await kubectl.ok("label", "job", "j", "team=a")
    stored = json.loads(await kubectl.ok("get", "job", "j", "-o", "json"))
    assert stored["metadata"]["labels"]["team"] == "a"
    [container] = stored["spec"]["template"]["spec"]["containers"]
    assert container == {
        "name": "j",
        "image": "busybox",
        "command": ["sleep", "5"],
        # what kube-apiserver's defaulting adds to a container (SetDefaults_Container)
        "imagePullPolicy": "Always",
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    await kubectl.ok("create", "cronjob", "c", "--image=busybox", "--schedule=*/5 * * * *")
    assert (await kubectl.ok("get", "cronjob", "c", "-o", "jsonpath={.spec.schedule}")) == "*/5 * * * *"
    await kubectl.ok("create", "deployment", "d", "--image=nginx", "--replicas=2")
    await kubectl.ok("scale", "deployment", "d", "--replicas=3")
    assert (await kubectl.ok("get", "deploy", "d", "-o", "jsonpath={.spec.replicas}")) == "3"


async def test_a_deleted_namespace_terminates_deletes_its_content_and_goes_once_empty(
    api: k8s_client.ApiClient,
) -> None:
    """The namespace controller's part: a deleted Namespace turns Terminating, everything in it is deleted
    (an object held by a finalizer is marked and waits), nothing new may be created in it (403 from the
    NamespaceLifecycle plugin), and it goes when its last object does. The emulator removed the Namespace at
    once and left its objects behind, listable in a namespace that no longer existed."""
    await client.create_object(api, resources.NAMESPACES, body={"metadata": {"name": "team-a"}})
    await client.create_object(api, resources.JOBS, namespace="team-a", body=job())
    held = {**local_queue(), "metadata": {"name": "lq", "finalizers": ["example.com/hold"]}}
    await client.create_object(api, resources.LOCAL_QUEUES, namespace="team-a", body=held)
    terminating = await client.delete_object(api, resources.NAMESPACES, name="team-a")
    assert terminating["status"]["phase"] == "Terminating" and terminating["metadata"]["deletionTimestamp"]
    await gone(api, resources.JOBS, "team-a", "j")  # a moment later, as the namespace controller
    marked = await client.get_object(api, resources.LOCAL_QUEUES, namespace="team-a", name="lq")
    assert marked["metadata"]["deletionTimestamp"]
    with pytest.raises(client.errors.ApiError) as refused:
        await client.create_object(api, resources.JOBS, namespace="team-a", body=job("k"))
    assert (refused.value.status, refused.value.reason) == (403, "Forbidden")
    assert refused.value.message == (
        'jobs.batch "k" is forbidden: unable to create new content in namespace team-a because it is being terminated'
    )
    await client.patch_object(
        api, resources.LOCAL_QUEUES, namespace="team-a", name="lq", patch={"metadata": {"finalizers": None}}
    )
    await gone(api, resources.NAMESPACES, None, "team-a")
    await client.create_object(api, resources.JOBS, namespace="default", body=job())
    await client.delete_object(api, resources.NAMESPACES, name="default")
    await client.delete_object(api, resources.JOBS, namespace="default", name="j")  # still there to delete
    await gone(api, resources.NAMESPACES, None, "default")  # with its last object


async def gone(api: k8s_client.ApiClient, ref: resources.ResourceRef, namespace: str | None, name: str) -> None:
    """Wait (up to 3 s) until the object is gone."""
    for _ in range(60):
        try:
            await client.get_object(api, ref, namespace=namespace, name=name)
        except client.errors.NotFoundError:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{ref.kind} {namespace}/{name} is still there")


async def test_a_dry_run_other_than_all_is_invalid_request_options(cluster: emulator.ClusterEmulator) -> None:
    """The request options' validation refuses a dryRun value but ``All``: 422 naming the options kind and the
    value as Go prints a []string (the emulator said 400 with Python's quoting)."""
    status, body = await call(cluster, "POST", LQ, local_queue(), params={"dryRun": "Yes"})
    assert (status, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Yes"}: supported values: "All"'
    )


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH: this test runs the real one")
async def test_quantities_read_back_canonical_through_kubectl(
    cluster: emulator.ClusterEmulator, tmp_path: Path
) -> None:
    """A Job applied with ``cpu: 0.5``, ``cpu: 1`` (YAML numbers) and ``1024Mi`` reads back, in the Job's template
    and in the pod made from it, as a real API server stores them: ``500m``, ``"1"``, ``1Gi``."""
    kubectl = Kubectl(cluster.url, tmp_path)
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: q}\nspec:\n  suspend: true\n  template:\n    spec:\n"
        "      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n"
        "        resources:\n          requests: {cpu: 0.5, memory: 1024Mi}\n          limits: {cpu: 1}\n"
    )
    await kubectl.ok("apply", "-f", str(manifest))
    stored = json.loads(await kubectl.ok("get", "job", "q", "-o", "json"))
    uid = stored["metadata"]["uid"]
    # a Job with no labels shows its template's, the generated ones too (SetDefaults_Job on every read)
    assert stored["metadata"]["labels"] == {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "q",
        "controller-uid": uid,
        "job-name": "q",
    }
    [container] = stored["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1"}}
    pod = manifest.with_name("pod.yaml")
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
        "    resources:\n      limits: {cpu: 2.5, memory: 1.5Gi}\n"
    )
    await kubectl.ok("apply", "-f", str(pod))
    resources_of = json.loads(await kubectl.ok("get", "pod", "q", "-o", "jsonpath={.spec.containers[0].resources}"))
    assert resources_of == {  # the requests defaulted from the limits, canonical too
        "limits": {"cpu": "2500m", "memory": "1536Mi"},
        "requests": {"cpu": "2500m", "memory": "1536Mi"},
    }
    # applied again: kubectl's patch sets 0.5 over the live 500m (so it says "configured", as against a real
    # server), which decodes to the object stored: no write, no new resourceVersion
    await kubectl.ok("apply", "-f", str(manifest))
    again = json.loads(await kubectl.ok("get", "job", "q", "-o", "json"))
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
