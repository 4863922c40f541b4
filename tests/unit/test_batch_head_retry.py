"""A batch's head that finds no responders is asked again (nothing was stored), and only the head.

Seen on CI: a 3-node cluster's fresh stream had its leader, yet the first batch's head got
"no responders" from the node the client was on, and the commit failed.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import nats.errors
import pytest

from kueue_es.events.bus import base
from kueue_es.events.bus.nats import NatsBus


class FlakyClient:
    """Answers ``request`` with NoResponders ``failures`` times, then with a stored sequence."""

    is_connected = True

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.requests: list[dict[str, Any]] = []
        self.published: list[str] = []

    async def request(self, subject: str, data: bytes, *, headers: dict[str, str], timeout: float) -> Any:
        self.requests.append(headers)
        if self.failures:
            self.failures -= 1
            raise nats.errors.NoRespondersError
        seq = 7 if "Nats-Batch-Commit" in headers else 0
        return SimpleNamespace(data=b'{"stream":"KQ","seq":%d}' % seq if seq else b"")

    def jetstream(self, **_: Any) -> None:
        return None

    def jsm(self, **_: Any) -> None:
        return None

    async def publish(self, subject: str, data: bytes, *, headers: dict[str, str]) -> None:
        self.published.append(headers["Nats-Msg-Id"])


def head(msg_id: str) -> base.OutgoingMessage:
    return base.OutgoingMessage(subject="kq.dec.p0.head", data=b"{}", msg_id=msg_id)


@pytest.mark.parametrize("rest", [0, 2])
async def test_head_without_responders_is_asked_again(rest: int) -> None:
    client = FlakyClient(failures=2)
    bus = NatsBus(nc=client, replicas=1, timeout=1.0)  # type: ignore[arg-type]
    others = [base.OutgoingMessage(subject=f"kq.dec.p0.x{n}", data=b"{}", msg_id=f"b:{n}") for n in range(rest)]
    seq = await bus.commit_batch(head=head("a:0"), expected_head_seq=0, rest=others)
    assert seq == 7
    assert [h["Nats-Batch-Sequence"] for h in client.requests[:3]] == ["1", "1", "1"]
    assert len(client.requests) == (3 if rest == 0 else 4)
    assert client.published == [m.msg_id for m in others[:-1]]


async def test_commit_without_responders_is_not_repeated() -> None:
    """After the head began the batch, a commit that finds no responders is not sent again."""

    class CommitFails(FlakyClient):
        async def request(self, subject: str, data: bytes, *, headers: dict[str, str], timeout: float) -> Any:
            if "Nats-Batch-Commit" in headers:
                self.requests.append(headers)
                raise nats.errors.NoRespondersError
            return await super().request(subject, data, headers=headers, timeout=timeout)

    client = CommitFails(failures=0)
    bus = NatsBus(nc=client, replicas=1, timeout=1.0)  # type: ignore[arg-type]
    rest = [base.OutgoingMessage(subject="kq.dec.p0.x", data=b"{}", msg_id="b:0")]
    with pytest.raises(base.BusError):
        await bus.commit_batch(head=head("a:0"), expected_head_seq=0, rest=rest)
    assert [h["Nats-Batch-Sequence"] for h in client.requests] == ["1", "2"]
