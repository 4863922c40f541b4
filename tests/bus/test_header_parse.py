"""The NATS bus's header parser gives what nats-py's own gives, for every header block."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.client import Client

from kueue_es.events.bus import nats as nats_bus

NATS_OWN = nats_bus._nats_parse_header_lines


def test_the_client_parses_with_ours() -> None:
    assert Client._parse_header_lines is nats_bus.parse_header_lines


def test_a_stored_decision_s_headers() -> None:
    raw = (
        b"Nats-Msg-Id: dec:p0:12:QuotaReserved:ns/wl-1\r\nKq-Type: QuotaReserved\r\n"
        b"Nats-Batch-Id: 0f0e\r\nNats-Batch-Sequence: 3\r\n\r\n"
    )
    assert nats_bus.parse_header_lines(raw) == {
        "Nats-Msg-Id": "dec:p0:12:QuotaReserved:ns/wl-1",
        "Kq-Type": "QuotaReserved",
        "Nats-Batch-Id": "0f0e",
        "Nats-Batch-Sequence": "3",
    }


EDGE_CASES = [
    b"",
    b"\r\n",
    b"NoColon\r\nA: b\r\n\r\n",
    b"A:b\r\nB:\tc \r\n",
    b"Bad Name: x\r\nGood: y\r\n",
    b"\x1cName: x\r\nName\x1f: y\r\nMid\x0bdle: z\r\n",
    b"  Padded  :  value  \r\n",
    b"A: \xc3\xa9t\xc3\xa9\r\nB: \xff\xfe\r\n",
    b"N\xc3\xa4me: x\r\nOk: y\r\n",
    b"A: 1\r\nA: 2\r\n",
    b": no name\r\n",
    b"A: x:y:z\r\n",
    b"Bell\x07: x\r\n",
    b"A: v\x1c\r\nB: \x1cv\r\n",
]


def test_edge_cases_as_nats_py() -> None:
    for raw in EDGE_CASES:
        assert nats_bus.parse_header_lines(raw) == NATS_OWN(raw), raw


_PIECES = st.sampled_from(
    [b"A", b"Kq-Type", b"Nats-Msg-Id", b":", b": ", b"\r\n", b" ", b"\t", b"\x0b", b"\x1c", b"\x1f", b"\xc3\xa9", b"x"]
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=80), st.lists(_PIECES, max_size=30).map(b"".join)))
def test_any_block_as_nats_py(raw: bytes) -> None:
    assert nats_bus.parse_header_lines(raw) == NATS_OWN(raw)
