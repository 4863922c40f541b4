"""`kueue-es bench --dir DIR` refuses a directory whose nats store holds an earlier run's log.

Run twice into one directory, the second run's workloads (same names, same Msg-Ids) were
dropped by JetStream as duplicates and the table mixed both runs: negative times to
admission, and a stall with hundreds of workloads "not done".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import cli
from kueue_es.perfbench import driver

LARGE_SCALE = Path(__file__).resolve().parents[2].parent / "shared" / "perf" / "large-scale" / "generator.yaml"


def test_a_run_dir_with_a_used_nats_store_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "nats" / "jetstream"
    store.mkdir(parents=True)
    (store / "meta.inf").write_text("{}")
    code = cli.main(["bench", "--config", str(LARGE_SCALE), "--dir", str(tmp_path), "--no-progress"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"--dir {tmp_path}" in err and "earlier run's log" in err
    assert not (tmp_path / "logs").exists()  # nothing started, nothing written


def test_a_new_or_empty_run_dir_is_taken(tmp_path: Path) -> None:
    driver.refuse_used_run_dir(tmp_path / "new")
    (tmp_path / "nats").mkdir()
    driver.refuse_used_run_dir(tmp_path)
    (tmp_path / "nats" / "jetstream").mkdir()
    with pytest.raises(ValueError, match="earlier run's log"):
        driver.refuse_used_run_dir(tmp_path)


def test_the_harness_gives_the_collector_back_as_it_found_it(tmp_path: Path) -> None:
    """The bench harness runs with the services' collector policy (services/collector.py) and undoes it
    when the run ends, here at a generator file it refuses: a caller that goes on in the same process
    (a test run) must not keep a raised threshold and frozen objects, which hide referrers from
    ``gc.get_referrers`` (Hypothesis warned so, and a property test failed after a bench test)."""
    import gc

    from kueue_es.services import collector

    bad = tmp_path / "generator.yaml"
    bad.write_text("not: a generator\n")
    before = gc.get_threshold()
    code = cli.main(["bench", "--config", str(bad), "--dir", str(tmp_path / "run"), "--no-progress"])
    assert code == 2
    assert gc.get_threshold() == before != (collector.YOUNG_THRESHOLD, *before[1:])
    assert gc.get_freeze_count() == 0
    assert collector.stats() == (0, 0)
