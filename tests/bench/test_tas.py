"""The TAS configuration: Kueue's generator's nodes, Topology, flavor and pod-set topology requests;
the placement check of the run; and a shrunk TAS file run end to end through the bench."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from kueue_es.cli import main
from kueue_es.events import models, tas, types
from kueue_es.perfbench import generator, metrics
from kueue_es.projections import cluster
from kueue_es.projections.topology import TopologyState
from kueue_es.services.tas_placer import core as placer_core
from tests.bench.configs import TAS, tas_small

RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"
HOST = "kubernetes.io/hostname"


def generated(config: object) -> generator.Generated:
    raw = yaml.safe_load(config) if isinstance(config, str) else config
    return generator.generate(generator.parse_config(raw))


def test_tas_file_makes_kueues_nodes_topology_and_flavor_first() -> None:
    facts = generator.object_facts(generated(TAS), now_ms=7)
    nodes = [f.node for f in facts[:640] if isinstance(f, types.NodeObserved)]
    assert len(nodes) == 640
    topology, flavor, first_cq = facts[640:643]
    assert isinstance(first_cq, types.ClusterQueueObserved)
    # node-b<block>-r<rack>-n<node>, widest level counted first
    assert [n.metadata.name for n in nodes[:2]] == ["node-b0-r0-n0", "node-b0-r0-n1"]
    assert nodes[64].metadata.name == "node-b0-r1-n0"
    assert nodes[-1].metadata.name == "node-b0-r9-n63"
    assert len({n.metadata.name for n in nodes}) == 640
    assert nodes[200].metadata.labels == {
        generator.CLEANUP_LABEL: "true",
        "tas-node-group": "tas",
        BLOCK: "block-0",
        RACK: "rack-3",
        HOST: "node-8",  # Kueue's value: the index within the rack
    }
    node = nodes[200]
    assert node.status.allocatable == {"cpu": 96_000, "memory": 256 * 2**30, "pods": 110}
    assert node.schedulable_and_ready
    assert isinstance(topology, types.TopologyObserved)
    assert topology.topology.metadata.name == "default-topology"
    assert topology.topology.level_keys == [BLOCK, RACK, HOST]
    assert isinstance(flavor, types.ResourceFlavorObserved)
    assert flavor.flavor.metadata.name == "tas-flavor"
    assert flavor.flavor.spec.node_labels == {"tas-node-group": "tas"}
    assert flavor.flavor.spec.topology_name == "default-topology"
    [[flavor_quotas]] = [g.flavors for g in first_cq.cluster_queue.spec.resource_groups]
    assert flavor_quotas.name == "tas-flavor"


def test_repeated_hostnames_make_64_leaves_as_in_kueues_tree() -> None:
    """Kueue's hostname value repeats in every rack; a hostname-lowest tree keys leaves by hostname
    (tas_topology_tree.go addNode), so the 10 nodes of one hostname add up in one leaf."""
    state = TopologyState()
    for fact in generator.object_facts(generated(TAS), now_ms=0):
        state.apply(fact)
    tree = state.flavor_topology("tas-flavor")
    assert tree is not None
    assert len(tree.leaves) == 64
    leaf = tree.leaf_by_id["node-8"]
    assert len(leaf.nodes) == 10 and leaf.allocatable["cpu"] == 960_000
    assert sum(leaf.allocatable["cpu"] for leaf in tree.leaves) == 640 * 96_000


def test_each_class_has_its_pod_count_request_and_topology_request() -> None:
    planned = generated(TAS).planned()
    assert len(planned) == 15_000
    by_class = {wl.class_name: wl for wl in planned}
    counts = Counter(wl.class_name for wl in planned)
    assert counts["small-required-rack"] == 30 * 120 and counts["large-balanced-rack"] == 30 * 16
    expected = {
        "small": (2, 500, None),
        "medium": (4, 1_250, 2),
        "large": (8, 2_500, 4),
    }
    for size, (pods, request_m, slice_size) in expected.items():
        required = by_class[f"{size}-required-rack"]
        preferred = by_class[f"{size}-preferred-rack"]
        balanced = by_class[f"{size}-balanced-rack"]
        for wl in (required, preferred, balanced):
            assert (wl.pods, wl.request_m) == (pods, request_m)
        assert required.topology_request == models.PodSetTopologyRequest(required=RACK)
        assert preferred.topology_request == models.PodSetTopologyRequest(preferred=RACK)
        # Kueue's "balanced": a slice constraint at the level, sliceSize pods per slice (no TASBalancedPlacement)
        assert balanced.topology_request == models.PodSetTopologyRequest(
            pod_set_slice_required_topology=RACK, pod_set_slice_size=slice_size or 1
        )
    [pod_set] = generator.workload_fact(by_class["medium-balanced-rack"], uid="u", now_ms=0).workload.spec.pod_sets
    assert (pod_set.count, pod_set.requests) == (4, {"cpu": 1_250})
    assert pod_set.topology_request is not None and pod_set.topology_request.pod_set_slice_size == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("sliceSize: 4", "sliceSize: 0"), "sliceSize: a balanced template needs sliceSize >= 1"),
        (("sliceSize: 4", "sliceSize: 9"), "podSetSliceSize"),
        (('tasConstraint: "preferred"', 'tasConstraint: "nearby"'), "tasConstraint: 'nearby'"),
        (('nodeLabel: "tas-node-group"', 'nodeLabel: ""'), "resourceFlavor.nodeLabel"),
        (("- name: rack", '- name: ""'), "topology.levels[1].name"),
        (('tasLevel: "cloud.provider.com/topology-rack"', 'tasLevel: "zone"'), "tasLevel: 'zone' is not a nodeLabel"),
    ],
)
def test_tas_config_errors_name_the_field(change: tuple[str, str], message: str) -> None:
    raw = yaml.safe_load(TAS.replace(*change))
    with pytest.raises(generator.ConfigError, match="tas.yaml") as err:
        generator.parse_config(raw, source="tas.yaml")
    assert message in str(err.value)


# -- the placement check ------------------------------------------------------------------------


def two_rack_check() -> metrics.TopologyCheck:
    """Racks r0 (leaves h0, h1) and r1 (h2, h3), hostname lowest."""
    leaves = {f"h{i}": ("b0", f"r{i // 2}", f"h{i}") for i in range(4)}
    return metrics.TopologyCheck(levels=(BLOCK, RACK, HOST), leaf_values=leaves)


def tas_workload(name: str, count: int, request: models.PodSetTopologyRequest) -> models.Workload:
    return models.Workload(
        metadata=models.ObjectMeta(name=name, namespace="ns"),
        spec=models.WorkloadSpec(
            queue_name="q", pod_sets=[models.PodSet(count=count, requests={"cpu": 1}, topology_request=request)]
        ),
    )


def placed(name: str, hosts: dict[str, int]) -> types.TopologyAssigned:
    assignment = tas.Assignment(
        levels=(HOST,), domains=tuple(tas.DomainAssignment(values=(h,), count=c) for h, c in hosts.items())
    )
    return types.TopologyAssigned(
        workload=types.WorkloadRef(namespace="ns", name=name, uid=name),
        cluster_queue="q",
        assignments={"main": tas.encode(assignment)},
        at_ms=0,
    )


def test_topology_check_flags_split_racks_broken_slices_and_unplaced_admissions() -> None:
    check = two_rack_check()
    check.observed(tas_workload("in-rack", 4, models.PodSetTopologyRequest(required=RACK)))
    check.observed(tas_workload("split", 4, models.PodSetTopologyRequest(required=RACK)))
    check.observed(
        tas_workload(
            "slices", 4, models.PodSetTopologyRequest(pod_set_slice_required_topology=RACK, pod_set_slice_size=2)
        )
    )
    check.observed(
        tas_workload(
            "bad-slices", 4, models.PodSetTopologyRequest(pod_set_slice_required_topology=RACK, pod_set_slice_size=2)
        )
    )
    check.observed(tas_workload("never-placed", 1, models.PodSetTopologyRequest(preferred=RACK)))
    check.assigned(placed("in-rack", {"h0": 3, "h1": 1}))
    check.assigned(placed("split", {"h1": 2, "h2": 2}))
    check.assigned(placed("slices", {"h0": 1, "h1": 1, "h2": 2}))
    check.assigned(placed("bad-slices", {"h1": 1, "h2": 3}))
    for name in ("in-rack", "split", "slices", "bad-slices", "never-placed"):
        check.admitted(f"ns/{name}")
    check.started("ns/in-rack")
    check.released("ns/in-rack")
    check.admitted("ns/in-rack")  # re-admitted after a release without a new placement
    check.started("ns/in-rack")
    report = check.report()
    assert report["requiredInOneDomain"] == "1/2"
    assert report["slicesWhole"] == "1/2"
    assert report["admittedWithoutTopologyAssigned"] == 2
    assert (report["tasStarts"], report["startedWithoutTopologyAssigned"]) == (2, 1)
    assert report["violations"] == 5
    assert any("ns/split" in v for v in report["firstViolations"])


def test_topology_check_reads_assignments_with_every_level_and_counts_pods() -> None:
    check = two_rack_check()
    check.observed(tas_workload("w", 3, models.PodSetTopologyRequest(required=RACK)))
    full = tas.Assignment(levels=(BLOCK, RACK, HOST), domains=(tas.DomainAssignment(("b0", "r1", "h2"), 2),))
    check.assigned(
        types.TopologyAssigned(
            workload=types.WorkloadRef(namespace="ns", name="w", uid="w"),
            cluster_queue="q",
            assignments={"main": tas.encode(full)},
            at_ms=0,
        )
    )
    assert check.required == [1, 1]
    assert check.violations == ["ns/w: 2 pods placed, the pod set has 3"]


# -- the TAS placer on Kueue's nodes --------------------------------------------------------------


def test_placer_sees_no_failed_node_when_hostnames_are_not_node_names() -> None:
    """Kueue's nodes are named node-b0-r0-n1 but their hostname label is node-1: an assignment to
    node-1 names healthy nodes, so no replacement and no NodeFailures eviction."""
    config = tas_small()
    gen = generated(config)
    state = cluster.ClusterState()
    seq = 0

    def fold(event: types.Event) -> None:
        nonlocal seq
        seq += 1
        cluster.apply(state, event, seq=seq)

    for fact in generator.object_facts(gen, now_ms=0):
        fold(fact)
    wl = generator.workload_fact(gen.planned()[0], uid="u1", now_ms=0).workload
    fold(types.WorkloadObserved(workload=wl))
    ref = types.WorkloadRef(namespace=wl.metadata.namespace, name=wl.metadata.name, uid="u1")
    cq = wl.spec.queue_name
    assignment = types.PodSetAssignment(
        name="main", flavors={"cpu": "tas-flavor"}, resource_usage={"cpu": 1_000}, count=2
    )
    fold(types.QuotaReserved(workload=ref, cluster_queue=cq, pod_set_assignments=[assignment], at_ms=1))
    on_node_1 = tas.Assignment(levels=(HOST,), domains=(tas.DomainAssignment(("node-1",), 2),))
    fold(types.TopologyAssigned(workload=ref, cluster_queue=cq, assignments={"main": tas.encode(on_node_1)}, at_ms=1))
    fold(types.WorkloadAdmitted(workload=ref, cluster_queue=cq, at_ms=1))
    assert state.workloads[ref.key].topology
    assert placer_core.decide(state, now_ms=2) == []
    # a hostname no node carries is a failed node, as before
    gone = tas.Assignment(levels=(HOST,), domains=(tas.DomainAssignment(("node-99",), 2),))
    fold(types.TopologyAssigned(workload=ref, cluster_queue=cq, assignments={"main": tas.encode(gone)}, at_ms=3))
    [decision] = placer_core.decide(state, now_ms=4)
    assert isinstance(decision, types.TopologyAssigned | types.EvictionRequested)


# -- end to end ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_small_tas_run_places_every_workload(tmp_path: Path) -> None:
    """Kueue's TAS file shrunk (58 workloads, 8 nodes) through nats-server and the services. With
    Kueue's repeated hostnames the tree has 4 leaves, all under rack-0, so "required in one rack"
    holds by construction here; the check itself is tested on real racks above."""
    config = tmp_path / "generator.yaml"
    config.write_text(yaml.safe_dump(tas_small()))
    out = tmp_path / "bench.yaml"
    code = main(
        ["bench", "--config", str(config), "--dir", str(tmp_path / "run"), "--output", str(out), "--no-progress"]
        + ["--stall-timeout", "30"]  # a stuck run ends naming its unfinished workloads, not at pytest's timeout
    )
    doc = yaml.safe_load(out.read_text())
    assert doc["complete"] is True, (doc.get("unfinished"), _service_warnings(tmp_path / "run" / "logs"))
    assert code == 0
    total = doc["timing"]["workloads"]
    assert total == 58 and doc["timing"]["admitted"] == doc["timing"]["finished"] == total
    classes = doc["summary"]["workloadClasses"]
    assert len(classes) == 9 and sum(c["count"] for c in classes.values()) == total
    topo = doc["topology"]
    assert (topo["nodes"], topo["leaves"], topo["tasWorkloads"]) == (8, 4, total)
    assert topo["workloadsPlaced"] == total  # every workload got a TopologyAssigned
    assert topo["admittedWithoutTopologyAssigned"] == 0
    assert topo["tasStarts"] >= total and topo["startedWithoutTopologyAssigned"] == 0  # dispatched once placed
    assert topo["placements"] == topo["tasAdmissions"] >= total  # one placement per admission, re-admissions too
    required, required_all = map(int, topo["requiredInOneDomain"].split("/"))
    assert required == required_all >= 20  # every required placement within one rack
    assert topo["violations"] == 0, topo["firstViolations"]
    assert "NodeFailures" not in doc["timing"]["evictionReasons"]


def _service_warnings(log_dir: Path, limit: int = 20) -> list[str]:
    """The services' warning and error log lines of a run (for a failure message)."""
    lines = []
    for path in sorted(log_dir.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if '"level": "warning"' in line or '"level": "error"' in line or "Traceback" in line:
                lines.append(f"{path.stem}: {line[:400]}")
    return lines[:limit]
