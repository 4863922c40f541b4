"""The TAS ungater's pure core (kueue_es.services.dispatcher.ungater; Kueue topology_ungater.go, SEMANTICS-ADVANCED A.12)."""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.events import models, slices, tas
from kueue_es.services.dispatcher import ungater

HOST = tas.HOSTNAME_LABEL
INDEX = "batch.kubernetes.io/job-completion-index"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"


def pod(name: str, *, labels: dict[str, str] | None = None, host: str = "", annotations=None) -> dict[str, Any]:
    """A pod: gated unless ``host`` (then ungated with that hostname selector)."""
    spec: dict[str, Any] = (
        {"nodeSelector": {HOST: host}} if host else {"schedulingGates": [{"name": ungater.TOPOLOGY_GATE}]}
    )
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}, "spec": spec}


def pod_set(*domains: tuple[str, int], request: models.PodSetTopologyRequest | None = None, name: str = "main"):
    assignment = tas.Assignment(
        levels=(HOST,), domains=tuple(tas.DomainAssignment(values=(h,), count=n) for h, n in domains)
    )
    count = sum(n for _, n in domains)
    return ungater.PodSetTopology(name=name, count=count, assignment=assignment, request=request)


def placed(plan: list[ungater.Ungate]) -> dict[str, str]:
    return {step.name: step.node_selector[HOST] for step in plan}


RANKED = models.PodSetTopologyRequest(required="rack", pod_index_label=INDEX)


def test_ranks_pick_the_domain_of_each_index_whatever_the_list_order() -> None:
    ps = pod_set(("a", 1), ("b", 2), request=RANKED)
    pods = [pod("x", labels={INDEX: "2"}), pod("y", labels={INDEX: "0"}), pod("z", labels={INDEX: "1"})]
    assert placed(ungater.plan_pod_set(ps, pods)) == {"y": "a", "z": "b", "x": "b"}
    # without rank hints the same pods fill the domains in list order
    greedy = pod_set(("a", 1), ("b", 2))
    assert placed(ungater.plan_pod_set(greedy, pods)) == {"x": "a", "y": "b", "z": "b"}


@pytest.mark.parametrize(
    "pods",
    [
        [pod("x", labels={INDEX: "0"}), pod("y", labels={INDEX: "0"}), pod("z", labels={INDEX: "1"})],  # duplicate
        [pod("x", labels={INDEX: "0"}), pod("y"), pod("z", labels={INDEX: "1"})],  # a label missing
        [pod("x", labels={INDEX: "0"}), pod("y", labels={INDEX: "7"}), pod("z", labels={INDEX: "1"})],  # too big
        # an ungated pod (rank 0 -> "a") runs on "b": ranks cannot be trusted
        [pod("x", labels={INDEX: "0"}, host="b"), pod("y", labels={INDEX: "2"}), pod("z", labels={INDEX: "1"})],
    ],
)
def test_bad_ranks_fall_back_to_greedy(pods) -> None:
    ps = pod_set(("a", 1), ("b", 2), request=RANKED)
    plan = placed(ungater.plan_pod_set(ps, pods))
    gated = [p["metadata"]["name"] for p in pods if ungater.is_gated(p)]
    expected_hosts = ["a", "b", "b"]
    if len(gated) < 3:  # the ungated one already fills a "b" slot
        expected_hosts = ["a", "b"]
    assert plan == dict(zip(gated, expected_hosts, strict=True))


def test_rank_beyond_a_short_assignment_falls_back_to_greedy() -> None:
    """Kueue's tas_test.go 'PodSet slice size does not divide the PodSet count' / 'ungater falls back to
    greedy assignment when a rank is out of range': count 3, host slices of 2, so the assignment holds 2
    pods; the pod of index 2 has no domain by rank, and greedy ungates exactly the 2 the domain takes."""
    ps = ungater.PodSetTopology(
        name="worker",
        count=3,
        assignment=tas.Assignment(levels=(HOST,), domains=(tas.DomainAssignment(values=("x1",), count=2),)),
        request=models.PodSetTopologyRequest(
            preferred="rack", pod_index_label=INDEX, pod_set_slice_required_topology=HOST, pod_set_slice_size=2
        ),
    )
    pods = [pod(f"worker-{i}", labels={INDEX: str(i)}) for i in range(3)]
    assert placed(ungater.plan_pod_set(ps, pods)) == {"worker-0": "x1", "worker-1": "x1"}


def test_greedy_respects_pods_already_placed_and_never_overfills() -> None:
    ps = pod_set(("a", 2), ("b", 2))
    pods = [pod("p1", host="a"), pod("p2", host="a"), pod("p3", host="b"), pod("p4"), pod("p5")]
    assert placed(ungater.plan_pod_set(ps, pods)) == {"p4": "b"}  # p5 stays gated: the assignment is full


def test_group_leader_and_workers_rank_with_offsets() -> None:
    group = dict(required="rack", pod_index_label=INDEX, pod_set_group_name="g")
    leader = pod_set(("a", 1), name="leader", request=models.PodSetTopologyRequest(**group))
    workers = pod_set(("a", 1), ("b", 2), name="workers", request=models.PodSetTopologyRequest(**group))
    bounds = ungater.rank_bounds([leader, workers])
    assert bounds == {"leader": (0, 1), "workers": (1, 4)}
    pods = [pod("w3", labels={INDEX: "3"}), pod("w1", labels={INDEX: "1"}), pod("w2", labels={INDEX: "2"})]
    offset, max_rank = bounds["workers"]
    assert placed(ungater.plan_pod_set(workers, pods, offset=offset, max_rank=max_rank)) == {
        "w1": "a",
        "w2": "b",
        "w3": "b",
    }
    # the pod-index-offset annotation shifts the ranks further (LWS workers)
    shifted = [pod(p["metadata"]["name"], labels={INDEX: str(int(p["metadata"]["labels"][INDEX]) + 1)},
                   annotations={ungater.POD_INDEX_OFFSET_ANNOTATION: "1"}) for p in pods]  # fmt: skip
    assert placed(ungater.plan_pod_set(workers, shifted, offset=offset, max_rank=max_rank)) == {
        "w1": "a",
        "w2": "b",
        "w3": "b",
    }


def test_jobset_ranks_combine_job_index_and_pod_index() -> None:
    request = models.PodSetTopologyRequest(
        required="rack", pod_index_label=INDEX, sub_group_index_label=JOB_INDEX, sub_group_count=2
    )
    ps = pod_set(("a", 2), ("b", 2), request=request)
    pods = [pod(f"j{j}-p{i}", labels={INDEX: str(i), JOB_INDEX: str(j)}) for j in (1, 0) for i in (1, 0)]
    assert placed(ungater.plan_pod_set(ps, pods)) == {"j0-p0": "a", "j0-p1": "a", "j1-p0": "b", "j1-p1": "b"}


def test_bad_offset_annotation_is_an_error_naming_it() -> None:
    ps = pod_set(("a", 1))
    with pytest.raises(ValueError, match="pod-index-offset"):
        ungater.plan_pod_set(ps, [pod("x", annotations={ungater.POD_INDEX_OFFSET_ANNOTATION: "one"})])


def test_start_gates_tas_templates_of_jobsets_and_keeps_the_topology_gate_only_on_tas_pods() -> None:
    from kueue_es.services.dispatcher import core

    ref = core.types.WorkloadRef(namespace="default", name="wl", uid="u")
    tas_info = core.PodSetInfo(
        name="workers", scheduling_gates=[core.TOPOLOGY_GATE], labels={core.PODSET_LABEL: "workers"}
    )
    plain_info = core.PodSetInfo(name="driver")
    jobset = {"spec": {"replicatedJobs": [
        {"name": "driver", "template": {"spec": {"template": {"spec": {"containers": []}}}}},
        {"name": "workers", "template": {"spec": {"template": {"spec": {"containers": []}}}}},
    ]}}  # fmt: skip
    start = core.StartIntegration(
        workload=ref, kind="JobSet", namespace="default", name="js", pod_sets=[plain_info, tas_info]
    )
    rjobs = start.patch(jobset)["spec"]["replicatedJobs"]
    templates = {r["name"]: r["template"]["spec"]["template"] for r in rjobs}
    assert templates["workers"]["spec"]["schedulingGates"] == [{"name": core.TOPOLOGY_GATE}]
    assert templates["workers"]["metadata"]["labels"] == {core.PODSET_LABEL: "workers"}
    assert "schedulingGates" not in templates["driver"]["spec"]
    stopped = core.StopIntegration(
        workload=ref,
        kind="JobSet",
        namespace="default",
        name="js",
        reason="Preempted",
        decision_seq=3,
        pod_sets=[plain_info, tas_info],
    ).patch({"spec": {"replicatedJobs": rjobs}})
    assert all(
        "schedulingGates" not in r["template"]["spec"]["template"]["spec"] for r in stopped["spec"]["replicatedJobs"]
    )

    both = {"spec": {"schedulingGates": [{"name": core.SCHEDULING_GATE}, {"name": core.TOPOLOGY_GATE}]}, "metadata": {}}
    pods = core.StartPods(workload=ref, namespace="default", pod_name="p", pod_sets=[
        core.PodSetInfo(name="main", scheduling_gates=[core.TOPOLOGY_GATE])])  # fmt: skip
    assert pods.patch(both, pod_set="main")["spec"]["schedulingGates"] == [{"name": core.TOPOLOGY_GATE}]
    plain = core.StartPods(workload=ref, namespace="default", pod_name="p", pod_sets=[core.PodSetInfo(name="main")])
    assert plain.patch(both, pod_set="main")["spec"]["schedulingGates"] is None


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        # an elastic job started by its first slice: both annotations name it
        ({ungater.WORKLOAD_ANNOTATION: "job-a-1", slices.SLICE_NAME_ANNOTATION: "job-a-1"}, "job-a-1"),
        # started by its second slice, the first replaced before its start was written: the pods name the
        # second slice as their Workload, and the chain by its first (CI: a TAS elastic Job never ungated)
        ({ungater.WORKLOAD_ANNOTATION: "job-a-2", slices.SLICE_NAME_ANNOTATION: "job-a-1"}, "job-a-1"),
        ({ungater.WORKLOAD_ANNOTATION: "job-b"}, "job-b"),  # not elastic
        ({}, None),
    ],
)
def test_the_ungaters_find_a_pod_by_its_chain_first(annotations: dict[str, str], want: str | None) -> None:
    """Kueue's IndexPodWorkloadSliceName: the slice-name annotation when there is one, else the Workload's."""
    assert ungater.chain_name(pod("p", annotations=annotations)) == want


def test_the_pods_of_a_chain_started_by_its_second_slice_are_found_by_its_first() -> None:
    """The dispatcher's ungating looks a workload's pods up by the chain name, so an elastic job whose first
    slice never started (replaced at once) still has its pods ungated and released."""
    from kueue_es.services.dispatcher import core
    from kueue_es.services.dispatcher.ungating import Ungating

    ungating = Ungating(api=None, limiter=None, view=None)  # type: ignore[arg-type]
    started = {ungater.WORKLOAD_ANNOTATION: "job-a-2", slices.SLICE_NAME_ANNOTATION: "job-a-1"}
    for name, marks in (("a-x", started), ("a-y", started), ("b-x", {ungater.WORKLOAD_ANNOTATION: "job-b"})):
        body = pod(name, labels={core.PODSET_LABEL: "main"}, annotations=marks)
        body["metadata"]["namespace"] = "ns"
        ungating.pods[("ns", name)] = body  # type: ignore[assignment]
    assert [p["metadata"]["name"] for p in ungating._pods_of("ns", "job-a-1", "main")] == ["a-x", "a-y"]
    assert ungating._pods_of("ns", "job-a-2", "main") == []
    assert [p["metadata"]["name"] for p in ungating._pods_of("ns", "job-b", "main")] == ["b-x"]


def test_pods_whose_domain_is_an_unhealthy_node_stay_gated() -> None:
    """Kueue topology_ungater.go: while the Workload lists a node in status.unhealthyNodes, a gated pod the old
    assignment puts there is not ungated (it could never schedule); the others are. Only a hostname-level
    assignment names nodes (utiltas.NodeNameFromDomainID)."""
    ps = pod_set(("kind-worker", 2), ("kind-worker2", 2))
    pods = [pod("p0", host="kind-worker2"), pod("p1"), pod("p2"), pod("p3")]
    plan = ungater.plan_pod_set(ps, pods)
    assert placed(plan) == {"p1": "kind-worker", "p2": "kind-worker", "p3": "kind-worker2"}
    now, held = ungater.without_unhealthy(plan, ps.assignment.levels, ("kind-worker",))
    assert placed(now) == {"p3": "kind-worker2"}
    assert [step.name for step in held] == ["p1", "p2"]
    assert ungater.without_unhealthy(plan, ps.assignment.levels, ()) == (plan, [])
    # a rack-level assignment names no node: nothing is held back
    rack = [ungater.Ungate(name="p1", node_selector={"rack": "kind-worker"})]
    assert ungater.without_unhealthy(rack, ("rack",), ("kind-worker",)) == (rack, [])


class _Api:
    def __init__(self) -> None:
        self.patched: dict[str, dict[str, Any]] = {}

    async def patch_object(self, ref, *, namespace, name, patch, subresource=None):  # noqa: ANN001, ANN201
        self.patched[name if subresource is None else f"{name}/{subresource}"] = patch
        return {
            "metadata": {"name": name, "namespace": namespace},
            **{k: v for k, v in patch.items() if k != "metadata"},
        }


class _Limiter:
    async def acquire(self, write_class) -> None:  # noqa: ANN001
        return None


async def test_a_recreated_pod_waits_for_the_replacement_of_its_failed_node() -> None:
    """The new user's TAS trial: after kind-worker failed, a recreated pod was ungated onto kind-worker with the old
    assignment before the replacement came, and stayed Pending for good. The dispatcher's ungater holds it back
    while the Workload's status.unhealthyNodes lists kind-worker, and ungates it once the list changed as folded."""
    from types import SimpleNamespace

    from kueue_es.services.dispatcher import core
    from kueue_es.services.dispatcher.ungating import Ungating

    record = SimpleNamespace(unhealthy_nodes=("kind-worker",))
    view = SimpleNamespace(records={"ns/wl": record}, cluster=SimpleNamespace(workloads={}))
    api = _Api()
    ungating = Ungating(api=api, limiter=_Limiter(), view=view)  # type: ignore[arg-type]
    ungating._topology_pod_sets = lambda key: [pod_set(("kind-worker", 1), ("kind-worker2", 1))]  # type: ignore[method-assign]
    for name, host in (("p0", "kind-worker2"), ("p1", "")):
        body = pod(name, labels={core.PODSET_LABEL: "main"}, annotations={ungater.WORKLOAD_ANNOTATION: "wl"}, host=host)
        body["metadata"]["namespace"] = "ns"
        ungating.pods[("ns", name)] = body  # type: ignore[assignment]
    ungating.mark("ns/wl")
    assert await ungating.ungate_dirty()
    assert api.patched == {}  # p1's domain is the failed node: it stays gated
    ungating.recheck_held()
    assert api.patched == {} and not ungating._dirty  # nothing changed: not marked again
    record.unhealthy_nodes = ()  # the node healthy again (or a replacement assigned)
    ungating.recheck_held()
    assert await ungating.ungate_dirty()
    assert api.patched["p1"]["spec"]["nodeSelector"] == {HOST: "kind-worker"}


def test_a_pending_pod_waits_on_its_selected_node_only_ungated_and_unbound() -> None:
    """Kueue node_controller.go getPodsToTerminate: Pending, no nodeName, no topology gate."""
    waiting = pod("p", host="kind-worker")
    waiting["status"] = {"phase": "Pending"}
    assert ungater.pending_on_selected_node(waiting) == "kind-worker"
    assert ungater.pending_on_selected_node({**waiting, "status": {"phase": "Running"}}) is None
    assert ungater.pending_on_selected_node({**waiting, "spec": {**waiting["spec"], "nodeName": "kind-worker"}}) is None
    gated = pod("g")
    gated["status"] = {"phase": "Pending"}
    assert ungater.pending_on_selected_node(gated) is None
    status = ungater.terminated_by_kueue_status(waiting, now="2026-01-01T00:00:00Z")
    assert status["phase"] == "Failed"
    assert [(c["type"], c["reason"]) for c in status["conditions"]] == [
        ("TerminatedByKueue", "UnschedulableOnAssignedNode")
    ]


async def test_a_pod_pending_on_a_failing_assigned_node_is_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue node_controller.go markPodsFailed: the dispatcher writes phase Failed with TerminatedByKueue on a
    pending pod whose nodeSelector names a node it cannot run on, so its Job makes it again (the new user's TAS
    trial: such a pod stayed Pending for good); a pod on a healthy node is left alone."""
    from types import SimpleNamespace

    from kueue_es.scheduling.tas import replacement
    from kueue_es.services.dispatcher import core
    from kueue_es.services.dispatcher.ungating import Ungating

    monkeypatch.setattr(replacement, "terminates_pending_pods", lambda state, wl, host: host == "kind-worker")
    view = SimpleNamespace(
        records={"ns/wl": SimpleNamespace(unhealthy_nodes=())},
        cluster=SimpleNamespace(
            workloads={"ns/wl": SimpleNamespace(workload=SimpleNamespace(metadata=SimpleNamespace(annotations={})))}
        ),
    )
    api = _Api()
    ungating = Ungating(api=api, limiter=_Limiter(), view=view)  # type: ignore[arg-type]
    ungating._topology_pod_sets = lambda key: [pod_set(("kind-worker", 1), ("kind-worker2", 1))]  # type: ignore[method-assign]
    for name, host in (("p0", "kind-worker"), ("p1", "kind-worker2")):
        body = pod(name, labels={core.PODSET_LABEL: "main"}, annotations={ungater.WORKLOAD_ANNOTATION: "wl"}, host=host)
        body["metadata"]["namespace"] = "ns"
        body["status"] = {"phase": "Pending"}
        ungating.pods[("ns", name)] = body  # type: ignore[assignment]
    ungating.node_changed("kind-worker")
    assert list(ungating._dirty) == ["ns/wl"]
    assert await ungating.ungate_dirty()
    assert set(api.patched) == {"p0/status"}
    assert api.patched["p0/status"]["status"]["phase"] == "Failed"
