"""The scenario runner: the core engine, the outcome, the checker and ``kueue-es scenario``.

Two collections of YAML scenarios run here on the core engine:

- the shared worked examples (``../shared/scenarios/examples``), preemption
  included; ``EXAMPLE_GAPS`` marks those the deciders cannot pass yet as
  ``xfail(strict=True)``, so the suite says the moment one starts passing;
- every ``tests/scenarios/**/*.yaml`` (``test_scenarios_dir``).

Two optional top-level keys of a scenario file steer the tests (the loader
accepts them, ``kueue_es/scenarios/loading.py``):

- ``xfail: "<reason>"``: known to fail for that reason: the test is
  ``xfail(strict=True)``, so it must be removed once the scenario passes;
- ``engines: [core]``: run only on these engines (default all); a scenario that
  excludes ``core`` is skipped here.

Every core run is also replayed (``kueue_es.replay.check_log``): each recorded
decision must reproduce byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kueue_es import deciders
from kueue_es.events import codec, types
from kueue_es.replay import check_log
from kueue_es.scenarios import ScenarioError, core_engine, engines, load_scenario
from kueue_es.scenarios.checking import check
from kueue_es.scenarios.outcome import preempted_keys
from kueue_es.services.runtime import Decider, build_batch
from tests.scenarios.scenario_builders import cpu_workload, scenario_doc, write

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EXAMPLES = ROOT.parent / "shared" / "scenarios" / "examples"
EXAMPLE_GAPS: dict[str, str] = {}
"""Example name -> why the core engine cannot pass it yet (none today)."""


def _example_params() -> list[Any]:
    names = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
    return [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=EXAMPLE_GAPS[n])) if n in EXAMPLE_GAPS else n
        for n in names
    ]


def _dir_params() -> list[Any]:
    params = []
    for path in sorted(HERE.rglob("*.yaml")):
        marks: list[Any] = []
        try:
            scenario = load_scenario(path)
        except Exception:  # the test itself reports the loading error
            scenario = None
        if scenario is not None and scenario.xfail:
            marks.append(pytest.mark.xfail(strict=True, reason=scenario.xfail))
        if scenario is not None and not scenario.runs_on("core"):
            marks.append(pytest.mark.skip(reason=f"runs only on {', '.join(scenario.engines)}"))
        params.append(pytest.param(path, marks=marks, id=path.relative_to(HERE).as_posix()))
    return params


def _check_on_core(path: Path) -> list[str]:
    scenario = load_scenario(path)
    return check(expect=scenario.expect, outcome=core_engine.CoreEngine().run(scenario))


@pytest.mark.parametrize("name", _example_params())
def test_shared_example(name: str) -> None:
    """A worked example gives Kueue's documented outcome."""
    assert _check_on_core(EXAMPLES / f"{name}.yaml") == []


@pytest.mark.parametrize("path", _dir_params())
def test_scenarios_dir(path: Path) -> None:
    """Every scenario of tests/scenarios/<section>/ passes on the core engine."""
    assert _check_on_core(path) == []


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, id=f"examples/{p.stem}") for p in sorted(EXAMPLES.glob("*.yaml"))]
    + [pytest.param(p, id=p.relative_to(HERE).as_posix()) for p in sorted(HERE.rglob("*.yaml"))],
)
def test_every_core_run_replays(path: Path) -> None:
    """Replay re-runs every recorded decision of a core run and gets the same bytes."""
    try:
        scenario = load_scenario(path)
    except Exception as err:
        pytest.skip(f"does not load: {err}")
    run = core_engine.run_scenario(scenario)
    report = check_log(run.messages, deciders.BY_ROLE)
    assert not report.mismatches, report.mismatches[0]
    assert report.complete, (report.gaps, report.orphans, report.stray_dispatch)
    # the seed records only: one per pre-admitted workload, and the fences of partitions they left
    assert len(report.seeds) == report.skipped >= len(scenario.admitted)
    assert report.matched == report.decisions - report.skipped
    assert report.exit_code == (3 if scenario.admitted else 0)  # seeds are no service's decisions


def _run(tmp_path: Path, doc: dict[str, Any]) -> core_engine.CoreRun:
    return core_engine.run_scenario(load_scenario(write(tmp_path / "s.yaml", doc)))


def test_outcome_of_a_small_scenario(tmp_path: Path) -> None:
    """Two workloads fill 4 CPU, the third waits; the outcome says so in the README's shape."""
    pending = [
        cpu_workload("w1", cpus=2, created=1),
        cpu_workload("w2", cpus=2, created=2),
        cpu_workload("w3", cpus=1, created=3),
    ]
    outcome = _run(tmp_path, scenario_doc(pending=pending)).outcome()
    assert outcome.to_dict() == {
        "admitted": {
            "default/w1": {"clusterQueue": "cq", "podSets": {"main": {"flavors": {"cpu": "default"}, "count": 2}}},
            "default/w2": {"clusterQueue": "cq", "podSets": {"main": {"flavors": {"cpu": "default"}, "count": 2}}},
        },
        "reserved": [],
        "preempted": [],
        "pending": ["default/w3"],
        "finished": [],
        "deleted": [],
        "why": {
            "default/w3": "couldn't assign flavors to pod set main: "
            "insufficient unused quota for cpu in flavor default, 1 more needed"
        },
    }


def test_events_finish_delete_and_apply(tmp_path: Path) -> None:
    """Each event is followed by a settle: a finish and a delete free quota for later workloads."""
    pending = [
        cpu_workload("w1", cpus=2, created=1),
        cpu_workload("w2", cpus=2, created=2),
        cpu_workload("w3", cpus=2, created=3),
    ]
    events = [{"finish": "default/w1"}, {"apply": cpu_workload("w4", cpus=2, created=4)}, {"delete": "default/w2"}]
    run = _run(tmp_path, scenario_doc(pending=pending, events=events))
    outcome = run.outcome()
    assert sorted(outcome.admitted) == ["default/w3", "default/w4"]
    assert (outcome.finished, outcome.deleted, outcome.pending) == (("default/w1",), ("default/w2",), ())
    finished = next(e for e in run.events if isinstance(e, types.WorkloadFinished))
    assert finished.workload.uid == "uid-w1" and finished.at_ms > 0


def test_deleting_a_cluster_queue_leaves_new_workloads_pending(tmp_path: Path) -> None:
    """The dict form of delete removes any object; a workload applied after it cannot be admitted. A ClusterQueue
    some workload holds quota in is logged marked for deletion (terminating), as the watcher reports one Kueue's
    finalizer holds; one holding nothing is logged gone."""
    events = [
        {"delete": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "name": "cq"}},
        {"apply": cpu_workload("w2", cpus=1, created=2)},
    ]
    run = _run(tmp_path, scenario_doc(pending=[cpu_workload("w1", cpus=1)], events=events))
    assert not any(isinstance(e, types.ObjectDeleted) and e.kind == "ClusterQueue" for e in run.events)
    assert any(
        isinstance(e, types.ClusterQueueObserved)
        and e.cluster_queue.terminating
        and e.cluster_queue.metadata.name == "cq"
        for e in run.events
    )
    assert run.outcome().pending == ("default/w2",)
    empty = _run(tmp_path, scenario_doc(pending=[], events=events[:1]))
    assert any(isinstance(e, types.ObjectDeleted) and e.kind == "ClusterQueue" for e in empty.events)


def test_run_cycles_runs_exactly_that_many(tmp_path: Path) -> None:
    """``run: {cycles: N}`` is N cycles per phase; 0 cycles decides nothing."""
    pending = [cpu_workload("w1", cpus=1)]
    assert _run(tmp_path, scenario_doc(pending=pending, run={"cycles": 3})).cycles == 3
    idle = _run(tmp_path, scenario_doc(pending=pending, run={"cycles": 0}))
    assert idle.cycles == 0 and idle.outcome().pending == ("default/w1",)
    assert not any(isinstance(e, types.DecisionRecord) for e in idle.events)
    with_event = _run(tmp_path, scenario_doc(pending=pending, run={"cycles": 2}, events=[{"finish": "default/w1"}]))
    assert with_event.cycles == 4


def test_clock_starts_a_minute_after_the_latest_workload(tmp_path: Path) -> None:
    """Cycle i reads latest creationTimestamp + 60 s + i s; no timestamps means 2026-01-01."""
    run = _run(tmp_path, scenario_doc(pending=[cpu_workload("w1", cpus=1, created=10)], run={"cycles": 2}))
    records = [e for e in run.events if isinstance(e, types.DecisionRecord)]
    assert records[0].now_ms == 1767225600000 + 10_000 + 60_000
    timeless = scenario_doc(pending=[cpu_workload("w1", cpus=1)])
    del timeless["pending"][0]["metadata"]["creationTimestamp"]
    assert core_engine.clock_base_ms(load_scenario(write(tmp_path / "t.yaml", timeless))) == 1767225600000


def test_pre_admitted_workloads_hold_their_quota(tmp_path: Path) -> None:
    """A seeded admission (role ``seed``) holds its resourceUsage, so a later workload waits."""
    seeded = {
        "workload": cpu_workload("w0", cpus=1),
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "default"}, "count": 1, "resourceUsage": {"cpu": "3"}}
            ],
        },
    }
    run = _run(tmp_path, scenario_doc(admitted=[seeded], pending=[cpu_workload("w1", cpus=2, created=2)]))
    assert [type(e).__name__ for e in run.events[3:5]] == ["WorkloadObserved", "DecisionRecord"]
    record = run.events[4]
    assert isinstance(record, types.DecisionRecord) and record.role == "seed"
    # since event schema 17 the seed's decisions ride in its record
    assert [type(e).__name__ for e in record.carried] == ["QuotaReserved", "WorkloadAdmitted"]
    assert run.state.usage["cq"]["default"]["cpu"] >= 3000
    outcome = run.outcome()
    assert list(outcome.admitted) == ["default/w0"] and outcome.pending == ("default/w1",)


def test_a_run_that_never_settles_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decider that always has something to say makes settle give up with a RunError."""

    def restless(state: Any, *, now_ms: int, partition: str = "p0") -> list[types.Decision]:
        ref = types.WorkloadRef(namespace="default", name="w1")
        return [types.WorkloadInadmissible(workload=ref, reason="Pending", message=str(now_ms), at_ms=now_ms)]

    monkeypatch.setitem(deciders.BY_ROLE, "preempt", Decider(role="preempt", logic_version=1, decide=restless))
    monkeypatch.setattr(core_engine, "MAX_SETTLE_CYCLES", 5)
    with pytest.raises(engines.RunError, match="the run does not settle: decisions still change after 5 cycles"):
        _run(tmp_path, scenario_doc(pending=[cpu_workload("w1", cpus=1)]))


def test_preempted_are_the_evicted_not_the_preemptor() -> None:
    """An EvictionRequested or a Preempted release marks its workload preempted; the
    preemptor named by PreemptionIssued is not, and a Finished release is not."""
    low = types.WorkloadRef(namespace="default", name="low")
    high = types.WorkloadRef(namespace="default", name="high")
    issued = types.PreemptionIssued(
        workload=high,
        cluster_queue="cq",
        nomination_seq=1,
        targets=[types.PreemptionTarget(workload=low, cluster_queue="cq", reason="InClusterQueue")],
        at_ms=0,
    )
    evicted = types.EvictionRequested(
        workload=low, cluster_queue="cq", preemptor=high, preemption_reason="InClusterQueue", message="m", at_ms=0
    )
    released = types.QuotaReleased(
        workload=types.WorkloadRef(namespace="ns", name="b"),
        cluster_queue="cq",
        reason="Preempted",
        cause_seq=1,
        at_ms=0,
    )
    finished = types.QuotaReleased(
        workload=types.WorkloadRef(namespace="ns", name="c"),
        cluster_queue="cq",
        reason="Finished",
        cause_seq=1,
        at_ms=0,
    )
    assert preempted_keys([issued, evicted, released, finished]) == {"default/low", "ns/b"}
    # since event schema 17 the decisions ride in their DecisionRecord; before, a message each
    for schema in (types.SCHEMA_VERSION, 16):
        head, rest = build_batch(
            deciders.PREEMPTOR, outputs=[issued, evicted], basis_seq=1, head_seq=0, now_ms=0, schema_version=schema
        )
        events = [codec.decode(message.data) for message in (head, *rest)]
        assert preempted_keys(events) == {"default/low"}, schema


MISMATCH_CASES = [
    (
        "an admitted workload that waits",
        {"admitted": {"default/w3": {"clusterQueue": "cq", "podSets": {"main": {"count": 1}}}}},
        ["default/w3: expected admitted to cq with podSets.main.count 1, got pending"],
    ),
    (
        "another flavor",
        {"admitted": {"default/w2": {"podSets": {"main": {"flavors": {"cpu": "spot"}}}}}},
        ["default/w2: podSets.main.flavors.cpu: expected spot, got on-demand"],
    ),
    (
        "another count and queue",
        {"admitted": {"default/w1": {"clusterQueue": "other", "podSets": {"main": {"count": 3}}}}},
        ["default/w1: clusterQueue: expected other, got cq", "default/w1: podSets.main.count: expected 3, got 2"],
    ),
    (
        "a pod set it does not have",
        {"admitted": {"default/w1": {"podSets": {"gpu": {}}}}},
        ["default/w1: podSets.gpu: expected admitted, got no such pod set (admitted: main)"],
    ),
    (
        "a resource the flavors leave out",
        {"admitted": {"default/w1": {"podSets": {"main": {"flavors": {}}}}}},
        ["default/w1: podSets.main.flavors.cpu: expected no flavor, got spot"],
    ),
    (
        "a topology",
        {"admitted": {"default/w1": {"podSets": {"main": {"topology": {"n1": 2}}}}}},
        [
            "default/w1: podSets.main.topology: expected {n1: 2}, got no topology assignment (admitted on flavors {cpu: spot})"
        ],
    ),
    (
        "pending but admitted",
        {"pending": ["default/w1", "default/w3"]},
        ["default/w1: expected pending, got admitted to cq"],
    ),
    ("pending but finished", {"pending": ["default/w0"]}, ["default/w0: expected pending, got finished"]),
    ("pending but never submitted", {"pending": ["default/w9"]}, ["default/w9: expected pending, got not submitted"]),
    ("preempted but not", {"preempted": ["default/w1"]}, ["default/w1: expected preempted, got not preempted"]),
    ("nobody preempted", {"preempted": []}, []),
    ("only what is named", {"admitted": {"default/w1": None}, "pending": []}, []),
]


@pytest.mark.parametrize(("expect", "want_lines"), [pytest.param(e, w, id=n) for n, e, w in MISMATCH_CASES])
def test_checker_lines(expect: dict[str, Any], want_lines: list[str], tmp_path: Path) -> None:
    """Each mismatch is one readable line naming the workload, the key, expected and actual."""
    pending = [
        cpu_workload("w0", cpus=1, created=4),
        cpu_workload("w1", cpus=2, created=1),
        cpu_workload("w2", cpus=3, created=2),
        cpu_workload("w3", cpus=4, created=3),
    ]
    doc = scenario_doc(
        quota={"spot": {"cpu": 2}, "on-demand": {"cpu": 4}},
        pending=pending,
        events=[{"finish": "default/w0"}],
        expect=expect,
    )
    assert _check_on_core(write(tmp_path / "s.yaml", doc)) == want_lines


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kueue_es.cli", "scenario", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_exit_codes(tmp_path: Path) -> None:
    """0 when every scenario passes, 1 on a mismatch, 2 on a malformed file or an engine not built yet."""
    good = scenario_doc(
        name="good", pending=[cpu_workload("w1", cpus=1)], expect={"admitted": {"default/w1": {"clusterQueue": "cq"}}}
    )
    wrong = {**good, "name": "wrong", "expect": {"pending": ["default/w1"]}}
    (tmp_path / "ok").mkdir()
    write(tmp_path / "ok" / "good.yaml", good)
    passing = _cli("check", tmp_path / "ok")
    assert (passing.returncode, passing.stdout) == (
        0,
        f"PASS good ({tmp_path / 'ok' / 'good.yaml'})\n1 passed, 0 failed\n",
    )

    failing = _cli("check", tmp_path / "ok", write(tmp_path / "wrong.yaml", wrong))
    assert failing.returncode == 1
    assert failing.stdout.splitlines()[1:] == [
        f"FAIL wrong ({tmp_path / 'wrong.yaml'})",
        "  default/w1: expected pending, got admitted to cq",
        "1 passed, 1 failed",
    ]

    bad = write(tmp_path / "bad.yaml", {**good, "nonsense": 1})
    malformed = _cli("check", bad, tmp_path / "ok")
    assert malformed.returncode == 2
    assert malformed.stderr.startswith(f"error: {bad}: unknown top-level key nonsense")
    assert malformed.stdout.splitlines()[-1] == "1 passed, 0 failed, 1 errors"

    if "bus" not in engines.available():  # until the bus engine registers itself
        bus = _cli("check", "--engine", "bus", tmp_path / "ok")
        assert (bus.returncode, bus.stderr) == (2, "error: the bus engine is not available yet\n")


def test_a_scenario_fair_sharing_without_strategies_gets_kueues_defaults(tmp_path: Path) -> None:
    """A scenario's Configuration is the watcher's ``--config`` on the cluster engine, which refuses a v1beta2
    ``fairSharing`` naming no ``preemptionStrategies`` as Kueue does; scenarios written from Kueue's tests give
    ``fairSharing: {}`` to mean "fair sharing on", so the loader completes it with Kueue's default strategies
    (both engines then run the same file). A strategy set Kueue does not support is still refused."""
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": {}}
    doc = scenario_doc(
        pending=[cpu_workload("w1", cpus=1)], expect={"admitted": {"default/w1": {"clusterQueue": "cq"}}}
    )
    doc["objects"].insert(0, config)
    scenario = load_scenario(write(tmp_path / "fair.yaml", doc))
    [loaded] = [o.manifest for o in scenario.objects if o.kind == "Configuration"]
    assert loaded["fairSharing"]["preemptionStrategies"] == ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
    config["fairSharing"] = {"preemptionStrategies": ["LessThanInitialShare", "LessThanOrEqualToFinalShare"]}
    with pytest.raises(ScenarioError, match="fairSharing.preemptionStrategies: Unsupported value"):
        load_scenario(write(tmp_path / "fair.yaml", doc))


def test_engine_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engines open by name; a known engine without a factory is "not available yet"; others are unknown."""
    assert engines.open_engine("core").name == "core"
    monkeypatch.delitem(engines._FACTORIES, "bus", raising=False)
    with pytest.raises(engines.EngineUnavailable, match="the bus engine is not available yet"):
        engines.open_engine("bus")
    with pytest.raises(engines.EngineUnavailable, match="unknown engine 'kind'"):
        engines.open_engine("kind")
    monkeypatch.setitem(engines._FACTORIES, "bus", core_engine.CoreEngine)
    assert engines.open_engine("bus").run(load_scenario(EXAMPLES / "quick-start.yaml")).pending == ()


def test_cli_xfail_and_engines_keys(tmp_path: Path) -> None:
    """An xfail scenario that fails is XFAIL (exit 0), one that passes is XPASS (exit 1); engines skips."""
    base = scenario_doc(pending=[cpu_workload("w1", cpus=1)])
    xfail = write(tmp_path / "x.yaml", {**base, "name": "x", "xfail": "why", "expect": {"pending": ["default/w1"]}})
    result = _cli("check", xfail)
    assert result.returncode == 0 and result.stdout.startswith(f"XFAIL x ({xfail}): expected to fail: why\n")
    xpass = write(tmp_path / "y.yaml", {**base, "name": "y", "xfail": "why"})
    assert _cli("check", xpass).returncode == 1
    bus_only = write(tmp_path / "z.yaml", {**base, "name": "z", "engines": ["bus"]})
    skipped = _cli("check", bus_only)
    assert (skipped.returncode, skipped.stdout.splitlines()) == (
        0,
        [f"SKIP z ({bus_only}): runs only on bus", "0 passed, 0 failed, 1 skipped"],
    )


def test_cli_run_prints_the_outcome(tmp_path: Path) -> None:
    """``scenario run --output json`` prints the outcome dict."""
    path = write(tmp_path / "s.yaml", scenario_doc(pending=[cpu_workload("w1", cpus=1)]))
    result = _cli("run", path, "--output", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["admitted"]["default/w1"]["clusterQueue"] == "cq"
    assert _cli("run", path).stdout.startswith("admitted:\n  default/w1:\n")
