"""Leases on a JetStream key-value bucket: which replica of a decider commits (issue 15).

Two replicas of a decider are safe without any coordination (a batch built on a
stale view is refused whole by the head check), but both deciding the same cycle
wastes one of the two commits. So the replicas of a decider take turns through a
lease: one key per decider user and partition (``admitter.p0``, ``preemptor.p0``,
``tas-placer.p0``) in the bucket ``KQ_LEASES`` (stream ``KV_KQ_LEASES``), whose
value says who holds it (:class:`LeaseRecord`). Every write is a compare-and-set on
the key's last revision (``Nats-Expected-Last-Subject-Sequence``), so of two
replicas racing for the key exactly one wins. The election itself (renewals,
expiry, stepping down) is :mod:`kueue_es.services.standby`; this module only
reads and writes the keys.

Only ``admin`` creates the bucket (:func:`ensure_bucket`, from
``kueue_es.events.bus.nats.ensure_log_stream``: ``kueue-es nats-setup``, ``up``,
``demo``), or a connection that may create the log stream (a server without
users: tests, the bench, the scenario runner). A decider user may write only its
own keys (``$KV.KQ_LEASES.<user>.>``), read the bucket's messages and subscribe to
its own keys (:mod:`kueue_es.events.bus.permissions`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import api
from nats.js.kv import KeyValue

from kueue_es.events.bus import base

BUCKET = "KQ_LEASES"
STREAM = f"KV_{BUCKET}"
SUBJECT_PREFIX = f"$KV.{BUCKET}."
MAX_VALUE_BYTES = 1024
MAX_BUCKET_BYTES = 1 << 20


class LeaseRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The value of a lease key (JSON).

    ``holder``: the identity of the replica holding it, ``""`` when released;
    ``acquired`` and ``renewed``: when the holder took it and last renewed it (RFC 3339,
    for people: no replica compares its clock with another's, a standby times the key's
    revisions on its own clock); ``lease_duration_ms``: the holder's lease duration;
    ``transitions``: how many times the key changed hands; ``serial``: the writer's count of its writes
    to the key, so no two writes of one replica carry the same record and a standby can tell which
    write it read (``services/standby.py`` ``SlotLeases.since``).
    """

    holder: str = ""
    acquired: str = ""
    renewed: str = ""
    lease_duration_ms: int = 0
    transitions: int = 0
    serial: int = 0


UNDECODABLE_HOLDER = "<undecodable>"
_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(LeaseRecord)


@dataclass(frozen=True, kw_only=True)
class LeaseEntry:
    """A lease key as read: its revision (the stream sequence of its last write) and record."""

    revision: int
    record: LeaseRecord


def decode_record(data: bytes) -> LeaseRecord:
    """The record of a write as passed on: an empty value (a deleted or purged key) reads as released, one
    that does not decode as held by ``<undecodable>``."""
    if not data:
        return LeaseRecord()
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError:
        return LeaseRecord(holder=UNDECODABLE_HOLDER)


def key_for(user: str, partition: str) -> str:
    """The key of decider ``user``'s lease in ``partition``: ``<user>.<partition>``."""
    return f"{user}.{partition}"


def bucket_config(replicas: int) -> api.KeyValueConfig:
    """The bucket: one revision per key, file storage (a restarted nats-server keeps the holders)."""
    return api.KeyValueConfig(
        bucket=BUCKET,
        description="kueue-es: which replica of each decider commits (kueue_es.services.standby)",
        history=1,
        max_value_size=MAX_VALUE_BYTES,
        max_bytes=MAX_BUCKET_BYTES,
        storage=api.StorageType.FILE,
        replicas=replicas,
    )


async def ensure_bucket(nc: Client, *, replicas: int, timeout: float = 5.0) -> None:
    """Create the bucket ``KQ_LEASES`` or bring it to its configuration (as ``admin``, or on a
    server without users). Raises BusError."""
    js = nc.jetstream(timeout=timeout)
    try:
        await js.create_key_value(config=bucket_config(replicas))
    except nats.js.errors.BadRequestError as err:
        if err.err_code != 10058:  # the stream exists with another configuration: bring it to ours
            raise base.BusError(f"Creating the lease bucket {BUCKET} failed: {err}") from err
        await _update_bucket(nc, replicas=replicas, timeout=timeout)
    except (nats.errors.Error, OSError) as err:
        raise base.BusError(f"Creating the lease bucket {BUCKET} failed: {type(err).__name__}: {err}") from err


async def _update_bucket(nc: Client, *, replicas: int, timeout: float) -> None:
    jsm = nc.jsm(timeout=timeout)
    try:
        info = await jsm.stream_info(STREAM)
        config = info.config
        config.max_bytes, config.max_msg_size, config.num_replicas = MAX_BUCKET_BYTES, MAX_VALUE_BYTES, replicas
        await jsm.update_stream(config)
    except (nats.errors.Error, OSError) as err:
        raise base.BusError(f"Updating the lease bucket {BUCKET} failed: {type(err).__name__}: {err}") from err


class LeaseStore:
    """Reads and compare-and-set writes of lease keys; build it with :func:`open_store`.

    Every call is bounded by ``timeout`` seconds (a renewal must not wait longer than
    its retry period) and raises BusError when it cannot be made; a write whose
    expected revision is not the key's raises ConflictError.
    """

    def __init__(self, *, nc: Client, kv: KeyValue) -> None:
        self.nc, self.kv = nc, kv

    async def get(self, key: str) -> LeaseEntry | None:
        """The key's revision and record; None when it was never written or was deleted. A value
        that does not decode reads as held by ``<undecodable>`` (it expires, and is taken over)."""
        try:
            entry = await self.kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            return None
        except (nats.errors.Error, OSError) as err:
            raise base.BusError(f"Reading the lease {key} failed: {type(err).__name__}: {err}") from err
        try:
            record = _DECODER.decode(entry.value or b"")
        except msgspec.DecodeError:
            record = LeaseRecord(holder=UNDECODABLE_HOLDER)
        return LeaseEntry(revision=int(entry.revision or 0), record=record)

    async def create(self, key: str, record: LeaseRecord) -> int:
        """Write ``record`` if the key has no value (never written, or deleted); returns the new revision."""
        try:
            return await self.kv.create(key, _ENCODER.encode(record))
        except nats.js.errors.KeyWrongLastSequenceError as err:
            raise base.ConflictError(f"The lease {key} exists: {err}") from err
        except (nats.errors.Error, OSError) as err:
            raise base.BusError(f"Creating the lease {key} failed: {type(err).__name__}: {err}") from err

    async def update(self, key: str, record: LeaseRecord, *, last: int) -> int:
        """Write ``record`` if the key's revision is still ``last``; returns the new revision."""
        try:
            return await self.kv.update(key, _ENCODER.encode(record), last=last)
        except nats.js.errors.KeyWrongLastSequenceError as err:
            raise base.ConflictError(f"The lease {key} moved past revision {last}: {err}") from err
        except (nats.errors.Error, OSError) as err:
            raise base.BusError(f"Writing the lease {key} failed: {type(err).__name__}: {err}") from err

    async def subscribe(self, key: str, wake: Callable[[LeaseRecord], None]) -> Callable[[], Any]:
        """Call ``wake(record)`` with the record of every write to ``key`` as the server passes it on
        (:func:`decode_record`). A hint to read the key again, no more: a refused compare-and-set is passed
        on too, and a write may be passed on before the bucket serves it to a read. Returns the
        unsubscribe coroutine function. Raises BusError."""

        async def on_message(msg: Any) -> None:
            wake(decode_record(msg.data))

        try:
            sub = await self.nc.subscribe(f"{SUBJECT_PREFIX}{key}", cb=on_message)
        except (nats.errors.Error, OSError) as err:
            raise base.BusError(f"Following the lease {key} failed: {type(err).__name__}: {err}") from err

        async def unsubscribe() -> None:
            with contextlib.suppress(nats.errors.Error, OSError):
                await sub.unsubscribe()

        return unsubscribe


async def open_store(
    nc: Client, *, create: bool, replicas: int = 1, timeout: float = 0.5, wait: float = 20.0
) -> LeaseStore:
    """The lease bucket on connection ``nc``, each call bounded by ``timeout`` seconds.

    ``create``: make the bucket when it is missing (a connection that may create the log
    stream). Otherwise wait up to ``wait`` seconds for an admin to make it, then raise
    NotFoundError naming what creates it; BusError when it cannot be asked.
    """
    js = nc.jetstream(timeout=max(timeout, 0.1))
    deadline = time.monotonic() + wait
    while True:
        try:
            return LeaseStore(nc=nc, kv=await js.key_value(BUCKET))
        except nats.js.errors.BucketNotFoundError as err:
            if create:
                await ensure_bucket(nc, replicas=replicas)
                continue
            if time.monotonic() > deadline:
                raise base.NotFoundError(
                    f"The lease bucket {BUCKET} does not exist; an admin creates it (kueue-es nats-setup, as NATS"
                    " user admin)"
                ) from err
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError):
            if time.monotonic() > deadline:
                raise base.BusError(f"The lease bucket {BUCKET} cannot be read (no answer for {wait:g}s)") from None
        except (nats.errors.Error, OSError) as err:
            raise base.BusError(f"Opening the lease bucket {BUCKET} failed: {type(err).__name__}: {err}") from err
        await asyncio.sleep(0.2)
