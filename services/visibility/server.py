"""The visibility service: folds the log as NATS user ``reader`` and answers Kueue's visibility API over HTTPS.

``kueue-es service visibility --nats URL [--api-port 8082] [--api-host H] [--tls-cert-file F
--tls-private-key-file K | --cert-dir DIR]``. The fold is the deciders' (:func:`runtime.fold_message` into
a :class:`ClusterState`), started from the newest verified snapshot when there is one
(``kueue_es.snapshots``) and kept current by reading on; each request is answered from the fold as it is
between two messages, in the event loop that folds, so an answer never sees half a batch. Until the fold
has read the log up to where it ended at the start, the pending-workloads reads answer 503.

TLS as Kueue's visibility server does it (pkg/visibility/server.go): the certificate and key given, else a
self-signed certificate for ``localhost`` and ``127.0.0.1`` made at start (``cert_dir``: kept there and used
again; Kueue's ``MaybeDefaultWithSelfSignedCerts``); Kueue's APIServices say ``insecureSkipTLSVerify``.
The API port also answers ``/healthz``, ``/livez`` and ``/readyz``, as an aggregated API server does;
``--health-port`` serves the service's usual health and metrics (:mod:`kueue_es.services.health`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp.web
import structlog

from kueue_es.events import subjects
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus, LogMessage
from kueue_es.projections.cluster import ClusterState
from kueue_es.services import ports, runtime
from kueue_es.services.health import ObservedBus
from kueue_es.services.visibility import api
from kueue_es.services.visibility.auth import DelegatedAuth

log = structlog.get_logger(__name__)

DEFAULT_PORT = 8082  # Kueue's DefaultVisibilityBindPort
CERT_FILE, KEY_FILE = "tls.crt", "tls.key"


class VisibilityFold(runtime.LogFollower):
    """The log folded for the visibility API: ``state`` once caught up (None before), kept current."""

    def __init__(
        self, *, bus: Bus, start: runtime.StartPoint | None = None, partition: str = subjects.DEFAULT_PARTITION
    ):
        self.bus, self.start, self.partition = bus, start, partition
        self.state = ClusterState()
        self.position = 0
        self.caught_up = False

    @property
    def ready_state(self) -> ClusterState | None:
        """The folded state once the fold has caught up with the log, else None."""
        return self.state if self.caught_up else None

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """A :meth:`Health.add_check`: ready once caught up; says how far the fold got."""
        return self.caught_up, {"folded_seq": self.state.last_seq}

    async def run(self) -> None:
        """Take the start point if it is of this log, then fold every message for ever (cancel to stop)."""
        await self._resume()
        await self.follow()

    async def take(self, message: LogMessage) -> None:
        runtime.fold_message(self.state, message)

    def progress(self) -> dict[str, Any]:
        return {"workloads": len(self.state.workloads)}

    async def _resume(self) -> None:
        start, self.start = self.start, None
        if start is not None:
            problem = await runtime.log_mismatch(self.bus, start)
            if problem is None:
                self.state, self.position = start.state, start.seq
                self.bus.folded_through(start.seq)
                log.info("started_from_checkpoint", checkpoint=start.origin, seq=start.seq)
                with contextlib.suppress(Exception):
                    self.caught_up = await self.bus.last_seq() <= start.seq
                return
            log.warning("checkpoint_not_used", checkpoint=start.origin, seq=start.seq, reason=problem)
        await runtime.require_from_start(self.bus, "visibility server")
        with contextlib.suppress(Exception):
            self.caught_up = await self.bus.last_seq() == 0


def app(
    fold: Callable[[], ClusterState | None],
    *,
    clock: Callable[[], int] = runtime.wall_clock_ms,
    delegated: DelegatedAuth | None = None,
) -> aiohttp.web.Application:
    """The HTTP application: Kueue's visibility API (:func:`api.answer`) over ``fold()`` (the state, None
    until caught up), and ``/healthz``, ``/livez``, ``/readyz``; ``clock``: ms since the epoch.
    ``delegated``: every API request is authenticated and authorized with the cluster first (401, 403)."""

    async def handle(request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        path = request.path
        if path in ("/healthz", "/livez"):
            return aiohttp.web.Response(text="ok")
        if path == "/readyz":
            ready = fold() is not None
            return aiohttp.web.Response(text="ok" if ready else "not caught up", status=200 if ready else 503)
        if delegated is not None:
            peercert = request.transport.get_extra_info("peercert") if request.transport is not None else None
            refused = await delegated.check(
                method=request.method, path=path, headers=request.headers, peercert=peercert
            )
            if refused is not None:
                return aiohttp.web.json_response(refused.body, status=refused.status, dumps=_compact)
        reply = api.answer(fold(), request.method, path, request.query, now_ms=clock())
        if reply is None:
            reply = api.no_such_path()
        return aiohttp.web.json_response(reply.body, status=reply.status, dumps=_compact)

    application = aiohttp.web.Application()
    application.router.add_route("*", "/{tail:.*}", handle)
    return application


def _compact(body: Any) -> str:
    """JSON as an API server writes it: no spaces, a newline at the end."""
    return json.dumps(body, separators=(",", ":")) + "\n"


def self_signed(cert_dir: Path, *, now: datetime.datetime | None = None) -> tuple[Path, Path]:
    """``(certificate, key)`` in ``cert_dir``: the ones there, else a new self-signed pair for ``localhost``
    and ``127.0.0.1`` (EC P-256, a year) written there (the key 0600). Raises OSError when it cannot write."""
    cert, key = cert_dir / CERT_FILE, cert_dir / KEY_FILE
    if cert.is_file() and key.is_file():
        return cert, key
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = now or datetime.datetime.now(datetime.UTC)
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"localhost@{int(now.timestamp())}")])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    cert_dir.mkdir(parents=True, exist_ok=True)
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key.chmod(0o600)
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return cert, key


def tls_context(
    *, cert_file: Path | None, key_file: Path | None, cert_dir: Path, client_ca: str | None = None
) -> ssl.SSLContext:
    """The server's TLS context: ``cert_file`` and ``key_file`` when given, else :func:`self_signed` in
    ``cert_dir``; ``client_ca`` (PEM): client certificates are asked for and verified against it (the front
    proxy's, :mod:`.auth`). Raises OSError or ssl.SSLError naming a file that cannot be used."""
    if cert_file is None or key_file is None:
        cert_file, key_file = self_signed(cert_dir)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_OPTIONAL
        context.load_verify_locations(cadata=client_ca)
    return context


@contextlib.asynccontextmanager
async def serve_api(
    application: aiohttp.web.Application, *, host: str, port: int, context: ssl.SSLContext | None
) -> AsyncIterator[str]:
    """Serve ``application`` on ``host:port`` (HTTPS with ``context``; port 0: a free one, reported to a
    supervisor that asked, :mod:`kueue_es.services.ports`) until the block exits; yields its URL.
    Raises OSError when the port cannot be bound."""
    runner = aiohttp.web.AppRunner(application, access_log=None)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, host=host, port=port, ssl_context=context)
    try:
        await site.start()
        bound = int(runner.addresses[0][1]) if runner.addresses else port
        ports.report(ports.API, bound)
        scheme = "https" if context is not None else "http"
        yield f"{scheme}://{host}:{bound}"
    finally:
        await runner.cleanup()


async def serve_visibility(
    *,
    nats_url: str,
    stop: asyncio.Event,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    context: ssl.SSLContext | None,
    connect: Callable[[str], Awaitable[Bus]] = nats_bus.connect,
    start: runtime.StartPoint | None = None,
    delegated: DelegatedAuth | None = None,
) -> None:
    """Fold the log at ``nats_url`` and answer the visibility API on ``host:port`` until ``stop`` is set
    (``delegated``: with the cluster's authentication and authorization, :mod:`.auth`)."""
    bus = await connect(nats_url)
    fold = VisibilityFold(bus=bus, start=start)
    if isinstance(bus, ObservedBus):
        bus.health.add_check(fold.readiness)
    try:
        async with serve_api(
            app(lambda: fold.ready_state, delegated=delegated), host=host, port=port, context=context
        ) as url:
            log.info("service_started", role="visibility", url=url)
            await runtime.run_until_stopped(stop, fold.run())
    finally:
        await bus.close()
        log.info("service_stopped", role="visibility", folded_seq=fold.state.last_seq)
