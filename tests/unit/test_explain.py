"""``kueue-es explain``, ``list`` and ``status`` over a recorded log, now and ``--at`` (issue 16, point 4).

The log is made as the services make it: facts as the watcher writes them, decisions committed by the
real admitter as batches (``runtime.build_batch``), written to a JSON-lines file (:mod:`kueue_es.logfile`)
that the commands read with ``--file``. The cluster: ClusterQueues ``team-a-cq`` (4 CPU) and
``team-b-cq`` (2 CPU) in cohort ``team-a``; ``borrower`` of team-b-cq holds 4 CPU (2 borrowed from
team-a-cq), ``low`` (priority 0) holds 1 CPU of team-a-cq; ``waiting`` (priority 10, the Workload of
Job ``train``) asks 4 CPU of team-a-cq: 1 is available, so it needs 3 more; preemption could take
``low``'s 1 CPU, reclaim the 2 CPU team-b-cq borrows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kueue_es import cli, deciders, logfile, logsource
from kueue_es.events import codec, models, subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.jobframework import pods, workloads
from kueue_es.jobframework.integrations import serving
from kueue_es.projections.cluster import ClusterState
from kueue_es.scheduling import explain as core
from kueue_es.services.kube import resources
from kueue_es.services.runtime import build_batch, fold_message
from kueue_es.services.watcher.convert import kueue_fact
from kueue_es.sim import controllers, emulator
from tests.builders import flavor, local_queue, workload
from tests.kube import examples

NOW = 1_796_000_000_000  # 2026-11-30T...: the admitter's clock in this log


def _cq(name: str, cpu: int, *, reclaim: str = "Any", within: str = "LowerPriority") -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "cohortName": "team-a",
            "preemption": {"reclaimWithinCohort": reclaim, "withinClusterQueue": within},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                }
            ],
        },
    }


class Recorder:
    """An in-memory log folded as every service folds it, written to a file at the end."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.messages: list[LogMessage] = []
        self.clock = NOW
        self.schema_version = types.SCHEMA_VERSION  # 16: batches as before schema 17 (a message per decision)

    def append(self, *messages: OutgoingMessage) -> None:
        for message in messages:
            stored = LogMessage(
                seq=len(self.messages) + 1,
                subject=message.subject,
                data=message.data,
                headers={**message.headers, "Nats-Msg-Id": message.msg_id},
            )
            self.messages.append(stored)
            fold_message(self.state, stored)

    def fact(self, event: types.Fact) -> None:
        self.append(subjects.fact_message(event))

    def manifest(self, doc: dict, *, owner: str = "") -> None:
        fact = kueue_fact(doc)
        if owner:
            assert isinstance(fact, types.WorkloadObserved)
            job = models.OwnerReference(api_version="batch/v1", kind="Job", name=owner, uid=f"job-{owner}")
            fact = types.WorkloadObserved(workload=msgspec.structs.replace(fact.workload, owner=job))
        self.fact(fact)

    def settle(self) -> None:
        """Admitter cycles, each committed as a batch, until one decides nothing (the clock moves 1 s a cycle)."""
        for _ in range(20):
            self.clock += 1000
            out = deciders.ADMITTER.decide(self.state, now_ms=self.clock)
            if not out:
                return
            head, rest = build_batch(
                deciders.ADMITTER,
                outputs=out,
                basis_seq=self.state.last_seq,
                head_seq=0,
                now_ms=self.clock,
                schema_version=self.schema_version,
            )
            self.append(head, *rest)
        raise AssertionError("the admitter did not settle")

    def write(self, path: Path) -> Path:
        with path.open("wb") as out:
            writer = logfile.LogWriter(out)
            for message in self.messages:
                writer.write(message)
        return path


def test_list_and_status_print_whole_columns_as_kubectl_does(
    waiting_log: tuple[Recorder, Path, int],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """On a narrow terminal nothing is cut to ``…``; NAMESPACE comes first only with -A (kueuectl's
    printer); ACTIVE is the ClusterQueue's Active condition (a missing AdmissionCheck makes it false)."""
    log, _, _ = waiting_log
    checked = _cq("checked-cq", 1)
    checked["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "missing-check"}]}
    log.manifest(checked)
    path = log.write(tmp_path / "checked.jsonl")
    monkeypatch.setenv("COLUMNS", "60")
    code, out, _ = _run(capsys, "list", "workload", "--file", str(path))
    lines = out.splitlines()
    assert code == 0 and "…" not in out
    assert (
        lines[0].split()
        == "NAME JOB TYPE JOB NAME LOCALQUEUE CLUSTERQUEUE STATUS POSITION IN QUEUE EXEC TIME AGE".split()
    )
    waiting = next(line for line in lines if line.startswith("waiting "))
    assert waiting.split()[:7] == ["waiting", "job", "train", "a", "team-a-cq", "PENDING", "0"]
    code, out, _ = _run(capsys, "list", "workload", "-A", "--file", str(path))
    assert out.splitlines()[0].startswith("NAMESPACE   NAME") and "\ndefault     waiting " in out
    code, out, _ = _run(capsys, "list", "cq", "--file", str(path))
    active = {line.split()[0]: line.split()[-2] for line in out.splitlines()[1:]}
    assert active == {"checked-cq": "false", "team-a-cq": "true", "team-b-cq": "true"}
    code, out, _ = _run(capsys, "status", "--file", str(path))
    assert code == 0 and "…" not in out and "checked-cq" in out and "BORROWING LIMIT" in out


def test_list_takes_kueuectls_filters_also_as_kubectl_kueue_list_at(
    waiting_log: tuple[Recorder, Path, int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--status, -c (admitted to), -q and --active filter as kueuectl's do, so ``kubectl kueue list
    workload --at SEQ --status pending`` (forwarded to kueue-es list) takes the flags it takes live."""
    from kueue_es.kueuectl import cli as kubectl_kueue

    log, _, _ = waiting_log
    stopped = _cq("stopped-cq", 1)
    stopped["spec"]["stopPolicy"] = "Hold"
    log.manifest(stopped)
    path = log.write(tmp_path / "filters.jsonl")

    def names(*argv: str) -> list[str]:
        code, out, err = _run(capsys, "list", *argv, "--file", str(path), "-o", "json")
        assert code == 0, err
        return sorted(row["NAME"] for row in json.loads(out))

    assert names("workload", "--status", "pending") == ["waiting"]
    assert names("workload", "--status", "admitted", "--status", "Pending") == ["borrower", "low", "waiting"]
    assert names("workload", "-c", "team-a-cq") == ["low"]  # admitted to it: waiting has no admission
    assert names("workload", "-q", "b") == ["borrower"]
    assert names("lq", "-A", "-c", "team-b-cq") == ["b"]
    assert names("cq", "--active", "false") == ["stopped-cq"]
    assert names("cq", "--active=true") == ["team-a-cq", "team-b-cq"]
    code, _, err = _run(capsys, "list", "workload", "--status", "running", "--file", str(path))
    assert code == 2 and 'invalid status value (running). Must be "all", "pending", "admitted" or "finished"' in err
    code, _, err = _run(capsys, "list", "cq", "--active", "true,false", "--file", str(path))
    assert code == 2 and "only one active flag can be provided" in err
    last = str(len(log.messages))
    code = kubectl_kueue.main(["list", "workload", "--at", last, "--status", "pending", "--file", str(path)])
    out = capsys.readouterr().out
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:]] == ["waiting"]
    with pytest.raises(SystemExit):  # the flag is in kubectl kueue list's help, where a user looks for it
        kubectl_kueue.main(["list", "workload", "--help"])
    assert "--at SEQ|RFC3339" in capsys.readouterr().out


def _recorded(
    *, reclaim: str = "Any", within: str = "LowerPriority", schema_version: int = types.SCHEMA_VERSION
) -> Recorder:
    log = Recorder()
    log.schema_version = schema_version
    log.manifest(flavor("default-flavor"))
    log.manifest(_cq("team-a-cq", 4, reclaim=reclaim, within=within))
    log.manifest(_cq("team-b-cq", 2, reclaim=reclaim, within=within))
    log.manifest(local_queue("a", "team-a-cq"))
    log.manifest(local_queue("b", "team-b-cq"))
    log.manifest(workload("low", queue="a", cpu="1", priority=0, created=1))
    log.manifest(workload("borrower", queue="b", cpu="1", count=4, priority=0, created=2))
    log.settle()
    return log


@pytest.fixture
def waiting_log(tmp_path: Path) -> tuple[Recorder, Path, int]:
    """The log with ``waiting`` submitted and the admitter's verdict on it; the sequence just before it."""
    log = _recorded()
    before = len(log.messages)
    log.manifest(workload("waiting", queue="a", cpu="1", count=4, priority=10, created=30), owner="train")
    return log, log.write(tmp_path / "log.jsonl"), before


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_needs_name_the_missing_quota_the_victim_and_the_borrower(waiting_log: tuple[Recorder, Path, int]) -> None:
    log, _, _ = waiting_log
    assert log.state.workloads["default/low"].admitted
    assert log.state.usage_of("team-b-cq", "default-flavor", "cpu") == 4000  # 2 CPU borrowed from team-a-cq
    needed = core.needs(log.state, "default/waiting", now_ms=log.clock)
    assert needed.status == "pending" and needed.cohort == "team-a"
    [[default]] = needed.groups
    [cpu] = default.resources
    assert (cpu.asks, cpu.nominal, cpu.used, cpu.available, cpu.short) == (4000, 4000, 1000, 1000, 3000)
    assert [(h.key, h.amount) for h in cpu.preemptible] == [("default/low", 1000)]
    assert [(h.key, h.cluster_queue, h.amount) for h in cpu.reclaimable] == [("default/borrower", "team-b-cq", 4000)]
    assert cpu.reclaim_amount == 2000  # what team-b-cq holds above its nominal quota
    text = "\n".join(needed.summary())
    assert "3 cpu more free in flavor default-flavor of team-a-cq" in text
    assert "borrowers in cohort team-a hold 2 cpu that reclaim could take" in text
    assert "lower-priority workloads in team-a-cq hold 1 cpu" in text


def test_explain_by_job_name_tells_the_story_position_and_needs(
    waiting_log: tuple[Recorder, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    _, path, _ = waiting_log
    code, out, err = _run(capsys, "explain", "default/train", "--file", str(path), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["workload"] == "default/waiting" and report["owner"] == "Job train"
    assert report["status"] == "pending" and report["priority"] == 10
    assert [line["what"] for line in report["story"]] == ["submitted"]
    assert report["position"]["positionInClusterQueue"] == 0
    [flavor_need] = report["needs"]["flavors"]
    assert flavor_need["resources"][0]["short"] == 3000
    code, out, _ = _run(capsys, "explain", "default/train", "--file", str(path))
    assert code == 0
    assert "Workload default/waiting (for Job train): pending" in out
    assert "3 cpu more free in flavor default-flavor of team-a-cq" in out


def _admission(messages: list[LogMessage], name: str) -> tuple[int, types.WorkloadAdmitted]:
    """The sequence and the WorkloadAdmitted of workload ``name``: a message of its own (before event
    schema 17) or one its DecisionRecord carries (at the record's sequence)."""
    for message in messages:
        event = codec.decode(message.data)
        for one in types.with_carried(event):
            if isinstance(one, types.WorkloadAdmitted) and one.workload.name == name:
                return message.seq, one
    raise AssertionError(f"no admission of {name}")


@pytest.mark.parametrize("schema", [types.SCHEMA_VERSION, 16])
def test_explain_at_before_and_after_an_admission(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], schema: int
) -> None:
    log = _recorded(reclaim="Never", within="Never", schema_version=schema)  # it waits: nothing to preempt
    log.manifest(workload("big", queue="a", cpu="1", count=3, priority=0, created=40))
    log.settle()  # 1 + 3 = 4 of team-a-cq's 4, but team-b-cq borrows 2 of them: it waits
    waited = log.state.workloads["default/big"]
    assert not waited.admitted and waited.pending_reason == "WaitingForQuota"
    finished_at = len(log.messages)
    log.fact(
        types.WorkloadFinished(workload=types.WorkloadRef(namespace="default", name="borrower", uid="uid-borrower"))
    )
    log.settle()
    assert log.state.workloads["default/big"].admitted
    admitted_seq, admission = _admission(log.messages, "big")
    assert (log.messages[admitted_seq - 1].headers["Kq-Type"] == "DecisionRecord") == (schema >= 17)
    path = log.write(tmp_path / "log.jsonl")
    code, out, _ = _run(capsys, "explain", "default/big", "--file", str(path), "--at", str(finished_at), "-o", "json")
    assert code == 0
    before = json.loads(out)
    assert before["status"] == "pending" and before["asOf"]["seq"] <= finished_at
    assert [line["what"] for line in before["story"]] == ["submitted", "pending"]
    assert before["story"][1]["detail"]["reason"] == "WaitingForQuota"
    assert before["needs"]["flavors"][0]["resources"][0]["short"] == 2000  # 3 asked, 1 available
    code, out, _ = _run(capsys, "explain", "default/big", "--file", str(path), "-o", "json")
    after = json.loads(out)
    assert after["status"] == "admitted" and after["position"] is None
    whats = [line["what"] for line in after["story"]]
    assert whats[-2:] == ["quota reserved", "admitted"]
    assert [line["seq"] for line in after["story"] if line["what"] == "admitted"] == [admitted_seq]
    # --at a time: the admission's own time folds it; a millisecond earlier does not
    admitted_ms = admission.at_ms
    for moment, status in ((admitted_ms, "admitted"), (admitted_ms - 1, "pending")):
        at = logsource.rfc3339(moment)
        code, out, _ = _run(capsys, "explain", "default/big", "--file", str(path), "--at", at, "-o", "json")
        assert json.loads(out)["status"] == status, at


def test_list_and_status_from_the_log(
    waiting_log: tuple[Recorder, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    _, path, before = waiting_log
    code, out, _ = _run(capsys, "list", "workload", "--file", str(path), "-o", "json")
    assert code == 0
    rows = {row["NAME"]: row for row in json.loads(out)}
    assert rows["low"]["STATUS"] == "ADMITTED" and rows["borrower"]["CLUSTERQUEUE"] == "team-b-cq"
    assert rows["waiting"]["STATUS"] == "PENDING" and rows["waiting"]["JOB NAME"] == "train"
    assert rows["waiting"]["POSITION IN QUEUE"] == 0 and rows["waiting"]["JOB TYPE"] == "job"
    code, out, _ = _run(capsys, "list", "workload", "--file", str(path), "--at", str(before), "-o", "json")
    assert "waiting" not in {row["NAME"] for row in json.loads(out)}
    code, out, _ = _run(capsys, "list", "cq", "--file", str(path), "-o", "json")
    queues = {row["NAME"]: row for row in json.loads(out)}
    assert queues["team-a-cq"]["PENDING WORKLOADS"] == 1 and queues["team-a-cq"]["ADMITTED WORKLOADS"] == 1
    assert queues["team-b-cq"]["COHORT"] == "team-a"
    code, out, _ = _run(capsys, "list", "lq", "-A", "--file", str(path))
    assert code == 0 and "team-b-cq" in out
    code, out, _ = _run(capsys, "list", "rf", "--file", str(path), "-o", "yaml")
    assert "default-flavor" in out
    code, out, _ = _run(capsys, "status", "--file", str(path), "-o", "json")
    report = json.loads(out)
    by_name = {cq["name"]: cq for cq in report["clusterQueues"]}
    assert (
        by_name["team-b-cq"]["resources"][0]["usage"] == "4" and by_name["team-b-cq"]["resources"][0]["borrowed"] == "2"
    )
    assert by_name["team-a-cq"]["pendingActive"] + by_name["team-a-cq"]["pendingInadmissible"] == 1
    assert report["cohorts"] == [
        {"name": "team-a", "parent": "", "implicit": True, "clusterQueues": ["team-a-cq", "team-b-cq"], "cohorts": []}
    ]
    code, out, _ = _run(capsys, "status", "--file", str(path))
    assert code == 0 and "4/2 (200%)" in out


def test_unknown_workload_is_a_clear_error(
    waiting_log: tuple[Recorder, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    _, path, _ = waiting_log
    code, out, err = _run(capsys, "explain", "default/nothing", "--file", str(path))
    assert code == 1 and out == ""
    assert "names no Workload default/nothing and no Workload owned by a job default/nothing" in err


def test_bad_arguments_exit_2(
    waiting_log: tuple[Recorder, Path, int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, path, _ = waiting_log
    code, _, err = _run(capsys, "explain", "default/x", "--file", str(path), "--at", "yesterday")
    assert code == 2 and "neither a log sequence nor an RFC 3339 time" in err
    code, _, err = _run(capsys, "status", "--file", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "no log file" in err
    code, _, err = _run(capsys, "status", "--file", str(path), "--store", str(tmp_path))
    assert code == 2 and "at most one of" in err


def test_parse_at() -> None:
    assert logsource.parse_at("42").seq == 42
    assert logsource.parse_at("2026-12-01T00:00:00Z").ms == 1_796_083_200_000
    assert logsource.parse_at("2026-12-01T00:00:00").ms == 1_796_083_200_000  # no zone: UTC
    with pytest.raises(ValueError, match="a sequence starts at 1"):
        logsource.parse_at("0")


def test_preemptions_by_it_and_of_it_in_the_recorded_demo_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The recorded preemption demo (tests/fixtures/logs): the urgent Job's story names the two workloads it
    evicted; a victim's story says it was evicted by it, then admitted again and finished."""
    path = tmp_path / "demo.jsonl"
    with path.open("wb") as out:
        writer = logfile.LogWriter(out)
        for line in (
            (Path(__file__).parent.parent / "fixtures" / "logs" / "demo-preempt.jsonl").read_text().splitlines()
        ):
            raw = json.loads(line)
            writer.write(
                LogMessage(seq=raw["seq"], subject=raw["subject"], data=raw["data"].encode(), headers=raw["headers"])
            )
    code, out, _ = _run(capsys, "explain", "default/urgent-job-zslf2", "--file", str(path), "-o", "json")
    assert code == 0
    urgent = json.loads(out)
    assert urgent["status"] == "finished"
    nominated = next(line for line in urgent["story"] if line["what"] == "nominated")
    victims = sorted(t["workload"] for t in nominated["detail"]["targets"])
    assert victims == ["default/job-sample-job-xpx9k-671af", "default/job-sample-job-zlq5c-f71bf"]
    assert sorted(line["detail"]["victim"] for line in urgent["story"] if line["what"] == "preempting") == victims
    code, out, _ = _run(capsys, "explain", "default/sample-job-xpx9k", "--file", str(path), "-o", "json")
    victim = json.loads(out)
    whats = [line["what"] for line in victim["story"]]
    evicted = whats.index("evicted")
    assert victim["story"][evicted]["detail"]["preemptor"] == urgent["workload"]
    assert victim["story"][evicted]["detail"]["preemptionReason"] == "InClusterQueue"
    assert "admitted" in whats[:evicted] and "admitted" in whats[evicted:] and whats[-1] in ("released", "finished")


def test_needs_name_what_blocks_besides_quota() -> None:
    """A stopped ClusterQueue, a missing LocalQueue, a StrictFIFO head: said as such, not as quota."""
    log = Recorder()
    log.manifest(flavor("default-flavor"))
    held = _cq("held-cq", 4)
    held["spec"]["stopPolicy"] = "Hold"
    held["spec"]["queueingStrategy"] = "StrictFIFO"
    log.manifest(held)
    log.manifest(local_queue("held", "held-cq"))
    log.manifest(workload("first", queue="held", cpu="8", created=1))
    log.manifest(workload("second", queue="held", cpu="1", created=2))
    log.manifest(workload("lost", queue="nowhere", cpu="1", created=3))
    log.manifest({**local_queue("unbacked", "x"), "spec": {}})  # spec.clusterQueue is optional, as Kueue's
    log.manifest(workload("unbacked", queue="unbacked", cpu="1", created=4))
    log.settle()
    second = core.needs(log.state, "default/second", now_ms=log.clock)
    assert "ClusterQueue held-cq is stopped (stopPolicy Hold)" in second.blocked
    assert "StrictFIFO: default/first is at the head of held-cq and waits first" in second.blocked
    assert "it fits now: the admitter tries it again in its next cycle" not in second.summary()
    lost = core.needs(log.state, "default/lost", now_ms=log.clock)
    assert lost.blocked == ("LocalQueue default/nowhere does not exist",)
    unbacked = core.needs(log.state, "default/unbacked", now_ms=log.clock)
    assert unbacked.blocked == ("LocalQueue default/unbacked names no ClusterQueue (spec.clusterQueue)",)
    assert unbacked.message == "ClusterQueue  doesn't exist"  # Kueue's pending message, as the admitter wrote it
    first = core.needs(log.state, "default/first", now_ms=log.clock)
    [[cpu_in]] = [[flavor.resources[0] for flavor in group] for group in first.groups]
    told = "\n".join(first.summary())
    assert cpu_in.never and "never fits in flavor default-flavor of held-cq" in told
    assert "more free" not in told  # no shortfall of now, which no freed quota would cover
    assert core.needs(log.state, "default/none").status == "unknown"


def test_a_workload_waiting_in_a_terminating_or_inactive_cluster_queue_is_told_so_not_that_it_fits() -> None:
    """A ClusterQueue being deleted (held by Kueue's finalizer while a workload holds quota in it) admits nothing
    more: a workload waiting there is told so, not "it fits now", though the quota would fit. So is one in a
    ClusterQueue whose TAS flavor's Topology is missing (inactive for a reason said nowhere else: admitter logic 51
    admits nothing there, as Kueue; 50 admitted it)."""
    from kueue_es.events import models

    log = Recorder()
    log.manifest(flavor("default-flavor"))
    going = _cq("going-cq", 4)
    going["metadata"]["annotations"] = {models.TERMINATING_ANNOTATION: "2026-12-06T18:00:00Z"}
    log.manifest(going)
    log.manifest(local_queue("going", "going-cq"))
    log.manifest(workload("waiting", queue="going", cpu="1", created=1))
    log.manifest({**flavor("tas-flavor"), "spec": {"topologyName": "no-such-topology", "nodeLabels": {"pool": "tas"}}})
    broken = _cq("tas-cq", 4)
    broken["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "tas-flavor"
    log.manifest(broken)
    log.manifest(local_queue("tas", "tas-cq"))
    log.manifest(workload("placed", queue="tas", cpu="1", created=2))
    log.settle()
    waiting = core.needs(log.state, "default/waiting", now_ms=log.clock)
    assert waiting.blocked == (
        "ClusterQueue going-cq is terminating: it admits nothing more, and goes once its workloads end",
    )
    assert "it fits now: the admitter tries it again in its next cycle" not in waiting.summary()
    placed = core.needs(log.state, "default/placed", now_ms=log.clock)
    assert placed.status == "pending" and placed.message == "ClusterQueue tas-cq is inactive"
    assert placed.blocked == (
        "ClusterQueue tas-cq is inactive (TopologyNotFound): Can't admit new workloads: there is no Topology "
        '"no-such-topology" for TAS flavor "tas-flavor".',
    )
    from kueue_es.services.admitter import core as admitter

    earlier = admitter.decide_as(50)(log.state, now_ms=log.clock)
    assert [o.workload.name for o in earlier if isinstance(o, types.WorkloadAdmitted)] == ["placed"]


def test_a_deleted_workload_is_deleted_not_unknown(
    waiting_log: tuple[Recorder, Path, int], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A pending Workload deleted (kubectl kueue delete workload, or its Job deleted): the fold forgets it, its
    story ends in "deleted", and so does its status."""
    log, _, _ = waiting_log
    log.fact(types.ObjectDeleted(kind="Workload", namespace="default", name="waiting", uid="uid-waiting"))
    assert "default/waiting" not in log.state.workloads  # it held no quota: the fold dropped it
    path = log.write(tmp_path / "deleted.jsonl")
    code, out, err = _run(capsys, "explain", "default/train", "--file", str(path), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["story"][-1]["what"] == "deleted"
    assert report["status"] == "deleted"
    code, out, _ = _run(capsys, "explain", "default/waiting", "--file", str(path))
    assert code == 0 and "Workload default/waiting (for Job train): deleted" in out
    assert core.needs(log.state, "default/waiting", deleted=True).status == "deleted"
    assert core.needs(log.state, "default/waiting").status == "unknown"  # without its story


def test_explain_takes_n_namespace_and_hints_at_namespace_slash_name(
    waiting_log: tuple[Recorder, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    """-n NS NAME is NS/NAME (kubectl's way); a kind word before the slash (job/train) gets a hint."""
    _, path, _ = waiting_log
    code, out, err = _run(capsys, "explain", "-n", "default", "train", "--file", str(path), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["workload"] == "default/waiting"
    code, _, err = _run(capsys, "explain", "-n", "other", "default/train", "--file", str(path))
    assert code == 2 and "is in namespace 'default' but -n/--namespace says 'other'" in err
    code, _, err = _run(capsys, "explain", "-n", "other", "train", "--file", str(path))
    assert code == 1 and "no Workload other/train" in err and "hint" not in err
    code, _, err = _run(capsys, "explain", "job/train", "--file", str(path))
    assert code == 1 and "hint: explain takes NAMESPACE/NAME, not TYPE/NAME" in err
    assert "give default/train" in err
    code, _, err = _run(capsys, "explain", "-n", "job", "train", "--file", str(path))
    assert code == 1 and "hint" not in err  # a namespace asked for as such


def test_at_past_the_end_of_the_log_is_a_note(
    waiting_log: tuple[Recorder, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    log, path, _ = waiting_log
    last = len(log.messages)
    for argv in (["explain", "default/train"], ["list", "workload"], ["status"]):
        code, out, err = _run(capsys, *argv, "--file", str(path), "--at", str(last + 5), "-o", "json")
        assert code == 0, (argv, err)
        assert f"note: --at {last + 5} is past the end of the log (its last message is #{last})" in err, argv
        assert out
    code, _, err = _run(capsys, "status", "--file", str(path), "--at", str(last))
    assert code == 0 and "past the end" not in err


def test_one_repeated_pending_outcome_is_singular(
    waiting_log: tuple[Recorder, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    from kueue_es import explain

    _, path, _ = waiting_log
    code, out, _ = _run(capsys, "explain", "default/train", "--file", str(path), "-o", "json")
    report = json.loads(out)
    for repeats, text in ((1, "(1 more pending outcome repeated"), (2, "(2 more pending outcomes repeated")):
        report["repeatedPendingOutcomes"] = repeats
        explain._render_explanation(report, as_of="log read through #1")
        assert text in capsys.readouterr().out


def _lone(name: str, cpu: int, cohort: str = "") -> dict:
    from tests.builders import cluster_queue

    doc = cluster_queue(name, flavors={"default-flavor": {"cpu": cpu}})
    if cohort:
        doc["spec"]["cohortName"] = cohort
    return doc


def _decide(log: Recorder, partition: str) -> None:
    """One admitter cycle of ``partition`` committed as its deciders commit it (its own chain)."""
    log.clock += 1000
    out = deciders.ADMITTER.decide(log.state, now_ms=log.clock, partition=partition)
    head, rest = build_batch(
        deciders.ADMITTER,
        outputs=out,
        basis_seq=log.state.last_seq,
        head_seq=log.state.heads.get(partition, 0),
        now_ms=log.clock,
        partition=partition,
    )
    log.append(head, *rest)


def test_explain_and_status_show_partitions_hand_overs_and_a_partition_nobody_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Partitions q-a and q-b have deciders (records); q-c has none: its waiting workload's explanation
    says so. ClusterQueue b then joins cohort x: its workload wb waits in c-x for q-b's fence, which
    explain and status show (the ClusterQueue's partition, the hand-over, what it waits for)."""
    log = Recorder()
    log.manifest(flavor("default-flavor"))
    for name, cpu in (("a", 4), ("b", 1), ("c", 4)):
        log.manifest(_lone(name, cpu))
        log.manifest(local_queue(name, name))
    log.manifest(workload("wa", queue="a", cpu="1"))
    log.manifest(workload("wb", queue="b", cpu="2"))  # more than b's quota: it waits
    log.manifest(workload("wc", queue="c", cpu="1"))
    _decide(log, "q-a")
    _decide(log, "q-b")
    log.manifest(_lone("b", 1, cohort="x"))
    moved = len(log.messages)
    path = log.write(tmp_path / "log.jsonl")

    code, out, _ = _run(capsys, "explain", "default/wc", "--file", str(path), "-o", "json")
    assert code == 0
    part = json.loads(out)["partition"]
    assert part["partition"] == "q-c" and part["lastRecordSeq"] is None and part["transit"] is None
    assert "partition q-c has no decider at work: no DecisionRecord of q-c is in the log" in part["why"]
    code, out, _ = _run(capsys, "explain", "default/wc", "--file", str(path))
    assert "partition: q-c (no record yet)" in out and "why it waits: partition q-c has no decider" in out

    code, out, _ = _run(capsys, "explain", "default/wb", "--file", str(path), "-o", "json")
    part = json.loads(out)["partition"]
    assert part["partition"] == "c-x" and part["lastRecordSeq"] is None
    assert part["transit"] == {
        "from": "q-b",
        "into": "c-x",
        "movedAt": moved,
        "waitsFor": f"a DecisionRecord of q-b with a basis at or after #{moved} (its fence)",
    }
    assert {t["object"] for t in part["blockedBy"]} == {"cq:b", "wl:default/wb"}
    assert part["why"].startswith("partition c-x decides nothing until the hand-over into it is over")
    code, out, _ = _run(capsys, "explain", "default/wa", "--file", str(path), "-o", "json")
    part = json.loads(out)["partition"]
    assert part["partition"] == "q-a" and part["lastRecordSeq"] is not None and part["why"] == ""

    code, out, _ = _run(capsys, "status", "--file", str(path), "-o", "json")
    report = json.loads(out)
    by_name = {cq["name"]: cq for cq in report["clusterQueues"]}
    assert by_name["a"]["partition"] == "q-a" and by_name["a"]["transit"] is None
    assert by_name["b"]["partition"] == "c-x" and by_name["b"]["transit"]["from"] == "q-b"
    parts = {p["partition"]: p for p in report["partitions"]}
    assert parts["q-b"]["fenceOwedFrom"] == moved and parts["q-b"]["clusterQueues"] == []
    assert parts["q-c"]["lastRecordSeq"] is None and parts["q-a"]["lastRecordSeq"] is not None
    code, out, _ = _run(capsys, "status", "--file", str(path))
    assert f"c-x (from q-b since #{moved}, waits for its fence)" in out
    assert f"owes a fence: a record with a basis at or after #{moved}" in out


def test_a_deactivated_workload_is_deactivated_with_kueues_evicted_reason_not_pending(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``spec.active`` false: Kueue evicts it (Evicted ``Deactivated``, or ``DeactivatedDueTo<reason>`` when
    Kueue deactivated it, workload_controller.go); explain's header says so, not "pending"."""
    log = _recorded()
    off = workload("paused", queue="a", cpu="1", created=30)
    off["spec"]["active"] = False
    log.manifest(off)
    log.manifest(workload("rejected", queue="a", cpu="8", created=31))
    log.settle()
    ref = log.state.workloads["default/rejected"].ref
    deactivated = types.WorkloadDeactivated(
        workload=ref, reason="AdmissionCheck", message="the check prov was Rejected", at_ms=log.clock
    )
    head, rest = build_batch(
        deciders.ADMITTER, outputs=[deactivated], basis_seq=log.state.last_seq, head_seq=0, now_ms=log.clock
    )
    log.append(head, *rest)
    path = log.write(tmp_path / "deactivated.jsonl")

    paused = core.needs(log.state, "default/paused", now_ms=log.clock)
    assert (paused.status, paused.reason, paused.message) == (
        "deactivated", "Deactivated", "The workload is deactivated"
    )  # fmt: skip
    code, out, err = _run(capsys, "explain", "default/paused", "--file", str(path))
    assert code == 0, err
    header = out.splitlines()[0]
    assert header == "Workload default/paused: deactivated (Evicted Deactivated: The workload is deactivated)"
    assert "inactive: spec.active is false" in out and "what it would take" not in out

    code, out, err = _run(capsys, "explain", "default/rejected", "--file", str(path), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["status"] == "deactivated"
    assert (report["needs"]["reason"], report["needs"]["message"]) == (
        "DeactivatedDueToAdmissionCheck",
        "The workload is deactivated due to the check prov was Rejected",
    )
    code, out, _ = _run(capsys, "explain", "default/rejected", "--file", str(path))
    assert out.splitlines()[0] == (
        "Workload default/rejected: deactivated (Evicted DeactivatedDueToAdmissionCheck:"
        " The workload is deactivated due to the check prov was Rejected)"
    )


def test_a_deleted_workload_that_held_quota_is_deleted_after_its_release(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An admitted Workload deleted (its running Job deleted): its story goes on after the deletion (the quota
    released), and its status is still ``deleted``, not ``unknown``, once the fold has forgotten it."""
    log = _recorded()
    assert log.state.workloads["default/low"].admitted
    log.fact(types.ObjectDeleted(kind="Workload", namespace="default", name="low", uid="uid-low"))
    log.settle()
    assert "default/low" not in log.state.workloads  # released and forgotten
    path = log.write(tmp_path / "deleted-running.jsonl")
    code, out, err = _run(capsys, "explain", "default/low", "--file", str(path), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert [line["what"] for line in report["story"]][-2:] == ["deleted", "released"]
    assert report["status"] == "deleted"


@pytest.mark.parametrize(
    ("reason", "succeeded", "told"),
    [
        ("Succeeded", True, "succeeded (Succeeded)"),
        ("Failed", False, "failed (Failed)"),
        ("FailedToStart", False, "failed to start (FailedToStart)"),
        ("OutOfSync", False, "ended out of sync with its job (OutOfSync)"),
        ("OwnerNotFound", False, "orphaned: its owner was deleted (OwnerNotFound)"),
        ("WorkloadSliceReplaced", True, "replaced by a new workload slice (WorkloadSliceReplaced)"),
        ("Done", True, "finished (Done)"),  # a standalone Workload's own reason
    ],
)
def test_a_finish_is_told_by_kueues_finished_reason(
    reason: str, succeeded: bool, told: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An admitted workload finished: the story tells what its Finished reason (Kueue's
    WorkloadFinishedReason*) says happened. Before, every reason but a success was "failed": a Workload
    finished OwnerNotFound (its Job deleted with --cascade=orphan) read as a failed one."""
    log = _recorded()
    uid = log.state.workloads["default/low"].workload.metadata.uid
    message = "The workload's owner no longer exists"
    ref = types.WorkloadRef(namespace="default", name="low", uid=uid)
    log.fact(types.WorkloadFinished(workload=ref, succeeded=succeeded, reason=reason, message=message, at_ms=NOW))
    path = log.write(tmp_path / "finished.jsonl")
    code, out, err = _run(capsys, "explain", "default/low", "--file", str(path), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    [finished] = [line for line in report["story"] if line["what"] == "finished"]
    assert finished["text"] == f"{told}: {message}"
    assert finished["detail"] == {"reason": reason, "outcome": told.rsplit(" (", 1)[0]}
    assert report["status"] == "finished"


# apimachinery's duration_test.go (TestHumanDuration and TestHumanDurationBoundaries), in ms.
_SECOND, _MINUTE, _HOUR, _DAY, _YEAR = 1000, 60_000, 3_600_000, 86_400_000, 365 * 86_400_000
HUMAN_DURATIONS = [
    (_SECOND, "1s"),
    (70 * _SECOND, "70s"),
    (190 * _SECOND, "3m10s"),
    (70 * _MINUTE, "70m"),
    (47 * _HOUR, "47h"),
    (49 * _HOUR, "2d1h"),
    ((8 * 24 + 2) * _HOUR, "8d"),
    (367 * _DAY, "367d"),
    (2 * _YEAR + 25 * _HOUR, "2y1d"),
    (8 * _YEAR + 2 * _HOUR, "8y"),
    (-2 * _SECOND, "<invalid>"),
    (-2 * _SECOND + 1, "0s"),
    (0, "0s"),
    (_SECOND - 1, "0s"),
    (2 * _MINUTE - 1, "119s"),
    (2 * _MINUTE, "2m"),
    (2 * _MINUTE + _SECOND, "2m1s"),
    (10 * _MINUTE - 1, "9m59s"),
    (10 * _MINUTE, "10m"),
    (10 * _MINUTE + _SECOND, "10m"),
    (3 * _HOUR - 1, "179m"),
    (3 * _HOUR, "3h"),
    (3 * _HOUR + _MINUTE, "3h1m"),
    (8 * _HOUR - 1, "7h59m"),
    (8 * _HOUR, "8h"),
    (8 * _HOUR + 59 * _MINUTE, "8h"),
    (2 * _DAY - 1, "47h"),
    (2 * _DAY, "2d"),
    (2 * _DAY + _HOUR, "2d1h"),
    (8 * _DAY - 1, "7d23h"),
    (8 * _DAY, "8d"),
    (8 * _DAY + 23 * _HOUR, "8d"),
    (2 * _YEAR - 1, "729d"),
    (2 * _YEAR, "2y"),
    (2 * _YEAR + 23 * _HOUR + 59 * _MINUTE, "2y"),
    (2 * _YEAR + _DAY - 1, "2y"),
    (2 * _YEAR + _DAY, "2y1d"),
    (3 * _YEAR, "3y"),
    (7 * _YEAR, "7y"),
    (8 * _YEAR - 1, "7y364d"),
    (8 * _YEAR, "8y"),
    (8 * _YEAR + 364 * _DAY, "8y"),
    (9 * _YEAR, "9y"),
]


@pytest.mark.parametrize(("elapsed_ms", "printed"), HUMAN_DURATIONS)
def test_list_ages_are_apimachinerys_human_duration(elapsed_ms: int, printed: str) -> None:
    """kueuectl prints AGE (and EXEC TIME) with duration.HumanDuration: ``101s`` under two minutes,
    ``2m31s`` under ten, not a short ``1m``."""
    from kueue_es import explain

    created = NOW - 10 * _YEAR
    assert explain._age(created, created + elapsed_ms) == printed


def test_every_list_age_column_is_human_duration(waiting_log: tuple[Recorder, Path, int]) -> None:
    """AGE of ClusterQueues, LocalQueues, ResourceFlavors and Workloads alike: 151 s is ``2m31s``."""
    from kueue_es import explain

    log, _, _ = waiting_log
    state = log.state

    def created(obj: models.ClusterQueue | models.LocalQueue | models.ResourceFlavor) -> Any:
        meta = msgspec.structs.replace(obj.metadata, creation_timestamp_ms=NOW)
        return msgspec.structs.replace(obj, metadata=meta)

    state.cluster_queues["team-a-cq"] = created(state.cluster_queues["team-a-cq"])
    state.local_queues[("default", "a")] = created(state.local_queues[("default", "a")])
    state.flavors["default-flavor"] = created(state.flavors["default-flavor"])
    waiting = state.workloads["default/waiting"]
    waiting.workload = msgspec.structs.replace(
        waiting.workload, metadata=msgspec.structs.replace(waiting.workload.metadata, creation_timestamp_ms=NOW)
    )
    for kind, name in (
        ("clusterqueue", "team-a-cq"),
        ("localqueue", "a"),
        ("resourceflavor", "default-flavor"),
        ("workload", "waiting"),
    ):
        rows = explain.list_rows(state, kind, namespace=None, now_ms=NOW + 151_000)
        assert next(row["AGE"] for row in rows if row["NAME"] == name) == "2m31s", kind


def _demo_preempt_log(tmp_path: Path) -> Path:
    path = tmp_path / "demo.jsonl"
    with path.open("wb") as out:
        writer = logfile.LogWriter(out)
        for line in (
            (Path(__file__).parent.parent / "fixtures" / "logs" / "demo-preempt.jsonl").read_text().splitlines()
        ):
            raw = json.loads(line)
            writer.write(
                LogMessage(seq=raw["seq"], subject=raw["subject"], data=raw["data"].encode(), headers=raw["headers"])
            )
    return path


def test_exec_time_is_empty_for_a_preempted_pending_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kueuectl's EXEC TIME is there only while the Admitted condition is True: the preemption demo's two
    victims, evicted and waiting again (through #50), show none; the workloads admitted then show one."""
    path = _demo_preempt_log(tmp_path)
    code, out, _ = _run(capsys, "list", "workload", "--file", str(path), "--at", "50", "-o", "json")
    assert code == 0
    rows = {row["NAME"]: row for row in json.loads(out)}
    victims = ["job-sample-job-xpx9k-671af", "job-sample-job-zlq5c-f71bf"]
    assert [rows[name]["STATUS"] for name in victims] == ["PENDING", "PENDING"]
    assert [rows[name]["EXEC TIME"] for name in victims] == ["", ""]
    admitted = [row for row in rows.values() if row["STATUS"] == "ADMITTED"]
    assert admitted and all(row["EXEC TIME"] for row in admitted)


def test_exec_time_of_a_finished_workload_is_its_last_admission(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workload admitted, evicted after 60 s, admitted again and finished 150 s later: kueuectl's EXEC
    TIME is from its (last) Admitted condition to its Finished one, 150 s (``2m30s``), not the 210 s of
    both admissions; and none while it waited between them."""
    log = _recorded()
    low = log.state.workloads["default/low"]
    assert low.admitted
    ref = types.WorkloadRef(namespace="default", name="low", uid=low.workload.metadata.uid)
    first = low.admitted_at_ms
    log.clock = first + 60_000
    head, rest = build_batch(
        deciders.ADMITTER,
        outputs=[
            types.QuotaReleased(
                workload=ref, cluster_queue="team-a-cq", reason="Preempted", cause_seq=0, at_ms=log.clock
            )
        ],
        basis_seq=log.state.last_seq,
        head_seq=0,
        now_ms=log.clock,
    )
    log.append(head, *rest)
    assert not log.state.workloads["default/low"].admitted
    waiting_seq = len(log.messages)
    log.settle()
    again = log.state.workloads["default/low"]
    assert again.admitted and again.admitted_at_ms > first + 60_000
    log.clock = again.admitted_at_ms + 150_000
    log.fact(types.WorkloadFinished(workload=ref, at_ms=log.clock))
    log.settle()
    assert log.state.workloads["default/low"].reservation is None  # the finished release is folded
    path = log.write(tmp_path / "finished.jsonl")
    code, out, _ = _run(capsys, "list", "workload", "--file", str(path), "--at", str(waiting_seq), "-o", "json")
    assert code == 0 and {r["NAME"]: r["EXEC TIME"] for r in json.loads(out)}["low"] == ""
    code, out, _ = _run(capsys, "list", "workload", "--file", str(path), "-o", "json")
    row = next(r for r in json.loads(out) if r["NAME"] == "low")
    assert code == 0 and row["STATUS"] == "FINISHED" and row["EXEC TIME"] == "2m30s"


def test_list_joins_every_owner_the_log_knows_as_kueuectl_joins_owner_references() -> None:
    """kueuectl's JOB TYPE and JOB NAME join all of a Workload's ownerReferences (list_workload_printer.go
    crdTypes, crdNames). A StatefulSet's serving group is owned by the StatefulSet and its pods: ``list``
    names the StatefulSet (from the Workload's job-owner annotations) beside the pod the log keeps; a
    type longer than 20 characters is cut as kueuectl cuts it."""
    from kueue_es import explain
    from kueue_es.jobframework.integrations import serving
    from kueue_es.projections.cluster import WorkloadState

    def observed(name: str, owner: models.OwnerReference, **marks: dict[str, str]) -> WorkloadState:
        meta = models.ObjectMeta(name=name, namespace="default", uid=f"uid-{name}", creation_timestamp_ms=NOW, **marks)
        pod_set = models.PodSet(name="main", count=3, requests={"cpu": 1000})
        spec = models.WorkloadSpec(pod_sets=[pod_set], queue_name="user-queue")
        return WorkloadState(workload=models.Workload(metadata=meta, spec=spec, owner=owner), observed_seq=1)

    labels, annotations = serving.statefulset_workload_marks("web", "uid-web")
    state = ClusterState()
    for wl in (
        observed(
            "pod-web-3c1a7",
            models.OwnerReference(api_version="v1", kind="Pod", name="web-0", uid="uid-web-0"),
            labels=labels,
            annotations={"kueue.x-k8s.io/is-group-workload": "true", **annotations},
        ),
        observed(
            "pytorchjob-trainer-5b2e9",
            models.OwnerReference(api_version="kubeflow.org/v1", kind="PyTorchJob", name="trainer", uid="uid-t"),
        ),
    ):
        state.workloads[wl.workload.key] = wl
    rows = {row["NAME"]: row for row in explain.list_rows(state, "workload", namespace=None, now_ms=NOW)}
    assert (rows["pod-web-3c1a7"]["JOB TYPE"], rows["pod-web-3c1a7"]["JOB NAME"]) == (
        "pod, statefulset",
        "web, web-0",
    )
    assert (rows["pytorchjob-trainer-5b2e9"]["JOB TYPE"], rows["pytorchjob-trainer-5b2e9"]["JOB NAME"]) == (
        "pytorchjob",
        "trainer",
    )


def test_explain_and_list_name_a_statefulsets_workload_by_its_statefulset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A StatefulSet's serving group is its StatefulSet's workload, as Kueue's StatefulSet reconciler makes it (owner
    reference and job-owner marks): ``explain`` finds it by the StatefulSet's name and says "for StatefulSet", not
    its first pod; ``list`` names the StatefulSet beside that pod. The workload is the real conversion of the
    StatefulSet's first pod (fast admission)."""
    [sts] = examples.load("serving-workloads/sample-statefulset.yaml")
    sts["metadata"].update(namespace="default", uid="sts-uid")
    sts["metadata"]["labels"][workloads.QUEUE_LABEL] = "a"
    for hook in emulator.KUEUE_WEBHOOKS:
        hook(resources.STATEFUL_SETS, sts)
    pod = controllers.statefulset_pod(sts, 0)
    pod["metadata"].update(uid="pod-0", creationTimestamp="2026-01-01T00:00:40Z")
    emulator.gate_queued_pods(resources.PODS, pod, lookup=lambda *_: sts)
    fact = pods.group_facts([pod])
    assert isinstance(fact, types.WorkloadObserved)
    log = _recorded()
    log.fact(fact)
    log.settle()
    path = log.write(tmp_path / "sts.jsonl")
    name = serving.statefulset_workload_name("nginx-statefulset", "sts-uid")

    code, out, err = _run(capsys, "explain", "default/nginx-statefulset", "--file", str(path), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert (report["workload"], report["owner"]) == (f"default/{name}", "StatefulSet nginx-statefulset")
    assert report["story"][0]["text"].startswith(f"Workload default/{name} for StatefulSet default/nginx-statefulset")
    code, out, _ = _run(capsys, "list", "workload", "--file", str(path), "-o", "json")
    [row] = [row for row in json.loads(out) if row["NAME"] == name]
    assert (row["JOB TYPE"], row["JOB NAME"]) == ("pod, statefulset", "nginx-statefulset, nginx-statefulset-0")


def _group_pod(name: str, created: str) -> dict[str, Any]:
    """A plain pod of pod group ``grp`` (three pods), gated as Kueue's pod webhook gates it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "labels": {workloads.QUEUE_LABEL: "a", pods.GROUP_NAME_KEY: "grp", "kueue.x-k8s.io/managed": "true"},
            "annotations": {pods.GROUP_TOTAL_COUNT_ANNOTATION: "3"},
        },
        "spec": {
            "schedulingGates": [{"name": pods.SCHEDULING_GATE}],
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}],
        },
    }


def test_list_names_every_pod_of_a_pod_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Kueue's Workload of a pod group is owned by every pod of it (pod_controller.go
    EnsureWorkloadOwnedByAllMembers), so ``kubectl kueue list workload`` names them all in JOB NAME; ``list``
    from the log names them all too (the watcher's member list), not the first pod alone. The Workload object
    the dispatcher writes carries no such annotation (its owner references say it)."""
    from kueue_es.projections.cluster import WorkloadState
    from kueue_es.services.dispatcher import status

    members = [_group_pod(f"grp-{i}", f"2026-01-01T00:00:4{i}Z") for i in (2, 0, 1)]
    fact = pods.group_facts(members)
    assert isinstance(fact, types.WorkloadObserved)
    assert fact.workload.owner is not None and fact.workload.owner.name == "grp-0"
    log = _recorded()
    log.fact(fact)
    log.settle()
    path = log.write(tmp_path / "group.jsonl")
    code, out, err = _run(capsys, "list", "workload", "--file", str(path), "-o", "json")
    assert code == 0, err
    [row] = [row for row in json.loads(out) if row["NAME"] == "grp"]
    assert (row["JOB TYPE"], row["JOB NAME"]) == ("pod", "grp-0, grp-1, grp-2")
    held = WorkloadState(workload=fact.workload, observed_seq=1)
    written = status.workload_object(held, ClusterState())
    assert models.POD_GROUP_MEMBERS_ANNOTATION not in written["metadata"].get("annotations", {})


def test_list_localqueue_counts_pending_workloads_of_a_missing_cluster_queue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A LocalQueue whose ClusterQueue does not exist still holds its pending Workload, as Kueue's queue manager
    (manager.go AddOrUpdateWorkloadWithoutLock adds it to the LocalQueue before returning for a nil ClusterQueue;
    PendingWorkloads is len(q.items)) and the LocalQueue's status count it: ``list localqueue`` says 1, not 0
    (found by a new user's trial)."""
    from kueue_es.services.dispatcher import status as dispatcher_status

    log = Recorder()
    log.manifest(flavor("default-flavor"))
    log.manifest(local_queue("orphan", "no-such-cq"))
    log.manifest(workload("waiting", queue="orphan", cpu="1", created=1))
    log.settle()
    path = log.write(tmp_path / "log.jsonl")
    code, out, _ = _run(capsys, "list", "localqueue", "-A", "--file", str(path), "-o", "json")
    assert code == 0
    rows = {row["NAME"]: row for row in json.loads(out)}
    assert rows["orphan"]["CLUSTERQUEUE"] == "no-such-cq"
    assert rows["orphan"]["PENDING WORKLOADS"] == 1
    status = dispatcher_status.local_queue_status(log.state, "default", "orphan")
    assert status["pendingWorkloads"] == rows["orphan"]["PENDING WORKLOADS"]


def test_at_a_time_before_the_log_is_a_note(
    waiting_log: tuple[Recorder, Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    """A time before the log's first message folds nothing: each reader says so, rather than only "no
    Workload" or an empty table, as a sequence past the end gets a note."""
    _, path, _ = waiting_log
    for argv in (["explain", "default/train"], ["list", "workload"], ["status"]):
        code, _, err = _run(capsys, *argv, "--file", str(path), "--at", "2001-01-01T00:00:00Z")
        assert (
            "note: --at 2001-01-01T00:00:00Z is before the log's first time (#6 at 2026-01-01T00:00:01.000Z): only"
            " the 5 messages before it, which carry no time, are folded"  # this file's objects carry none
        ) in err, (argv, err)
    code, _, err = _run(capsys, "status", "--file", str(path), "--at", "2031-01-01T00:00:00Z")
    assert code == 0 and "before the log" not in err


def test_a_priority_update_that_keeps_the_value_adds_no_story_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A what-if override of a workload's priority to the value its WorkloadPriorityClass gives (its
    priorityClassRef dropped, ``spec.priority`` the same) changes nothing: no "updated: priority 100 -> 100"."""
    log = _recorded()
    log.manifest(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 100,
        }
    )
    classed = workload("classed", queue="a", cpu="1", priority=100, created=40)
    classed["spec"]["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    log.manifest(classed)
    overridden = workload("classed", queue="a", cpu="1", priority=100, created=40)  # what-if's override: no class
    log.manifest(overridden)
    path = log.write(tmp_path / "log.jsonl")
    code, out, err = _run(capsys, "explain", "default/classed", "--file", str(path), "-o", "json")
    assert code == 0, err
    assert [line["what"] for line in json.loads(out)["story"]] == ["submitted"]
    log.manifest(workload("classed", queue="a", cpu="1", priority=150, created=40))  # a real change is told
    path = log.write(tmp_path / "log.jsonl")
    code, out, err = _run(capsys, "explain", "default/classed", "--file", str(path), "-o", "json")
    assert [line["text"] for line in json.loads(out)["story"] if line["what"] == "updated"] == ["priority 100 -> 150"]
