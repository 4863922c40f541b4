"""The cluster fold classifies every event type, and a service skips an event it cannot fold.

``cluster.apply`` either folds an event type or names it in ``cluster.IGNORED``; any other
type raises ``UnknownEventError``. A new event type added to ``kueue_es.events.types`` fails
here until it has a sample (tests/unit/test_events.py) and a place in the fold.
"""

from __future__ import annotations

import json
import typing

import msgspec
import pytest
from structlog.testing import capture_logs

from kueue_es.events import codec, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.projections import cluster
from kueue_es.projections.cluster import ClusterState
from kueue_es.services import runtime
from tests.unit.test_events import SAMPLES


def _event_types(union: object) -> list[type]:
    """Every class of an event union, nested unions flattened, in declaration order."""
    args = typing.get_args(union)
    if not args:
        return [typing.cast(type, union)]
    return [cls for arg in args for cls in _event_types(arg)]


EVENT_TYPES = _event_types(types.Event)
SAMPLE_OF = {type(event): event for event in SAMPLES}


def test_the_unions_hold_tagged_structs_only() -> None:
    """What the walk finds is what the codec decodes: tagged msgspec Structs, each once."""
    assert len(EVENT_TYPES) == len(set(EVENT_TYPES)) > 30
    for cls in EVENT_TYPES:
        assert issubclass(cls, msgspec.Struct), cls
        assert cls.__struct_config__.tag == cls.__name__, cls
    assert set(EVENT_TYPES) == set(types.ALL_TYPES)


@pytest.mark.parametrize("cls", EVENT_TYPES, ids=lambda cls: cls.__name__)
def test_every_event_type_is_folded_or_named_as_ignored(cls: type) -> None:
    """Folding a sample of each type never reaches the fold's unknown-type error."""
    assert cls in SAMPLE_OF, f"{cls.__name__} has no sample in tests/unit/test_events.py SAMPLES"
    state = ClusterState()
    try:
        cluster.apply(state, SAMPLE_OF[cls], seq=1)
    except cluster.UnknownEventError:
        pytest.fail(f"{cls.__name__} is neither folded by cluster.apply nor named in cluster.IGNORED")
    assert state.last_seq == 1


@pytest.mark.parametrize("cls", cluster.IGNORED, ids=lambda cls: cls.__name__)
def test_an_ignored_event_changes_nothing_but_the_sequence(cls: type) -> None:
    """An event type named in IGNORED leaves the state as it was, except the last sequence."""
    state = ClusterState()
    before = repr(state)
    cluster.apply(state, SAMPLE_OF[cls], seq=4)
    assert state.last_seq == 4
    state.last_seq = 0
    assert repr(state) == before


class Unheard(msgspec.Struct, frozen=True, kw_only=True):
    """Stands for an event type a newer build decodes and this fold does not know."""

    note: str = ""


def test_apply_names_an_unknown_event_type_and_leaves_the_state_alone() -> None:
    """An unclassified type is an explicit error, raised before the fold changes anything."""
    state = ClusterState()
    with pytest.raises(cluster.UnknownEventError, match="no case for event type Unheard"):
        cluster.apply(state, typing.cast(types.Event, Unheard()), seq=3)
    assert state.last_seq == 0


def _message(seq: int, data: bytes) -> LogMessage:
    return LogMessage(seq=seq, subject="kq.facts.test", data=data)


def test_a_service_skips_an_undecodable_message_and_counts_it_folded() -> None:
    """Bytes that are not an event are logged as undecodable; the fold goes on past them."""
    state = ClusterState()
    with capture_logs() as logs:
        runtime.fold_message(state, _message(5, b'{"type":"Nope"}'))
    assert state.last_seq == 5
    assert [entry["event"] for entry in logs] == ["event_undecodable"]
    runtime.fold_message(state, _message(6, codec.encode(types.SchedulingRequested(request_id="r1", mode="settle"))))
    assert state.last_seq == 6 and "r1" in state.requests


def test_a_fact_with_an_integer_beyond_64_bits_is_undecodable_and_checkpoints_still_write() -> None:
    """A ClusterQueue fact whose nominalQuota is 10**30 (Kubernetes' quantities are int64; only a publisher on the
    bus can write it) decoded, was folded, and then every checkpoint of the state failed (msgpack), so the
    compactor crash-looped: it is now refused at decoding, naming the field, and the state stays writable."""
    from kueue_es import checkpoints

    cq = {
        "type": "ClusterQueueObserved",
        "clusterQueue": {
            "metadata": {"name": "cq"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 10**30}]}],
                    }
                ]
            },
        },
    }
    data = json.dumps(cq).encode()
    with pytest.raises(codec.DecodeError, match=r"64-bit range - at `\$.clusterQueue.spec.resourceGroups\[0\]"):
        codec.decode(data)
    state = ClusterState()
    with capture_logs() as logs:
        runtime.fold_message(state, _message(7, data))
    assert [entry["event"] for entry in logs] == ["event_undecodable"]
    assert "cq" not in state.cluster_queues
    assert checkpoints.dumps(state)
    long_name = codec.encode(types.ObjectDeleted(kind="Node", namespace="", name="n" + "9" * 40))
    assert codec.decode(long_name).name == "n" + "9" * 40  # a long run of digits in a string is no integer


def test_a_service_skips_an_unclassified_event_and_counts_it_folded(monkeypatch: pytest.MonkeyPatch) -> None:
    """An event the fold cannot classify is logged with its sequence and skipped, never fatal."""
    monkeypatch.setattr(runtime.codec, "decode", lambda data: Unheard())
    state = ClusterState()
    with capture_logs() as logs:
        runtime.fold_message(state, _message(7, b"{}"))
    assert state.last_seq == 7
    assert [(entry["event"], entry["log_level"], entry["seq"]) for entry in logs] == [
        ("event_unclassified", "warning", 7)
    ]
    assert "Unheard" in logs[0]["error"]


def test_the_by_type_shortcut_folds_as_the_match_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """``apply`` hands its most frequent types to their function by exact type (issue 18: a class
    pattern costs a metaclass call per case): folding a log of every kind of workload decision, fact
    and preemption with the shortcut or through the ``match`` alone gives the same bytes."""
    from kueue_es import checkpoints
    from kueue_es.bench import core_log
    from tests.unit.test_golden_log import _load

    logs = [_load("demo-preempt.jsonl"), list(core_log(events=2_000, cohorts=2, queues_per_cohort=3, scale=0.4))]
    folded_types = {type(SAMPLE_OF[cls]) for cls in cluster._FOLD_BY_TYPE}
    assert folded_types == set(cluster._FOLD_BY_TYPE) and set(cluster._FOLD_BY_TYPE) <= set(EVENT_TYPES)
    for messages in logs:
        bodies = []
        for table in (cluster._FOLD_BY_TYPE, {}):
            monkeypatch.setattr(cluster, "_FOLD_BY_TYPE", table)
            state = ClusterState()
            for message in messages:
                runtime.fold_message(state, message)
            bodies.append(checkpoints.dumps(state))
        assert bodies[0] == bodies[1]
    seen = {codec.decode(m.data).__class__ for messages in logs for m in messages}
    assert {types.QuotaReserved, types.WorkloadObserved, types.PreemptionIssued, types.EvictionRequested} <= seen
