"""What every start adds to a job's pod templates, as Kueue's reconciler.go getPodSetsInfoFromStatus: the pod set
label, the LocalQueue and ClusterQueue labels (gate AssignQueueLabelsForPods, on by default; the ClusterQueue's
only when its name is a valid label value) and the Workload annotation (gate TopologyAwareScheduling)."""

from __future__ import annotations

import pytest

from kueue_es.services.dispatcher import core
from tests.unit.dispatch_log import DispatchLog, job_workload


def started(cq_name: str, *, gates: dict[str, bool] | None = None) -> core.StartJob:
    dlog = DispatchLog(cq_name=cq_name, gates=gates)
    dlog.add(job_workload("w", cpu="1"))
    admission = dlog.admit(1_000)
    action = core.plan(dlog.view, admission, seq=dlog.seq)
    assert isinstance(action, core.StartJob)
    return action


def test_every_start_names_the_pod_set_the_queues_and_the_workload() -> None:
    action = started("team-a")
    assert action.labels == {
        core.PODSET_LABEL: "main",
        core.LOCAL_QUEUE_LABEL: "lq",
        core.CLUSTER_QUEUE_LABEL: "team-a",
    }
    assert action.annotations == {core.WORKLOAD_ANNOTATION: "w"}


@pytest.mark.parametrize("name", ["team.a", "x" * 64])
def test_a_cluster_queue_name_that_is_no_label_value_is_left_out(name: str) -> None:
    action = started(name)
    assert core.CLUSTER_QUEUE_LABEL not in action.labels
    assert action.labels[core.LOCAL_QUEUE_LABEL] == "lq"


def test_the_gates_off_leave_the_queues_and_the_workload_out() -> None:
    action = started("team-a", gates={"AssignQueueLabelsForPods": False, "TopologyAwareScheduling": False})
    assert action.labels == {core.PODSET_LABEL: "main"}
    assert action.annotations == {}
