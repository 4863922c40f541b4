"""Balanced placement: a preferred request spread evenly over the fewest domains (A.6.9).

Why this module exists: under the alpha gate TASBalancedPlacement (off by default), a preferred
request is not packed greedily but balanced: the highest per-domain threshold of slices that
still fits, on as few domains as greedy would use, chosen by dynamic programming; it falls back
to the greedy placement when that fails. Kueue: pkg/cache/scheduler/tas_balanced_placement.go
(findBestDomainsForBalancedPlacement, applyBalancedPlacementAlgorithm, evaluateGreedyAssignment,
pruneDomainsBelowThreshold, selectOptimalDomainSetToFit, placeSlicesOnDomainsBalanced).
"""

from __future__ import annotations

from collections.abc import Sequence

from kueue_es.scheduling.tas.domains import Domain, clone, entropy, prune_node
from kueue_es.scheduling.tas.greedy import Greedy


class Balanced(Greedy):
    """Balanced placement over a run's counts (falls back to :class:`~kueue_es.scheduling.tas.greedy.Greedy`)."""

    # -- balanced placement (A.6.9; Kueue tas_balanced_placement.go) --

    def _balanced(self, requested_level: int) -> tuple[int, list[Domain]] | None:
        """Balanced placement for a preferred request: the level and the domains (working copies
        carrying their share), or None to fall back to A.6.4. Kueue
        findBestDomainsForBalancedPlacement + applyBalancedPlacementAlgorithm."""
        slices = self.count // self.slice_size
        leaders = self.leader_total
        if requested_level == 0:
            groups = [list(self.per_level[0].values())]
        else:
            parents = sorted(self.per_level[requested_level - 1].values(), key=lambda d: d.values)
            groups = [p.children for p in parents]
        best_threshold, best_count, best = 0, 0, None
        for group in groups:
            candidates = [clone(d, None) for d in group]
            lower = self._lower(candidates, requested_level)
            greedy = self._evaluate_greedy(lower, slices, leaders)
            if greedy is None or greedy[0] == 0:
                continue
            used, last_leader, last = greedy
            threshold = slices // used
            if last_leader is not None:
                threshold = min(threshold, last_leader.scwl)
            if last is not None:
                threshold = min(threshold, last.slice_count)
            reserved = threshold
            if leaders > 0 and last is not None:
                reserved = min(threshold, last.scwl)
            if threshold < best_threshold:
                continue
            self._prune(candidates, threshold)
            after = self._evaluate_greedy(candidates, slices, leaders)
            if after is None and reserved < threshold:
                # retry with a lower threshold that keeps room for the leader
                if reserved <= 0 or reserved < best_threshold:
                    continue
                threshold = reserved
                candidates = [clone(d, None) for d in group]
                self._prune(candidates, threshold)
                after = self._evaluate_greedy(candidates, slices, leaders)
            if after is None:
                continue
            if threshold > best_threshold or (threshold == best_threshold and after[0] < best_count):
                best_threshold, best_count, best = threshold, after[0], candidates
        if best_threshold <= 0 or best is None:
            return None
        fit_level = requested_level
        if requested_level < self.slice_level:
            # The set must hold the request's pods in whole slices (Kueue passes the slice size);
            # sized in single pods, a domain with enough pods but too few slices could win.
            size = self.slice_size if self.gates.balanced_slice_size else 1
            chosen = self._optimal_set(best, slices, leaders, size, by_entropy=True)
            if chosen is None:
                return None
            best = [c for d in chosen for c in d.children]
            fit_level = requested_level + 1
        placed = self._place_balanced(best, slices, leaders, best_threshold)
        return None if placed is None else (fit_level, placed)

    def _lower(self, domains: list[Domain], level: int) -> list[Domain]:
        if level < self.slice_level:
            return [c for d in domains for c in d.children]
        return domains

    def _evaluate_greedy(
        self, domains: Sequence[Domain], slices: int, leaders: int
    ) -> tuple[int, Domain | None, Domain | None] | None:
        """Simulate the greedy take-whole walk: (domains used, last leader domain, last domain),
        or None when the request does not fit (Kueue evaluateGreedyAssignment)."""
        used = 0
        last_leader = last = None
        remaining, remaining_leaders = slices, leaders
        if leaders > 0:
            ordered = self._sorted_with_leader(domains)
            idx = 0
            while remaining_leaders > 0 and idx < len(ordered) and ordered[idx].leader_count > 0:
                dom = ordered[idx]
                used += 1
                last_leader = dom
                remaining_leaders -= dom.leader_count
                remaining -= dom.scwl
                idx += 1
            rest = self._sorted(ordered[idx:])
        else:
            rest = self._sorted(domains)
        if remaining_leaders > 0:
            return None
        for dom in rest:
            if remaining <= 0 or dom.slice_count <= 0:
                break
            used += 1
            last = dom
            remaining -= dom.slice_count
        if remaining > 0:
            return None
        return used, last_leader, last

    def _prune(self, domains: list[Domain], threshold: int) -> None:
        """Drop children (then domains) holding fewer than ``threshold`` slices; a domain that
        can no longer hold the leader at the threshold loses its leader capacity (Kueue
        pruneDomainsBelowThreshold)."""
        leader = self.leader_total > 0
        for dom in domains:
            for child in dom.children:
                prune_node(child, threshold, leader)
        for dom in domains:
            self._fill_inner(dom, dom.level)
            prune_node(dom, threshold, leader)

    def _optimal_set(
        self, domains: Sequence[Domain], slices: int, leaders: int, size: int, *, by_entropy: bool
    ) -> list[Domain] | None:
        """The domains, as few as greedy would use, holding the leaders and ``slices`` slices
        with the least excess capacity, found by dynamic programming over (leaders left, pods
        left); None when greedy does not fit (Kueue selectOptimalDomainSetToFit)."""
        greedy = self._evaluate_greedy(domains, slices, leaders)
        if greedy is None:
            return None
        k = greedy[0]
        if by_entropy:
            ordered = sorted(domains, key=lambda d: (-d.leader_count, -d.scwl, -entropy(d.children), d.values))
        else:
            ordered = sorted(domains, key=lambda d: d.values)
        states: list[dict[tuple[int, int], list[Domain]]] = [{} for _ in range(k + 1)]
        states[0][(leaders, slices * size)] = []
        for dom in ordered:
            for i in range(k, 0, -1):
                target = states[i]
                for before in sorted(states[i - 1]):
                    b_leaders, b_pods = before
                    if b_leaders <= 0 and b_pods <= 0:
                        continue
                    taken = [*states[i - 1][before], dom]
                    if b_leaders > 0 and dom.leader_count > 0:
                        target.setdefault((b_leaders - dom.leader_count, b_pods - dom.pcwl), taken)
                    if dom.slice_count > 0:
                        target.setdefault((b_leaders, b_pods - dom.pod_count), taken)
        done = [key for key in states[k] if key[0] == 0 and key[1] <= 0]
        if not done:
            return None
        return states[k][max(done)]

    def _place_balanced(self, domains: list[Domain], slices: int, leaders: int, threshold: int) -> list[Domain] | None:
        """Give each domain of the optimal set ``threshold`` slices, then the extras in sorted
        order (leader domains first); None on failure (Kueue placeSlicesOnDomainsBalanced)."""
        chosen = self._optimal_set(domains, slices, leaders, self.slice_size, by_entropy=False)
        if chosen is None or slices < len(chosen) * threshold:
            return None
        chosen = self._sorted_with_leader(chosen)
        extra = slices - len(chosen) * threshold
        leaders_left = leaders
        for dom in chosen:
            if leaders_left > 0:
                take = min(dom.scwl - threshold, extra)
                dom.leader_count = 1
                leaders_left -= 1
            elif extra > 0:
                take = min(dom.slice_count - threshold, extra)
                dom.leader_count = 0
            else:
                take = dom.leader_count = 0
            dom.slice_count = dom.scwl = threshold + take
            dom.pod_count = dom.slice_count * self.slice_size
            dom.pcwl = dom.pod_count - dom.leader_count
            extra -= take
        if extra > 0 or leaders_left > 0:
            return None
        return chosen
