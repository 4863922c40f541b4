"""The classical target search does no work whose result it cannot use (issue 18, point 2).

c1 and c2 both borrow from c3 in one cohort; c1 and c2 reclaim within the cohort (Any) but never
borrow while preempting (borrowWithinCohort unset: Never). A pending ``in`` (priority 1, 4 CPU) in
c1 does not fit (2 CPU free in the cohort). Kueue's search (preemption.go classicalPreemptions,
hierarchical_preemption.go) then makes one attempt, with borrowing, in which no workload of
another ClusterQueue found below the cohort is a valid target: only c1's own lower priorities are.
So the search must give c1-low and never build c2's candidates; and the flavor assignment of a
workload asking for one resource searches once, not once for the oracle and once for its targets.
"""

from __future__ import annotations

import yaml

from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState
from kueue_es.scenarios import core_engine
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.scheduling import preemption, queues
from kueue_es.scheduling.search import Search


def _cq(name: str, nominal: int) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": "cohort",
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": nominal}]}],
                }
            ],
        },
    }


def _workload(name: str, queue: str, priority: int, cpu: int, second: int) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": f"2026-01-01T00:00:{second:02d}Z"},
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}},
                }
            ],
        },
    }


def _admitted(name: str, cq: str, priority: int, cpu: int, second: int) -> dict:
    workload = _workload(name, cq, priority, cpu, second)
    workload["status"] = {
        "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}]
    }
    return {
        "workload": workload,
        "admission": {
            "clusterQueue": cq,
            "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "count": 1}],
        },
    }


def _state() -> ClusterState:
    doc = {
        "name": "borrowing-cohort",
        "objects": [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
            _cq("c1", 6),
            _cq("c2", 6),
            _cq("c3", 6),
            *(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"clusterQueue": name},
                }
                for name in ("c1", "c2", "c3")
            ),
        ],
        "admitted": [
            _admitted("c1-low", "c1", -1, 5, 1),
            _admitted("c1-mid", "c1", 0, 3, 2),
            _admitted("c2-low", "c2", -1, 4, 3),
            _admitted("c2-mid", "c2", 0, 4, 4),
        ],
        # in a LocalQueue that does not exist: known, never tried by the scenario's cycles
        "pending": [_workload("in", "missing", 1, 4, 10)],
        "run": {"cycles": 1},
    }
    state = core_engine.run_scenario(parse_scenario(yaml.safe_dump(doc))).state
    assert {k for k, wl in state.workloads.items() if wl.admitted} == {
        "default/c1-low",
        "default/c1-mid",
        "default/c2-low",
        "default/c2-mid",
    }
    return state


def _search_for_in(state: ClusterState) -> tuple[Search, list[preemption.Target], str]:
    tree = quota.build(state)
    search = Search(state, tree, now_ms=0)
    wl = state.workloads["default/in"]
    cq = state.cluster_queues["c1"]
    requests = queues.pod_set_requests(wl.workload, cq=cq, config=state.configuration)
    assignment, targets = search.assignments(wl, requests, cq=cq)
    return search, targets, assignment.mode


def test_a_borrowing_cluster_queue_that_may_not_borrow_preempting_takes_its_own_and_looks_no_further() -> None:
    search, targets, mode = _search_for_in(_state())
    assert mode == "Preempt"
    assert [(t.key, t.reason) for t in targets] == [("default/c1-low", preemption.IN_CLUSTER_QUEUE)]
    # c2 borrows, so the search used to build its candidates and classify each, to drop them all
    assert set(search.pool._by_cq) == {"c1"}


def test_the_assignment_of_a_single_resource_workload_searches_once(monkeypatch) -> None:
    calls: list[str] = []
    real = preemption.classical_targets

    def counting(tree, pool, preemptor):  # type: ignore[no-untyped-def]
        calls.append(preemptor.key)
        return real(tree, pool, preemptor)

    monkeypatch.setattr(preemption, "classical_targets", counting)
    _, targets, _ = _search_for_in(_state())
    assert [t.key for t in targets] == ["default/c1-low"]
    assert calls == ["default/in"]  # the oracle's search, whose answer the targets are


def test_taking_workloads_out_filters_the_candidates_and_builds_none_again() -> None:
    """``Search.without`` (the cycle's recomputation of an entry whose targets overlap earlier victims) used to
    drop the pool and build every candidate again, inside and after, once per such entry: a burst of
    preemptions in a large cohort spent most of a cycle there. Each candidate is built once per pool now;
    inside, the workloads taken out are no candidates, and after, the pool is as before."""
    state = _state()
    search = Search(state, quota.build(state), now_ms=0)
    before = {cq: list(search.pool.of(cq)) for cq in ("c1", "c2")}
    assert [c.key for c in before["c1"]] == ["default/c1-low", "default/c1-mid"]
    with search.without(["default/c1-low", "default/c2-mid"]):
        assert [c.key for c in search.pool.of("c1")] == ["default/c1-mid"]
        assert [c.key for c in search.pool.of("c2")] == ["default/c2-low"]
        assert search.pool.of("c1")[0] is before["c1"][1]  # the same object: not built again
        assert search.pool.candidate("default/c1-low", "c1") is None  # taken out
        assert search.pool.candidate("default/c1-mid", "c2") is None  # not of that ClusterQueue
    after = {cq: search.pool.of(cq) for cq in ("c1", "c2")}
    assert all(a is b for cq in before for a, b in zip(before[cq], after[cq], strict=True))
    assert search.pool.candidate("default/c1-low", "c1") is before["c1"][0]


def test_a_partition_tree_view_keeps_the_trees_methods_and_reads_its_data_afresh() -> None:
    """The partition's view of the quota tree looks its attributes up on the tree; the bound methods are kept
    (a search calls them millions of times), anything else is read from the tree each time."""
    from kueue_es.projections.partitions import TreeView

    state = _state()
    tree = quota.build(state)
    view = TreeView(tree, ["c1"])
    assert list(view.cluster_queues) == ["c1"]
    assert view.usage == tree.usage and view.__dict__["usage"] == tree.usage
    assert view.usage("c1", ("default", "cpu")) == tree.usage("c1", ("default", "cpu")) == 8000
    assert view.cohorts is tree.cohorts and "cohorts" not in view.__dict__
