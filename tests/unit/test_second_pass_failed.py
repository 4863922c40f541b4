"""Admitter logic 23: a failed second pass is recorded (SecondPassFailed), with 22 kept for replay.

Kueue's scheduler requeues a workload whose second pass (its delayed topology request, every check Ready)
found no placement for another second pass and records a Warning Event ``SecondPassFailed`` with the
flavor assigner's message, changing nothing on the Workload (pkg/scheduler/scheduler.go requeueAndUpdate).
Logic 22 wrote nothing; 23 writes a WorkloadInadmissible with that reason when the message changes.
"""

from __future__ import annotations

import copy
from pathlib import Path

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.admitter import core as admitter
from kueue_es.services.dispatcher import core, kube_events, status

SCENARIO = Path(__file__).parents[1] / "scenarios/tas/provisioning-check-ready-second-pass-no-fit-stays-reserved.yaml"
FOO = "default/foo"
MESSAGE = (
    'couldn\'t assign flavors to pod set one: topology "default" allows to fit only 1 out of 2 pod(s). '
    "Total nodes: 2; excluded: nodeSelector: 1"
)


def _failed(log: list[tuple[int, types.Event]]) -> list[types.WorkloadInadmissible]:
    return [e for _, e in log if isinstance(e, types.WorkloadInadmissible) and e.reason == "SecondPassFailed"]


def test_a_failed_second_pass_is_recorded_once_per_message() -> None:
    run = run_scenario(load_scenario(SCENARIO))
    failed = _failed(run.log)
    assert [(e.workload.key, e.message) for e in failed] == [(FOO, MESSAGE)]  # not again on the next cycles
    state = ClusterState()
    for seq, event in run.log:
        apply(state, event, seq=seq)
    foo = state.workloads[FOO]
    assert foo.reservation is not None and not foo.admitted  # still reserved, waiting for its topology
    assert (foo.pending_reason, foo.pending_message) == ("SecondPassFailed", MESSAGE)


def test_admitter_22_writes_nothing_for_a_failed_second_pass() -> None:
    run = run_scenario(load_scenario(SCENARIO))
    at = next(i for i, (_, e) in enumerate(run.log) if isinstance(e, types.WorkloadInadmissible))
    record = next(e for _, e in reversed(run.log[:at]) if isinstance(e, types.DecisionRecord))
    state = ClusterState()
    for seq, event in run.log[: at - 1]:  # before the record and its output
        apply(state, event, seq=seq)
    now = admitter.decide(state, now_ms=record.now_ms, partition=record.partition)
    assert [(type(o).__name__, getattr(o, "reason", "")) for o in now] == [("WorkloadInadmissible", "SecondPassFailed")]
    assert admitter.decide_as(22)(state, now_ms=record.now_ms, partition=record.partition) == []
    assert admitter.LOGIC_VERSION >= 23 and 22 in admitter.EARLIER_LOGIC_VERSIONS


def test_the_warning_event_and_no_condition_change() -> None:
    run = run_scenario(load_scenario(SCENARIO))
    view = core.DispatchState()
    before: dict[str, object] = {}
    events: list[kube_events.KubeEvent] = []
    for seq, event in run.log:
        if isinstance(event, types.WorkloadInadmissible):
            before = copy.deepcopy(status.workload_status(view.records.get(FOO), generation=1))
        core.fold(view, event, seq=seq)
        if isinstance(event, types.WorkloadInadmissible):
            assert status.workload_status(view.records.get(FOO), generation=1) == before  # Kueue changes nothing
            events += kube_events.for_decision(view.cluster, event, view.records.get(FOO))
    assert [(e.workload.name, e.type, e.reason, e.message) for e in events] == [
        ("foo", "Warning", "SecondPassFailed", MESSAGE)
    ]


def test_the_run_replays() -> None:
    run = run_scenario(load_scenario(SCENARIO))
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
