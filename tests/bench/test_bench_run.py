"""``kueue-es bench --config``, end to end on a tiny configuration: nats-server and the services as processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_es.cli import main
from kueue_es.perfbench import driver, ideal
from tests.bench.configs import TINY


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_tiny_run_reports_kueues_figures_and_exits_1_out_of_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the order of the harness's CPU samples and the ideal bound: only the report needs the bound, so
    # it is worked out after the last sample (its CPU is not the run's, issue 18)
    order: list[str] = []
    sample, bound = driver._Sampler.sample, ideal.ideal_bound

    def sampled(self: driver._Sampler) -> None:
        order.append("sample")
        sample(self)

    def bounded(*args: Any, **kwargs: Any) -> ideal.IdealResult:
        order.append("ideal")
        return bound(*args, **kwargs)

    monkeypatch.setattr(driver._Sampler, "sample", sampled)
    monkeypatch.setattr(ideal, "ideal_bound", bounded)
    config = tmp_path / "generator.yaml"
    config.write_text(TINY)
    spec = tmp_path / "rangespec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "cmd": {"maxWallMs": 1},  # out of range: exit 1, figures written all the same
                "clusterQueueClassesMinUsage": {"q": 0},
                "wlClassesMaxAvgTimeToAdmissionMs": {"small": 60_000, "big": 60_000},
            }
        )
    )
    out = tmp_path / "bench.yaml"
    code = main(
        [
            "bench",
            "--config",
            str(config),
            "--dir",
            str(tmp_path / "run"),
            "--output",
            str(out),
            "--no-progress",
            "--check",
            str(spec),
        ]
    )
    assert code == 1
    doc = yaml.safe_load(out.read_text())
    assert doc["complete"] is True
    classes = doc["summary"]["workloadClasses"]
    assert {k: v["count"] for k, v in classes.items()} == {"small": 3, "big": 1}
    assert doc["timing"]["finished"] == 4
    # the big one (2 CPU, priority 9) cannot start before two smalls finished: at least 1 s after the second small
    assert classes["big"]["averageTimeToAdmissionMs"] >= 1_000 - 250 + 200
    assert 0 < doc["usagePercent"]["q"] <= 100
    assert doc["cmdStats"]["wallMs"] >= doc["timing"]["workloadWallMs"] >= doc["ideal"]["makespanMs"] - 100
    assert doc["ideal"]["makespanMs"] == 2_600
    assert order[0] == "sample" and order[-1] == "ideal" and order.count("ideal") == 1
    assert set(doc["memory"]["processes"]) == {
        "nats-server",
        "bench harness",
        "admitter",
        "preemptor",
        "tas-placer",
        "dispatcher",
    }
    assert all(p["peakRssMiB"] > 0 for p in doc["memory"]["processes"].values())
    assert doc["deciders"]["replicas"] == 1 and doc["deciders"]["standbyLease"] is True
    assert set(doc["deciders"]["processes"]) == {"admitter", "preemptor", "tas-placer"}
    assert doc["deciders"]["processes"]["admitter"]["commits"] >= 4  # a lone replica holds its lease
    assert yaml.safe_load((tmp_path / "summary.yaml").read_text()) == doc["summary"]  # Kueue's checker input
    assert doc["compactor"] is None  # only a chaos run (or --compact) runs one
    assert (tmp_path / "run" / "logs" / "bench.log").is_file()  # the harness logs beside the services


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_two_replicas_of_each_decider_one_commits(tmp_path: Path) -> None:
    """``--replicas 2``: every workload finishes; of each decider's two processes one holds the standby lease."""
    config = tmp_path / "generator.yaml"
    config.write_text(TINY)
    out = tmp_path / "bench.yaml"
    run = tmp_path / "run"
    args = ["bench", "--config", str(config), "--dir", str(run), "--output", str(out), "--no-progress"]
    assert main([*args, "--replicas", "2"]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["complete"] is True and doc["timing"]["finished"] == 4
    deciders = doc["deciders"]
    assert deciders["replicas"] == 2
    assert set(deciders["processes"]) == {
        f"{n}{s}" for n in ("admitter", "preemptor", "tas-placer") for s in ("", "-2")
    }
    admitters = [deciders["processes"][n]["commits"] for n in ("admitter", "admitter-2")]
    assert sum(admitters) >= 4
    for name in ("admitter", "preemptor", "tas-placer"):
        held = [(run / "logs" / d / f"{name}.log").read_text().count('"lease_acquired"') for d in ("", "replica-2")]
        assert sum(held) >= 1, (name, held)  # one replica took the lease (more only after a takeover)
    assert "admitter-2" in doc["memory"]["processes"]


def test_a_bad_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "generator.yaml"
    config.write_text(TINY.replace("nominalQuota: 2", "nominalQuota: two"))
    assert main(["bench", "--config", str(config), "--no-progress"]) == 2
    assert "nominalQuota" in capsys.readouterr().err


def test_bench_core_is_still_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "core", "--cohorts", "1", "--queues", "2", "--scale", "0.1"]) == 0
    assert "decisions/s" in capsys.readouterr().out


def test_bench_without_config_or_subcommand_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench"]) == 2
    assert "--config" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_run_that_can_never_finish_stops_as_stalled_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The big workload asks for 3 CPUs of a 2-CPU queue: once the smalls finished, nothing runs and
    the log stops growing; the run ends after --stall-timeout, not at --timeout, naming the workload."""
    config = tmp_path / "generator.yaml"
    config.write_text(TINY.replace("request: 2}", "request: 3}"))
    out = tmp_path / "bench.yaml"
    code = main(
        ["bench", "--config", str(config), "--dir", str(tmp_path / "run"), "--output", str(out), "--no-progress"]
        + ["--stall-timeout", "3"]
    )
    assert code == 1
    doc = yaml.safe_load(out.read_text())
    assert doc["complete"] is False
    assert doc["timing"]["finished"] == 3
    [line] = doc["unfinished"]
    assert "pending, 0 evictions; latest decision #" in line
    assert "WorkloadInadmissible" in line and "insufficient" in line and "cpu" in line
    printed = capsys.readouterr().err  # the run's own messages go to stderr, the table to stdout
    assert "stalled" in printed and line.split(":")[0] in printed
