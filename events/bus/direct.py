"""Reading the whole log fast: JetStream Direct Get batches on a plain socket.

``kueue-es replay`` reads every message of ``KQ_LOG`` once (1,000,000 at scale).
Through nats-py's ordered consumer each message costs a ``Msg`` object, a header
parse through the email module's parser, a callback task step and flow-control
replies: more CPU than folding the message. Here one blocking socket speaks the
NATS client protocol itself (``CONNECT``, ``SUB``, ``PUB``, ``HMSG``; the same
user, password and TLS as :func:`kueue_es.events.bus.nats.connect`) and asks
the stream for batches of messages at once (``$JS.API.DIRECT.GET.KQ_LOG`` with
``seq`` and ``batch``, nats-server >= 2.11; the stream is created with
``allow_direct``): the server answers with one ``HMSG`` per stored message, its
subject and sequence in ``Nats-Subject`` / ``Nats-Sequence`` headers, then an
end-of-batch status (``204 EOB``). The buffer is parsed in one pass per read,
headers with ``str`` operations only.

The messages and headers a reader sees are the bus contract's
(:class:`kueue_es.events.bus.base.LogMessage`, headers as
:func:`kueue_es.events.bus.rules.stored_headers` leaves them), so a checker fed
from here sees exactly what it sees from :meth:`NatsBus.read`
(``tests/bus/test_direct.py``). A Direct Get may be answered by any replica of
an R3 stream: a batch that ends before the sequence the caller asked to reach
is asked again a few times before the reader gives up (the caller then reports
the missing tail as a gap). Sync on purpose: replay is a batch tool, and a
blocking ``recv_into`` is cheaper per byte than an event loop.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import ssl
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

from kueue_es.events.bus import base
from kueue_es.events.bus.server import Credentials

DIRECT_GET = f"$JS.API.DIRECT.GET.{base.STREAM_NAME}"
STREAM_INFO = f"$JS.API.STREAM.INFO.{base.STREAM_NAME}"
BATCH = 8192
"""Messages asked for per Direct Get request."""
MAX_BYTES = 8 << 20
"""Bytes asked for at most per request (the server stops a batch there; it closes a reader
whose unread replies pass its ``max_pending``, 64 MB by default)."""
_READ = 1 << 20
READ_TIMEOUT = 120.0
"""Seconds a read waits for the server once connected (``timeout`` bounds connecting): a reply
that takes longer fails the read with BusError, never ends it quietly early."""


class DirectUnavailable(base.BusError):
    """The server does not answer Direct Get for the log (an older server, ``allow_direct``
    off, or a user without ``$JS.API.DIRECT.GET.KQ_LOG``): read through nats-py instead."""


class DirectReader:
    """One connection that reads ``KQ_LOG`` in Direct Get batches; use as a context manager.

    ``timeout`` (seconds) bounds connecting; each read then waits up to :data:`READ_TIMEOUT`.
    ``url``: ``nats://[user:password@]host:port`` or ``tls://...`` (a comma-separated
    list: the first that connects). ``credentials`` as :func:`nats.connect` takes them
    (default ``$KUEUE_ES_NATS_USER`` / ``$KUEUE_ES_NATS_PASSWORD_FILE``; the CA of a TLS
    server from ``$KUEUE_ES_NATS_CA_FILE``). Raises BusError when it cannot connect,
    DirectUnavailable when the server refuses Direct Get.
    """

    def __init__(
        self, url: str, *, credentials: Credentials | None = None, timeout: float = 10.0, batch: int = BATCH
    ) -> None:
        from kueue_es.events.bus import nats as nats_bus

        self.timeout = timeout
        self.batch = batch
        if credentials is None:
            credentials = nats_bus.credentials_from_env()
        self._inbox = f"_INBOX.{uuid.uuid4().hex}"
        self._buf = bytearray()
        self._pos = 0
        errors = []
        for one in [u.strip() for u in url.split(",") if u.strip()]:
            try:
                self._sock = self._connect(one, credentials, os.environ.get(nats_bus.CA_FILE_ENV, "").strip())
                break
            except (OSError, ssl.SSLError, base.BusError) as err:
                errors.append(f"{nats_bus._without_password(one)} failed: {err}")
        else:
            raise base.BusError(f"Connecting to {'; '.join(errors) or 'no URL'}")
        self._send(f"SUB {self._inbox} 1\r\n".encode())

    # --- the connection ---------------------------------------------------------------------

    def _connect(self, url: str, credentials: Credentials | None, ca_file: str) -> socket.socket:
        parsed = urllib.parse.urlsplit(url if "://" in url else f"nats://{url}")
        host, port = parsed.hostname or "127.0.0.1", parsed.port or 4222
        sock = socket.create_connection((host, port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        line = self._line()
        if not line.startswith(b"INFO "):
            raise base.BusError(f"not a NATS server (it said {line[:40]!r})")
        info = json.loads(line[5:])
        if info.get("tls_required") or parsed.scheme == "tls" or (ca_file and info.get("tls_available")):
            context = ssl.create_default_context(cafile=ca_file or None)
            sock = context.wrap_socket(sock, server_hostname=host)
            self._sock = sock
        options: dict[str, Any] = {
            "verbose": False,
            "pedantic": False,
            "headers": True,
            "no_responders": True,
            "lang": "python",
            "version": "kueue-es",
            "protocol": 1,
            "name": "kueue-es replay",
        }
        if credentials is not None:
            options.update(user=credentials.user, **{"pass": credentials.password()})
        elif parsed.username:
            options.update(
                user=urllib.parse.unquote(parsed.username), **{"pass": urllib.parse.unquote(parsed.password or "")}
            )
        self._send(b"CONNECT " + json.dumps(options).encode() + b"\r\nPING\r\n")
        while True:
            line = self._line()
            if line == b"PONG":
                sock.settimeout(READ_TIMEOUT)  # a busy machine may keep the server from answering for a while
                return sock
            if line.startswith(b"-ERR"):
                raise base.BusError(f"the server refused the connection: {line[5:].decode(errors='replace')}")

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as err:
            raise base.BusError(f"Reading the log failed: {err}") from err

    def _fill(self) -> None:
        """Read more bytes into the buffer (dropping what was parsed)."""
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        try:
            chunk = self._sock.recv(_READ)
        except OSError as err:
            raise base.BusError(f"Reading the log failed: {err}") from err
        if not chunk:
            raise base.BusError("Reading the log failed: the server closed the connection")
        self._buf += chunk

    def _line(self) -> bytes:
        while True:
            end = self._buf.find(b"\r\n", self._pos)
            if end >= 0:
                line = bytes(self._buf[self._pos : end])
                self._pos = end + 2
                return line
            self._fill()

    def close(self) -> None:
        """Close the socket."""
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> DirectReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- requests ----------------------------------------------------------------------------

    def _request(self, subject: str, payload: bytes) -> None:
        self._send(b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), self._inbox.encode(), len(payload), payload))

    def _replies(self) -> Iterator[tuple[str, bytes]]:
        """The replies on the inbox as (header block, payload), answering the server's PINGs."""
        buf = self._buf
        while True:
            end = buf.find(b"\r\n", self._pos)
            if end < 0:
                self._fill()
                buf = self._buf
                continue
            op = buf[self._pos : self._pos + 4]
            if op == b"HMSG":
                parts = bytes(buf[self._pos : end]).split()
                head_len, total = int(parts[-2]), int(parts[-1])
                stop = end + 2 + total
                while len(buf) < stop + 2:
                    self._fill()
                    buf = self._buf
                    end = buf.find(b"\r\n", self._pos)
                    stop = end + 2 + total
                start = end + 2
                headers = buf[start : start + head_len].decode()
                data = bytes(buf[start + head_len : stop])
                self._pos = stop + 2
                yield headers, data
            elif op == b"MSG ":
                parts = bytes(buf[self._pos : end]).split()
                total = int(parts[-1])
                stop = end + 2 + total
                while len(buf) < stop + 2:
                    self._fill()
                    buf = self._buf
                    end = buf.find(b"\r\n", self._pos)
                    stop = end + 2 + total
                data = bytes(buf[end + 2 : stop])
                self._pos = stop + 2
                yield "", data
            else:
                line = bytes(buf[self._pos : end])
                self._pos = end + 2
                if line == b"PING":
                    self._send(b"PONG\r\n")
                elif line.startswith(b"-ERR"):
                    text = line[5:].decode(errors="replace").strip("'")
                    if "Permissions Violation" in text:
                        raise DirectUnavailable(f"The server refused Direct Get: {text}")
                    raise base.BusError(f"Reading the log failed: {text}")
                # +OK, PONG, INFO: nothing to do

    def last_seq(self) -> int:
        """The stream's last sequence (0 when empty), from STREAM.INFO."""
        self._request(STREAM_INFO, b"")
        for headers, data in self._replies():
            if headers.startswith("NATS/1.0 503"):
                raise base.NotFoundError(f"The stream {base.STREAM_NAME} does not answer (no responders)")
            info = json.loads(data)
            if "error" in info:
                raise base.BusError(f"Reading the state of {base.STREAM_NAME} failed: {info['error']}")
            return int(info["state"]["last_seq"])
        raise AssertionError("unreachable")

    def messages(self, *, last: int, start_seq: int = 1, subject: str | None = None) -> Iterator[base.LogMessage]:
        """The stored messages from ``start_seq`` up to ``last`` (the stream's last sequence when
        the read began), on ``subject`` (a filter, wildcards allowed) or all, in sequence order.

        A batch that ends before ``last`` with messages still to come (a replica behind
        the leader) is asked again up to 5 times, 0.2 s apart; then reading stops and the
        caller sees the missing tail as a gap.
        """
        seq = max(start_seq, 1)
        retries = 0
        while seq <= last:
            request: dict[str, Any] = {"seq": seq, "batch": self.batch, "max_bytes": MAX_BYTES}
            if subject is not None:
                request["next_by_subj"] = subject
            self._request(DIRECT_GET, json.dumps(request).encode())
            got = 0
            pending = -1
            for headers, data in self._replies():
                status = headers[9:12] if headers.startswith("NATS/1.0 ") else ""
                if status:
                    if status == "204":  # end of batch: Nats-Num-Pending says whether more follow
                        pending = int(_header(headers, "Nats-Num-Pending") or 0)
                    elif status == "404":
                        pending = 0
                    elif status == "503":
                        raise DirectUnavailable(f"The stream {base.STREAM_NAME} does not answer Direct Get")
                    elif status == "408" or status == "400":
                        raise DirectUnavailable(f"Direct Get refused: {headers.splitlines()[0]}")
                    break
                message = _message(headers, data)
                if message.seq > last:
                    pending = 0
                    continue  # the rest of this batch is past the read's end: drained, not yielded
                got += 1
                seq = message.seq + 1
                yield message
            if seq > last:
                return
            if got == 0 and pending == 0:
                if subject is not None or retries >= 5:
                    return  # nothing more matches (or a replica stays behind: the caller sees a gap)
                retries += 1
                time.sleep(0.2)
            elif got:
                retries = 0


def _header(block: str, name: str) -> str | None:
    at = block.find(f"\r\n{name}:")
    if at < 0:
        return None
    start = at + len(name) + 3
    return block[start : block.find("\r\n", start)].strip()


def _message(block: str, data: bytes) -> base.LogMessage:
    """A Direct Get reply as the message a reader sees (the server's ``Nats-*`` headers but
    ``Nats-Msg-Id`` dropped, as :func:`rules.stored_headers` does; ``Nats-Time-Stamp`` as its ``time_ms``)."""
    headers: dict[str, str] = {}
    subject = ""
    seq = 0
    pending = 0
    stored = 0
    for line in block.split("\r\n")[1:]:
        if not line:
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if key[:5].lower() == "nats-":
            if key == "Nats-Msg-Id":
                headers[key] = value
            elif key == "Nats-Subject":
                subject = value
            elif key == "Nats-Sequence":
                seq = int(value)
            elif key == "Nats-Num-Pending":
                pending = int(value)
            elif key == "Nats-Time-Stamp":
                stored = stamp_ms(value)
            continue
        headers[key] = value
    return base.LogMessage(seq=seq, subject=subject, data=data, headers=headers, pending=pending, time_ms=stored)


_second_cache: dict[str, int] = {}


def stamp_ms(stamp: str) -> int:
    """A ``Nats-Time-Stamp`` (RFC 3339 in UTC with up to nanoseconds: ``2026-12-07T09:19:39.210123456Z``)
    as ms since the epoch; 0 when it is not one. The second's part is parsed once per second seen (a
    log's messages come many to a second)."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    seconds = _second_cache.get(whole)
    if seconds is None:
        try:
            moment = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.UTC)
        except ValueError:
            return 0
        seconds = int(moment.timestamp())
        if len(_second_cache) > 4096:
            _second_cache.clear()
        _second_cache[whole] = seconds
    digits = (fraction + "000")[:3]
    return seconds * 1000 + (int(digits) if digits.isdigit() else 0)
