"""Pending workloads and their positions, as Kueue's visibility API numbers them (SEMANTICS-ADVANCED §G.2).

Positions follow the admitter's own queue order: priority first, then creation time; the position in a
LocalQueue counts the earlier workloads of that LocalQueue only; parked (inadmissible) workloads are
listed too, as Kueue's ClusterQueue snapshot lists its inadmissible workloads.
"""

from __future__ import annotations

import pytest
import yaml

from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios.loading import parse_scenario
from kueue_es.scheduling import visibility
from kueue_es.services.admitter.core import decide

API = "kueue.x-k8s.io/v1beta2"


def _workload(name: str, lq: str, *, priority: int, second: int, cpus: int = 1, namespace: str = "default") -> dict:
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-01-01T00:00:{second:02d}Z",
        },
        "spec": {
            "queueName": lq,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": cpus,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                }
            ],
        },
    }


def _state(
    pending: list[dict], local_queues: tuple[tuple[str, str], ...] = (("default", "lq-a"), ("default", "lq-b"))
) -> ClusterState:
    objects = [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 1}]}],
                    }
                ],
            },
        },
        *(
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": ns},
                "spec": {"clusterQueue": "cq"},
            }
            for ns, lq in local_queues
        ),
    ]
    doc = {"name": "positions", "source": "issue 16", "objects": objects, "pending": pending}
    scenario = parse_scenario(yaml.safe_dump(doc, sort_keys=False), path="<positions>")
    state = ClusterState()
    seq = 0
    for obj in [*scenario.objects, *scenario.pending]:
        assert obj.fact is not None
        seq += 1
        apply(state, obj.fact, seq=seq)
    return state


def test_positions_follow_priority_then_creation_across_local_queues() -> None:
    state = _state(
        [
            _workload("a-old", "lq-a", priority=0, second=1),
            _workload("b-high", "lq-b", priority=10, second=5),
            _workload("a-new", "lq-a", priority=0, second=9),
            _workload("b-old", "lq-b", priority=0, second=2),
        ]
    )
    listed = visibility.pending_in_cluster_queue(state, "cq")
    assert [(p.name, p.position_in_cluster_queue, p.position_in_local_queue) for p in listed] == [
        ("b-high", 0, 0),
        ("a-old", 1, 0),
        ("b-old", 2, 1),
        ("a-new", 3, 1),
    ]
    assert [p.local_queue for p in listed] == ["lq-b", "lq-a", "lq-b", "lq-a"]
    assert listed[0].priority == 10
    in_a = visibility.pending_in_local_queue(state, "default", "lq-a")
    assert [(p.name, p.position_in_cluster_queue) for p in in_a] == [("a-old", 1), ("a-new", 3)]
    entry = visibility.position_of(state, "default", "b-old")
    assert entry is not None and entry.position_in_cluster_queue == 2


def test_same_local_queue_name_in_two_namespaces_counted_apart() -> None:
    # Kueue #14435 (pkg/cache/queue/manager.go, the ClusterQueue snapshot): positionInLocalQueue was
    # keyed by the LocalQueue's name alone, so two namespaces' "default" LocalQueues shared one count.
    state = _state(
        [
            _workload("a1", "default", priority=0, second=1, namespace="team-a"),
            _workload("b1", "default", priority=0, second=2, namespace="team-b"),
            _workload("a2", "default", priority=0, second=3, namespace="team-a"),
            _workload("b2", "default", priority=0, second=4, namespace="team-b"),
        ],
        local_queues=(("team-a", "default"), ("team-b", "default")),
    )
    listed = visibility.pending_in_cluster_queue(state, "cq")
    assert [(p.namespace, p.name, p.position_in_cluster_queue, p.position_in_local_queue) for p in listed] == [
        ("team-a", "a1", 0, 0),
        ("team-b", "b1", 1, 0),
        ("team-a", "a2", 2, 1),
        ("team-b", "b2", 3, 1),
    ]
    in_b = visibility.pending_in_local_queue(state, "team-b", "default")
    assert [(p.name, p.position_in_local_queue) for p in in_b] == [("b1", 0), ("b2", 1)]


def test_admitted_workloads_leave_and_parked_ones_stay_listed() -> None:
    state = _state(
        [
            _workload("first", "lq-a", priority=0, second=1),
            _workload("too-big", "lq-a", priority=5, second=2, cpus=4),
            _workload("second", "lq-b", priority=0, second=3),
        ]
    )
    seq = state.last_seq
    for _ in range(3):  # a few cycles: too-big is parked (it can never fit), first is admitted
        for out in decide(state, now_ms=1_000):
            seq += 1
            event = out.inadmissible(at_ms=1_000) if isinstance(out, types.PendingOutcome) else out
            apply(state, event, seq=seq)
    listed = visibility.pending_in_cluster_queue(state, "cq")
    names = [p.name for p in listed]
    assert "first" not in names  # admitted: no longer pending
    assert visibility.position_of(state, "default", "first") is None
    parked = {p.name: p.parked for p in listed}
    assert parked["too-big"] is True
    assert names == ["too-big", "second"]  # priority orders parked and active workloads alike


def test_unknown_queues_and_paging() -> None:
    state = _state([_workload(f"w{i}", "lq-a", priority=0, second=i) for i in range(5)])
    with pytest.raises(KeyError, match="ClusterQueue 'nope'"):
        visibility.pending_in_cluster_queue(state, "nope")
    with pytest.raises(KeyError, match="LocalQueue default/nope"):
        visibility.pending_in_local_queue(state, "default", "nope")
    listed = visibility.pending_in_cluster_queue(state, "cq")
    assert [p.name for p in visibility.page(listed, offset=1, limit=2)] == ["w1", "w2"]
    assert visibility.page(listed, offset=-3, limit=-1) == []
    assert len(visibility.page(listed, offset=-3)) == 5
