"""The time JetStream stored a message stands for an event that carries none (found by a new user's trial).

An ObjectDeleted, an object observed or a dispatch result has no time of its own. ``explain`` showed such a
step at the previous event's time (``#39 ~09:19:39.210Z deleted`` for a Workload deleted 23 s later), and
``--at TIME`` folded it whatever its time, so ``explain W --at T`` called a workload deleted that was
deleted after T. Every message has its stored time (``LogMessage.time_ms``, Nats-Time-Stamp): the tools
take it, and the log file keeps it (``timeMs``); replay and the folds never read it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kueue_es import cli, logfile, logsource
from kueue_es.events import manifests, subjects, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.scheduling import explain as core
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload

T0 = manifests.parse_time_ms("2026-01-01T00:00:00Z")
FINISHED = T0 + 10_000
DELETED = T0 + 33_000  # stored 23 s after the finish


def _log(*, stored: bool) -> list[LogMessage]:
    """A Workload created at T0 + 1 s, finished at T0 + 10 s (its own atMs), deleted (an ObjectDeleted
    stored at T0 + 33 s; with ``stored`` False, a log that does not know when its messages were stored)."""
    ref = types.WorkloadRef(namespace="default", name="w", uid="uid-w")
    timed: list[tuple[int, types.Fact]] = [
        (T0, kueue_fact(flavor("default"))),
        (T0, kueue_fact(cluster_queue("cq", flavors={"default": {"cpu": 4}}))),
        (T0, kueue_fact(local_queue("lq", "cq"))),
        (T0 + 1_000, kueue_fact(workload("w", created=1, cpu="1"))),
        (FINISHED, types.WorkloadFinished(workload=ref, at_ms=FINISHED)),
        (DELETED, types.ObjectDeleted(kind="Workload", namespace="default", name="w", uid="uid-w")),
    ]
    out = []
    for seq, (at, event) in enumerate(timed, start=1):
        message = subjects.fact_message(event)
        out.append(
            LogMessage(
                seq=seq,
                subject=message.subject,
                data=message.data,
                headers={**message.headers, "Nats-Msg-Id": message.msg_id},
                time_ms=at if stored else 0,
            )
        )
    return out


def _explain(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> dict:
    assert cli.main(["explain", "default/w", "--file", str(path), "-o", "json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_log_file_keeps_each_messages_stored_time(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    logfile.write_lines(path, _log(stored=True))
    assert [m.time_ms for m in logfile.read_lines(path)] == [m.time_ms for m in _log(stored=True)]
    logfile.write_lines(path, _log(stored=False))
    assert b"timeMs" not in path.read_bytes()  # left out when not known: such a file is as before


def test_an_untimed_event_takes_its_messages_stored_time() -> None:
    deletion = _log(stored=True)[-1]
    event = types.ObjectDeleted(kind="Workload", namespace="default", name="w", uid="uid-w")
    assert logsource.event_time(event) == 0
    assert logsource.message_time(deletion, event) == DELETED
    finish = _log(stored=True)[4]
    assert (
        logsource.message_time(
            finish, types.WorkloadFinished(workload=types.WorkloadRef(namespace="d", name="w"), at_ms=5)
        )
        == 5
    )


def test_at_a_time_before_the_deletion_was_stored_the_workload_is_not_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "log.jsonl"
    logfile.write_lines(path, _log(stored=True))
    before = _explain(capsys, path, "--at", logsource.rfc3339(FINISHED + 10_000))
    assert before["status"] == "finished"
    assert [line["what"] for line in before["story"]][-1] != "deleted"
    assert before["asOf"]["seq"] == 5
    after = _explain(capsys, path, "--at", logsource.rfc3339(DELETED))
    assert after["status"] == "deleted" and after["asOf"]["seq"] == 6


def test_the_story_shows_a_deletion_at_its_stored_time_marked_approximate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "log.jsonl"
    logfile.write_lines(path, _log(stored=True))
    deleted = _explain(capsys, path)["story"][-1]
    assert deleted["what"] == "deleted"
    assert (deleted["time"], deleted["approximateTime"]) == (logsource.rfc3339(DELETED), True)
    assert cli.main(["explain", "default/w", "--file", str(path)]) == 0
    assert f"~{logsource.rfc3339(DELETED)}" in capsys.readouterr().out


def test_without_stored_times_the_latest_time_before_stands_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "log.jsonl"
    logfile.write_lines(path, _log(stored=False))
    deleted = _explain(capsys, path)["story"][-1]
    assert (deleted["what"], deleted["time"], deleted["approximateTime"]) == (
        "deleted",
        logsource.rfc3339(FINISHED),
        True,
    )


def test_the_story_collector_takes_the_stored_time_it_is_told() -> None:
    collector = core.StoryCollector(namespace="default", name="w")
    folder = logsource.Folder(observer=collector.observe, on_message=lambda m: collector.stored_at(m.time_ms))
    logsource.fold_messages(iter(_log(stored=True)), folder)
    last = collector.lines["default/w"][-1]
    assert (last.what, last.time_ms, last.approximate) == ("deleted", DELETED, True)
    assert folder.last_ms == DELETED
