"""ElasticJobsViaWorkloadSlices on by default, as Kueue since v0.18 (beta; kube_features.go).

A Configuration that does not set the gate has elastic jobs: the job webhook gates an annotated Job,
the deciders replace its slices (admitter logic 49, preemptor logic 21). Only ``false`` turns it off.
Logs of earlier logic replay with the gate off unless set, as they were decided; a Job without the
``kueue.x-k8s.io/elastic-job`` annotation is handled the same with the gate on or off.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import manager_config, models, slices, types
from kueue_es.jobframework import webhooks
from kueue_es.jobframework import workload_webhook as ww
from kueue_es.scheduling import slices as scheduling_slices
from kueue_es.services.admitter import core as admitter
from kueue_es.services.preemptor import core as preemptor
from kueue_es.sim.emulator import ClusterEmulator
from tests.builders import Log, cluster_queue, flavor, local_queue, workload
from tests.unit.test_elastic_slices import job

ELASTIC = {slices.ELASTIC_JOB_ANNOTATION: "true"}
CONFIG = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


def elastic(name: str, count: int, *, created: int = 0, replaces: str = "", priority: int = 0) -> dict[str, Any]:
    doc = workload(name, queue="lq", count=count, created=created, cpu="1", priority=priority)
    doc["metadata"]["annotations"] = {**ELASTIC, slices.SLICE_NAME_ANNOTATION: "a-1"}
    if replaces:
        doc["metadata"]["annotations"][slices.REPLACEMENT_FOR_ANNOTATION] = f"default/{replaces}"
    return doc


# -- the default ------------------------------------------------------------------------------------------


def test_the_gate_is_on_unless_set_false() -> None:
    assert slices.gate_enabled({})
    assert slices.gate_enabled({slices.GATE: True})
    assert not slices.gate_enabled({slices.GATE: False})
    assert manager_config.FEATURE_GATE_DEFAULTS[slices.GATE] is True
    assert ww.GATE_DEFAULTS[slices.GATE] is True
    parsed = manager_config.parse(CONFIG)
    assert parsed.configuration.feature_gates == {}  # nothing written for the default
    assert slices.gate_enabled(parsed.configuration.feature_gates)
    off = manager_config.parse(CONFIG, feature_gates="ElasticJobsViaWorkloadSlices=false")
    assert not slices.gate_enabled(off.configuration.feature_gates)


def test_the_tas_gate_stays_off_and_may_be_turned_on_alone() -> None:
    assert manager_config.FEATURE_GATE_DEFAULTS[slices.TAS_GATE] is False
    assert not slices.tas_gate_enabled({})
    assert manager_config.feature_gate_problem({slices.TAS_GATE: True}) is None
    alone = manager_config.parse(CONFIG, feature_gates="ElasticJobsViaWorkloadSlicesWithTAS=true")
    assert slices.tas_gate_enabled(alone.configuration.feature_gates)
    # set off, the elastic gate still refuses the TAS one: tests/unit/test_elastic_tas.py


# -- the webhooks -----------------------------------------------------------------------------------------


def test_kueues_default_context_gates_an_annotated_job() -> None:
    out = webhooks.default("batch/v1", "Job", job(ELASTIC))
    assert out["spec"]["template"]["spec"]["schedulingGates"] == [{"name": slices.ELASTIC_JOB_GATE}]
    off = webhooks.Context(elastic_jobs=False)
    assert (
        "schedulingGates"
        not in webhooks.default("batch/v1", "Job", job(ELASTIC), context=off)["spec"]["template"]["spec"]
    )


def test_a_job_without_the_annotation_is_the_same_with_the_gate_on_or_off() -> None:
    """workloadslicing.Enabled and jobframework.WorkloadSliceEnabled ask for the annotation too: the gate alone
    changes nothing for a plain Job, neither its defaulting nor its validation."""
    on, off = webhooks.Context(elastic_jobs=True), webhooks.Context(elastic_jobs=False)
    plain = job()
    assert webhooks.default("batch/v1", "Job", plain, context=on) == webhooks.default(
        "batch/v1", "Job", plain, context=off
    )
    partial = job({"kueue.x-k8s.io/job-min-parallelism": "1"})
    assert webhooks.validate_create("batch/v1", "Job", partial, context=on) == webhooks.validate_create(
        "batch/v1", "Job", partial, context=off
    )
    assert webhooks.validate_update("batch/v1", "Job", plain, partial, context=on) == webhooks.validate_update(
        "batch/v1", "Job", plain, partial, context=off
    )


def test_the_emulator_follows_the_configurations_gates() -> None:
    assert ClusterEmulator().elastic
    assert ClusterEmulator().workload_gates[slices.GATE] is True
    off = ClusterEmulator(feature_gates={slices.GATE: False})
    assert not off.elastic and off.workload_gates[slices.GATE] is False
    assert not ClusterEmulator(elastic_jobs=False).workload_gates[slices.GATE]


# -- the deciders -----------------------------------------------------------------------------------------


def scaled_up(configuration: models.Configuration | None) -> Log:
    """a-1 (2 CPU) and other (2 CPU) hold 4 of cq's 6 CPU; a-2 replaces a-1 asking 4 CPU."""
    log = Log()
    if configuration is not None:
        log.add(types.ConfigurationObserved(configuration=configuration))
    log.apply_manifests(
        flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": "6"}}), local_queue("lq", "cq"), elastic("a-1", 2)
    )
    log.settle(1_000)
    log.apply_manifests(workload("other", queue="lq", count=2, created=1, cpu="1"))
    log.settle(1_500)
    log.apply_manifests(elastic("a-2", 4, created=60, replaces="a-1"))
    return log


def replaced(out: list[types.Output]) -> list[tuple[str, str]]:
    return [(o.workload.name, o.reason) for o in out if isinstance(o, types.QuotaReleased)]


@pytest.mark.parametrize("configuration", [None, models.Configuration()], ids=["no-configuration", "no-gates"])
def test_without_feature_gates_a_scale_up_replaces_the_slice(configuration: models.Configuration | None) -> None:
    log = scaled_up(configuration)
    out = log.cycle(2_000)
    assert replaced(out) == [("a-1", slices.REPLACED_REASON)]
    assert log.state.workloads["default/a-2"].reservation is not None
    assert log.state.usage_of("cq", "f", "cpu") == 6_000  # a-2's 4 and other's 2


def test_the_gate_set_false_schedules_the_replacement_as_any_workload() -> None:
    log = scaled_up(models.Configuration(feature_gates={slices.GATE: False}))
    out = log.cycle(2_000)
    assert replaced(out) == []
    assert log.state.workloads["default/a-2"].reservation is None  # 4 more CPU do not fit beside 4 held


def test_logic_48_replays_a_log_without_the_gate_with_it_off() -> None:
    log = scaled_up(models.Configuration())
    before = admitter.decide_as(48)(log.state, now_ms=2_000)
    assert replaced(before) == []
    assert not any(isinstance(o, types.QuotaReserved | types.WorkloadAdmitted) for o in before)
    # the gate set true is read as it always was
    on = scaled_up(models.Configuration(feature_gates={slices.GATE: True}))
    assert replaced(admitter.decide_as(48)(on.state, now_ms=2_000)) == [("a-1", slices.REPLACED_REASON)]
    assert admitter.LOGIC_VERSION >= 49 and 48 in admitter.EARLIER_LOGIC_VERSIONS


def nominated(configuration: models.Configuration) -> Log:
    """cq has 4 CPU, held by a-1 (2, priority 0) and low (2, priority 50); a-2 (priority 100, a Workload made by
    hand) replaces a-1 asking 4."""
    log = Log()
    log.add(types.ConfigurationObserved(configuration=configuration))
    cq = cluster_queue("cq", flavors={"f": {"cpu": "4"}})
    cq["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    log.apply_manifests(flavor("f"), cq, local_queue("lq", "cq"), elastic("a-1", 2, priority=0))
    log.apply_manifests(workload("low", queue="lq", count=2, created=1, cpu="1", priority=50))
    log.settle(1_000)
    log.apply_manifests(elastic("a-2", 4, created=60, replaces="a-1", priority=100))
    return log


def targets(out: list[types.Decision]) -> list[list[str]]:
    return [[t.workload.name for t in o.targets] for o in out if isinstance(o, types.PreemptionIssued)]


def test_the_preemptor_takes_the_default_too_and_logic_20_replays_it_off() -> None:
    log = nominated(models.Configuration())
    out = log.cycle(2_000)
    assert [o.workload.name for o in out if isinstance(o, types.PreemptionRequired)] == ["a-2"]
    # the replacement asks its 2 CPU of delta: low is its victim, never the slice it replaces
    assert targets(preemptor.decide(log.state, now_ms=2_001)) == [["low"]]
    # logic 20 took the gate as off: the slice a-2 replaces is a candidate like any other, the lowest first
    assert targets(preemptor.decide_as(20)(log.state, now_ms=2_001)) == [["a-1"]]
    assert preemptor.LOGIC_VERSION >= 21 and 20 in preemptor.EARLIER_LOGIC_VERSIONS


def test_the_view_sets_the_gate_off_only_when_unset() -> None:
    log = nominated(models.Configuration(feature_gates={slices.GATE: True}))
    assert scheduling_slices.with_gate_off_unless_set(log.state) is log.state
    unset = nominated(models.Configuration())
    view = scheduling_slices.with_gate_off_unless_set(unset.state)
    assert view.configuration.feature_gates == {slices.GATE: False}
    assert unset.state.configuration.feature_gates == {}  # the fold's own is untouched
    assert scheduling_slices.with_gate_off_unless_set(unset.state).configuration is view.configuration  # kept
