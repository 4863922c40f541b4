"""Admitter logic 36 and preemptor logic 16, with 35 and 15 kept for replay: the slice-replacement annotation alone.

Kueue's scheduler takes a Workload for a replacement slice when its
``kueue.x-k8s.io/workload-slice-replacement-for`` annotation names one and the gate
ElasticJobsViaWorkloadSlices is on (workloadslicing.go ReplacementForKey, ReplacedWorkloadSlice,
FindReplacedSliceTarget), whether or not it carries ``kueue.x-k8s.io/elastic-job: "true"`` too.
Admitter 35 and preemptor 15 asked for both, so a Workload made by hand with the annotation alone was
scheduled as a workload of its own: it asked its full request and the slice it names was a victim
like any other. The scenario is tests/scenarios/elastic/replacement-annotation-alone-preempts-not-the-slice.yaml.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import slices, types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import CoreRun, run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter
from kueue_es.services.preemptor import core as preemptor

SCENARIOS = Path(__file__).parents[1] / "scenarios" / "elastic"
PREEMPTS = SCENARIOS / "replacement-annotation-alone-preempts-not-the-slice.yaml"
REPLACES = SCENARIOS / "replacement-annotation-alone-replaces-the-slice.yaml"


def _run_as(monkeypatch: pytest.MonkeyPatch, path: Path, *, admit: int, preempt: int) -> CoreRun:
    roles = {
        **deciders.BY_ROLE,
        admitter.ROLE: deciders.EARLIER[(admitter.ROLE, admit)],
        preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, preempt)],
    }
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", roles)
        return run_scenario(load_scenario(path))


def _admitted(run: CoreRun, key: str) -> bool:
    wl = run.state.workloads[key]
    return wl.reservation is not None and wl.finished is None


def test_the_annotation_alone_makes_a_replacement_slice() -> None:
    run = run_scenario(load_scenario(REPLACES))
    assert _admitted(run, "default/job-a-2") and run.state.workloads["default/job-a-2"].reservation is not None
    old = run.state.workloads["default/job-a-1"]
    assert old.finished is not None and old.finished.reason == slices.REPLACED_REASON
    assert "default/job-a-2" in old.finished.message  # the fold found the replacement without elastic-job


def test_the_replaced_slice_is_no_victim() -> None:
    run = run_scenario(load_scenario(PREEMPTS))
    assert _admitted(run, "default/high-2")
    assert run.state.workloads["default/high"].finished is not None
    issued = [e for _, e in run.log if isinstance(e, types.PreemptionIssued) and e.targets]
    assert [t.workload.key for e in issued for t in e.targets] == ["default/low"]


def test_logs_recorded_by_admitter_35_and_preemptor_15_replay_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    for path, waits in ((REPLACES, "default/job-a-2"), (PREEMPTS, "default/high-2")):
        run = _run_as(monkeypatch, path, admit=35, preempt=15)
        assert not _admitted(run, waits)  # scheduled as a workload of its own, it does not fit
        versions = {(e.role, e.logic_version) for _, e in run.log if isinstance(e, types.DecisionRecord)}
        assert (admitter.ROLE, 35) in versions
        assert check_log(run.messages, deciders.BY_ROLE).mismatches == []
    assert admitter.LOGIC_VERSION >= 36 and 35 in admitter.EARLIER_LOGIC_VERSIONS
    assert preemptor.LOGIC_VERSION >= 16 and 15 in preemptor.EARLIER_LOGIC_VERSIONS
