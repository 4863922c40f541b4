"""Where the pods of a failed node go back to (SEMANTICS-ADVANCED A.13.4 step 3; Kueue
tas_flavor_snapshot.go requiredReplacementDomain, findIncompleteSliceDomain)."""

from __future__ import annotations

from events import models
from events.tas import DomainAssignment
from services.tas_placer.core import _replacement_domain
from tests.unit.tas_fixtures import THREE, B, R, flavor_topology, hnode

TREE = flavor_topology(
    [
        hnode(x, b, r, x, cpu="1")
        for b, r, x in (
            ("b1", "r1", "x1"), ("b1", "r1", "x2"), ("b1", "r1", "x8"), ("b1", "r2", "x3"),
            ("b1", "r2", "x4"), ("b1", "r3", "x5"), ("b2", "r4", "x6"),
        )
    ],
    THREE,
)  # fmt: skip
KEPT = [DomainAssignment(("x2",), 1), DomainAssignment(("x3",), 1), DomainAssignment(("x4",), 1)]


def _slices(**kw: object) -> models.PodSetTopologyRequest:
    return models.PodSetTopologyRequest(**kw)  # type: ignore[arg-type]


def test_broken_slice_goes_to_the_rack_it_completes() -> None:
    request = _slices(preferred=B, pod_set_slice_required_topology=R, pod_set_slice_size=2)
    assert _replacement_domain(TREE, request, KEPT, 1) == ("b1", "r1")


def test_whole_slices_go_anywhere_unless_required() -> None:
    preferred = _slices(preferred=B, pod_set_slice_required_topology=R, pod_set_slice_size=2)
    kept = [DomainAssignment(("x3",), 1), DomainAssignment(("x4",), 1)]
    assert _replacement_domain(TREE, preferred, kept, 2) is None
    required = _slices(required=B, pod_set_slice_required_topology=R, pod_set_slice_size=2)
    assert _replacement_domain(TREE, required, kept, 2) == ("b1",)


def test_multi_layer_uses_the_innermost_broken_layer() -> None:
    request = _slices(
        required=B,
        podset_slice_required_topology_constraints=[
            models.PodsetSliceRequiredTopologyConstraint(topology=B, size=4),
            models.PodsetSliceRequiredTopologyConstraint(topology=R, size=2),
        ],
    )
    assert _replacement_domain(TREE, request, KEPT, 1) == ("b1", "r1")  # r2 holds 2: 2 + 1 is odd


def test_no_domain_completes_the_slice_or_nothing_kept() -> None:
    request = _slices(preferred=B, pod_set_slice_required_topology=R, pod_set_slice_size=4)
    assert _replacement_domain(TREE, request, KEPT, 1) is None  # r1: 1 + 1, r2: 2 + 1, no multiple of 4
    assert _replacement_domain(TREE, _slices(required=R), [], 3) is None
    assert _replacement_domain(TREE, _slices(required=R), KEPT, 1) == ("b1", "r1")
