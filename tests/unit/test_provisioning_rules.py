"""The ProvisioningRequest check's rules (scheduling/provisioning.py, SEMANTICS-ADVANCED B.4)."""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import models
from kueue_es.scheduling import provisioning as rules


def config(**spec: Any) -> models.ProvisioningRequestConfig:
    return models.ProvisioningRequestConfig(
        metadata=models.ObjectMeta(name="prc"),
        spec=models.ProvisioningRequestConfigSpec(
            provisioning_class_name="check-capacity.autoscaling.x-k8s.io", **spec
        ),
    )


def container(name: str, **requests: str) -> dict[str, Any]:
    return {"name": name, "resources": {"requests": requests}}


def workload(
    *pod_sets: tuple[str, int, dict[str, str]], admitted: dict[str, int] | None = None, **status: Any
) -> dict[str, Any]:
    admitted = admitted if admitted is not None else {name: count for name, count, _ in pod_sets}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-a-1", "namespace": "ns", "uid": "u1",
                     "annotations": {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600", "other": "x"}},
        "spec": {"podSets": [{"name": n, "count": c, "template": {"spec": {"containers": [container(n, **r)]}}}
                             for n, c, r in pod_sets]},
        "status": {
            "admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": n, "count": c, "flavors": {"cpu": "default-flavor"}} for n, c in admitted.items()]},
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            **status,
        },
    }  # fmt: skip


def request(name: str, *conditions: tuple[str, str], details: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                 "podSets": [{"podTemplateRef": {"name": f"ppt-{name}-main"}, "count": 3}]},
        "status": {"conditions": [{"type": t, "status": "True", "message": m} for t, m in conditions],
                   "provisioningClassDetails": details or {}},
    }  # fmt: skip


GPU = ("main", 3, {"cpu": "100m", "nvidia.com/gpu": "1"})
CPU_ONLY = ("main", 3, {"cpu": "1"})


def test_names_and_attempts() -> None:
    assert rules.request_name("job-a-1", "prov", 2) == "job-a-1-prov-2"
    assert rules.pod_template_name("job-a-1-prov-2", "main") == "ppt-job-a-1-prov-2-main"
    assert rules.attempt_of("job-a-1-prov-12", "job-a-1", "prov") == 12
    assert rules.attempt_of("job-a-1-other-1", "job-a-1", "prov") is None
    long = rules.request_name("w" * 250, "prov", 1)
    assert len(long) == 253 and long.startswith("w" * 247 + "-")
    assert rules.attempt_of(long, "w" * 250, "prov") is None  # the attempt is hashed away, as in Kueue


@pytest.mark.parametrize(
    ("retry_count", "expected"), [(0, 60), (1, 120), (2, 240), (5, 1800), (10, 1800)]
)  # fmt: skip
def test_backoff_is_base_times_two_to_the_retries_capped(retry_count: int, expected: int) -> None:
    assert rules.backoff_seconds(retry_count, rules.DEFAULT_RETRY) == expected


def test_needed_only_for_managed_resources_with_admitted_pods() -> None:
    gpus = config(managed_resources=["nvidia.com/gpu"])
    assert rules.is_needed(workload(GPU), gpus)
    assert not rules.is_needed(workload(CPU_ONLY), gpus)
    assert rules.is_needed(workload(CPU_ONLY), config())  # empty: every resource is managed
    assert not rules.is_needed(workload(GPU, admitted={"main": 0}), gpus)
    with pytest.raises(ValueError, match="no podSetAssignment for pod set 'main'"):
        rules.is_needed(workload(GPU, admitted={}), gpus)


def test_not_needed_is_ready_with_kueues_message() -> None:
    entry = {"name": "prov", "state": "Pending"}
    out = rules.next_entry(entry, workload(CPU_ONLY), config(managed_resources=["nvidia.com/gpu"]), None)
    assert (out["state"], out["message"]) == ("Ready", "the provisioning request is not needed")
    assert rules.attempt_to_create(out, workload(CPU_ONLY), config(managed_resources=["nvidia.com/gpu"]), None) is None


def test_no_config_is_pending_inactive() -> None:
    out = rules.next_entry({"name": "prov", "state": "Ready"}, workload(GPU), None, None)
    assert (out["state"], out["message"]) == ("Pending", "the check is not active")


def test_states_from_the_request() -> None:
    wl, cfg, entry = workload(GPU), config(), {"name": "prov", "state": "Pending"}
    assert rules.next_entry(entry, wl, cfg, request("job-a-1-prov-1")) == {**entry, "message": ""}
    accepted = request("job-a-1-prov-1", ("Accepted", "ok"))
    accepted["status"]["conditions"].append({"type": "Provisioned", "status": "False", "message": "in progress"})
    assert rules.next_entry(entry, wl, cfg, accepted)["message"] == "in progress"
    ready = rules.next_entry(entry, wl, cfg, request("job-a-1-prov-1", ("Provisioned", "found")))
    assert ready["state"] == "Ready" and ready["message"] == "found"
    assert ready["podSetUpdates"] == [
        {
            "name": "main",
            "annotations": {
                "autoscaling.x-k8s.io/consume-provisioning-request": "job-a-1-prov-1",
                "autoscaling.x-k8s.io/provisioning-class-name": "check-capacity.autoscaling.x-k8s.io",
            },
        }
    ]


def test_provisioned_node_selector_from_class_details() -> None:
    updates = models.ProvisioningRequestPodSetUpdates(
        node_selector=[
            models.ProvisioningRequestPodSetUpdatesNodeSelector(key="zone", value_from_provisioning_class_detail="z"),
            models.ProvisioningRequestPodSetUpdatesNodeSelector(key="gone", value_from_provisioning_class_detail="x"),
        ]
    )
    cfg = config(pod_set_updates=updates)
    pr = request("job-a-1-prov-1", ("Provisioned", "found"), details={"z": "eu-1"})
    [update] = rules.next_entry({"name": "prov", "state": "Pending"}, workload(GPU), cfg, pr)["podSetUpdates"]
    assert update["nodeSelector"] == {"zone": "eu-1"}  # a detail the request lacks is skipped


def test_failed_retries_with_backoff_then_rejects() -> None:
    wl, cfg = workload(GPU), config(retry_strategy=models.ProvisioningRequestRetryStrategy(backoff_limit_count=2))
    first = rules.next_entry({"name": "prov", "state": "Pending"}, wl, cfg, request("job-a-1-prov-1", ("Failed", "no")))
    assert first == {
        "name": "prov",
        "state": "Retry",
        "message": "Retrying after failure: no",
        "requeueAfterSeconds": 60,
    }
    # after the eviction Kueue resets it to Pending with retryCount 1: the next attempt is created
    reset = {"name": "prov", "state": "Pending", "retryCount": 1, "requeueAfterSeconds": 60}
    failed1 = request("job-a-1-prov-1", ("Failed", "no"))
    # attempt 1 already counted: the reset check stays Pending, no second eviction from the failed request
    # (Kueue #6283, issue #5129 'Admission checks for an evicted workload are Pending')
    assert rules.next_entry(reset, wl, cfg, failed1)["state"] == "Pending"
    assert rules.attempt_to_create(reset, wl, cfg, failed1) == 2
    second = rules.next_entry(reset, wl, cfg, request("job-a-1-prov-2", ("Failed", "no")))
    assert (second["state"], second["requeueAfterSeconds"]) == ("Retry", 120)
    # kueue#6322: after the second failed attempt the third request is created too
    reset2 = {**reset, "retryCount": 2, "requeueAfterSeconds": 120}
    failed2 = request("job-a-1-prov-2", ("Failed", "no"))
    assert rules.next_entry(reset2, wl, cfg, failed2)["state"] == "Pending"
    assert rules.attempt_to_create(reset2, wl, cfg, failed2) == 3
    third = rules.next_entry({**reset, "retryCount": 2}, wl, cfg, request("job-a-1-prov-3", ("Failed", "no")))
    assert (third["state"], third["message"]) == ("Rejected", "no")


def test_booking_expired_counts_as_failed_only_before_admission() -> None:
    cfg, entry = config(), {"name": "prov", "state": "Ready"}
    expired = request("job-a-1-prov-1", ("Provisioned", "ok"), ("BookingExpired", "late"))
    assert rules.next_entry(entry, workload(GPU), cfg, expired)["state"] == "Retry"
    admitted = workload(GPU)
    admitted["status"]["conditions"].append({"type": "Admitted", "status": "True"})
    assert rules.next_entry(entry, admitted, cfg, expired) == entry


def test_capacity_revoked_rejects_an_active_unfinished_workload() -> None:
    revoked = request("job-a-1-prov-1", ("Provisioned", "ok"), ("CapacityRevoked", "taken back"))
    out = rules.next_entry({"name": "prov", "state": "Ready"}, workload(GPU), config(), revoked)
    assert (out["state"], out["message"]) == ("Rejected", "taken back")


def test_the_request_and_its_pod_template() -> None:
    wl, cfg = workload(GPU), config(parameters={"a": "b"})
    merged = rules.merge_pod_sets(wl, cfg)
    pr = rules.provisioning_request(wl, "prov", 1, cfg, merged)
    assert pr["metadata"]["name"] == "job-a-1-prov-1"
    assert pr["metadata"]["labels"] == {"kueue.x-k8s.io/managed": "true"}
    assert pr["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert pr["spec"]["parameters"] == {"a": "b", "maxRunDurationSeconds": "600"}
    assert pr["spec"]["podSets"] == [{"podTemplateRef": {"name": "ppt-job-a-1-prov-1-main"}, "count": 3}]
    flavor = {"spec": {"nodeLabels": {"pool": "gpu"}, "tolerations": [{"key": "t", "operator": "Exists"}]}}
    template = rules.pod_template(wl, "job-a-1-prov-1", merged[0], {"default-flavor": flavor})
    assert template["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert template["template"]["spec"]["tolerations"] == [{"key": "t", "operator": "Exists"}]


def test_merge_policies() -> None:
    same = workload(("a", 2, {"cpu": "1"}), ("b", 3, {"cpu": "1"}), ("c", 1, {"cpu": "2"}))
    assert [(m.name, m.count) for m in rules.merge_pod_sets(same, config())] == [("a", 2), ("b", 3), ("c", 1)]
    by_requirements = config(pod_set_merge_policy="IdenticalWorkloadSchedulingRequirements")
    assert [(m.name, m.count) for m in rules.merge_pod_sets(same, by_requirements)] == [("a", 5), ("c", 1)]
    by_template = config(pod_set_merge_policy="IdenticalPodTemplates")  # container names differ: no merge
    assert [(m.name, m.count) for m in rules.merge_pod_sets(same, by_template)] == [("a", 2), ("b", 3), ("c", 1)]


def test_latest_request_is_the_highest_attempt_matching_the_config() -> None:
    cfg = config()
    older, newer = request("job-a-1-prov-1"), request("job-a-1-prov-2")
    other_class = request("job-a-1-prov-3")
    other_class["spec"]["provisioningClassName"] = "queued-provisioning.gke.io"
    assert rules.latest_request([newer, older, other_class], "job-a-1", "prov", cfg) is newer


def test_active_condition_and_bad_parameters() -> None:
    check = {"spec": {"parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "x"}}}
    assert rules.parameters_problem(check, {"x": config()}) is None
    problem = rules.parameters_problem(check, {})
    assert problem == 'provisioningrequestconfigs.kueue.x-k8s.io "x" not found'
    assert rules.active_condition(problem)["reason"] == "BadParametersRef"
    assert rules.parameters_problem({"spec": {}}, {}) == "missing parameters reference"
    assert rules.active_condition(None)["status"] == "True"


def test_fake_autoscaler_fails_beyond_capacity_or_when_asked() -> None:
    from kueue_es.sim import autoscaler

    templates = {
        "ppt-job-a-1-prov-1-main": {
            "template": {"spec": {"containers": [container("main", cpu="100m", **{"nvidia.com/gpu": "1"})]}}
        }
    }
    pr = request("job-a-1-prov-1")
    asked = autoscaler.requested(templates, pr)
    assert asked == {"cpu": 300, "nvidia.com/gpu": 3}
    assert autoscaler.outcome(pr, asked, None) is None
    assert autoscaler.outcome(pr, asked, {"nvidia.com/gpu": 3}) is None
    assert autoscaler.outcome(pr, asked, {"nvidia.com/gpu": 2}) == (
        "Capacity is not found: nvidia.com/gpu 3 requested, 2 available"
    )
    pr["spec"]["parameters"] = {"fakeAutoscalerOutcome": "Failed"}
    assert "asked to fail" in str(autoscaler.outcome(pr, asked, None))


def test_explain_tells_the_requests_story() -> None:
    from kueue_es.events import types
    from kueue_es.scheduling import explain

    ref = types.WorkloadRef(namespace="ns", name="job-a-1", uid="u1")
    retry = types.AdmissionCheckStateChanged(workload=ref, check="prov", state="Retry", requeue_after_seconds=120)
    assert explain._check_story(retry) == " (requeued after 120s)"
    update = models.PodSetUpdate(
        name="main",
        annotations={
            rules.CONSUME_ANNOTATION: "job-a-1-prov-2",
            rules.CLASS_ANNOTATION: "check-capacity.autoscaling.x-k8s.io",
        },
        node_selector={"zone": "eu-1"},
    )
    ready = types.AdmissionCheckStateChanged(workload=ref, check="prov", state="Ready", pod_set_updates=[update])
    assert explain._check_story(ready) == (
        " (pod set main consumes ProvisioningRequest job-a-1-prov-2"
        " (check-capacity.autoscaling.x-k8s.io, nodeSelector {'zone': 'eu-1'}))"
    )


def test_the_config_is_validated_as_kueues_crd_validates_it() -> None:
    from kueue_es import validation

    good = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "prc"},
        "spec": {
            "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
            "managedResources": ["nvidia.com/gpu"],
        },
    }
    assert validation.validate(good) == []
    bad = {**good, "spec": {"provisioningClassName": "Not_A_Class", "podSetMergePolicy": "Sometimes"}}
    causes = [str(c) for c in validation.validate(bad)]
    assert any("spec.provisioningClassName" in c for c in causes), causes
    assert any("spec.podSetMergePolicy" in c and "Sometimes" in c for c in causes), causes
    too_many = {**good, "spec": {**good["spec"], "parameters": {f"p{i}": "v" for i in range(101)}}}
    assert any("spec.parameters" in str(c) for c in validation.validate(too_many))


def test_the_jobs_templates_win_over_the_workload_objects() -> None:
    wl = workload(("a", 2, {"cpu": "1"}), ("b", 3, {"cpu": "1"}))
    job = {"spec": {"containers": [{"name": "app", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}]}}
    merged = rules.merge_pod_sets(wl, config(pod_set_merge_policy="IdenticalPodTemplates"), {"a": job, "b": job})
    assert [(m.name, m.count) for m in merged] == [("a", 5)]  # the same job template: merged
    template = rules.pod_template(wl, "job-a-1-prov-1", merged[0], {})
    [c] = template["template"]["spec"]["containers"]
    assert (c["image"], c["resources"]["requests"]) == ("busybox", {"cpu": "1"})  # limits copied to requests
    assert job["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}}  # the input is not changed


def test_the_kubernetes_events_kueues_controller_records() -> None:
    """controller.go: ProvisioningRequestCreated on creating a request, AdmissionCheckUpdated when a check's
    state changes (with its message), FailedCreate when a create fails; on the Workload, from Kueue's
    component, cut to 1024 characters."""
    wl = workload(GPU)
    assert rules.created_event("job-a-1-prov-1") == (
        "Normal", "ProvisioningRequestCreated", "Created", 'Created ProvisioningRequest: "job-a-1-prov-1"'
    )  # fmt: skip
    pending = {"name": "prov", "state": "Pending", "message": ""}
    ready = {"name": "prov", "state": "Ready", "message": "Provisioned"}
    assert rules.check_updated_event(pending, ready) == (
        "Normal",
        "AdmissionCheckUpdated",
        "AdmissionCheckUpdated",
        "Admission check prov updated state from Pending to Ready with message: Provisioned",
    )
    assert rules.check_updated_event(pending, {**pending, "message": "Provisioning is in progress"}) is None
    assert rules.check_updated_event(ready, {**pending, "message": ""})[3] == (
        "Admission check prov updated state from Ready to Pending"
    )
    failed = rules.failed_create_event("PodTemplate", "ppt-x-main", "forbidden")
    assert failed == ("Warning", "FailedCreate", "FailedCreate", 'Error creating PodTemplate "ppt-x-main": forbidden')
    body = rules.event_object(wl, rules.created_event("r" * 2000), name="job-a-1.1", at="2026-01-01T00:00:00Z")
    assert body["involvedObject"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "namespace": "ns", "name": "job-a-1", "uid": "u1"
    }  # fmt: skip
    assert (body["metadata"], body["type"], body["reason"]) == (
        {"name": "job-a-1.1", "namespace": "ns"}, "Normal", "ProvisioningRequestCreated"
    )  # fmt: skip
    assert len(body["message"]) == 1024 and body["message"].endswith("...")
    assert body["reportingComponent"] == body["source"]["component"] == "kueue-provisioning-request-controller"
