"""``kueue-es bench --partitions N`` (issue 18, point 3): N admitter processes share the partitions."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kueue_es.cli import main
from tests.bench.configs import TINY

TWO_TREES = TINY.replace("count: 1\n    queuesSets", "count: 2\n    queuesSets", 1)  # two cohorts: two partitions


@pytest.mark.slow
def test_two_admitter_processes_share_two_cohort_trees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "generator.yaml"
    config.write_text(TWO_TREES)
    out = tmp_path / "bench.yaml"
    run = tmp_path / "run"
    args = ["bench", "--config", str(config), "--dir", str(run), "--output", str(out), "--no-progress"]
    assert main([*args, "--partitions", "2"]) == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["complete"] is True and doc["timing"]["finished"] == 8  # every workload of both trees
    deciders = doc["deciders"]
    assert deciders["partitions"] == 2
    assert {"admitter", "admitter-2", "preemptor", "tas-placer"} <= set(deciders["processes"])
    assert "preemptor-2" not in deciders["processes"]  # one of each other service
    assert {"admitter", "admitter-2"} <= set(doc["memory"]["processes"])  # each one's CPU s and RSS
    commits = sum(deciders["processes"][n]["commits"] for n in ("admitter", "admitter-2"))
    assert commits >= 2  # both trees decided (by one admitter or both, as the slots fell)
    committed = [
        line for d in ("", "replica-2") for line in (run / "logs" / d / "admitter.log").read_text().splitlines()
    ]
    assert {p for p in ("c-co-0", "c-co-1") if any(f'"partition": "{p}"' in line for line in committed)} == {
        "c-co-0",
        "c-co-1",
    }
    assert "admitter processes sharing the partitions" in capsys.readouterr().out
