"""Elastic workload slices (issue 21, SEMANTICS-ADVANCED D): the pure rules.

The Job webhook's gate and refusals (job_webhook.go, validation.go), the job reconciler's slice
plan (workloadslicing.go EnsureWorkloadSlices), the admitter's replacement (scheduler.go,
flavorassigner.go) with its metric and Kueue's messages, the fold's scale-down, and the ungater's
release order (elastic_job_ungater.go).
"""

from __future__ import annotations

from typing import Any

import msgspec

from kueue_es.events import models, slices, types
from kueue_es.jobframework import slices as job_slices
from kueue_es.jobframework import webhooks
from kueue_es.services.admitter import core as admitter
from kueue_es.services.dispatcher import status, ungater
from tests.builders import Log, cluster_queue, flavor, local_queue, parse, workload

ON = webhooks.Context(elastic_jobs=True)
OFF = webhooks.Context(elastic_jobs=False)
ELASTIC = {slices.ELASTIC_JOB_ANNOTATION: "true"}
GATES = models.Configuration(feature_gates={slices.GATE: True})


def job(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "sample",
            "namespace": "team",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "annotations": annotations or {},
        },
        "spec": {"parallelism": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}, **spec},
    }


# -- the webhook -------------------------------------------------------------------------------------


def test_an_elastic_job_gets_the_elastic_gate_on_its_template() -> None:
    out = webhooks.default("batch/v1", "Job", job(ELASTIC), context=ON)
    assert out["spec"]["suspend"] is True
    assert out["spec"]["template"]["spec"]["schedulingGates"] == [{"name": slices.ELASTIC_JOB_GATE}]


def test_no_gate_with_the_feature_gate_off_or_without_the_annotation() -> None:
    assert (
        "schedulingGates"
        not in webhooks.default("batch/v1", "Job", job(ELASTIC), context=OFF)["spec"]["template"]["spec"]
    )
    assert "schedulingGates" not in webhooks.default("batch/v1", "Job", job(), context=ON)["spec"]["template"]["spec"]


def test_elastic_and_partial_admission_refused_together() -> None:
    errors = webhooks.validate_create(
        "batch/v1", "Job", job({**ELASTIC, "kueue.x-k8s.io/job-min-parallelism": "1"}), context=ON
    )
    assert webhooks.message(errors) == (
        'metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: "1": '
        "partial admission and elastic job cannot be used together"
    )


def test_an_elastic_kind_kueue_does_not_support_is_refused() -> None:
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "team", "labels": {}, "annotations": ELASTIC},
        "spec": {},
    }
    errors = webhooks.validate_create("jobset.x-k8s.io/v1alpha2", "JobSet", jobset, context=ON)
    assert webhooks.message(errors) == (
        "metadata.annotations[kueue.x-k8s.io/elastic-job]: Forbidden: "
        'elastic job is not supported for "jobset.x-k8s.io/v1alpha2, Kind=JobSet"'
    )
    assert webhooks.validate_create("batch/v1", "Job", job(ELASTIC), context=ON) == []


def test_the_elastic_annotation_is_immutable() -> None:
    errors = webhooks.validate_update("batch/v1", "Job", job(ELASTIC), job(), context=ON)
    assert "metadata.annotations[kueue.x-k8s.io/elastic-job]: Invalid value: false: field is immutable" in (
        webhooks.message(errors)
    )


# -- the job reconciler's plan --------------------------------------------------------------------------


def observed(count: int) -> models.Workload:
    doc = workload("job-sample-abcde", count=count, cpu="1")
    doc["metadata"]["annotations"] = dict(ELASTIC)
    wl = parse(doc)
    owner = models.OwnerReference(api_version="batch/v1", kind="Job", name="sample", uid="uid-job-sample-abcde")
    return msgspec.structs.replace(wl, owner=owner)


def test_the_first_slice_is_named_for_the_generation_and_names_itself() -> None:
    (first,) = job_slices.plan(observed(2), slices_now=[], reserved={}, running=False, generation=1, now_ms=5)
    assert first.metadata.name == job_slices.slice_name(job_name="sample", job_uid="uid-job-sample-abcde", generation=1)
    assert first.metadata.annotations[slices.SLICE_NAME_ANNOTATION] == first.metadata.name
    assert job_slices.slice_name(job_name="n", job_uid="u", generation=1) != job_slices.slice_name(
        job_name="n", job_uid="u", generation=2
    )


def test_scale_up_of_a_running_slice_makes_a_replacement_and_scale_down_updates_in_place() -> None:
    (first,) = job_slices.plan(observed(2), slices_now=[], reserved={}, running=False, generation=1, now_ms=5)
    (up,) = job_slices.plan(observed(4), slices_now=[first], reserved={}, running=True, generation=2, now_ms=9)
    assert up.metadata.name != first.metadata.name
    assert up.metadata.annotations[slices.REPLACEMENT_FOR_ANNOTATION] == f"default/{first.metadata.name}"
    assert up.metadata.annotations[slices.SLICE_NAME_ANNOTATION] == first.metadata.name
    assert up.metadata.creation_timestamp_ms == 9 and up.spec.pod_sets[0].count == 4
    (down,) = job_slices.plan(observed(1), slices_now=[first], reserved={}, running=True, generation=2, now_ms=9)
    assert down.metadata.name == first.metadata.name and down.spec.pod_sets[0].count == 1
    assert job_slices.plan(observed(2), slices_now=[first], reserved={}, running=True, generation=2, now_ms=9) == []
    # a replacement not yet holding quota follows the job in place
    (again,) = job_slices.plan(observed(6), slices_now=[first, up], reserved={}, running=True, generation=3, now_ms=11)
    assert again.metadata.name == up.metadata.name and again.spec.pod_sets[0].count == 6


def _two_pod_sets(first: int, second: int) -> models.Workload:
    wl = observed(first)
    main = wl.spec.pod_sets[0]
    other = msgspec.structs.replace(main, name="other", count=second)
    pod_sets = [main, other]
    return msgspec.structs.replace(wl, spec=msgspec.structs.replace(wl.spec, pod_sets=pod_sets))


def test_one_pod_set_down_and_another_up_is_no_scale_down() -> None:
    """Kueue #6395 (workloadslicing.go ScaledDown): a change is a scale-down, updated in place, only when some
    pod set shrinks and none grows; one pod set down and another up is a scale-up, a replacement slice.
    Before it any shrinking pod set updated the running slice in place, growing the other unadmitted."""
    (first,) = job_slices.plan(_two_pod_sets(2, 2), slices_now=[], reserved={}, running=False, generation=1, now_ms=5)
    (mixed,) = job_slices.plan(
        _two_pod_sets(1, 3), slices_now=[first], reserved={}, running=True, generation=2, now_ms=9
    )
    assert mixed.metadata.name != first.metadata.name
    assert mixed.metadata.annotations[slices.REPLACEMENT_FOR_ANNOTATION] == f"default/{first.metadata.name}"
    assert [(ps.name, ps.count) for ps in mixed.spec.pod_sets] == [("main", 1), ("other", 3)]
    (down,) = job_slices.plan(
        _two_pod_sets(1, 2), slices_now=[first], reserved={}, running=True, generation=2, now_ms=9
    )
    assert down.metadata.name == first.metadata.name
    assert [(ps.name, ps.count) for ps in down.spec.pod_sets] == [("main", 1), ("other", 2)]


def test_slices_created_in_the_same_millisecond_keep_the_replacement_last() -> None:
    """Kueue #6203 (workloadslicing.go FindNotFinishedWorkloads): two slices of a job with equal creation
    timestamps are ordered by their replacement link, not by name, so the newest slice is the replacement
    and the next scale is planned from it (the replacement's name sorts first here)."""
    (first,) = job_slices.plan(observed(2), slices_now=[], reserved={}, running=False, generation=1, now_ms=5)
    same_ms = first.metadata.creation_timestamp_ms
    (up,) = job_slices.plan(observed(4), slices_now=[first], reserved={}, running=True, generation=2, now_ms=same_ms)
    early = msgspec.structs.replace(up, metadata=msgspec.structs.replace(up.metadata, name="a-replacement"))
    published = [early, first]
    assert early.metadata.name < first.metadata.name
    assert early.metadata.creation_timestamp_ms == first.metadata.creation_timestamp_ms
    ordered = job_slices.chain(published, job_uid="uid-job-sample-abcde", finished={})
    assert [wl.metadata.name for wl in ordered] == [first.metadata.name, "a-replacement"]
    # the replacement, not yet holding quota, follows the job: planned from it, not from the original
    (again,) = job_slices.plan(observed(6), slices_now=ordered, reserved={}, running=True, generation=3, now_ms=same_ms)
    assert again.metadata.name == "a-replacement" and again.spec.pod_sets[0].count == 6


# -- the admitter ----------------------------------------------------------------------------------------


def elastic(name: str, count: int, *, created: int = 0, replaces: str = "") -> dict[str, Any]:
    doc = workload(name, queue="lq", count=count, created=created, cpu="1")
    doc["metadata"]["annotations"] = {**ELASTIC, slices.SLICE_NAME_ANNOTATION: "a-1"}
    if replaces:
        doc["metadata"]["annotations"][slices.REPLACEMENT_FOR_ANNOTATION] = f"default/{replaces}"
    return doc


def two_flavors() -> Log:
    log = Log()
    log.add(types.ConfigurationObserved(configuration=GATES))
    cq = cluster_queue("cq", flavors={"small": {"cpu": "2"}, "big": {"cpu": "10"}})
    log.apply_manifests(flavor("small"), flavor("big"), cq, local_queue("lq", "cq"), elastic("a-1", 2))
    log.settle(1_000)
    return log


def test_the_replacement_asks_the_delta_on_the_original_flavor_with_kueues_message() -> None:
    log = two_flavors()
    assert log.state.workloads["default/a-1"].reservation is not None
    log.apply_manifests(elastic("a-2", 4, created=60, replaces="a-1"))
    log.settle(2_000)
    new = log.state.workloads["default/a-2"]
    assert new.reservation is None
    # the delta (2 CPU) is asked of small only; big is refused with Kueue's message; the reason is the
    # least severe of the flavors' (flavorassigner.go resolveNoFitReason)
    assert new.pending_message == (
        "couldn't assign flavors to pod set main: could not assign big flavor since the original workload is "
        "assigned: small, insufficient unused quota for cpu in flavor small, 2 more needed"  # sorted, as Kueue's
    )
    assert new.pending_reason == "WaitingForQuota"


def test_logic_11_knew_no_slices_and_logic_12_releases_the_old_slice() -> None:
    log = Log()
    log.add(types.ConfigurationObserved(configuration=GATES))
    log.apply_manifests(
        flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": "6"}}), local_queue("lq", "cq"), elastic("a-1", 2)
    )
    log.settle(1_000)
    log.apply_manifests(workload("other", queue="lq", count=2, created=1, cpu="1"))
    log.settle(1_500)
    log.apply_manifests(elastic("a-2", 4, created=60, replaces="a-1"))
    assert not any(isinstance(o, types.QuotaReserved) for o in admitter.decide_as(11)(log.state, now_ms=2_000))
    out = log.cycle(2_000)
    released = [o for o in out if isinstance(o, types.QuotaReleased)]
    assert [(r.workload.name, r.reason) for r in released] == [("a-1", slices.REPLACED_REASON)]
    old = log.state.workloads["default/a-1"]
    assert old.finished is not None and old.finished.reason == slices.REPLACED_REASON
    # the log names the new slice's Workload (its object's UID is the API server's, on no event)
    assert old.finished.message.startswith("Replaced to accommodate workload default/a-2 (JobUID: ")
    assert log.state.usage_of("cq", "f", "cpu") == 6_000  # 4 of a-2 and 2 of other: a-1 not counted twice
    assert log.state.metrics.counters["kueue_replaced_workload_slices_total"] == {("cq",): 1}


def test_the_replaced_slices_workload_object_names_the_new_slices_workload_uid() -> None:
    log = Log()
    log.add(types.ConfigurationObserved(configuration=GATES))
    log.apply_manifests(
        flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": "6"}}), local_queue("lq", "cq"), elastic("a-1", 2)
    )
    log.settle(1_000)
    log.apply_manifests(elastic("a-2", 4, created=60, replaces="a-1"))
    log.cycle(2_000)
    finished = log.state.workloads["default/a-1"].finished
    assert finished is not None
    wanted = {"conditions": [{"type": "Finished", "reason": slices.REPLACED_REASON, "message": finished.message}]}
    uids = {("default", "a-2"): "wl-uid-of-a-2", ("default", "a-1"): "wl-uid-of-a-1"}
    job_uid = log.state.workloads["default/a-2"].workload.metadata.labels.get("kueue.x-k8s.io/job-uid", "")
    out = status.replaced_slice_status(
        wanted, key="default/a-1", state=log.state, workload_uid=lambda ns, name: uids.get((ns, name), "")
    )
    # Kueue's text: the new slice's Workload object UID, not the job's UID the log carries
    assert out["conditions"][0]["message"] == (
        f"Replaced to accommodate a workload (UID: wl-uid-of-a-2, JobUID: {job_uid}) due to workload slice aggregation"
    )
    unknown = status.replaced_slice_status(wanted, key="default/a-1", state=log.state, workload_uid=lambda ns, n: "")
    assert unknown == wanted  # the new object not written yet: the log's words stay


def test_a_scale_down_in_place_gives_quota_back_at_once() -> None:
    log = Log()
    log.add(types.ConfigurationObserved(configuration=GATES))
    log.apply_manifests(
        flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": "4"}}), local_queue("lq", "cq"), elastic("a-1", 4)
    )
    log.settle(1_000)
    assert log.state.usage_of("cq", "f", "cpu") == 4_000
    log.apply_manifests(elastic("a-1", 1))
    assert log.state.usage_of("cq", "f", "cpu") == 1_000
    reservation = log.state.workloads["default/a-1"].reservation
    assert reservation is not None and reservation.pod_set_assignments[0].count == 4  # admission not rewritten


# -- the ungater -----------------------------------------------------------------------------------------


def pod(name: str, *, gated: bool) -> dict[str, Any]:
    gates = [{"name": slices.ELASTIC_JOB_GATE}] if gated else []
    return {"metadata": {"name": name}, "spec": {"schedulingGates": gates}}


def test_release_fills_the_room_lowest_names_first() -> None:
    pods = [pod("j-c", gated=True), pod("j-a", gated=False), pod("j-b", gated=False), pod("j-0", gated=True)]
    assert ungater.elastic_release(4, pods) == ["j-0", "j-c"]
    assert ungater.elastic_release(3, pods) == ["j-0"]
    assert ungater.elastic_release(2, pods) == []


def test_a_replacement_smaller_than_the_slice_it_replaces_holds_only_its_own_counts() -> None:
    log = Log()
    log.add(types.ConfigurationObserved(configuration=GATES))
    log.apply_manifests(flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": "6"}}), local_queue("lq", "cq"))
    log.apply_manifests(elastic("a-1", 4))
    log.settle(1_000)
    log.apply_manifests(elastic("a-2", 1, created=60, replaces="a-1"))  # a pending replacement scaled back down
    log.settle(2_000)
    new = log.state.workloads["default/a-2"]
    assert new.reservation is not None
    assert new.reservation.pod_set_assignments[0].resource_usage == {"cpu": 1_000}
    assert log.state.usage_of("cq", "f", "cpu") == 1_000


def test_explain_lists_the_slice_chain_and_asks_only_the_delta() -> None:
    from kueue_es import explain
    from kueue_es.scheduling import explain as core

    log = Log()
    log.add(types.ConfigurationObserved(configuration=GATES))
    log.apply_manifests(flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": "4"}}), local_queue("lq", "cq"))
    log.apply_manifests(elastic("a-1", 2))
    log.settle(1_000)
    log.apply_manifests(elastic("a-2", 3, created=60, replaces="a-1"))
    log.settle(2_000)
    log.apply_manifests(elastic("a-3", 8, created=120, replaces="a-2"))
    log.settle(3_000)
    chain = explain._slice_chain(log.state, "default/a-3")
    assert [(c["workload"], c["podSets"], c["replacementFor"], c["status"]) for c in chain] == [
        ("default/a-1", {"main": 2}, "", "finished (WorkloadSliceReplaced)"),
        ("default/a-2", {"main": 3}, "default/a-1", "admitted"),
        ("default/a-3", {"main": 8}, "default/a-2", "pending"),
    ]
    assert explain._slice_chain(log.state, "default/nothing") == []
    summary = core.needs(log.state, "default/a-3").summary()
    assert any(line.startswith("cpu: asks 5;") for line in summary), summary  # 8 pods less the 3 a-2 holds


def test_extra_slices_are_finished_with_kueues_reasons() -> None:
    (first,) = job_slices.plan(observed(2), slices_now=[], reserved={}, running=False, generation=1, now_ms=5)
    (second,) = job_slices.plan(observed(4), slices_now=[first], reserved={}, running=True, generation=2, now_ms=9)
    stray = msgspec.structs.replace(first, metadata=msgspec.structs.replace(first.metadata, name="stray"))
    (third,) = job_slices.plan(
        observed(6), slices_now=[second], reserved={second.key: True}, running=True, generation=3, now_ms=11
    )
    assert job_slices.extras([first, second], reserved={}) == []  # the normal chain: nothing finished
    chain = [first, stray, second, third]
    finished = job_slices.extras(chain, reserved={second.key: True})
    assert [(wl.metadata.name, reason) for wl, reason, _ in finished] == [
        (first.metadata.name, slices.REPLACED_REASON),  # second replaces it
        ("stray", slices.OUT_OF_SYNC_REASON),
    ]
    assert finished[1][2] == "The workload slice is out of sync with its parent job"


def test_a_ray_jobs_slice_name_hashes_both_generations() -> None:
    """workload_names.go GenerateWorkloadNameWithExtra, raycluster/common.go GetWorkloadNameExtraPart: the
    kind lower-cased in the prefix, the extra part (``<generation>_<RayCluster generation>``) in the hash
    instead of the generation alone."""
    plain = job_slices.slice_name(job_name="rj", job_uid="u", generation=2, kind="RayJob", group="ray.io")
    extra = job_slices.slice_name(job_name="rj", job_uid="u", generation=2, kind="RayJob", group="ray.io", extra="2_5")
    assert plain.startswith("rayjob-rj-") and extra.startswith("rayjob-rj-") and plain != extra
    assert plain == job_slices.slice_name(
        job_name="rj", job_uid="u", generation=1, kind="RayJob", group="ray.io", extra="2"
    )


def test_scale_up_between_admission_and_unsuspension_makes_a_replacement() -> None:
    """Kueue's EnsureWorkloadSlices looks at the slice's quota reservation, not at the job's suspension: a Job
    scaled up once its slice is admitted but before the dispatcher unsuspended it (tas/baseline job_test.go's
    elastic case scales as soon as the Workload has an admission) gets a replacement slice; the admitted slice's
    pod sets, immutable, are not changed in place."""
    (first,) = job_slices.plan(observed(1), slices_now=[], reserved={}, running=False, generation=1, now_ms=5)
    reserved = {first.key: True}
    (up,) = job_slices.plan(observed(2), slices_now=[first], reserved=reserved, running=False, generation=2, now_ms=9)
    assert up.metadata.name != first.metadata.name and up.spec.pod_sets[0].count == 2
    assert up.metadata.annotations[slices.REPLACEMENT_FOR_ANNOTATION] == f"default/{first.metadata.name}"
    # without quota the suspended job's slice still follows it in place
    (same,) = job_slices.plan(observed(2), slices_now=[first], reserved={}, running=False, generation=2, now_ms=9)
    assert same.metadata.name == first.metadata.name and same.spec.pod_sets[0].count == 2
