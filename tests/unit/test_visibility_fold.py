"""The visibility server's fold (services/visibility/server.py): it reads the log as the admitter writes it,
is ready once caught up, answers positions from what it folded, starts from a snapshot's state and reads
on; its HTTPS application answers the API and the health paths."""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

import aiohttp

from kueue_es import deciders
from kueue_es.events import subjects
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services import runtime
from kueue_es.services.health import Health
from kueue_es.services.visibility import api, server
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload
from tests.unit.test_visibility_api import _five

CQ_PATH = f"/apis/{api.GROUP}/v1beta2/clusterqueues/cq/pendingworkloads"


async def publish(bus: MemoryBus, *docs: dict) -> None:
    for doc in docs:
        await bus.publish(subjects.fact_message(kueue_fact(doc)))


async def until(check, *, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


def pending_names(fold: server.VisibilityFold) -> list[str]:
    reply = api.answer(fold.ready_state, "GET", CQ_PATH, {}, now_ms=0)
    assert reply is not None and reply.status == 200
    return [item["metadata"]["name"] for item in reply.body["items"]]


async def test_fold_follows_the_admitter_and_starts_from_a_snapshot(tmp_path: Path) -> None:
    bus = MemoryBus()
    await publish(bus, flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 4}}), local_queue("lq", "cq"))
    await publish(bus, *(workload(f"w{i}", created=i, cpu="1") for i in range(6)))
    admitter = runtime.DeciderLoop(bus=bus, decider=deciders.ADMITTER, clock=lambda: 1, wakeup=0.02)
    health = Health(service="visibility")
    fold = server.VisibilityFold(bus=await health.observe(bus))
    health.add_check(fold.readiness)
    tasks = [asyncio.create_task(admitter.run()), asyncio.create_task(fold.run())]
    try:
        await until(lambda: admitter.commits >= 1 and fold.caught_up and fold.state.last_seq == admitter.state.last_seq)
        await until(lambda: pending_names(fold) == ["w4", "w5"])
        ready, facts = health.readiness()
        assert ready and facts["folded_seq"] == fold.state.last_seq
    finally:
        await runtime.cancel_and_wait(tasks)

    # a later server starts from that state (as from a snapshot) and reads on
    seq = fold.state.last_seq
    start = runtime.StartPoint(
        state=fold.state,
        seq=seq,
        head_seqs={},
        first_sha256=runtime.message_digest(await bus.get(1)),
        at_sha256=runtime.message_digest(await bus.get(seq)),
        origin="test",
    )
    await publish(bus, workload("w6", created=6, cpu="1"))
    later = server.VisibilityFold(bus=bus, start=start)
    task = asyncio.create_task(later.run())
    try:
        await until(lambda: later.caught_up and later.state.last_seq == seq + 1)
        assert later.state is start.state  # started from the snapshot's state, not from #1
        assert later.position == seq + 1  # and read on from there
        assert pending_names(later) == ["w4", "w5", "w6"]
    finally:
        await runtime.cancel_and_wait([task])


async def test_https_application_answers_the_api_and_health(tmp_path: Path) -> None:
    state: list = [None]
    context = server.tls_context(cert_file=None, key_file=None, cert_dir=tmp_path / "cert")
    assert (tmp_path / "cert" / "tls.key").stat().st_mode & 0o077 == 0
    client = ssl.create_default_context(cafile=str(tmp_path / "cert" / "tls.crt"))  # the self-signed cert verifies
    application = server.app(lambda: state[0])
    async with (
        server.serve_api(application, host="127.0.0.1", port=0, context=context) as url,
        aiohttp.ClientSession() as session,
    ):
        port = int(url.rsplit(":", 1)[1])  # port 0: the kernel's choice, told back in the URL
        assert 0 < port and url == f"https://127.0.0.1:{port}"
        base = f"https://127.0.0.1:{port}"
        async with session.get(f"{base}/readyz", ssl=client) as answer:
            assert answer.status == 503
        async with session.get(base + CQ_PATH, ssl=client) as answer:
            assert answer.status == 503
        state[0] = _five()
        async with session.get(f"{base}/readyz", ssl=client) as answer:
            assert answer.status == 200
        async with session.get(base + CQ_PATH + "?limit=2", ssl=client) as answer:
            text = await answer.text()
            assert answer.status == 200 and answer.headers["Content-Type"].startswith("application/json")
        assert text.startswith('{"kind":"PendingWorkloadsSummary","apiVersion":"visibility.kueue.x-k8s.io/v1beta2"')
        assert text.endswith("}\n") and ", " not in text  # compact, as an API server writes JSON
        assert len(json.loads(text)["items"]) == 2
        async with session.get(f"{base}/nowhere", ssl=client) as answer:
            assert answer.status == 404
