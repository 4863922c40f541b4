"""Admitter logic 40, with 39 kept for replay: the manager admits once the worker placed every delayed pod set.

Kueue's MultiKueue workload controller marks Ready only the delayed topology requests of the pod sets whose
assignment in the admitting worker's copy has a ``topologyAssignment`` (multikueue/workload.go
updateDelayedTopologyRequest, needsDelayedTopologyUpdate); a pod set left ``Pending`` keeps the workload from
admission (workload.go HasTopologyAssignmentsPending), Admitted=False ``PendingDelayedTopologyRequests``
(admissionchecks.go SyncAdmittedCondition). Logic 35 to 39 marked every delayed request Ready with the check.
The scenario tests/scenarios/multikueue/tas-worker-placing-one-of-two-pod-sets-leaves-the-workload-unadmitted.yaml
checks the outcome; here the status the dispatcher writes, logic 39's outcome and replay of both logs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import CoreRun, run_scenario
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.scheduling import multikueue
from kueue_es.services.admitter import core as admitter
from kueue_es.services.dispatcher import core as dispatch
from kueue_es.services.dispatcher import status

CASE = (
    Path(__file__).parents[1]
    / "scenarios"
    / "multikueue"
    / "tas-worker-placing-one-of-two-pod-sets-leaves-the-workload-unadmitted.yaml"
)
KEY = "default/w1"


def _run() -> CoreRun:
    return run_scenario(parse_scenario(CASE.read_text(), path=str(CASE)))


def _written(run: CoreRun) -> dict[str, object]:
    """The Workload status the dispatcher writes for w1 after the run's log."""
    view = dispatch.DispatchState()
    for seq, event in run.log:
        dispatch.fold(view, event, seq=seq)
    return status.workload_status(view.records[KEY], generation=1)


def test_a_pod_set_the_worker_did_not_place_keeps_the_workload_unadmitted() -> None:
    run = _run()
    wl = run.state.workloads[KEY]
    assert wl.reservation is not None and not wl.admitted
    assert wl.checks["mk"].state == "Ready"
    assert not [e for _, e in run.log if isinstance(e, types.WorkloadAdmitted)]
    written = _written(run)
    requests = {a["name"]: a["delayedTopologyRequest"] for a in written["admission"]["podSetAssignments"]}
    assert requests == {"launcher": "Pending", "workers": "Ready"}
    [admitted] = [c for c in written["conditions"] if c["type"] == "Admitted"]
    assert (admitted["status"], admitted["reason"], admitted["message"]) == (
        "False",
        "PendingDelayedTopologyRequests",
        "There are pending delayed topology requests",
    )
    assert written["clusterName"] == "worker-b"
    why = multikueue.explain(run.state, wl, now_ms=0)  # its worker connected: no workerLostTimeout is read
    assert why is not None and why.waiting == (
        'waiting for "worker-b" to place the delayed topology of pod sets launcher (PendingDelayedTopologyRequests)'
    )
    assert check_log(run.messages, deciders.BY_ROLE).mismatches == []


def test_admitter_39_admitted_with_every_delayed_request_ready_and_replays_so(monkeypatch: pytest.MonkeyPatch) -> None:
    assert admitter.LOGIC_VERSION >= 40 and 39 in admitter.EARLIER_LOGIC_VERSIONS
    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 39)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = _run()
    [admitted] = [e for _, e in run.log if isinstance(e, types.WorkloadAdmitted)]
    assert isinstance(admitted.pod_set_assignments, list)
    assert [a.delayed_topology_request for a in admitted.pod_set_assignments] == ["Ready", "Ready"]
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    assert records and {r.logic_version for r in records} == {39}
    assert check_log(run.messages, deciders.BY_ROLE).mismatches == []
