"""Creating the log's stream rides out JetStream's transient refusals (events/bus/nats.py ensure_stream).

CI met "no suitable peers for placement, peer offline" (err_code 10005) creating the R3 stream of a fresh
three-node cluster under load: a peer briefly seen offline, placed a moment later. It is retried until the
deadline like JetStream's other not-ready answers; another refusal is raised at once."""

from typing import Any

import nats.js.errors
import pytest
from nats.js import api

from kueue_es.events.bus import base
from kueue_es.events.bus.nats import NatsBus


class RefusingJsm:
    """A JetStream manager that refuses ``refusals`` add_stream calls with ``err_code``, then creates the stream."""

    def __init__(self, err_code: int, refusals: int) -> None:
        self.err_code, self.refusals, self.calls = err_code, refusals, 0

    async def add_stream(self, config: api.StreamConfig) -> Any:
        self.calls += 1
        if self.calls <= self.refusals:
            raise nats.js.errors.BadRequestError(code=400, err_code=self.err_code, description="refused")
        return api.StreamInfo(config=config, state=None, cluster=None)  # type: ignore[arg-type]


def _bus(jsm: RefusingJsm) -> NatsBus:
    bus = NatsBus.__new__(NatsBus)
    bus._jsm = jsm  # type: ignore[assignment]
    bus.timeout = 2.0
    return bus


async def test_no_suitable_peers_while_a_peer_is_seen_offline_is_retried() -> None:
    jsm = RefusingJsm(err_code=10005, refusals=2)
    await _bus(jsm).ensure_stream(api.StreamConfig(name="KQ_LOG", subjects=["kq.>"], num_replicas=3))
    assert jsm.calls == 3


async def test_another_refusal_is_raised_at_once() -> None:
    jsm = RefusingJsm(err_code=10052, refusals=5)
    with pytest.raises(base.BusError, match="Creating the stream KQ_LOG"):
        await _bus(jsm).ensure_stream(api.StreamConfig(name="KQ_LOG", subjects=["kq.>"]))
    assert jsm.calls == 1
