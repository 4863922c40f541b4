"""The dispatcher's prioritised write budget and queue status coalescing (services/dispatcher/write_budget.py,
kube_api.WriteLimiter), on an injected clock: no sleeps, every time is a number the test sets.

Job writes come first, Workload writes next, queue status last; each class has its share of
the QPS and burst and may use what the others leave unused, but a backlog of a lower class
never takes a token a higher class could use. Queue status is a dirty set keyed by object:
at most one write per object per interval.
"""

from __future__ import annotations

import asyncio

import pytest

from kueue_es.services.dispatcher.kube_api import SHARES_ENV, WriteLimiter, limiter_from_env
from kueue_es.services.dispatcher.write_budget import (
    DEFAULT_SHARES,
    Coalescer,
    WriteBudget,
    WriteClass,
    parse_shares,
)

JOBS, WORKLOADS, QUEUES = WriteClass.JOBS, WriteClass.WORKLOADS, WriteClass.QUEUES
STEP = 0.01  # seconds between two looks of a saturated writer


def drain(budget: WriteBudget, cls: WriteClass, now: float, *, waiting: frozenset[WriteClass] = frozenset()) -> int:
    """Take every token ``cls`` can have at ``now``; how many."""
    taken = 0
    while budget.take(cls, now, waiting=waiting) is not None:
        taken += 1
    return taken


def test_each_class_owns_its_share_of_the_rate_and_the_burst() -> None:
    budget = WriteBudget(qps=50, burst=100, now=0.0)
    assert {cls: (b.rate, b.capacity) for cls, b in budget.buckets.items()} == {
        JOBS: (25.0, 50.0),
        WORKLOADS: (15.0, 30.0),
        QUEUES: (10.0, 20.0),
    }
    assert (budget.total.rate, budget.total.capacity) == (50, 100)


def test_job_writes_alone_get_the_whole_budget() -> None:
    """Work-conserving: the idle lower classes lend their shares, so Jobs alone burst 100 and then go 50 a second."""
    budget = WriteBudget(qps=50, burst=100, now=0.0)
    assert drain(budget, JOBS, 0.0) == 100
    taken = sum(drain(budget, JOBS, step * STEP) for step in range(1, 101))  # one second
    assert 49 <= taken <= 50


def test_a_queue_backlog_never_takes_a_token_a_job_write_could_use() -> None:
    """Queue status writes, saturated for 10 s, take their own share and only what would overflow the idle Job and
    Workload buckets: the Job bucket stays (nearly) full, so 49 Job writes then go at once."""
    budget = WriteBudget(qps=50, burst=100, now=0.0)
    queue_writes = sum(drain(budget, QUEUES, step * STEP) for step in range(1001))
    assert 500 <= queue_writes <= 20 + 50 * 10 + 2  # work-conserving: the whole rate while nothing else writes
    assert budget.buckets[JOBS].tokens >= 49 - 1e-6
    now = 10.0
    jobs_at_once = 0
    while budget.take(JOBS, now, waiting={QUEUES}) is not None:
        jobs_at_once += 1
    assert jobs_at_once >= 49


def test_a_waiting_lower_class_keeps_its_share() -> None:
    """Jobs and queue status both saturated for 10 s: Jobs take their share and the idle Workloads' share,
    queue status its own 10 a second; neither starves."""
    budget = WriteBudget(qps=50, burst=100, now=0.0)
    both = frozenset({JOBS, QUEUES})
    jobs = queues = 0
    for step in range(1001):
        now = step * STEP
        jobs += drain(budget, JOBS, now, waiting=both)  # the most urgent class is served first
        queues += drain(budget, QUEUES, now, waiting=both)
    assert 20 + 100 - 2 <= queues <= 20 + 100 + 2  # its burst, then 10 a second
    assert 80 + 400 - 2 <= jobs <= 80 + 400 + 2  # its burst and the Workloads', then 25 + 15 a second
    assert jobs + queues <= 100 + 50 * 10 + 1  # never more than the total budget


def test_the_total_never_exceeds_qps_and_burst_even_for_tiny_bursts() -> None:
    """Burst 2 split three ways rounds each class up to one token; the total bucket still caps the sum."""
    budget = WriteBudget(qps=20, burst=2, now=0.0)
    granted: list[float] = []
    for step in range(101):
        now = step * STEP
        for cls in WriteClass:
            granted += [now] * drain(budget, cls, now)
    assert granted[:2] == [0.0, 0.0] and len([t for t in granted if t == 0.0]) == 2
    for k, moment in enumerate(granted):
        assert moment >= (k - 2 + 1) / 20 - 1e-9, (k, moment)


def test_seconds_until_token_says_when_a_take_succeeds() -> None:
    budget = WriteBudget(qps=10, burst=10, now=0.0)
    drain(budget, JOBS, 0.0)
    # its own bucket refills 2 a second; the higher classes' lend only once full (1 s)
    assert budget.seconds_until_token(QUEUES, 0.0) == pytest.approx(0.5)
    assert budget.take(QUEUES, 0.45) is None
    assert budget.take(QUEUES, 0.5) is QUEUES
    assert budget.seconds_until_token(JOBS, 0.5) == pytest.approx(0.0)  # Jobs refill 5 a second: 2.5 tokens
    assert budget.take(JOBS, 0.5) is JOBS


async def test_waiting_writes_are_granted_most_urgent_class_first() -> None:
    """With the budget spent, queue, Workload and Job writes wait (queued in that order); as tokens come back the
    Job write goes first, then each class from its own share. A cancelled write takes no token."""
    now = [0.0]
    limiter = WriteLimiter(qps=10, burst=10, clock=lambda: now[0])
    for _ in range(10):
        await limiter.acquire(JOBS)  # the whole burst: own share and the lent ones
    order: list[str] = []

    async def write(cls: WriteClass, name: str) -> None:
        await limiter.acquire(cls)
        order.append(name)

    tasks = [asyncio.create_task(write(cls, name)) for cls, name in ((QUEUES, "q1"), (WORKLOADS, "w1"), (JOBS, "j1"))]
    cancelled = asyncio.create_task(write(QUEUES, "cancelled"))
    for _ in range(3):
        await asyncio.sleep(0)  # let each reach its wait
    assert {cls.label: limiter.waiting(cls) for cls in WriteClass} == {"jobs": 1, "workloads": 1, "queues": 2}
    cancelled.cancel()
    now[0] = 0.2  # Jobs refill 5/s, Workloads 3/s, Queues 2/s: only the Job bucket has a token
    limiter.grant()
    await asyncio.sleep(0)
    assert order == ["j1"]
    now[0] = 0.34  # Workloads 0.34 * 3 >= 1
    limiter.grant()
    await asyncio.sleep(0)
    assert order == ["j1", "w1"]
    now[0] = 0.5  # Queues 0.5 * 2 = 1
    limiter.grant()
    await asyncio.gather(*tasks)
    assert order == ["j1", "w1", "q1"]
    assert cancelled.cancelled() and limiter.writes == 13
    assert limiter.writes_by_class == {JOBS: 11, WORKLOADS: 1, QUEUES: 1}


def test_shares_come_from_the_environment_normalised() -> None:
    assert parse_shares("") == pytest.approx(DEFAULT_SHARES)
    assert parse_shares("jobs=2, workloads=1,queues=1") == {JOBS: 0.5, WORKLOADS: 0.25, QUEUES: 0.25}
    limiter = limiter_from_env({SHARES_ENV: "queues=0.5"})  # the others keep 0.5 and 0.3
    assert limiter.shares == pytest.approx({JOBS: 0.5 / 1.3, WORKLOADS: 0.3 / 1.3, QUEUES: 0.5 / 1.3})
    with pytest.raises(ValueError, match="KUEUE_ES_DISPATCHER_WRITE_SHARES: write share 'events=1' is not CLASS"):
        limiter_from_env({SHARES_ENV: "events=1"})
    with pytest.raises(ValueError, match="'fast' is not a number"):
        parse_shares("jobs=fast")
    with pytest.raises(ValueError, match=r"not positive \['queues=0.0'\]"):
        parse_shares("queues=0")


def test_a_dirty_object_is_written_once_with_its_latest_state_in_the_order_first_marked() -> None:
    dirty: Coalescer[str] = Coalescer(interval=1.0)
    dirty.mark(["lq-a", "lq-b", "lq-a"], 0.0)
    dirty.mark(["lq-a", "cq"], 0.1)
    assert len(dirty) == 3
    assert [dirty.pop_due(0.2), dirty.pop_due(0.2), dirty.pop_due(0.2), dirty.pop_due(0.2)] == [
        "lq-a",
        "lq-b",
        "cq",
        None,
    ]
    assert dirty.seconds_until_due(0.2) is None


def test_an_object_is_written_at_most_once_per_interval() -> None:
    dirty: Coalescer[str] = Coalescer(interval=1.0)
    dirty.mark(["lq"], 0.0)
    assert dirty.pop_due(0.0) == "lq"
    dirty.written("lq", 0.0)
    for moment in (0.1, 0.5, 0.9):  # changed again and again: still one write, held until 1.0
        dirty.mark(["lq"], moment)
        assert dirty.pop_due(moment) is None
    assert len(dirty) == 1 and dirty.seconds_until_due(0.9) == pytest.approx(0.1)
    assert dirty.pop_due(1.0) == "lq"
    assert dirty.pop_due(1.0) is None


def test_an_object_marked_while_its_write_is_under_way_is_held_from_that_write() -> None:
    """Popped at 0 (its last write long ago), written at 3 after waiting for a token, marked at 2 meanwhile:
    written again no earlier than 4."""
    dirty: Coalescer[str] = Coalescer(interval=1.0)
    dirty.written("lq", -10.0)
    dirty.mark(["lq"], 0.0)
    assert dirty.pop_due(0.0) == "lq"
    dirty.mark(["lq"], 2.0)
    dirty.written("lq", 3.0)
    assert dirty.pop_due(3.5) is None
    assert dirty.pop_due(4.0) == "lq"


def test_a_forgotten_object_is_not_written() -> None:
    dirty: Coalescer[str] = Coalescer(interval=1.0)
    dirty.mark(["gone", "kept"], 0.0)
    dirty.forget("gone")
    assert "gone" not in dirty and dirty.pop_due(0.0) == "kept"
    with pytest.raises(ValueError, match="interval must be >= 0"):
        Coalescer(interval=-1)
