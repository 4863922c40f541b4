"""The dispatcher's write budget split into priority classes, and the coalescing of queue status.

Why this module exists: every Kubernetes write of the dispatcher comes out of one
client-side budget (QPS and burst, as client-go's limiter). Sharing it first come,
first served let a flood of queue status writes (10,000 LocalQueues appearing) sit in
front of the Job a workload was just admitted for: the Job started minutes after its
admission. Here the budget is split into :class:`WriteClass` es, most urgent first:

1. ``jobs``: Job, JobSet and Pod starts and stops (unsuspend, suspend, evictions,
   pod ungating);
2. ``workloads``: Workload objects and their status;
3. ``queues``: ClusterQueue, LocalQueue and Cohort status, coalesced (:class:`Coalescer`).

Each class owns a token bucket holding its share of the rate and of the burst
(:data:`DEFAULT_SHARES`); a total bucket of the full QPS and burst stays in front of
them, so the API server never sees more than the budget. A write takes a token of its
own class first. When its own bucket is empty it may borrow one a class leaves unused
(no write of that class waiting), so the budget is work-conserving: from a *lower*
class any token (the lender is less urgent), from a *higher* class only a token that
would otherwise overflow its full bucket. So a backlog of a lower class never takes a
token a higher class could use: a Job write finds its class's bucket (nearly) full
however many queue writes wait, and a queue write still gets its own share however
many Job writes wait.

Pure: times are seconds on a monotonic clock the caller reads and passes in. The
runner is :class:`kueue_es.services.dispatcher.kube_api.WriteLimiter`.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

EPSILON = 1e-9
"""Slack on token counts: a bucket refilled to 0.9999999999 tokens by float arithmetic holds one."""


class WriteClass(enum.IntEnum):
    """The dispatcher's write classes, most urgent first (a lower value is more urgent)."""

    JOBS = 1
    """Job, JobSet and Pod starts and stops: the writes that make an admission or an eviction happen."""
    WORKLOADS = 2
    """Workload objects and their status."""
    QUEUES = 3
    """ClusterQueue, LocalQueue and Cohort status: aggregates, coalesced per object."""

    @property
    def label(self) -> str:
        """The class's name in metrics, flags and logs: ``jobs``, ``workloads``, ``queues``."""
        return self.name.lower()


DEFAULT_SHARES: Mapping[WriteClass, float] = {WriteClass.JOBS: 0.5, WriteClass.WORKLOADS: 0.3, WriteClass.QUEUES: 0.2}
"""Each class's share of the QPS and burst: at QPS 50 and burst 100, Job writes own 25 a second (burst 50),
Workload writes 15 (burst 30), queue status 10 (burst 20); an idle class's share goes to the others."""


def parse_shares(text: str) -> dict[WriteClass, float]:
    """Shares from ``jobs=0.5,workloads=0.3,queues=0.2`` (a class left out keeps its default), normalised to
    sum to 1. Raises ValueError naming the entry that is not ``class=number`` or not positive."""
    shares = dict(DEFAULT_SHARES)
    by_label = {cls.label: cls for cls in WriteClass}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        label, sep, raw = entry.partition("=")
        cls = by_label.get(label.strip())
        if not sep or cls is None:
            raise ValueError(f"write share {entry!r} is not CLASS=SHARE with CLASS one of {sorted(by_label)}")
        try:
            shares[cls] = float(raw)
        except ValueError:
            raise ValueError(f"write share {entry!r}: {raw.strip()!r} is not a number") from None
    return normalised(shares)


def normalised(shares: Mapping[WriteClass, float]) -> dict[WriteClass, float]:
    """``shares`` for every class, scaled to sum to 1; raises ValueError for a share that is not positive."""
    missing = [cls.label for cls in WriteClass if cls not in shares]
    bad = [f"{cls.label}={share}" for cls, share in shares.items() if not share > 0]
    if missing or bad:
        raise ValueError(f"every write class needs a share > 0: missing {missing}, not positive {bad}")
    total = sum(shares[cls] for cls in WriteClass)
    return {cls: shares[cls] / total for cls in WriteClass}


@dataclass
class TokenBucket:
    """``capacity`` tokens at most, refilled at ``rate`` a second; ``updated`` is the time ``tokens`` was counted."""

    rate: float
    capacity: float
    tokens: float
    updated: float

    def refill(self, now: float) -> None:
        """Count the tokens refilled up to ``now`` (a time before ``updated`` refills nothing)."""
        if now > self.updated:
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
            self.updated = now

    def has_token(self) -> bool:
        """Whether a whole token is there."""
        return self.tokens >= 1 - EPSILON

    def full(self) -> bool:
        """Whether the bucket is full: a token taken now would have overflowed anyway."""
        return self.tokens >= self.capacity - EPSILON

    def seconds_until(self, level: float) -> float:
        """Seconds until the bucket holds ``level`` tokens (0 if it does)."""
        return max(0.0, (level - self.tokens) / self.rate)

    def take(self) -> None:
        """Take one token (the caller checked there is one)."""
        self.tokens -= 1


class WriteBudget:
    """The QPS and burst of the dispatcher's writes split into the :class:`WriteClass` es by ``shares``.

    ``qps`` (writes a second, > 0) and ``burst`` (writes at once, >= 1) bound the total, as
    client-go's limiter does; class ``c`` owns a bucket of rate ``qps * shares[c]`` and
    capacity ``max(1, burst * shares[c])``. All buckets start full at ``now`` (seconds).
    Raises ValueError for a ``qps`` or ``burst`` out of range or a share that is not positive.
    """

    def __init__(
        self, *, qps: float, burst: int, shares: Mapping[WriteClass, float] = DEFAULT_SHARES, now: float
    ) -> None:
        if not qps > 0 or burst < 1:
            raise ValueError(f"the write rate limit needs qps > 0 and burst >= 1, not qps={qps} burst={burst}")
        self.shares = normalised(shares)
        self.total = TokenBucket(rate=qps, capacity=burst, tokens=burst, updated=now)
        self.buckets: dict[WriteClass, TokenBucket] = {}
        for cls in WriteClass:
            capacity = max(1.0, burst * self.shares[cls])
            self.buckets[cls] = TokenBucket(
                rate=qps * self.shares[cls], capacity=capacity, tokens=capacity, updated=now
            )

    def _refill(self, now: float) -> None:
        self.total.refill(now)
        for bucket in self.buckets.values():
            bucket.refill(now)

    def _lenders(self, cls: WriteClass, waiting: Collection[WriteClass]) -> list[tuple[WriteClass, float]]:
        """The buckets a write of ``cls`` may take from, in the order it tries them, each with the level it
        must hold for a token to be taken: its own (one token), then the idle lower classes, least urgent
        first (one token), then the idle higher classes (a full bucket: only what would overflow)."""
        out = [(cls, 1.0)]
        for other in sorted(WriteClass, reverse=True):
            if other == cls or other in waiting:
                continue
            out.append((other, 1.0 if other > cls else self.buckets[other].capacity))
        return out

    def take(self, cls: WriteClass, now: float, *, waiting: Collection[WriteClass] = ()) -> WriteClass | None:
        """Take a token at ``now`` for a write of class ``cls``, ``waiting`` being the classes with writes
        waiting (their buckets are not lent). Returns the class whose bucket paid, or None (no token now)."""
        self._refill(now)
        if not self.total.has_token():
            return None
        for lender, level in self._lenders(cls, waiting):
            bucket = self.buckets[lender]
            if bucket.tokens >= level - EPSILON and bucket.has_token():
                bucket.take()
                self.total.take()
                return lender
        return None

    def seconds_until_token(self, cls: WriteClass, now: float, *, waiting: Collection[WriteClass] = ()) -> float:
        """Seconds from ``now`` until :meth:`take` could give ``cls`` a token, if nothing else takes one first."""
        self._refill(now)
        soonest = min(
            self.buckets[lender].seconds_until(max(1.0, level)) for lender, level in self._lenders(cls, waiting)
        )
        return max(self.total.seconds_until(1.0), soonest)


K = TypeVar("K", bound=Hashable)


class Coalescer(Generic[K]):
    """Objects whose status must be written, each at most once per ``interval`` seconds.

    A dirty set keyed by object, not a queue of writes: marking an object that is already
    dirty changes nothing, and the writer renders the object's latest state when its turn
    comes. Objects come out (:meth:`pop_due`) in the order they were first marked; one
    written less than ``interval`` ago is held until the interval has passed since that
    write (:meth:`written`). Raises ValueError for a negative ``interval``.
    """

    def __init__(self, *, interval: float) -> None:
        if interval < 0:
            raise ValueError(f"the coalescing interval must be >= 0 seconds, not {interval}")
        self.interval = interval
        self._ready: dict[K, None] = {}  # dirty and free to be written, in the order marked
        self._held: dict[K, float] = {}  # dirty, written recently: the time each may be written again
        self._last_write: dict[K, float] = {}

    def __len__(self) -> int:
        """How many objects are dirty (ready or held)."""
        return len(self._ready) + len(self._held)

    def __contains__(self, key: object) -> bool:
        return key in self._ready or key in self._held

    def mark(self, keys: Iterable[K], now: float) -> None:
        """Objects ``keys`` changed at ``now``: each is written once more, with its state then."""
        for key in keys:
            if key in self._ready or key in self._held:
                continue
            last = self._last_write.get(key)
            if last is not None and now < last + self.interval:
                self._held[key] = last + self.interval
            else:
                self._ready[key] = None

    def pop_due(self, now: float) -> K | None:
        """The next object to write at ``now`` (no longer dirty), or None when every dirty one is held."""
        if self._held:
            for key, due in list(self._held.items()):
                if due <= now:
                    del self._held[key]
                    self._ready[key] = None
        if not self._ready:
            return None
        key = next(iter(self._ready))
        del self._ready[key]
        return key

    def written(self, key: K, now: float) -> None:
        """Object ``key`` was written at ``now``: not again before ``now + interval``."""
        self._last_write[key] = now
        # marked again while its write was under way: held from this write on, not from the one before
        if key in self._ready:
            del self._ready[key]
            self._held[key] = now + self.interval
        elif key in self._held:
            self._held[key] = max(self._held[key], now + self.interval)

    def forget(self, key: K) -> None:
        """Object ``key`` is gone: drop it and its last write."""
        self._ready.pop(key, None)
        self._held.pop(key, None)
        self._last_write.pop(key, None)

    def seconds_until_due(self, now: float) -> float | None:
        """Seconds from ``now`` until :meth:`pop_due` gives an object (0: now), None when nothing is dirty."""
        if self._ready:
            return 0.0
        if not self._held:
            return None
        return max(0.0, min(self._held.values()) - now)
