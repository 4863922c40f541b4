"""A finished workload's release travels in its cycle's DecisionRecord (issue 18, admitter logic 15).

The admitter's QuotaReleased reason ``Finished`` restates the WorkloadFinished fact; logic 15 puts it
in the record (``DecisionRecord.released``, a FinishedRelease) instead of a message of its own. The
batch verifier releases each right after the record, before the batch's outputs, as the QuotaReleased
it stands for, so every fold frees the quota before the admissions that take it; replay compares the
record's bytes, so a changed release is a mismatch; a log of logic 14 (a message per release) still
replays; KQ_PUB publishes the record that carries them even without outputs.
"""

from __future__ import annotations

import msgspec
import pytest

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.projections import batches
from kueue_es.replay import LogChecker, check_log, find_records, summary
from kueue_es.services.admitter import core as admitter_core
from kueue_es.services.publisher import core as publisher
from kueue_es.services.runtime import Decider, build_batch
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import FoldedLog, cluster_queue, flavor, local_queue, of_a_job, workload
from tests.unit.dispatch_log import DispatchLog, job_workload

NOW = 1_796_000_000_000
FIRST = types.WorkloadRef(namespace="default", name="first", uid="uid-first")


def facts(*, jobs: bool = True) -> list[OutgoingMessage]:
    """A ClusterQueue of 4 CPUs, workloads ``first`` and ``second`` of 3 CPUs each: one at a time; each of a Job
    (``jobs``: the dispatcher answers their admissions by starting it), else Workloads created on their own."""
    docs = (
        flavor("f"),
        cluster_queue("cq", flavors={"f": {"cpu": 4}}),
        local_queue("lq", "cq"),
        workload("first", cpu="3", created=1),
        workload("second", cpu="3", created=2),
    )
    return [subjects.fact_message(of_a_job(kueue_fact(doc)) if jobs else kueue_fact(doc)) for doc in docs]


class Log(FoldedLog):
    """An in-memory log folded as every service folds it, with a clock a second per cycle."""

    now = NOW
    schema_version = types.SCHEMA_VERSION  # 16: batches as before schema 17 (a message per decision)

    def cycle(self, decider: Decider = deciders.ADMITTER) -> list[types.Output]:
        """One admitter cycle (``decider``'s), committed when it decides anything; its outputs."""
        self.now += 1_000
        out = list(decider.decide(self.state, now_ms=self.now))
        if out:
            head, rest = build_batch(
                decider,
                outputs=out,
                basis_seq=self.state.last_seq,
                head_seq=self.state.heads.get("p0", 0),
                now_ms=self.now,
                max_outputs=0,
                schema_version=self.schema_version,
            )
            self.append(head, *rest)
        return out

    def finish(self, name: str) -> int:
        """The job of workload ``name`` finished (the fact); its sequence."""
        ref = types.WorkloadRef(namespace="default", name=name, uid=f"uid-{name}")
        return self.append(subjects.fact_message(types.WorkloadFinished(workload=ref, at_ms=self.now)))

    def records(self) -> list[tuple[LogMessage, types.DecisionRecord]]:
        out = []
        for message in self.messages:
            event = codec.decode(message.data)
            if isinstance(event, types.DecisionRecord):
                out.append((message, event))
        return out


def run(decider: Decider = deciders.ADMITTER, *, schema_version: int = types.SCHEMA_VERSION) -> Log:
    """``first`` admitted, finished, released; ``second`` admitted in the same cycle as the release."""
    log = Log()
    log.schema_version = schema_version
    log.append(*facts())
    log.cycle(decider)  # first admitted, second waits
    log.finish("first")
    log.cycle(decider)  # first released, second admitted
    return log


def test_the_release_of_a_finished_workload_rides_in_the_record() -> None:
    log = run()
    message, record = log.records()[-1]
    assert record.logic_version == admitter_core.LOGIC_VERSION >= 15
    assert record.released is not None and [r.workload for r in record.released] == [FIRST]
    released = record.released_decisions()
    assert [(r.reason, r.cluster_queue, r.at_ms) for r in released] == [("Finished", "cq", record.now_ms)]
    finished_seq = next(m.seq for m in log.messages if isinstance(codec.decode(m.data), types.WorkloadFinished))
    assert released[0].cause_seq == finished_seq
    after = [codec.decode(m.data) for m in log.messages if m.seq > message.seq]
    assert after == []  # no message of its own: since schema 17 the record carries the cycle's decisions too
    assert [type(e).__name__ for e in record.carried] == ["WorkloadAdmitted"]  # second, on the freed quota
    assert log.orphans == []
    assert log.state.workloads["default/first"].reservation is None
    assert log.state.workloads["default/second"].reservation is not None
    assert log.state.usage["cq"]["f"]["cpu"] == 3000


@pytest.mark.parametrize("schema", [types.SCHEMA_VERSION, 16])
def test_the_verifier_releases_them_after_the_record_before_the_outputs(schema: int) -> None:
    log = run(schema_version=schema)
    message, record = log.records()[-1]
    verifier = batches.BatchVerifier()
    accepted: list[tuple[int, str]] = []
    for stored in log.messages[message.seq - 1 :]:
        verdict = verifier.offer(
            seq=stored.seq,
            subject=stored.subject,
            msg_id_header=stored.headers["Nats-Msg-Id"],
            data=stored.data,
            event=codec.decode(stored.data),
        )
        accepted += [(seq, type(e).__name__) for seq, e in verdict.accepted]
    assert accepted == [
        (message.seq, "DecisionRecord"),
        (message.seq, "QuotaReleased"),
        # carried (schema 17): at the record's sequence, where its output message stood before
        (message.seq + (schema < 17), "WorkloadAdmitted"),
    ]


def test_a_preemptor_record_carrying_finished_releases_is_orphaned() -> None:
    log = Log()
    log.append(*facts())
    log.cycle()
    log.finish("first")
    release = types.FinishedRelease(workload=FIRST, cluster_queue="cq", cause_seq=7, at_ms=NOW)
    head, rest = build_batch(
        deciders.PREEMPTOR, outputs=[release], basis_seq=log.state.last_seq, head_seq=0, now_ms=NOW
    )
    log.append(head, *rest)
    assert [orphan.reason for orphan in log.orphans] == [batches.WRONG_ROLE]
    assert log.state.workloads["default/first"].reservation is not None  # not released by a forgery


def test_the_log_replays_and_a_changed_release_is_a_mismatch() -> None:
    log = run()
    report = check_log(log.messages, deciders.BY_ROLE)
    assert report.mismatches == [] and report.skipped == 0 and report.matched == 2
    message, _ = log.records()[-1]
    forged = LogMessage(
        seq=message.seq,
        subject=message.subject,
        data=message.data.replace(b'"clusterQueue":"cq"', b'"clusterQueue":"other"', 1),
        headers=message.headers,
    )
    assert forged.data != message.data
    messages = [forged if m.seq == message.seq else m for m in log.messages]
    report = check_log(messages, deciders.BY_ROLE)
    assert [(m.head_seq, m.index) for m in report.mismatches] == [(message.seq, 0)]


def test_logic_14_wrote_a_message_per_release_and_replays() -> None:
    v14 = deciders.EARLIER[(admitter_core.ROLE, 14)]
    log = run(v14, schema_version=16)  # logic 14 wrote logs before schema 17: a message per decision
    _, record = log.records()[-1]
    assert record.logic_version == 14 and not record.released
    kinds = [type(codec.decode(m.data)).__name__ for m in log.messages if m.seq > log.records()[-1][0].seq]
    assert kinds == ["QuotaReleased", "WorkloadAdmitted"]
    report = check_log(log.messages, deciders.BY_ROLE)
    assert report.mismatches == [] and report.matched == 2
    new = run(schema_version=16)  # the same run at logic 15: the same state, one message fewer
    assert len(new.messages) == len(log.messages) - 1
    for key in ("default/first", "default/second"):
        assert (new.state.workloads[key].reservation is None) == (log.state.workloads[key].reservation is None)
    assert new.state.usage == log.state.usage


def test_kq_pub_publishes_the_record_carrying_them_even_without_outputs() -> None:
    """KQ_PUB has them in the record (verified by its digest with the rest of its bytes): a record
    whose cycle only released finished workloads is published, one that decided nothing is not."""
    log = Log()
    log.append(*facts())
    log.cycle()  # first admitted
    log.finish("first")
    log.finish("second")  # not admitted: nothing to release
    log.cycle()  # first released, second finished while waiting: nothing admitted
    message, record = log.records()[-1]
    assert record.output_count == 0 and record.released is not None and len(record.released) == 1
    ref = publisher.record_ref(message.seq, message.data, record)
    out = publisher.public_messages(message, record, record=ref, time_ms=record.now_ms)
    assert [(m.subject, m.headers["Kq-Type"], m.data) for m in out] == [
        ("kq.pub.rec.p0.admitter", "DecisionRecord", message.data)
    ]
    assert out[0].headers[publisher.KQ_RECORD_DIGEST] == ref.digest
    idle = types.DecisionRecord(
        **{**{f: getattr(record, f) for f in record.__struct_fields__}, "released": msgspec.UNSET}
    )
    assert publisher.public_messages(message, idle, record=ref, time_ms=record.now_ms) == []


@pytest.mark.parametrize("schema", [types.SCHEMA_VERSION, 16])
def test_an_admission_landing_after_its_workloads_finish_needs_no_dispatch_result(schema: int) -> None:
    """The race of a prebuilt Workload finished OutOfSync (or any job finishing) while a cycle that
    admits it is decided: the admission, on a basis before the finish, lands after it; the dispatcher
    starts nothing for a finished workload, and the next cycle's record releases its quota. Replay
    counts that admission as needing no dispatch result (the release in the record ends it, as a
    QuotaReleased message did before logic 15); the other admission, still unanswered, stays a warning.
    Since schema 17 both admissions are carried in their records, at the records' sequences."""
    log = Log()
    log.schema_version = schema
    log.append(*facts())
    basis = log.state.last_seq
    log.now += 1_000
    early = list(deciders.ADMITTER.decide(log.state, now_ms=log.now))  # first admitted, on this basis
    assert [type(d).__name__ for d in early] == ["WorkloadAdmitted"]
    log.finish("first")  # lands before the admission decided without it
    head, rest = build_batch(
        deciders.ADMITTER,
        outputs=early,
        basis_seq=basis,
        head_seq=0,
        now_ms=log.now,
        max_outputs=0,
        schema_version=schema,
    )
    late_admission = log.append(head, *rest)
    log.cycle()  # first released in the record, second admitted
    _, record = log.records()[-1]
    assert [r.workload for r in record.released_decisions()] == [FIRST]
    second_admission = len(log.messages)
    report = check_log(log.messages, deciders.BY_ROLE)
    assert report.mismatches == [] and report.matched == 2
    assert report.nothing_to_write == [late_admission]
    assert report.undispatched == [second_admission]


@pytest.mark.parametrize("schema", [types.SCHEMA_VERSION, 16])
def test_an_admission_of_a_workload_with_no_job_needs_no_dispatch_result(schema: int) -> None:
    """A Workload created on its own (``kubectl apply`` of a Workload, no job) is admitted and holds its quota:
    the dispatcher has no job to start and records no result (dispatcher.core.start_of), so replay counts the
    admission apart, as one needing none, with no warning. A Job's admission left unanswered still warns."""
    log = Log()
    log.schema_version = schema
    log.append(*facts(jobs=False))
    log.cycle()  # first admitted
    admission = len(log.messages)
    report = check_log(log.messages, deciders.BY_ROLE)
    assert report.matched == 1 and report.exit_code == 0
    assert (report.nothing_to_write, report.undispatched) == ([admission], [])
    lines = "\n".join(line for line, _ in summary(report))
    assert "warning" not in lines and "1 decision needs no dispatch result" in lines
    # the forked replay's reading pass folds nothing: it reads only whose job each observed workload is
    reading = LogChecker(find_records(log.messages), deciders.BY_ROLE, rerun=False)
    for message in log.messages:
        reading.feed(message)
    assert (reading.fold, reading.finish().nothing_to_write) == (False, [admission])

    with_job = Log()
    with_job.schema_version = schema
    with_job.append(*facts())
    with_job.cycle()
    report = check_log(with_job.messages, deciders.BY_ROLE)
    assert (report.nothing_to_write, report.undispatched) == ([], [len(with_job.messages)])


def test_a_workload_adopted_by_a_job_after_its_admission_still_needs_none() -> None:
    """The admission was decided while the Workload had no job, and a Job adopted it later (a prebuilt Workload):
    the dispatcher answered that admission with nothing, and the adoption's start answers no decision."""
    log = Log()
    log.append(*facts(jobs=False))
    log.cycle()
    admission = len(log.messages)
    observed = kueue_fact(workload("first", cpu="3", created=1))
    assert isinstance(observed, types.WorkloadObserved)
    log.append(subjects.fact_message(of_a_job(observed)))
    report = check_log(log.messages, deciders.BY_ROLE)
    assert (report.nothing_to_write, report.undispatched) == ([admission], [])


def test_an_admission_landing_after_its_workloads_finish_shows_no_admission_on_its_object() -> None:
    """The same race seen by the dispatcher: its Workload status shows no QuotaReserved or Admitted for an
    admission folded after the finish (Kueue never admits a finished Workload); one folded before the finish
    is kept, as a finished Workload keeps its admission."""
    for finish_first in (True, False):
        log = DispatchLog(cpu="4")
        log.add(job_workload("first"))
        [admission] = [
            d for d in deciders.ADMITTER.decide(log.log.state, now_ms=NOW) if type(d).__name__ == "WorkloadAdmitted"
        ]
        ref = admission.workload
        finished = types.WorkloadFinished(
            workload=ref, succeeded=False, reason="OwnerNotFound", message="gone", at_ms=NOW + 1
        )
        log.add(*((finished, admission) if finish_first else (admission, finished)))
        record = log.view.records[ref.key]
        assert record.is_true("Finished")
        assert record.is_true("QuotaReserved") is not finish_first
        assert record.is_true("Admitted") is not finish_first


def test_a_replacement_slices_admission_needs_no_dispatch_result() -> None:
    """An elastic Job scaled up: its replacement slice is admitted while the Job runs on, and the dispatcher starts
    nothing for it (the ungater releases the new pods; docs/elastic.md), so replay counts that admission apart, as
    it does the first slice's, whose workload was finished (replaced) by then. No warning is left."""
    from tests.unit.test_elastic_slices import GATES, elastic

    log = Log()
    config = types.ConfigurationObserved(configuration=GATES)
    docs = (flavor("f"), cluster_queue("cq", flavors={"f": {"cpu": 6}}), local_queue("lq", "cq"))
    log.append(subjects.fact_message(config), *[subjects.fact_message(kueue_fact(doc)) for doc in docs])

    def slice_of_the_job(doc: dict[str, object]) -> OutgoingMessage:
        fact = kueue_fact(doc)
        assert isinstance(fact, types.WorkloadObserved)
        return subjects.fact_message(of_a_job(fact))

    log.append(slice_of_the_job(elastic("a-1", 2)))
    log.cycle()
    first = len(log.messages)  # carried in its record, the cycle's last message (schema 17)
    log.append(slice_of_the_job(elastic("a-2", 4, created=60, replaces="a-1")))
    out = log.cycle()
    assert [d.workload.name for d in out if isinstance(d, types.WorkloadAdmitted)] == ["a-2"]
    report = check_log(log.messages, deciders.BY_ROLE)
    assert (report.nothing_to_write, report.undispatched) == ([first, len(log.messages)], [])
