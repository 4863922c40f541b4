"""Kueue's figures from recorded events, on a small hand-checked run; and the rangespec check."""

from __future__ import annotations

import pytest

from kueue_es.events import models, types
from kueue_es.perfbench import generator, metrics


def ref(name: str) -> types.WorkloadRef:
    return types.WorkloadRef(namespace="q-0", name=name, uid=name)


def workload(name: str, class_name: str, created: int) -> types.WorkloadObserved:
    return types.WorkloadObserved(
        workload=models.Workload(
            metadata=models.ObjectMeta(
                name=name,
                namespace="q-0",
                uid=name,
                labels={generator.CLASS_LABEL: class_name},
                creation_timestamp_ms=created,
            ),
            spec=models.WorkloadSpec(queue_name="q-0", pod_sets=[models.PodSet(requests={"cpu": 1_000})]),
        )
    )


def reserved(name: str, at: int) -> types.QuotaReserved:
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 1_000}, count=1)
    return types.QuotaReserved(workload=ref(name), cluster_queue="q-0", pod_set_assignments=[assignment], at_ms=at)


def released(name: str, at: int, reason: str = "Finished") -> types.QuotaReleased:
    return types.QuotaReleased(workload=ref(name), cluster_queue="q-0", reason=reason, cause_seq=1, at_ms=at)


def recorded_run() -> metrics.Recorder:
    """ClusterQueue q-0 (class q, 2 CPU) created at 0. Workload a (small, 1 CPU) created at 100, admitted at 200,
    evicted at 300 (released at 400), admitted again at 500, finished and released at 1500. Workload b (big, 1 CPU)
    created at 250, admitted at 600, finished and released at 1100."""
    cq = models.ClusterQueue(
        metadata=models.ObjectMeta(name="q-0", labels={generator.CLASS_LABEL: "q"}, creation_timestamp_ms=0),
        spec=models.ClusterQueueSpec(
            resource_groups=[
                models.ResourceGroup(
                    covered_resources=["cpu"],
                    flavors=[
                        models.FlavorQuotas(
                            name="rf", resources=[models.ResourceQuota(name="cpu", nominal_quota=2_000)]
                        )
                    ],
                )
            ]
        ),
    )
    events: list[types.Event] = [
        types.ClusterQueueObserved(cluster_queue=cq),
        workload("a", "small", 100),
        reserved("a", 200),
        types.admitted(reserved("a", 200), at_ms=200),
        workload("b", "big", 250),
        types.EvictionRequested(workload=ref("a"), cluster_queue="q-0", message="preempted", at_ms=300),
        released("a", 400, "Preempted"),
        reserved("a", 500),
        types.admitted(reserved("a", 500), at_ms=500),
        reserved("b", 600),
        types.admitted(reserved("b", 600), at_ms=600),
        types.WorkloadFinished(workload=ref("b"), at_ms=1_100),
        released("b", 1_100),
        types.WorkloadFinished(workload=ref("a"), at_ms=1_500),
        released("a", 1_500),
    ]
    recorder = metrics.Recorder()
    for event in events:
        recorder.record(event)
    return recorder


def test_workload_classes_as_kueue_defines_them() -> None:
    summary = recorded_run().summary()
    assert summary["workloadClasses"] == {
        # time to admission counts to the last admission; finish from creation
        "small": {"count": 1, "totalEvictions": 1, "averageTimeToAdmissionMs": 400, "averageTimeToFinishMs": 1_400},
        "big": {"count": 1, "totalEvictions": 0, "averageTimeToAdmissionMs": 350, "averageTimeToFinishMs": 850},
    }


def test_cluster_queue_class_usage_is_the_held_cpu_integral_over_nominal_and_time() -> None:
    recorder = recorded_run()
    group = recorder.summary()["clusterQueueClasses"]["q"]
    # held: 1 CPU 200-400, 1 CPU 500-600, 2 CPU 600-1100, 1 CPU 1100-1500 = 200k + 100k + 1000k + 400k mCPU·ms
    assert group["cpuUsed"] == 1_700_000
    assert group["nominalQuota"] == 2_000
    assert group["cpuAverageUsage"] == 1_700_000 // 1_500
    assert group["firstEventTime"] == "1970-01-01T00:00:00.000Z"
    assert group["lastEventTime"] == "1970-01-01T00:00:01.500Z"
    assert recorder.usage_percent()["q"] == pytest.approx(1_700_000 * 100 / (2_000 * 1_500))
    assert recorder.last_release_ms == 1_500
    assert (recorder.admitted, recorder.finished, recorder.held) == (2, 2, {})


def test_admission_rates() -> None:
    mean, peak = recorded_run().admission_rates()
    assert mean == pytest.approx(2 * 1000 / 400)  # 3 admissions between 200 and 600 ms
    assert peak == pytest.approx(3 * 1000 / 400)  # the run is shorter than the 5 s window


def test_events_per_second_and_its_peak() -> None:
    recorder = metrics.Recorder()
    seq = 100  # the log had 100 messages when sampling began
    for ms in range(0, 10_001, 250):  # 1,000 a second for 10 s, then 3,000 a second for 5 s
        recorder.note_log(seq + ms, ms)
    seq += 10_000
    for ms in range(10_250, 15_001, 250):
        recorder.note_log(seq + 3 * (ms - 10_000), ms)
    assert recorder.messages == 100 + 10_000 + 15_000
    assert recorder.events_per_second() == pytest.approx(25_000 * 1000 / 15_000)
    assert recorder.peak_events_per_second == pytest.approx(3_000)


def test_rangespec_in_and_out_of_range() -> None:
    recorder = recorded_run()
    summary, usage = recorder.summary(), recorder.usage_percent()
    spec = {
        "cmd": {"maxWallMs": 2_000},
        "clusterQueueClassesMinUsage": {"q": 50},
        "wlClassesMaxAvgTimeToAdmissionMs": {"small": 400, "big": 1_000},
    }
    assert metrics.check_rangespec(spec, wall_ms=2_000, usage=usage, summary=summary) == []
    spec["cmd"]["maxWallMs"] = 1_999
    spec["clusterQueueClassesMinUsage"]["q"] = 57
    spec["wlClassesMaxAvgTimeToAdmissionMs"] = {"small": 399}
    problems = metrics.check_rangespec(spec, wall_ms=2_000, usage=usage, summary=summary)
    assert problems == [
        "wall time 2000ms is greater than maximum expected 1999ms",
        "ClusterQueue class 'q': usage 56.67% is less than expected 57.00%",
        "workload class 'big': unexpected class",
        "workload class 'small': average wait for admission 400ms is more than expected 399ms",
    ]


def test_rangespec_with_unknown_keys_is_refused() -> None:
    with pytest.raises(ValueError, match="maxWall"):
        metrics.check_rangespec({"maxWall": 1}, wall_ms=0, usage={}, summary={"workloadClasses": {}})


def test_quota_held_over_runtime_per_class() -> None:
    """a held 200-400 and 500-1500 (1,200 ms) and b 600-1100 (500 ms); with runtimes of 900 and 450 ms
    a held 300 ms past its work (its lost run included) and b 50 ms."""

    def with_runtime(observed: types.WorkloadObserved, runtime_ms: int) -> types.WorkloadObserved:
        meta = observed.workload.metadata
        labels = {**meta.labels, generator.RUNTIME_LABEL: str(runtime_ms)}
        wl = models.Workload(
            metadata=models.ObjectMeta(
                name=meta.name,
                namespace=meta.namespace,
                uid=meta.uid,
                labels=labels,
                creation_timestamp_ms=meta.creation_timestamp_ms,
            ),
            spec=observed.workload.spec,
        )
        return types.WorkloadObserved(workload=wl)

    recorder = metrics.Recorder()
    recorder.record(with_runtime(workload("a", "small", 100), 900))
    recorder.record(with_runtime(workload("b", "big", 250), 450))
    recorder.record(workload("c", "small", 260))  # no runtime label: counts as 0
    for event in [
        reserved("a", 200),
        released("a", 400, "Preempted"),
        reserved("a", 500),
        reserved("b", 600),
        reserved("c", 700),
        types.WorkloadFinished(workload=ref("b"), at_ms=1_100),
        released("b", 1_100),
        types.WorkloadFinished(workload=ref("a"), at_ms=1_500),
    ]:
        recorder.record(event)
    # a finished but still holds its quota: not counted yet; c never finished
    assert recorder.held_over_runtime() == {"big": {"count": 1, "medianMs": 50, "p99Ms": 50}}
    recorder.record(released("a", 1_500))
    recorder.record(types.WorkloadFinished(workload=ref("c"), at_ms=1_700))
    recorder.record(released("c", 1_710))
    assert recorder.held_over_runtime() == {
        "big": {"count": 1, "medianMs": 50, "p99Ms": 50},
        "small": {"count": 2, "medianMs": 655, "p99Ms": 1_010},
    }


def test_held_over_runtime_p99_by_nearest_rank() -> None:
    recorder = metrics.Recorder()
    for i in range(200):
        name = f"w{i}"
        recorder.record(workload(name, "small", 0))
        recorder.record(reserved(name, 0))
        recorder.record(types.WorkloadFinished(workload=ref(name), at_ms=i + 1))
        recorder.record(released(name, i + 1))
    # held 1..200 ms, runtime 0: the mean of 100 and 101 rounded down, p99 the 198th smallest
    assert recorder.held_over_runtime() == {"small": {"count": 200, "medianMs": 100, "p99Ms": 198}}


def test_an_admission_that_reserves_folds_as_its_reservation_then_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """A WorkloadAdmitted with its pod set assignments and no reservation before it (admitter logic 13)
    holds the quota its QuotaReserved would have, without the recorder making that QuotaReserved: the
    harness folds one per admission (issue 18)."""
    two = metrics.Recorder()
    for event in (workload("a", "small", 100), reserved("a", 200), types.admitted(reserved("a", 200), at_ms=200)):
        two.record(event)

    def not_made(admission: types.WorkloadAdmitted) -> types.QuotaReserved:
        raise AssertionError("the recorder made a QuotaReserved")

    monkeypatch.setattr(types, "reservation_of", not_made)
    one = metrics.Recorder()
    for event in (workload("a", "small", 100), types.admitted(reserved("a", 200), at_ms=200), released("a", 700)):
        one.record(event)
    two.record(released("a", 700))
    assert one.summary() == two.summary() and one.held_over_runtime() == two.held_over_runtime()
    assert one.queues == two.queues and one.admitted == two.admitted == 1


def test_events_the_recorder_does_not_fold_change_nothing() -> None:
    recorder = recorded_run()
    before = (recorder.summary(), recorder.held_over_runtime(), recorder.admission_times[:])
    recorder.record(types.WorkloadStopped(workload=ref("a"), reason="Preempted", at_ms=2_000))
    recorder.record(types.DispatchApplied(workload=ref("a"), decision_seq=3, action="Evict"))
    assert (recorder.summary(), recorder.held_over_runtime(), recorder.admission_times) == before
