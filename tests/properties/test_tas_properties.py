"""Property-based test of TAS inside admission (SEMANTICS-ADVANCED A.2, A.5, A.10, A.13).

Hypothesis draws a small TAS cluster as a scenario document: a block / rack / hostname
Topology, 2-8 nodes (1-4 CPU, 2-6 pod slots, some NotReady), one TAS flavor, one or two
ClusterQueues (a TAS-only queue; implied TAS when a pod set has no request), 1-8 workloads
whose pod set asks for ``required`` / ``preferred`` rack or block, ``unconstrained``, or
nothing, and optionally a node failing after the first settle. The run goes through the
loader and the core engine (admitter, preemptor and placer), and the log is checked:

1. after every committed batch, no node holds more TAS pods or CPU than it has: the usage of
   the workloads holding quota, recomputed from their last TopologyAssigned, fits every
   Ready node's allocatable; at the end no assignment names a node that is not Ready (the
   placer replaced it or evicted the workload);
2. every workload holding quota has a TopologyAssigned placing exactly its pod count, and a
   ``required`` assignment stays inside one domain of the required level;
3. every decision replays byte for byte (``kueue_es.replay.check_log``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueue_es import deciders
from kueue_es.events import tas, types
from kueue_es.replay import check_log
from kueue_es.scenarios import core_engine
from kueue_es.scenarios.loading import parse_scenario

B, R, H = "cloud.com/topology-block", "cloud.com/topology-rack", tas.HOSTNAME_LABEL


@pytest.fixture(autouse=True, scope="module")
def _quiet_logs() -> Iterator[None]:
    """The core engine logs every decision at debug level: drop those while the property runs."""
    logger = logging.getLogger()
    level = logger.level
    logger.setLevel(logging.WARNING)
    yield
    logger.setLevel(level)


@st.composite
def tas_scenarios(draw: st.DrawFn) -> dict:
    """A scenario document (shared/scenarios/README.md shape) of a small TAS cluster."""
    nodes = []
    for i in range(draw(st.integers(2, 8))):
        block, rack = f"b{draw(st.integers(1, 2))}", f"r{draw(st.integers(1, 2))}"
        ready = draw(st.sampled_from(["True", "True", "True", "False"]))
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"x{i}", "labels": {"tas-node": "true", B: block, R: rack, H: f"x{i}"}},
                "status": {
                    "allocatable": {"cpu": str(draw(st.integers(1, 4))), "pods": str(draw(st.integers(2, 6)))},
                    "conditions": [{"type": "Ready", "status": ready}],
                },
            }
        )
    queues = draw(st.integers(1, 2))
    objects: list[dict] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": B}, {"nodeLabel": R}, {"nodeLabel": H}]},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "tas"},
            "spec": {"nodeLabels": {"tas-node": "true"}, "topologyName": "default"},
        },
        *nodes,
    ]
    for q in range(queues):
        objects.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": f"cq{q}"},
                "spec": {
                    "namespaceSelector": {},
                    "cohortName": "all",
                    "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [{"name": "tas", "resources": [{"name": "cpu", "nominalQuota": 8}]}],
                        }
                    ],
                },
            }
        )
        objects.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": f"lq{q}", "namespace": "default"},
                "spec": {"clusterQueue": f"cq{q}"},
            }
        )
    pending = []
    for w in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["required", "preferred", "unconstrained", "none"]))
        level = draw(st.sampled_from([B, R]))
        request = {"required": {"required": level}, "preferred": {"preferred": level}}.get(kind)
        if kind == "unconstrained":
            request = {"unconstrained": True}
        pod_set: dict = {
            "name": "main",
            "count": draw(st.integers(1, 4)),
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
        }
        if request is not None:
            pod_set["topologyRequest"] = request
        pending.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": f"w{w}",
                    "namespace": "default",
                    "creationTimestamp": f"2026-01-01T00:00:{w:02d}Z",
                },
                "spec": {
                    "queueName": f"lq{draw(st.integers(0, queues - 1))}",
                    "priority": draw(st.integers(0, 2)),
                    "podSets": [pod_set],
                },
            }
        )
    events = []
    if draw(st.booleans()):
        failing = dict(draw(st.sampled_from(nodes)))
        failing["status"] = {**failing["status"], "conditions": [{"type": "Ready", "status": "False"}]}
        events.append({"apply": failing})
    doc = {"name": "tas-property", "objects": objects, "pending": pending, "expect": {}}
    if events:
        doc["events"] = events
    return doc


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
@given(tas_scenarios())
def test_tas_admission_never_overcommits_nodes_and_replays(doc: dict) -> None:
    """Properties 1-3 of the module docstring."""
    text = yaml.safe_dump(doc)
    run = core_engine.run_scenario(parse_scenario(text, path="<generated>"))
    specs = {f"default/{w['metadata']['name']}": w["spec"]["podSets"][0] for w in doc["pending"]}
    nodes: dict[str, dict] = {n["metadata"]["name"]: n for n in doc["objects"] if n["kind"] == "Node"}
    holding: dict[str, types.QuotaReserved] = {}
    placed: dict[str, dict[str, int]] = {}
    for event in (one for logged in run.events for one in types.with_carried(logged)):  # releases in records
        match event:
            case types.NodeObserved(node=node):
                nodes[node.metadata.name] = {
                    **nodes.get(node.metadata.name, {}),
                    "status": {
                        "allocatable": {
                            k: str(v // 1000 if k == "cpu" else v) for k, v in node.status.allocatable.items()
                        },
                        "conditions": [{"type": "Ready", "status": node.status.ready}],
                    },
                }
            case types.QuotaReserved():
                holding[event.workload.key] = event
            case types.QuotaReleased():
                holding.pop(event.workload.key, None)
                placed.pop(event.workload.key, None)
            case types.TopologyAssigned():
                placed[event.workload.key] = tas.decode(event.assignments["main"]).counts_by_domain()
            case types.DecisionRecord():
                _check_batch(holding, placed, nodes, specs)
    _check_batch(holding, placed, nodes, specs)
    for key in holding:  # failed nodes were replaced, or their workloads evicted
        for node in placed[key]:
            assert nodes[node]["status"]["conditions"][0]["status"] == "True", f"{key} still on failed {node}"
    report = check_log(run.messages, deciders.BY_ROLE)
    assert report.ok, report.mismatches[0]


def _check_batch(
    holding: dict[str, types.QuotaReserved],
    placed: dict[str, dict[str, int]],
    nodes: dict[str, dict],
    specs: dict[str, dict],
) -> None:
    pods: dict[str, int] = {}
    for key in holding:
        assert key in placed, f"{key} holds quota without a topology assignment"
        counts = placed[key]
        assert sum(counts.values()) == specs[key]["count"]
        required = specs[key].get("topologyRequest", {}).get("required")
        if required is not None:
            level = 0 if required == B else 1
            domains = {
                tuple(nodes[n]["metadata"]["labels"][lv] for lv in (B, R)[: level + 1])
                for n in counts
                if "metadata" in nodes[n]
            }
            assert len(domains) <= 1, f"{key}: required {required} spread over {domains}"
        for node, count in counts.items():
            pods[node] = pods.get(node, 0) + count
    for node, count in pods.items():
        status = nodes[node]["status"]
        ready = status["conditions"][0]["status"] == "True"
        allocatable = status["allocatable"]
        if not ready:
            continue  # a failed node waits for its replacement within the same cycle's batch
        assert count <= int(allocatable["pods"]), f"{node}: {count} pods > {allocatable['pods']}"
        assert count <= int(allocatable["cpu"]), f"{node}: {count} CPU > {allocatable['cpu']}"
