"""The events, models and metric histograms the fold keeps are never tracked by Python's cyclic
garbage collector (msgspec ``gc=False``), and that is safe: none of them can be in a reference
cycle, the fold makes no cyclic garbage, and folding a log again and again leaves nothing behind
(issue 18, point 2; services/collector.py).

msgspec's rule for ``gc=False`` (its docs, "Disabling Garbage Collection"): an instance is never
tracked, even when it holds containers, so a cycle through it would never be collected. A Struct
can only be in a cycle if some object it reaches can reach it again; the field types below say
what each one can hold, so an acyclic type graph of such Structs, whose every leaf is a scalar,
rules that out for every instance decoded or built with those types.
"""

from __future__ import annotations

import gc
import sys
import types as pytypes
from collections.abc import Iterator
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest

from kueue_es import bench, logsource
from kueue_es.events import codec, models, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.projections import kueue_metrics

# Types whose values hold no references to other Python objects a cycle could run through.
_SCALARS = (
    mi.StrType,
    mi.IntType,
    mi.BoolType,
    mi.NoneType,
    mi.LiteralType,
    mi.FloatType,
    mi.BytesType,
)


def _struct_classes(module: pytypes.ModuleType) -> list[type[msgspec.Struct]]:
    return sorted(
        (
            value
            for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, msgspec.Struct) and value.__module__ == module.__name__
        ),
        key=lambda cls: cls.__name__,
    )


UNTRACKED: list[type[msgspec.Struct]] = [
    *_struct_classes(types),
    *_struct_classes(models),
    kueue_metrics.Histogram,
    LogMessage,
    OutgoingMessage,
]


def _reachable(info: mi.Type, path: str) -> Iterator[tuple[mi.StructType, str]]:
    """The Struct types ``info`` can hold (directly or in containers), each with a path for messages;
    fails on any type that is not a scalar, a container or a Struct."""
    if isinstance(info, _SCALARS):
        return
    if isinstance(info, mi.StructType):
        yield info, path
    elif isinstance(info, mi.UnionType):
        for i, member in enumerate(info.types):
            yield from _reachable(member, f"{path}|{i}")
    elif isinstance(info, (mi.ListType, mi.VarTupleType, mi.FrozenSetType, mi.SetType)):
        yield from _reachable(info.item_type, f"{path}[]")
    elif isinstance(info, mi.TupleType):
        for i, item in enumerate(info.item_types):
            yield from _reachable(item, f"{path}[{i}]")
    elif isinstance(info, mi.DictType):
        yield from _reachable(info.key_type, f"{path}{{key}}")
        yield from _reachable(info.value_type, f"{path}{{value}}")
    else:
        raise AssertionError(f"{path}: a {type(info).__name__} could hold anything (not a scalar, container or Struct)")


class _Node(msgspec.Struct, gc=False):
    children: list[_Node] = []


class _Bag(msgspec.Struct, gc=False):
    anything: object = None


def test_the_types_are_untracked_and_reach_no_cycle_and_no_tracked_struct() -> None:
    """Each type has ``gc=False``; every Struct type its fields can hold has ``gc=False`` too, and none
    of them can hold itself again: no instance can be part of a reference cycle."""
    problems: list[str] = []

    def walk(struct: mi.StructType, path: str, stack: tuple[type, ...]) -> None:
        if struct.cls in stack:
            problems.append(f"{path}: {struct.cls.__name__} can hold itself (a possible cycle)")
            return
        if struct.cls.__struct_config__.gc is not False:
            problems.append(f"{path}: {struct.cls.__name__} is tracked (gc=True)")
        for field in struct.fields:
            for inner, where in _reachable(field.type, f"{path}.{field.name}"):
                walk(inner, where, (*stack, struct.cls))

    for cls in UNTRACKED:
        info = mi.type_info(cls)
        assert isinstance(info, mi.StructType)
        walk(info, cls.__name__, ())
    assert problems == []
    assert len(UNTRACKED) > 90  # every event and model type was found


def test_a_type_that_can_hold_itself_or_anything_is_refused_by_the_walk() -> None:
    """The walk above catches what would make ``gc=False`` unsafe."""

    bag = mi.type_info(_Bag)
    assert isinstance(bag, mi.StructType)
    with pytest.raises(AssertionError, match="could hold anything"):
        list(_reachable(bag.fields[0].type, "_Bag.anything"))
    node = mi.type_info(_Node)
    assert isinstance(node, mi.StructType)
    assert [inner.cls for inner, _ in _reachable(node.fields[0].type, "_Node.children")] == [_Node]


def _structs_in(value: Any) -> Iterator[msgspec.Struct]:
    """Every Struct instance inside ``value`` (``value`` itself included), depth first."""
    if isinstance(value, msgspec.Struct):
        yield value
        for name in value.__struct_fields__:
            yield from _structs_in(getattr(value, name))
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _structs_in(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _structs_in(key)
            yield from _structs_in(item)


def _small_log(events: int = 3_000) -> list[LogMessage]:
    """A log as the services write it (facts, admitter batches, dispatch results, finishes): the
    large-scale shape scaled down, :func:`kueue_es.bench.core_log`."""
    return list(bench.core_log(events=events, cohorts=2, queues_per_cohort=5, scale=0.01))


def test_decoded_events_and_everything_in_them_are_untracked() -> None:
    """Every event decoded from a log, and every Struct inside it, is not tracked by the collector;
    the same event with gc=True Structs would be (it holds lists and dicts)."""
    log = _small_log()
    kinds = set()
    structs = 0
    for message in log:
        event = codec.decode(message.data)
        kinds.add(type(event).__name__)
        kinds.update(type(one).__name__ for one in types.with_carried(event))  # a record's decisions (schema 17)
        for struct in _structs_in(event):
            structs += 1
            assert not gc.is_tracked(struct), f"#{message.seq}: a {type(struct).__name__} is tracked"
    assert {"WorkloadObserved", "DecisionRecord", "WorkloadAdmitted", "WorkloadFinished"} <= kinds
    assert structs > len(log)

    class Tracked(msgspec.Struct):  # the default: a Struct holding a container is tracked
        pod_sets: list[int]

    assert gc.is_tracked(Tracked(pod_sets=[]))


def _fold(log: list[LogMessage]) -> logsource.Folder:
    folder = logsource.Folder()
    for message in log:
        folder.feed(message)
    return folder


@pytest.mark.slow  # about 10 s on 2 cores: run by .ci/run's slow stage
def test_folding_a_log_makes_no_cyclic_garbage_and_leaves_nothing_behind() -> None:
    """Folding a log makes no garbage for the collector (``gc.collect()`` finds none: reference
    counting freed all the fold dropped), nor does dropping the state (its batch verifier holds it
    weakly, ``cluster.wire``), and no memory stays held: the allocated blocks after the fifth fold are those after the second (the first
    warms caches), give or take a few. A cycle through ``gc=False`` Structs would never be freed."""
    log = _small_log()
    gc.collect()
    was = gc.isenabled()
    gc.disable()  # nothing collected behind the test's back: gc.collect() below sees all there is
    try:
        folder = _fold(log)
        assert len(folder.state.workloads) > 50
        assert gc.collect() == 0, "the fold made cyclic garbage"
        del folder
        assert gc.collect() == 0, "the folded state was not freed by reference counting"
        assert gc.garbage == []
        blocks = []
        for _ in range(4):
            folder = _fold(log)
            del folder
            assert gc.collect() == 0
            blocks.append(sys.getallocatedblocks())
    finally:
        if was:
            gc.enable()
    # a leak of the fold (a cycle through gc=False Structs) would keep thousands of blocks a fold
    assert blocks[-1] - blocks[0] < 200, f"allocated blocks grew fold after fold: {blocks}"
