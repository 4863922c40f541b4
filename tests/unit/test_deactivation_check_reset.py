"""A reservation deactivated by hand before it was admitted has its admission checks reset (admitter logic 56).

Kueue's workload controller evicts every inactive workload (evict.go Evict), and Evict resets every check it finds
not Pending (resetChecksOnEviction). kueue-es's one QuotaReleased ``Deactivated`` stands for that eviction and the
release (admitter logic 39); before logic 56 it reset nothing, so a check Ready beside one still Pending stayed
Ready (on the Workload and for the admitter) and, once the workload was active again and reserved quota, admitted
it without its controller's new answer. A log whose admitter is logic 55 or older folds it as it did.
"""

from __future__ import annotations

import msgspec
import pytest

from kueue_es.events import types
from kueue_es.jobframework import jobs
from kueue_es.projections.cluster import DEACTIVATION_RESET_LOGIC
from kueue_es.services.admitter import core as admitter_core
from kueue_es.services.dispatcher import core
from kueue_es.services.watcher import convert
from tests.integration.harness import cluster_queue, flavor, job, local_queue
from tests.integration.test_kueue_status import Log, released, reserved, ts
from tests.unit.test_late_retry_reset import check, decision_record

RESET = "Reset to Pending after eviction. Previously: Ready"


def folded(logic: int, *, track_objects: bool = True) -> tuple[Log, types.WorkloadRef]:
    """Job sample's workload holds quota in a ClusterQueue naming my-check and my-check2 (admitter logic
    ``logic``); my-check turns Ready, then the Workload is set inactive by hand and its reservation released."""
    manifest = job("sample", parallelism=2)
    manifest["metadata"] |= {"uid": "uid-sample", "creationTimestamp": "2026-01-01T00:00:00Z"}
    observed = jobs.job_facts(manifest)
    assert isinstance(observed, types.WorkloadObserved)
    meta = observed.workload.metadata
    ref = types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
    inactive = msgspec.structs.replace(
        observed.workload, spec=msgspec.structs.replace(observed.workload.spec, active=False)
    )
    queue = cluster_queue("cluster-queue")
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "my-check"}, {"name": "my-check2"}]}
    log = Log()
    log.view = core.DispatchState(track_objects=track_objects)
    log.add(
        convert.kueue_fact(flavor("default-flavor")),
        convert.kueue_fact(queue),
        convert.kueue_fact(local_queue("user-queue", "cluster-queue")),
        observed,
        decision_record(logic, 4),
        reserved(ref, 10),
        check(ref, "my-check", "Ready", 11, message="ok"),
        types.WorkloadObserved(workload=inactive),
        released(ref, "Deactivated", 14),
    )
    return log, ref


def test_the_release_of_a_deactivated_reservation_resets_its_checks() -> None:
    """Logic 56: my-check goes back to Pending with Kueue's reset message at the release, for the admitter (the
    cluster fold) and on the Workload (the status record)."""
    log, ref = folded(DEACTIVATION_RESET_LOGIC)
    wl = log.view.cluster.workloads[ref.key]
    assert {name: (c.state, c.message) for name, c in wl.checks.items()} == {"my-check": ("Pending", RESET)}
    entries = {c["name"]: c for c in log.status(ref)["admissionChecks"]}
    assert entries["my-check"] == {
        "name": "my-check",
        "state": "Pending",
        "lastTransitionTime": ts(14),
        "message": RESET,
    }
    assert (entries["my-check2"]["state"], entries["my-check2"]["message"]) == ("Pending", "")


@pytest.mark.parametrize("logic", [55, 39])
def test_a_log_of_an_older_admitter_keeps_the_ready_check(logic: int) -> None:
    """A log whose admitter is logic 55 or older keeps my-check Ready, as that admitter decided on it."""
    assert logic in admitter_core.EARLIER_LOGIC_VERSIONS
    assert admitter_core.LOGIC_VERSION >= DEACTIVATION_RESET_LOGIC
    log, ref = folded(logic)
    assert log.view.cluster.workloads[ref.key].checks["my-check"].state == "Ready"
    assert {c["name"]: c["state"] for c in log.status(ref)["admissionChecks"]}["my-check"] == "Ready"


def test_the_lean_fold_resets_them_too() -> None:
    """The dispatcher's lean fold keeps the checks its plans read as the full fold does."""
    log, ref = folded(DEACTIVATION_RESET_LOGIC, track_objects=False)
    record = log.view.records[ref.key]
    assert {name: (e.state, e.message) for name, e in record.checks.items()}["my-check"] == ("Pending", RESET)
