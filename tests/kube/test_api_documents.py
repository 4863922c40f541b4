"""What the emulator tells clients about its API: discovery, OpenAPI, Tables; and dry runs, strict
field validation and strategic merge patches, through the kubernetes-asyncio client (no kubectl needed)."""

from __future__ import annotations

import datetime
import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es import crds
from kueue_es.services.kube import client as kube_client
from kueue_es.services.kube import resources
from kueue_es.sim import emulator, openapi, openapi_v2_pb, openapiv2_pb2, patches, strategies, tables

pytestmark = pytest.mark.timeout(30)

NOW = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


async def get_json(api: k8s_client.ApiClient, path: str, *, accept: str = "application/json") -> Any:
    """GET a path on the emulator; the decoded JSON body."""
    response = await api.call_api(path, "GET", header_params={"Accept": accept}, _preload_content=False)
    return json.loads(await response.read())


def test_core_openapi_json_is_generated_from_the_kubernetes_definitions() -> None:
    """kueue_es/sim/core_openapi.json is what `python -m kueue_es.sim.openapi` writes now."""
    assert openapi.CORE_SCHEMAS_FILE.read_text() == openapi.render_core_schemas()


def test_every_reference_resolves_and_every_kind_has_a_patch_with_field_validation() -> None:
    """Each group-version document is closed under $ref, and each kind's PATCH operation names its GVK
    and takes fieldValidation (how kubectl learns that the server validates)."""
    refs = list(resources.RESOURCES.values())
    for group, version in {(ref.group, ref.version) for ref in refs}:
        document = openapi.v3_document(refs, group=group, version=version)
        schemas = document["components"]["schemas"]
        text = json.dumps(document)
        for name in {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}:
            assert name in schemas, f"{group}/{version}: dangling $ref {name}"
        kinds = {ref.kind for ref in refs if (ref.group, ref.version) == (group, version)}
        patched = {
            item["patch"]["x-kubernetes-group-version-kind"]["kind"]
            for item in document["paths"].values()
            if "patch" in item
            and any(p["name"] == "fieldValidation" and p["in"] == "query" for p in item["patch"]["parameters"])
        }
        assert patched == kinds


def test_unknown_fields_follow_the_schema() -> None:
    """A misspelt field is found at its path, in lists too, status included (Kueue's status schema); a map's keys
    and metadata are not."""
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq", "labels": {"any": "thing"}, "annotations": {"a": "b"}},
        "spec": {
            "cohrtName": "x",
            "namespaceSelector": {"matchLabels": {"team": "a"}},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"nam": "f", "resources": []}]}],
        },
        "status": {"whatever": 1, "flavorsUsage": [{"name": "f", "resources": [{"name": "cpu", "totl": "1"}]}]},
    }
    assert openapi.unknown_fields(cq, resources.CLUSTER_QUEUES) == [
        "spec.cohrtName",
        "spec.resourceGroups[0].flavors[0].nam",
        "status.whatever",
        "status.flavorsUsage[0].resources[0].totl",
    ]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "imag": "x"}]},
    }
    assert openapi.unknown_fields(pod, resources.PODS) == ["spec.containers[0].imag"]
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {"anything": {"goes": 1}}}
    assert openapi.unknown_fields(jobset, resources.JOBSETS) == []


@pytest.mark.parametrize(
    ("seconds", "printed"),
    [
        (-5, "<invalid>"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (330, "5m30s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (5 * 3600 + 600, "5h10m"),
        (30 * 3600, "30h"),
        (76 * 3600, "3d4h"),
        (40 * 86400, "40d"),
        (3 * 365 * 86400 + 10 * 86400, "3y10d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_ages_print_as_kubernetes_prints_them(seconds: int, printed: str) -> None:
    """apimachinery's HumanDuration."""
    assert tables.human_duration(seconds) == printed


def test_a_workload_table_evaluates_kueues_printer_columns() -> None:
    """Workload rows: Queue, Reserved in, the Admitted and Finished condition statuses, Age; a missing value
    is None (kubectl prints it empty)."""
    workload = {
        "metadata": {"name": "wl", "namespace": "default", "creationTimestamp": "2026-01-01T11:55:00Z"},
        "spec": {"queueName": "lq"},
        "status": {
            "admission": {"clusterQueue": "cq"},
            "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}],
        },
    }
    pending = {"metadata": {"name": "p", "creationTimestamp": "2026-01-01T11:59:30Z"}, "spec": {"queueName": "lq"}}
    table = tables.table(resources.WORKLOADS, [workload, pending], now=NOW)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Queue",
        "Reserved in",
        "Admitted",
        "Finished",
        "Age",
    ]
    assert [row["cells"] for row in table["rows"]] == [
        ["wl", "lq", "cq", "True", None, "5m"],
        ["p", "lq", None, None, None, "30s"],
    ]
    assert table["rows"][0]["object"]["metadata"]["name"] == "wl"
    wide = [
        c["name"] for c in tables.table(resources.CLUSTER_QUEUES, [], now=NOW)["columnDefinitions"] if c["priority"]
    ]
    assert wide == ["Strategy", "Admitted Workloads"]


def test_a_pod_table_shows_readiness_status_and_restarts() -> None:
    """READY counts ready containers; STATUS is SchedulingGated for a pod carrying PodScheduled with that reason
    (as kube-apiserver writes it for a gated pod, and as it stays once the gates went until the pod is scheduled),
    else the first container's waiting or terminated reason, else the phase; Completed beside a running
    container reads Running (printers.go printPod)."""
    spec = {"containers": [{"name": "c"}], "schedulingGates": [{"name": "g"}]}
    gated = {
        "metadata": {"name": "a"},
        "spec": spec,
        "status": strategies.pending_status(spec, now="2026-01-01T00:00:00Z"),
    }
    ungated = {**gated, "metadata": {"name": "u"}, "spec": {"containers": [{"name": "c"}]}}
    running = {
        "metadata": {"name": "b"},
        "spec": {"containers": [{"name": "c"}, {"name": "d"}], "nodeName": "n1"},
        "status": {"phase": "Running", "containerStatuses": [{"ready": True, "restartCount": 2}, {"ready": False}]},
    }
    half_done = {
        "metadata": {"name": "h"},
        "spec": {"containers": [{"name": "c"}, {"name": "d"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"ready": True, "state": {"running": {}}},
                {"ready": False, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            ],
        },
    }
    failing = {
        "metadata": {"name": "f"},
        "spec": {"containers": [{"name": "c"}, {"name": "d"}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"state": {"waiting": {"reason": "CrashLoopBackOff"}}},
                {"state": {"waiting": {"reason": "ImagePullBackOff"}}},
            ],
        },
    }
    pods = [gated, ungated, running, half_done, failing]
    rows = [row["cells"][:4] for row in tables.table(resources.PODS, pods, now=NOW)["rows"]]
    assert rows == [
        ["a", "0/1", "SchedulingGated", "0"],
        ["u", "0/1", "SchedulingGated", "0"],
        ["b", "1/2", "Running", "2"],
        ["h", "1/2", "Running", "0"],
        ["f", "0/2", "CrashLoopBackOff", "0"],
    ]


def test_strategic_merge_patch_merges_lists_the_schema_marks() -> None:
    """Containers merge by name ($setElementOrder keeps the order), $patch: delete removes one, a primitive
    list entry is removed by $deleteFromPrimitiveList; a list without a merge strategy is replaced."""
    pod = {
        "spec": {
            "containers": [{"name": "a", "image": "x", "args": ["1"]}, {"name": "b", "image": "y"}],
            "tolerations": [{"key": "k"}],
        },
        "metadata": {"finalizers": ["f1", "f2"]},
    }
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [{"name": "a", "args": ["2"]}],
            "tolerations": [{"key": "j"}],
        },
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["f1"]},
    }
    result = patches.strategic_merge_patch(pod, patch, openapi.patch_schema(resources.PODS))
    assert result["spec"]["containers"] == [{"name": "b", "image": "y"}, {"name": "a", "image": "x", "args": ["2"]}]
    assert result["spec"]["tolerations"] == [{"key": "j"}]
    assert result["metadata"]["finalizers"] == ["f2"]
    deleted = patches.strategic_merge_patch(
        pod, {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}, openapi.patch_schema(resources.PODS)
    )
    assert [c["name"] for c in deleted["spec"]["containers"]] == ["b"]
    assert pod["spec"]["containers"][0]["args"] == ["1"]  # not mutated


async def test_discovery_gives_kueues_short_names_and_a_v1_group_version(api: k8s_client.ApiClient) -> None:
    """/api/v1 says groupVersion v1 (pods have `po` and category `all`); /apis/kueue.x-k8s.io/v1beta2 carries
    the CRDs' short names."""
    core = await get_json(api, "/api/v1")
    assert core["groupVersion"] == "v1"
    pods = next(r for r in core["resources"] if r["name"] == "pods")
    assert pods["shortNames"] == ["po"] and pods["categories"] == ["all"]
    kueue = await get_json(api, "/apis/kueue.x-k8s.io/v1beta2")
    names = {r["name"]: r.get("shortNames", []) for r in kueue["resources"] if "/" not in r["name"]}
    assert names == {kind.plural: list(kind.short_names) for kind in crds.KINDS}
    index = await get_json(api, "/openapi/v3")
    assert "apis/kueue.x-k8s.io/v1beta2" in index["paths"] and "api/v1" in index["paths"]


async def test_cronjobs_and_priority_classes_are_served_with_kubectls_short_names(api: k8s_client.ApiClient) -> None:
    """batch/v1 CronJob (`cj`, category `all`, a status subresource) and the cluster-scoped
    scheduling.k8s.io/v1 PriorityClass (`pc`) are in discovery and OpenAPI; a PriorityClass is created
    with the server's default preemptionPolicy and prints kubectl's columns."""
    batch = await get_json(api, "/apis/batch/v1")
    entries = {r["name"]: r for r in batch["resources"]}
    assert entries["cronjobs"]["shortNames"] == ["cj"] and entries["cronjobs"]["categories"] == ["all"]
    assert "cronjobs/status" in entries
    scheduling = await get_json(api, "/apis/scheduling.k8s.io/v1")
    [priority_classes] = scheduling["resources"]
    assert priority_classes["name"] == "priorityclasses" and priority_classes["shortNames"] == ["pc"]
    assert priority_classes["namespaced"] is False
    document = await get_json(api, "/openapi/v3/apis/scheduling.k8s.io/v1")
    assert "io.k8s.api.scheduling.v1.PriorityClass" in document["components"]["schemas"]
    assert (
        "io.k8s.api.batch.v1.CronJobSpec" in (await get_json(api, "/openapi/v3/apis/batch/v1"))["components"]["schemas"]
    )
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000}
    created = await kube_client.create_object(api, resources.PRIORITY_CLASSES, body=high)
    assert created["preemptionPolicy"] == "PreemptLowerPriority"
    body = await get_json(api, "/apis/scheduling.k8s.io/v1/priorityclasses", accept=TABLE)
    assert [c["name"] for c in body["columnDefinitions"]] == [
        "Name",
        "Value",
        "Global-Default",
        "Age",
        "PreemptionPolicy",
    ]
    assert body["rows"][0]["cells"][:3] == ["high", 1000, False]
    assert body["rows"][0]["cells"][4] == "PreemptLowerPriority"
    # and the two every API server makes at start-up
    assert [row["cells"][:2] for row in body["rows"][1:]] == [
        ["system-cluster-critical", 2000000000],
        ["system-node-critical", 2000001000],
    ]


def test_a_cronjob_table_has_kubectls_columns() -> None:
    """CronJob rows: schedule, time zone (<none>), suspend, the count of active Jobs, the last schedule's age."""
    cron_job = {
        "metadata": {"name": "nightly", "namespace": "default", "creationTimestamp": "2026-01-01T10:00:00Z"},
        "spec": {"schedule": "0 3 * * *", "suspend": False, "jobTemplate": {"spec": {"template": {"spec": {}}}}},
        "status": {"active": [{"name": "nightly-1"}], "lastScheduleTime": "2026-01-01T11:55:00Z"},
    }
    table = tables.table(resources.CRON_JOBS, [cron_job], now=NOW)
    names = [c["name"] for c in table["columnDefinitions"] if not c["priority"]]
    assert names == ["Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age"]
    assert table["rows"][0]["cells"][:7] == ["nightly", "0 3 * * *", "<none>", "False", 1, "5m", "120m"]


async def test_a_list_comes_as_a_table_when_asked(api: k8s_client.ApiClient, cluster: emulator.ClusterEmulator) -> None:
    """Accept: application/json;as=Table;v=v1;g=meta.k8s.io gives a meta.k8s.io/v1 Table."""
    body = await get_json(
        api, "/api/v1/namespaces", accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    )
    assert body["kind"] == "Table"
    assert [row["cells"][:2] for row in body["rows"]][0] == ["default", "Active"]


async def test_dry_run_stores_and_logs_nothing(api: k8s_client.ApiClient, cluster: emulator.ClusterEmulator) -> None:
    """?dryRun=All on create, patch and delete answers as the write would, and changes no object and no
    resourceVersion; another dryRun value is refused."""
    custom = k8s_client.CustomObjectsApi(api)
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {}}
    version = cluster.resource_version
    created = await custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", cq, dry_run="All")
    assert created["metadata"]["name"] == "cq" and created["metadata"]["uid"]
    assert cluster.resource_version == version
    with pytest.raises(k8s_client.ApiException) as missing:
        await custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq")
    assert missing.value.status == 404
    await custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", cq)
    version = cluster.resource_version
    patched = await custom.patch_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        "cq",
        {"spec": {"cohortName": "x"}},
        dry_run="All",
        _content_type="application/merge-patch+json",
    )
    assert patched["spec"]["cohortName"] == "x"
    await custom.delete_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq", dry_run="All")
    assert cluster.resource_version == version
    stored = await custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "cq")
    assert "cohortName" not in stored["spec"]
    with pytest.raises(k8s_client.ApiException) as refused:
        await custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", cq, dry_run="Some")
    assert refused.value.status == 422


async def test_openapi_v2_is_json_or_gnostic_protobuf_as_asked(api: k8s_client.ApiClient) -> None:
    """/openapi/v2 is a Swagger 2.0 JSON document with every kind's definition; a client asking for the
    protobuf form only (as kubectl's v2 client does, to validate a ``kind: List`` file) gets the same
    document as gnostic's ``openapi.v2.Document`` (the Content-Type kube-apiserver answers, with a dot for
    the ``@`` Go's mime parser refuses): each kind's definition, its GVK extension as YAML, its PATCH
    operation's fieldValidation. Discovery asked for protobuf only is still 406."""
    swagger = await get_json(api, "/openapi/v2")
    assert swagger["swagger"] == "2.0"
    assert {"io.k8s.api.batch.v1.Job", "io.x-k8s.kueue.v1beta2.ClusterQueue"} <= set(swagger["definitions"])
    assert '"#/components/' not in json.dumps(swagger)
    response = await api.call_api(
        "/openapi/v2", "GET", header_params={"Accept": openapi_v2_pb.MEDIA_TYPE}, _preload_content=False
    )
    assert response.status == 200
    assert response.headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    document = openapiv2_pb2.Document.FromString(await response.read())
    assert document.swagger == "2.0"
    definitions = {named.name: named.value for named in document.definitions.additional_properties}
    assert set(definitions) == set(swagger["definitions"])
    cq = definitions["io.x-k8s.kueue.v1beta2.ClusterQueue"]
    assert list(cq.type.value) == ["object"]
    assert {p.name for p in cq.properties.additional_properties} == {"apiVersion", "kind", "metadata", "spec", "status"}
    extensions = {named.name: json.loads(named.value.yaml) for named in cq.vendor_extension}
    gvk = {"group": "kueue.x-k8s.io", "version": "v1beta2", "kind": "ClusterQueue"}
    assert extensions["x-kubernetes-group-version-kind"] == [gvk]
    job = definitions["io.k8s.api.batch.v1.Job"]
    metadata = next(p.value for p in job.properties.additional_properties if p.name == "metadata")
    assert metadata._ref == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"  # an allOf of one $ref
    paths = {named.name: named.value for named in document.paths.path}
    patch = paths["/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{name}"].patch
    queries = [p.parameter.non_body_parameter.query_parameter_sub_schema.name for p in patch.parameters]
    assert "fieldValidation" in queries
    dotted = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json"  # protobuf first
    response = await api.call_api("/openapi/v2", "GET", header_params={"Accept": dotted}, _preload_content=False)
    assert openapiv2_pb2.Document.FromString(await response.read()) == document
    json_first = "application/json, " + openapi_v2_pb.MEDIA_TYPE
    assert (await get_json(api, "/openapi/v2", accept=json_first))["swagger"] == "2.0"
    status = await get_json(api, "/api/v1", accept="application/vnd.kubernetes.protobuf")
    assert status["code"] == 406


async def test_a_watch_asked_as_table_streams_one_row_tables(cluster: emulator.ClusterEmulator) -> None:
    """`kubectl get -w` asks for Tables on a watch: each event's object is a one-row Table."""
    headers = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    url = f"{cluster.url}/api/v1/namespaces?watch=true&timeoutSeconds=0"
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
        events = [json.loads(line) for line in (await response.text()).splitlines() if line.strip()]
    assert [e["type"] for e in events] == ["ADDED"] * 4
    assert all(e["object"]["kind"] == "Table" and len(e["object"]["rows"]) == 1 for e in events)
    assert events[0]["object"]["rows"][0]["cells"][:2] == ["default", "Active"]


def test_an_event_series_shows_its_count_and_last_observation() -> None:
    """kube-apiserver's printEvent (pkg/printers/internalversion): an Event folded into a series by an
    events.k8s.io recorder, as Kueue's are, shows the series' count and lastObservedTime, its first time from
    eventTime when it has no firstTimestamp; a singleton of the new API (no count) counts 1."""
    series = {
        "metadata": {"name": "wl.1", "namespace": "default"},
        "involvedObject": {"kind": "Workload", "name": "wl"},
        "type": "Normal",
        "reason": "PreemptedWorkload",
        "message": "Preempted workload default/a",
        "eventTime": "2026-01-01T11:50:00.000000Z",
        "series": {"count": 8, "lastObservedTime": "2026-01-01T11:58:00.000000Z"},
        "reportingComponent": "kueue-admission",
    }
    singleton = {**series, "metadata": {"name": "wl.2", "namespace": "default"}}
    del singleton["series"]
    rows = [row["cells"] for row in tables.table(resources.EVENTS, [series, singleton], now=NOW)["rows"]]
    # Last Seen, Type, Reason, Object, Subobject, Source, Message, First Seen, Count, Name
    assert [(r[0], r[5], r[6], r[7], r[8]) for r in rows] == [
        ("2m", "kueue-admission", "Preempted workload default/a", "10m", 8),
        ("10m", "kueue-admission", "Preempted workload default/a", "10m", 1),
    ]


def test_openapi_v2_protobuf_refuses_what_swagger_cannot_say_naming_where() -> None:
    """The protobuf encoder names the definition and field of a schema it cannot write (not an object), and
    of a parameter of a kind gnostic's message does not hold here (a header)."""
    with pytest.raises(ValueError, match=r"definitions\[X\]\.spec: a schema must be an object, not str"):
        openapi_v2_pb.encode({"definitions": {"X": {"type": "object", "properties": {"spec": "object"}}}})
    header = {"get": {"parameters": [{"name": "h", "in": "header", "type": "string"}], "responses": {}}}
    with pytest.raises(ValueError, match=r"paths\[/x\]\.get\.parameters\[h\]\.in: 'header'"):
        openapi_v2_pb.encode({"paths": {"/x": header}})
