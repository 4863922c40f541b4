"""A StatefulSet's group admitted before its controller made the pods is started, not a job gone.

Scaled to zero, a StatefulSet's Workload is held (OnHold) and outlives its pods; scaled up again, it is
let go and admitted again, and the admission may reach the dispatcher before the StatefulSet's controller
has created a pod. Kueue's pod reconciler ungates each pod of an admitted group as it sees it, so the
Workload stays admitted. The dispatcher answered "Pod group ... is gone" (a DispatchFailed 404), which
evicted the Workload as Deleted and made it again with another UID (a race the integration test
test_statefulset_scaled_to_zero_keeps_its_workload_on_hold lost about one run in six on a loaded machine).
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import job_owners, models, types
from kueue_es.jobframework.annotations import IS_GROUP_WORKLOAD_ANNOTATION as GROUP_WORKLOAD_ANNOTATION
from kueue_es.services.dispatcher import core
from kueue_es.services.dispatcher.job_writes import JobWrites
from kueue_es.services.dispatcher.kube_api import WriteLimiter

REF = types.WorkloadRef(namespace="ns", name="statefulset-web-1a2b3", uid="wl-1")


class NoPodsApi:
    """An API server with no pod in the namespace; any write fails the test."""

    async def list_objects(self, ref: Any, *, namespace: str | None = None, **_: Any) -> tuple[list[Any], str]:
        return [], "1"

    async def patch_object(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no pod to patch")

    async def delete_object(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no pod to delete")


def start(*, serving: bool) -> core.StartPods:
    return core.StartPods(
        workload=REF,
        namespace="ns",
        group=REF.name,
        pod_sets=[core.PodSetInfo(name="main", node_selector={"instance-type": "on-demand"})],
        total=3,
        serving=serving,
    )


async def test_a_serving_group_without_pods_yet_is_started() -> None:
    writes = JobWrites(api=NoPodsApi(), limiter=WriteLimiter(qps=1000, burst=10))  # type: ignore[arg-type]
    result = await writes.start_pods(start(serving=True), seq=7)
    assert isinstance(result, types.DispatchApplied)
    assert (result.action, result.decision_seq, result.target) == ("StartJob", 7, f"Pod group ns/{REF.name}")
    assert result.node_selector == {"instance-type": "on-demand"}


async def test_a_plain_group_without_pods_is_still_gone() -> None:
    writes = JobWrites(api=NoPodsApi(), limiter=WriteLimiter(qps=1000, burst=10))  # type: ignore[arg-type]
    result = await writes.start_pods(start(serving=False), seq=7)
    assert isinstance(result, types.DispatchFailed)
    assert (result.status, result.reason) == (404, "NotFound")


@pytest.mark.parametrize(
    ("gvk", "serving"),
    [
        ("apps/v1, Kind=StatefulSet", True),
        ("leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet", True),
        ("", False),
    ],
)
def test_the_start_of_a_group_says_whether_a_serving_parent_made_it(gvk: str, serving: bool) -> None:
    marks = {job_owners.JOB_OWNER_GVK_ANNOTATION: gvk, job_owners.JOB_OWNER_NAME_ANNOTATION: "web"} if gvk else {}
    wl = models.Workload(
        metadata=models.ObjectMeta(
            name=REF.name,
            namespace="ns",
            uid=REF.uid,
            annotations={GROUP_WORKLOAD_ANNOTATION: "true", **marks},
            labels={job_owners.JOB_UID_LABEL: "sts-1"} if gvk else {},
        ),
        spec=models.WorkloadSpec(queue_name="lq", pod_sets=[models.PodSet(requests={"cpu": 1000}, count=3)]),
        owner=models.OwnerReference(api_version="v1", kind="Pod", name="web-0", uid="pod-0"),
    )
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 3000}, count=3)
    admitted = types.WorkloadAdmitted(workload=REF, cluster_queue="cq", at_ms=1)
    view = core.DispatchState()
    for seq, event in enumerate(
        [
            types.WorkloadObserved(workload=wl),
            types.QuotaReserved(workload=REF, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=1),
            admitted,
        ],
        start=1,
    ):
        core.fold(view, event, seq=seq)
    action = core.plan(view, admitted, seq=3)
    assert isinstance(action, core.StartPods)
    assert (action.group, action.serving) == (REF.name, serving)
