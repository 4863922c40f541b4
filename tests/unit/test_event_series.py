"""Kubernetes Events fold as Kueue's recorder folds them (client-go tools/events, event_broadcaster.go).

Kueue records its Events through controller-runtime's events.k8s.io recorder: an Event isomorphic to one it
wrote (same type, action, reason, recorder, regarding object at the same resourceVersion; the note does not
count) makes the stored one a series of count 2, later ones are only counted until the series is finished
(6 minutes unobserved) or refreshed (every 30 minutes). preemption_test.go "Should issue preemption exactly once
for each preempted workload" expects one PreemptedWorkload Event for a preemptor that preempted eight workloads.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kueue_es.events import types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.scenarios.core_engine import run_scenario
from kueue_es.scenarios.loading import load_scenario
from kueue_es.services.dispatcher import core, event_series
from kueue_es.services.dispatcher.recording import Recording, workload_key
from kueue_es.services.dispatcher.simulated import UnlimitedWrites
from kueue_es.services.kube import errors as kube_errors

SCENARIO = Path(__file__).parents[1] / "scenarios" / "preemption" / "preemption-issued-once-per-victim.yaml"
MINUTE = 60_000


def _key(reason: str = "Pending", *, version: str = "1", type_: str = "Warning") -> event_series.IsomorphicKey:
    regarding = event_series.Reference("kueue.x-k8s.io/v1beta2", "Workload", "ns", "wl", "uid-1", version)
    return event_series.IsomorphicKey(type_, reason, reason, "kueue-admission", "kueue-admission", regarding)


def _observe(cache: event_series.SeriesCache, key: event_series.IsomorphicKey, *, seq: int, at_ms: int) -> Any:
    return cache.observe(key, namespace="ns", name=f"wl.{seq:x}.0", body={"n": seq}, at_ms=at_ms, seq=seq)


def test_the_first_is_created_the_second_makes_a_series_later_ones_are_counted() -> None:
    cache = event_series.SeriesCache()
    assert _observe(cache, _key(), seq=1, at_ms=1_000) == event_series.Create()
    second = _observe(cache, _key(), seq=2, at_ms=2_000)
    assert second == event_series.WriteSeries(
        namespace="ns", name="wl.1.0", body={"n": 1}, count=2, last_observed_ms=2_000
    )
    assert _observe(cache, _key(), seq=3, at_ms=3_000) is None  # only counted
    assert _observe(cache, _key(), seq=3, at_ms=3_000) is None  # a redelivered decision counts nothing
    assert cache.expire(3_000 + event_series.FINISH_MS) == []  # observed 6 minutes ago: not yet finished
    [final] = cache.expire(3_001 + event_series.FINISH_MS)
    assert (final.name, final.count, final.last_observed_ms) == ("wl.1.0", 3, 3_000)
    assert cache.entries == {}
    assert _observe(cache, _key(), seq=4, at_ms=10 * MINUTE) == event_series.Create()  # a finished series: anew


def test_the_decisions_one_record_carries_are_each_counted() -> None:
    """Since event schema 17 a record's decisions share its sequence: each counts by its place in the record
    (eight evictions of one preemptor's record make a series of eight); a redelivery of one counts nothing."""
    cache = event_series.SeriesCache()

    def observe(place: int) -> Any:
        return cache.observe(_key(), namespace="ns", name=f"wl.9-{place}.0", body={}, at_ms=place, seq=9, place=place)

    assert observe(1) == event_series.Create()
    assert isinstance(observe(2), event_series.WriteSeries)
    assert [observe(place) for place in (3, 4, 3)] == [None, None, None]
    [final] = cache.expire(5 + event_series.FINISH_MS)
    assert final.count == 4
    assert _observe(cache, _key(), seq=10, at_ms=0) == event_series.Create()


def test_the_key_is_not_the_message_but_the_type_and_the_objects_version() -> None:
    cache = event_series.SeriesCache()
    assert _observe(cache, _key(), seq=1, at_ms=0) == event_series.Create()
    assert _observe(cache, _key(type_="Normal"), seq=2, at_ms=0) == event_series.Create()
    assert _observe(cache, _key(version="2"), seq=3, at_ms=0) == event_series.Create()  # the object was written
    assert isinstance(_observe(cache, _key(version="2"), seq=4, at_ms=0), event_series.WriteSeries)


def test_a_singleton_leaves_the_cache_and_a_running_series_is_refreshed() -> None:
    cache = event_series.SeriesCache()
    _observe(cache, _key("A"), seq=1, at_ms=0)
    _observe(cache, _key("B"), seq=2, at_ms=0)
    for seq in range(3, 6):
        _observe(cache, _key("B"), seq=seq, at_ms=seq * 5 * MINUTE)  # observed every 5 minutes: never finished
    assert cache.expire(0) == []  # starts the refresh period
    assert cache.expire(7 * MINUTE) == []  # A dropped (6 minutes old), B's count 3 waits for the refresh
    assert list(cache.entries) == [_key("B")]
    _observe(cache, _key("B"), seq=6, at_ms=29 * MINUTE)
    [refreshed] = cache.expire(30 * MINUTE)
    assert refreshed.count == 5 and list(cache.entries) == [_key("B")]


class _Api:
    """The Events API: creates (409 on a name taken) and merge patches of ``series`` (404 on a missing Event)."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}

    async def create_object(self, ref: Any, *, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        key = (namespace, body["metadata"]["name"])
        if key in self.events:
            raise kube_errors.ConflictError("exists")
        self.events[key] = body
        return body

    async def patch_object(self, ref: Any, *, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        if (namespace, name) not in self.events:
            raise kube_errors.NotFoundError("gone")
        self.events[namespace, name] = {**self.events[namespace, name], **patch}
        return self.events[namespace, name]


class _Stored:
    """The dispatcher's stored Workload objects: a resourceVersion each, bumped by every batch that writes one."""

    def __init__(self) -> None:
        self.versions: Counter[str] = Counter()

    def resource_version(self, namespace: str, name: str) -> str:
        return str(self.versions[f"{namespace}/{name}"] + 1)

    def workload_uid(self, namespace: str, name: str) -> str:
        return f"uid-{name}"

    def workload_created_ms(self, namespace: str, name: str) -> int:
        return 0

    def object_uid(self, log_uid: str) -> str:
        return ""


def _batches(log: list[tuple[int, types.Event]]) -> list[list[tuple[int, types.Event, int]]]:
    """The log's entries, one list per decider batch (a DecisionRecord and the decisions after it), each with its
    place among the decisions its record carries (event schema 17: at the record's sequence, CoreRun.log), 0 for
    the record and for a decision of its own message, as the dispatcher hands them to its recorder."""
    batches: list[list[tuple[int, types.Event, int]]] = []
    record_seq, place = 0, 0
    for seq, event in log:
        if isinstance(event, types.DecisionRecord) or not batches:
            batches.append([])
            record_seq, place = seq, 0
        elif seq == record_seq:
            place += 1
        batches[-1].append((seq, event, place if seq == record_seq else 0))
    return batches


def _recorded(log: list[tuple[int, types.Event]]) -> tuple[_Api, Recording]:
    """The Events the dispatcher writes for ``log``, batch by batch as it executes them: the batch's workloads
    written (a new resourceVersion) before their Events are recorded."""
    api, stored, state = _Api(), _Stored(), ClusterState()
    view = SimpleNamespace(cluster=state, records={}, reserved_seq={}, not_matching={})
    recording = Recording(api=api, limiter=UnlimitedWrites(), view=view, stored=stored)  # type: ignore[arg-type]
    for batch in _batches(log):
        for seq, event, _ in batch:
            apply(state, event, seq=seq)
        keys = [key for _, event, _ in batch if (key := workload_key(event))]
        recording.before_writes(keys)
        stored.versions.update(set(keys))
        asyncio.run(recording.record([(seq, event) for seq, event, _ in batch], places=[p for _, _, p in batch]))
    return api, recording


@pytest.fixture(scope="module")
def preemption_log() -> list[tuple[int, types.Event]]:
    return run_scenario(load_scenario(SCENARIO)).log


def test_a_preemptor_gets_one_preempted_workload_event_for_its_eight_victims(preemption_log: Any) -> None:
    """preemption_test.go: the eight PreemptedWorkload Events on a preemptor are one series; each victim gets
    its own Preempted Event for each preemption (a different object, or the same one written since)."""
    api, recording = _recorded(preemption_log)
    on_preemptors = [e for e in api.events.values() if e["reason"] == "PreemptedWorkload"]
    assert sorted(e["involvedObject"]["name"] for e in on_preemptors) == ["first-high-prio", "second-high-prio"]
    evictions = [e for _, e in preemption_log if isinstance(e, types.EvictionRequested) and e.preemptor is not None]
    for event in on_preemptors:
        preemptor = event["involvedObject"]["name"]
        first = next(e.workload.key for e in evictions if e.preemptor is not None and e.preemptor.name == preemptor)
        assert event["message"].startswith(f"Preempted workload {first} ")  # the first note is kept
        assert event["series"]["count"] == 2  # written at the second; the other six counted in memory
    preempted = Counter(e["involvedObject"]["name"] for e in api.events.values() if e["reason"] == "Preempted")
    assert preempted == Counter({f"low-priority-wl-{i}": 2 for i in range(1, 9)})
    last = max(e.at_ms for e in evictions)
    asyncio.run(recording.expire(last + event_series.FINISH_MS + 1))  # unobserved for 6 minutes: finished
    finished = {
        e["involvedObject"]["name"]: e["series"]["count"]
        for e in api.events.values()
        if e["reason"] == "PreemptedWorkload"
    }
    assert finished == {"first-high-prio": 8, "second-high-prio": 8}


def _pending_workload_recording() -> tuple[_Api, _Stored, Recording, types.WorkloadRef]:
    """A Recording over the state of the preemption scenario's start, and the ref of one pending workload."""
    log = run_scenario(load_scenario(SCENARIO)).log
    state = ClusterState()
    for seq, event in log:
        apply(state, event, seq=seq)
    api, stored = _Api(), _Stored()
    view = SimpleNamespace(cluster=state, records={}, reserved_seq={}, not_matching={})
    recording = Recording(api=api, limiter=UnlimitedWrites(), view=view, stored=stored)  # type: ignore[arg-type]
    return api, stored, recording, types.WorkloadRef(namespace="default", name="low-priority-wl-1")


def _warning(ref: types.WorkloadRef, reason: str, message: str, at_ms: int) -> types.WorkloadInadmissible:
    return types.WorkloadInadmissible(workload=ref, reason=reason, message=message, at_ms=at_ms)


def test_a_warning_about_an_unchanged_workload_folds_into_the_first_whatever_its_message() -> None:
    """scheduler.go records SecondPassFailed without patching the Workload: the next one, with another message,
    is isomorphic (same object, same resourceVersion) and only makes the first a series, its message kept;
    a pending Warning after a status write (a changed QuotaReserved message) is about a newer object: an Event
    of its own, as on a real cluster."""
    api, stored, recording, ref = _pending_workload_recording()
    first = _warning(ref, "SecondPassFailed", "topology allows to fit only 1 out of 2 pod(s)", 1_000)
    second = _warning(ref, "SecondPassFailed", "topology allows to fit only 0 out of 2 pod(s)", 2_000)
    for seq, decision in ((100, first), (101, second)):
        recording.before_writes([ref.key])
        asyncio.run(recording.record([(seq, decision)]))
    [event] = api.events.values()
    assert (event["message"], event["series"]["count"]) == (first.message, 2)
    assert event["series"]["lastObservedTime"] == "1970-01-01T00:00:02.000000Z"

    pending = _warning(ref, "Pending", "couldn't assign flavors to pod set main: insufficient quota", 3_000)
    changed = _warning(ref, "Pending", "couldn't assign flavors to pod set main: insufficient unused quota", 4_000)
    for seq, decision in ((102, pending), (103, changed)):
        recording.before_writes([ref.key])
        stored.versions[ref.key] += 1  # the batch patched the QuotaReserved condition's message
        asyncio.run(recording.record([(seq, decision)]))
    pendings = [e for e in api.events.values() if e["reason"] == "Pending"]
    assert [(e["message"], "series" in e) for e in pendings] == [(pending.message, False), (changed.message, False)]


def test_the_runner_finishes_a_series_no_later_decision_follows() -> None:
    """The dispatcher's own clock runs the recorder's timers (Recording.run): a series unobserved for 6 minutes
    gets its final count written though no decision comes after it."""
    api, _, recording, ref = _pending_workload_recording()
    warnings = [_warning(ref, "SecondPassFailed", f"only {n} out of 4 pod(s)", 1_000 * n) for n in range(3)]
    for seq, decision in enumerate(warnings, start=100):
        recording.before_writes([ref.key])
        asyncio.run(recording.record([(seq, decision)]))
    [event] = api.events.values()
    assert event["series"]["count"] == 2  # the third only counted

    async def finish() -> None:
        task = asyncio.create_task(
            recording.run(ready=lambda: True, clock=lambda: 2_001 + event_series.FINISH_MS, every=0)
        )
        for _ in range(100):  # a few turns of the loop: the timer's sleep(0) and the patch
            await asyncio.sleep(0)
            if next(iter(api.events.values()))["series"]["count"] == 3:
                break
        task.cancel()

    asyncio.run(finish())
    [event] = api.events.values()
    assert (event["series"], event["message"]) == (
        {"count": 3, "lastObservedTime": "1970-01-01T00:00:02.000000Z"},
        warnings[0].message,
    )


def test_pending_events_are_about_the_object_each_decision_was_decided_on() -> None:
    """Kueue patches a workload's status before it records a pending Event whose message changed (scheduler.go
    requeueAndUpdate), so the next Event is about the object at a newer resourceVersion. The dispatcher writes
    the status of a batch's workload once, whatever number of its decisions the batch carries: the Events are
    keyed by the fold's count of the object's changes each decision was folded on (Recording.decided). Four
    pending decisions in one batch, with messages M0, M1, M1, M0: M0 is new, M1 (status changed by M0's write)
    is new, the second M1 is about the object M1's write left (new: the first M1 was about the one before),
    the last M0 about that same object (M1 again wrote nothing): it folds into the second M1's series."""
    log = run_scenario(load_scenario(SCENARIO)).log
    view = core.DispatchState()
    for seq, event in log:
        for one in types.unbatched(event):
            core.fold(view, one, seq=seq)
    api, stored = _Api(), _Stored()
    recording = Recording(api=api, limiter=UnlimitedWrites(), view=view, stored=stored)  # type: ignore[arg-type]
    ref = next(wl.ref for wl in view.cluster.workloads.values() if wl.reservation is None)
    m0 = "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed"
    m1 = "Workload no longer fits after processing another workload"
    start = log[-1][0] + 1
    decisions = [(start + n, _warning(ref, "WaitingForQuota", m, 10_000 + n)) for n, m in enumerate((m0, m1, m1, m0))]
    for seq, decision in decisions:  # the dispatcher's fold, ahead of its batch
        recording.decided(decision, seq)
        core.fold(view, decision, seq=seq)
    recording.before_writes([ref.key])
    stored.versions[ref.key] += 1  # the batch's one status write
    asyncio.run(recording.record(decisions))
    pendings = sorted(
        (e for e in api.events.values() if e["reason"] == "WaitingForQuota"), key=lambda e: e["eventTime"]
    )
    assert [(e["message"], e.get("series", {}).get("count", 1)) for e in pendings] == [(m0, 1), (m1, 1), (m1, 2)]
