"""A decider that starts from a checkpoint decides as one that folded from the start (issue 13, point 3).

The log is ``kueue_es.bench.core_log``'s, written to a file (replay writes the checkpoints from
it) and copied onto memory buses, message for message; a few workloads then finish so the
admitter has work after start-up.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kueue_es import checkpoints, deciders
from kueue_es.bench import BASE_MS, core_log
from kueue_es.cli import main
from kueue_es.events import subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.logfile import write_lines
from kueue_es.projections.cluster import ClusterState
from kueue_es.services.runtime import DeciderLoop, StartPoint, cancel_and_wait, fold_message

NOW = BASE_MS + 10**9  # after every time in the log


@pytest.fixture(scope="module")
def log() -> list[LogMessage]:
    return list(core_log(events=3_000, cohorts=2, queues_per_cohort=5, scale=0.5))


@pytest.fixture(scope="module")
def checkpoint_dir(log: list[LogMessage], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("log") / "log.jsonl"
    write_lines(path, iter(log))
    directory = path.parent / "ck"
    code = main(
        [
            "replay",
            "--file",
            str(path),
            "--write-checkpoints",
            "--checkpoint-every",
            "1000",
            "--checkpoints",
            str(directory),
        ]
    )
    assert code == 0
    return directory


async def copy_of(log: list[LogMessage], *, finish: int = 6) -> MemoryBus:
    """A bus holding ``log`` at the same sequences, then ``finish`` running workloads finished."""
    bus = MemoryBus()
    state = ClusterState()
    for message in log:
        headers = {k: v for k, v in message.headers.items() if k != "Nats-Msg-Id"}
        out = OutgoingMessage(
            subject=message.subject, data=message.data, msg_id=message.headers["Nats-Msg-Id"], headers=headers
        )
        assert (await bus.publish(out)).seq == message.seq
        fold_message(state, message)
    running = [wl for wl in state.workloads.values() if wl.admitted and not wl.gone][:finish]
    for wl in running:
        await bus.publish(subjects.fact_message(types.WorkloadFinished(workload=wl.ref)))
    return bus


async def run_admitter(bus: MemoryBus, start: StartPoint | None) -> DeciderLoop:
    """Run the admitter until it has folded the whole log and committed nothing for a while."""
    loop = DeciderLoop(bus=bus, decider=deciders.ADMITTER, clock=lambda: NOW, wakeup=0.05, start=start)
    task = asyncio.create_task(loop.run())
    try:
        last = -1
        while True:
            await asyncio.sleep(0.5)
            now = await bus.last_seq()
            if now == last and loop.state.last_seq == now:
                return loop
            last = now
    finally:
        await cancel_and_wait([task])


async def after(bus: MemoryBus, seq: int) -> list[tuple[str, bytes]]:
    last = await bus.last_seq()
    out: list[tuple[str, bytes]] = []
    if last <= seq:
        return out
    async for message in bus.read(start_seq=seq + 1):
        out.append((message.subject, message.data))
        if message.seq >= last:
            break
    return out


async def test_a_decider_from_a_checkpoint_decides_as_one_from_the_start(
    log: list[LogMessage], checkpoint_dir: Path
) -> None:
    said: list[str] = []
    start = checkpoints.start_point(checkpoint_dir, warn=said.append)
    assert start is not None and said == []
    assert start.seq == max(c.seq for c in checkpoints.find(checkpoint_dir)) >= 2_000
    scratch = await run_admitter(await copy_of(log), None)
    resumed = await run_admitter(await copy_of(log), start)
    assert resumed.position == start.seq and scratch.position == 0
    assert resumed.state is start.state  # folded on from the checkpoint, not from #1
    decided = await after(scratch.bus, len(log))  # type: ignore[arg-type]
    assert any(subjects.head_token(subject) == "admitter" for subject, _ in decided), "the admitter decided"
    assert await after(resumed.bus, len(log)) == decided  # type: ignore[arg-type]
    assert resumed.commits == scratch.commits >= 1
    assert checkpoints.state_digest(resumed.state) == checkpoints.state_digest(scratch.state)


async def test_a_checkpoint_of_another_log_is_not_used(log: list[LogMessage], checkpoint_dir: Path) -> None:
    start = checkpoints.start_point(checkpoint_dir, warn=lambda _: None)
    assert start is not None
    changed = [*log]
    at = changed[start.seq - 1]
    changed[start.seq - 1] = LogMessage(
        seq=at.seq, subject=at.subject, data=at.data.replace(b"}", b" }", 1), headers=at.headers
    )
    scratch = await run_admitter(await copy_of(changed), None)
    other = await run_admitter(await copy_of(changed), start)
    assert other.position == 0 and other.state is not start.state  # folded from the start instead
    assert checkpoints.state_digest(other.state) == checkpoints.state_digest(scratch.state)


def test_the_newest_checkpoint_that_loads_is_the_start_point(checkpoint_dir: Path, tmp_path: Path) -> None:
    directory = tmp_path / "ck"
    directory.mkdir()
    found = checkpoints.find(checkpoint_dir)
    for checkpoint in found:
        (directory / checkpoint.path.name).write_bytes(checkpoint.path.read_bytes())
    (directory / found[-1].path.name).write_bytes(b"not a checkpoint")
    said: list[str] = []
    start = checkpoints.start_point(directory, warn=said.append)
    assert start is not None and start.seq == found[-2].seq
    assert len(said) == 1 and found[-1].path.name in said[0]
    assert checkpoints.start_point(tmp_path / "none", warn=said.append) is None
    assert "folding from the start" in said[-1]


async def test_checkpoint_command_writes_one_at_the_end_that_services_and_verify_accept(
    log: list[LogMessage], checkpoint_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = checkpoint_dir.parent / "log.jsonl"
    directory = checkpoint_dir.parent / "ck-end"
    assert main(["checkpoint", "--file", str(path), "--checkpoints", str(directory), "--every", "1500"]) == 0
    # every 1,500 messages, and one at the end unless the log ends on one of those
    marks = sorted({*range(1500, len(log) + 1, 1500), len(log)})
    assert len(log) >= 3000 and marks[:2] == [1500, 3000]
    written = ", ".join(f"#{mark}" for mark in marks)
    assert f"checkpoints written at {written} in {directory}" in capsys.readouterr().out
    # Folded without re-running decisions, it holds what replay's re-checking fold holds.
    assert main(["replay", "--file", str(path), "--verify-checkpoints", "--checkpoints", str(directory)]) == 0
    assert f"{len(marks)} checkpoints verified against a fresh fold" in capsys.readouterr().out
    start = checkpoints.start_point(directory, warn=lambda _: None)
    assert start is not None and start.seq == len(log)
    scratch = await run_admitter(await copy_of(log), None)
    resumed = await run_admitter(await copy_of(log), start)
    assert resumed.position == len(log)
    assert await after(resumed.bus, len(log)) == await after(scratch.bus, len(log))  # type: ignore[arg-type]
    assert checkpoints.state_digest(resumed.state) == checkpoints.state_digest(scratch.state)
