"""What every start adds to a job's pod templates, as Kueue's reconciler.go getPodSetsInfoFromStatus: the pod set
label, the LocalQueue and ClusterQueue labels (gate AssignQueueLabelsForPods, on by default; the ClusterQueue's
only when its name is a valid label value) and the Workload annotation (gate TopologyAwareScheduling)."""

from __future__ import annotations

import msgspec
import pytest

from kueue_es.events import models, types
from kueue_es.services.dispatcher import core
from tests.builders import Log, cluster_queue, flavor, local_queue, parse, workload


def started(cq_name: str, *, gates: dict[str, bool] | None = None) -> core.StartJob:
    log, view = Log(), core.DispatchState()
    made = parse(workload("w", cpu="1"))
    owner = models.OwnerReference(api_version="batch/v1", kind="Job", name="w", uid="uid-w")
    events: list[types.Event] = [
        types.ResourceFlavorObserved(flavor=parse(flavor("rf"))),
        types.ClusterQueueObserved(cluster_queue=parse(cluster_queue(cq_name, flavors={"rf": {"cpu": "2"}}))),
        types.LocalQueueObserved(local_queue=parse(local_queue("lq", cq_name))),
        types.WorkloadObserved(workload=msgspec.structs.replace(made, owner=owner)),
    ]
    if gates is not None:
        events.insert(0, types.ConfigurationObserved(configuration=models.Configuration(feature_gates=gates)))
    for event in events:
        log.add(event)
        core.fold(view, event, seq=len(log.events))
    [admission] = [d for d in log.cycle(1_000) if isinstance(d, types.WorkloadAdmitted)]
    core.fold(view, admission, seq=len(log.events))
    action = core.plan(view, admission, seq=len(log.events))
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
