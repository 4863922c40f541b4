"""The simulated executor: runs admitted workloads for their ``runtimeMs``, as Kueue's test runner does.

Kueue's runner (test/performance/scheduler/runner/controller/controller.go)
treats a workload as running from the moment it sees it admitted, sets
``Finished=True`` once ``runtimeMs`` have passed, and answers an eviction by
taking the quota reservation back; a readmitted workload runs its full runtime
again. Here the cluster side of kueue-es is simulated the same way, on the log:

- ``DispatchApplied`` action ``StartJob``, or such an entry of a ``DispatchBatchApplied`` (the
  dispatcher's start write landed):
  the workload starts, and a ``WorkloadFinished`` fact follows ``runtimeMs`` later.
  Like Kueue's runner, which only ever sets ``Finished``, it reports no pods ready:
  no configuration the bench runs waits for pods, and a ``WorkloadPodsReady`` per
  workload was a fifth of the log's messages that every reader parsed (issue 18);
- ``DispatchApplied`` action ``Evict`` (the stop write landed): the run is lost;
  a ``WorkloadStopped`` fact says the job no longer runs (what the watcher reports
  for a stopped Job), so the admitter releases the quota and requeues it.

The executor never decides: it only turns dispatch results into the facts a
kubelet and the watcher would produce. Facts are queued in :attr:`outbox` for the
driver to publish, as :meth:`Executor.messages` makes them: the finishes of one gathering
in FactBatch messages, as the watcher publishes a burst of them (schema 16).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from kueue_es.events import subjects, types
from kueue_es.events.bus.base import OutgoingMessage

FACT_SOURCE = "bench"
"""The ``kq.in.batch.<source>`` token of the bench harness's FactBatch messages."""


@dataclass(kw_only=True)
class Executor:
    """Runs workloads for ``runtime_ms[key]`` ms of ``clock`` (ms since the epoch).

    ``on_fact`` is called with every fact the executor produces, when it is produced.
    """

    runtime_ms: dict[str, int]
    clock: Callable[[], int]
    on_fact: Callable[[types.Fact], None] = lambda fact: None
    outbox: list[tuple[types.Fact, str]] = field(default_factory=list)  # (fact, the version its Msg-Id takes)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    running: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    eviction_reason: dict[str, str] = field(default_factory=dict)
    started: int = 0
    stopped: int = 0

    def observe(self, event: types.Event) -> None:
        """React to one event from the log (others are ignored)."""
        match event:
            case types.EvictionRequested(workload=ref, reason=reason):
                self.eviction_reason[ref.key] = reason
            case types.DispatchApplied(workload=ref, action="StartJob", decision_seq=seq):
                self._start(ref, seq)
            case types.DispatchApplied(workload=ref, action="Evict", decision_seq=seq):
                self._stop(ref, seq)
            case types.DispatchBatchApplied():  # one record's results: each as its own DispatchApplied
                for applied in event.applied():
                    self.observe(applied)

    def _start(self, ref: types.WorkloadRef, seq: int) -> None:
        if ref.key in self.running:
            return  # a second copy of the same start
        self.started += 1
        delay = self.runtime_ms.get(ref.key, 0) / 1000
        loop = asyncio.get_running_loop()
        self.running[ref.key] = loop.call_later(delay, self._finish, ref, seq)

    def _finish(self, ref: types.WorkloadRef, seq: int) -> None:
        self.running.pop(ref.key, None)
        self._emit(types.WorkloadFinished(workload=ref, at_ms=self.clock()), f"run-{seq}")

    def _stop(self, ref: types.WorkloadRef, seq: int) -> None:
        handle = self.running.pop(ref.key, None)
        if handle is not None:
            handle.cancel()
        self.stopped += 1
        reason = self.eviction_reason.get(ref.key, "Preempted")
        self._emit(types.WorkloadStopped(workload=ref, reason=reason, at_ms=self.clock()), f"evict-{seq}")

    def _emit(self, fact: types.Fact, version: str) -> None:
        self.on_fact(fact)
        self.outbox.append((fact, version))
        self.wake.set()

    @staticmethod
    def messages(facts: list[tuple[types.Fact, str]]) -> list[OutgoingMessage]:
        """``facts`` (from :attr:`outbox`) as messages to publish, in order: each run of workloads' finishes in
        FactBatch messages (:func:`~kueue_es.events.subjects.fact_batches`), any other fact alone."""
        out: list[OutgoingMessage] = []
        run: list[tuple[types.BatchedFact, str]] = []
        for fact, version in facts:
            if isinstance(fact, types.WorkloadObserved | types.WorkloadFinished):
                run.append((fact, version))
                continue
            out += subjects.fact_batches(run, source=FACT_SOURCE)
            run = []
            out.append(subjects.fact_message(fact, version=version))
        out += subjects.fact_batches(run, source=FACT_SOURCE)
        return out

    def cancel_all(self) -> None:
        """Stop every pending finish timer (end of the run)."""
        for handle in self.running.values():
            handle.cancel()
        self.running.clear()
