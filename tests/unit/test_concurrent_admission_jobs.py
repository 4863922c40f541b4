"""ConcurrentAdmission when the parent is a job's Workload (Kueue's test/e2e/singlecluster/baseline/
concurrent_admission_test.go): the job's Workload is labelled a parent, the admitted variant's decisions start and stop
the job, the job's stop gives the variant's quota back, and the controller moves the parent's admission from one
variant to the next (docs/design.md "Concurrent admission")."""

from __future__ import annotations

from typing import Any, cast

import msgspec

from kueue_es.events import models, types
from kueue_es.jobframework import jobs, workloads
from kueue_es.jobframework.annotations import (
    EVICTED_ANNOTATION,
    EVICTED_WORKLOAD_ANNOTATION,
    RUNNING_VARIANT_ANNOTATION,
)
from kueue_es.scheduling import concurrent_admission as ca
from kueue_es.services.dispatcher import core
from kueue_es.services.watcher import convert
from kueue_es.services.watcher.inputs import ConversionInputs
from tests.builders import cluster_queue, flavor, local_queue, parse, workload
from tests.unit.dispatch_log import DispatchLog

NOW, NOW_MS = "2026-01-01T00:10:00Z", 1767226200000
GATES = {ca.GATE: True}


def _batch_job(queue: str = "main") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "job",
            "namespace": "ns",
            "uid": "job-uid",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {workloads.QUEUE_LABEL: queue},
        },
        "spec": {
            "suspend": True,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
        },
    }


def _inputs(*, gate: bool = True, policy: bool = True) -> ConversionInputs:
    inputs = ConversionInputs(concurrent_admission=gate)
    inputs.queue_object_changed("LocalQueue", ("ns", "main"), cast(Any, {"spec": {"clusterQueue": "cq"}}))
    spec = {"concurrentAdmissionPolicy": {"migration": {"mode": ca.TRY_PREFERRED}}} if policy else {}
    inputs.queue_object_changed("ClusterQueue", ("", "cq"), cast(Any, {"spec": spec}))
    return inputs


def _labels_of_converted(inputs: ConversionInputs, previous: models.Workload | None = None) -> dict[str, str]:
    fact = jobs.job_facts(_batch_job(), context=inputs.context(("ns", "job"), previous=previous))
    assert isinstance(fact, types.WorkloadObserved)
    return fact.workload.metadata.labels


def test_a_jobs_workload_queued_to_an_opted_in_cluster_queue_is_a_parent() -> None:
    assert _labels_of_converted(_inputs()).get(ca.PARENT_LABEL) == "true"
    assert ca.PARENT_LABEL not in _labels_of_converted(_inputs(gate=False))
    assert ca.PARENT_LABEL not in _labels_of_converted(_inputs(policy=False))


def test_a_pods_workload_is_no_parent() -> None:
    """A plain Pod's (or a pod group's) Workload stays as without the policy: a Pod's stop does not name the variant
    it ran for (docs/design.md "Concurrent admission")."""
    from kueue_es.jobframework import pods

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "pod-uid",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {workloads.QUEUE_LABEL: "main", "kueue.x-k8s.io/managed": "true"},
        },
        "spec": {
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    fact = pods.pod_facts(pod, context=_inputs().context(("ns", "pod-p"), previous=None))
    assert isinstance(fact, types.WorkloadObserved)
    assert ca.PARENT_LABEL not in fact.workload.metadata.labels


def test_the_parent_label_stays_and_a_policy_added_later_asks_for_the_jobs_again() -> None:
    inputs = _inputs(policy=False)
    previous = jobs.job_facts(_batch_job(), context=_inputs().context(("ns", "job"), previous=None))
    assert isinstance(previous, types.WorkloadObserved)
    # once a parent, always (Kueue's workload controller labels it once)
    assert _labels_of_converted(inputs, previous.workload).get(ca.PARENT_LABEL) == "true"
    opted = {"spec": {"concurrentAdmissionPolicy": {"migration": {}}}}
    assert inputs.queue_object_changed("ClusterQueue", ("", "cq"), cast(Any, opted)) is True
    assert inputs.queue_object_changed("ClusterQueue", ("", "cq"), cast(Any, opted)) is False  # no change
    assert inputs.queue_object_changed("LocalQueue", ("ns", "other"), cast(Any, {"spec": {"clusterQueue": "cq"}}))
    assert ca.is_parent(parse(workload("x"))) is False
    assert workloads.CONCURRENT_ADMISSION_PARENT_LABEL == ca.PARENT_LABEL


def test_a_variant_is_logged_with_its_parents_uid_and_name() -> None:
    owner = {"apiVersion": ca.API_VERSION, "kind": "Workload", "name": "job-job-1", "uid": "pu", "controller": True}
    manifest = workload("v", namespace="ns") | {}
    manifest["metadata"]["ownerReferences"] = [owner]
    fact = convert.kueue_fact(manifest)
    assert isinstance(fact, types.WorkloadObserved)
    assert ca.parent_uid(fact.workload) == "pu"
    assert ca.parent_key(fact.workload) == ("ns", "job-job-1")
    del manifest["metadata"]["ownerReferences"]
    manifest["metadata"]["annotations"] = {ca.VARIANT_OF_NAME_ANNOTATION: "forged"}
    plain = convert.kueue_fact(manifest)
    assert isinstance(plain, types.WorkloadObserved) and ca.parent_key(plain.workload) is None
    assert ca.VARIANT_OF_NAME_ANNOTATION not in plain.workload.metadata.annotations


def _variant_log() -> tuple[DispatchLog, types.WorkloadRef]:
    """A parent (the job ``job``'s Workload ``job-job-1``, labelled) and its variant on flavor spot, in lq."""
    log = DispatchLog(gates=GATES)
    log.add(
        types.ResourceFlavorObserved(flavor=parse(flavor("spot", **{"instance-type": "spot"}))),
        types.ClusterQueueObserved(cluster_queue=parse(cluster_queue("cq", flavors={"spot": {"cpu": "4"}}))),
        types.LocalQueueObserved(local_queue=parse(local_queue("lq", "cq"))),
    )
    parent = parse(workload("job-job-1", cpu="1"))
    owner = models.OwnerReference(api_version="batch/v1", kind="Job", name="job", uid="job-uid")
    parent_meta = msgspec.structs.replace(parent.metadata, labels={ca.PARENT_LABEL: "true"}, uid="job-uid")
    log.add(types.WorkloadObserved(workload=msgspec.structs.replace(parent, metadata=parent_meta, owner=owner)))
    made = parse(workload("job-job-1-variant-spot-abcde", cpu="1"))
    annotations = {
        ca.ALLOWED_FLAVORS_ANNOTATION: "spot",
        ca.VARIANT_OF_ANNOTATION: "parent-object-uid",
        ca.VARIANT_OF_NAME_ANNOTATION: "job-job-1",
    }
    variant = msgspec.structs.replace(made, metadata=msgspec.structs.replace(made.metadata, annotations=annotations))
    log.add(types.WorkloadObserved(workload=variant))
    return log, variant_ref(variant)


def variant_ref(variant: models.Workload) -> types.WorkloadRef:
    return types.WorkloadRef(namespace=variant.metadata.namespace, name=variant.metadata.name, uid=variant.metadata.uid)


def test_the_admitted_variant_starts_its_parents_job_with_its_flavor() -> None:
    log, ref = _variant_log()
    admission = log.admit(NOW_MS)
    assert admission.workload == ref  # the parent itself is never queued (admitter logic 43)
    start = core.plan(log.view, admission, seq=log.seq)
    assert isinstance(start, core.StartJob)
    assert (start.name, start.uid, start.workload, start.variant) == ("job", "job-uid", ref, ref.name)
    assert start.node_selector == {"instance-type": "spot"}
    marks = start.patch(current_tolerations=[])["metadata"]["annotations"]
    assert marks[EVICTED_WORKLOAD_ANNOTATION] is None and marks[RUNNING_VARIANT_ANNOTATION] == ref.name
    parent = log.view.cluster.workloads["default/job-job-1"]
    assert core.variant_holds_quota(log.view, parent)


def test_the_variants_eviction_stops_the_job_marked_with_the_variant() -> None:
    log, ref = _variant_log()
    log.admit(NOW_MS)
    eviction = types.EvictionRequested(
        workload=ref, cluster_queue="cq", reason=ca.FLAVOR_MIGRATION, message="m", at_ms=NOW_MS + 1
    )
    log.add(eviction)
    stop = core.plan(log.view, eviction, seq=log.seq)
    assert isinstance(stop, core.StopJob) and stop.evicted_workload == ref.name
    marks = stop.patch(current_pod_spec={"nodeSelector": {"instance-type": "spot"}})["metadata"]["annotations"]
    assert marks[EVICTED_ANNOTATION] == ca.FLAVOR_MIGRATION and marks[EVICTED_WORKLOAD_ANNOTATION] == ref.name


def test_a_variant_of_a_finished_parent_starts_nothing() -> None:
    log, ref = _variant_log()
    parent = log.view.cluster.workloads["default/job-job-1"]
    log.add(types.WorkloadFinished(workload=parent.ref, reason="Succeeded", message="", at_ms=NOW_MS))
    admission = log.admit(NOW_MS)
    assert core.plan(log.view, admission, seq=log.seq) is None


def _job_parent(**status: Any) -> dict[str, Any]:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "job", "uid": "ju", "controller": True}
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u1",
            "labels": {ca.PARENT_LABEL: "true"},
            "ownerReferences": [owner],
        },
        "spec": {"queueName": "lq", "podSets": []},
        "status": status,
    }


def _cond(kind: str, value: bool = True, reason: str = "R") -> dict[str, Any]:
    return {"type": kind, "status": "True" if value else "False", "reason": reason, "message": ""}


def _cq(*flavors: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "cq"},
        "spec": {
            "concurrentAdmissionPolicy": {"migration": {"mode": ca.TRY_PREFERRED}},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": f} for f in flavors]}],
        },
    }


def _admitted(variant: dict[str, Any], flavor_name: str, *extra: dict[str, Any]) -> dict[str, Any]:
    variant["status"] = {
        "conditions": [_cond("QuotaReserved"), _cond("Admitted"), *extra],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {"cpu": flavor_name}}]},
    }
    return variant


def test_a_job_parent_waits_for_its_evicted_variants_quota_and_never_clears_it() -> None:
    parent = _job_parent(conditions=[_cond("QuotaReserved"), _cond("Admitted")])
    reservation, spot = (ca.make_variant(parent, f) for f in ("reservation", "spot"))
    _admitted(spot, "spot", _cond("Evicted", reason=ca.FLAVOR_MIGRATION))
    (evict,) = ca.reconcile(parent, [reservation, spot], _cq("reservation", "spot"), now=NOW, now_ms=NOW_MS)
    assert evict.name == "p" and evict.status is not None
    assert {c["type"]: c["reason"] for c in evict.status["conditions"]}["Evicted"] == "VariantEvicted"
    # the parent's reservation gone but the variant's not yet (its job still stopping): nothing is written, where a
    # parent of no job has the variant's reservation cleared (its quota comes back by its job's stop here)
    cleared = _job_parent(conditions=[_cond("QuotaReserved", False), _cond("Evicted", reason="VariantEvicted")])
    assert ca.reconcile(cleared, [reservation, spot], _cq("reservation", "spot"), now=NOW, now_ms=NOW_MS) == []


def test_a_job_parent_moves_to_the_variant_admitted_after_the_job_stopped() -> None:
    evicted = [_cond("QuotaReserved"), _cond("Admitted"), _cond("Evicted", reason="VariantEvicted")]
    parent = _job_parent(
        conditions=evicted,
        admission={"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {"cpu": "spot"}}]},
    )
    reservation, spot = (ca.make_variant(parent, f) for f in ("reservation", "spot"))
    spot["status"] = {"conditions": [_cond("QuotaReserved", False), _cond("Evicted", reason=ca.FLAVOR_MIGRATION)]}
    # the spot variant released (its job stopped), none admitted yet: the parent's reservation is cleared
    actions = ca.reconcile(parent, [reservation, spot], _cq("reservation", "spot"), now=NOW, now_ms=NOW_MS)
    (clear,) = [a.status for a in actions if a.kind == "status" and a.name == "p"]
    assert clear is not None and clear["admission"] is None
    assert {c["type"]: c["status"] for c in clear["conditions"]}["QuotaReserved"] == "False"
    # the reservation variant admitted by then: cleared, then given its admission (two writes, in order)
    _admitted(reservation, "reservation")
    actions = ca.reconcile(parent, [reservation, spot], _cq("reservation", "spot"), now=NOW, now_ms=NOW_MS)
    first, second = [a.status for a in actions if a.kind == "status" and a.name == "p"]
    assert first is not None and first["admission"] is None
    assert second is not None and second["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "reservation"}
    conditions = {c["type"]: c["status"] for c in second["conditions"]}
    assert (conditions["QuotaReserved"], conditions["Admitted"], conditions["Evicted"]) == ("True", "True", "False")
    assert ca.stands_for_job(parent) and not ca.stands_for_job({"metadata": {}})


class _Publisher:
    """What ProgressReporter.report_stopped reads and writes of the watcher's publisher."""

    def __init__(self, known: dict[tuple[str, str], models.Workload]) -> None:
        self.workloads = known
        self.known = {"Workload": set(known)}
        self.emitted: list[tuple[types.Fact, str]] = []

    def workload_ref(self, key: tuple[str, str]) -> types.WorkloadRef:
        return types.WorkloadRef(namespace=key[0], name=key[1], uid=self.workloads[key].metadata.uid)

    async def emit(self, fact: types.Fact, *, version: str) -> None:
        self.emitted.append((fact, version))


async def test_a_job_stopped_for_a_variants_eviction_reports_the_variant_stopped() -> None:
    from kueue_es.services.watcher.reporting import ProgressReporter

    variant = parse(workload("job-job-1-variant-spot-abcde", namespace="ns", cpu="1"))
    variant = msgspec.structs.replace(variant, metadata=msgspec.structs.replace(variant.metadata, uid="variant-uid"))
    publisher = _Publisher({("ns", variant.metadata.name): variant})
    reporter = ProgressReporter(publisher=cast(Any, publisher), clock=lambda: NOW_MS)
    stopped_job = _batch_job()
    stopped_job["metadata"]["annotations"] = {
        EVICTED_ANNOTATION: ca.FLAVOR_MIGRATION,
        "kueue-es.dev/eviction-seq": "40",
        EVICTED_WORKLOAD_ANNOTATION: variant.metadata.name,
    }
    await reporter.report_stopped(stopped_job, now_ms=NOW_MS, workload=("ns", "job-job-1"))
    [(fact, version)] = publisher.emitted
    assert isinstance(fact, types.WorkloadStopped) and version == "evict-40"
    assert (fact.workload.name, fact.workload.uid, fact.reason) == (
        variant.metadata.name,
        "variant-uid",
        ca.FLAVOR_MIGRATION,
    )


async def test_a_job_running_for_a_variant_reports_its_pods_ready_for_the_variant_too() -> None:
    """With waitForPodsReady the admitter times out the workload holding quota: the variant. Kueue's controller
    copies the parent's PodsReady onto the admitted variant (syncPodsReadyCond); here the watcher reports the job's
    for both."""
    from kueue_es.services.watcher.reporting import ProgressReporter

    parent = parse(workload("job-job-1", namespace="ns", cpu="1"))
    variant = parse(workload("job-job-1-variant-spot-abcde", namespace="ns", cpu="1"))
    publisher = _Publisher({("ns", "job-job-1"): parent, ("ns", variant.metadata.name): variant})
    reporter = ProgressReporter(publisher=cast(Any, publisher), clock=lambda: NOW_MS)
    running = _batch_job()
    running["metadata"]["annotations"] = {RUNNING_VARIANT_ANNOTATION: variant.metadata.name}
    running["spec"]["suspend"] = False
    running["status"] = {"active": 1, "ready": 1}
    await reporter.job_progress("Job", cast(Any, running), ("ns", "job-job-1"), version="7", now_ms=NOW_MS)
    ready = {(f.workload.name, f.ready) for f, _ in publisher.emitted if isinstance(f, types.WorkloadPodsReady)}
    assert ready == {("job-job-1", True), (variant.metadata.name, True)}


def test_explain_says_a_parent_goes_by_its_variants() -> None:
    from kueue_es.scheduling import explain

    log, ref = _variant_log()
    waiting = explain.needs(log.log.state, "default/job-job-1")
    assert waiting.status == "pending" and not waiting.groups  # no quota of its own to explain
    assert waiting.summary()[1] == f"variant {ref.name} (flavor spot): pending"
    log.admit(NOW_MS)
    running = explain.needs(log.log.state, "default/job-job-1")
    assert (running.status, running.cluster_queue) == ("admitted", "cq")
    assert running.blocked[1] == f"variant {ref.name} (flavor spot): admitted"


async def test_a_parents_job_suspended_by_hand_while_a_variant_is_admitted_is_started_again() -> None:
    """Kueue's job reconciler starts a suspended job whose Workload is admitted (step 7): the parent is, with its
    variant's admission, so the job is started again for that variant; while the variant is being evicted it is not
    (its eviction stopped the job)."""
    from kueue_es.services.dispatcher.job_writes import JobWrites
    from kueue_es.services.dispatcher.kube_api import WriteLimiter
    from kueue_es.services.dispatcher.suspension import Suspension
    from tests.unit.test_suspension_races import Recorder

    class SuspendedJob:
        def __init__(self) -> None:
            self.patches: list[dict[str, Any]] = []

        async def get_object(self, ref: Any, *, namespace: str | None, name: str) -> dict[str, Any]:
            template = {"spec": {"containers": [{"name": "c"}]}}
            return {"metadata": {"name": name, "uid": "job-uid"}, "spec": {"suspend": True, "template": template}}

        async def patch_object(self, ref: Any, *, namespace: str | None, name: str, patch: Any, **_: Any) -> Any:
            self.patches.append(patch)
            return {"metadata": {"name": name}, "spec": {}}

    log, ref = _variant_log()
    log.admit(NOW_MS)
    api, recorder = SuspendedJob(), Recorder()
    limiter = WriteLimiter(qps=1000, burst=10)
    suspension = Suspension(view=log.view, jobs=JobWrites(api=api, limiter=limiter), recording=recorder)  # type: ignore[arg-type]
    parent = log.view.cluster.workloads["default/job-job-1"].ref
    suspension.observed(types.WorkloadPodsReady(workload=parent, ready=True, reason="Started", at_ms=NOW_MS + 1))
    suspension.observed(types.WorkloadPodsReady(workload=parent, ready=False, reason="WaitForStart", at_ms=NOW_MS + 2))
    assert parent.key in suspension.due
    seq, at_ms = suspension.due.pop(parent.key)
    await suspension.check(parent.key, seq=seq, at_ms=at_ms)
    [patch] = api.patches
    assert patch["spec"]["suspend"] is False
    assert patch["metadata"]["annotations"][RUNNING_VARIANT_ANNOTATION] == ref.name
    assert [(e.reason, e.workload.name) for e in recorder.events] == [("Started", "job")]
    # the variant being evicted: its eviction stopped the job, which is not started again
    log.add(types.EvictionRequested(workload=ref, cluster_queue="cq", reason="Preempted", message="m", at_ms=NOW_MS))
    suspension.observed(types.WorkloadPodsReady(workload=parent, ready=True, reason="Started", at_ms=NOW_MS + 3))
    suspension.observed(types.WorkloadPodsReady(workload=parent, ready=False, reason="WaitForStart", at_ms=NOW_MS + 4))
    assert parent.key not in suspension.due
