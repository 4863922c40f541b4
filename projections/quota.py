"""Quota math: ClusterQueues and cohorts as a tree of resource nodes (SEMANTICS §6).

Built from a :class:`kueue_es.projections.cluster.ClusterState` for one scheduling cycle,
then updated in place as the cycle admits workloads. Every ClusterQueue and
Cohort is a node holding, per flavor-resource (``FR = (flavor, resource)``):

- ``subtree_quota``: a ClusterQueue's nominal quota; a cohort's own nominal plus
  what each child lends up (``child.subtree_quota - child.local_quota``);
- ``local_quota``: what a node keeps for its own subtree when it has a
  ``lendingLimit`` (``max(0, subtree_quota - lendingLimit)``), else 0;
- ``usage``: a ClusterQueue's reserved quota; a cohort's is what its children use
  beyond their local quota.

``available`` and ``potential_available`` follow Kueue's resource_node.go and
clusterqueue_snapshot.go; amounts are integers (cpu in millicores). Pure: no I/O.
Cohorts named by ``cohortName``/``parentName`` without an object are implicit
(no quota). A ClusterQueue whose cohort chain has a cycle is marked ``in_cycle``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kueue_es.events import models

if TYPE_CHECKING:  # cluster.py keeps a cached tree up to date, so it imports this module
    from kueue_es.events import types
    from kueue_es.projections.cluster import ClusterState

FR = tuple[str, str]  # (flavor, resource)


@dataclass(frozen=True)
class Quota:
    """Nominal quota and optional limits of one FR on one node (None: no limit)."""

    nominal: int = 0
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(eq=False, slots=True)
class Node:
    """A ClusterQueue (``is_cohort`` False) or a Cohort in the quota tree."""

    name: str
    is_cohort: bool
    quotas: dict[FR, Quota] = field(default_factory=dict)
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    usage: dict[FR, int] = field(default_factory=dict)
    subtree: dict[FR, int] = field(default_factory=dict)
    in_cycle: bool = False
    kept: dict[FR, int] = field(default_factory=dict, repr=False)  # local_quota where not 0 (set by build)
    potential: dict[FR, int] = field(default_factory=dict, repr=False)  # potential_of, remembered (quotas only)
    # Names the content of ``usage``: every change sets a value the tree never gave out before
    # and a rollback restores the value from before (QuotaTree keeps it). While a node and its
    # ancestors keep their stamps, nothing :func:`available_at` or
    # :func:`lowest_subtree_that_fits` reads has changed (the flavor picker's memo relies on it).
    stamp: int = field(default=0, repr=False)
    _height: int | None = field(default=None, repr=False)
    # What a recording (QuotaTree.begin) found here at its first change of this node: its number,
    # the usage (a copy) and the stamp, which rollback puts back.
    saved_in: int = field(default=0, repr=False)
    saved_usage: dict[FR, int] | None = field(default=None, repr=False)
    saved_stamp: int = field(default=0, repr=False)

    def local_quota(self, fr: FR) -> int:
        """The part of the subtree quota kept from lending (0 without a lendingLimit)."""
        quota = self.quotas.get(fr)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - quota.lending_limit)

    def local_available(self, fr: FR) -> int:
        """Unused local quota."""
        local = self.kept.get(fr, 0)
        used = self.usage.get(fr, 0)
        return local - used if local > used else 0

    def root(self) -> Node:
        """The root of this node's tree (itself without a parent)."""
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def height(self) -> int:
        """Distance to the deepest leaf (a ClusterQueue has 0, a cohort of ClusterQueues 1).

        Remembered: a tree's shape never changes (the fold builds a new tree when it would).
        """
        if self._height is None:
            self._height = 1 + max((c.height() for c in self.children), default=0) if self.is_cohort else 0
        return self._height


class QuotaTree:
    """The quota nodes of every ClusterQueue and cohort, with usage; mutable per cycle."""

    def __init__(self, *, cluster_queues: dict[str, Node], cohorts: dict[str, Node]) -> None:
        self.cluster_queues = cluster_queues
        self.cohorts = cohorts
        # The nodes changed since begin() (recording number ``_recording``), each once: a node
        # keeps what it held before its first change (Node.saved_*). A cycle changes each cohort
        # node many times; one record a node, not one a change, is less to write and to undo
        # (issue 18, branch core50k).
        self._journal: list[Node] | None = None
        self._recording = 0
        self._stamps = 0  # the last stamp given out (Node.stamp)
        # One tuple per FR the tree knows: usage maps keyed by these long-lived (and so
        # untracked) tuples stay out of the garbage collector's way (see :meth:`fr`).
        self._frs: dict[str, dict[str, FR]] = {}
        for node in [*cohorts.values(), *cluster_queues.values()]:
            for fr in [*node.quotas, *node.subtree]:
                self._frs.setdefault(fr[0], {}).setdefault(fr[1], fr)

    def fr(self, flavor: str, resource: str) -> FR:
        """The FR ``(flavor, resource)``, as the tree's own tuple when it knows it."""
        found = self._frs.get(flavor)
        return (found.get(resource) if found is not None else None) or (flavor, resource)

    def begin(self) -> None:
        """Start recording usage changes, so :meth:`rollback` can undo a cycle's what-ifs."""
        self._journal = []
        self._recording += 1

    def rollback(self) -> None:
        """Undo every usage change since :meth:`begin` and stop recording: each changed node's
        usage values and stamp as they were (an FR it first held in the what-ifs stays, at 0)."""
        journal = self._journal
        if journal is not None:
            for node in journal:
                saved, usage = node.saved_usage, node.usage
                assert saved is not None
                for fr in usage:
                    usage[fr] = saved.get(fr, 0)
                node.stamp = node.saved_stamp
                node.saved_usage = None
        self._journal = None

    # --- queries (SEMANTICS §6.2) --------------------------------------------------------

    def available(self, cq: str, fr: FR) -> int:
        """What ``cq`` may still take of ``fr`` now, borrowing included (never negative)."""
        value = _available(self.cluster_queues[cq], fr)
        return value if value > 0 else 0

    def potential_available(self, cq: str, fr: FR) -> int:
        """The most ``cq`` could ever hold of ``fr`` if nothing else used anything."""
        return potential_at(self.cluster_queues[cq], fr)

    def nominal(self, cq: str, fr: FR) -> int:
        """The ClusterQueue's own nominal quota of ``fr`` (0 when not declared)."""
        quota = self.cluster_queues[cq].quotas.get(fr)
        return quota.nominal if quota else 0

    def declares(self, cq: str, fr: FR) -> bool:
        """Whether the ClusterQueue lists ``fr`` (a CQ can only use FRs it declares)."""
        return fr in self.cluster_queues[cq].quotas

    def usage(self, cq: str, fr: FR) -> int:
        """Reserved amount of ``fr`` in ``cq``."""
        return self.cluster_queues[cq].usage.get(fr, 0)

    def fits(self, cq: str, usage: dict[FR, int]) -> bool:
        """Whether ``usage`` fits in what ``cq`` has available for every FR."""
        if not usage:
            return True
        node = self.cluster_queues[cq]
        for fr, amount in usage.items():
            if amount > 0 and amount > _available(node, fr):  # available is never below 0
                return False
        return True

    def borrowing_level(self, cq: str, fr: FR, amount: int) -> int:
        """The borrowing level of :meth:`lowest_subtree_that_fits`."""
        return lowest_subtree_that_fits(self.cluster_queues[cq], fr, amount)[0]

    def lowest_subtree_that_fits(self, cq: str, fr: FR, amount: int) -> tuple[int, bool]:
        """Kueue's FindHeightOfLowestSubtreeThatFits (SEMANTICS §6.3): ``(level, may_reclaim)``.

        ``level`` is 0 when no borrowing is needed, else the height of the lowest
        ancestor whose subtree quota covers the request; ``may_reclaim`` says that
        ancestor has a parent (reclaiming higher up in the hierarchy could help).
        """
        return lowest_subtree_that_fits(self.cluster_queues[cq], fr, amount)

    def borrowing(self, cq: str, fr: FR, amount: int) -> bool:
        """Whether holding ``amount`` more of ``fr`` would take ``cq`` above its nominal quota."""
        node = self.cluster_queues[cq]
        return node.parent is not None and self.nominal(cq, fr) < node.usage.get(fr, 0) + amount

    # --- updates ---------------------------------------------------------------------------

    def add_usage(self, cq: str, usage: dict[FR, int]) -> None:
        """Reserve ``usage`` in ``cq``; what exceeds local quota is pushed up the tree."""
        if usage:
            node = self.cluster_queues[cq]
            for fr, amount in usage.items():
                self._add(node, fr, amount)

    def remove_usage(self, cq: str, usage: dict[FR, int]) -> None:
        """Give back ``usage`` reserved in ``cq``."""
        if usage:
            node = self.cluster_queues[cq]
            for fr, amount in usage.items():
                self._remove(node, fr, amount)

    def reserve_capacity(self, cq: str, usage: dict[FR, int], *, borrowing: bool) -> None:
        """Reserve for a Preempt entry without candidates what it keeps from the cycle's lower
        entries out of ``usage`` (its assignment's, never negative), as :meth:`add_usage`: per
        FR, no more than its room below the ClusterQueue's nominal quota, or below nominal plus
        borrowingLimit when ``borrowing`` (no limit: all of it), and never below 0. Kueue:
        scheduler.go quotaResourcesToReserve (SEMANTICS §7.12)."""
        node = self.cluster_queues[cq]
        quotas, used_now = node.quotas, node.usage
        for fr, amount in usage.items():
            limits = quotas.get(fr)
            used = used_now.get(fr, 0)
            if limits is None:
                room = amount if borrowing else -used
            elif borrowing:
                limit = limits.borrowing_limit
                room = amount if limit is None else limits.nominal + limit - used
            else:
                room = limits.nominal - used
            reserve = amount if amount < room else room
            self._add(node, fr, reserve if reserve > 0 else 0)

    def shift_reservation(self, cq: str, usage: dict[FR, int], *, sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) a reservation's usage, as :func:`build` counts it:
        ClusterQueues that are deleted or under a cohort cycle are left out."""
        node = self.cluster_queues.get(cq)
        if node is None or node.in_cycle:
            return
        for fr, amount in usage.items():
            fr = self.fr(*fr)  # the tree's own tuple: the usage map is left untracked by the collector
            if sign > 0:
                self._add(node, fr, amount)
            else:
                self._remove(node, fr, amount)

    def _add(self, node: Node | None, fr: FR, amount: int) -> None:
        journal, recording = self._journal, self._recording
        stamps = self._stamps
        while node is not None:
            usage = node.usage
            if journal is not None and node.saved_in != recording:
                node.saved_in, node.saved_usage, node.saved_stamp = recording, dict(usage), node.stamp
                journal.append(node)
            used = usage.get(fr, 0)
            usage[fr] = used + amount
            stamps += 1
            node.stamp = stamps
            kept = node.kept  # mostly empty: no lendingLimit, no local quota to fill first
            if kept:
                local = kept.get(fr, 0)
                room = local - used if local > used else 0
                if amount <= room:
                    break
                amount -= room
            elif amount <= 0:
                break
            node = node.parent
        self._stamps = stamps

    def _remove(self, node: Node | None, fr: FR, amount: int) -> None:
        journal, recording = self._journal, self._recording
        stamps = self._stamps
        while node is not None:
            usage = node.usage
            if journal is not None and node.saved_in != recording:
                node.saved_in, node.saved_usage, node.saved_stamp = recording, dict(usage), node.stamp
                journal.append(node)
            used = usage.get(fr, 0)
            local = node.kept.get(fr, 0)
            usage[fr] = used - amount
            stamps += 1
            node.stamp = stamps
            before = used - local if used > local else 0
            after = used - amount - local
            if after < 0:
                after = 0
            if before <= after:
                break
            amount = before - after
            node = node.parent
        self._stamps = stamps


def cached(state: ClusterState) -> QuotaTree:
    """The tree of ``state`` with the ledger's usage, built once and then kept in step by
    the fold (:mod:`kueue_es.projections.cluster` rebuilds it when a ClusterQueue or Cohort changes).

    Callers that try usage out must bracket it with ``begin()``/``rollback()``.
    """
    if state.quota_tree is None:
        state.quota_tree = build(state)
    return state.quota_tree


def reservation_usage(reservation: types.QuotaReserved) -> dict[FR, int]:
    """Usage per (flavor, resource) of a QuotaReserved."""
    out: dict[FR, int] = {}
    for assignment in reservation.pod_set_assignments:
        for resource, amount in assignment.resource_usage.items():
            flavor = assignment.flavors.get(resource)
            if flavor is not None and amount:
                out[(flavor, resource)] = out.get((flavor, resource), 0) + amount
    return out


def build(state: ClusterState, *, usage: dict[str, dict[str, dict[str, int]]] | None = None) -> QuotaTree:
    """The quota tree of ``state`` with ``usage`` (default: the ledger, ``state.usage``).

    ``usage[cq][flavor][resource]`` amounts; CQs listed there but deleted are ignored.
    """
    cohorts: dict[str, Node] = {}

    def cohort(name: str) -> Node:
        if name not in cohorts:
            obj = state.cohorts.get(name)
            cohorts[name] = Node(name=name, is_cohort=True, quotas=_quotas(obj.spec.resource_groups) if obj else {})
        return cohorts[name]

    for name in sorted(state.cohorts):
        node = cohort(name)
        parent = state.cohorts[name].spec.parent_name
        if parent:
            node.parent = cohort(parent)
    queues: dict[str, Node] = {}
    for name in sorted(state.cluster_queues):
        spec = state.cluster_queues[name].spec
        node = Node(name=name, is_cohort=False, quotas=_quotas(spec.resource_groups))
        if spec.cohort_name:
            node.parent = cohort(spec.cohort_name)
        queues[name] = node
    _mark_cycles(cohorts)
    for node in [*cohorts.values(), *queues.values()]:
        if node.parent is not None and not node.in_cycle:
            node.parent.children.append(node)
    for node in cohorts.values():
        if node.parent is None and not node.in_cycle:
            _compute_subtree(node)
    for node in queues.values():
        if node.parent is None:
            _compute_subtree(node)
        elif node.parent.in_cycle:
            node.in_cycle = True
    for node in [*cohorts.values(), *queues.values()]:
        node.kept = {fr: kept for fr in node.quotas if (kept := node.local_quota(fr)) > 0}
    tree = QuotaTree(cluster_queues=queues, cohorts=cohorts)
    ledger = state.usage if usage is None else usage
    for cq_name in sorted(ledger):
        if cq_name in queues and not queues[cq_name].in_cycle:
            flat = {(f, r): v for f, res in ledger[cq_name].items() for r, v in res.items() if v}
            tree.add_usage(cq_name, dict(sorted(flat.items())))
    return tree


def _quotas(groups: list[models.ResourceGroup]) -> dict[FR, Quota]:
    return {
        (flavor.name, q.name): Quota(
            nominal=q.nominal_quota, borrowing_limit=q.borrowing_limit, lending_limit=q.lending_limit
        )
        for group in groups
        for flavor in group.flavors
        for q in flavor.resources
    }


def _mark_cycles(cohorts: dict[str, Node]) -> None:
    """Cohorts on or under a parent cycle are unusable (SEMANTICS §1.4): mark them."""
    for start in cohorts.values():
        seen: list[Node] = []
        node: Node | None = start
        while node is not None and node not in seen:
            seen.append(node)
            node = node.parent
        if node is not None:  # a cycle: the whole chain from start is affected
            for member in seen:
                member.in_cycle = True
    for cohort in cohorts.values():
        if cohort.in_cycle:
            cohort.parent = None  # cut the loop so walks up the tree end; the subtree stays unusable


def _compute_subtree(node: Node) -> None:
    for child in node.children:
        _compute_subtree(child)
    frs = set(node.quotas)
    for child in node.children:
        frs.update(child.subtree)
    for fr in sorted(frs):
        own = node.quotas.get(fr, Quota()).nominal
        lent = sum(child.subtree.get(fr, 0) - child.local_quota(fr) for child in node.children) if node.is_cohort else 0
        node.subtree[fr] = own + lent


def lowest_subtree_that_fits(node: Node, fr: FR, amount: int) -> tuple[int, bool]:
    """:meth:`QuotaTree.lowest_subtree_that_fits` of the ClusterQueue ``node``."""
    ancestor = node.parent
    if ancestor is None:
        return 0, False
    quota = node.quotas.get(fr)
    used = node.usage.get(fr, 0)
    if (quota.nominal if quota is not None else 0) >= used + amount:
        return 0, True
    local = node.kept.get(fr, 0)
    remaining = amount - (local - used if local > used else 0)
    while ancestor is not None:
        used = ancestor.usage.get(fr, 0)
        if ancestor.subtree.get(fr, 0) >= used + remaining:
            return ancestor.height(), ancestor.parent is not None
        local = ancestor.kept.get(fr, 0)
        remaining -= local - used if local > used else 0
        ancestor = ancestor.parent
    return node.root().height(), False


def path_stamps(node: Node) -> tuple[int, ...]:
    """The usage stamps of ``node`` and its ancestors, nearest first (see :attr:`Node.stamp`)."""
    parent = node.parent
    if parent is None:
        return (node.stamp,)
    if parent.parent is None:
        return (node.stamp, parent.stamp)
    out = [node.stamp]
    while parent is not None:
        out.append(parent.stamp)
        parent = parent.parent
    return tuple(out)


def available_at(node: Node, fr: FR) -> int:
    """:meth:`QuotaTree.available` of the ClusterQueue ``node``."""
    value = _available(node, fr)
    return value if value > 0 else 0


def potential_at(node: Node, fr: FR) -> int:
    """:meth:`QuotaTree.potential_available` of the ClusterQueue ``node`` (remembered on it)."""
    value = node.potential.get(fr)
    if value is None:
        value = node.potential[fr] = _potential(node, fr)
    return value


def _available(node: Node, fr: FR) -> int:
    parent = node.parent
    used = node.usage.get(fr, 0)
    if parent is None:
        return node.subtree.get(fr, 0) - used
    from_parent = _available(parent, fr)
    local = node.kept.get(fr, 0)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        lendable = node.subtree.get(fr, 0) - local
        borrowed_room = lendable - (used - local if used > local else 0) + quota.borrowing_limit
        if borrowed_room < from_parent:
            from_parent = borrowed_room
    return (local - used if local > used else 0) + from_parent


def potential_of(node: Node, fr: FR) -> int:
    """potentialAvailable of any node, ClusterQueue or cohort (SEMANTICS §6.2)."""
    return _potential(node, fr)


def _potential(node: Node, fr: FR) -> int:
    if node.parent is None:
        return node.subtree.get(fr, 0)
    value = node.local_quota(fr) + _potential(node.parent, fr)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        value = min(value, node.subtree.get(fr, 0) + quota.borrowing_limit)
    return value
