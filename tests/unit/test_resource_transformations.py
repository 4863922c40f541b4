"""Resource transformations as Kueue applies them (SEMANTICS §10.4; pkg/workload/workload.go
applyResourceTransformations, its cases in workload_test.go TestNewInfo).

Kueue #12953 multiplies exact quantities, so a milli factor or a milli multiplier is not rounded first;
Kueue #14032 keeps what the transformations generate apart from what the pod set requests, so a negative
total of one output counts as zero and never offsets a request under the same name. Admitter logic 37 and
preemptor 17 and earlier applied them in whole amounts (kept for replay,
:func:`queues.with_legacy_transformations`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgspec
import pytest

from kueue_es import deciders
from kueue_es.events import models, types
from kueue_es.projections.cluster import ClusterState
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.scheduling import queues
from kueue_es.services.admitter import core as admitter
from kueue_es.services.preemptor import core as preemptor
from tests.scenario_states import before_first_record


def _rule(input: str, outputs: dict[str, str], *, replace: bool = False, multiply_by: str | None = None):
    return models.ResourceTransformation(
        input=input, strategy="Replace" if replace else "Retain", outputs=outputs, multiply_by=multiply_by
    )


_ALLOWANCE = [
    _rule(
        "nvidia.com/gpumem", {"quota.example.com/gpu-memory-overage": "1"}, replace=True, multiply_by="nvidia.com/gpu"
    ),
    _rule("nvidia.com/gpu", {"quota.example.com/gpu-memory-overage": "-1024"}),
]

CASES = {
    # transformMilliValues: 100m x 3000 is 300; 100M x 3m is 300k
    "milli values": (
        {"cpu": 100, "memory": 100_000_000},
        [
            _rule("cpu", {"example.com/cpu-credits": "3000"}, replace=True),
            _rule("memory", {"example.com/memory-credits": "3m"}, replace=True),
        ],
        {"example.com/cpu-credits": 300, "example.com/memory-credits": 300_000},
    ),
    "allowance above it": (
        {"nvidia.com/gpumem": 2048, "nvidia.com/gpu": 2},
        _ALLOWANCE,
        {"quota.example.com/gpu-memory-overage": 2048, "nvidia.com/gpu": 2},
    ),
    "allowance under it": (
        {"nvidia.com/gpumem": 512, "nvidia.com/gpu": 2},
        _ALLOWANCE,
        {"quota.example.com/gpu-memory-overage": 0, "nvidia.com/gpu": 2},
    ),
    "allowance does not reach a direct request": (
        {"example.com/gpu": 8, "example.com/credit": 3},
        [_rule("example.com/credit", {"example.com/gpu": "-1"}, replace=True)],
        {"example.com/gpu": 8},
    ),
    "output sharing a name with a request is added": (
        {"example.com/gpu": 1, "example.com/credit": 1},
        [_rule("example.com/credit", {"example.com/gpu": "1"}, replace=True)],
        {"example.com/gpu": 2},
    ),
    "output sharing a name with its retained input is added": (
        {"example.com/gpu": 1, "example.com/node": 2},
        [_rule("example.com/gpu", {"example.com/gpu": "1"}, multiply_by="example.com/node")],
        {"example.com/gpu": 3, "example.com/node": 2},
    ),
    # transformRetainWithMultiplyByUnderOne: the multiplier is 500m CPU, a half
    "multiplied by a CPU request under one": (
        {"example.com/gpumem": 1024, "cpu": 500},
        [_rule("example.com/gpumem", {"example.com/gpumem-quota": "1"}, multiply_by="cpu")],
        {"example.com/gpumem": 1024, "example.com/gpumem-quota": 512, "cpu": 500},
    ),
    # a fraction of a unit is rounded up, as Quantity.Value() does
    "a fractional product rounds up": (
        {"cpu": 1500},
        [_rule("cpu", {"example.com/credits": "1"}, replace=True)],
        {"example.com/credits": 2},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_transformations_as_kueue_applies_them(name: str) -> None:
    requests, rules, want = CASES[name]
    assert queues._transform(requests, rules) == want


def _config(rules: list[models.ResourceTransformation]) -> models.Configuration:
    return models.Configuration(resources=models.ResourcesConfig(transformations=rules))


def test_legacy_view_applies_them_as_logic_37_did() -> None:
    rules = CASES["milli values"][1]
    state = dataclasses.replace(ClusterState(), configuration=_config(rules))
    view = queues.with_legacy_transformations(state)
    assert view is not state
    assert view.configuration.resources is not None
    legacy = view.configuration.resources.transformations
    assert all(isinstance(rule, queues.LegacyResourceTransformation) for rule in legacy)
    # the output factor 3m was rounded up to one unit of memory credit
    assert queues._transform({"cpu": 100, "memory": 100_000_000}, legacy) == {
        "example.com/cpu-credits": 300,
        "example.com/memory-credits": 100_000_000,
    }
    # the view is kept while the Configuration is, so the request memos stay valid
    assert queues.with_legacy_transformations(state).configuration is view.configuration


def test_legacy_view_of_a_state_without_transformations_is_the_state() -> None:
    state = ClusterState()
    assert queues.with_legacy_transformations(state) is state


MILLI = Path(__file__).parents[1] / "scenarios/config/resource-transformation-milli-factors.yaml"


def _reserved(outputs: list[types.Output]) -> list[str]:
    return sorted({o.workload.key for o in outputs if isinstance(o, types.QuotaReserved | types.WorkloadAdmitted)})


def test_admitter_38_transforms_exactly_and_37_in_whole_amounts() -> None:
    state, now_ms, partition = before_first_record(MILLI, admitter.ROLE)
    assert _reserved(admitter.decide(state, now_ms=now_ms, partition=partition)) == ["default/w1"]
    # 37 counted 100M x 3m as 100M memory credits: w1, the head, does not fit (the probes come later)
    assert _reserved(admitter.decide_as(37)(state, now_ms=now_ms, partition=partition)) == []
    assert state.configuration.resources is not None
    assert not any(  # the fold's Configuration is left alone
        isinstance(rule, queues.LegacyResourceTransformation) for rule in state.configuration.resources.transformations
    )
    assert admitter.LOGIC_VERSION >= 38 and 37 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_log_recorded_by_admitter_37_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 37)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(MILLI))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    assert records and {r.logic_version for r in records} == {37}
    assert "default/probe-cpu" in {e.workload.key for _, e in run.log if isinstance(e, types.WorkloadAdmitted)}
    assert check_log(run.messages, deciders.BY_ROLE).mismatches == []


DEFERRED = (
    Path(__file__).parents[1] / "scenarios/preemption/overlapping-targets-deferred-transformed-request-rounded-up.yaml"
)


def _evicted(decisions: list[types.Decision]) -> list[str]:
    return sorted(d.workload.key for d in decisions if isinstance(d, types.EvictionRequested))


def test_preemptor_18_sets_aside_the_rounded_up_request_and_17_the_whole_amount() -> None:
    """The preemptor counts requests itself for the workloads left waiting for preemptions (DeferredFit)
    when it searches overlapping targets again: wl-b's 1500m CPU is 2 credits, not 1."""
    state, now_ms, partition = before_first_record(DEFERRED, preemptor.ROLE)
    assert state.deferred == {"default/wl-b": "cq-b"}
    assert _evicted(preemptor.decide(state, now_ms=now_ms, partition=partition)) == ["default/wl-v", "default/wl-w"]
    earlier = preemptor.decide_as(17)(state, now_ms=now_ms, partition=partition)
    assert _evicted(earlier) == ["default/wl-v"]
    assert preemptor.LOGIC_VERSION >= 18 and 17 in preemptor.EARLIER_LOGIC_VERSIONS


def test_a_log_recorded_by_preemptor_17_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    old = {
        **deciders.BY_ROLE,
        admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 37)],
        preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, 17)],
    }
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(DEFERRED))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == preemptor.ROLE]
    assert records and {r.logic_version for r in records} == {17}
    assert check_log(run.messages, deciders.BY_ROLE).mismatches == []


def test_a_transformed_request_counts_its_outputs_while_it_waits() -> None:
    """workload_controller_test.go 'The transformed resources should be used as request values': before one
    finishes, two (2 kueue.x-k8s.io/cpu, so 4 CPU) waits beside one's 2 CPU in a 5-CPU ClusterQueue; the
    scenario's finish then admits it."""
    path = Path(__file__).parents[1] / "scenarios" / "config" / "resource-transformation-pseudo-cpu-counts-as-cpu.yaml"
    scenario = load_scenario(path)
    run = run_scenario(msgspec.structs.replace(scenario, events=()))
    one, two = run.state.workloads["default/one"], run.state.workloads["default/two"]
    assert one.reservation is not None and two.reservation is None
    assert one.reservation.pod_set_assignments[0].resource_usage == {"cpu": 2000}
    assert two.pending_reason == "WaitingForQuota"
