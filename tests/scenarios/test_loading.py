"""Loading scenario files: every malformed scenario is a ScenarioError naming the file and the problem."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kueue_es.events import types
from kueue_es.scenarios import ScenarioError, find_scenario_files, load_scenario
from kueue_es.scenarios.specs import ApplyEvent, DeleteEvent, FinishEvent
from tests.scenarios.scenario_builders import cpu_workload, scenario_doc, write

EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "scenarios" / "examples"


def _with(**changes: Any) -> dict[str, Any]:
    doc = scenario_doc(pending=[cpu_workload("w1", cpus=1)])
    doc.update(copy.deepcopy(changes))
    return doc


def _bad_quota() -> dict[str, Any]:
    doc = _with()
    doc["objects"][1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
    return doc


def _admitted(**admission: Any) -> dict[str, Any]:
    return _with(admitted=[{"workload": cpu_workload("w0", cpus=1), "admission": {"clusterQueue": "cq", **admission}}])


class Case(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    doc: dict[str, Any] | str
    want_problem: str


MALFORMED = [
    Case(name="a file that is not YAML", doc="name: [unclosed\n", want_problem="is not valid YAML"),
    Case(name="a file that is a list", doc="- a\n- b\n", want_problem="must be a mapping with name"),
    Case(name="an unknown top-level key", doc=_with(objcts=[]), want_problem="unknown top-level key objcts"),
    Case(name="a scenario without a name", doc=_with(name=None), want_problem="name: must be a non-empty string"),
    Case(
        name="a quota that is not a quantity",
        doc=_bad_quota(),
        want_problem="objects[1]: ClusterQueue cq: field spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
    ),
    Case(
        name="a kind kueue-es does not know",
        doc=_with(objects=[{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}]),
        want_problem="objects[0]: Deployment d: field apiVersion/kind: apps/v1/Deployment is not a kind",
    ),
    Case(
        name="a pending entry that is not a Workload",
        doc=_with(
            pending=[
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": "x"},
                    "spec": {"clusterQueue": "cq"},
                }
            ]
        ),
        want_problem="pending[0]: must be a kueue.x-k8s.io/v1beta2 Workload, got kind 'LocalQueue'",
    ),
    Case(
        name="a workload without pod sets",
        doc=_with(pending=[{**cpu_workload("w1", cpus=1), "spec": {"queueName": "lq", "podSets": []}}]),
        want_problem="pending[0]: Workload default/w1: field spec.podSets: must have at least 1 items",
    ),
    Case(
        name="an unknown event kind",
        doc=_with(events=[{"suspend": "default/w1"}]),
        want_problem="events[0]: unknown event kind 'suspend' (use finish, delete, apply, check, podsReady, wait, decide, remote, worker)",
    ),
    Case(
        name="a decide event naming no decider",
        doc=_with(events=[{"decide": "admitter"}]),
        want_problem="events[0].decide: must be one of admit, preempt, place, multikueue, got 'admitter'",
    ),
    Case(
        name="an event with two kinds",
        doc=_with(events=[{"finish": "default/w1", "delete": "default/w1"}]),
        want_problem="events[0]: must be a mapping with one key",
    ),
    Case(
        name="a finish without a namespace",
        doc=_with(events=[{"finish": "w1"}]),
        want_problem="events[0].finish: must be a workload as namespace/name, got 'w1'",
    ),
    Case(
        name="a finish of a workload never submitted",
        doc=_with(events=[{"finish": "default/nope"}]),
        want_problem="events[0].finish: default/nope is not a workload submitted before this event",
    ),
    Case(
        name="a delete of an unknown kind",
        doc=_with(events=[{"delete": {"kind": "Deployment", "name": "d"}}]),
        want_problem="events[0].delete: kind 'Deployment' is not an object a scenario can hold",
    ),
    Case(
        name="a delete without a name",
        doc=_with(events=[{"delete": {"kind": "ClusterQueue"}}]),
        want_problem="events[0].delete: name is required",
    ),
    Case(
        name="an applied manifest that does not parse",
        doc=_with(
            events=[
                {
                    "apply": {
                        "apiVersion": "kueue.x-k8s.io/v1beta2",
                        "kind": "LocalQueue",
                        "metadata": {"name": "Bad_Name"},
                        "spec": {"clusterQueue": "cq"},
                    }
                }
            ]
        ),
        want_problem="events[0].apply: LocalQueue Bad_Name: field metadata.name",
    ),
    Case(
        name="run with a negative cycle count",
        doc=_with(run={"cycles": -1}),
        want_problem="run.cycles: must be a non-negative integer, got -1",
    ),
    Case(name="run with an unknown key", doc=_with(run={"settle": True}), want_problem="run: unknown key settle"),
    Case(
        name="expect.admitted as a list",
        doc=_with(expect={"admitted": ["default/w1"]}),
        want_problem="expect.admitted: Expected `object`, got `array`",
    ),
    Case(
        name="an unknown key in an expected pod set",
        doc=_with(expect={"admitted": {"default/w1": {"podSets": {"main": {"flavor": {"cpu": "x"}}}}}}),
        want_problem="unknown field `flavor`",
    ),
    Case(
        name="an expected count that is not a number",
        doc=_with(expect={"admitted": {"default/w1": {"podSets": {"main": {"count": "two"}}}}}),
        want_problem="Expected `int | null`, got `str`",
    ),
    Case(name="an unknown expect list", doc=_with(expect={"running": []}), want_problem="unknown field `running`"),
    Case(
        name="an expected workload without a namespace",
        doc=_with(expect={"pending": ["w1"]}),
        want_problem="expect.pending: 'w1' is not a workload as namespace/name",
    ),
    Case(
        name="an admission for a pod set the workload lacks",
        doc=_admitted(podSetAssignments=[{"name": "gpu", "flavors": {"cpu": "default"}, "count": 1}]),
        want_problem="admitted[0].admission.podSetAssignments[0].name: the workload has no pod set 'gpu'",
    ),
    Case(
        name="an admission without a ClusterQueue",
        doc=_with(admitted=[{"workload": cpu_workload("w0", cpus=1), "admission": {"podSetAssignments": []}}]),
        want_problem="admitted[0].admission: clusterQueue is required",
    ),
    Case(
        name="a resourceUsage that is not a quantity",
        doc=_admitted(
            podSetAssignments=[{"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "x"}}]
        ),
        want_problem="admitted[0].admission.podSetAssignments[0].resourceUsage:",
    ),
    Case(
        name="an unknown engine",
        doc=_with(engines=["kind"]),
        want_problem="engines: must be a non-empty list of core, bus",
    ),
    Case(name="an xfail that is not a reason", doc=_with(xfail=3), want_problem="xfail: must be a non-empty string"),
    Case(
        name="a LimitRange without limits",
        doc=_with(objects=[{"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr"}, "spec": {}}]),
        want_problem="objects[0]: LimitRange default/lr: field spec.limits: must be a list of mappings",
    ),
]


@pytest.mark.parametrize("case", MALFORMED, ids=lambda c: c.name)
def test_malformed_scenario_names_file_and_problem(case: Case, tmp_path: Path) -> None:
    """The error starts with the file and says what is wrong, where."""
    path = write(tmp_path / "bad.yaml", case.doc)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert caught.value.file == str(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert case.want_problem in caught.value.problem


def test_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    """A path that does not exist is named."""
    with pytest.raises(ScenarioError, match="no such file or directory"):
        find_scenario_files([tmp_path / "nope"])


def test_directories_give_their_yaml_files_recursively_sorted(tmp_path: Path) -> None:
    """A directory stands for every *.yaml below it, sorted; other files are left out."""
    for name in ("b/z.yaml", "a.yaml", "b/a.yaml", "notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert [p.relative_to(tmp_path).as_posix() for p in find_scenario_files([tmp_path])] == [
        "a.yaml",
        "b/a.yaml",
        "b/z.yaml",
    ]


def test_objects_not_modelled_yet_are_kept_out_of_the_facts(tmp_path: Path) -> None:
    """Nodes, Pods and Topologies load as TAS facts (a TAS pod as an ignored object); an AdmissionCheck is modelled."""
    extra = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "status": {"allocatable": {"cpu": "8"}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "n1"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "t"},
            "spec": {"levels": [{"nodeLabel": "zone"}]},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "tas-pod", "annotations": {"kueue.x-k8s.io/podset-required-topology": "zone"}},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": "ac"},
            "spec": {"controllerName": "x"},
        },
    ]
    doc = scenario_doc(pending=[cpu_workload("w1", cpus=1)])
    doc["objects"] += extra
    doc["events"] = [{"delete": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}]
    scenario = load_scenario(write(tmp_path / "s.yaml", doc))
    assert [o.name for o in scenario.ignored_objects] == ["tas-pod"]
    assert [type(o.fact).__name__ for o in scenario.objects] == [
        "ResourceFlavorObserved",
        "ClusterQueueObserved",
        "LocalQueueObserved",
        "NodeObserved",
        "PodObserved",
        "TopologyObserved",
        "NoneType",
        "AdmissionCheckObserved",
    ]
    assert scenario.objects[3].fact.node.status.allocatable == {"cpu": 8000}  # type: ignore[union-attr]
    assert scenario.events == (DeleteEvent(kind="Node", name="n1", modelled=True),)


def test_a_full_scenario_loads_into_frozen_structs(tmp_path: Path) -> None:
    """Every part of the schema, converted: amounts, times, events, run, expect, xfail, engines."""
    admitted = cpu_workload("w0", cpus=2)
    admitted["status"] = {
        "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-01-01T00:00:30Z"}]
    }
    doc = scenario_doc(
        pending=[cpu_workload("w1", cpus=1)],
        admitted=[
            {
                "workload": admitted,
                "admission": {
                    "clusterQueue": "cq",
                    "podSetAssignments": [
                        {"name": "main", "flavors": {"cpu": "default"}, "count": 2, "resourceUsage": {"cpu": "1500m"}}
                    ],
                },
            }
        ],
        events=[
            {"finish": "default/w0"},
            {"apply": cpu_workload("w2", cpus=1)},
            {"delete": "default/w2"},
            {"delete": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "name": "lq"}},
        ],
        run={"cycles": 2},
        expect={"admitted": {"default/w1": None}, "preempted": [], "pending": ["default/w2"]},
        xfail="waits for the lead's admitter",
        engines=["core"],
    )
    scenario = load_scenario(write(tmp_path / "s.yaml", doc))
    seed = scenario.admitted[0]
    assert seed.cluster_queue == "cq"
    assert seed.pod_set_assignments == (
        types.PodSetAssignment(name="main", flavors={"cpu": "default"}, resource_usage={"cpu": 1500}, count=2),
    )
    assert seed.reserved_at_ms == 1767225630000
    assert scenario.events == (
        FinishEvent(workload="default/w0"),
        ApplyEvent(object=scenario.events[1].object),
        DeleteEvent(kind="Workload", namespace="default", name="w2"),
        DeleteEvent(kind="LocalQueue", namespace="default", name="lq"),
    )
    assert scenario.submitted == ["default/w0", "default/w1", "default/w2"]
    assert scenario.run.cycles == 2
    assert scenario.expect.admitted["default/w1"].cluster_queue is None
    assert scenario.expect.preempted == []
    assert scenario.xfail == "waits for the lead's admitter"
    assert scenario.runs_on("core") and not scenario.runs_on("bus")
    with pytest.raises(AttributeError):
        scenario.name = "changed"  # type: ignore[misc]


def test_usage_defaults_to_requests_times_count(tmp_path: Path) -> None:
    """Without resourceUsage the seed holds per-pod requests x the admitted count, at creation time."""
    doc = scenario_doc(
        admitted=[
            {
                "workload": cpu_workload("w0", cpus=3, created=5),
                "admission": {
                    "clusterQueue": "cq",
                    "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "count": 2}],
                },
            }
        ]
    )
    seed = load_scenario(write(tmp_path / "s.yaml", doc)).admitted[0]
    assert seed.pod_set_assignments[0].resource_usage == {"cpu": 2000}
    assert seed.reserved_at_ms == 1767225605000


def test_an_evicted_condition_makes_a_seed_being_evicted(tmp_path: Path) -> None:
    """An admitted workload with Evicted=True is seeded with its eviction in flight (reason, message, time);
    without one, or with Evicted=False, there is none."""
    workload = cpu_workload("w0", cpus=1, created=5)
    workload["status"] = {
        "conditions": [
            {
                "type": "Evicted",
                "status": "True",
                "reason": "Preempted",
                "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:09Z",
            }
        ]
    }
    admission = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}}]}
    doc = scenario_doc(admitted=[{"workload": workload, "admission": admission}])
    seed = load_scenario(write(tmp_path / "s.yaml", doc)).admitted[0]
    assert seed.eviction == ("Preempted", "m", 1767225609000)
    workload["status"]["conditions"][0]["status"] = "False"
    doc = scenario_doc(admitted=[{"workload": workload, "admission": admission}])
    assert load_scenario(write(tmp_path / "s.yaml", doc)).admitted[0].eviction is None


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shared_example_loads(path: Path) -> None:
    """The loader accepts every worked example, preemption ones included."""
    assert load_scenario(path).name == path.stem


def test_a_limit_range_checks_the_workloads_of_its_namespace_after_it(tmp_path: Path) -> None:
    """A LimitRange is no fact; the Workloads after it in its namespace are checked against it, and an event
    that deletes it carries them checked anew (as the watcher publishes a Workload made by hand again)."""
    limit_range = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "lr", "namespace": "default"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "500m"}}]},
    }
    doc = scenario_doc(pending=[cpu_workload("w1", cpus=1)])
    doc["objects"].append(limit_range)
    doc["events"] = [{"delete": {"apiVersion": "v1", "kind": "LimitRange", "name": "lr", "namespace": "default"}}]
    scenario = load_scenario(write(tmp_path / "s.yaml", doc))
    assert scenario.objects[-1].fact is None
    [pending] = scenario.pending
    assert pending.workload is not None
    assert pending.workload.spec.pod_sets[0].misconfigured.startswith("resources didn't satisfy LimitRange constraints")
    [event] = scenario.events
    assert isinstance(event, DeleteEvent) and not event.modelled
    [refreshed] = event.refreshed
    assert isinstance(refreshed, types.WorkloadObserved)
    assert refreshed.workload.spec.pod_sets[0].misconfigured == ""


def test_dra_objects_can_be_deleted_by_an_event(tmp_path: Path) -> None:
    """A DeviceClass, ResourceSlice or ResourceClaimTemplate (namespaced: default unless named) is a modelled
    kind an event may delete (dra/device-class-deleted-requeues-pending)."""
    doc = scenario_doc(pending=[cpu_workload("w1", cpus=1)])
    doc["events"] = [
        {"delete": {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "name": "gpu.example.com"}},
        {"delete": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "name": "t"}},
        {"delete": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "name": "s"}},
    ]
    scenario = load_scenario(write(tmp_path / "s.yaml", doc))
    assert scenario.events == (
        DeleteEvent(kind="DeviceClass", name="gpu.example.com"),
        DeleteEvent(kind="ResourceClaimTemplate", namespace="default", name="t"),
        DeleteEvent(kind="ResourceSlice", name="s"),
    )


def test_a_configuration_kueue_would_refuse_for_its_feature_gates_is_a_scenario_error(tmp_path: Path) -> None:
    """As the watcher refuses the file (Kueue PR #14237: TASRecomputeAssignmentWithinSchedulingCycle, on by
    default, needs TopologyAwareScheduling)."""
    doc = scenario_doc(pending=[cpu_workload("w1", cpus=1)])
    off = {"TopologyAwareScheduling": False, "TASProfileMixed": False, "TASHandleOverlappingFlavors": False}
    off |= {"TASFailedNodeReplacement": False, "TASFailedNodeReplacementFailFast": False}
    off |= {"TASReplaceNodeOnPodTermination": False, "TASReplaceNodeOnNodeTaints": False}
    off |= {"TASMultiLayerTopology": False}
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": off}
    doc["objects"] = [config, *doc["objects"]]
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write(tmp_path / "s.yaml", doc))
    assert caught.value.problem == (
        "objects[0]: featureGates: TASRecomputeAssignmentWithinSchedulingCycle is enabled, but depends on "
        "features that are disabled: [TopologyAwareScheduling]"
    )
    config["featureGates"] = off | {"TASRecomputeAssignmentWithinSchedulingCycle": False}
    load_scenario(write(tmp_path / "s.yaml", doc))
