"""No structlog call passes a keyword its own signature takes.

``log.warning("name", event=...)`` raises TypeError (``event`` is the message argument), so the log line
meant to report a failure crashes the service instead: the dispatcher died on the first Event it could
not write (an Event about a namespace that was gone). This reads every source file of the project.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("kueue_es", "services", "events", "projections", "jobframework", "deploy", "scripts", "tests")
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "msg", "fatal"}
RESERVED = {"event"}  # the first parameter of every structlog bound-logger method


def _calls_with_reserved_keywords(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr in LOG_METHODS and node.args:  # a message given positionally and again by keyword
            found += [f"{path.relative_to(ROOT)}:{node.lineno}" for k in node.keywords if k.arg in RESERVED]
    return found


def test_no_log_call_passes_event_as_a_keyword() -> None:
    files = [p for top in SOURCES if (ROOT / top).is_dir() for p in (ROOT / top).rglob("*.py")]
    assert len(files) > 300, "the scan reads the project's sources"
    offending = [hit for path in files for hit in _calls_with_reserved_keywords(path)]
    assert offending == []


def test_the_scan_finds_the_fault_it_exists_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text('log.warning("event_write_failed", event="ns/name", error="404")\n')
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert _calls_with_reserved_keywords(bad) == ["bad.py:1"]
    finally:
        ROOT = saved
