"""core/v1 and events.k8s.io/v1 Events: Kubernetes' field mapping (pkg/apis/events/v1/conversion.go)."""

from __future__ import annotations

from kueue_es.sim import event_versions

CORE = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "wl.1", "namespace": "team"},
    "involvedObject": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "wl", "namespace": "team"},
    "reason": "QuotaReserved",
    "message": "Quota reserved in ClusterQueue cq",
    "source": {"component": "kueue-admission"},
    "firstTimestamp": "2026-12-07T09:00:00Z",
    "lastTimestamp": "2026-12-07T09:01:00Z",
    "count": 2,
    "type": "Normal",
    "eventTime": "2026-12-07T09:00:00.000000Z",
    "series": {"count": 2, "lastObservedTime": "2026-12-07T09:01:00.000000Z"},
    "action": "Admitted",
    "related": {"kind": "ClusterQueue", "name": "cq"},
    "reportingComponent": "kueue-admission",
    "reportingInstance": "kueue-admission-0",
}


def test_every_field_maps_as_kubernetes_maps_it_and_back() -> None:
    served = event_versions.to_events_v1(CORE)
    assert served == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": CORE["metadata"],
        "eventTime": CORE["eventTime"],
        "series": CORE["series"],
        "related": CORE["related"],
        "action": "Admitted",
        "reason": "QuotaReserved",
        "type": "Normal",
        "reportingController": "kueue-admission",
        "reportingInstance": "kueue-admission-0",
        "regarding": CORE["involvedObject"],
        "note": "Quota reserved in ClusterQueue cq",
        "deprecatedSource": {"component": "kueue-admission"},
        "deprecatedFirstTimestamp": "2026-12-07T09:00:00Z",
        "deprecatedLastTimestamp": "2026-12-07T09:01:00Z",
        "deprecatedCount": 2,
    }
    assert event_versions.to_core(served) == CORE
    assert event_versions.is_events_v1(served) and event_versions.is_core_event(CORE)
    assert not event_versions.is_core_event(served)


def test_absent_fields_stay_absent_and_unknown_ones_are_dropped() -> None:
    written = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}, "note": "n", "bogus": 1}
    assert event_versions.to_core(written) == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e"},
        "message": "n",
    }


def test_field_selectors_name_the_core_fields_kube_apiserver_selects_on() -> None:
    labels = event_versions.FIELD_LABELS
    assert labels["regarding.name"] == "involvedObject.name"
    assert labels["reportingController"] == "reportingComponent"
    assert "note" not in labels and "involvedObject.name" not in labels
