"""``apply_outputs``: a cycle's outputs folded without a log reach the state the log's readers reach.

``kueue-es bench core`` and ``kueue-es bench rules`` run the deciders' cores with no bus; they fold each
cycle's outputs with :func:`~kueue_es.projections.cluster.apply_outputs`. The services fold the same
outputs as a DecisionRecord through the batch verifier (``runtime.fold_message``). If the two orders
differ (a pending outcome before a release, say), the benches measure a cluster the services never see.
"""

from __future__ import annotations

import pytest

from kueue_es import deciders
from kueue_es.bench import BASE_MS, large_scale_facts
from kueue_es.events import subjects, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.projections.cluster import ClusterState, apply, apply_outputs
from kueue_es.services.runtime import MAX_BATCH, build_batch, fold_message, slow_down_seconds


def _view(state: ClusterState) -> dict[str, tuple[object, ...]]:
    """What the deciders read of each workload: quota, admission, eviction, pending reason and message."""
    return {
        key: (wl.reservation, wl.admitted, wl.eviction, wl.finished is not None, wl.pending_reason, wl.pending_message)
        for key, wl in state.workloads.items()
    }


class _Log:
    """The services' path: each message stored at the next sequence and folded by ``fold_message``."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.seq = 0

    def store(self, out: OutgoingMessage) -> None:
        self.seq += 1
        headers = {**out.headers, "Nats-Msg-Id": out.msg_id}
        fold_message(self.state, LogMessage(seq=self.seq, subject=out.subject, data=out.data, headers=headers))


def test_every_cycle_folds_to_what_the_readers_of_its_record_fold() -> None:
    log, direct, seq = _Log(), ClusterState(), 0
    for fact in large_scale_facts(cohorts=1, queues_per_cohort=4, scale=0.3):
        log.store(subjects.fact_message(fact))
        seq += 1
        apply(direct, fact, seq=seq)
    now, mixed, parked_only, cycles = BASE_MS + 60_000, 0, 0, 0
    while cycles < 1_000:
        cycles += 1
        outputs = deciders.ADMITTER.decide(direct, now_ms=now)
        # the same outputs both ways (a FinishedRelease names its cause by sequence, and the two count apart)
        if outputs:
            head, rest = build_batch(
                deciders.ADMITTER,
                outputs=outputs,
                basis_seq=log.state.last_seq,
                head_seq=log.state.heads.get(subjects.DEFAULT_PARTITION, 0),
                now_ms=now,
                max_outputs=MAX_BATCH,
            )
            for out in (head, *rest):
                log.store(out)
            last = apply_outputs(direct, outputs, seq=seq)
            decided = sum(type(e) is not types.PendingOutcome for e in outputs)
            assert last == seq + decided
            seq = last
            mixed += 0 < decided < len(outputs)
            parked_only += decided == 0 and types.PendingOutcome in {type(e) for e in outputs}  # no sequence used
            assert _view(direct) == _view(log.state), f"cycle {cycles}"
        now += 1_000
        if outputs:
            continue
        running = [wl.ref for wl in direct.workloads.values() if wl.reservation is not None and not wl.finished]
        if not running:
            break
        for ref in running[: len(running) // 2 + 1]:  # half of them: the rest run on beside new admissions
            finished = types.WorkloadFinished(workload=ref, at_ms=now)
            log.store(subjects.fact_message(finished))
            seq += 1
            apply(direct, finished, seq=seq)
    assert not any(wl.reservation for wl in direct.workloads.values() if not wl.finished), "not run to the end"
    assert mixed and parked_only, (mixed, parked_only)  # both orders were exercised


def test_the_slow_down_doubles_from_one_ms_to_ten() -> None:
    assert [round(slow_down_seconds(step) * 1000) for step in range(6)] == [1, 2, 4, 8, 10, 10]
    assert slow_down_seconds(10_000) == pytest.approx(0.010)
    with pytest.raises(ValueError, match="slow-down step -1"):
        slow_down_seconds(-1)
