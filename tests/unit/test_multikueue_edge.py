"""The MultiKueue edge's pure parts: the remote copies, the status mirror, the plan (SEMANTICS-ADVANCED E)."""

from __future__ import annotations

import asyncio
import copy

import msgspec
import pytest

from kueue_es.events import codec, models, types
from kueue_es.jobframework import jobs, webhooks, workloads
from kueue_es.services.multikueue_edge import core, remote
from kueue_es.services.multikueue_edge.service import remote_observation

LOCAL_WORKLOAD = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {
        "name": "job-sample-abcde",
        "namespace": "default",
        "uid": "manager-uid",
        "resourceVersion": "41",
        "generation": 2,
        "creationTimestamp": "2026-12-02T10:00:00Z",
        "labels": {"kueue.x-k8s.io/job-uid": "job-uid-1", "kueue.x-k8s.io/queue-name": "user-queue"},
        "annotations": {"note": "kept"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "sample", "uid": "job-uid-1"}],
        "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        "managedFields": [{"manager": "kueue-es"}],
    },
    "spec": {"queueName": "user-queue", "podSets": [{"name": "main", "count": 3, "template": {"spec": {}}}]},
    "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]},
}

LOCAL_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "sample",
        "namespace": "default",
        "uid": "job-uid-1",
        "resourceVersion": "7",
        "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
    },
    "spec": {
        "managedBy": "kueue.x-k8s.io/multikueue",
        "suspend": False,
        "parallelism": 3,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "job-uid-1"}},
        "template": {
            "metadata": {
                "labels": {"batch.kubernetes.io/controller-uid": "job-uid-1", "job-name": "sample", "app": "demo"}
            },
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    },
    "status": {"active": 0},
}


def test_remote_workload_keeps_the_spec_and_labels_the_origin():
    out = remote.remote_workload(LOCAL_WORKLOAD, origin="mk-origin")
    assert out["spec"] == LOCAL_WORKLOAD["spec"] and out["spec"] is not LOCAL_WORKLOAD["spec"]
    assert out["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "user-queue", remote.ORIGIN_LABEL: "mk-origin"}
    assert out["metadata"]["name"] == "job-sample-abcde" and out["metadata"]["namespace"] == "default"
    assert out["metadata"]["annotations"] == {"note": "kept"}
    for dropped in ("uid", "resourceVersion", "ownerReferences", "finalizers", "managedFields", "creationTimestamp"):
        assert dropped not in out["metadata"]
    assert "status" not in out


def test_remote_workload_does_not_change_its_input():
    before = copy.deepcopy(LOCAL_WORKLOAD)
    remote.remote_workload(LOCAL_WORKLOAD, origin="o")
    assert LOCAL_WORKLOAD == before


def test_remote_workload_names_the_missing_field():
    with pytest.raises(remote.RemoteCopyError, match="default/w: spec is required"):
        remote.remote_workload({"metadata": {"name": "w", "namespace": "default"}}, origin="o")


def test_remote_job_clears_managed_by_and_the_selector_and_names_the_workload():
    out = remote.remote_job(LOCAL_JOB, workload_name="job-sample-abcde", origin="multikueue")
    assert "managedBy" not in out["spec"] and "selector" not in out["spec"]
    assert out["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "user-queue",
        remote.PREBUILT_WORKLOAD_LABEL: "job-sample-abcde",
        remote.ORIGIN_LABEL: "multikueue",
    }
    assert out["spec"]["template"]["metadata"]["labels"] == {"app": "demo"}
    assert "annotations" not in out["metadata"] and "uid" not in out["metadata"] and "status" not in out
    assert LOCAL_JOB["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"  # the input is untouched


def test_a_workload_name_longer_than_a_label_value_is_named_by_annotation():
    """Kueue #13636 (jobframework SetPrebuiltWorkloadName): a Workload name longer than a label value may be (63
    characters) names the remote job's prebuilt Workload by the ``kueue.x-k8s.io/prebuilt-workload-name``
    annotation, which the worker's Kueue reads first; as a label the API server refuses the copy, so the job
    never ran on the worker. A short name stays a label; either way the other key copied from the manager's job
    is dropped, so the worker reads the one written."""
    long_name = "job-" + "a-very-long-job-name-" * 3 + "abcde"
    assert len(long_name) > 63
    local = copy.deepcopy(LOCAL_JOB)
    local["metadata"]["labels"][remote.PREBUILT_WORKLOAD_LABEL] = "stale"
    out = remote.remote_job(local, workload_name=long_name, origin="multikueue")
    assert out["metadata"]["annotations"] == {remote.PREBUILT_WORKLOAD_LABEL: long_name}
    assert out["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "user-queue", remote.ORIGIN_LABEL: "multikueue"}
    assert all(len(v) <= 63 for v in out["metadata"]["labels"].values())
    assert workloads.prebuilt_workload(out) == long_name
    local["metadata"]["annotations"] = {remote.PREBUILT_WORKLOAD_LABEL: "stale"}
    short = remote.remote_job(local, workload_name="job-sample-abcde", origin="multikueue")
    assert "annotations" not in short["metadata"]
    assert workloads.prebuilt_workload(short) == "job-sample-abcde"


async def test_the_gc_finds_a_copy_named_by_annotation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GC deletes the remote jobs of this origin that name the copy as their prebuilt Workload, by label or
    (a name longer than 63 characters, Kueue #13636) by annotation, and none naming another."""
    from kueue_es.services.kube import client

    long_name = "job-" + "a-very-long-job-name-" * 3 + "abcde"
    ours = {remote.ORIGIN_LABEL: "multikueue"}
    jobs = [
        {"metadata": {"name": "long", "labels": ours, "annotations": {remote.PREBUILT_WORKLOAD_LABEL: long_name}}},
        {"metadata": {"name": "other", "labels": {**ours, remote.PREBUILT_WORKLOAD_LABEL: "other-wl"}}},
    ]
    deleted: list[tuple[str, str]] = []

    async def list_objects(api, ref, *, namespace=None, label_selector="", **_kw):
        assert label_selector == f"{remote.ORIGIN_LABEL}=multikueue"
        return (jobs if ref.kind == "Job" else []), "1"

    async def delete_object(api, ref, *, namespace, name, **_kw):
        deleted.append((ref.kind, name))

    monkeypatch.setattr(client, "list_objects", list_objects)
    monkeypatch.setattr(client, "delete_object", delete_object)
    edge = _pod_edge()
    ref = types.WorkloadRef(namespace="default", name=long_name, uid="u")
    await edge._write(core.DeleteRemote(cluster="worker1", workload=ref, why="garbage", decision_seq=0))
    assert deleted == [("Job", "long"), ("Workload", long_name)]


def test_remote_jobset_keeps_its_own_selectors():
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "default", "labels": {}},
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue", "replicatedJobs": [{"name": "w", "replicas": 1}]},
    }
    out = remote.remote_job(jobset, workload_name="jobset-js-1", origin="o")
    assert out["kind"] == "JobSet" and "managedBy" not in out["spec"]
    assert out["spec"]["replicatedJobs"] == jobset["spec"]["replicatedJobs"]


def _job(*, suspend: bool, status: dict) -> dict:
    return {"kind": "Job", "spec": {"suspend": suspend}, "status": status}


FINISHED = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 3}


@pytest.mark.parametrize(
    ("local_suspended", "remote_suspended", "remote_status", "copied"),
    [
        (False, False, {"active": 3}, True),  # the manager's job runs: copy
        (True, True, {"active": 0, "ready": 0}, True),  # both suspended: copy
        (True, False, {"active": 3}, False),  # manager suspended, remote runs: keep the manager's
        (True, False, FINISHED, True),  # ... unless the remote finished
    ],
)
def test_batch_job_status_is_mirrored_by_kueues_rules(local_suspended, remote_suspended, remote_status, copied):
    local = _job(suspend=local_suspended, status={})
    out = remote.mirrored_job_status(local, _job(suspend=remote_suspended, status=remote_status))
    assert (out == remote_status) if copied else out is None


def test_equal_statuses_need_no_write():
    assert (
        remote.mirrored_job_status(_job(suspend=False, status=FINISHED), _job(suspend=False, status=FINISHED)) is None
    )


def test_kubeconfig_source_secret_by_default_and_path():
    secret = remote.kubeconfig_source(
        {"metadata": {"name": "w1"}, "spec": {"clusterSource": {"kubeConfig": {"location": "s"}}}}
    )
    assert secret == remote.KubeconfigSource(location="s", path=False)
    path = remote.kubeconfig_source(
        {
            "metadata": {"name": "w1"},
            "spec": {"clusterSource": {"kubeConfig": {"location": "/k", "locationType": "Path"}}},
        }
    )
    assert path.path and path.location == "/k"
    with pytest.raises(remote.RemoteCopyError, match="MultiKueueCluster w2: spec.clusterSource.kubeConfig.location"):
        remote.kubeconfig_source(
            {"metadata": {"name": "w2"}, "spec": {"clusterSource": {"clusterProfileRef": {"name": "p"}}}}
        )


def test_reconnect_backoff_doubles_seven_times():
    assert [remote.reconnect_delay_seconds(n) for n in (1, 2, 3, 7, 8, 20)] == [5, 10, 20, 320, 320, 320]


REF = types.WorkloadRef(namespace="default", name="wl", uid="u")
JOB = core.JobRef(api_version="batch/v1", kind="Job", name="sample")


def _local(**kw) -> core.LocalWorkload:
    return core.LocalWorkload(ref=REF, job=JOB, **{"live": True, **kw})


def _copy(*, admitted: bool = False, has_job: bool = False) -> core.RemoteCopy:
    return core.RemoteCopy(namespace="default", name="wl", admitted=admitted, has_job=has_job)


def test_plan_copies_to_every_nominated_connected_worker():
    local = _local(nominated=("w1", "w2", "w3"), nominated_seq=10)
    actions = core.plan({"default/wl": local}, {"w1": {"default/wl": _copy()}}, connected={"w1", "w2"})
    assert actions == [core.CreateWorkload(cluster="w2", workload=REF, decision_seq=10)]


def test_plan_removes_copies_of_workers_no_longer_nominated():
    local = _local(nominated=("w2",), nominated_seq=12)
    actions = core.plan(
        {"default/wl": local}, {"w1": {"default/wl": _copy()}, "w2": {"default/wl": _copy()}}, connected={"w1", "w2"}
    )
    assert actions == [core.DeleteRemote(cluster="w1", workload=REF, why="not-nominated", decision_seq=12, job=JOB)]


def test_plan_the_winner_keeps_its_copy_and_gets_the_job():
    local = _local(nominated=("w1", "w2"), nominated_seq=10, chosen="w2", chosen_seq=20)
    remote_view = {"w1": {"default/wl": _copy()}, "w2": {"default/wl": _copy(admitted=True)}}
    actions = core.plan({"default/wl": local}, remote_view, connected={"w1", "w2"})
    assert actions == [
        core.DeleteRemote(cluster="w1", workload=REF, why="lost-race", decision_seq=20, job=JOB),
        core.CreateJob(cluster="w2", workload=REF, job=JOB, decision_seq=20),
    ]
    remote_view["w2"]["default/wl"] = _copy(admitted=True, has_job=True)
    assert core.plan({"default/wl": local}, {"w2": remote_view["w2"]}, connected={"w1", "w2"}) == []


def test_plan_a_finished_or_evicted_workload_leaves_nothing_behind():
    local = _local(live=False, nominated=("w1",), nominated_seq=10, chosen="w1", chosen_seq=20)
    actions = core.plan(
        {"default/wl": local}, {"w1": {"default/wl": _copy(admitted=True, has_job=True)}}, connected={"w1"}
    )
    assert actions == [core.DeleteRemote(cluster="w1", workload=REF, why="local-done", decision_seq=20, job=JOB)]


def test_plan_a_copy_of_an_earlier_nomination_goes_before_a_new_one_is_made():
    """Nominated again right after a Retry (the reset and the new nomination folded at once), the workload's old
    copy on w1 is not this nomination's: it goes, and w1 gets a new copy only once the old one is gone."""
    old = core.RemoteCopy(namespace="default", name="wl", uid="old-uid", admitted=True, has_job=True)
    local = _local(nominated=("w1", "w2"), nominated_seq=30, stale_uids=frozenset({"old-uid"}))
    actions = core.plan({"default/wl": local}, {"w1": {"default/wl": old}}, connected={"w1", "w2"})
    assert actions == [
        core.DeleteRemote(cluster="w1", workload=REF, why="stale", decision_seq=30, job=JOB),
        core.CreateWorkload(cluster="w2", workload=REF, decision_seq=30),
    ]
    fresh = core.RemoteCopy(namespace="default", name="wl", uid="new-uid")
    assert core.plan({"default/wl": local}, {"w1": {"default/wl": fresh}}, connected={"w1", "w2"}) == [
        core.CreateWorkload(cluster="w2", workload=REF, decision_seq=30)
    ]


async def test_a_reset_hides_the_old_copies_from_the_decider() -> None:
    """A Retry makes the copies the workload has then stale: the edge reports them absent (so the decider cannot
    choose one that shows Admitted again), also when the worker's watch changes them later, and forgets them
    once they are gone."""
    from kueue_es.events.bus.memory import MemoryBus
    from kueue_es.services.multikueue_edge import service

    bus = MemoryBus()
    edge = service.Edge(bus=bus, api=object(), namespace="kueue-es")  # type: ignore[arg-type]
    published: list[types.RemoteWorkloadObserved] = []

    async def publish(fact: types.RemoteWorkloadObserved) -> None:
        published.append(fact)

    edge._publish_fact = publish  # type: ignore[method-assign]
    worker = service.Worker(name="w1", spec={}, api=object())  # type: ignore[arg-type]
    edge.workers["w1"] = worker
    admitted = {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-12-05T12:00:00Z"}
    copy = {
        "metadata": {"namespace": "default", "name": "wl", "uid": "old-uid"},
        "status": {"conditions": [admitted]},
    }
    await edge._observe(worker, copy, deleted=False)
    assert published[-1].present and published[-1].admitted

    edge._accepted(40, types.MultiKueueCheckRetry(workload=REF, check="mk", message="evicted", at_ms=1), edge.state)
    assert edge.stale == {"default/wl": {"old-uid"}}
    await edge._hide_stale()
    assert not published[-1].present and len(published) == 2
    await edge._hide_stale()
    assert len(published) == 2  # said once
    await edge._observe(worker, copy, deleted=False)  # the worker shows it again, Admitted
    assert len(published) == 2 and not edge.workers["w1"].copies["default/wl"].admitted

    await edge._observe(worker, copy, deleted=True)
    edge.prune()
    assert edge.stale == {}
    await edge._observe(worker, {**copy, "metadata": {**copy["metadata"], "uid": "new-uid"}}, deleted=False)
    assert published[-1].present and published[-1].admitted  # a new copy is this nomination's


def test_plan_writes_nothing_to_an_unreachable_worker():
    local = _local(nominated=("w1",), nominated_seq=10)
    assert core.plan({"default/wl": local}, {}, connected=set()) == []


def test_plan_collects_garbage_only_when_asked_and_only_unknown_workloads():
    orphan = core.RemoteCopy(namespace="team", name="gone")
    known = core.RemoteCopy(namespace="team", name="finished-long-ago")
    remote_view = {"w1": {"team/gone": orphan, "team/finished-long-ago": known}}
    assert core.plan({}, remote_view, connected={"w1"}) == []
    actions = core.plan({}, remote_view, connected={"w1"}, collect_garbage=True, known={"team/finished-long-ago"})
    assert actions == [
        core.DeleteRemote(
            cluster="w1", workload=types.WorkloadRef(namespace="team", name="gone"), why="garbage", decision_seq=0
        )
    ]


def test_remote_observation_reads_the_conditions():
    obj = {
        "metadata": {"name": "wl", "namespace": "default"},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-12-02T10:00:01Z"},
                {"type": "Evicted", "status": "False", "reason": "Preempted"},
            ]
        },
    }
    fact = remote_observation("w1", obj, ref=REF, now_ms=5)
    assert fact.present and fact.quota_reserved and fact.admitted and not fact.evicted
    assert fact.admitted_at_ms == 1_796_205_601_000  # 2026-12-02T10:00:01Z
    gone = remote_observation("w1", None, ref=REF, now_ms=6)
    assert not gone.present and not gone.admitted and gone.cluster == "w1"


def test_remote_observation_names_the_pod_sets_the_worker_placed():
    """multikueue/workload.go needsDelayedTopologyUpdate reads the copy's status.admission: the pod sets with a
    topologyAssignment are the ones the worker placed; none placed leaves the field out (earlier bytes)."""
    admission = {
        "clusterQueue": "cq",
        "podSetAssignments": [
            {"name": "workers", "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": []}},
            {"name": "launcher", "count": 1},
            {"name": "driver", "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": []}},
        ],
    }
    obj = {"status": {"conditions": [{"type": "Admitted", "status": "True"}], "admission": admission}}
    assert remote_observation("w1", obj, ref=REF, now_ms=5).topology_assigned == ["driver", "workers"]
    del admission["podSetAssignments"][0]["topologyAssignment"], admission["podSetAssignments"][2]["topologyAssignment"]
    unplaced = remote_observation("w1", obj, ref=REF, now_ms=5)
    assert unplaced.topology_assigned is msgspec.UNSET
    assert b"topologyAssigned" not in codec.encode(unplaced)


# -- the job side --------------------------------------------------------------------------------


def test_uses_multikueue_reads_the_checks_controller():
    cq = {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "sample-multikueue"}]}}}
    assert webhooks.uses_multikueue(cq, {"sample-multikueue": "kueue.x-k8s.io/multikueue"})
    assert not webhooks.uses_multikueue(cq, {"sample-multikueue": "kueue.x-k8s.io/provisioning-request"})
    assert not webhooks.uses_multikueue({"spec": {}}, {"sample-multikueue": "kueue.x-k8s.io/multikueue"})


def test_webhook_defaults_managed_by_for_a_multikueue_queue_only():
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"template": {"spec": {"containers": []}}},
    }
    mk = webhooks.default("batch/v1", "Job", job, context=webhooks.Context(multikueue_queue=True))
    assert mk["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue" and mk["spec"]["suspend"] is True
    plain = webhooks.default("batch/v1", "Job", job, context=webhooks.Context())
    assert "managedBy" not in plain["spec"]
    own = copy.deepcopy(job)
    own["spec"]["managedBy"] = "example.com/mine"
    kept = webhooks.default("batch/v1", "Job", own, context=webhooks.Context(multikueue_queue=True))
    assert kept["spec"]["managedBy"] == "example.com/mine"


def test_a_job_naming_a_prebuilt_workload_adopts_it():
    job = copy.deepcopy(LOCAL_JOB)
    job["metadata"]["labels"][remote.PREBUILT_WORKLOAD_LABEL] = "job-sample-abcde"
    assert jobs.job_facts(job) is None
    job["status"] = {
        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-02T10:00:00Z"}]
    }
    fact = jobs.job_facts(job)
    assert isinstance(fact, types.WorkloadFinished)
    assert fact.workload == types.WorkloadRef(namespace="default", name="job-sample-abcde", uid="") and fact.succeeded


def test_a_jobset_naming_a_prebuilt_workload_adopts_it():
    from kueue_es.jobframework import integrations

    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "js",
            "namespace": "default",
            "uid": "js-uid",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue", remote.PREBUILT_WORKLOAD_LABEL: "jobset-js-abcde"},
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {"spec": {"parallelism": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}},
                }
            ]
        },
    }
    integration = integrations.registry()["JobSet"]
    assert integrations.facts(integration, jobset) is None
    jobset["status"] = {"conditions": [{"type": "Completed", "status": "True", "message": "done"}]}
    fact = integrations.facts(integration, jobset)
    assert isinstance(fact, types.WorkloadFinished) and fact.workload.name == "jobset-js-abcde" and fact.succeeded
    del jobset["metadata"]["labels"][remote.PREBUILT_WORKLOAD_LABEL]
    assert integrations.facts(integration, jobset).workload.name.startswith("jobset-js-")


def test_the_edge_folds_only_verified_decisions_and_forgets_done_workloads():
    """WorkersNominated / RemoteAdmissionChosen set what the edge acts on, a Retry resets it; a workload
    the fold does not hold (gone) with no copy left is forgotten (Edge.prune)."""
    from kueue_es import deciders
    from kueue_es.services import runtime
    from kueue_es.services.multikueue_edge.service import Edge
    from tests.builders import FoldedLog

    log = FoldedLog()
    edge = Edge(bus=None, api=None, namespace="kueue-system")  # type: ignore[arg-type]
    ref = types.WorkloadRef(namespace="default", name="wl")

    def commit(*outputs: types.Output) -> None:
        head_seq = max((m.seq for m in log.messages if ".head." in m.subject), default=0)
        head, rest = runtime.build_batch(
            deciders.MULTIKUEUE, outputs=list(outputs), basis_seq=len(log.messages), head_seq=head_seq, now_ms=1
        )
        first = len(log.messages)
        log.append(head, *rest)
        for message in log.messages[first:]:
            edge.take(message)

    commit(types.WorkersNominated(workload=ref, check="mk", clusters=["w1", "w2"]))
    assert (edge.decided["default/wl"].nominated, edge.decided["default/wl"].chosen) == (("w1", "w2"), "")
    commit(types.RemoteAdmissionChosen(workload=ref, check="mk", cluster="w2", message="admitted on w2"))
    assert edge.decided["default/wl"].chosen == "w2" and edge.decided["default/wl"].chosen_seq > 0
    assert edge.locals()["default/wl"].live is False  # the fold holds no such workload
    commit(types.MultiKueueCheckRetry(workload=ref, check="mk", message="Admitting remote lost"))
    assert "default/wl" not in edge.decided
    commit(types.WorkersNominated(workload=ref, check="mk", clusters=["w1"]))
    edge.prune()
    assert "default/wl" not in edge.decided and not log.orphans


def test_an_unreachable_worker_is_told_in_the_root_causes_words() -> None:
    """The MultiKueueCluster's Active=False message named a Python repr of the wrapping errors
    ("ConnectionFailedError: GET ... ClientConnectorError(ConnectionKey(host=..."): found by a new user."""
    from kueue_es.services.kube import errors
    from kueue_es.services.multikueue_edge.service import connection_failure

    root = ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 41525)")
    try:
        try:
            raise root
        except OSError as exc:
            raise errors.ConnectionFailedError(f"GET /api/v1/namespaces failed: {exc!r}") from exc
    except errors.ConnectionFailedError as wrapped:
        message = connection_failure(wrapped)
    assert message == "cannot reach the worker's API server: [Errno 111] Connect call failed ('127.0.0.1', 41525)"
    assert "ConnectionFailedError" not in message and len(connection_failure(ValueError("x" * 2000))) == 512


async def test_a_copy_waits_quietly_for_the_managers_workload_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nominated before the manager's dispatcher wrote its Workload object, the copy is tried again at the
    next tick: no DispatchFailed 404 on the log for it (a new user found 22 of them per demo run)."""
    from kueue_es.events.bus.memory import MemoryBus
    from kueue_es.services.kube import client, errors
    from kueue_es.services.multikueue_edge import core as edge_core
    from kueue_es.services.multikueue_edge import service

    async def not_yet(*_args: object, **_kwargs: object) -> dict:
        raise errors.NotFoundError(status=404, reason="NotFound", message='workloads "w1" not found')

    monkeypatch.setattr(client, "get_object", not_yet)
    bus = MemoryBus()
    edge = service.Edge(bus=bus, api=object(), namespace="kueue-es")  # type: ignore[arg-type]
    edge.workers["worker-a"] = service.Worker(name="worker-a", spec={}, api=object())  # type: ignore[arg-type]
    ref = types.WorkloadRef(namespace="default", name="w1")
    await edge._write(edge_core.CreateWorkload(cluster="worker-a", workload=ref, decision_seq=7))
    assert await bus.last_seq() == 0  # nothing recorded: not a failed remote write


async def test_the_remote_job_is_left_to_the_workers_kueue_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """The edge creates the remote Job naming its admitted copy and writes nothing more to it: the worker's Kueue
    (kueue-es too) adopts the copy and starts the Job with the admission's node selectors, as a job whose prebuilt
    Workload is admitted (the edge once unsuspended it itself, a stand-in: the worker's pods then got no flavor)."""
    from kueue_es.events.bus.memory import MemoryBus
    from kueue_es.services.kube import client
    from kueue_es.services.multikueue_edge import core as edge_core
    from kueue_es.services.multikueue_edge import service

    manager_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sample", "namespace": "default", "uid": "job-1", "labels": {}},
        "spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    written: list[tuple[str, object]] = []

    async def get_object(*_args: object, **_kwargs: object) -> dict:
        return manager_job

    async def create_object(_api: object, _ref: object, *, namespace: str, body: dict) -> dict:
        written.append(("create", body))
        return body

    async def patch_object(*_args: object, **kwargs: object) -> dict:
        written.append(("patch", kwargs.get("patch")))
        return {}

    monkeypatch.setattr(client, "get_object", get_object)
    monkeypatch.setattr(client, "create_object", create_object)
    monkeypatch.setattr(client, "patch_object", patch_object)
    bus = MemoryBus()
    edge = service.Edge(bus=bus, api=object(), namespace="kueue-es")  # type: ignore[arg-type]
    edge.workers["worker-a"] = service.Worker(name="worker-a", spec={}, api=object())  # type: ignore[arg-type]
    await edge._write(edge_core.CreateJob(cluster="worker-a", workload=REF, job=JOB, decision_seq=20))
    [(what, body)] = written
    assert what == "create" and body["spec"]["suspend"] is True  # type: ignore[index]
    assert body["metadata"]["labels"][remote.PREBUILT_WORKLOAD_LABEL] == "wl"  # type: ignore[index]
    assert await bus.last_seq() == 1  # its DispatchApplied


# -- the kubeconfig checks of Kueue's setup_test.go (test/integration/multikueue) -------------------


def _kubeconfig(*, cluster: dict | None = None, user: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": {"server": "https://127.0.0.1:6443", **(cluster or {})}}],
        "users": [{"name": "u", "user": user or {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "default-cluster", "user": "u"}}],
        "current-context": "c",
    }


@pytest.mark.parametrize(
    ("cluster", "user", "problem"),
    [
        (None, None, None),
        ({"server": "https://worker1.example.com"}, None, None),
        (
            {"certificate-authority": "/some/random/path"},
            None,
            "certificate-authority file paths are not allowed, use certificate-authority-data"
            " for cluster default-cluster",
        ),
        (None, {"tokenFile": "/var/run/token"}, "tokenFile is not allowed"),
        (
            {"insecure-skip-tls-verify": True},
            None,
            "insecure TLS verification is not allowed for cluster default-cluster",
        ),
        ({"server": ""}, None, "server URL is required for cluster default-cluster"),
        ({"server": "https://bad_host:6443"}, None, "untrusted server endpoint"),
        (None, {"username": "a", "password": "b"}, "basic auth is not allowed"),
        (None, {"exec": {"command": "x"}}, "exec plugins are not allowed"),
        (None, {"auth-provider": {"name": "oidc"}}, "auth providers are not allowed"),
    ],
)
def test_an_insecure_kubeconfig_is_refused_as_kueue_does(cluster, user, problem) -> None:
    """Kueue multikueuecluster.go validateKubeconfig: kueue-es connected with any kubeconfig."""
    assert remote.insecure_kubeconfig(_kubeconfig(cluster=cluster, user=user)) == problem


def test_the_demos_kubeconfig_is_secure(tmp_path) -> None:
    import yaml

    from kueue_es.services.kube import client

    client.write_kubeconfig(tmp_path / "k", server="http://127.0.0.1:4321/")
    assert remote.insecure_kubeconfig(yaml.safe_load((tmp_path / "k").read_text())) is None


@pytest.mark.parametrize(
    ("raw", "resolved", "problem"),
    [
        ("/etc/multikueue/kubeconfigs/w1", "/etc/multikueue/kubeconfigs/w1", None),
        ("/tmp/w1", "/tmp/w1", 'kubeconfig path is not under the allowed prefix: "/tmp/w1" is not under'),
        ("relative/path/file", None, "kubeconfig path is not under the allowed prefix: path must be absolute"),
        ("/etc/multikueue/kubeconfigs/../../etc/passwd", None, 'allowed prefix: path contains ".."'),
        ("/etc/multikueue/kubeconfigs/link", "/etc/passwd", "kubeconfig path is not under the allowed prefix"),
    ],
)
def test_a_path_kubeconfig_stays_under_the_allowed_prefix(raw, resolved, problem) -> None:
    """Kueue multikueuecluster.go validateKubeConfigPath (MultiKueueKubeConfigPathValidation, on by default)."""
    out = remote.path_problem(raw, resolved=resolved, prefix="/etc/multikueue/kubeconfigs")
    assert out is None if problem is None else (out is not None and problem in out)


def test_a_cluster_profile_source_names_its_gate() -> None:
    cluster = {"metadata": {"name": "w"}, "spec": {"clusterSource": {"clusterProfileRef": {"name": "p"}}}}
    off = remote.cluster_source_problem(cluster, gates={})
    assert off is not None and (off.reason, str(off)) == (
        "MultiKueueClusterProfileFeatureDisabled",
        "load client config failed: MultiKueueClusterProfile feature gate is disabled",
    )
    on = remote.cluster_source_problem(cluster, gates={"MultiKueueClusterProfile": True})
    assert on is not None and on.reason == "BadClusterProfile"
    assert (
        remote.cluster_source_problem({"spec": {"clusterSource": {"kubeConfig": {"location": "s"}}}}, gates={}) is None
    )


async def _first_status(edge, worker) -> tuple[bool, str, str]:
    """The first Active condition ``_keep_connected`` sets on ``worker`` (then stops it)."""
    seen: list[tuple[bool, str, str]] = []

    async def record(_worker, active, reason, message) -> None:
        seen.append((active, reason, message))
        raise asyncio.CancelledError

    edge._set_active = record
    with pytest.raises(asyncio.CancelledError):
        await edge._keep_connected(worker)
    return seen[0]


async def test_a_missing_secret_or_file_is_a_bad_kubeconfig(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """setup_test.go: Active=False BadKubeConfig "load client config failed: Secret ... not found" (or the
    file's open error); kueue-es said BadConfig with the API server's 404 message."""
    from kueue_es.events.bus.memory import MemoryBus
    from kueue_es.services.kube import client, errors
    from kueue_es.services.multikueue_edge import service

    async def missing(*_args: object, **_kwargs: object) -> dict:
        raise errors.NotFoundError(status=404, reason="NotFound", message='secrets "testing-secret" not found')

    monkeypatch.setattr(client, "get_object", missing)
    edge = service.Edge(bus=MemoryBus(), api=object(), namespace="kueue-es")  # type: ignore[arg-type]
    secret = service.Worker(name="w", spec={"clusterSource": {"kubeConfig": {"location": "testing-secret"}}})
    assert await _first_status(edge, secret) == (
        False,
        "BadKubeConfig",
        'load client config failed: Secret "testing-secret" not found',
    )
    path = str(tmp_path / "testing.kubeconfig")
    edge.state.configuration = models.Configuration(feature_gates={"MultiKueueKubeConfigPathValidation": False})
    file = service.Worker(name="w", spec={"clusterSource": {"kubeConfig": {"location": path, "locationType": "Path"}}})
    assert await _first_status(edge, file) == (
        False,
        "BadKubeConfig",
        f"load client config failed: open {path}: no such file or directory",
    )


async def test_an_insecure_secret_is_an_insecure_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    import base64

    import yaml

    from kueue_es.events.bus.memory import MemoryBus
    from kueue_es.services.kube import client
    from kueue_es.services.multikueue_edge import service

    text = yaml.safe_dump(_kubeconfig(cluster={"certificate-authority": "/some/random/path"}))

    async def secret(*_args: object, **_kwargs: object) -> dict:
        return {"data": {"kubeconfig": base64.b64encode(text.encode()).decode()}}

    monkeypatch.setattr(client, "get_object", secret)
    edge = service.Edge(bus=MemoryBus(), api=object(), namespace="kueue-es")  # type: ignore[arg-type]
    worker = service.Worker(name="w", spec={"clusterSource": {"kubeConfig": {"location": "testing-secret"}}})
    assert await _first_status(edge, worker) == (
        False,
        "InsecureKubeConfig",
        "load client config failed: certificate-authority file paths are not allowed, use"
        " certificate-authority-data for cluster default-cluster",
    )


# -- scheduler/scheduler_test.go "should update the workload's priority class on the worker ..." -----------


def test_plan_gives_a_kept_copy_the_managers_new_priority_class():
    """Kueue workload.go reconcileGroup step 5: a copy whose priority alone is behind is updated, not deleted;
    the edge left it with the old class and value."""
    low = core.Priority(class_name="low", value=10)
    high = core.Priority(class_name="high", value=1000)
    local = _local(chosen="w1", chosen_seq=12, priority=low)
    won = core.RemoteCopy(namespace="default", name="wl", admitted=True, has_job=True, priority=high)
    actions = core.plan({"default/wl": local}, {"w1": {"default/wl": won}}, connected={"w1"})
    assert actions == [core.UpdatePriority(cluster="w1", workload=REF, priority=low, decision_seq=12)]
    same = core.RemoteCopy(namespace="default", name="wl", admitted=True, has_job=True, priority=low)
    assert core.plan({"default/wl": local}, {"w1": {"default/wl": same}}, connected={"w1"}) == []
    # no WorkloadPriorityClass on the manager, or a Pod PriorityClass on the copy: nothing to keep in line
    assert (
        core.plan({"default/wl": _local(chosen="w1", chosen_seq=12)}, {"w1": {"default/wl": won}}, connected={"w1"})
        == []
    )
    pod_class = core.RemoteCopy(namespace="default", name="wl", admitted=True, has_job=True, priority=None)
    assert core.plan({"default/wl": local}, {"w1": {"default/wl": pod_class}}, connected={"w1"}) == []
    # a nominated copy too, and a copy on the way out is deleted, not updated
    nominated = _local(nominated=("w1", "w2"), nominated_seq=5, priority=low)
    pending = core.RemoteCopy(namespace="default", name="wl", priority=high)
    assert core.plan(
        {"default/wl": nominated},
        {"w1": {"default/wl": pending}, "w3": {"default/wl": pending}},
        connected={"w1", "w2", "w3"},
    ) == [
        core.DeleteRemote(cluster="w3", workload=REF, why="not-nominated", decision_seq=5, job=JOB),
        core.UpdatePriority(cluster="w1", workload=REF, priority=low, decision_seq=5),
        core.CreateWorkload(cluster="w2", workload=REF, decision_seq=5),
    ]


def test_a_copys_priority_is_read_and_patched_as_kueue_sets_it():
    wpc = {
        "spec": {
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
            "priority": 1000,
        }
    }
    assert remote.copy_priority(wpc) == core.Priority(class_name="high", value=1000)
    assert remote.copy_priority({"spec": {}}) == core.Priority(class_name="", value=None)
    pod = {"spec": {"priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "p"}}}
    assert remote.copy_priority(pod) is None
    assert remote.priority_patch(core.Priority(class_name="low", value=10)) == {
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "low"},
        "priority": 10,
    }


async def test_the_edge_patches_the_copys_priority_and_logs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from kueue_es.events.bus.memory import MemoryBus
    from kueue_es.services.kube import client
    from kueue_es.services.multikueue_edge import service

    patches: list[tuple[str, dict]] = []

    async def patch_object(_api, _ref, *, namespace, name, patch, **_kw) -> dict:
        patches.append((f"{namespace}/{name}", patch))
        return {}

    monkeypatch.setattr(client, "patch_object", patch_object)
    bus = MemoryBus()
    edge = service.Edge(bus=bus, api=object(), namespace="kueue-es")  # type: ignore[arg-type]
    edge.workers["w1"] = service.Worker(name="w1", spec={}, api=object())  # type: ignore[arg-type]
    low = core.Priority(class_name="low", value=10)
    await edge._write(core.UpdatePriority(cluster="w1", workload=REF, priority=low, decision_seq=12))
    assert patches == [("default/wl", {"spec": remote.priority_patch(low)})]
    assert await bus.last_seq() == 1
    async for message in bus.read(subjects=("kq.>",), start_seq=1):
        event = codec.decode(message.data)
        break
    assert isinstance(event, types.DispatchApplied) and event.action == "update-remote-workload-priority"


# -- cluster_role_sharing_test.go "Should not delete a pre-existing worker-local Job with the same NamespacedName" --


async def test_a_workers_own_job_of_the_same_name_is_not_deleted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue jobframework/utils.go DeleteRemoteObjectIfOwned (issue 11849): the edge deleted the worker's Job named
    as the manager's when the copy lost the race, though that Job was the worker's own (no origin label)."""
    from kueue_es.events.bus.memory import MemoryBus
    from kueue_es.services.kube import client
    from kueue_es.services.multikueue_edge import service

    jobs = {
        "w1": {"metadata": {"name": "sample", "namespace": "default", "labels": {}}},
        "w2": {"metadata": {"name": "sample", "namespace": "default", "labels": {remote.ORIGIN_LABEL: "multikueue"}}},
    }
    deleted: list[tuple[str, str]] = []

    async def get_object(api, ref, *, namespace, name, **_kw) -> dict:
        return jobs[api]

    async def delete_object(api, ref, *, namespace, name, **_kw) -> None:
        deleted.append((api, ref.kind))

    monkeypatch.setattr(client, "get_object", get_object)
    monkeypatch.setattr(client, "delete_object", delete_object)
    edge = service.Edge(bus=MemoryBus(), api=object(), namespace="kueue-es")  # type: ignore[arg-type]
    for name in ("w1", "w2"):
        edge.workers[name] = service.Worker(name=name, spec={}, api=name)  # type: ignore[arg-type]
        await edge._write(core.DeleteRemote(cluster=name, workload=REF, why="lost-race", decision_seq=3, job=JOB))
    assert deleted == [("w1", "Workload"), ("w2", "Job"), ("w2", "Workload")]
    assert remote.owned_by_origin(jobs["w2"], "multikueue") and not remote.owned_by_origin(jobs["w2"], "other")


def test_a_gated_manager_pod_keeps_its_scheduling_gated_condition_until_the_worker_schedules() -> None:
    """pod_multikueue_adapter.go syncLocalPodWithRemote: the worker's PodScheduled=False Unschedulable is not
    copied onto the manager's gated Pod (an autoscaler there would scale up for it); the edge copied it."""
    gated_cond = {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}
    local = {
        "kind": "Pod",
        "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}]},
        "status": {"phase": "Pending", "conditions": [gated_cond]},
    }
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    waiting = {"kind": "Pod", "status": {"phase": "Pending", "qosClass": "Burstable", "conditions": [unschedulable]}}
    out = remote.mirrored_job_status(local, waiting)
    assert out == {"phase": "Pending", "qosClass": "Burstable", "conditions": [gated_cond]}
    assert remote.mirrored_job_status(local, {"kind": "Pod", "status": {"phase": "Pending"}}) is None
    running = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    assert remote.mirrored_job_status(local, {"kind": "Pod", "status": running}) == running


def test_a_jobs_workload_priority_is_its_classs_value() -> None:
    """Found on the live system: a job's workload has no ``spec.priority`` on the log (its class's value is its
    priority), so the edge patched the copy with a class and a null priority, which the worker refused (422
    "priority should not be nil when priorityClassRef is set") at every tick."""
    from kueue_es.projections.cluster import ClusterState, WorkloadState
    from kueue_es.services.multikueue_edge.service import _local_priority

    state = ClusterState()
    state.priority_classes["low"] = models.WorkloadPriorityClass(metadata=models.ObjectMeta(name="low"), value=10)
    workload = models.Workload(
        metadata=models.ObjectMeta(name="wl", namespace="default"),
        spec=models.WorkloadSpec(
            queue_name="lq",
            priority_class_ref=models.PriorityClassRef(name="low"),
            pod_sets=[models.PodSet(name="main", count=1, requests={"cpu": 1000})],
        ),
    )
    assert _local_priority(WorkloadState(workload=workload, observed_seq=1), state) == core.Priority(
        class_name="low", value=10
    )
    # no value at all: nothing is written
    unknown = core.Priority(class_name="gone", value=None)
    copy = core.RemoteCopy(
        namespace="default", name="wl", admitted=True, has_job=True, priority=core.Priority(class_name="x", value=1)
    )
    local = _local(chosen="w1", chosen_seq=3, priority=unknown)
    assert core.plan({"default/wl": local}, {"w1": {"default/wl": copy}}, connected={"w1"}) == []


# -- pod_test.go "Should create a pod group on worker if admitted" (pod_multikueue_adapter.go) ----------------

GROUP_REF = types.WorkloadRef(namespace="default", name="test-group", uid="wl-uid")
GROUP_OWNER = core.JobRef(api_version="v1", kind="Pod", name="test-group-0")


def _group_pod(name: str, *, group: str = "test-group", labels: dict | None = None, status: dict | None = None) -> dict:
    """A manager Pod of Kueue's MakeGroup(3): queued, gated, Kueue's finalizer, the group label and total count."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "finalizers": ["kueue.x-k8s.io/managed"],
            "labels": {
                "kueue.x-k8s.io/queue-name": "lq",
                "kueue.x-k8s.io/managed": "true",
                "kueue.x-k8s.io/pod-group-name": group,
                **(labels or {}),
            },
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "3"},
        },
        "spec": {
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "containers": [{"name": "c", "image": "pause"}],
        },
        "status": status or {"phase": "Pending"},
    }


def test_a_pod_group_runs_whole_and_a_single_pod_alone() -> None:
    """Kueue's pod adapter lists every Pod of the owner's group in its namespace (syncPodGroup, listLocalPods)."""
    group = [_group_pod(f"test-group-{i}") for i in (2, 0, 1)]
    other = _group_pod("other-0", group="other")
    lone = {"metadata": {"name": "lone", "namespace": "default", "labels": {}}}
    names = [p["metadata"]["name"] for p in remote.pods_of_owner("test-group-0", [*group, other, lone])]
    assert names == ["test-group-0", "test-group-1", "test-group-2"]
    assert remote.pods_of_owner("lone", [*group, other, lone]) == [lone]
    assert remote.pods_of_owner("gone", [*group, lone]) == []
    # the group may be named by the annotation too (GetPodGroupName reads it first)
    annotated = copy.deepcopy(lone)
    annotated["metadata"]["name"] = "by-annotation-0"
    annotated["metadata"]["annotations"] = {"kueue.x-k8s.io/pod-group-name": "test-group"}
    assert len(remote.pods_of_owner("test-group-0", [*group, annotated])) == 4


def test_a_pod_groups_remote_copies_go_together_and_only_this_origins() -> None:
    """pod_multikueue_adapter.go DeleteRemoteObject after DeleteRemoteObjectIfOwned: the owner's copy decides."""
    ours = {remote.ORIGIN_LABEL: "multikueue"}
    worker_pods = [_group_pod(f"test-group-{i}", labels=ours) for i in range(3)]
    worker_pods.append(_group_pod("test-group-own", labels={remote.ORIGIN_LABEL: "elsewhere"}))
    worker_pods.append(_group_pod("other-0", group="other", labels=ours))
    owner = worker_pods[0]
    assert remote.remote_pods_of_group(owner, worker_pods, origin="multikueue") == [
        "test-group-0",
        "test-group-1",
        "test-group-2",
    ]
    assert remote.remote_pods_of_group(owner, worker_pods, origin="other-manager") == []
    lone = {"metadata": {"name": "lone", "labels": ours}}
    assert remote.remote_pods_of_group(lone, worker_pods, origin="multikueue") == ["lone"]


def _pods_api(monkeypatch: pytest.MonkeyPatch, clusters: dict[str, dict[str, dict]]) -> list[tuple[str, str, object]]:
    """Fake API servers by name ("manager" and the workers), each its Pods by name; returns the writes made."""
    from kueue_es.services.kube import client, errors

    writes: list[tuple[str, str, object]] = []

    async def list_objects(api, ref, *, namespace=None, **_kw):
        return [copy.deepcopy(p) for p in clusters[api].values()], "1"

    async def get_object(api, ref, *, namespace=None, name, **_kw):
        if name not in clusters[api]:
            raise errors.NotFoundError(status=404, reason="NotFound", message=f'pods "{name}" not found')
        return copy.deepcopy(clusters[api][name])

    async def create_object(api, ref, *, namespace, body):
        writes.append((api, "create", body))
        clusters[api][body["metadata"]["name"]] = body
        return body

    async def patch_object(api, ref, *, namespace, name, patch, subresource=None, **_kw):
        writes.append((api, f"patch {name}", patch))
        return {}

    async def delete_object(api, ref, *, namespace, name, **_kw):
        writes.append((api, f"delete {ref.kind} {name}", None))
        clusters[api].pop(name, None)

    for name, fn in (
        ("list_objects", list_objects),
        ("get_object", get_object),
        ("create_object", create_object),
        ("patch_object", patch_object),
        ("delete_object", delete_object),
    ):
        monkeypatch.setattr(client, name, fn)
    return writes


def _pod_edge(chosen_seq: int = 0):  # type: ignore[no-untyped-def]
    from kueue_es.events.bus.memory import MemoryBus
    from kueue_es.services.multikueue_edge import service

    edge = service.Edge(bus=MemoryBus(), api="manager", namespace="kueue-es")  # type: ignore[arg-type]
    edge.workers["worker1"] = service.Worker(name="worker1", spec={}, api="worker1", active=True)  # type: ignore[arg-type]
    return edge


async def test_every_pod_of_a_group_is_created_on_the_winner(monkeypatch: pytest.MonkeyPatch) -> None:
    """pod_test.go "Should create a pod group on worker if admitted": the worker gets every Pod of the group (same
    spec, its gate included, labels plus the prebuilt Workload and the origin, no finalizer); the edge created only
    the Pod the Workload names as its owner."""
    manager = {f"test-group-{i}": _group_pod(f"test-group-{i}") for i in range(3)}
    manager["other-0"] = _group_pod("other-0", group="other")
    clusters: dict[str, dict[str, dict]] = {"manager": manager, "worker1": {}}
    writes = _pods_api(monkeypatch, clusters)
    edge = _pod_edge()
    await edge._write(core.CreateJob(cluster="worker1", workload=GROUP_REF, job=GROUP_OWNER, decision_seq=9))
    created = [body for api, what, body in writes if (api, what) == ("worker1", "create")]
    assert [b["metadata"]["name"] for b in created] == ["test-group-0", "test-group-1", "test-group-2"]  # type: ignore[index]
    for body in created:
        meta = body["metadata"]  # type: ignore[index]
        assert meta["labels"][remote.PREBUILT_WORKLOAD_LABEL] == "test-group"
        assert meta["labels"][remote.ORIGIN_LABEL] == "multikueue"
        assert meta["labels"]["kueue.x-k8s.io/pod-group-name"] == "test-group"
        assert meta["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3"
        assert "finalizers" not in meta and "uid" not in meta and "status" not in body  # type: ignore[operator]
        assert body["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]  # type: ignore[index]
    assert "worker1" in edge.workers and "default/test-group" in edge.workers["worker1"].jobs


async def test_each_manager_pod_of_a_group_takes_its_copys_status(monkeypatch: pytest.MonkeyPatch) -> None:
    """pod_test.go "finishing the worker pod" (syncPodGroup): every manager Pod of the group takes the status of its
    copy on the winner, and a member with no copy there gets one; the edge mirrored the owner Pod alone."""
    from kueue_es.services.multikueue_edge import service

    manager = {f"test-group-{i}": _group_pod(f"test-group-{i}") for i in range(3)}
    ours = {remote.ORIGIN_LABEL: "multikueue", remote.PREBUILT_WORKLOAD_LABEL: "test-group"}
    done = {"phase": "Succeeded", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    worker = {f"test-group-{i}": _group_pod(f"test-group-{i}", labels=ours, status=done) for i in range(2)}
    clusters: dict[str, dict[str, dict]] = {"manager": manager, "worker1": worker}
    writes = _pods_api(monkeypatch, clusters)
    edge = _pod_edge()
    edge.workers["worker1"].jobs.add(GROUP_REF.key)
    local = core.LocalWorkload(ref=GROUP_REF, live=True, chosen="worker1", chosen_seq=5, job=GROUP_OWNER)
    monkeypatch.setattr(edge, "locals", lambda: {GROUP_REF.key: local})
    monkeypatch.setattr(service, "_live", lambda _wl: True)
    await edge._mirror_jobs()
    patched = {what.removeprefix("patch "): body for api, what, body in writes if api == "manager"}
    assert set(patched) == {"test-group-0", "test-group-1"}
    assert all(body["status"]["phase"] == "Succeeded" for body in patched.values())  # type: ignore[index]
    [(api, what, body)] = [w for w in writes if w[0] == "worker1"]
    assert what == "create" and body["metadata"]["name"] == "test-group-2"  # type: ignore[index]


async def test_a_pod_groups_copies_are_deleted_with_its_workloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """pod_test.go waitForWorkloadToFinishAndRemoteWorkloadToBeDeleted, DeleteRemoteObject: the finished group's
    Pods go from the worker with its copy; the edge deleted the owner's Pod alone and left the others running."""
    ours = {remote.ORIGIN_LABEL: "multikueue"}
    worker = {f"test-group-{i}": _group_pod(f"test-group-{i}", labels=ours) for i in range(3)}
    worker["test-group-x"] = _group_pod("test-group-x", labels={remote.ORIGIN_LABEL: "elsewhere"})
    clusters: dict[str, dict[str, dict]] = {"manager": {}, "worker1": worker}
    writes = _pods_api(monkeypatch, clusters)
    edge = _pod_edge()
    await edge._write(
        core.DeleteRemote(cluster="worker1", workload=GROUP_REF, why="local-done", decision_seq=11, job=GROUP_OWNER)
    )
    assert [what for api, what, _ in writes if api == "worker1"] == [
        "delete Pod test-group-0",
        "delete Pod test-group-1",
        "delete Pod test-group-2",
        "delete Workload test-group",
    ]
    assert set(clusters["worker1"]) == {"test-group-x"}


async def test_the_gc_takes_a_pod_groups_pods_with_its_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """multikueuecluster.go runGC deletes a copy the manager no longer has with its job; a pod group's Pods name the
    copy as their prebuilt Workload. The edge's GC listed only Jobs and JobSets, leaving the Pods running."""
    from kueue_es.services.kube import client

    listed: list[tuple[str, str]] = []
    deleted: list[tuple[str, str]] = []
    labels = {remote.PREBUILT_WORKLOAD_LABEL: "test-group", remote.ORIGIN_LABEL: "multikueue"}
    pods = [{"metadata": {"name": f"test-group-{i}", "labels": labels}} for i in range(3)]

    async def list_objects(api, ref, *, namespace=None, label_selector="", **_kw):
        listed.append((ref.kind, label_selector))
        return (pods if ref.kind == "Pod" else []), "1"

    async def delete_object(api, ref, *, namespace, name, **_kw):
        deleted.append((ref.kind, name))

    monkeypatch.setattr(client, "list_objects", list_objects)
    monkeypatch.setattr(client, "delete_object", delete_object)
    edge = _pod_edge()
    await edge._write(core.DeleteRemote(cluster="worker1", workload=GROUP_REF, why="garbage", decision_seq=0))
    assert ("Pod", f"{remote.ORIGIN_LABEL}=multikueue") in listed
    assert deleted == [
        ("Pod", "test-group-0"),
        ("Pod", "test-group-1"),
        ("Pod", "test-group-2"),
        ("Workload", "test-group"),
    ]


def test_plan_leaves_a_live_workloads_copy_on_a_worker_outside_its_group():
    """Kueue's reconcileGroup reads and writes the workers of the check's MultiKueueConfig only: a second
    MultiKueueCluster reaching the same worker (its name ``alias``) sees the winner's own copy, which must stay
    (e2e_test.go's steps each make their own MultiKueueClusters for one pair of kind clusters)."""
    local = _local(nominated=("w1", "w2"), nominated_seq=10, chosen="w2", chosen_seq=20, group=frozenset({"w1", "w2"}))
    won = _copy(admitted=True, has_job=True)
    remote_view = {"w2": {"default/wl": won}, "alias": {"default/wl": won}}
    assert core.plan({"default/wl": local}, remote_view, connected={"w2", "alias"}) == []
    pending = _local(nominated=("w1",), nominated_seq=10, group=frozenset({"w1", "w2"}))
    assert core.plan({"default/wl": pending}, {"alias": {"default/wl": _copy()}}, connected={"w1", "alias"}) == [
        core.CreateWorkload(cluster="w1", workload=REF, decision_seq=10)
    ]
    done = _local(live=False, nominated=("w1",), nominated_seq=10, group=frozenset({"w1"}))
    assert core.plan({"default/wl": done}, {"alias": {"default/wl": _copy()}}, connected={"alias"}) == [
        core.DeleteRemote(cluster="alias", workload=REF, why="local-done", decision_seq=10, job=JOB)
    ]


def test_the_edge_knows_a_workloads_group_from_its_checks_config():
    """Edge.locals() gives each workload the workers of its nominating check's MultiKueueConfig
    (workload.go remoteClientsForAC); an unknown check leaves it None (every worker, as before)."""
    from kueue_es.events import models
    from kueue_es.services.multikueue_edge.service import Decided, Edge

    edge = Edge(bus=None, api=None, namespace="kueue-system")  # type: ignore[arg-type]
    mk = edge.state.multikueue
    mk.configs["cfg"] = msgspec.convert(
        {"metadata": {"name": "cfg"}, "spec": {"clusters": ["w1", "w2"]}}, models.MultiKueueConfig
    )
    mk.checks["ac"] = msgspec.convert(
        {
            "metadata": {"name": "ac"},
            "spec": {
                "controllerName": models.MULTIKUEUE_CONTROLLER,
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "cfg"},
            },
        },
        models.AdmissionCheck,
    )
    edge.decided["default/wl"] = Decided(nominated=("w1",), nominated_seq=3, check="ac")
    edge.decided["default/other"] = Decided(nominated=("w1",), nominated_seq=4, check="gone")
    assert edge.locals()["default/wl"].group == frozenset({"w1", "w2"})
    assert edge.locals()["default/other"].group is None


async def test_an_evicted_workloads_manager_job_is_shown_stopped_until_its_quota_is_released(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An evicted MultiKueue workload's manager Job (suspended by the dispatcher) is shown with no pods once no
    worker holds its copy, and again at every tick until its quota is released: a worker status mirrored just
    before the copy went (active 1) must not leave the manager's watcher waiting for pods that are not there.
    Kueue's e2e "Should preempt a running low-priority workload ..." hung on it (the edge acted only while the
    copy was still listed, which it never was after its own delete)."""
    from types import SimpleNamespace

    from kueue_es.services.kube import client
    from kueue_es.services.multikueue_edge import service

    manager_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sample", "namespace": "default"},
        "spec": {"suspend": True},
        "status": {"active": 1, "ready": 1},
    }
    patches: list[dict] = []

    async def get_object(*_args: object, **_kwargs: object) -> dict:
        return manager_job

    async def patch_object(*_args: object, **kwargs: object) -> dict:
        patches.append(kwargs["patch"])  # type: ignore[arg-type]
        manager_job["status"] = {**manager_job["status"], **kwargs["patch"]["status"]}  # type: ignore[index]
        return manager_job

    monkeypatch.setattr(client, "get_object", get_object)
    monkeypatch.setattr(client, "patch_object", patch_object)
    edge = service.Edge(bus=None, api=object(), namespace="kueue-es")  # type: ignore[arg-type]
    owner = SimpleNamespace(api_version="batch/v1", kind="Job", name="sample")
    wl = SimpleNamespace(
        reservation=object(),
        eviction=object(),
        finished=None,
        deleted_seq=0,
        workload=SimpleNamespace(owner=owner, metadata=SimpleNamespace(uid="u")),
    )
    edge.state.workloads["default/wl"] = wl  # type: ignore[assignment]
    edge.decided["default/wl"] = service.Decided(chosen="w1", chosen_seq=5)
    edge._accepted(
        9,
        types.EvictionRequested(workload=REF, cluster_queue="cq", reason="Preempted", message="m", at_ms=1),
        edge.state,
    )
    assert "default/wl" not in edge.decided and edge.stopping == {"default/wl"}

    worker = service.Worker(name="w1", spec={}, api=object(), active=True)  # type: ignore[arg-type]
    worker.copies["default/wl"] = object()  # type: ignore[assignment]
    edge.workers["w1"] = worker
    await edge._stop_evicted()
    assert patches == []  # the copy is still on the worker: its pods may run

    worker.active = False  # unreachable (a Retry after workerLostTimeout): its copies are not seen, as in Kueue
    await edge._stop_evicted()
    assert patches[-1]["status"]["active"] == 0
    worker.active, manager_job["status"], patches[:] = True, {"active": 1, "ready": 1}, []

    del worker.copies["default/wl"]
    await edge._stop_evicted()
    assert patches[-1]["status"]["active"] == 0 and manager_job["status"]["active"] == 0

    manager_job["status"] = {"active": 1, "ready": 1}  # the late mirror of the worker's running Job
    await edge._stop_evicted()
    assert len(patches) == 2 and manager_job["status"]["active"] == 0

    wl.reservation = None  # QuotaReleased folded: the eviction is done
    await edge._stop_evicted()
    assert edge.stopping == set() and len(patches) == 2


def test_an_edge_started_from_a_snapshot_knows_the_multikueue_decisions_in_it():
    """Edge.adopt (the start from a snapshot): the nominations and winners the fold holds become the edge's
    decisions, standing at the snapshot's position, with the winner's MultiKueue check (so its group), and an
    evicted MultiKueue workload still holding quota waits for its copies to go (:attr:`Edge.stopping`)."""
    from types import SimpleNamespace

    from kueue_es.events import models
    from kueue_es.projections import multikueue
    from kueue_es.projections.cluster import ClusterState
    from kueue_es.services.multikueue_edge.service import Edge

    state = ClusterState()
    mk = state.multikueue
    mk.checks["ac"] = msgspec.convert(
        {"metadata": {"name": "ac"}, "spec": {"controllerName": models.MULTIKUEUE_CONTROLLER}}, models.AdmissionCheck
    )
    mk.nominations["default/nominated"] = multikueue.Nomination(check="ac", clusters=["w1", "w2"], step=0, at_ms=1)
    mk.cluster_names["default/won"] = "w2"

    def workload(*, evicted: bool) -> object:
        return SimpleNamespace(
            checks={"ac": object(), "other": object()}, reservation=object(), eviction=object() if evicted else None
        )

    state.workloads = {"default/won": workload(evicted=False), "default/evicted": workload(evicted=True)}  # type: ignore[dict-item]
    edge = Edge(bus=None, api=None, namespace="kueue-system")  # type: ignore[arg-type]
    edge.adopt(state, 40)
    assert edge.state is state
    nominated, won = edge.decided["default/nominated"], edge.decided["default/won"]
    assert (nominated.nominated, nominated.nominated_seq, nominated.check, nominated.chosen) == (
        ("w1", "w2"),
        40,
        "ac",
        "",
    )
    assert (won.chosen, won.chosen_seq, won.check) == ("w2", 40, "ac")
    assert edge.decided.keys() == {"default/nominated", "default/won"} and edge.stopping == {"default/evicted"}
