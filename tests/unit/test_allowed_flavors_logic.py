"""Admitter logic 26, with 25 kept for replay.

With the gate ConcurrentAdmission on, Kueue's flavor assigner skips every flavor a workload's annotation
kueue.x-k8s.io/workload-allowed-resource-flavors does not name (flavorassigner.go findFlavorForPodSets,
pkg/workload/concurrentadmission IsFlavorAllowedForVariant). Logic 26 reads the annotation; logic 25 did not
and admitted the workload on the first flavor that fit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import deciders
from kueue_es.events import models, types
from kueue_es.replay import check_log
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.scheduling import flavors
from kueue_es.services.admitter import core as admitter
from tests.scenario_states import before_first_record

ONLY_F2 = Path(__file__).parents[1] / "scenarios/flavors/allowed-flavors-only-second-flavor.yaml"
WL = "ns/wl"


def _cpu_flavor(outputs: list[types.Output]) -> str:
    admitted = next(o for o in outputs if isinstance(o, types.WorkloadAdmitted) and o.workload.key == WL)
    assert admitted.pod_set_assignments
    return admitted.pod_set_assignments[0].flavors["cpu"]


def test_admitter_26_takes_the_allowed_flavor_and_25_the_first_that_fits() -> None:
    state, now_ms, partition = before_first_record(ONLY_F2, admitter.ROLE)
    assert _cpu_flavor(admitter.decide(state, now_ms=now_ms, partition=partition)) == "f2"
    assert _cpu_flavor(admitter.decide_as(25)(state, now_ms=now_ms, partition=partition)) == "f1"
    assert admitter.LOGIC_VERSION >= 26 and 25 in admitter.EARLIER_LOGIC_VERSIONS


def test_a_log_recorded_by_admitter_25_replays_matched(monkeypatch: pytest.MonkeyPatch) -> None:
    old = {**deciders.BY_ROLE, admitter.ROLE: deciders.EARLIER[(admitter.ROLE, 25)]}
    with monkeypatch.context() as patched:
        patched.setattr(deciders, "BY_ROLE", old)
        run = run_scenario(load_scenario(ONLY_F2))
    records = [e for _, e in run.log if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    assert {r.logic_version for r in records} == {25}
    assert _cpu_flavor([e for _, e in run.log if isinstance(e, types.WorkloadAdmitted)]) == "f1"
    assert check_log(run.messages, deciders.BY_ROLE).mismatches == []


def _workload(annotations: dict[str, str]) -> models.Workload:
    return models.Workload(
        metadata=models.ObjectMeta(name="wl", namespace="ns", annotations=annotations),
        spec=models.WorkloadSpec(pod_sets=[models.PodSet()]),
    )


@pytest.mark.parametrize(
    ("gates", "annotations", "allowed"),
    [
        ({"ConcurrentAdmission": True}, {flavors.ALLOWED_FLAVORS_ANNOTATION: " f1 , f2"}, frozenset({"f1", "f2"})),
        ({"ConcurrentAdmission": True}, {flavors.ALLOWED_FLAVORS_ANNOTATION: " "}, frozenset()),
        ({"ConcurrentAdmission": True}, {}, None),
        ({}, {flavors.ALLOWED_FLAVORS_ANNOTATION: "f1"}, None),  # the gate is alpha, off by default
    ],
)
def test_allowed_by_annotation(
    gates: dict[str, bool], annotations: dict[str, str], allowed: frozenset[str] | None
) -> None:
    assert flavors.allowed_by_annotation(_workload(annotations), gates) == allowed
