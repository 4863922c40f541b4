"""The dispatcher's write rate limit (services/dispatcher/kube_api.py WriteLimiter): client-go's QPS and burst.

N writes at QPS q with burst b take at least (N - b) / q seconds, and the first b
go at once; the limit comes from serve_dispatcher's arguments or the environment.
That every dispatcher write takes a token is checked end to end in
test_workload_objects.py (test_every_write_waits_for_the_rate_limiter).
"""

from __future__ import annotations

import asyncio

import pytest

from kueue_es.services.dispatcher.kube_api import (
    BURST_ENV,
    DEFAULT_BURST,
    DEFAULT_QPS,
    QPS_ENV,
    WriteLimiter,
    limiter_from_env,
)

pytestmark = pytest.mark.timeout(20)


async def timed_writes(limiter: WriteLimiter, count: int) -> list[float]:
    """Take ``count`` tokens one after the other; the seconds since the start at which each was granted."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    granted = []
    for _ in range(count):
        await limiter.acquire()
        granted.append(loop.time() - start)
    return granted


@pytest.mark.parametrize(("writes", "qps", "burst"), [(15, 50.0, 5), (12, 40.0, 1), (6, 100.0, 6)])
async def test_n_writes_take_at_least_n_minus_burst_over_qps(writes: int, qps: float, burst: int) -> None:
    """The first ``burst`` writes go at once; write k (from 0) waits until (k - burst + 1) / qps; all N take at least
    (N - burst) / qps seconds, and not much more."""
    limiter = WriteLimiter(qps=qps, burst=burst)
    granted = await timed_writes(limiter, writes)

    assert limiter.writes == writes
    assert granted[burst - 1] < 0.05
    for k, at in enumerate(granted):
        assert at >= (k - burst + 1) / qps - 0.002, (k, at)
    floor = (writes - burst) / qps
    assert floor - 0.002 <= granted[-1] < floor + 0.25


async def test_concurrent_writers_share_one_bucket() -> None:
    """Three tasks writing at once through one limiter (QPS 30, burst 3) together still wait: 12 writes >= 0.3 s."""
    limiter = WriteLimiter(qps=30, burst=3)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.gather(*(timed_writes(limiter, 4) for _ in range(3)))
    assert loop.time() - start >= (12 - 3) / 30 - 0.002
    assert limiter.writes == 12


def test_configuration_from_arguments_then_environment_then_kueue_defaults() -> None:
    """Explicit qps/burst win; else KUEUE_ES_DISPATCHER_QPS/BURST; else Kueue's client defaults (50, 100)."""
    default = limiter_from_env({})
    assert (default.qps, default.burst) == (DEFAULT_QPS, DEFAULT_BURST) == (50.0, 100)
    from_env = limiter_from_env({QPS_ENV: "2.5", BURST_ENV: "4"})
    assert (from_env.qps, from_env.burst) == (2.5, 4)
    explicit = limiter_from_env({QPS_ENV: "2.5", BURST_ENV: "4"}, qps=10, burst=20)
    assert (explicit.qps, explicit.burst) == (10, 20)


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        ({QPS_ENV: "fast"}, "KUEUE_ES_DISPATCHER_QPS='fast' is not a valid float"),
        ({BURST_ENV: "1.5"}, "KUEUE_ES_DISPATCHER_BURST='1.5' is not a valid int"),
        ({QPS_ENV: "0"}, "needs qps > 0 and burst >= 1"),
        ({BURST_ENV: "0"}, "needs qps > 0 and burst >= 1"),
    ],
)
def test_bad_configuration_is_refused(environ: dict[str, str], problem: str) -> None:
    """A limit that is not a number, or not positive, is a ValueError naming it."""
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        limiter_from_env(environ)
