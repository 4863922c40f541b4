"""Admitter logic 29, with 28 kept for replay.

A pod set asking for TAS whose ClusterQueue has no TAS flavor at all cannot be placed: Kueue refuses it
with ErrNoTASCacheInformation, "workload requires Topology, but there is no TAS cache information"
(tas_flavorassigner.go podSetTopologyRequest). A grouped leader requesting nothing gets there when its
group's flavors are not TAS ones (flavorassigner_test.go 'leader in group where peer resolves to non-TAS
flavor is rejected'). Logic 29 leaves the workload pending; 28 admitted it, the leader without a
topology assignment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter
from tests.scenario_states import before_first_record

NON_TAS_PEER = Path(__file__).parents[1] / "scenarios/tas/group-leader-with-peer-on-non-tas-flavor-stays-pending.yaml"
WL = "default/lws"
WHY = "failed to assign flavors to pod set leader: workload requires Topology, but there is no TAS cache information"


def _admitted(outputs: list[types.Output]) -> bool:
    return any(isinstance(o, types.WorkloadAdmitted) and o.workload.key == WL for o in outputs)


def _pending_message(outputs: list[types.Output]) -> str:
    pending = [o for o in outputs if isinstance(o, types.WorkloadInadmissible) and o.workload.key == WL]
    assert len(pending) == 1
    return pending[0].message


def test_admitter_29_leaves_the_leader_pending_and_28_admitted_it() -> None:
    state, now_ms, partition = before_first_record(NON_TAS_PEER, admitter.ROLE)
    now = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert not _admitted(now) and _pending_message(now) == WHY
    assert _admitted(admitter.decide_as(28)(state, now_ms=now_ms, partition=partition))
    assert admitter.LOGIC_VERSION >= 29 and 28 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_log_recorded_by_admitter_28_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 28)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(NON_TAS_PEER))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    assert {r.logic_version for r in records} == {28}
    assert _admitted([e for _, e in run.log if isinstance(e, types.WorkloadAdmitted)])
    assert check_log(run.messages, deciders.BY_ROLE).mismatches == []
