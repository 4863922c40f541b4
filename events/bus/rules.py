"""The rules both buses enforce identically: subjects, filters, sizes, batch limits.

:mod:`kueue_es.events.bus.memory` must refuse exactly what a real nats-server refuses, or a
service tested in memory breaks on the real log. The checks that the server makes
(a subject must belong to ``KQ_LOG``, the 1 MiB payload limit, at most 1000
messages per atomic batch) live here, and :mod:`kueue_es.events.bus.nats` runs them too,
before sending: an oversized message would otherwise make the server drop the
whole connection instead of answering with an error.

Wildcards follow NATS: ``*`` is exactly one token, ``>`` (last only) one or more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kueue_es.events.bus import base

MAX_MESSAGE_BYTES = 1 << 20
MAX_BATCH = 1000
MAX_ACK_PENDING = 1000
"""Unacknowledged deliveries a durable consumer allows before it stops delivering new ones."""
HEADER_ALLOWANCE = 256
"""Bytes kept for the headers the bus adds itself (batch id, expected sequence)."""


def tokens(subject: str) -> list[str]:
    """Split ``subject`` into tokens; raises BusError if it is empty or malformed."""
    parts = subject.split(".")
    if not subject or "" in parts or not _spaceless(subject):
        raise base.BusError(f"The subject {subject!r} is not a valid NATS subject (empty token or whitespace).")
    for i, part in enumerate(parts):
        if ">" in part and (part != ">" or i != len(parts) - 1):
            raise base.BusError(f"The subject {subject!r} uses '>' other than as its last token.")
        if "*" in part and part != "*":
            raise base.BusError(f"The subject {subject!r} uses '*' inside a token.")
    return parts


def _spaceless(text: str) -> bool:
    """No white space in ``text`` (``str.isspace``): printable ASCII without a space is decided at once,
    anything else character by character (every message's subject is checked; most are new)."""
    if text.isascii() and text.isprintable():
        return " " not in text
    return not any(c.isspace() for c in text)


def is_literal(subject: str) -> bool:
    """True when ``subject`` is a valid subject without wildcards."""
    return all(part not in ("*", ">") for part in tokens(subject))


def matches(subject: str, pattern: str) -> bool:
    """True when the literal ``subject`` matches the filter ``pattern``."""
    return _matches(subject.split("."), pattern.split("."))


def _matches(subject: list[str], pattern: list[str]) -> bool:
    for i, token in enumerate(pattern):
        if token == ">":
            return len(subject) > i
        if i >= len(subject) or (token != "*" and token != subject[i]):
            return False
    return len(subject) == len(pattern)


def covers(pattern: str, other: str) -> bool:
    """True when every subject matching ``other`` also matches ``pattern``."""
    wide, narrow = pattern.split("."), other.split(".")
    for i, token in enumerate(wide):
        if token == ">":
            return len(narrow) > i
        if i >= len(narrow) or narrow[i] == ">":
            return False
        if token != "*" and (narrow[i] == "*" or token != narrow[i]):
            return False
    return len(wide) == len(narrow)


def normalize_filters(subjects: Sequence[str] | str) -> tuple[str, ...]:
    """Validate filter subjects and drop the ones another filter already covers.

    nats-server refuses a consumer whose filters overlap that way, while the
    union they describe is well defined; both buses read the reduced set. Raises
    BusError on an empty set or a malformed subject.
    """
    if isinstance(subjects, str):
        subjects = (subjects,)
    for subject in subjects:
        tokens(subject)
    kept: list[str] = []
    for i, subject in enumerate(subjects):
        others = [s for j, s in enumerate(subjects) if j != i and (s != subject or j < i)]
        if not any(covers(other, subject) for other in others):
            kept.append(subject)
    if not kept:
        raise base.BusError("A reader needs at least one filter subject; got none.")
    return tuple(kept)


class SubjectFilter:
    """A membership test for a filter set, cached per subject.

    A set that covers every subject of the stream (``kq.>`` or ``>``) answers
    without looking at the subject, so a plain reader costs nothing per message.
    """

    def __init__(self, subjects: Iterable[str]) -> None:
        self.subjects = normalize_filters(tuple(subjects))
        self.everything = all(
            any(covers(pattern, stream_subject) for pattern in self.subjects) for stream_subject in base.STREAM_SUBJECTS
        )
        self._cache: dict[str, bool] = {}

    def __call__(self, subject: str) -> bool:
        if self.everything:
            return True
        hit = self._cache.get(subject)
        if hit is None:
            hit = self._cache[subject] = any(matches(subject, pattern) for pattern in self.subjects)
        return hit


def headers_size(headers: dict[str, str]) -> int:
    """Bytes the NATS header block takes for ``headers`` (``NATS/1.0`` line included)."""
    return 12 + sum(len(key) + len(value) + 4 for key, value in headers.items())


def check_literal(subject: str) -> None:
    """Raise BusError unless ``subject`` is a literal subject of the log stream."""
    if subject in _LITERALS_SEEN:  # every message is checked, and a workload's subjects come again and again
        return
    _check_literal(subject)
    if len(_LITERALS_SEEN) >= _LITERALS_KEPT:
        _LITERALS_SEEN.clear()
    _LITERALS_SEEN.add(subject)


_LITERALS_KEPT = 1 << 16
_LITERALS_SEEN: set[str] = set()


def _check_literal(subject: str) -> None:
    if not is_literal(subject):
        raise base.BusError(f"The subject {subject!r} has wildcards; a message needs a literal subject.")
    if not any(matches(subject, pattern) for pattern in base.STREAM_SUBJECTS):
        raise base.BusError(
            f"The subject {subject!r} belongs to no stream: {base.STREAM_NAME} holds only {base.STREAM_SUBJECTS}."
        )


def check_outgoing(message: base.OutgoingMessage) -> None:
    """Raise BusError if the server would refuse ``message``, before anything is sent.

    Refused: a subject outside the log stream or with wildcards, an empty
    ``msg_id``, a ``Nats-*`` header (the bus owns those), and a message whose
    payload plus headers plus :data:`HEADER_ALLOWANCE` exceeds 1 MiB.
    """
    check_literal(message.subject)
    if not message.msg_id:
        raise base.BusError(f"The message for {message.subject!r} has an empty msg_id; every message needs one.")
    for key in message.headers:
        if key.lower().startswith("nats-"):
            raise base.BusError(f"The header {key!r} on {message.subject!r} is reserved for the bus itself.")
    # the caller's headers plus Nats-Msg-Id (a line of its own; the caller may not set it: checked above)
    size = len(message.data) + headers_size(message.headers) + len(message.msg_id) + 15 + HEADER_ALLOWANCE
    if size > MAX_MESSAGE_BYTES:
        raise base.BusError(
            f"The message {message.msg_id!r} on {message.subject!r} takes {size} bytes with headers;"
            f" the log accepts at most {MAX_MESSAGE_BYTES}. Split the payload."
        )


def check_batch(*, head: base.OutgoingMessage, rest: Sequence[base.OutgoingMessage]) -> None:
    """Raise BusError for a batch the server would refuse (too long, or a bad message)."""
    if len(rest) + 1 > MAX_BATCH:
        raise base.BusError(
            f"The batch headed by {head.msg_id!r} has {len(rest) + 1} messages; an atomic batch holds at most"
            f" {MAX_BATCH}. Commit the rest in the next cycle."
        )
    check_outgoing(head)
    for message in rest:
        check_outgoing(message)


def stored_headers(raw: dict[str, str] | None) -> dict[str, str]:
    """The headers a reader sees: the caller's own plus ``Nats-Msg-Id``.

    The server keeps protocol headers (``Nats-Batch-*``, ``Nats-Expected-*``)
    on the stored message; both buses hide them so readers see the same thing.
    ``raw`` itself when there is nothing to hide (the caller hands over a dict it owns: nats-py's
    for a message just read): every reader calls this once a message, and most messages carry
    no protocol header (a name that cannot be one is passed on its first letter).
    """
    if not raw:
        return {}
    for key in raw:
        if key[:1] in "Nn" and key != "Nats-Msg-Id" and key[:5].lower() == "nats-":
            return {k: v for k, v in raw.items() if k == "Nats-Msg-Id" or not k.lower().startswith("nats-")}
    return raw
