"""Open a log source and read it: a running system (NATS URL), a stopped one (its store), a file.

A source is named as ``kueue-es replay`` names one: ``--nats URL`` (or, with none given,
the running system :func:`kueue_es.current.find` finds), ``--store DIR`` (a stopped
system's nats store directory, served read-only by a temporary nats-server), or
``--file LOG`` (JSON lines, :mod:`kueue_es.logfile`). ``kueue-es diff`` names each side
with one word (:func:`parse_spec`): a ``nats://`` or ``tls://`` URL, a directory (a store)
or a file.

:func:`read_log` returns the whole log in memory, in sequence order; :func:`cut` keeps it
up to a sequence or a time (``SEQ|RFC3339``, as ``--from``/``--to`` of replay take it: a
time keeps every message before the first DecisionRecord decided after it).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec

from kueue_es import logfile
from kueue_es.events import codec, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.events.bus.server import Credentials
from kueue_es.logsource import parse_at

Progress = Callable[[int], None]


class SourceError(ValueError):
    """A log source that cannot be named or read; the message says which and why."""


@dataclass(frozen=True, kw_only=True)
class LogSource:
    """Where a log is: ``kind`` nats (``where`` a URL), store (a directory) or file (a JSON-lines log)."""

    kind: Literal["nats", "store", "file"]
    where: str
    credentials: Credentials | None = None

    def describe(self) -> str:
        """``nats://...``, ``store DIR`` or ``file PATH``, for messages."""
        return self.where if self.kind == "nats" else f"{self.kind} {self.where}"


def from_options(*, nats: str | None, store: Path | None, file: Path | None) -> LogSource:
    """The source of ``--nats``/``--store``/``--file``: at most one; none given is the running
    system (:func:`kueue_es.current.find`). Raises SourceError for two at once or a missing
    path, :class:`kueue_es.current.NoSystemError` when none is given and none runs."""
    given = [x for x in (nats, store, file) if x is not None]
    if len(given) > 1:
        raise SourceError("give one of --nats URL, --store DIR or --file LOG, not several")
    if store is not None:
        if not Path(store).is_dir():
            raise SourceError(f"--store {store}: no such directory")
        return LogSource(kind="store", where=str(store))
    if file is not None:
        if not Path(file).is_file():
            raise SourceError(f"--file {file}: no such file")
        return LogSource(kind="file", where=str(file))
    from kueue_es import current

    system = current.find(nats)
    if note := current.choice_note(system):
        print(f"note: {note}", file=sys.stderr)  # stdout is the answer (-o json stays JSON)
    return LogSource(kind="nats", where=system.nats_url, credentials=system.credentials or _running_reader(nats))


def _running_reader(url: str | None) -> Credentials | None:
    """The reading user of the running system whose NATS URL is ``url`` (of those ``demo --keep`` and
    ``up`` recorded: :func:`kueue_es.current.running`, not only the newest), else None."""
    if not url:
        return None
    from kueue_es import current

    for system in current.running():
        if system.nats_url.rstrip("/") == url.rstrip("/"):
            return system.credentials
    return None


def parse_spec(spec: str) -> LogSource:
    """One word naming a log: ``nats://HOST:PORT`` or ``tls://...`` (the user from
    ``$KUEUE_ES_NATS_USER``/``$KUEUE_ES_NATS_PASSWORD_FILE``, else, for the running system's URL, the
    reading user it recorded: :func:`kueue_es.current.find`), a directory (a stopped store) or a
    JSON-lines file. Raises SourceError when it is none of them."""
    if spec.startswith(("nats://", "tls://")):
        from kueue_es.events.bus.nats import credentials_from_env

        return LogSource(kind="nats", where=spec, credentials=credentials_from_env() or _running_reader(spec))
    path = Path(spec)
    if path.is_dir():
        return LogSource(kind="store", where=spec)
    if path.is_file():
        return LogSource(kind="file", where=spec)
    raise SourceError(f"{spec}: not a nats:// or tls:// URL, a store directory or a log file")


async def read_log(source: LogSource, *, progress: Progress | None = None) -> list[LogMessage]:
    """Every message of ``source`` up to its last sequence now, in order (BusError when a server
    cannot be reached, SourceError when a file line is not a log message)."""
    if source.kind == "file":
        return _read_file(Path(source.where), progress)
    if source.kind == "store":
        from kueue_es.events.bus.server import open_stopped_store, store_reader

        async with open_stopped_store(Path(source.where)) as server:
            return await _read_url(server.url, store_reader(server), progress)
    return await _read_url(source.where, source.credentials, progress)


def _read_file(path: Path, progress: Progress | None) -> list[LogMessage]:
    messages: list[LogMessage] = []
    try:
        for message in logfile.read_lines(path):
            messages.append(message)
            if progress is not None:
                progress(1)
    except (ValueError, KeyError, msgspec.MsgspecError) as err:
        raise SourceError(f"{path}: line {len(messages) + 1} is not a log message: {err}") from err
    return messages


async def _read_url(url: str, credentials: Credentials | None, progress: Progress | None) -> list[LogMessage]:
    from kueue_es.events.bus.direct import DirectReader, DirectUnavailable

    def direct() -> list[LogMessage]:
        with DirectReader(url, credentials=credentials) as reader:
            out = []
            for message in reader.messages(last=reader.last_seq()):
                out.append(message)
                if progress is not None:
                    progress(1)
            return out

    try:
        return await asyncio.to_thread(direct)
    except DirectUnavailable:
        from kueue_es.events.bus import nats as nats_bus
        from kueue_es.replay import read_log as read_bus

        bus = await nats_bus.connect(url, credentials=credentials, create_stream=False)
        try:
            messages, _ = await read_bus(bus)
        finally:
            await bus.close()
        return messages


def cut_seq(messages: Sequence[LogMessage], value: str) -> int:
    """The last sequence of ``messages`` that ``value`` (SEQ or RFC 3339) keeps: a sequence as it is;
    a time: the message before the first DecisionRecord decided (``now_ms``) after it, else the end."""
    try:
        at = parse_at(value, option="--from")
    except ValueError as err:
        raise SourceError(str(err)) from None
    if at.seq is not None:
        return at.seq
    ms = at.ms
    assert ms is not None
    for message, record in decision_records(messages):
        if record.now_ms > ms:
            return message.seq - 1
    return messages[-1].seq if messages else 0


def decision_records(messages: Sequence[LogMessage]) -> Iterator[tuple[LogMessage, types.DecisionRecord]]:
    """Each DecisionRecord of ``messages`` with its message, in log order (a message that does not
    decode is passed over: the fold reports it)."""
    for message in messages:
        if message.headers.get("Kq-Type") not in (None, "DecisionRecord"):
            continue
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            continue
        if isinstance(event, types.DecisionRecord):
            yield message, event
