"""Admitter logic 42, with 41 kept for replay: a reservation not yet admitted is given back when its queue goes.

Kueue's workload controller unsets the quota reservation of a workload that holds quota but is not admitted
(its admission checks not all Ready) when its LocalQueue is terminating or missing, or its ClusterQueue is
(pkg/controller/core/workload_controller.go reconcileOnLocalQueueActiveState, reconcileOnClusterQueueActiveState),
so a deleted ClusterQueue holding only such reservations loses its resource-in-use finalizer at once
(test/integration/singlecluster/controller/core/clusterqueue_controller_test.go "Should delete the cluster
without waiting for reserving only workloads to finish"). Logic 41 and earlier kept the reservation. The
scenarios tests/scenarios/lifecycle/deleted-*-gives-back-unadmitted-reservation.yaml check the outcome; here
logic 41's outcome and replay of both logs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import CoreRun, run_scenario
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.services.admitter import core as admitter

LIFECYCLE = Path(__file__).parents[1] / "scenarios" / "lifecycle"
CASES = {
    "ClusterQueueTerminating": LIFECYCLE / "deleted-clusterqueue-gives-back-unadmitted-reservation.yaml",
    "LocalQueueMissing": LIFECYCLE / "deleted-localqueue-gives-back-unadmitted-reservation.yaml",
}


def _run(path: Path) -> CoreRun:
    return run_scenario(parse_scenario(path.read_text(), path=str(path)))


@pytest.mark.parametrize("reason", sorted(CASES))
def test_the_reservation_is_given_back_and_the_log_replays(reason: str) -> None:
    run = _run(CASES[reason])
    released = [e for _, e in run.log if isinstance(e, types.QuotaReleased)]
    assert [(e.workload.key, e.reason) for e in released] == [("default/w1", reason)]
    assert run.state.workloads["default/w1"].reservation is None
    assert check_log(run.messages, deciders.BY_ROLE).mismatches == []


@pytest.mark.parametrize("reason", sorted(CASES))
def test_admitter_41_kept_the_reservation_and_replays_so(reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert admitter.LOGIC_VERSION >= 42 and 41 in admitter.EARLIER_LOGIC_VERSIONS
    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 41)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = _run(CASES[reason])
    assert not [e for _, e in run.log if isinstance(e, types.QuotaReleased)]
    assert run.state.workloads["default/w1"].reservation is not None
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    assert records and {r.logic_version for r in records} == {41}
    assert check_log(run.messages, deciders.BY_ROLE).mismatches == []
