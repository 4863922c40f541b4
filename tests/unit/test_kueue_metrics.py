"""Kueue's Prometheus metrics folded from the log (issue 16, point 1).

The families are held to Kueue's reference page (``tests/fixtures/metrics/kueue-reference.yaml``, taken
from kubernetes-sigs/kueue's metrics.md and metrics.go); the values are checked after scenarios run
through the production deciders (the core engine: admissions, a preemption, a requeue after it, a
finish, a HoldAndDrain eviction, parked workloads); and a fold that starts from a checkpoint ends with
the same metrics as one from message #1.
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kueue_es import checkpoints
from kueue_es.events import codec, manager_config, models, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.explain import status_report
from kueue_es.jobframework import jobs
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState, WorkloadState, apply
from kueue_es.projections.kueue_metrics import FAMILIES
from kueue_es.scenarios.core_engine import CoreRun, run_scenario
from kueue_es.scenarios.loading import load_scenario, parse_scenario
from kueue_es.scheduling import readiness
from kueue_es.services.dispatcher import core
from kueue_es.services.dispatcher import status as dispatcher_status
from kueue_es.services.kueue_metrics import CLUSTER_QUEUE_RESOURCE_FAMILIES, KueueCollector, families, gauges
from kueue_es.services.runtime import fold_message
from kueue_es.services.watcher import convert
from tests.builders import Log, reservations
from tests.integration import test_kueue_status as status_log
from tests.integration.harness import cluster_queue, flavor, job, local_queue

FIXTURES = Path(__file__).parent.parent / "fixtures"
SCENARIOS = Path(__file__).parent.parent / "scenarios"
API = "kueue.x-k8s.io/v1beta2"


def _reference() -> list[dict[str, Any]]:
    return yaml.safe_load((FIXTURES / "metrics" / "kueue-reference.yaml").read_text())["families"]


def test_every_family_of_kueues_reference_with_its_type_labels_help_and_buckets() -> None:
    reference = {family["name"]: family for family in _reference()}
    ours = {family.name: family for family in FAMILIES}
    assert sorted(ours) == sorted(reference)
    for name, family in reference.items():
        mine = ours[name]
        assert (mine.kind, list(mine.labels), mine.help) == (family["type"], family["labels"], family["help"]), name
        if mine.kind == "histogram":
            assert [bound / 1000 for bound in mine.buckets] == family["buckets"], name
        else:
            assert mine.buckets == (), name


def _help_lines(exposition: str) -> dict[str, str]:
    """The ``# HELP`` lines of a text exposition: family name -> help text, unescaped (``\\n`` a newline,
    ``\\\\`` a backslash), as a user reads them with ``curl /metrics | grep HELP``."""
    out = {}
    for line in exposition.splitlines():
        if line.startswith("# HELP "):
            name, _, text = line.removeprefix("# HELP ").partition(" ")
            out[name] = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)
    return out


def test_every_kueue_metric_exported_has_kueues_name_and_help_text() -> None:
    """A user greps /metrics and compares it with Kueue's: every ``kueue_*`` and ``multikueue_*`` family the
    exporter serves (``kueue_es_*`` are kueue-es's own) is one of Kueue's, with the help text of its Help
    field in Kueue's pkg/metrics/metrics.go (tests/fixtures/metrics/kueue-reference.yaml), and every one of
    Kueue's families is served."""
    reference = {family["name"]: family["help"] for family in _reference()}
    registry = CollectorRegistry()
    state = _fold(_preemption_run().messages)
    registry.register(KueueCollector(lambda: state, active=None))
    served = {
        name: text
        for name, text in _help_lines(generate_latest(registry).decode()).items()
        if name.startswith(("kueue_", "multikueue_")) and not name.startswith("kueue_es_")
    }
    assert sorted(served) == sorted(reference)
    assert {name: text for name, text in served.items() if text != reference[name]} == {}


def _job(name: str, *, cpus: int, second: int, priority: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": f"2026-01-01T00:00:{second:02d}Z"},
        "spec": {
            "queueName": "lq",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": cpus,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                }
            ],
        },
    }


def _preemption_run() -> CoreRun:
    """cq (3 CPU, LowerPriority): low-1..3 (1 CPU each) admitted, huge (5 CPU) parked; high (2 CPU,
    priority 10) preempts two lows, which wait; high finishes and they are admitted again."""
    doc = {
        "name": "metrics",
        "source": "issue 16",
        "objects": _preemption_doc_objects(),
        "pending": [
            _job("low-1", cpus=1, second=1),
            _job("low-2", cpus=1, second=2),
            _job("low-3", cpus=1, second=3),
            _job("huge", cpus=5, second=4),
        ],
        "events": [{"apply": _job("high", cpus=2, second=5, priority=10)}, {"finish": "default/high"}],
    }
    return run_scenario(parse_scenario(yaml.safe_dump(doc, sort_keys=False), path="<metrics>"))


def _preemption_doc_objects() -> list[dict[str, Any]]:
    """ResourceFlavor default, ClusterQueue cq (3 CPU, withinClusterQueue LowerPriority), LocalQueue lq."""
    return [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 3}]}],
                    }
                ],
            },
        },
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "default"},
            "spec": {"clusterQueue": "cq"},
        },
    ]


def _fold(messages: list[Any], state: ClusterState | None = None) -> ClusterState:
    state = state if state is not None else ClusterState()
    for message in messages:
        fold_message(state, message)
    return state


def _samples(
    state: ClusterState, *, role: str = "standalone", resources: bool = True
) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every exported sample, as Prometheus parses the text exposition: (sample name, labels) -> value.
    ``resources``: as if the Configuration had ``metrics.enableClusterQueueResources`` (False: as it has it)."""
    if resources and not state.configuration.enable_cluster_queue_resources:
        state = copy.copy(state)
        state.configuration = msgspec.structs.replace(state.configuration, enable_cluster_queue_resources=True)
    registry = CollectorRegistry()
    registry.register(KueueCollector(lambda: state, active=None if role == "standalone" else lambda: True))
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def _value(samples: dict[Any, float], sample: str, /, **labels: str) -> float:
    labels.setdefault("replica_role", "standalone")
    return samples.get((sample, frozenset(labels.items())), 0.0)


def test_exported_samples_carry_exactly_their_familys_labels() -> None:
    state = _fold(_preemption_run().messages)
    state.configuration = msgspec.structs.replace(state.configuration, enable_cluster_queue_resources=True)
    by_name = {family.name: family for family in FAMILIES}
    seen = set()
    for family in families(state, replica_role="standalone"):
        spec = by_name[family.name if family.type != "counter" else f"{family.name}_total"]
        assert family.type == spec.kind
        for sample in family.samples:
            names = set(sample.labels) - {"le"}
            assert names == set(spec.labels), (family.name, sample)
            seen.add(spec.name)
    # the families a scenario of admissions, a preemption and a finish gives values to
    for name in (
        "kueue_pending_workloads",
        "kueue_admitted_workloads_total",
        "kueue_quota_reserved_wait_time_seconds",
        "kueue_evicted_workloads_total",
        "kueue_preempted_workloads_total",
        "kueue_cluster_queue_resource_reservation",
        "kueue_local_queue_admission_wait_time_seconds",
        "kueue_execution_time_seconds",
        "kueue_build_info",
    ):
        assert name in seen, name


def test_values_after_admissions_a_preemption_and_a_finish() -> None:
    run = _preemption_run()
    events = [e for _, e in run.log]  # a record's carried decisions after it, at its sequence (schema 17)
    state = _fold(run.messages)
    samples = _samples(state)
    cq = {"cluster_queue": "cq", "priority_class": ""}
    # 3 lows, high, and the 2 preempted lows again once high finished: 6 reservations, all admitted at once
    # no admission checks: each reserved and admitted by one WorkloadAdmitted (admitter logic version 13)
    assert not [e for e in events if isinstance(e, types.QuotaReserved)]
    reserved = reservations(events)
    assert len(reserved) == 6
    assert _value(samples, "kueue_quota_reserved_workloads_total", **cq) == 6
    assert _value(samples, "kueue_admitted_workloads_total", **cq) == 6
    assert (
        _value(samples, "kueue_local_queue_admitted_workloads_total", name="lq", namespace="default", priority_class="")
        == 6
    )
    evicted = {"cluster_queue": "cq", "reason": "Preempted", "underlying_cause": "", "priority_class": ""}
    assert _value(samples, "kueue_evicted_workloads_total", **evicted) == 2
    assert _value(samples, "kueue_evicted_workloads_once_total", **evicted) == 2
    assert (
        _value(samples, "kueue_preempted_workloads_total", preempting_cluster_queue="cq", reason="InClusterQueue") == 2
    )
    assert _value(samples, "kueue_finished_workloads_total", **cq) == 1
    assert _value(samples, "kueue_execution_time_seconds_count", **cq) == 1
    # huge can never fit: parked on the inadmissible list; nothing else waits
    assert _value(samples, "kueue_pending_workloads", cluster_queue="cq", status="inadmissible") == 1
    assert _value(samples, "kueue_pending_workloads", cluster_queue="cq", status="active") == 0
    assert _value(samples, "kueue_reserving_active_workloads", cluster_queue="cq") == 3
    assert _value(samples, "kueue_admitted_active_workloads", cluster_queue="cq") == 3
    usage = {"cohort": "", "cluster_queue": "cq", "flavor": "default", "resource": "cpu"}
    assert _value(samples, "kueue_cluster_queue_resource_reservation", **usage) == 3.0
    assert _value(samples, "kueue_cluster_queue_nominal_quota", **usage) == 3.0
    assert _value(samples, "kueue_cluster_queue_borrowing_limit", **usage) == math.inf
    assert _value(samples, "kueue_cluster_queue_resource_pending", cluster_queue="cq", resource="cpu") == 5.0
    assert _value(samples, "kueue_cluster_queue_status", cluster_queue="cq", status="active") == 1
    # wait times from the events' own times: since creation, and for a readmission since the release
    # that sent the workload back to its queue
    created = {f"default/{name}": ms for name, ms in (("low-1", 1), ("low-2", 2), ("low-3", 3), ("high", 5))}
    released: dict[str, int] = {}
    waits = []
    for event in (one for e in run.events for one in types.with_carried(e)):  # decisions and releases in records
        if isinstance(event, types.QuotaReleased):
            released[event.workload.key] = event.at_ms
        elif isinstance(event, types.WorkloadAdmitted):
            since = released.get(event.workload.key)
            start = since if since is not None else 1_767_225_600_000 + created[event.workload.key] * 1000
            waits.append(event.at_ms - start)
    assert len(released) == 3  # two preempted lows, and high after it finished
    assert _value(samples, "kueue_quota_reserved_wait_time_seconds_count", **cq) == 6
    assert _value(samples, "kueue_quota_reserved_wait_time_seconds_sum", **cq) == pytest.approx(sum(waits) / 1000)
    assert _value(samples, "kueue_admission_wait_time_seconds_sum", **cq) == pytest.approx(sum(waits) / 1000)
    assert all(w >= 0 for w in waits)
    bucket_1s = _value(samples, "kueue_quota_reserved_wait_time_seconds_bucket", le="1.0", **cq)
    assert bucket_1s == sum(1 for w in waits if w <= 1000)


def test_admission_attempts_count_the_cycles_that_tried_a_workload() -> None:
    """kueue_admission_attempts_total counts a scheduling cycle that tried a head (scheduler.go schedule:
    AdmissionAttempt, ``success`` when one was admitted): an admitter record that reserves quota counts
    ``success``, one that only leaves workloads pending (or waiting for preemptions) ``inadmissible``, and
    one of only PodsReady evictions, releases or deactivations not at all. Before, every admitter record
    counted: a workload admitted three times, evicted twice and deactivated read 9 attempts (a new user's
    trial)."""
    run = run_scenario(load_scenario(Path("tests/scenarios/podsready/backoff-limit-deactivates.yaml")))
    tries = (types.WorkloadInadmissible, types.PendingOutcome, types.PreemptionRequired)
    expected = {"success": 0, "inadmissible": 0}
    no_try = 0
    for message in run.messages:
        if message.headers.get("Kq-Type") != "DecisionRecord":
            continue
        record = codec.decode(message.data)
        assert isinstance(record, types.DecisionRecord)
        if record.role != "admit" or not record.decided:
            continue
        assert record.output_count == 0  # the core engine's records carry their decisions
        decisions = record.all_decisions()
        if any(isinstance(d, types.QuotaReserved | types.WorkloadAdmitted) for d in decisions):
            expected["success"] += 1  # no admission checks here: every admission reserves
        elif any(isinstance(d, tries) for d in decisions):
            expected["inadmissible"] += 1
        else:
            no_try += 1
    assert no_try >= 3 and expected["success"] >= 3  # evictions and releases, and the readmissions
    samples = _samples(_fold(run.messages))
    got = {result: _value(samples, "kueue_admission_attempts_total", result=result) for result in expected}
    assert got == expected


def test_before_the_first_cycle_every_pending_workload_is_active() -> None:
    run = _preemption_run()
    first_record = next(m.seq for m in run.messages if m.headers.get("Kq-Type") == "DecisionRecord")
    state = _fold(run.messages[: first_record - 1])
    samples = _samples(state)
    assert _value(samples, "kueue_pending_workloads", cluster_queue="cq", status="active") == 4
    assert _value(samples, "kueue_pending_workloads", cluster_queue="cq", status="inadmissible") == 0
    assert _value(samples, "kueue_local_queue_pending_workloads", name="lq", namespace="default", status="active") == 4
    assert _value(samples, "kueue_admission_attempts_total", result="success") == 0


def test_a_local_queue_reports_every_quota_of_its_cluster_queue_at_zero_when_it_holds_none() -> None:
    """Kueue's LocalQueue.reportResourceMetrics walks its ClusterQueue's quotas: a LocalQueue holding
    nothing (before any admission, and again once its workloads finished) shows 0, not no series."""
    run = _preemption_run()
    first_record = next(m.seq for m in run.messages if m.headers.get("Kq-Type") == "DecisionRecord")
    lq = {"name": "lq", "namespace": "default", "flavor": "default", "resource": "cpu", "replica_role": "standalone"}
    before = _samples(_fold(run.messages[: first_record - 1]))
    for family in ("kueue_local_queue_resource_reservation", "kueue_local_queue_resource_usage"):
        assert before[(family, frozenset(lq.items()))] == 0.0
    after = _samples(_fold(run.messages))  # the three lows hold 1 CPU each
    assert after[("kueue_local_queue_resource_reservation", frozenset(lq.items()))] == 3.0
    assert after[("kueue_local_queue_resource_usage", frozenset(lq.items()))] == 3.0


def test_resource_pending_is_0_for_every_resource_of_the_quotas_when_nothing_waits() -> None:
    """Kueue seeds pendingResourcesTotal with 0 for each resource of the ClusterQueue's quotas
    (PendingWorkloads.UpdateConfiguredResources): kueue_cluster_queue_resource_pending shows 0, not no
    series, while nothing is pending; then the pending requests (huge: 5 CPU, parked)."""
    run = _preemption_run()
    first_workload = next(m.seq for m in run.messages if m.headers.get("Kq-Type") == "WorkloadObserved")
    labels = frozenset({"cluster_queue": "cq", "resource": "cpu", "replica_role": "standalone"}.items())
    before = _samples(_fold(run.messages[: first_workload - 1]))
    assert before[("kueue_cluster_queue_resource_pending", labels)] == 0.0
    assert _samples(_fold(run.messages))[("kueue_cluster_queue_resource_pending", labels)] == 5.0


def test_weighted_share_of_every_cluster_queue_while_fair_sharing_is_on() -> None:
    """Kueue reports kueue_cluster_queue_weighted_share for each ClusterQueue when fair sharing is on
    (clusterQueue.reportWeightedShare): a borrower in a cohort its share, one in no cohort 0; off, none."""
    a, b, alone = cluster_queue("a", cpu=4), cluster_queue("b", cpu=4), cluster_queue("alone", cpu=4)
    for cq in (a, b):
        cq["spec"]["cohortName"] = "team"
    wide = _job("wide", cpus=6, second=0)
    wide["metadata"]["uid"] = "uid-wide"
    wide["spec"]["queueName"] = "queue-a"
    observed = convert.kueue_fact(wide)
    ref = types.WorkloadRef(namespace="default", name="wide", uid="uid-wide")
    assignment = types.PodSetAssignment(
        name="main", flavors={"cpu": "default-flavor"}, resource_usage={"cpu": 6000}, count=6
    )
    reserved = types.QuotaReserved(workload=ref, cluster_queue="a", pod_set_assignments=[assignment], at_ms=1)
    view = core.DispatchState()
    facts = [flavor("default-flavor"), a, b, alone, local_queue("queue-a", "a")]
    for seq, item in enumerate([*map(convert.kueue_fact, facts), observed, reserved], start=1):
        core.fold(view, item, seq=seq)
    off = _samples(view.cluster)
    assert not [key for key in off if key[0] == "kueue_cluster_queue_weighted_share"]
    on = types.ConfigurationObserved(configuration=models.Configuration(fair_sharing=models.FairSharingConfig()))
    core.fold(view, on, seq=20)
    shares = {
        dict(labels)["cluster_queue"]: (dict(labels)["cohort"], value)
        for (name, labels), value in _samples(view.cluster).items()
        if name == "kueue_cluster_queue_weighted_share"
    }
    assert shares == {"a": ("team", 250.0), "b": ("team", 0.0), "alone": ("", 0.0)}


def test_weighted_share_of_every_cohort_object_a_root_at_0_a_zero_weight_borrower_at_inf() -> None:
    """Kueue's cohort controller reports kueue_cohort_weighted_share for every Cohort it reconciles
    (cohort_controller.go updateCohortStatusIfChanged, the share of cache.go CohortStats): a root Cohort at 0
    (dominantResourceShare of a node without a parent), a Cohort of weight 0 that borrows at +Inf as
    PreciseWeightedShare gives it (only the ClusterQueue's reportWeightedShare turns +Inf into NaN); a cohort
    no Cohort object names is no Cohort the controller reconciles: no series."""
    team_a, team_b = _cohort("team-a", "org"), _cohort("team-b", "org")
    team_a["spec"]["fairSharing"] = {"weight": "0"}
    a, b, c, d = (cluster_queue(name, cpu=4) for name in ("a", "b", "c", "d"))
    a["spec"]["cohortName"], b["spec"]["cohortName"] = "team-a", "team-b"
    c["spec"]["cohortName"] = d["spec"]["cohortName"] = "implicit"
    a["spec"]["fairSharing"] = {"weight": "0"}
    wide = _job("wide", cpus=6, second=0)
    wide["metadata"]["uid"] = "uid-wide"
    wide["spec"]["queueName"] = "queue-a"
    ref = types.WorkloadRef(namespace="default", name="wide", uid="uid-wide")
    assignment = types.PodSetAssignment(
        name="main", flavors={"cpu": "default-flavor"}, resource_usage={"cpu": 6000}, count=6
    )
    reserved = types.QuotaReserved(workload=ref, cluster_queue="a", pod_set_assignments=[assignment], at_ms=1)
    on = types.ConfigurationObserved(configuration=models.Configuration(fair_sharing=models.FairSharingConfig()))
    org = {"apiVersion": API, "kind": "Cohort", "metadata": {"name": "org"}, "spec": {}}
    facts = [flavor("default-flavor"), org, team_a, team_b, a, b, c, d, local_queue("queue-a", "a")]
    view = core.DispatchState()
    for seq, item in enumerate([on, *map(convert.kueue_fact, facts), convert.kueue_fact(wide), reserved], start=1):
        core.fold(view, item, seq=seq)
    samples = _samples(view.cluster)
    cohorts = {
        dict(labels)["cohort"]: value
        for (name, labels), value in samples.items()
        if name == "kueue_cohort_weighted_share"
    }
    assert cohorts == {"org": 0.0, "team-a": math.inf, "team-b": 0.0}
    assert math.isnan(_value(samples, "kueue_cluster_queue_weighted_share", cluster_queue="a", cohort="team-a"))


def test_hold_and_drain_eviction_is_counted_with_its_reason_and_the_queue_goes_pending() -> None:
    run = run_scenario(load_scenario(SCENARIOS / "config" / "clusterqueue-hold-and-drain-evicts.yaml"))
    samples = _samples(_fold(run.messages))
    stopped = {"cluster_queue": "cq", "reason": "ClusterQueueStopped", "underlying_cause": "", "priority_class": ""}
    assert _value(samples, "kueue_evicted_workloads_total", **stopped) == 1
    assert (
        _value(samples, "kueue_preempted_workloads_total", preempting_cluster_queue="cq", reason="InClusterQueue") == 0
    )
    assert _value(samples, "kueue_cluster_queue_status", cluster_queue="cq", status="pending") == 1
    assert _value(samples, "kueue_cluster_queue_status", cluster_queue="cq", status="active") == 0
    assert (
        _value(
            samples, "kueue_workload_eviction_latency_seconds_count", cluster_queue="cq", reason="ClusterQueueStopped"
        )
        == 1
    )


def _cluster_queue(stop_policy: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 3}]}],
            }
        ],
    }
    if stop_policy is not None:
        spec["stopPolicy"] = stop_policy
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}


def _stop_and_resume_run(stop_policy: str) -> CoreRun:
    """cq (3 CPU): low-1..3 (1 CPU each) admitted, huge (5 CPU) parked; cq stopped with ``stop_policy``;
    late-1 and late-2 (1 CPU each) submitted to it while stopped; cq resumed (stopPolicy None)."""
    doc = {
        "name": "metrics-stop",
        "source": "issue 16",
        "objects": [
            {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
            _cluster_queue(None),
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": "default"},
                "spec": {"clusterQueue": "cq"},
            },
        ],
        "pending": [
            _job("low-1", cpus=1, second=1),
            _job("low-2", cpus=1, second=2),
            _job("low-3", cpus=1, second=3),
            _job("huge", cpus=5, second=4),
        ],
        "events": [
            {"apply": _cluster_queue(stop_policy)},
            {"apply": _job("late-1", cpus=1, second=5)},
            {"apply": _job("late-2", cpus=1, second=6)},
            {"apply": _cluster_queue(None)},
        ],
    }
    return run_scenario(parse_scenario(yaml.safe_dump(doc, sort_keys=False), path="<metrics-stop>"))


def _pending_counts(state: ClusterState) -> tuple[float, float, float, float]:
    """(active, inadmissible) of cq's kueue_pending_workloads, then of lq's local_queue_pending_workloads."""
    samples = _samples(state)
    lq = {"name": "lq", "namespace": "default"}
    return (
        _value(samples, "kueue_pending_workloads", cluster_queue="cq", status="active"),
        _value(samples, "kueue_pending_workloads", cluster_queue="cq", status="inadmissible"),
        _value(samples, "kueue_local_queue_pending_workloads", **lq, status="active"),
        _value(samples, "kueue_local_queue_pending_workloads", **lq, status="inadmissible"),
    )


@pytest.mark.parametrize(("stop_policy", "evicted"), [("Hold", 0), ("HoldAndDrain", 3)])
def test_a_stopped_cluster_queue_counts_every_pending_workload_inadmissible(stop_policy: str, evicted: int) -> None:
    """Kueue reportCQPendingWorkloads / reportLQPendingWorkloads: while the ClusterQueue is inactive its
    pending workloads are all inadmissible, even those no admission attempt has seen since the stop (the
    stop itself is a requeue trigger, and a workload submitted to a stopped queue is not parked until
    the admitter's next cycle); resumed, the requeue sends them back to active."""
    run = _stop_and_resume_run(stop_policy)
    cq_facts = [
        (m.seq, e) for m, e in zip(run.messages, run.events, strict=True) if isinstance(e, types.ClusterQueueObserved)
    ]
    stop_seq = next(seq for seq, e in cq_facts if e.cluster_queue.spec.stop_policy == stop_policy)
    resume_seq = next(seq for seq, e in cq_facts if seq > stop_seq and e.cluster_queue.spec.stop_policy == "None")
    late_seqs = [
        m.seq
        for m, e in zip(run.messages, run.events, strict=True)
        if isinstance(e, types.WorkloadObserved) and e.workload.metadata.name.startswith("late-")
    ]
    assert len(late_seqs) == 2 and stop_seq < late_seqs[0] < late_seqs[1] < resume_seq

    # before the stop: huge parked after its failed attempt, nothing else waits
    assert _pending_counts(_fold(run.messages[: stop_seq - 1])) == (0, 1, 0, 1)
    # the stop (a requeue trigger) folded, no cycle since: all inadmissible, and the queue is pending
    at_stop = _fold(run.messages[:stop_seq])
    assert _pending_counts(at_stop) == (0, 1, 0, 1)
    samples = _samples(at_stop)
    assert _value(samples, "kueue_cluster_queue_status", cluster_queue="cq", status="pending") == 1
    # a workload submitted to the stopped queue, folded before any admitter decision about it
    for n, seq in enumerate(late_seqs, start=2):
        state = _fold(run.messages[:seq])
        assert state.workloads[run.events[seq - 1].workload.key].reservation is None
        assert _pending_counts(state) == (0, n + evicted, 0, n + evicted)
    # resumed (a requeue trigger), before the admitter's next cycle: all active again
    resumed = _fold(run.messages[:resume_seq])
    assert _pending_counts(resumed) == (3 + evicted, 0, 3 + evicted, 0)
    assert _value(_samples(resumed), "kueue_cluster_queue_status", cluster_queue="cq", status="active") == 1
    # and after it: admitted what fits, the rest parked as before the stop
    end = _fold(run.messages)
    assert _pending_counts(end) == (0, 3, 0, 3)


def _cohort(name: str, parent: str) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": {"parentName": parent}}


@pytest.mark.parametrize(
    ("why", "extra_objects", "status"),
    [
        ("a missing ResourceFlavor", [], "pending"),
        ("a cohort tree with a cycle", [_cohort("a", "b"), _cohort("b", "a")], "active"),
    ],
)
def test_an_inactive_cluster_queue_counts_its_pending_workloads_inadmissible_before_any_cycle(
    why: str, extra_objects: list[dict[str, Any]], status: str
) -> None:
    """The other ways a ClusterQueue admits nothing: its Active condition False (here a ResourceFlavor it
    names does not exist), or the admitter holds it inactive (a cohort tree with a cycle: Kueue's
    ClusterQueue stays Active but is left out of the snapshot)."""
    cq = _cluster_queue(None)
    if extra_objects:
        cq["spec"]["cohortName"] = "a"
    doc = {
        "name": "metrics-inactive",
        "source": "issue 16",
        "objects": [
            *(
                [{"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
                if extra_objects
                else []
            ),
            *extra_objects,
            cq,
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": "default"},
                "spec": {"clusterQueue": "cq"},
            },
        ],
        "pending": [_job("one", cpus=1, second=1), _job("two", cpus=1, second=2)],
    }
    run = run_scenario(parse_scenario(yaml.safe_dump(doc, sort_keys=False), path="<metrics-inactive>"))
    first_record = next(m.seq for m in run.messages if m.headers.get("Kq-Type") == "DecisionRecord")
    before = _fold(run.messages[: first_record - 1])
    assert len(before.workloads) == 2, why
    assert _pending_counts(before) == (0, 2, 0, 2), why
    assert _value(_samples(before), "kueue_cluster_queue_status", cluster_queue="cq", status=status) == 1, why
    assert _pending_counts(_fold(run.messages)) == (0, 2, 0, 2), why


@pytest.mark.parametrize("why", ["stopped with Hold", "stopped with HoldAndDrain", "a missing ResourceFlavor"])
def test_kueue_es_status_counts_pending_workloads_as_the_metric_does(why: str) -> None:
    """``kueue-es status`` (PENDING, INADMISSIBLE) agrees with ``kueue_pending_workloads`` after every message of
    a run: every pending workload of an inactive ClusterQueue (stopped, or missing its ResourceFlavor) is
    inadmissible, as Kueue's metrics.go reportCQPendingWorkloads counts it (found by a new user's trial: status
    counted them active while the admitter's /metrics said inadmissible)."""
    if why.startswith("stopped"):
        run = _stop_and_resume_run(why.rsplit(" ", 1)[-1])
    else:
        doc = {
            "name": "status-inactive",
            "source": "a new user's trial",
            "objects": [
                _cluster_queue(None),
                {
                    "apiVersion": API,
                    "kind": "LocalQueue",
                    "metadata": {"name": "lq", "namespace": "default"},
                    "spec": {"clusterQueue": "cq"},
                },
            ],
            "pending": [_job("one", cpus=1, second=1), _job("two", cpus=1, second=2)],
        }
        run = run_scenario(parse_scenario(yaml.safe_dump(doc, sort_keys=False), path="<status-inactive>"))
    state = ClusterState()
    seen_inactive = 0
    for message in run.messages:
        fold_message(state, message)
        if "cq" not in state.cluster_queues:
            continue
        active, inadmissible, _, _ = _pending_counts(state)
        shown = next(cq for cq in status_report(state, now_ms=0)["clusterQueues"] if cq["name"] == "cq")
        assert (shown["pendingActive"], shown["pendingInadmissible"]) == (active, inadmissible), message.seq
        seen_inactive += int(inadmissible > 0 and active == 0 and not readiness.admits(state, quota.build(state), "cq"))
    assert seen_inactive, "the run has an inactive ClusterQueue with pending workloads"


def test_a_fold_from_a_checkpoint_ends_with_the_same_metrics_as_one_from_the_start() -> None:
    messages = _preemption_run().messages
    full = _fold(messages)
    middle = len(messages) // 2
    early = _fold(messages[:middle])
    assert early.metrics.counters, "the first half already counts something"
    resumed = _fold(messages[middle:], checkpoints.loads(checkpoints.dumps(early)))
    assert resumed.metrics == full.metrics
    assert generate_latest_of(resumed) == generate_latest_of(full)
    assert checkpoints.state_digest(resumed) == checkpoints.state_digest(full)


def generate_latest_of(state: ClusterState) -> bytes:
    registry = CollectorRegistry()
    registry.register(KueueCollector(lambda: state))
    return generate_latest(registry)


def test_only_the_replica_holding_the_lease_exports_kueues_families() -> None:
    state = _fold(_preemption_run().messages)
    holding = [True]
    registry = CollectorRegistry()
    registry.register(KueueCollector(lambda: state, active=lambda: holding[0]))
    text = generate_latest(registry).decode()
    assert 'kueue_admitted_workloads_total{cluster_queue="cq",priority_class="",replica_role="leader"} 6.0' in text
    holding[0] = False
    assert generate_latest(registry) == b""


def test_an_observation_lands_in_the_first_bucket_whose_bound_it_does_not_exceed() -> None:
    """Prometheus's ``le`` buckets: ``ms`` counts in the first bucket with ``ms <= bound`` (+Inf past the
    last), a negative time as 0; at, just below and just above every bound of every histogram family."""
    from kueue_es.projections import kueue_metrics as km

    for family in km.FAMILIES:
        if family.kind != "histogram":
            continue
        bounds = family.buckets
        for ms in {-5, 0, *(b + d for b in bounds for d in (-1, 0, 1)), bounds[-1] * 10}:
            metrics = km.KueueMetrics()
            km._observe(metrics, family.name, ("x",), ms)
            hist = metrics.histograms[family.name][("x",)]
            expected = next((n for n, bound in enumerate(bounds) if max(ms, 0) <= bound), len(bounds))
            assert hist.counts == [int(n == expected) for n in range(len(bounds) + 1)], (family.name, ms)
            assert hist.sum_ms == max(ms, 0)


def test_unadmitted_workloads_by_their_admitted_reason_and_underlying_cause() -> None:
    """Kueue's queue manager counts every workload not admitted, finished or deleted (gate
    UnadmittedWorkloadsObservability, on by default): before the first cycle the four waiting ones are
    NoReservation / PendingEvaluation; at the end only huge (5 CPUs in a 3-CPU ClusterQueue) is left, with
    its pending reason. The gate off: no samples."""
    run = _preemption_run()
    first_record = next(m.seq for m in run.messages if m.headers.get("Kq-Type") == "DecisionRecord")
    before = _samples(_fold(run.messages[: first_record - 1]))
    unevaluated = {"cluster_queue": "cq", "reason": "NoReservation", "underlying_cause": "PendingEvaluation"}
    assert _value(before, "kueue_unadmitted_workloads", **unevaluated) == 4
    lq = {"name": "lq", "namespace": "default", **unevaluated}
    assert _value(before, "kueue_local_queue_unadmitted_workloads", **lq) == 4
    state = _fold(run.messages)
    samples = _samples(state)
    huge = state.workloads["default/huge"]
    assert not huge.admitted and huge.pending_reason == "ExceedsMaxQuota"
    series = {labels: v for (name, labels), v in samples.items() if name == "kueue_unadmitted_workloads"}
    waiting = {"cluster_queue": "cq", "reason": "NoReservation", "underlying_cause": "ExceedsMaxQuota"}
    assert series == {frozenset({**waiting, "replica_role": "standalone"}.items()): 1.0}
    gate_off = models.Configuration(feature_gates={"UnadmittedWorkloadsObservability": False})
    state.configuration = gate_off
    assert not [name for name, _ in _samples(state) if name.endswith("unadmitted_workloads")]


def test_a_workload_of_a_local_queue_naming_no_cluster_queue_is_in_no_unadmitted_series() -> None:
    """Kueue's unadmitted workload metrics are per ClusterQueue: a workload whose LocalQueue names none
    (spec.clusterQueue optional) resolves to the name "" and is reported in neither family
    (unadmitted_workloads.go updateUnadmittedWorkloadMetric: "Skipping ... due to empty ClusterQueue"); one whose
    LocalQueue names a ClusterQueue that does not exist is, under that name."""
    state = ClusterState()
    for name, cq in (("lq-none", ""), ("lq-missing", "cq-missing")):
        state.local_queues[("ns", name)] = models.LocalQueue(
            metadata=models.ObjectMeta(name=name, namespace="ns"), spec=models.LocalQueueSpec(cluster_queue=cq)
        )
        wl = models.Workload(
            metadata=models.ObjectMeta(name=f"wl-{name}", namespace="ns", uid=name),
            spec=models.WorkloadSpec(queue_name=name, pod_sets=[models.PodSet(requests={"cpu": 1000})]),
        )
        state.workloads[f"ns/wl-{name}"] = WorkloadState(workload=wl, observed_seq=1, pending_reason="Misconfigured")
    samples = _samples(state)
    for family in ("kueue_unadmitted_workloads", "kueue_local_queue_unadmitted_workloads"):
        queues = {dict(labels)["cluster_queue"] for (name, labels) in samples if name == family}
        assert queues == {"cq-missing"}, family


def test_a_reservation_waiting_for_its_checks_is_unadmitted_for_unsatisfied_checks() -> None:
    """A workload holding quota and not admitted yet (its admission checks not Ready) is counted with
    Admitted's reason UnsatisfiedAdmissionChecks and no underlying cause (QuotaReserved is True); one of a
    stopped LocalQueue is not counted (Kueue's queue manager forgets that LocalQueue)."""
    state = ClusterState()
    for name, stop in (("lq", "None"), ("held", "Hold")):
        state.local_queues[("ns", name)] = models.LocalQueue(
            metadata=models.ObjectMeta(name=name, namespace="ns"),
            spec=models.LocalQueueSpec(cluster_queue="cq", stop_policy=stop),
        )
    for name, queue in (("checking", "lq"), ("stopped", "held")):
        wl = models.Workload(
            metadata=models.ObjectMeta(name=name, namespace="ns", uid=name),
            spec=models.WorkloadSpec(queue_name=queue, pod_sets=[models.PodSet(requests={"cpu": 1000})]),
        )
        ref = types.WorkloadRef(namespace="ns", name=name, uid=name)
        state.workloads[f"ns/{name}"] = WorkloadState(
            workload=wl,
            observed_seq=1,
            reservation=types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[], at_ms=1),
        )
    samples = _samples(state)
    series = {labels: v for (name, labels), v in samples.items() if name == "kueue_unadmitted_workloads"}
    checking = {"cluster_queue": "cq", "reason": "UnsatisfiedAdmissionChecks", "underlying_cause": ""}
    assert series == {frozenset({**checking, "replica_role": "standalone"}.items()): 1.0}


def test_a_terminating_cluster_queue_reports_status_terminating() -> None:
    """Kueue's TerminateClusterQueue reports kueue_cluster_queue_status{status="terminating"} 1: a ClusterQueue the
    watcher saw marked for deletion (its annotation) while Kueue's finalizer holds it."""
    state = ClusterState()
    state.cluster_queues["cq"] = models.ClusterQueue(
        metadata=models.ObjectMeta(name="cq", annotations={models.TERMINATING_ANNOTATION: "2026-12-03T18:00:00Z"})
    )
    samples = _samples(state)
    statuses = {s: _value(samples, "kueue_cluster_queue_status", cluster_queue="cq", status=s) for s in _STATUSES}
    assert statuses == {"pending": 0.0, "active": 0.0, "terminating": 1.0}


_STATUSES = ("pending", "active", "terminating")


def _hashes(samples: dict[Any, float], status: str) -> float | None:
    labels = {"cluster_queue": "cq", "status": status, "replica_role": "standalone"}
    return samples.get(("kueue_pending_scheduling_hashes", frozenset(labels.items())))


def test_pending_scheduling_hashes_count_the_unique_shapes_of_active_and_inadmissible_workloads() -> None:
    """Kueue's kueue_pending_scheduling_hashes (gate SchedulingEquivalenceHashing, on by default since 0.18):
    before the first cycle the four waiting workloads are active, with two shapes (the three 1-CPU lows alike,
    and huge: 5 pods); at the end huge alone waits, parked: one inadmissible shape. The gate off: no samples."""
    run = _preemption_run()
    first_record = next(m.seq for m in run.messages if m.headers.get("Kq-Type") == "DecisionRecord")
    before = _samples(_fold(run.messages[: first_record - 1]))
    assert (_hashes(before, "active"), _hashes(before, "inadmissible")) == (2.0, 0.0)
    state = _fold(run.messages)
    end = _samples(state)
    assert (_hashes(end, "active"), _hashes(end, "inadmissible")) == (0.0, 1.0)
    state.configuration = models.Configuration(feature_gates={"SchedulingEquivalenceHashing": False})
    assert not [name for name, _ in _samples(state) if name == "kueue_pending_scheduling_hashes"]


def test_a_scheduling_shape_is_the_priority_and_pod_sets_not_the_name() -> None:
    """Kueue's computeSchedulingHash covers the effective priority and each pod set's name, count, minCount,
    topology request and pod shape; the workload's own name, namespace and UID are not in it."""
    from kueue_es.services.kueue_metrics import scheduling_shape

    def shaped(name: str, *, priority: int = 0, count: int = 1, selector: dict[str, str] | None = None) -> bytes:
        pod_set = models.PodSet(count=count, requests={"cpu": 1000}, node_selector=selector or {})
        wl = models.Workload(
            metadata=models.ObjectMeta(name=name, namespace="default", uid=name),
            spec=models.WorkloadSpec(queue_name="lq", priority=priority, pod_sets=[pod_set]),
        )
        return scheduling_shape(ClusterState(), WorkloadState(workload=wl, observed_seq=1))

    assert shaped("a") == shaped("b")
    assert shaped("a") != shaped("a", priority=10)
    assert shaped("a") != shaped("a", count=2)
    assert shaped("a") != shaped("a", selector={"instance-type": "spot"})


def test_a_deleted_queues_series_go_with_it() -> None:
    """kubectl delete lq, then cq: Kueue's queue manager clears their metrics (ClearLocalQueueMetrics,
    ClearClusterQueueMetrics), so no series of a deleted queue stays, and one made again counts from zero."""
    run = _preemption_run()
    state = _fold(run.messages)
    lq = {"name": "lq", "namespace": "default", "priority_class": ""}
    cq = {"cluster_queue": "cq", "priority_class": ""}
    before = _samples(state)
    assert _value(before, "kueue_local_queue_admitted_workloads_total", **lq) == 6
    assert _value(before, "kueue_admitted_workloads_total", **cq) == 6

    def fold(event: types.Event) -> None:
        seq = state.last_seq + 1
        fold_message(state, LogMessage(seq=seq, subject="kq.in.obj.x", data=codec.encode(event), headers={}))

    fold(types.ObjectDeleted(kind="LocalQueue", namespace="default", name="lq"))
    after_lq = _samples(state)
    assert not [k for k in after_lq if k[0].startswith("kueue_local_queue_") and ("name", "lq") in k[1]]
    assert _value(after_lq, "kueue_admitted_workloads_total", **cq) == 6  # the ClusterQueue's stay
    fold(types.ObjectDeleted(kind="ClusterQueue", name="cq"))
    after_cq = _samples(state)
    gone = [k for k in after_cq if ("cluster_queue", "cq") in k[1] or ("preempting_cluster_queue", "cq") in k[1]]
    counted = [k for k in gone if k[0].endswith(("_total", "_count", "_sum", "_bucket"))]
    assert counted == []


def test_a_local_queue_outliving_its_cluster_queue_keeps_its_counters_status_and_zero_pending() -> None:
    """Kueue's e2e metrics_test.go "should ensure the default metrics are available", after kubectl delete cq
    (the LocalQueue stays): the LocalQueue's workloads holding quota go, as Kueue's scheduler cache clears them
    with the ClusterQueue (cache.go DeleteClusterQueue, metrics.go ClearLocalQueueCacheMetrics); its pending
    workloads stay at 0, its counters until it is deleted itself, its status is False
    (ClusterQueueDoesNotExist); no series of the ClusterQueue stays."""
    state = _fold(_preemption_run().messages)
    lq = {"name": "lq", "namespace": "default"}
    before = _samples(state)
    assert ("kueue_local_queue_admitted_active_workloads", frozenset({**lq, "replica_role": "standalone"}.items())) in (
        before
    )
    seq = state.last_seq + 1
    deleted = types.ObjectDeleted(kind="ClusterQueue", name="cq")
    fold_message(state, LogMessage(seq=seq, subject="kq.in.obj.x", data=codec.encode(deleted), headers={}))
    after = _samples(state)
    mine = {k[0] for k in after if ("name", "lq") in k[1]}
    assert "kueue_local_queue_reserving_active_workloads" not in mine
    assert "kueue_local_queue_admitted_active_workloads" not in mine
    for status in ("active", "inadmissible"):
        labels = frozenset({**lq, "status": status, "replica_role": "standalone"}.items())
        assert after[("kueue_local_queue_pending_workloads", labels)] == 0.0
    assert _value(after, "kueue_local_queue_admitted_workloads_total", **lq, priority_class="") == 6
    assert _value(after, "kueue_local_queue_status", **lq, active="False") == 1
    assert _value(after, "kueue_local_queue_status", **lq, active="True") == 0
    # a gone ClusterQueue's unadmitted workloads are left out: Kueue clears them with it and reports them again
    # at the next change of one of its LocalQueues' workloads (unadmitted_workloads.go)
    left = [k for k in after if ("cluster_queue", "cq") in k[1] and "unadmitted_workloads" not in k[0]]
    assert left == []


@pytest.mark.parametrize(
    ("scenario", "cluster_queue", "waiting"),
    [
        ("equivalent-no-fit-workloads-do-not-block-fitting-one", "equiv-cq", 10),
        ("namespace-mismatch-workloads-do-not-block-matching-one", "ns-mismatch-cq", 5),
        ("equivalent-preemptors-without-candidates-stay-pending", "preempt-nocandidate-cq", 10),
    ],
)
def test_equivalent_waiting_workloads_are_inadmissible_under_one_hash(
    scenario: str, cluster_queue: str, waiting: int
) -> None:
    """Kueue's inadmissible/equivalence_test.go (ExpectPendingWorkloadsMetric(cq, 0, n) and
    ExpectPendingSchedulingHashesMetric(cq, 0, 1)): identical workloads that cannot be admitted, for want of
    quota, of a namespace the ClusterQueue selects or of a preemption candidate, end up inadmissible, none
    active, and share one scheduling hash."""
    run = run_scenario(load_scenario(SCENARIOS / "queues" / f"{scenario}.yaml"))
    samples = _samples(_fold(run.messages))
    pending = {
        s: _value(samples, "kueue_pending_workloads", cluster_queue=cluster_queue, status=s)
        for s in ("active", "inadmissible")
    }
    assert pending == {"active": 0.0, "inadmissible": float(waiting)}
    hashes = {
        s: _value(samples, "kueue_pending_scheduling_hashes", cluster_queue=cluster_queue, status=s)
        for s in ("active", "inadmissible")
    }
    assert hashes == {"active": 0.0, "inadmissible": 1.0}


def test_a_ready_workload_deactivated_by_hand_observes_pods_ready_to_evicted_time() -> None:
    """Kueue's scheduler/podsready/scheduler_test.go 'Should emit the PodsReadyToEvictedTimeSeconds metric':
    prod-wl (a Job's) is admitted, reports PodsReady, and is deactivated (spec.active false) 10 s later; its
    eviction, reason Deactivated with no underlying cause, is observed once in
    kueue_pods_ready_to_evicted_time_seconds, at 10 s or more."""
    job = _job("prod-wl", cpus=2, second=1)
    # The Workload of a Job: one of no job has no job to stop, and kueue-es releases it at once, unevicted.
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "prod", "uid": "prod-uid", "controller": True}
    job["metadata"]["ownerReferences"] = [owner]
    inactive = {**job, "spec": {**job["spec"], "active": False}}
    doc = {
        "name": "pods-ready-to-evicted",
        "source": "kueue test/integration/singlecluster/scheduler/podsready/scheduler_test.go",
        "podsReady": "manual",
        "objects": [
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "waitForPodsReady": {"timeout": "5m", "blockAdmission": True},
            },
            *_preemption_doc_objects(),
        ],
        "pending": [job],
        "events": [{"podsReady": "default/prod-wl"}, {"wait": "10s"}, {"apply": inactive}],
    }
    run = run_scenario(parse_scenario(yaml.safe_dump(doc, sort_keys=False), path="<pods-ready-to-evicted>"))
    samples = _samples(_fold(run.messages))
    labels = {"cluster_queue": "cq", "reason": "Deactivated", "underlying_cause": ""}
    assert _value(samples, "kueue_pods_ready_to_evicted_time_seconds_count", **labels) == 1
    assert _value(samples, "kueue_pods_ready_to_evicted_time_seconds_sum", **labels) >= 10


def test_time_to_readiness_is_not_observed_again_after_a_recovery() -> None:
    """Kueue #14626, waitforpodsready_test.go "should continue running workload if pod recovers before
    recoveryTimeout": a Job's workload is admitted and ready (PodsReady Started), a pod fails (WaitForRecovery)
    and comes back (Recovered); the four time-to-readiness histograms hold the first readiness alone (count 1).
    Kueue's reconciler observed them on every PodsReady True, the recovery too."""
    job = _job("prod-wl", cpus=2, second=1)
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "prod", "uid": "prod-uid", "controller": True}
    job["metadata"]["ownerReferences"] = [owner]
    doc = {
        "name": "ready-once",
        "source": "kueue test/e2e/sequential/baseline/waitforpodsready_test.go",
        "podsReady": "manual",
        "objects": [
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "waitForPodsReady": {"timeout": "5m", "recoveryTimeout": "5m"},
            },
            *_preemption_doc_objects(),
        ],
        "pending": [job],
        "events": [
            {"podsReady": "default/prod-wl"},
            {"wait": "10s"},
            {"podsReady": {"workload": "default/prod-wl", "ready": False}},
            {"wait": "10s"},
            {"podsReady": {"workload": "default/prod-wl", "ready": True}},
        ],
    }
    run = run_scenario(parse_scenario(yaml.safe_dump(doc, sort_keys=False), path="<ready-once>"))
    events = [codec.decode(m.data) for m in run.messages]
    reasons = [e.reason for e in events if isinstance(e, types.WorkloadPodsReady)]
    assert reasons == ["Started", "WaitForRecovery", "Recovered"]
    samples = _samples(_fold(run.messages))
    counts = {
        name.removesuffix("_count"): value
        for (name, _labels), value in samples.items()
        if name.endswith("ready_wait_time_seconds_count")
    }
    assert counts == {
        "kueue_ready_wait_time_seconds": 1,
        "kueue_admitted_until_ready_wait_time_seconds": 1,
        "kueue_local_queue_ready_wait_time_seconds": 1,
        "kueue_local_queue_admitted_until_ready_wait_time_seconds": 1,
    }


def test_a_deleted_cluster_queues_weighted_share_stays_until_the_process_restarts() -> None:
    """Kueue's e2e metrics_test.go lists kueue_cluster_queue_weighted_share among the series still there after
    kubectl delete cq: Kueue clears it only on a cohort or label change (ClearClusterQueueMetricsOnLabelChange).
    The collector keeps the last share it exported; a new process (a new collector) has none; a cohort change
    of a ClusterQueue still there drops the old series."""
    a, b = cluster_queue("a", cpu=4), cluster_queue("b", cpu=4)
    for cq in (a, b):
        cq["spec"]["cohortName"] = "team"
    wide = _job("wide", cpus=6, second=0)
    wide["metadata"]["uid"] = "uid-wide"
    wide["spec"]["queueName"] = "queue-a"
    ref = types.WorkloadRef(namespace="default", name="wide", uid="uid-wide")
    assignment = types.PodSetAssignment(
        name="main", flavors={"cpu": "default-flavor"}, resource_usage={"cpu": 6000}, count=6
    )
    configuration = models.Configuration(fair_sharing=models.FairSharingConfig(), enable_cluster_queue_resources=True)
    fair = types.ConfigurationObserved(configuration=configuration)
    view = core.DispatchState()
    facts = [*map(convert.kueue_fact, [flavor("default-flavor"), a, b, local_queue("queue-a", "a")]), fair]
    events = [
        *facts,
        convert.kueue_fact(wide),
        types.QuotaReserved(workload=ref, cluster_queue="a", pod_set_assignments=[assignment], at_ms=1),
    ]
    for seq, item in enumerate(events, start=1):
        core.fold(view, item, seq=seq)
    state = view.cluster
    registry = CollectorRegistry()
    registry.register(KueueCollector(lambda: state))

    def shares(reg: CollectorRegistry) -> dict[tuple[str, str], float]:
        return {
            (s.labels["cluster_queue"], s.labels["cohort"]): s.value
            for family in text_string_to_metric_families(generate_latest(reg).decode())
            for s in family.samples
            if s.name == "kueue_cluster_queue_weighted_share"
        }

    assert shares(registry) == {("a", "team"): 250.0, ("b", "team"): 0.0}
    core.fold(view, types.ObjectDeleted(kind="ClusterQueue", name="a"), seq=20)
    assert "a" not in state.cluster_queues
    assert shares(registry) == {("a", "team"): 250.0, ("b", "team"): 0.0}  # a's last share stays
    moved = {**b, "metadata": {**b["metadata"], "resourceVersion": "9"}, "spec": {**b["spec"], "cohortName": "other"}}
    core.fold(view, convert.kueue_fact(moved), seq=21)
    assert shares(registry) == {("a", "team"): 250.0, ("b", "other"): 0.0}  # b's old cohort series dropped
    restarted = CollectorRegistry()
    restarted.register(KueueCollector(lambda: state))
    assert shares(restarted) == {("b", "other"): 0.0}


@pytest.mark.parametrize("explicit_status", [True, False])
def test_a_workload_waiting_for_quota_is_counted_until_it_is_deleted(explicit_status: bool) -> None:
    """observability_test.go 'Should correctly report and prune unadmitted workload metrics' and, with the gate
    UnadmittedWorkloadsExplicitStatus off, 'Should report metrics using fallback logic when status is not
    explicitly initialized': in a StrictFIFO ClusterQueue of 1 CPU, existing-job is admitted and pending-job
    waits, counted NoReservation / WaitingForQuota by its ClusterQueue and its LocalQueue; once it is deleted
    neither series is left."""
    objects = _preemption_doc_objects()
    objects[1]["spec"] = {
        "namespaceSelector": {},
        "queueingStrategy": "StrictFIFO",
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 1}]}],
            }
        ],
    }
    gates = {"UnadmittedWorkloadsObservability": True, "UnadmittedWorkloadsExplicitStatus": explicit_status}
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}
    doc = {
        "name": "unadmitted-metrics",
        "source": "observability_test.go",
        "objects": [config, *objects],
        "pending": [_job("existing-job", cpus=1, second=1), _job("pending-job", cpus=1, second=2)],
        "events": [{"delete": "default/pending-job"}],
    }
    scenario = parse_scenario(yaml.safe_dump(doc))
    run = run_scenario(scenario)
    deleted_at = next(  # the messages before the deletion (run.log also lists a record's carried decisions)
        i for i, e in enumerate(run.events) if isinstance(e, types.ObjectDeleted) and e.kind == "Workload"
    )
    waiting = _fold(run.messages[:deleted_at])
    assert waiting.workloads["default/pending-job"].pending_reason == "WaitingForQuota"
    samples = _samples(waiting)
    cause = {"reason": "NoReservation", "underlying_cause": "WaitingForQuota"}
    assert _value(samples, "kueue_unadmitted_workloads", cluster_queue="cq", **cause) == 1
    lq = {"name": "lq", "namespace": "default", "cluster_queue": "cq", **cause}
    assert _value(samples, "kueue_local_queue_unadmitted_workloads", **lq) == 1
    after = _samples(_fold(run.messages))
    assert not [key for key in after if key[0].endswith("unadmitted_workloads")]


def test_a_blocked_strict_fifo_queue_counts_its_waiting_workloads_active() -> None:
    """scheduler_test.go 'Queueing with StrictFIFO' / 'Should report pending workloads properly when blocked': in a
    StrictFIFO ClusterQueue of 5 CPU, wl1 (2 CPU, priority 100) is admitted and wl2 (5 CPU, priority 10) blocks
    the queue: one active pending workload, none inadmissible, and the ClusterQueue's status.pendingWorkloads 1;
    wl3 (1 CPU, priority 1) waits behind it: 2; once wl1 finishes wl2 is admitted: 1; once all finish: 0."""
    objects = _preemption_doc_objects()
    objects[1]["spec"] = {
        "namespaceSelector": {},
        "queueingStrategy": "StrictFIFO",
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 5}]}],
            }
        ],
    }
    doc = {
        "name": "strict-fifo-pending",
        "source": "scheduler_test.go",
        "objects": objects,
        "pending": [_job("wl1", cpus=2, second=1, priority=100), _job("wl2", cpus=5, second=2, priority=10)],
        "events": [
            {"apply": _job("wl3", cpus=1, second=3, priority=1)},
            {"finish": "default/wl1"},
            {"finish": "default/wl2"},
            {"finish": "default/wl3"},
        ],
    }
    run = run_scenario(parse_scenario(yaml.safe_dump(doc)))
    facts = [  # by sequence: run.log lists a record's carried decisions after it, at its sequence (schema 17)
        seq
        for seq, e in run.log
        if (isinstance(e, types.WorkloadObserved) and e.workload.metadata.name == "wl3")
        or isinstance(e, types.WorkloadFinished)
    ]
    ends = [facts[0], facts[1], facts[2], run.messages[-1].seq + 1]
    view = core.DispatchState()
    got = []
    for start, end in zip([0, *ends], ends, strict=False):
        for seq, event in run.log:
            if start <= seq < end:
                core.fold(view, event, seq=seq)
        samples = _samples(_fold([m for m in run.messages if m.seq < end]))
        got.append(
            (
                _value(samples, "kueue_pending_workloads", cluster_queue="cq", status="active"),
                _value(samples, "kueue_pending_workloads", cluster_queue="cq", status="inadmissible"),
                dispatcher_status.cluster_queue_status(view.cluster, "cq")["pendingWorkloads"],
            )
        )
    assert got == [(1, 0, 1), (2, 0, 2), (1, 0, 1), (0, 0, 0)]


def test_resource_pending_leaves_out_the_reclaimable_pods_of_a_pending_workload() -> None:
    """Kueue's clusterqueue_controller_test.go "Should update pending resource metric when a pending workload's
    effective resources change": 3 pods x 2 CPU pending count 6 CPU; one pod reported reclaimable, the workload
    asks for 4, and kueue_cluster_queue_resource_pending follows (pending_workloads.go sums Info.TotalRequests,
    the counts after reclaim). Before, the metric kept the pod sets' full counts."""
    state = ClusterState()
    manifest = job("sample", queue="user-queue", parallelism=3, cpu="2")
    manifest["metadata"] |= {"uid": "uid-sample", "creationTimestamp": "2026-01-01T00:00:00Z"}
    observed = jobs.job_facts(manifest)
    assert isinstance(observed, types.WorkloadObserved)
    facts: list[types.Event] = [
        convert.kueue_fact(cluster_queue("cq", flavor_name="missing", cpu=9)),  # no such flavor: it stays pending
        convert.kueue_fact(local_queue("user-queue", "cq")),
        observed,
    ]
    for seq, fact in enumerate(facts, start=1):
        apply(state, fact, seq=seq)
    labels = {"cluster_queue": "cq", "resource": "cpu"}
    assert _value(_samples(state), "kueue_cluster_queue_resource_pending", **labels) == 6.0
    [pod_set] = observed.workload.spec.pod_sets
    ref = types.WorkloadRef(namespace="default", name=observed.workload.metadata.name, uid="uid-sample")
    reclaimed = types.WorkloadReclaimablePods(
        workload=ref, reclaimable_pods=[types.ReclaimablePod(name=pod_set.name, count=1)], at_ms=1
    )
    apply(state, reclaimed, seq=len(facts) + 1)
    assert _value(_samples(state), "kueue_cluster_queue_resource_pending", **labels) == 4.0


def _configured(state: ClusterState, text: str) -> None:
    """Fold the ConfigurationObserved of the manager Configuration ``text`` (as the watcher emits it)."""
    config = manager_config.parse("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n" + text)
    observed = types.ConfigurationObserved(configuration=config.configuration)
    seq = state.last_seq + 1
    fold_message(state, LogMessage(seq=seq, subject="kq.in.obj.x", data=codec.encode(observed), headers={}))


def _local_queue_families(state: ClusterState) -> set[str]:
    return {k[0] for k in _samples(state) if k[0].startswith("kueue_local_queue_") and ("name", "lq") in k[1]}


def test_local_queue_metrics_only_of_the_queues_local_queue_metrics_selects() -> None:
    """Kueue's e2e sequential/baseline/metrics_test.go: with ``metrics.localQueueMetrics.localQueueSelector``
    a LocalQueue without the selected label has no ``kueue_local_queue_*`` series, one with it has them
    (pkg/metrics/localqueue.go ShouldExposeLocalQueueMetrics), also once its labels change from excluded to
    included (Kueue PR #12894: the series were not made again); ``enable: false`` or the gate LocalQueueMetrics
    off exports none. The ClusterQueue's series stay."""
    state = _fold(_preemption_run().messages)
    every = _local_queue_families(state)
    assert "kueue_local_queue_admitted_workloads_total" in every
    selected = "metrics:\n  localQueueMetrics:\n    enable: true\n    localQueueSelector:\n      matchLabels:\n        metrics-test: 'true'\n"
    _configured(state, selected)
    assert _local_queue_families(state) == set()
    assert _value(_samples(state), "kueue_admitted_workloads_total", cluster_queue="cq", priority_class="") == 6
    lq = state.local_queues[("default", "lq")]
    labelled = msgspec.structs.replace(lq.metadata, labels={**lq.metadata.labels, "metrics-test": "true"})
    state.local_queues[("default", "lq")] = msgspec.structs.replace(lq, metadata=labelled)
    assert _local_queue_families(state) == every
    _configured(state, "metrics:\n  localQueueMetrics:\n    enable: false\n")
    assert _local_queue_families(state) == set()
    only_selector = (
        "metrics:\n  localQueueMetrics:\n    localQueueSelector:\n      matchLabels:\n        metrics-test: 'true'\n"
    )
    _configured(state, only_selector)  # a section without enable: off (Kueue's defaults.go fills in no enable)
    assert _local_queue_families(state) == set()
    _configured(state, "featureGates:\n  LocalQueueMetrics: false\n")
    assert _local_queue_families(state) == set()
    _configured(state, "featureGates:\n  LocalQueueMetrics: true\n")  # Kueue's defaults: every LocalQueue
    assert _local_queue_families(state) == every


def test_quota_gauges_in_cores_and_bytes_unbounded_limits_infinite_and_an_exabyte_exact() -> None:
    """Kueue PRs #10747 (cohort subtree gauges in CPU, not milliCPU), #12143 (an unset lendingLimit reports +Inf)
    and #13585 (a quota of 1E memory reports 1e18, not an int64 overflow): ClusterQueue cq of cohort all with
    30 CPU and 1E memory, no borrowing or lending limit; a workload of 2500m CPU and 1Gi admitted."""
    log = Log()
    log.apply_manifests(
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "cohortName": "all",
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "default",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 30},
                                    {"name": "memory", "nominalQuota": "1E"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "default"},
            "spec": {"clusterQueue": "cq"},
        },
    )
    log.apply_manifests(_workload_manifest("w", cpu="2500m", memory="1Gi"))
    log.settle(1000)
    samples = _samples(log.state)
    cpu = {"cohort": "all", "cluster_queue": "cq", "flavor": "default", "resource": "cpu"}
    memory = {**cpu, "resource": "memory"}
    assert _value(samples, "kueue_cluster_queue_nominal_quota", **cpu) == 30.0
    assert _value(samples, "kueue_cluster_queue_nominal_quota", **memory) == 1e18
    for labels in (cpu, memory):
        assert _value(samples, "kueue_cluster_queue_lending_limit", **labels) == math.inf
        assert _value(samples, "kueue_cluster_queue_borrowing_limit", **labels) == math.inf
    assert _value(samples, "kueue_cluster_queue_resource_reservation", **cpu) == 2.5
    subtree = {"cohort": "all", "flavor": "default"}
    assert _value(samples, "kueue_cohort_subtree_quota", resource="cpu", **subtree) == 30.0
    assert _value(samples, "kueue_cohort_subtree_quota", resource="memory", **subtree) == 1e18
    assert _value(samples, "kueue_cohort_subtree_resource_reservations", resource="cpu", **subtree) == 2.5
    assert _value(samples, "kueue_cohort_subtree_resource_reservations", resource="memory", **subtree) == 2.0**30


def _workload_manifest(name: str, **requests: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T00:00:01Z",
        },
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}},
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("scenario", "workload", "reason"),
    [
        ("config/localqueue-hold-and-drain-evicts.yaml", "default/a-running", "LocalQueueStopped"),
        ("tas/node-not-ready-no-replacement-fail-fast-evicts.yaml", "default/foo", "NodeFailures"),
    ],
)
def test_every_eviction_kind_counts_once_and_in_scheduling_stats(scenario: str, workload: str, reason: str) -> None:
    """Kueue #6332 and #6297 (pkg/workload/workload.go EvictWorkload): every eviction, not only preemption,
    PodsReady timeout and deactivation, counts in ``kueue_evicted_workloads_once_total`` under its own reason
    and in the Workload's ``status.schedulingStats.evictions``. Before them a LocalQueue's HoldAndDrain and a
    TAS node failure (FailFast, no replacement) evicted without the once metric, and the node-failure count
    was taken after the status write, so never written."""
    run = run_scenario(load_scenario(SCENARIOS / scenario))
    samples = _samples(_fold(run.messages))
    evictions = [e for _, e in run.log if isinstance(e, types.EvictionRequested) and e.workload.key == workload]
    assert [e.reason for e in evictions] == [reason]
    series = {
        name: dict(key)
        for name, key in samples
        if name == "kueue_evicted_workloads_once_total" and dict(key).get("reason") == reason
    }
    assert series, f"no kueue_evicted_workloads_once_total series of reason {reason}"
    cq = next(iter(series.values()))["cluster_queue"]
    labels = {"cluster_queue": cq, "reason": reason, "underlying_cause": "", "priority_class": ""}
    assert _value(samples, "kueue_evicted_workloads_once_total", **labels) == 1
    assert _value(samples, "kueue_evicted_workloads_total", **labels) == 1
    view = core.DispatchState()
    for seq, event in run.log:  # a record's carried decisions after it, at its sequence (schema 17)
        core.fold(view, event, seq=seq)
    written = dispatcher_status.workload_status(view.records[workload], generation=1)
    assert written["schedulingStats"]["evictions"] == [{"reason": reason, "underlyingCause": "", "count": 1}]


def _stopped_or_deactivated_run(how: str) -> CoreRun:
    """wl (a Job's, 2 CPU, created at 00:00:01) admitted into cq at once and ready; 5 s later deactivated by hand
    (``how`` "deactivated") or drained by cq's ``stopPolicy: HoldAndDrain`` ("ClusterQueue") or lq's
    ("LocalQueue"); 100 s later active again, or the queue's stop policy None again."""
    wl = _job("wl", cpus=2, second=1)
    wl["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "j-uid", "controller": True}
    ]
    objects = _preemption_doc_objects()
    lq = objects[2]
    stopped: dict[str, Any]
    resumed: dict[str, Any]
    if how == "deactivated":
        stopped, resumed = {**wl, "spec": {**wl["spec"], "active": False}}, wl
    elif how == "ClusterQueue":
        stopped, resumed = _cluster_queue("HoldAndDrain"), _cluster_queue(None)
        objects[1] = resumed
    else:
        stopped = {**lq, "spec": {**lq["spec"], "stopPolicy": "HoldAndDrain"}}
        resumed = lq
    doc = {
        "name": f"wait-after-{how}",
        "source": "a user's trial: admission wait of 123 s after a reactivation, Kueue ~0",
        "objects": objects,
        "pending": [wl],
        "events": [{"wait": "5s"}, {"apply": stopped}, {"wait": "100s"}, {"apply": resumed}],
    }
    return run_scenario(parse_scenario(yaml.safe_dump(doc, sort_keys=False), path=f"<wait-after-{how}>"))


@pytest.mark.parametrize("how", ["deactivated", "ClusterQueue", "LocalQueue"])
def test_the_wait_after_a_reactivation_or_a_restart_counts_from_it(how: str) -> None:
    """Kueue's QueuedWaitTime counts from the Requeued condition's lastTransitionTime, which its workload
    controller sets True (``Reactivated``, ``ClusterQueueRestarted``, ``LocalQueueRestarted``) when it sees the
    workload active again or its queue running again. Here the admitter's first decision about the workload
    after that stands for the moment (the time the dispatcher writes on the condition), so wl, admitted again at
    once, waited 0 s the second time in every wait family of its ClusterQueue and LocalQueue (the first time: 60 s
    since its creation). Before, the wait counted from the release, so the 100 s stopped were in it."""
    run = _stopped_or_deactivated_run(how)
    admitted = [e for _, e in run.log if isinstance(e, types.WorkloadAdmitted) and e.workload.name == "wl"]
    assert len(admitted) == 2
    first = (admitted[0].at_ms - 1_767_225_601_000) / 1000  # created at 2026-01-01T00:00:01Z
    samples = _samples(_fold(run.messages))
    cq = {"cluster_queue": "cq", "priority_class": ""}
    lq = {"name": "lq", "namespace": "default", "priority_class": ""}
    for family, labels in [
        ("kueue_admission_wait_time_seconds", cq),
        ("kueue_quota_reserved_wait_time_seconds", cq),
        ("kueue_ready_wait_time_seconds", cq),
        ("kueue_local_queue_admission_wait_time_seconds", lq),
        ("kueue_local_queue_quota_reserved_wait_time_seconds", lq),
        ("kueue_local_queue_ready_wait_time_seconds", lq),
    ]:
        assert _value(samples, f"{family}_count", **labels) == 2, family
        assert _value(samples, f"{family}_sum", **labels) == first, family
    view = core.DispatchState()
    for seq, event in run.log:
        core.fold(view, event, seq=seq)
    requeued = view.records["default/wl"].conditions["Requeued"]
    assert (requeued.status, requeued.since_ms) == (True, admitted[1].at_ms)  # the condition says the same


def test_a_fold_of_a_reactivation_from_a_checkpoint_keeps_the_wait_it_counts_from() -> None:
    """The workload waiting for its Requeued=True is part of the folded metrics: a fold resumed from a checkpoint
    taken while wl is deactivated ends with the same wait as one from the start."""
    messages = _stopped_or_deactivated_run("deactivated").messages
    whole = _fold(messages)
    part, cut = ClusterState(), 0
    while not part.metrics.requeue_due:
        fold_message(part, messages[cut])
        cut += 1
    assert part.metrics.requeue_due == {"default/wl": "Deactivated"}
    resumed = _fold(messages[cut:], checkpoints.loads(checkpoints.dumps(part)))
    assert resumed.metrics == whole.metrics
    assert generate_latest_of(resumed) == generate_latest_of(whole)


def _at_ms(event: Any, ms: int) -> Any:
    return msgspec.structs.replace(event, at_ms=ms)


def test_execution_time_is_whole_seconds_of_the_admitted_and_finished_times() -> None:
    """Kueue's TotalExecutionTime: the Finished condition's time less the Admitted condition's, both in whole
    seconds as the object holds them, plus accumulatedPastExecutionTimeSeconds (each earlier admission's seconds
    since its Admitted time, added when it turns False: admissionchecks.go). A user's trial: a job that ran 5 s,
    admitted at the admitter's x.409 s and finished at the job's whole second, read 4.591 s (Kueue: 5).
    Here admitted at 10.409 s, preempted and released at 15.2 s (5 s: Kueue's accumulated seconds, before 4),
    admitted again at 20.7 s and finished at 26 s (6 s more): 11 s (before: 10.091)."""
    log, ref = status_log.queues_log()
    t0 = status_log.T0
    log.add(*(_at_ms(e, t0 + 10_409) for e in status_log.admitted(ref, 0)))
    log.add(_at_ms(status_log.preempted(ref, 0), t0 + 14_000))
    log.add(_at_ms(status_log.released(ref, "Preempted", 0), t0 + 15_200))
    assert log.status(ref)["accumulatedPastExecutionTimeSeconds"] == 5
    log.add(*(_at_ms(e, t0 + 20_700) for e in status_log.admitted(ref, 0)))
    finished = types.WorkloadFinished(workload=ref, message="Job finished successfully", at_ms=t0 + 26_000)
    log.add(finished, status_log.released(ref, "Finished", 27))
    samples = _samples(log.view.cluster)
    cq = {"cluster_queue": "cluster-queue", "priority_class": ""}
    lq = {"name": "user-queue", "namespace": "default", "priority_class": ""}
    assert _value(samples, "kueue_execution_time_seconds_count", **cq) == 1
    assert _value(samples, "kueue_execution_time_seconds_sum", **cq) == 11
    assert _value(samples, "kueue_local_queue_execution_time_seconds_sum", **lq) == 11

    log, ref = status_log.queues_log()
    log.add(*(_at_ms(e, t0 + 10_409) for e in status_log.admitted(ref, 0)))
    log.add(types.WorkloadFinished(workload=ref, message="Job finished successfully", at_ms=t0 + 15_000))
    assert _value(_samples(log.view.cluster), "kueue_execution_time_seconds_sum", **cq) == 5


def test_a_deactivation_past_the_maximum_execution_time_forgets_the_earlier_admissions() -> None:
    """Kueue's reconcileMaxExecutionTime clears accumulatedPastExecutionTimeSeconds when it deactivates the
    workload; the admission being evicted then adds its own seconds once Admitted turns False: 5 s, then 11 s
    (20.7 s to 31.5 s), not 16 s, on the Workload and in what a later finish would count."""
    log, ref = status_log.queues_log()
    t0 = status_log.T0
    log.add(*(_at_ms(e, t0 + 10_409) for e in status_log.admitted(ref, 0)))
    log.add(_at_ms(status_log.preempted(ref, 0), t0 + 14_000))
    log.add(_at_ms(status_log.released(ref, "Preempted", 0), t0 + 15_200))
    log.add(*(_at_ms(e, t0 + 20_700) for e in status_log.admitted(ref, 0)))
    reason = "MaximumExecutionTimeExceeded"
    message = "exceeding the maximum execution time"
    log.add(types.WorkloadDeactivated(workload=ref, reason=reason, message=message, at_ms=t0 + 30_000))
    assert "accumulatedPastExecutionTimeSeconds" not in log.status(ref)
    evicted = types.EvictionRequested(
        workload=ref,
        cluster_queue="cluster-queue",
        reason=f"DeactivatedDueTo{reason}",
        message=message,
        at_ms=t0 + 30_000,
    )
    log.add(evicted, _at_ms(status_log.released(ref, f"DeactivatedDueTo{reason}", 0), t0 + 31_500))
    assert log.status(ref)["accumulatedPastExecutionTimeSeconds"] == 11
    assert log.view.cluster.metrics.executed_s == {ref.key: 11}


def test_the_cluster_queue_resource_gauges_only_with_enable_cluster_queue_resources() -> None:
    """Kueue reports a ClusterQueue's quotas, limits, reservation, usage, pending requests and weighted share only
    with the Configuration's ``metrics.enableClusterQueueResources`` (cmd/kueue/main.go WithResourceMetrics, off by
    default): without it those families carry no series, the others are as they were (the Cohort and LocalQueue
    resource gauges too); the admitter follows the Configuration on the log, as the watcher publishes it from its
    file. Before, they were always exported. The internal view (:func:`gauges`) keeps them all."""
    state = _fold(_preemption_run().messages)
    fair = "fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]}\n"
    _configured(state, fair)
    gated = set(CLUSTER_QUEUE_RESOURCE_FAMILIES)
    off = _samples(state, resources=False)
    assert not [name for name, _ in off if name in gated]
    assert _value(off, "kueue_cluster_queue_status", cluster_queue="cq", status="active") == 1
    assert any(name == "kueue_local_queue_resource_reservation" for name, _ in off)
    assert all(gauges(state)[name] for name in gated)
    _configured(state, fair + "metrics:\n  enableClusterQueueResources: true\n")
    assert state.configuration.enable_cluster_queue_resources
    on = _samples(state, resources=False)
    assert {name for name, _ in on if name in gated} == gated
    assert {key: value for key, value in off.items() if key in on} == {
        key: value for key, value in on.items() if key in off
    }
