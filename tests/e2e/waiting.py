"""Waiting in the end-to-end tests: read until a condition holds, and say what was last seen when it never does."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


async def eventually(
    read: Callable[[], Awaitable[Any]],
    check: Callable[[Any], bool] = bool,
    *,
    what: str,
    timeout: float = 60,
    interval: float = 0.2,
    shown: Callable[[Any], Any] = lambda value: value,
) -> Any:
    """Call ``read`` until ``check`` holds for its value (``timeout`` seconds at most, every ``interval``) and
    return that value; raises AssertionError naming ``what`` and the last value read (as ``shown`` gives it: a
    long value's gist)."""
    last: Any = None
    try:
        async with asyncio.timeout(timeout):
            while True:
                last = await read()
                if check(last):
                    return last
                await asyncio.sleep(interval)
    except TimeoutError:
        raise AssertionError(f"{what}: never, last seen {shown(last)!r}") from None
