"""The Kubernetes Events of decisions (services/dispatcher/kube_events.py), worded as Kueue records them."""

from __future__ import annotations

import copy

import msgspec
import pytest

from kueue_es.events import manifests, models, types
from kueue_es.jobframework import workloads
from kueue_es.services.dispatcher import kube_events, status
from tests.integration.test_kueue_status import (
    PENDING_MESSAGE,
    PREEMPT_MESSAGE,
    admitted,
    at,
    preempted,
    queues_log,
    released,
)


def _events(log, event: types.Event) -> list[tuple[str, str, str, str]]:  # type: ignore[no-untyped-def]
    """Fold ``event`` and return its Events as (workload, type, reason, message)."""
    log.add(event)
    ref = getattr(event, "workload", None)
    record = log.view.records.get(ref.key) if ref is not None else None
    return [
        (e.workload.name, e.type, e.reason, e.message)
        for e in kube_events.for_decision(log.view.cluster, event, record)
    ]


def test_pending_reserved_admitted_preempted_and_reserved_again() -> None:
    log, ref = queues_log()  # the Job's workload was created at T0
    name = ref.name
    pending = types.WorkloadInadmissible(workload=ref, reason="WaitingForQuota", message=PENDING_MESSAGE, at_ms=at(1))
    assert _events(log, pending) == [(name, "Warning", "WaitingForQuota", PENDING_MESSAGE)]
    reserved, admission = admitted(ref, 12)
    assert _events(log, reserved) == [
        (
            name,
            "Normal",
            "QuotaReserved",
            "Quota reserved in ClusterQueue cluster-queue, wait time since queued was 12s",
        )
    ]
    assert _events(log, admission) == [
        (name, "Normal", "Admitted", "Admitted by ClusterQueue cluster-queue, wait time since reservation was 0s")
    ]
    priorities = (
        "preemptor effective priority: 0 (base: 0, boost: 0); preemptee effective priority: 0 (base: 0, boost: 0)"
    )
    assert _events(log, preempted(ref, 70)) == [
        (name, "Normal", "EvictedDueToPreempted", PREEMPT_MESSAGE),
        (name, "Normal", "Preempted", f"{PREEMPT_MESSAGE}; {priorities}"),
        (
            "job-urgent-00000",
            "Normal",
            "PreemptedWorkload",
            f"Preempted workload {ref.key} (UID: {ref.uid}) in ClusterQueue cluster-queue; {priorities}",
        ),
    ]
    log.add(types.WorkloadStopped(workload=ref, at_ms=at(75)))
    assert _events(log, released(ref, "Preempted", 80)) == []  # QuotaReleased: Kueue records no Event of its own
    # queued again when the Requeued condition moved (at 80 s): waited 25 s, not 105 s since creation
    again, _ = admitted(ref, 105)
    assert _events(log, again)[0][3] == "Quota reserved in ClusterQueue cluster-queue, wait time since queued was 25s"


def test_other_evictions_name_their_reason_and_a_long_message_is_cut_as_kueue_cuts_it() -> None:
    log, ref = queues_log()
    reserved, admission = admitted(ref, 1)
    log.add(reserved, admission)
    stopped = types.EvictionRequested(
        workload=ref, cluster_queue="cluster-queue", reason="ClusterQueueStopped", message="x" * 2000, at_ms=at(5)
    )
    [(_, kind, reason, message)] = _events(log, stopped)
    assert (kind, reason) == ("Normal", "EvictedDueToClusterQueueStopped")
    assert len(message) == kube_events.MAX_MESSAGE and message.endswith("...")
    deactivated = types.EvictionRequested(
        workload=ref, cluster_queue="cluster-queue", reason="DeactivatedDueToAdmissionCheck", message="m", at_ms=at(6)
    )
    assert _events(log, deactivated)[0][2] == "EvictedDueToDeactivatedDueToAdmissionCheck"


def test_a_rejected_check_warns_admission_check_rejected() -> None:
    """Kueue's workload_controller_test.go "should finish an unadmitted workload with failure when a check is
    rejected" and "should evict then finish ... an admitted workload": deactivated for a Rejected check, the
    Workload gets the workload controller's Warning AdmissionCheckRejected "Deactivated due to <the checks'
    message>" (reconcileCheckBasedEviction). Before, kueue-es recorded none."""
    log, ref = queues_log()
    message = 'AdmissionCheck in Rejected state: "check1" (check rejected)'
    deactivated = types.WorkloadDeactivated(workload=ref, reason="AdmissionCheck", message=message, at_ms=at(5))
    assert _events(log, deactivated) == [
        (
            ref.name,
            "Warning",
            "AdmissionCheckRejected",
            'Deactivated due to AdmissionCheck in Rejected state: "check1" (check rejected)',
        )
    ]
    [item] = kube_events.for_decision(log.view.cluster, deactivated, log.view.records.get(ref.key))
    assert kube_events.event_object(item, name="n", uid="u")["source"]["component"] == "kueue-workload-controller"
    other = types.WorkloadDeactivated(workload=ref, reason="RequeuingLimitExceeded", message="m", at_ms=at(6))
    assert _events(log, other) == []


def test_a_workload_past_its_maximum_execution_time_warns_so() -> None:
    """Kueue's workload_controller_test.go "should deactivate the workload when the time expires": the workload
    controller's Warning MaximumExecutionTimeExceeded "The maximum execution time (<n>s) exceeded" as it deactivates
    the workload (reconcileMaxExecutionTime). Before, kueue-es recorded none."""
    log, ref = queues_log()
    wl = log.view.cluster.workloads[ref.key]
    spec = msgspec.structs.replace(wl.workload.spec, maximum_execution_time_seconds=1)
    log.add(types.WorkloadObserved(workload=msgspec.structs.replace(wl.workload, spec=spec)))
    deactivated = types.WorkloadDeactivated(
        workload=ref, reason="MaximumExecutionTimeExceeded", message="exceeding the maximum execution time", at_ms=at(9)
    )
    assert _events(log, deactivated) == [
        (ref.name, "Warning", "MaximumExecutionTimeExceeded", "The maximum execution time (1s) exceeded")
    ]


def test_the_workload_controllers_events_name_it_as_their_source() -> None:
    """Kueue records on a Workload from two recorders: the scheduler's ``kueue-admission`` (QuotaReserved, an
    admission in the same step, a preemption) and the workload controller's ``kueue-workload-controller`` (an
    admission its checks completed, with the wait since the reservation; the evictions it makes: deactivated, a
    rejected check, the PodsReady timeout, a stopped queue). Before, every one read ``kueue-admission`` and an
    admission 18 s after its reservation said it waited 0 s."""
    log, ref = queues_log()
    reserved, _ = admitted(ref, 12)
    later = types.admitted(reserved, at_ms=at(30))

    def sources(event: types.Event) -> list[tuple[str, str, str]]:
        log.add(event)
        record = log.view.records.get(ref.key)
        items = kube_events.for_decision(log.view.cluster, event, record)
        return [
            (e.reason, e.message, kube_events.event_object(e, name="n", uid="u")["source"]["component"]) for e in items
        ]

    assert sources(reserved)[0][2] == "kueue-admission"
    assert sources(later) == [
        (
            "Admitted",
            "Admitted by ClusterQueue cluster-queue, wait time since reservation was 18s",
            "kueue-workload-controller",
        )
    ]
    for reason, source in [
        ("Deactivated", "kueue-workload-controller"),
        ("DeactivatedDueToRequeuingLimitExceeded", "kueue-workload-controller"),
        ("AdmissionCheck", "kueue-workload-controller"),
        ("PodsReadyTimeout", "kueue-workload-controller"),
        ("ClusterQueueStopped", "kueue-workload-controller"),
        ("LocalQueueStopped", "kueue-workload-controller"),
        ("Preempted", "kueue-admission"),
    ]:
        eviction = types.EvictionRequested(
            workload=ref, cluster_queue="cluster-queue", reason=reason, message="m", at_ms=at(40)
        )
        item = kube_events.for_decision(log.view.cluster, eviction, log.view.records.get(ref.key))[0]
        assert (item.reason, kube_events.event_object(item, name="n", uid="u")["source"]["component"]) == (
            f"EvictedDueTo{reason}",
            source,
        )


def test_event_object_is_a_core_v1_event_about_the_workload() -> None:
    ref = types.WorkloadRef(namespace="team-a", name="job-x-1", uid="bus-uid")
    item = kube_events.KubeEvent(workload=ref, type="Normal", reason="Admitted", message="m", at_ms=at(0))
    body = kube_events.event_object(item, name="job-x-1.1f.0", uid="object-uid")
    assert body["metadata"] == {"name": "job-x-1.1f.0", "namespace": "team-a"}
    assert body["involvedObject"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "namespace": "team-a",
        "name": "job-x-1",
        "uid": "object-uid",
    }
    assert (body["type"], body["reason"], body["message"], body["count"]) == ("Normal", "Admitted", "m", 1)
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2026-01-01T00:00:00Z"
    assert "uid" not in kube_events.event_object(item, name="n")["involvedObject"]


def test_the_job_framework_events_on_the_job_itself() -> None:
    ref = types.WorkloadRef(namespace="team-a", name="job-x-1", uid="wl-uid")
    admitted_event = types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=at(3))
    started = kube_events.for_job_write("Job", "x", "job-uid", started=True, decision=admitted_event, at_ms=at(3))
    assert started is not None and (started.type, started.reason, started.message) == (
        "Normal",
        "Started",
        "Admitted by clusterQueue cq",
    )
    body = kube_events.event_object(started, name="x.9.job", uid="ignored")
    assert body["involvedObject"] == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "namespace": "team-a",
        "name": "x",
        "uid": "job-uid",
    }
    evicted = types.EvictionRequested(workload=ref, cluster_queue="cq", message="Preempted to accommodate", at_ms=at(9))
    stopped = kube_events.for_job_write("JobSet", "x", "", started=False, decision=evicted, at_ms=at(9))
    assert stopped is not None and (stopped.reason, stopped.message) == ("Stopped", "Preempted to accommodate")
    assert (
        kube_events.event_object(stopped, name="x.a.job")["involvedObject"]["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    )
    # Kueue's pod integration records them pod by pod (pod_controller.go Run and Stop), from its own recorder
    on_pod = kube_events.for_job_write("Pod", "p", "pod-uid", started=True, decision=admitted_event, at_ms=at(3))
    assert on_pod is not None and (on_pod.reason, on_pod.message) == ("Started", "Admitted by clusterQueue cq")
    body = kube_events.event_object(on_pod, name="p.9.job")
    assert body["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "team-a",
        "name": "p",
        "uid": "pod-uid",
    }
    assert body["source"] == {"component": "pod-kueue-controller"}
    assert kube_events.for_job_write("Unknown", "p", "", started=True, decision=admitted_event, at_ms=0) is None


def _workload(owner: models.OwnerReference | None, *, name: str = "job-x-1") -> models.Workload:
    return models.Workload(
        metadata=models.ObjectMeta(name=name, namespace="team-a", uid="wl-uid", creation_timestamp_ms=at(1)),
        spec=models.WorkloadSpec(pod_sets=[models.PodSet(name="main", count=1)]),
        owner=owner,
    )


def test_finished_workload_on_its_job_as_kueues_reconciler_words_it() -> None:
    """reconciler.go: ``Workload 'NS/NAME' is declared finished`` on the job, whatever finished it; not for an
    elastic slice replaced or dropped, nor a prebuilt Workload out of sync (the job's reconciler never sees those
    finished), nor a Workload of no job."""
    job = models.OwnerReference(api_version="batch/v1", kind="Job", name="x", uid="job-uid")
    for reason in ("Succeeded", "Failed", "FailedToStart"):
        item = kube_events.for_finished_workload(_workload(job), reason=reason, at_ms=at(7))
        assert item is not None
        assert (item.type, item.reason, item.message, item.at_ms) == (
            "Normal",
            "FinishedWorkload",
            "Workload 'team-a/job-x-1' is declared finished",
            at(7),
        )
        body = kube_events.event_object(item, name="x.finished.o")
        assert body["involvedObject"] == {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "namespace": "team-a",
            "name": "x",
            "uid": "job-uid",
        }
        assert body["source"] == {"component": "batch/job-kueue-controller"}
    jobset = models.OwnerReference(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet", name="js", uid="u")
    item = kube_events.for_finished_workload(_workload(jobset), reason="Succeeded", at_ms=0)
    assert item is not None
    assert kube_events.event_object(item, name="n")["source"] == {
        "component": "jobset.x-k8s.io/jobset-kueue-controller"
    }
    pod = models.OwnerReference(api_version="v1", kind="Pod", name="p", uid="pod-uid")
    item = kube_events.for_finished_workload(_workload(pod, name="group"), reason="Succeeded", at_ms=0)
    assert item is not None and item.job == ("v1", "Pod", "pod-uid") and item.workload.name == "p"
    assert item.message == "Workload 'team-a/group' is declared finished"
    for reason in ("WorkloadSliceReplaced", "OutOfSync", "OwnerNotFound"):
        assert kube_events.for_finished_workload(_workload(job), reason=reason, at_ms=0) is None
    assert kube_events.for_finished_workload(_workload(None), reason="Succeeded", at_ms=0) is None


def test_updated_workload_when_the_workload_priority_class_changes() -> None:
    """UpdateWorkloadPriority: "Updated workload priority class: NS/NAME" on the job once its Workload names another
    WorkloadPriorityClass (a class added, changed or taken off); none for the same class (its value moved), for a
    Workload whose priority is a pod PriorityClass's, nor for one that reserved quota with no class."""
    job = models.OwnerReference(api_version="batch/v1", kind="Job", name="x", uid="job-uid")
    wl = _workload(job)

    def wpc(name: str) -> dict[str, str]:
        return {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": name}

    pod_class = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"}
    changes = [
        (wpc("high"), wpc("low"), True),
        (None, wpc("high"), False),
        (wpc("high"), None, True),
        (wpc("high"), pod_class, False),
    ]
    for before, after, reserved in changes:
        item = kube_events.for_priority_update(wl, before=before, after=after, reserved=reserved, at_ms=at(4))
        assert item is not None, (before, after)
        assert (item.type, item.reason, item.message, item.job) == (
            "Normal",
            "UpdatedWorkload",
            "Updated workload priority class: team-a/job-x-1",
            ("batch/v1", "Job", "job-uid"),
        )
    quiet = [
        (wpc("high"), wpc("high"), False),
        (None, None, False),
        (pod_class, wpc("low"), False),
        (None, wpc("high"), True),
    ]
    for before, after, reserved in quiet:
        assert kube_events.for_priority_update(wl, before=before, after=after, reserved=reserved, at_ms=0) is None


def test_updated_not_matching_workload_when_a_waiting_jobs_pod_sets_change() -> None:
    """updateWorkloadToMatchJob: "Updated not matching Workload for suspended job: NS/NAME" on the job once its
    Workload, holding no quota, is written with other pod sets or another maximumExecutionTimeSeconds; fields
    the server defaulted in the stored spec are no change; a Workload holding quota, an elastic slice (its
    count updated in place) and an unchanged shape get none (a changed class then gets the priority Event)."""
    job = models.OwnerReference(api_version="batch/v1", kind="Job", name="x", uid="job-uid")
    wl = _workload(job)
    template = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    stored = {
        "podSets": [{"name": "main", "count": 4, "template": {**template, "metadata": {}}}],
        "queueName": "q",
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
    }
    same = {
        "podSets": [{"name": "main", "count": 4, "template": template}],
        "queueName": "other",
        "priorityClassRef": stored["priorityClassRef"],
    }
    changes = [
        {**same, "podSets": [{"name": "main", "count": 2, "template": template}]},
        {**same, "podSets": [{"name": "main", "count": 4, "template": {"spec": {"nodeSelector": {"a": "b"}}}}]},
        {**same, "podSets": [*same["podSets"], {"name": "extra", "count": 1}]},
        {**same, "maximumExecutionTimeSeconds": 60},
    ]
    for after in changes:
        item = kube_events.for_workload_update(wl, before=stored, after=after, reserved=False, at_ms=at(5))
        assert item is not None, after
        assert (item.type, item.reason, item.message, item.job, item.at_ms) == (
            "Normal",
            "UpdatedWorkload",
            "Updated not matching Workload for suspended job: team-a/job-x-1",
            ("batch/v1", "Job", "job-uid"),
            at(5),
        )
    assert kube_events.for_workload_update(wl, before=stored, after=changes[0], reserved=True, at_ms=0) is None
    elastic = _workload(job)
    elastic.metadata.annotations["kueue.x-k8s.io/elastic-job"] = "true"
    assert kube_events.for_workload_update(elastic, before=stored, after=changes[0], reserved=False, at_ms=0) is None
    assert kube_events.for_workload_update(wl, before=stored, after=same, reserved=False, at_ms=0) is None
    reclassed = {**same, "priorityClassRef": None}
    unchanged = kube_events.for_workload_update(wl, before=stored, after=reclassed, reserved=False, at_ms=0)
    assert unchanged is not None and unchanged.message == "Updated workload priority class: team-a/job-x-1"
    assert kube_events.for_workload_update(_workload(None), before=stored, after=same, reserved=False, at_ms=0) is None


def test_updated_admission_check_while_a_reserved_workload_waits_for_its_checks() -> None:
    """recordAdmissionCheckUpdate: "NAME: MESSAGE" of each Pending check with a message, "; "-joined, on the job
    while its Workload holds quota and is not admitted, evicted or finished; on every pod of a pod group; none
    without such a check."""
    record = status.WorkloadRecord(uid="wl-uid")
    record.set("QuotaReserved", True, "QuotaReserved", "", at_ms=at(1))
    record.checks = {
        "a": status.CheckEntry(name="a", state="Pending", message="no capacity yet", since_ms=at(1)),
        "b": status.CheckEntry(name="b", state="Pending", message="", since_ms=at(1)),
        "c": status.CheckEntry(name="c", state="Ready", message="done", since_ms=at(1)),
        "d": status.CheckEntry(name="d", state="Pending", message="queued", since_ms=at(1)),
    }
    assert kube_events.pending_checks_message(record) == "a: no capacity yet; d: queued"
    job = models.OwnerReference(api_version="batch/v1", kind="Job", name="x", uid="job-uid")
    [item] = kube_events.for_admission_check_update(_workload(job), "a: no capacity yet", at_ms=at(2))
    assert (item.type, item.reason, item.message, item.job, item.workload.name) == (
        "Normal",
        "UpdatedAdmissionCheck",
        "a: no capacity yet",
        ("batch/v1", "Job", "job-uid"),
        "x",
    )
    group = _workload(models.OwnerReference(api_version="v1", kind="Pod", name="p-a", uid="uid-a"), name="grp")
    group.metadata.annotations["kueue.x-k8s.io/is-group-workload"] = "true"
    members = [("p-a", "uid-a"), ("p-b", "uid-b")]
    on_pods = kube_events.for_admission_check_update(group, "a: x", members=members, at_ms=0)
    assert [(i.workload.name, i.job, i.reason) for i in on_pods] == [
        ("p-a", ("v1", "Pod", "uid-a"), "UpdatedAdmissionCheck"),
        ("p-b", ("v1", "Pod", "uid-b"), "UpdatedAdmissionCheck"),
    ]
    assert kube_events.for_admission_check_update(_workload(job), "", at_ms=0) == []
    for kind in ("Admitted", "Evicted", "Finished"):
        done = copy.deepcopy(record)
        done.set(kind, True, kind, "", at_ms=at(3))
        assert kube_events.pending_checks_message(done) == ""
    waiting = copy.deepcopy(record)
    waiting.set("QuotaReserved", False, "Pending", "", at_ms=at(3))
    assert kube_events.pending_checks_message(waiting) == ""
    assert kube_events.pending_checks_message(None) == ""


def test_owner_references_added_on_a_groups_workload() -> None:
    """EnsureWorkloadOwnedByAllMembers: "Added N owner reference(s)" on a pod group's Workload, N the pods named
    now that were not; none when none was added, for another Workload, or over the first pod as controller."""
    group = _workload(models.OwnerReference(api_version="v1", kind="Pod", name="a", uid="uid-a"), name="grp")
    group.metadata.annotations["kueue.x-k8s.io/is-group-workload"] = "true"

    def ref(name: str, **more: object) -> dict[str, object]:
        return {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": f"uid-{name}", **more}

    item = kube_events.for_owners_added(
        group, before=[ref("a"), ref("b")], after=[ref("b"), ref("c"), ref("d")], at_ms=at(3)
    )
    assert item is not None
    assert (item.type, item.reason, item.message, item.job, item.workload.name, item.component) == (
        "Normal",
        "OwnerReferencesAdded",
        "Added 2 owner reference(s)",
        None,
        "grp",
        "pod-kueue-controller",
    )
    event = kube_events.event_object(item, name="grp.owners", uid="wl-object-uid")
    assert event["involvedObject"]["kind"] == "Workload" and event["source"] == {"component": "pod-kueue-controller"}
    assert kube_events.for_owners_added(group, before=[ref("a")], after=[ref("a")], at_ms=0) is None
    controller = [ref("a", controller=True, blockOwnerDeletion=True)]
    assert kube_events.for_owners_added(group, before=controller, after=[ref("a"), ref("b")], at_ms=0) is None
    job = _workload(models.OwnerReference(api_version="batch/v1", kind="Job", name="x", uid="job-uid"))
    assert kube_events.for_owners_added(job, before=[], after=[ref("a")], at_ms=0) is None


def test_a_pod_groups_refusals_in_kueues_words() -> None:
    """A pod group short of pods, and one whose name another Workload holds: Kueue's reason and message (and the
    action Admission of WorkloadNameConflict), not kueue-es's generic rejection."""
    short = types.ObjectRejected(
        kind="Pod",
        namespace="ns",
        name="p",
        field="metadata.annotations[kueue.x-k8s.io/pod-group-total-count]",
        problem="'g' group has fewer runnable pods than expected",
    )
    taken = msgspec.structs.replace(
        short,
        field="metadata.labels[kueue.x-k8s.io/pod-group-name]",
        problem='A Workload named "g" already exists but is not a pod group workload; this pod group cannot be admitted',
    )
    for fact, reason, action in (
        (short, "ErrWorkloadCompose", "ErrWorkloadCompose"),
        (taken, "WorkloadNameConflict", "Admission"),
    ):
        item = kube_events.for_rejection(fact)
        assert item is not None
        assert (item.type, item.reason, item.message) == ("Warning", reason, fact.problem)
        assert kube_events.event_object(item, name="e")["action"] == action


def test_created_workload_on_a_pod() -> None:
    """handleJobWithNoWorkload records CreatedWorkload on the job object, for the pod integration the pod (a
    group's: one of its pods, here the Workload's owner)."""
    pod = models.OwnerReference(api_version="v1", kind="Pod", name="p", uid="pod-uid")
    item = kube_events.for_created_workload(_workload(pod, name="pod-p-1"))
    assert item is not None
    assert (item.reason, item.message, item.job) == (
        "CreatedWorkload",
        "Created Workload: team-a/pod-p-1",
        ("v1", "Pod", "pod-uid"),
    )


def test_no_event_for_what_kueues_workload_controller_only_marks() -> None:
    """A workload whose LocalQueue or ClusterQueue is missing or inactive is never a scheduling head in Kueue:
    its workload controller sets QuotaReserved=False and records no Event. The scheduler's reasons (here a
    namespace the ClusterQueue does not select, a pod set over its limits) keep their Warning."""
    log, ref = queues_log()
    quiet = [
        ("Suspended", "ClusterQueue cluster-queue is inactive"),
        ("Suspended", "LocalQueue user-queue is inactive"),
        ("Misconfigured", "LocalQueue no-such-lq doesn't exist"),
        ("Misconfigured", "ClusterQueue no-such-cq doesn't exist"),
        ("Misconfigured", "WorkloadPriorityClass gone not found"),
    ]
    for second, (reason, message) in enumerate(quiet, start=1):
        event = types.WorkloadInadmissible(workload=ref, reason=reason, message=message, at_ms=at(second))
        assert _events(log, event) == [], message
    mismatch = "workload namespace doesn't match ClusterQueue selector"
    event = types.WorkloadInadmissible(workload=ref, reason="Misconfigured", message=mismatch, at_ms=at(9))
    assert _events(log, event) == [(ref.name, "Warning", "Misconfigured", mismatch)]


def test_no_event_while_admission_waits_for_pods_ready() -> None:
    """waitForPodsReady.blockAdmission: Kueue's scheduler sets QuotaReserved=False WaitingForPodsReady "waiting for
    all admitted workloads to be in PodsReady condition" and blocks until they are (scheduler.go
    waitForPodsReadyIfNeeded), recording no Event. Before, kueue-es added a Warning WaitingForPodsReady Event,
    which ``kubectl describe workload`` showed on Kueue's "Setup All-or-nothing with ready Pods" page."""
    log, ref = queues_log()
    message = "waiting for all admitted workloads to be in PodsReady condition"
    event = types.WorkloadInadmissible(workload=ref, reason="WaitingForPodsReady", message=message, at_ms=at(1))
    assert _events(log, event) == []
    pending = types.WorkloadInadmissible(workload=ref, reason="WaitingForQuota", message=PENDING_MESSAGE, at_ms=at(2))
    assert _events(log, pending) == [(ref.name, "Warning", "WaitingForQuota", PENDING_MESSAGE)]


def test_a_job_nested_too_deep_in_kueues_words() -> None:
    """A Job whose owner chain is deeper than Kueue walks: Warning JobNestingTooDeep with Kueue's message
    (reconciler.go ReconcileGenericJob), on the Job, not kueue-es's generic ErrWorkloadCompose."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "j-uid", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
    }
    fact = workloads.rejected(
        job,
        manifests.ManifestError(
            kind="Job", name="ns/j", field=workloads.NESTING_FIELD, problem=workloads.NESTING_MESSAGE
        ),
        now_ms=5,
    )
    assert isinstance(fact, types.ObjectRejected)
    item = kube_events.for_rejection(fact)
    assert item is not None
    assert (item.type, item.reason, item.message) == (
        "Warning",
        "JobNestingTooDeep",
        "Terminated search for Kueue-managed Job because ancestor depth exceeded limit of 10",
    )
    assert item.job == ("batch/v1", "Job", "") and item.workload.name == "j"
    assert kube_events.event_object(item, name="e")["action"] == "JobNestingTooDeep"


def test_multikueue_admission_and_worker_resets_are_told_as_kueue_tells_them() -> None:
    """test/integration/multikueue/jobs_test.go: an Event ``MultiKueue`` Normal "The workload was admitted on
    "worker1"" on the admission, Warning for a copy out of sync with its job; none was recorded."""
    from kueue_es.projections.cluster import ClusterState
    from kueue_es.scheduling import multikueue

    ref = types.WorkloadRef(namespace="default", name="wl")
    state = ClusterState()

    def told(event: types.Event) -> list[tuple[str, str, str, str]]:
        return [(e.type, e.reason, e.message, e.component) for e in kube_events.for_decision(state, event)]

    admitted_on = 'The workload was admitted on "worker1"'
    chosen = types.RemoteAdmissionChosen(workload=ref, check="mk", cluster="worker1", message=admitted_on, at_ms=1)
    assert told(chosen) == [("Normal", "MultiKueue", admitted_on, "kueue-workload-controller")]
    evicted = f'{multikueue.EVICTED_ON_WORKER}"worker1", resetting for re-admission. Previously: "Ready"'
    out_of_sync = f'Remote workload on worker cluster "worker1" {multikueue.OUT_OF_SYNC_ON_WORKER}, Previously: "Ready"'
    assert told(types.MultiKueueCheckRetry(workload=ref, check="mk", message=evicted, at_ms=2)) == [
        ("Normal", "MultiKueue", evicted, "kueue-workload-controller")
    ]
    assert told(types.MultiKueueCheckRetry(workload=ref, check="mk", message=out_of_sync, at_ms=3)) == [
        ("Warning", "MultiKueue", out_of_sync, "kueue-workload-controller")
    ]
    lost = 'Admitting remote lost, Previously: "Ready"'
    assert told(types.MultiKueueCheckRetry(workload=ref, check="mk", message=lost, at_ms=4)) == []


@pytest.mark.parametrize(
    ("field", "problem"),
    [
        ("metadata.labels[kueue.x-k8s.io/queue-name]", "pods 'gq-0' and 'gq-1' has different queue names: a!=b"),
        (
            "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]",
            "pods 'g-0' and 'g-1' has different 'kueue.x-k8s.io/pod-group-total-count' values: 2!=3",
        ),
        (
            "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]",
            "failed to extract 'kueue.x-k8s.io/pod-group-total-count' annotation from the pod 'g-1': strconv.Atoi:"
            ' parsing "x": invalid syntax',
        ),
        (
            "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]",
            'strconv.Atoi: parsing "99999999999999999999": value out of range',
        ),
        (
            "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]",
            "incorrect annotation value 'kueue.x-k8s.io/pod-group-total-count=0': group total count should be greater"
            " than zero",
        ),
        ("", "pod group can't include more than 18 roles"),
        ("metadata.labels[team]", "constructing workload: pods have different label values"),
    ],
)
def test_a_pod_groups_compose_errors_kueue_only_logs_get_no_event(field: str, problem: str) -> None:
    """pod_controller.go returns these (validatePodGroupMetadata, groupTotalCount, ConstructComposableWorkload) and
    Kueue's job reconciler only logs them (handleJobWithNoWorkload): no Warning, though the log keeps the
    rejection. A user's trial saw ``ErrWorkloadCompose`` "Pod gq-1 is invalid: ... different queue names"."""
    fact = types.ObjectRejected(kind="Pod", namespace="ns", name="g-1", field=field, problem=problem)
    assert kube_events.for_rejection(fact) is None
    # the same words about another kind, or another problem of a pod, are still a Warning
    assert kube_events.for_rejection(msgspec.structs.replace(fact, kind="Job")) is not None
    assert kube_events.for_rejection(msgspec.structs.replace(fact, problem="must be a list")) is not None
