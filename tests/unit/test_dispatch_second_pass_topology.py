"""The dispatcher keeps every pod set's topology when a second pass places only the delayed ones.

A ProvisioningRequest check on one flavor delays the topology of the pod sets on that flavor
(SEMANTICS-ADVANCED A.5.4, A.9): the first pass records the others' placement with the
reservation, and the second pass's TopologyAssigned names only the delayed pod sets. Kueue's
status then shows both assignments (scheduler_tas_test.go TestScheduleForTAS 'workload in CQ with
two TAS flavors - one with ProvisioningRequest, one regular; second pass'); the cluster fold merges
them per pod set, and so must the dispatcher's full and lean folds (the Workload status it writes,
the topology gate its Job start adds).
"""

from __future__ import annotations

from kueue_es.events import models, types
from kueue_es.services.dispatcher import core, status

FLAVORS = [
    types.ResourceFlavorObserved(
        flavor=models.ResourceFlavor(
            metadata=models.ObjectMeta(name=name),
            spec=models.ResourceFlavorSpec(node_labels={label: "true"}, topology_name="default"),
        )
    )
    for name, label in (("tas-default", "tas-node"), ("tas-second", "tas-node-second"))
]
REF = types.WorkloadRef(namespace="ns", name="foo", uid="u1")


def _placed(node: str) -> models.TopologyAssignment:
    """One pod on ``node`` (hostname-only topology)."""
    return models.TopologyAssignment(
        levels=["kubernetes.io/hostname"],
        slices=[
            models.TopologyAssignmentSlice(
                domain_count=1,
                values_per_level=[models.TopologyAssignmentLevelValues(universal=node)],
                pod_counts=models.TopologyAssignmentPodCounts(universal=1),
            )
        ],
    )


def _log() -> list[types.Event]:
    """foo: pod set one on tas-default (placed with the reservation, x1), two on tas-second
    (delayed, placed by the second pass on y1), then admitted."""
    workload = models.Workload(
        metadata=models.ObjectMeta(name="foo", namespace="ns", uid="u1"),
        spec=models.WorkloadSpec(
            queue_name="lq",
            pod_sets=[models.PodSet(name=n, requests={"cpu": 1000}) for n in ("one", "two")],
        ),
    )
    assignments = [
        types.PodSetAssignment(name="one", flavors={"cpu": "tas-default"}, resource_usage={"cpu": 1000}, count=1),
        types.PodSetAssignment(
            name="two",
            flavors={"cpu": "tas-second"},
            resource_usage={"cpu": 1000},
            count=1,
            delayed_topology_request="Pending",
        ),
    ]
    return [
        *FLAVORS,
        types.WorkloadObserved(workload=workload),
        types.QuotaReserved(workload=REF, cluster_queue="cq", pod_set_assignments=assignments, at_ms=1),
        types.TopologyAssigned(workload=REF, cluster_queue="cq", assignments={"one": _placed("x1")}, at_ms=1),
        types.TopologyAssigned(workload=REF, cluster_queue="cq", assignments={"two": _placed("y1")}, at_ms=2),
        types.WorkloadAdmitted(workload=REF, cluster_queue="cq", at_ms=2),
    ]


def test_second_pass_keeps_the_first_pass_topology_in_both_folds() -> None:
    full, lean = core.DispatchState(), core.DispatchState(track_objects=False)
    for seq, event in enumerate(_log(), start=1):
        core.fold(full, event, seq=seq)
        core.fold(lean, event, seq=seq)
    for view in (full, lean):
        assert view.records[REF.key].topology == {"one": _placed("x1"), "two": _placed("y1")}
    written = status.workload_status(full.records[REF.key], generation=1)["admission"]["podSetAssignments"]
    nodes = {
        entry["name"]: entry["topologyAssignment"]["slices"][0]["valuesPerLevel"][0]["universal"] for entry in written
    }
    assert nodes == {"one": "x1", "two": "y1"}
    assert [entry.get("delayedTopologyRequest") for entry in written] == [None, "Ready"]


CHECKED_QUEUE = types.ClusterQueueObserved(
    cluster_queue=models.ClusterQueue(
        metadata=models.ObjectMeta(name="cq"),
        spec=models.ClusterQueueSpec(
            admission_checks_strategy=models.AdmissionChecksStrategy(
                admission_checks=[models.AdmissionCheckStrategyRule(name="prov", on_flavors=["tas-second"])]
            )
        ),
    )
)


def _admitted_condition(view: core.DispatchState) -> tuple[str, str, str]:
    written = status.workload_status(view.records[REF.key], generation=1)
    (admitted,) = [c for c in written["conditions"] if c["type"] == "Admitted"]
    return admitted["status"], admitted["reason"], admitted["message"]


def test_checks_ready_with_a_delayed_topology_request_pending_says_so() -> None:
    """Kueue's SyncAdmittedCondition (admissionchecks.go), run by the workload controller for every
    workload not admitted: the ProvisioningRequest check Ready while pod set two's delayed topology
    request waits for the second pass shows Admitted=False ``PendingDelayedTopologyRequests``, not the
    ``UnsatisfiedAdmissionChecks`` of before the check was Ready; the second pass's admission ends it."""
    view = core.DispatchState()
    log = _log()
    first_pass = log.index(next(e for e in log if isinstance(e, types.TopologyAssigned)))
    events = [CHECKED_QUEUE, *log[: first_pass + 1]]
    for seq, event in enumerate(events, start=1):
        core.fold(view, event, seq=seq)
    assert _admitted_condition(view) == ("False", "UnsatisfiedAdmissionChecks", "The workload has not all checks ready")
    ready = types.AdmissionCheckStateChanged(workload=REF, check="prov", state="Ready", at_ms=5)
    core.fold(view, ready, seq=len(events) + 1)
    assert _admitted_condition(view) == (
        "False",
        "PendingDelayedTopologyRequests",
        "There are pending delayed topology requests",
    )
    for seq, event in enumerate(log[first_pass + 1 :], start=len(events) + 2):
        core.fold(view, event, seq=seq)
    assert _admitted_condition(view) == ("True", "Admitted", "The workload is admitted")


def test_a_delayed_request_the_worker_placed_shows_ready_once_admitted() -> None:
    """MultiKueue (admitter logic 35): the manager never places a delayed pod set; its request turns Ready
    with the admission the worker's admission brings (multikueue/workload.go updateDelayedTopologyRequest)."""
    view = core.DispatchState()
    reserved, admitted = (e for e in _log() if isinstance(e, types.QuotaReserved | types.WorkloadAdmitted))
    events = [*FLAVORS, *(e for e in _log() if isinstance(e, types.WorkloadObserved)), reserved]
    for seq, event in enumerate(events, start=1):
        core.fold(view, event, seq=seq)

    def delayed() -> list[str | None]:
        written = status.workload_status(view.records[REF.key], generation=1)["admission"]["podSetAssignments"]
        return [entry.get("delayedTopologyRequest") for entry in written]

    assert delayed() == [None, "Pending"]
    core.fold(view, admitted, seq=len(events) + 1)
    assert delayed() == [None, "Ready"]
