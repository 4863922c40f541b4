"""Kueue's visibility API answered from a folded state (services/visibility/api.py).

The JSON is held against Kueue's types (apis/visibility/v1beta2/types.go: PendingWorkloadsSummary,
PendingWorkload with ObjectMeta, priority, localQueueName, positionInClusterQueue,
positionInLocalQueue), its windowing (pkg/visibility/storage: offset and limit, defaults and bounds), its
404 Status for an unknown queue and its discovery documents; v1beta1 answers the same with its own
apiVersion.
"""

from __future__ import annotations

import msgspec
import pytest

from kueue_es.events import models
from kueue_es.services.visibility import api
from tests.unit.test_visibility_positions import _state, _workload

GROUP = "visibility.kueue.x-k8s.io"
# Kueue's JSON field names (json tags of apis/visibility/v1beta2/types.go and metav1.ObjectMeta/OwnerReference)
SUMMARY_FIELDS = ["kind", "apiVersion", "metadata", "items"]
ITEM_FIELDS = ["metadata", "priority", "localQueueName", "positionInClusterQueue", "positionInLocalQueue"]
ITEM_METADATA_FIELDS = ["name", "namespace", "creationTimestamp", "ownerReferences"]
OWNER_FIELDS = ["apiVersion", "kind", "name", "uid"]


def _five():
    state = _state(
        [
            _workload("a-old", "lq-a", priority=0, second=1),
            _workload("b-high", "lq-b", priority=10, second=5),
            _workload("a-new", "lq-a", priority=0, second=9),
            _workload("b-old", "lq-b", priority=0, second=2),
            _workload("a-mid", "lq-a", priority=0, second=4),
        ]
    )
    for key, folded in state.workloads.items():  # as the job framework records them: owned by a Job
        name = key.split("/", 1)[1]
        owner = models.OwnerReference(api_version="batch/v1", kind="Job", name=f"job-{name}", uid=f"job-uid-{name}")
        folded.workload = msgspec.structs.replace(folded.workload, owner=owner)
    return state


def _get(state, path: str, **query: str) -> api.Reply:
    reply = api.answer(state, "GET", path, query, now_ms=0)
    assert reply is not None
    return reply


CQ_PATH = f"/apis/{GROUP}/v1beta2/clusterqueues/cq/pendingworkloads"
LQ_A_PATH = f"/apis/{GROUP}/v1beta2/namespaces/default/localqueues/lq-a/pendingworkloads"


def test_cluster_queue_summary_has_kueues_shape_and_order() -> None:
    reply = _get(_five(), CQ_PATH)
    assert reply.status == 200
    body = reply.body
    assert list(body) == SUMMARY_FIELDS
    assert body["kind"] == "PendingWorkloadsSummary"
    assert body["apiVersion"] == f"{GROUP}/v1beta2"
    assert body["metadata"] == {"creationTimestamp": None}
    first = body["items"][0]
    assert list(first) == ITEM_FIELDS
    assert list(first["metadata"]) == ITEM_METADATA_FIELDS
    assert list(first["metadata"]["ownerReferences"][0]) == OWNER_FIELDS
    assert first["metadata"] == {
        "name": "b-high",
        "namespace": "default",
        "creationTimestamp": "2026-01-01T00:00:05Z",
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job-b-high", "uid": "job-uid-b-high"}],
    }
    rows = [
        (
            i["metadata"]["name"],
            i["priority"],
            i["localQueueName"],
            i["positionInClusterQueue"],
            i["positionInLocalQueue"],
        )
        for i in body["items"]
    ]
    assert rows == [
        ("b-high", 10, "lq-b", 0, 0),
        ("a-old", 0, "lq-a", 1, 0),
        ("b-old", 0, "lq-b", 2, 1),
        ("a-mid", 0, "lq-a", 3, 1),
        ("a-new", 0, "lq-a", 4, 2),
    ]


def test_cluster_queue_window_keeps_positions() -> None:
    state = _five()
    body = _get(state, CQ_PATH, offset="1", limit="2").body
    assert [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in body["items"]] == [
        ("a-old", 1, 0),
        ("b-old", 2, 1),
    ]
    assert _get(state, CQ_PATH, offset="5").body["items"] == []
    assert [i["metadata"]["name"] for i in _get(state, CQ_PATH, offset="-3", limit="1").body["items"]] == ["b-high"]


def test_limit_defaults_and_bounds_as_kueue() -> None:
    assert api.window({}) == (0, 1000)
    assert api.window({"limit": "0"}) == (0, 1000)  # Kueue's defaulting turns 0 into the default
    assert api.window({"limit": "-1", "offset": "-2"}) == (0, 0)
    assert api.window({"limit": "1000000", "offset": "7"}) == (7, 100_000)
    assert _get(_five(), CQ_PATH, limit="-1").body["items"] == []
    reply = _get(_five(), CQ_PATH, limit="ten")
    assert reply.status == 400
    assert reply.body["reason"] == "BadRequest"
    assert "limit" in reply.body["message"]


def test_local_queue_offset_counts_its_own_workloads() -> None:
    state = _five()
    body = _get(state, LQ_A_PATH).body
    assert [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in body["items"]] == [
        ("a-old", 1, 0),
        ("a-mid", 3, 1),
        ("a-new", 4, 2),
    ]
    windowed = _get(state, LQ_A_PATH, offset="1", limit="1").body["items"]
    assert [(i["metadata"]["name"], i["positionInLocalQueue"]) for i in windowed] == [("a-mid", 1)]


@pytest.mark.parametrize(
    ("path", "resource", "name"),
    [
        (f"/apis/{GROUP}/v1beta2/clusterqueues/nope/pendingworkloads", "clusterqueue", "nope"),
        (f"/apis/{GROUP}/v1beta2/namespaces/default/localqueues/nope/pendingworkloads", "localqueue", "nope"),
        (f"/apis/{GROUP}/v1beta2/namespaces/other/localqueues/lq-a/pendingworkloads", "localqueue", "lq-a"),
        (f"/apis/{GROUP}/v1beta1/clusterqueues/nope/pendingworkloads", "clusterqueue", "nope"),
    ],
)
def test_unknown_queue_is_kueues_not_found_status(path: str, resource: str, name: str) -> None:
    reply = _get(_five(), path)
    assert reply.status == 404
    assert reply.body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{resource}.{GROUP} "{name}" not found',
        "reason": "NotFound",
        "details": {"name": name, "group": GROUP, "kind": resource},
        "code": 404,
    }


def test_v1beta1_answers_the_same_items_with_its_apiversion() -> None:
    state = _five()
    beta1 = _get(state, CQ_PATH.replace("v1beta2", "v1beta1")).body
    beta2 = _get(state, CQ_PATH).body
    assert beta1["apiVersion"] == f"{GROUP}/v1beta1"
    assert beta1["items"] == beta2["items"]


def test_discovery_documents() -> None:
    state = _five()
    group = _get(state, f"/apis/{GROUP}").body
    assert group["kind"] == "APIGroup"
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]
    assert group["preferredVersion"]["version"] == "v1beta2"
    assert _get(state, "/apis").body["groups"] == [group]
    for version in ("v1beta2", "v1beta1"):
        listed = _get(state, f"/apis/{GROUP}/{version}").body
        assert listed["groupVersion"] == f"{GROUP}/{version}"
        by_name = {r["name"]: r for r in listed["resources"]}
        assert set(by_name) == {
            "clusterqueues",
            "clusterqueues/pendingworkloads",
            "localqueues",
            "localqueues/pendingworkloads",
        }
        assert by_name["clusterqueues/pendingworkloads"]["verbs"] == ["get"]
        assert by_name["localqueues/pendingworkloads"]["namespaced"] is True
        assert by_name["clusterqueues"]["namespaced"] is False
        assert {r["kind"] for r in listed["resources"]} == {"PendingWorkloadsSummary"}


def test_other_paths_methods_and_a_fold_not_ready() -> None:
    state = _five()
    assert api.answer(state, "GET", "/healthz", {}, now_ms=0) is None
    assert api.answer(state, "GET", "/apis/kueue.x-k8s.io/v1beta2", {}, now_ms=0) is None
    assert _get(state, f"/apis/{GROUP}/v1alpha1").status == 404
    assert _get(state, f"/apis/{GROUP}/v1beta2/clusterqueues/cq").status == 404
    post = api.answer(state, "POST", CQ_PATH, {}, now_ms=0)
    assert post is not None and post.status == 405
    waiting = api.answer(None, "GET", CQ_PATH, {}, now_ms=0)
    assert waiting is not None and waiting.status == 503
    discovery = api.answer(None, "GET", f"/apis/{GROUP}/v1beta2", {}, now_ms=0)
    assert discovery is not None and discovery.status == 200


def test_a_stopped_local_queue_is_kueues_not_found_and_its_workloads_leave_the_cluster_queues_list() -> None:
    """pending_workloads_lq.go: a stopped LocalQueue is not in Kueue's queue manager (DeleteLocalQueue), so its
    endpoint answers 404 (not a server error) and the ClusterQueue's lists none of its workloads."""
    state = _five()
    lq = state.local_queues[("default", "lq-a")]
    state.local_queues[("default", "lq-a")] = msgspec.structs.replace(
        lq, spec=msgspec.structs.replace(lq.spec, stop_policy="Hold")
    )
    reply = _get(state, LQ_A_PATH)
    assert reply.status == 404 and reply.body["reason"] == "NotFound"
    items = _get(state, CQ_PATH).body["items"]
    assert [item["localQueueName"] for item in items] == ["lq-b", "lq-b"]


def test_a_local_queue_whose_cluster_queue_is_missing_has_nothing_pending() -> None:
    """Kueue's queue manager holds a LocalQueue whether or not its ClusterQueue exists (addLocalQueueLocked),
    so its pending list answers 200 with no items, not 404."""
    state = _five()
    lq = state.local_queues[("default", "lq-a")]
    state.local_queues[("default", "orphan")] = msgspec.structs.replace(
        lq,
        metadata=msgspec.structs.replace(lq.metadata, name="orphan"),
        spec=msgspec.structs.replace(lq.spec, cluster_queue="no-such-cq"),
    )
    reply = _get(state, f"/apis/{GROUP}/v1beta2/namespaces/default/localqueues/orphan/pendingworkloads")
    assert reply.status == 200
    assert reply.body["items"] == []
