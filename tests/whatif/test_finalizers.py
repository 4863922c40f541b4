"""``kueue-es what-if`` keeps what Kueue's ``kueue.x-k8s.io/resource-in-use`` finalizer keeps.

A deletion the log records of a ClusterQueue, ResourceFlavor, AdmissionCheck or Topology is replayed
as that finalizer would have let it happen in the simulated history: an object still in use is
terminating (a ClusterQueue admits nothing more, its usage stays in its cohort) and goes once nothing
uses it. The recorded logs are made by the scenario runner's core engine from the YAML files next to
this module (each one's description says what happened).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import cli, deciders, logfile, replay
from kueue_es.events import models, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.projections.cluster import ClusterState
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.whatif import changes, history, report, simulate

HERE = Path(__file__).parent

PROD_A = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: prod-a}
spec:
  cohortName: prod
  namespaceSelector: {}
  resourceGroups:
    - coveredResources: [cpu]
      flavors:
        - {name: default-flavor, resources: [{name: cpu, nominalQuota: 2, borrowingLimit: 2}]}
"""

SPOT_ONLY = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
    - coveredResources: [cpu]
      flavors:
        - {name: spot, resources: [{name: cpu, nominalQuota: 4}]}
"""


def _recorded(name: str) -> list[LogMessage]:
    return run_scenario(load_scenario(HERE / name)).messages


@pytest.fixture(scope="module")
def deleted_queue() -> list[LogMessage]:
    return _recorded("deleted-queue.yaml")


def _deletions(run: simulate.Run, kind: str) -> list[tuple[int, str]]:
    return [(seq, e.name) for seq, e in run.log if isinstance(e, types.ObjectDeleted) and e.kind == kind]


def _cpu_in_use(state: ClusterState, cluster_queues: tuple[str, ...]) -> int:
    return sum(state.usage.get(cq, {}).get("default-flavor", {}).get("cpu", 0) for cq in cluster_queues)


def test_a_recorded_deletion_of_a_queue_in_use_leaves_it_terminating(deleted_queue: list[LogMessage]) -> None:
    """With borrowingLimit 2, big is admitted in prod-a borrowing 2 CPU of prod-b's; the deletion of prod-a
    the log records while it held nothing finds big still running (it never finished in the log), so prod-a
    stays, terminating, its 4 CPU counted in the cohort, and b1 (4 CPU) never fits prod-b's 2 left: the
    cohort's 6 CPU are never overcommitted. The simulated log re-checks under replay."""
    past = history.extract(deleted_queue)
    baseline = simulate.simulate(past)
    what_if = simulate.simulate(past, changes=changes.parse(PROD_A))
    before, after = report.outcomes(baseline.log), report.outcomes(what_if.log)
    assert before["default/big"].admitted_ms == 0 and before["default/b1"].admitted_ms > 0
    assert _deletions(baseline, "ClusterQueue") != []  # unchanged, the recorded deletion happens
    assert after["default/big"].cluster_queue == "prod-a"
    assert after["default/b1"].admitted_ms == 0
    assert _deletions(what_if, "ClusterQueue") == []
    prod_a = what_if.state.cluster_queues["prod-a"]
    assert prod_a.terminating
    assert _cpu_in_use(what_if.state, ("prod-a", "prod-b")) == 4000
    checked = replay.check_log(what_if.messages, deciders.BY_ROLE)
    assert checked.mismatches == [] and checked.matched == checked.decisions > 0


def test_a_terminating_queue_goes_once_its_workloads_give_their_quota_back() -> None:
    """The log records prod-a marked for deletion while w runs in it (the core engine records no deletion
    after that): the simulation deletes it once w finishes and its quota is released, right after the
    release, as the dispatcher takes Kueue's finalizer off; b1 is admitted in prod-b then."""
    run = simulate.simulate(history.extract(_recorded("terminating-queue.yaml")))
    assert "prod-a" not in run.state.cluster_queues
    [(deleted_at, _)] = _deletions(run, "ClusterQueue")
    released = [
        seq
        for seq, e in report.with_carried(run.log)
        if isinstance(e, types.QuotaReleased) and e.workload.key == "default/w"
    ]
    assert released and released[0] < deleted_at
    assert report.outcomes(run.log)["default/b1"].admitted_ms > 0


def test_a_recorded_deletion_of_a_flavor_a_changed_queue_names_leaves_it_in_use() -> None:
    """The log deletes flavor spot while no ClusterQueue names it; the what-if's cq names only spot, so the
    finalizer holds spot, terminating but usable, and w is admitted on it (the flavor gone, cq would be
    inactive and w never admitted)."""
    past = history.extract(_recorded("deleted-flavor.yaml"))
    baseline = simulate.simulate(past)
    what_if = simulate.simulate(past, changes=changes.parse(SPOT_ONLY))
    assert [name for _, name in _deletions(baseline, "ResourceFlavor")] == ["spot"]
    assert _deletions(what_if, "ResourceFlavor") == []
    spot = what_if.state.flavors["spot"]
    assert models.is_terminating(spot.metadata)
    assert report.outcomes(what_if.log)["default/w"].flavors == "spot"


def test_the_report_lists_a_queue_the_log_deleted(
    deleted_queue: list[LogMessage], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """prod-a, deleted in the baseline, is still a row of the ClusterQueues table; in the what-if big holds
    its 4 CPU (twice its nominal 2) from its admission to the end of the history, so its usage is close to
    200 %, not 0 % (the usage of a queue that holds its quota to the end runs to the end)."""
    log_file, changes_file = tmp_path / "recorded.log", tmp_path / "changes.yaml"
    logfile.write_lines(log_file, deleted_queue)
    changes_file.write_text(PROD_A)
    assert cli.main(["what-if", "-f", str(changes_file), "--file", str(log_file)]) == 0
    out = capsys.readouterr().out
    [row] = [line for line in out.splitlines() if line.startswith("│ prod-a ")]  # the ClusterQueues table's
    assert "cpu 0.0 -> " in row
    past = history.extract(deleted_queue)
    baseline = simulate.simulate(past)
    what_if = simulate.simulate(past, changes=changes.parse(PROD_A))
    end = max(baseline.end_ms, what_if.end_ms)
    before = report.summaries(baseline.log, end_ms=end, times=baseline.times)
    after = report.summaries(what_if.log, end_ms=end, times=what_if.times)
    assert before["prod-a"].usage_percent == {"cpu": 0.0}
    assert after["prod-a"].usage_percent["cpu"] > 150


def test_a_queue_both_runs_delete_is_still_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """prod-a goes in both runs once w gives its quota back; it existed, so it is a row of the ClusterQueues
    table, its usage over its life: w held 4 CPU, twice its nominal 2, from its admission to its deletion."""
    log_file, changes_file = tmp_path / "recorded.log", tmp_path / "changes.yaml"
    logfile.write_lines(log_file, _recorded("terminating-queue.yaml"))
    changes_file.write_text(
        PROD_A.replace("prod-a", "prod-b").replace("nominalQuota: 2, borrowingLimit: 2", "nominalQuota: 6")
    )
    assert cli.main(["what-if", "-f", str(changes_file), "--file", str(log_file)]) == 0
    out = capsys.readouterr().out
    assert "default/b1" in out  # admitted at once with 6 CPU
    [row] = [line for line in out.splitlines() if line.startswith("│ prod-a ")]
    assert "cpu 199." in row or "cpu 200.0" in row
