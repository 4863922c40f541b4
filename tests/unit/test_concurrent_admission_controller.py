"""The concurrent-admission controller's pure rules (kueue_es.scheduling.concurrent_admission.reconcile), against
Kueue's pkg/controller/concurrentadmission/controller.go Reconcile."""

from __future__ import annotations

from typing import Any

from kueue_es.scheduling import concurrent_admission as ca

NOW, NOW_MS = "2026-01-01T00:10:00Z", 1767226200000


def _cq(*flavors: str, mode: str = ca.TRY_PREFERRED, last: str | None = None) -> dict[str, Any]:
    migration: dict[str, Any] = {"mode": mode}
    if last is not None:
        migration["constraints"] = {"lastAcceptableFlavorName": last}
    return {
        "metadata": {"name": "cq"},
        "spec": {
            "concurrentAdmissionPolicy": {"migration": migration},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": f} for f in flavors]}],
        },
    }


def _parent(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {ca.PARENT_LABEL: "true", "a": "b"}},
        "spec": {"queueName": "lq", "podSets": []},
        "status": status,
    }


def _cond(kind: str, value: bool = True, reason: str = "R") -> dict[str, Any]:
    return {"type": kind, "status": "True" if value else "False", "reason": reason, "message": ""}


def _variants(parent: dict[str, Any], *flavors: str) -> list[dict[str, Any]]:
    return [ca.make_variant(parent, f) for f in flavors]


def _admit(variant: dict[str, Any], flavor: str) -> dict[str, Any]:
    variant["status"] = {
        "conditions": [_cond("QuotaReserved"), _cond("Admitted")],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {"cpu": flavor}}]},
    }
    return variant


def test_variants_are_made_for_each_flavor_restricted_gated_and_owned() -> None:
    parent = _parent()
    actions = ca.reconcile(parent, [], _cq("reservation", "spot"), now=NOW, now_ms=NOW_MS)
    made = [a.body for a in actions if a.kind == "create" and a.body is not None]
    assert {(a.event_on, a.event[0]) for a in actions if a.event is not None} == {("p", "CreatedVariant")}
    assert [v["metadata"]["annotations"][ca.ALLOWED_FLAVORS_ANNOTATION] for v in made] == ["reservation", "spot"]
    for variant in made:
        assert variant["metadata"]["labels"] == {"a": "b"}  # the parent label is not copied
        assert variant["metadata"]["ownerReferences"][0]["uid"] == "u1"
        assert variant["spec"]["preemptionGates"] == [{"name": ca.PREEMPTION_GATE}]
        assert ca.is_variant(variant) and ca.is_variant_of(variant, parent)


def test_a_variant_whose_flavor_left_the_cluster_queue_is_deleted() -> None:
    parent = _parent()
    actions = ca.reconcile(parent, _variants(parent, "reservation", "spot"), _cq("spot"), now=NOW, now_ms=NOW_MS)
    assert [(a.kind, a.name) for a in actions if a.kind in ("create", "delete")] == [
        ("delete", ca.variant_name(parent, "reservation"))
    ]


def test_the_admitted_variant_admits_the_parent_and_the_less_preferred_are_deactivated() -> None:
    parent = _parent()
    variants = _variants(parent, "reservation", "on-demand", "spot")
    _admit(variants[1], "on-demand")
    actions = ca.reconcile(parent, variants, _cq("reservation", "on-demand", "spot"), now=NOW, now_ms=NOW_MS)
    assert [(a.kind, a.name, a.active) for a in actions if a.kind == "set-active"] == [
        ("set-active", ca.variant_name(parent, "spot"), False)
    ]
    (status,) = [a.status for a in actions if a.kind == "status" and a.name == "p"]
    assert status is not None and status["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "on-demand"}
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"QuotaReserved": "True", "Admitted": "True"}


def test_last_acceptable_flavor_deactivates_the_flavors_below_it() -> None:
    parent = _parent()
    variants = _variants(parent, "reservation", "on-demand", "spot")
    _admit(variants[2], "spot")
    cq = _cq("reservation", "on-demand", "spot", last="reservation")
    actions = ca.reconcile(parent, variants, cq, now=NOW, now_ms=NOW_MS)
    assert [(a.name, a.active) for a in actions if a.kind == "set-active"] == [
        (ca.variant_name(parent, "on-demand"), False)
    ]


def test_retain_first_admission_deactivates_every_other_variant() -> None:
    parent = _parent()
    variants = _variants(parent, "reservation", "spot")
    _admit(variants[1], "spot")
    actions = ca.reconcile(parent, variants, _cq("reservation", "spot", mode=ca.RETAIN_FIRST), now=NOW, now_ms=NOW_MS)
    assert [(a.name, a.active) for a in actions if a.kind == "set-active"] == [
        (ca.variant_name(parent, "reservation"), False)
    ]


def test_an_evicted_admitted_variant_evicts_the_parent_first_then_gives_its_quota_back() -> None:
    parent = _parent(conditions=[_cond("QuotaReserved"), _cond("Admitted")])
    variants = _variants(parent, "reservation", "spot")
    _admit(variants[1], "spot")["status"]["conditions"].append(_cond("Evicted", reason=ca.FLAVOR_MIGRATION))
    (evict,) = ca.reconcile(parent, variants, _cq("reservation", "spot"), now=NOW, now_ms=NOW_MS)
    assert evict.name == "p" and evict.status is not None
    assert {c["type"]: c["reason"] for c in evict.status["conditions"]}["Evicted"] == "VariantEvicted"
    # the parent's job stopped (its quota reservation unset): the variant's reservation is cleared
    stopped = _parent(conditions=[_cond("QuotaReserved", False), _cond("Evicted", reason="VariantEvicted")])
    actions = ca.reconcile(stopped, variants, _cq("reservation", "spot"), now=NOW, now_ms=NOW_MS)
    cleared = next(a.status for a in actions if a.kind == "status" and a.name == ca.variant_name(parent, "spot"))
    assert cleared is not None and cleared["admission"] is None
    assert {c["type"]: c["status"] for c in cleared["conditions"]}["QuotaReserved"] == "False"


def test_one_preemption_gate_is_opened_at_a_time_most_preferred_first() -> None:
    parent = _parent()
    variants = _variants(parent, "reservation", "spot")
    for v in variants:
        v["status"] = {"conditions": [_cond("QuotaReserved", False), _cond("BlockedOnPreemptionGates")]}
    (opened,) = [a for a in ca.reconcile(parent, variants, _cq("reservation", "spot"), now=NOW, now_ms=NOW_MS)]
    assert opened.name == ca.variant_name(parent, "reservation") and opened.status is not None
    variants[0]["status"]["preemptionGates"] = opened.status["preemptionGates"]
    later = ca.reconcile(parent, variants, _cq("reservation", "spot"), now=NOW, now_ms=NOW_MS + 60_000)
    assert later == []  # the spot variant's gate stays closed until the timeout
    after = ca.reconcile(
        parent, variants, _cq("reservation", "spot"), now=NOW, now_ms=NOW_MS + ca.PREEMPTION_TIMEOUT_MS
    )
    assert [a.name for a in after] == [ca.variant_name(parent, "spot")]
