"""What every start adds to a job's pod templates, as Kueue's reconciler.go getPodSetsInfoFromStatus: the pod set
label, the LocalQueue and ClusterQueue labels (gate AssignQueueLabelsForPods, on by default; the ClusterQueue's
only when its name is a valid label value) and the Workload annotation (gate TopologyAwareScheduling)."""

from __future__ import annotations

import pytest

from kueue_es.events import types
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


def test_a_start_then_a_stop_give_a_template_without_metadata_or_node_selector_back_as_it_was() -> None:
    """A flavor without node labels writes no nodeSelector, and the stop takes out every label and annotation the
    start added: the template is as created (a fresh-user check found ``nodeSelector: {}`` left behind)."""
    from kueue_es.sim.patches import merge_patch

    dlog = DispatchLog()
    dlog.add(job_workload("w", cpu="1"))
    admission = dlog.admit(1_000)
    start = core.plan(dlog.view, admission, seq=dlog.seq)
    assert isinstance(start, core.StartJob)
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    created = {"metadata": {"name": "w", "uid": "uid-w"}, "spec": {"suspend": True, "template": template}}
    running = merge_patch(created, start.patch(current_tolerations=[]))
    assert "nodeSelector" not in running["spec"]["template"]["spec"]
    assert running["spec"]["template"]["metadata"]["labels"][core.PODSET_LABEL] == "main"
    eviction = types.EvictionRequested(workload=admission.workload, cluster_queue="cq", message="m", at_ms=2)
    dlog.add(eviction)
    stop = core.plan(dlog.view, eviction, seq=dlog.seq)
    assert isinstance(stop, core.StopJob)
    stopped = merge_patch(running, stop.patch(current_pod_spec=running["spec"]["template"]["spec"], job=running))
    assert stopped["spec"]["template"] == template
