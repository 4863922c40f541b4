"""Admission fair sharing arithmetic (SEMANTICS §8; Kueue admission_fair_sharing.go)."""

from __future__ import annotations

import math
from pathlib import Path

import msgspec
import pytest

from kueue_es.events import manifests, models, quantities, types
from kueue_es.projections import afs
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios import specs
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario, parse_scenario
from kueue_es.services import kueue_metrics
from kueue_es.services.admitter import core as admitter
from kueue_es.services.dispatcher import status as dispatcher_status
from kueue_es.services.preemptor import core as preemptor
from tests.scenario_states import before_first_record, with_releases


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("168h", 604800.0), ("5m", 300.0), ("1h30m", 5400.0), ("0s", 0.0), ("0", 0.0), ("1.5s", 1.5), ("250ms", 0.25)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert afs.go_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "5 m", "m5", "1d", "-5m"])
def test_bad_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="not a Go duration"):
        afs.go_duration_seconds(text)


def test_alpha_is_one_half_after_one_half_life() -> None:
    assert afs.alpha(3600, 3600) == pytest.approx(0.5)
    assert afs.alpha(10, 0) == 0.0


def test_decay_composes_so_sampling_times_do_not_matter() -> None:
    """Advancing in two steps equals advancing once: the ledger can be updated only when
    the admitted usage changes, with the same values Kueue's periodic sampling gives."""
    once = afs.Ledger(consumed={"cpu": 8.0}, admitted={"cpu": 2000}, last_ms=0)
    twice = afs.Ledger(consumed={"cpu": 8.0}, admitted={"cpu": 2000}, last_ms=0)
    once.advance(7_200_000, 3600)
    twice.advance(1_800_000, 3600)
    twice.advance(7_200_000, 3600)
    assert once.consumed["cpu"] == pytest.approx(twice.consumed["cpu"])
    assert once.consumed["cpu"] == pytest.approx(2 + 6 * 0.25)  # two half-lives towards 2 cores


def test_zero_half_life_keeps_no_history() -> None:
    ledger = afs.Ledger(consumed={"cpu": 8.0}, admitted={"cpu": 1000}, last_ms=0)
    assert ledger.decayed(1000, 0) == {}


def test_memory_counts_in_bytes_and_cpu_in_cores() -> None:
    assert afs.as_float("cpu", 1500) == 1.5
    assert afs.as_float("memory", 1024) == 1024.0
    assert math.isclose(afs.alpha(300, 604800), 1 - 0.5 ** (300 / 604800))


# Entry penalties pending between a workload's reservation and its admission (Kueue's penalty records,
# pkg/cache/queue/afs/usage_ledger.go; fair_sharing_test.go 'Using AdmissionFairSharing with AdmissionChecks').

_CHECKED = Path(__file__).parents[1] / "scenarios" / "afs" / "entry-penalty-pending-while-checks-wait.yaml"
_LQ_A = ("default", "lq-a")
_ORDERED = Path(__file__).parents[1] / "scenarios" / "afs" / "pending-penalties-order-preemption-candidates.yaml"


def _run_a1(*events: specs.ScenarioEvent) -> ClusterState:
    """The checked ClusterQueue with a-1 alone (4 CPU, lq-a): it reserves and waits for check1; then ``events``."""
    scenario = load_scenario(_CHECKED)
    scenario = msgspec.structs.replace(scenario, pending=scenario.pending[:1], events=events, expect=specs.Expect())
    return run_scenario(scenario).state


def test_reservation_waiting_for_checks_holds_a_pending_penalty() -> None:
    """Pushed when the workload is assumed: alpha(1 s sampling, 1 s half-life) = 0.5 of its 4 CPU; it counts in
    the LocalQueue's usage at once, and does not decay while it waits."""
    state = _run_a1()
    ledger = state.afs_ledgers[_LQ_A]
    assert ledger.pending == {"default/a-1": {"cpu": pytest.approx(2.0)}}
    usage = afs.usage_value(ledger, now_ms=ledger.last_ms + 60_000, config=state.configuration, lq=None, pending=True)
    assert usage == pytest.approx(2.0)
    assert afs.usage_value(ledger, now_ms=ledger.last_ms, config=state.configuration, lq=None) == 0.0


def test_admission_settles_the_pending_penalty() -> None:
    """'should subtract the entry penalty when the workload is admitted via an AdmissionCheck'."""
    state = _run_a1(specs.CheckEvent(workload="default/a-1", check="check1", state="Ready"))
    ledger = state.afs_ledgers[_LQ_A]
    assert state.workloads["default/a-1"].admitted
    assert ledger.pending == {}
    assert ledger.consumed["cpu"] >= 2.0  # settled into the consumed history


def test_deletion_before_admission_drops_the_pending_penalty() -> None:
    """'should drop the entry penalty when the workload is deleted while waiting for the admission check'."""
    state = _run_a1(specs.DeleteEvent(kind="Workload", namespace="default", name="a-1"))
    ledger = state.afs_ledgers[_LQ_A]
    assert ledger.pending == {}
    assert afs.usage_value(ledger, now_ms=ledger.last_ms, config=state.configuration, lq=None, pending=True) == 0.0


def test_reserving_again_after_eviction_does_not_stack_penalties() -> None:
    """'should not stack entry penalties when an evicted workload reserves quota again': the Retry evicts a-1,
    which keeps its record (still active on lq-a) and replaces it when it reserves quota again."""
    first = _run_a1().afs_ledgers[_LQ_A].pending
    state = _run_a1(specs.CheckEvent(workload="default/a-1", check="check1", state="Retry"))
    wl = state.workloads["default/a-1"]
    assert wl.reservation is not None and not wl.admitted  # reserved again, waiting for check1
    assert state.afs_ledgers[_LQ_A].pending == first


def test_admitter_32_counts_the_pending_penalty_and_31_does_not() -> None:
    """The second cycle of the checked scenario: a-1 holds quota waiting for check1. Logic 32 orders lq-b first
    (lq-a's pending penalty), 31 takes the older a-2 (lq-a's usage 0); both replay from the same state."""
    run = run_scenario(load_scenario(_CHECKED))
    records = [i for i, (_, e) in enumerate(run.log) if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE]
    state = ClusterState()
    for seq, event in run.log[: records[1]]:
        apply(state, event, seq=seq)
    record = run.log[records[1]][1]
    assert isinstance(record, types.DecisionRecord)
    assert state.workloads["default/a-1"].reservation is not None
    reserved = admitter.decide(state, now_ms=record.now_ms, partition=record.partition)
    assert [o.workload.key for o in reserved if isinstance(o, types.QuotaReserved)] == ["default/b-1"]
    earlier = admitter.decide_as(31)(state, now_ms=record.now_ms, partition=record.partition)
    assert [o.workload.key for o in earlier if isinstance(o, types.QuotaReserved)] == ["default/a-2"]
    assert admitter.LOGIC_VERSION >= 32 and 31 in admitter.EARLIER_LOGIC_VERSIONS


def test_preemptor_15_orders_candidates_with_pending_penalties_and_14_without() -> None:
    """The open nomination of c-1 (lq-c) reclaiming from cq1, whose workloads all wait for check1: logic 15 evicts
    lq-a's a-2 (lq-a's pending penalties outweigh lq-b's), 14 the lower-priority b-1 (every usage 0)."""
    state, now_ms, partition = before_first_record(_ORDERED, preemptor.ROLE)

    def evicted(outputs: list[types.Decision]) -> list[str]:
        return [o.workload.key for o in outputs if isinstance(o, types.EvictionRequested)]

    assert evicted(preemptor.decide(state, now_ms=now_ms, partition=partition)) == ["default/a-2"]
    assert evicted(preemptor.decide_as(14)(state, now_ms=now_ms, partition=partition)) == ["default/b-1"]
    assert preemptor.LOGIC_VERSION >= 15 and 14 in preemptor.EARLIER_LOGIC_VERSIONS


def test_an_ignored_undeclared_resource_is_not_in_the_entry_penalty() -> None:
    """quota_check_strategy_test.go 'should ignore undeclared resources and not use them to calculate entry
    penalty': with IgnoreUndeclared, the 100 example.com/gpu test-cq does not cover neither hold quota nor
    count in the LocalQueue's admission-fair-sharing usage; its 2 CPU do."""
    path = Path(__file__).parents[1] / "scenarios" / "afs" / "undeclared-resource-left-out-of-entry-penalty.yaml"
    state = run_scenario(load_scenario(path)).state
    wl = state.workloads["default/undeclared-penalty-wl"]
    assert wl.admitted and wl.reservation is not None
    assert {r for ps in wl.reservation.pod_set_assignments for r in ps.resource_usage} == {"cpu"}
    ledger = state.afs_ledgers[("default", "test-lq")]
    assert set(ledger.consumed) == {"cpu"} and set(ledger.admitted) == {"cpu"}
    assert ledger.pending == {}


# LocalQueue status.fairSharing (Kueue localqueue_controller.go reconcileConsumedUsage; fair_sharing_test.go
# 'should update consumed resources and subtract entry penalties on workload admission', 'should maintain
# non-zero CPU ConsumedResources across sampling intervals', dra_fair_sharing_test.go 'LocalQueue status
# ConsumedResources includes DRA logical resources' for the shape).


def test_local_queue_fair_sharing_status_shows_the_ledger_the_admitter_folded() -> None:
    """a-1 (4 CPU) admitted through check1: the status holds lq-a's consumed usage as folded at its admission
    (the settled entry penalty, alpha(1 s, 1 s) x 4 = 2 cores), stamped with that time; weightedShare 0."""
    state = _run_a1(specs.CheckEvent(workload="default/a-1", check="check1", state="Ready"))
    ledger = state.afs_ledgers[_LQ_A]
    fair = dispatcher_status.local_queue_status(state, "default", "lq-a")["fairSharing"]
    assert fair == {
        "weightedShare": 0,
        "admissionFairSharingStatus": {
            "consumedResources": {"cpu": "2"},
            "lastUpdate": manifests.format_time_ms(ledger.last_ms),
        },
    }


def test_local_queue_fair_sharing_status_leaves_pending_penalties_out() -> None:
    """a-1 waits for check1: its entry penalty is pending (it orders the queues) but Kueue's status shows only
    the consumed history, empty here; lq-b, with no ledger, is stamped at the first write (``now_ms``)."""
    state = _run_a1()
    assert state.afs_ledgers[_LQ_A].pending
    fair = dispatcher_status.local_queue_status(state, "default", "lq-a", now_ms=0)["fairSharing"]
    assert fair["admissionFairSharingStatus"]["consumedResources"] == {}
    lq_b = dispatcher_status.local_queue_status(state, "default", "lq-b", now_ms=1_767_225_600_000)["fairSharing"]
    assert lq_b == {
        "weightedShare": 0,
        "admissionFairSharingStatus": {"consumedResources": {}, "lastUpdate": "2026-01-01T00:00:00Z"},
    }
    kept = {"weightedShare": 0, "admissionFairSharingStatus": {"consumedResources": {}, "lastUpdate": "X"}}
    again = dispatcher_status.local_queue_status(state, "default", "lq-b", previous_fair_sharing=kept, now_ms=5)
    assert again["fairSharing"] == kept  # the first stamp stays


def test_local_queue_fair_sharing_status_is_kept_while_the_local_queue_is_stopped() -> None:
    """Kueue's Reconcile returns before its AFS update for a stopped LocalQueue: the field stays as stored."""
    state = _run_a1(specs.CheckEvent(workload="default/a-1", check="check1", state="Ready"))
    lq = state.local_queues[_LQ_A]
    state.local_queues[_LQ_A] = msgspec.structs.replace(lq, spec=msgspec.structs.replace(lq.spec, stop_policy="Hold"))
    assert "fairSharing" not in dispatcher_status.local_queue_status(state, "default", "lq-a")
    kept = {"weightedShare": 0, "admissionFairSharingStatus": {"consumedResources": {"cpu": "1"}, "lastUpdate": "X"}}
    stopped = dispatcher_status.local_queue_status(state, "default", "lq-a", previous_fair_sharing=kept)
    assert stopped["fairSharing"] == kept


def test_no_local_queue_fair_sharing_status_without_admission_fair_sharing() -> None:
    state = _run_a1(specs.CheckEvent(workload="default/a-1", check="check1", state="Ready"))
    state.configuration = msgspec.structs.replace(state.configuration, admission_fair_sharing=None)
    assert "fairSharing" not in dispatcher_status.local_queue_status(state, "default", "lq-a")


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (0.5, "500m"),
        (2.0, "2"),
        (1.5, "1500m"),
        (0.0, "0"),
        (1e-10, "0"),  # below nano units: rounded down, as MulByFloat
        (0.6931471805599453, "693147180n"),
        (2147483648.0, "2147483648"),  # memory is DecimalSI too, not 2Gi
        (1073741824.25, "1073741824250m"),
        (3000.0, "3k"),
    ],
)
def test_consumed_quantities_are_written_as_kueues_mul_by_float(value: float, written: str) -> None:
    assert dispatcher_status.consumed_quantity(value) == written


def test_admission_fair_sharing_usage_metric_counts_pending_penalties() -> None:
    """Kueue's reportAfsUsage adds the pending entry penalties: a-1 waiting for check1 makes lq-a's usage 2."""
    state = _run_a1()
    gauges = kueue_metrics.gauges(state)["kueue_local_queue_admission_fair_sharing_usage"]
    assert gauges[("lq-a", "default", "cq-with-check")] == pytest.approx(2.0)
    assert gauges[("lq-b", "default", "cq-with-check")] == 0.0


_TWO_ON_LQ_A = """
name: afs-status-two-admissions-on-lq-a
source: "kueue fair_sharing_test.go 'Using AdmissionFairSharing at ClusterQueue level' / 'should update consumed resources and subtract entry penalties on workload admission'"
description: "cq1 (8 CPU, UsageBasedAdmissionFairSharing, half-life 1 s, sampled every 1 s); two 4 CPU workloads on lq-a."
objects:
  - {apiVersion: config.kueue.x-k8s.io/v1beta2, kind: Configuration, admissionFairSharing: {usageHalfLifeTime: 1s, usageSamplingInterval: 1s}}
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: default}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {name: cq1}
    spec:
      namespaceSelector: {}
      admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
      resourceGroups: [{coveredResources: [cpu], flavors: [{name: default, resources: [{name: cpu, nominalQuota: "8"}]}]}]
  - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lq-a, namespace: default}, spec: {clusterQueue: cq1, fairSharing: {weight: "1"}}}
pending:
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: Workload
    metadata: {name: a-1, namespace: default, uid: a-1, creationTimestamp: "2026-01-01T00:00:00Z"}
    spec: {queueName: lq-a, priority: 0, podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "4"}}}]}}}]}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: Workload
    metadata: {name: a-2, namespace: default, uid: a-2, creationTimestamp: "2026-01-01T00:00:01Z"}
    spec: {queueName: lq-a, priority: 0, podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "4"}}}]}}}]}
expect:
  reserved: [default/a-1, default/a-2]
"""


def test_consumed_resources_grow_with_each_admission_and_no_penalty_stays_pending() -> None:
    """'should update consumed resources and subtract entry penalties on workload admission': lq-a's status
    shows a non-zero cpu after its first admission, above 3900m after its second, no penalty left pending."""
    run = run_scenario(parse_scenario(_TWO_ON_LQ_A))
    state = ClusterState()
    seen: list[int] = []
    for seq, event in run.log:
        apply(state, event, seq=seq)
        if sum(wl.admitted for wl in state.workloads.values()) > len(seen):
            fair = dispatcher_status.local_queue_status(state, "default", "lq-a")["fairSharing"]
            consumed = fair["admissionFairSharingStatus"]["consumedResources"]
            seen.append(quantities.to_amount("cpu", consumed["cpu"]))  # millicores
            assert state.afs_ledgers[("default", "lq-a")].pending == {}
    assert len(seen) == 2
    assert seen[0] > 0 and seen[1] > 3_900


# A LocalQueue deleted and created again starts without history (Kueue PR #12891: initializeAfsIfNeeded seeds a
# LocalQueue from its persisted status only, empty for a new one; Delete drops the ledger entry with its penalty
# records). Admitter logic 48 and preemptor logic 20; 47 and 19 kept the history (replay).

_RECREATED = Path(__file__).parents[1] / "scenarios" / "afs" / "localqueue-recreated-starts-without-history.yaml"


def test_a_recreated_local_queue_carries_its_history_out_of_its_usage() -> None:
    """The Ledger alone: 2 CPU consumed at t=0 (half-life 1 s), created again at t=1 s: ``fresh`` is 0 then and
    stays what the admitted usage adds; a pending penalty is dropped, and settling it adds nothing fresh."""
    ledger = afs.Ledger(consumed={"cpu": 2.0}, admitted={"cpu": 0}, last_ms=0, pending={"default/w": {"cpu": 0.5}})
    ledger.recreated(1_000, 1.0)
    assert ledger.carried == {"cpu": pytest.approx(1.0)} and ledger.carried_ms == 1_000
    assert ledger.dropped == {"default/w"}
    assert ledger.decayed(1_000, 1.0) == {"cpu": pytest.approx(1.0)}
    assert ledger.fresh(1_000, 1.0) == {"cpu": pytest.approx(0.0)}
    assert ledger.fresh(3_000, 1.0) == {"cpu": pytest.approx(0.0)}
    config = models.Configuration(
        admission_fair_sharing=models.AdmissionFairSharingConfig(
            usage_half_life_time="1s", usage_sampling_interval="1s"
        )
    )
    assert afs.usage_value(ledger, now_ms=1_000, config=config, lq=None, pending=True) == pytest.approx(0.0)
    ledger.advance(2_000, 1.0)  # the dropped workload is admitted at t=2 s (its own 2 CPU from then on)
    ledger.consumed["cpu"] += 0.5
    ledger.carry({"cpu": 0.5}, 2_000, 1.0)
    ledger.pending.clear()
    ledger.dropped.clear()
    ledger.admitted["cpu"] = 2000
    assert ledger.fresh(2_000, 1.0) == {"cpu": pytest.approx(0.0)}
    assert ledger.fresh(3_000, 1.0) == {"cpu": pytest.approx(1.0)}  # towards the 2 CPU admitted, one half-life
    kept = afs.with_history_kept({("default", "lq-a"): ledger})
    assert kept[("default", "lq-a")].fresh(3_000, 1.0) == ledger.decayed(3_000, 1.0)
    assert afs.with_history_kept({("default", "lq-b"): afs.Ledger()}) is not kept


def test_admitter_48_orders_a_recreated_local_queue_as_new_and_47_by_its_history() -> None:
    """The cycle after c-1 finishes in the scenario: lq-a, deleted and created again, had consumed about 1.2 CPU
    before; logic 48 admits the older a-2 (both LocalQueues at 0), 47 admits b-1 (lq-b below lq-a)."""
    run = run_scenario(load_scenario(_RECREATED))
    admits_a2 = next(
        i
        for i, (_, e) in enumerate(run.log)
        if isinstance(e, types.QuotaReserved | types.WorkloadAdmitted) and e.workload.key == "default/a-2"
    )
    index = max(
        i
        for i, (_, e) in enumerate(run.log[:admits_a2])
        if isinstance(e, types.DecisionRecord) and e.role == admitter.ROLE
    )
    at = ClusterState()
    for seq, event in run.log[:index]:
        for folded in with_releases(event):  # a record's finished releases too (its decisions follow it in the log)
            apply(at, folded, seq=seq)
    record = run.log[index][1]
    assert isinstance(record, types.DecisionRecord)
    ledger = at.afs_ledgers[("default", "lq-a")]
    assert ledger.carried and ledger.fresh(record.now_ms, 10.0) == {"cpu": pytest.approx(0.0, abs=1e-9)}

    def reserved(outputs: list[types.Output]) -> list[str]:
        return [o.workload.key for o in outputs if isinstance(o, types.QuotaReserved | types.WorkloadAdmitted)]

    assert reserved(admitter.decide(at, now_ms=record.now_ms, partition=record.partition)) == ["default/a-2"]
    # logic 47 requeues a-2 and b-1 only on the release's own trigger (logic 52 in the releasing cycle): compared
    # once c-1's release is folded
    for folded in with_releases(record)[1:]:
        apply(at, folded, seq=run.log[index][0])
    assert reserved(admitter.decide(at, now_ms=record.now_ms, partition=record.partition)) == ["default/a-2"]
    earlier = admitter.decide_as(47)(at, now_ms=record.now_ms, partition=record.partition)
    assert reserved(earlier) == ["default/b-1"]
    assert admitter.LOGIC_VERSION >= 48 and 47 in admitter.EARLIER_LOGIC_VERSIONS
    assert preemptor.LOGIC_VERSION >= 20 and 19 in preemptor.EARLIER_LOGIC_VERSIONS
    status = dispatcher_status.local_queue_status(at, "default", "lq-a", now_ms=record.now_ms)["fairSharing"]
    assert status["admissionFairSharingStatus"]["consumedResources"] == {"cpu": "0"}
