"""Fixtures every test gets: each test starts with structlog as the previous one found it.

A command run in-process (``kueue_es.cli.main``) configures structlog and binds its
``service`` name in the context; without this, that would leak into every later test's
logs, and a later ``capture_logs`` would see another configuration.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _structlog_restored() -> Iterator[None]:
    config = structlog.get_config()
    context = structlog.contextvars.get_contextvars()
    yield
    structlog.configure(**config)
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(**context)
