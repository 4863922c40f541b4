"""Settling the dispatcher's decisions beside the decisions after them: results stored, then acks.

Why this module exists: a decision is settled once its result (the DispatchBatchApplied
of its record that names it, :mod:`.record_results`, or a DispatchFailed and the facts a
gone or unstartable job adds after it) is stored on the log and the decision is acked. Both may fail for a while (a publish that times out, an ack
that finds the connection's outgoing buffer full) and were retried before the next decision
was handled, so one ack that kept failing held every later dispatch (issue 15: head-of-line
blocking). Here the runner (:class:`~kueue_es.services.dispatcher.service.Dispatcher`) hands
each batch over once its Job writes are done, and goes on with the next batch while this one
settles in a task of its own (:meth:`Settling.settle`). What stays as it was:

- results are published in decision order on one connection, without waiting for each
  other's JetStream ack (:meth:`Settling.result`); a result that must be followed by more
  facts (a gone job, a job that cannot start) first waits for every earlier result, and the
  results after it wait for its facts (:meth:`Settling.result_then`), so the log's order is
  the one-at-a-time order;
- a decision is acked only once its result is stored (a batch's acks go out together once
  every result of the batch is stored); a result that fails for good (not transiently) acks
  nothing more of its batch and is raised by :meth:`Settling.check` (the runner raises it,
  as it raised a batch's failure);
- a nak (a Job write the API server refused for now) and a result no ack waits for (a
  Workload write refused) go out the same way, without waiting (:meth:`Settling.nak`,
  :meth:`Settling.record`);
- a decision delivered again while it settles is not executed again
  (:meth:`Settling.redelivered`): its newest delivery is the one acked; nor is one whose
  result was stored and whose ack was given up (:meth:`Settling.stored_before`): it is acked.

Bounds: an ack that fails transiently is tried again (tenacity: 50 ms doubling to 2 s, with
jitter) for at most :data:`ACK_RETRY_SECONDS`, then given up: the server delivers the decision
again one ack wait after its delivery, its result is already on the log (the result's Msg-Id
makes a repeat a duplicate, the Job write finds the Job as written) and that delivery is acked.
At most :data:`MAX_SETTLING` decisions settle at once (the consumer's max ack pending: the
server delivers no more anyway); the runner then fetches nothing until some settle
(:meth:`Settling.room`). :meth:`Settling.readiness` is False while that bound is reached and
after an ack was given up until an ack goes through again; its facts and the metrics
(``kueue_es_dispatch_acks_outstanding``, ``kueue_es_dispatch_acks_retrying``,
``kueue_es_dispatch_acks_abandoned_total``) say how many settle, how many acks are being tried
again, and how many were given up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog
import tenacity

from kueue_es.events.bus import rules
from kueue_es.events.bus.base import Delivery, DurableConsumer, TransientBusError
from kueue_es.services.dispatcher.carried import decision_key

log = structlog.get_logger(__name__)

T = TypeVar("T")

ACK_RETRY_SECONDS = 20.0
"""Seconds a batch's acks are tried again after their results are stored, before they are given up
(left to the server's redelivery): under the consumer's 30 s ack wait, which redelivers them anyway."""

MAX_SETTLING = rules.MAX_ACK_PENDING
"""Decisions settling at once at most: the durable consumer's max ack pending (1,000)."""

MAX_REMEMBERED = 10 * MAX_SETTLING
"""Decisions whose ack was given up that are remembered (their result is stored: a redelivery is acked
without executing it again); past that, the oldest are forgotten (a redelivery of one is executed
again, as after a restart: the Job write finds the Job as written, the result is a duplicate)."""

ACK_WAIT_MAX = 2.0
"""Seconds at most between two tries of an ack that fails transiently (50 ms doubling, with jitter)."""


@dataclass(eq=False, slots=True)
class Settlement:
    """One decision handed over: ``delivery`` (the newest, see :meth:`Settling.redelivered`) is acked
    through ``consumer`` once ``stored`` (its result's publish, None when it has none) is done."""

    consumer: DurableConsumer
    delivery: Delivery
    stored: asyncio.Future[Any] | None = None
    batch: asyncio.Task[None] | None = None  # the settling task of its batch


class Settling:
    """The decisions handed over and not yet acked (by decision: carried.decision_key), their results and their batches' tasks.

    ``retry_seconds``: how long a batch's acks are tried again once its results are stored (default
    :data:`ACK_RETRY_SECONDS`); ``limit``: decisions settling at once at most (:data:`MAX_SETTLING`);
    ``on_settled(delivery)``: called once a delivery is acked or given up (the runner stops marking it
    in progress); ``on_abandoned(n)``: ``n`` acks given up (a metric).
    """

    def __init__(
        self,
        *,
        retry_seconds: float = ACK_RETRY_SECONDS,
        limit: int = MAX_SETTLING,
        on_settled: Callable[[Delivery], object] | None = None,
    ) -> None:
        if retry_seconds <= 0 or limit < 1:
            raise ValueError(f"settling: retry_seconds {retry_seconds} must be > 0 and limit {limit} >= 1")
        self.retry_seconds, self.limit, self.on_settled = retry_seconds, limit, on_settled
        self.on_abandoned: Callable[[int], None] | None = None
        self.entries: dict[tuple[int, int], Settlement] = {}  # by decision (carried.decision_key)
        self.acked = 0  # acks that went through
        self.abandoned = 0  # acks given up, left to the server's redelivery
        self.abandoned_since_ack = 0  # given up since the last ack that went through: not ready while > 0
        self.retrying = 0  # acks under way; one seen waiting is being tried again (an ack is fire and forget)
        self.error: BaseException | None = None  # the first failure of a settlement (raised by check)
        # decisions (carried.decision_key) whose result is stored and ack given up, oldest first
        self._stored_unacked: dict[tuple[int, int], None] = {}
        self._batches: set[asyncio.Task[None]] = set()
        self._results: list[asyncio.Future[Any]] = []  # result publishes started (done ones pruned now and then)
        self._barrier: asyncio.Future[Any] | None = None  # the last result that later results wait for
        self._room = asyncio.Event()

    def __len__(self) -> int:
        """Decisions handed over and not yet acked or given up."""
        return len(self.entries)

    # -- results ---------------------------------------------------------------------------------

    def result(self, publish: Awaitable[T]) -> asyncio.Future[T]:
        """Publish a result now (after the facts of the last :meth:`result_then` still under way): the
        future of its publish, for :class:`Settlement` ``stored``."""
        barrier = self._barrier
        if barrier is not None and barrier.done():  # stored (or failed, raised elsewhere): it orders nothing now
            barrier = self._barrier = None
        future = asyncio.ensure_future(self._after(barrier, publish) if barrier is not None else publish)
        return self._track(future)

    def result_then(self, publish: Awaitable[Any], then: Callable[[], Awaitable[None]]) -> asyncio.Future[None]:
        """Publish a result once every earlier one is stored, then ``then()`` (the facts that follow it);
        later results wait for both. The future of the whole, for :class:`Settlement` ``stored``."""
        earlier = [future for future in self._results if not future.done()]

        async def in_order() -> None:
            try:
                if earlier:
                    await asyncio.gather(*earlier)
            except BaseException:
                if asyncio.iscoroutine(publish):
                    publish.close()  # never sent
                raise
            await publish
            await then()

        future = self._track(asyncio.ensure_future(in_order()))
        self._barrier = future
        return future

    def record(self, publish: Awaitable[Any]) -> None:
        """Publish a result no ack waits for (a Workload write refused: DispatchFailed ``SyncWorkload``) in
        its turn among the results, without waiting for it; a failure is kept for :meth:`check`."""
        self.result(publish).add_done_callback(self._keep_error)

    def nak(self, consumer: DurableConsumer, delivery: Delivery, *, delay: float) -> None:
        """Ask for ``delivery`` again after ``delay`` seconds, without waiting: tried again for up to
        ``retry_seconds``, then given up (the server delivers it again one ack wait after its delivery)."""
        task = asyncio.ensure_future(self._nak(consumer, delivery, delay))
        self._batches.add(task)
        task.add_done_callback(self._batch_done)

    async def _nak(self, consumer: DurableConsumer, delivery: Delivery, delay: float) -> None:
        window = asyncio.timeout(self.retry_seconds)
        try:
            async with window:
                async for attempt in tenacity.AsyncRetrying(
                    retry=tenacity.retry_if_exception_type(TransientBusError),
                    wait=tenacity.wait_exponential_jitter(initial=0.05, max=ACK_WAIT_MAX, jitter=0.1),
                    reraise=True,
                ):
                    with attempt:
                        await consumer.nak(delivery, delay=delay)
        except TimeoutError:
            if not window.expired():
                raise
            log.warning("nak_abandoned", seq=delivery.message.seq, after_s=self.retry_seconds)

    def _keep_error(self, future: asyncio.Future[Any]) -> None:
        if not future.cancelled() and future.exception() is not None and self.error is None:
            self.error = future.exception()

    def _track(self, future: asyncio.Future[T]) -> asyncio.Future[T]:
        self._results.append(future)  # pruned once a batch (settle): a done callback per result cost a loop turn
        return future

    @staticmethod
    async def _after(barrier: asyncio.Future[Any], publish: Awaitable[T]) -> T:
        try:
            await asyncio.wait([barrier])
        except BaseException:
            if asyncio.iscoroutine(publish):
                publish.close()
            raise
        if barrier.cancelled() or barrier.exception() is not None:
            if asyncio.iscoroutine(publish):
                publish.close()
            raise RuntimeError("a result before this one was not stored")
        return await publish

    # -- settling --------------------------------------------------------------------------------

    def redelivered(self, consumer: DurableConsumer, delivery: Delivery) -> asyncio.Task[None] | None:
        """If ``delivery``'s decision is settling, make this delivery the one acked (the next try of its
        ack uses it) and return its batch's task: the runner does not execute it again. Else None."""
        entry = self.entries.get(decision_key(delivery))
        if entry is None:
            return None
        log.info("decision_redelivered_while_settling", seq=delivery.message.seq, attempt=delivery.attempt)
        entry.consumer, entry.delivery = consumer, delivery
        return entry.batch

    def stored_before(self, key: tuple[int, int]) -> bool:
        """Whether the decision ``key`` (:func:`~.carried.decision_key`) was settled here but for its ack, given
        up (its result is on the log): a delivery of it again is acked, not executed again."""
        unacked = self._stored_unacked
        return bool(unacked) and key in unacked

    def settle(self, entries: list[Settlement]) -> asyncio.Task[None]:
        """Settle a batch in a task of its own: wait for its results, then ack each of its decisions
        (tried again for up to ``retry_seconds``). Returns the task (its failure is also kept for
        :meth:`check`)."""
        self._results = [result for result in self._results if not result.done()]  # no done one kept alive
        task = asyncio.ensure_future(self._settle(entries))
        for entry in entries:
            entry.batch = task
            self.entries[decision_key(entry.delivery)] = entry
        self._batches.add(task)
        task.add_done_callback(self._batch_done)
        return task

    def _batch_done(self, task: asyncio.Task[None]) -> None:
        self._batches.discard(task)
        self._keep_error(task)
        self._room.set()

    async def _settle(self, entries: list[Settlement]) -> None:
        try:
            stored = [entry.stored for entry in entries if entry.stored is not None]
            if stored:
                await asyncio.gather(*stored)
            await self._ack_all(entries)
        except BaseException:
            for entry in entries:
                self._forget(entry)
            raise

    def _forget(self, entry: Settlement) -> None:
        key = decision_key(entry.delivery)
        if self.entries.get(key) is entry:
            del self.entries[key]
            if self.on_settled is not None:
                self.on_settled(entry.delivery)

    async def _ack_all(self, entries: list[Settlement]) -> None:
        """Ack each of ``entries``' newest delivery in turn, an ack that fails transiently tried again (tenacity),
        all within ``retry_seconds``; what is left then is given up."""
        done = 0
        unacked = self._stored_unacked
        window = asyncio.timeout(self.retry_seconds)
        try:
            async with window:
                for entry in entries:
                    self.retrying += 1  # seen by a probe only while the ack waits: it is being tried again
                    try:
                        await entry.consumer.ack(entry.delivery)
                    except TransientBusError as err:
                        await self._ack_again(entry, err)
                    finally:
                        self.retrying -= 1
                    self._forget(entry)
                    if unacked:
                        unacked.pop(decision_key(entry.delivery), None)
                    done += 1
        except TimeoutError:
            if not window.expired():
                raise
            left = entries[done:]
            for entry in left:
                self._forget(entry)
            keys = [decision_key(entry.delivery) for entry in left]
            seqs = [seq for seq, _ in keys]
            unacked.update(dict.fromkeys(keys))
            while len(unacked) > MAX_REMEMBERED:
                del unacked[next(iter(unacked))]
            self.abandoned += len(seqs)
            self.abandoned_since_ack += len(seqs)
            if self.on_abandoned is not None:
                self.on_abandoned(len(seqs))
            log.warning("acks_abandoned", count=len(seqs), seqs=seqs[:10], after_s=self.retry_seconds)
        finally:
            if done:
                self.acked += done
                if done == len(entries):
                    self.abandoned_since_ack = 0

    async def _ack_again(self, entry: Settlement, error: TransientBusError) -> None:
        """Ack ``entry``'s newest delivery again until it does not fail transiently (the caller bounds it)."""
        log.warning("ack_retry", seq=entry.delivery.message.seq, error=str(error))
        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception_type(TransientBusError),
            wait=tenacity.wait_exponential_jitter(initial=0.05, max=ACK_WAIT_MAX, jitter=0.1),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                await entry.consumer.ack(entry.delivery)

    # -- what the runner and the probes ask ------------------------------------------------------

    def check(self) -> None:
        """Raise the first failure of a settlement (a result that failed for good, an ack refused)."""
        if self.error is not None:
            raise self.error

    async def room(self) -> None:
        """Return once fewer than ``limit`` decisions settle; raises what :meth:`check` raises."""
        while len(self.entries) >= self.limit:
            self.check()
            self._room.clear()
            await self._room.wait()
        self.check()

    async def wait(self) -> None:
        """Return once every batch handed over has settled (raises the first failure)."""
        while self._batches:
            await asyncio.gather(*self._batches)
        self.check()

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Whether acks keep up (no more than ``limit`` settling, no ack given up since the last that went
        through) and the facts for /readyz: ``acks_outstanding`` (decisions handed over, not yet acked),
        ``acks_retrying`` (acks being tried again), ``acks_abandoned`` (given up so far) and
        ``acks_failing``."""
        failing = self.abandoned_since_ack > 0 or len(self.entries) >= self.limit
        facts = {
            "acks_outstanding": len(self.entries),
            "acks_retrying": self.retrying,
            "acks_abandoned": self.abandoned,
            "acks_failing": failing,
        }
        return not failing, facts

    async def close(self) -> None:
        """Cancel every settlement and result publish under way (what was not acked is delivered again)."""
        pending = [*self._batches, *self._results]
        for future in pending:
            future.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*pending, return_exceptions=True)
        self._batches.clear()
        self._results.clear()
        self._barrier = None
        for entry in list(self.entries.values()):
            self._forget(entry)
