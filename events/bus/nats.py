"""The bus on NATS JetStream: the real log every kueue-es service shares.

Everything here is plain nats-py 2.16 except the atomic batch: nats-py has no
helper for ADR-50 (its ``js.publish`` chokes on the empty ack of a non-final
batch message, nats.py #811), so :meth:`NatsBus.commit_batch` speaks the protocol
on the core connection. Measured behaviour this module relies on (nats-server
2.15.1; research/event-sourcing.md §2.3-§2.6):

- a batch is checked for duplicate ``Nats-Msg-Id`` (10201) before the head's
  expected sequence (10071), standalone and clustered alike, so a retried batch
  that already landed reports DuplicateBatchError on both (unlike a plain
  publish with an expectation, which standalone answers with 10071);
- ``Nats-Expected-Last-Subject-Sequence-Subject`` (a filter, wildcards allowed; 2.11+)
  on a batch's first message makes the server compare the expected sequence with the
  last message on any subject of the filter, standalone and clustered; a clustered
  stream refuses a second batch with the same filter while the first is still being
  proposed with err 10164 ("wrong last sequence"), nothing stored: a conflict too;
- an ordered consumer asked to start past the end counts the skipped messages
  in ``num_pending``, so :meth:`NatsBus.read` starts at the stream's end and
  drops the messages before ``start_seq`` itself;
- ``fetch`` raises TimeoutError when nothing came, which becomes ``[]``;
- a message over the server's max payload makes the server close the
  connection, so sizes are checked before sending (:mod:`kueue_es.events.bus.rules`).

Reads of single messages (``get``, ``last_subject_seq``) use the stream
leader's API, not Direct Get, so they see every write acknowledged before them
on an R3 stream too.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import os
import random
import re
import ssl
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import structlog
import tenacity
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api

from kueue_es.events.bus import base, leases, permissions, rules
from kueue_es.events.bus.server import Credentials

log = structlog.get_logger(__name__)

_HEADER_WS = " \t\n\r\x0b\x0c"
"""What ``bytes.strip()`` strips (``str.strip()`` strips more: ``\x1c``-``\x1f`` and Unicode spaces)."""
_nats_parse_header_lines = Client._parse_header_lines


def parse_header_lines(raw: bytes) -> dict[str, str]:
    """nats-py's ``Client._parse_header_lines``, the same result 2.5 x faster: a header block
    (``Name: Value\\r\\n`` per line, after the ``NATS/1.0`` line) as a dict of names to values.

    Every message a service reads carries 2-7 headers and nats-py parses them before our code
    sees the message; its parser decodes each line apart and tests every character of every name
    for white space (a tenth of a reader's CPU, measured with py-spy on the large-scale bench).
    Here a block of ASCII (the only kind kueue-es writes) is decoded once and a name is tested
    character by character only when it holds a space or a control character; anything else
    (non-ASCII bytes) goes to nats-py's own parser. tests/bus/test_header_parse.py compares both.
    """
    if not raw.isascii():
        return _nats_parse_header_lines(raw)
    out: dict[str, str] = {}
    for line in raw.decode("ascii").split("\r\n"):
        name, sep, value = line.partition(":")
        if not sep:
            continue
        key = name.strip(_HEADER_WS)
        if (" " in key or not key.isprintable()) and any(c.isspace() for c in key):
            continue  # a name is a token: one with white space inside is skipped, as nats-py does
        out[key] = value.strip(_HEADER_WS)
    return out


Client._parse_header_lines = staticmethod(parse_header_lines)  # type: ignore[method-assign]

PUBLIC_STREAM_NAME = "KQ_PUB"
PUBLIC_SUBJECTS = ("kq.pub.>",)
"""KQ_PUB's subjects: what the publisher (services/publisher) writes there from the verified log,
``kq.pub.wl.<ns>.<name>`` per workload and ``kq.pub.rec.<partition>.<decider>`` for the records."""
PUBLIC_DUPLICATE_WINDOW = 600
"""Seconds KQ_PUB remembers a Nats-Msg-Id (the log message's): a publisher's repeat is stored once."""
ERR_WRONG_LAST_SEQUENCE = 10071
ERR_WRONG_LAST_SEQUENCE_IN_FLIGHT = 10164
"""A clustered stream's answer when another write expecting on the same subject (or filter) is
still being proposed: "wrong last sequence", nothing stored (seen racing three deciders' batches)."""
ERR_BATCH_DUPLICATE = 10201
ERR_STREAM_NAME_IN_USE = 10058
ERR_INSUFFICIENT_PEERS = 10005
"""JetStream's "no suitable peers for placement": in a cluster, also while a peer is briefly seen offline
(CI met it creating an R3 stream under load just after one was deleted); retried until the deadline, so a
cluster that truly lacks peers still fails."""
_TRANSIENT_ERR_CODES = {10008, 10023, ERR_INSUFFICIENT_PEERS}


@contextlib.contextmanager
def _wrapped(what: str) -> Iterator[None]:
    try:
        yield
    except nats.js.errors.NotFoundError as err:
        raise base.NotFoundError(f"{what}: {err}") from err
    except (nats.errors.Error, OSError) as err:
        kind = base.TransientBusError if _worth_retrying(err) else base.BusError
        raise kind(f"{what} failed: {type(err).__name__}: {err}") from err


@contextlib.contextmanager
def _refused_as_conflict(message: base.OutgoingMessage) -> Iterator[None]:
    """A publish refused because its subject moved past ``expected_last_subject_seq``: ConflictError."""
    try:
        yield
    except nats.js.errors.APIError as err:
        if err.err_code in (ERR_WRONG_LAST_SEQUENCE, ERR_WRONG_LAST_SEQUENCE_IN_FLIGHT):
            raise base.ConflictError(
                f"{message.subject!r} moved past sequence {message.expected_last_subject_seq} ({err.description});"
                f" {message.msg_id!r} was not stored."
            ) from err
        raise


def _transient(err: BaseException) -> bool:
    """Errors a JetStream cluster gives while a new stream or consumer settles on its leader."""
    return isinstance(
        err,
        nats.errors.NoRespondersError | nats.js.errors.ServiceUnavailableError | nats.js.errors.NoStreamResponseError,
    )


def _publish_retryable(err: BaseException) -> bool:
    """What a plain publish tries again: a transient error, or no ack in time (a busy server may have
    stored it: the Msg-Id makes the repeat a duplicate, answered with the first one's sequence)."""
    return _transient(err) or isinstance(err, nats.errors.TimeoutError)


def _no_responders(err: BaseException) -> bool:
    """No server took the request (nothing stored): a batch's head may be asked again."""
    return isinstance(err, nats.errors.NoRespondersError)


def _worth_retrying(err: BaseException) -> bool:
    """What may pass when tried again (a :class:`base.TransientBusError`): a transient error, no answer
    in time, or the connection reconnecting (its outgoing buffer full, or a request refused meanwhile)."""
    return _publish_retryable(err) or isinstance(
        err,
        TimeoutError
        | nats.errors.OutboundBufferLimitError
        | nats.errors.ConnectionReconnectingError
        | nats.errors.StaleConnectionError,
    )


def _retrying(
    what: str, *, retryable: Callable[[BaseException], bool] = _transient, seconds: float | None = None
) -> tenacity.AsyncRetrying:
    """Retry a transient failure for up to TRANSIENT_RETRY_SECONDS (or ``seconds``), waiting 50 ms
    doubling to at most 0.5 s with jitter between tries; Msg-Id dedup makes a publish safe to repeat."""

    def note(state: tenacity.RetryCallState) -> None:
        log.info(
            "nats_transient_retry",
            what=what,
            attempt=state.attempt_number,
            error=repr(state.outcome.exception() if state.outcome else None),
        )

    return tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(retryable),
        wait=tenacity.wait_exponential_jitter(multiplier=0.05, max=0.5, jitter=0.05),
        stop=tenacity.stop_after_delay(TRANSIENT_RETRY_SECONDS if seconds is None else seconds),
        before_sleep=note,
        reraise=True,
    )


TRANSIENT_RETRY_SECONDS = 5.0
#: How long a plain publish keeps trying after a timeout (an overloaded server: a service exiting on
#: one slow ack lost a large-scale bench run, issue 13); within the stream's 600 s dedup window.
PUBLISH_RETRY_SECONDS = 60.0


async def _log_error(err: Exception) -> None:
    log.warning("nats connection error", error=repr(err))


_REFUSED_PUBLISH = re.compile(r'permissions violation for publish to "([^"]+)"', re.IGNORECASE)


def _error_hook(refused: set[str]) -> Callable[[Exception], Awaitable[None]]:
    """The connection's error callback: log, and remember the subjects the server refused us to publish
    on (a refused JetStream publish otherwise looks like a slow ack: a timeout)."""

    async def on_error(err: Exception) -> None:
        await _log_error(err)
        found = _REFUSED_PUBLISH.search(str(err))
        if found:
            refused.add(found.group(1))

    return on_error


PING_INTERVAL_SECONDS = 10
"""How often the client pings the server: a third ping due while two are unanswered (20-30 s of
silence) counts as a lost connection that the operating system did not report (a peer gone without
closing, a partition). nats-py's default of 2 min left a service reading nothing for 4-6 min; a
busy event loop delays the pings as much as the answers, so this stays clear of false alarms."""
RECONNECT_WAIT_MAX = 0.5
# a reader holds a message the server said more follow until the next one comes; after this long with
# nothing, it asks the stream leader whether anything does (read())
HELD_CHECK_SECONDS = 0.5
"""Seconds at most between two attempts to reconnect to a server (nats-py waits 2 s by default, and
a restarted server was found 1-2 s late): attempts 50 ms doubling to this, with jitter."""


def _reconnect_soon(servers: list[Any], _info: dict[str, Any]) -> tuple[Any, float]:
    """nats-py's reconnect handler: the server tried least since the connection was lost (round robin
    over a cluster's URLs), at once for a first try, then after 50 ms doubling up to
    RECONNECT_WAIT_MAX, times a random 0.5-1 (many clients of one restarted server spread out)."""
    chosen = min(servers, key=lambda server: server.reconnects)
    if chosen.reconnects == 0:
        return chosen, 0.0
    wait = min(RECONNECT_WAIT_MAX, 0.05 * 2 ** min(chosen.reconnects - 1, 10))
    return chosen, wait * random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not a secret


async def connect(
    servers: str | list[str],
    *,
    replicas: int | None = None,
    timeout: float = 5.0,
    credentials: Credentials | None = None,
    create_stream: bool | None = None,
) -> NatsBus:
    """Connect to ``servers`` and make sure the ``KQ_LOG`` stream is there.

    ``credentials``: the NATS user and its password file; default
    :func:`credentials_from_env` (``$KUEUE_ES_NATS_USER`` and
    ``$KUEUE_ES_NATS_PASSWORD_FILE``), else whatever the URL holds (none on a
    server without authentication). ``$KUEUE_ES_NATS_CA_FILE`` names the CA
    that signed the server's certificate for ``tls://`` URLs.

    ``create_stream``: create the stream, or bring an existing one to the
    configuration, with ``replicas`` (default ``$KUEUE_ES_STREAM_REPLICAS``, 1
    when unset). By default only ``admin`` (:func:`ensure_log_stream`) and a
    connection without a user (a server without authentication: tests) do;
    every service user only checks that the stream exists (STREAM.INFO: its
    users may not create, update, delete or purge it), waiting up to 4 x
    ``timeout`` for an admin to create it.

    ``timeout`` (seconds) bounds each request; stream creation is retried for up
    to 4 x ``timeout`` while a fresh cluster settles. The first connection gives
    up after three tries (about a second per server); once connected, the client
    reconnects forever, a first try at once and then every 50-500 ms
    (:func:`_reconnect_soon`), and every reader resumes from its position as soon as
    it is back (:meth:`NatsBus.read`, :meth:`NatsBus.status`). Raises BusError; its message never shows a password
    given in a URL (``nats://user:password@host``).
    """
    if replicas is None:
        replicas = stream_replicas_from_env()
    if credentials is None:
        credentials = credentials_from_env()
    user = credentials.user if credentials is not None else _url_user(servers)
    if create_stream is None:
        create_stream = user in (None, permissions.ADMIN)
    options: dict[str, Any] = {}
    if credentials is not None:
        with _wrapped(f"Reading the password of NATS user {credentials.user!r}"):
            options.update(user=credentials.user, password=credentials.password())
    ca_file = os.environ.get(CA_FILE_ENV, "").strip()
    if ca_file:
        options["tls"] = ssl.create_default_context(cafile=ca_file)
    # bounded: nats-py retries a TLS handshake that fails verification for ever
    refused: set[str] = set()
    built: list[NatsBus] = []  # the bus, once there: the connection's callbacks tell it

    async def disconnected() -> None:
        if built:
            built[0].disconnected()

    async def reconnected() -> None:
        if built:
            built[0].reconnected()

    with _wrapped(f"Connecting to {_without_password(servers)}"):
        async with asyncio.timeout(max(30.0, 6 * timeout)):
            nc = await nats.connect(
                servers,
                name=f"kueue-es {user}" if user else "kueue-es",
                connect_timeout=max(1, int(timeout)),
                max_reconnect_attempts=2,
                reconnect_time_wait=0.5,
                error_cb=_error_hook(refused),
                disconnected_cb=disconnected,
                reconnected_cb=reconnected,
                reconnect_to_server_handler=_reconnect_soon,
                ping_interval=PING_INTERVAL_SECONDS,
                max_outstanding_pings=2,
                **options,
            )
    nc.options["max_reconnect_attempts"] = -1
    bus = NatsBus(nc=nc, replicas=replicas, timeout=timeout, refused=refused)
    built.append(bus)
    bus.creates_streams = create_stream
    try:
        if create_stream:
            await bus.ensure_log_stream_config()
        else:
            await bus.check_stream(base.STREAM_NAME)
    except BaseException:
        await bus.close()
        raise
    return bus


async def ensure_log_stream(
    servers: str | list[str],
    *,
    credentials: Credentials | None = None,
    replicas: int | None = None,
    timeout: float = 5.0,
    public: bool = True,
) -> None:
    """As ``admin``: create ``KQ_LOG`` and the public stream ``KQ_PUB`` (unless ``public`` is False) or bring
    them to their configuration,
    the deciders' lease bucket ``KQ_LEASES`` (:mod:`kueue_es.events.bus.leases`) and the snapshot bucket
    ``KQ_SNAPSHOTS`` (:mod:`kueue_es.snapshots`).

    What ``kueue-es up`` and ``demo`` do before starting the services, and the
    Job ``kueue-es-nats-setup`` of deploy/ (``kueue-es nats-setup``).
    """
    bus = await connect(servers, credentials=credentials, replicas=replicas, timeout=timeout, create_stream=True)
    try:
        await leases.ensure_bucket(bus.nc, replicas=bus.replicas, timeout=timeout)
        await bus.ensure_snapshot_bucket()
        if public:
            await bus.ensure_public_stream()
    finally:
        await bus.close()


USER_ENV = "KUEUE_ES_NATS_USER"
PASSWORD_FILE_ENV = "KUEUE_ES_NATS_PASSWORD_FILE"
CA_FILE_ENV = "KUEUE_ES_NATS_CA_FILE"


def credentials_from_env() -> Credentials | None:
    """``$KUEUE_ES_NATS_USER`` with ``$KUEUE_ES_NATS_PASSWORD_FILE``; None when the user is unset.

    Raises BusError when only one of the two is set.
    """
    user = os.environ.get(USER_ENV, "").strip()
    password_file = os.environ.get(PASSWORD_FILE_ENV, "").strip()
    if not user and not password_file:
        return None
    if not user or not password_file:
        raise base.BusError(f"Set both ${USER_ENV} and ${PASSWORD_FILE_ENV} (the NATS user and its password file).")
    return Credentials(user=user, password_file=Path(password_file))


def _url_user(servers: str | list[str]) -> str | None:
    """The user named in the first URL that names one (``nats://user:password@host``), else None."""
    for url in [servers] if isinstance(servers, str) else servers:
        match = re.match(r"^[a-z]+://([^:/@]+)(?::[^@/]*)?@", url)
        if match:
            return match.group(1)
    return None


REPLICAS_ENV = "KUEUE_ES_STREAM_REPLICAS"


def stream_replicas_from_env() -> int:
    """``$KUEUE_ES_STREAM_REPLICAS`` as a positive integer, 1 when unset; BusError when malformed."""
    raw = os.environ.get(REPLICAS_ENV, "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or int(raw) < 1:
        raise base.BusError(f"${REPLICAS_ENV} must be a positive integer (the KQ_LOG stream's replicas), got {raw!r}.")
    return int(raw)


def _without_password(servers: str | list[str]) -> str:
    """The server URLs for messages, with any password replaced by ``***``."""
    urls = [servers] if isinstance(servers, str) else list(servers)
    return ", ".join(re.sub(r"(//[^:/@]*):[^@/]*@", r"\1:***@", url) for url in urls)


def _log_config(replicas: int) -> api.StreamConfig:
    return api.StreamConfig(
        name=base.STREAM_NAME,
        subjects=list(base.STREAM_SUBJECTS),
        storage=api.StorageType.FILE,
        num_replicas=replicas,
        retention=api.RetentionPolicy.LIMITS,
        discard=api.DiscardPolicy.NEW,
        duplicate_window=600,
        allow_atomic=True,
        allow_direct=True,
        max_msg_size=rules.MAX_MESSAGE_BYTES,
        deny_delete=True,  # the log is the audit trail: no message is ever deleted;
        # purged only below a verified snapshot, by the compactor (kueue_es.snapshots): the purge
        # API is denied to every other user but admin (permissions.py), not by the stream
        deny_purge=False,
    )


def _public_config(replicas: int) -> api.StreamConfig:
    """KQ_PUB: the public stream, written only by the publisher (no source: an outside subscriber reads
    what the batch verifier passed, nothing else), kept like the log (limits, file storage), a repeated
    Nats-Msg-Id within PUBLIC_DUPLICATE_WINDOW seconds stored once."""
    return api.StreamConfig(
        name=PUBLIC_STREAM_NAME,
        subjects=list(PUBLIC_SUBJECTS),
        storage=api.StorageType.FILE,
        num_replicas=replicas,
        retention=api.RetentionPolicy.LIMITS,
        discard=api.DiscardPolicy.NEW,
        duplicate_window=PUBLIC_DUPLICATE_WINDOW,
        allow_direct=True,
        max_msg_size=rules.MAX_MESSAGE_BYTES,
        sources=[],
    )


def _check_public(message: base.OutgoingMessage) -> None:
    """Raise BusError unless ``message`` can go to KQ_PUB: a literal subject under ``kq.pub.>``, a Msg-Id,
    no ``Nats-*`` header of its own, within the size limit (:mod:`kueue_es.events.bus.rules`)."""
    subject = message.subject
    if not rules.is_literal(subject) or not any(rules.matches(subject, p) for p in PUBLIC_SUBJECTS):
        raise base.BusError(
            f"The subject {subject!r} is not a literal subject of {PUBLIC_STREAM_NAME} {PUBLIC_SUBJECTS}."
        )
    if not message.msg_id:
        raise base.BusError(f"The message for {subject!r} has an empty msg_id; every message needs one.")
    if any(key.lower().startswith("nats-") for key in message.headers):
        raise base.BusError(f"The message {message.msg_id!r} on {subject!r} carries a Nats-* header of its own.")
    size = len(message.data) + rules.headers_size({**message.headers, "Nats-Msg-Id": message.msg_id})
    if size + rules.HEADER_ALLOWANCE > rules.MAX_MESSAGE_BYTES:
        raise base.BusError(f"The message {message.msg_id!r} on {subject!r} takes {size} bytes with headers.")


SNAPSHOT_BUCKET = "KQ_SNAPSHOTS"
"""The JetStream Object Store bucket beside the log holding its verified snapshots (kueue_es.snapshots)."""
SNAPSHOT_STREAM = f"OBJ_{SNAPSHOT_BUCKET}"


def _snapshot_config(replicas: int) -> Any:
    from nats.js.api import ObjectStoreConfig

    return ObjectStoreConfig(
        bucket=SNAPSHOT_BUCKET,
        description="kueue-es: verified snapshots of the folds of KQ_LOG",
        storage=api.StorageType.FILE,
        replicas=replicas,
    )


def _log_message(msg: Msg, *, seq: int, pending: int = 0) -> base.LogMessage:
    return base.LogMessage(
        seq=seq,
        subject=msg.subject,
        data=msg.data or b"",
        headers=rules.stored_headers(msg.headers),
        pending=pending,
        time_ms=_stored_ms(msg.reply or ""),
    )


def _stored_ms(reply: str) -> int:
    """When a delivered message was stored (ms since the epoch), from the nanoseconds in its reply
    subject (the forms :func:`_delivery_position` reads); 0 for any other reply."""
    tokens = reply.split(".")
    if tokens[0] != "$JS" or len(tokens) < 9:
        return 0
    stamp = tokens[7] if len(tokens) == 9 else tokens[9] if len(tokens) >= 11 else ""
    return int(stamp) // 1_000_000 if stamp.isdigit() else 0


class NatsBus(base.Bus):
    """The bus contract on one nats-py connection; build it with :func:`connect`."""

    def __init__(self, *, nc: Client, replicas: int, timeout: float, refused: set[str] | None = None) -> None:
        self.nc = nc
        self.refused = refused if refused is not None else set()  # subjects the server refused us (permissions)
        self.replicas = replicas
        self.timeout = timeout
        self.creates_streams = False  # whether this connection may create streams (admin, or no user): connect
        self._js = nc.jetstream(timeout=timeout)
        self._jsm = nc.jsm(timeout=timeout)
        self._readers: set[_Reader] = set()
        self._durables: set[NatsDurable] = set()
        self.epoch = 0  # counts the connection's comebacks: a reader confirmed in an older one is not consuming
        self._back: asyncio.Event = asyncio.Event()  # set while connected
        if nc.is_connected:
            self._back.set()
        self._retrying: collections.Counter[str] = collections.Counter()  # operations being tried again
        # called (no arguments) each time the connection comes back: a core-NATS publisher may
        # have lost what it wrote just before the connection went (perfbench.chaos.FactPublisher)
        self.reconnect_hooks: list[Callable[[], None]] = []

    # -- the connection's comings and goings -------------------------------------------------------

    def disconnected(self) -> None:
        """The connection was lost (nats-py's ``disconnected_cb``): no reader consumes until it is back."""
        self._back.clear()
        if not self.nc.is_closed:
            log.warning("nats_disconnected", readers=len(self._readers), durables=len(self._durables))
        for reader in self._readers:
            reader.lost()

    def reconnected(self) -> None:
        """The connection is back (nats-py's ``reconnected_cb``): every reader resubscribes from its
        position at once, and every durable's fetch under way asks again, instead of waiting for a
        heartbeat missed (10 s) or a pull request's expiry."""
        self.epoch += 1
        self._back.set()
        log.info("nats_reconnected", epoch=self.epoch, readers=len(self._readers), durables=len(self._durables))
        for reader in self._readers:
            reader.resubscribe()
        for durable in self._durables:
            durable.reconnected()
        for hook in list(self.reconnect_hooks):
            try:
                hook()
            except Exception as err:  # a hook's fault must not keep the readers from resuming
                log.warning("reconnect_hook_failed", hook=repr(hook), error=repr(err))

    async def _connected(self, *, within: float | None = None) -> None:
        """Return once connected (a request sent meanwhile would only wait out its timeout); raise
        BusError when the connection is closed, nats-py's TimeoutError when not back ``within`` s."""
        deadline = None if within is None else time.monotonic() + within
        while not self._back.is_set():
            if self.nc.is_closed:
                raise base.BusError("The connection to NATS is closed.")
            if deadline is not None and time.monotonic() > deadline:
                raise nats.errors.TimeoutError
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_ReadBuffer.CLOSED_CHECK_SECONDS):
                    await self._back.wait()
        if self.nc.is_closed:
            raise base.BusError("The connection to NATS is closed.")

    def status(self) -> base.BusStatus:
        """The connection and its readers (:class:`base.BusStatus`): a durable counts as consuming once
        a fetch was answered since the connection last came back."""
        readers = list(self._readers)
        durables = list(self._durables)
        connected = bool(self.nc.is_connected)
        confirmed = sum(d.confirmed_epoch == self.epoch for d in durables) if connected else 0
        return base.BusStatus(
            connected=connected,
            readers=len(readers) + len(durables),
            consuming=sum(r.consuming for r in readers) + confirmed,
            caught_up=all(r.caught_up for r in readers),
            lag=sum(r.lag for r in readers) + sum(d.backlog for d in durables),
            retrying=tuple(sorted(what for what, count in self._retrying.items() if count > 0)),
        )

    @contextlib.contextmanager
    def _noting_retries(self, what: str) -> Iterator[None]:
        """Count ``what`` as being retried (:meth:`status`) while the block runs."""
        self._retrying[what] += 1
        try:
            yield
        finally:
            self._retrying[what] -= 1

    async def ensure_stream(self, config: api.StreamConfig) -> None:
        """Create the stream ``config.name`` or bring an existing one to ``config``.

        Retries while JetStream is not ready (fresh cluster, no meta leader), and
        returns only once a replicated stream has elected its leader: before
        that, a publish finds no responder.
        """
        deadline = time.monotonic() + 4 * self.timeout
        while True:
            try:
                with _wrapped(f"Creating the stream {config.name}"):
                    try:
                        info = await self._jsm.add_stream(config)
                    except nats.js.errors.BadRequestError as err:
                        if err.err_code != ERR_STREAM_NAME_IN_USE:
                            raise
                        info = await self._jsm.update_stream(config)
                    while info.cluster is not None and info.cluster.leader is None and (config.num_replicas or 1) > 1:
                        await asyncio.sleep(0.02)
                        info = await self._jsm.stream_info(str(config.name))
                return
            except base.BusError as err:
                cause = err.__cause__
                transient = (
                    isinstance(
                        cause,
                        (
                            nats.errors.TimeoutError,
                            nats.errors.NoRespondersError,
                            nats.js.errors.ServiceUnavailableError,
                        ),
                    )
                    or getattr(cause, "err_code", None) in _TRANSIENT_ERR_CODES
                )
                if not transient or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    async def ensure_log_stream_config(self) -> None:
        """:meth:`ensure_stream` for KQ_LOG. A log created with ``deny_purge`` (by a kueue-es before
        snapshots) keeps it, as the server cannot lift it: retention then never purges it (the
        compactor says so), everything else works as before."""
        try:
            await self.ensure_stream(_log_config(self.replicas))
        except base.BusError as err:
            if "deny purge" not in str(err):
                raise
            config = _log_config(self.replicas)
            config.deny_purge = True
            log.warning("log_purge_denied", detail="KQ_LOG was created with deny_purge: it is never purged")
            await self.ensure_stream(config)

    async def check_stream(self, name: str) -> None:
        """Return once the stream ``name`` exists (STREAM.INFO), waiting up to 4 x ``timeout`` for it.

        What a service user does instead of creating the stream: only ``admin`` may.
        Raises NotFoundError when it is still missing, BusError when it cannot be asked.
        """
        deadline = time.monotonic() + 4 * self.timeout
        while True:
            try:
                with _wrapped(f"Looking for the stream {name}"):
                    await self._jsm.stream_info(name)
                return
            except base.NotFoundError as err:
                if time.monotonic() > deadline:
                    raise base.NotFoundError(
                        f"The stream {name} does not exist; an admin creates it (kueue-es nats-setup, as NATS user"
                        f" {permissions.ADMIN}): {err}"
                    ) from err
            except base.BusError as err:
                transient = (
                    isinstance(
                        err.__cause__,
                        (
                            nats.errors.TimeoutError,
                            nats.errors.NoRespondersError,
                            nats.js.errors.ServiceUnavailableError,
                        ),
                    )
                    or getattr(err.__cause__, "err_code", None) in _TRANSIENT_ERR_CODES
                )
                if not transient or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.1)

    async def ensure_public_stream(self) -> None:
        """Create ``KQ_PUB`` (:func:`_public_config`) or bring it to its configuration (as admin).

        Its messages are written by the publisher (``kueue-es service publisher``) from the verified log;
        a KQ_PUB of kueue-es before the publisher, sourced from KQ_LOG through a subject transform, loses
        its source here (its messages stay)."""
        await self.ensure_stream(_public_config(self.replicas))

    async def publish_public(self, message: base.OutgoingMessage) -> base.PublishAck:
        """Append ``message`` to ``KQ_PUB`` (the publisher's right only: events/bus/permissions.py), with
        ``Nats-Msg-Id`` = ``message.msg_id``: a repeat within PUBLIC_DUPLICATE_WINDOW seconds returns the
        first one's sequence. Raises BusError for a subject outside ``kq.pub.>``, a ``Nats-*`` header or
        a message over the size limit; TransientBusError (after retrying for up to PUBLISH_RETRY_SECONDS)
        while the server does not answer."""
        _check_public(message)
        headers = {**message.headers, "Nats-Msg-Id": message.msg_id}
        what = f"Publishing {message.msg_id!r} on {message.subject!r}"
        with _wrapped(what):
            try:
                ack = await self._js.publish(message.subject, message.data, headers=headers, stream=PUBLIC_STREAM_NAME)
            except Exception as err:
                if not _publish_retryable(err) or message.subject in self.refused:
                    raise  # a refused publish times out too: not worth trying again
                retrying = _retrying(what, retryable=_publish_retryable, seconds=PUBLISH_RETRY_SECONDS)
                with self._noting_retries("publish"):
                    async for attempt in retrying:
                        with attempt:
                            await self._connected(within=self.timeout)
                            ack = await self._js.publish(
                                message.subject, message.data, headers=headers, stream=PUBLIC_STREAM_NAME
                            )
        return base.PublishAck(seq=ack.seq, duplicate=bool(ack.duplicate))

    async def last_public(self) -> base.LogMessage | None:
        """The last message of ``KQ_PUB`` (its sequence there, subject, data, headers), None when it is
        empty. Raises NotFoundError when there is no KQ_PUB."""
        with _wrapped(f"Reading the state of {PUBLIC_STREAM_NAME}"):
            info = await self._jsm.stream_info(PUBLIC_STREAM_NAME)
        last = int(info.state.last_seq or 0)
        if last == 0 or int(info.state.messages or 0) == 0:
            return None
        with _wrapped(f"Reading the message at {last} of {PUBLIC_STREAM_NAME}"):
            raw = await self._jsm.get_msg(PUBLIC_STREAM_NAME, seq=last)
        return base.LogMessage(
            seq=int(raw.seq or last), subject=str(raw.subject), data=raw.data or b"", headers=dict(raw.headers or {})
        )

    async def publish(self, message: base.OutgoingMessage) -> base.PublishAck:
        """Append ``message``; a duplicate ``msg_id`` within 600 s returns the original seq."""
        rules.check_outgoing(message)
        headers = {**message.headers, "Nats-Msg-Id": message.msg_id}
        if message.expected_last_subject_seq is not None:
            headers["Nats-Expected-Last-Subject-Sequence"] = str(message.expected_last_subject_seq)
        what = f"Publishing {message.msg_id!r} on {message.subject!r}"
        with _wrapped(what), _refused_as_conflict(message):
            try:  # the retrying machinery is built only once a first try failed (it costs more than a publish)
                ack = await self._js.publish(message.subject, message.data, headers=headers, stream=base.STREAM_NAME)
            except Exception as err:
                if not _publish_retryable(err) or message.subject in self.refused:
                    raise  # a refused publish times out too: not worth trying again
                log.warning("publish_retry", what=what, error=repr(err))
                retrying = _retrying(what, retryable=_publish_retryable, seconds=PUBLISH_RETRY_SECONDS)
                with self._noting_retries("publish"):
                    async for attempt in retrying:
                        with attempt:
                            await self._connected(within=self.timeout)  # not a request sent into the void
                            ack = await self._js.publish(
                                message.subject, message.data, headers=headers, stream=base.STREAM_NAME
                            )
        return base.PublishAck(seq=ack.seq, duplicate=bool(ack.duplicate))

    async def commit_batch(
        self,
        *,
        head: base.OutgoingMessage,
        expected_head_seq: int,
        rest: Sequence[base.OutgoingMessage],
        head_filter: str | None = None,
    ) -> int:
        """Append ``head`` and ``rest`` as one ADR-50 atomic batch (see :class:`base.Bus`).

        ``head_filter`` goes in ``Nats-Expected-Last-Subject-Sequence-Subject`` (nats-server
        >= 2.11): the server then compares ``expected_head_seq`` with the last message on
        any subject of the filter, in a batch too (checked on one server and on a 3-node
        cluster: tests/bus/test_contract.py). A timeout or a lost connection raises
        BusError: the batch may or may not have landed; fold the log to find out (never
        re-send the same batch).
        """
        rules.check_batch(head=head, rest=rest)
        if head_filter is not None:
            rules.tokens(head_filter)
        expect = {"Nats-Expected-Last-Subject-Sequence": str(expected_head_seq)}
        if head_filter is not None:
            expect["Nats-Expected-Last-Subject-Sequence-Subject"] = head_filter
        what = f"Committing the batch headed by {head.msg_id!r}"
        return await self._send_batch([head, *rest], expect=expect, what=what, expected=expected_head_seq)

    async def publish_together(self, messages: Sequence[base.OutgoingMessage]) -> int:
        """Append ``messages`` as one ADR-50 atomic batch with no expectation (see :class:`base.Bus`); a single
        message is published as it is. A timeout or a lost connection raises BusError: the batch may or may not
        have landed, and sent again it is refused as a duplicate if it did."""
        if not messages:
            raise base.BusError("An atomic batch needs at least one message.")
        rules.check_batch(head=messages[0], rest=messages[1:])
        if any(message.expected_last_subject_seq is not None for message in messages):
            raise base.BusError("A batch published together expects no subject sequence.")
        if len(messages) == 1:
            return (await self.publish(messages[0])).seq
        what = f"Publishing the batch headed by {messages[0].msg_id!r}"
        return await self._send_batch(list(messages), expect={}, what=what, expected=0)

    async def _send_batch(
        self, messages: list[base.OutgoingMessage], *, expect: dict[str, str], what: str, expected: int
    ) -> int:
        """Send ``messages`` as one atomic batch, ``expect`` (headers) on the first; the sequence of the last."""
        head = messages[0]
        batch_id = uuid.uuid4().hex
        with _wrapped(what):
            for index, message in enumerate(messages, 1):
                headers = {
                    **message.headers,
                    "Nats-Msg-Id": message.msg_id,
                    "Nats-Batch-Id": batch_id,
                    "Nats-Batch-Sequence": str(index),
                }
                if index == 1:
                    headers.update(expect)
                if index == len(messages):
                    headers["Nats-Batch-Commit"] = "1"
                if index == 1:
                    # No responders: no server took the head, so the batch never began and asking
                    # again is safe (a fresh clustered stream's subjects reach every node a moment
                    # after its leader is elected).
                    async for attempt in _retrying(what, retryable=_no_responders):
                        with attempt:
                            reply = await self.nc.request(
                                message.subject, message.data, headers=headers, timeout=self.timeout
                            )
                elif index == len(messages):
                    reply = await self.nc.request(message.subject, message.data, headers=headers, timeout=self.timeout)
                if index == len(messages):
                    return self._batch_outcome(reply.data, head=head, expected=expected)
                if index == 1:
                    if reply.data:
                        self._batch_outcome(reply.data, head=head, expected=expected)
                else:
                    await self.nc.publish(message.subject, message.data, headers=headers)
        raise AssertionError("unreachable")

    @staticmethod
    def _batch_outcome(data: bytes, *, head: base.OutgoingMessage, expected: int) -> int:
        try:
            answer = json.loads(data)
        except ValueError as err:
            raise base.BusError(f"The batch headed by {head.msg_id!r} got an unreadable reply: {data[:200]!r}") from err
        error = answer.get("error") if isinstance(answer, dict) else {"description": repr(answer)}
        if error is None and isinstance(answer.get("seq"), int):
            return int(answer["seq"])
        error = error or {"description": f"no sequence in the ack {answer!r}"}
        code, text = error.get("err_code"), error.get("description", "")
        if code in (ERR_WRONG_LAST_SEQUENCE, ERR_WRONG_LAST_SEQUENCE_IN_FLIGHT):
            raise base.ConflictError(
                f"The head {head.subject!r} moved past sequence {expected} ({text}); nothing was stored."
            )
        if code == ERR_BATCH_DUPLICATE:
            raise base.DuplicateBatchError(
                f"The batch headed by {head.msg_id!r} repeats a stored msg_id ({text}); nothing was stored."
            )
        raise base.BusError(f"The batch headed by {head.msg_id!r} was refused: err_code {code}: {text}.")

    async def read(
        self, *, subjects: Sequence[str] = ("kq.>",), start_seq: int = 1
    ) -> AsyncGenerator[base.LogMessage, None]:
        """Yield matching messages from ``start_seq`` on through an ordered consumer, then wait.

        ``pending`` is the server's ``num_pending`` at delivery. Raises BusError
        when the connection closes under the reader.

        The consumer is a callback subscription: nats-py hands each message to
        :func:`_ReadBuffer.put`, which only queues it, and this generator takes
        everything queued without one task per message (``next_msg`` creates a
        task, a ``uuid4`` and a timeout for every message: 2-3 x the CPU, docs/benchmarks.md).
        Order and exactly-once are nats-py's ordered consumer's: a gap in the
        consumer sequence (a message dropped) makes it recreate the consumer from
        the last stream sequence delivered, and the callback runs in delivery order.

        When the connection comes back (:meth:`reconnected`; a restarted server has lost
        every ordered consumer, which live in memory), the reader takes what the old
        consumer delivered, then subscribes again from the next sequence at once, trying
        again every 50-500 ms while JetStream is not ready: nats-py alone would notice
        only after two idle heartbeats were missed (10 s) and then try once. Messages
        before the next sequence (a consumer of before the comeback still delivering)
        are dropped, so nothing is yielded twice.
        """
        filters = rules.normalize_filters(subjects)
        wanted = _subject_test(filters)
        reader = _Reader(filters=filters, consumer_filters=(WHOLE_LOG,) if wanted is not None else filters)
        next_seq = max(start_seq, 1)
        self._readers.add(reader)
        sub: Any = None
        held: tuple[Msg, int, int] | None = None  # (message, seq, pending) waiting for what follows it
        try:
            while True:
                sub = await self._subscribe(reader, next_seq)
                queued = reader.buffer.queued
                while queued or not reader.stale:
                    if not queued:
                        if held is None:
                            await reader.buffer.wait(self.nc)
                        elif not await reader.buffer.wait(
                            self.nc, timeout=HELD_CHECK_SECONDS
                        ) and not await self._anything_after(reader.consumer_filters, next_seq - 1):
                            # the server said more was coming and nothing is there: its count is wrong
                            # (seen on a 3-node cluster: 2 too many for good); a new consumer counts again
                            log.warning("pending_miscounted", seq=next_seq - 1, said=held[2], filters=reader.filters)
                            yield _log_message(held[0], seq=held[1], pending=0)
                            held = None
                            reader.delivered(next_seq - 1, 0)
                            break
                        continue
                    msg = queued.popleft()
                    seq, pending = _position(msg)
                    if seq < next_seq:
                        continue
                    next_seq = seq + 1
                    if wanted is not None and not wanted(msg.subject):
                        reader.delivered(seq, pending)
                        if held is not None and pending == 0:  # only unwanted ones followed it: the end
                            yield _log_message(held[0], seq=held[1], pending=0)
                            held = None
                        continue
                    if held is not None:
                        yield _log_message(held[0], seq=held[1], pending=held[2])
                        held = None
                    reader.delivered(seq, pending)
                    if pending > 0:
                        # whether anything (wanted) follows is known only from the next ones, already on
                        # their way: the server's pending counts unwanted messages too, and it can be wrong
                        held = (msg, seq, pending)
                        continue
                    yield _log_message(msg, seq=seq, pending=pending)
                if held is not None:  # the consumer is made again from next_seq: nothing is lost
                    yield _log_message(held[0], seq=held[1], pending=held[2])
                    held = None
                await _drop(sub)
                sub = None
        finally:
            self._readers.discard(reader)
            if sub is not None and not self.nc.is_closed:
                await _drop(sub)

    async def _anything_after(self, filters: Sequence[str], seq: int) -> bool:
        """Whether the log holds a message on one of ``filters`` after ``seq`` (the stream leader's
        last message of each filter); True when that cannot be read now (the reader waits on)."""
        try:
            for subject in filters:
                if await self.last_subject_seq(subject) > seq:
                    return True
        except base.BusError:
            return True
        return False

    async def _subscribe(self, reader: _Reader, next_seq: int) -> Any:
        """An ordered consumer for ``reader`` from ``next_seq`` on (once connected; transient
        failures tried again every 50-500 ms for as long as the connection is open)."""
        what = f"Reading {reader.filters} from {next_seq}"
        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception_type(base.TransientBusError),
            wait=tenacity.wait_exponential_jitter(multiplier=0.05, max=RECONNECT_WAIT_MAX, jitter=0.05),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                await self._connected()
                reader.fresh()
                with _wrapped(what):
                    last = await self._jsm.stream_info(base.STREAM_NAME)
                    end = int(last.state.last_seq)
                    # an ordered consumer asked to start past the end counts the skipped messages as pending
                    config = _ordered_config(
                        reader.consumer_filters, start=min(next_seq, end + 1), inbox=self.nc.new_inbox()
                    )
                    # made here, not by js.subscribe, for its answer: what is pending (a service user may
                    # not ask CONSUMER.INFO of an ephemeral consumer)
                    info = await self._jsm.add_consumer(base.STREAM_NAME, config=config)
                    sub = await self._js.subscribe_bind(
                        stream=base.STREAM_NAME,
                        config=config,
                        consumer=str(info.name),
                        cb=reader.buffer.put,
                        ordered_consumer=True,
                    )
                reader.subscribed(end=end, pending=int(info.num_pending or 0) if end >= next_seq else 0)
                if self.epoch:
                    log.info("reader_resumed", filters=list(reader.filters), seq=next_seq, epoch=self.epoch)
                return sub
        raise AssertionError("unreachable")

    async def last_seq(self) -> int:
        """The stream's last sequence (0 when empty), from the stream leader."""
        with _wrapped(f"Reading the state of {base.STREAM_NAME}"):
            info = await self._jsm.stream_info(base.STREAM_NAME)
        return int(info.state.last_seq)

    async def first_seq(self) -> int:
        """The stream's first sequence (1 until purged below a snapshot; last + 1 when purged empty)."""
        with _wrapped(f"Reading the state of {base.STREAM_NAME}"):
            info = await self._jsm.stream_info(base.STREAM_NAME)
        return max(1, int(info.state.first_seq))

    # -- retention: snapshots beside the log, purges below them (kueue_es.snapshots) ---------------

    async def stream_bytes(self) -> int:
        """The bytes the log's messages take on the server."""
        with _wrapped(f"Reading the state of {base.STREAM_NAME}"):
            info = await self._jsm.stream_info(base.STREAM_NAME)
        return int(info.state.bytes)

    async def message_time_ms(self, seq: int) -> int:
        """When the message at ``seq`` was stored, ms since the epoch; NotFoundError when there is none."""
        with _wrapped(f"Reading the message at {seq}"):
            raw = await self._jsm.get_msg(base.STREAM_NAME, seq=seq)
        return int(raw.time.timestamp() * 1000) if raw.time is not None else 0

    async def purge_below(self, seq: int) -> int:
        """Purge the log's messages before ``seq`` (JetStream purge with ``keep from seq``: the
        compactor's or admin's right only); returns how many were purged."""
        before = await self.first_seq()
        with _wrapped(f"Purging {base.STREAM_NAME} below #{seq}"):
            await self._jsm.purge_stream(base.STREAM_NAME, seq=seq)
        return max(0, await self.first_seq() - before)

    async def durable_done_through(self, name: str) -> int | None:
        """The stream sequence up to which the durable consumer ``name`` has acknowledged every
        message of its filter: the log's last sequence (read first) when nothing is pending or
        unacknowledged, else its ack floor. None when there is no such consumer."""
        last = await self.last_seq()
        try:
            with _wrapped(f"Reading the durable consumer {name!r}"):
                info = await self._jsm.consumer_info(base.STREAM_NAME, name)
        except base.NotFoundError:
            return None
        if not info.num_pending and not info.num_ack_pending:
            return last
        floor = info.ack_floor
        return int(floor.stream_seq or 0) if floor is not None else 0

    async def ensure_snapshot_bucket(self) -> None:
        """Create the snapshot bucket (:data:`SNAPSHOT_BUCKET`) unless it is there (admin, or no auth)."""
        with _wrapped(f"Creating the object store {SNAPSHOT_BUCKET}"):
            try:
                await self._js.object_store(SNAPSHOT_BUCKET)
            except nats.js.errors.BucketNotFoundError:
                await self._js.create_object_store(SNAPSHOT_BUCKET, config=_snapshot_config(self.replicas))

    async def _snapshots(self) -> Any | None:
        try:
            with _wrapped(f"Opening the object store {SNAPSHOT_BUCKET}"):
                return await self._js.object_store(SNAPSHOT_BUCKET)
        except base.NotFoundError:
            return None
        except base.BusError as err:
            if isinstance(err.__cause__, nats.js.errors.BucketNotFoundError):
                return None
            raise

    async def snapshot_names(self) -> list[str]:
        """The names of the objects in the snapshot bucket ([] when there is no bucket)."""
        store = await self._snapshots()
        if store is None:
            return []
        with _wrapped(f"Listing {SNAPSHOT_BUCKET}"):
            try:
                return [str(info.name) for info in await store.list(ignore_deletes=True)]
            except nats.js.errors.NotFoundError:  # an empty bucket
                return []

    async def get_snapshot(self, name: str) -> bytes:
        """The bytes of the snapshot object ``name``; NotFoundError when it is not there."""
        store = await self._snapshots()
        if store is None:
            raise base.NotFoundError(f"There is no object store {SNAPSHOT_BUCKET}.")
        with _wrapped(f"Reading {name!r} from {SNAPSHOT_BUCKET}"):
            return bytes((await store.get(name)).data or b"")

    async def put_snapshot(self, name: str, data: bytes) -> None:
        """Store ``data`` as the snapshot object ``name`` (the compactor)."""
        store = await self._snapshots()
        if store is None:
            raise base.NotFoundError(f"There is no object store {SNAPSHOT_BUCKET}: run kueue-es nats-setup.")
        with _wrapped(f"Writing {name!r} to {SNAPSHOT_BUCKET}"):
            await store.put(name, data)

    async def delete_snapshot(self, name: str) -> None:
        """Delete the snapshot object ``name`` (the compactor; its chunks are purged)."""
        store = await self._snapshots()
        if store is not None:
            with _wrapped(f"Deleting {name!r} from {SNAPSHOT_BUCKET}"):
                await store.delete(name)

    async def last_subject_seq(self, subject: str) -> int:
        """The sequence of the last message on ``subject``, a literal subject or a filter (0 when none)."""
        rules.tokens(subject)
        try:
            with _wrapped(f"Reading the last message on {subject!r}"):
                raw = await self._jsm.get_msg(base.STREAM_NAME, subject=subject)
        except base.NotFoundError:
            return 0
        return int(raw.seq or 0)

    async def get(self, seq: int) -> base.LogMessage:
        """The message at ``seq``; raises NotFoundError when there is none."""
        if seq < 1:
            raise base.NotFoundError(f"There is no message at sequence {seq}; sequences start at 1.")
        with _wrapped(f"Reading the message at {seq}"):
            raw = await self._jsm.get_msg(base.STREAM_NAME, seq=seq)
        return base.LogMessage(
            seq=int(raw.seq or seq),
            subject=str(raw.subject),
            data=raw.data or b"",
            headers=rules.stored_headers(raw.headers),
            time_ms=int(raw.time.timestamp() * 1000) if raw.time is not None else 0,
        )

    async def durable(
        self,
        *,
        name: str,
        subjects: Sequence[str],
        ack_wait: float = 30.0,
        set_ack_wait: bool = False,
        set_filter: bool = False,
    ) -> base.DurableConsumer:
        """Create the durable pull consumer ``name`` (explicit ack) or bind to it.

        An existing consumer keeps its own filter unless ``set_filter`` (then it is
        updated to ``subjects`` when it differs: the dispatcher of event schema 17 reads
        the DecisionRecords too), and its own ``ack_wait`` unless ``set_ack_wait`` (then
        it is updated to ``ack_wait`` seconds when it differs: the standby dispatcher's
        short ack wait); nats-server edits both in place. On a replicated stream this returns
        once the consumer has a leader, so the first fetch is not lost.
        """
        filters = rules.normalize_filters(subjects)
        config = api.ConsumerConfig(
            durable_name=name,
            ack_policy=api.AckPolicy.EXPLICIT,
            ack_wait=ack_wait,
            deliver_policy=api.DeliverPolicy.ALL,
            max_ack_pending=rules.MAX_ACK_PENDING,
        )
        if len(filters) > 1:
            config.filter_subjects = list(filters)
        with _wrapped(f"Binding the durable consumer {name!r}"):
            sub = await self._js.pull_subscribe(filters[0], durable=name, stream=base.STREAM_NAME, config=config)
            deadline = time.monotonic() + self.timeout
            info = await self._jsm.consumer_info(base.STREAM_NAME, name)
            while info.cluster is not None and info.cluster.leader is None and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
                info = await self._jsm.consumer_info(base.STREAM_NAME, name)
            edited = info.config
            if set_ack_wait and info.config.ack_wait is not None and abs(info.config.ack_wait - ack_wait) > 1e-3:
                # nats-server updates an existing durable's ack wait in place (an editable field)
                edited = dataclasses.replace(edited, ack_wait=ack_wait)
                log.info("durable_ack_wait_set", durable=name, ack_wait=ack_wait, was=info.config.ack_wait)
            held = tuple(
                info.config.filter_subjects or ([info.config.filter_subject] if info.config.filter_subject else [])
            )
            if set_filter and sorted(held) != sorted(filters):
                # editable too (nats-server 2.10+): the consumer keeps its position and acks
                single = len(filters) == 1
                edited = dataclasses.replace(
                    edited,
                    filter_subject=filters[0] if single else None,
                    filter_subjects=None if single else list(filters),
                )
                log.info("durable_filter_set", durable=name, filters=list(filters), was=list(held))
            if edited is not info.config:
                await self._jsm.add_consumer(base.STREAM_NAME, config=edited)
        durable = NatsDurable(sub=sub, name=name, bus=self)
        self._durables.add(durable)
        return durable

    async def close(self) -> None:
        """Flush (pending acks included) and close the connection; waiting readers raise BusError."""
        if not self.nc.is_closed:
            with contextlib.suppress(nats.errors.Error):
                await self.nc.flush(timeout=max(1, int(self.timeout)))
            await self.nc.close()
        for reader in list(self._readers):
            reader.buffer.wake()
        for durable in list(self._durables):
            durable.reconnected()


WHOLE_LOG = "kq.>"
"""The one filter a reader of several subject filters asks the server for (:func:`_subject_test`)."""


def _subject_test(filters: Sequence[str]) -> Callable[[str], bool] | None:
    """For several filters, the test a subject must pass, applied here to a consumer of the whole log;
    None for one filter (the server filters).

    nats-server (its source at the 2.15 line) looks for a multi-filter consumer's next message in
    ``msgBlock.firstMatchingMulti``, which, while the block holds fewer subjects than messages
    after the position, walks every subject of the block that matches a filter, once per message
    delivered. The log has a subject per workload and a few messages on each (a bench log: 3
    subjects for 7 messages), so that walk is thousands of subjects for every message: measured
    with nats-server 2.15.1 (``scripts/bus_read_bench.py``, docs/benchmarks.md), ``kq.in.>`` and
    ``kq.dec.>`` as ``filter_subjects`` took the server 4.0-4.4 CPU s for 17,500 messages of a
    20,000-message log, against 0.07 s to send the whole log to this reader, whose own CPU was the
    same either way (0.28-0.33 s). A single filter takes the linear scan and is as cheap as
    ``kq.>`` (measured). So the server filters only a reader of one filter; one of several reads the whole
    log and drops here what its filters do not match (the deciders skip the dispatch results so,
    ``runtime.DECIDER_SUBJECTS``)."""
    if len(filters) < 2 or not all(rules.covers(WHOLE_LOG, f) for f in filters):
        return None
    if all(f.endswith(".>") and "*" not in f for f in filters):
        prefixes = tuple(f[:-1] for f in filters)
        return lambda subject: subject.startswith(prefixes)
    return lambda subject: any(rules.matches(subject, f) for f in filters)


def _ordered_config(filters: Sequence[str], *, start: int, inbox: str) -> api.ConsumerConfig:
    """The configuration of an ordered push consumer from stream sequence ``start``, as nats-py's
    ``js.subscribe(ordered_consumer=True)`` makes it: flow control, no acks, idle heartbeats every
    5 s, in memory, one replica."""
    config = api.ConsumerConfig(
        deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=start,
        deliver_subject=inbox,
        flow_control=True,
        ack_policy=api.AckPolicy.NONE,
        max_deliver=1,
        ack_wait=22 * 3600,
        idle_heartbeat=5,
        num_replicas=1,
        mem_storage=True,
    )
    if len(filters) > 1:
        config.filter_subjects = list(filters)
    else:
        config.filter_subject = filters[0]
    return config


async def _drop(sub: Any) -> None:
    """Unsubscribe an ordered consumer (nothing if the connection is gone), and stop its heartbeat
    and flow-control tasks whatever happens."""
    try:
        with contextlib.suppress(nats.errors.Error, OSError):
            await sub.unsubscribe()
    finally:
        jsi = getattr(getattr(sub, "_sub", None), "_jsi", None)
        for task in (getattr(jsi, "_hbtask", None), getattr(jsi, "_fctask", None)):
            if task is not None:
                task.cancel()


class _Reader:
    """What one :meth:`NatsBus.read` knows of where it stands, for resuming and for :meth:`NatsBus.status`.

    ``consuming``: its consumer was created since the connection last came back; ``caught_up``:
    it was delivered the message that ended the log when it subscribed (or one with nothing
    pending after it); ``lag``: what the server said is still pending; ``stale``: the
    connection came back, the consumer must be made again.
    """

    def __init__(self, *, filters: Sequence[str], consumer_filters: Sequence[str] | None = None) -> None:
        self.filters = list(filters)
        self.consumer_filters = list(consumer_filters or filters)  # what the server is asked for
        self.buffer = _ReadBuffer()
        self.consuming = False
        self.caught_up = False
        self.lag = 0
        self.stale = False
        self._end = 0

    def fresh(self) -> None:
        """A new buffer for a new consumer: what an old one still delivers is not mixed in."""
        self.buffer = _ReadBuffer()
        self.stale = False

    def subscribed(self, *, end: int, pending: int) -> None:
        """The consumer exists: the log ended at ``end``, ``pending`` messages are to come."""
        self.consuming, self._end, self.lag = True, end, pending
        self.caught_up = pending == 0

    def delivered(self, seq: int, pending: int) -> None:
        """A message was taken."""
        self.lag = pending
        if pending == 0 or seq >= self._end:
            self.caught_up = True

    def lost(self) -> None:
        """The connection is lost."""
        self.consuming = self.caught_up = False

    def resubscribe(self) -> None:
        """The connection is back: make the consumer again (woken at once)."""
        self.consuming = self.caught_up = False
        self.stale = True
        self.buffer.wake()


class _ReadBuffer:
    """The messages an ordered consumer delivered that its reader has not taken yet.

    nats-py calls :meth:`put` (a coroutine, as it requires) for each message, in
    order; the reader takes them from ``queued`` and, when it is empty, waits in
    :meth:`wait` until one comes or the connection closes.
    """

    CLOSED_CHECK_SECONDS = 1.0

    def __init__(self) -> None:
        self.queued: collections.deque[Msg] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None

    async def put(self, msg: Msg) -> None:
        """Queue ``msg`` and wake the reader."""
        self.queued.append(msg)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def wake(self) -> None:
        """Wake the reader to look again (the connection is closing, or came back)."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, nc: Client, *, timeout: float | None = None) -> bool:
        """Return when a message is queued, when woken (:meth:`wake`) or after ``timeout`` seconds
        (CLOSED_CHECK_SECONDS when None); False when that time passed with nothing. Raises BusError
        once ``nc`` is closed."""
        if nc.is_closed:
            raise base.BusError("Reading failed: the connection to NATS is closed.")
        if self.queued:
            return True
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait((waiter,), timeout=self.CLOSED_CHECK_SECONDS if timeout is None else timeout)
        finally:
            self._waiter = None
        return waiter.done()


async def cancel_pull(pull: asyncio.Future[Any]) -> None:
    """Cancel a nats-py fetch under way and wait for it (cancelling again: on Python 3.11 its
    ``wait_for`` can swallow one cancellation)."""
    while not pull.done():
        pull.cancel()
        await asyncio.wait((pull,), timeout=0.5)
    if not pull.cancelled():
        with contextlib.suppress(Exception):
            pull.result()


def _position(msg: Msg) -> tuple[int, int]:
    """A delivered message's stream sequence and ``num_pending``, from its reply subject.

    ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>`` (9 tokens), or
    the form with a domain and an account hash in front (11 tokens, 12 with a random one behind);
    anything else is left to nats-py's parser. Cheaper than ``Msg.metadata``, which
    also builds a datetime per message.
    """
    seq, pending, _ = _delivery_position(msg)
    return seq, pending


def _delivery_position(msg: Msg) -> tuple[int, int, int]:
    """(stream sequence, ``num_pending``, ``num_delivered``) of a delivered message, as :func:`_position`."""
    tokens = (msg.reply or "").split(".")
    if len(tokens) == 9 and tokens[0] == "$JS":
        return int(tokens[5]), int(tokens[8]), int(tokens[4])
    if len(tokens) >= 11 and tokens[0] == "$JS":
        return int(tokens[7]), int(tokens[10]), int(tokens[6])
    metadata = msg.metadata
    return metadata.sequence.stream, metadata.num_pending, metadata.num_delivered


def _take_queued_at_once(sub: Any) -> None:
    """Make ``sub.next_msg`` (a nats-py Subscription without a callback) hand over a message already
    queued without a task, a ``uuid4`` and a ``wait_for`` of its own; only an empty queue waits, in
    nats-py's own ``next_msg``.

    nats-py's pull ``fetch`` takes every message of a batch but the first one through ``next_msg``,
    which builds those three per message even when the message is there already (it nearly always
    is: a batch arrives in one or two socket reads): two thirds of a durable's CPU per message,
    measured with cProfile on 10,000 fetched and acked messages. What is handed over, and the
    pending counts nats-py keeps, are the same."""
    original = sub.next_msg
    queue = sub._pending_queue

    async def next_msg(timeout: float | None = 1.0) -> Msg:
        msg: Msg
        if queue.empty() or sub._conn.is_closed:
            msg = await original(timeout)
            return msg
        msg = queue.get_nowait()
        sub._pending_size -= len(msg.data)
        queue.task_done()
        return msg

    sub.next_msg = next_msg


class NatsDurable(base.DurableConsumer):
    """A durable pull consumer; ``Delivery.token`` is the nats-py message.

    nats-py's ``fetch(batch=n)`` holds on until ``n`` messages came or its
    timeout passed, so one message trickling in would wait the whole timeout.
    Here a fetch waits for the first message alone, then, if that message's
    ``num_pending`` says more are waiting, takes up to that many (within
    :data:`BACKLOG_WAIT` seconds), like the memory bus. When the previous fetch
    ended with messages still pending, it asks for those at once (one round trip
    to the server instead of two, which on a busy machine is most of a fetch's time).
    """

    BACKLOG_WAIT = 0.5
    """Seconds to wait for messages the server said are pending. They are there, so the pull
    returns as soon as they arrive; the wait only bounds a round trip on a busy machine
    (30-40 ms measured at load 10 on 2 cores, where a 20 ms wait gave up and the
    messages were fetched one by one)."""

    def __init__(self, *, sub: Any, name: str, bus: NatsBus | None = None) -> None:
        self._sub = sub
        _take_queued_at_once(sub._sub)
        self.name = name
        self._backlog = 0  # num_pending of the last message fetched
        self._bus = bus
        self.confirmed_epoch = bus.epoch if bus is not None else 0  # the bus's epoch of the last fetch answered
        self._comeback: asyncio.Event = asyncio.Event()  # set when the connection came back during a pull

    @property
    def backlog(self) -> int:
        """Messages the server said were still pending after the last fetch."""
        return self._backlog

    def reconnected(self) -> None:
        """The connection came back: a pull under way was lost with the old one; ask again at once."""
        self._comeback.set()

    async def fetch(self, *, batch: int = 100, timeout: float = 1.0) -> list[base.Delivery]:
        """Up to ``batch`` deliveries, as soon as one is there; [] when none came within ``timeout`` s.

        A pull under way when the connection comes back is asked again at once (the server that
        got it may be gone): the time left is not waited out. Raises TransientBusError for what
        may pass (no responder while JetStream restarts), BusError otherwise."""
        msgs: list[Msg] = []
        deadline = time.monotonic() + timeout
        if self._bus is not None:
            try:
                await self._bus._connected(within=timeout)
            except nats.errors.TimeoutError:
                return []  # not back within the timeout: nothing came
            await self._confirm()
        if self._backlog > 0:
            # the last fetch said more were waiting: one request for them, not a wait for the first then another
            msgs = await self._pull(batch=min(batch, self._backlog), timeout=min(self.BACKLOG_WAIT, timeout))
        if not msgs:
            msgs = await self._pull(batch=1, timeout=max(deadline - time.monotonic(), 0.001))
            first_pending = _delivery_position(msgs[0])[1] if msgs else 0
            if batch > 1 and first_pending > 0:
                # only when the first says more are waiting: a top-up that finds nothing costs a request
                msgs += await self._pull(batch=min(batch - 1, first_pending), timeout=self.BACKLOG_WAIT)
        deliveries = []
        pending = 0
        for msg in msgs:  # positions from the reply subject, not Msg.metadata (a datetime per message)
            seq, pending, delivered = _delivery_position(msg)
            message = _log_message(msg, seq=seq, pending=pending)
            deliveries.append(base.Delivery(message=message, attempt=delivered, token=msg))
        self._backlog = pending
        return deliveries

    async def _pull(self, *, batch: int, timeout: float) -> list[Msg]:
        try:
            what = f"Fetching from {self.name!r}"
            with _wrapped(what):
                try:  # the retrying machinery only once a first try failed
                    return await self._pull_once(batch=batch, timeout=timeout)
                except Exception as err:
                    if not _transient(err):
                        raise
                with self._bus._noting_retries("fetch") if self._bus is not None else contextlib.nullcontext():
                    async for attempt in _retrying(what):
                        with attempt:
                            return await self._pull_once(batch=batch, timeout=timeout)
                raise AssertionError("unreachable")
        except base.BusError as err:
            if isinstance(err.__cause__, TimeoutError):
                return []
            raise

    async def _pull_once(self, *, batch: int, timeout: float) -> list[Msg]:
        """One pull, given up the moment the connection comes back (then one more, at once, for the time
        left: the pull request went to a server that may have restarted since)."""
        self._comeback.clear()
        pull = asyncio.ensure_future(self._sub.fetch(batch=batch, timeout=timeout))
        comeback = asyncio.ensure_future(self._comeback.wait())
        started = time.monotonic()
        try:
            await asyncio.wait((pull, comeback), return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            pull.cancel()  # cancelled (the service stops): the pull goes with it
            raise
        finally:
            comeback.cancel()
        if pull.done():
            return list(pull.result())
        await cancel_pull(pull)
        left = timeout - (time.monotonic() - started)
        if self._bus is not None:
            await self._bus._connected(within=max(left, 0.001))
            await self._confirm()
        return list(await self._sub.fetch(batch=batch, timeout=max(left, 0.05)))

    async def _confirm(self) -> None:
        """Once per comeback of the connection: ask the server for the consumer (it is there, at its
        position), so the consumer counts as consuming at once, not after a pull's expiry.
        Raises TransientBusError while JetStream is not ready."""
        bus = self._bus
        if bus is None or self.confirmed_epoch == bus.epoch:
            return
        epoch = bus.epoch
        with _wrapped(f"Looking up the durable consumer {self.name!r}"):
            await self._sub.consumer_info()
        self.confirmed_epoch = epoch
        log.info("durable_resumed", durable=self.name, epoch=epoch)

    async def ack(self, delivery: base.Delivery) -> None:
        """Acknowledge (fire and forget: a lost ack means one more delivery, never a lost one)."""
        msg = delivery.token
        assert isinstance(msg, Msg)
        with (
            _wrapped(f"Acking {delivery.message.seq}"),
            contextlib.suppress(nats.errors.MsgAlreadyAckdError),
        ):
            await msg.ack()

    async def nak(self, delivery: base.Delivery, *, delay: float = 0.0) -> None:
        """Ask for redelivery after ``delay`` seconds (no-op once acked)."""
        msg = delivery.token
        assert isinstance(msg, Msg)
        with (
            _wrapped(f"Nak'ing {delivery.message.seq}"),
            contextlib.suppress(nats.errors.MsgAlreadyAckdError),
        ):
            await msg.nak(delay=delay or None)

    async def close(self) -> None:
        """Unsubscribe this handle's inbox (the durable stays); the bus no longer counts it as a reader."""
        if self._bus is not None:
            self._bus._durables.discard(self)
        with contextlib.suppress(nats.errors.Error, ValueError):
            await self._sub.unsubscribe()

    async def in_progress(self, delivery: base.Delivery) -> None:
        """Restart the message's ack wait (``+WIP``; fire and forget, a no-op once acked)."""
        msg = delivery.token
        assert isinstance(msg, Msg)
        with (
            _wrapped(f"Marking {delivery.message.seq} in progress"),
            contextlib.suppress(nats.errors.MsgAlreadyAckdError),
        ):
            await msg.in_progress()
