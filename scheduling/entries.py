"""Entries: the heads a cycle nominated, and the order it tries them in.

Why this module exists: the admission cycle (:mod:`kueue_es.scheduling.cycle`), fair
sharing's tournament (:mod:`kueue_es.scheduling.fairsharing`) and the decisions an entry
turns into all speak of the same nominated head; it lives here so none of them owns it.
Kueue: pkg/scheduler/scheduler.go (``entry``, ``entryOrdering``; SEMANTICS §4.3.1, §4.4).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator

import msgspec

from kueue_es.events import models, types
from kueue_es.projections import quota
from kueue_es.projections.cluster import PRIORITIZE_PREEMPTORS_GATE, PRIORITY_SORTING_GATE, ClusterState, WorkloadState
from kueue_es.scheduling import fairsharing, flavors, preemption
from kueue_es.scheduling.tas import cycle as tas_cycle


class Entry(msgspec.Struct, frozen=True, gc=False):
    """A nominated head: the workload, its ClusterQueue, its flavor assignment and, when
    the assignment needs preemption, the victims Kueue would choose (SEMANTICS §4.3.1).

    A frozen Struct without GC tracking (one per head a cycle): in ``kueue-es bench core`` it
    made decide quicker than the NamedTuple it replaced (medians of alternated runs)."""

    workload: WorkloadState
    cq: models.ClusterQueue
    assignment: flavors.Assignment
    priority: int  # its effective priority (with the priority boost under the gate PriorityBoost)
    order: tuple[int, int, str, str]  # its queue order key (-effective priority, queue time, UID, key)
    targets: tuple[preemption.Target, ...] = ()
    nominated: bool = False
    bookmark: types.FlavorBookmark | None = None  # after this cycle's scan, if it is not admitted


def ordered(entries: list[Entry], *, state: ClusterState, tree: quota.QuotaTree) -> Iterable[Entry]:
    """Classical order (SEMANTICS §4.4.1), a list; or the fair-sharing tournament (§4.4.2) when
    the Configuration turns fair sharing on, an iterator (each entry is processed before the
    tournament picks the next: the tournament reads the usage it left).

    The Configuration's feature gates: PrioritySortingWithinCohort off (beta, on by default) drops the
    priority from both orders, entries of one borrowing level (one share) go by queue time alone (Kueue's
    scheduler.go makeClassicalIterator, fair_sharing_iterator.go entryComparer.less). PrioritizePreemptorWorkloads
    (alpha, off by default): the entries waiting for their preemptions (``Entry.nominated``) come first, as in
    Kueue; under fair sharing, inside the tournament: one preemptor beats any other entry at each cohort,
    two preemptors compare by their shares. Off, kueue-es still takes its nominated preemptors first, before
    the tournament (ours, docs/preemption.md: the preemptor's claim is protected)."""
    gates = state.configuration.feature_gates
    by_priority = bool(gates.get(PRIORITY_SORTING_GATE, True))
    if state.configuration.fair_sharing is not None:
        kueue_preemptors = bool(gates.get(PRIORITIZE_PREEMPTORS_GATE, False))
        return _tournament(entries, state=state, tree=tree, by_priority=by_priority, kueue_preemptors=kueue_preemptors)
    return _sorted(entries, by_priority=by_priority)


def _tournament(
    entries: list[Entry], *, state: ClusterState, tree: quota.QuotaTree, by_priority: bool, kueue_preemptors: bool
) -> Iterator[Entry]:
    weights = fairsharing.Weights(state)
    if kueue_preemptors:
        yield from fairsharing.entry_order(
            entries, tree=tree, weights=weights, by_priority=by_priority, preemptors_first=True
        )
        return
    # Nominated preemptors first here too: the capacity they preempted for is theirs.
    key = order_key if by_priority else _fifo_key
    yield from sorted((e for e in entries if e.nominated), key=key)
    rest = [e for e in entries if not e.nominated]
    yield from fairsharing.entry_order(rest, tree=tree, weights=weights, by_priority=by_priority)


def _sorted(entries: list[Entry], *, by_priority: bool = True) -> list[Entry]:
    """``sorted(entries, key=order_key)`` (``by_priority`` False: :func:`_fifo_key`), quicker: the entries are
    grouped by their first keys (nominated, borrowing level), groups in that order, each sorted by its queue
    order tuple read in C (``attrgetter``). Comparing the three-part keys was most of a cycle's sort in
    ``kueue-es bench core`` (half the sort's time saved, issue 18)."""
    groups: dict[tuple[bool, int], list[Entry]] = {}
    for entry in entries:
        first = (not entry.nominated, entry.assignment.borrowing)
        group = groups.get(first)
        if group is None:
            groups[first] = [entry]
        else:
            group.append(entry)
    within = _QUEUE_ORDER if by_priority else _queue_time_order
    if len(groups) == 1:
        return sorted(entries, key=within)
    out: list[Entry] = []
    for first in sorted(groups):
        out += sorted(groups[first], key=within)
    return out


_QUEUE_ORDER = operator.attrgetter("order")


def _queue_time_order(entry: Entry) -> tuple[int, str, str]:
    """The queue order without the priority: queue time, UID and key."""
    order = entry.order
    return order[1], order[2], order[3]


def order_key(entry: Entry) -> tuple[bool, int, tuple[int, int, str, str]]:
    """Kueue's entryOrdering (SEMANTICS §4.4.1): nominated preemptors first (ours), then
    non-borrowing, then the queue order: higher priority, earlier queue time, UID and key."""
    # ours: a nominated preemptor keeps the capacity it preempted for
    return (not entry.nominated, entry.assignment.borrowing, entry.order)


def _fifo_key(entry: Entry) -> tuple[bool, int, tuple[int, str, str]]:
    """:func:`order_key` with the gate PrioritySortingWithinCohort off: the queue order without the priority."""
    return (not entry.nominated, entry.assignment.borrowing, _queue_time_order(entry))


def pod_set_assignments(entry: Entry) -> list[types.PodSetAssignment]:
    """The entry's assignment as the pod set assignments a QuotaReserved or PreemptionRequired
    records (a pod set whose topology waits for the second pass is marked pending, A.9)."""
    part: tas_cycle.TASPart | None = entry.assignment.tas
    delayed = part.delayed if part is not None else ()
    return [
        types.PodSetAssignment(
            name=ps.name,
            flavors=ps.flavors,
            resource_usage=ps.usage,
            count=ps.count,
            delayed_topology_request=tas_cycle.PENDING if ps.name in delayed else "",
        )
        for ps in entry.assignment.pod_sets
    ]
