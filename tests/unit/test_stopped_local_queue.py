"""A stopped LocalQueue's workloads are out of its ClusterQueue's queue, as Kueue's manager.go DeleteLocalQueue
takes them out: not in the ClusterQueue's pendingWorkloads, its visibility list or its pending metrics; the
LocalQueue's own visibility endpoint answers 404 (pending_workloads_lq.go: not in the queue manager).
Found by two fresh-user checks: kubectl showed PENDING 1 on a ClusterQueue whose only LocalQueue was stopped."""

from __future__ import annotations

import pytest

from kueue_es.events import types
from kueue_es.scheduling import visibility
from kueue_es.services.dispatcher import status
from tests.builders import Log, cluster_queue, flavor, local_queue, parse, workload
from tests.unit.test_kueue_metrics import _samples, _value


def stopped_queue_log(stop_policy: str) -> Log:
    """cq (1 CPU) fed by lq-a and lq-b; ``running`` holds the CPU, ``wait-a`` waits in lq-a, ``wait-b`` in lq-b,
    then lq-b's stopPolicy is set."""
    log = Log()
    stopped = local_queue("lq-b", "cq")
    log.add(
        types.ResourceFlavorObserved(flavor=parse(flavor("rf"))),
        types.ClusterQueueObserved(cluster_queue=parse(cluster_queue("cq", flavors={"rf": {"cpu": "1"}}))),
        types.LocalQueueObserved(local_queue=parse(local_queue("lq-a", "cq"))),
        types.LocalQueueObserved(local_queue=parse(stopped)),
        types.WorkloadObserved(workload=parse(workload("running", queue="lq-a", cpu="1"))),
    )
    log.settle(1_000)
    log.add(
        types.WorkloadObserved(workload=parse(workload("wait-a", queue="lq-a", created=1, cpu="1"))),
        types.WorkloadObserved(workload=parse(workload("wait-b", queue="lq-b", created=2, cpu="1"))),
    )
    log.settle(2_000)
    stopped["spec"]["stopPolicy"] = stop_policy
    log.add(types.LocalQueueObserved(local_queue=parse(stopped)))
    return log


@pytest.mark.parametrize("stop_policy", ["Hold", "HoldAndDrain"])
def test_a_stopped_local_queues_workloads_are_not_pending_in_its_cluster_queue(stop_policy: str) -> None:
    state = stopped_queue_log(stop_policy).state
    assert status.cluster_queue_status(state, "cq")["pendingWorkloads"] == 1
    assert [p.name for p in visibility.pending_in_cluster_queue(state, "cq")] == ["wait-a"]
    assert [p.name for p in visibility.pending_in_local_queue(state, "default", "lq-a")] == ["wait-a"]
    with pytest.raises(KeyError, match="lq-b"):
        visibility.pending_in_local_queue(state, "default", "lq-b")
    samples = _samples(state)
    per_cq = sum(
        _value(samples, "kueue_pending_workloads", cluster_queue="cq", status=s) for s in ("active", "inadmissible")
    )
    assert per_cq == 1
    for s in ("active", "inadmissible"):
        assert _value(samples, "kueue_local_queue_pending_workloads", name="lq-b", namespace="default", status=s) == 0


def test_resumed_its_workloads_are_pending_again() -> None:
    log = stopped_queue_log("Hold")
    resumed = local_queue("lq-b", "cq")
    log.add(types.LocalQueueObserved(local_queue=parse(resumed)))
    state = log.state
    assert status.cluster_queue_status(state, "cq")["pendingWorkloads"] == 2
    assert [p.name for p in visibility.pending_in_local_queue(state, "default", "lq-b")] == ["wait-b"]
