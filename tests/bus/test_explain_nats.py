"""``kueue-es explain``, ``list`` and ``status`` against a running nats-server (``--nats``): read in Direct Get
batches, started from a verified snapshot when ``--at`` allows it, and from the oldest snapshot of a
purged log. The log is the recorded preemption demo (tests/fixtures/logs/demo-preempt.jsonl)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import pytest

from kueue_es import cli, snapshots
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus import server
from tests.bus.test_snapshots import SETTLED, _fresh, _publish_on, golden, split_point

URGENT = "default/job-urgent-job-zslf2-67365"


@pytest.fixture(scope="module")
def plain_server() -> Iterator[server.NatsServer]:
    with server.NatsServer() as running:
        yield running


@pytest.fixture
async def bus(plain_server: server.NatsServer) -> AsyncIterator[nats_bus.NatsBus]:
    await _fresh(plain_server.url)
    opened = await nats_bus.connect(plain_server.url)
    await opened.ensure_snapshot_bucket()
    try:
        yield opened
    finally:
        await opened.close()


async def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()  # the set-up's log lines
    code = await asyncio.to_thread(cli.main, list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_list_starts_from_a_snapshot_explain_from_the_start_then_from_a_purged_logs_snapshot(
    bus: nats_bus.NatsBus, plain_server: server.NatsServer, capsys: pytest.CaptureFixture[str]
) -> None:
    url = plain_server.url
    messages = golden()
    cut = split_point(messages)
    await _publish_on(bus, messages[:cut])
    assert (await snapshots.snapshot_once(bus, SETTLED, force=True)).written == cut
    await _publish_on(bus, messages[cut:])

    code, out, err = await _run(capsys, "list", "workload", "--nats", url, "-o", "json")
    assert code == 0 and f"folded from snapshot {snapshots.object_name(cut)} (#{cut})" in err
    whole = json.loads(out)
    assert {row["STATUS"] for row in whole} == {"FINISHED"} and len(whole) == 5
    code, out, err = await _run(capsys, "list", "workload", "--nats", url, "--at", str(cut - 1), "-o", "json")
    assert code == 0 and "snapshot" not in err  # before the snapshot: folded from #1
    assert {row["STATUS"] for row in json.loads(out)} != {"FINISHED"}

    code, out, err = await _run(capsys, "explain", "default/urgent-job-zslf2", "--nats", url, "-o", "json")
    assert code == 0 and err == ""
    story = json.loads(out)
    assert story["workload"] == URGENT and story["story"][0]["what"] == "submitted"
    assert story["asOf"]["seq"] == len(messages)

    kept = await snapshots.retain(bus, snapshots.Settings(retain_bytes=1))
    assert kept.first_seq == cut
    code, out, err = await _run(capsys, "status", "--nats", url, "-o", "json")
    assert code == 0 and f"#{cut}" in err
    code, out, err = await _run(capsys, "explain", "default/urgent-job-zslf2", "--nats", url, "-o", "json")
    assert code == 0 and f"the log starts at #{cut}" in err
    assert json.loads(out)["status"] == "finished"
    code, _, err = await _run(capsys, "status", "--nats", url, "--at", "3")
    assert code == 2 and f"before the log's first sequence #{cut}" in err
