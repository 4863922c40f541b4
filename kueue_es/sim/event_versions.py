"""The two API versions of an Event: core ``v1`` and ``events.k8s.io/v1``, views of the same stored object.

Why this module exists: kube-apiserver stores one Event and serves it through both groups (Kueue writes its
Events through ``events.k8s.io/v1``, controller-runtime's ``mgr.GetEventRecorder``; ``kubectl get events``,
``kubectl events`` and ``kubectl describe`` read core ``v1``), so the emulator stores the core one and converts
every object a client sends or reads through ``events.k8s.io/v1``. The mapping is Kubernetes'
(pkg/apis/events/v1/conversion.go ``Convert_v1_Event_To_core_Event`` / ``Convert_core_Event_To_v1_Event``,
with the generated field-by-field part): ``regarding`` is ``involvedObject``, ``note`` ``message``,
``deprecatedSource`` ``source``, ``deprecatedFirstTimestamp``/``deprecatedLastTimestamp``/``deprecatedCount``
``firstTimestamp``/``lastTimestamp``/``count``, ``reportingController`` core's ``reportingComponent`` (the
JSON name of core's ReportingController); ``metadata``, ``eventTime``, ``series``, ``related``, ``action``,
``reason``, ``type`` and ``reportingInstance`` are the same in both. A field absent on one side is absent on
the other (a real server writes ``null`` for some unset timestamps; clients read both alike).

Field selectors through ``events.k8s.io/v1`` name the events.k8s.io fields and select on the stored core
Event (:data:`FIELD_LABELS`, Kubernetes' pkg/apis/events/v1/conversion.go ``AddFieldLabelConversionsForEvent``).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GROUP = "events.k8s.io"
API_VERSION = f"{GROUP}/v1"
CORE_API_VERSION = "v1"
KIND = "Event"

#: events.k8s.io/v1 field -> core/v1 field, for the fields that are named apart (the rest have one name).
_RENAMED: dict[str, str] = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "reportingController": "reportingComponent",
}
#: The fields both versions name alike (besides ``apiVersion``, ``kind``).
_SHARED = ("metadata", "eventTime", "series", "related", "action", "reason", "type", "reportingInstance")

#: The fields an events.k8s.io/v1 field selector may name, as the core/v1 fields they select on (Kubernetes
#: pkg/apis/events/v1/conversion.go AddFieldLabelConversionsForEvent); any other is "field label not supported".
FIELD_LABELS: dict[str, str] = {
    "reason": "reason",
    "regarding.kind": "involvedObject.kind",
    "regarding.namespace": "involvedObject.namespace",
    "regarding.name": "involvedObject.name",
    "regarding.uid": "involvedObject.uid",
    "regarding.apiVersion": "involvedObject.apiVersion",
    "regarding.resourceVersion": "involvedObject.resourceVersion",
    "regarding.fieldPath": "involvedObject.fieldPath",
    "reportingController": "reportingComponent",
    "type": "type",
    "metadata.namespace": "metadata.namespace",
    "metadata.name": "metadata.name",
}


def to_events_v1(event: Mapping[str, Any]) -> dict[str, Any]:
    """A core/v1 Event as events.k8s.io/v1 shows it (Kubernetes' ``Convert_core_Event_To_v1_Event``)."""
    return _converted(event, API_VERSION, {core: served for served, core in _RENAMED.items()})


def to_core(event: Mapping[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event (or an apply configuration of one) as the core/v1 Event stored (Kubernetes'
    ``Convert_v1_Event_To_core_Event``); fields events.k8s.io/v1 does not have are dropped."""
    return _converted(event, CORE_API_VERSION, _RENAMED)


def _converted(event: Mapping[str, Any], api_version: str, renamed: Mapping[str, str]) -> dict[str, Any]:
    """``event`` as an Event of ``api_version``: the fields both versions share as they are, each field
    ``renamed`` maps from under its new name; any other field dropped."""
    out: dict[str, Any] = {"apiVersion": api_version, "kind": KIND}
    for name in _SHARED:
        if name in event:
            out[name] = event[name]
    for source, target in renamed.items():
        if source in event:
            out[target] = event[source]
    return out


def is_core_event(payload: Mapping[str, Any]) -> bool:
    """Whether ``payload`` is a stored (core/v1) Event, not a list, a Status or a Table."""
    return payload.get("kind") == KIND and payload.get("apiVersion") == CORE_API_VERSION


def is_events_v1(payload: Mapping[str, Any]) -> bool:
    """Whether ``payload`` is an Event as events.k8s.io/v1 shows it."""
    return payload.get("kind") == KIND and payload.get("apiVersion") == API_VERSION
