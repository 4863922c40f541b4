"""``kueue-es demo --crds PATH`` and ``up --emulator --crds PATH``: CRD files are checked before anything starts;
and ``up``'s other emulator-only option, ``--duration``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kueue_es import cli


def test_a_crd_path_that_is_not_there_or_not_a_crd_stops_demo_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["demo", "--crds", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --crds:") and "missing.yaml" in err
    job = tmp_path / "job.yaml"
    job.write_text("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\n")
    assert cli.main(["demo", "--crds", str(job)]) == 2
    assert "is not a CustomResourceDefinition" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a.b}\n"
        "spec: {group: example.com, scope: Namespaced, names: {plural: widgets, kind: Widget}, versions: []}\n"
    )
    assert cli.main(["demo", "--crds", str(bad)]) == 2
    assert 'metadata.name: Invalid value: "a.b"' in capsys.readouterr().err


def test_up_takes_crds_only_with_the_emulator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crds = Path(__file__).resolve().parents[1] / "fixtures" / "crds" / "workload.codeflare.dev_appwrappers.yaml"
    assert cli.main(["up", "--kube-server", "http://127.0.0.1:1", "--dir", str(tmp_path), "--crds", str(crds)]) == 2
    assert "--crds installs CRDs on the emulator" in capsys.readouterr().err


def test_up_takes_a_kubelet_duration_only_with_the_emulator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--duration`` is the emulator's simulated kubelet's (as the demo's): refused against a cluster, and
    refused negative, before anything starts."""
    assert cli.main(["up", "--kube-server", "http://127.0.0.1:1", "--dir", str(tmp_path), "--duration", "5"]) == 2
    assert "--duration is how long the emulator's simulated kubelet runs a Job: give --emulator" in (
        capsys.readouterr().err
    )
    assert cli.main(["up", "--emulator", "--dir", str(tmp_path), "--duration", "-1"]) == 2
    assert "--duration must be 0 or more seconds, not -1" in capsys.readouterr().err
