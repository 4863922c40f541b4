"""An admission decided for a workload that is deleted before the decision is on the log (Kueue PR #10821)."""

from __future__ import annotations

from kueue_es.events import types
from kueue_es.services.admitter.core import decide
from tests.builders import Log, cluster_queue, flavor, local_queue, reservations, workload


def _race(*, deleted: bool) -> Log:
    """w (1 CPU) is nominated and admitted into cq by a cycle that read the log before w's deletion, which
    lands first when ``deleted``; the cycle's decisions come after it."""
    log = Log()
    log.apply_manifests(
        flavor("default-flavor"), cluster_queue("cq", flavors={"default-flavor": {"cpu": 1}}), local_queue("lq", "cq")
    )
    log.apply_manifests(workload("w", count=1, created=1, cpu="1"))
    decisions = decide(log.state, now_ms=1000)
    assert [d.workload.name for d in reservations(decisions)] == ["w"]
    if deleted:
        log.add(types.ObjectDeleted(kind="Workload", namespace="default", name="w", uid="uid-w"))
    log.add(*decisions)
    return log


def test_an_admission_of_a_workload_deleted_meanwhile_leaves_its_cluster_queue_empty() -> None:
    """Kueue PR #10821 (Fix ClusterQueue finalizer after admission failure; scheduler_test.go
    TestSchedulerNotifiesWatchersWhenAssumedWorkloadAdmissionFailsWithNotFound): the scheduler assumed the
    workload, its admission patch found it gone, and the ClusterQueue stayed in use, so a deleted ClusterQueue
    kept Kueue's finalizer. Here the admission lands after the deletion and takes nothing: the ClusterQueue
    holds no workload and no usage (the dispatcher lifts the finalizer of a terminating ClusterQueue that no
    workload reserves quota in), and the next cycles decide nothing about w."""
    log = _race(deleted=True)
    assert "default/w" not in log.state.workloads
    assert not log.state.reserved.get("cq")
    assert not any(log.state.usage.get("cq", {}).get("default-flavor", {}).values())
    assert log.settle(2000) == []

    kept = _race(deleted=False)  # the same cycle without the deletion holds the quota
    assert list(kept.state.reserved["cq"]) == ["default/w"]
    assert kept.state.usage["cq"]["default-flavor"]["cpu"] == 1000
