"""The Misconfigured message of a workload failing Kueue's admissibility checks, in Kueue's words.

Kueue's scheduler leaves such a workload pending, QuotaReserved False reason Misconfigured, with
pkg/workload/resources.go ValidateAdmissibility's error: ``resources validation failed: <errors>`` when
requests exceed limits (ValidateResources), else ``resources didn't satisfy LimitRange constraints:
<errors>`` (ValidateLimitRange), each error apimachinery's ``<path>: Invalid value: ["cpu"]: <message>``
and several aggregated as ``[a, b]``. Kueue's integration test scheduler_test.go 'The workload's podSet
resource requests are not valid' checks the prefixes; pkg/scheduler/scheduler_test.go TestSchedule
'container resource requests exceed limits' and 'container does not satisfy limitRange constraints' the
whole message. The watcher writes each pod set's errors (``PodSet.misconfigured``), the admitter (logic 41)
the workload's message (:func:`queues.misconfigured_message`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.jobframework import jobs
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.scheduling import queues
from kueue_es.services.admitter import core as admitter
from kueue_es.services.watcher.convert import workload_fact

OVER_LIMITS = "resources validation failed: "
LIMIT_RANGE = "resources didn't satisfy LimitRange constraints: "


def _workload(*pod_specs: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "workload", "namespace": "default"},
        "spec": {
            "queueName": "queue",
            "podSets": [{"name": f"ps{i}", "count": 1, "template": {"spec": spec}} for i, spec in enumerate(pod_specs)],
        },
    }


def _container(request: str, limit: str | None = None, **more: str) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": request, **more}}
    if limit is not None:
        resources["limits"] = {"cpu": limit, **more}
    return {"name": "c", "resources": resources}


def _message(manifest: dict[str, Any], limit_ranges: list[dict[str, Any]] | None = None) -> str:
    fact = workload_fact(manifest, runtime_classes={}, limit_ranges=limit_ranges or [])
    assert isinstance(fact, types.WorkloadObserved)
    return queues.misconfigured_message(fact.workload)


CONTAINER = "spec.podSets[0].template.spec.containers[0]"


@pytest.mark.parametrize(
    ("limit_range", "cpu_request", "cpu_limit", "want"),
    [
        pytest.param(
            None,
            "3",
            "2",
            f'{OVER_LIMITS}{CONTAINER}: Invalid value: ["cpu"]: requests must not exceed its limits',
            id="request more that limits",
        ),
        pytest.param(
            {"type": "Container", "max": {"cpu": "1"}},
            "2",
            "3",
            f'{LIMIT_RANGE}{CONTAINER}: Invalid value: ["cpu"]: requests must not be above the limitRange max',
            id="request over container limits",
        ),
        pytest.param(
            {"type": "Container", "min": {"cpu": "3"}},
            "2",
            "3",
            f'{LIMIT_RANGE}{CONTAINER}: Invalid value: ["cpu"]: requests must not be below the limitRange min',
            id="request under container limits",
        ),
        pytest.param(
            {"type": "Pod", "max": {"cpu": "1"}},
            "2",
            "3",
            f'{LIMIT_RANGE}spec.podSets[0].template.spec: Invalid value: ["cpu"]: requests must not be above the '
            "limitRange max",
            id="request over pod limits",
        ),
        pytest.param(
            {"type": "Pod", "min": {"cpu": "3"}},
            "2",
            "3",
            f'{LIMIT_RANGE}spec.podSets[0].template.spec: Invalid value: ["cpu"]: requests must not be below the '
            "limitRange min",
            id="request under pod limits",
        ),
        pytest.param({"type": "Container", "min": {"cpu": "1"}, "max": {"cpu": "4"}}, "2", "3", "", id="valid"),
    ],
)
def test_kueues_table_of_invalid_requests(
    limit_range: dict[str, Any] | None, cpu_request: str, cpu_limit: str, want: str
) -> None:
    """scheduler_test.go 'The workload's podSet resource requests are not valid', entry by entry."""
    manifest = _workload({"containers": [_container(cpu_request, cpu_limit)]})
    assert _message(manifest, [limit_range] if limit_range else []) == want


def test_every_resource_and_every_pod_set_is_named_and_aggregated() -> None:
    """Kueue lists each container's resources over their limits (sorted, as JSON) and aggregates the errors
    of every pod set; requests over limits come before any LimitRange error, in whichever pod set."""
    manifest = _workload(
        {"containers": [_container("2", "1", memory="2Gi")], "initContainers": [_container("3", "1")]},
        {"containers": [_container("500m")]},
        {"containers": [_container("5", "4")]},
    )
    assert _message(manifest, [{"type": "Container", "min": {"cpu": "1"}}]) == (
        OVER_LIMITS + "["
        'spec.podSets[0].template.spec.initContainers[0]: Invalid value: ["cpu"]: requests must not exceed its '
        "limits, "
        'spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu"]: requests must not exceed its limits, '
        'spec.podSets[2].template.spec.containers[0]: Invalid value: ["cpu"]: requests must not exceed its limits]'
    )
    both = _workload({"containers": [_container("2", "5", memory="1Gi")]})
    limits = [{"type": "Container", "max": {"cpu": "4"}, "min": {"memory": "2Gi"}}]
    assert _message(both, limits) == (
        f'{LIMIT_RANGE}[{CONTAINER}: Invalid value: ["cpu"]: requests must not be above the limitRange max, '
        f'{CONTAINER}: Invalid value: ["memory"]: requests must not be below the limitRange min]'
    )


def test_a_resource_the_container_does_not_name_is_not_below_the_min() -> None:
    """Kueue's GreaterKeys compares only the resources both name: a LimitRange min of memory does not make
    a container asking no memory (and no default filling it) inadmissible."""
    manifest = _workload({"containers": [_container("1")]})
    assert _message(manifest, [{"type": "Container", "min": {"memory": "1Gi"}}]) == ""


def test_a_jobs_pod_set_is_named_by_the_workloads_field() -> None:
    """Kueue validates the Workload it made of the job: the path is the Workload's pod set, not the job's."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "sample",
            "namespace": "default",
            "uid": "u",
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
        },
        "spec": {"template": {"spec": {"containers": [_container("2", "1")]}}},
    }
    fact = jobs.job_facts(job)
    assert isinstance(fact, types.WorkloadObserved)
    assert queues.misconfigured_message(fact.workload) == (
        f'{OVER_LIMITS}{CONTAINER}: Invalid value: ["cpu"]: requests must not exceed its limits'
    )


_POD_LEVEL = Path(__file__).parents[1] / "scenarios" / "cycle" / "pod-level-requests-above-limits-not-admitted.yaml"


def test_the_admitter_writes_kueues_message_and_logic_40_its_own() -> None:
    """scheduler_test.go 'blocks workloads when pod-level requests exceed pod-level limits': the workload is
    pending Misconfigured with Kueue's message (logic 41); logic 40, for replay, wrote ``pod set main: ...``."""
    run = run_scenario(load_scenario(_POD_LEVEL))
    [pending] = [e for _, e in run.log if isinstance(e, types.WorkloadInadmissible)]
    want = (
        OVER_LIMITS
        + 'spec.podSets[0].template.spec.resources: Invalid value: ["cpu"]: requests must not exceed its limits'
    )
    assert (pending.reason, pending.message) == ("Misconfigured", want)
    records = [i for i, (_, e) in enumerate(run.log) if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    state = ClusterState()
    for seq, event in run.log[: records[0]]:
        apply(state, event, seq=seq)
    record = run.log[records[0]][1]
    assert isinstance(record, types.DecisionRecord)
    now = admitter.decide(state, now_ms=record.now_ms, partition=record.partition)
    earlier = admitter.decide_as(40)(state, now_ms=record.now_ms, partition=record.partition)
    [new] = [o for o in now if isinstance(o, types.WorkloadInadmissible)]
    [old] = [o for o in earlier if isinstance(o, types.WorkloadInadmissible)]
    assert new.message == want
    assert old.message == f"pod set main: {want}"
    assert admitter.LOGIC_VERSION >= 41 and 40 in admitter.EARLIER_LOGIC_VERSIONS
