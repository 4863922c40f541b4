"""``kueue-es bench fold``: a log file folded as every service folds it, timed (issue 18, point 2).

No timing is asserted (the machine is shared): what the bench folds is checked instead, against the
services' own fold (``runtime.fold_message``) of the same file, and the command's exits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import checkpoints
from kueue_es.bench import core_log, run_fold_bench
from kueue_es.cli import main
from kueue_es.logfile import read_lines, write_lines
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.runtime import fold_message


@pytest.fixture(scope="module")
def log_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fold") / "log.jsonl"
    write_lines(path, core_log(events=3_000, cohorts=2, queues_per_cohort=5, scale=0.5))
    return path


def test_every_run_folds_the_whole_file_to_the_state_the_services_reach(log_file: Path) -> None:
    state = ClusterState()
    count = 0
    for message in read_lines(log_file):
        fold_message(state, message)
        count += 1
    result = run_fold_bench(log_file, runs=2)
    assert result.messages == count
    assert len(result.cpu_seconds) == len(result.wall_seconds) == 2
    assert result.digests == [checkpoints.state_digest(state)] * 2
    assert state.admit_cycles > 0 and state.metrics.counters  # decisions and Kueue's metrics were folded
    assert result.cpu_seconds_per_1000 == pytest.approx(result.cpu_median * 1000 / count)


def test_the_command_prints_the_medians_and_the_digest(log_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "fold", "--file", str(log_file), "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "messages/s" in out and "CPU s per 1,000 messages" in out
    assert "state digest: " in out and "runs differ" not in out


def test_a_missing_file_or_no_run_is_refused(
    tmp_path: Path, log_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "fold", "--file", str(tmp_path / "none.jsonl")]) == 2
    assert "no log file" in capsys.readouterr().err
    assert main(["bench", "fold", "--file", str(log_file), "--runs", "0"]) == 2
    assert "at least one run" in capsys.readouterr().err
