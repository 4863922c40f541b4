"""The log readers on a log whose workload facts came in FactBatch messages (``kq.in.batch.watcher``).

The watcher publishes a burst of workloads created or finished (Jobs made while it was down or
restarting, a thousand applied at once) as FactBatch messages (event schema 16). A new user's trial
found ``kueue-es what-if`` dropping those workloads: its history kept only messages that were a
``Fact``, and a FactBatch is not one. Here the what-if history of tests/whatif/history.yaml is
recorded twice, once with every workload fact on its own subject and once with the same facts in
batches (the four first submissions in one), and every reader must see the same facts in both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kueue_es import cli, logfile, logsource
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.scenarios import core_engine
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.whatif import diff, history, report, simulate

FIXTURE = Path(__file__).parent / "history.yaml"
BATCHES = subjects.FACT_BATCH_PREFIX + "watcher"
WORKLOADS = {"default/a", "default/b", "default/c", "default/d", "default/hi"}


@pytest.fixture(scope="module")
def recorded() -> list[LogMessage]:
    return run_scenario(load_scenario(FIXTURE)).messages


@pytest.fixture(scope="module")
def batched() -> Iterator[list[LogMessage]]:
    """The same scenario with its WorkloadObserved and WorkloadFinished facts held back and published in a
    FactBatch on ``kq.in.batch.watcher`` before the next cycle or other message."""
    held: list[types.BatchedFact] = []
    runner = core_engine._Runner
    append, cycle = runner.append, runner.cycle

    def flush(self: core_engine._Runner) -> None:
        if held:  # a FactBatch even of one fact (the watcher's publisher puts a run of one on its own subject)
            batch = types.FactBatch(facts=list(held))
            held.clear()
            append(
                self,
                subjects.message(batch, subject=BATCHES, msg_id=f"FactBatch:{codec.digest((codec.encode(batch),))}"),
            )

    def publish_fact(self: core_engine._Runner, fact: types.Fact) -> None:
        if isinstance(fact, types.WorkloadObserved | types.WorkloadFinished):
            held.append(fact)
            return
        flush(self)
        append(self, subjects.fact_message(fact))

    def held_append(self: core_engine._Runner, message: OutgoingMessage) -> None:
        flush(self)
        append(self, message)

    def held_cycle(self: core_engine._Runner, *, only: str = "") -> bool:
        flush(self)
        return cycle(self, only=only)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "publish_fact", publish_fact)
        patch.setattr(runner, "append", held_append)
        patch.setattr(runner, "cycle", held_cycle)
        yield run_scenario(load_scenario(FIXTURE)).messages


def _facts(messages: list[LogMessage]) -> list[types.Event]:
    return [one for m in messages for one in types.unbatched(codec.decode(m.data)) if isinstance(one, types.Fact)]


def test_the_batched_log_holds_its_workload_facts_in_fact_batches(
    recorded: list[LogMessage], batched: list[LogMessage]
) -> None:
    """The premise: the same facts, but the workloads' in FactBatch messages (one of four submissions)."""
    batches = [codec.decode(m.data) for m in batched if m.subject == BATCHES]
    assert batches and all(isinstance(b, types.FactBatch) for b in batches)
    assert max(len(b.facts) for b in batches) == 4  # type: ignore[union-attr]
    assert not any(m.headers["Kq-Type"] in ("WorkloadObserved", "WorkloadFinished") for m in batched)
    assert _facts(batched) == _facts(recorded)


def test_what_if_history_takes_the_facts_of_a_fact_batch(recorded: list[LogMessage], batched: list[LogMessage]) -> None:
    """Every workload submitted in a batch is in the history, at the time it would have alone, and the
    finishes in batches give the same run times."""
    alone, together = history.extract(recorded), history.extract(batched)
    submitted = {f.fact.workload.key for f in together.facts if isinstance(f.fact, types.WorkloadObserved)}
    assert submitted == WORKLOADS
    assert [(f.fact, f.at_ms) for f in together.facts] == [(f.fact, f.at_ms) for f in alone.facts]
    assert together.finishes == alone.finishes and set(together.finishes) == WORKLOADS


def test_what_if_admits_the_workloads_of_a_fact_batch(recorded: list[LogMessage], batched: list[LogMessage]) -> None:
    """The simulation of the batched log admits every workload, as that of the log without batches does."""
    alone = report.outcomes(simulate.simulate(history.extract(recorded)).log)
    together = report.outcomes(simulate.simulate(history.extract(batched)).log)
    assert set(together) == WORKLOADS
    assert all(together[key].admitted_ms for key in WORKLOADS)
    assert {k: o.admitted_ms for k, o in together.items()} == {k: o.admitted_ms for k, o in alone.items()}


def test_what_if_command_lists_the_workloads_of_a_fact_batch(
    batched: list[LogMessage], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "batched.log"
    logfile.write_lines(log, batched)
    changes = tmp_path / "changes.yaml"
    changes.write_text("apiVersion: whatif.kueue-es.io/v1\nkind: WorkloadPriorities\npriorities: {default/d: 50}\n")
    written = tmp_path / "what-if.log"
    assert cli.main(["what-if", "-f", str(changes), "--file", str(log), "--all", "--write-log", str(written)]) == 0
    out = capsys.readouterr().out
    assert "of 5 workloads differ" in out
    assert {m.seq for m in logfile.read_lines(written)}  # the simulated log is written
    simulated = {
        one.workload.key
        for m in logfile.read_lines(written)
        for one in types.unbatched(codec.decode(m.data))
        if isinstance(one, types.WorkloadObserved)
    }
    assert simulated == WORKLOADS


def test_diff_names_the_facts_of_a_fact_batch(recorded: list[LogMessage], batched: list[LogMessage]) -> None:
    """``kueue-es diff``'s facts at a basis are a FactBatch's facts, so a log and its batched twin have
    the same ones and only the workloads a log lacks are named."""
    without_d = [m for m in batched if m.subject != BATCHES] + [
        _batch_without(m, "default/d") for m in batched if m.subject == BATCHES
    ]
    without_d.sort(key=lambda m: m.seq)
    last = batched[-1].seq
    facts_a, facts_b = diff._fold(batched, last)[1], diff._fold(without_d, last)[1]
    assert facts_a == diff._fold(recorded, recorded[-1].seq)[1]
    assert [diff.describe_fact(f) for f in diff._only(facts_a, facts_b)] == [
        "WorkloadObserved default/d",
        "WorkloadFinished default/d",
    ]


def _batch_without(message: LogMessage, key: str) -> LogMessage:
    batch = codec.decode(message.data)
    assert isinstance(batch, types.FactBatch)
    kept = [f for f in batch.facts if f.workload.key != key]
    return LogMessage(seq=message.seq, subject=message.subject, data=codec.encode(types.FactBatch(facts=kept)))


def test_an_at_time_places_a_fact_batch_by_its_facts_times(batched: list[LogMessage]) -> None:
    """A FactBatch's time (for ``--at TIME``) is the latest its facts carry: a batch of workloads created
    after the time is not folded."""
    for message in batched:
        event = codec.decode(message.data)
        if isinstance(event, types.FactBatch):
            created = max(
                f.workload.metadata.creation_timestamp_ms for f in event.facts if hasattr(f.workload, "metadata")
            )
            assert logsource.event_time(event) >= created > 0
            folder = logsource.Folder(at=logsource.At(text="t", ms=created - 1))
            logsource.fold_messages(iter(batched), folder)
            assert folder.last_read < message.seq
            return
    pytest.fail("no FactBatch in the batched log")
