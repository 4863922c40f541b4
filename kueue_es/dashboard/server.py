"""``kueue-es dashboard``: the log folded live and shown in a browser, read-only (docs/dashboard.md).

The dashboard connects to NATS as the read-only ``reader`` user (found as the other log readers find it,
:func:`kueue_es.current.find`), reads the log from #1 and folds every message with the fold every
service uses (:class:`kueue_es.logsource.Folder`: only verified decision batches count), keeping the
messages read so it can fold them again up to any earlier point. It serves, with aiohttp:

- ``/`` and ``/workloads/NAMESPACE/NAME``: the page (``static/``: HTML, CSS and plain JavaScript);
- ``/api/overview[?at=SEQ|RFC3339]``: :func:`kueue_es.dashboard.views.overview` with ``asOf``;
- ``/api/workloads/NAMESPACE/NAME[?at=]``: ``kueue-es explain -o json`` of a Workload (or of the Workloads
  of a Job of that name): its story, position and what it waits for; 404 when the log names none;
- ``/api/history``: the sequences and times the history slider moves over;
- ``/api/events``: Server-Sent Events (``text/event-stream``), an ``overview`` event with the overview's
  JSON when the page connects and after every change of the fold (at most about every 0.25 s);
- ``/healthz`` (the process answers) and ``/readyz`` (caught up with the log, else 503).

Errors under ``/api/`` are JSON, ``{"error": ...}``: a bad ``at`` (400), no such workload (404), and
aiohttp's own (an unknown path, 404; another method, 405).

An ``at`` in the past is answered from a fold of the messages up to there: folds move forward from the
last one asked for, start over from the nearest kept copy of the state (one every
:data:`CHECKPOINT_EVERY` messages) when asked for an earlier point, and their answers are cached, so
moving the slider is fast. On a log purged below a snapshot (``kueue-es compact``) the dashboard starts from
the oldest snapshot that covers the log's start, as the services start from one, and its history starts
there; with no usable snapshot it refuses to start (LogPurgedError).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from importlib import resources
from pathlib import Path
from typing import Any

import aiohttp.web
import structlog

from kueue_es import checkpoints, logsource
from kueue_es.dashboard import views
from kueue_es.events import codec
from kueue_es.events.bus.base import Bus, LogMessage
from kueue_es.projections.cluster import ClusterState
from kueue_es.services import ports

log = structlog.get_logger(__name__)

DEFAULT_PORT = 8090
CHECKPOINT_EVERY = 500  # messages between two kept copies of the state (the history's starting points)
CACHE_SIZE = 256  # answers kept per kind (overviews, explanations)
PUSH_INTERVAL = 0.25  # seconds: at most one SSE push per interval per page
KEEPALIVE = 15.0  # seconds between SSE comments on a quiet log (proxies close silent streams)
STATIC = "static"


class LiveLog:
    """The log read so far (``messages``, in sequence order) and its fold (``folder``), kept current by
    :meth:`follow`; ``times[i]``: the latest event time (ms since the epoch) in ``messages[: i + 1]``.
    ``version`` counts changes; :meth:`wait_change` waits for the next one."""

    def __init__(self) -> None:
        self.messages: list[LogMessage] = []
        self.seqs: list[int] = []
        self.times: list[int] = []
        self.folder = logsource.Folder()
        self.caught_up = False
        self.version = 0
        self._changed = asyncio.Event()
        self.checkpoints: dict[int, tuple[bytes, int]] = {}  # messages folded -> (state body, last_ms)
        self.base: tuple[bytes, int] | None = None  # the snapshot started from: (state body, last_ms)
        self.base_seq = 0  # its position: ``messages`` follow it (0: they start at #1)
        self.origin = ""  # where the snapshot came from, for the log lines

    @property
    def last_seq(self) -> int:
        """The sequence of the last message read (the snapshot's position, or 0, before any)."""
        return self.seqs[-1] if self.seqs else self.base_seq

    @property
    def base_ms(self) -> int:
        """The time of the snapshot started from (0: none, or untimed)."""
        return self.base[1] if self.base is not None else 0

    def start_from(self, state: ClusterState, seq: int, *, last_ms: int = 0, origin: str = "") -> None:
        """Start from ``state``, the fold of the log through ``seq`` (a snapshot of a purged log), before
        any message is read: the live fold and every fold of the history start from a copy of it."""
        if self.messages:
            raise RuntimeError("a LiveLog starts from a snapshot before it reads any message")
        self.base, self.base_seq, self.origin = (checkpoints.dumps(state), last_ms), seq, origin
        self.folder = self.fresh_folder()

    def fresh_folder(
        self,
        observer: logsource.Observer | None = None,
        on_message: logsource.MessageHook | None = None,
    ) -> logsource.Folder:
        """A fold before the first message read: empty, or a copy of the snapshot's state started from;
        ``observer`` and ``on_message`` as :class:`logsource.Folder` takes them."""
        if self.base is None:
            return logsource.Folder(observer=observer, on_message=on_message)
        body, last_ms = self.base
        return logsource.Folder(
            state=checkpoints.loads(body), last_ms=last_ms, observer=observer, on_message=on_message
        )

    def add(self, message: LogMessage) -> None:
        """Fold ``message`` into the live state and keep it."""
        self.folder.feed(message)
        self.messages.append(message)
        self.seqs.append(message.seq)
        self.times.append(self.folder.last_ms)
        if len(self.messages) % CHECKPOINT_EVERY == 0:
            self.checkpoints[len(self.messages)] = (checkpoints.dumps(self.folder.state), self.folder.last_ms)
        if message.pending == 0:
            self.caught_up = True
        self.changed()

    def changed(self) -> None:
        """Wake every :meth:`wait_change`."""
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_change(self, version: int, *, timeout: float) -> bool:
        """Wait until ``version`` is no longer current; False after ``timeout`` s."""
        if self.version != version:
            return True
        event = self._changed
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            return False
        return True

    async def follow(self, bus: Bus) -> None:
        """Read the log from #1 (on a log purged below a snapshot: from the oldest snapshot that covers its
        start, as the services do) and fold it for ever (cancel to stop). Raises LogPurgedError when the
        log no longer starts at #1 and no snapshot covers its start, BusError when the connection is lost."""
        from kueue_es.events import subjects
        from kueue_es.services import runtime

        if await bus.first_seq() > 1:
            await self._start_from_snapshot(bus)
        if self.base is None:
            await runtime.require_from_start(bus, "dashboard")
        if await bus.last_seq() <= self.base_seq:
            self.caught_up = True
            self.changed()
        filters = [subjects.FACTS, subjects.DISPATCH, subjects.DECISIONS]
        async for message in bus.read(subjects=filters, start_seq=self.base_seq + 1):
            self.add(message)

    async def _start_from_snapshot(self, bus: Bus) -> None:
        """Start from the oldest snapshot in ``KQ_SNAPSHOTS`` that covers the log's start (the history
        keeps as much as is left); none: nothing (the caller refuses the log). A bucket that cannot be
        read counts as none, said in the log."""
        from kueue_es import snapshots
        from kueue_es.events.bus.base import BusError
        from kueue_es.events.bus.nats import SNAPSHOT_BUCKET

        def refused(reason: str) -> None:
            log.warning("snapshot_refused", reason=reason)

        try:
            loaded = await snapshots.newest(bus, warn=refused, oldest_first=True)
        except BusError as err:
            refused(f"the snapshots cannot be read: {err}")
            return
        if loaded is None:
            return
        last_ms = 0
        with contextlib.suppress(BusError, codec.DecodeError):  # the time of the snapshot's own message
            last_ms = logsource.event_time(codec.decode((await bus.get(loaded.seq)).data))
        origin = f"{SNAPSHOT_BUCKET}/{loaded.name}"
        self.start_from(loaded.state, loaded.seq, last_ms=last_ms, origin=origin)
        log.info("started_from_snapshot", snapshot=origin, seq=loaded.seq)

    def count_at(self, at: logsource.At | None) -> int:
        """How many of the messages read a fold up to ``at`` takes (None: all)."""
        if at is None:
            return len(self.messages)
        if at.seq is not None:
            return bisect.bisect_right(self.seqs, at.seq)
        assert at.ms is not None
        return bisect.bisect_right(self.times, at.ms)


class History:
    """States as of earlier points of a :class:`LiveLog`, folded from its messages and cached."""

    def __init__(self, live: LiveLog) -> None:
        self.live = live
        self._cursor: logsource.Folder | None = None  # made on first use: the live log may start from a snapshot
        self._cursor_count = 0
        self.overviews: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self.explanations: OrderedDict[tuple[str, str, int], dict[str, Any] | None] = OrderedDict()

    def state_at(self, count: int) -> tuple[ClusterState, int]:
        """The state after the first ``count`` messages and its latest time (ms). Raises IndexError when
        fewer messages were read."""
        if count > len(self.live.messages):
            raise IndexError(f"only {len(self.live.messages)} messages read, not {count}")
        if self._cursor is None or count < self._cursor_count:
            start = max((n for n in self.live.checkpoints if n <= count), default=0)
            if start:
                body, last_ms = self.live.checkpoints[start]
                self._cursor = logsource.Folder(state=checkpoints.loads(body), last_ms=last_ms)
            else:
                self._cursor = self.live.fresh_folder()
            self._cursor_count = start
        for message in self.live.messages[self._cursor_count : count]:
            self._cursor.feed(message)
        self._cursor_count = count
        return self._cursor.state, self._cursor.last_ms

    def overview_at(self, count: int) -> dict[str, Any]:
        """:func:`views.overview` after the first ``count`` messages (cached)."""
        found = self.overviews.get(count)
        if found is None:
            state, last_ms = self.state_at(count)
            found = views.overview(state, now_ms=last_ms)
            found["asOf"] = self._as_of(count, last_ms, live=False)
            _remember(self.overviews, count, found)
        return found

    def _as_of(self, count: int, now_ms: int, *, live: bool) -> dict[str, Any]:
        seq = self.live.seqs[count - 1] if count else self.live.base_seq
        return {
            "seq": seq,
            "time": logsource.rfc3339(now_ms),
            "lastSeq": self.live.last_seq,
            "live": live,
            "caughtUp": self.live.caught_up,
        }

    def live_overview(self, *, now_ms: int) -> dict[str, Any]:
        """:func:`views.overview` of the live fold at ``now_ms``."""
        folder = self.live.folder
        body = views.overview(folder.state, now_ms=now_ms)
        body["asOf"] = self._as_of(len(self.live.messages), max(folder.last_ms, now_ms), live=True)
        return body

    def explanation(self, namespace: str, name: str, count: int, *, now_ms: int) -> dict[str, Any] | None:
        """``kueue-es explain -o json`` of ``namespace/name`` (a Workload, or a Job owning Workloads) after
        the first ``count`` messages, ``now_ms`` its clock; None when the log names no such workload."""
        from kueue_es import explain
        from kueue_es.scheduling import explain as core

        cache_key = (namespace, name, count)
        if cache_key in self.explanations:
            return self.explanations[cache_key]
        collector = core.StoryCollector(namespace=namespace, name=name)
        folder = self.live.fresh_folder(
            observer=collector.observe, on_message=lambda message: collector.stored_at(message.time_ms)
        )
        for message in self.live.messages[:count]:
            folder.feed(message)
        key = explain._chosen(collector, folder.state, f"{namespace}/{name}")
        report = None
        if key is not None:
            report = explain.explanation(collector, folder.state, key, now_ms=max(now_ms, folder.last_ms))
        _remember(self.explanations, cache_key, report)
        return report


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)


def _dumps(body: Any) -> str:
    return json.dumps(body, separators=(",", ":"))


def _kept_headers(err: aiohttp.web.HTTPException) -> dict[str, str]:
    """The headers of an aiohttp error worth keeping on its JSON form (``Allow`` of a 405)."""
    return {k: v for k, v in err.headers.items() if k.lower() == "allow"}


def app(live: LiveLog, *, clock: Callable[[], int] | None = None) -> aiohttp.web.Application:
    """The dashboard's aiohttp application over ``live`` (see the module); ``clock``: ms since the epoch
    (default the wall clock), the live fold's "now"."""
    now = clock or (lambda: int(time.time() * 1000))
    history = History(live)
    static = resources.files("kueue_es.dashboard") / STATIC
    latest: dict[str, Any] = {}  # the live overview of one version, shared by every page

    def live_overview() -> dict[str, Any]:
        if latest.get("version") != live.version:
            latest.update(version=live.version, body=history.live_overview(now_ms=now()))
        return latest["body"]

    def parse(request: aiohttp.web.Request) -> tuple[int | None, bool]:
        """``(count, live)``: the messages to fold for the request's ``at`` (None: the live fold)."""
        text = request.query.get("at", "").strip()
        if not text or text == "live":
            return None, True
        try:
            at = logsource.parse_at(text, option="at")
        except ValueError as err:
            raise aiohttp.web.HTTPBadRequest(
                text=_dumps({"error": str(err)}), content_type="application/json"
            ) from None
        return live.count_at(at), False

    async def page(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text=(static / "index.html").read_text(), content_type="text/html")

    async def asset(request: aiohttp.web.Request) -> aiohttp.web.Response:
        name = request.match_info["name"]
        types = {".js": "text/javascript", ".css": "text/css", ".txt": "text/plain"}
        suffix = Path(name).suffix
        item = static / name
        if "/" in name or suffix not in types or not item.is_file():
            raise aiohttp.web.HTTPNotFound()
        return aiohttp.web.Response(text=item.read_text(), content_type=types[suffix])

    async def overview(request: aiohttp.web.Request) -> aiohttp.web.Response:
        count, is_live = parse(request)
        body = live_overview() if is_live or count is None else history.overview_at(count)
        return aiohttp.web.json_response(body, dumps=_dumps)

    async def workload(request: aiohttp.web.Request) -> aiohttp.web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        count, is_live = parse(request)
        if count is None:
            count = len(live.messages)
        now_ms = now() if is_live else (live.times[count - 1] if count else live.base_ms)
        report = history.explanation(namespace, name, count, now_ms=now_ms)
        as_of = history._as_of(count, now_ms, live=is_live)
        if report is None:
            message = f"the log names no Workload {namespace}/{name} and no Workload owned by a job {namespace}/{name}"
            return aiohttp.web.json_response({"error": message, "asOf": as_of}, status=404, dumps=_dumps)
        return aiohttp.web.json_response({**report, "asOf": as_of}, dumps=_dumps)

    async def history_points(_: aiohttp.web.Request) -> aiohttp.web.Response:
        seqs, times = live.seqs, live.times
        step = max(1, len(seqs) // 200)
        marks = [[seqs[i], logsource.rfc3339(times[i])] for i in range(0, len(seqs), step)]
        if seqs and marks[-1][0] != seqs[-1]:
            marks.append([seqs[-1], logsource.rfc3339(times[-1])])
        body = {
            "firstSeq": seqs[0] if seqs else 0,
            "lastSeq": live.last_seq,
            "messages": len(seqs),
            "caughtUp": live.caught_up,
            "marks": marks,
        }
        return aiohttp.web.json_response(body, dumps=_dumps)

    async def events(request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        response = aiohttp.web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )
        await response.prepare(request)
        sent = -1
        try:
            while True:
                if sent != live.version:
                    sent = live.version
                    body = live_overview()
                    seq = body["asOf"]["seq"]
                    await response.write(f"id: {seq}\nevent: overview\ndata: {_dumps(body)}\n\n".encode())
                    await asyncio.sleep(PUSH_INTERVAL)  # gather the messages of a burst into one push
                    continue
                if not await live.wait_change(sent, timeout=KEEPALIVE):
                    await response.write(b": keep-alive\n\n")
        except ConnectionResetError:
            pass  # the page went away
        return response

    async def healthz(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text="ok")

    async def readyz(_: aiohttp.web.Request) -> aiohttp.web.Response:
        ready = live.caught_up
        return aiohttp.web.Response(text="ok" if ready else "not caught up", status=200 if ready else 503)

    @aiohttp.web.middleware
    async def api_errors(request: aiohttp.web.Request, handler: Any) -> aiohttp.web.StreamResponse:
        """Under ``/api/``, aiohttp's own errors (an unknown path, a method other than GET) as the API's other
        errors are: a JSON ``{"error": ...}`` with the same status."""
        try:
            return await handler(request)
        except aiohttp.web.HTTPException as err:
            if not request.path.startswith("/api/") or err.content_type == "application/json" or err.status < 400:
                raise
            message = f"{err.reason}: {request.method} {request.path}"
            if err.status == 404:
                message = f"no such API path {request.path} (docs/dashboard.md lists them)"
            return aiohttp.web.json_response(
                {"error": message}, status=err.status, headers=_kept_headers(err), dumps=_dumps
            )

    application = aiohttp.web.Application(middlewares=[api_errors])
    application.router.add_get("/", page)
    application.router.add_get("/workloads/{namespace}/{name}", page)
    application.router.add_get("/static/{name}", asset)
    application.router.add_get("/api/overview", overview)
    application.router.add_get("/api/workloads/{namespace}/{name}", workload)
    application.router.add_get("/api/history", history_points)
    application.router.add_get("/api/events", events)
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/readyz", readyz)
    return application


@contextlib.asynccontextmanager
async def serve(application: aiohttp.web.Application, *, host: str, port: int) -> AsyncIterator[str]:
    """Serve ``application`` on ``host:port`` (0: a free port) until the block exits; yields its URL.
    Raises OSError when the port cannot be bound."""
    runner = aiohttp.web.AppRunner(application, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, host=host, port=port)
    try:
        await site.start()
        bound = int(runner.addresses[0][1]) if runner.addresses else port  # port 0: the one the system chose
        ports.report(ports.HTTP, bound)  # to the supervisor that passed port 0 (kueue_es/services/ports.py)
        shown = f"[{host}]" if ":" in host else host
        yield f"http://{shown}:{bound}/"
    finally:
        await runner.cleanup()


async def run_dashboard(
    *, nats_url: str, credentials: Any, host: str, port: int, on_url: Callable[[str], None], stop: asyncio.Event
) -> None:
    """Fold the log at ``nats_url`` (as ``credentials``' user) and serve the dashboard on ``host:port``
    until ``stop`` is set; ``on_url`` is told the URL once it serves. Raises BusError (NATS),
    LogPurgedError, OSError (the port)."""
    from kueue_es.events.bus import nats as nats_bus
    from kueue_es.services.runtime import run_until_stopped

    bus = await nats_bus.connect(nats_url, credentials=credentials, create_stream=False)
    live = LiveLog()
    try:
        async with serve(app(live), host=host, port=port) as url:
            log.info("dashboard_started", url=url)
            on_url(url)
            await run_until_stopped(stop, live.follow(bus))
    finally:
        await bus.close()
