"""The Workload's ``status.unhealthyNodes`` (SEMANTICS-ADVANCED A.13.3, A.13.4): Kueue's TAS node controller
lists an admitted workload's failed node there (pkg/controller/tas/node_controller.go), its scheduler clears the
list with the replacement (scheduler.go) and an eviction clears it (evict.go resetUnhealthyNodes). The
dispatcher's status projection shows the same from the log: the node is listed from the fold of its failure to
the fold of the TAS placer's replacement or eviction, and stays while no replacement is found with
TASFailedNodeReplacementFailFast off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml

from kueue_es.events import manifests, models, types
from kueue_es.scenarios import core_engine
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.services.dispatcher import core, status

SCENARIOS = Path(__file__).parents[1] / "scenarios/tas"


def _listed(scenario: str, key: str, *, gates: dict[str, bool] | None = None) -> list[tuple[str, Any]]:
    """Run ``scenario`` (with feature ``gates``) and fold its log into a dispatcher view: each event about to
    change workload ``key``'s written ``status.unhealthyNodes``, with the new value (None: left out)."""
    doc = yaml.safe_load((SCENARIOS / scenario).read_text())
    del doc["expect"]
    if gates:
        doc["objects"].insert(
            0, {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}
        )
    run = core_engine.run_scenario(parse_scenario(yaml.safe_dump(doc)))
    view, shown, changes = core.DispatchState(), None, []
    for seq, event in run.log:
        core.fold(view, event, seq=seq)
        now = status.workload_status(view.records.get(key), generation=1).get("unhealthyNodes")
        if now != shown:
            changes.append((type(event).__name__, now))
            shown = now
    return changes


def test_a_failed_node_is_listed_until_its_replacement() -> None:
    changes = _listed("node-not-ready-after-admission-is-replaced.yaml", "default/wl1")
    assert changes == [("NodeObserved", [{"name": "x3"}]), ("TopologyAssigned", None)]


def test_an_eviction_for_a_node_with_no_replacement_clears_it() -> None:
    changes = _listed("node-not-ready-no-replacement-fail-fast-evicts.yaml", "default/foo")
    assert changes == [("NodeObserved", [{"name": "x0"}]), ("EvictionRequested", None)]


def test_without_fail_fast_the_node_stays_listed_while_no_replacement_fits() -> None:
    changes = _listed(
        "node-not-ready-no-replacement-fail-fast-evicts.yaml",
        "default/foo",
        gates={"TASFailedNodeReplacementFailFast": False},
    )
    assert changes == [("NodeObserved", [{"name": "x0"}])]


def _after_failure(owner: models.OwnerReference) -> dict[str, Any]:
    """wl1 of the replacement scenario admitted on x3 and x1, owned by ``owner``; then x3 NotReady folded (the
    placer's decision not yet): its written status."""
    doc = yaml.safe_load((SCENARIOS / "node-not-ready-after-admission-is-replaced.yaml").read_text())
    failure = doc.pop("events")[0]["apply"]
    del doc["expect"]
    run = core_engine.run_scenario(parse_scenario(yaml.safe_dump(doc)))
    view = core.DispatchState()
    for seq, event in run.log:
        core.fold(view, event, seq=seq)
    wl = view.cluster.workloads["default/wl1"]
    wl.workload = msgspec.structs.replace(wl.workload, owner=owner)
    core.fold(view, types.NodeObserved(node=manifests.parse_node(failure)), seq=len(run.log) + 1)
    return status.workload_status(view.records["default/wl1"], generation=1)


def test_a_workload_of_a_single_pod_lists_none() -> None:
    """SkipReassignmentForPodOwnedWorkloads: Kueue's second pass admits it again with its assignment unchanged,
    which clears the list at once; a Job's is listed until replaced."""
    pod = models.OwnerReference(api_version="v1", kind="Pod", name="p", uid="u")
    job = models.OwnerReference(api_version="batch/v1", kind="Job", name="j", uid="u")
    assert "unhealthyNodes" not in _after_failure(pod)
    assert _after_failure(job)["unhealthyNodes"] == [{"name": "x3"}]


def test_the_node_healthy_again_leaves_the_list() -> None:
    """Kueue's node controller removes a node that is healthy again (node_controller.go removeUnhealthyNodes);
    FailFast off, so nothing else cleared it before."""
    doc = yaml.safe_load((SCENARIOS / "node-not-ready-no-replacement-fail-fast-evicts.yaml").read_text())
    del doc["expect"]
    gates = {"TASFailedNodeReplacementFailFast": False}
    doc["objects"].insert(
        0, {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}
    )
    healthy = next(o for o in doc["objects"] if o["kind"] == "Node" and o["metadata"]["name"] == "x0")
    run = core_engine.run_scenario(parse_scenario(yaml.safe_dump(doc)))
    view = core.DispatchState()
    for seq, event in run.log:
        core.fold(view, event, seq=seq)
    assert status.workload_status(view.records["default/foo"], generation=1)["unhealthyNodes"] == [{"name": "x0"}]
    view.take_dirty_workloads()
    core.fold(view, types.NodeObserved(node=manifests.parse_node(healthy)), seq=len(run.log) + 1)
    assert "unhealthyNodes" not in status.workload_status(view.records["default/foo"], generation=1)
    assert "default/foo" in view.take_dirty_workloads()  # written again
