"""Admitter logic 25, preemptor logic 11 and TAS placer logic 9: the alpha gate
TASRespectNodeAffinityPreferred (SEMANTICS-ADVANCED A.3.4), with 24, 10 and 8 kept for replay.

Under the gate Kueue orders TAS domains by the pod set's preferred node affinity scores before their
capacity (pkg/cache/scheduler/tas_flavor_snapshot.go). The earlier logic versions ignored the gate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.events.tas import decode, domain_id
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter
from kueue_es.services.preemptor import core as preemptor
from kueue_es.services.tas_placer import core as placer
from tests.scenario_states import before_first_record

PREFERRED = Path(__file__).parents[1] / "scenarios/tas/preferred-affinity-picks-the-preferred-rack.yaml"


def _placed(outputs: list[types.Output]) -> dict[str, dict[str, int]]:
    """Pods per node of w1's pod set main, from the TopologyAssigned among ``outputs``."""
    [assigned] = [o for o in outputs if isinstance(o, types.TopologyAssigned) and o.workload.key == "default/w1"]
    return {domain_id(d.values): d.count for d in decode(assigned.assignments["main"]).domains}


def test_admitter_25_honours_the_gate_and_24_does_not() -> None:
    state, now_ms, partition = before_first_record(PREFERRED, admitter.ROLE)
    new = admitter.decide(state, now_ms=now_ms, partition=partition)
    old = admitter.decide_as(24)(state, now_ms=now_ms, partition=partition)
    assert _placed(new) == {"node-preferred": 1}
    assert _placed(old) == {"node-other": 1}
    assert admitter.LOGIC_VERSION >= 25 and 24 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_log_recorded_by_admitter_24_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Logic 24 placed w1 on node-other (the gate ignored); replay re-runs it as 24 decided."""
    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 24)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(PREFERRED))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    assert records and {r.logic_version for r in records} == {24}
    assert _placed([e for _, e in run.log]) == {"node-other": 1}
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []


def test_the_earlier_versions_are_registered_for_replay() -> None:
    assert (preemptor.ROLE, 10) in deciders.EARLIER and preemptor.LOGIC_VERSION >= 11
    assert (placer.ROLE, 8) in deciders.EARLIER and placer.LOGIC_VERSION >= 9
