"""The chaos bench (kueue_es/perfbench/chaos.py): its nats-server restart and fact republishing on a real
nats-server, and a short chaos run through the services (slow)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from kueue_es.cli import main
from kueue_es.events import subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.perfbench.chaos import NATS, FactPublisher, RestartableNatsServer

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "chaos-generator.yaml"


async def stored(bus: nats_bus.NatsBus, seq: int) -> int:
    """The stream's last sequence once it reaches ``seq`` (a core publish is stored after the flush
    returns: JetStream stores asynchronously), or what it is after 10 s."""
    for _ in range(100):
        if (last := await bus.last_seq()) >= seq:
            return last
        await asyncio.sleep(0.1)
    return await bus.last_seq()


def finished(i: int) -> types.WorkloadFinished:
    return types.WorkloadFinished(workload=types.WorkloadRef(namespace="ns", name=f"w{i}"), at_ms=i)


@pytest.mark.timeout(60)
async def test_after_a_kill_nats_server_restarts_on_its_url_and_store_and_lost_facts_are_published_again(
    tmp_path: Path,
) -> None:
    server = RestartableNatsServer(store_dir=tmp_path / "nats")
    await server.start_async()
    try:
        url = server.url
        bus = await nats_bus.connect(url)
        publisher = FactPublisher(bus, keep_seconds=60.0)
        for i in range(3):
            await publisher.publish(subjects.fact_message(finished(i), version="1"))
        await bus.nc.flush()
        assert await stored(bus, 3) == 3
        publisher.pause()
        server.kill()
        assert not server.running
        await server.restart_on_same_port()
        assert server.url == url
        held = bus.nc  # the client reconnects by itself; the publish waits for resume
        publish = publisher.publish(subjects.fact_message(finished(3), version="1"))
        await publisher.resume()
        await publish
        await held.flush()
        # the three stored before the kill survived and were not stored twice; the held one came after
        assert await stored(bus, 4) == 4
        assert publisher.republished == 3
        last = await bus.get(4)
        assert last.headers["Nats-Msg-Id"] == subjects.fact_message(finished(3), version="1").msg_id
        await bus.close()
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_chaos_run_kills_services_and_nats_server_and_every_invariant_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.yaml"
    code = main(
        ["bench", "--config", str(FIXTURE), "--dir", str(tmp_path / "run"), "--output", str(out), "--no-progress"]
        + ["--chaos", "7", "--kill-every", "6"]
    )
    printed = capsys.readouterr().out
    doc = yaml.safe_load(out.read_text())
    chaos = doc["chaos"]
    assert code == 0, (printed, chaos["violations"])
    assert doc["complete"] is True and doc["timing"]["finished"] == 606
    kills = [k for k in chaos["kills"] if not k.get("crash")]
    assert sum(k["victim"] == NATS for k in kills) == 1
    # a kill waits for the previous victim's role and its own process to be back: on a loaded machine a
    # restart takes 2-20 s, so a 60 s run may kill only two services
    assert len([k for k in kills if k["victim"] != NATS]) >= 2
    assert all(k["recoverySeconds"] is not None and k["recoverySeconds"] > 0 for k in chaos["kills"])
    # deploy/'s topology by default: two of each decider and of the dispatcher, on the standby lease; a
    # service kill's recovery is its role served again, next to the killed process's own restart to ready
    assert doc["deciders"]["replicas"] == 2
    for kill in kills:
        if kill["victim"] != NATS:
            assert kill["restartSeconds"] is not None and kill["restartSeconds"] > 0
            assert "served by " in kill["detail"]
    assert chaos["restartP50Seconds"] > 0
    assert chaos["invariantsHold"] is True and chaos["violations"] == []
    assert chaos["replay"]["exitCode"] == 0 and chaos["replay"]["matched"] == chaos["replay"]["decisions"] > 0
    assert chaos["checkedBatches"] == chaos["replay"]["decisions"]
    assert chaos["recoveryMaxSeconds"] >= chaos["recoveryP50Seconds"] > 0
    assert "every invariant held" in printed and "recovery p50" in printed and "restart to ready: p50" in printed


@pytest.mark.timeout(60)
async def test_any_comeback_of_the_connection_publishes_the_recent_facts_again(tmp_path: Path) -> None:
    """Not only a chaos kill: a connection reset (nats-server drops a lagging client) loses what the client
    had written, and core publishes are never answered. Every comeback republishes the recent facts by
    itself (the ten-times bench lost 6,466 WorkloadObserved to two resets and stalled)."""
    server = RestartableNatsServer(store_dir=tmp_path / "nats")
    await server.start_async()
    try:
        bus = await nats_bus.connect(server.url)
        publisher = FactPublisher(bus, keep_seconds=60.0)
        for i in range(3):
            await publisher.publish(subjects.fact_message(finished(i), version="1"))
        await bus.nc.flush()
        server.kill()  # no pause: the publisher does not know
        await server.restart_on_same_port()
        await publisher.publish(subjects.fact_message(finished(3), version="1"))  # buffered while reconnecting
        deadline = asyncio.get_running_loop().time() + 20
        while publisher.comebacks == 0 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        while publisher._republishing and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        await bus.nc.flush()
        # the comeback republished what was recent then: the three, and the fourth if it was written first
        assert publisher.comebacks == 1 and publisher.republished in (3, 4)
        assert await stored(bus, 4) == 4  # every fact stored once, whatever the reset lost
        await bus.close()
    finally:
        server.stop()
