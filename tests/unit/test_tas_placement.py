"""The placement core against Kueue's own test tables.

Each case names its source: CT = pkg/cache/scheduler/tas_cache_test.go TestFindTopologyAssignments
(the tests behind pkg/cache/scheduler/tas_flavor_snapshot.go), ST = pkg/scheduler/scheduler_tas_test.go.
Node sets are in tests/unit/tas_fixtures.py. Expected domains are listed in assignment order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueue_es.events import models
from kueue_es.events.tas import Assignment
from kueue_es.scheduling.tas.placement import find_assignments
from kueue_es.scheduling.tas.requests import (
    Placement,
    PlacementFailure,
    PodSetPlacementRequest,
    TASGates,
    assignment_usage,
)
from tests.unit.tas_fixtures import (
    BINARY_TREE_NODES,
    DEFAULT_NODES,
    MULTIPOD_NODES,
    ONE,
    SCATTERED_NODES,
    THREE,
    TWO,
    B,
    H,
    R,
    flavor_topology,
    hnode,
    node,
    pod,
)

GPU = "example.com/gpu"


@dataclass
class PS:
    """A pod set of a case: topology request fields as keyword arguments of PodSetTopologyRequest."""

    count: int
    requests: dict[str, int]
    tr: dict[str, Any] | None = None
    name: str = "main"
    implied: bool = False
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, str]] = field(default_factory=list)

    def request(self) -> PodSetPlacementRequest:
        return PodSetPlacementRequest(
            name=self.name,
            count=self.count,
            requests=self.requests,
            topology_request=models.PodSetTopologyRequest(**self.tr) if self.tr is not None else None,
            implied=self.implied,
            node_selector=self.node_selector,
            tolerations=tuple(models.Toleration(**t) for t in self.tolerations),  # type: ignore[arg-type]
        )


@dataclass
class Case:
    source: str
    nodes: list[dict[str, Any]]
    levels: list[str]
    pod_sets: list[PS]
    want: dict[str, list[tuple[Any, int]]] | str  # per pod set: [(value or values, count)], or the failure message
    pods: list[dict[str, Any]] = field(default_factory=list)
    node_labels: dict[str, str] | None = None
    gates: TASGates = TASGates()


def cpu(n: int) -> dict[str, int]:
    return {"cpu": n}


def req(level: str) -> dict[str, Any]:
    return {"required": level}


def pref(level: str) -> dict[str, Any]:
    return {"preferred": level}


RACKS_FIRST = [
    hnode("b1-r1-x3", "b1", "r1", "x3", cpu="2"),
    hnode("b1-r2-x5", "b1", "r2", "x5", cpu="2", pods="20"),
    *(hnode(f"b1-r3-{x}", "b1", "r3", x, cpu="1") for x in ("x1", "x6", "x2", "x4")),
]
BLOCKS_241 = [node(b, {B: b}, cpu=c, pods=p) for b, c, p in (("b1", "2", "20"), ("b2", "1", "10"), ("b3", "4", "40"))]

CASES = [
    Case("CT minimize the number of used racks before optimizing the number of nodes; BestFit",
         RACKS_FIRST, THREE, [PS(4, cpu(1000), req(B))], {"main": [("x1", 1), ("x2", 1), ("x4", 1), ("x6", 1)]}),
    Case("CT choose the node that can accommodate all Pods",
         [hnode("b1-r1-x3", "b1", "r1", "x3", cpu="2"), hnode("b1-r1-x5", "b1", "r1", "x5", cpu="1"),
          hnode("b1-r1-x1", "b1", "r1", "x1", cpu="1")], THREE, [PS(2, cpu(1000), req(B))], {"main": [("x3", 2)]}),
    Case("CT no annotation; implied default to unconstrained; 6 pods fit into hosts scattered ...",
         SCATTERED_NODES, THREE, [PS(6, cpu(1000), None, implied=True)],
         {"main": [("x1", 1), ("x3", 1), ("x5", 1), ("x2", 1), ("x6", 2)]}),
    Case("CT unconstrained; 6 pods fit into hosts scattered across the whole datacenter ...",
         SCATTERED_NODES, THREE, [PS(6, cpu(1000), {"unconstrained": True})],
         {"main": [("x1", 1), ("x3", 1), ("x5", 1), ("x2", 1), ("x6", 2)]}),
    Case("CT unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileMixed",
         DEFAULT_NODES, THREE, [PS(1, cpu(1000), {"unconstrained": True})], {"main": [("x3", 1)]}),
    # Kueue PR #5803 (#5804 in 0.12): LeastFreeCapacity takes the first host in ascending free
    # capacity that holds all pods, not give up when the least free host is too small.
    Case("CT-like unconstrained; 2 pods fit only the largest host; LeastFreeCapacity; TASProfileMixed",
         DEFAULT_NODES, THREE, [PS(2, cpu(1000), {"unconstrained": True})], {"main": [("x4", 2)]}),
    Case("CT unconstrained; a single pod fits into each host; BestFit (TASProfileMixed off)",
         DEFAULT_NODES, THREE, [PS(1, cpu(1000), {"unconstrained": True})], {"main": [("x3", 1)]},
         gates=TASGates(profile_mixed=False)),
    Case("CT block required; 4 pods fit into one host each; BestFit",
         BINARY_TREE_NODES, THREE, [PS(4, cpu(1000), req(B))], {"main": [("x3", 1), ("x5", 1), ("x1", 1), ("x6", 1)]}),
    Case("CT host required; single Pod fits in the host; BestFit",
         DEFAULT_NODES, THREE, [PS(1, cpu(1000), req(H))], {"main": [("x3", 1)]}),
    Case("CT rack required; single Pod fits in a rack; BestFit",
         DEFAULT_NODES, TWO, [PS(1, cpu(1000), req(R))], {"main": [(("b1", "r1"), 1)]}),
    Case("CT rack required; multiple Pods fit in a rack; BestFit",
         DEFAULT_NODES, TWO, [PS(3, cpu(1000), req(R))], {"main": [(("b1", "r2"), 3)]}),
    Case("CT block preferred; Pods fit in 2 blocks; BestFit (A.15 #2)",
         BLOCKS_241, [B], [PS(5, cpu(1000), pref(B))], {"main": [(("b2",), 1), (("b3",), 4)]}),
    Case("CT rack required; multiple Pods fit in some racks; BestFit",
         DEFAULT_NODES, TWO, [PS(2, cpu(1000), req(R))], {"main": [(("b2", "r2"), 2)]}),
    Case("CT rack required; too many pods to fit in any rack; BestFit (A.15 #3)",
         DEFAULT_NODES, TWO, [PS(4, cpu(1000), req(R))], 'topology "default" allows to fit only 3 out of 4 pod(s)'),
    Case("CT block required; single Pod fits in a block and a single rack; BestFit",
         DEFAULT_NODES, TWO, [PS(1, cpu(1000), req(B))], {"main": [(("b2", "r1"), 1)]}),
    Case("CT block required; Pods fit in a block spread across two racks; BestFit",
         DEFAULT_NODES, TWO, [PS(4, cpu(1000), req(B))], {"main": [(("b1", "r1"), 1), (("b1", "r2"), 3)]}),
    Case("CT block required; single Pod which cannot be split; BestFit",
         DEFAULT_NODES, TWO, [PS(1, cpu(4000), req(B))],
         'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: resource "cpu": 4'),
    Case("CT block required; too many Pods to fit requested; BestFit",
         DEFAULT_NODES, TWO, [PS(5, cpu(1000), req(B))], 'topology "default" allows to fit only 4 out of 5 pod(s)'),
    Case("CT rack required; single Pod requiring memory; BestFit",
         DEFAULT_NODES, TWO, [PS(4, {"memory": 1024}, req(R))], {"main": [(("b1", "r1"), 4)]}),
    Case("CT rack preferred; but only block can accommodate the workload; BestFit (A.15 #4)",
         DEFAULT_NODES, TWO, [PS(4, cpu(1000), pref(R))], {"main": [(("b1", "r1"), 1), (("b1", "r2"), 3)]}),
    Case("CT rack preferred; but only multiple blocks can accommodate the workload; BestFit",
         DEFAULT_NODES, TWO, [PS(6, cpu(1000), pref(R))],
         {"main": [(("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)]}),
    Case("CT block preferred; but the workload cannot be accommodate in entire topology; BestFit (A.15 #5)",
         DEFAULT_NODES, TWO, [PS(10, cpu(1000), pref(B))], 'topology "default" allows to fit only 7 out of 10 pod(s)'),
    Case("CT only nodes with matching labels are considered; no matching node; BestFit",
         [node("b1-r1-x3", {"zone": "zone-a", H: "x3"}, cpu="1", memory="1Gi", ready=None)], ONE,
         [PS(1, cpu(1000), req(H))], "no topology domains at level: kubernetes.io/hostname",
         node_labels={"zone": "zone-b"}),
    Case("CT only nodes with matching labels are considered; matching node is found; BestFit",
         [node("b1-r1-x3", {"zone": "zone-a", H: "x3"}, cpu="1", memory="1Gi")], ONE,
         [PS(1, cpu(1000), req(H))], {"main": [("x3", 1)]}, node_labels={"zone": "zone-a"}),
    Case("CT only nodes with matching levels are considered; no host label on node; BestFit (A.15 #13)",
         [hnode("b1-r1-x3", "b1", "r1", None, cpu="1")] if False else
         [node("b1-r1-x3", {B: "b1", R: "r1"}, cpu="1", memory="1Gi")], THREE,
         [PS(1, cpu(1000), req(R))], "no topology domains at level: cloud.com/topology-rack"),
    Case("CT don't consider unscheduled Pods when computing capacity; BestFit (A.15 #8)",
         [node("x3", {H: "x3"}, cpu="1", memory="1Gi")], ONE, [PS(1, cpu(600), req(H))], {"main": [("x3", 1)]},
         pods=[pod("test-unscheduled", cpu="600m", phase="Pending")]),
    Case("CT don't consider terminal pods when computing the capacity; BestFit (A.15 #9)",
         [node("x3", {H: "x3"}, cpu="1", memory="1Gi")], ONE, [PS(1, cpu(600), req(H))], {"main": [("x3", 1)]},
         pods=[pod("f", "x3", cpu="600m", phase="Failed"), pod("s", "x3", cpu="600m", phase="Succeeded")]),
    Case("CT include usage from pending scheduled non-TAS pods, blocked assignment; BestFit (A.15 #8)",
         [node("x3", {H: "x3"}, cpu="1", memory="1Gi")], ONE, [PS(1, cpu(600), req(H))],
         'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1',
         pods=[pod("test-pending", "x3", cpu="600m", phase="Pending")]),
    Case("CT include usage from non-TAS pods; pod usage",
         [node("x3", {H: "x3"})], ONE, [PS(9, cpu(0), req(H))],
         'topology "default" allows to fit only 8 out of 9 pod(s)',
         pods=[pod("running1", "x3"), pod("running2", "x3")]),
    Case("CT include usage from running non-TAS pods, found free capacity on another node; BestFit",
         [node("x3", {H: "x3"}, cpu="1"), node("x5", {H: "x5"}, cpu="1")], ONE, [PS(1, cpu(600), req(H))],
         {"main": [("x5", 1)]}, pods=[pod("test-pod", "x3", cpu="600m", phase="")]),
    Case("CT no assignment as node is not ready; BestFit (A.15 #10)",
         [node("b1-r1-x3", {"zone": "zone-a", H: "x3"}, cpu="1", ready="False")], ONE, [PS(1, cpu(1000), req(H))],
         "no topology domains at level: kubernetes.io/hostname", node_labels={"zone": "zone-a"}),
    Case("CT no assignment as node is unschedulable; BestFit (A.15 #10)",
         [node("b1-r1-x3", {"zone": "zone-a", H: "x3"}, cpu="1", unschedulable=True)], ONE,
         [PS(1, cpu(1000), req(H))], "no topology domains at level: kubernetes.io/hostname",
         node_labels={"zone": "zone-a"}),
    Case("CT skip node which has untolerated taint; BestFit",
         [node("x3", {"zone": "zone-a", H: "x3"}, cpu="1",
               taints=[{"key": "example.com/gpu", "value": "present", "effect": "NoSchedule"}])], ONE,
         [PS(1, cpu(1000), req(H))],
         'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: '
         'taint "example.com/gpu=present:NoSchedule": 1', node_labels={"zone": "zone-a"}),
    Case("CT detailed failure message with exclusion stats (A.15 #11)",
         [node("x1", {H: "x1"}, cpu="1", taints=[{"key": "key", "value": "value", "effect": "NoSchedule"}]),
          node("x2", {H: "x2"}, cpu="1"), node("x3", {H: "x3", "zone": "zone-b"}, cpu="2"),
          node("x4", {H: "x4", "zone": "zone-a"}, cpu="100m")], ONE,
         [PS(1, cpu(1000), req(H), node_selector={"zone": "zone-a"})],
         'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: nodeSelector: 2, '
         'resource "cpu": 1, taint "key=value:NoSchedule": 1'),
    Case("CT resource exclusion picks most restrictive resource",
         [node("dual-shortage", {H: "dual-shortage"}, cpu="500m", extra={GPU: "0"})], ONE,
         [PS(1, {"cpu": 1000, GPU: 1}, req(H))],
         'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1'),
    Case("CT allow to schedule on node with tolerated taint; BestFit",
         [node("b1-r1-x3", {"zone": "zone-a", H: "x3"}, cpu="1",
               taints=[{"key": "example.com/gpu", "value": "present", "effect": "NoSchedule"}])], ONE,
         [PS(1, cpu(1000), req(H), tolerations=[{"key": "example.com/gpu", "value": "present", "operator": "Equal"}])],
         {"main": [("x3", 1)]}, node_labels={"zone": "zone-a"}),
    Case("CT no assignment as node does not have enough allocatable pods; BestFit (A.15 #12)",
         [node("b1-r1-x3", {"zone": "zone-a", H: "x3"}, cpu="1000m", pods="1")], ONE, [PS(1, cpu(300), req(H))],
         'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "pods": 1',
         pods=[pod("test-running", "b1-r1-x3", cpu="300m")], node_labels={"zone": "zone-a"}),
    # Kueue PR #13395: a node a non-TAS pod fills completely (no cpu and no pod slot left) still names the
    # limiting resource, the first requested one by name, not an empty one.
    Case("CT node allocatable capacity completely used by non-TAS pod; empty remainingCapacity",
         [node("x3", {H: "x3"}, cpu="1", pods="1")], ONE, [PS(1, cpu(100), req(H))],
         'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1',
         pods=[pod("running1", "x3", cpu="1")]),
    Case("CT multiple PodSets account assumed pod usage against allocatable pods; BestFit (A.15 #12)",
         [node("x1", {H: "x1"}, cpu="2", pods="1")], ONE,
         [PS(1, cpu(1000), req(H), name="one"), PS(1, cpu(1000), req(H), name="two")],
         'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "pods": 1'),
    Case("CT skip node which doesn't match node selector, label exists, value doesn't match; BestFit",
         [node("x3", {"zone": "zone-a", H: "x3", "custom-label-1": "value-1"}, cpu="1")], ONE,
         [PS(1, cpu(300), req(H), node_selector={"custom-label-1": "value-2"})],
         'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: nodeSelector: 1',
         node_labels={"zone": "zone-a"}),
    Case("CT allow to schedule on node which matches node; BestFit",
         [node("b1-r1-x3", {"zone": "zone-a", H: "x3", "custom-label-1": "value-1"}, cpu="1"),
          node("b1-r1-x5", {"zone": "zone-a", H: "x5", "custom-label-1": "value-2"}, cpu="1")], ONE,
         [PS(1, cpu(1000), req(H), node_selector={"custom-label-1": "value-2"})], {"main": [("x5", 1)]},
         node_labels={"zone": "zone-a"}),
    Case("CT block required for podset; host required for slices; BestFit",
         [hnode(f"b1-r1-{x}", "b1", "r1", x, cpu="3") for x in ("x3", "x5", "x1")], THREE,
         [PS(6, cpu(1000), {"required": B, "pod_set_slice_required_topology": H, "pod_set_slice_size": 2})],
         {"main": [("x1", 2), ("x3", 2), ("x5", 2)]}),
    Case("CT block required for podset; host required for slices; prioritize more free slice capacity first ...",
         [hnode(f"b1-r1-{x}", "b1", "r1", x, cpu=c) for x, c in (("x3", "6"), ("x5", "5"), ("x1", "4"), ("x6", "2"))],
         THREE, [PS(12, cpu(1000), {"required": B, "pod_set_slice_required_topology": H, "pod_set_slice_size": 2})],
         {"main": [("x1", 4), ("x3", 6), ("x6", 2)]}),
    Case("CT block required for podset; host required for slices; select domains with tight fit; BestFit",
         [hnode(f"b1-r1-{x}", "b1", "r1", x, cpu=c) for x, c in (("x3", "3"), ("x5", "2"), ("x1", "2"))], THREE,
         [PS(4, cpu(1000), {"required": B, "pod_set_slice_required_topology": H, "pod_set_slice_size": 2})],
         {"main": [("x1", 2), ("x5", 2)]}),
    Case("CT block required for podset; rack required for slices; BestFit",
         [hnode(f"{b}-{r}-{x}", b, r, x, cpu="1") for b, r, x in (
             ("b1", "r1", "x3"), ("b1", "r1", "x5"), ("b1", "r2", "x1"), ("b1", "r2", "x6"), ("b1", "r2", "x2"),
             ("b2", "r1", "x4"), ("b2", "r1", "x7"))], THREE,
         [PS(4, cpu(1000), {"required": B, "pod_set_slice_required_topology": R, "pod_set_slice_size": 2})],
         {"main": [("x3", 1), ("x5", 1), ("x1", 1), ("x2", 1)]}),
    Case("CT block preferred for podset; rack required for slices; BestFit",
         DEFAULT_NODES, THREE,
         [PS(4, cpu(1000), {"preferred": B, "pod_set_slice_required_topology": R, "pod_set_slice_size": 2})],
         {"main": [("x1", 1), ("x5", 1), ("x4", 2)]}),
    Case("CT block required for podset; rack required for slices; podset fits in a block, but slices do not fit",
         [hnode(f"b1-{r}-{x}", "b1", r, x, cpu="2") for r, x in (("r1", "x3"), ("r2", "x5"), ("r3", "x1"))], THREE,
         [PS(6, cpu(1000), {"required": B, "pod_set_slice_required_topology": R, "pod_set_slice_size": 3})],
         'topology "default" doesn\'t allow to fit any of 2 slice(s)'),
    Case("CT block required for podset; rack required for slices; only 1 out of 2 slices fit (A.15 #15)",
         [hnode(f"b1-{r}-{x}", "b1", r, x, cpu=c) for r, x, c in
          (("r1", "x3", "3"), ("r2", "x5", "1"), ("r3", "x1", "1"), ("r4", "x6", "1"))], THREE,
         [PS(6, cpu(1000), {"required": B, "pod_set_slice_required_topology": R, "pod_set_slice_size": 3})],
         'topology "default" allows to fit only 1 out of 2 slice(s)'),
    Case("CT block required for podset; rack required for slices; podset fits in both blocks, slices in one",
         [hnode(f"{b}-{r}-{x}", b, r, x, cpu=c) for b, r, x, c in (
             ("b1", "r1", "x3", "2"), ("b1", "r2", "x5", "2"), ("b1", "r3", "x1", "2"),
             ("b2", "r4", "x6", "3"), ("b2", "r5", "x2", "3"))], THREE,
         [PS(6, cpu(1000), {"required": B, "pod_set_slice_required_topology": R, "pod_set_slice_size": 3})],
         {"main": [("x6", 3), ("x2", 3)]}),
    Case("CT slice required topology level cannot be above the main required topology level (A.15 #14)",
         DEFAULT_NODES, THREE,
         [PS(1, cpu(1000), {"required": H, "pod_set_slice_required_topology": B, "pod_set_slice_size": 1})],
         "podset slice topology cloud.com/topology-block is above the podset topology kubernetes.io/hostname"),
    Case("CT slice size is required when slice topology is requested (A.15 #14)",
         DEFAULT_NODES, THREE, [PS(1, cpu(1000), {"required": B, "pod_set_slice_required_topology": H})],
         "slice topology requested, but slice size not provided"),
    Case("CT cannot request not existing slice topology",
         DEFAULT_NODES, THREE,
         [PS(1, cpu(1000), {"required": B, "pod_set_slice_required_topology": "nope", "pod_set_slice_size": 1})],
         "no requested topology level for slices: nope"),
    Case("CT no topology for podset; host required for slices; BestFit (A.15 #15)",
         [hnode(f"b1-r1-{x}", "b1", "r1", x, cpu="3") for x in ("x3", "x5", "x1")], THREE,
         [PS(6, cpu(1000), {"pod_set_slice_required_topology": H, "pod_set_slice_size": 2})],
         {"main": [("x1", 2), ("x3", 2), ("x5", 2)]}),
    Case("CT no topology for podset; host required for slices; multiple blocks; BestFit",
         SCATTERED_NODES, THREE, [PS(6, cpu(1000), {"pod_set_slice_required_topology": H, "pod_set_slice_size": 2})],
         {"main": [("x3", 4), ("x6", 2)]}),
    Case("CT no topology for podset; rack required for slices; multiple blocks; BestFit",
         DEFAULT_NODES, THREE, [PS(4, cpu(1000), {"pod_set_slice_required_topology": R, "pod_set_slice_size": 2})],
         {"main": [("x1", 1), ("x5", 1), ("x4", 2)]}),
    Case("CT find topology assignment for two podsets with overlapping domain",
         [node(b, {B: b}, cpu="2") for b in ("b1", "b2", "b3")], [B],
         [PS(3, cpu(1000), pref(B), name="podset1"), PS(3, cpu(1000), pref(B), name="podset2")],
         {"podset1": [(("b1",), 2), (("b2",), 1)], "podset2": [(("b2",), 1), (("b3",), 2)]}),
    Case("CT find topology assignment for two podsets with the same group",
         [node("b1", {B: "b1"}, cpu="2", memory="2Gi", extra={GPU: "2"}), node("b2", {B: "b2"}, cpu="5", extra={GPU: "4"}),
          node("b3", {B: "b3"}, cpu="2", extra={GPU: "2"})], [B],
         [PS(1, cpu(1000), {"required": B, "pod_set_group_name": "g"}, name="leader"),
          PS(4, {"cpu": 1000, GPU: 1}, {"required": B, "pod_set_group_name": "g"}, name="workers")],
         {"leader": [(("b2",), 1)], "workers": [(("b2",), 4)]}),
    Case("CT find topology assignment for two podsets with the same group - no fit",
         [node("b1", {B: "b1"}, cpu="1", extra={GPU: "0"}), node("b2", {B: "b2"}, cpu="4", extra={GPU: "4"})], [B],
         [PS(1, cpu(1000), {"required": B, "pod_set_group_name": "g"}, name="leader"),
          PS(4, {"cpu": 1000, GPU: 1}, {"required": B, "pod_set_group_name": "g"}, name="workers")],
         'topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; excluded: '
         'resource "example.com/gpu": 1'),
    Case("CT find topology assignment for two podsets with the same group - leader does not fit anywhere",
         [node("b1", {B: "b1"}, cpu="4", extra={GPU: "4"}), node("b2", {B: "b2"}, cpu="4", extra={GPU: "4"})], [B],
         [PS(1, cpu(10000), {"required": B, "pod_set_group_name": "g"}, name="leader"),
          PS(4, {"cpu": 1000, GPU: 1}, {"required": B, "pod_set_group_name": "g"}, name="workers")],
         'topology "default" allows to fit only 4 out of 4 pod(s)'),
    Case("CT multiple podsets: rack required for both, different resource requests; BestFit",
         MULTIPOD_NODES, TWO, [PS(2, cpu(1000), req(R), name="podset1"), PS(1, {"memory": 1024}, req(R), name="podset2")],
         {"podset1": [(("b1", "r1"), 2)], "podset2": [(("b1", "r1"), 1)]}),
    Case("CT multiple podsets: block required for one, unconstrained for another; TASProfileMixed",
         MULTIPOD_NODES, THREE,
         [PS(8, cpu(1000), req(B), name="podset1"), PS(2, cpu(1000), {"unconstrained": True}, name="podset2")],
         {"podset1": [("x2", 8)], "podset2": [("x2", 2)]}),
    Case("CT multi-layer topology: block required; rack slices of 4; host slices of 2; TASMultiLayerTopology",
         [hnode(f"b1-{r}-{x}", "b1", r, x, cpu=c) for r, x, c in
          (("r1", "x1", "1"), ("r1", "x2", "4"), ("r2", "x3", "3"), ("r2", "x4", "4"))], THREE,
         [PS(8, cpu(1000), {"required": B, "podset_slice_required_topology_constraints": [
             models.PodsetSliceRequiredTopologyConstraint(topology=R, size=4),
             models.PodsetSliceRequiredTopologyConstraint(topology=H, size=2)]})],
         {"main": [("x2", 4), ("x3", 2), ("x4", 2)]}),
    Case("CT stable tie break on identical nodes: TASBalancedPlacement disabled (A.15 #31)",
         [node("x2", {H: "x2"}, cpu="1"), node("x1", {H: "x1"}, cpu="1")], ONE,
         [PS(1, cpu(1000), pref(H))], {"main": [("x1", 1)]}),
    Case("CT balanced placement; select optmial set of domains; TASBalancedPlacement (A.6.9)",
         [hnode(f"b1-r1-{x}", "b1", "r1", x, pods="23", extra={GPU: g}) for x, g in (("x1", "15"), ("x2", "13"), ("x3", "10"))],
         THREE, [PS(23, {GPU: 1}, pref(R))], {"main": [("x1", 12), ("x2", 11)]},
         gates=TASGates(balanced_placement=True)),
    Case("CT balanced placement; select optmial set of domains; with slices; TASBalancedPlacement (A.6.9)",
         [hnode(f"b1-r1-{x}", "b1", "r1", x, pods="25", extra={GPU: g}) for x, g in (("x1", "20"), ("x2", "15"), ("x3", "10"))],
         THREE, [PS(25, {GPU: 1}, {"preferred": R, "pod_set_slice_size": 5, "pod_set_slice_required_topology": H})],
         {"main": [("x2", 15), ("x3", 10)]}, gates=TASGates(balanced_placement=True)),
    Case("CT balanced placement; select correct block; TASBalancedPlacement (A.6.9)",
         [hnode(f"{b}-{r}-{x}", b, r, x, pods="22", extra={GPU: g}) for b, r, x, g in
          (("b1", "r1", "x1", "20"), ("b1", "r1", "x2", "10"), ("b2", "r2", "x3", "15"), ("b2", "r2", "x4", "15"))],
         THREE, [PS(22, {GPU: 1}, pref(R))], {"main": [("x3", 11), ("x4", 11)]}, gates=TASGates(balanced_placement=True)),
    Case("CT balanced placement; select correct block; greedy when TASBalancedPlacement is off",
         [hnode(f"{b}-{r}-{x}", b, r, x, pods="22", extra={GPU: g}) for b, r, x, g in
          (("b1", "r1", "x1", "20"), ("b1", "r1", "x2", "10"), ("b2", "r2", "x3", "15"), ("b2", "r2", "x4", "15"))],
         THREE, [PS(22, {GPU: 1}, pref(R))], {"main": [("x1", 20), ("x2", 2)]}),
    Case("ST initial scheduling; TAS uses podspec memory for placement (A.15 #6)",
         [node("x1", {H: "x1"}, cpu="1", memory="2Gi"), node("x2", {H: "x2"}, cpu="1", memory="2Gi")], ONE,
         [PS(2, {"memory": 1536 * 2**20}, pref(H))], {"main": [("x1", 1), ("x2", 1)]}),
]  # fmt: skip


def _expected(want: list[tuple[Any, int]]) -> list[tuple[tuple[str, ...], int]]:
    return [((v,) if isinstance(v, str) else tuple(v), n) for v, n in want]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.source)
def test_kueue_case(case: Case) -> None:
    """The placement (or the failure message) Kueue's test expects."""
    topology = flavor_topology(case.nodes, case.levels, pods=case.pods, node_labels=case.node_labels)
    result = find_assignments(topology, [ps.request() for ps in case.pod_sets], gates=case.gates)
    if isinstance(case.want, str):
        assert isinstance(result, PlacementFailure), result
        assert result.message == case.want
        return
    assert isinstance(result, Placement), result
    got = {name: [(d.values, d.count) for d in a.domains] for name, a in result.assignments.items()}
    assert got == {name: _expected(want) for name, want in case.want.items()}
    levels = [H] if case.levels[-1] == H else case.levels
    assert all(list(a.levels) == levels for a in result.assignments.values())


def test_failure_says_whether_an_empty_tree_fits() -> None:
    """A.5.5-6: TAS usage of admitted workloads blocks the placement, but the empty tree fits (Preempt);
    a request bigger than the whole tree does not fit even there (NoFit)."""
    topology = flavor_topology([node("x1", {H: "x1"}, cpu="2"), node("x2", {H: "x2"}, cpu="2")], ONE)
    held = {"x1": {"cpu": 2000, "pods": 2}}
    busy = find_assignments(topology, [PS(2, cpu(1000), req(H)).request()], tas_usage=held)
    assert busy == find_assignments(topology, [PS(2, cpu(1000), req(H)).request()], tas_usage=held)
    assert isinstance(busy, Placement) and busy.assignments["main"].domains[0].values == ("x2",)
    blocked = find_assignments(topology, [PS(3, cpu(1000), req(H)).request()], tas_usage=held)
    assert isinstance(blocked, PlacementFailure)
    assert blocked.message == (
        'topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 2; excluded: resource "cpu": 1'
    )
    assert blocked.fits_when_empty is False
    fragmented = find_assignments(
        topology, [PS(2, cpu(1000), req(H)).request()], tas_usage={"x2": {"cpu": 1000}, **held}
    )
    assert isinstance(fragmented, PlacementFailure) and fragmented.fits_when_empty is True


def test_count_zero_pod_set_gets_no_assignment() -> None:
    """ST workload with a PodSet of size zero (A.15 #17)."""
    topology = flavor_topology([node("x1", {H: "x1"}, cpu="1")], ONE)
    result = find_assignments(
        topology, [PS(0, cpu(1000), req(H), name="zero").request(), PS(1, cpu(1000), req(H)).request()]
    )
    assert isinstance(result, Placement) and set(result.assignments) == {"main"}


def test_flavor_tolerations_count_and_usage() -> None:
    """ST scheduling workload on a tainted node when the toleration is on ResourceFlavor (A.15 #28);
    the usage of the placement is per-pod requests x count + pods."""
    taint = {"key": "k", "value": "v", "effect": "NoExecute"}
    topology = flavor_topology(
        [node("x1", {H: "x1"}, cpu="4", taints=[taint])], ONE, tolerations=[{"key": "k", "operator": "Exists"}]
    )
    result = find_assignments(topology, [PS(3, {"cpu": 1000, "memory": 0}, req(H)).request()])
    assert isinstance(result, Placement)
    assert result.usage == {"x1": {"cpu": 3000, "pods": 3}}
    assert assignment_usage(result.assignments["main"], {"cpu": 1000}) == result.usage


@settings(max_examples=60, deadline=None)
@given(
    caps=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1), st.integers(0, 6)), min_size=1, max_size=10),
    count=st.integers(1, 14),
    per_pod=st.integers(1, 3),
    mode=st.sampled_from(["required_block", "required_rack", "preferred_rack", "unconstrained", "slices"]),
    held=st.integers(0, 3),
)
def test_never_over_capacity_and_counts_add_up(
    caps: list[tuple[int, int, int]], count: int, per_pod: int, mode: str, held: int
) -> None:
    """Property: a placement never puts more pods on a leaf than its free capacity allows, and its
    counts add up to the pod set's count (whole slices when slices are asked for)."""
    nodes = [hnode(f"n{i}", f"b{b}", f"r{r}", f"n{i}", cpu=str(c)) for i, (b, r, c) in enumerate(caps)]
    topology = flavor_topology(nodes, THREE)
    tr = {
        "required_block": req(B),
        "required_rack": req(R),
        "preferred_rack": pref(R),
        "unconstrained": {"unconstrained": True},
        "slices": {"required": B, "pod_set_slice_required_topology": R, "pod_set_slice_size": 2},
    }[mode]
    usage = {"n0": {"cpu": held * 1000}}
    result = find_assignments(topology, [PS(count, cpu(per_pod * 1000), tr).request()], tas_usage=usage)
    if isinstance(result, PlacementFailure):
        assert result.message
        return
    assignment: Assignment = result.assignments["main"]
    expected = count - count % 2 if mode == "slices" else count
    assert assignment.pod_count == expected
    free = {
        leaf.id: {r: v - usage.get(leaf.id, {}).get(r, 0) for r, v in leaf.free.items()} for leaf in topology.leaves
    }
    for domain in assignment.domains:
        assert domain.count >= 1
        assert domain.count * per_pod * 1000 <= free[domain.values[0]]["cpu"]
        assert domain.count <= free[domain.values[0]]["pods"]
    if mode.startswith("required"):
        level = 1 if mode == "required_rack" else 0
        leaves = {leaf.id: leaf for leaf in topology.leaves}
        assert len({leaves[d.values[0]].values[: level + 1] for d in assignment.domains}) == 1


def _prefer(*terms: tuple[int, str, str]) -> tuple[models.PreferredSchedulingTerm, ...]:
    """Preferred node affinity terms (weight, label, value), one In expression each."""
    return tuple(
        models.PreferredSchedulingTerm(
            weight=w,
            preference=models.NodeSelectorTerm(
                match_expressions=[models.NodeSelectorRequirement(key=k, operator="In", values=[v])]
            ),
        )
        for w, k, v in terms
    )


PREFER_ON = TASGates(preferred_affinity=True)


def test_preferred_affinity_outranks_a_tighter_fit() -> None:
    """A.3.4 (gate TASRespectNodeAffinityPreferred): best fit would take the 2-CPU node, but the
    8-CPU one matches the preferred term, and a best fit stays within the top score (Kueue
    topAffinityTierDomains). Without the gate, or without terms, best fit decides."""
    topology = flavor_topology(
        [
            node("big", {H: "big", "region": "us-west"}, cpu="8"),
            node("small", {H: "small", "region": "us-east"}, cpu="2"),
        ],
        ONE,
    )
    request = replace(PS(1, cpu(1000), pref(H)).request(), preferred_node_affinity=_prefer((10, "region", "us-west")))
    for gates, wanted in ((PREFER_ON, "big"), (TASGates(), "small")):
        result = find_assignments(topology, [request], gates=gates)
        assert isinstance(result, Placement) and result.assignments["main"].domains[0].values == (wanted,)


def test_preferred_affinity_required_level_takes_a_lower_scored_domain_that_fits() -> None:
    """A.3.4: with rack required, the best-scored rack (2 CPU) is too small for 4 pods; the gate's
    scan takes the next rack that holds them rather than failing (Kueue findLevelWithFitDomains)."""
    topology = flavor_topology(
        [
            hnode("small", None, "r-pref", "small", cpu="2"),
            hnode("large", None, "r-other", "large", cpu="4"),
        ],
        [R, H],
    )
    request = replace(PS(4, cpu(1000), req(R)).request(), preferred_node_affinity=_prefer((10, R, "r-pref")))
    result = find_assignments(topology, [request], gates=PREFER_ON)
    assert isinstance(result, Placement), result
    assert [(d.values, d.count) for d in result.assignments["main"].domains] == [(("large",), 4)]


def test_preferred_affinity_scores_only_nodes_passing_the_filters() -> None:
    """A.3.4: node a matches the preferred term but not the node selector, so it scores nothing
    and its rack r1 does not come first: best fit puts the pod on b (1 CPU) in r2, not on a2
    (2 CPU) in r1 (Kueue scores the nodes the scheduling simulator lets through)."""
    topology = flavor_topology(
        [
            node("a", {R: "r1", H: "a", "pool": "no", "fast": "yes"}, cpu="4"),
            node("a2", {R: "r1", H: "a2", "pool": "yes"}, cpu="2"),
            node("b", {R: "r2", H: "b", "pool": "yes"}, cpu="1"),
        ],
        [R, H],
    )
    request = replace(
        PS(1, cpu(1000), pref(R), node_selector={"pool": "yes"}).request(),
        preferred_node_affinity=_prefer((10, "fast", "yes")),
    )
    result = find_assignments(topology, [request], gates=PREFER_ON)
    assert isinstance(result, Placement) and result.assignments["main"].domains[0].values == ("b",)


def test_a_group_of_three_places_its_first_two_pod_sets_only() -> None:
    """A Workload object may put three pod sets in one group (Kueue's Workload webhook has no group
    rules); Kueue's placement takes the larger of the first two as the workers and the other as the
    leader, and gives the rest no assignment (tas_flavor_snapshot.go findLeaderAndWorkers)."""
    topology = flavor_topology([node("x1", {H: "x1"}, cpu="4")], ONE)
    group = {**req(H), "pod_set_group_name": "g"}
    result = find_assignments(
        topology,
        [
            PS(1, cpu(1000), group, name="leader").request(),
            PS(2, cpu(1000), group, name="workers").request(),
            PS(1, cpu(1000), group, name="third").request(),
        ],
    )
    assert isinstance(result, Placement)
    assert {name: [(d.values, d.count) for d in a.domains] for name, a in result.assignments.items()} == {
        "leader": [(("x1",), 1)],
        "workers": [(("x1",), 2)],
    }
    assert result.usage == {"x1": {"cpu": 3000, "pods": 3}}
