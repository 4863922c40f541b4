"""``kueue-es diff LOG_A LOG_B``: where two logs' decisions first diverge, and why.

The decisions of each log are its DecisionRecords with their outputs (and the pending outcomes a
record carries), in log order; the i-th of one log is compared with the i-th of the other, by
role and by the outputs' JSON without the fields that name log positions (``causeSeq``,
``nominationSeq``); ``--ignore-times`` also leaves out every time (``atMs``, ``requeueAtMs``), for
two live runs whose clocks differ. The first pair that differs is the divergence. Why: each
log folded up to that decision's basis, and the objects that differ between the two folds
(ClusterQueues, Cohorts, ResourceFlavors, LocalQueues, WorkloadPriorityClasses, the
Configuration, workloads and whether they hold quota), field by field after the same defaulting
(their CRDs' defaults, as the API server fills them in: an object written without
``flavorFungibility`` and one the API server defaulted are the same), and the facts one basis
has and the other has not; then the two decisions side by side, the differing fields of each pair
of outputs the table describes alike (the same JSON paths ``kueue-es replay`` names: a record whose
``resourceUsage.cpu`` was changed reads the same in the table), and how many later ones differ.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from kueue_es import crds, validation
from kueue_es.events import codec, types
from kueue_es.events.bus.base import LogMessage
from kueue_es.projections.cluster import ClusterState
from kueue_es.replay import MISSING, FieldDiff, field_diff
from kueue_es.services.runtime import fold_message

POSITION_FIELDS = frozenset({"causeSeq", "nominationSeq"})
TIME_FIELDS = frozenset({"atMs", "requeueAtMs", "nowMs"})
MAX_LINES = 20


@dataclass(kw_only=True)
class Decision:
    """One decision of a log: its record's sequence, the record, its outputs (pending outcomes last)."""

    seq: int
    record: types.DecisionRecord
    outputs: list[types.Event] = field(default_factory=list)

    def shape(self, *, ignore_times: bool) -> tuple[str, list[Any]]:
        """What is compared: the role and the outputs without position (and time) fields."""
        return self.record.role, [_compared(o, ignore_times=ignore_times) for o in self.outputs]


@dataclass(kw_only=True)
class Divergence:
    """The first decisions that differ (``index`` 0-based; one side None when its log has no more),
    the objects and facts that differ at their bases, and how many later pairs differ."""

    index: int
    a: Decision | None
    b: Decision | None
    objects: list[str] = field(default_factory=list)
    facts_only_a: list[str] = field(default_factory=list)
    facts_only_b: list[str] = field(default_factory=list)
    later: int = 0
    total_a: int = 0
    total_b: int = 0
    ignore_times: bool = False


def decisions(messages: list[LogMessage]) -> list[Decision]:
    """The decisions of a log, in order (a record whose outputs the log does not hold keeps those it has)."""
    found: list[Decision] = []
    open_: Decision | None = None
    remaining = 0
    for message in messages:
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            continue
        if isinstance(event, types.DecisionRecord):
            if open_ is not None:
                found.append(open_)
            open_ = Decision(seq=message.seq, record=event)
            open_.outputs.extend(event.released_decisions())  # before the outputs, as the fold takes them
            remaining = event.output_count
            if remaining == 0:  # since event schema 17 it carries its decisions: where its outputs stood
                open_.outputs.extend(event.carried)
                open_.outputs.extend(event.pending_decisions())
                found.append(open_)
                open_ = None
        elif open_ is not None and remaining and message.subject.startswith("kq.dec."):
            open_.outputs.append(event)
            remaining -= 1
            if remaining == 0:
                open_.outputs.extend(open_.record.pending_decisions())
                found.append(open_)
                open_ = None
    if open_ is not None:
        found.append(open_)
    return found


def compare(a: list[LogMessage], b: list[LogMessage], *, ignore_times: bool = False) -> Divergence | None:
    """The first divergence of two logs' decisions, or None when they decide the same."""
    da, db = decisions(a), decisions(b)
    first = None
    later = 0
    for i in range(max(len(da), len(db))):
        x = da[i] if i < len(da) else None
        y = db[i] if i < len(db) else None
        same = (
            x is not None and y is not None and x.shape(ignore_times=ignore_times) == y.shape(ignore_times=ignore_times)
        )
        if same:
            continue
        if first is None:
            first = Divergence(index=i, a=x, b=y, total_a=len(da), total_b=len(db), ignore_times=ignore_times)
        else:
            later += 1
    if first is None:
        return None
    first.later = later
    basis_a = first.a.record.basis_seq if first.a else (a[-1].seq if a else 0)
    basis_b = first.b.record.basis_seq if first.b else (b[-1].seq if b else 0)
    state_a, facts_a = _fold(a, basis_a)
    state_b, facts_b = _fold(b, basis_b)
    first.objects = object_differences(state_a, state_b, ignore_times=ignore_times)
    first.facts_only_a = [describe_fact(f) for f in _only(facts_a, facts_b)]
    first.facts_only_b = [describe_fact(f) for f in _only(facts_b, facts_a)]
    return first


def _fold(messages: list[LogMessage], basis: int) -> tuple[ClusterState, list[types.Fact]]:
    state = ClusterState()
    facts: list[types.Fact] = []
    for message in messages:
        if message.seq > basis:
            break
        fold_message(state, message)
        try:
            event = codec.decode(message.data)
        except codec.DecodeError:
            continue
        facts.extend(one for one in types.unbatched(event) if isinstance(one, types.Fact))  # a FactBatch: its facts
    return state, facts


def _only(mine: list[types.Fact], other: list[types.Fact]) -> list[types.Fact]:
    """Facts of ``mine`` not in ``other`` (as many times as they are missing), in order."""
    counts: dict[bytes, int] = {}
    for fact in other:
        key = codec.encode(fact)
        counts[key] = counts.get(key, 0) + 1
    out = []
    for fact in mine:
        key = codec.encode(fact)
        if counts.get(key, 0):
            counts[key] -= 1
        else:
            out.append(fact)
    return out


def object_differences(a: ClusterState, b: ClusterState, *, ignore_times: bool = False) -> list[str]:
    """``Kind name: field: A -> B`` for every object that differs between two folds."""
    lines: list[str] = []
    kinds: list[tuple[str, dict[Any, Any], dict[Any, Any]]] = [
        ("ResourceFlavor", a.flavors, b.flavors),
        ("ClusterQueue", a.cluster_queues, b.cluster_queues),
        ("Cohort", a.cohorts, b.cohorts),
        ("LocalQueue", a.local_queues, b.local_queues),
        ("WorkloadPriorityClass", a.priority_classes, b.priority_classes),
        ("Configuration", {"config": a.configuration}, {"config": b.configuration}),
        ("Workload", {k: w.workload for k, w in a.workloads.items()}, {k: w.workload for k, w in b.workloads.items()}),
        ("Workload", _holding(a), _holding(b)),
    ]
    for kind, left, right in kinds:
        for key in sorted(set(left) | set(right), key=str):
            name = "/".join(key) if isinstance(key, tuple) else str(key)
            if key not in left or key not in right:
                lines.append(f"{kind} {name}: only in {'B' if key not in left else 'A'}")
                continue
            drop = TIME_FIELDS if ignore_times else frozenset()
            one = json.dumps(_strip(_defaulted(kind, json.loads(codec.encode(left[key]))), drop))
            two = json.dumps(_strip(_defaulted(kind, json.loads(codec.encode(right[key]))), drop))
            for diff in field_diff(one, two):
                lines.append(
                    f"{kind} {name}: {diff.path or '(object)'}: {_short(diff.stored)} -> {_short(diff.replayed)}"
                )
    return list(dict.fromkeys(lines))  # a workload only one fold has is named once


def _defaulted(kind: str, value: Any) -> Any:
    """``value`` (an object of ``kind`` as the log encodes it) with its CRD's defaults filled in where absent
    (:func:`kueue_es.validation.defaulted`), so that an object as the API server defaulted it (the watcher's)
    and the same object as written (a what-if CHANGES file, a scenario) compare equal; other kinds as they are."""
    if not isinstance(value, dict) or validation.schema_of(kind) is None:
        return value
    out = validation.defaulted({"apiVersion": f"{crds.GROUP}/{crds.VERSION}", "kind": kind, **value})
    return {k: v for k, v in out.items() if k not in ("apiVersion", "kind")}


def _holding(state: ClusterState) -> dict[str, str]:
    return {
        key: (f"holds quota in {wl.reservation.cluster_queue}" if wl.reservation is not None else "holds no quota")
        + (", finished" if wl.finished is not None else "")
        for key, wl in state.workloads.items()
    }


def describe_fact(fact: types.Fact) -> str:
    """``ClusterQueueObserved cluster-queue`` and the like."""
    name = ""
    for attr in ("cluster_queue", "cohort", "flavor", "local_queue", "priority_class", "workload", "namespace"):
        value = getattr(fact, attr, None)
        meta = getattr(value, "metadata", None)
        if meta is not None:
            name = f"{meta.namespace}/{meta.name}" if getattr(meta, "namespace", None) else meta.name
            break
        if isinstance(value, types.WorkloadRef):
            name = value.key
            break
    if isinstance(fact, types.ObjectDeleted):
        name = f"{fact.kind} {fact.namespace + '/' if fact.namespace else ''}{fact.name}"
    return f"{type(fact).__name__} {name}".strip()


def describe_output(event: types.Event) -> str:
    """One line of a decision's output: type, workload, ClusterQueue, flavors or targets, time."""
    parts = [type(event).__name__]
    ref = getattr(event, "workload", None)
    if isinstance(ref, types.WorkloadRef):
        parts.append(ref.key)
    cq = getattr(event, "cluster_queue", None)
    if isinstance(cq, str) and cq:
        parts.append(f"in {cq}")
    assignments = getattr(event, "pod_set_assignments", None)  # QuotaReserved, PreemptionRequired, WorkloadAdmitted
    if isinstance(assignments, list) and assignments:
        flavors = sorted({f for a in assignments for f in a.flavors.values()})
        parts.append(f"flavor {','.join(flavors)}")
    if isinstance(event, types.PreemptionRequired | types.PreemptionIssued):
        parts.append("targets " + (",".join(t.workload.key for t in event.targets) or "none"))
    if isinstance(event, types.WorkloadInadmissible):
        parts.append(f"({event.message})")
    at = getattr(event, "at_ms", None)
    if isinstance(at, int) and at:
        parts.append(f"at {format_ms(at)}")
    return " ".join(parts)


def format_ms(ms: int) -> str:
    """RFC 3339 UTC with milliseconds (``2026-01-01T00:00:00.250Z``)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def print_divergence(console: Any, found: Divergence | None, *, name_a: str, name_b: str) -> None:
    """The report (see the module)."""
    console.print(f"A: {name_a}")
    console.print(f"B: {name_b}")
    if found is None:
        console.print("the two logs decide the same: every decision matches")
        return
    where_a = f"#{found.a.seq} (basis #{found.a.record.basis_seq}, {found.a.record.role})" if found.a else "none left"
    where_b = f"#{found.b.seq} (basis #{found.b.record.basis_seq}, {found.b.record.role})" if found.b else "none left"
    console.print(f"first divergence: decision {found.index + 1}: A {where_a}, B {where_b}")
    if found.a and found.b and found.a.shape(ignore_times=True) == found.b.shape(ignore_times=True):
        console.print("  (they differ only in their times: --ignore-times compares decisions without them)")
    console.print("why: at the two bases")
    content = found.a is not None and found.b is not None and differ_in_content(found.a, found.b)
    if not (found.objects or found.facts_only_a or found.facts_only_b):
        if content:
            console.print("  the folded objects and the facts are the same, yet the decisions differ in their content")
            console.print("  (not only in time or order: see below); `kueue-es replay` re-runs each log's decisions")
        else:
            console.print("  the folded objects and the facts are the same (a difference of time or order)")
    for line in found.objects[:MAX_LINES]:
        console.print(f"  {line}")
    if len(found.objects) > MAX_LINES:
        console.print(f"  ... and {len(found.objects) - MAX_LINES} more object differences")
    for label, facts in (("only A", found.facts_only_a), ("only B", found.facts_only_b)):
        if facts:
            shown = "; ".join(facts[:5]) + (f"; ... ({len(facts)} in all)" if len(facts) > 5 else "")
            console.print(f"  facts {label} has: {shown}")
    table = Table(title="the two decisions", title_justify="left")
    table.add_column("A")
    table.add_column("B")
    left = [describe_output(o) for o in found.a.outputs] if found.a else ["(no decision)"]
    right = [describe_output(o) for o in found.b.outputs] if found.b else ["(no decision)"]
    for i in range(max(len(left), len(right))):
        table.add_row(left[i] if i < len(left) else "", right[i] if i < len(right) else "")
    console.print(table)
    if found.a is not None and found.b is not None:
        for number, text, diffs in alike_but_different(found.a, found.b, ignore_times=found.ignore_times):
            console.print(f"output {number} ({text}) reads the same in both, but differs in:")
            for one in diffs[:MAX_LINES]:
                console.print(f"  {one.path or '(event)'}: {_short(one.stored)} -> {_short(one.replayed)}")
            if len(diffs) > MAX_LINES:
                console.print(f"  ... and {len(diffs) - MAX_LINES} more fields")
    later = f"{found.later} later decision differs" if found.later == 1 else f"{found.later} later decisions differ"
    console.print(f"{later} too (A has {found.total_a} decisions, B {found.total_b})")


def differ_in_content(a: Decision, b: Decision) -> bool:
    """Whether two decisions differ in more than their times and the order of their outputs."""
    left, right = a.shape(ignore_times=True), b.shape(ignore_times=True)
    return left[0] != right[0] or sorted(map(_key, left[1])) != sorted(map(_key, right[1]))


def alike_but_different(a: Decision, b: Decision, *, ignore_times: bool) -> list[tuple[int, str, list[FieldDiff]]]:
    """The outputs (1-based number, description, differing fields) that :func:`describe_output` describes the
    same in ``a`` and ``b``, at the same place, but whose compared JSON differs: its differing paths, as
    ``kueue-es replay`` names them (:func:`kueue_es.replay.field_diff`), A's value first."""
    found = []
    for number, (x, y) in enumerate(zip(a.outputs, b.outputs, strict=False), start=1):
        text = describe_output(x)
        if text != describe_output(y):
            continue  # the table shows the difference
        one, two = _compared(x, ignore_times=ignore_times), _compared(y, ignore_times=ignore_times)
        if one != two:
            found.append((number, text, field_diff(json.dumps(one), json.dumps(two))))
    return found


def _compared(event: types.Event, *, ignore_times: bool) -> Any:
    """An output's JSON as decisions are compared: without position (and, with ``ignore_times``, time) fields."""
    drop = POSITION_FIELDS | (TIME_FIELDS if ignore_times else frozenset())
    return _strip(json.loads(codec.encode(event)), drop)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _strip(value: Any, drop: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v, drop) for k, v in value.items() if k not in drop}
    if isinstance(value, list):
        return [_strip(v, drop) for v in value]
    return value


def _short(value: object) -> str:
    if value == MISSING:
        return MISSING
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."
