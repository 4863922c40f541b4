"""Decision partitions: which ClusterQueues, Cohorts and Workloads each decider chain owns (issue 18).

ClusterQueues that share no cohort tree (and no TAS node pool) never compete for quota, so each
tree gets its own DecisionRecord chain: its head subjects ``kq.dec.<p>.head.<role>``, its basis,
its deciders (ARCHITECTURE.md §3). The ids, by Kueue's own tree (a Cohort's ``spec.parentName``;
an implicit cohort, named only by a ClusterQueue's ``spec.cohortName``, is a root):

- ``c-<token(root cohort)>`` for a ClusterQueue with a cohort, ``q-<token(name)>`` for one
  without (``events.subjects.token``);
- every tree holding a ClusterQueue with a flavor whose ResourceFlavor has ``topologyName`` is one
  partition (they may share the TAS node pool): the smallest of those trees' ids, in string order;
- a Cohort's partition is its root's; a Workload's is its reservation's ClusterQueue's when it
  holds quota, else the ClusterQueue its LocalQueue points to; without either (no queue name, no
  such LocalQueue or ClusterQueue) :data:`UNROUTED`, so its inadmissible reason is decided there;
- :data:`LEGACY` (``p0``): the single partition of every log before partitions; a record of it
  decides over the whole state, as it always did.

Hand-over (transit and fence): when a fact at sequence ``s`` moves a ClusterQueue or a Workload
from partition A to B (a cohort change merges or splits trees, a LocalQueue is re-pointed, a
queue appears), the object is *in transit* from A until the fold sees a verified DecisionRecord
of A (any role) with ``basis_seq >= s`` (or a ``p0`` one). Meanwhile B is :meth:`Partitions.blocked`
(its deciders decide nothing) and A no longer holds the object; A owes a record, empty if need be
(:meth:`Partitions.fence_needed`). Why that is safe is in docs/design.md "Partitions".

The projection is folded by ``cluster.apply`` (hooks named ``on_*``) and kept incrementally: the
per-partition ClusterQueue sets change only when a ClusterQueue's cohort or flavors, a Cohort's
parent, a ResourceFlavor's ``topologyName`` or a LocalQueue's ClusterQueue changes; each workload's
partition, and its place in the per-partition indexes a decider's cycle reads (:meth:`view`), is
kept in step whenever the fold re-indexes it. The transits themselves are state
(``ClusterState.transits``, written in checkpoints); everything here is rebuilt from the state
(:meth:`Partitions.rebuilt`). Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import heapq
import inspect
from typing import TYPE_CHECKING, Any, Final, cast

from kueue_es.events import subjects
from kueue_es.projections import quota

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kueue_es.events import models, types
    from kueue_es.projections.cluster import ClusterState, WorkloadState

LEGACY: Final = subjects.DEFAULT_PARTITION
"""``p0``: the partition of every record written before partitions; decides over everything."""
UNROUTED: Final = "x-unrouted"
"""The partition of workloads no ClusterQueue takes (no queue name, no such LocalQueue or ClusterQueue)."""

Transit = tuple[str, int, str]
"""An object in transit: (source partition A, the sequence ``s`` of the fact that moved it, target B)."""

_INDEXES: Final = ("releasable", "checks_due", "timed", "backoffs", "activation_due")
"""The fold's workload indexes a cycle walks whole, kept per partition too."""


def tree_id(state: ClusterState, cq: models.ClusterQueue) -> str:
    """The cohort-tree id of ``cq``: ``c-<token(root)>``, or ``q-<token(name)>`` without a cohort.

    The root is the top of the Cohort parent chain as folded (``spec.parentName``; a cohort
    without a Cohort object is a root); a parent cycle (which Kueue refuses) is rooted at its
    smallest name, so every member of the cycle gets the same id."""
    cohort = cq.spec.cohort_name
    if not cohort:
        return "q-" + subjects.token(cq.metadata.name)
    return "c-" + subjects.token(root_cohort(state, cohort))


def root_cohort(state: ClusterState, cohort: str) -> str:
    """The root of ``cohort``'s tree (itself when it has no parent; the smallest name of a cycle)."""
    seen: list[str] = []
    name = cohort
    while True:
        obj = state.cohorts.get(name)
        parent = obj.spec.parent_name if obj is not None else None
        if not parent:
            return name
        if parent in seen or parent == name:
            cycle = seen[seen.index(parent) :] if parent in seen else [name]
            return min([*cycle, name])
        seen.append(name)
        name = parent


def is_tas(state: ClusterState, cq: models.ClusterQueue) -> bool:
    """Whether ``cq`` names a flavor whose ResourceFlavor has a ``topologyName`` (SEMANTICS-ADVANCED A.2)."""
    flavors = state.flavors
    for group in cq.spec.resource_groups:
        for fq in group.flavors:
            obj = flavors.get(fq.name)
            if obj is not None and obj.spec.topology_name:
                return True
    return False


class TreeView:
    """The whole quota tree as one partition's cycle sees it: ``cluster_queues`` holds only the
    partition's ClusterQueues (what a cycle walks, e.g. the requeue triggers per ClusterQueue);
    every other attribute and method is the tree's own, so usage, what-ifs and cohorts are shared."""

    def __init__(self, tree: quota.QuotaTree, members: list[str]) -> None:
        self.tree = tree
        self.cluster_queues = {n: node for n in members if (node := tree.cluster_queues.get(n)) is not None}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.tree, name)
        if inspect.ismethod(value):
            # kept: a search calls usage, available, add_usage... millions of times a run, and this fallback
            # costs a failed lookup each time; a bound method of the tree stays the same, its data may not
            self.__dict__[name] = value
        return value


class _Part:
    """One partition's share of the fold: its ClusterQueues, workloads, the workload indexes a
    cycle walks, its deadline heaps and its deciders' caches."""

    __slots__ = (
        "cluster_queues",
        "workloads",
        "releasable",
        "checks_due",
        "timed",
        "backoffs",
        "activation_due",
        "timer_heaps",
        "caches",
    )

    def __init__(self) -> None:
        self.cluster_queues: set[str] = set()
        self.workloads: dict[str, WorkloadState] = {}
        self.releasable: dict[str, None] = {}
        self.checks_due: dict[str, None] = {}
        self.timed: dict[str, None] = {}
        self.backoffs: dict[str, None] = {}
        self.activation_due: dict[str, None] = {}
        self.timer_heaps: tuple[list[tuple[int, str]], ...] = ([], [], [])
        self.caches: dict[str, Any] = {}

    def empty(self) -> bool:
        return not self.cluster_queues and not self.workloads


class Partitions:
    """The partitions of a folded state (see the module). Read by deciders and the runtime:

    :meth:`of_cluster_queue`, :meth:`of_workload`, :meth:`members`, :meth:`all`,
    :meth:`fence_needed`, :meth:`blocked`, :meth:`view`; written by the fold's ``on_*`` hooks."""

    def __init__(self) -> None:
        self.cq_tree: dict[str, str] = {}  # ClusterQueue -> its cohort tree's id
        self.tas: set[str] = set()  # the ClusterQueues naming a TAS flavor
        self.tas_trees: dict[str, int] = {}  # tree id -> how many TAS ClusterQueues it holds
        self.cq_part: dict[str, str] = {}  # ClusterQueue -> partition
        self.cohort_part: dict[str, str] = {}  # Cohort (an object, or named by a ClusterQueue) -> partition
        self.lq_cq: dict[tuple[str, str], str] = {}  # LocalQueue -> the ClusterQueue it names
        self.lqs_of_cq: dict[str, set[tuple[str, str]]] = {}
        self.wl_part: dict[str, str] = {}  # workload key -> partition
        self.timer_seen: dict[str, tuple[str, tuple[int, int, int] | None]] = {}  # key -> (partition, basis pushed)
        self.parts: dict[str, _Part] = {}
        self.out_of: dict[str, dict[str, int]] = {}  # source partition -> transit key -> s
        self.into: dict[str, int] = {}  # target partition -> transits into it
        self.seq = 0  # the sequence the fold is applying (cluster.apply sets it)
        self.version = 0  # advances whenever a ClusterQueue or LocalQueue changes partition

    # --- reading ------------------------------------------------------------------------------

    def of_cluster_queue(self, name: str) -> str | None:
        """The partition of ClusterQueue ``name``; None when the fold has no such ClusterQueue."""
        return self.cq_part.get(name)

    def of_cohort(self, state: ClusterState, name: str) -> str:
        """The partition of Cohort ``name``: its root's tree (the TAS partition when that tree holds
        a TAS ClusterQueue). A cohort no ClusterQueue is under still has its root's id."""
        return self._of_tree("c-" + subjects.token(root_cohort(state, name)))

    def of_workload(self, key: str) -> str | None:
        """The partition of workload ``key`` (``<namespace>/<name>``), :data:`UNROUTED` when no
        ClusterQueue takes it; None when the fold has no such workload."""
        return self.wl_part.get(key)

    def members(self, partition: str) -> frozenset[str]:
        """The ClusterQueue names of ``partition`` (empty for an unknown one)."""
        part = self.parts.get(partition)
        return frozenset(part.cluster_queues) if part is not None else frozenset()

    def all(self) -> list[str]:
        """Every partition with a ClusterQueue or a workload, and every one that owes a fence, sorted."""
        live = {p for p, part in self.parts.items() if not part.empty()}
        return sorted(live | {p for p, waiting in self.out_of.items() if waiting})

    def fence_needed(self, partition: str) -> int | None:
        """The smallest sequence ``s`` an object in transit out of ``partition`` waits for: the
        partition's deciders must commit a record with ``basis_seq >= s`` (empty if need be) to
        release it. None when nothing waits for ``partition``."""
        waiting = self.out_of.get(partition)
        return min(waiting.values()) if waiting else None

    def fencing(self) -> list[str]:
        """The partitions that owe a fence now (``fence_needed`` is not None), sorted: a partition
        whose objects all moved away is in :meth:`all` only through this."""
        return sorted(p for p, waiting in self.out_of.items() if waiting)

    def blocked(self, partition: str) -> bool:
        """True while an object is in transit into ``partition``: its deciders decide nothing
        until every source partition's fence record is folded."""
        return self.into.get(partition, 0) > 0

    def transit_of(self, state: ClusterState, key: str) -> Transit | None:
        """The transit of workload ``key``, or None when it is not in transit."""
        return state.transits.get("wl:" + key)

    def owner_at(self, state: ClusterState, key: str, basis_seq: int) -> str | None:
        """The partition that may decide workload ``key`` in a record of basis ``basis_seq`` folded
        now: the source partition while it is in transit and ``basis_seq`` is before its move;
        nobody while it is in transit and the basis is after the move (its target waits for the
        fence); else its partition. None also for an unknown workload (anyone may: the fold
        ignores decisions about workloads it does not hold)."""
        transit = state.transits.get("wl:" + key)
        if transit is not None:
            return transit[0] if basis_seq < transit[1] else ""
        return self.wl_part.get(key)

    def view(self, state: ClusterState, partition: str) -> ClusterState:
        """``state`` as ``partition``'s deciders see it: its ClusterQueues, its LocalQueues' queues,
        its workloads and their indexes, its deadline heaps and its own caches; everything else
        (objects, the quota tree, usage, configuration, TAS) shared with ``state``. Costs about one
        step per ClusterQueue and LocalQueue of the partition, never a walk of the whole cluster
        (but for :data:`UNROUTED`, whose queues are the LocalQueues no ClusterQueue takes).

        The view is read-only for its callers, like the state (the quota tree is the shared one:
        decide brackets its what-ifs with ``begin``/``rollback`` as before). The PodsReady gate
        (``not_ready``) stays the whole cluster's: Kueue's waitForPodsReady.blockAdmission blocks
        every admission while any admitted workload is not ready (SEMANTICS §4.5)."""
        part = self.parts.get(partition) or _Part()
        tree = quota.cached(state)
        cached = part.caches.get("partitions.view.objects")
        if cached is None or cached[0] != (state.objects_version, self.version) or cached[1] is not tree:
            members = sorted(part.cluster_queues)
            cluster_queues = {n: state.cluster_queues[n] for n in members if n in state.cluster_queues}
            if partition == UNROUTED:
                lqs = sorted(k for k in state.local_queues if self._lq_partition(k) == UNROUTED)
            else:
                lqs = sorted(lq for n in members for lq in self.lqs_of_cq.get(n, ()))
            local_queues = {k: state.local_queues[k] for k in lqs if k in state.local_queues}
            cached = (
                (state.objects_version, self.version),
                tree,
                cluster_queues,
                lqs,
                local_queues,
                TreeView(tree, members),
            )
            part.caches["partitions.view.objects"] = cached
        cluster_queues, lqs, local_queues, tree_view = cached[2], cached[3], cached[4], cached[5]
        if partition == UNROUTED:  # its queues are those of no LocalQueue, or of one no ClusterQueue takes
            queued = {k: q for k, q in state.queued.items() if self._lq_partition(k) == UNROUTED}
        else:
            queued = {k: q for k in lqs if (q := state.queued.get(k)) is not None}
        reserved = {n: held for n in cluster_queues if (held := state.reserved.get(n)) is not None}
        nominations = {k: v for k, v in state.nominations.items() if k in part.workloads}
        preemptors = {k: v for k, v in state.preemptors.items() if k in part.workloads}
        deferred = {k: v for k, v in state.deferred.items() if k in part.workloads}
        evicted_by_others = {k: v for k, v in state.evicted_by_others.items() if k in part.workloads}
        return dataclasses.replace(
            state,
            cluster_queues=cluster_queues,
            local_queues=local_queues,
            workloads=part.workloads,
            queued=queued,
            reserved=reserved,
            nominations=nominations,
            preemptors=preemptors,
            deferred=deferred,
            evicted_by_others=evicted_by_others,
            pending={},  # no cycle reads it; the whole cluster's would be a walk per cycle
            releasable=part.releasable,
            checks_due=part.checks_due,
            timed=part.timed,
            backoffs=part.backoffs,
            activation_due=part.activation_due,
            timer_heaps=part.timer_heaps,
            caches=part.caches,
            quota_tree=cast("quota.QuotaTree", tree_view),  # a QuotaTree to its readers (TreeView)
            admit_cycles=state.partition_cycles.get(partition, 0),
        )

    # --- the fold's hooks -----------------------------------------------------------------------

    def on_cluster_queue(self, state: ClusterState, name: str, seq: int) -> None:
        """ClusterQueue ``name`` was observed or deleted at ``seq`` (after the fold took it)."""
        cq = state.cluster_queues.get(name)
        was_tas = name in self.tas
        now_tas = cq is not None and is_tas(state, cq)
        old_tree = self.cq_tree.get(name)
        new_tree = tree_id(state, cq) if cq is not None else None
        if not was_tas and not now_tas and old_tree not in self.tas_trees and new_tree not in self.tas_trees:
            if old_tree == new_tree and (cq is None) == (name not in self.cq_part):
                return  # a quota or policy change: the partitions stay
            if new_tree is None:
                self.cq_tree.pop(name, None)
            else:
                self.cq_tree[name] = new_tree
                if cq is not None and cq.spec.cohort_name:
                    self.cohort_part.setdefault(cq.spec.cohort_name, self._of_tree(new_tree))
            self._assign(state, [name], seq)
            return
        self.recompute(state, seq)

    def on_cohort(self, state: ClusterState, seq: int) -> None:
        """A Cohort was observed or deleted at ``seq``: trees may have merged or split."""
        self.recompute(state, seq)

    def on_flavor(self, state: ClusterState, seq: int) -> None:
        """A ResourceFlavor was observed or deleted at ``seq``: the TAS partition may change."""
        tas = {n for n, cq in state.cluster_queues.items() if is_tas(state, cq)}
        if tas != self.tas:
            self.recompute(state, seq)

    def on_local_queue(self, state: ClusterState, key: tuple[str, str], seq: int) -> None:
        """LocalQueue ``key`` (namespace, name) was observed or deleted at ``seq``: its workloads
        follow its ClusterQueue."""
        lq = state.local_queues.get(key)
        new = lq.spec.cluster_queue if lq is not None and lq.spec.cluster_queue else None
        old = self.lq_cq.get(key)
        if old == new:
            return
        before = self._lq_partition(key)
        if old is not None:
            self.lq_cq.pop(key)
            held = self.lqs_of_cq.get(old)
            if held is not None:
                held.discard(key)
                if not held:
                    del self.lqs_of_cq[old]
        if new is not None:
            self.lq_cq[key] = new
            self.lqs_of_cq.setdefault(new, set()).add(key)
        self._invalidate_views()
        if self._lq_partition(key) != before:
            self._rescan(state, [before], seq)

    def on_workload(self, state: ClusterState, key: str) -> None:
        """Keep workload ``key``'s partition and its place in the per-partition indexes in step
        (the fold calls this whenever it re-indexes the workload)."""
        wl = state.workloads.get(key)
        old = self.wl_part.get(key)
        if wl is None:
            if old is not None:
                self._drop(old, key)
                del self.wl_part[key]
                self.timer_seen.pop(key, None)
            return
        new = self._workload_partition(wl)
        part = self.parts.get(new)
        if part is None:
            part = self.parts[new] = _Part()
        if new != old:
            if old is not None:
                self._drop(old, key)
                self._move(state, "wl:" + key, old, new, self.seq)
            self.wl_part[key] = new
        part.workloads[key] = wl
        if key in state.releasable:
            part.releasable[key] = None
        else:
            part.releasable.pop(key, None)
        if key in state.checks_due:
            part.checks_due[key] = None
        else:
            part.checks_due.pop(key, None)
        if key in state.timed:
            part.timed[key] = None
        else:
            part.timed.pop(key, None)
        if key in state.backoffs:
            part.backoffs[key] = None
        else:
            part.backoffs.pop(key, None)
        if key in state.activation_due:
            part.activation_due[key] = None
        else:
            part.activation_due.pop(key, None)
        basis = wl.timer_basis
        seen = self.timer_seen.get(key)
        if seen is None or seen[0] != new or seen[1] != basis:
            self.timer_seen[key] = (new, basis)
            if basis is not None:
                for heap, base in zip(part.timer_heaps, basis, strict=True):
                    if base >= 0:
                        heapq.heappush(heap, (base, key))
                _prune(part)
                _prune_whole(state)

    def on_record(self, state: ClusterState, partition: str, basis_seq: int) -> None:
        """A verified DecisionRecord of ``partition`` at ``basis_seq`` was folded: every transit out
        of it (every transit at all, for a :data:`LEGACY` record, which decides over everything)
        whose move is at or before the basis is over."""
        sources = list(self.out_of) if partition == LEGACY else [partition]
        for source in sources:
            waiting = self.out_of.get(source)
            if not waiting:
                continue
            done = [name for name, s in waiting.items() if s <= basis_seq]
            for name in done:
                del waiting[name]
                transit = state.transits.pop(name)
                self._unblock(transit[2])
            if not waiting:
                del self.out_of[source]

    # --- keeping it ----------------------------------------------------------------------------

    def recompute(self, state: ClusterState, seq: int) -> None:
        """Recompute every ClusterQueue's tree and the TAS partition (a cohort, flavor or TAS
        ClusterQueue change: rare), then move what changed partition."""
        self.cq_tree = {n: tree_id(state, cq) for n, cq in state.cluster_queues.items()}
        self.tas = {n for n, cq in state.cluster_queues.items() if is_tas(state, cq)}
        self.tas_trees = {}
        for n in self.tas:
            tree = self.cq_tree[n]
            self.tas_trees[tree] = self.tas_trees.get(tree, 0) + 1
        self._assign(state, sorted(state.cluster_queues.keys() | self.cq_part.keys()), seq)
        named = {cq.spec.cohort_name for cq in state.cluster_queues.values() if cq.spec.cohort_name}
        cohorts = {name: self.of_cohort(state, name) for name in sorted(named | state.cohorts.keys())}
        for name, new in cohorts.items():
            old = self.cohort_part.get(name)
            if old is not None and old != new:
                self._move(state, "cohort:" + name, old, new, seq)  # its own hand-over, with its tree's
        self.cohort_part = cohorts

    def _of_tree(self, tree: str) -> str:
        return min(self.tas_trees) if tree in self.tas_trees else tree

    def _lq_partition(self, key: tuple[str, str]) -> str:
        cq = self.lq_cq.get(key)
        return self.cq_part.get(cq, UNROUTED) if cq is not None else UNROUTED

    def _workload_partition(self, wl: WorkloadState) -> str:
        reservation = wl.reservation
        if reservation is not None:
            return self.cq_part.get(reservation.cluster_queue, UNROUTED)
        spec = wl.workload.spec
        if not spec.queue_name:
            return UNROUTED
        cq = self.lq_cq.get((wl.workload.metadata.namespace, spec.queue_name))
        return self.cq_part.get(cq, UNROUTED) if cq is not None else UNROUTED

    def _assign(self, state: ClusterState, names: list[str], seq: int) -> None:
        """Give each of ``names`` (ClusterQueues) its partition now; move the workloads of those
        that changed partition (they were in the old one, or unrouted)."""
        touched: set[str] = set()
        for name in names:
            old = self.cq_part.get(name)
            tree = self.cq_tree.get(name) if name in state.cluster_queues else None
            new = self._of_tree(tree) if tree is not None else None
            if old == new:
                continue
            if old is not None:
                old_part = self.parts.get(old)
                if old_part is not None:
                    old_part.cluster_queues.discard(name)
                touched.add(old)
            elif self.lqs_of_cq.get(name):
                touched.add(UNROUTED)  # a new ClusterQueue takes its LocalQueues' unrouted workloads
            if new is None:
                del self.cq_part[name]
            else:
                self.cq_part[name] = new
                part = self.parts.get(new)
                if part is None:
                    part = self.parts[new] = _Part()
                part.cluster_queues.add(name)
            if old is not None and new is not None:
                self._move(state, "cq:" + name, old, new, seq)
        self._invalidate_views()
        if touched:
            self._rescan(state, sorted(touched), seq)

    def _rescan(self, state: ClusterState, partitions: list[str], seq: int) -> None:
        """Re-place every workload of ``partitions`` (after their ClusterQueues or LocalQueues moved)."""
        before = self.seq
        self.seq = max(self.seq, seq)
        try:
            for partition in partitions:
                part = self.parts.get(partition)
                if part is None:
                    continue
                for key in list(part.workloads):
                    self.on_workload(state, key)
        finally:
            self.seq = before

    def _drop(self, partition: str, key: str) -> None:
        part = self.parts.get(partition)
        if part is None:
            return
        part.workloads.pop(key, None)
        for name in _INDEXES:
            getattr(part, name).pop(key, None)
        if part.empty() and partition not in self.out_of and not self.into.get(partition):
            del self.parts[partition]

    def _move(self, state: ClusterState, name: str, source: str, target: str, seq: int) -> None:
        """``name`` (``wl:<key>``, ``cq:<name>`` or ``cohort:<name>``) moved from ``source`` to ``target`` at ``seq``."""
        transit = state.transits.get(name)
        if transit is None:
            if source == target:
                return
            state.transits[name] = (source, seq, target)
            self.out_of.setdefault(source, {})[name] = seq
            self.into[target] = self.into.get(target, 0) + 1
            return
        self._unblock(transit[2])
        if target == transit[0]:  # back where it came from before the fence: no hand-over after all
            del state.transits[name]
            waiting = self.out_of[transit[0]]
            del waiting[name]
            if not waiting:
                del self.out_of[transit[0]]
            return
        state.transits[name] = (transit[0], transit[1], target)
        self.into[target] = self.into.get(target, 0) + 1

    def _unblock(self, target: str) -> None:
        left = self.into.get(target, 0) - 1
        if left > 0:
            self.into[target] = left
        else:
            self.into.pop(target, None)

    def _invalidate_views(self) -> None:
        self.version += 1  # every view's objects are made again (:meth:`view`)

    @classmethod
    def rebuilt(cls, state: ClusterState) -> Partitions:
        """The projection of ``state`` made afresh (a state loaded from a checkpoint): the same
        partitions, indexes and transits as the fold that wrote it kept (the deadline heaps with
        the same current entries)."""
        out = cls()
        for lq_key, lq in state.local_queues.items():
            if lq.spec.cluster_queue:
                out.lq_cq[lq_key] = lq.spec.cluster_queue
                out.lqs_of_cq.setdefault(lq.spec.cluster_queue, set()).add(lq_key)
        transits = dict(state.transits)
        out.recompute(state, 0)
        for key in state.workloads:
            out.on_workload(state, key)
        state.transits.clear()
        state.transits.update(transits)
        out.out_of, out.into = {}, {}
        for name, (source, s, target) in transits.items():
            out.out_of.setdefault(source, {})[name] = s
            out.into[target] = out.into.get(target, 0) + 1
        return out


def record_problem(state: ClusterState, record: types.DecisionRecord, outputs: Sequence[types.Event]) -> str | None:
    """Why the fold of ``state`` (just before ``record``) must not take ``record``'s batch, or None.

    - a ``p0`` record decides over everything: refused when its basis lies before another
      partition's last record (a legacy decider that did not see a partitioned decision);
    - any other record: refused when its basis lies before the last ``p0`` record (the first
      record of each partition after a log's switch from ``p0`` must have seen it), or when an
      output or pending outcome is about a workload its partition does not hold at the basis
      (:meth:`Partitions.owner_at`: another partition's, or one in transit into it: its target
      waits for the fence; a workload the fold does not hold is anyone's, as the fold ignores it).
    """
    heads = state.heads
    basis = record.basis_seq
    if record.partition == LEGACY:
        if len(heads) > 1:
            later = max((seq, p) for p, seq in heads.items() if p != LEGACY)
            if basis < later[0]:
                return f"a p0 record of basis {basis}, before partition {later[1]}'s record at {later[0]}"
        return None
    last_p0 = heads.get(LEGACY, 0)
    if basis < last_p0:
        return f"basis {basis} is before the last p0 record, at {last_p0}"
    parts = state.partitions
    refs = [ref for out in outputs if (ref := getattr(out, "workload", None)) is not None]
    if record.pending:
        refs.extend(outcome.workload for outcome in record.pending)
    if record.released:
        refs.extend(release.workload for release in record.released)
    if record.decisions:
        refs.extend(decision.workload for decision in record.decisions)
    for ref in refs:
        owner = parts.owner_at(state, ref.key, basis)
        if owner is not None and owner != record.partition:
            where = f"in transit into {parts.of_workload(ref.key)}" if owner == "" else f"in partition {owner}"
            return f"workload {ref.key} is {where} at basis {basis}, not in {record.partition}"
    return None


def _current_heaps(timed: dict[str, None], workloads: dict[str, WorkloadState]) -> tuple[list[tuple[int, str]], ...]:
    """Deadline heaps holding only the current entries of the ``timed`` workloads."""
    fresh: tuple[list[tuple[int, str]], ...] = ([], [], [])
    for key in timed:
        wl = workloads.get(key)
        if wl is None or wl.timer_basis is None:
            continue
        for heap, base in zip(fresh, wl.timer_basis, strict=True):
            if base >= 0:
                heap.append((base, key))
    for heap in fresh:
        heapq.heapify(heap)
    return fresh


def _prune(part: _Part) -> None:
    """Rebuild a partition's deadline heaps from its workloads' current bases once they hold
    mostly stale entries (their size stays about that of ``timed``)."""
    heaps = part.timer_heaps
    if len(heaps[0]) + len(heaps[1]) + len(heaps[2]) > 6 * len(part.timed) + 192:
        part.timer_heaps = _current_heaps(part.timed, part.workloads)


def _prune_whole(state: ClusterState) -> None:
    """The same for the whole state's heaps, in place: only a ``p0`` cycle pops them, so with
    partitioned deciders they would otherwise grow with every deadline ever set. Stale entries
    are what the lifecycle drops anyway (``lifecycle._current``): decisions do not change."""
    heaps = state.timer_heaps
    if len(heaps[0]) + len(heaps[1]) + len(heaps[2]) > 6 * len(state.timed) + 4096:
        for heap, fresh in zip(heaps, _current_heaps(state.timed, state.workloads), strict=True):
            heap[:] = fresh
