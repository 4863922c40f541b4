"""Preemptor logic 13, with 12 kept for replay.

When the preemptor searches overlapping targets again, it assigns flavors again to the workloads the
admitter left waiting for the batch's preemptions (DeferredFit) and takes the quota of each that fits
first. With the gate ConcurrentAdmission on, Kueue's flavor assigner skips every flavor a workload's
annotation kueue.x-k8s.io/workload-allowed-resource-flavors does not name (flavorassigner.go
findFlavorForPodSets), there as in the admitter (admitter logic 26). Preemptor logic 13 reads the
annotation; 12 did not, and took a waiting workload's quota on a flavor it may not use.

The batch of overlapping-targets-three-heads-all-preempted: wl-b (2 CPU, cq-b) waits for wl-v's
eviction; wl-c (2 CPU, cq-c), searched again with wl-v gone and wl-b's quota taken, must preempt wl-w
too. Here wl-b's annotation names only a flavor its ClusterQueue does not have, so it fits nowhere and
takes nothing: logic 13 lets wl-c wait in the 2 CPU left (DeferredFit) and evicts wl-v alone; logic 12
took wl-b's quota on the flavor ``default`` anyway and evicted wl-w as well.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from kueue_es import deciders
from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.scheduling import flavors
from kueue_es.services.preemptor import core as preemptor
from tests.scenario_states import before_first_record

THREE_HEADS = Path(__file__).parents[1] / "scenarios/preemption/overlapping-targets-three-heads-all-preempted.yaml"
WAITING = "default/wl-b"


def _evicted(outputs: list[types.Decision]) -> list[str]:
    return sorted(o.workload.key for o in outputs if isinstance(o, types.EvictionRequested))


def _deferred(outputs: list[types.Decision]) -> list[str]:
    return sorted(
        o.workload.key
        for o in outputs
        if isinstance(o, types.PreemptionIssued) and o.message == preemptor.DEFERRED_MESSAGE
    )


def _allowing_only(state: ClusterState, flavor: str) -> None:
    """Gate ConcurrentAdmission on, and the waiting workload's annotation naming only ``flavor``."""
    config = state.configuration
    gates = {**config.feature_gates, "ConcurrentAdmission": True}
    state.configuration = msgspec.structs.replace(config, feature_gates=gates)
    held = state.workloads[WAITING]
    meta = held.workload.metadata
    annotations = {**(meta.annotations or {}), flavors.ALLOWED_FLAVORS_ANNOTATION: flavor}
    held.workload = msgspec.structs.replace(
        held.workload, metadata=msgspec.structs.replace(meta, annotations=annotations)
    )


def test_preemptor_13_reads_the_waiting_workloads_allowed_flavors_and_12_does_not() -> None:
    state, now_ms, partition = before_first_record(THREE_HEADS, preemptor.ROLE)
    assert state.deferred == {WAITING: "cq-b"}
    _allowing_only(state, "elsewhere")
    now = preemptor.decide(state, now_ms=now_ms, partition=partition)
    assert _evicted(now) == ["default/wl-v"]
    assert _deferred(now) == ["default/wl-c"]
    earlier = preemptor.decide_as(12)(state, now_ms=now_ms, partition=partition)
    assert _evicted(earlier) == ["default/wl-v", "default/wl-w"]
    assert preemptor.LOGIC_VERSION >= 13 and 12 in preemptor.EARLIER_LOGIC_VERSIONS


def test_an_allowed_flavor_it_fits_on_changes_nothing() -> None:
    state, now_ms, partition = before_first_record(THREE_HEADS, preemptor.ROLE)
    _allowing_only(state, "default")
    assert _evicted(preemptor.decide(state, now_ms=now_ms, partition=partition)) == ["default/wl-v", "default/wl-w"]


def test_a_log_recorded_by_preemptor_12_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    old = {**deciders.BY_ROLE, preemptor.ROLE: deciders.EARLIER[(preemptor.ROLE, 12)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(THREE_HEADS))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == preemptor.ROLE]
    assert {r.logic_version for r in records} == {12}
    assert _evicted([e for _, e in run.log if isinstance(e, types.EvictionRequested)]) == [
        "default/wl-v",
        "default/wl-w",
    ]
    assert check_log(run.messages, deciders.BY_ROLE).mismatches == []
