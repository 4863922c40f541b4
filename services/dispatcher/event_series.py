"""Which Kubernetes Event writes Kueue's event recorder makes: isomorphic Events fold into one series.

Kueue records its Events through controller-runtime's ``mgr.GetEventRecorder`` (cmd/kueue/main.go), which is
client-go's events.k8s.io/v1 recorder (k8s.io/client-go/tools/events, event_broadcaster.go). Its broadcaster
keeps a cache of the Events it wrote, keyed by the *isomorphic key* (``getKey``): type, action, reason,
reportingController, reportingInstance, the ``regarding`` object reference (apiVersion, kind, namespace,
name, uid **and resourceVersion**: ``reference.GetReference`` copies it) and the ``related`` one. The note
(the message) is not part of it. For an Event whose key is cached (``recordToSink``):

- the first one is created as it is (no series);
- the second turns the cached Event into a series of count 2 (its note, name and eventTime the first
  one's, ``lastObservedTime`` now) and patches it onto the stored Event (created again if it is gone);
- later ones only count in the cache (``count``, ``lastObservedTime``): nothing is written, until
- ``finishSeries`` (every :data:`FINISH_MS`) writes the final count of each series not observed for
  :data:`FINISH_MS` and drops it from the cache, and drops singletons older than that; and
- ``refreshExistingEventSeries`` (every :data:`REFRESH_MS`) writes the current count of every series.

Since the regarding reference carries the object's resourceVersion, two Events about an object Kueue wrote
in between (a Workload whose pending message changed: its status was patched) are not isomorphic: only
repeats about an unchanged object fold. The cache lives in the recorder's memory: a restarted recorder
starts with none, and its next Event is created anew.

Pure: times are passed in (ms since the epoch); :mod:`~kueue_es.services.dispatcher.recording` writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FINISH_MS = 6 * 60 * 1000
"""client-go tools/events finishTime: a series not observed for this long is finished."""
REFRESH_MS = 30 * 60 * 1000
"""client-go tools/events refreshTime: how often every running series' count is written."""


@dataclass(frozen=True, slots=True)
class Reference:
    """An ``ObjectReference`` as the isomorphic key compares it (``corev1.ObjectReference``, every field)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""
    field_path: str = ""


@dataclass(frozen=True, slots=True)
class IsomorphicKey:
    """client-go tools/events ``eventKey``: Events with equal keys fold into one series; the note is no part of it."""

    type: str
    action: str
    reason: str
    reporting_controller: str
    reporting_instance: str
    regarding: Reference
    related: Reference | None = None


@dataclass(slots=True)
class Entry:
    """A cached Event: the object ``body`` first written as Event ``namespace/name`` at ``event_time_ms``;
    ``count`` the Events it stands for (1: a singleton), ``last_observed_ms`` the latest one's time,
    ``written`` the count last written (a series' patch), ``last_seq`` and ``last_place`` the latest decision
    observed (its log sequence and its place among the decisions its record carries, 0 for one of its own)."""

    namespace: str
    name: str
    body: dict[str, Any]
    event_time_ms: int
    last_seq: int
    last_place: int = 0
    count: int = 1
    last_observed_ms: int = 0
    written: int = 1


@dataclass(frozen=True, slots=True)
class Create:
    """Create the Event (the first of its key, or one whose cache entry was finished)."""


@dataclass(frozen=True, slots=True)
class WriteSeries:
    """Patch ``series`` (``count``, ``lastObservedTime`` at ``last_observed_ms``) onto Event ``namespace/name``;
    create ``body`` with that series if the Event is gone (client-go: a NotFound patch falls back to create)."""

    namespace: str
    name: str
    body: dict[str, Any]
    count: int
    last_observed_ms: int


@dataclass(slots=True)
class SeriesCache:
    """The recorder's cache (``eventBroadcasterImpl.eventCache``) with its two timers, driven by the times
    passed in. ``refreshed_ms``: when the series were last refreshed (None: not yet; the first
    :meth:`expire` starts the period, as ``wait.Until`` runs at start)."""

    entries: dict[IsomorphicKey, Entry] = field(default_factory=dict)
    refreshed_ms: int | None = None

    def observe(
        self,
        key: IsomorphicKey,
        *,
        namespace: str,
        name: str,
        body: dict[str, Any],
        at_ms: int,
        seq: int,
        place: int = 0,
    ) -> Create | WriteSeries | None:
        """An Event of ``key`` recorded at ``at_ms`` for the decision at log sequence ``seq``, ``place`` its
        1-based place among the decisions its DecisionRecord carries (event schema 17: several at one
        sequence; 0 for a decision of its own message), ``body`` to be written as ``namespace/name`` if it
        is the first: what to write (client-go ``recordToSink``). A decision seen before (``(seq, place)``
        not after the entry's latest: a redelivery) counts nothing."""
        entry = self.entries.get(key)
        if entry is None:
            self.entries[key] = Entry(
                namespace=namespace, name=name, body=body, event_time_ms=at_ms, last_seq=seq, last_place=place
            )
            return Create()
        if seq and (seq, place) <= (entry.last_seq, entry.last_place):
            return None
        entry.last_seq, entry.last_place = max((entry.last_seq, entry.last_place), (seq, place))
        entry.count += 1
        entry.last_observed_ms = max(entry.last_observed_ms, at_ms)
        if entry.count > 2:
            return None  # counted in memory; written by the next refresh or finish
        entry.written = entry.count
        return self._series(entry)

    def expire(self, now_ms: int) -> list[WriteSeries]:
        """The writes the recorder's timers make by ``now_ms``: every :data:`REFRESH_MS` the current count of
        each series (``refreshExistingEventSeries``), then the final count of each series not observed for
        :data:`FINISH_MS` (``finishSeries``), which leaves the cache with the singletons as old. A count
        already written is not written again (the stored Event would not change)."""
        writes: list[WriteSeries] = []
        if self.refreshed_ms is None:
            self.refreshed_ms = now_ms
        elif now_ms - self.refreshed_ms >= REFRESH_MS:
            self.refreshed_ms = now_ms
            writes += [self._written(entry) for entry in self.entries.values() if entry.count > entry.written]
        for key, entry in list(self.entries.items()):
            seen = entry.last_observed_ms if entry.count > 1 else entry.event_time_ms
            if now_ms - seen <= FINISH_MS:
                continue
            if entry.count > entry.written:
                writes.append(self._written(entry))
            del self.entries[key]
        return writes

    def _written(self, entry: Entry) -> WriteSeries:
        entry.written = entry.count
        return self._series(entry)

    @staticmethod
    def _series(entry: Entry) -> WriteSeries:
        return WriteSeries(
            namespace=entry.namespace,
            name=entry.name,
            body=entry.body,
            count=entry.count,
            last_observed_ms=entry.last_observed_ms,
        )
