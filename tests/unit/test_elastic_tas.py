"""Elastic workload slices with Topology-Aware Scheduling (issue 21, SEMANTICS-ADVANCED A.14).

Kueue's gate ElasticJobsViaWorkloadSlicesWithTAS: an elastic workload's TAS pod sets must be
unconstrained (tas_flavorassigner.go WorkloadsTopologyRequests, errors.go), and a replacement slice
keeps the assignment of the slice it replaces, placing only the difference
(tas_elastic_workloads.go handleElasticWorkload). The scenarios in tests/scenarios/elastic/tas-*
show the outcomes; these tests pin Kueue's messages, the per-domain accounting while both slices
exist, the other branches of the placement (scale-down, same count, stale), the gate's
dependencies and replay of the admitter logic before it.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from kueue_es.events import manager_config, manifests, slices, tas, types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario, parse_scenario
from kueue_es.scheduling.tas.placement import find_assignments
from kueue_es.scheduling.tas.requests import Placement, PodSetPlacementRequest
from kueue_es.services.admitter import core as admitter

HERE = Path(__file__).resolve().parents[1] / "scenarios" / "elastic"
KEEPS = HERE / "tas-scale-up-keeps-first-pods-places-delta.yaml"
WAITS = HERE / "tas-scale-up-delta-waits-for-a-node.yaml"
REFUSED = HERE / "tas-elastic-required-topology-refused.yaml"
OLD, NEW = "default/job-a-1", "default/job-a-2"
CONFIG = f"apiVersion: {manager_config.API_VERSIONS[0]}\nkind: Configuration\n"


def _counts(state: ClusterState, key: str) -> dict[str, int]:
    topology = state.workloads[key].topology
    assert topology is not None
    return tas.decode(topology["main"]).counts_by_domain()


def test_the_replacement_keeps_the_old_pods_and_domains_count_the_new_slice_once() -> None:
    run = run_scenario(load_scenario(KEEPS))
    state = run.state
    assert _counts(state, NEW) == {"x1": 2, "x2": 2}
    old = state.workloads[OLD]
    assert old.finished is not None and old.finished.reason == slices.REPLACED_REASON
    assert old.reservation is None
    # Both slices held x1 until the batch that admitted the replacement released the old one: now
    # each domain counts the new slice's pods once.
    assert state.tas_usage["tas"] == {"x1": {"cpu": 2000, "pods": 2}, "x2": {"cpu": 2000, "pods": 2}}
    # One batch: the replacement's reservation with its topology, its admission, the old slice released.
    events = [e for _, e in run.log]  # a record's carried decisions after it (schema 17)
    kinds = [type(e).__name__ for e in events]
    at = kinds.index("TopologyAssigned", kinds.index("TopologyAssigned") + 1)
    assert kinds[at - 1 : at + 3] == ["QuotaReserved", "TopologyAssigned", "WorkloadAdmitted", "QuotaReleased"]
    assert len({seq for seq, _ in run.log[at - 1 : at + 3]}) == 1  # one batch: its record's sequence
    released = events[at + 2]
    assert isinstance(released, types.QuotaReleased) and released.workload.key == OLD
    assert released.reason == slices.REPLACED_REASON


def test_admitter_logic_13_placed_the_replacement_afresh_for_replay() -> None:
    run = run_scenario(load_scenario(KEEPS))
    reserved_at, reserved = next(  # in the log, where a record's carried decisions follow it (schema 17)
        (i, e) for i, (_, e) in enumerate(run.log) if isinstance(e, types.QuotaReserved) and e.workload.key == NEW
    )
    state = ClusterState()
    for seq, event in run.log[:reserved_at]:
        apply(state, event, seq=seq)
    now = admitter.decide(state, now_ms=reserved.at_ms)
    earlier = admitter.decide_as(13)(state, now_ms=reserved.at_ms)

    def placed(out: list[types.Output]) -> dict[str, int]:
        assigned = next(o for o in out if isinstance(o, types.TopologyAssigned))
        return tas.decode(assigned.assignments["main"]).counts_by_domain()

    assert placed(now) == {"x1": 2, "x2": 2}
    assert placed(earlier) == {"x2": 2, "x3": 2}  # the running pods on x1 would have moved
    assert admitter.LOGIC_VERSION >= 15 and 13 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_delta_that_fits_nowhere_waits_with_the_placement_message() -> None:
    scenario = load_scenario(WAITS)
    scenario = msgspec.structs.replace(scenario, events=scenario.events[:1])  # no node x3
    state = run_scenario(scenario).state
    new, old = state.workloads[NEW], state.workloads[OLD]
    assert new.reservation is None and old.reservation is not None and old.finished is None
    assert new.pending_reason == "TopologyPlacementFailed"
    assert new.pending_message == (
        'couldn\'t assign flavors to pod set main: topology "default" allows to fit only 1 out of 2 pod(s). '
        'Total nodes: 2; excluded: resource "cpu": 1'  # x1, full with the kept pods
    )
    assert _counts(state, OLD) == {"x1": 2}


def test_a_required_topology_on_an_elastic_workload_is_refused_with_kueues_message() -> None:
    state = run_scenario(load_scenario(REFUSED)).state
    wl = state.workloads[OLD]
    assert wl.reservation is None
    assert wl.pending_message == (
        "failed to assign flavors to pod set main: required topology is not supported with ElasticJobsViaWorkloadSlices"
    )
    preferred = REFUSED.read_text().replace(
        "topologyRequest: {required: kubernetes.io/hostname}, template: {spec: {containers: [{name: c, resources: "
        '{requests: {cpu: "1"}}}]}}}]}\n- apiVersion',
        "topologyRequest: {preferred: kubernetes.io/hostname}, template: {spec: {containers: [{name: c, resources: "
        '{requests: {cpu: "1"}}}]}}}]}\n- apiVersion',
        1,
    )
    assert preferred != REFUSED.read_text()
    state = run_scenario(parse_scenario(preferred)).state
    assert state.workloads[OLD].pending_message == (
        "failed to assign flavors to pod set main: preferred topology is not supported with ElasticJobsViaWorkloadSlices"
    )


def test_without_the_tas_gate_an_elastic_required_topology_is_placed() -> None:
    text = REFUSED.read_text().replace(", ElasticJobsViaWorkloadSlicesWithTAS: true", "")
    state = run_scenario(parse_scenario(text)).state
    assert state.workloads[OLD].reservation is not None


def _request(count: int, previous: dict[str, int] | None) -> PodSetPlacementRequest:
    from kueue_es.events import models

    return PodSetPlacementRequest(
        name="main",
        count=count,
        requests={"cpu": 1000},
        topology_request=models.PodSetTopologyRequest(unconstrained=True),
        previous=(
            tas.Assignment(
                levels=("kubernetes.io/hostname",),
                domains=tuple(tas.DomainAssignment((host,), n) for host, n in previous.items()),
            )
            if previous is not None
            else None
        ),
    )


@pytest.mark.parametrize(
    ("count", "previous", "want"),
    [
        (3, {"x1": 2, "x2": 2}, {"x1": 2, "x2": 1}),  # scale-down: cut from the end (TruncateAssignment)
        (1, {"x2": 2, "x1": 1}, {"x2": 1}),  # in the previous assignment's order
        (4, {"x1": 2, "x2": 2}, {"x1": 2, "x2": 2}),  # same count: reused
        (3, {"x2": 1, "x1": 1}, {"x1": 2, "x2": 1}),  # scale-up: the new pod on x1 (least free), merged in order
    ],
)
def test_the_previous_assignment_is_cut_reused_or_merged(
    count: int, previous: dict[str, int], want: dict[str, int]
) -> None:
    tree = run_scenario(load_scenario(KEEPS)).state.topology.flavor_topology("tas")
    assert tree is not None
    result = find_assignments(tree, [_request(count, previous)], tas_usage={})
    assert isinstance(result, Placement)
    assignment = result.assignments["main"]
    assert assignment.counts_by_domain() == want
    assert [d.values[0] for d in assignment.domains] == list(want)
    assert result.usage == {host: {"cpu": 1000 * n, "pods": n} for host, n in want.items()}


def test_a_stale_previous_assignment_is_placed_afresh() -> None:
    tree = run_scenario(load_scenario(KEEPS)).state.topology.flavor_topology("tas")
    assert tree is not None
    fresh = find_assignments(tree, [_request(2, None)], tas_usage={})
    stale = find_assignments(tree, [_request(2, {"gone": 1})], tas_usage={})
    assert isinstance(stale, Placement) and isinstance(fresh, Placement)
    assert stale.assignments == fresh.assignments and "gone" not in stale.usage


def test_the_gate_needs_both_gates_it_depends_on() -> None:
    with pytest.raises(manifests.ManifestError) as err:
        manager_config.parse(
            CONFIG, feature_gates="ElasticJobsViaWorkloadSlices=false,ElasticJobsViaWorkloadSlicesWithTAS=true"
        )
    assert str(err.value).endswith(
        "featureGates: ElasticJobsViaWorkloadSlicesWithTAS is enabled, but depends on features that are "
        "disabled: [ElasticJobsViaWorkloadSlices]"
    )
    with pytest.raises(manifests.ManifestError, match=r"disabled: \[TopologyAwareScheduling\]$"):
        manager_config.parse(
            CONFIG,
            feature_gates="ElasticJobsViaWorkloadSlices=true,ElasticJobsViaWorkloadSlicesWithTAS=true,"
            "TopologyAwareScheduling=false,TASProfileMixed=false,TASHandleOverlappingFlavors=false,"
            "TASFailedNodeReplacement=false,TASFailedNodeReplacementFailFast=false,"
            "TASReplaceNodeOnPodTermination=false,TASReplaceNodeOnNodeTaints=false,TASMultiLayerTopology=false,"
            "TASRecomputeAssignmentWithinSchedulingCycle=false",
        )
    gates = "ElasticJobsViaWorkloadSlices=true,ElasticJobsViaWorkloadSlicesWithTAS=true"
    parsed = manager_config.parse(CONFIG, feature_gates=gates)
    assert slices.tas_gate_enabled(parsed.configuration.feature_gates)
