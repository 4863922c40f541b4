"""``explain`` and the dashboard use the priority the deciders use: the effective one, with the
``kueue.x-k8s.io/priority-boost`` annotation added under the feature gate PriorityBoost (Kueue's
pkg/util/priority/priority.go EffectivePriority; the preemption policies compare it,
pkg/scheduler/preemption/common/preemption_policy.go), and show the base one beside it when they differ.

ClusterQueue ``cq`` (3 CPU, ``withinClusterQueue: LowerPriority``): ``mid`` (priority 10, 2 CPU) and
``lifted`` (priority 5, boost +20, 1 CPU) hold it all; ``low`` (priority 0, boost +100, 1 CPU) waits.
By effective priority (100 against 10 and 25) preemption could take either; by the base priority
(0) neither, which is what explain said while it compared base priorities.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kueue_es import cli
from kueue_es.dashboard import views
from kueue_es.events import models, types
from kueue_es.scheduling import explain as core
from tests.builders import flavor, local_queue, workload
from tests.unit.test_explain import Recorder

BOOST = models.PRIORITY_BOOST_ANNOTATION


def _boosted(name: str, boost: str, **kwargs: Any) -> dict[str, Any]:
    doc = workload(name, **kwargs)
    doc["metadata"]["annotations"] = {BOOST: boost}
    return doc


def _log(*, gate: bool = True) -> Recorder:
    log = Recorder()
    log.fact(types.ConfigurationObserved(configuration=models.Configuration(feature_gates={"PriorityBoost": gate})))
    log.manifest(flavor("default-flavor"))
    log.manifest(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": 3}]}],
                    }
                ],
            },
        }
    )
    log.manifest(local_queue("lq", "cq"))
    log.manifest(workload("mid", queue="lq", cpu="2", priority=10, created=1))
    log.manifest(_boosted("lifted", "20", queue="lq", cpu="1", priority=5, created=2))
    log.settle()
    assert log.state.workloads["default/mid"].admitted and log.state.workloads["default/lifted"].admitted
    log.manifest(_boosted("low", "100", queue="lq", cpu="1", priority=0, created=10))  # not decided on
    return log


def test_needs_judge_preemption_by_the_effective_priority_and_tell_both() -> None:
    log = _log()
    needed = core.needs(log.state, "default/low", now_ms=log.clock)
    assert needed.status == "pending"
    assert (needed.priority, needed.effective_priority) == (0, 100)
    [[default]] = needed.groups
    [cpu] = default.resources
    # the lowest effective priority first, as preemption takes them
    assert [(h.key, h.priority, h.effective_priority) for h in cpu.preemptible] == [
        ("default/mid", 10, 10),
        ("default/lifted", 5, 25),
    ]
    text = "\n".join(needed.summary())
    assert (
        "lower-priority workloads in cq hold 3 cpu that preemption could take (LowerPriority):"
        " default/mid (priority 10, 2), default/lifted (priority 25 (5, boost +20), 1)"
    ) in text


def _explain(capsys: pytest.CaptureFixture[str], log: Recorder, tmp_path: Path, name: str, *more: str) -> str:
    path = log.write(tmp_path / f"{name}.jsonl")
    code = cli.main(["explain", f"default/{name}", "--file", str(path), *more])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def test_explain_shows_the_effective_priority_beside_the_base_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = _log()
    log.manifest(_boosted("low", "150", queue="lq", cpu="1", priority=0, created=10))  # the boost raised
    report = json.loads(_explain(capsys, log, tmp_path, "low", "-o", "json"))
    assert (report["priority"], report["effectivePriority"]) == (0, 150)
    submitted, updated = report["story"][0], report["story"][-1]
    assert submitted["what"] == "submitted" and "to LocalQueue lq, priority 100 (0, boost +100):" in submitted["text"]
    assert (submitted["detail"]["priority"], submitted["detail"]["effectivePriority"]) == (0, 100)
    assert updated["what"] == "updated"
    assert updated["text"] == "priority boost +100 -> +150: effective priority 100 -> 150"
    [resource] = report["needs"]["flavors"][0]["resources"]
    assert [(h["workload"], h["priority"], h["effectivePriority"]) for h in resource["preemptible"]] == [
        ("default/mid", 10, 10),
        ("default/lifted", 5, 25),
    ]
    text = _explain(capsys, log, tmp_path, "low")
    assert "priority 150 (0, boost +150): the effective priority the admitter and the preemptor use" in text
    plain = _explain(capsys, log, tmp_path, "mid")
    assert "effective priority" not in plain  # no boost: nothing more to tell


def test_without_the_gate_the_boost_counts_nowhere(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = _log(gate=False)
    needed = core.needs(log.state, "default/low", now_ms=log.clock)
    assert (needed.priority, needed.effective_priority) == (0, 0)
    [[default]] = needed.groups
    [cpu] = default.resources
    assert cpu.preemptible == ()
    log.manifest(_boosted("low", "150", queue="lq", cpu="1", priority=0, created=10))
    report = json.loads(_explain(capsys, log, tmp_path, "low", "-o", "json"))
    assert (report["priority"], report["effectivePriority"]) == (0, 0)
    submitted, updated = report["story"][0], report["story"][-1]
    assert "to LocalQueue lq, priority 0:" in submitted["text"]
    assert updated["text"] == "priority-boost annotation 100 -> 150 (not counted: gate PriorityBoost off)"


def test_the_dashboard_gives_the_effective_priority_of_workloads_and_pending_items() -> None:
    log = _log()
    overview = views.overview(log.state, now_ms=log.clock)
    rows = {w["name"]: (w["priority"], w["effectivePriority"]) for w in overview["workloads"]}
    assert rows == {"mid": (10, 10), "lifted": (5, 25), "low": (0, 100)}
    [lq] = overview["localQueues"]
    # the visibility API's priority stays the base one, as Kueue's
    assert lq["pending"] == [
        {"name": "low", "priority": 0, "effectivePriority": 100, "positionInLocalQueue": 0, "positionInClusterQueue": 0}
    ]


def test_list_positions_follow_the_effective_priority(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """kueuectl's POSITION IN QUEUE is the admitter's queue order: ``low`` (0, boost +100) before ``high``
    (priority 50, no boost), which the base priority would put first."""
    log = _log()
    log.manifest(workload("high", queue="lq", cpu="1", priority=50, created=11))
    path = log.write(tmp_path / "list.jsonl")
    assert cli.main(["list", "workload", "--status", "pending", "--file", str(path), "-o", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {row["NAME"]: row["POSITION IN QUEUE"] for row in rows} == {"low": 0, "high": 1}
