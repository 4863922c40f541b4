"""checkov on deploy/: every finding is fixed, or justified where it is made.

A finding is justified by a comment ``# checkov:skip=<ID>: <reason>`` inside the
YAML document of the resource it is about (or anywhere in a Dockerfile). checkov
honours such comments itself only in some frameworks (Dockerfiles, not Kubernetes
manifests), so this test reads its report and does the matching: an unjustified
finding fails, and so does a skip comment that no finding needs any more.

checkov is not installed with the project's test extra: its pins (packaging<24,
python-dateutil<3 through botocore) conflict with the project's own dependencies
(pytest 9, kubernetes 37), and a resolver run with both never ends. It lives in
its own virtual environment: ``python3 -m venv .venv-checkov &&
.venv-checkov/bin/pip install checkov`` (the CI script does this), or point
``$KUEUE_ES_CHECKOV`` at a checkov executable. Without one the test is skipped,
except under CI (``$CI`` set), where it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.manifests import DEPLOY, documents

ROOT = DEPLOY.parent
SKIP = re.compile(r"checkov:skip=([A-Z0-9_]+):\s*(\S.*)")


def checkov_binary() -> str | None:
    candidates = [os.environ.get("KUEUE_ES_CHECKOV"), shutil.which("checkov"), str(ROOT / ".venv-checkov/bin/checkov")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


@pytest.fixture(scope="module")
def report() -> list[dict[str, Any]]:
    binary = checkov_binary()
    if binary is None:
        message = "checkov not found: python3 -m venv .venv-checkov && .venv-checkov/bin/pip install checkov"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_NO_OUTPUT_COLOR": "1", "LOG_LEVEL": "ERROR"}
    result = subprocess.run(
        [binary, "-d", "deploy", "--framework", "kubernetes", "dockerfile", "-o", "json", "--skip-download"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode in (0, 1), result.stderr[-2000:]
    parsed = json.loads(result.stdout)
    reports = parsed if isinstance(parsed, list) else [parsed]
    assert {r["check_type"] for r in reports} == {"kubernetes", "dockerfile"}, result.stdout[:500]
    return reports


def finding_path(finding: dict[str, Any]) -> Path:
    """The file a finding is in: checkov's ``file_path`` is relative to the cwd for manifests and to the
    scanned directory for Dockerfiles (its ``file_abs_path`` doubles the directory for manifests)."""
    relative = finding["file_path"].lstrip("/")
    return ROOT / relative if (ROOT / relative).exists() else DEPLOY / relative


def justifications(path: Path, line_range: list[int]) -> dict[str, str]:
    """The ``checkov:skip`` comments that cover a finding in ``path`` at ``line_range``."""
    if path.suffix not in (".yaml", ".yml"):
        return dict(SKIP.findall(path.read_text()))
    first, last = line_range
    for doc in documents(path):
        if doc.first_line <= last and first <= doc.last_line:
            return dict(SKIP.findall(doc.text))
    return {}


def test_every_finding_is_justified_in_the_manifest(report: list[dict[str, Any]]) -> None:
    unjustified = []
    for result in report:
        assert result["summary"]["parsing_errors"] == 0
        for finding in result["results"]["failed_checks"]:
            path = finding_path(finding)
            if finding["check_id"] not in justifications(path, finding["file_line_range"]):
                unjustified.append(
                    f"{finding['check_id']} {finding['resource']} ({path.relative_to(ROOT)}): {finding['check_name']}"
                )
    assert unjustified == []


def test_no_skip_comment_outlives_its_finding(report: list[dict[str, Any]]) -> None:
    """Each justification still answers a finding (checkov also counts the Dockerfile ones as skipped)."""
    found = {
        (str(finding_path(f)), f["check_id"])
        for result in report
        for f in [*result["results"]["failed_checks"], *result["results"].get("skipped_checks", [])]
    }
    stale = []
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file()):
        for check_id, _reason in SKIP.findall(path.read_text()):
            if (str(path), check_id) not in found:
                stale.append(f"{path.relative_to(ROOT)}: {check_id}")
    assert stale == []


def test_the_scan_covers_the_manifests(report: list[dict[str, Any]]) -> None:
    kubernetes = next(r for r in report if r["check_type"] == "kubernetes")
    assert kubernetes["summary"]["resource_count"] >= 40
    assert kubernetes["summary"]["passed"] > 500
