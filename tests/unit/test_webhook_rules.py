"""Kueue's job webhooks as pure rules (kueue_es.jobframework.webhooks): Default, ValidateCreate, ValidateUpdate.

Each case is one rule of Kueue's (pkg/controller/jobframework/defaults.go, validation.go,
tas_validation.go, jobs/job/job_webhook.go, jobs/pod/pod_webhook.go), with Kueue's field path and message.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

from kueue_es.jobframework import integrations, pods, webhooks

QUEUE = "kueue.x-k8s.io/queue-name"


def job(*, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **spec: Any) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sample", "namespace": "team", "labels": labels or {}, "annotations": annotations or {}},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}, **spec},
    }


def pod(*, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **meta: Any) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "team",
            "labels": labels or {},
            "annotations": annotations or {},
            **meta,
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }


def pytorch(*, labels: dict[str, str] | None = None, worker_annotations: dict[str, str] | None = None) -> dict:
    template = {"metadata": {"annotations": worker_annotations or {}}, "spec": {"containers": [{"name": "c"}]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "team", "labels": labels or {}},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c"}]}}},
                "Worker": {"replicas": 2, "template": template},
            }
        },
    }


# -- Default -------------------------------------------------------------------------------------


def test_a_queued_job_is_created_suspended_and_the_input_is_left_alone() -> None:
    given = job(labels={QUEUE: "user-queue"})
    before = copy.deepcopy(given)
    out = webhooks.default("batch/v1", "Job", given)
    assert out["spec"]["suspend"] is True
    assert given == before


def test_a_job_without_queue_is_left_alone_unless_managed_without_queue_name() -> None:
    assert "suspend" not in webhooks.default("batch/v1", "Job", job())["spec"]
    managed = webhooks.default("batch/v1", "Job", job(), context=webhooks.Context(manage_jobs_without_queue_name=True))
    assert managed["spec"]["suspend"] is True


def test_the_default_local_queue_is_given_and_then_suspends() -> None:
    out = webhooks.default("batch/v1", "Job", job(), context=webhooks.Context(default_local_queue=True))
    assert out["metadata"]["labels"][QUEUE] == "default"
    assert out["spec"]["suspend"] is True
    # a named queue is kept
    named = webhooks.default(
        "batch/v1", "Job", job(labels={QUEUE: "mine"}), context=webhooks.Context(default_local_queue=True)
    )
    assert named["metadata"]["labels"][QUEUE] == "mine"


UNSELECTED = webhooks.Context(namespace_managed=False, default_local_queue=True, manage_jobs_without_queue_name=True)


def test_an_unselected_namespace_gets_no_default_queue_and_no_managing_without_one() -> None:
    """managedJobsNamespaceSelector in Kueue's job webhooks: ApplyDefaultLocalQueue and, for a job without
    the queue-name label, WorkloadShouldBeSuspended ask it (base_webhook_test.go "job in unmanaged namespace
    with default lq should not get queue label or be suspended"; defaults_test.go "job without queue name
    with manageJobs in unmanaged ns"); a queue-labelled job is suspended wherever it is, as there."""
    plain = webhooks.default("batch/v1", "Job", job(), context=UNSELECTED)
    assert plain == job()
    queued = webhooks.default("batch/v1", "Job", job(labels={QUEUE: "q"}), context=UNSELECTED)
    assert queued["spec"]["suspend"] is True and queued["metadata"]["labels"] == {QUEUE: "q"}
    torch = webhooks.default("kubeflow.org/v1", "PyTorchJob", pytorch(), context=UNSELECTED)
    assert torch == pytorch()
    # the same job in a selected namespace: the default LocalQueue, then suspended
    selected = webhooks.default(
        "batch/v1", "Job", job(), context=dataclasses.replace(UNSELECTED, namespace_managed=True)
    )
    assert selected["metadata"]["labels"] == {QUEUE: "default"} and selected["spec"]["suspend"] is True


def test_the_pod_webhook_leaves_pods_of_an_unselected_namespace_alone() -> None:
    """pod_webhook.go Default filters on the namespace first: a queue-labelled pod there is neither gated nor
    marked; a pod whose managed Deployment marked its template (suspendByParent) is gated before that filter."""
    assert webhooks.default("v1", "Pod", pod(labels={QUEUE: "q"}), context=UNSELECTED) == pod(labels={QUEUE: "q"})
    marked = pod(annotations={"kueue.x-k8s.io/pod-suspending-parent": "deployment"})
    gated = webhooks.default("v1", "Pod", marked, context=UNSELECTED)
    assert [g["name"] for g in gated["spec"]["schedulingGates"]] == [webhooks.ADMISSION_GATE, webhooks.TOPOLOGY_GATE]


def test_the_namespace_is_read_only_where_it_decides() -> None:
    """A webhook reads the Namespace for a pod it may gate, and for another kind only without the queue-name
    label when the default LocalQueue or manageJobsWithoutQueueName would apply."""

    def decides(served: webhooks.Target, obj: dict[str, Any], *, manage: bool = False, default: bool = False) -> bool:
        return webhooks.namespace_decides(
            served, obj, manage_jobs_without_queue_name=manage, default_local_queue=default
        )

    assert decides(webhooks.POD, pod(labels={QUEUE: "q"})) and decides(webhooks.POD, pod())
    assert not decides(webhooks.POD, pod(annotations={"kueue.x-k8s.io/pod-suspending-parent": "deployment"}))
    owned = pod(
        ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}]
    )
    assert not decides(webhooks.POD, owned)
    assert not decides(webhooks.JOB, job(labels={QUEUE: "q"}), manage=True, default=True)
    assert not decides(webhooks.JOB, job())
    assert decides(webhooks.JOB, job(), manage=True) and decides(webhooks.JOB, job(), default=True)


def test_a_child_of_a_managed_job_is_neither_queued_nor_suspended() -> None:
    child = job(labels={QUEUE: "q"})
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "u", "controller": True}
    ]
    out = webhooks.default("batch/v1", "Job", child, context=webhooks.Context(default_local_queue=True))
    assert "suspend" not in out["spec"]


def test_a_queued_pod_is_gated_and_marked_managed() -> None:
    out = webhooks.default("v1", "Pod", pod(labels={QUEUE: "q"}))
    assert out["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert [g["name"] for g in out["spec"]["schedulingGates"]] == [
        "kueue.x-k8s.io/admission",
        "kueue.x-k8s.io/topology",
    ]
    without_tas = webhooks.default(
        "v1", "Pod", pod(labels={QUEUE: "q"}), context=webhooks.Context(topology_aware_scheduling=False)
    )
    assert [g["name"] for g in without_tas["spec"]["schedulingGates"]] == ["kueue.x-k8s.io/admission"]


def test_a_queued_pod_gets_kueues_finalizer_and_role_hash() -> None:
    """pod_webhook.go Default: the managed finalizer and the role-hash annotation (GenerateRoleHash of the spec;
    Kueue's own tests give dc85db45 for one container requesting cpu: 1); a hash already there is kept."""
    queued = pod(labels={QUEUE: "q"}, finalizers=["example.com/keep"])
    queued["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    out = webhooks.default("v1", "Pod", queued)
    assert out["metadata"]["finalizers"] == ["example.com/keep", "kueue.x-k8s.io/managed"]
    assert out["metadata"]["annotations"] == {"kueue.x-k8s.io/role-hash": "dc85db45"}
    hashed = pod(labels={QUEUE: "q"}, annotations={"kueue.x-k8s.io/role-hash": "mine"})
    assert webhooks.default("v1", "Pod", hashed)["metadata"]["annotations"] == {"kueue.x-k8s.io/role-hash": "mine"}
    assert webhooks.default("v1", "Pod", out) == out  # the finalizer once


def test_a_pod_its_parent_suspends_gets_the_role_hash_but_no_finalizer() -> None:
    """suspendByParent: the gates and the role hash, neither the managed label nor the finalizer; under TAS the
    pod's index label named by pod-group-pod-index-label is copied to kueue.x-k8s.io/pod-group-pod-index."""
    marked = pod(
        labels={"apps.kubernetes.io/pod-index": "3"},
        annotations={
            "kueue.x-k8s.io/pod-suspending-parent": "statefulset",
            "kueue.x-k8s.io/pod-group-pod-index-label": "apps.kubernetes.io/pod-index",
        },
    )
    out = webhooks.default("v1", "Pod", marked)
    assert "finalizers" not in out["metadata"]
    assert out["metadata"]["labels"] == {"apps.kubernetes.io/pod-index": "3", "kueue.x-k8s.io/pod-group-pod-index": "3"}
    assert out["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == pods.role_hash({"spec": marked["spec"]})


def test_a_pod_left_alone_gets_no_finalizer() -> None:
    assert "finalizers" not in webhooks.default("v1", "Pod", pod())["metadata"]


def test_a_pod_of_a_job_is_not_gated() -> None:
    child = pod(labels={QUEUE: "q"}, ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "controller": True}])
    assert "schedulingGates" not in webhooks.default("v1", "Pod", child)["spec"]


@pytest.mark.parametrize("kind", sorted(integrations.registry()))
def test_every_integration_is_suspended_by_its_own_field(kind: str) -> None:
    integration = integrations.registry()[kind]
    obj = {
        "apiVersion": integration.api_version,
        "kind": kind,
        "metadata": {"name": "x", "namespace": "team", "labels": {QUEUE: "q"}},
        "spec": {},
    }
    out = webhooks.default(integration.api_version, kind, obj)
    if integration.suspend_path is not None:
        assert integrations.get_at(out, integration.suspend_path) is True
    unqueued = {**obj, "metadata": {"name": "x", "namespace": "team"}}
    assert webhooks.default(integration.api_version, kind, unqueued) == unqueued


def test_an_unknown_kind_is_returned_unchanged() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"labels": {QUEUE: "q"}}, "spec": {}}
    assert webhooks.default("example.com/v1", "Widget", obj) == obj


# -- ValidateCreate ------------------------------------------------------------------------------


def messages(errors: list[webhooks.FieldError]) -> list[str]:
    return [str(e) for e in errors]


def test_the_queue_name_must_be_a_dns_subdomain() -> None:
    errors = webhooks.validate_create("batch/v1", "Job", job(labels={QUEUE: "User_Queue"}))
    assert len(errors) == 1
    assert str(errors[0]).startswith(
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "User_Queue": a lowercase RFC 1123 subdomain'
    )
    assert webhooks.validate_create("batch/v1", "Job", job(labels={QUEUE: "user-queue.a"})) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: should be greater than 0"),
        (
            "ten",
            'metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: "ten":'
            ' strconv.Atoi: parsing "ten": invalid syntax',
        ),
        (  # beyond Go's int (64 bits): refused as strconv.Atoi refuses it (before, created, and undecodable later)
            "99999999999999999999",
            'metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: "99999999999999999999":'
            ' strconv.Atoi: parsing "99999999999999999999": value out of range',
        ),
    ],
)
def test_the_max_exec_time_label_is_a_positive_integer(value: str, expected: str) -> None:
    errors = webhooks.validate_create("batch/v1", "Job", job(labels={"kueue.x-k8s.io/max-exec-time-seconds": value}))
    assert messages(errors) == [expected]


@pytest.mark.parametrize(
    ("value", "parallelism", "expected"),
    [
        ("3", 3, "should be between 0 and 2"),
        ("0", 3, "should be between 0 and 2"),
        ("x", 3, 'strconv.Atoi: parsing "x": invalid syntax'),
        ("99999999999999999999", 3, 'strconv.Atoi: parsing "99999999999999999999": value out of range'),
        ("4294967298", 3, None),  # Kueue compares int32(v): 2
        ("2", 3, None),
    ],
)
def test_partial_admission_annotation(value: str, parallelism: int, expected: str | None) -> None:
    errors = webhooks.validate_create(
        "batch/v1", "Job", job(annotations={"kueue.x-k8s.io/job-min-parallelism": value}, parallelism=parallelism)
    )
    if expected is None:
        assert errors == []
    else:
        assert [(e.field, e.detail) for e in errors] == [
            ("metadata.annotations[kueue.x-k8s.io/job-min-parallelism]", expected)
        ]


def test_completions_equal_parallelism_needs_an_indexed_job_with_equal_counts() -> None:
    key = "kueue.x-k8s.io/job-completions-equal-parallelism"
    errors = webhooks.validate_create("batch/v1", "Job", job(annotations={key: "true"}, parallelism=2, completions=3))
    assert [(e.field, e.detail) for e in errors] == [
        (f"metadata.annotations[{key}]", "should not be enabled for NonIndexed jobs"),
        ("spec.completions", f"should be equal to parallelism when {key} annotation is true"),
    ]
    ok = job(annotations={key: "true"}, parallelism=2, completions=2, completionMode="Indexed")
    assert webhooks.validate_create("batch/v1", "Job", ok) == []


def test_tas_annotations_are_validated_with_the_template_field_path() -> None:
    bad = job()
    bad["spec"]["template"]["metadata"] = {
        "annotations": {
            "kueue.x-k8s.io/podset-required-topology": "rack",
            "kueue.x-k8s.io/podset-preferred-topology": "block",
        }
    }
    errors = webhooks.validate_create("batch/v1", "Job", bad)
    assert [str(error) for error in errors] == [  # Kueue tas_validation.go ValidateTASPodSetRequest
        "spec.template.metadata.annotations: Invalid value: must not contain more than one topology annotation: "
        '["kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology", '
        '"kueue.x-k8s.io/podset-unconstrained-topology"]'
    ]
    assert (
        webhooks.validate_create("batch/v1", "Job", bad, context=webhooks.Context(topology_aware_scheduling=False))
        == []
    )


def test_tas_annotations_of_an_integration_name_its_replica_template() -> None:
    bad = pytorch(worker_annotations={"kueue.x-k8s.io/podset-unconstrained-topology": "maybe"})
    errors = webhooks.validate_create("kubeflow.org/v1", "PyTorchJob", bad)
    assert len(errors) == 1
    assert errors[0].field.startswith("spec.pytorchReplicaSpecs[Worker].template.metadata.annotations[")


def test_pod_rules() -> None:
    errors = webhooks.validate_create("v1", "Pod", pod(labels={"kueue.x-k8s.io/managed": "yes"}))
    assert messages(errors) == [
        "metadata.labels[kueue.x-k8s.io/managed]: Forbidden: managed label value can only be 'true'"
    ]
    grouped = pod(labels={"kueue.x-k8s.io/pod-group-name": "g"})
    assert messages(webhooks.validate_create("v1", "Pod", grouped)) == [
        "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value: both the"
        " 'kueue.x-k8s.io/pod-group-total-count' annotation and the 'kueue.x-k8s.io/pod-group-name' label should be set"
    ]
    grouped["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "2"
    assert webhooks.validate_create("v1", "Pod", grouped) == []


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        # pod_controller.go groupTotalCount, as pod_webhook.go validatePodGroupMetadata wraps it
        (
            "0",
            "incorrect annotation value 'kueue.x-k8s.io/pod-group-total-count=0': group total count should be"
            " greater than zero",
        ),
        (
            "-3",
            "incorrect annotation value 'kueue.x-k8s.io/pod-group-total-count=-3': group total count should be"
            " greater than zero",
        ),
        ("two", 'strconv.Atoi: parsing "two": invalid syntax'),
        ("99999999999999999999", 'strconv.Atoi: parsing "99999999999999999999": value out of range'),
        ("9223372036854775808", 'strconv.Atoi: parsing "9223372036854775808": value out of range'),
        ("9223372036854775807", None),
    ],
)
def test_the_pod_group_total_count_is_read_as_kueue_reads_it(value: str, detail: str | None) -> None:
    """A user's trial: "0" was refused with "should be greater than or equal to 1", and "99999999999999999999"
    (fast admission) was let through, its Workload then an event no service could decode."""
    grouped = pod(
        labels={"kueue.x-k8s.io/pod-group-name": "g"},
        annotations={"kueue.x-k8s.io/pod-group-total-count": value, "kueue.x-k8s.io/pod-group-fast-admission": "true"},
    )
    field = "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]"
    expected = [] if detail is None else [f'{field}: Invalid value: "{value}": {detail}']
    assert messages(webhooks.validate_create("v1", "Pod", grouped)) == expected


def test_tas_slice_sizes_are_int32_as_kueue_parses_them() -> None:
    """tas_validation.go reads the slice size with strconv.ParseInt(value, 10, 32): beyond it, not numeric."""
    bad = job(parallelism=4)
    bad["spec"]["template"]["metadata"] = {
        "annotations": {
            "kueue.x-k8s.io/podset-slice-required-topology": "rack",
            "kueue.x-k8s.io/podset-slice-size": "2147483648",
        }
    }
    assert messages(webhooks.validate_create("batch/v1", "Job", bad)) == [
        'spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Invalid value: "2147483648":'
        " must be a numeric value"
    ]


LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
BLOCK = {"kueue.x-k8s.io/podset-required-topology": "cloud.provider.com/topology-block"}
HOST, RACK = "kubernetes.io/hostname", "cloud.provider.com/topology-rack"


def _layers(*layers: tuple[str, int]) -> str:
    return json.dumps([{"topology": level, "size": size} for level, size in layers])


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({**BLOCK, LAYERS: _layers((HOST, 32))}, ["[]: Invalid value: 32: must not be greater than pod set count 16"]),
        ({**BLOCK, LAYERS: "[]"}, ['[]: Invalid value: "[]": topology constraints must contain between 1 and 3 entries']),
        ({**BLOCK, LAYERS: "null"}, ['[]: Invalid value: "null": topology constraints must contain between 1 and 3 entries']),
        ({**BLOCK, LAYERS: _layers(("a", 8), ("b", 4), ("c", 2), ("d", 1))},
         ['[]: Invalid value: "[{\\"topology\\": \\"a\\", \\"size\\": 8}, {\\"topology\\": \\"b\\", \\"size\\": 4}, '
          '{\\"topology\\": \\"c\\", \\"size\\": 2}, {\\"topology\\": \\"d\\", \\"size\\": 1}]": topology constraints must '
          "contain between 1 and 3 entries"]),
        ({**BLOCK, LAYERS: _layers((RACK, 8), (HOST, 3))},
         ["[][1].size: Invalid value: 3: must evenly divide the parent layer size 8"]),
        ({**BLOCK, LAYERS: _layers((HOST, 8), (HOST, 4))},
         ['[][1].topology: Duplicate value: "kubernetes.io/hostname (also at index 0)"']),
        ({**BLOCK, LAYERS: _layers((HOST, 0))}, ["[][0].size: Invalid value: 0: must be greater than or equal to 1"]),
        ({**BLOCK, LAYERS: _layers((RACK, 0), (HOST, 2))},
         ["[][0].size: Invalid value: 0: must be greater than or equal to 1"]),  # 0 % 2 divides: no second error
        ({**BLOCK, LAYERS: _layers(("-rack", 4))},
         ['[][0].topology: Invalid value: "-rack": name part must consist of alphanumeric characters, \'-\', \'_\' or '
          "'.', and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', "
          "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]),
        ({**BLOCK, LAYERS: "not json"},
         ['[]: Invalid value: "not json": must be a valid JSON array: invalid character \'o\' in literal null '
          "(expecting 'u')"]),
        ({**BLOCK, LAYERS: '[{"topology":"kubernetes.io/hostname","size":"4"}]'},
         ['[]: Invalid value: "[{\\"topology\\":\\"kubernetes.io/hostname\\",\\"size\\":\\"4\\"}]": must be a valid JSON array: '
          "json: cannot unmarshal string into Go struct field PodsetSliceRequiredTopologyConstraint.size of type "
          "int32"]),
        # Go matches keys case-insensitively and skips unknown ones: a valid layer of 4
        ({**BLOCK, LAYERS: '[{"Topology":"kubernetes.io/hostname","SIZE":4,"note":"x"}]'}, []),
        ({**BLOCK, LAYERS: _layers((HOST, 4)), "kueue.x-k8s.io/podset-slice-required-topology": HOST,
          "kueue.x-k8s.io/podset-slice-size": "4"},
         ["[]: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is specified",
          "[]: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-size' is specified"]),
        ({**BLOCK, LAYERS: _layers((HOST, 4)), "kueue.x-k8s.io/podset-group-name": "g"},
         ["[kueue.x-k8s.io/podset-group-name]: Forbidden: may not be set when "
          "'kueue.x-k8s.io/podset-slice-required-topology-constraints' is specified"]),
        ({**BLOCK, LAYERS: _layers((RACK, 16), (HOST, 4))}, []),
    ],
    ids=["outermost-above-count", "no-layer", "null", "four-layers", "not-dividing", "level-twice", "size-0",
         "size-0-divides", "bad-level", "not-json", "size-a-string", "go-keys", "with-single-layer",
         "with-group", "valid"],
)  # fmt: skip
def test_a_job_s_multi_layer_slices_are_checked_as_kueue_does(annotations: dict[str, str], expected: list[str]) -> None:
    """Kueue tas_validation.go validateSliceRequiredTopologyConstraintsAnnotation and the constraints branch of
    ValidateSliceSizeAnnotationUpperBound, on an Indexed Job of 16 pods, with Kueue's paths, types and words. A
    user's trial: a Job in slices of 32 hosts (or of no layer) was let in and its pods stayed gated for good."""
    sliced = job(parallelism=16, completions=16, completionMode="Indexed")
    sliced["spec"]["template"]["metadata"] = {"annotations": annotations}
    where = "spec.template.metadata.annotations"
    got = messages(webhooks.validate_create("batch/v1", "Job", sliced))
    assert got == [f"{where}[{LAYERS}]{e[2:]}" if e.startswith("[]") else f"{where}{e}" for e in expected], got


def test_every_kind_s_multi_layer_slices_are_checked() -> None:
    """Kueue calls the TAS validation from every integration's webhook: a JobSet's, an MPIJob's, a
    PyTorchJob's... refuse bad layers and an outermost layer beyond their pod set's count, and a Job's
    layers are checked before its count (job_webhook.go stops at the annotations' errors), the other kinds'
    both at once; a Pod's layers are checked, never its count (pod_webhook.go: one pod of its pod set)."""
    too_big = {**BLOCK, LAYERS: _layers((HOST, 8))}
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "team"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 3,
                            "completions": 3,
                            "template": {"metadata": {"annotations": too_big}, "spec": {"containers": [{"name": "c"}]}},
                        }
                    },
                }
            ]
        },
    }  # fmt: skip
    where = f"spec.replicatedJobs[0].template.spec.template.metadata.annotations[{LAYERS}]"
    assert messages(webhooks.validate_create("jobset.x-k8s.io/v1alpha2", "JobSet", jobset)) == [
        f"{where}: Invalid value: 8: must not be greater than pod set count 6"
    ]
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"][LAYERS] = "[]"
    assert messages(webhooks.validate_create("jobset.x-k8s.io/v1alpha2", "JobSet", jobset)) == [
        f'{where}: Invalid value: "[]": topology constraints must contain between 1 and 3 entries'
    ]
    both = pytorch(worker_annotations={**BLOCK, LAYERS: _layers((RACK, 8), (HOST, 3))})
    where = f"spec.pytorchReplicaSpecs[Worker].template.metadata.annotations[{LAYERS}]"
    assert messages(webhooks.validate_create("kubeflow.org/v1", "PyTorchJob", both)) == [
        f"{where}[1].size: Invalid value: 3: must evenly divide the parent layer size 8",
        f"{where}: Invalid value: 8: must not be greater than pod set count 2",
    ]
    one = pod(annotations={**BLOCK, LAYERS: _layers((HOST, 8))})
    assert webhooks.validate_create("v1", "Pod", one) == []
    one["metadata"]["annotations"][LAYERS] = _layers((HOST, 8), (HOST, 2))
    assert messages(webhooks.validate_create("v1", "Pod", one)) == [
        f'metadata.annotations[{LAYERS}][1].topology: Duplicate value: "kubernetes.io/hostname (also at index 0)"'
    ]


def test_message_aggregates_like_kubernetes() -> None:
    errors = webhooks.validate_create(
        "batch/v1", "Job", job(labels={QUEUE: "A", "kueue.x-k8s.io/max-exec-time-seconds": "-1"})
    )
    text = webhooks.message(errors)
    assert text.startswith('[metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "A"')
    assert text.endswith(
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: -1: should be greater than 0]"
    )


# -- ValidateUpdate ------------------------------------------------------------------------------


def test_the_queue_name_is_immutable_while_the_job_runs() -> None:
    old = job(labels={QUEUE: "a"}, suspend=False)
    new = job(labels={QUEUE: "b"}, suspend=False)
    assert messages(webhooks.validate_update("batch/v1", "Job", old, new)) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": field is immutable'
    ]
    # suspended (not admitted yet): it may move
    assert (
        webhooks.validate_update(
            "batch/v1", "Job", job(labels={QUEUE: "a"}, suspend=True), job(labels={QUEUE: "b"}, suspend=True)
        )
        == []
    )


def test_the_queue_name_cannot_be_removed_where_a_default_queue_exists() -> None:
    old = job(labels={QUEUE: "a"}, suspend=True)
    new = job(suspend=True)
    assert webhooks.validate_update("batch/v1", "Job", old, new) == []
    errors = webhooks.validate_update("batch/v1", "Job", old, new, context=webhooks.Context(default_local_queue=True))
    assert [e.detail for e in errors] == ["queue-name must not be empty in namespace with default queue"]


def test_priority_class_label_rules() -> None:
    key = "kueue.x-k8s.io/priority-class"
    added = webhooks.validate_update(
        "batch/v1", "Job", job(labels={QUEUE: "a"}, suspend=False), job(labels={QUEUE: "a", key: "high"}, suspend=False)
    )
    assert [e.detail for e in added] == ["WorkloadPriorityClass cannot be added to a non-suspended workload"]
    assert (
        webhooks.validate_update(
            "batch/v1",
            "Job",
            job(labels={QUEUE: "a"}, suspend=True),
            job(labels={QUEUE: "a", key: "high"}, suspend=True),
        )
        == []
    )
    removed = webhooks.validate_update(
        "batch/v1", "Job", job(labels={QUEUE: "a", key: "high"}, suspend=True), job(labels={QUEUE: "a"}, suspend=True)
    )
    assert [e.detail for e in removed] == ["WorkloadPriorityClass cannot be removed from a workload"]


def test_max_exec_time_is_immutable_unless_suspended_before_and_after() -> None:
    key = "kueue.x-k8s.io/max-exec-time-seconds"
    old, new = job(labels={key: "10"}, suspend=True), job(labels={key: "20"}, suspend=False)
    assert [e.field for e in webhooks.validate_update("batch/v1", "Job", old, new)] == [f"metadata.labels[{key}]"]
    assert webhooks.validate_update("batch/v1", "Job", old, job(labels={key: "20"}, suspend=True)) == []


def test_partial_admission_parallelism_is_fixed_while_running() -> None:
    annotations = {"kueue.x-k8s.io/job-min-parallelism": "1"}
    old = job(annotations=annotations, parallelism=3, suspend=False)
    new = job(annotations=annotations, parallelism=2, suspend=False)
    assert messages(webhooks.validate_update("batch/v1", "Job", old, new)) == [
        "spec.parallelism: Forbidden: cannot change when partial admission is enabled and the job is not suspended"
    ]
    # the dispatcher's stop: suspended and the parallelism restored in one write
    stopped = job(annotations=annotations, parallelism=10, suspend=True)
    assert webhooks.validate_update("batch/v1", "Job", old, stopped) == []


def test_an_integration_queue_name_is_immutable_while_unsuspended() -> None:
    old = pytorch(labels={QUEUE: "a"})
    new = pytorch(labels={QUEUE: "b"})
    errors = webhooks.validate_update("kubeflow.org/v1", "PyTorchJob", old, new)
    assert [e.detail for e in errors] == ["field is immutable"]
    for obj in (old, new):
        obj["spec"]["runPolicy"] = {"suspend": True}
    assert webhooks.validate_update("kubeflow.org/v1", "PyTorchJob", old, new) == []


def test_a_pod_group_name_is_immutable_and_unretriable_stays_so() -> None:
    group = {"kueue.x-k8s.io/pod-group-name": "g"}
    total = {"kueue.x-k8s.io/pod-group-total-count": "2"}
    old = pod(labels=group, annotations={**total, "kueue.x-k8s.io/retriable-in-group": "false"})
    new = pod(labels={"kueue.x-k8s.io/pod-group-name": "h"}, annotations=total)
    details = [e.detail for e in webhooks.validate_update("v1", "Pod", old, new)]
    assert details == ["field is immutable", "unretriable pod group can't be converted to retriable"]


def test_paths_are_kueues() -> None:
    paths = {t.kind: (t.path("mutate"), t.path("validate")) for t in webhooks.targets()}
    assert paths["Job"] == ("/mutate-batch-v1-job", "/validate-batch-v1-job")
    assert paths["Pod"] == ("/mutate--v1-pod", "/validate--v1-pod")
    assert paths["JobSet"] == ("/mutate-jobset-x-k8s-io-v1alpha2-jobset", "/validate-jobset-x-k8s-io-v1alpha2-jobset")
    assert paths["PyTorchJob"][0] == "/mutate-kubeflow-org-v1-pytorchjob"
    assert webhooks.target_of_path("/validate-batch-v1-job") == ("validate", webhooks.JOB)
    assert webhooks.target_of_path("/mutate-nothing") is None


def test_kueues_ray_and_spark_webhook_rules_refuse_at_create_and_update() -> None:
    """rayjob_webhook.go / sparkapplication_webhook.go ValidateOnCreate: a queued RayJob with in-tree
    autoscaling (without elastic jobs), or not shut down after it finishes, and a SparkApplication with dynamic
    allocation are refused by the webhook, naming the field; not queued, or a managed job's child, they pass."""
    from tests.kube.examples import load

    [rayjob] = [d for d in load("jobs/ray-job-sample.yaml") if d["kind"] == "RayJob"]
    ray_api = rayjob["apiVersion"]
    assert webhooks.validate_create(ray_api, "RayJob", rayjob) == []
    autoscaling = copy.deepcopy(rayjob)
    autoscaling["spec"]["rayClusterSpec"]["enableInTreeAutoscaling"] = True
    [error] = webhooks.validate_create(ray_api, "RayJob", autoscaling)
    assert str(error) == (
        "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: "
        "a kueue managed job should only use autoscaling when workload slicing is enabled"
    )
    assert webhooks.validate_update(ray_api, "RayJob", rayjob, autoscaling), "refused on update too"
    kept = copy.deepcopy(rayjob)
    kept["spec"]["shutdownAfterJobFinishes"] = False
    assert [e.field for e in webhooks.validate_create(ray_api, "RayJob", kept)] == ["spec.shutdownAfterJobFinishes"]
    unqueued = copy.deepcopy(autoscaling)
    del unqueued["metadata"]["labels"]
    assert webhooks.validate_create(ray_api, "RayJob", unqueued) == []
    child = {
        "apiVersion": ray_api,
        "kind": "RayCluster",
        "metadata": {
            "name": "c",
            "labels": rayjob["metadata"]["labels"],
            "ownerReferences": [{"apiVersion": ray_api, "kind": "RayJob", "name": "j", "uid": "u", "controller": True}],
        },
        "spec": {**autoscaling["spec"]["rayClusterSpec"]},
    }
    assert webhooks.validate_create(ray_api, "RayCluster", child) == []

    [spark] = load("jobs/sample-sparkapplication.yaml")
    assert webhooks.validate_create(spark["apiVersion"], "SparkApplication", spark) == []
    dynamic = copy.deepcopy(spark)
    dynamic["spec"]["dynamicAllocation"] = {"enabled": True}
    errors = webhooks.validate_create(spark["apiVersion"], "SparkApplication", dynamic)
    assert [e.field for e in errors] == ["spec.dynamicAllocation.enabled"]


def _ray_cluster(*, elastic: bool, autoscaling: bool, groups: int = 1) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "rc", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "q"}}
    if elastic:
        meta["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    template = {"spec": {"containers": [{"name": "ray", "resources": {"requests": {"cpu": "1"}}}]}}
    spec: dict[str, Any] = {
        "headGroupSpec": {"template": copy.deepcopy(template)},
        "workerGroupSpecs": [
            {"groupName": f"g{i}", "replicas": 1, "template": copy.deepcopy(template)} for i in range(groups)
        ],
    }
    if autoscaling:
        spec["enableInTreeAutoscaling"] = True
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": spec}


def test_an_elastic_ray_clusters_pods_are_gated_and_only_it_may_autoscale() -> None:
    """raycluster_webhook.go (ElasticJobsViaWorkloadSlices): Default gates an elastic RayCluster's head and
    worker templates with kueue.x-k8s.io/elastic-job (a RayService's too, a RayJob's not: its RayCluster
    is gated); validateCreate lets an elastic RayCluster autoscale, refuses autoscaling otherwise with
    Kueue's message, refuses an elastic one whose templates lost the gate and one MultiKueue manages."""
    on = webhooks.Context(elastic_jobs=True)
    cluster = _ray_cluster(elastic=True, autoscaling=True, groups=2)
    defaulted = webhooks.default("ray.io/v1", "RayCluster", cluster, context=on)
    gated = [defaulted["spec"]["headGroupSpec"]] + defaulted["spec"]["workerGroupSpecs"]
    assert [g["template"]["spec"]["schedulingGates"] for g in gated] == [[{"name": "kueue.x-k8s.io/elastic-job"}]] * 3
    assert webhooks.validate_create("ray.io/v1", "RayCluster", defaulted, context=on) == []
    # not defaulted (the webhook bypassed): every template without the gate is named
    errors = webhooks.validate_create("ray.io/v1", "RayCluster", cluster, context=on)
    assert [e.field for e in errors] == [
        "spec.workerGroupSpecs[0].template.spec.schedulingGates",
        "spec.workerGroupSpecs[1].template.spec.schedulingGates",
        "spec.headGroupSpec.template.spec.schedulingGates",
    ]
    assert all(e.detail == "an elastic job must have the ElasticJobSchedulingGate" for e in errors)
    assert str(errors[2]) == (
        "spec.headGroupSpec.template.spec.schedulingGates: Invalid value: []v1.PodSchedulingGate(nil): "
        "an elastic job must have the ElasticJobSchedulingGate"
    )
    other = copy.deepcopy(cluster)
    other["spec"]["headGroupSpec"]["template"]["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    [*_, head] = webhooks.validate_create("ray.io/v1", "RayCluster", other, context=on)
    assert 'Invalid value: []v1.PodSchedulingGate{v1.PodSchedulingGate{Name:"example.com/wait"}}' in str(head)
    # the gate off: the annotation means nothing, autoscaling is refused, nothing is gated
    off = webhooks.Context(elastic_jobs=False)
    assert (
        "schedulingGates"
        not in webhooks.default("ray.io/v1", "RayCluster", cluster, context=off)["spec"]["headGroupSpec"]["template"][
            "spec"
        ]
    )
    [error] = webhooks.validate_create("ray.io/v1", "RayCluster", cluster, context=off)
    assert str(error) == (
        "spec.enableInTreeAutoscaling: Invalid value: true: a kueue-managed RayCluster can use autoscaling only "
        'as an elastic job: enable the ElasticJobsViaWorkloadSlices feature gate and set the "kueue.x-k8s.io/'
        'elastic-job": "true" annotation'
    )
    multikueue = copy.deepcopy(defaulted)
    multikueue["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    [error] = webhooks.validate_create("ray.io/v1", "RayCluster", multikueue, context=on)
    assert str(error) == (
        "spec.enableInTreeAutoscaling: Forbidden: in-tree autoscaling is not supported for a MultiKueue-managed "
        "elastic RayCluster"
    )
    # a RayJob's webhook gates nothing and accepts autoscaling when elastic; a RayService's gates its cluster
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": cluster["metadata"],
        "spec": {"rayClusterSpec": cluster["spec"], "shutdownAfterJobFinishes": True},
    }
    assert webhooks.default("ray.io/v1", "RayJob", rayjob, context=on)["spec"]["rayClusterSpec"] == cluster["spec"]
    assert webhooks.validate_create("ray.io/v1", "RayJob", rayjob, context=on) == []
    [error] = webhooks.validate_create("ray.io/v1", "RayJob", rayjob, context=off)
    assert error.field == "spec.rayClusterSpec.enableInTreeAutoscaling"
    service = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": cluster["metadata"],
        "spec": {"rayClusterConfig": cluster["spec"]},
    }
    served = webhooks.default("ray.io/v1", "RayService", service, context=on)
    assert served["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["schedulingGates"]
    assert webhooks.validate_create("ray.io/v1", "RayService", served, context=on) == []
    [error] = webhooks.validate_create("ray.io/v1", "RayService", service, context=off)
    assert error.field == "spec.rayClusterSpec.enableInTreeAutoscaling"  # Kueue names the Go field


def test_an_elastic_job_may_ask_only_for_unconstrained_topology() -> None:
    """job_webhook.go validateTopologyRequest: with TopologyAwareScheduling and ElasticJobsViaWorkloadSlices,
    an elastic Job whose pod template asks for a required or preferred topology is Forbidden, on create and
    on update; unconstrained topology, a Job that is not elastic, or the gate off are accepted."""
    on = webhooks.Context(elastic_jobs=True, topology_aware_scheduling=True)
    labels = {"kueue.x-k8s.io/queue-name": "q"}
    elastic = {"kueue.x-k8s.io/elastic-job": "true"}
    for mode in ("required", "preferred"):
        annotation = f"kueue.x-k8s.io/podset-{mode}-topology"
        obj = job(labels=labels, annotations=elastic)
        obj["spec"]["template"]["metadata"] = {"annotations": {annotation: "cloud.com/rack"}}
        errors = webhooks.validate_create("batch/v1", "Job", obj, context=on)
        assert [(e.type, e.field, e.detail) for e in errors] == [
            (
                "Forbidden",
                f"spec.template.metadata.annotations[{annotation}]",
                f"{mode} topology is not supported with elastic jobs",
            )
        ]
        assert [e.detail for e in webhooks.validate_update("batch/v1", "Job", obj, obj, context=on)] == [
            f"{mode} topology is not supported with elastic jobs"
        ]
        plain = job(labels=labels)
        plain["spec"]["template"]["metadata"] = {"annotations": {annotation: "cloud.com/rack"}}
        assert webhooks.validate_create("batch/v1", "Job", plain, context=on) == []
        assert (
            webhooks.validate_create(
                "batch/v1", "Job", obj, context=webhooks.Context(topology_aware_scheduling=True, elastic_jobs=False)
            )
            == []
        )
    unconstrained = job(labels=labels, annotations=elastic)
    unconstrained["spec"]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}
    }
    assert webhooks.validate_create("batch/v1", "Job", unconstrained, context=on) == []


def test_a_prebuilt_workload_only_on_the_kinds_kueue_supports_it_for() -> None:
    """validation.go supportedPrebuiltWlJobGVKs: a PyTorchJob may name a prebuilt Workload, a JAXJob may not (the
    annotation's path when the name is in the annotation)."""
    prebuilt = "kueue.x-k8s.io/prebuilt-workload-name"
    torch = pytorch(labels={QUEUE: "q", prebuilt: "wl"})
    assert webhooks.validate_create("kubeflow.org/v1", "PyTorchJob", torch) == []
    jax = copy.deepcopy(torch) | {"kind": "JAXJob"}
    jax["spec"] = {"jaxReplicaSpecs": torch["spec"]["pytorchReplicaSpecs"]}
    assert messages(webhooks.validate_create("kubeflow.org/v1", "JAXJob", jax)) == [
        f'metadata.labels[{prebuilt}]: Forbidden: Is not supported for "kubeflow.org/v1, Kind=JAXJob"'
    ]
    annotated = job(labels={QUEUE: "q"}, annotations={prebuilt: "wl"})
    assert webhooks.validate_create("batch/v1", "Job", annotated) == []
    jax["metadata"]["annotations"] = {prebuilt: "wl"}
    assert messages(webhooks.validate_create("kubeflow.org/v1", "JAXJob", jax))[0].startswith(
        f"metadata.annotations[{prebuilt}]: Forbidden"
    )


def test_a_pod_group_names_only_itself_as_its_prebuilt_workload() -> None:
    """pod_webhook.go validatePrebuiltWorkloadName, on create and update: a pod of group ``g`` may name prebuilt
    Workload ``g``, not another; a single pod any."""
    prebuilt = "kueue.x-k8s.io/prebuilt-workload-name"
    group = {"kueue.x-k8s.io/pod-group-name": "g"}
    total = {"kueue.x-k8s.io/pod-group-total-count": "2"}
    other = pod(labels={QUEUE: "q", prebuilt: "wl", **group}, annotations=total)
    expected = [f'metadata.labels[{prebuilt}]: Invalid value: "wl": prebuilt workload and pod group should be equal']
    assert messages(webhooks.validate_create("v1", "Pod", other)) == expected
    assert messages(webhooks.validate_update("v1", "Pod", other, other)) == expected
    assert (
        webhooks.validate_create("v1", "Pod", pod(labels={QUEUE: "q", prebuilt: "g", **group}, annotations=total)) == []
    )
    assert webhooks.validate_create("v1", "Pod", pod(labels={QUEUE: "q", prebuilt: "wl"})) == []
    annotated = pod(labels={QUEUE: "q", **group}, annotations={prebuilt: "wl", **total})
    assert messages(webhooks.validate_create("v1", "Pod", annotated))[0].startswith(
        f'metadata.annotations[{prebuilt}]: Invalid value: "wl"'
    )


@pytest.mark.parametrize(
    ("framework", "kind"),
    [
        ("deployment", "Deployment"),
        ("statefulset", "StatefulSet"),
        ("leaderworkerset.x-k8s.io/leaderworkerset", "LeaderWorkerSet"),
    ],
)
def test_a_kind_run_through_its_pods_enables_the_pod_webhook(framework: str, kind: str) -> None:
    """Deployment, StatefulSet and LeaderWorkerSet name ``pod`` in ImplicitlyEnabledFrameworkNames: the pod
    webhook is Kueue's own with any of them, not the no-op; the other frameworks stay no-ops."""
    assert webhooks.enabled_kinds([framework]) == {kind, "Pod"}
    assert not webhooks.noop(webhooks.POD, webhooks.enabled_kinds([framework]))
    assert webhooks.noop(webhooks.JOB, webhooks.enabled_kinds([framework]))
    # only implied: Kueue's pod reconciler then takes only the pods such a parent marks (pod_controller.go Skip)
    assert webhooks.implicitly_enabled_kinds([framework]) == {"Pod"}
    assert webhooks.implicitly_enabled_kinds([framework, "pod"]) == frozenset()
    assert webhooks.implicitly_enabled_kinds(None) == frozenset()


def test_frameworks_left_out_get_the_noop_webhook() -> None:
    """Kueue's default list (``batch/job``, what a Configuration listing none means) makes every other served
    kind a no-op; a suspendable kind implies nothing; no Configuration (None) leaves every kind enabled."""
    from kueue_es.events import manager_config

    default = webhooks.enabled_kinds(manager_config.DEFAULT_FRAMEWORKS)
    assert default == {"Job"}
    assert [t.kind for t in webhooks.targets() if not webhooks.noop(t, default)] == ["Job"]
    assert webhooks.enabled_kinds(["jobset.x-k8s.io/jobset", "kubeflow.org/pytorchjob"]) == {"JobSet", "PyTorchJob"}
    assert webhooks.enabled_kinds(None) is None
    assert not any(webhooks.noop(t, None) for t in webhooks.targets())
    assert {t.framework for t in webhooks.targets()} <= manager_config.KUEUE_FRAMEWORKS


# -- StatefulSet and LeaderWorkerSet (statefulset_webhook.go, leaderworkerset_webhook.go) ----------------


def statefulset(*, labels: dict[str, str] | None = None, replicas: int = 2, cpu: str = "100m") -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "team", "labels": labels if labels is not None else {QUEUE: "q"}},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}},
        },
    }


def lws(*, labels: dict[str, str] | None = None, size: int | None = 3, leader: bool = True, **spec: Any) -> dict:
    template: dict[str, Any] = {
        "workerTemplate": {"spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "200m"}}}]}}
    }
    if size is not None:
        template["size"] = size
    if leader:
        template["leaderTemplate"] = {
            "spec": {"containers": [{"name": "l", "resources": {"requests": {"cpu": "100m"}}}]}
        }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": "team", "labels": labels if labels is not None else {QUEUE: "q"}},
        "spec": {"replicas": 2, "leaderWorkerTemplate": template, **spec},
    }


def update(old: dict, change: Any, **context: Any) -> list[str]:
    new = copy.deepcopy(old)
    change(new)
    return [
        str(e)
        for e in webhooks.validate_update(old["apiVersion"], old["kind"], old, new, context=webhooks.Context(**context))
    ]


def test_a_statefulset_managed_without_a_queue_name_keeps_its_pods() -> None:
    """statefulset_webhook.go ValidateUpdate asks WorkloadShouldBeSuspended: under manageJobsWithoutQueueName a
    StatefulSet without the queue label is managed in a selected namespace, so its replicas and pod spec are
    held there and nowhere else; one being deleted is not held (SkipAncestorCheckForDeletedWorkloads)."""
    old = statefulset(labels={})
    grow = lambda o: o["spec"].update(replicas=3)  # noqa: E731
    assert update(old, grow) == []
    assert update(old, grow, manage_jobs_without_queue_name=True) == [
        "spec.replicas: Invalid value: 3: field is immutable"
    ]
    assert update(old, grow, manage_jobs_without_queue_name=True, namespace_managed=False) == []
    deleting = statefulset()
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert update(deleting, grow) == []
    assert webhooks.namespace_decides_update(
        webhooks.target("apps/v1", "StatefulSet"), old, manage_jobs_without_queue_name=True
    )
    assert not webhooks.namespace_decides_update(
        webhooks.target("apps/v1", "StatefulSet"), statefulset(), manage_jobs_without_queue_name=True
    )


def test_a_statefulset_or_deployment_is_not_held_to_the_job_rules_at_creation() -> None:
    """Kueue's Deployment and StatefulSet ValidateCreate check the queue name (and the elastic annotation) only:
    no max-exec-time, prebuilt-workload or TAS annotation rule, which the pods' own webhook applies."""
    for kind, obj in (("StatefulSet", statefulset()), ("Deployment", {**statefulset(), "kind": "Deployment"})):
        obj["metadata"]["labels"][webhooks.MAX_EXEC_TIME_LABEL] = "soon"
        obj["spec"]["template"]["metadata"] = {
            "annotations": {
                "kueue.x-k8s.io/podset-required-topology": "a",
                "kueue.x-k8s.io/podset-preferred-topology": "b",
            }
        }
        assert webhooks.validate_create("apps/v1", kind, obj) == [], kind
        obj["metadata"]["labels"][QUEUE] = "Bad_Queue"
        [error] = webhooks.validate_create("apps/v1", kind, obj)
        assert str(error).startswith(f'metadata.labels[{QUEUE}]: Invalid value: "Bad_Queue": a lowercase RFC 1123')


def test_a_managed_leaderworkerset_keeps_its_templates_and_group_size() -> None:
    """leaderworkerset_webhook.go ValidateUpdate: while managed, the leader and worker pod specs keep their
    admission-relevant shape, a leader template is neither added nor removed, and (LWSImmutableGroupSize, on
    by default) the group size does not change; replicas and images may."""
    old = lws()
    assert update(old, lambda o: o["spec"]["leaderWorkerTemplate"].update(size=4)) == [
        "spec.leaderWorkerTemplate.size: Invalid value: 4: field is immutable"
    ]
    assert update(old, lambda o: o["spec"]["leaderWorkerTemplate"].update(size=4), lws_immutable_group_size=False) == []
    assert update(
        old,
        lambda o: o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"][
            "requests"
        ].update(cpu="1"),
    ) == [
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.requests: "
        'Invalid value: {"cpu":"1"}: field is immutable'
    ]
    # a ResourceList, a nodeSelector are compared whole (Kueue walks only the shape's own maps)
    assert update(
        old,
        lambda o: o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"].update(
            nodeSelector={"a": "1"}, tolerations=[{"key": "k", "operator": "Exists"}]
        ),
    ) == [
        'spec.leaderWorkerTemplate.workerTemplate.spec.nodeSelector: Invalid value: {"a":"1"}: field is immutable',
        'spec.leaderWorkerTemplate.workerTemplate.spec.tolerations: Invalid value: [{"key":"k","operator":"Exists"}]: '
        "field is immutable",
    ]
    assert update(
        old,
        lambda o: o["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"].update(nodeSelector={"zone": "a"}),
    ) == ['spec.leaderWorkerTemplate.leaderTemplate.spec.nodeSelector: Invalid value: {"zone":"a"}: field is immutable']
    assert update(old, lambda o: o["spec"]["leaderWorkerTemplate"].pop("leaderTemplate")) == [
        "spec.leaderWorkerTemplate.leaderTemplate: Invalid value: null: field is immutable"
    ]
    assert update(old, lambda o: o["spec"].update(replicas=5)) == []
    assert (
        update(
            old,
            lambda o: o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0].update(image="x"),
        )
        == []
    )
    # the size's default is 1: writing it out changes nothing
    assert update(lws(size=None), lambda o: o["spec"]["leaderWorkerTemplate"].update(size=1)) == []
    # not managed: nothing is held
    assert update(lws(labels={}), lambda o: o["spec"]["leaderWorkerTemplate"].update(size=4)) == []


def test_a_leaderworkerset_counts_at_most_a_million_groups() -> None:
    """leaderworkerset_webhook.go validateReplicasField (create and update): spec.replicas in [0, 1,000,000]."""
    assert [
        str(e) for e in webhooks.validate_create("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", lws(replicas=-1))
    ] == ["spec.replicas: Invalid value: -1: invalid LeaderWorkerSet replicas: must be >= 0, got -1"]
    assert [
        str(e)
        for e in webhooks.validate_create("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", lws(replicas=1_000_001))
    ] == ["spec.replicas: Invalid value: 1000001: invalid LeaderWorkerSet replicas: must be <= 1000000, got 1000001"]
    assert webhooks.validate_create("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", lws(replicas=0)) == []


# -- Kueue's Ray webhooks' own messages (rayjob_webhook.go, raycluster_webhook.go, raycluster/common.go) -----


def _ray_job(**spec: Any) -> dict[str, Any]:
    from tests.kube.examples import load

    [rayjob] = [d for d in load("jobs/ray-job-sample.yaml") if d["kind"] == "RayJob"]
    rayjob["metadata"]["namespace"] = "team"
    rayjob["spec"].update(spec)
    return rayjob


def ray_errors(obj: dict[str, Any], **context: Any) -> list[str]:
    return [
        str(e) for e in webhooks.validate_create("ray.io/v1", obj["kind"], obj, context=webhooks.Context(**context))
    ]


def test_a_rayjob_is_refused_with_kueues_messages() -> None:
    """rayjob_webhook.go validateCreate: Kueue's field paths, types and words; a cluster choice that is wrong
    (both clusterSelector and rayClusterSpec, or neither) ends the validation, as Kueue returns there."""
    selector = {"ray.io/cluster": "shared"}
    assert ray_errors(_ray_job(clusterSelector=selector)) == [
        'spec.clusterSelector: Invalid value: map[string]string{"ray.io/cluster":"shared"}: '
        "a kueue managed job should not use an existing cluster"
    ]
    no_cluster = _ray_job()
    del no_cluster["spec"]["rayClusterSpec"]
    no_cluster["metadata"]["labels"][QUEUE] = "Bad_Queue"  # not reached: Kueue returns first
    assert ray_errors(no_cluster) == [
        "spec.rayClusterSpec: Required value: rayClusterSpec is required for Kueue-managed jobs that don't use "
        "clusterSelector"
    ]
    existing = copy.deepcopy(no_cluster)
    existing["spec"]["clusterSelector"] = selector
    assert ray_errors(existing) == []  # runs on an existing cluster: not Kueue's
    kept = _ray_job(shutdownAfterJobFinishes=False)
    kept["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["groupName"] = "head"
    assert ray_errors(kept) == [
        "spec.shutdownAfterJobFinishes: Invalid value: false: a kueue managed job should delete the cluster after "
        "finishing",
        'spec.rayClusterSpec.workerGroupSpecs[0].groupName: Forbidden: "head" is reserved for the head group',
    ]
    many = _ray_job()
    group = many["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    many["spec"]["rayClusterSpec"]["workerGroupSpecs"] = [{**group, "groupName": f"g{i}"} for i in range(18)]
    assert ray_errors(many) == ["spec.rayClusterSpec.workerGroupSpecs: Too many: 19: must have at most 18 items"]
    # manageJobsWithoutQueueName: an unlabelled one is held to the same rules
    unlabelled = _ray_job(shutdownAfterJobFinishes=False)
    del unlabelled["metadata"]["labels"][QUEUE]
    assert ray_errors(unlabelled) == []
    assert len(ray_errors(unlabelled, manage_jobs_without_queue_name=True)) == 1


def test_a_raycluster_is_refused_with_kueues_messages() -> None:
    """raycluster_webhook.go validateCreate: every broken rule is listed (Kueue aggregates them), the kind's
    own first: autoscaling, too many groups, a group named head."""
    cluster = _ray_cluster(elastic=False, autoscaling=True, groups=18)
    cluster["spec"]["workerGroupSpecs"][3]["groupName"] = "head"
    assert ray_errors(cluster) == [
        "spec.enableInTreeAutoscaling: Invalid value: true: a kueue-managed RayCluster can use autoscaling only as an "
        'elastic job: enable the ElasticJobsViaWorkloadSlices feature gate and set the "kueue.x-k8s.io/elastic-job": '
        '"true" annotation',
        "spec.workerGroupSpecs: Too many: 19: must have at most 18 items",
        'spec.workerGroupSpecs[3].groupName: Forbidden: "head" is reserved for the head group',
    ]


def test_an_update_of_a_ray_job_kueue_never_managed_is_not_validated() -> None:
    """ShouldValidateRayOrSparkJobOnUpdate (ValidateRayAndSparkJobUpdates, on by default): neither the old nor the
    new one queue-labelled, the update is not validated; one whose label is removed still is, update rules first."""
    old = _ray_cluster(elastic=False, autoscaling=False)
    del old["metadata"]["labels"]
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {webhooks.MAX_EXEC_TIME_LABEL: "x"}
    assert webhooks.validate_update("ray.io/v1", "RayCluster", old, new) == []
    labelled = _ray_cluster(elastic=False, autoscaling=False)
    labelled["metadata"]["labels"][webhooks.PRIORITY_CLASS_LABEL] = "high"
    assert [str(e) for e in webhooks.validate_update("ray.io/v1", "RayCluster", labelled, new)] == [
        f'metadata.labels[{QUEUE}]: Invalid value: "": field is immutable',
        f'metadata.labels[{webhooks.MAX_EXEC_TIME_LABEL}]: Invalid value: "x": field is immutable',
        f'metadata.labels[{webhooks.PRIORITY_CLASS_LABEL}]: Invalid value: "": WorkloadPriorityClass cannot be '
        "removed from a workload",
        f'metadata.labels[{webhooks.MAX_EXEC_TIME_LABEL}]: Invalid value: "x": strconv.Atoi: parsing "x": invalid '
        "syntax",
    ]


def test_a_pod_of_a_sliced_pod_set_is_not_held_to_its_slice_size() -> None:
    """pod_webhook.go validateTopologyRequest checks a Pod's TAS annotations alone (ValidateTASPodSetRequest), not
    ValidateSliceSizeAnnotationUpperBound: a JobSet's pod carries its pod set's slice size 3 while being one pod,
    and Kueue lets the Job controller create it; a bad size is still refused."""
    sliced = {
        "kueue.x-k8s.io/podset-slice-required-topology": "cloud.provider.com/topology-block",
        "kueue.x-k8s.io/podset-slice-size": "3",
    }
    assert webhooks.validate_create("v1", "Pod", pod(annotations=sliced)) == []
    bad = webhooks.validate_create("v1", "Pod", pod(annotations={**sliced, "kueue.x-k8s.io/podset-slice-size": "0"}))
    assert [e.field for e in bad] == ["metadata.annotations[kueue.x-k8s.io/podset-slice-size]"], bad


def test_a_job_s_pod_keeps_its_pod_set_s_slice_size() -> None:
    """Kueue's pod webhook checks a pod's TAS annotations alone (pod_webhook.go validateTopologyRequest,
    ValidateTASPodSetRequest), never against a count: a pod of a Job of three pods in slices of three, as the Job
    controller creates it, is let in (tas/baseline hotswap_test.go's Job)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "ranks-job-abcde",
            "namespace": "ns",
            "annotations": {
                "kueue.x-k8s.io/podset-preferred-topology": "cloud.provider.com/topology-block",
                "kueue.x-k8s.io/podset-slice-required-topology": "cloud.provider.com/topology-block",
                "kueue.x-k8s.io/podset-slice-size": "3",
            },
        },
        "spec": {"containers": [{"name": "c", "image": "agnhost"}]},
    }
    assert webhooks.validate_create("v1", "Pod", pod) == []
