"""How ``kueue_es.events.bus.nats.connect`` is configured from outside: stream replicas from the
environment (every service of a deployment uses the same), and no password in messages."""

from __future__ import annotations

import pytest

from kueue_es.events.bus import base
from kueue_es.events.bus import nats as nats_bus


@pytest.mark.parametrize(("value", "expected"), [(None, 1), ("", 1), ("3", 3), (" 5 ", 5)])
def test_stream_replicas_from_env(monkeypatch: pytest.MonkeyPatch, value: str | None, expected: int) -> None:
    if value is None:
        monkeypatch.delenv(nats_bus.REPLICAS_ENV, raising=False)
    else:
        monkeypatch.setenv(nats_bus.REPLICAS_ENV, value)
    assert nats_bus.stream_replicas_from_env() == expected


@pytest.mark.parametrize("value", ["0", "-1", "three", "2.5"])
def test_malformed_replicas_are_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(nats_bus.REPLICAS_ENV, value)
    with pytest.raises(base.BusError, match="KUEUE_ES_STREAM_REPLICAS"):
        nats_bus.stream_replicas_from_env()


def test_passwords_are_left_out_of_messages() -> None:
    assert (
        nats_bus._without_password("nats://watcher:s3cr3t@kueue-es-nats:4222")
        == "nats://watcher:***@kueue-es-nats:4222"
    )
    assert (
        nats_bus._without_password(["nats://a:b@h1:4222", "nats://h2:4222"]) == "nats://a:***@h1:4222, nats://h2:4222"
    )
    assert nats_bus._without_password("nats://token@h:4222") == "nats://token@h:4222"


async def test_connect_failure_does_not_show_the_password() -> None:
    with pytest.raises(base.BusError) as err:
        await nats_bus.connect("nats://watcher:s3cr3t@127.0.0.1:1", timeout=0.5)
    assert "s3cr3t" not in str(err.value) and "watcher:***@" in str(err.value)
