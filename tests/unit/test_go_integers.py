"""Integers read from objects as Kueue reads them (jobframework/goint.py), and never beyond what an event carries.

A user's trial: a queued Pod with ``kueue.x-k8s.io/pod-group-total-count: "99999999999999999999"`` was created and
the watcher published an event no service could decode. The webhooks now refuse such numbers in Go's words
(tests/unit/test_webhook_rules.py, tests/integration/test_out_of_range_integers.py); here the converters, for
objects no webhook saw: each refuses a number it cannot keep with an ObjectRejected naming the object and field.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kueue_es.events import codec, types
from kueue_es.jobframework import goint, integrations, jobs, pods

HUGE = "99999999999999999999"
QUEUE = {"kueue.x-k8s.io/queue-name": "user-queue"}


@pytest.mark.parametrize(
    ("text", "value", "error"),
    [
        ("12", 12, None),
        ("+5", 5, None),
        ("-9223372036854775808", -(2**63), None),
        ("9223372036854775807", 2**63 - 1, None),
        ("9223372036854775808", None, 'strconv.Atoi: parsing "9223372036854775808": value out of range'),
        (HUGE, None, f'strconv.Atoi: parsing "{HUGE}": value out of range'),
        (HUGE + "x", None, f'strconv.Atoi: parsing "{HUGE}x": value out of range'),  # Go meets the overflow first
        ("", None, 'strconv.Atoi: parsing "": invalid syntax'),
        ("+", None, 'strconv.Atoi: parsing "+": invalid syntax'),
        (" 1", None, 'strconv.Atoi: parsing " 1": invalid syntax'),
        ("1_000", None, 'strconv.Atoi: parsing "1_000": invalid syntax'),
        ("ten\n", None, 'strconv.Atoi: parsing "ten\\n": invalid syntax'),
    ],
)
def test_atoi_is_gos(text: str, value: int | None, error: str | None) -> None:
    if error is None:
        assert goint.atoi(text) == value
    else:
        with pytest.raises(goint.GoNumError) as raised:
            goint.atoi(text)
        assert str(raised.value) == error


def test_parse_int_32_and_int32_conversion_are_gos() -> None:
    assert goint.parse_int("2147483647", bits=32) == 2**31 - 1
    with pytest.raises(goint.GoNumError, match=r'^strconv.ParseInt: parsing "2147483648": value out of range$'):
        goint.parse_int("2147483648", bits=32)
    assert goint.int32(2**32 + 2) == 2 and goint.int32(2**31) == -(2**31) and goint.int32(-1) == -1


def group_pod(name: str, total: str, *, fast: bool = True) -> dict[str, Any]:
    annotations = {"kueue.x-k8s.io/pod-group-total-count": total}
    if fast:
        annotations["kueue.x-k8s.io/pod-group-fast-admission"] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"{name}-uid",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {**QUEUE, "kueue.x-k8s.io/pod-group-name": "g", "kueue.x-k8s.io/managed": "true"},
            "annotations": annotations,
        },
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]},
    }


@pytest.mark.parametrize(
    ("total", "problem"),
    [
        (HUGE, f'strconv.Atoi: parsing "{HUGE}": value out of range'),
        (
            "0",
            "incorrect annotation value 'kueue.x-k8s.io/pod-group-total-count=0': group total count should be"
            " greater than zero",
        ),
        ("x", 'strconv.Atoi: parsing "x": invalid syntax'),
    ],
)
def test_a_pod_groups_total_count_is_read_as_kueue_reads_it(total: str, problem: str) -> None:
    fact = pods.group_facts([group_pod("p", total)])
    assert isinstance(fact, types.ObjectRejected)
    assert (fact.kind, fact.name, fact.field, fact.problem) == (
        "Pod",
        "p",
        "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]",
        problem,
    )


def test_a_fast_groups_count_beyond_int32_is_rejected_not_published() -> None:
    """Go reads 2^31 (an int), but no Workload's pod set holds it (an int32: Kueue's int32() wraps it)."""
    fact = pods.group_facts([group_pod("p", str(2**31))])
    assert isinstance(fact, types.ObjectRejected)
    assert (fact.name, fact.field) == ("p", "spec.podSets[0].count")
    assert fact.problem == "2147483648 pods is out of the range of a Workload's pod set (0 to 2147483647)"
    member = group_pod("q", "2")
    member["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = HUGE
    fact = pods.group_facts([group_pod("p", "2"), member])
    assert isinstance(fact, types.ObjectRejected)  # validatePodGroupMetadata's words for a member
    assert (fact.name, fact.problem) == (
        "q",
        "failed to extract 'kueue.x-k8s.io/pod-group-total-count' annotation from the pod 'q': strconv.Atoi:"
        f' parsing "{HUGE}": value out of range',
    )


def job(**spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "default", "uid": "j-uid", "labels": dict(QUEUE), "annotations": {}},
        "spec": {"parallelism": 3, "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}, **spec},
    }


def rejection(fact: types.Fact | None) -> tuple[str, str]:
    assert isinstance(fact, types.ObjectRejected), fact
    return fact.field, fact.problem


def test_a_jobs_numbers_beyond_what_kueue_keeps_are_rejected() -> None:
    huge_label = job()
    huge_label["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = HUGE
    assert rejection(jobs.job_facts(huge_label)) == (
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]",
        f'strconv.Atoi: parsing "{HUGE}": value out of range',
    )
    huge_min = job()
    huge_min["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = HUGE
    assert rejection(jobs.job_facts(huge_min)) == (
        "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]",
        f'strconv.Atoi: parsing "{HUGE}": value out of range',
    )
    assert rejection(jobs.job_facts(job(parallelism=int(HUGE)))) == (
        "spec.parallelism",
        f"{HUGE} is out of the int32 range (at most 2147483647)",
    )
    # within Go's int, beyond the Workload's int32: Kueue's reconciler reads no maximum (ParseInt(v, 10, 32) fails)
    int64_label = job()
    int64_label["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "4294967296"
    observed = jobs.job_facts(int64_label)
    assert isinstance(observed, types.WorkloadObserved)
    assert observed.workload.spec.maximum_execution_time_seconds is None
    # Kueue keeps int32(min-parallelism), which wraps: 2^32 + 2 is 2
    wrapped = job()
    wrapped["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = str(2**32 + 2)
    observed = jobs.job_facts(wrapped)
    assert isinstance(observed, types.WorkloadObserved)
    assert observed.workload.spec.pod_sets[0].min_count == 2


def test_a_jobsets_pods_beyond_int32_are_rejected() -> None:
    """Each count within int32, their product (replicas x parallelism) not: no Workload can hold it."""
    template = job()["spec"]
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "default", "uid": "js-uid", "labels": dict(QUEUE)},
        "spec": {
            "replicatedJobs": [
                {"name": "w", "replicas": 2**20, "template": {"spec": {**template, "parallelism": 2**20}}}
            ]
        },
    }
    integration = integrations.by_kind("JobSet")
    assert integration is not None
    field, problem = rejection(integrations.facts(integration, jobset))
    assert field == "spec.podSets[0].count" and problem.startswith(f"{2**40} pods is out of the range")
    fine = copy.deepcopy(jobset)
    fine["spec"]["replicatedJobs"][0]["replicas"] = 2
    assert isinstance(integrations.facts(integration, fine), types.WorkloadObserved)


def test_a_slice_size_beyond_int32_is_rejected() -> None:
    sliced = job(parallelism=4)
    sliced["spec"]["template"]["metadata"] = {
        "annotations": {
            "kueue.x-k8s.io/podset-slice-required-topology": "rack",
            "kueue.x-k8s.io/podset-slice-size": HUGE,
        }
    }
    field, problem = rejection(jobs.job_facts(sliced))
    assert "podset-slice-size" in field and problem == f"{HUGE} is out of the int32 range"


def test_no_converted_fact_here_holds_an_integer_the_codec_refuses() -> None:
    for fact in (pods.group_facts([group_pod("p", HUGE)]), jobs.job_facts(job(parallelism=int(HUGE)))):
        assert fact is not None
        codec.decode(codec.encode(fact))
