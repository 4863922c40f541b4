"""Encoding events to bytes and back, deterministically.

One encoder and one decoder, built once (msgspec's own advice): JSON with
``order="deterministic"``: a struct's tag first and its fields in declaration
order, a dict's keys sorted (struct fields are not sorted), so the same event is
always the same bytes, which is what lets replay compare decisions byte for byte
(research/event-sourcing.md §4).
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


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The integers an event may carry: Kubernetes' quantities and counts are int64 (the watcher caps a
larger quantity at :data:`INT64_MAX`), and a state holding a larger one could not be checkpointed."""

# every digit to "0", every other byte to " ": a run of 19 digits (the shortest that may be beyond int64) is
# then a plain substring, found ten times faster than by a regular expression
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_LONG_RUN = b"0" * 19


def decode(data: bytes) -> types.Event:
    """Decode bytes produced by :func:`encode`; raises DecodeError naming the problem (not JSON, not an
    event, a field of the wrong type, an integer beyond 64 bits, with the path of the field)."""
    try:
        event = _decoder.decode(data)
    except msgspec.DecodeError as err:
        raise DecodeError(f"not a kueue-es event: {err}") from err
    if (found := out_of_range(data)) is not None:
        raise DecodeError(f"not a kueue-es event: integer out of the 64-bit range - at `{found[0]}`")
    return event


def out_of_range(data: bytes) -> tuple[str, int] | None:
    """The first integer beyond int64 in encoded ``data`` (which :func:`decode` refuses) as ``(path, value)``, the
    path from ``$`` (``$.workload.spec.podSets[0].count``); None when there is none. Cheap when no run of 19
    digits is there: what a writer checks before it publishes."""
    if _LONG_RUN not in data.translate(_DIGITS_AS_ZERO):
        return None
    return _huge_int(msgspec.json.decode(data), "$")


def _huge_int(value: object, path: str) -> tuple[str, int] | None:
    """The path and value of the first integer of a decoded JSON value beyond int64, None when there is none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (path, value) if not INT64_MIN <= value <= INT64_MAX else None
    if isinstance(value, dict):
        for key, item in value.items():
            if (found := _huge_int(item, f"{path}.{key}")) is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if (found := _huge_int(item, f"{path}[{index}]")) is not None:
                return found
    return None


def type_name(event: types.Event) -> str:
    """The event's wire tag (``QuotaReserved``), as used in the ``Kq-Type`` header."""
    return type(event).__struct_config__.tag  # type: ignore[return-value]


def tag_of(cls: type[types.Event]) -> str:
    """The wire tag of event class ``cls`` (``QuotaReserved``): its ``type`` and ``Kq-Type``."""
    return cls.__struct_config__.tag  # type: ignore[return-value]


def digest(chunks: Iterable[bytes]) -> str:
    """Hex SHA-256 over length-prefixed chunks (so boundaries count)."""
    hasher = hashlib.sha256()
    for chunk in chunks:
        hasher.update(len(chunk).to_bytes(8, "big"))
        hasher.update(chunk)
    return hasher.hexdigest()


JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect :func:`json_schema` is written in (``$schema``)."""

SCHEMA_ID_PREFIX = "https://kueue-es.dev/schemas/events/v"
"""Start of every schema version's ``$id``: :func:`schema_id`."""


def schema_id(version: int = types.SCHEMA_VERSION) -> str:
    """The ``$id`` of the events' JSON Schema of ``version`` (an integer, the ``Kq-Schema`` header):
    ``https://kueue-es.dev/schemas/events/v<version>.json``. One URL per version, never reused for
    another document (docs/events.md, Stability); it names the schema, it is not fetched."""
    return f"{SCHEMA_ID_PREFIX}{version}.json"


def json_schema() -> dict[str, object]:
    """The JSON Schema (draft 2020-12) of every event type, a tagged union on ``type``, for outside tools.

    ``$schema`` is the dialect, ``$id`` carries the schema version (:func:`schema_id`,
    ``types.SCHEMA_VERSION``, the ``Kq-Schema`` header of every message written in it);
    ``$defs`` holds one definition per event type, named as its ``type`` tag, and the
    structures they share. Objects allow properties the schema does not name: a later
    version may add optional fields (docs/events.md, Stability).
    """
    body = msgspec.json.schema(types.Event)
    schema: dict[str, object] = {
        "$schema": JSON_SCHEMA_DIALECT,
        "$id": schema_id(),
        "title": f"kueue-es events, schema version {types.SCHEMA_VERSION}",
        "$comment": f"kueue-es events, schema version {types.SCHEMA_VERSION}; see docs/events.md",
    }
    schema.update(body)
    return schema
