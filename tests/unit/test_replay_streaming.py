"""Replay at scale (issue 13, finding 6): one streaming pass with bounded memory, a log file
written by ``kueue-es bench core --write-log``, and the same verdicts as the whole-log check.

Logs here are small (a few thousand messages); the 1M-event figures are in docs/benchmarks.md.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from kueue_es import deciders
from kueue_es.bench import core_log, load_into_bus
from kueue_es.cli import main
from kueue_es.events import codec, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.logfile import decode_line, encode_line, read_lines, write_lines
from kueue_es.replay import LogChecker, check_log, find_records, replay_bus, replay_file
from tests.unit.test_golden_log import _load


def small_log(events: int = 3_000, *, schema_version: int = types.SCHEMA_VERSION) -> list[LogMessage]:
    return list(core_log(events=events, cohorts=2, queues_per_cohort=5, scale=0.5, schema_version=schema_version))


def test_the_bench_log_replays_with_every_decision_matched_and_complete() -> None:
    messages = small_log()
    report = check_log(messages, deciders.BY_ROLE)
    assert report.exit_code == 0, report
    assert report.decisions == report.matched > 10
    assert report.undispatched == []  # every admission answered by a DispatchApplied
    assert len(messages) >= 3_000


def test_a_log_file_round_trips_the_stored_bytes(tmp_path: Path) -> None:
    messages = [*_load("demo-preempt.jsonl"), LogMessage(seq=88, subject="kq.in.x", data=b"\xffnot json")]
    path = tmp_path / "log.jsonl"
    assert write_lines(path, messages) == len(messages)
    assert list(read_lines(path)) == messages
    assert decode_line(encode_line(messages[0])) == messages[0]


def test_replay_of_a_file_and_of_a_bus_agree_with_the_whole_log_check(tmp_path: Path) -> None:
    messages = small_log()
    path = tmp_path / "log.jsonl"
    write_lines(path, messages)
    whole = check_log(messages, deciders.BY_ROLE)
    from_file = replay_file(path, deciders.BY_ROLE)

    async def from_bus() -> object:
        bus = MemoryBus()
        assert await load_into_bus(bus, iter(messages)) == messages[-1].seq
        return await replay_bus(bus, deciders.BY_ROLE)

    import asyncio

    assert from_file == whole
    assert asyncio.run(from_bus()) == whole  # type: ignore[comparison-overlap]


def test_a_perturbed_output_deep_in_the_stream_is_found(tmp_path: Path) -> None:
    messages = small_log(schema_version=16)  # the layout before schema 17: an output message each
    target = next(
        m for m in reversed(messages) if m.headers.get("Kq-Type") == "WorkloadAdmitted"
    )  # a late batch's output: its record's digest no longer matches
    event = codec.decode(target.data)
    assert isinstance(event, types.WorkloadAdmitted)
    changed = msgspec.structs.replace(target, data=target.data.replace(b'"WorkloadAdmitted"', b'"WorkloadAdmitted" '))
    messages = [changed if m.seq == target.seq else m for m in messages]
    path = tmp_path / "log.jsonl"
    write_lines(path, messages)
    assert main(["replay", "--file", str(path)]) == 1


def test_the_checker_holds_no_batch_once_it_is_compared() -> None:
    messages = small_log()
    checker = LogChecker(find_records(messages), deciders.BY_ROLE)
    held = 0
    for message in messages:
        checker.feed(message)
        held = max(held, sum(len(p.stored) for p in checker._by_head))
    report = checker.finish()
    assert report.exit_code == 0
    assert held <= 501  # one batch at most: its record and up to MAX_BATCH outputs
    assert all(not p.stored and p.expected is None for p in checker._by_head)


@pytest.mark.parametrize("flag", ["--store", "--file"])
def test_replay_takes_one_source_only(flag: str, tmp_path: Path) -> None:
    assert main(["replay", "--nats", "nats://x", flag, str(tmp_path)]) == 2
