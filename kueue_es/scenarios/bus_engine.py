"""The bus engine: a scenario run through a real nats-server and every service as a process.

Per scenario: a fresh nats-server (from the wheel) on a free port with a temp
store, an emulated API server, and the five services started by the same
:class:`kueue_es.supervisor.Supervisor` as ``kueue-es up``, the deciders in
stepped mode. The runner publishes the scenario's facts on the log as the watcher
would, commits pre-admitted workloads' seed decisions on the ``seed`` head,
and drives the run with SchedulingRequested facts: each cycle is one ``cycle``
request to every decider role in turn (admitter, preemptor, TAS placer), each
answered by that decider's DecisionRecord, then the evictions the cycle requested
complete (the runner logs WorkloadStopped, standing in for the job and the
watcher); ``run.cycles`` cycles, or cycles until one decides nothing (settle),
as the core engine runs them. The outcome is then folded from the log exactly as the core
engine folds it, so the two engines are compared on the same terms.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import tempfile
from pathlib import Path

from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus
from kueue_es.events.bus.server import NatsServer
from kueue_es.projections.cluster import ClusterState
from kueue_es.scenarios.core_engine import (
    MAX_SETTLE_CYCLES,
    SEED,
    cycle_deciders,
    job_reports,
    multikueue_fact,
    status_fact,
)
from kueue_es.scenarios.engines import RunError, deletion_fact
from kueue_es.scenarios.outcome import Outcome, build_outcome
from kueue_es.scenarios.specs import (
    AdmittedWorkload,
    ApplyEvent,
    CheckEvent,
    DecideEvent,
    DeleteEvent,
    FinishEvent,
    PodsReadyEvent,
    RemoteEvent,
    Scenario,
    ScenarioEvent,
    WaitEvent,
    WorkerEvent,
)
from kueue_es.scheduling import lifecycle
from kueue_es.services.runtime import build_batch, fold_message, wall_clock_ms
from kueue_es.sim.emulator import serve_emulator
from kueue_es.supervisor import Supervisor

ANSWER_TIMEOUT = 60.0
MAX_WAIT_MS = 20_000  # the longest real wait (a wait event, a backoff) a bus run sits out


class BusEngine:
    """The ``bus`` :class:`~kueue_es.scenarios.engines.Engine`; each run starts and stops its own system."""

    name = "bus"

    def run(self, scenario: Scenario) -> Outcome:
        """Run ``scenario`` through nats-server and the services; raises RunError on a timeout."""
        return asyncio.run(_BusRun(scenario).execute())

    def close(self) -> None:
        """Nothing is kept between runs."""


def _log_tail(path: Path, service: str, lines: int = 25) -> str:
    """The last ``lines`` lines of a crashed service's log, so the error says why it exited."""
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"\n--- {service}: no log at {path}"
    return f"\n--- the end of {service}'s log:\n" + "\n".join(text)


class _BusRun:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.requests = itertools.count(1)
        self.writes = itertools.count(1)
        self.bus: Bus | None = None

    async def execute(self) -> Outcome:
        with tempfile.TemporaryDirectory(prefix="kueue-es-scenario-") as tmp:
            run_dir = Path(tmp)
            async with NatsServer(store_dir=run_dir / "nats") as server, serve_emulator() as emulator:
                supervisor = Supervisor(
                    nats_url=server.url,
                    log_dir=run_dir / "logs",
                    kube_args=["--kube-server", emulator.url],
                    decider_args=["--stepped"],
                )
                self.bus = await nats_bus.connect(server.url)
                await supervisor.start()
                try:
                    await self._watcher_started(run_dir / "logs" / "watcher.log")
                    await self._drive()
                    state, log = await self._fold_all()
                except RunError:
                    raise
                except Exception as err:  # a failed run names the scenario and what broke
                    raise RunError(self.scenario.path, f"the bus run failed: {err!r}") from err
                finally:
                    codes = await supervisor.stop()
                    await self.bus.close()
                # -SIGTERM: stopped by our SIGTERM before it had set up its handler (a slow start
                # on a loaded machine), not a crash.
                crashed = {name: code for name, code in codes.items() if code not in (0, None, -signal.SIGTERM)}
                if crashed:
                    tails = "".join(_log_tail(run_dir / "logs" / f"{name}.log", name) for name in crashed)
                    raise RunError(self.scenario.path, f"services exited with errors: {crashed}{tails}")
        return build_outcome(submitted=self.scenario.submitted, log=log, state=state)

    async def _watcher_started(self, log_path: Path) -> None:
        """Wait for the watcher's ``service_started`` line: it has read the log by then, so it
        knows none of the facts this runner publishes and its relists (start-up, 410 Gone)
        cannot report them deleted from the (empty) emulated cluster."""
        async with asyncio.timeout(ANSWER_TIMEOUT):
            while not (log_path.exists() and '"service_started"' in log_path.read_text(errors="replace")):
                await asyncio.sleep(0.05)

    async def _drive(self) -> None:
        scenario = self.scenario
        for obj in scenario.objects:
            if obj.fact is not None:
                await self._publish(obj.fact)
        for admitted in scenario.admitted:
            assert isinstance(admitted.workload.fact, types.WorkloadObserved)
            await self._publish(admitted.workload.fact)
            await self._seed(admitted)
        if scenario.admitted:
            await self._fence_seeded()
        for pending in scenario.pending:
            assert pending.fact is not None
            await self._publish(pending.fact)
        await self._phase()
        for event in scenario.events:
            await self._apply_event(event)
            await self._phase()

    async def _publish(self, fact: types.Fact) -> None:
        assert self.bus is not None
        # Each publish is a new write, as each write of an object gets a new resourceVersion: without
        # one the dedup id is the content's digest, and JetStream would drop a fact identical to an
        # earlier one (a Workload set inactive and back to active, within its duplicate window).
        await self.bus.publish(subjects.fact_message(fact, version=f"scenario-{next(self.writes)}"))

    async def _seed(self, admitted: AdmittedWorkload) -> None:
        """Commit a pre-admitted workload's seed decisions, then what its job reports (the runner stands in)."""
        outputs = await self._commit_seed(admitted)
        for fact in job_reports(outputs, pods_ready=self.scenario.pods_ready, now_ms=admitted.reserved_at_ms):
            await self._publish(fact)

    async def _commit_seed(self, admitted: AdmittedWorkload) -> list[types.Decision]:
        """Commit a pre-admitted workload's QuotaReserved + WorkloadAdmitted on the seed head, as role seed;
        returns them."""
        assert self.bus is not None and isinstance(admitted.workload.fact, types.WorkloadObserved)
        meta = admitted.workload.fact.workload.metadata
        if admitted.eviction is not None:
            # The services' dispatcher stops the job of every eviction on the log, so none stays in flight here.
            raise RunError(
                self.scenario.path,
                f"admitted workload {meta.namespace}/{meta.name} is being evicted (an Evicted condition): "
                "this engine completes every eviction; run the scenario on the core engine only (engines: [core])",
            )
        ref = types.WorkloadRef(namespace=meta.namespace, name=meta.name, uid=meta.uid)
        at_ms, cq = admitted.reserved_at_ms, admitted.cluster_queue
        reserved = types.QuotaReserved(
            workload=ref, cluster_queue=cq, at_ms=at_ms, pod_set_assignments=list(admitted.pod_set_assignments)
        )
        outputs: list[types.Decision] = [reserved, types.admitted(reserved, at_ms=at_ms)]
        head_seq = await self.bus.last_subject_seq(subjects.heads_of())
        basis = await self.bus.last_seq()
        head, rest = build_batch(SEED, outputs=outputs, basis_seq=basis, head_seq=head_seq, now_ms=at_ms)
        await self.bus.commit_batch(head=head, expected_head_seq=head_seq, rest=rest, head_filter=subjects.heads_of())
        return outputs

    async def _fence_seeded(self) -> None:
        """An empty seed record in each partition that owes a fence after the seeds: a pre-admitted workload
        whose queue is not its ClusterQueue's (none, as Kueue's tests often write them) moved partition with
        its seed reservation, and the first cycle must not wait for the partition it left (as the core engine)."""
        assert self.bus is not None
        state, _ = await self._fold_all()
        for partition in state.partitions.fencing():
            head_filter = subjects.heads_of(partition)
            head_seq = await self.bus.last_subject_seq(head_filter)
            basis = await self.bus.last_seq()
            head, rest = build_batch(
                SEED, outputs=[], basis_seq=basis, head_seq=head_seq, now_ms=wall_clock_ms(), partition=partition
            )
            await self.bus.commit_batch(head=head, expected_head_seq=head_seq, rest=rest, head_filter=head_filter)

    async def _apply_event(self, event: ScenarioEvent) -> None:
        match event:
            case FinishEvent(workload=key):
                await self._publish(types.WorkloadFinished(workload=await self._ref(key)))
            case DeleteEvent(modelled=True):
                uid = (await self._ref(event.key)).uid if event.kind == "Workload" else ""
                state, _ = await self._fold_all()
                await self._publish(deletion_fact(event, state, uid=uid, at_ms=wall_clock_ms()))
            case DeleteEvent(refreshed=refreshed) if refreshed:
                for fact in refreshed:
                    await self._publish(fact)
            case ApplyEvent(object=obj, refreshed=refreshed) if obj.fact is not None or refreshed:
                for fact in (obj.fact, *refreshed) if obj.fact is not None else refreshed:
                    await self._publish(fact)
            case CheckEvent() | PodsReadyEvent():
                ref = await self._ref(event.workload)
                state, _ = await self._fold_all()
                await self._publish(status_fact(event, ref, state, at_ms=wall_clock_ms()))
            case WaitEvent(ms=ms):
                await self._sit_out(ms)
            case DecideEvent(role=role):
                await self._cycle(only=role)
            case RemoteEvent():
                ref = await self._ref(event.workload)
                await self._publish(multikueue_fact(event, lambda _key: ref, at_ms=wall_clock_ms()))
            case WorkerEvent():
                await self._publish(
                    multikueue_fact(event, lambda _key: types.WorkloadRef(namespace="", name=""), at_ms=wall_clock_ms())
                )
            case _:
                pass

    async def _sit_out(self, ms: int) -> None:
        """Let ``ms`` of real time pass (the services read the wall clock)."""
        if ms > MAX_WAIT_MS:
            raise RunError(
                self.scenario.path,
                f"a wait of {ms / 1000:g}s is longer than the bus engine sits out ({MAX_WAIT_MS / 1000:g}s); "
                "run the scenario on the core engine only (engines: [core])",
            )
        await asyncio.sleep(ms / 1000)

    async def _ref(self, key: str) -> types.WorkloadRef:
        namespace, name = key.split("/")
        state, _ = await self._fold_all()
        known = state.workloads.get(key)
        return types.WorkloadRef(namespace=namespace, name=name, uid=known.workload.metadata.uid if known else "")

    async def _phase(self) -> None:
        """``run.cycles`` cycles, or settle: cycles until one in which no decider decides anything."""
        cycles = self.scenario.run.cycles
        if cycles is not None:
            for _ in range(cycles):
                await self._cycle()
            return
        for _ in range(MAX_SETTLE_CYCLES):
            if await self._cycle():
                continue
            state, _ = await self._fold_all()
            backoff_end = lifecycle.backoff_wakeup_ms(state)
            if backoff_end is None:
                return
            await self._sit_out(max(0, backoff_end - wall_clock_ms()) + 50)  # settle sits out backoffs
        raise RunError(
            self.scenario.path, f"the run does not settle: decisions still change after {MAX_SETTLE_CYCLES} cycles"
        )

    async def _cycle(self, *, only: str = "") -> bool:
        """One cycle as the core engine runs it: a ``cycle`` request to each decider role in
        turn (``only``: to that role alone, a ``decide`` event; each answered by that
        decider's DecisionRecord), then every eviction the
        cycle requested completes (a WorkloadStopped, as the watcher would report the
        stopped job). True when some decider decided something."""
        changed = False
        decided: list[types.Decision] = []
        for decider in cycle_deciders():
            if only and decider.role != only:
                continue  # a decide event: that decider alone
            role_changed, outputs = await self._role_cycle(decider.role)
            changed = changed or role_changed
            decided.extend(o for o in outputs if isinstance(o, types.DECISION_TYPES))
        for fact in job_reports(decided, pods_ready=self.scenario.pods_ready, now_ms=wall_clock_ms()):
            await self._publish(fact)
        return changed

    async def _role_cycle(self, role: str) -> tuple[bool, list[types.Event]]:
        """One role's turn of a cycle: a ``cycle`` request, and a second one when a partition owed a
        fence before it. Returns (whether it changed anything, the outputs of both batches).

        The first request's records release the hand-over (the fence), but the partition the object
        went to was blocked while the role decided it, so it decided nothing; the core engine decides
        fencing partitions first and folds at once, so there the target decides in the same turn. The
        second request is that turn here, and a fence counts as a change (as in the core engine), so a
        settle never ends on a hand-over nobody has decided after."""
        state, _ = await self._fold_all()
        handover = bool(state.partitions.fencing())
        record, outputs = await self._request("cycle", role=role)
        changed = record.decided
        if handover:
            _, more = await self._request("cycle", role=role)
            changed, outputs = True, [*outputs, *more]
        return changed, outputs

    async def _request(self, mode: str, *, role: str) -> tuple[types.DecisionRecord, list[types.Event]]:
        """Ask ``role`` for one ``mode`` step; returns its answering record and that batch's outputs: the
        decisions the record carries (event schema 17), or the messages that follow it (older batches)."""
        assert self.bus is not None
        request_id = f"{role}-{mode}-{next(self.requests)}"
        start = await self.bus.last_seq() + 1
        await self._publish(types.SchedulingRequested(request_id=request_id, mode=mode, role=role))  # type: ignore[arg-type]
        reader = self.bus.read(subjects=("kq.>",), start_seq=start)
        record: types.DecisionRecord | None = None
        outputs: list[types.Event] = []
        try:
            async with asyncio.timeout(ANSWER_TIMEOUT), contextlib.aclosing(reader):
                async for message in reader:
                    event = codec.decode(message.data)
                    if record is None:
                        if isinstance(event, types.DecisionRecord) and event.answers == request_id:
                            record = event
                            if record.output_count == 0:  # since event schema 17 it carries its decisions
                                return record, list(record.carried)
                    elif message.subject.startswith("kq.dec."):
                        outputs.append(event)  # the batch is contiguous on the log
                        if len(outputs) == record.output_count:
                            return record, outputs
        except TimeoutError:
            raise RunError(
                self.scenario.path, f"no answer from {role} to the {mode} request within {ANSWER_TIMEOUT:g}s"
            ) from None
        raise RunError(self.scenario.path, f"the log ended before {role} answered")

    async def _fold_all(self) -> tuple[ClusterState, list[tuple[int, types.Event]]]:
        assert self.bus is not None
        state = ClusterState()
        log: list[tuple[int, types.Event]] = []
        last = await self.bus.last_seq()
        if not last:
            return state, log
        reader = self.bus.read(subjects=("kq.>",), start_seq=1)
        async with contextlib.aclosing(reader):
            async for message in reader:
                event = codec.decode(message.data)
                fold_message(state, message)  # as a service folds it: a batch once verified whole
                log.append((message.seq, event))
                if message.seq >= last:
                    break
        return state, log
