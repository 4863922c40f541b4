"""The admission a Workload's status shows, field by field as Kueue's API serializes it.

``podSetAssignments[].flavors`` and ``resourceUsage`` are ``omitempty`` maps in Kueue's API
(apis/kueue/v1beta2/workload_types.go): a pod set that requests nothing is admitted with neither, not
with ``flavors: {}`` and ``resourceUsage: {}``.
"""

from __future__ import annotations

import msgspec

from kueue_es.events import types
from kueue_es.services.dispatcher import status
from tests.unit.dispatch_log import DispatchLog, job_workload


def _admitted_status(observed: types.WorkloadObserved) -> dict[str, object]:
    log = DispatchLog(cpu="4")
    log.add(observed)
    admission = log.admit(1_000)
    return status.workload_status(log.view.records[admission.workload.key], generation=1)


def test_a_pod_set_that_requests_nothing_has_no_flavors_nor_resource_usage() -> None:
    observed = job_workload("idle")
    [pod_set] = observed.workload.spec.pod_sets
    nothing = msgspec.structs.replace(pod_set, requests={})
    spec = msgspec.structs.replace(observed.workload.spec, pod_sets=[nothing])
    written = _admitted_status(types.WorkloadObserved(workload=msgspec.structs.replace(observed.workload, spec=spec)))
    assert written["admission"] == {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "main", "count": 1}],
    }


def test_a_pod_set_that_requests_cpu_shows_its_flavor_and_usage() -> None:
    written = _admitted_status(job_workload("busy", cpu="2"))
    assert written["admission"] == {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "main", "flavors": {"cpu": "rf"}, "resourceUsage": {"cpu": "2"}, "count": 1}],
    }
