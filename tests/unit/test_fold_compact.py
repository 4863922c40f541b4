"""The fold keeps one copy of a workload's repeated strings (cluster.compact_workload).

Every event decoded from the log holds its own copy of every string; the state shares them,
so 50,000 workloads do not keep 50,000 copies of the same label, namespace and owner kind.
The values, their encoding and the state digest must stay exactly what they were."""

from __future__ import annotations

from typing import Any

import msgspec

from kueue_es import checkpoints
from kueue_es.events import codec, models, types
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import workload


def _decoded(manifest: dict[str, Any]) -> types.WorkloadObserved:
    """The fact as a service reads it, owned by a Job: decoded from its own bytes (its own string objects)."""
    fact = kueue_fact(manifest)
    assert isinstance(fact, types.WorkloadObserved)
    name = fact.workload.metadata.name
    owner = models.OwnerReference(api_version="batch/v1", kind="Job", name=f"job-{name}", uid=f"job-uid-{name}")
    fact = types.WorkloadObserved(workload=msgspec.structs.replace(fact.workload, owner=owner))
    event = codec.decode(codec.encode(fact))
    assert isinstance(event, types.WorkloadObserved)
    return event


def _labelled(name: str) -> dict[str, Any]:
    manifest = workload(name, namespace="team-a", cpu="1")
    manifest["metadata"]["labels"] = {"kueue.x-k8s.io/performance-scheduler-class": "small"}
    return manifest


def test_workloads_share_their_repeated_strings() -> None:
    state = ClusterState()
    first, second = _decoded(_labelled("a")), _decoded(_labelled("b"))
    assert first.workload.metadata.namespace is not second.workload.metadata.namespace  # decoded apart
    apply(state, first, seq=1)
    apply(state, second, seq=2)
    a, b = state.workloads["team-a/a"].workload, state.workloads["team-a/b"].workload
    assert a.metadata.namespace is b.metadata.namespace
    assert a.spec.queue_name is b.spec.queue_name
    assert a.spec.pod_sets[0].name is b.spec.pod_sets[0].name
    (key_a, value_a), (key_b, value_b) = next(iter(a.metadata.labels.items())), next(iter(b.metadata.labels.items()))
    assert key_a is key_b and value_a is value_b
    assert a.metadata.labels is b.metadata.labels  # one dict for one label set
    assert a.metadata.annotations is b.metadata.annotations  # the one empty container
    assert a.spec.pod_sets[0].tolerations is b.spec.pod_sets[0].tolerations
    assert a.owner is not None and b.owner is not None
    assert a.owner.kind is b.owner.kind and a.owner.api_version is b.owner.api_version
    for name in ("a", "b"):  # the same values, the same bytes
        assert codec.encode(state.workloads[f"team-a/{name}"].workload) == codec.encode(
            _decoded(_labelled(name)).workload
        )
    # the map's key and the state's key are one string
    (map_key,) = [k for k in state.workloads if k == "team-a/a"]
    assert map_key is state.workloads["team-a/a"].key


def test_finished_shares_the_workloads_strings_and_keeps_its_value() -> None:
    state = ClusterState()
    apply(state, _decoded(_labelled("a")), seq=1)
    ref = types.WorkloadRef(namespace="team-a", name="a", uid="uid-a")
    finished = codec.decode(codec.encode(types.WorkloadFinished(workload=ref, at_ms=5)))
    assert isinstance(finished, types.WorkloadFinished)
    apply(state, finished, seq=2)
    wl = state.workloads["team-a/a"]
    assert wl.finished is not None
    meta = wl.workload.metadata
    assert wl.finished.workload.name is meta.name and wl.finished.workload.uid is meta.uid
    assert wl.finished == types.WorkloadFinished(workload=ref, at_ms=5)


def test_the_state_digest_is_unchanged() -> None:
    """Two states folded from the same facts, one from shared objects and one from separate
    decodes, have one digest and one checkpoint."""
    events = [_decoded(_labelled(n)) for n in ("a", "b", "c")]
    again = [_decoded(_labelled(n)) for n in ("a", "b", "c")]
    one, two = ClusterState(), ClusterState()
    for seq, (x, y) in enumerate(zip(events, again, strict=True), start=1):
        apply(one, x, seq=seq)
        apply(two, y, seq=seq)
    assert checkpoints.state_digest(one) == checkpoints.state_digest(two)
    assert checkpoints.dumps(one) == checkpoints.dumps(two)
