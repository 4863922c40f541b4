"""What an outside subscriber gets on ``KQ_PUB``: which log messages, on which subject, with which headers.

Pure (no I/O, no clock): the runner (:mod:`.service`) folds the log through the batch verifier and hands
every message the fold accepts to :func:`public_message`, in log order. What is public:

- per workload, on ``kq.pub.wl.<ns>.<name>`` (the tokens of the log subject, escaped as
  :func:`kueue_es.events.subjects.token` escapes them): its facts (``kq.in.wl.<ns>.<name>``:
  WorkloadObserved, WorkloadPodsReady, WorkloadFinished, WorkloadStopped, ...), its decisions
  (``kq.dec.<p>.wl.<ns>.<name>``, only as outputs of a batch the verifier passed) and its dispatch
  results (``kq.disp.<cluster>.wl.<ns>.<name>``, and each entry of a DispatchBatchApplied on
  ``kq.disp.<cluster>.rec.<p>.<record seq>`` as a DispatchApplied of its own: :func:`public_messages`);
- the DecisionRecord heading each such batch with outputs, on ``kq.pub.rec.<partition>.<decider>``
  (before its outputs), so a subscriber of ``KQ_PUB`` alone can check a decision against its record
  (docs/subscribing.md). A record without outputs (a cycle that only kept pending reasons) verifies
  nothing published and is left out, unless it carries finished releases (``DecisionRecord.released``,
  admitter logic 15): those are public in the record itself, verified by its digest like the rest of
  its bytes, not as messages of their own; or decisions (below).
- since event schema 17 a record carries its cycle's per-workload decisions itself
  (``DecisionRecord.decisions``) and no output messages follow it on the log; ``KQ_PUB`` still gets
  each of them on its workload's ``kq.pub.wl.<ns>.<name>``, right after the record and in its order,
  as the output message it would have been before (:func:`public_messages`): its own encoding as
  payload, its Msg-Id ``<decision_id>:<i>``, ``Kq-Log-Subject`` the per-workload decision subject it
  would have had; ``Kq-Seq`` is the record's (they share its sequence), so ``Kq-Entry: <i>/<n>``
  names its place among the record's ``n`` decisions, and the record itself says ``Kq-Entry: 0/<n>``
  (a subscriber tells the record by its ``Kq-Type``; the publisher resumes a record it left half
  published from these, :func:`resume_point`, :func:`resume_entry`).

Nothing else: no orphan (a message outside a verified batch, a batch the verifier refuses: broken,
incomplete, misplaced) is ever published, and no fact about other objects (ClusterQueues, Nodes, ...).
The verifier checks a batch's form, not its decisions' content: a well-formed batch written with a
decider's credentials is published whether or not that decider would have made it (``kueue-es replay``,
which re-runs every decision, is what tells; docs/subscribing.md).

Every public message carries the log message's bytes unchanged and these headers:

- ``Nats-Msg-Id``: the log message's Msg-Id (the bus adds it: JetStream dedupes a repeat);
- ``Kq-Type``, ``Kq-Schema``: the event's type tag and schema version, as on the log;
- ``Kq-Seq``: its sequence in ``KQ_LOG``; ``Kq-Log-Subject``: its subject there;
- on a decision and on a record itself: ``Kq-Record-Seq`` (the record's sequence in ``KQ_LOG``),
  ``Kq-Record-Id`` (its ``decision_id``) and ``Kq-Record-Digest`` (hex SHA-256 of the record's
  bytes as stored);
- CloudEvents 1.0 attributes in binary content mode of the CloudEvents NATS protocol binding:
  ``ce-specversion`` ``1.0``, ``ce-id`` (the Msg-Id), ``ce-source`` (:data:`SOURCE`), ``ce-type``
  (``dev.kueue-es.<Kq-Type>``), ``ce-time`` (RFC 3339, UTC, milliseconds), ``ce-subject`` (the
  workload ``<ns>/<name>``, or the record's ``decision_id``), and ``content-type: application/json``
  (the binding's ``datacontenttype``). Values are percent-encoded as the binding says (only a
  space, ``"``, ``%`` and what is not printable ASCII; kueue-es's ids hold none of them).
"""

from __future__ import annotations

import datetime
import hashlib
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

import msgspec

from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage

PUBLIC_WORKLOAD: Final = "kq.pub.wl"
PUBLIC_RECORD: Final = "kq.pub.rec"
SOURCE: Final = "/kueue-es/KQ_LOG"
"""``ce-source``: the log the events come from (a URI reference, the same for every kueue-es)."""
TYPE_PREFIX: Final = "dev.kueue-es."
"""``ce-type`` is this followed by the event's type tag (reverse DNS of the ``kueue-es.dev`` domain)."""
SPECVERSION: Final = "1.0"
CONTENT_TYPE: Final = "application/json"

MSG_ID: Final = "Nats-Msg-Id"
KQ_TYPE: Final = "Kq-Type"
KQ_SCHEMA: Final = "Kq-Schema"
KQ_SEQ: Final = "Kq-Seq"
KQ_LOG_SUBJECT: Final = "Kq-Log-Subject"
KQ_RECORD_SEQ: Final = "Kq-Record-Seq"
KQ_RECORD_ID: Final = "Kq-Record-Id"
KQ_RECORD_DIGEST: Final = "Kq-Record-Digest"
KQ_ENTRY: Final = "Kq-Entry"
CE_HEADERS: Final = ("ce-specversion", "ce-id", "ce-source", "ce-type", "ce-time", "ce-subject")

# printable ASCII but a space, '"' and '%': what a CloudEvents binding header value keeps as it is
_CE_SAFE: Final = "".join(c for c in map(chr, range(0x21, 0x7F)) if c not in '"%')


@dataclass(frozen=True, slots=True)
class RecordRef:
    """The DecisionRecord a published decision was verified by: its sequence in ``KQ_LOG``, its
    ``decision_id`` and the hex SHA-256 of its stored bytes."""

    seq: int
    decision_id: str
    digest: str


def record_ref(seq: int, data: bytes, record: types.DecisionRecord) -> RecordRef:
    """The :class:`RecordRef` of ``record``, stored at ``seq`` as ``data``."""
    return RecordRef(seq=seq, decision_id=record.decision_id, digest=hashlib.sha256(data).hexdigest())


def public_subject(log_subject: str) -> str | None:
    """``kq.pub.wl.<ns>.<name>`` for a workload's fact, decision or dispatch result on the log
    (``kq.in.wl.<ns>.<name>``, ``kq.dec.<p>.wl.<ns>.<name>``, ``kq.disp.<cluster>.wl.<ns>.<name>``),
    the name tokens kept as escaped there; ``kq.pub.rec.<p>.<decider>`` for a record's head
    ``kq.dec.<p>.head.<decider>``; None for any other subject."""
    tokens = log_subject.split(".")
    if tokens[0] != "kq":
        return None
    if len(tokens) == 5 and tokens[1] == "in" and tokens[2] == "wl":
        return f"{PUBLIC_WORKLOAD}.{tokens[3]}.{tokens[4]}"
    if len(tokens) == 6 and tokens[1] in ("dec", "disp") and tokens[3] == "wl":
        return f"{PUBLIC_WORKLOAD}.{tokens[4]}.{tokens[5]}"
    if len(tokens) == 5 and tokens[1] == "dec" and tokens[3] == "head":
        return f"{PUBLIC_RECORD}.{tokens[2]}.{tokens[4]}"
    return None


def untoken(token: str) -> str:
    """The Kubernetes name a subject token stands for (the reverse of ``subjects.token``)."""
    return "" if token == "_" else token.replace("%2E", ".").replace("%25", "%")


def event_time_ms(event: types.Event) -> int:
    """When the event happened, ms since the epoch, as it says itself (``at_ms``, a record's ``now_ms``);
    0 when it does not say (the runner then takes the time the log stored it)."""
    value = getattr(event, "now_ms", None) if isinstance(event, types.DecisionRecord) else getattr(event, "at_ms", None)
    return value if isinstance(value, int) and value > 0 else 0


def rfc3339(ms: int) -> str:
    """``ms`` since the epoch as RFC 3339 in UTC with milliseconds (``2026-12-02T08:01:17.123Z``)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ce_value(text: str) -> str:
    """A CloudEvents attribute as a NATS header value (percent-encoded as the binding says)."""
    return quote(text, safe=_CE_SAFE)


def public_message(
    message: LogMessage, event: types.Event, *, record: RecordRef | None, time_ms: int
) -> OutgoingMessage | None:
    """The ``KQ_PUB`` message for the log ``message`` (decoded: ``event``), None when it is not public.

    ``record``: the verified batch's record, for a decision and for the record itself (None for a fact
    or a dispatch result; a decision without one is refused: ValueError); ``time_ms``: when it happened
    (:func:`event_time_ms`, else the log's stored time), for ``ce-time``. A record without outputs,
    finished releases or carried decisions is not public. A record carrying decisions is the record's
    message alone here (:func:`public_messages` adds its decisions).
    """
    if isinstance(event, types.DecisionRecord) and event.output_count == 0 and not (event.released or event.decisions):
        return None
    is_record = isinstance(event, types.DecisionRecord)
    subject = public_subject(message.subject)
    if subject is None or subject.startswith(PUBLIC_RECORD) != is_record:
        return None
    is_decision = isinstance(event, types.DECISION_TYPES)
    if is_decision and record is None:
        raise ValueError(f"the decision at #{message.seq} ({message.subject}) is published only with its record")
    type_name = codec.type_name(event)
    msg_id = message.headers.get(MSG_ID) or f"{type_name}:seq:{message.seq}"
    if isinstance(event, types.DecisionRecord):
        about = event.decision_id
    else:
        namespace, name = subject.split(".")[3:]
        about = f"{untoken(namespace)}/{untoken(name)}"
    headers = {
        KQ_TYPE: type_name,
        KQ_SCHEMA: message.headers.get(KQ_SCHEMA) or str(types.SCHEMA_VERSION),
        KQ_SEQ: str(message.seq),
        KQ_LOG_SUBJECT: message.subject,
    }
    if is_decision and record is not None:  # a record is a decision too: it names itself
        headers.update(
            {KQ_RECORD_SEQ: str(record.seq), KQ_RECORD_ID: record.decision_id, KQ_RECORD_DIGEST: record.digest}
        )
    headers.update(
        {
            "ce-specversion": SPECVERSION,
            "ce-id": ce_value(msg_id),
            "ce-source": ce_value(SOURCE),
            "ce-type": ce_value(TYPE_PREFIX + type_name),
            "ce-time": rfc3339(time_ms),
            "ce-subject": ce_value(about),
            "content-type": CONTENT_TYPE,
        }
    )
    return OutgoingMessage(subject=subject, data=message.data, msg_id=msg_id, headers=headers)


def is_record_results(log_subject: str) -> bool:
    """True for ``kq.disp.<cluster>.rec.<partition>.<record seq>``: a DispatchBatchApplied's subject,
    published split into one public message per entry (:func:`public_messages`)."""
    tokens = log_subject.split(".")
    return len(tokens) == 6 and tokens[0] == "kq" and tokens[1] == "disp" and tokens[3] == "rec"


def public_messages(
    message: LogMessage, event: types.Event, *, record: RecordRef | None, time_ms: int
) -> list[OutgoingMessage]:
    """The ``KQ_PUB`` messages for the log ``message``: :func:`public_message`'s one (none when not
    public), or, for a DispatchBatchApplied (schema version 5), one DispatchApplied per entry on its
    workload's ``kq.pub.wl.<ns>.<name>``, in order, as the dispatcher published them one by one
    before: payload the entry's DispatchApplied, Msg-Id ``<log Msg-Id>:<i>``, ``Kq-Seq`` and
    ``Kq-Log-Subject`` the batch's, and ``Kq-Entry: <i>/<n>`` (the publisher resumes a batch it
    left half published, :func:`resume_point`); for a FactBatch (schema version 16) likewise one
    message per fact, on its workload's subject, as if it had been published alone; for a
    DecisionRecord carrying decisions (schema version 17) the record, then each decision
    (:func:`carried_messages`)."""
    base_id = message.headers.get(MSG_ID) or f"{codec.type_name(event)}:seq:{message.seq}"
    parts: list[tuple[str, types.Event]]
    if isinstance(event, types.DecisionRecord) and event.decisions:
        return carried_messages(message, event, record=record, time_ms=time_ms)
    if isinstance(event, types.FactBatch):  # schema 16: each fact on its workload's subject, as when alone
        if not message.subject.startswith(subjects.FACT_BATCH_PREFIX):
            return []
        parts = [(subjects.fact_subject(fact), fact) for fact in event.facts]
    elif isinstance(event, types.DispatchBatchApplied):
        if not is_record_results(message.subject):
            return []
        cluster = message.subject.split(".")[2]
        parts = [(subjects.dispatch_subject(applied.workload, cluster), applied) for applied in event.applied()]
    else:
        single = public_message(message, event, record=record, time_ms=time_ms)
        return [] if single is None else [single]
    out: list[OutgoingMessage] = []
    for index, (subject, entry) in enumerate(parts, 1):
        part = LogMessage(
            seq=message.seq,
            subject=subject,
            data=codec.encode(entry),
            headers={**message.headers, MSG_ID: f"{base_id}:{index}"},
        )
        single = public_message(part, entry, record=None, time_ms=event_time_ms(entry) or time_ms)
        assert single is not None  # a workload's fact and dispatch subjects are public
        headers = {**single.headers, KQ_LOG_SUBJECT: message.subject, KQ_ENTRY: f"{index}/{len(parts)}"}
        out.append(msgspec.structs.replace(single, headers=headers))
    return out


def carried_messages(
    message: LogMessage, event: types.DecisionRecord, *, record: RecordRef | None, time_ms: int
) -> list[OutgoingMessage]:
    """The ``KQ_PUB`` messages of the log ``message`` holding ``event``, a DecisionRecord that carries its
    cycle's decisions (schema 17, ``DecisionRecord.decisions``): the record on ``kq.pub.rec.<p>.<decider>``
    with ``Kq-Entry: 0/<n>``, then decision ``i`` of its ``n`` on its workload's ``kq.pub.wl.<ns>.<name>``
    exactly as its output message was published before schema 17 (payload ``codec.encode(decision)``,
    Msg-Id ``<decision_id>:<i>``, ``Kq-Log-Subject`` its per-workload decision subject
    ``kq.dec.<p>.wl.<ns>.<name>``, the record's ``Kq-Record-*``, ``ce-time`` its ``at_ms``, else
    ``time_ms``), but ``Kq-Seq`` the record's and ``Kq-Entry: <i>/<n>``. ``record``: the record's
    :class:`RecordRef` (None: made from ``message``). Empty when the record is not public."""
    ref = record or record_ref(message.seq, message.data, event)
    head = public_message(message, event, record=ref, time_ms=time_ms)
    if head is None:
        return []
    count = len(event.carried)
    out = [msgspec.structs.replace(head, headers={**head.headers, KQ_ENTRY: f"0/{count}"})]
    for index, decision in enumerate(event.carried, 1):
        part = LogMessage(
            seq=message.seq,
            subject=subjects.workload_decision_subject(decision.workload, event.partition),
            data=codec.encode(decision),
            headers={**message.headers, MSG_ID: f"{event.decision_id}:{index}"},
        )
        single = public_message(part, decision, record=ref, time_ms=event_time_ms(decision) or time_ms)
        assert single is not None  # a workload's decision subject is public
        out.append(msgspec.structs.replace(single, headers={**single.headers, KQ_ENTRY: f"{index}/{count}"}))
    return out


def entry_of(headers: dict[str, str]) -> tuple[int, int]:
    """``(i, n)`` of a public message's ``Kq-Entry: <i>/<n>`` (``(1, 1)`` without one: a message whole).
    Raises ValueError when it is not two numbers."""
    index, _, count = headers.get(KQ_ENTRY, "1/1").partition("/")
    return int(index), int(count)


def resume_point(last: LogMessage | None) -> tuple[int, int]:
    """``(published_through, fold_from)`` from ``KQ_PUB``'s last message (None: empty): every log
    message up to ``published_through`` is published; the fold must read from ``fold_from`` on, the
    record heading the last one's batch when it was part of one (its other outputs follow), else the
    message after it. A log message published in part (its last entry ``Kq-Entry: <i>/<n>``, ``i < n``:
    a DispatchBatchApplied, a FactBatch, a record carrying decisions, whose ``0/<n>`` is the record
    itself) is not published through: the fold reads it again and :func:`resume_entry` says which of its
    messages are on ``KQ_PUB`` already. Raises ValueError naming a header that is missing or not a number."""
    if last is None:
        return 0, 1
    try:
        through = int(last.headers[KQ_SEQ])
        record = int(last.headers.get(KQ_RECORD_SEQ, "0"))
        index, count = entry_of(last.headers)
        if index < count:  # a batch (results, facts, carried decisions) published in part: the rest of it again
            through -= 1
    except (KeyError, ValueError) as err:
        raise ValueError(f"KQ_PUB's last message (#{last.seq}, {last.subject}) has no usable {KQ_SEQ}: {err}") from err
    return through, (record if 0 < record <= through else through + 1)


def resume_entry(last: LogMessage | None) -> tuple[int, int] | None:
    """``(log seq, i)`` when ``KQ_PUB``'s last message is entry ``i`` of ``n > i`` of a log message
    published in part (``Kq-Entry``; a record carrying decisions is its entry 0): that message's entries
    up to ``i`` are on ``KQ_PUB``, the publisher publishes the rest. None otherwise (no message, or one
    published whole). Raises ValueError as :func:`resume_point`."""
    if last is None or KQ_ENTRY not in last.headers:
        return None
    try:
        seq = int(last.headers[KQ_SEQ])
        index, count = entry_of(last.headers)
    except (KeyError, ValueError) as err:
        raise ValueError(
            f"KQ_PUB's last message (#{last.seq}, {last.subject}) has no usable {KQ_ENTRY}: {err}"
        ) from err
    return (seq, index) if index < count else None
