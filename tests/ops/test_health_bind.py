"""Issue 13: ``kueue-es service --health-port`` bound every interface while it logged 127.0.0.1."""

from __future__ import annotations

import socket

import pytest
import structlog

from kueue_es.cli import _parser
from kueue_es.services.health import Health, serve_health


def test_the_service_binds_loopback_unless_told_otherwise() -> None:
    args = _parser().parse_args(["service", "admitter", "--nats", "nats://127.0.0.1:4222", "--health-port", "8080"])
    assert args.health_host == "127.0.0.1"
    args = _parser().parse_args(
        ["service", "admitter", "--nats", "nats://x:4222", "--health-port", "8080", "--health-host", "0.0.0.0"]
    )
    assert args.health_host == "0.0.0.0"


def other_address() -> str | None:
    """An address of this machine other than loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


@pytest.mark.parametrize(("host", "reachable_outside"), [(None, False), ("0.0.0.0", True)])
async def test_the_log_says_what_was_bound(host: str | None, reachable_outside: bool) -> None:
    kwargs = {} if host is None else {"host": host}
    with structlog.testing.capture_logs() as logs:
        async with serve_health(Health(service="admitter"), port=0, **kwargs) as url:
            port = int(url.rsplit(":", 1)[1])
            (line,) = [entry for entry in logs if entry["event"] == "health_serving"]
            assert line["bound"] == f"{host or '127.0.0.1'}:{port}"
            outside = other_address()
            if outside is not None:
                with socket.socket() as client:
                    client.settimeout(1)
                    assert (client.connect_ex((outside, port)) == 0) is reachable_outside
