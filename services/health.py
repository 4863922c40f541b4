"""Health and metrics of one service: ``/healthz``, ``/readyz`` and ``/metrics`` over HTTP.

Every service (``kueue-es service NAME --health-port PORT``) can serve:

- ``/healthz``: 200 while the process and its event loop run (the answer comes from
  the loop that runs the service, so a blocked loop fails the probe);
- ``/readyz``: 200 when the service does its job, else 503; the JSON body says why.
  A service that holds its lease, or runs without leader election, is ready once it
  is connected to NATS and has read the log up to where it ended when it connected
  (its fold has caught up), while every reader consumes (its consumer was made again, or
  a fetch answered, since the connection last came back) and has caught up again since,
  while no bus operation is being tried again after a transient failure (a publish, a
  fetch, an ack: :func:`keep_trying`; a decider's commit, ``DeciderLoop.readiness``),
  and while its own checks pass (:meth:`Health.add_check`:
  a decider is not ready once it has had a batch to commit for 30 s without a commit
  succeeding, ``DeciderLoop.readiness``). A standby (another replica holds the lease) is ready
  while it reaches the API server to follow the lease: it is healthy and waiting. A decider's
  standby lease (:mod:`kueue_es.services.standby`) only adds ``role`` active or standby to the
  body: a standby decider folds the log and is ready as the active one is;
- ``/metrics``: Prometheus text format (prometheus-client), see :class:`Health`.

Nothing in the services' logic knows about this: :meth:`Health.connect` hands the
service an :class:`ObservedBus`, a transparent wrapper of its bus that counts what
goes through it (messages read by the fold, batches committed, conflicts, facts and
dispatch results published), and that keeps trying a publish, fetch or ack that fails
transiently (:class:`~kueue_es.events.bus.base.TransientBusError`) instead of letting it end
the service. The serve functions take it as their ``connect``.

The /readyz body: ``ready``, ``service``, ``role``, then ``nats_connected``, ``consuming``
(every reader consuming), ``readers`` and ``readers_consuming``, ``caught_up``, ``lag``
(messages still to be delivered to the readers), ``retrying`` (bus operations being tried
again) and the services' own checks' facts.
"""

from __future__ import annotations

import collections
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec
import structlog
import tenacity
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from kueue_es.events import codec, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import (
    Bus,
    BusStatus,
    ConflictError,
    Delivery,
    DuplicateBatchError,
    DurableConsumer,
    LogMessage,
    OutgoingMessage,
    PublishAck,
    TransientBusError,
)
from kueue_es.events.bus.server import Credentials
from kueue_es.projections import batches
from kueue_es.services import ports

log = structlog.get_logger(__name__)

#: Roles a replica can have; "" means no leader election (the service always works).
ROLES = ("", "candidate", "leader", "standby")

T = TypeVar("T")

RETRY_WAIT_MAX = 2.0
"""Seconds at most between two tries of a bus operation that keeps failing transiently
(:func:`keep_trying`): 50 ms doubling up to this, plus up to 0.1 s of jitter."""


class Health:
    """The health and metrics state of one service process.

    ``service`` names the service (a ``service`` label on every metric).
    ``lease_duration`` (seconds) is how recent the last contact with the lease must
    be for a standby to count as ready. Metrics (all prefixed ``kueue_es_``):

    - ``events_folded_total``: log messages read by the service's folds (while a backlog is read,
      counted every 100 messages; at once when the fold reaches the end of the log);
    - ``fold_lag_messages``: messages on the log after the last one read (what the
      fold has still to read, as JetStream counts it);
    - ``decisions_committed_total`` / ``commit_conflicts_total``: decision batches
      committed, and batches with decisions rejected because the head moved (another replica, or
      a stale view: contention); ``commit_fence_conflicts_total``: fence-only batches (empty, only
      for a hand-over, :func:`fence_only`) rejected so: harmless, another record came first;
    - ``published_total{type}``: events published, by event type (not counting
      duplicates the log dropped); the decisions a committed DecisionRecord carries (event schema 17,
      ``DecisionRecord.decisions``) count each under its own type, as their messages did before;
    - ``dispatch_writes_total`` / ``dispatch_failures_total``: dispatch results
      recorded (DispatchApplied and each entry of a DispatchBatchApplied, DispatchFailed);
    - ``orphan_decisions_total{reason}``: messages the fold refused as outside any verified
      decision batch (:mod:`kueue_es.projections.batches`: a non-record on a head subject,
      a decision outside a batch, a broken batch, ...), never folded nor executed; counted by the
      services whose fold takes :meth:`orphan_counter` as its hook (the deciders, the dispatcher, the
      publisher), which export every reason's series from their start, at 0 until the first orphan;
    - ``dispatch_backlog{class}``: the dispatcher's writes waiting, by write class (``jobs``,
      ``workloads``, ``queues``; :mod:`kueue_es.services.dispatcher.write_budget`): waiting for a
      token, and Workloads and queues changed but not yet written (set by
      :meth:`report_dispatch_backlog`);
    - ``dispatch_acks_outstanding`` / ``dispatch_acks_retrying`` / ``dispatch_acks_abandoned_total``: the
      dispatcher's decisions executed and not yet acked (their results being stored, or their acks under
      way), its acks being tried again, and its acks given up (left to the server's redelivery), set by
      :meth:`report_dispatch_acks` (:mod:`kueue_es.services.dispatcher.settling`);
    - ``leader``: 1 while this replica holds its lease (or runs without election); for a decider with
      a standby lease, while it holds that (:mod:`kueue_es.services.standby`, which adds
      ``lease_holder{role}`` and ``lease_transitions_total{role}``);
    - ``nats_connected``: 1 while connected to NATS;
    - ``ready``: 1 while /readyz answers 200;
    plus the process_ and python_ collectors of prometheus-client.
    """

    def __init__(self, *, service: str, lease_duration: float = 15.0) -> None:
        self.service = service
        self.lease_duration = lease_duration
        self.role = ""
        self.bus: ObservedBus | None = None
        self.caught_up = False
        self.lease_contact_at: float | None = None  # time.monotonic() of the last answer about the lease
        self.working: Callable[[], bool] | None = None  # a decider's standby lease: whether this replica commits
        self.registry = CollectorRegistry()
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=self.registry)
        labels = ["service"]
        self.events_folded = Counter(
            "kueue_es_events_folded", "Log messages read by the service's folds.", labels, registry=self.registry
        ).labels(service)
        self.fold_lag = Gauge(
            "kueue_es_fold_lag_messages",
            "Messages on the log after the last one the fold read.",
            labels,
            registry=self.registry,
        ).labels(service)
        self.committed = Counter(
            "kueue_es_decisions_committed", "Decision batches committed to the log.", labels, registry=self.registry
        ).labels(service)
        self.conflicts = Counter(
            "kueue_es_commit_conflicts",
            "Decision batches with decisions the log rejected because its head had moved (contention).",
            labels,
            registry=self.registry,
        ).labels(service)
        self.fence_conflicts = Counter(
            "kueue_es_commit_fence_conflicts",
            "Fence-only decision batches the log rejected because its head had moved (harmless).",
            labels,
            registry=self.registry,
        ).labels(service)
        self._published = Counter(
            "kueue_es_published", "Events published to the log, by type.", [*labels, "type"], registry=self.registry
        )
        self._published_by_type: dict[str, Any] = {}  # the labelled child of each type, looked up once
        self.dispatch_writes = Counter(
            "kueue_es_dispatch_writes", "Dispatch results recorded as applied.", labels, registry=self.registry
        ).labels(service)
        self.dispatch_failures = Counter(
            "kueue_es_dispatch_failures", "Dispatch results recorded as failed.", labels, registry=self.registry
        ).labels(service)
        self._orphans = Counter(
            "kueue_es_orphan_decisions",
            "Messages on decision subjects (or of decision types) outside any verified batch: never folded.",
            [*labels, "reason"],
            registry=self.registry,
        )
        self._dispatch_backlog = Gauge(
            "kueue_es_dispatch_backlog",
            "The dispatcher's writes waiting, by write class (jobs, workloads, queues).",
            [*labels, "class"],
            registry=self.registry,
        )
        self._dispatch_acks = {
            what: Gauge(f"kueue_es_dispatch_acks_{what}", text, labels, registry=self.registry)
            for what, text in (
                ("outstanding", "The dispatcher's decisions executed and not yet acked."),
                ("retrying", "The dispatcher's acks being tried again."),
            )
        }
        self._dispatch_acks_abandoned = Counter(
            "kueue_es_dispatch_acks_abandoned",
            "The dispatcher's acks given up after retrying (their decisions are delivered again).",
            labels,
            registry=self.registry,
        )
        self.checks: list[Callable[[], tuple[bool, dict[str, Any]]]] = []
        self.failing: collections.Counter[str] = collections.Counter()  # operations being tried again
        self.reader_failed = ""  # why a reader of the log ended with an error (never ready again)
        self.bus_retries = Counter(
            "kueue_es_bus_retries",
            "Bus operations tried again after a transient failure (a timeout, no responders, reconnecting).",
            [*labels, "operation"],
            registry=self.registry,
        )
        gauge = Gauge("kueue_es_leader", "1 while this replica does the work.", labels, registry=self.registry)
        gauge.labels(service).set_function(
            lambda: float(self.working() if self.working is not None else self.role in ("", "leader"))
        )
        gauge = Gauge("kueue_es_nats_connected", "1 while connected to NATS.", labels, registry=self.registry)
        gauge.labels(service).set_function(lambda: float(self.nats_connected()))
        gauge = Gauge("kueue_es_ready", "1 while /readyz answers 200.", labels, registry=self.registry)
        gauge.labels(service).set_function(lambda: float(self.readiness()[0]))

    # -- what the services call ------------------------------------------------------------------

    async def connect(self, url: str, credentials: Credentials | None = None) -> ObservedBus:
        """Connect to NATS as ``kueue_es.events.bus.nats.connect`` does (as ``credentials``' user, else as
        its environment says), and observe the bus. A process with several connections (co-hosted
        deciders, ``kueue_es.services.deciding.serve_deciders``) connects the one its fold reads on last:
        /readyz follows the last bus observed."""
        bus = await nats_bus.connect(url, credentials=credentials)
        return await self.observe(bus)

    async def observe(self, bus: Bus) -> ObservedBus:
        """Wrap ``bus``; the fold counts as caught up once it has read up to today's last message."""
        observed = ObservedBus(bus, health=self, caught_up_at=await bus.last_seq())
        self.bus = observed
        self.caught_up = observed.caught_up_at == 0
        return observed

    def published(self, event_type: str, entries: int = 1) -> None:
        """Count one event published (not a duplicate); ``entries``: the decisions a DispatchBatchApplied
        answers (each counts as a dispatch write)."""
        counter = self._published_by_type.get(event_type)
        if counter is None:
            counter = self._published_by_type[event_type] = self._published.labels(self.service, event_type)
        counter.inc()
        if event_type == "DispatchApplied":
            self.dispatch_writes.inc()
        elif event_type == "DispatchBatchApplied":  # one per record and pass: each entry is a write
            self.dispatch_writes.inc(entries)
        elif event_type == "DispatchFailed":
            self.dispatch_failures.inc()

    def orphaned(self, orphan: batches.Orphan) -> None:
        """Count one orphaned message (the fold's ``on_orphan``)."""
        self._orphans.labels(self.service, orphan.reason).inc()

    def orphan_counter(self) -> Callable[[batches.Orphan], None]:
        """The fold's ``on_orphan`` of a service that counts its orphans (:meth:`orphaned`), with
        ``kueue_es_orphan_decisions_total{service, reason}`` of every reason (``batches.REASONS``) exported
        at 0 from now on: a series a dashboard or an alert names is there before the first orphan, not
        only the metric's HELP and TYPE."""
        for reason in batches.REASONS:
            self._orphans.labels(self.service, reason)
        return self.orphaned

    def report_dispatch_backlog(self, backlog: Callable[[], Mapping[str, int]]) -> None:
        """Export ``backlog()`` (write class -> writes waiting, the dispatcher's ``backlog``) as
        ``kueue_es_dispatch_backlog{class}``, read at each scrape."""

        def reader(write_class: str) -> Callable[[], float]:
            return lambda: float(backlog().get(write_class, 0))

        for write_class in backlog():
            self._dispatch_backlog.labels(self.service, write_class).set_function(reader(write_class))

    def report_dispatch_acks(self, readiness: Callable[[], tuple[bool, dict[str, Any]]]) -> Callable[[float], None]:
        """Make ``readiness()`` (the dispatcher's ``Settling.readiness``: ok, and facts with
        ``acks_outstanding`` and ``acks_retrying``) a check of /readyz and export those two facts as
        ``kueue_es_dispatch_acks_outstanding`` / ``_retrying``, read at each scrape. Returns the hook that
        counts ``n`` acks given up (``kueue_es_dispatch_acks_abandoned_total``)."""
        self.add_check(readiness)

        def reader(what: str) -> Callable[[], float]:
            return lambda: float(readiness()[1][f"acks_{what}"])

        for what, gauge in self._dispatch_acks.items():
            gauge.labels(self.service).set_function(reader(what))
        return self._dispatch_acks_abandoned.labels(self.service).inc

    def add_check(self, check: Callable[[], tuple[bool, dict[str, Any]]]) -> None:
        """Make readiness also depend on ``check`` (ready or not, and facts for the /readyz body),
        e.g. :meth:`kueue_es.services.runtime.DeciderLoop.readiness`."""
        self.checks.append(check)

    def lease_contact(self) -> None:
        """The API server answered about the lease (it exists or not, we hold it or not)."""
        self.lease_contact_at = time.monotonic()

    # -- what the probes read --------------------------------------------------------------------

    def bus_status(self) -> BusStatus:
        """The bus's connection and readers (:meth:`Bus.status`); not connected before it connects."""
        if self.bus is None:
            return BusStatus(connected=False, caught_up=False)
        return self.bus.inner.status()

    def nats_connected(self) -> bool:
        """Whether the service's bus is connected (False before it connects and after it closes)."""
        return self.bus_status().connected

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Whether the service is ready, and the facts that say so (the /readyz body, see the module)."""
        facts: dict[str, Any] = {"service": self.service, "role": self.role or "sole"}
        if self.role in ("candidate", "standby"):
            seen = self.lease_contact_at
            recent = seen is not None and time.monotonic() - seen <= self.lease_duration
            facts["lease_reachable"] = recent
            return recent, facts
        status = self.bus_status()
        retrying = sorted({*status.retrying, *(what for what, count in self.failing.items() if count > 0)})
        consuming = status.consuming >= status.readers
        facts["nats_connected"] = status.connected
        facts["consuming"] = consuming
        facts["readers"] = status.readers
        facts["readers_consuming"] = status.consuming
        facts["caught_up"] = self.caught_up and status.caught_up
        facts["lag"] = status.lag
        facts["retrying"] = retrying
        ready = bool(status.connected and consuming and facts["caught_up"] and not retrying)
        if self.reader_failed:
            facts["reader_failed"] = self.reader_failed
            ready = False
        for check in self.checks:
            ok, more = check()
            facts.update(more)
            ready = ready and ok
        return ready, facts

    def metrics(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)


def fence_only(head: OutgoingMessage, rest: Sequence[OutgoingMessage]) -> bool:
    """Whether a decision batch is only a fence: a DecisionRecord with no outputs, no outcomes it carries
    (pending, finished releases) and no answer, which a decider commits only because a hand-over out of its partition waits for a record
    (docs/design.md Partitions). Its refusal by the head check is harmless: another record came first."""
    if rest:
        return False
    try:
        record = codec.decode(head.data)
    except codec.DecodeError:
        return False
    return isinstance(record, types.DecisionRecord) and not record.decided and not record.answers


class _Tagged(msgspec.Struct, gc=False):
    type: str = ""


class _CarriedTags(msgspec.Struct, gc=False):
    decisions: list[_Tagged] = []


_carried_tags = msgspec.json.Decoder(_CarriedTags)


def carried_decisions(head: OutgoingMessage) -> list[str]:
    """The wire tags (``WorkloadAdmitted``...) of the decisions the DecisionRecord ``head`` carries (event
    schema 17, ``DecisionRecord.decisions``): published with it, one message for all, each still an event of
    its own type for ``published_total``. Empty for any other message and for a record that carries none (an
    older schema's record, whose decisions were messages of their own) or that does not decode. Only the tags
    are read: the deciders commit every record through here, and decoding each whole again cost them a
    hundredth of their CPU on the large-scale bench."""
    if head.headers.get("Kq-Type") != "DecisionRecord" or b'"decisions"' not in head.data:
        return []
    try:
        tags = _carried_tags.decode(head.data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return []
    return [tagged.type for tagged in tags.decisions]


class ObservedBus(Bus):
    """A bus that behaves as ``inner`` and tells ``health`` what went through it.

    ``caught_up_at``: the log's last sequence when the service connected; the first
    message read at or past it (or with nothing pending after it) marks the fold
    as caught up.
    """

    def __init__(self, inner: Bus, *, health: Health, caught_up_at: int) -> None:
        self.inner, self.health, self.caught_up_at = inner, health, caught_up_at

    def __getattr__(self, name: str) -> Any:  # anything else the implementation offers (nc, timeout, ...)
        return getattr(self.inner, name)

    async def publish(self, message: OutgoingMessage) -> PublishAck:
        """Publish, trying again for as long as it fails transiently (:func:`keep_trying`)."""
        ack = await keep_trying("publish", lambda: self.inner.publish(message), health=self.health)
        if not ack.duplicate:
            kind = message.headers.get("Kq-Type", "unknown")
            entries = message.data.count(b'"decisionSeq"') if kind == "DispatchBatchApplied" else 1
            self.health.published(kind, entries)
        return ack

    async def publish_together(self, messages: Sequence[OutgoingMessage]) -> int:
        """Publish ``messages`` as one atomic batch through ``inner`` (a refusal propagates: the caller falls
        back to publishing them one by one, each tried again as :meth:`publish` does)."""
        last = await self.inner.publish_together(messages)
        for message in messages:
            self.health.published(message.headers.get("Kq-Type", "unknown"))
        return last

    async def commit_batch(
        self,
        *,
        head: OutgoingMessage,
        expected_head_seq: int,
        rest: Sequence[OutgoingMessage] = (),
        head_filter: str | None = None,
    ) -> int:
        try:
            last = await self.inner.commit_batch(
                head=head, expected_head_seq=expected_head_seq, rest=rest, head_filter=head_filter
            )
        except (ConflictError, DuplicateBatchError):
            (self.health.fence_conflicts if fence_only(head, rest) else self.health.conflicts).inc()
            raise
        self.health.committed.inc()
        for message in (head, *rest):
            self.health.published(message.headers.get("Kq-Type", "unknown"))
        for tag in carried_decisions(head):
            self.health.published(tag)
        return last

    async def read(
        self, *, subjects: Sequence[str] = ("kq.>",), start_seq: int = 1
    ) -> AsyncGenerator[LogMessage, None]:
        health = self.health
        async with contextlib.aclosing(self.inner.read(subjects=subjects, start_seq=start_seq)) as messages:
            folded = 0  # read but not yet counted: while a backlog is read, the metrics move every 100 messages
            try:
                async for message in messages:
                    folded += 1
                    if folded >= 100 or message.pending == 0:
                        health.events_folded.inc(folded)
                        health.fold_lag.set(message.pending)
                        folded = 0
                    if message.seq >= self.caught_up_at or message.pending == 0:
                        health.caught_up = True
                    yield message
            except Exception as err:  # the reader is gone for good (a closed connection, no stream)
                health.reader_failed = str(err)
                raise
            finally:
                if folded:
                    health.events_folded.inc(folded)

    def folded_through(self, seq: int) -> None:
        if seq >= self.caught_up_at:
            self.health.caught_up = True

    async def last_seq(self) -> int:
        return await self.inner.last_seq()

    async def first_seq(self) -> int:
        return await self.inner.first_seq()

    async def last_subject_seq(self, subject: str) -> int:
        return await self.inner.last_subject_seq(subject)

    async def get(self, seq: int) -> LogMessage:
        return await self.inner.get(seq)

    async def durable(
        self,
        *,
        name: str,
        subjects: Sequence[str],
        ack_wait: float = 30.0,
        set_ack_wait: bool = False,
        set_filter: bool = False,
    ) -> DurableConsumer:
        """The durable consumer, its fetches, acks and naks tried again while they fail transiently."""
        inner = await keep_trying(
            "durable",
            lambda: self.inner.durable(
                name=name, subjects=subjects, ack_wait=ack_wait, set_ack_wait=set_ack_wait, set_filter=set_filter
            ),
            health=self.health,
        )
        return ObservedDurable(inner, health=self.health)

    async def close(self) -> None:
        await self.inner.close()

    def status(self) -> BusStatus:
        return self.inner.status()


class ObservedDurable(DurableConsumer):
    """A durable consumer that behaves as ``inner`` but keeps trying what fails transiently
    (:func:`keep_trying`), ``health`` not ready meanwhile: a fetch, an ack or a nak that times
    out, or finds no responder while JetStream restarts, never ends the service."""

    def __init__(self, inner: DurableConsumer, *, health: Health) -> None:
        self.inner, self.health = inner, health

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def fetch(self, *, batch: int = 100, timeout: float = 1.0) -> list[Delivery]:
        return await keep_trying("fetch", lambda: self.inner.fetch(batch=batch, timeout=timeout), health=self.health)

    async def ack(self, delivery: Delivery) -> None:
        await keep_trying("ack", lambda: self.inner.ack(delivery), health=self.health)

    async def nak(self, delivery: Delivery, *, delay: float = 0.0) -> None:
        await keep_trying("nak", lambda: self.inner.nak(delivery, delay=delay), health=self.health)

    async def in_progress(self, delivery: Delivery) -> None:
        await keep_trying("in_progress", lambda: self.inner.in_progress(delivery), health=self.health)

    async def close(self) -> None:
        await self.inner.close()


async def keep_trying(what: str, call: Callable[[], Awaitable[T]], *, health: Health | None = None) -> T:
    """Await ``call()`` until it does not raise :class:`TransientBusError`, and return its result.

    Between tries: 50 ms doubling up to RETRY_WAIT_MAX seconds, with jitter (tenacity), for as long
    as it takes: a transient bus failure (no ack in time, no responders while JetStream
    restarts, the connection reconnecting) never ends a service. Meanwhile ``health`` counts
    ``what`` as retrying (/readyz false, ``retrying`` in its body) and counts each retry
    (``kueue_es_bus_retries_total``). Any other error is raised at once. A publish is safe
    to repeat (its Msg-Id), an ack or a nak too; a decision batch is never handed here.
    """
    try:  # the retrying machinery only once a first try failed
        return await call()
    except TransientBusError as err:
        log.warning("bus_retry", what=what, error=str(err))
        if health is not None:
            health.bus_retries.labels(health.service, what).inc()

    def note(state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        log.warning("bus_retry", what=what, attempt=state.attempt_number, error=str(error))
        if health is not None:
            health.bus_retries.labels(health.service, what).inc()

    if health is not None:
        health.failing[what] += 1
    try:
        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception_type(TransientBusError),
            wait=tenacity.wait_exponential_jitter(multiplier=0.05, max=RETRY_WAIT_MAX, jitter=0.1),
            before_sleep=note,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                result = await call()
            if not attempt.retry_state.outcome or not attempt.retry_state.outcome.failed:
                log.info("bus_retry_succeeded", what=what, attempts=attempt.retry_state.attempt_number + 1)
                return result
        raise AssertionError("unreachable")
    finally:
        if health is not None:
            health.failing[what] -= 1


@contextlib.asynccontextmanager
async def serve_health(health: Health, *, port: int, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve /healthz, /readyz and /metrics on ``host:port`` until the block exits; yields the base URL.

    ``host`` is the address bound (loopback by default; ``0.0.0.0`` in a pod, for
    the kubelet's probes and Prometheus), and the ``health_serving`` log line says
    which address and port were actually bound.

    ``port=0`` picks a free port; the port bound is reported to a supervisor that asked
    (:func:`kueue_es.services.ports.report`). Raises OSError if the port is taken.
    """
    import aiohttp.web  # here, not at the top: a service without a health port skips its import (about 1 s)

    async def healthz(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.json_response({"service": health.service, "alive": True})

    async def readyz(_: aiohttp.web.Request) -> aiohttp.web.Response:
        ready, facts = health.readiness()
        return aiohttp.web.json_response({"ready": ready, **facts}, status=200 if ready else 503)

    async def metrics(_: aiohttp.web.Request) -> aiohttp.web.Response:
        body = health.metrics()
        return aiohttp.web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = aiohttp.web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    runner = aiohttp.web.AppRunner(app, access_log=None)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, host=host, port=port)
    try:
        await site.start()
        bound_host, bound = (str(runner.addresses[0][0]), runner.addresses[0][1]) if runner.addresses else (host, port)
        url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{bound}"  # noqa: S104
        log.info("health_serving", url=url, bound=f"{bound_host}:{bound}")
        ports.report(ports.HEALTH, int(bound))  # to the supervisor that passed port 0 (services/ports.py)
        yield url
    finally:
        await runner.cleanup()
