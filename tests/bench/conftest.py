"""The bench tests run ``kueue-es`` commands in-process, which configure structlog for the
whole process: put structlog back as it was after each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _structlog_restored() -> Iterator[None]:
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
    structlog.contextvars.clear_contextvars()
