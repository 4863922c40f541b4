"""Admitter logic 35, with 34 kept for replay: a MultiKueue ClusterQueue leaves topology to the worker.

Kueue delays the topology request of every TAS pod set in a ClusterQueue with a MultiKueue admission
check, at every pass (tas_flavorassigner.go podSetTopologyRequest: ``delayedTopologyRequest: Pending``,
nothing placed on the manager); the worker that admits the copy places it, and the manager marks the
delayed request Ready with the check (multikueue/workload.go updateDelayedTopologyRequest). Logic 34
placed the pod sets on the manager's own nodes, and with none (Kueue's sample manager,
kueue-examples/multikueue/tas/manager-setup.yaml) left the workload pending for ever. The scenarios
tests/scenarios/multikueue/tas-*.yaml check the new outcome; here both versions on a manager that has a
node, and replay of a log logic 34 recorded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import CoreRun, run_scenario
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.services.admitter import core as admitter

CASE = (
    Path(__file__).parents[1]
    / "scenarios"
    / "multikueue"
    / "tas-topology-left-to-the-worker-admits-without-manager-nodes.yaml"
)
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "m1", "labels": {"node-group": "tas", "kubernetes.io/hostname": "m1"}},
    "status": {"allocatable": {"cpu": "8", "pods": "20"}, "conditions": [{"type": "Ready", "status": "True"}]},
}


def _run() -> CoreRun:
    """The scenario with one node on the manager that could hold w1's two pods."""
    case = yaml.safe_load(CASE.read_text())
    case["objects"].append(NODE)
    case.pop("expect")
    return run_scenario(parse_scenario(yaml.safe_dump(case), path=str(CASE)))


def _placed_on_manager(run: CoreRun) -> list[types.TopologyAssigned]:
    return [e for _, e in run.log if isinstance(e, types.TopologyAssigned)]


def _reservation(run: CoreRun) -> types.QuotaReserved:
    reserved = [e for _, e in run.log if isinstance(e, types.QuotaReserved | types.WorkloadAdmitted)]
    first = reserved[0]
    return first if isinstance(first, types.QuotaReserved) else types.reservation_of(first)


def test_admitter_35_delays_the_topology_and_34_placed_it_on_the_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run()
    assert _placed_on_manager(run) == []
    assert [a.delayed_topology_request for a in _reservation(run).pod_set_assignments] == ["Pending"]
    assert run.state.workloads["default/w1"].admitted
    assert admitter.LOGIC_VERSION >= 35 and 34 in admitter.EARLIER_LOGIC_VERSIONS

    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 34)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        old_run = _run()
    [placed] = _placed_on_manager(old_run)
    assert placed.workload.key == "default/w1" and set(placed.assignments) == {"main"}
    assert [a.delayed_topology_request for a in _reservation(old_run).pod_set_assignments] == [""]
    records = [e for _, e in old_run.log if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    assert records and {r.logic_version for r in records} == {34}
    assert check_log(old_run.messages, deciders.BY_ROLE).mismatches == []
