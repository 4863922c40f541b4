"""Preemption gates (admitter logic 28, with 27 kept for replay).

Under the feature gate MultiKueueOrchestratedPreemption or ConcurrentAdmission, Kueue's scheduler lets no
workload preempt while one of its ``spec.preemptionGates`` is closed: one with no ``status.preemptionGates``
entry, or one whose entry says ``Closed`` (pkg/scheduler/scheduler.go processEntry, markPreemptionGated;
pkg/workload/workload.go HasClosedPreemptionGate). The entry waits, QuotaReserved=False reason
AdmissionGated, with BlockedOnPreemptionGates=True reason PreemptionGated; a workload that fits, or has
nothing to preempt, is not held back. Logic 27 and earlier preempted regardless.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import manifests, models, types
from kueue_es.events.manifests import ManifestError
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.scheduling import cycle
from kueue_es.services.admitter import core as admitter
from tests.scenario_states import before_first_record

SCENARIOS = Path(__file__).parents[1] / "scenarios" / "preemption"
BLOCKED = SCENARIOS / "preemption-gate-closed-blocks-preemption.yaml"
OPENED = SCENARIOS / "preemption-gate-opened-preempts.yaml"
PREEMPTOR, VICTIM = "eng-beta/preemptor", "eng-beta/low-priority"


def _workload(status: dict | None = None, gates: list[dict] | None = None) -> models.Workload:
    manifest: dict = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {
            "queueName": "main",
            "preemptionGates": [{"name": "a"}, {"name": "b"}] if gates is None else gates,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
        },
    }
    if status is not None:
        manifest["status"] = status
    obj = manifests.parse_object(manifest)
    assert isinstance(obj, models.Workload)
    return obj


def test_a_gate_without_status_is_closed_and_every_gate_must_be_open() -> None:
    assert _workload().has_closed_preemption_gate
    one_open = {"preemptionGates": [{"name": "a", "position": "Open"}, {"name": "b", "position": "Closed"}]}
    assert _workload(one_open).open_preemption_gates == ["a"]
    assert _workload(one_open).has_closed_preemption_gate
    both = {"preemptionGates": [{"name": "b", "position": "Open"}, {"name": "a", "position": "Open"}]}
    assert _workload(both).open_preemption_gates == ["a", "b"]
    assert not _workload(both).has_closed_preemption_gate
    assert not _workload(gates=[]).has_closed_preemption_gate


def test_a_workload_without_gates_encodes_as_before() -> None:
    """Both fields are left out when empty, so every earlier WorkloadObserved keeps its bytes."""
    from kueue_es.events import codec

    data = codec.encode(types.WorkloadObserved(workload=_workload(gates=[])))
    assert b"preemptionGates" not in data and b"openPreemptionGates" not in data


def test_bad_gates_are_refused_naming_the_field() -> None:
    with pytest.raises(ManifestError, match=r"spec\.preemptionGates\[1\]\.name"):
        _workload(gates=[{"name": "a"}, {"name": "a"}])
    with pytest.raises(ManifestError, match=r"status\.preemptionGates\[0\]\.position"):
        _workload({"preemptionGates": [{"name": "a", "position": "Ajar"}]})
    with pytest.raises(ManifestError, match=r"status\.preemptionGates\[0\]"):
        _workload({"preemptionGates": ["a"]})


def test_admitter_28_holds_the_gated_preemptor_back_and_27_preempts() -> None:
    state, now_ms, partition = before_first_record(BLOCKED, admitter.ROLE)
    outputs = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert not [o for o in outputs if isinstance(o, types.PreemptionRequired)]
    (held,) = [o for o in outputs if isinstance(o, types.WorkloadInadmissible) and o.workload.key == PREEMPTOR]
    assert (held.reason, held.message) == ("AdmissionGated", "Workload requires preemption, but it's gated")
    assert held.bookmark is None and not held.parked  # eng-beta is StrictFIFO
    earlier = admitter.decide_as(27)(state, now_ms=now_ms, partition=partition)
    (nominated,) = [o for o in earlier if isinstance(o, types.PreemptionRequired)]
    assert [t.workload.key for t in nominated.targets] == [VICTIM]
    assert admitter.LOGIC_VERSION >= 28 and 27 in admitter.EARLIER_LOGIC_VERSIONS


def test_without_the_feature_gates_a_closed_gate_holds_nothing_back() -> None:
    state, now_ms, partition = before_first_record(BLOCKED, admitter.ROLE)
    state.configuration = models.Configuration(metadata=models.ObjectMeta(name="config"))
    assert not cycle.preemption_gates_enforced(state.configuration)
    outputs = admitter.decide(state, now_ms=now_ms, partition=partition)
    assert [o.workload.key for o in outputs if isinstance(o, types.PreemptionRequired)] == [PREEMPTOR]


def test_the_dispatcher_writes_blocked_on_preemption_gates_and_resets_it_on_reservation() -> None:
    from kueue_es.services.dispatcher import core, status

    def conditions(view: core.DispatchState, key: str) -> dict[str, tuple[str, str, str]]:
        written = status.workload_status(view.records[key], generation=1)
        return {c["type"]: (c["status"], c["reason"], c["message"]) for c in written["conditions"]}

    run = run_scenario(load_scenario(OPENED))
    view = core.DispatchState()
    blocked_seen = False
    for message, decoded in zip(run.messages, run.events, strict=True):
        # a record, then what it stands for at its sequence (the decisions it carries, event schema 17)
        for event in types.with_carried(decoded):
            core.fold(view, event, seq=message.seq)
            if isinstance(event, types.WorkloadObserved) and event.workload.open_preemption_gates:
                got = conditions(view, "default/preemptor")
                assert got["BlockedOnPreemptionGates"] == (
                    "True",
                    "PreemptionGated",
                    "Workload requires preemption, but it's gated",
                )
                assert got["QuotaReserved"][:2] == ("False", "AdmissionGated")
                blocked_seen = True
    assert blocked_seen
    final = conditions(view, "default/preemptor")
    assert final["QuotaReserved"][0] == "True"
    assert final["BlockedOnPreemptionGates"] == (
        "False",
        "QuotaReserved",
        "Previously: Workload requires preemption, but it's gated",
    )


def test_a_log_recorded_by_admitter_27_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run logic 27 recorded (the gated preemptor preempts) re-checks decision by decision."""
    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 27)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(BLOCKED))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    assert {r.logic_version for r in records} == {27}
    assert [e.workload.key for _, e in run.log if isinstance(e, types.EvictionRequested)] == [VICTIM]
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.mismatches == []
