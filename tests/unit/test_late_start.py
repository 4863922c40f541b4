"""The start of pod group members that arrive after their group was admitted (services/dispatcher/core.py
late_start): a StatefulSet's pods come one by one, a serving group's replacements come back gated, and Kueue's
pod group reconciler ungates them while the workload is admitted (pod_controller.go)."""

import asyncio

import msgspec

from kueue_es.events import models, types
from kueue_es.jobframework.annotations import IS_GROUP_WORKLOAD_ANNOTATION
from kueue_es.services.dispatcher import core

REF = types.WorkloadRef(namespace="ns", name="statefulset-web-abcde", uid="u1")
RF = types.ResourceFlavorObserved(
    flavor=models.ResourceFlavor(
        metadata=models.ObjectMeta(name="rf"), spec=models.ResourceFlavorSpec(node_labels={"pool": "a"})
    )
)


def observed(*, group: bool = True, name: str = REF.name) -> types.WorkloadObserved:
    annotations = {IS_GROUP_WORKLOAD_ANNOTATION: "true"} if group else {}
    return types.WorkloadObserved(
        workload=models.Workload(
            metadata=models.ObjectMeta(name=name, namespace="ns", uid="u1", annotations=annotations),
            spec=models.WorkloadSpec(
                queue_name="lq", pod_sets=[models.PodSet(name="main", count=3, requests={"cpu": 100})]
            ),
            owner=models.OwnerReference(api_version="v1", kind="Pod", name="web-0", uid="pod-0"),
        )
    )


def admitted(view: core.DispatchState, first: types.WorkloadObserved, *, ref: types.WorkloadRef = REF) -> int:
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 300}, count=3)
    events: list[types.Event] = [
        RF,
        first,
        types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=1),
        types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=2),
    ]
    for seq, event in enumerate(events, start=1):
        core.fold(view, event, seq=seq)
    return len(events)


def test_an_admitted_started_group_starts_its_late_pods_on_the_flavor() -> None:
    view = core.DispatchState()
    seq = admitted(view, observed())
    action = core.late_start(view, REF.key)
    assert action is not None
    assert (action.group, action.namespace, action.pod_name, action.workload) == (REF.name, "ns", "", REF)
    pod = {"metadata": {"name": "web-1"}, "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}}
    patch = action.patch(pod, pod_set="main")
    assert patch is not None and patch["spec"]["nodeSelector"] == {"pool": "a"}
    assert patch["spec"]["schedulingGates"] is None
    assert action.patch({"metadata": {}, "spec": {}}, pod_set="main") is None  # already started

    # being evicted: nothing more starts
    core.fold(
        view, types.EvictionRequested(workload=REF, cluster_queue="cq", message="preempted", at_ms=3), seq=seq + 1
    )
    assert core.late_start(view, REF.key) is None


def test_a_statefulsets_gated_pods_get_its_local_queue_before_they_start() -> None:
    """statefulset_reconciler.go Reconcile runs syncQueueLabel before ungatePods: a StatefulSet's group's gated pod
    naming another LocalQueue is relabelled to its Workload's first, in a write of its own (Kueue's pod webhook
    refuses the change on a pod no longer gated); nothing for a pod that names it, a started pod, or a group whose
    Workload is no StatefulSet's."""
    sts_marks = observed()
    meta = sts_marks.workload.metadata
    marked = models.ObjectMeta(
        name=meta.name,
        namespace=meta.namespace,
        uid=meta.uid,
        labels={"kueue.x-k8s.io/job-uid": "sts-uid"},
        annotations={
            **meta.annotations,
            "kueue.x-k8s.io/job-owner-gvk": "apps/v1, Kind=StatefulSet",
            "kueue.x-k8s.io/job-owner-name": "web",
        },
    )
    view = core.DispatchState()
    admitted(view, types.WorkloadObserved(workload=msgspec.structs.replace(sts_marks.workload, metadata=marked)))
    action = core.late_start(view, REF.key)
    assert action is not None and action.queue == "lq"
    gated = {"kueue.x-k8s.io/admission"}
    pod = {
        "metadata": {"name": "web-1", "labels": {"kueue.x-k8s.io/queue-name": "old"}},
        "spec": {"schedulingGates": [{"name": name} for name in gated]},
    }
    assert action.relabel(pod) == {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "lq"}}}
    start = action.patch(pod, pod_set="main")
    assert start is not None and "kueue.x-k8s.io/queue-name" not in start["metadata"]["labels"]
    assert action.relabel({**pod, "metadata": {"name": "web-1", "labels": {"kueue.x-k8s.io/queue-name": "lq"}}}) is None
    assert action.relabel({**pod, "spec": {}}) is None  # started

    plain = core.DispatchState()
    admitted(plain, observed())
    other = core.late_start(plain, REF.key)
    assert other is not None and other.queue == "" and other.relabel(pod) is None


def test_nothing_for_a_single_pod_or_a_group_not_admitted() -> None:
    view = core.DispatchState()
    admitted(
        view,
        observed(group=False, name="pod-web-0-abcde"),
        ref=types.WorkloadRef(namespace="ns", name="pod-web-0-abcde", uid="u1"),
    )
    assert core.late_start(view, "ns/pod-web-0-abcde") is None
    pending = core.DispatchState()
    core.fold(pending, observed(), seq=1)
    assert core.late_start(pending, REF.key) is None
    assert core.late_start(pending, "ns/unknown") is None


def test_excess_pods_are_the_newest_gated_ones_kept_last_as_kueue_sorts_them() -> None:
    """pod_controller.go sortActivePods: pods with Kueue's finalizer kept first, then ungated ones, then the
    oldest; a Succeeded pod counts (partitionPods: isPodRunnableOrSucceeded), a Failed one and one deleted
    before it got a node do not. Before, a Succeeded pod did not count, so a pod beyond the count of a group
    whose members had succeeded was started."""
    from kueue_es.jobframework.pods import POD_FINALIZER, excess_pods

    def pod(name: str, created: str, *, gated: bool = False, finalizer: bool = False, phase: str = "") -> dict:
        meta = {"name": name, "creationTimestamp": created, "finalizers": [POD_FINALIZER] if finalizer else []}
        spec = {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]} if gated else {}
        return {"metadata": meta, "spec": spec, "status": {"phase": phase} if phase else {}}

    deleted_gated = pod("deleted-gated", "2026-01-01T00:00:02Z", gated=True)
    deleted_gated["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:03Z"
    members = [
        pod("old-gated", "2026-01-01T00:00:01Z", gated=True),
        pod("new-running", "2026-01-01T00:00:05Z"),
        pod("newest-gated", "2026-01-01T00:00:09Z", gated=True),
        pod("oldest-running", "2026-01-01T00:00:00Z"),
        pod("done", "2026-01-01T00:00:00Z", phase="Succeeded"),
        pod("failed", "2026-01-01T00:00:00Z", phase="Failed"),
        deleted_gated,
        pod("finalized-gated", "2026-01-01T00:00:10Z", gated=True, finalizer=True),
    ]
    names = [p["metadata"]["name"] for p in excess_pods(members, 4)]
    assert names == ["old-gated", "newest-gated"]
    assert [p["metadata"]["name"] for p in excess_pods(members, 3)] == ["new-running", "old-gated", "newest-gated"]
    assert excess_pods(members, 6) == []


def _with_marks(first: types.WorkloadObserved, *, labels: dict, annotations: dict) -> types.WorkloadObserved:
    meta = first.workload.metadata
    marked = msgspec.structs.replace(
        meta, labels={**meta.labels, **labels}, annotations={**meta.annotations, **annotations}
    )
    return types.WorkloadObserved(workload=msgspec.structs.replace(first.workload, metadata=marked))


def test_a_group_on_a_prebuilt_workload_keeps_its_excess_pods_gated() -> None:
    """Kueue's StatefulSet and LeaderWorkerSet pods name their group's Workload in
    ``kueue.x-k8s.io/prebuilt-workload-name``, as do the pods of a group that adopted one: the job reconciler takes
    the prebuilt path (reconciler.go ensureOneWorkload), which never calls removeExcessPods (pod_controller.go). A
    user's trial scaled a StatefulSet past its Workload's count with ``kubectl scale``: its excess pod was deleted,
    made again by the StatefulSet controller and deleted again, hundreds of times. A plain group's excess pods are
    still deleted (ConstructComposableWorkload, FindMatchingWorkloads)."""
    from kueue_es.services.dispatcher import job_writes

    sts = _with_marks(
        observed(),
        labels={"kueue.x-k8s.io/job-uid": "sts-uid"},
        annotations={
            "kueue.x-k8s.io/job-owner-gvk": "apps/v1, Kind=StatefulSet",
            "kueue.x-k8s.io/job-owner-name": "web",
        },
    )
    lws = _with_marks(
        observed(),
        labels={"kueue.x-k8s.io/job-uid": "lws-uid"},
        annotations={
            "kueue.x-k8s.io/job-owner-gvk": "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet",
            "kueue.x-k8s.io/job-owner-name": "web",
        },
    )
    adopted = _with_marks(observed(), labels={}, annotations={"kueue.x-k8s.io/prebuilt-workload-name": REF.name})
    kept = {}
    for name, first in (("sts", sts), ("lws", lws), ("adopted", adopted), ("plain", observed())):
        view = core.DispatchState()
        admitted(view, first)
        action = core.late_start(view, REF.key)
        assert action is not None
        kept[name] = action.keep_excess
    assert kept == {"sts": True, "lws": True, "adopted": True, "plain": False}

    # the writer also reads the pods themselves: any naming a prebuilt Workload keeps the group's excess gated
    def pod(name: str, *, prebuilt: bool) -> dict:
        annotations = {"kueue.x-k8s.io/prebuilt-workload-name": REF.name} if prebuilt else {}
        meta = {"name": name, "creationTimestamp": f"2026-01-01T00:00:0{name[-1]}Z", "annotations": annotations}
        return {"metadata": meta, "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]}}

    class NoWrites:
        async def delete_object(self, *_: object, **__: object) -> None:
            raise AssertionError("a pod of a group on a prebuilt Workload was deleted")

        patch_object = delete_object

    class Limiter:
        async def acquire(self, *_: object) -> None:
            return None

    plain = core.StartPods(workload=REF, namespace="ns", group=REF.name, total=1)
    members = [pod("web-0", prebuilt=True), pod("web-1", prebuilt=True)]
    left = asyncio.run(job_writes.delete_excess(NoWrites(), Limiter(), plain, members))  # type: ignore[arg-type]
    assert left == {"web-1"}
