"""CustomResourceDefinitions on the emulated API server, through the kubernetes-asyncio client.

Applying a CRD registers its kinds (every served version, namespaced or cluster-scoped, status
and scale subresources), discovery lists them with the CRD's short names and categories, the
OpenAPI documents carry their schemas, Tables use the printer columns, objects are pruned and
defaulted by the schema, the CRD itself becomes Established, and deleting it deletes its
objects and stops serving the kind. The integrations' real CRDs (tests/fixtures/crds, kept as
published: checked against SOURCES.md) are installed together with one sample object each.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio.client.exceptions import ApiException

from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.sim import custom_resources, emulator, openapi
from tests.kube.examples import EXAMPLES

pytestmark = pytest.mark.timeout(60)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "crds"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
MERGE = "application/merge-patch+json"

#: One sample per integrated kind: Kueue's examples, and the TrainJob pieces of fixtures/crds/samples.
SAMPLES: dict[str, Path] = {
    "RayJob": EXAMPLES / "jobs" / "ray-job-sample.yaml",
    "RayCluster": EXAMPLES / "jobs" / "ray-cluster-sample.yaml",
    "RayService": EXAMPLES / "jobs" / "ray-service-sample.yaml",
    "PyTorchJob": EXAMPLES / "jobs" / "sample-pytorchjob.yaml",
    "TFJob": EXAMPLES / "jobs" / "sample-tfjob.yaml",
    "XGBoostJob": EXAMPLES / "jobs" / "sample-xgboostjob.yaml",
    "PaddleJob": EXAMPLES / "jobs" / "sample-paddlejob.yaml",
    "JAXJob": EXAMPLES / "jobs" / "sample-jaxjob.yaml",
    "MPIJob": EXAMPLES / "jobs" / "sample-mpijob.yaml",
    "ClusterTrainingRuntime": FIXTURES / "samples" / "clustertrainingruntime-torch-distributed.yaml",
    "TrainJob": FIXTURES / "samples" / "trainjob-pytorch-distributed.yaml",
    "LeaderWorkerSet": EXAMPLES / "serving-workloads" / "sample-leaderworkerset.yaml",
    "AppWrapper": EXAMPLES / "appwrapper" / "pytorch-sample.yaml",
    "SparkApplication": EXAMPLES / "jobs" / "sample-sparkapplication.yaml",
    "JobSet": EXAMPLES / "jobs" / "sample-jobset.yaml",
}
#: Kueue's XGBoostJob example asks for ``cpu: 0.5``, a JSON number where the CRD's quantity takes an
#: integer or a string: a real API server refuses it (``must be of type integer,string: "number"``).
XGBOOST_INVALID_FIELDS = [
    f"spec.xgbReplicaSpecs.{role}.template.spec.containers[0].resources.requests.cpu" for role in ("Master", "Worker")
]


def sample(kind: str) -> dict[str, Any]:
    """The sample object of ``kind``, as published (Kueue's XGBoostJob with its cpu quoted: "0.5")."""
    [doc] = [doc for doc in yaml.safe_load_all(SAMPLES[kind].read_text()) if doc and doc.get("kind") == kind]
    if kind == "XGBoostJob":
        for role in doc["spec"]["xgbReplicaSpecs"].values():
            requests = role["template"]["spec"]["containers"][0]["resources"]["requests"]
            requests["cpu"] = str(requests["cpu"])
    return dict(doc)


def widget_crd(*, scope: str = "Namespaced", versions: tuple[str, ...] = ("v1",)) -> dict[str, Any]:
    """A small CRD written for these tests: widgets.example.com, the first version the storage one."""
    schema = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer", "default": 1},
                    "size": {"type": "string", "default": "small"},
                    "suspend": {"type": "boolean"},
                    "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "parts": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}, "count": {"type": "integer", "default": 2}},
                        },
                    },
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "phase": {"type": "string"},
                    "ready": {"type": "integer"},
                    "selector": {"type": "string"},
                },
            },
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": scope,
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "listKind": "WidgetList",
                "shortNames": ["wd"],
                "categories": ["all", "gadgets"],
            },
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": index == 0,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.replicas",
                            "statusReplicasPath": ".status.ready",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase", "priority": 1},
                    ],
                }
                for index, version in enumerate(versions)
            ],
        },
    }


WIDGETS = resources.ResourceRef(
    group="example.com", version="v1", plural="widgets", kind="Widget", namespaced=True, status_subresource=True
)


async def request(
    api: k8s_client.ApiClient,
    method: str,
    path: str,
    *,
    body: Any = None,
    content_type: str = "application/json",
    accept: str = "application/json",
    query: list[tuple[str, str]] | None = None,
) -> tuple[int, Any]:
    """(HTTP status, decoded JSON body) of one request to the emulator, errors included."""
    try:
        response = await api.call_api(
            path,
            method,
            query_params=query or [],
            header_params={"Accept": accept, "Content-Type": content_type},
            body=body,
            _preload_content=False,
        )
        return response.status, json.loads(await response.read())
    except ApiException as exc:
        return exc.status, json.loads(exc.body)


async def create_crd(api: k8s_client.ApiClient, crd: dict[str, Any]) -> dict[str, Any]:
    status, created = await request(api, "POST", custom_resources.CRDS.path(), body=crd)
    assert status == 201, created
    return created


# -- the fixtures ---------------------------------------------------------------------------------


@pytest.mark.slow  # every fixture CRD: about 20 s on 2 cores
def test_fixtures_are_the_published_files_named_in_sources() -> None:
    """Every file in tests/fixtures/crds is listed in SOURCES.md with the sha256 it has (kept byte for byte),
    and each top-level file is one CustomResourceDefinition named plural.group."""
    listed = dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{64})` \|$", (FIXTURES / "SOURCES.md").read_text(), re.M))
    files = sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.yaml"))
    assert sorted(listed) == files
    for name, digest in listed.items():
        assert hashlib.sha256((FIXTURES / name).read_bytes()).hexdigest() == digest, name
    crds = custom_resources.load([FIXTURES])
    assert len(crds) == len(list(FIXTURES.glob("*.yaml"))) == 16
    assert {kind.ref.kind for crd in crds for kind in custom_resources.kinds_of(crd)} >= set(SAMPLES)


def test_load_refuses_a_document_that_is_not_a_crd(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n")
    with pytest.raises(ValueError, match=r"job\.yaml: a document of kind 'Job' is not a CustomResourceDefinition"):
        custom_resources.load([tmp_path])


# -- the pure part --------------------------------------------------------------------------------


def test_kinds_of_a_crd_with_two_served_versions() -> None:
    """KubeRay's RayJob CRD serves v1 (storage) and v1alpha1, both sharing v1's storage, in category all."""
    [crd] = custom_resources.load([FIXTURES / "ray.io_rayjobs.yaml"])
    kinds = custom_resources.kinds_of(crd)
    assert [(k.ref.api_version, k.ref.plural, k.ref.namespaced, k.ref.status_subresource) for k in kinds] == [
        ("ray.io/v1", "rayjobs", True, True),
        ("ray.io/v1alpha1", "rayjobs", True, True),
    ]
    assert {k.storage.version for k in kinds} == {"v1"}
    assert kinds[0].categories == ("all",) and kinds[0].short_names == ()
    assert "JOB STATUS" in [c["name"].upper() for c in kinds[0].printer_columns]
    [lws] = custom_resources.kinds_of(
        custom_resources.load([FIXTURES / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"])[0]
    )
    assert lws.short_names == ("lws",)
    assert lws.scale == custom_resources.Scale(
        spec_replicas_path=".spec.replicas",
        status_replicas_path=".status.replicas",
        label_selector_path=".status.hpaPodSelector",
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda crd: crd["metadata"].update(name="widgets.example.org"), "metadata.name"),
        (lambda crd: crd["spec"].update(scope="Global"), "spec.scope"),
        (lambda crd: crd["spec"]["names"].pop("kind"), "spec.names.kind"),
        (lambda crd: crd["spec"]["versions"][0].update(storage=False), "spec.versions"),
    ],
)
def test_kinds_of_refuses_what_the_api_server_refuses(change: Any, field: str) -> None:
    crd = widget_crd()
    change(crd)
    with pytest.raises(custom_resources.CrdError) as caught:
        custom_resources.kinds_of(crd)
    assert caught.value.field == field
    assert "widgets.example." in str(caught.value)


def test_decode_prunes_unknown_fields_and_fills_defaults() -> None:
    """Unknown fields go (reported with their paths), a preserved subtree stays, nulls in non-nullable
    fields are dropped, defaults fill absent fields of present objects, list items included."""
    schema = widget_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"any": "label"}, "anything": "kept"},
        "spec": {
            "colour": "red",
            "size": None,
            "template": {"free": {"form": 1}},
            "parts": [{"name": "a"}, {"name": "b", "count": 5, "extra": True}],
        },
        "extra": 1,
    }
    pruned = custom_resources.decode(obj, schema)
    assert pruned == ["spec.colour", "spec.parts[1].extra", "extra"]
    assert obj == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "labels": {"any": "label"}, "anything": "kept"},
        "spec": {
            "replicas": 1,
            "size": "small",
            "template": {"free": {"form": 1}},
            "parts": [{"name": "a", "count": 2}, {"name": "b", "count": 5}],
        },
    }
    assert custom_resources.decode({"kind": "Widget", "status": {"x": 1}}, {}) == []  # no schema: all kept


def test_validate_holds_values_to_the_schema() -> None:
    """Types (int-or-string included), nullability, required fields, enums and bounds, with the API server's messages."""
    schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "string", "enum": ["small", "large"]},
                    "replicas": {"type": "integer", "minimum": 0},
                    "cpu": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
                    "name": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
                    "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
                    "ratio": {"type": "number"},
                },
            }
        },
    }

    def problems(spec: Any) -> list[str]:
        obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec}
        return [str(cause) for cause in custom_resources.validate(obj, schema)]

    assert problems({"size": "small", "replicas": 2, "cpu": "500m", "name": "abc", "tags": ["a"], "ratio": 1}) == []
    assert problems({"size": "small", "cpu": 2, "ratio": 0.5}) == []
    assert problems({"size": "medium"}) == [
        'spec.size: Unsupported value: "medium": supported values: "small", "large"'
    ]
    assert problems({"replicas": -1}) == [
        "spec.size: Required value",
        "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
    ]
    assert problems({"size": "small", "cpu": 0.5}) == [
        'spec.cpu: Invalid value: "number": spec.cpu in body must be of type integer,string: "number"'
    ]
    assert problems({"size": "small", "replicas": "2", "name": "ABCD", "tags": ["a", 1]}) == [
        'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"',
        "spec.name: Too long: may not be more than 3 bytes",
        "spec.name: Invalid value: \"ABCD\": spec.name in body should match '^[a-z]+$'",
        "spec.tags: Too many: 2: must have at most 1 items",
        'spec.tags[1]: Invalid value: "integer": spec.tags[1] in body must be of type string: "integer"',
    ]
    assert problems(None) == ['spec: Invalid value: "null": spec in body must be of type object: "null"']


def test_accepted_status_keeps_the_time_of_conditions_already_true() -> None:
    crd = widget_crd()
    first = custom_resources.accepted_status(crd, now="2026-01-01T00:00:00Z")
    assert [(c["type"], c["status"], c["reason"]) for c in first["conditions"]] == [
        ("NamesAccepted", "True", "NoConflicts"),
        ("Established", "True", "InitialNamesAccepted"),
    ]
    assert first["acceptedNames"]["listKind"] == "WidgetList" and first["storedVersions"] == ["v1"]
    again = custom_resources.accepted_status({**crd, "status": first}, now="2026-01-02T00:00:00Z")
    assert again == first


# -- through the API ------------------------------------------------------------------------------


async def test_a_kind_is_served_once_its_crd_is_created(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    """Before the CRD, the kind is 404 (list and watch), as a real API server answers; after it, a client
    that lists again gets the empty list, and the CRD is Established with its accepted names."""
    with pytest.raises(kube_errors.NotFoundError):
        await kube.list_objects(api, WIDGETS)
    status, _ = await request(api, "GET", WIDGETS.path(), query=[("watch", "true")])
    assert status == 404
    created = await create_crd(api, widget_crd())
    assert "status" not in created or not created["status"].get("conditions")  # the controllers write it after
    listed, _ = await kube.list_objects(api, WIDGETS)
    assert listed == []
    stored = await k8s_client.ApiextensionsV1Api(api).read_custom_resource_definition("widgets.example.com")
    conditions = {c.type: c.status for c in stored.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert stored.status.accepted_names.short_names == ["wd"]


async def test_discovery_and_openapi_list_the_crd_kinds(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    await create_crd(api, widget_crd(versions=("v1", "v1beta1")))
    _, groups = await request(api, "GET", "/apis")
    [group] = [g for g in groups["groups"] if g["name"] == "example.com"]
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    assert group["preferredVersion"]["version"] == "v1"
    _, listing = await request(api, "GET", "/apis/example.com/v1")
    entries = {r["name"]: r for r in listing["resources"]}
    assert set(entries) == {"widgets", "widgets/status", "widgets/scale"}
    assert entries["widgets"]["shortNames"] == ["wd"] and entries["widgets"]["categories"] == ["all", "gadgets"]
    assert (entries["widgets"]["kind"], entries["widgets"]["singularName"], entries["widgets"]["namespaced"]) == (
        "Widget",
        "widget",
        True,
    )
    assert (entries["widgets/scale"]["group"], entries["widgets/scale"]["kind"]) == ("autoscaling", "Scale")
    _, crd_listing = await request(api, "GET", "/apis/apiextensions.k8s.io/v1")
    assert {"crd", "crds"} <= set(crd_listing["resources"][0]["shortNames"])
    _, index = await request(api, "GET", "/openapi/v3")
    assert "apis/example.com/v1" in index["paths"] and "apis/apiextensions.k8s.io/v1" in index["paths"]
    _, document = await request(api, "GET", "/openapi/v3/apis/example.com/v1")
    schema = document["components"]["schemas"]["com.example.v1.Widget"]
    assert schema["properties"]["spec"]["properties"]["size"]["default"] == "small"
    assert schema["x-kubernetes-group-version-kind"] == [{"group": "example.com", "version": "v1", "kind": "Widget"}]
    assert openapi.OBJECT_META in document["components"]["schemas"]
    _, swagger = await request(api, "GET", "/openapi/v2")
    assert "com.example.v1beta1.Widget" in swagger["definitions"]
    assert "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/status" in swagger["paths"]


async def test_objects_are_pruned_defaulted_and_refused_by_strict_validation(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    await create_crd(api, widget_crd())
    objects = k8s_client.CustomObjectsApi(api)
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"colour": "red"}}
    status, refused = await request(
        api, "POST", WIDGETS.path(namespace="default"), body=body, query=[("fieldValidation", "Strict")]
    )
    assert status == 400
    assert 'strict decoding error: unknown field "spec.colour"' in refused["message"]
    created = await objects.create_namespaced_custom_object("example.com", "v1", "default", "widgets", body)
    assert created["spec"] == {"replicas": 1, "size": "small"}
    replaced = await objects.replace_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", "w1", {**created, "spec": {"size": "large", "parts": [{}]}}
    )
    assert replaced["spec"] == {"replicas": 1, "size": "large", "parts": [{"count": 2}]}
    assert replaced["metadata"]["generation"] == 2
    status, refused = await request(
        api,
        "PATCH",
        WIDGETS.path(namespace="default", name="w1"),
        body={"spec": {"size": "x"}},
        content_type="application/strategic-merge-patch+json",
    )
    assert (status, refused["reason"]) == (415, "UnsupportedMediaType")  # as for any custom resource


async def test_status_and_scale_subresources_watch_and_tables(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    await create_crd(api, widget_crd())
    objects = k8s_client.CustomObjectsApi(api)
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": "big"}}
    await objects.create_namespaced_custom_object("example.com", "v1", "default", "widgets", body)
    seen: list[tuple[str, Any]] = []

    async def watch() -> None:
        async for event in kube.watch_objects(api, WIDGETS):
            if isinstance(event, kube.Resynced):
                continue
            seen.append((event.type, copy.deepcopy(event.object)))

    task = asyncio.create_task(watch())
    try:
        # a status write through the main resource is ignored; through status it is kept (and spec is not)
        ignored = await objects.patch_namespaced_custom_object(
            "example.com", "v1", "default", "widgets", "w1", {"status": {"phase": "Running"}}, _content_type=MERGE
        )
        assert "status" not in ignored
        written = await objects.patch_namespaced_custom_object_status(
            "example.com",
            "v1",
            "default",
            "widgets",
            "w1",
            {"status": {"phase": "Running", "ready": 3, "selector": "a=b"}, "spec": {"size": "tiny"}},
            _content_type=MERGE,
        )
        assert written["status"]["phase"] == "Running" and written["spec"]["size"] == "big"
        scale = await objects.get_namespaced_custom_object_scale("example.com", "v1", "default", "widgets", "w1")
        assert (scale["kind"], scale["spec"], scale["status"]) == (
            "Scale",
            {"replicas": 1},
            {"replicas": 3, "selector": "a=b"},
        )
        scaled = await objects.patch_namespaced_custom_object_scale(
            "example.com", "v1", "default", "widgets", "w1", {"spec": {"replicas": 4}}, _content_type=MERGE
        )
        assert scaled["spec"] == {"replicas": 4}
        stored = await objects.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "w1")
        assert stored["spec"]["replicas"] == 4
        for _ in range(400):  # up to 20 s on a loaded machine
            if len(seen) >= 2:
                break
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    # the status write and the scale; the status written through the main resource changed nothing
    assert [(kind, obj["status"]["phase"], obj["spec"]["replicas"]) for kind, obj in seen] == [
        ("MODIFIED", "Running", 1),
        ("MODIFIED", "Running", 4),
    ]
    _, table = await request(api, "GET", WIDGETS.path(namespace="default"), accept=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Phase"]
    assert [c["priority"] for c in table["columnDefinitions"]] == [0, 0, 1]
    assert table["rows"][0]["cells"] == ["w1", "big", "Running"]


async def test_other_served_versions_share_the_storage(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    """An object created as v1beta1 is stored once (as v1) and read in either version."""
    await create_crd(api, widget_crd(versions=("v1", "v1beta1")))
    objects = k8s_client.CustomObjectsApi(api)
    body = {"apiVersion": "example.com/v1beta1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {}}
    created = await objects.create_namespaced_custom_object("example.com", "v1beta1", "default", "widgets", body)
    assert created["apiVersion"] == "example.com/v1beta1"
    as_v1 = await objects.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "w1")
    assert as_v1["apiVersion"] == "example.com/v1" and as_v1["metadata"]["uid"] == created["metadata"]["uid"]
    listed = await objects.list_namespaced_custom_object("example.com", "v1beta1", "default", "widgets")
    assert [item["apiVersion"] for item in listed["items"]] == ["example.com/v1beta1"]


async def test_a_cluster_scoped_kind(cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient) -> None:
    await create_crd(api, widget_crd(scope="Cluster"))
    objects = k8s_client.CustomObjectsApi(api)
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "x"}}
    created = await objects.create_cluster_custom_object("example.com", "v1", "widgets", body)
    assert "namespace" not in created["metadata"]
    assert "spec" not in created  # defaults fill fields of objects that are there, never the objects themselves
    _, listing = await request(api, "GET", "/apis/example.com/v1")
    assert listing["resources"][0]["namespaced"] is False


async def test_deleting_the_crd_deletes_its_objects_and_ends_their_watches(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    await create_crd(api, widget_crd())
    objects = k8s_client.CustomObjectsApi(api)
    for name in ("w1", "w2"):
        body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "finalizers": ["x/y"]}}
        await objects.create_namespaced_custom_object("example.com", "v1", "default", "widgets", body)
    events: list[str] = []

    async def watch() -> None:
        async for event in kube.watch_objects(api, WIDGETS):
            if not isinstance(event, kube.Resynced):
                events.append(f"{event.type} {event.object['metadata']['name']}")

    task = asyncio.create_task(watch())
    await asyncio.sleep(0.3)
    await k8s_client.ApiextensionsV1Api(api).delete_custom_resource_definition("widgets.example.com")
    for _ in range(400):
        if len(events) == 2:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert events == ["DELETED w1", "DELETED w2"]
    with pytest.raises(kube_errors.NotFoundError):
        await kube.list_objects(api, WIDGETS)
    _, groups = await request(api, "GET", "/apis")
    assert "example.com" not in {g["name"] for g in groups["groups"]}
    await create_crd(api, widget_crd())  # again: served, and empty
    assert (await kube.list_objects(api, WIDGETS))[0] == []


async def test_an_invalid_crd_and_an_oversized_annotation_are_refused(api: k8s_client.ApiClient) -> None:
    crd = widget_crd()
    crd["metadata"]["name"] = "gadgets.example.com"
    status, refused = await request(api, "POST", custom_resources.CRDS.path(), body=crd)
    assert (status, refused["reason"]) == (422, "Invalid")
    assert 'metadata.name: Invalid value: "gadgets.example.com"' in refused["message"]
    crd = widget_crd()
    crd["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "x" * 300_000}
    status, refused = await request(api, "POST", custom_resources.CRDS.path(), body=crd)
    assert status == 422
    assert "metadata.annotations: Too long: must have at most 262144 bytes" in refused["message"]


async def test_a_crd_for_kueue_kinds_leaves_kueue_es_schemas_in_place(api: k8s_client.ApiClient) -> None:
    """Applying kueue-es's own CRDs (`kueue-es deploy crds`) to the emulator is accepted and Established,
    and the kueue.x-k8s.io kinds keep the emulator's validation."""
    from kueue_es import crds as kueue_crds  # noqa: PLC0415

    [cq_crd] = [c for c in kueue_crds.all_crds() if c["spec"]["names"]["kind"] == "ClusterQueue"]
    await create_crd(api, cq_crd)
    stored = await k8s_client.ApiextensionsV1Api(api).read_custom_resource_definition(cq_crd["metadata"]["name"])
    assert {c.type for c in stored.status.conditions} == {"NamesAccepted", "Established"}
    bad = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"cohrtName": "x"},
    }
    status, refused = await request(
        api, "POST", resources.CLUSTER_QUEUES.path(), body=bad, query=[("fieldValidation", "Strict")]
    )
    assert status == 400 and "cohrtName" in refused["message"]


async def test_crd_files_are_installed_at_start() -> None:
    async with emulator.serve_emulator(crd_files=(FIXTURES / "ray.io_rayjobs.yaml",)) as served:
        api = await kube.make_api_client(server=served.url)
        try:
            rayjobs = resources.ResourceRef(
                group="ray.io", version="v1", plural="rayjobs", kind="RayJob", namespaced=True, status_subresource=True
            )
            assert (await kube.list_objects(api, rayjobs))[0] == []
        finally:
            await api.close()


@pytest.mark.slow  # every fixture CRD: about 20 s on 2 cores
async def test_every_fixture_crd_and_a_sample_of_each_kind(
    cluster: emulator.ClusterEmulator, api: k8s_client.ApiClient
) -> None:
    """All the integrations' CRDs, installed through the API, serve one sample object each (Kueue's example for
    the kind, created as it is but for XGBoostJob's cpu, which the schema refuses as a JSON number), stored
    with the schema's defaults, listed, and printed as a Table."""
    extensions = k8s_client.ApiextensionsV1Api(api)
    for crd in custom_resources.load([FIXTURES]):
        response = await extensions.create_custom_resource_definition(crd, _preload_content=False)
        assert response.status == 201
    objects = k8s_client.CustomObjectsApi(api)
    stored: dict[str, dict[str, Any]] = {}
    [as_published] = [d for d in yaml.safe_load_all(SAMPLES["XGBoostJob"].read_text()) if d]
    status, refused = await request(
        api, "POST", "/apis/kubeflow.org/v1/namespaces/default/xgboostjobs", body=as_published
    )
    assert (status, [cause["field"] for cause in refused["details"]["causes"]]) == (422, XGBOOST_INVALID_FIELDS)
    assert 'Invalid value: "number"' in refused["message"]
    for kind in SAMPLES:
        doc = sample(kind)
        group, version = doc["apiVersion"].split("/")
        plural = {"ClusterTrainingRuntime": "clustertrainingruntimes"}.get(kind, f"{kind.lower()}s")
        namespace = doc["metadata"].get("namespace", "default")
        if kind == "ClusterTrainingRuntime":
            created = await objects.create_cluster_custom_object(group, version, plural, doc)
        else:
            created = await objects.create_namespaced_custom_object(group, version, namespace, plural, doc)
        stored[kind] = created
        path_ = f"/apis/{group}/{version}/{plural}"
        _, table = await request(api, "GET", path_, accept=TABLE)
        assert [row["cells"][0] for row in table["rows"]] == [created["metadata"]["name"]], kind
    # the API server's defaults from the published schemas, which Kueue's conversions read
    head = stored["RayJob"]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert {p.get("protocol") for p in head["ports"]} == {"TCP"}
    assert stored["LeaderWorkerSet"]["spec"]["replicas"] == 2  # as written
    assert stored["LeaderWorkerSet"]["spec"]["startupPolicy"] == "LeaderCreated"
    assert stored["JobSet"]["spec"]["suspend"] is True  # Kueue's JobSet webhook, as before the CRD
    assert stored["JobSet"]["spec"]["replicatedJobs"][0]["replicas"] == 1
