"""Co-hosted deciders on a real nats-server with its users (``kueue-es service deciders``).

The admitter, preemptor and TAS placer run in one :func:`serve_deciders` over one fold, each
connecting as its own NATS user (events/bus/permissions.py: a decider may publish only on its own
head and hold only its own lease keys), with their slot leases. Issue 4's preemption race must end as
the core engine decides it, each role's records on its own head, and the log must replay clean.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus
from kueue_es.events.bus.server import LocalAuth, NatsServer
from kueue_es.replay import check_log
from kueue_es.scenarios import core_engine
from kueue_es.scenarios.outcome import build_outcome
from kueue_es.services import standby
from kueue_es.services.deciding import serve_deciders
from kueue_es.services.runtime import cancel_and_wait
from tests.integration.test_preemption_race import _fold, _job_side, _overuse, _seed, _until_quiet, race_scenario


async def test_cohosted_deciders_preempt_as_their_own_users_and_replay_clean(tmp_path: Path) -> None:
    scenario = race_scenario()
    expected = core_engine.run_scenario(scenario).outcome()
    auth = LocalAuth.create(tmp_path / "creds")
    users: list[str] = []
    async with NatsServer(tmp_path / "nats", auth=auth) as server:
        await nats_bus.ensure_log_stream(server.url, credentials=auth.credentials("admin"), public=False)
        admin = await nats_bus.connect(server.url, credentials=auth.credentials("admin"))

        async def connect(url: str, user: str) -> Bus:
            users.append(user)
            return await nats_bus.connect(url, credentials=auth.credentials(user))

        stop = asyncio.Event()
        try:
            await _seed(admin, scenario)
            serving = asyncio.create_task(
                serve_deciders(
                    (deciders.ADMITTER, deciders.PREEMPTOR, deciders.PLACER),
                    nats_url=server.url,
                    stop=stop,
                    connect=connect,
                    wakeup=0.05,
                    standby=standby.StandbySettings(),
                )
            )
            job_side = asyncio.create_task(_job_side(admin))
            try:
                await _until_quiet(admin)
            finally:
                stop.set()
                await asyncio.wait_for(serving, timeout=30.0)  # a clean stop, its errors raised
                await cancel_and_wait([job_side])
            state, log, messages = await _fold(admin)
        finally:
            with contextlib.suppress(Exception):
                await admin.close()
    assert sorted(users) == ["admitter", "preemptor", "tas-placer"]
    outcome = build_outcome(submitted=scenario.submitted, log=log, state=state)
    assert {k: v.cluster_queue for k, v in outcome.admitted.items()} == {
        k: v.cluster_queue for k, v in expected.admitted.items()
    }
    assert outcome.pending == expected.pending
    assert outcome.preempted == expected.preempted and expected.preempted
    assert not _overuse(log)
    records = [(m.subject, codec.decode(m.data)) for m in messages if ".head." in m.subject]
    roles = set()
    for subject, record in records:
        assert isinstance(record, types.DecisionRecord)
        assert subject == subjects.head_subject(record.role, record.partition)  # head.<its user>
        roles.add(record.role)
    assert {"admit", "preempt"} <= roles
    report = check_log(messages, deciders.BY_ROLE)
    assert not report.mismatches, report.mismatches[:1]
    assert report.complete, (report.gaps, report.orphans, report.stray_dispatch)
    assert report.seeds == report.unverifiable
    assert report.matched == report.decisions - report.skipped
