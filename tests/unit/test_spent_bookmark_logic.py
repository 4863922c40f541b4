"""Admitter logic 34, with 33 kept for replay: a spent flavor-scan bookmark that expires is kept.

A NoFit head whose bookmark leaves nothing pending (the scan-exhausted marker, ``tried`` empty) starts
its next scan at the first flavor, and so does a head with no bookmark. Logic 33 dropped the marker
once it expired (two admitter cycles on, with the ClusterQueue's generation moved) and recorded that as
a pending outcome: one output a cycle or two after the run had otherwise settled, which
tests/properties/test_admission_properties.py ``test_preemption_never_loops`` found (the shrunk case is
tests/fixtures/properties/spent-bookmark-generated.yaml). Logic 34 keeps the marker, so a settled run stays settled.
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

CASE = Path(__file__).parents[1] / "fixtures" / "properties" / "spent-bookmark-generated.yaml"


def _run() -> CoreRun:
    return run_scenario(parse_scenario(yaml.safe_dump(yaml.safe_load(CASE.read_text())), path=str(CASE)))


def _next_cycle_ms(run: CoreRun) -> int:
    return max(e.now_ms for _, e in run.log if isinstance(e, types.DecisionRecord)) + 1000


def test_admitter_34_stays_settled_and_33_records_the_expired_bookmark() -> None:
    run = _run()
    now_ms = _next_cycle_ms(run)
    assert admitter.decide(run.state, now_ms=now_ms) == []
    [outcome] = admitter.decide_as(33)(run.state, now_ms=now_ms)
    assert isinstance(outcome, types.PendingOutcome) and outcome.workload.key == "default/w05"
    assert outcome.bookmark is None and run.state.workloads["default/w05"].bookmark is not None
    assert admitter.LOGIC_VERSION >= 34 and 33 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_log_recorded_by_admitter_33_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 33)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = _run()
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    assert records and {r.logic_version for r in records} == {33}
    assert check_log(run.messages, deciders.BY_ROLE).mismatches == []
