"""The admitter's pure core on the simple case (one ClusterQueue, no cohorts)."""

from kueue_es.events import types
from kueue_es.services.admitter.core import decide
from tests.builders import Log, cluster_queue, flavor, local_queue, reservations, workload


def quick_start(*, strategy: str = "BestEffortFIFO") -> Log:
    log = Log()
    log.apply_manifests(
        flavor("default-flavor"),
        cluster_queue("cq", flavors={"default-flavor": {"cpu": 9, "memory": "36Gi"}}, strategy=strategy),
        local_queue("lq", "cq"),
    )
    return log


def admitted(decisions: list[types.Decision]) -> list[str]:
    return [d.workload.name for d in reservations(decisions)]


def test_three_of_four_fit_then_the_fourth_after_a_finish() -> None:
    """Kueue quick start: 9 CPU fit three 3-CPU jobs; the fourth waits with Kueue's message until one finishes."""
    log = quick_start()
    for i in range(1, 5):
        log.apply_manifests(workload(f"job-{i}", count=3, created=i, cpu="1", memory="200Mi"))
    first = log.settle(1000)
    assert admitted(first) == ["job-1", "job-2", "job-3"]
    waiting = [d for d in first if isinstance(d, types.WorkloadInadmissible)]
    assert [(d.workload.name, d.message, d.parked) for d in waiting] == [
        (
            "job-4",
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
            "default-flavor, 3 more needed",
            True,
        )
    ]
    assert decide(log.state, now_ms=2000) == []  # parked: not tried again until something changes
    log.finish("default/job-1")
    second = log.settle(3000)
    # the release of a finished workload: carried in the cycle's record (admitter logic 15)
    assert isinstance(second[0], types.FinishedRelease) and second[0].workload.name == "job-1"
    assert second[0].quota_released().reason == "Finished" and second[0].at_ms == 3000
    assert admitted(second) == ["job-4"]
    assert log.state.usage["cq"]["default-flavor"]["cpu"] == 9000


def test_priority_then_creation_order() -> None:
    """Higher priority first, then earlier creation (Kueue's ClusterQueue heap order)."""
    log = quick_start()
    log.apply_manifests(workload("old-low", created=1, cpu="6"), workload("new-high", created=2, priority=10, cpu="6"))
    assert admitted(log.settle(1)) == ["new-high"]


def test_strict_fifo_blocks_behind_the_head() -> None:
    """StrictFIFO: a head that does not fit blocks smaller workloads behind it; BestEffortFIFO does not."""
    for strategy, want in (("StrictFIFO", ["a"]), ("BestEffortFIFO", ["a", "c"])):
        log = quick_start(strategy=strategy)
        log.apply_manifests(
            workload("a", created=1, cpu="5"), workload("b", created=2, cpu="5"), workload("c", created=3, cpu="1")
        )
        assert admitted(log.settle(1)) == want, strategy


def test_exceeding_nominal_quota_says_maximum_capacity() -> None:
    """A pod set larger than the whole quota gets Kueue's 'maximum capacity' message."""
    log = quick_start()
    log.apply_manifests(workload("huge", cpu="10"))
    [pending] = log.settle(1)
    assert isinstance(pending, types.WorkloadInadmissible)
    assert "current podset request (10) > maximum capacity (9)" in pending.message


def test_missing_local_queue_and_uncovered_resource() -> None:
    """Workloads that cannot queue say why, as Kueue's conditions do."""
    log = quick_start()
    log.apply_manifests(workload("lost", queue="nope", cpu="1"), workload("gpu", **{"nvidia.com/gpu": "1"}))
    messages = {d.workload.name: d.message for d in log.settle(1)}
    assert messages == {
        "lost": "LocalQueue nope doesn't exist",
        "gpu": "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in ClusterQueue",
    }


def test_second_flavor_used_when_first_is_full() -> None:
    """Flavors are tried in order; the first with room is assigned to all resources of the group."""
    log = Log()
    log.apply_manifests(
        flavor("on-demand"),
        flavor("spot"),
        cluster_queue("cq", flavors={"on-demand": {"cpu": 2}, "spot": {"cpu": 4}}),
        local_queue("lq", "cq"),
    )
    log.apply_manifests(workload("a", created=1, cpu="2"), workload("b", created=2, cpu="3"))
    out = log.settle(1)
    flavors = {d.workload.name: d.pod_set_assignments[0].flavors for d in reservations(out)}
    assert flavors == {"a": {"cpu": "on-demand"}, "b": {"cpu": "spot"}}


def test_same_state_same_decisions() -> None:
    """decide() is a pure function: same state and time, same decisions."""
    log = quick_start()
    for i in range(6):
        log.apply_manifests(workload(f"w{i}", created=6 - i, cpu="2"))
    assert decide(log.state, now_ms=5) == decide(log.state, now_ms=5)


def test_one_head_per_cluster_queue_per_cycle() -> None:
    """Kueue pops one workload per ClusterQueue per cycle (SEMANTICS §4.1)."""
    log = quick_start()
    log.apply_manifests(workload("a", created=1, cpu="1"), workload("b", created=2, cpu="1"))
    assert admitted(log.cycle(1)) == ["a"]
    assert admitted(log.cycle(2)) == ["b"]
    assert log.cycle(3) == []


def test_parked_workload_returns_when_quota_is_released() -> None:
    """A parked (inadmissible) workload is retried only after a requeue trigger (SEMANTICS §3.6)."""
    log = quick_start()
    log.apply_manifests(workload("big", created=1, cpu="9"), workload("next", created=2, cpu="9"))
    log.settle(1)
    assert log.state.workloads["default/next"].parked_seq > 0
    assert log.cycle(50) == []
    log.finish("default/big")
    assert admitted(log.settle(100)) == ["next"]


def test_borrowing_in_a_cohort_and_borrowing_limit() -> None:
    """A ClusterQueue borrows its cohort's unused quota, up to borrowingLimit (SEMANTICS §6.5)."""
    log = Log()
    log.apply_manifests(flavor("f"), local_queue("a", "cq-a"), local_queue("b", "cq-b"))
    for name, nominal, limit in (("cq-a", 9, 1), ("cq-b", 12, None)):
        cq = cluster_queue(name, flavors={"f": {"cpu": nominal}})
        cq["spec"]["cohortName"] = "co"
        if limit is not None:
            cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = limit
        log.apply_manifests(cq)
    log.apply_manifests(
        workload("ten", queue="a", created=1, cpu="10"), workload("eleven", queue="a", created=2, cpu="11")
    )
    out = log.settle(1)
    assert admitted(out) == ["ten"]
    assert "insufficient quota for cpu in flavor f" in next(
        d.message for d in out if isinstance(d, types.WorkloadInadmissible)
    )


def test_partial_admission_takes_the_largest_count_that_fits() -> None:
    """minCount lets a pod set be admitted with fewer pods (SEMANTICS §5.9)."""
    log = quick_start()
    doc = workload("elastic", count=10, created=1, cpu="1")
    doc["spec"]["podSets"][0]["minCount"] = 2
    log.apply_manifests(workload("other", created=0, cpu="5"), doc)
    out = log.settle(1)
    counts = {d.workload.name: d.pod_set_assignments[0].count for d in reservations(out)}
    assert counts == {"other": 1, "elastic": 4}


def stopped_victim_log() -> Log:
    """standalone (4 CPU, LowerPriority) holds low (2 CPU) and stopped (1 CPU); stopped was evicted and its
    job has stopped, but the admitter has not released it yet; high (priority 10, 3 CPU) arrives."""
    log = Log()
    standalone = cluster_queue("standalone", flavors={"default": {"cpu": 4}})
    standalone["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    log.apply_manifests(flavor("default"), standalone, local_queue("lq", "standalone"))
    log.apply_manifests(workload("low", created=1, cpu="2"), workload("stopped", created=2, cpu="1"))
    assert admitted(log.settle(1000)) == ["low", "stopped"]
    ref = types.WorkloadRef(namespace="default", name="stopped", uid="uid-stopped")
    log.add(
        types.EvictionRequested(workload=ref, cluster_queue="standalone", message="evicted", at_ms=2000),
        types.WorkloadStopped(workload=ref, at_ms=2100),
    )
    log.apply_manifests(workload("high", created=3, priority=10, cpu="3"))
    return log


def test_a_workload_released_in_the_cycle_is_no_preemption_candidate() -> None:
    """Kueue's cache drops an evicted workload's usage once its job has stopped (its QuotaReserved condition
    is cleared; pkg/cache/scheduler/cache.go, SEMANTICS §6.4, §7.8): it is no candidate any more. The cycle
    that releases it must not count its quota as freed a second time by nominating it (evicted workloads
    come first in Kueue's candidate order): high needs 3 CPU, 2 are free after the release, so low is the
    victim."""
    from kueue_es.services.admitter.core import decide_as

    log = stopped_victim_log()
    out = decide(log.state, now_ms=3000)
    assert [(type(d).__name__, d.workload.name) for d in out][:1] == [("QuotaReleased", "stopped")]
    [nomination] = [d for d in out if isinstance(d, types.PreemptionRequired)]
    assert nomination.workload.name == "high"
    assert [t.workload.name for t in nomination.targets] == ["low"]

    # logic 10 counted it twice (released, then removed again as a candidate) and named it: replay keeps that
    old_out = decide_as(10)(stopped_victim_log().state, now_ms=3000)
    [old] = [d for d in old_out if isinstance(d, types.PreemptionRequired)]
    assert [t.workload.name for t in old.targets] == ["stopped"]
