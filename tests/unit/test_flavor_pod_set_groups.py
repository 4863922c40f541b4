"""Flavor assignment of a pod set group (leader + workers sharing ``podSetGroupName``) as one unit
(flavorassigner.go assignFlavors / resolvePodSetFlavors; SEMANTICS §5.2)."""

from __future__ import annotations

from kueue_es.events import models
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling import flavors
from tests.builders import cluster_queue, flavor, parse

GROUPED = models.PodSetTopologyRequest(required="block", pod_set_group_name="g")


def _picker(nominal: dict[str, str]) -> flavors.Picker:
    """A Picker over one ClusterQueue whose cpu group lists ``nominal``'s flavors in order (quantities);
    the flavors are TAS flavors of a topology with a ``block`` level."""
    cq = parse(cluster_queue("cq", flavors={f: {"cpu": n} for f, n in nominal.items()}))
    objects = {name: parse({**flavor(name), "spec": {"topologyName": "default"}}) for name in nominal}
    topology = parse(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": "block"}]},
        }
    )
    state = ClusterState(cluster_queues={"cq": cq}, flavors=objects)
    return flavors.Picker(cq, quota.build(state), objects, fair_sharing=False, topologies={"default": topology})


def _ps(
    name: str, count: int, cpu: int, request: models.PodSetTopologyRequest | None = GROUPED
) -> flavors.PodSetRequest:
    return flavors.PodSetRequest(
        name=name,
        count=count,
        requests={"cpu": cpu} if cpu else {},
        topology_request=request,
        raw_resources=frozenset({"cpu"}),
    )


def test_the_group_total_picks_the_flavor_for_every_member() -> None:
    picker = _picker({"a": "4", "b": "10"})
    result = picker.assign([_ps("leader", 1, 2000), _ps("workers", 3, 1000)], oracle=None)
    assert result.mode == "Fit"
    assert [(p.name, p.flavors, p.usage) for p in result.pod_sets] == [
        ("leader", {"cpu": "b"}, {"cpu": 2000}),
        ("workers", {"cpu": "b"}, {"cpu": 3000}),
    ]
    assert result.tried == ({"cpu": -1}, {"cpu": -1})  # both record the unit's scan, which reached b


def test_a_group_too_large_for_every_flavor_names_each_pod_set_and_the_summed_request() -> None:
    """Each member carries the group's status (Kueue's Assignment.Message: a line per pod set)."""
    picker = _picker({"a": "4"})
    result = picker.assign([_ps("leader", 1, 2000), _ps("workers", 3, 1000)], oracle=None)
    assert result.mode == "NoFit"
    reason = (
        "insufficient quota for cpu in flavor a, previously considered podsets requests (0) + current podset "
        "request (5) > maximum capacity (4)"
    )
    assert result.message == (
        f"couldn't assign flavors to pod set leader: {reason}; couldn't assign flavors to pod set workers: {reason}"
    )
    assert result.tried == ({}, {})


def test_units_keep_spec_order_in_the_result_and_an_ungrouped_pod_set_is_its_own_unit() -> None:
    """Kueue visits units in the order of their first pod set: the group (0 and 2) before the
    launcher (1), whose usage then counts against the group's flavor; the result is in spec order."""
    picker = _picker({"a": "6", "b": "10"})
    result = picker.assign(
        [_ps("leader", 1, 1000), _ps("launcher", 1, 2000, request=None), _ps("workers", 2, 1000)], oracle=None
    )
    assert [(p.name, p.flavors["cpu"]) for p in result.pod_sets] == [
        ("leader", "a"),
        ("launcher", "a"),
        ("workers", "a"),
    ]
    crowded = picker.assign(
        [_ps("leader", 1, 1000), _ps("launcher", 1, 4000, request=None), _ps("workers", 2, 1000)], oracle=None
    )
    # the group (3 CPU) took a first; the launcher's 4 CPU no longer fit there
    assert [(p.name, p.flavors["cpu"]) for p in crowded.pod_sets] == [
        ("leader", "a"),
        ("launcher", "b"),
        ("workers", "a"),
    ]


def test_a_member_requesting_nothing_gets_the_groups_tas_flavor_without_usage() -> None:
    picker = _picker({"a": "4"})
    result = picker.assign([_ps("leader", 1, 0), _ps("workers", 2, 1000)], oracle=None)
    assert [(p.name, p.flavors, p.usage) for p in result.pod_sets] == [
        ("leader", {"cpu": "a"}, {"cpu": 0}),
        ("workers", {"cpu": "a"}, {"cpu": 2000}),
    ]


def test_without_groups_the_pod_set_by_pod_set_scan_is_unchanged() -> None:
    picker = _picker({"a": "4", "b": "10"})
    alone = models.PodSetTopologyRequest(required="block")
    result = picker.assign([_ps("leader", 1, 2000, request=alone), _ps("workers", 3, 1000, request=alone)], oracle=None)
    assert [(p.name, p.flavors["cpu"]) for p in result.pod_sets] == [("leader", "a"), ("workers", "b")]
