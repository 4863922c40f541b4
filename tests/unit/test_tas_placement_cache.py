"""The placer's phase-1 cache (``usage_token``) gives the same results as a fresh placement.

A cycle (:class:`kueue_es.scheduling.tas.cycle.CycleTopology`) places many workloads on one tree
while its usage grows admission by admission; with a :class:`UsageToken` the placer keeps the
per-domain capacities of phase 1 (A.6.2) with the tree and updates only the leaves an
admission changed, and restores only the domains a run's phase 2 changed. This drives one
such sequence (seeded test data: required / preferred / unconstrained, slices, leader +
workers groups, node selectors, and balanced placement) and checks every call against the
same call without the token, placement and failure message alike.
"""

from __future__ import annotations

import random

import pytest

from kueue_es.events import models
from kueue_es.scheduling.tas.placement import find_assignments
from kueue_es.scheduling.tas.requests import Placement, PodSetPlacementRequest, TASGates, UsageToken, add_usage
from tests.unit.tas_fixtures import THREE, B, H, R, flavor_topology, hnode


def _tree(rng: random.Random):  # type: ignore[no-untyped-def]
    nodes = []
    for b in range(2):
        for r in range(3):
            for x in range(4):
                name = f"b{b}-r{r}-x{x}"
                nodes.append(
                    hnode(name, f"b{b}", f"r{r}", name, cpu=str(rng.choice([2, 4, 8])), pods=str(rng.choice([4, 10])))
                )
                if x == 0:
                    nodes[-1]["metadata"]["labels"]["pool"] = "a"
    return flavor_topology(nodes, THREE)


def _request(rng: random.Random, index: int) -> list[PodSetPlacementRequest]:
    kind = rng.choice(["required", "preferred", "unconstrained", "slices", "group", "selector"])
    cpu = rng.choice([500, 1000, 2000])
    count = rng.randint(1, 12)
    name = f"ps{index}"
    if kind == "group":
        level = rng.choice([B, R])
        workers = models.PodSetTopologyRequest(required=level, pod_set_group_name="g")
        leader = models.PodSetTopologyRequest(required=level, pod_set_group_name="g")
        return [
            PodSetPlacementRequest(name=f"{name}-l", count=1, requests={"cpu": 1000}, topology_request=leader),
            PodSetPlacementRequest(name=name, count=count, requests={"cpu": cpu}, topology_request=workers),
        ]
    if kind == "slices":
        request = models.PodSetTopologyRequest(
            preferred=B, pod_set_slice_required_topology=rng.choice([R, H]), pod_set_slice_size=rng.choice([2, 3])
        )
        count = request.pod_set_slice_size * rng.randint(1, 4)  # type: ignore[operator]
    elif kind == "unconstrained":
        request = models.PodSetTopologyRequest(unconstrained=True)
    elif kind == "selector":
        request = models.PodSetTopologyRequest(preferred=R)
        return [
            PodSetPlacementRequest(
                name=name, count=count, requests={"cpu": cpu}, topology_request=request, node_selector={"pool": "a"}
            )
        ]
    else:
        request = models.PodSetTopologyRequest(**{kind: rng.choice([B, R, H])})
    return [PodSetPlacementRequest(name=name, count=count, requests={"cpu": cpu}, topology_request=request)]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("balanced", [False, True], ids=["greedy", "balanced"])
def test_cached_phase_one_matches_a_fresh_placement(seed: int, balanced: bool) -> None:
    rng = random.Random(seed)  # test data only: the cores never see randomness
    tree = _tree(rng)
    gates = TASGates(balanced_placement=balanced)
    usage: dict[str, dict[str, int]] = {}
    changes: list[frozenset[str]] = []
    placed = 0
    for step in range(40):
        token = UsageToken(("cycle", seed), len(changes), changes)
        batch = [_request(rng, step * 10 + i) for i in range(3)]
        batch += batch[:2]  # the same inputs again: the cached counts, with the domains phase 2 changed restored
        # cached calls back to back (a call without the token resets the tree), then fresh ones
        cached = [find_assignments(tree, r, tas_usage=usage, gates=gates, usage_token=token) for r in batch]
        fresh = [find_assignments(tree, r, tas_usage=usage, gates=gates) for r in batch]
        for requests, got, want in zip(batch, cached, fresh, strict=True):
            assert got == want, f"step {step}: {requests}"
        result = fresh[0]
        if isinstance(result, Placement) and rng.random() < 0.8:
            add_usage(usage, result.usage)
            changes.append(frozenset(result.usage))
            placed += 1
        if rng.random() < 0.15 and usage:  # a workload finishes: some leaves free up
            leaf = rng.choice(sorted(usage))
            del usage[leaf]
            changes.append(frozenset({leaf}))
    assert placed >= 10  # the sequence really grew the usage
