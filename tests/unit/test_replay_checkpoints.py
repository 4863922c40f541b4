"""Checkpoints (a cache of the fold beside the log), --from/--to and --jobs (issue 13, finding 6).

Small logs (a few thousand messages) from ``kueue_es.bench.core_log``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import checkpoints
from kueue_es.bench import core_log
from kueue_es.cli import main
from kueue_es.logfile import write_lines


@pytest.fixture(scope="module")
def log_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("log") / "log.jsonl"
    write_lines(path, core_log(events=4_000, cohorts=2, queues_per_cohort=5, scale=0.5))
    return path


def replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["replay", *args])
    return code, capsys.readouterr().out


def test_checkpoints_are_written_beside_the_log_named_by_position_and_code(
    log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "ck"
    code, out = replay(
        capsys,
        "--file",
        str(log_file),
        "--write-checkpoints",
        "--checkpoint-every",
        "1000",
        "--checkpoints",
        str(directory),
    )
    assert code == 0, out
    found = checkpoints.find(directory)
    assert [c.seq for c in found][:3] == [1000, 2000, 3000]
    assert all(c.path.name.endswith(f"-{checkpoints.code_tag()}{checkpoints.SUFFIX}") for c in found)
    assert checkpoints.default_dir(log_file) == log_file.parent / "log.jsonl.checkpoints"


def test_jobs_and_ranges_from_checkpoints_agree_with_a_full_replay(
    log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "ck"
    replay(
        capsys,
        "--file",
        str(log_file),
        "--write-checkpoints",
        "--checkpoint-every",
        "1000",
        "--checkpoints",
        str(directory),
    )
    code, full = replay(capsys, "--file", str(log_file))
    assert code == 0
    code, parallel = replay(capsys, "--file", str(log_file), "--jobs", "2", "--checkpoints", str(directory))
    assert code == 0
    assert parallel.splitlines()[0] == full.splitlines()[0]  # every decision re-checked, in two processes
    code, ranged = replay(
        capsys, "--file", str(log_file), "--from", "2500", "--to", "3500", "--checkpoints", str(directory)
    )
    assert code == 0
    assert "outside --from/--to were not re-run" in ranged


def test_a_changed_checkpoint_is_found_by_verify(
    log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "ck"
    replay(
        capsys,
        "--file",
        str(log_file),
        "--write-checkpoints",
        "--checkpoint-every",
        "2000",
        "--checkpoints",
        str(directory),
    )
    code, out = replay(capsys, "--file", str(log_file), "--verify-checkpoints", "--checkpoints", str(directory))
    assert code == 0 and "checkpoints verified against a fresh fold" in out
    first = checkpoints.find(directory)[0]
    state = checkpoints.load(first)
    state.usage.setdefault("cq-0-cohort-0", {}).setdefault("rf", {})["cpu"] = 123
    checkpoints.write(directory, first.seq, state)
    code, out = replay(capsys, "--file", str(log_file), "--verify-checkpoints", "--checkpoints", str(directory))
    assert code == 1
    assert f"checkpoints that differ from a fresh fold: #{first.seq}" in out


def test_a_checkpoint_of_other_code_is_not_used(tmp_path: Path) -> None:
    (tmp_path / "000000001000-0.0.1-abcdef.ckpt").write_bytes(b"not a state")
    assert checkpoints.find(tmp_path) == []


def test_a_refused_checkpoint_is_reported_and_replay_folds_from_an_older_one(
    log_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "ck"
    replay(
        capsys,
        "--file",
        str(log_file),
        "--write-checkpoints",
        "--checkpoint-every",
        "1000",
        "--checkpoints",
        str(directory),
    )
    found = checkpoints.find(directory)
    found[2].path.write_bytes(b"\x80\x05 a pickle, say")
    code = main(["replay", "--file", str(log_file), "--from", "3100", "--checkpoints", str(directory)])
    out, err = capsys.readouterr()
    assert code == 0, out
    assert f"checkpoint refused: {found[2].path}: header" in err
    assert f"folding from checkpoint #{found[1].seq} instead" in err
    code = main(["replay", "--file", str(log_file), "--verify-checkpoints", "--checkpoints", str(directory)])
    out, err = capsys.readouterr()
    assert code == 1 and f"checkpoints that differ from a fresh fold: #{found[2].seq}" in out
    assert str(found[2].path) in err
