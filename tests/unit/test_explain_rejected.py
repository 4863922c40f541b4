"""``kueue-es explain`` of a job the log refused, so that it has no Workload (found by a new user's trial).

A Job labelled ``kueue.x-k8s.io/priority-class: no-such-wpc`` gets no Workload: the watcher logs an
ObjectRejected saying why. ``explain default/wpc-job`` said only "the log names no Workload ..." and exited
1; it tells the rejection (field, problem), whether it still stands, and exits 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kueue_es import cli, logfile, logsource
from kueue_es.events import manifests, subjects, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue

T0 = manifests.parse_time_ms("2026-01-01T00:00:00Z")
FIELD = "metadata.labels[kueue.x-k8s.io/priority-class]"
PROBLEM = 'WorkloadPriorityClass "no-such-wpc" not found'
REJECTED = types.ObjectRejected(
    kind="Job", namespace="default", name="wpc-job", field=FIELD, problem=PROBLEM, at_ms=T0 + 5_000
)
GONE = types.ObjectDeleted(kind="Job", namespace="default", name="wpc-job", reason=types.REJECTED_OBJECT_GONE)


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # lines whole, for the assertions


def _write(path: Path, *extra: types.Fact) -> Path:
    events: list[types.Fact] = [
        kueue_fact(flavor("default")),
        kueue_fact(cluster_queue("cq", flavors={"default": {"cpu": 4}})),
        kueue_fact(local_queue("lq", "cq")),
        *extra,
    ]
    messages = []
    for seq, event in enumerate(events, start=1):
        out = subjects.fact_message(event)
        headers = {**out.headers, "Nats-Msg-Id": out.msg_id}
        messages.append(LogMessage(seq=seq, subject=out.subject, data=out.data, headers=headers, time_ms=T0 + seq))
    logfile.write_lines(path, messages)
    return path


def _explain(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["explain", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_refused_job_is_explained_by_its_rejection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "log.jsonl", REJECTED)
    code, out, err = _explain(capsys, "default/wpc-job", "--file", str(path))
    assert code == 0, err
    assert "Job default/wpc-job: rejected, no Workload" in out
    assert f"field {FIELD}: {PROBLEM}" in out  # no rich markup eats [kueue.x-k8s.io/...]
    assert "the rejection still stands" in out and "kueue-es made no Workload" in out
    code, out, err = _explain(capsys, "wpc-job", "--file", str(path), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert (report["workload"], report["status"]) == (None, "rejected")
    [job] = report["rejections"]
    assert (job["kind"], job["field"], job["problem"], job["stillStands"]) == ("Job", FIELD, PROBLEM, True)
    assert [(line["seq"], line["what"], line["time"]) for line in job["story"]] == [
        (4, "rejected", logsource.rfc3339(T0 + 5_000))
    ]


def test_a_refused_job_deleted_since_no_longer_stands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "log.jsonl", REJECTED, GONE)
    code, out, err = _explain(capsys, "default/wpc-job", "--file", str(path), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["status"] == "deleted"
    [job] = report["rejections"]
    assert (job["stillStands"], job["deleted"]) == (False, True)
    assert [line["what"] for line in job["story"]] == ["rejected", "deleted"]
    code, out, _ = _explain(capsys, "default/wpc-job", "--file", str(path))
    assert code == 0 and "the rejection no longer stands: Job default/wpc-job was deleted" in out
    code, out, _ = _explain(capsys, "default/wpc-job", "--file", str(path), "--at", "4", "-o", "json")
    assert code == 0 and json.loads(out)["status"] == "rejected"  # as of then, it still stood


def test_a_name_with_neither_workload_nor_rejection_is_still_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "log.jsonl", REJECTED)
    code, _, err = _explain(capsys, "default/other-job", "--file", str(path))
    assert code == 1 and "the log names no Workload default/other-job" in err
    code, _, err = _explain(capsys, "default/wpc-job", "--file", str(path), "--at", "3")
    assert code == 1 and "the log names no Workload default/wpc-job" in err
