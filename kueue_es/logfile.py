"""A log as a file: one stored message a line, as JSON, for tools and benchmarks.

``kueue-es bench core --write-log F`` writes one; ``kueue-es replay --file F`` reads it.
Each line is ``{"seq": N, "subject": "...", "headers": {...}, "data": <the event>}``,
the event embedded as its stored bytes, unchanged (``msgspec.Raw``: compact JSON, no
newline), so a message read back has exactly the bytes the bus would hold. A message
whose bytes are not JSON is written with ``"raw"``, its bytes in base64, instead.
``"timeMs"``: when JetStream stored the message (``LogMessage.time_ms``, ms since the epoch),
left out when not known (a message a tool made, a file written before it was kept).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

import msgspec

from kueue_es.events.bus.base import LogMessage


class _Line(msgspec.Struct, kw_only=True, omit_defaults=True):
    seq: int
    subject: str
    headers: dict[str, str] = {}
    data: msgspec.Raw = msgspec.Raw(b"null")
    raw: bytes | None = None  # the bytes when they are not JSON
    time_ms: int = msgspec.field(default=0, name="timeMs")


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(_Line)


def _is_json_object(data: bytes) -> bool:
    return data[:1] == b"{" and data[-1:] == b"}" and b"\n" not in data


class LogWriter:
    """Appends messages to an open binary file, a line each (:func:`encode_line`)."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.written = 0

    def write(self, message: LogMessage) -> None:
        self.out.write(encode_line(message))
        self.written += 1


def encode_line(message: LogMessage) -> bytes:
    """One message as a line (newline included)."""
    if _is_json_object(message.data):
        try:
            line = _Line(
                seq=message.seq,
                subject=message.subject,
                headers=message.headers,
                data=msgspec.Raw(message.data),
                time_ms=message.time_ms,
            )
            return _encoder.encode(line) + b"\n"
        except msgspec.EncodeError:
            pass
    return (
        _encoder.encode(
            _Line(
                seq=message.seq,
                subject=message.subject,
                headers=message.headers,
                raw=message.data,
                time_ms=message.time_ms,
            )
        )
        + b"\n"
    )


def decode_line(line: bytes) -> LogMessage:
    """The message of one line."""
    parsed = _decoder.decode(line)
    data = parsed.raw if parsed.raw is not None else bytes(parsed.data)
    return LogMessage(seq=parsed.seq, subject=parsed.subject, data=data, headers=parsed.headers, time_ms=parsed.time_ms)


def read_lines(path: Path, *, start_seq: int = 1, offset: int = 0) -> Iterator[LogMessage]:
    """The messages of the file at ``path`` from ``start_seq`` on, in file order, reading from
    byte ``offset`` (the start of a line: :attr:`LineReader.line_start`)."""
    yield from LineReader(path, start_seq=start_seq, offset=offset)


class LineReader:
    """The messages of a log file in order (iterate it once), knowing where each line starts:
    :attr:`line_start` is the byte offset of the last message's line, so another process
    can read on from that message without decoding the lines before it."""

    def __init__(self, path: Path, *, start_seq: int = 1, offset: int = 0) -> None:
        self.path, self.start_seq, self.offset = path, start_seq, offset
        self.line_start = offset

    def __iter__(self) -> Iterator[LogMessage]:
        start_seq, offset = self.start_seq, self.offset
        with self.path.open("rb") as src:
            src.seek(offset)
            for line in src:
                start = offset
                offset += len(line)
                if not line.strip():
                    continue
                message = decode_line(line)
                if message.seq >= start_seq:
                    self.line_start = start
                    yield message


def write_lines(path: Path, messages: Iterable[LogMessage]) -> int:
    """Write ``messages`` to ``path``; returns how many."""
    with path.open("wb") as out:
        writer = LogWriter(out)
        for message in messages:
            writer.write(message)
        return writer.written
