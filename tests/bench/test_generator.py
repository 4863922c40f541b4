"""The bench's generator makes the objects and workloads Kueue's generator makes (names, counts, specs, timing)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from kueue_es.events import types
from kueue_es.perfbench import generator
from tests.bench.configs import BASELINE, TAS, TINY


def generated(text: str) -> generator.Generated:
    return generator.generate(generator.parse_config(yaml.safe_load(text)))


def test_baseline_makes_kueues_queues_names_and_counts() -> None:
    gen = generated(BASELINE)
    assert len(gen.queues) == 30
    assert gen.cohorts == [f"cohort-{i}" for i in range(5)]
    # <className>-<queueSetIdx>-<i>-<cohort>, cohort by cohort
    assert [q.name for q in gen.queues[:7]] == [f"cq-0-{i}-cohort-0" for i in range(6)] + ["cq-0-0-cohort-1"]
    assert len(gen.streams) == 90  # one per ClusterQueue and workload set
    planned = gen.planned()
    assert len(planned) == 15_000
    assert Counter(wl.class_name for wl in planned) == {"small": 10_500, "medium": 3_000, "large": 1_500}
    names = {(wl.namespace, wl.name) for wl in planned}
    assert len(names) == 15_000
    # <className>-<setIdx>-<iteration>-<templateIdx>, in the namespace named after the ClusterQueue
    assert ("cq-0-3-cohort-2", "small-0-349-0") in names
    assert ("cq-0-3-cohort-2", "medium-1-99-0") in names
    assert ("cq-0-5-cohort-4", "large-2-49-0") in names
    assert ("cq-0-5-cohort-4", "large-2-50-0") not in names


def test_streams_wait_the_interval_before_each_workload() -> None:
    gen = generated(BASELINE)
    small, medium, large = (list(generator.planned_workloads(s)) for s in gen.streams[:3])
    assert [wl.offset_ms for wl in small[:3]] == [100, 200, 300]
    assert small[-1].offset_ms == 35_000
    assert medium[-1].offset_ms == 50_000
    assert large[-1].offset_ms == 60_000
    assert (large[0].cpu_m, large[0].runtime_ms, large[0].priority) == (20_000, 1_000, 200)


def test_a_stream_reads_each_template_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A template's request is parsed once per stream, not once per workload it makes (50,000 in the
    large configuration from three templates: issue 18); every workload carries it all the same."""
    gen = generated(BASELINE)
    parsed: list[str] = []
    cpu = generator._cpu

    def counted(value: str | int | float, where: str) -> int:
        parsed.append(where)
        return cpu(value, where)

    monkeypatch.setattr(generator, "_cpu", counted)
    small = list(generator.planned_workloads(gen.streams[0]))
    assert parsed == ["request"]
    assert len(small) == 350 and {wl.request_m for wl in small} == {1_000}


def test_object_facts_are_kueues_objects_in_creation_order() -> None:
    gen = generated(BASELINE)
    facts = generator.object_facts(gen, now_ms=1_000)
    assert len(facts) == 1 + 3 * 30
    flavor = facts[0]
    assert isinstance(flavor, types.ResourceFlavorObserved) and flavor.flavor.metadata.name == "rf"
    cq, ns, lq = facts[1:4]
    assert isinstance(cq, types.ClusterQueueObserved)
    assert isinstance(ns, types.NamespaceObserved)
    assert isinstance(lq, types.LocalQueueObserved)
    spec = cq.cluster_queue.spec
    assert (
        cq.cluster_queue.metadata.name
        == ns.namespace.metadata.name
        == lq.local_queue.metadata.name
        == "cq-0-0-cohort-0"
    )
    assert cq.cluster_queue.metadata.labels[generator.CLASS_LABEL] == "cq"
    assert spec.cohort_name == "cohort-0"
    assert spec.queueing_strategy == "BestEffortFIFO"
    [quota] = spec.resource_groups[0].flavors[0].resources
    assert (quota.name, quota.nominal_quota, quota.borrowing_limit) == ("cpu", 20_000, 100_000)
    assert spec.resource_groups[0].covered_resources == ["cpu"]
    assert (spec.preemption.reclaim_within_cohort, spec.preemption.within_cluster_queue) == ("Any", "LowerPriority")
    assert lq.local_queue.metadata.namespace == "cq-0-0-cohort-0"
    assert lq.local_queue.spec.cluster_queue == "cq-0-0-cohort-0"


def test_workload_fact_is_kueues_workload() -> None:
    gen = generated(BASELINE)
    planned = next(generator.planned_workloads(gen.streams[1]))
    fact = generator.workload_fact(planned, uid="u1", now_ms=5_000)
    wl = fact.workload
    assert (wl.metadata.namespace, wl.metadata.name) == ("cq-0-0-cohort-0", "medium-1-0-0")
    assert wl.metadata.labels == {generator.RUNTIME_LABEL: "500", generator.CLASS_LABEL: "medium"}
    assert wl.metadata.creation_timestamp_ms == 5_000
    assert wl.spec.queue_name == "cq-0-0-cohort-0"
    assert wl.spec.priority == 100
    [pod_set] = wl.spec.pod_sets
    assert (pod_set.name, pod_set.count, pod_set.requests) == ("main", 1, {"cpu": 5_000})
    assert wl.owner is not None and wl.owner.kind == "Job"  # so the dispatcher has one write to make


def test_tas_config_reads_pod_count_flavor_and_nodes() -> None:
    gen = generated(TAS)
    assert gen.flavor.name == "tas-flavor"
    assert gen.nodes == 640
    planned = gen.planned()
    assert len(planned) == 15_000
    first = planned[0]
    assert first.name == "small-required-rack-0-0-0"
    assert (first.pods, first.request_m, first.cpu_m) == (2, 500, 1_000)
    flavor = generator.object_facts(gen, now_ms=0)[641]  # after the 640 nodes and the Topology
    assert isinstance(flavor, types.ResourceFlavorObserved)
    assert flavor.flavor.spec.node_labels == {"tas-node-group": "tas"}


def test_pod_count_counts_only_for_tas_templates() -> None:
    text = TINY.replace("{className: big,", "{className: big, podCount: 4,")
    big = [wl for wl in generated(text).planned() if wl.class_name == "big"]
    assert big[0].pods == 1  # no tasLevel: Kueue makes one pod


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("nominalQuota: 2", "nominalQuota: lots"), "cohorts[0].queuesSets[0].nominalQuota"),
        (("request: 2}", "request: -2}"), "workloadsSets[1].workloads[0].request"),
        (("count: 3", "count: -3"), "workloadsSets[0].count"),
        (("creationIntervalMs: 100", "creationIntervalMS: 100"), "creationIntervalMS"),
        (("borrowingLimit: 0", "borrowingLimit: 0\n      reclaimWithinCohort: Sometimes"), "reclaimWithinCohort"),
    ],
)
def test_bad_config_names_the_field(change: tuple[str, str], message: str) -> None:
    with pytest.raises(generator.ConfigError, match="test.yaml") as err:
        generator.parse_config(yaml.safe_load(TINY.replace(*change)), source="test.yaml")
    assert message in str(err.value)


def test_config_without_cohorts_is_refused() -> None:
    with pytest.raises(generator.ConfigError, match="at least one cohort"):
        generator.parse_config({"cohorts": []})


def test_ten_times_file_is_large_scale_with_ten_times_the_cohort_trees() -> None:
    """bench/ten-times.yaml (the scale-out run, docs/benchmarks.md) reads as Kueue's schema: Kueue's
    large-scale ClusterQueues and workload mix (35 small, 11 medium, 4 large per queue), with 100 cohorts."""
    root = Path(__file__).resolve().parents[2]
    ten = generator.generate(generator.load_config(root / "bench" / "ten-times.yaml"))
    assert len(ten.cohorts) == 100
    assert len(ten.queues) == 10_000 and {len([q for q in ten.queues if q.cohort == c]) for c in ten.cohorts} == {100}
    planned = ten.planned()
    assert len(planned) == 500_000
    assert Counter(wl.class_name for wl in planned) == {"small": 350_000, "medium": 110_000, "large": 40_000}
