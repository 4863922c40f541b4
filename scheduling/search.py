"""The search: flavor assignment with preemption for one cycle, shared by admitter and preemptor.

Why this module exists: the admission cycle nominates each head with it, and the preemptor
recomputes a stale nomination's targets with it, on the same rules. It ties the flavor
picker (:mod:`kueue_es.scheduling.flavors`) to the target search (classical,
:mod:`kueue_es.scheduling.preemption`, or fair, :mod:`kueue_es.scheduling.fairsharing`) through
Kueue's preemption oracle, and places TAS pod sets after quota
(:mod:`kueue_es.scheduling.tas.cycle`). Kueue: pkg/scheduler/scheduler.go getAssignments,
pkg/scheduler/flavorassigner, pkg/scheduler/preemption/preemption_oracle.go (SEMANTICS §4.3.1,
§5.5-§5.9, §7.7; SEMANTICS-ADVANCED A.5).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Collection, Iterator

import msgspec

from kueue_es.events import models, types
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState, WorkloadState, effective_priority, queue_order_ts
from kueue_es.scheduling import fairsharing, flavors, preemption
from kueue_es.scheduling.tas import cycle as tas_cycle


class Search:
    """Flavor assignment with preemption for one cycle: the oracle and target search of
    :mod:`kueue_es.scheduling.preemption` (classical) or :mod:`kueue_es.scheduling.fairsharing`.

    ``released``: keys of workloads whose quota the caller took out of ``tree`` (the
    preemptor's view, :func:`kueue_es.scheduling.nominations.release_ended`): no candidates.
    ``kueue_reasons``: pending messages as Kueue writes them (:class:`~kueue_es.scheduling.flavors.Picker`;
    False: admitter logic 16 and earlier); ``fit_clears_reasons``: a resource whose flavor fits adds no reasons
    to them, and an uncovered resource names every member of a pod set group (False: admitter logic 45 and
    earlier); ``kueue_no_fit``: every resource of a flavor is checked (and written) after one that does not fit,
    and a NoFit's reason is Kueue's (False: admitter logic 54 and earlier;
    :class:`~kueue_es.scheduling.flavors.Picker`).
    ``lq_usage_in_every_cq``: LocalQueue usage orders the
    candidates of every ClusterQueue, as Kueue's CandidatesOrdering (False: of the preemptor's own only,
    admitter logic 17 and preemptor logic 6 and earlier; :func:`~kueue_es.scheduling.preemption.ordered`).
    ``fair_rerun_after_own``: fair preemption runs its first strategy again once it has taken the
    preemptor's own ClusterQueue's workloads (False: admitter logic 20 and preemptor logic 9 and
    earlier; :func:`~kueue_es.scheduling.fairsharing.fair_targets`). ``allowed_flavors``: with the gate
    ConcurrentAdmission on, a workload's allowed-flavors annotation limits the flavors it may be assigned
    (:func:`~kueue_es.scheduling.flavors.allowed_by_annotation`; False: the annotation is not read, admitter
    logic 25 and earlier and the preemptor)."""

    def __init__(
        self,
        state: ClusterState,
        tree: quota.QuotaTree,
        *,
        now_ms: int,
        tas: tas_cycle.CycleTopology | None = None,
        released: Collection[str] = (),
        kueue_reasons: bool = True,
        fit_clears_reasons: bool = True,
        kueue_no_fit: bool = True,
        lq_usage_in_every_cq: bool = True,
        fair_rerun_after_own: bool = True,
        allowed_flavors: bool = True,
        afs_pending: bool = False,
    ) -> None:
        self.state, self.tree = state, tree
        self.allowed_flavors = allowed_flavors
        self.fair_rerun_after_own = fair_rerun_after_own
        self.pool = preemption.CandidatePool(
            state,
            now_ms=now_ms,
            released=released,
            lq_usage_in_every_cq=lq_usage_in_every_cq,
            afs_pending=afs_pending,
        )
        self.fair = state.configuration.fair_sharing is not None
        self.weights = fairsharing.Weights(state)
        self.tas = tas if tas is not None else tas_cycle.CycleTopology(state)
        self.replaced: WorkloadState | None = None  # the elastic slice the head replaces (excluding)
        self._gone: frozenset[str] = frozenset()  # workloads taken out while inside without()
        # Kueue's PartialAdmission gate (on by default): off, a workload is tried at its full counts only
        self.partial_admission = True
        # admitter logic 35 (cycle.run sets it): a MultiKueue ClusterQueue delays every TAS pod set
        self.multikueue_delays_topology = False
        # Target searches of the _try under way, by what they searched for (see targets).
        self._searched: (
            dict[tuple[str, tuple[tuple[quota.FR, int], ...], frozenset[quota.FR]], list[preemption.Target]] | None
        ) = None
        # A flavor picker per ClusterQueue, kept across cycles until an object changes (every
        # change of a ClusterQueue, flavor or the Configuration is a trigger) or a new quota tree.
        kept = state.caches.get("admitter.pickers")
        key = (
            state.objects_version,
            tree,
            self.fair,
            kueue_reasons,
            fit_clears_reasons,
            kueue_no_fit,
            self.tas.enabled,
        )
        if not isinstance(kept, tuple) or kept[:7] != key:
            kept = state.caches["admitter.pickers"] = (*key, {})
        self._pickers: dict[str, flavors.Picker] = kept[7]
        self.kueue_reasons = kueue_reasons
        self.fit_clears_reasons = fit_clears_reasons
        self.kueue_no_fit = kueue_no_fit

    @contextlib.contextmanager
    def excluding(self, key: str, *, replaced: WorkloadState | None = None) -> Iterator[None]:
        """Candidates without workload ``key`` while inside (an elastic slice being replaced is
        never its replacement's victim, SEMANTICS-ADVANCED D.3); the pool is built again after.
        ``replaced``: that slice, whose topology assignment the replacement's TAS pod sets keep
        (A.14, :meth:`~kueue_es.scheduling.tas.cycle.CycleTopology.wanted`)."""
        pool = self.pool
        before = pool.released
        pool.released = {*before, key}
        pool.forget()
        self.replaced = replaced
        try:
            yield
        finally:
            pool.released = before
            pool.forget()
            self.replaced = None

    @contextlib.contextmanager
    def without(self, keys: Collection[str]) -> Iterator[None]:
        """While inside, the workloads ``keys`` are gone: their quota out of the tree, their TAS
        usage out of every placement and they are no candidates (Kueue's
        Snapshot.SimulateWorkloadRemoval, with which scheduler.go updateAssignmentIfNeeded computes
        the assignment of an entry whose targets overlap the victims of the cycle's earlier
        preemptions: the cluster as it will be once those preemptions complete). Keys that hold
        no quota are ignored. Everything is put back on leaving."""
        gone = self._candidates(keys)
        for candidate in gone:
            preemption.remove(self.tree, candidate)
        pool, before_released, before_gone = self.pool, self.pool.released, self._gone
        pool.released = {*before_released, *keys}
        pool.forget()
        self._gone = before_gone | frozenset(keys)
        try:
            yield
        finally:
            self._gone = before_gone
            pool.released = before_released
            pool.forget()
            for candidate in gone:
                preemption.restore(self.tree, candidate)

    def _candidates(self, keys: Collection[str]) -> list[preemption.Candidate]:
        """The candidates of the pool named ``keys``, in ``keys`` order (those holding no quota left out)."""
        out = []
        for key in keys:
            wl = self.state.workloads.get(key)
            if wl is None or wl.reservation is None:
                continue
            candidate = self.pool.candidate(key, wl.reservation.cluster_queue)
            if candidate is not None:
                out.append(candidate)
        return out

    def preemptor(
        self, wl: WorkloadState, cq: models.ClusterQueue, usage: dict[quota.FR, int], need: frozenset[quota.FR]
    ) -> preemption.Preemptor:
        """The :class:`~kueue_es.scheduling.preemption.Preemptor` for ``wl`` asking ``usage``."""
        return preemption.Preemptor(
            key=wl.workload.key,
            cq=cq,
            priority=effective_priority(wl.workload, self.state),  # with its priority boost (gate PriorityBoost)
            queue_ts_ms=queue_order_ts(wl, self.state.configuration),
            usage=usage,
            frs_need=need,
        )

    def targets(self, preemptor: preemption.Preemptor) -> list[preemption.Target]:
        """Victims that make ``preemptor`` fit ([] when none do).

        Inside :meth:`_try` a search is remembered by the preemptor's workload, usage and FRs that
        need preemption: the oracle searches each FR apart, and when the workload asks for one FR
        only (a single-resource workload: most of them) the search for its assignment is the same
        search over the same tree and candidates, whose answer is the same. Not with a TAS check
        (``topology_fits``), which the oracle's searches do not carry."""
        memo = self._searched
        if memo is not None and preemptor.topology_fits is None:
            key = (preemptor.key, tuple(preemptor.usage.items()), preemptor.frs_need)
            found = memo.get(key)
            if found is None:
                found = memo[key] = self._targets(preemptor)
            return found
        return self._targets(preemptor)

    def _targets(self, preemptor: preemption.Preemptor) -> list[preemption.Target]:
        if not can_preempt(preemptor.cq, self.tree):
            return []
        if self.fair:
            config = self.state.configuration.fair_sharing
            assert config is not None
            return fairsharing.fair_targets(
                self.tree, self.pool, preemptor, config, self.weights, rerun_after_own=self.fair_rerun_after_own
            )
        return preemption.classical_targets(self.tree, self.pool, preemptor)

    def assignments(
        self,
        wl: WorkloadState,
        requests: list[flavors.PodSetRequest],
        *,
        cq: models.ClusterQueue,
        start: types.FlavorBookmark | None = None,
    ) -> tuple[flavors.Assignment, list[preemption.Target]]:
        """Kueue's getAssignments (SEMANTICS §4.3.1, §5.9): full counts first; then, with
        minCount, the largest counts that Fit or Preempt with preemption. Every attempt resumes
        the flavor scan from ``start`` (the bookmark in force, §5.3). With ``allowed_flavors``, the
        flavors the workload's annotation does not allow are skipped (flavors.allowed_by_annotation)."""
        tried = start.tried if start is not None else None
        if self.allowed_flavors:
            allowed = flavors.allowed_by_annotation(wl.workload, self.state.configuration.feature_gates)
            if allowed is not None:
                requests = [dataclasses.replace(ps, allowed_flavors=allowed) for ps in requests]
        full, victims = self._try(wl, requests, cq, tried)
        if full.mode == "Fit" or victims or not self.partial_admission or not _partial_admission(requests):
            return full, victims
        deltas = [
            ps.count - (spec.min_count or ps.count)
            for ps, spec in zip(requests, wl.workload.spec.pod_sets, strict=True)
        ]
        total = sum(deltas)
        if total <= 0:
            return full, []

        def reduced(k: int) -> list[flavors.PodSetRequest]:
            return [
                dataclasses.replace(ps, count=ps.count - (d * k) // total)
                for ps, d in zip(requests, deltas, strict=True)
            ]

        low, high, best = 1, total, None
        while low <= high:  # the smallest reduction k that works gives the largest counts
            k = (low + high) // 2
            attempt, attempt_victims = self._try(wl, reduced(k), cq, tried)
            if attempt.fits or attempt_victims:
                best, high = (attempt, attempt_victims), k - 1
            else:
                low = k + 1
        return best if best is not None else (full, [])

    def _try(
        self,
        wl: WorkloadState,
        requests: list[flavors.PodSetRequest],
        cq: models.ClusterQueue,
        start: tuple[dict[str, int], ...] | None = None,
    ) -> tuple[flavors.Assignment, list[preemption.Target]]:
        picker = self._pickers.get(cq.metadata.name)
        if picker is None:
            picker = self._pickers[cq.metadata.name] = flavors.Picker(
                cq,
                self.tree,
                self.state.flavors,
                fair_sharing=self.fair,
                topologies=self.state.topology.topologies,
                topology_aware=self.tas.enabled,
                kueue_reasons=self.kueue_reasons,
                fit_clears_reasons=self.fit_clears_reasons,
                kueue_no_fit=self.kueue_no_fit,
            )
        preempting = picker.preempting  # can_preempt(cq, self.tree), kept with the picker
        self._searched = {} if preempting else None
        try:
            return self._assign_and_search(wl, requests, cq, picker, start)
        finally:
            self._searched = None

    def _assign_and_search(
        self,
        wl: WorkloadState,
        requests: list[flavors.PodSetRequest],
        cq: models.ClusterQueue,
        picker: flavors.Picker,
        start: tuple[dict[str, int], ...] | None,
    ) -> tuple[flavors.Assignment, list[preemption.Target]]:
        preempting = picker.preempting
        # oracle None: no candidates at all
        assignment = picker.assign(requests, oracle=self._oracle(wl, cq) if preempting else None, start=start)
        if picker.tas_levels and assignment.mode != "NoFit" and self.tas.active:
            assignment = self._topology(wl, assignment, picker, cq)
        elif not picker.tas_levels and assignment.mode != "NoFit":
            refused = self.tas.without_tas_flavors(wl, assignment)
            if refused:
                assignment = flavors.Assignment(
                    mode="NoFit", message=refused, reason="NoMatchingFlavor", tried=assignment.tried
                )
        if assignment.mode != "Preempt" or not preempting:
            return assignment, []
        usage = assignment.usage()
        preemptor = self.preemptor(wl, cq, usage, assignment.frs_need_preemption)
        part: tas_cycle.TASPart | None = assignment.tas
        if part is not None:
            wanted, cycle, gone = part.wanted, self.tas, self._gone

            def topology_fits(removed: frozenset[str]) -> bool:
                return isinstance(cycle.place(wanted, removed=removed | gone), tas_cycle.Placed)

            preemptor = dataclasses.replace(preemptor, topology_fits=topology_fits)
        return assignment, self.targets(preemptor)

    def _topology(
        self, wl: WorkloadState, assignment: flavors.Assignment, picker: flavors.Picker, cq: models.ClusterQueue
    ) -> flavors.Assignment:
        """TAS after quota (SEMANTICS-ADVANCED A.5.3-A.5.6; flavorassigner.go assignFlavors): a
        Fit whose placement fails turns Preempt; a Preempt that cannot be placed even on an
        empty tree turns NoFit (TopologyPlacementFailed). The flavors never change. Pod sets
        on a flavor covered by a ProvisioningRequest check are not placed: their topology
        request is delayed to the second pass (A.5.4, A.9); in a ClusterQueue with a MultiKueue
        check (with ``multikueue_delays_topology``) none is placed, at any pass: the worker that
        admits the copy places them (tas_flavorassigner.go podSetTopologyRequest)."""
        wanted = self.tas.wanted(wl, assignment, picker, replaced=self.replaced)
        if isinstance(wanted, str):
            return flavors.Assignment(mode="NoFit", message=wanted, reason="NoMatchingFlavor", tried=assignment.tried)
        if not wanted:
            return assignment
        delayed: tuple[str, ...] = ()
        if self.multikueue_delays_topology and tas_cycle.multikueue_delays(self.state, cq):
            covered = frozenset(w.flavor for w in wanted)  # placed by the worker cluster, never here
        else:
            covered = tas_cycle.delayed_flavors(self.state, cq) if wl.reservation is None else frozenset()
        if covered:  # first pass under a ProvisioningRequest check: topology later (A.5.4, A.9)
            delayed = tuple(w.request.name for w in wanted if w.flavor in covered)
            wanted = [w for w in wanted if w.flavor not in covered]
            if not wanted:
                return msgspec.structs.replace(assignment, tas=tas_cycle.TASPart((), tas_cycle.Placed((), {}), delayed))
        part = tas_cycle.TASPart(tuple(wanted), delayed=delayed)
        message = assignment.message
        if assignment.mode == "Fit":
            result = self.tas.place(wanted, removed=self._gone)
            if isinstance(result, tas_cycle.Placed):
                return msgspec.structs.replace(assignment, tas=msgspec.structs.replace(part, placed=result))
            message = _join(message, f"couldn't assign flavors to pod set {result.pod_set}: {result.message}")
        empty = self.tas.place(wanted, simulate_empty=True)
        if not isinstance(empty, tas_cycle.Placed):
            failure = f"couldn't assign flavors to pod set {empty.pod_set}: {empty.message}"
            return flavors.Assignment(
                mode="NoFit",
                message=message if assignment.mode == "Fit" else _join(message, failure),
                reason=tas_cycle.TOPOLOGY_PLACEMENT_FAILED,
                tried=assignment.tried,  # the quota scan's bookmark stands (flavorassigner.go assignFlavors)
            )
        flat = tas_cycle.with_preempt(assignment, [w.request.name for w in wanted])
        return msgspec.structs.replace(assignment, mode="Preempt", flat=flat, message=message, tas=part)

    def _oracle(self, wl: WorkloadState, cq: models.ClusterQueue) -> flavors.Oracle:
        name = cq.metadata.name

        def oracle(fr: quota.FR, amount: int) -> tuple[int, int]:
            """preemption_oracle.go SimulatePreemption for one FR (SEMANTICS §7.7)."""
            found = self.targets(self.preemptor(wl, cq, {fr: amount}, frozenset({fr})))
            if not found:
                return flavors.NO_CANDIDATES, self.tree.borrowing_level(name, fr, amount)
            for target in found:
                preemption.remove(self.tree, target.candidate)
            level = self.tree.borrowing_level(name, fr, amount)
            for target in found:
                preemption.restore(self.tree, target.candidate)
            own = any(t.candidate.cluster_queue == name for t in found)
            return (flavors.PREEMPT if own else flavors.RECLAIM), level

        return oracle


def _partial_admission(requests: list[flavors.PodSetRequest]) -> bool:
    """Whether any pod set of the workload has a minCount (SEMANTICS §5.9)."""
    for pod_set in requests:
        if pod_set.min_count:
            return True
    return False


def can_preempt(cq: models.ClusterQueue, tree: quota.QuotaTree) -> bool:
    """Whether any policy of ``cq`` allows a candidate at all (else there are none)."""
    policy = cq.spec.preemption
    if policy.within_cluster_queue != "Never":
        return True
    return policy.reclaim_within_cohort != "Never" and tree.cluster_queues[cq.metadata.name].parent is not None


def _join(first: str, second: str) -> str:
    return f"{first}; {second}" if first else second
