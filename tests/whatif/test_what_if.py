"""``kueue-es what-if`` and ``kueue-es diff`` on a recorded log.

The recorded log is made by the scenario runner's core engine (the production deciders, its own
clock and job stand-in) from tests/whatif/history.yaml: ClusterQueue ``cq`` with 4 CPU
preempting lower priorities; a, b, c, d (2 CPU each) submitted a second apart; a high-priority
``hi`` (4 CPU) later preempts a and b; the jobs finish one after the other, so c and d wait
(a and b run for 30 s after hi, longer than hi takes to come, so a simulation that runs them for
their recorded run time replays the same preemptions).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import msgspec
import pytest

from kueue_es import cli, deciders, logfile, replay
from kueue_es.events import codec, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.whatif import changes, diff, history, report, simulate

FIXTURE = Path(__file__).parent / "history.yaml"
TWO_COHORTS = Path(__file__).parent / "two-cohorts.yaml"

CQ = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  namespaceSelector: {{}}
  preemption: {{withinClusterQueue: LowerPriority}}
  resourceGroups:
    - coveredResources: [cpu]
      flavors:
        - {{name: default-flavor, resources: [{{name: cpu, nominalQuota: {cpu}}}]}}
"""


@pytest.fixture(scope="module")
def recorded() -> list[LogMessage]:
    return run_scenario(load_scenario(FIXTURE)).messages


@pytest.fixture
def log_file(recorded: list[LogMessage], tmp_path: Path) -> Path:
    path = tmp_path / "recorded.log"
    logfile.write_lines(path, recorded)
    return path


def _changes(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "changes.yaml"
    path.write_text(text)
    return path


def _runs(recorded: list[LogMessage], text: str) -> tuple[simulate.Run, simulate.Run]:
    past = history.extract(recorded)
    return simulate.simulate(past), simulate.simulate(past, changes=changes.parse(text))


def test_the_baseline_follows_the_recorded_history(recorded: list[LogMessage]) -> None:
    """Unchanged, the simulation preempts as the recording did and admits every workload within one
    cycle of its recorded time (the core engine's cycles take 1 s: the simulation's cycle length, as
    it reads it from the log), and its log re-checks decision by decision under replay (the real
    deciders made it)."""
    assert history.extract(recorded).cycle_ms == 1000
    baseline, _ = _runs(recorded, CQ.format(cpu=4))
    before = report.outcomes(baseline.log)
    for key, out in report.outcomes([(m.seq, codec.decode(m.data)) for m in recorded]).items():
        assert before[key].time_to_admission_ms is not None
        assert abs(before[key].time_to_admission_ms - out.time_to_admission_ms) <= 1000, key  # type: ignore[operator]
        assert before[key].preempted == out.preempted, key
    checked = replay.check_log(baseline.messages, deciders.BY_ROLE)
    assert checked.mismatches == [] and checked.matched == checked.decisions > 0


def test_more_quota_admits_c_earlier_and_preempts_less(recorded: list[LogMessage]) -> None:
    baseline, more = _runs(recorded, CQ.format(cpu=12))
    before, after = report.outcomes(baseline.log), report.outcomes(more.log)
    assert after["default/c"].time_to_admission_ms < before["default/c"].time_to_admission_ms  # type: ignore[operator]
    assert after["default/d"].time_to_admission_ms < before["default/d"].time_to_admission_ms  # type: ignore[operator]
    assert sum(o.preempted for o in before.values()) == 2
    assert sum(o.preempted for o in after.values()) == 0
    assert before["default/hi"].preempting == 2 and after["default/hi"].preempting == 0
    end = max(baseline.end_ms, more.end_ms)
    b = report.summaries(baseline.log, end_ms=end, times=baseline.times)["cq"]
    a = report.summaries(more.log, end_ms=end, times=more.times)["cq"]
    assert a.average_time_to_admission_ms < b.average_time_to_admission_ms
    assert (b.preemptions, a.preemptions) == (2, 0)


def test_less_quota_admits_c_later(recorded: list[LogMessage]) -> None:
    baseline, less = _runs(recorded, CQ.format(cpu=2))
    before, after = report.outcomes(baseline.log), report.outcomes(less.log)
    assert after["default/c"].time_to_admission_ms > before["default/c"].time_to_admission_ms  # type: ignore[operator]
    assert after["default/hi"].time_to_admission_ms is None  # 4 CPU never fit in 2


def test_a_priority_override_moves_d_first(recorded: list[LogMessage]) -> None:
    override = "apiVersion: whatif.kueue-es.io/v1\nkind: WorkloadPriorities\npriorities: {default/d: 50}\n"
    baseline, changed = _runs(recorded, override)
    before, after = report.outcomes(baseline.log), report.outcomes(changed.log)
    assert after["default/d"].time_to_admission_ms < before["default/d"].time_to_admission_ms  # type: ignore[operator]


def test_from_keeps_the_recorded_prefix(recorded: list[LogMessage]) -> None:
    past = history.extract(recorded, cut_seq=20)
    run = simulate.simulate(past, changes=changes.parse(CQ.format(cpu=12)))
    assert [m.data for m in run.messages[: len(past.prefix)]] == [m.data for m in recorded[: len(past.prefix)]]
    assert len(past.prefix) >= 20
    assert report.outcomes(run.log)["default/c"].time_to_admission_ms is not None


def _submission(fact: types.Fact, name: str) -> bool:
    return isinstance(fact, types.WorkloadObserved) and fact.workload.metadata.name == name


def test_from_decides_what_waits_at_the_cut(recorded: list[LogMessage]) -> None:
    """--from right after hi is submitted (the log kept up to its submission, not its decision): the simulation
    runs a cycle at the cut, so hi preempts a and b and is admitted within a few cycles of the cut, not once
    something next happens (a's finish, half a minute later)."""
    seq = next(m.seq for m in recorded if _submission(codec.decode(m.data), "hi"))  # type: ignore[arg-type]
    past = history.extract(recorded, cut_seq=seq)
    assert past.prefix[-1].seq == seq and past.facts == []
    for run in simulate.simulate(past), simulate.simulate(past, changes=changes.parse(CQ.format(cpu=4))):
        hi = report.outcomes(run.log)["default/hi"]
        assert 0 < hi.admitted_ms - past.cut_ms <= 3 * past.cycle_ms
        assert hi.preempting == 2


def test_a_change_in_one_cohort_leaves_the_times_of_another_alone() -> None:
    """r2 (cohort research) given a higher priority preempts r1: research decides three cycles in a row where
    the baseline decides one. p1 (cohort prod) comes during them (the history's cycles made 1 s long, and p1
    half-way through): it is admitted when it comes in both runs, as each cohort tree decides on its own chain
    of cycles (its partition), as the services do; a cycle of one tree does not hold up another's."""
    past = history.extract(run_scenario(load_scenario(TWO_COHORTS)).messages)
    past.cycle_ms = 1000
    r2 = next(f for f in past.facts if _submission(f.fact, "r2"))
    past.facts = [dataclasses.replace(f, at_ms=r2.at_ms + 1500) if _submission(f.fact, "p1") else f for f in past.facts]
    override = "apiVersion: whatif.kueue-es.io/v1\nkind: WorkloadPriorities\npriorities: {default/r2: 100}\n"
    baseline, changed = simulate.simulate(past), simulate.simulate(past, changes=changes.parse(override))
    before, after = report.outcomes(baseline.log), report.outcomes(changed.log)
    assert (before["default/r1"].preempted, after["default/r1"].preempted) == (0, 1)
    assert before["default/p1"].admitted_ms == after["default/p1"].admitted_ms == r2.at_ms + 1500
    assert not report.changed(before["default/p1"], after["default/p1"])


def test_what_if_prints_the_same_bytes_twice(
    log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _changes(tmp_path, CQ.format(cpu=12))
    outputs = []
    for _ in range(2):
        assert cli.main(["what-if", "-f", str(path), "--file", str(log_file), "--all"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert "compared against the baseline" in outputs[0]
    assert "default/c" in outputs[0] and "admitted earlier" in outputs[0]
    assert "preemptions" in outputs[0] and "2 -> 0" in outputs[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\nmetadata: {name: w}\n",
            "field apiVersion/kind: kueue.x-k8s.io/v1beta2/Workload cannot be changed by what-if",
        ),
        ("apiVersion: v1\nkind: Sandwich\nmetadata: {name: lunch}\n", "Sandwich lunch"),
        (CQ.format(cpu='"lots"'), "nominalQuota"),
        (CQ.format(cpu="-1"), "nominalQuota"),
        (
            "apiVersion: whatif.kueue-es.io/v1\nkind: WorkloadPriorities\npriorities: {default/c: high}\n",
            "field priorities[default/c]: 'high' is not a 32-bit integer",
        ),
    ],
)
def test_a_bad_changes_file_is_refused_naming_object_and_field(
    log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    path = _changes(tmp_path, text)
    assert cli.main(["what-if", "-f", str(path), "--file", str(log_file)]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert str(path) in err


def test_a_malformed_quota_names_the_clusterqueue_and_its_field(tmp_path: Path) -> None:
    with pytest.raises(changes.ChangesError) as caught:
        changes.parse(CQ.format(cpu='"lots"'), source="doubled.yaml")
    message = str(caught.value)
    assert "ClusterQueue cq" in message
    assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in message


def test_an_override_of_no_workload_is_refused(
    log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _changes(
        tmp_path, "apiVersion: whatif.kueue-es.io/v1\nkind: WorkloadPriorities\npriorities: {default/zz: 5}\n"
    )
    assert cli.main(["what-if", "-f", str(path), "--file", str(log_file)]) == 2
    assert "priorities[default/zz]: no workload or Job of that name" in capsys.readouterr().err


def test_diff_finds_where_a_changed_quota_first_changes_a_decision(
    log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _changes(tmp_path, CQ.format(cpu=12))
    changed = tmp_path / "changed.log"
    assert cli.main(["what-if", "-f", str(path), "--file", str(log_file), "--write-log", str(changed)]) == 0
    baseline = tmp_path / "baseline.log"
    logfile.write_lines(baseline, simulate.simulate(history.extract(list(logfile.read_lines(log_file)))).messages)
    capsys.readouterr()
    assert cli.main(["diff", str(baseline), str(changed)]) == 1
    out = capsys.readouterr().out
    assert "first divergence: decision" in out
    assert "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: 4000 -> 12000" in out
    assert "later decisions differ" in out
    found = diff.compare(list(logfile.read_lines(baseline)), list(logfile.read_lines(changed)))
    assert found is not None and found.a is not None and found.b is not None
    # before the divergence every decision is the same; at it, c is admitted only with more quota
    assert any("default/c" in diff.describe_output(o) for o in found.b.outputs)


def test_diff_of_a_log_with_itself_finds_nothing(log_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["diff", str(log_file), str(log_file)]) == 0
    assert "the two logs decide the same" in capsys.readouterr().out


def _with_usage(recorded: list[LogMessage], cpu: int) -> list[LogMessage]:
    """``recorded`` with its first carried WorkloadAdmitted's ``resourceUsage.cpu`` set to ``cpu``."""
    out, done = [], False
    for message in recorded:
        event = json.loads(message.data)
        if not done and event["type"] == "DecisionRecord" and event.get("decisions"):
            admitted = [d for d in event["decisions"] if d["type"] == "WorkloadAdmitted"]
            if admitted:
                admitted[0]["podSetAssignments"][0]["resourceUsage"]["cpu"] = cpu
                message = msgspec.structs.replace(message, data=codec.encode(codec.decode(json.dumps(event).encode())))
                done = True
        out.append(message)
    assert done
    return out


def test_diff_names_the_fields_of_outputs_that_read_the_same(
    recorded: list[LogMessage], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two logs whose only difference is a record's ``resourceUsage.cpu``: the table's two cells read alike, so
    diff names the field (as replay does) and does not call it a difference of time or order."""
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    logfile.write_lines(a, _with_usage(recorded, 3000))
    logfile.write_lines(b, _with_usage(recorded, 300))
    assert cli.main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "output 1 (WorkloadAdmitted default/a in cq flavor default-flavor at" in out
    assert "podSetAssignments[0].resourceUsage.cpu: 3000 -> 300" in out
    assert "time or order)" not in out
    assert "the decisions differ in their content" in out
    assert "kueue-es replay" in out


def test_diff_of_outputs_in_another_order_is_a_difference_of_order(recorded: list[LogMessage]) -> None:
    """Outputs the same but in another order: no field is named, and it is no difference of content."""
    found = diff.compare(recorded, recorded)
    assert found is None
    record = next(d for d in diff.decisions(recorded) if len(d.outputs) > 1)
    swapped = diff.Decision(seq=record.seq, record=record.record, outputs=list(reversed(record.outputs)))
    assert not diff.differ_in_content(record, swapped)
    one = diff.Decision(seq=record.seq, record=record.record, outputs=record.outputs[:1])
    assert diff.differ_in_content(record, one)


def test_without_a_source_or_running_system_it_says_how_to_name_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KUEUE_ES_CURRENT", str(tmp_path / "none.json"))
    monkeypatch.delenv("KUEUE_ES_NATS_URL", raising=False)
    path = _changes(tmp_path, CQ.format(cpu=12))
    assert cli.main(["what-if", "-f", str(path)]) == 2
    assert "no running kueue-es found" in capsys.readouterr().err


def test_from_a_time_keeps_the_log_up_to_the_first_decision_after_it(
    recorded: list[LogMessage], log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [(m.seq, e) for m in recorded if isinstance(e := codec.decode(m.data), types.DecisionRecord)]
    index = next(i for i in range(3, len(records)) if records[i][1].now_ms > records[i - 1][1].now_ms)
    seq, record = records[index]
    moment = diff.format_ms(record.now_ms - 1)  # after the records before it, 1 ms before it
    path = _changes(tmp_path, CQ.format(cpu=12))
    assert cli.main(["what-if", "-f", str(path), "--file", str(log_file), "--from", moment]) == 0
    assert f"the log up to #{seq - 1} is kept as recorded" in capsys.readouterr().out
    assert cli.main(["what-if", "-f", str(path), "--file", str(log_file), "--from", "yesterday"]) == 2
    assert "--from 'yesterday' is neither a log sequence nor an RFC 3339 time" in capsys.readouterr().err


def test_a_changed_object_not_in_the_log_is_warned_about(
    log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt ClusterQueue is added as a new object, and the report says so; the header says that a
    changed object replaces every recorded version of it."""
    path = _changes(tmp_path, CQ.format(cpu=12).replace("name: cq", "name: cq-typo"))
    assert cli.main(["what-if", "-f", str(path), "--file", str(log_file)]) == 0
    out = capsys.readouterr().out
    assert "warning: ClusterQueue cq-typo is not in the log: added as a new object" in out
    assert "replaces every recorded version of it" in out
    path = _changes(tmp_path, CQ.format(cpu=12))
    assert cli.main(["what-if", "-f", str(path), "--file", str(log_file)]) == 0
    out = capsys.readouterr().out
    assert "not in the log" not in out and "replaces every recorded version of it" in out


def test_not_recorded_names_only_the_objects_the_log_never_observes(recorded: list[LogMessage]) -> None:
    both = changes.parse(CQ.format(cpu=12) + "---\n" + CQ.format(cpu=1).replace("name: cq", "name: other"))
    assert changes.not_recorded(both, recorded) == [("ClusterQueue", "", "other")]


def test_diff_of_the_running_systems_url_uses_its_reading_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`diff nats://...` of the system demo --keep (or up) runs: its recorded reader, without the env vars."""
    from kueue_es import current
    from kueue_es.events.bus.server import Credentials
    from kueue_es.whatif import source

    monkeypatch.setenv("KUEUE_ES_CURRENT", str(tmp_path / "current.json"))
    for name in ("KUEUE_ES_NATS_URL", "KUEUE_ES_NATS_USER", "KUEUE_ES_NATS_PASSWORD_FILE"):
        monkeypatch.delenv(name, raising=False)
    reader = Credentials(user="reader", password_file=tmp_path / "reader.password")
    current.record(nats_url="nats://127.0.0.1:4999", reader=reader, kubeconfig=None, run_dir=tmp_path, command="demo")
    assert source.parse_spec("nats://127.0.0.1:4999").credentials == reader
    assert source.parse_spec("nats://127.0.0.1:5000").credentials is None  # another system: the env's (none)
    assert source.from_options(nats="nats://127.0.0.1:4999", store=None, file=None).credentials == reader
