"""Where the pods of a failed node go back to (SEMANTICS-ADVANCED A.13.4 steps 1 and 3; Kueue
tas_flavor_snapshot.go requiredReplacementDomain, findIncompleteSliceDomain, and
FindTopologyAssignmentsForFlavor with SkipReassignmentForPodOwnedWorkloads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml

from kueue_es.events import manifests, models, tas, types
from kueue_es.events.tas import DomainAssignment
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios import core_engine
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.scheduling.tas.replacement import replacement_domain as _replacement_domain
from kueue_es.services.tas_placer import core as placer
from tests.unit.tas_fixtures import THREE, B, R, flavor_topology, hnode

TREE = flavor_topology(
    [
        hnode(x, b, r, x, cpu="1")
        for b, r, x in (
            ("b1", "r1", "x1"), ("b1", "r1", "x2"), ("b1", "r1", "x8"), ("b1", "r2", "x3"),
            ("b1", "r2", "x4"), ("b1", "r3", "x5"), ("b2", "r4", "x6"),
        )
    ],
    THREE,
)  # fmt: skip
KEPT = [DomainAssignment(("x2",), 1), DomainAssignment(("x3",), 1), DomainAssignment(("x4",), 1)]


def _slices(**kw: object) -> models.PodSetTopologyRequest:
    return models.PodSetTopologyRequest(**kw)  # type: ignore[arg-type]


def test_broken_slice_goes_to_the_rack_it_completes() -> None:
    request = _slices(preferred=B, pod_set_slice_required_topology=R, pod_set_slice_size=2)
    assert _replacement_domain(TREE, request, KEPT, 1) == ("b1", "r1")


def test_whole_slices_go_anywhere_unless_required() -> None:
    preferred = _slices(preferred=B, pod_set_slice_required_topology=R, pod_set_slice_size=2)
    kept = [DomainAssignment(("x3",), 1), DomainAssignment(("x4",), 1)]
    assert _replacement_domain(TREE, preferred, kept, 2) is None
    required = _slices(required=B, pod_set_slice_required_topology=R, pod_set_slice_size=2)
    assert _replacement_domain(TREE, required, kept, 2) == ("b1",)


def test_multi_layer_uses_the_innermost_broken_layer() -> None:
    request = _slices(
        required=B,
        podset_slice_required_topology_constraints=[
            models.PodsetSliceRequiredTopologyConstraint(topology=B, size=4),
            models.PodsetSliceRequiredTopologyConstraint(topology=R, size=2),
        ],
    )
    assert _replacement_domain(TREE, request, KEPT, 1) == ("b1", "r1")  # r2 holds 2: 2 + 1 is odd


def test_no_domain_completes_the_slice_or_nothing_kept() -> None:
    request = _slices(preferred=B, pod_set_slice_required_topology=R, pod_set_slice_size=4)
    assert _replacement_domain(TREE, request, KEPT, 1) is None  # r1: 1 + 1, r2: 2 + 1, no multiple of 4
    assert _replacement_domain(TREE, _slices(required=R), [], 3) is None
    assert _replacement_domain(TREE, _slices(required=R), KEPT, 1) == ("b1", "r1")


# --- single-Pod-owned workloads keep their assignment (A.13.4 step 1) ---------------------------

SCENARIO = Path(__file__).parents[1] / "scenarios/tas/node-not-ready-after-admission-is-replaced.yaml"


def _failed_node_state(owner: models.OwnerReference | None, annotations: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """wl1 admitted on x3 and x1 (the scenario's first settle), with ``owner``; then x3 NotReady."""
    doc = yaml.safe_load(SCENARIO.read_text())
    failure = doc.pop("events")[0]["apply"]
    del doc["expect"]
    run = core_engine.run_scenario(parse_scenario(yaml.safe_dump(doc)))
    state = run.state
    wl = state.workloads["default/wl1"]
    assert wl.topology is not None and wl.admitted
    metadata = msgspec.structs.replace(wl.workload.metadata, annotations={**(annotations or {})})
    wl.workload = msgspec.structs.replace(wl.workload, owner=owner, metadata=metadata)
    apply(state, types.NodeObserved(node=manifests.parse_node(failure)), seq=len(run.messages) + 1)
    return state


POD = models.OwnerReference(api_version="v1", kind="Pod", name="p", uid="u")


def test_single_pod_owned_workload_keeps_its_assignment() -> None:
    assert placer.decide(_failed_node_state(POD), now_ms=10**13) == []


def test_pod_group_and_job_owned_workloads_are_replaced() -> None:
    group = _failed_node_state(POD, {"kueue.x-k8s.io/is-group-workload": "true"})
    job = _failed_node_state(models.OwnerReference(api_version="batch/v1", kind="Job", name="j", uid="u"))
    for state in (group, job):
        decisions = placer.decide(state, now_ms=10**13)
        assert [type(d).__name__ for d in decisions] == ["TopologyAssigned"]
        domains = tas.decode(decisions[0].assignments["main"]).domains  # type: ignore[attr-defined]
        assert sorted((d.values[-1], d.count) for d in domains) == [("x1", 1), ("x4", 1)]


# --- no replacement for a workload that no longer runs (Kueue PR #5591, NeedsSecondPass) ------------

JOB = models.OwnerReference(api_version="batch/v1", kind="Job", name="j", uid="u")


def _job_admitted_on_x3_and_x1() -> tuple[ClusterState, dict[str, Any], int]:
    """wl1, a Job's, admitted on x3 and x1 (the scenario's first settle); the scenario's x3 NotReady manifest,
    and the next log sequence."""
    doc = yaml.safe_load(SCENARIO.read_text())
    failure = doc.pop("events")[0]["apply"]
    del doc["expect"]
    run = core_engine.run_scenario(parse_scenario(yaml.safe_dump(doc)))
    state = run.state
    wl = state.workloads["default/wl1"]
    wl.workload = msgspec.structs.replace(wl.workload, owner=JOB)
    return state, failure, len(run.messages) + 1


def _failed_after(event: types.Event) -> ClusterState:
    """wl1 admitted on x3 and x1, then ``event`` about it, then x3 NotReady."""
    state, failure, seq = _job_admitted_on_x3_and_x1()
    apply(state, event, seq=seq)
    apply(state, types.NodeObserved(node=manifests.parse_node(failure)), seq=seq + 1)
    return state


def test_a_finished_or_evicted_workload_gets_no_replacement() -> None:
    """Kueue pkg/workload/workload_test.go TestNeedsSecondPass 'finished workload with NodeToReplace' and
    'evicted workload with NodeToReplace': neither goes to the second pass, so its pods are not placed again."""
    ref = types.WorkloadRef(namespace="default", name="wl1")
    finished = types.WorkloadFinished(workload=ref, at_ms=10**12)
    evicted = types.EvictionRequested(
        workload=ref, cluster_queue="tas-cq", reason="PodsReadyTimeout", message="m", at_ms=10**12
    )
    for event in (finished, evicted):
        state = _failed_after(event)
        wl = state.workloads["default/wl1"]
        assert wl.topology is not None and (wl.finished is not None or wl.eviction is not None)
        assert placer.decide(state, now_ms=10**13) == []


# --- a failed node's running pods hold it (A.13.2, TASReplaceNodeOnPodTermination) -----------------


def _not_ready_x3(progressing: list[str], *, taint: dict[str, object] | None = None) -> ClusterState:
    """wl1 (a Job's) admitted on x3 and x1, then x3 NotReady (or Ready with ``taint``) with ``progressing``."""
    state, failure, seq = _job_admitted_on_x3_and_x1()
    if taint is not None:
        failure["status"]["conditions"][0]["status"] = "True"
        failure["spec"] = {"taints": [taint]}
    node = msgspec.structs.replace(manifests.parse_node(failure), progressing_workloads=progressing)
    apply(state, types.NodeObserved(node=node), seq=seq)
    return state


def _replaced(decisions: list[types.Decision]) -> list[tuple[str, int]]:
    assert [type(d).__name__ for d in decisions] == ["TopologyAssigned"]
    domains = tas.decode(decisions[0].assignments["main"]).domains  # type: ignore[attr-defined]
    return sorted((d.values[-1], d.count) for d in domains)


def test_a_not_ready_node_with_the_workloads_pods_running_is_not_failed_yet() -> None:
    """Kueue node_controller_test.go: a NotReady node whose pods of the workload still run leaves the workload as
    it is; once they stopped (the fact lists the workload no more) its pod is placed again."""
    running = _not_ready_x3(["default/wl1"])
    assert placer.decide(running, now_ms=10**13) == []
    assert placer.decide(_not_ready_x3(["default/other"]), now_ms=10**13) != []
    stopped = _not_ready_x3([])
    assert _replaced(placer.decide(stopped, now_ms=10**13)) == [("x1", 1), ("x4", 1)]


def test_logic_10_and_the_gate_off_fail_the_node_at_once() -> None:
    """Placer logic 10 (replayed logs) and TASReplaceNodeOnPodTermination off do not wait for the pods."""
    assert _replaced(placer.decide_as(10)(_not_ready_x3(["default/wl1"]), now_ms=10**13)) == [("x1", 1), ("x4", 1)]
    gate_off = _not_ready_x3(["default/wl1"])
    gate_off.configuration = msgspec.structs.replace(
        gate_off.configuration, feature_gates={"TASReplaceNodeOnPodTermination": False}
    )
    assert _replaced(placer.decide(gate_off, now_ms=10**13)) == [("x1", 1), ("x4", 1)]


def test_an_untolerated_taint_waits_for_the_pods_and_the_taints_gate_off_ignores_it() -> None:
    """A Ready node tainted NoSchedule after the placement: failed once the workload's pods on it stopped
    (Kueue getWorkloadStatus, untolerated taint, TASReplaceNodeOnPodTermination); never with
    TASReplaceNodeOnNodeTaints off."""
    taint = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}
    assert placer.decide(_not_ready_x3(["default/wl1"], taint=taint), now_ms=10**13) == []
    assert _replaced(placer.decide(_not_ready_x3([], taint=taint), now_ms=10**13)) == [("x1", 1), ("x4", 1)]
    gate_off = _not_ready_x3([], taint=taint)
    gate_off.configuration = msgspec.structs.replace(
        gate_off.configuration, feature_gates={"TASReplaceNodeOnNodeTaints": False}
    )
    assert placer.decide(gate_off, now_ms=10**13) == []


def test_the_timeline_names_where_a_failed_nodes_pods_went() -> None:
    """The demo timeline's line for a replacement (a fresh user could not see which nodes it chose): the new
    nodes with their pod counts, and the node left."""
    from kueue_es import timeline

    state = _not_ready_x3([])
    [decision] = placer.decide(state, now_ms=10**13)
    verb, text = timeline.describe(decision, state) or ("", "")
    assert (verb, text) == ("placed", "default/wl1: pod set main on x1 (1 pod), x4 (1 pod) (no longer on x3)")


# --- pending pods stranded on their assigned node (Kueue node_controller.go markPodsFailed) -----------


def test_pending_pods_bound_by_selector_to_a_failing_node_are_terminated() -> None:
    """Kueue node_controller.go getWorkloadStatus / getPodsToTerminate: a NotReady node, or a Ready one with a
    NoSchedule taint the pod set does not tolerate for good, fails the workload's pending pods selecting it
    (UnschedulableOnAssignedNode); a healthy node in the assignment does not; a node no longer in the hostname
    assignment does (a late pod with the old selector). Found by a new user's TAS trial."""
    from kueue_es.scheduling.tas.replacement import terminates_pending_pods

    not_ready = _not_ready_x3([])
    wl = not_ready.workloads["default/wl1"]
    assert terminates_pending_pods(not_ready, wl, "x3")
    assert not terminates_pending_pods(not_ready, wl, "x1")  # Ready, untainted, in the assignment
    assert terminates_pending_pods(not_ready, wl, "x4")  # Ready, but no longer in the assignment: stray
    assert not terminates_pending_pods(not_ready, wl, "nowhere")  # gone: Kueue fails the node, not its pods
    gate_off = _not_ready_x3([])
    gate_off.configuration = msgspec.structs.replace(
        gate_off.configuration, feature_gates={"TASReplaceNodeOnPodTermination": False}
    )
    assert not terminates_pending_pods(gate_off, gate_off.workloads["default/wl1"], "x3")

    taint = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}
    tainted = _not_ready_x3(["default/wl1"], taint=taint)
    assert terminates_pending_pods(tainted, tainted.workloads["default/wl1"], "x3")
    evicted = _failed_after(
        types.EvictionRequested(
            workload=types.WorkloadRef(namespace="default", name="wl1"),
            cluster_queue="tas-cq",
            reason="PodsReadyTimeout",
            message="m",
            at_ms=10**12,
        )
    )
    assert not terminates_pending_pods(evicted, evicted.workloads["default/wl1"], "x3")
    prefer_no = _not_ready_x3([], taint={"key": "maintenance", "value": "true", "effect": "PreferNoSchedule"})
    assert not terminates_pending_pods(prefer_no, prefer_no.workloads["default/wl1"], "x3")
