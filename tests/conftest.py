"""Fixtures every test gets: each test ends with structlog as the test session found it.

A command run in-process (``kueue_es.cli.main``, a service's runner) configures structlog
(a WARNING filter, JSON on stderr) and binds its ``service`` name in the context. Such a
call may come from a module-scoped fixture, before any per-test snapshot could be taken,
so the state restored after every test is the session's first one. No test caches
loggers: a module-level logger cached on first use would keep that moment's processors,
and a later ``capture_logs`` would see nothing from its module.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

# A demo or up started by a test records itself (kueue_es.current) where a user's own running demo is
# recorded: every test, and every process it starts, records in a directory of the session's instead.
os.environ["KUEUE_ES_STATE_DIR"] = tempfile.mkdtemp(prefix="kueue-es-test-state-")
os.environ.pop("KUEUE_ES_CURRENT", None)
# Bytecode caches are written even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on some CI
# machines): the tests start hundreds of service processes, and without the caches each one compiles the
# project's modules again (about a second of CPU each; a bus-engine scenario took 8 s instead of 5.6 s).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
# A terminal width from the environment (a user's shell; pytest-xdist's workers get COLUMNS=80) would wrap
# the console output tests read (kueue-es explain, tables): a test that wants a width sets its own.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)

_configure = structlog.configure
_SESSION_CONFIG = {**structlog.get_config(), "cache_logger_on_first_use": False}
_SESSION_CONFIG["processors"] = list(_SESSION_CONFIG["processors"])
_SESSION_CONTEXT = structlog.contextvars.get_contextvars()


def _configure_without_cache(**settings: Any) -> None:
    _configure(**{**settings, "cache_logger_on_first_use": False})


def _restore() -> None:
    _configure(**{**_SESSION_CONFIG, "processors": list(_SESSION_CONFIG["processors"])})
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(**_SESSION_CONTEXT)


@pytest.fixture(autouse=True)
def _structlog_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(structlog, "configure", _configure_without_cache)
    yield
    _restore()


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Each test ends with the environment it started with: code run in-process (``kueue_es.cli.main``
    exports the NATS user it connects as, for the processes it starts) must not reach the next test, which
    would then connect as a service user instead of creating the streams it expects."""
    before = dict(os.environ)
    yield
    if os.environ != before:
        os.environ.clear()
        os.environ.update(before)
