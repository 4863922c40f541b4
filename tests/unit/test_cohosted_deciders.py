"""Co-hosted deciders (``kueue-es service deciders``): one fold, the same decisions as separate loops.

The admitter, preemptor and TAS placer over one :class:`LogFold` must commit exactly the batches the
three separate :class:`DeciderLoop` processes commit when they have folded the same log: the same
records (role, partition, basis, head expected, outputs) byte for byte, each on its own role's head and
through its own role's connection (its NATS user). The log is issue 4's preemption race (team-a borrows
team-b's quota; team-b reclaims, team-a's high-priority workloads preempt within the queue), driven
round by round: each round both sides fold what is new, the separate loops decide and are refused (so
nothing of theirs lands), the co-hosted roles decide and commit, and a job side reports the jobs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import Bus, ConflictError, OutgoingMessage
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.scenarios import core_engine
from kueue_es.services.deciding import COHOSTED_ROLES, user_of
from kueue_es.services.runtime import Decider, DeciderLoop, LogFold, cancel_and_wait
from tests.integration.test_preemption_race import _seed, race_scenario

NOW_MS = 1_767_225_600_000
ROLES = (deciders.ADMITTER, deciders.PREEMPTOR, deciders.PLACER)
Commit = tuple[str, bytes, tuple[bytes, ...], int, str | None]


@dataclass
class RoleBus:
    """One role's connection to the shared log: records every batch it is asked to commit, then commits
    it (``lands``) or refuses it as a stale view would be (a separate loop whose twin committed)."""

    log: MemoryBus
    user: str
    lands: bool
    commits: list[Commit] = field(default_factory=list)

    async def commit_batch(
        self,
        *,
        head: OutgoingMessage,
        expected_head_seq: int,
        rest: tuple[OutgoingMessage, ...] | list[OutgoingMessage] = (),
        head_filter: str | None = None,
    ) -> int:
        self.commits.append((head.subject, head.data, tuple(m.data for m in rest), expected_head_seq, head_filter))
        if not self.lands:
            raise ConflictError("the co-hosted twin commits this batch")
        return await self.log.commit_batch(
            head=head, expected_head_seq=expected_head_seq, rest=rest, head_filter=head_filter
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.log, name)


def _loop(bus: RoleBus, decider: Any, fold: LogFold | None = None) -> DeciderLoop:
    return DeciderLoop(bus=cast(Bus, bus), decider=decider, clock=lambda: NOW_MS, fold=fold)


async def test_cohosted_roles_commit_what_separate_loops_commit_on_the_same_log() -> None:
    log = MemoryBus()
    await _seed(log, race_scenario())
    cohosted_buses = {user_of(d): RoleBus(log, user_of(d), lands=True) for d in ROLES}
    separate_buses = {user_of(d): RoleBus(log, user_of(d), lands=False) for d in ROLES}
    fold = LogFold(bus=cast(Bus, cohosted_buses["admitter"]))
    cohosted = [_loop(cohosted_buses[user_of(d)], d, fold) for d in ROLES]
    separate = [_loop(separate_buses[user_of(d)], d) for d in ROLES]
    assert [loop.state for loop in cohosted].count(fold.state) == 3  # one fold
    assert len({id(loop.state) for loop in separate}) == 3
    seen = 0
    for _ in range(40):
        last = await log.last_seq()
        new = [await log.get(seq) for seq in range(seen + 1, last + 1)]
        seen = last
        for message in new:
            fold.inbox.put_nowait(message)
            for loop in separate:
                loop.fold.inbox.put_nowait(message)
        if new:
            assert await fold.drain(timeout=1.0)
            for loop in separate:
                assert await loop.fold.drain(timeout=1.0)
        for loop in separate:  # refused: nothing of theirs lands
            await loop._cycle()
        for loop in cohosted:  # in turn, on the same fold: each commits on its own head
            await loop._cycle()
        for message in new:  # the job side: evicted jobs stop, admitted ones run
            event = codec.decode(message.data)
            if isinstance(event, types.DECISION_TYPES):  # a record: the decisions it carries (schema 17)
                for fact in core_engine.job_reports(types.with_carried(event), pods_ready="auto", now_ms=0):
                    await log.publish(subjects.fact_message(fact))
        if not new and all(not loop._dirty for loop in cohosted) and seen == await log.last_seq():
            break
    for user in COHOSTED_ROLES:
        assert cohosted_buses[user].commits == separate_buses[user].commits, user
    admitted = cohosted_buses["admitter"].commits
    preempted = cohosted_buses["preemptor"].commits
    assert admitted and preempted, "the race must take the admitter and the preemptor"
    for user, bus in cohosted_buses.items():
        for subject, data, _, _, _ in bus.commits:  # each role's record on its own head, through its own user
            assert subject.endswith(f".head.{user}"), subject
            record = codec.decode(data)
            assert isinstance(record, types.DecisionRecord)
            assert subjects.HEAD_TOKENS[record.role] == user
    issued = [  # the decisions each preemptor record carries (schema 17), or its output messages before
        decision
        for _, data, rest, _, _ in preempted
        for decision in (*types.with_carried(codec.decode(data))[1:], *map(codec.decode, rest))
    ]
    assert any(isinstance(e, types.PreemptionIssued) for e in issued)
    assert sum(loop.conflicts for loop in cohosted) == 0


async def test_the_preemptor_runs_its_cycles_while_the_admitter_holds_for_it() -> None:
    """In one process the admitter's hold (``Decider.yields_to``) must not hold the fold's other roles:
    the preemptor it waits for decides in the same turns."""
    cycles: dict[str, int] = {"admit": 0, "preempt": 0}

    def deciding(role: str) -> Any:
        def decide(state: Any, *, now_ms: int, partition: str) -> list[types.Decision]:
            cycles[role] += 1
            return []

        return decide

    log = MemoryBus()
    await log.publish(
        subjects.fact_message(types.WorkloadFinished(workload=types.WorkloadRef(namespace="default", name="w")))
    )
    fold = LogFold(bus=log)
    admitter = DeciderLoop(
        bus=log,
        decider=Decider(role="admit", logic_version=1, decide=deciding("admit"), yields_to=lambda state: {"x"}),
        partitions=["p0"],
        wakeup=0.02,
        clock=lambda: NOW_MS,
        fold=fold,
    )
    admitter.yield_seconds = 30.0  # held for the whole test
    DeciderLoop(
        bus=log,
        decider=Decider(role="preempt", logic_version=1, decide=deciding("preempt")),
        partitions=["p0"],
        wakeup=0.02,
        clock=lambda: NOW_MS,
        fold=fold,
    )
    task = asyncio.create_task(fold.run())
    try:
        for _ in range(200):
            if cycles["preempt"] >= 3:
                break
            await asyncio.sleep(0.01)
    finally:
        await cancel_and_wait([task])
    assert cycles["admit"] == 0  # held
    assert cycles["preempt"] >= 3
