"""Encoding events to bytes and back, deterministically.

One encoder and one decoder, built once (msgspec's own advice): JSON with map
keys sorted, so the same event is always the same bytes, which is what lets
replay compare decisions byte for byte (research/event-sourcing.md §4).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import msgspec

from kueue_es.events import types

_encoder = msgspec.json.Encoder(order="deterministic")
_decoder = msgspec.json.Decoder(types.Event)


class DecodeError(ValueError):
    """Bytes on the log that are not a kueue-es event; the message says why and where."""


def encode(event: types.Event) -> bytes:
    """The canonical JSON bytes of ``event``."""
    return _encoder.encode(event)


def decode(data: bytes) -> types.Event:
    """Decode bytes produced by :func:`encode`; raises DecodeError naming the problem."""
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError as err:
        raise DecodeError(f"not a kueue-es event: {err}") from err


def type_name(event: types.Event) -> str:
    """The event's wire tag (``QuotaReserved``), as used in the ``Kq-Type`` header."""
    return type(event).__struct_config__.tag  # type: ignore[return-value]


def digest(chunks: Iterable[bytes]) -> str:
    """Hex SHA-256 over length-prefixed chunks (so boundaries count)."""
    hasher = hashlib.sha256()
    for chunk in chunks:
        hasher.update(len(chunk).to_bytes(8, "big"))
        hasher.update(chunk)
    return hasher.hexdigest()


def json_schema() -> dict[str, object]:
    """The JSON Schema of every event type (a tagged union on ``type``), for outside tools."""
    schema = msgspec.json.schema(types.Event)
    schema["$comment"] = f"kueue-es events, schema version {types.SCHEMA_VERSION}"
    return schema
