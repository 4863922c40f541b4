"""The publisher's choice of what goes on KQ_PUB, and how it is written (services/publisher), without NATS.

The log of tests/publisher_log.py holds a verified admitter batch, a forged batch, a stray decision,
facts and a dispatch result; the publisher folds it as every service does and must release exactly the
workload's facts, the verified record and its outputs, and the dispatch result, in log order. The log
is written in the old layout (``OLD``: a record followed by its output messages) and, since event schema
17, with each record carrying its decisions, which KQ_PUB must still get as the output messages were.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re

import msgspec
import pytest
from cloudevents.core.bindings import http as ce_http

from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.projections import batches
from kueue_es.services.publisher import core
from kueue_es.services.publisher.service import Publisher
from tests import publisher_log

PUBLIC_SEQS = [4, 5, 6, 7, 11, 12]
OLD = 16  # the last schema version whose records are followed by their output messages


def publish_all(
    log: list[LogMessage], *, through: int = 0, entry: tuple[int, int] | None = None
) -> tuple[list[OutgoingMessage], list[batches.Orphan]]:
    """What a publisher that had published every log message up to ``through`` (and, ``entry``, the first
    entries of the one after: ``core.resume_entry``) puts on KQ_PUB for ``log``."""
    publisher = Publisher(bus=None)  # type: ignore[arg-type]  # take() does no I/O
    publisher.published_through, publisher.resumed_entry = through, entry
    orphans: list[batches.Orphan] = []
    publisher.on_orphan = orphans.append  # type: ignore[method-assign]
    out = []
    for message in log:
        for item in publisher.released(message):
            public = publisher.outgoing(item, time_ms=core.event_time_ms(item[1]) or 1)
            assert public or isinstance(item[1], types.DecisionRecord)  # a record without outputs is not public
            out += public
    return out, orphans


def test_only_verified_batches_and_the_workloads_messages_are_published() -> None:
    """Facts of the workload, the admitter's record and outputs, the dispatch result: published, in log
    order, each decision with its record's sequence, id and digest. The forged batch (a preemptor record
    with a QuotaReserved), the stray QuotaReserved and the queue objects' facts: not."""
    log = publisher_log.stored(publisher_log.messages(schema_version=OLD))
    out, orphans = publish_all(log)
    assert [int(m.headers[core.KQ_SEQ]) for m in out] == PUBLIC_SEQS
    assert [(o.seq, o.reason) for o in orphans] == [
        (8, batches.WRONG_ROLE),
        (9, batches.WRONG_ROLE),
        (10, batches.OUTSIDE_BATCH),
    ]
    assert [m.subject for m in out] == ["kq.pub.wl.team-a.w%2E1", "kq.pub.rec.p0.admitter"] + [
        "kq.pub.wl.team-a.w%2E1"
    ] * 4
    assert not any("w2" in m.subject or "w3" in m.subject for m in out)
    record_digest = hashlib.sha256(log[4].data).hexdigest()
    for message in out:
        stored = log[int(message.headers[core.KQ_SEQ]) - 1]
        assert message.data == stored.data  # the log's bytes, unchanged
        assert message.msg_id == stored.headers["Nats-Msg-Id"]
        assert message.headers[core.KQ_LOG_SUBJECT] == stored.subject
        verified = message.headers[core.KQ_TYPE] in {"DecisionRecord", "QuotaReserved", "WorkloadAdmitted"}
        assert (core.KQ_RECORD_SEQ in message.headers) == verified
        if verified:
            assert message.headers[core.KQ_RECORD_SEQ] == "5"
            assert message.headers[core.KQ_RECORD_ID] == "admit:p0:4"
            assert message.headers[core.KQ_RECORD_DIGEST] == record_digest


def test_a_decision_checks_out_against_its_published_record() -> None:
    """What docs/subscribing.md tells a subscriber to do: the record's bytes hash to Kq-Record-Digest, the
    decision is output Kq-Seq - Kq-Record-Seq with that Msg-Id, and the outputs hash to outputs_sha256."""
    out, _ = publish_all(publisher_log.stored(publisher_log.messages(schema_version=OLD)))
    [record_message] = [m for m in out if m.headers[core.KQ_TYPE] == "DecisionRecord"]
    record = codec.decode(record_message.data)
    assert isinstance(record, types.DecisionRecord)
    outputs = [m for m in out if m.headers.get(core.KQ_RECORD_SEQ) == "5" and m is not record_message]
    for message in outputs:
        assert hashlib.sha256(record_message.data).hexdigest() == message.headers[core.KQ_RECORD_DIGEST]
        index = int(message.headers[core.KQ_SEQ]) - int(message.headers[core.KQ_RECORD_SEQ])
        assert message.msg_id == f"{record.decision_id}:{index}"
    assert len(outputs) == record.output_count
    assert codec.digest(m.data for m in outputs) == record.outputs_sha256


@pytest.mark.parametrize("done", range(len(PUBLIC_SEQS) + 1))
def test_a_restart_publishes_each_message_once(done: int) -> None:
    """A publisher restarted after ``done`` public messages (``KQ_PUB``'s last one tells where) publishes
    exactly the rest, also when it stopped inside a batch (after the record, or after one output)."""
    log = publisher_log.stored(publisher_log.messages(schema_version=OLD))
    first, _ = publish_all(log)
    last = None
    if done:
        sent = first[done - 1]
        last = LogMessage(seq=done, subject=sent.subject, data=sent.data, headers=sent.headers)
    through, fold_from = core.resume_point(last)
    if done and first[done - 1].headers.get(core.KQ_RECORD_SEQ):
        assert fold_from == 5  # the batch's record: its outputs are verified again from there
    again, _ = publish_all(log, through=through)
    assert [m.msg_id for m in first[:done] + again] == [m.msg_id for m in first]


def test_resume_point_needs_the_log_sequence() -> None:
    """A KQ_PUB message without Kq-Seq is not one the publisher wrote: refused, naming the header."""
    with pytest.raises(ValueError, match="Kq-Seq"):
        core.resume_point(LogMessage(seq=3, subject="kq.pub.wl.a.b", data=b"{}", headers={}))
    assert core.resume_point(None) == (0, 1)


def test_public_subjects() -> None:
    """Workload facts, decisions and dispatch results map to kq.pub.wl.<ns>.<name> (tokens kept escaped),
    records to kq.pub.rec.<p>.<decider>; nothing else is public."""
    assert core.public_subject("kq.in.wl.ns.a%2Eb") == "kq.pub.wl.ns.a%2Eb"
    assert core.public_subject("kq.dec.p3.wl.ns.a") == "kq.pub.wl.ns.a"
    assert core.public_subject("kq.disp.local.wl._.a") == "kq.pub.wl._.a"
    assert core.public_subject("kq.dec.p0.head.preemptor") == "kq.pub.rec.p0.preemptor"
    for other in ("kq.in.cq._.cq", "kq.in.pod.ns.p", "kq.dec.p0.head", "other.in.wl.a.b"):
        assert core.public_subject(other) is None
    assert core.untoken("a%2Eb%25c") == "a.b%c"
    assert core.untoken("_") == ""


def test_a_record_without_outputs_and_a_decision_without_its_record() -> None:
    """A record with no outputs verifies nothing published: not public. A decision is never written
    without the record that verified it."""
    [head, *_] = publisher_log.stored(publisher_log.messages(schema_version=OLD)[4:7])
    record = codec.decode(head.data)
    assert isinstance(record, types.DecisionRecord)
    empty = types.DecisionRecord(**{**{f: getattr(record, f) for f in record.__struct_fields__}, "output_count": 0})
    assert core.public_message(head, empty, record=None, time_ms=1) is None
    decision = publisher_log.reserved("w.1", namespace="team-a")[0]
    message = LogMessage(seq=6, subject="kq.dec.p0.wl.team-a.w%2E1", data=codec.encode(decision), headers={})
    with pytest.raises(ValueError, match="only with its record"):
        core.public_message(message, decision, record=None, time_ms=1)


_CE_VALUE = re.compile(r"^[\x21-\x7e]*$")


def test_cloudevents_attributes_follow_the_nats_binding() -> None:
    """Every public message is a CloudEvent in binary content mode: the SDK's decoder of that mode (the
    cloudevents PyPI SDK has no NATS binding; its HTTP binding's binary mode uses the same ``ce-`` headers,
    percent-encoding and content-type rule as the NATS binding) reads each, and the binding's rules hold:
    specversion 1.0, the required attributes, time as RFC 3339, datacontenttype from content-type, header
    values printable ASCII with no space, '"' or unencoded '%'."""
    out, _ = publish_all(publisher_log.stored(publisher_log.messages(schema_version=OLD)))
    ids = set()
    for message in out:
        ce_headers = {k: v for k, v in message.headers.items() if k.startswith("ce-")}
        assert set(ce_headers) == set(core.CE_HEADERS)
        for value in ce_headers.values():
            assert _CE_VALUE.match(value) and '"' not in value
            assert "%" not in value or re.search(r"%[0-9A-F]{2}", value)
        event = ce_http.from_binary_event(ce_http.HTTPMessage(headers=dict(message.headers), body=message.data))
        assert event.get_specversion() == "1.0"
        assert event.get_id() == message.msg_id
        assert event.get_source() == core.SOURCE
        assert event.get_type() == "dev.kueue-es." + message.headers[core.KQ_TYPE]
        assert event.get_datacontenttype() == "application/json"
        assert event.get_data() == json.loads(message.data)
        when = event.get_time()
        assert isinstance(when, datetime.datetime) and when.tzinfo is not None
        assert message.headers["ce-time"].endswith("Z")
        ids.add((event.get_source(), event.get_id()))
    assert len(ids) == len(out)  # source + id names one event


def test_ce_time_is_the_events_own_time() -> None:
    """ce-time: the event's at_ms (a record's now_ms), in RFC 3339 UTC with milliseconds."""
    out, _ = publish_all(publisher_log.stored(publisher_log.messages(schema_version=OLD)))
    times = {m.headers[core.KQ_TYPE]: m.headers["ce-time"] for m in out}
    assert times["QuotaReserved"] == "2026-01-01T00:00:00.000Z"
    assert times["WorkloadFinished"] == "2026-01-01T00:00:05.000Z"
    assert core.rfc3339(1_767_225_600_123) == "2026-01-01T00:00:00.123Z"
    assert core.ce_value('a b"%') == "a%20b%22%25"


def _logged(seq: int, event: types.Event, subject: str, msg_id: str) -> LogMessage:
    outgoing = subjects.message(event, subject=subject, msg_id=msg_id)
    return LogMessage(seq=seq, subject=subject, data=outgoing.data, headers={**outgoing.headers, core.MSG_ID: msg_id})


def test_a_batch_result_is_published_as_the_dispatch_applied_of_each_entry() -> None:
    """A DispatchBatchApplied (schema version 5) goes on KQ_PUB as one DispatchApplied per entry on its
    workload's subject, each as the dispatcher's single result of that decision was published."""
    one = types.WorkloadRef(namespace="team-a", name="w.1", uid="u1")
    two = types.WorkloadRef(namespace="team-b", name="w2", uid="u2")
    applied = [
        types.DispatchApplied(workload=one, decision_seq=6, action="StartJob", target="Job team-a/w.1"),
        types.DispatchApplied(workload=two, decision_seq=7, action="Evict", node_selector={"a": "b"}),
    ]
    entries = [
        types.DispatchEntry(
            decision_seq=a.decision_seq,
            workload=a.workload,
            action=a.action,
            target=a.target,
            node_selector=a.node_selector,
        )
        for a in applied
    ]
    batch = types.DispatchBatchApplied(partition="p0", record_seq=5, entries=entries)
    log_subject = subjects.record_dispatch_subject("p0", 5)
    message = _logged(11, batch, log_subject, "disp:local:rec:p0:5:0:abc")
    publisher = Publisher(bus=None)  # type: ignore[arg-type]  # released() does no I/O
    assert [raw.seq for raw, _, _ in publisher.released(message)] == [11]  # the fold releases it
    out = core.public_messages(message, batch, record=None, time_ms=1_000)
    assert [m.subject for m in out] == ["kq.pub.wl.team-a.w%2E1", "kq.pub.wl.team-b.w2"]
    assert [m.msg_id for m in out] == ["disp:local:rec:p0:5:0:abc:1", "disp:local:rec:p0:5:0:abc:2"]
    for i, (public, single) in enumerate(zip(out, applied, strict=True), 1):
        before = core.public_message(
            _logged(11, single, subjects.dispatch_subject(single.workload), "id"), single, record=None, time_ms=1_000
        )
        assert before is not None
        assert public.data == before.data and codec.decode(public.data) == single
        changed = {
            k for k in public.headers.keys() | before.headers.keys() if public.headers.get(k) != before.headers.get(k)
        }
        assert changed == {"Kq-Log-Subject", "Kq-Entry", "ce-id"}
        assert public.headers["Kq-Log-Subject"] == log_subject and public.headers["Kq-Entry"] == f"{i}/2"
        assert public.headers["Kq-Type"] == "DispatchApplied" and public.headers["Kq-Seq"] == "11"
    # a publisher stopped after the first entry publishes the batch again (its Msg-Ids dedupe the first)
    first = out[0]
    stopped = LogMessage(seq=40, subject=first.subject, data=first.data, headers=first.headers)
    assert core.resume_point(stopped) == (10, 11)
    last = out[1]
    done = LogMessage(seq=41, subject=last.subject, data=last.data, headers=last.headers)
    assert core.resume_point(done) == (11, 12)


CARRIED_SEQS = [4, 5, 5, 5, 8, 9]  # tests/publisher_log.py in schema 17: the record at #5 carries both decisions


def _carried_log() -> list[LogMessage]:
    log = publisher_log.stored(publisher_log.messages(schema_version=types.SCHEMA_VERSION))
    assert codec.decode(log[4].data).carried  # type: ignore[union-attr]  # written by build_batch, schema 17
    return log


def test_a_record_carrying_decisions_publishes_each_as_its_output_message_was() -> None:
    """Since schema 17 the admitter's record carries w.1's QuotaReserved and WorkloadAdmitted and no output
    messages follow it: KQ_PUB still gets the record on kq.pub.rec, then each decision on its workload's
    subject, in the record's order, with the payload, Msg-Id, Kq-Log-Subject, Kq-Record-* and CloudEvents
    headers its output message got in the old layout; only Kq-Seq (the record's, shared), Kq-Record-Digest
    (the record's bytes changed) and Kq-Entry (<i>/<n>; the record itself 0/<n>) differ. The forged record
    (a preemptor carrying a QuotaReserved) and the stray decision stay off it."""
    log = _carried_log()
    out, orphans = publish_all(log)
    assert [int(m.headers[core.KQ_SEQ]) for m in out] == CARRIED_SEQS
    assert [(o.seq, o.reason) for o in orphans] == [(6, batches.WRONG_ROLE), (7, batches.OUTSIDE_BATCH)]
    assert [m.subject for m in out] == ["kq.pub.wl.team-a.w%2E1", "kq.pub.rec.p0.admitter"] + [
        "kq.pub.wl.team-a.w%2E1"
    ] * 4
    assert [m.headers[core.KQ_TYPE] for m in out] == [
        "WorkloadObserved",
        "DecisionRecord",
        "QuotaReserved",
        "WorkloadAdmitted",
        "DispatchApplied",
        "WorkloadFinished",
    ]
    assert [m.headers.get(core.KQ_ENTRY) for m in out] == [None, "0/2", "1/2", "2/2", None, None]
    record_message, *decisions = out[1:4]
    record = codec.decode(log[4].data)
    assert isinstance(record, types.DecisionRecord) and record.output_count == 0
    assert record_message.data == log[4].data and record_message.msg_id == "admit:p0:4:0"
    digest = hashlib.sha256(log[4].data).hexdigest()
    for message in (record_message, *decisions):
        assert message.headers[core.KQ_RECORD_SEQ] == "5" and message.headers[core.KQ_RECORD_ID] == "admit:p0:4"
        assert message.headers[core.KQ_RECORD_DIGEST] == digest
    for index, (message, decision) in enumerate(zip(decisions, record.carried, strict=True), 1):
        assert message.data == codec.encode(decision)  # the decision's own encoding, as its output message was
        assert message.msg_id == message.headers["ce-id"] == f"admit:p0:4:{index}"
        assert message.headers[core.KQ_LOG_SUBJECT] == subjects.workload_decision_subject(decision.workload, "p0")
        assert (
            message.headers["ce-subject"] == "team-a/w.1" and message.headers["ce-time"] == "2026-01-01T00:00:00.000Z"
        )
    # the same decisions in the old layout (#6, #7 after the record at #5): published alike
    old, _ = publish_all(publisher_log.stored(publisher_log.messages(schema_version=OLD)))
    for now, before in zip(decisions, old[2:4], strict=True):
        assert before.headers[core.KQ_TYPE] == now.headers[core.KQ_TYPE]
        assert (now.subject, now.msg_id, now.data) == (before.subject, before.msg_id, before.data)
        changed = {k for k in now.headers.keys() | before.headers.keys() if now.headers.get(k) != before.headers.get(k)}
        assert changed == {core.KQ_SEQ, core.KQ_RECORD_DIGEST, core.KQ_ENTRY}


def test_a_carried_decision_checks_out_against_its_published_record() -> None:
    """What docs/subscribing.md tells a subscriber to do with a carried decision (Kq-Seq = Kq-Record-Seq,
    Kq-Entry i/n): the record's bytes hash to Kq-Record-Digest, the Msg-Id is <decision_id>:<i>, n is the
    number of decisions the record carries and the payload is its decision i."""
    out, _ = publish_all(_carried_log())
    records = {m.headers[core.KQ_SEQ]: m for m in out if m.headers[core.KQ_TYPE] == "DecisionRecord"}
    carried = [m for m in out if core.KQ_RECORD_SEQ in m.headers and m.headers[core.KQ_TYPE] != "DecisionRecord"]
    assert len(carried) == 2
    for message in carried:
        head = records[message.headers[core.KQ_RECORD_SEQ]]
        assert hashlib.sha256(head.data).hexdigest() == message.headers[core.KQ_RECORD_DIGEST]
        payload = json.loads(head.data)
        index, count = (int(n) for n in message.headers[core.KQ_ENTRY].split("/"))
        assert message.headers[core.KQ_SEQ] == message.headers[core.KQ_RECORD_SEQ]
        assert count == len(payload["decisions"]) and payload["outputCount"] == 0
        assert message.msg_id == f"{payload['decisionId']}:{index}"
        assert json.loads(message.data) == payload["decisions"][index - 1]


@pytest.mark.parametrize("done", range(len(CARRIED_SEQS) + 1))
def test_a_restart_inside_a_carried_record_publishes_the_rest_once(done: int) -> None:
    """A publisher restarted after ``done`` public messages of the schema 17 log, among them after the
    record alone (2) or the record and its first decision (3), publishes exactly the rest: no decision
    twice (even past JetStream's dedupe window), none lost."""
    log = _carried_log()
    first, _ = publish_all(log)
    last = None
    if done:
        sent = first[done - 1]
        last = LogMessage(seq=done, subject=sent.subject, data=sent.data, headers=sent.headers)
    through, fold_from = core.resume_point(last)
    entry = core.resume_entry(last)
    if done in (2, 3):  # inside the record: read again from it, its first done - 1 entries are out
        assert (through, fold_from, entry) == (4, 5, (5, done - 2))
    else:
        assert entry is None
    again, _ = publish_all(log, through=through, entry=entry)
    assert [(m.msg_id, m.headers) for m in first[:done] + again] == [(m.msg_id, m.headers) for m in first]


def test_a_record_is_public_with_decisions_and_not_without() -> None:
    """A schema 17 record that carries decisions is public although its output_count is 0; the same record
    carrying none (nor finished releases) verifies nothing published and stays off KQ_PUB, as before."""
    head = _carried_log()[4]
    record = codec.decode(head.data)
    assert isinstance(record, types.DecisionRecord)
    assert [m.subject for m in core.public_messages(head, record, record=None, time_ms=1)] == [
        "kq.pub.rec.p0.admitter",
        "kq.pub.wl.team-a.w%2E1",
        "kq.pub.wl.team-a.w%2E1",
    ]
    bare = msgspec.structs.replace(record, decisions=msgspec.UNSET)
    assert core.public_messages(head, bare, record=None, time_ms=1) == []
