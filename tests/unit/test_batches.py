"""Only verified decision batches change state (issue 13, ARCHITECTURE.md §3).

The fold (``runtime.fold_message`` through ``projections.batches``) takes a decision
only as output ``i`` of the DecisionRecord ``i`` messages before it, with the Msg-Id
the record derives, once the batch is complete and its outputs hash to the record's
digest. Everything else on a decision subject is an orphan: folded by no one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueue_es import deciders
from kueue_es.events import codec, subjects, types
from kueue_es.events.bus.base import ConflictError, LogMessage, OutgoingMessage
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.projections import batches
from kueue_es.projections.cluster import ClusterState
from kueue_es.scenarios.core_engine import SEED
from kueue_es.services.runtime import Decider, DeciderLoop, build_batch, cancel_and_wait, fold_message
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload

REF = types.WorkloadRef(namespace="default", name="big", uid="uid-big")
RESERVED = types.QuotaReserved(
    workload=REF,
    cluster_queue="cq",
    pod_set_assignments=[
        types.PodSetAssignment(name="main", flavors={"cpu": "f"}, resource_usage={"cpu": 8000}, count=1)
    ],
    at_ms=5,
)
ADMITTED = types.WorkloadAdmitted(workload=REF, cluster_queue="cq", at_ms=5)
FACTS = [
    subjects.fact_message(kueue_fact(doc))
    for doc in (
        flavor("f"),
        cluster_queue("cq", flavors={"f": {"cpu": 4}}),
        local_queue("lq", "cq"),
        workload("big", cpu="8"),
    )
]


def stored(messages: Sequence[OutgoingMessage], *, start: int = 1) -> list[LogMessage]:
    """``messages`` as a reader sees them from sequence ``start`` on (with their Nats-Msg-Id)."""
    return [
        LogMessage(seq=seq, subject=m.subject, data=m.data, headers={**m.headers, "Nats-Msg-Id": m.msg_id})
        for seq, m in enumerate(messages, start=start)
    ]


OUTPUTS_LAYOUT = 16
"""The last event schema whose batches are a record followed by one output message per decision (since 17 the
record carries them): most tests here judge that layout, which logs written before 17 still hold."""


def a_batch(
    outputs: Sequence[types.Decision] = (RESERVED, ADMITTED),
    *,
    decider: Decider = deciders.ADMITTER,
    schema_version: int = OUTPUTS_LAYOUT,
) -> list[OutgoingMessage]:
    """A batch as a decider commits it right after :data:`FACTS` (in ``schema_version``'s layout)."""
    head, rest = build_batch(
        decider, outputs=outputs, basis_seq=len(FACTS), head_seq=0, now_ms=5, schema_version=schema_version
    )
    return [head, *rest]


def fold(messages: Sequence[OutgoingMessage]) -> tuple[ClusterState, list[batches.Orphan]]:
    """:data:`FACTS` then ``messages`` folded as every service folds them; the orphans reported."""
    state, orphans = ClusterState(), []
    for message in stored([*FACTS, *messages]):
        fold_message(state, message, on_orphan=orphans.append)
    return state, orphans


def reserved(state: ClusterState) -> bool:
    wl = state.workloads["default/big"]
    return wl.reservation is not None or wl.admitted


def test_a_verified_batch_is_folded_whole_once_its_last_output_is_there() -> None:
    messages = a_batch()
    state, orphans = fold(messages[:2])  # the record and the first output: nothing of the batch yet
    assert not reserved(state) and state.last_seq == len(FACTS) and not state.heads and not orphans
    state, orphans = fold(messages)
    assert reserved(state) and state.workloads["default/big"].admitted
    assert state.heads == {"p0": len(FACTS) + 1} and state.last_seq == len(FACTS) + 3 and not orphans


def test_decisions_published_without_a_record_are_orphans_not_folded() -> None:
    """The attack of issue 13: QuotaReserved + WorkloadAdmitted with plain nats-py, no DecisionRecord."""
    subject = subjects.workload_decision_subject(REF)
    forged = [
        OutgoingMessage(subject=subject, data=codec.encode(RESERVED), msg_id="x:1"),
        OutgoingMessage(subject=subject, data=codec.encode(ADMITTED), msg_id="x:2"),
    ]
    state, orphans = fold(forged)
    assert not reserved(state) and not state.usage
    assert [(o.seq, o.reason) for o in orphans] == [(5, batches.OUTSIDE_BATCH), (6, batches.OUTSIDE_BATCH)]
    assert state.last_seq == 6  # their sequences count as folded


def test_the_same_forgery_with_the_msg_ids_a_record_would_derive_is_still_an_orphan() -> None:
    _, *outputs = a_batch()
    state, orphans = fold(outputs)
    assert not reserved(state) and {o.reason for o in orphans} == {batches.OUTSIDE_BATCH}


def _swap(messages: list[OutgoingMessage]) -> list[OutgoingMessage]:
    head, first, second = messages
    return [head, second, first]


def _rename(index: int, msg_id: str) -> object:
    def change(messages: list[OutgoingMessage]) -> list[OutgoingMessage]:
        out = list(messages)
        out[index] = msgspec.structs.replace(out[index], msg_id=msg_id)
        return out

    return change


def _tamper(messages: list[OutgoingMessage]) -> list[OutgoingMessage]:
    """Output 1's bytes changed (another ClusterQueue), its Msg-Id kept: only the digest tells."""
    head, first, second = messages
    forged = msgspec.structs.replace(RESERVED, cluster_queue="someone-else")
    return [head, msgspec.structs.replace(first, data=codec.encode(forged)), second]


def _elsewhere(messages: list[OutgoingMessage]) -> list[OutgoingMessage]:
    head, first, second = messages
    return [head, msgspec.structs.replace(first, subject="kq.dec.p0.wl.default.other"), second]


def _gap(messages: list[OutgoingMessage]) -> list[OutgoingMessage]:
    head, first, _ = messages
    return [head, first, FACTS[0]]  # a fact where output 2 should be: the batch is not contiguous


def _short(messages: list[OutgoingMessage]) -> list[OutgoingMessage]:
    head, first, second = messages
    record = msgspec.structs.replace(codec.decode(head.data), output_count=1)
    return [msgspec.structs.replace(head, data=codec.encode(record)), first, second]


BROKEN = {
    "outputs out of order": (_swap, batches.BATCH_BROKEN),
    "wrong Msg-Id on an output": (_rename(2, "admit:p0:4:7"), batches.BATCH_BROKEN),
    "outputs not matching the digest": (_tamper, batches.DIGEST_MISMATCH),
    "an output on another workload's subject": (_elsewhere, batches.BATCH_BROKEN),
    "a message missing from the batch": (_gap, batches.BATCH_BROKEN),
    "a record counting fewer outputs than it hashed": (_short, batches.DIGEST_MISMATCH),
    "a record with a Msg-Id it does not derive": (_rename(0, "admit:p0:3:0"), batches.NOT_A_RECORD),
}


@pytest.mark.parametrize("change", BROKEN.values(), ids=BROKEN.keys())
def test_a_batch_that_does_not_verify_is_orphaned_whole(change: tuple) -> None:
    mutate, reason = change
    state, orphans = fold(mutate(a_batch()))
    assert not reserved(state) and not state.heads
    assert reason in {o.reason for o in orphans}
    assert {o.seq for o in orphans} >= {len(FACTS) + 1, len(FACTS) + 2}  # the record and the first output at least


def test_garbage_on_the_head_is_skipped_and_the_next_batch_counts() -> None:
    garbage = OutgoingMessage(subject=subjects.head_subject("admit"), data=b"\x00not json", msg_id="g")
    head, rest = build_batch(
        deciders.ADMITTER, outputs=[RESERVED, ADMITTED], basis_seq=5, head_seq=0, now_ms=5, schema_version=17
    )
    state, orphans = fold([garbage, head, *rest])
    assert [(o.seq, o.reason) for o in orphans] == [(5, batches.NOT_A_RECORD)]
    assert reserved(state) and state.heads == {"p0": 6}


def test_a_record_interrupting_a_batch_breaks_it_and_heads_its_own() -> None:
    first = a_batch()
    head, rest = build_batch(
        deciders.ADMITTER, outputs=[RESERVED, ADMITTED], basis_seq=6, head_seq=0, now_ms=6, schema_version=17
    )
    state, orphans = fold([*first[:2], head, *rest])
    assert [(o.seq, o.reason) for o in orphans] == [(5, batches.BATCH_BROKEN), (6, batches.BATCH_BROKEN)]
    assert reserved(state) and state.heads == {"p0": 7}


def test_a_decision_type_on_a_fact_subject_is_an_orphan() -> None:
    state, orphans = fold([OutgoingMessage(subject="kq.in.wl.default.big", data=codec.encode(RESERVED), msg_id="f")])
    assert not reserved(state) and [o.reason for o in orphans] == [batches.OFF_DECISION_SUBJECT]


def test_seed_and_empty_batches_verify() -> None:
    """The scenario engines' ``seed`` role and a record without outputs (a request's answer)."""
    state, orphans = fold(a_batch(decider=SEED))
    assert reserved(state) and not orphans
    head, rest = build_batch(deciders.PREEMPTOR, outputs=[], basis_seq=4, head_seq=0, now_ms=1, answers="r1")
    state, orphans = fold([head])
    assert state.heads == {"p0": 5} and not orphans and not rest


# -- a table of every way to mess with one batch, by property --------------------------------


@settings(max_examples=200, deadline=None)
@given(
    order=st.permutations([0, 1, 2]),
    drop=st.sets(st.integers(0, 2), max_size=2),
    renamed=st.sets(st.integers(0, 2), max_size=2),
    extra=st.integers(0, 3),
)
def test_only_the_batch_exactly_as_committed_is_folded(
    order: list[int], drop: set[int], renamed: set[int], extra: int
) -> None:
    """Reorder, drop, re-id a batch's messages, or put a fact inside it: the batch is folded only
    when it reaches the log exactly as committed, and then whole; else none of it (the log
    going on after an incomplete batch)."""
    original = a_batch()
    messages = [
        msgspec.structs.replace(original[i], msg_id=f"forged:{i}") if i in renamed else original[i]
        for i in order
        if i not in drop
    ]
    if extra:
        messages.insert(min(extra, len(messages)), FACTS[0])
    intact = messages[: len(original)] == original  # a fact after the whole batch is fine
    state, orphans = fold([*messages, FACTS[1]])  # a later message: a batch still incomplete is broken
    assert reserved(state) == intact
    assert bool(state.heads) == intact
    assert (not orphans) == intact


# -- the decider loop --------------------------------------------------------------------------


async def test_garbage_on_the_head_does_not_fence_the_decider() -> None:
    """Issue 13: the loop expects the last sequence on the partition's heads as the log has it, not its
    last record's; garbage on another decider's head counts too (one token for every role's head)."""
    bus = MemoryBus()
    # on a head of the ClusterQueue's partition (q-cq: it has no cohort), where the admitter commits
    await bus.publish(OutgoingMessage(subject=subjects.head_subject("preempt", "q-cq"), data=b"garbage", msg_id="g"))
    loop = DeciderLoop(bus=bus, decider=deciders.ADMITTER, clock=lambda: 1, wakeup=0.02)
    task = asyncio.create_task(loop.run())
    try:
        for message in FACTS[:3]:
            await bus.publish(message)
        await bus.publish(subjects.fact_message(kueue_fact(workload("small", cpu="1"))))
        for _ in range(100):
            await asyncio.sleep(0.02)
            if loop.commits:
                break
    finally:
        await cancel_and_wait([task])
    assert loop.commits >= 1 and loop.conflicts == 0
    assert loop.state.workloads["default/small"].reservation is not None
    assert loop.stats["q-cq"].head_seq > 1 and loop.stats["q-cq"].commits >= 1 and loop.readiness()[0]


class _AlwaysConflicting(MemoryBus):
    async def commit_batch(self, **_: object) -> int:
        raise ConflictError("the head moved")


async def test_readiness_goes_false_when_commits_keep_failing() -> None:
    """A decider with a batch to commit that has not committed for ``stall_after`` s is not ready."""
    now = [0.0]
    bus = _AlwaysConflicting()
    loop = DeciderLoop(
        bus=bus, decider=deciders.ADMITTER, clock=lambda: 1, wakeup=0.02, stall_after=30, monotonic=lambda: now[0]
    )
    task = asyncio.create_task(loop.run())
    try:
        for message in FACTS[:3]:
            await bus.publish(message)
        await bus.publish(subjects.fact_message(kueue_fact(workload("small", cpu="1"))))
        for _ in range(100):
            await asyncio.sleep(0.02)
            if loop.conflicts:
                break
        assert loop.conflicts and loop.readiness()[0]  # failing, but not for long yet
        now[0] = 29.0
        assert loop.readiness()[0]
        now[0] = 31.0
        ready, facts = loop.readiness()
        assert not ready and facts["stalled"] and facts["uncommitted_for_s"] == 31.0
    finally:
        await cancel_and_wait([task])


async def test_readiness_recovers_once_there_is_nothing_left_to_commit() -> None:
    loop = DeciderLoop(bus=MemoryBus(), decider=deciders.ADMITTER, monotonic=lambda: 100.0, stall_after=1)
    loop.partition_stats("q-cq").blocked_since = 0.0
    ready, facts = loop.readiness()
    assert not ready and facts["stalled_partitions"] == ["q-cq"]
    await loop._cycle()  # an empty state: nothing to decide in any partition
    assert loop.readiness() == (True, {"stalled": False, "partitions": 0})


# -- roles: each decider's own head, and only the kinds of decision its role makes -------------


def on_head(messages: list[OutgoingMessage], subject: str) -> list[OutgoingMessage]:
    """``messages`` with the record moved to the head ``subject`` (what only an admin could publish)."""
    return [msgspec.structs.replace(messages[0], subject=subject), *messages[1:]]


def test_a_record_on_the_preemptors_head_carrying_reservations_is_not_folded() -> None:
    """The preemptor's role makes PreemptionIssued and EvictionRequested: a batch of its role (on its own
    head) carrying QuotaReserved and WorkloadAdmitted is orphaned whole, record included."""
    state, orphans = fold(a_batch(decider=deciders.PREEMPTOR))
    assert a_batch(decider=deciders.PREEMPTOR)[0].subject == "kq.dec.p0.head.preemptor"
    assert not reserved(state) and not state.heads
    assert [(o.seq, o.reason) for o in orphans] == [
        (5, batches.WRONG_ROLE),
        (6, batches.WRONG_ROLE),
        (7, batches.WRONG_ROLE),
    ]
    assert "output 1 is a QuotaReserved, which role 'preempt' does not make" in orphans[0].detail


def test_a_record_on_another_roles_head_is_not_folded() -> None:
    """An admitter's batch, exactly as committed but with its record on the preemptor's head (or on a
    head of no role): the record names another role than its head's, so nothing of it is folded."""
    for head in ("kq.dec.p0.head.preemptor", "kq.dec.p0.head.admit", "kq.dec.p0.head.nobody"):
        state, orphans = fold(on_head(a_batch(), head))
        assert not reserved(state) and not state.heads, head
        assert [(o.seq, o.reason) for o in orphans] == [
            (5, batches.WRONG_ROLE),
            (6, batches.WRONG_ROLE),
            (7, batches.WRONG_ROLE),
        ]
        assert f"record of role 'admit' on {head}, not on its head kq.dec.p0.head.admitter" in orphans[0].detail
    empty, _ = build_batch(deciders.PREEMPTOR, outputs=[], basis_seq=4, head_seq=0, now_ms=1, answers="r1")
    state, orphans = fold(on_head([empty], "kq.dec.p0.head.admitter"))
    assert not state.heads and [o.reason for o in orphans] == [batches.WRONG_ROLE]


def test_the_old_single_head_is_no_head() -> None:
    """A record on ``kq.dec.<p>.head`` (the layout before per-role heads) heads no batch."""
    state, orphans = fold(on_head(a_batch(), "kq.dec.p0.head"))
    assert not reserved(state) and not state.heads
    assert {o.reason for o in orphans} == {batches.OUTSIDE_BATCH}
    assert "before per-role heads" in orphans[0].detail


def test_the_role_table_covers_every_decider_and_what_it_made() -> None:
    """One table: the roles with a head are the roles the fold knows; each service's role is one of them;
    the deciders' NATS users are their heads; every output of the recorded demo is of its role's kinds."""
    from kueue_es.events.bus import permissions
    from tests.unit.test_golden_log import _load

    assert set(batches.ROLE_OUTPUTS) == set(subjects.HEAD_TOKENS)
    assert {d.role for d in deciders.BY_ROLE.values()} | {SEED.role} == set(subjects.HEAD_TOKENS)
    deciding = (deciders.ADMITTER, deciders.PREEMPTOR, deciders.PLACER, deciders.MULTIKUEUE)
    assert [subjects.HEAD_TOKENS[d.role] for d in deciding] == list(permissions.DECIDERS)
    made: dict[str, set[str]] = {}
    record: types.DecisionRecord | None = None
    for message in _load("demo-preempt.jsonl"):
        event = codec.decode(message.data)
        if isinstance(event, types.DecisionRecord):
            record = event
        elif isinstance(event, types.DECISION_TYPES) and record is not None:
            made.setdefault(record.role, set()).add(type(event).__name__)
            assert type(event) in batches.ROLE_OUTPUTS[record.role], (record.role, type(event).__name__)
    assert made == {
        "admit": {"QuotaReserved", "WorkloadAdmitted", "WorkloadInadmissible", "PreemptionRequired", "QuotaReleased"},
        "preempt": {"PreemptionIssued", "EvictionRequested"},
    }


def test_a_batch_whose_end_is_past_the_end_of_the_log_expires() -> None:
    """A rogue record claiming two outputs with one stored, the last message of the log: held until
    ``expire`` is told where the log ends, then orphaned whole; a batch whose end is stored is not."""
    state, orphans = fold(a_batch()[:2])
    assert state.batches.holding and state.batches.holding_until == 7 and not orphans
    assert state.batches.expire(7) == batches.Verdict()  # its end is stored: its outputs are on their way
    verdict = state.batches.expire(6)
    assert [(o.seq, o.reason) for o in verdict.orphans] == [
        (5, batches.BATCH_INCOMPLETE),
        (6, batches.BATCH_INCOMPLETE),
    ]
    assert not state.batches.holding and state.batches.expire(6) == batches.Verdict()


# -- the fast paths (issue 18): they take only what the full rules take -----------------------


def _recorded() -> list[LogMessage]:
    from tests.unit.test_golden_log import _load

    return _load("demo-preempt.jsonl")


def test_what_passes_unoffered_is_what_offer_accepts_alone() -> None:
    """``passes`` lets a fold apply a fact or dispatch result without offering it: on the recorded demo
    log, every message it lets through is one ``offer`` accepts as it is, with nothing held or orphaned;
    and every message on a decision subject, or while a batch is held, is offered."""
    verifier = batches.BatchVerifier()
    passed = offered = 0
    for message in _recorded():
        event = codec.decode(message.data)
        fast = verifier.passes(message.subject, event)
        holding = verifier.holding
        verdict = verifier.offer(
            seq=message.seq,
            subject=message.subject,
            msg_id_header=message.headers.get("Nats-Msg-Id", ""),
            data=message.data,
            event=event,
        )
        if fast:
            passed += 1
            assert verdict == batches.Verdict(accepted=((message.seq, event),))
            assert not holding and not verifier.holding
        else:
            offered += 1
            assert holding or message.subject.startswith(batches.DECISION_PREFIX)
    assert passed and offered and verifier.orphaned == 0


def test_nothing_passes_unoffered_while_a_batch_is_held_or_on_a_decision_subject() -> None:
    verifier = batches.BatchVerifier()
    fact = kueue_fact(flavor("f"))
    assert verifier.passes(FACTS[0].subject, fact)
    assert not verifier.passes(FACTS[0].subject, None)  # undecodable: offered (and logged)
    assert not verifier.passes(FACTS[0].subject, RESERVED)  # a decision off its subjects: an orphan
    assert not verifier.passes(subjects.workload_decision_subject(REF), fact)
    head = stored(a_batch(), start=len(FACTS) + 1)[0]
    verifier.offer(
        seq=head.seq,
        subject=head.subject,
        msg_id_header=head.headers["Nats-Msg-Id"],
        data=head.data,
        event=codec.decode(head.data),
    )
    assert verifier.holding and not verifier.passes(FACTS[0].subject, fact)


OTHER = types.WorkloadRef(namespace="default", name="other", uid="uid-other")


@settings(max_examples=300, deadline=None)
@given(
    subject=st.sampled_from(
        [
            subjects.workload_decision_subject(REF),
            subjects.workload_decision_subject(OTHER),
            subjects.workload_decision_subject(REF, "p1"),
            subjects.head_subject("admit"),
            "kq.in.wl.default.big",
        ]
    ),
    msg_index=st.integers(0, 3),
    forged=st.booleans(),
    event=st.sampled_from(
        [RESERVED, ADMITTED, types.WorkloadAdmitted(workload=OTHER, cluster_queue="cq", at_ms=5), None]
    ),
    index=st.integers(1, 2),
)
def test_the_fast_output_test_never_takes_what_output_problem_refuses(
    subject: str, msg_index: int, forged: bool, event: types.Event | None, index: int
) -> None:
    """``_is_output`` (the common case, no messages built) is True only where ``output_problem`` finds
    nothing wrong, and True for every output as ``build_batch`` makes it."""
    head = codec.decode(a_batch()[0].data)
    assert isinstance(head, types.DecisionRecord)
    msg_id = f"forged:{msg_index}" if forged else batches.msg_id(head, msg_index)
    fast = batches._is_output(head, index, subject=subject, msg_id_header=msg_id, event=event)
    problem = batches.output_problem(head, index, subject=subject, msg_id_header=msg_id, event=event)
    if fast:
        assert problem is None
    exact = (
        event is not None
        and subject == subjects.workload_decision_subject(event.workload)  # type: ignore[union-attr]
        and not forged
        and msg_index == index
    )
    assert fast == exact == (problem is None)


# --- event schema 17: the record carries its decisions --------------------------------------------------


def carried_record(**changes: object) -> OutgoingMessage:
    """The record of :func:`a_batch` in schema 17 (it carries RESERVED and ADMITTED), ``changes`` made to it."""
    messages = a_batch(schema_version=17)
    assert len(messages) == 1  # no output messages
    record = codec.decode(messages[0].data)
    assert isinstance(record, types.DecisionRecord)
    if not changes:
        return messages[0]
    return msgspec.structs.replace(messages[0], data=codec.encode(msgspec.structs.replace(record, **changes)))


def test_a_record_carrying_its_decisions_is_one_message_folded_as_its_outputs_were() -> None:
    old_state, old_orphans = fold(a_batch())
    record = codec.decode(carried_record().data)
    assert isinstance(record, types.DecisionRecord)
    assert record.output_count == 0 and record.decisions == (RESERVED, ADMITTED) and record.schema_version == 17
    state, orphans = fold([carried_record()])
    assert not orphans and not old_orphans
    assert reserved(state) and state.heads == {"p0": len(FACTS) + 1} and state.last_seq == len(FACTS) + 1
    wl, old_wl = state.workloads["default/big"], old_state.workloads["default/big"]
    assert (wl.reservation, wl.admitted) == (old_wl.reservation, old_wl.admitted)


def test_the_verifier_releases_carried_decisions_between_releases_and_pending_outcomes() -> None:
    release = types.FinishedRelease(workload=OTHER, cluster_queue="cq", cause_seq=3, at_ms=5)
    outcome = types.PendingOutcome(workload=OTHER, reason="Pending", message="waits")
    head, rest = build_batch(
        deciders.ADMITTER, outputs=[outcome, RESERVED, release, ADMITTED], basis_seq=4, head_seq=0, now_ms=5
    )
    assert rest == []
    (message,) = stored([head], start=5)
    verdict = batches.BatchVerifier().offer(
        seq=5,
        subject=message.subject,
        msg_id_header=message.headers["Nats-Msg-Id"],
        data=message.data,
        event=codec.decode(message.data),
    )
    kinds = [(seq, type(event).__name__) for seq, event in verdict.accepted]
    assert kinds == [
        (5, "DecisionRecord"),
        (5, "QuotaReleased"),
        (5, "QuotaReserved"),
        (5, "WorkloadAdmitted"),
        (5, "WorkloadInadmissible"),
    ]


def test_a_carried_decision_of_a_kind_its_role_does_not_make_orphans_the_record() -> None:
    issued = types.PreemptionIssued(workload=REF, cluster_queue="cq", nomination_seq=3, targets=[], at_ms=5)
    state, orphans = fold([carried_record(decisions=(RESERVED, issued))])
    assert not reserved(state) and not state.heads
    assert [(o.reason, "PreemptionIssued" in o.detail) for o in orphans] == [(batches.WRONG_ROLE, True)]


def test_a_record_with_outputs_and_carried_decisions_is_no_record() -> None:
    state, orphans = fold([carried_record(output_count=1)])
    assert not reserved(state) and [o.reason for o in orphans] == [batches.NOT_A_RECORD]
    assert "one or the other" in orphans[0].detail


def test_a_carried_decision_about_another_partitions_workload_is_refused() -> None:
    """The fold's partition rule names the carried decisions as it named outputs: a record of a partition that
    does not hold the workload at its basis is orphaned whole."""
    state, _ = fold([])
    mine = state.partitions.of_workload(REF.key)
    assert mine is not None
    head, rest = build_batch(
        deciders.ADMITTER, outputs=[RESERVED, ADMITTED], basis_seq=4, head_seq=0, now_ms=5, partition=mine + "x"
    )
    state, orphans = fold([head, *rest])
    assert not reserved(state) and [o.reason for o in orphans] == [batches.WRONG_PARTITION]
    head, rest = build_batch(
        deciders.ADMITTER, outputs=[RESERVED, ADMITTED], basis_seq=4, head_seq=0, now_ms=5, partition=mine
    )
    state, orphans = fold([head, *rest])
    assert reserved(state) and not orphans


def test_build_batch_refuses_a_record_among_the_decisions_it_carries() -> None:
    record = codec.decode(carried_record().data)
    assert isinstance(record, types.DecisionRecord)
    with pytest.raises(TypeError, match="DecisionRecord is not a per-workload decision"):
        build_batch(deciders.ADMITTER, outputs=[record], basis_seq=4, head_seq=0, now_ms=5)


SMALL = types.WorkloadRef(namespace="default", name="small", uid="uid-small")


def _requeued_by_the_batch(order: str, schema_version: int) -> bool:
    """Fold a batch that parks ``big`` and releases ``small`` (``order``: which first) in ``schema_version``'s
    layout; whether the release's requeue trigger moves ``big`` back (SEMANTICS §3.6: it was parked before)."""
    small_doc = workload("small", cpu="2")
    facts = [*FACTS, subjects.fact_message(kueue_fact(small_doc))]
    admitted = types.WorkloadAdmitted(
        workload=SMALL,
        cluster_queue="cq",
        pod_set_assignments=[
            types.PodSetAssignment(name="main", flavors={"cpu": "f"}, resource_usage={"cpu": 2000}, count=1)
        ],
        at_ms=5,
    )
    first, first_rest = build_batch(
        deciders.ADMITTER, outputs=[admitted], basis_seq=len(facts), head_seq=0, now_ms=5, schema_version=schema_version
    )
    parked = types.WorkloadInadmissible(workload=REF, reason="Pending", message="no", at_ms=6, parked=True)
    released = types.QuotaReleased(workload=SMALL, cluster_queue="cq", reason="Deleted", cause_seq=1, at_ms=6)
    outputs = [parked, released] if order == "parked first" else [released, parked]
    basis = len(facts) + 1 + len(first_rest)
    second, second_rest = build_batch(
        deciders.ADMITTER,
        outputs=outputs,
        basis_seq=basis,
        head_seq=len(facts) + 1,
        now_ms=6,
        schema_version=schema_version,
    )
    state, orphans = ClusterState(), []
    for message in stored([*facts, first, *first_rest, second, *second_rest]):
        fold_message(state, message, on_orphan=orphans.append)
    assert not orphans and state.workloads["default/big"].parked_seq > 0
    return state.workloads["default/big"].parked_seq < state.requeue_triggers["cq:cq"]


@pytest.mark.parametrize("schema_version", [16, 17])
def test_a_release_after_a_parking_in_one_batch_moves_it_back_in_either_layout(schema_version: int) -> None:
    """The decisions a record carries share its sequence; the requeue trigger of one that follows a parking in
    the same record counts from the next sequence, so what the batch parked before its release goes back to
    the queue, as when each decision was a message of its own; a release before the parking does not."""
    assert _requeued_by_the_batch("parked first", schema_version)
    assert not _requeued_by_the_batch("released first", schema_version)


def test_a_record_over_the_byte_limit_carries_the_first_workloads_decisions_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cycle's decisions that would make the record larger than ``CARRIED_MAX_BYTES`` are cut between two
    workloads' decisions (the rest is decided again next cycle), the same way every time (replay builds it
    again)."""
    from kueue_es.services import runtime

    monkeypatch.setattr(runtime, "CARRIED_MAX_BYTES", 3000)
    outputs: list[types.Output] = []
    for i in range(20):
        ref = types.WorkloadRef(namespace="default", name=f"w{i}", uid=f"u{i}")
        outputs += [
            msgspec.structs.replace(RESERVED, workload=ref),
            types.WorkloadAdmitted(workload=ref, cluster_queue="cq", at_ms=5),
        ]
    head, rest = build_batch(deciders.ADMITTER, outputs=outputs, basis_seq=4, head_seq=0, now_ms=5)
    record = codec.decode(head.data)
    assert isinstance(record, types.DecisionRecord) and not rest
    assert len(head.data) <= 3000 and 0 < len(record.carried) < len(outputs)
    assert len(record.carried) % 2 == 0  # a workload's reservation and admission stay together
    assert list(record.carried) == outputs[: len(record.carried)]
    again, _ = build_batch(deciders.ADMITTER, outputs=outputs, basis_seq=4, head_seq=0, now_ms=5)
    assert again.data == head.data
