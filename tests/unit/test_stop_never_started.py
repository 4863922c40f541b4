"""A Job never started takes no Job write to stop, as in Kueue.

Kueue's reconciler stops an evicted workload's batch/v1 Job only when it runs: ``if job.IsSuspended()
{ return nil }`` (pkg/controller/jobframework/reconciler.go, stopJob), then clears the reservation. Our
dispatcher skips the start of an admission whose eviction is on the log already (as Kueue's reconciler
does), but then patched the Job all the same (suspend, marks, template). Now the dispatcher that skipped
the start writes nothing to the Job when the API server has it suspended with nothing active, and
reports WorkloadStopped itself (the watcher reports only Jobs a stop's write marked). The bench's
simulated API still takes a write slot for it: there one write stands for Kueue's eviction status
patch, which Kueue makes whether the Job ran or not.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kueue_es import deciders
from kueue_es.events import codec, models, subjects, types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.services.dispatcher import core
from kueue_es.services.dispatcher.job_writes import JobWrites
from kueue_es.services.dispatcher.kube_api import WriteLimiter
from kueue_es.services.dispatcher.service import bind_decisions
from kueue_es.services.dispatcher.simulated import SimulatedDispatcher
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.runtime import build_batch, cancel_and_wait

pytestmark = pytest.mark.timeout(20)

REF = types.WorkloadRef(namespace="ns", name="w", uid="u1")


async def observed(bus: MemoryBus) -> None:
    wl = models.Workload(
        metadata=models.ObjectMeta(name=REF.name, namespace="ns", uid=REF.uid),
        spec=models.WorkloadSpec(queue_name="lq", pod_sets=[models.PodSet(requests={"cpu": 1000})]),
        owner=models.OwnerReference(api_version="batch/v1", kind="Job", name="job-w", uid="job-1"),
    )
    await bus.publish(subjects.fact_message(types.WorkloadObserved(workload=wl)))


async def commit(bus: MemoryBus, decisions: list[types.Decision]) -> None:
    head_seq = 0
    async for message in log(bus):
        if message.headers.get("Kq-Type") == "DecisionRecord":
            head_seq = message.seq
    head, rest = build_batch(
        deciders.ADMITTER, outputs=decisions, basis_seq=await bus.last_seq(), head_seq=head_seq, now_ms=1
    )
    await bus.commit_batch(head=head, expected_head_seq=head_seq, rest=rest)


ADMISSION: list[types.Decision] = [
    types.QuotaReserved(
        workload=REF,
        cluster_queue="cq",
        pod_set_assignments=[
            types.PodSetAssignment(name="main", flavors={"cpu": "rf"}, resource_usage={"cpu": 1000}, count=1)
        ],
        at_ms=1,
    ),
    types.WorkloadAdmitted(workload=REF, cluster_queue="cq", at_ms=1),
]
EVICTION: list[types.Decision] = [
    types.EvictionRequested(workload=REF, cluster_queue="cq", reason="Preempted", message="preempted", at_ms=2)
]


async def dispatch_all(bus: MemoryBus, dispatcher: SimulatedDispatcher) -> None:
    consumer = await bind_decisions(bus)
    folding = asyncio.create_task(dispatcher.fold_forever())
    try:
        await dispatcher.handle_batch(consumer, await consumer.fetch(batch=50, timeout=1.0))
        await dispatcher.settling.close()
    finally:
        await cancel_and_wait([folding])


async def log(bus: MemoryBus):  # type: ignore[no-untyped-def]
    last = await bus.last_seq()
    if not last:
        return
    async for message in bus.read(subjects=("kq.>",), start_seq=1):
        yield message
        if message.seq >= last:
            return


async def test_an_admission_evicted_before_its_start_takes_no_write_at_all() -> None:
    bus = MemoryBus()
    await observed(bus)
    await commit(bus, ADMISSION)
    await commit(bus, EVICTION)  # on the log before the dispatcher executes the admission
    limiter = WriteLimiter(qps=1000, burst=10)
    dispatcher = SimulatedDispatcher(bus=bus, limiter=limiter)
    await dispatch_all(bus, dispatcher)
    # no start (an eviction on the log) and no Job write for the stop; the simulated API's one write slot
    # stands for Kueue's eviction status patch, which Kueue makes whether the Job ran or not
    assert limiter.writes == 1
    assert dispatcher.unwritten_stops == 1
    events = [(m, codec.decode(m.data)) async for m in log(bus)]
    results = [r for _, e in events for r in types.dispatch_results(e)]
    assert [(r.workload, r.action) for r in results] == [(REF, "Evict")]
    stopped = [(m, e) for m, e in events if isinstance(e, types.WorkloadStopped)]
    assert len(stopped) == 1  # the dispatcher's own report: no stop write marked the Job for the watcher
    message, fact = stopped[0]
    assert fact.workload == REF and fact.reason == "Preempted"
    # the eviction's sequence: its record's, which carries it (event schema 17)
    eviction_seq = next(
        m.seq for m, e in events if any(isinstance(d, types.EvictionRequested) for d in types.with_carried(e))
    )
    assert message.headers["Nats-Msg-Id"].endswith(f"evict-{eviction_seq}")  # the watcher's Msg-Id for it
    result_seq = next(m.seq for m, e in events if isinstance(e, types.DispatchApplied))
    assert message.seq > result_seq  # after the result it follows from


async def test_a_started_job_is_stopped_with_a_write() -> None:
    bus = MemoryBus()
    await observed(bus)
    await commit(bus, ADMISSION)
    limiter = WriteLimiter(qps=1000, burst=10)
    dispatcher = SimulatedDispatcher(bus=bus, limiter=limiter)
    await dispatch_all(bus, dispatcher)  # the start, written
    await commit(bus, EVICTION)
    await dispatch_all(bus, dispatcher)  # the stop of a running Job, written
    assert limiter.writes == 2 and dispatcher.unwritten_stops == 0
    assert not [m async for m in log(bus) if m.headers.get("Kq-Type") == "WorkloadStopped"]  # the watcher's to say


class JobApi:
    """The one Job the stop reads and perhaps patches."""

    def __init__(self, job: dict[str, Any] | None) -> None:
        self.job, self.patches = job, []

    async def get_object(self, ref: Any, *, namespace: str | None, name: str) -> dict[str, Any]:
        if self.job is None:
            raise kube_errors.NotFoundError(status=404, reason="NotFound", message=f'jobs "{name}" not found')
        return self.job

    async def patch_object(self, ref: Any, *, namespace: str | None, name: str, patch: dict[str, Any]) -> Any:
        self.patches.append(patch)
        return self.job


STOP = core.StopJob(workload=REF, namespace="ns", name="job-w", uid="job-1", reason="Preempted", decision_seq=9)


def job(*, suspend: bool, active: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": "job-w", "namespace": "ns", "uid": "job-1"},
        "spec": {"suspend": suspend, "template": {"spec": {"containers": []}}},
        "status": {"active": active} if active else {},
    }


@pytest.mark.parametrize(
    ("found", "written"),
    [
        (job(suspend=True), False),  # never unsuspended: Kueue writes nothing either
        (job(suspend=False, active=1), True),  # unsuspended by someone else: stopped as usual
        (job(suspend=True, active=2), True),  # suspended, pods still active: marked, the watcher says when stopped
    ],
)
async def test_the_api_servers_job_decides_whether_a_never_started_stop_writes(
    found: dict[str, Any], written: bool
) -> None:
    api = JobApi(found)
    limiter = WriteLimiter(qps=1000, burst=10)
    writes = JobWrites(api=api, limiter=limiter)  # type: ignore[arg-type]
    result, wrote = await writes.stop_never_started(STOP, seq=9)
    assert isinstance(result, types.DispatchApplied) and result.action == "Evict"
    assert wrote is written and len(api.patches) == limiter.writes == int(written)
    if written:
        assert api.patches[0]["spec"]["suspend"] is True


async def test_a_gone_job_is_a_dispatch_failed_404() -> None:
    writes = JobWrites(api=JobApi(None), limiter=WriteLimiter(qps=1000, burst=10))  # type: ignore[arg-type]
    result, wrote = await writes.stop_never_started(STOP, seq=9)
    assert isinstance(result, types.DispatchFailed) and result.status == 404 and not wrote


def _story_events() -> list[types.Event]:
    wl = models.Workload(
        metadata=models.ObjectMeta(name=REF.name, namespace="ns", uid=REF.uid),
        spec=models.WorkloadSpec(queue_name="lq", pod_sets=[models.PodSet(requests={"cpu": 1000})]),
        owner=models.OwnerReference(api_version="batch/v1", kind="Job", name="job-w", uid="job-1"),
    )
    evict = types.DispatchApplied(workload=REF, decision_seq=5, action="Evict", target="Job ns/job-w")
    start = types.DispatchApplied(workload=REF, decision_seq=7, action="StartJob", target="Job ns/job-w")
    return [types.WorkloadObserved(workload=wl), *ADMISSION, *EVICTION, evict, *ADMISSION, start, *EVICTION, evict]


def test_the_timeline_and_explain_tell_a_job_never_started_from_one_suspended_again() -> None:
    from kueue_es import timeline
    from kueue_es.projections.cluster import ClusterState, apply
    from kueue_es.scheduling.explain import StoryCollector

    state, starts, story = ClusterState(), timeline.JobStarts(), StoryCollector(namespace="ns", name="w")
    said: list[str] = []
    for seq, event in enumerate(_story_events(), start=1):
        line = timeline.describe(event, state, starts)
        if isinstance(event, types.DispatchApplied) and event.action == "Evict":
            assert line is not None
            said.append(line[1])
        story.observe(seq, event, state)
        apply(state, event, seq=seq)
        starts.note(event)
    assert said == [
        "Job ns/job-w of ns/w was never started: it stays suspended",  # evicted before its start: nothing written
        "Job ns/job-w suspended for ns/w (template restored)",
    ]
    told = [line.text for line in story.lines["ns/w"] if line.what == "suspended"]
    assert told == [
        "Job ns/job-w was never started: it stays suspended",
        "Job ns/job-w suspended again (its template restored)",
    ]
    # without what came before (a timeline begun mid-log), the stop reads as before
    evict = _story_events()[-1]
    assert timeline.describe(evict, state) == ("suspended", "Job ns/job-w suspended for ns/w (template restored)")


def test_only_an_admission_of_the_live_reservation_marks_it_never_started() -> None:
    """A redelivered admission of an earlier reservation (its start long written) must not mark the live one."""
    dispatcher = SimulatedDispatcher(bus=MemoryBus(), limiter=WriteLimiter(qps=1000, burst=10))
    for seq, event in enumerate([_story_events()[0], *ADMISSION, *EVICTION], start=1):
        core.fold(dispatcher.view, event, seq=seq)
    reserved = dispatcher.view.reserved_seq[REF.key]
    dispatcher._note_unstarted(REF.key, seq=reserved - 1)  # older than the live reservation
    assert not dispatcher._never_started(REF.key)
    dispatcher._note_unstarted(REF.key, seq=reserved + 1)  # the live reservation's admission
    assert dispatcher._never_started(REF.key)
    assert not dispatcher._never_started(REF.key)  # asked once: a stop tried again writes as usual


def test_pods_that_started_tell_a_start_that_answered_no_decision() -> None:
    """A job the dispatcher started apart from a decision (adopting its admitted prebuilt Workload, or suspended by
    hand and started again) leaves no StartJob result; its pods' PodsReady say it ran, so its stop is no
    "never started" (the demo said so of a prebuilt Workload's Job it had run)."""
    from kueue_es import timeline
    from kueue_es.projections.cluster import ClusterState, apply
    from kueue_es.scheduling.explain import StoryCollector

    ready = types.WorkloadPodsReady(workload=REF, ready=True, reason="Started", at_ms=3)
    evict = types.DispatchApplied(workload=REF, decision_seq=5, action="Evict", target="Job ns/job-w")
    events = [_story_events()[0], *ADMISSION, ready, *EVICTION, evict]
    state, starts, story = ClusterState(), timeline.JobStarts(), StoryCollector(namespace="ns", name="w")
    said: list[str] = []
    for seq, event in enumerate(events, start=1):
        line = timeline.describe(event, state, starts)
        if event is evict:
            assert line is not None
            said.append(line[1])
        story.observe(seq, event, state)
        apply(state, event, seq=seq)
        starts.note(event)
    assert said == ["Job ns/job-w suspended for ns/w (template restored)"]
    told = [line.text for line in story.lines["ns/w"] if line.what == "suspended"]
    assert told == ["Job ns/job-w suspended again (its template restored)"]


class RunningJobApi(JobApi):
    """A running Job whose template the API server keeps as it is while the Job runs (it refuses a template
    change unless the Job is suspended and has no startTime), recording each patch and its subresource."""

    def __init__(self, job: dict[str, Any]) -> None:
        super().__init__(job)
        self.writes: list[tuple[str | None, dict[str, Any]]] = []

    async def patch_object(  # type: ignore[override]
        self, ref: Any, *, namespace: str | None, name: str, patch: dict[str, Any], subresource: str | None = None
    ) -> Any:
        assert self.job is not None
        self.writes.append((subresource, patch))
        if subresource == "status":
            self.job["status"] = {k: v for k, v in {**self.job["status"], **patch["status"]}.items() if v is not None}
            return self.job
        spec = patch.get("spec") or {}
        if "template" in spec and not (self.job["spec"].get("suspend") and not self.job["status"].get("startTime")):
            raise kube_errors.ApiError(status=422, reason="Invalid", message="spec.template: field is immutable")
        self.job["spec"] = {**self.job["spec"], **{k: v for k, v in spec.items() if k != "template"}}
        return self.job


async def test_a_running_jobs_stop_suspends_resets_its_start_time_then_restores_the_template() -> None:
    """A Job's pod template is immutable while it runs (kube-apiserver lets a Job's scheduling directives change
    only while it is suspended and has not started), so Kueue's Job.Stop suspends the Job, resets
    ``status.startTime`` and then restores the template; the dispatcher wrote all in one patch, which a real
    API server refuses with 422 whenever the start had changed the template (a flavor's node labels)."""
    running = {
        "metadata": {"name": "job-w", "namespace": "ns", "uid": "job-1"},
        "spec": {"suspend": False, "template": {"spec": {"containers": [], "nodeSelector": {"pool": "spot"}}}},
        "status": {"active": 1, "startTime": "2026-01-01T00:00:00Z"},
    }
    api = RunningJobApi(running)
    limiter = WriteLimiter(qps=1000, burst=10)
    writes = JobWrites(api=api, limiter=limiter)  # type: ignore[arg-type]
    stop = core.StopJob(
        workload=REF,
        namespace="ns",
        name="job-w",
        uid="job-1",
        reason="Preempted",
        decision_seq=9,
        node_selector={"pool": None},
    )
    result = await writes.stop_job(stop, seq=9)
    assert isinstance(result, types.DispatchApplied)
    [(first_to, first), (reset_to, reset), (last_to, last)] = api.writes
    assert (first_to, first["spec"]) == (None, {"suspend": True}) and first["metadata"] == {"uid": "job-1"}
    assert (reset_to, reset["status"]) == ("status", {"startTime": None})
    assert last_to is None and last["spec"]["template"] == {"spec": {"nodeSelector": None}}
    assert last["metadata"]["annotations"] and limiter.writes == 3
