"""Greedy placement: phase 2 of a placement, which domains take the pods (A.6.3-A.6.5).

Why this module exists: choosing domains is its own concept once the counts are known. From
the requested level, find the level and the domains that hold the request (one domain when one
fits, else the largest first and a best fit for the last, climbing a level for a preferred
request), then walk down level by level giving each chosen domain its share, the leader first.
Sort orders: BestFit (most free first) or LeastFreeCapacity (unconstrained under
TASProfileMixed). Kueue: pkg/cache/scheduler/tas_flavor_snapshot.go (findLevelWithFitDomains,
sortedDomains, sortedDomainsWithLeader, findBestFitDomainIdx, prioritizeLeaderDomain,
updateCountsToMinimumGeneric, notFitMessage).
"""

from __future__ import annotations

from collections.abc import Sequence

from kueue_es.scheduling.tas.capacity import Counting
from kueue_es.scheduling.tas.domains import MAX_INT32, Domain


class Greedy(Counting):
    """Phase 2 of a placement run: the greedy choice of domains and the descent."""

    # -- sort orders and best fit (A.6.3) --

    # With preferred node affinity scores (A.3.4) the higher score comes first, before capacity
    # (Kueue sortedDomains / sortedDomainsWithLeader under TASRespectNodeAffinityPreferred).

    def _sorted(self, domains: Sequence[Domain]) -> list[Domain]:
        sign = 1 if self.lfc else -1
        if self.prefer_affinity:
            return sorted(domains, key=lambda d: (-d.affinity, sign * d.slice_count, d.pod_count, d.values))
        return sorted(domains, key=lambda d: (sign * d.slice_count, d.pod_count, d.values))

    def _sorted_with_leader(self, domains: Sequence[Domain]) -> list[Domain]:
        sign = 1 if self.lfc else -1
        if self.prefer_affinity:
            return sorted(domains, key=lambda d: (-d.leader_count, -d.affinity, sign * d.scwl, d.pcwl, d.values))
        return sorted(domains, key=lambda d: (-d.leader_count, sign * d.scwl, d.pcwl, d.values))

    def _top_affinity_tier(self, domains: Sequence[Domain]) -> Sequence[Domain]:
        """The leading domains sharing the first one's affinity score, so a best fit never trades
        a higher score for a tighter fit (Kueue topAffinityTierDomains); all without scores."""
        if not self.prefer_affinity or not domains:
            return domains
        score = domains[0].affinity
        for i, dom in enumerate(domains):
            if dom.affinity != score:
                return domains[:i]
        return domains

    def _best_fit(self, domains: Sequence[Domain], needed: int, leaders: int, attr: str) -> Domain:
        domains = self._top_affinity_tier(domains)
        best, best_count = None, MAX_INT32
        for dom in domains:
            if dom.leader_count < leaders:
                continue
            value = getattr(dom, attr)
            if needed <= value < best_count:
                best, best_count = dom, value
        return best if best is not None else domains[0]

    def _best_fit_slices(self, domains: Sequence[Domain], needed: int, leaders: int) -> Domain:
        return self._best_fit(domains, needed, leaders, "scwl" if leaders > 0 else "slice_count")

    def _best_fit_pods(self, domains: Sequence[Domain], needed: int, leaders: int) -> Domain:
        return self._best_fit(domains, needed, leaders, "pcwl" if leaders > 0 else "pod_count")

    def _not_fit(self, fit: int, total: int, level: int) -> str:
        name = self.topology.topology_name
        if self.layers:
            text = f'topology "{name}" doesn\'t allow to fit'
            candidates = list(self.per_level[level].values())
            if candidates:
                best = min(candidates, key=lambda d: (-d.slice_count, d.id))
                for layer in self.layers:
                    target = self.levels.index(layer.topology)
                    fits = self._slices_in_subtree(best, level, target, layer.size)
                    text += f"; {fits}/{self.count // layer.size} slice(s) fit on level {layer.topology}"
            return text + self.stats.suffix()
        unit = "pod" if self.slice_size == 1 else "slice"
        if fit == 0:
            text = f'topology "{name}" doesn\'t allow to fit any of {total} {unit}(s)'
        else:
            text = f'topology "{name}" allows to fit only {fit} out of {total} {unit}(s)'
        return text + self.stats.suffix()

    def _slices_in_subtree(self, dom: Domain, level: int, target: int, size: int) -> int:
        if level == target:
            return dom.pod_count // size
        return sum(self._slices_in_subtree(c, level + 1, target, size) for c in dom.children)

    # -- phase 2a: the level and the top domains (A.6.4) --

    def _level_with_fit_domains(self, level: int) -> tuple[int, list[Domain]] | str:
        domains = list(self.per_level[level].values())
        if not domains:
            return f"no topology domains at level: {self.levels[level]}"
        if not self.leader_total and not self.prefer_affinity:
            found = self._one_fit_domain(domains)
            if found is not None:
                return level, [found]
        ordered = self._sorted_with_leader(domains)
        top = ordered[0]
        slices = self.count // self.slice_size
        leaders = self.leader_total
        if not self.lfc and top.scwl >= slices and top.leader_count >= leaders:
            top = self._best_fit_slices(ordered, slices, leaders)
        if self.lfc:
            for cand in ordered:
                capacity = cand.slice_count
                if leaders > 0:
                    if cand.leader_count < leaders:
                        continue
                    capacity = cand.scwl
                if capacity >= slices:
                    return level, [cand]
            if self.required:
                return self._not_fit(ordered[-1].pod_count, slices, level)
        if top.scwl >= slices and top.leader_count >= leaders:
            return level, [top]
        if self.required:
            if self.gates.preferred_affinity:
                # the first domain by score may be too small: a lower-scored one that holds the
                # request wins over failing (Kueue findLevelWithFitDomains, TASRespectNodeAffinityPreferred)
                for i in range(1, len(ordered)):
                    dom = ordered[i]
                    if dom.scwl >= slices and dom.leader_count >= leaders:
                        return level, [self._best_fit_slices(ordered[i:], slices, leaders)]
            return self._not_fit(top.slice_count, slices, level)
        if level > 0 and not self.unconstrained:
            return self._level_with_fit_domains(level - 1)
        results: list[Domain] = []
        remaining, remaining_leaders = slices, leaders
        ordered = self._prioritize_leader(ordered, self.count, leaders, self.slice_size, True)
        idx = 0
        while remaining_leaders > 0 and idx < len(ordered) and ordered[idx].leader_count > 0:
            dom = ordered[idx]
            if not self.lfc and dom.scwl >= remaining:
                dom = self._best_fit_slices(ordered[idx:], remaining, remaining_leaders)
            results.append(dom)
            remaining_leaders -= dom.leader_count
            remaining -= dom.scwl
            idx += 1
        if remaining_leaders > 0:
            return self._not_fit(leaders - remaining_leaders, slices, level)
        rest = self._sorted(ordered[idx:])
        for i, dom in enumerate(rest):
            if remaining <= 0:
                break
            if not self.lfc and dom.slice_count >= remaining:
                dom = self._best_fit_slices(rest[i:], remaining, 0)
            results.append(dom)
            remaining -= dom.slice_count
        if remaining > 0:
            return self._not_fit(slices - remaining, slices, level)
        return level, results

    def _one_fit_domain(self, domains: list[Domain]) -> Domain | None:
        """Without a leader: the single domain the first steps of
        :meth:`_level_with_fit_domains` pick when one domain holds all slices, found without
        sorting (the first fitting domain in LeastFreeCapacity order; under BestFit, the
        fitting domain with the fewest slices, ties in BestFit order); None otherwise."""
        slices = self.count // self.slice_size
        if self.lfc:
            fitting = [d for d in domains if d.slice_count >= slices]
            if not fitting:
                return None
            return min(fitting, key=lambda d: (-d.leader_count, d.scwl, d.pcwl, d.values))

        def order(d: Domain) -> tuple[int, int, int, tuple[str, ...]]:
            return (-d.leader_count, -d.scwl, d.pcwl, d.values)

        top = min(domains, key=order)
        if top.scwl < slices:
            return None
        fitting = [d for d in domains if slices <= d.slice_count < MAX_INT32]  # as _best_fit
        best = min(fitting, key=lambda d: (d.slice_count, order(d))) if fitting else top
        return best if best.scwl >= slices else None

    def _prioritize_leader(
        self, domains: list[Domain], count: int, leaders: int, size: int, slices: bool
    ) -> list[Domain]:
        """Move to the front the first leader-capable domain whose leader penalty still leaves
        enough capacity (Kueue prioritizeLeaderDomain)."""
        if leaders == 0 or len(domains) < 2:
            return domains
        required = count // size if slices else count
        available = sum(d.slice_count if slices else d.pod_count for d in domains)
        for i, dom in enumerate(domains):
            if dom.leader_count < leaders:
                continue
            penalty = dom.slice_count - dom.scwl if slices else dom.pod_count - dom.pcwl
            if available - penalty < required:
                continue
            if i == 0:
                return domains
            return [dom, *domains[:i], *domains[i + 1 :]]
        return domains

    # -- phase 2b: trim and descend (A.6.5) --

    def _update_counts(self, domains: list[Domain], count: int, leaders: int, size: int, slices: bool) -> list[Domain]:
        """Assign ``count`` pods (in units of ``size`` when ``slices``) over ``domains`` greedily:
        whole domains in order, best fit for the last (Kueue updateCountsToMinimumGeneric)."""
        self.skeleton.dirty.extend(domains)  # restored from the phase-1 entry by the next run
        domains = self._prioritize_leader(domains, count, leaders, size, slices)
        result: list[Domain] = []
        remaining = count // size if slices else count
        remaining_leaders = leaders
        primary, with_leader = ("slice_count", "scwl") if slices else ("pod_count", "pcwl")
        unit = size if slices else 1
        for i, dom in enumerate(domains):
            if remaining_leaders > 0:
                if not self.lfc and getattr(dom, with_leader) >= remaining and dom.leader_count >= remaining_leaders:
                    if slices:
                        dom = self._best_fit_slices(domains[i:], remaining, remaining_leaders)
                    else:
                        dom = self._best_fit_pods(domains[i:], remaining, remaining_leaders)
                result.append(dom)
                available = getattr(dom, with_leader)
                if available >= remaining and dom.leader_count >= remaining_leaders:
                    setattr(dom, primary, remaining)
                    dom.leader_count = remaining_leaders
                    dom.pod_count = remaining * unit
                    return result
                if available > remaining:
                    available = remaining
                    setattr(dom, with_leader, remaining)
                if dom.leader_count > remaining_leaders:
                    dom.leader_count = remaining_leaders
                setattr(dom, primary, available)
                dom.pod_count = available * unit
                remaining_leaders -= dom.leader_count
                remaining -= available
                continue
            if not self.lfc and getattr(dom, primary) >= remaining:
                dom = (
                    self._best_fit_slices(domains[i:], remaining, 0)
                    if slices
                    else self._best_fit_pods(domains[i:], remaining, 0)
                )
            dom.leader_count = 0
            result.append(dom)
            if getattr(dom, primary) >= remaining:
                dom.pod_count = remaining * unit
                if slices:
                    dom.slice_count = remaining
                return result
            if slices:
                dom.pod_count = dom.slice_count * unit
            remaining -= getattr(dom, primary)
        return []  # Kueue logs "unexpected remainingCount" and places nothing
