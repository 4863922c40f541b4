"""The flavor-scan bookmark (SEMANTICS §5.3): what the scan records, when it expires, how the
fold keeps it, and that a StrictFIFO head does not alternate between two scans forever."""

from typing import Any

from kueue_es.events import codec, types
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState, WorkloadState, apply
from kueue_es.scheduling import cycle, flavors
from kueue_es.services.admitter import core
from tests.builders import Log, cluster_queue, flavor, local_queue, parse, workload


def _picker(nominal: dict[str, int], *, fungibility: dict[str, str] | None = None) -> flavors.Picker:
    """A Picker over one ClusterQueue whose cpu group lists ``nominal``'s flavors in order."""
    doc = cluster_queue("cq", flavors={f: {"cpu": n} for f, n in nominal.items()})
    if fungibility:
        doc["spec"]["flavorFungibility"] = fungibility
    cq = parse(doc)
    objects = {name: parse(flavor(name)) for name in nominal}
    state = ClusterState(cluster_queues={"cq": cq}, flavors=objects)
    return flavors.Picker(cq, quota.build(state), objects, fair_sharing=False)


def _request(cpu: int) -> list[flavors.PodSetRequest]:
    return [flavors.PodSetRequest(name="main", count=1, requests={"cpu": cpu})]


def test_scan_records_the_flavor_it_stopped_on_and_resumes_after_it() -> None:
    """flavorassigner.go findFlavorForPodSets: a non-borrowing Fit on the first of three flavors
    records index 0; resuming from it starts at the second; a scan that reaches the last
    flavor records -1 ("start over"); a pod set with no flavor records nothing."""
    picker = _picker({"a": 1000, "b": 1000, "c": 1000})
    first = picker.assign(_request(500), oracle=None)
    assert first.tried == ({"cpu": 0},) and first.pending_flavors
    resumed = picker.assign(_request(500), oracle=None, start=first.tried)
    assert [ps.flavors for ps in resumed.pod_sets] == [{"cpu": "b"}]
    assert resumed.tried == ({"cpu": 1},)
    last = picker.assign(_request(500), oracle=None, start=resumed.tried)
    assert [ps.flavors for ps in last.pod_sets] == [{"cpu": "c"}]
    assert last.tried == ({"cpu": -1},) and not last.pending_flavors
    too_big = picker.assign(_request(5_000_000), oracle=None)  # 5000 CPU, more than any flavor has
    assert too_big.mode == "NoFit" and too_big.tried == ({},) and not too_big.pending_flavors


def _with_bookmark(cycle: int, generation: int) -> WorkloadState:
    wl = WorkloadState(workload=parse(workload("w", cpu="1")), observed_seq=1)
    wl.bookmark = types.FlavorBookmark(tried=({"cpu": 0},), cycle=cycle, generation=generation)
    return wl


def test_bookmark_expiry() -> None:
    """scheduler.go lastAssignmentOutdated with PreserveScanProgress: this or the previous
    cycle's bookmark stands whatever the generation; an older one only while it has not moved."""
    state = ClusterState(cq_generations={"cq": 5})
    assert cycle.bookmark_in_force(_with_bookmark(9, 3), "cq", state=state, cycle=10) is not None
    assert cycle.bookmark_in_force(_with_bookmark(8, 3), "cq", state=state, cycle=10) is None
    assert cycle.bookmark_in_force(_with_bookmark(8, 5), "cq", state=state, cycle=10) is not None
    state.structure_generation = 6  # a quota change anywhere, at log sequence 6
    assert cycle.bookmark_in_force(_with_bookmark(8, 5), "cq", state=state, cycle=10) is None


def _record(role: str, outputs: int) -> types.DecisionRecord:
    return types.DecisionRecord(
        decision_id="d",
        partition="p0",
        role=role,
        basis_seq=0,
        expected_head_seq=0,
        now_ms=0,
        logic_version=1,
        output_count=outputs,
        outputs_sha256="",
    )


def test_fold_keeps_the_bookmark_and_its_clocks() -> None:
    """The fold counts admitter cycles that decided something, takes each WorkloadInadmissible's
    bookmark, drops it on QuotaReserved, and bumps the generation when quota is released."""
    log = Log()
    log.apply_manifests(
        flavor("a"), cluster_queue("cq", flavors={"a": {"cpu": 2}}), local_queue("lq", "cq"), workload("w", cpu="1")
    )
    log.add(_record("admit", 1), _record("admit", 0), _record("preempt", 2))
    assert log.state.admit_cycles == 1
    ref = log.state.workloads["default/w"].ref
    mark = types.FlavorBookmark(tried=({"cpu": 0},), cycle=1, generation=0)
    log.add(types.WorkloadInadmissible(workload=ref, reason="Pending", message="m", at_ms=0, bookmark=mark))
    assert log.state.workloads["default/w"].bookmark == mark
    before = log.state.generation("cq")
    assignment = types.PodSetAssignment(name="main", flavors={"cpu": "a"}, resource_usage={"cpu": 1000}, count=1)
    log.add(types.QuotaReserved(workload=ref, cluster_queue="cq", pod_set_assignments=[assignment], at_ms=0))
    assert log.state.workloads["default/w"].bookmark is None
    assert log.state.generation("cq") > before
    before = log.state.generation("cq")
    log.finish("default/w")
    assert log.state.generation("cq") > before


def _two_pod_sets(name: str) -> dict[str, Any]:
    doc = workload(name, cpu="1")
    second = {**doc["spec"]["podSets"][0], "name": "big"}
    second["template"] = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "9"}}}]}}
    doc["spec"]["podSets"].append(second)
    return doc


def test_strict_fifo_head_stops_alternating_scans() -> None:
    """A StrictFIFO head whose first pod set fits on a (index 0) but whose second never fits:
    Kueue would scan from b, wrap, scan from a, ... every cycle. Ours settles: after the wrap
    the head keeps an exhausted bookmark and its decisions stop changing."""
    for strategy in ("StrictFIFO", "BestEffortFIFO"):
        log = Log()
        log.apply_manifests(
            flavor("a"),
            flavor("b"),
            cluster_queue("cq", flavors={"a": {"cpu": 4}, "b": {"cpu": 0}}, strategy=strategy),
            local_queue("lq", "cq"),
            _two_pod_sets("w"),
        )
        decided = log.settle(1000, limit=10)
        marks = [d.bookmark for d in decided if isinstance(d, types.WorkloadInadmissible)]
        assert marks[0] is not None and marks[0].tried == ({"cpu": 0}, {}), strategy
        left = log.state.workloads["default/w"].bookmark
        assert left is None or not left.pending, strategy
        assert core.decide(log.state, now_ms=5000) == [], strategy


def test_outdated_state_for_fresh_fold() -> None:
    """A fresh fold has no bookmark clocks: cycle 0, generation 0."""
    state = ClusterState()
    apply(state, _record("admit", 3), seq=1)
    assert (state.admit_cycles, state.generation("cq")) == (1, 0)


def test_bookmark_round_trips_and_old_events_decode() -> None:
    """The bookmark is encoded on WorkloadInadmissible and decodes back equal; an event
    written before the field existed decodes with no bookmark (events evolution policy)."""
    ref = types.WorkloadRef(namespace="default", name="w", uid="u")
    mark = types.FlavorBookmark(tried=({"cpu": 1, "memory": -1}, {}), cycle=4, generation=2)
    event = types.WorkloadInadmissible(workload=ref, reason="Pending", message="m", at_ms=1, bookmark=mark)
    assert codec.decode(codec.encode(event)) == event
    old = b'{"atMs":1,"message":"m","parked":false,"reason":"Pending","type":"WorkloadInadmissible",'
    old += b'"workload":{"name":"w","namespace":"default","uid":"u"}}'
    decoded = codec.decode(old)
    assert isinstance(decoded, types.WorkloadInadmissible) and decoded.bookmark is None
