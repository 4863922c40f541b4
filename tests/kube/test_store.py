"""The emulator's object store, without HTTP: versions, history, immutability."""

from __future__ import annotations

import datetime

import kmock
import pytest

from kueue_es.services.kube import resources
from kueue_es.sim import store

FIXED = datetime.datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)


def make_store(**options: object) -> store.ObjectStore:
    """A store with a fixed clock and the usual kinds."""
    return store.ObjectStore(objects=kmock.ObjectsArray(), clock=lambda: FIXED, **options)  # type: ignore[arg-type]


def test_store_starts_with_default_namespaces_and_stamps_creation() -> None:
    """The default namespaces exist; a create gets whole-second UTC creationTimestamp and the next resourceVersion."""
    objects = make_store()
    assert {ns["metadata"]["name"] for ns in objects.select(resources.NAMESPACES)} == set(store.INITIAL_NAMESPACES)
    before = objects.resource_version
    created = objects.create(
        resources.CLUSTER_QUEUES, namespace=None, body={"metadata": {"name": "cq", "namespace": "x"}}
    )
    assert created["metadata"]["creationTimestamp"] == "2025-01-02T03:04:05Z"
    assert created["metadata"]["resourceVersion"] == str(before + 1)
    assert "namespace" not in created["metadata"]


def test_history_is_bounded_and_expires_old_versions() -> None:
    """With history_limit=2, reading from before the two newest events is expired (None)."""
    objects = make_store(history_limit=2)
    versions = [
        int(
            objects.create(resources.JOBS, namespace="default", body={"metadata": {"name": f"j{i}"}})["metadata"][
                "resourceVersion"
            ]
        )
        for i in range(4)
    ]
    log = objects.log(resources.JOBS)
    assert log.since(versions[0]) is None
    assert [event.object["metadata"]["name"] for event in log.since(versions[1]) or []] == ["j2", "j3"]
    objects.reset_history()
    assert log.since(versions[3]) is None
    assert log.since(objects.resource_version) == []


def test_immutable_metadata_and_noop_updates() -> None:
    """A body naming another object is 400 and another UID 409 (as the API server's update handler and its
    UID precondition answer); an update that changes nothing keeps the resourceVersion and logs nothing."""
    objects = make_store()
    # labelled: a Job without labels takes its template's (the generated selector labels) at its first update,
    # as kube-apiserver's SetDefaults_Job does whenever it decodes one
    body = {"metadata": {"name": "j", "labels": {"team": "a"}}, "spec": {}}
    created = objects.create(resources.JOBS, namespace="default", body=body)
    with pytest.raises(store.StoreError) as invalid:
        objects.update(
            resources.JOBS,
            namespace="default",
            name="j",
            subresource=None,
            change=lambda current: {**current, "metadata": {**current["metadata"], "name": "other"}},
        )
    assert invalid.value.status == 400
    assert invalid.value.message == "the name of the object (other) does not match the name on the URL (j)"
    with pytest.raises(store.StoreError) as conflict:
        objects.update(
            resources.JOBS,
            namespace="default",
            name="j",
            subresource=None,
            change=lambda current: {**current, "metadata": {**current["metadata"], "uid": "another"}},
        )
    assert (conflict.value.status, conflict.value.reason) == (409, "Conflict")
    assert "Precondition failed: UID in precondition: another" in conflict.value.message
    events_before = len(objects.log(resources.JOBS).events)
    same = objects.update(
        resources.JOBS, namespace="default", name="j", subresource=None, change=lambda current: current
    )
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert len(objects.log(resources.JOBS).events) == events_before


def test_create_hooks_and_missing_name() -> None:
    """Create hooks mutate new objects; no name and no generateName is 422 Invalid."""

    def label_everything(ref: resources.ResourceRef, obj: dict[str, object]) -> None:
        obj["metadata"]["labels"] = {"hooked": ref.kind}  # type: ignore[index]

    objects = make_store(create_hooks=(label_everything,))
    created = objects.create(resources.WORKLOADS, namespace="default", body={"metadata": {"generateName": "wl-"}})
    assert created["metadata"]["labels"] == {"hooked": "Workload"}
    with pytest.raises(store.StoreError) as missing:
        objects.create(resources.WORKLOADS, namespace="default", body={"metadata": {}})
    assert missing.value.status == 422


def _without_finalizers(obj: dict[str, object]) -> dict[str, object]:
    metadata = obj["metadata"]
    assert isinstance(metadata, dict)
    metadata.pop("finalizers", None)
    return obj


def test_a_dry_run_taking_the_last_finalizer_off_deletes_nothing() -> None:
    """``?dryRun=All`` answers the object as asked for and neither removes it nor logs anything."""
    objects = make_store()
    objects.create(resources.JOBS, namespace="default", body={"metadata": {"name": "j", "finalizers": ["a/b"]}})
    marked = objects.delete(resources.JOBS, namespace="default", name="j")
    answer = objects.update(
        resources.JOBS, namespace="default", name="j", subresource=None, change=_without_finalizers, dry_run=True
    )
    assert "finalizers" not in answer["metadata"] and answer["metadata"]["deletionTimestamp"]
    assert objects.get(resources.JOBS, namespace="default", name="j") == marked
    assert objects.log(resources.JOBS).since(objects.resource_version) == []


def test_a_terminating_namespace_stays_while_it_holds_objects() -> None:
    """A write to a terminating Namespace (no finalizer in its metadata) stores it: it goes only once nothing
    is left in it (its spec's ``kubernetes`` finalizer, the namespace controller's), with one DELETED."""
    objects = make_store()
    objects.create(resources.NAMESPACES, namespace=None, body={"metadata": {"name": "team"}})
    objects.create(resources.JOBS, namespace="team", body={"metadata": {"name": "j", "finalizers": ["a/b"]}})
    objects.delete(resources.NAMESPACES, namespace=None, name="team")  # no event loop: swept at once
    assert objects.get(resources.JOBS, namespace="team", name="j")["metadata"]["deletionTimestamp"]
    before = objects.resource_version

    def labelled(obj: dict[str, object]) -> dict[str, object]:
        metadata = obj["metadata"]
        assert isinstance(metadata, dict)
        metadata["labels"] = {**metadata.get("labels", {}), "x": "y"}
        return obj

    objects.update(resources.NAMESPACES, namespace=None, name="team", subresource=None, change=labelled)
    assert objects.get(resources.NAMESPACES, namespace=None, name="team")["status"]["phase"] == "Terminating"
    objects.update(resources.JOBS, namespace="team", name="j", subresource=None, change=_without_finalizers)
    assert [
        (event.type, event.object["metadata"]["name"])
        for event in objects.log(resources.NAMESPACES).since(before) or []
    ] == [
        ("MODIFIED", "team"),
        ("DELETED", "team"),
    ]
    assert [event.type for event in objects.log(resources.JOBS).since(before) or []] == ["DELETED"]


def test_a_node_keeps_the_status_it_is_created_with() -> None:
    """A Node created with its status (as a kubelet registers it, or ``kubectl apply -f`` of a Node manifest
    with ``status.allocatable``) keeps it, as kube-apiserver's node strategy does; a Job's status is still
    dropped on create (its strategy resets it)."""
    objects = make_store()
    status = {"allocatable": {"cpu": "4", "memory": "8Gi"}, "conditions": [{"type": "Ready", "status": "True"}]}
    node = objects.create(resources.NODES, namespace=None, body={"metadata": {"name": "n1"}, "status": status})
    assert node["status"] == status
    assert objects.get(resources.NODES, namespace=None, name="n1")["status"] == status
    job = objects.create(
        resources.JOBS, namespace="default", body={"metadata": {"name": "j"}, "spec": {}, "status": {"active": 3}}
    )
    assert "status" not in job
