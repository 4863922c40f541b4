"""Capacity counting: phase 1 of a placement, how many pods and slices fit in every domain.

Why this module exists: counting is the hot loop of TAS (every leaf, every run) and the only
phase with a cache; it is one concept, apart from choosing domains. Per leaf, the node filters
(taints, nodeSelector, required node affinity, A.3) and the free capacity give a pod count;
inner domains sum their children, in slices at and above the slice level (A.6.2). With a
:class:`~kueue_es.scheduling.tas.requests.UsageToken`, the counts are kept with the tree and
updated only on the leaves whose usage changed. Kueue: pkg/cache/scheduler/tas_flavor_snapshot.go
(fillInCounts, fillInCountsHelper, fillLeafCounts), scheduling_simulator_default.go (per-node
filters), TASCachingRemainingResources.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence

from kueue_es.events import models
from kueue_es.scheduling.tas.domains import (
    MAX_INT32,
    PHASE_ONE_ENTRIES,
    Domain,
    PhaseOne,
    RunState,
    Stats,
    count_in,
)
from kueue_es.scheduling.tas.requests import Requests


def _tolerates(toleration: models.Toleration, taint: models.Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == taint.value


def _taint_string(taint: models.Taint) -> str:
    head = f"{taint.key}={taint.value}" if taint.value else taint.key
    return f"{head}:{taint.effect}"


def _matches_term(term: models.NodeSelectorTerm, labels: Mapping[str, str]) -> bool:
    if not term.match_expressions:
        return False
    for expr in term.match_expressions:
        value = labels.get(expr.key)
        match expr.operator:
            case "In":
                ok = value is not None and value in expr.values
            case "NotIn":
                ok = value is None or value not in expr.values
            case "Exists":
                ok = value is not None
            case "DoesNotExist":
                ok = value is None
            case "Gt" | "Lt":
                try:
                    left, right = int(value or ""), int(expr.values[0])
                except (ValueError, IndexError):
                    ok = False
                else:
                    ok = left > right if expr.operator == "Gt" else left < right
        if not ok:
            return False
    return True


class Counting(RunState):
    """Phase 1 of a placement run (A.6.2): every domain's counts."""

    def _phase_one(
        self,
        requests: Requests,
        leader_requests: Requests | None,
        node_selector: Mapping[str, str],
        tolerations: Sequence[models.Toleration],
        affinity: Sequence[models.NodeSelectorTerm],
    ) -> None:
        """Phase 1 (A.6.2): every domain's counts. With a usage token they come from the cache
        kept with the tree when a run with the same token key and the same inputs filled them:
        as they are for the same version, else (no leader, one slice layer) updated on the
        leaves the later versions changed and on their ancestors only. The tree's domains keep
        the last entry's counts: a run restores only what the previous run's phase 2 changed."""
        token, skeleton = self.token, self.skeleton
        if token is None:
            skeleton.live = None
            self._fill(requests, leader_requests, node_selector, tolerations, affinity)
            return
        key = (
            token.key,
            self.simulate_empty,
            tuple(sorted(requests.items())),
            tuple(sorted(leader_requests.items())) if leader_requests is not None else None,
            tuple(sorted(node_selector.items())),
            repr(tolerations),
            repr(affinity),
            self.slice_level,
            self.slice_size,
            tuple(sorted(self.size_at_level.items())),
        )
        cache: dict[Hashable, PhaseOne] = self.topology.__dict__.setdefault("_phase_one", {})
        entry: PhaseOne | None = cache.get(key)
        plain = not self.leader_total and not self.size_at_level
        changed: set[str] | None = None
        if entry is not None and entry.version != token.version:
            if plain and entry.version < token.version <= len(token.changes):
                changed = set()
                for ids in token.changes[entry.version : token.version]:
                    changed.update(ids)
                if len(changed) * 4 > len(self.leaves):
                    changed = None  # most leaves changed: fill afresh
            if changed is None:
                entry = None
        if entry is None:
            skeleton.live = None
            self._fill(requests, leader_requests, node_selector, tolerations, affinity)
            if len(cache) >= PHASE_ONE_ENTRIES:
                cache.clear()
            counts = [(d.pod_count, d.slice_count, d.pcwl, d.scwl, d.leader_count) for d in self.domains]
            entry = cache[key] = PhaseOne(token.version, counts, self.limiting, self.stats)
            skeleton.live, skeleton.dirty = entry, []
            return
        counts = entry.counts
        restore = skeleton.dirty if skeleton.live is entry else self.domains
        for dom in restore:
            dom.pod_count, dom.slice_count, dom.pcwl, dom.scwl, dom.leader_count = counts[dom.idx]
        skeleton.live, skeleton.dirty = entry, []
        self.limiting, self.stats = entry.limiting, entry.stats
        if changed is None:
            return
        entry.version = token.version
        by_id = self.per_level[-1]
        leaves = [found for leaf_id in changed if (found := by_id.get(leaf_id)) is not None]
        if not leaves:
            return
        stats = self.stats
        for dom in leaves:
            res = self.limiting.pop(dom, None)
            if res is not None:
                stats.resources[res] -= 1
                if not stats.resources[res]:
                    del stats.resources[res]
        filtered = Stats()  # the filters do not depend on usage: their exclusions are counted already
        self._fill_leaves(requests, leader_requests, node_selector, tolerations, affinity, leaves, filtered)
        for res, n in filtered.resources.items():
            stats.resources[res] = stats.resources.get(res, 0) + n
        for dom in self._fill_inner_plain(leaves):
            counts[dom.idx] = (dom.pod_count, dom.slice_count, dom.pcwl, dom.scwl, dom.leader_count)

    def _fill(
        self,
        requests: Requests,
        leader_requests: Requests | None,
        node_selector: Mapping[str, str],
        tolerations: Sequence[models.Toleration],
        affinity: Sequence[models.NodeSelectorTerm],
    ) -> None:
        """Phase 1 from scratch: counts reset, leaves, then the inner domains bottom-up."""
        for dom in self.domains:
            dom.pod_count = dom.slice_count = dom.pcwl = dom.scwl = dom.leader_count = 0
        self._fill_leaves(requests, leader_requests, node_selector, tolerations, affinity, self.leaves, self.stats)
        if self.leader_total or self.size_at_level:
            for root in self.roots:
                self._fill_inner(root, 0)
        else:
            self._fill_inner_plain(None)

    def _fill_inner_plain(self, changed: list[Domain] | None) -> list[Domain]:
        """:meth:`_fill_inner` without a leader and without inner slice layers, level by level
        upwards: a domain's pods (and pods with leader) are its children's sum; its slices are
        pods // slice size at the slice level, the children's sum above it, 0 below. With
        ``changed`` (leaves), only those leaves' slices and their ancestors are recomputed, and
        returned with the leaves ([] without ``changed``)."""
        last = len(self.levels) - 1
        slice_level, size = self.slice_level, self.slice_size
        leaves = self.leaves if changed is None else changed
        if last == slice_level:
            for dom in leaves:
                dom.slice_count = dom.scwl = dom.pod_count // size
        if changed is None:
            levels: list[Iterable[Domain]] = [self.per_level[level].values() for level in range(last)]
        else:
            per_level: list[dict[int, Domain]] = [{} for _ in range(last)]
            for dom in changed:
                parent = dom.parent
                while parent is not None:
                    bucket = per_level[parent.level]
                    if id(parent) in bucket:
                        break
                    bucket[id(parent)] = parent
                    parent = parent.parent
            levels = [bucket.values() for bucket in per_level]
        for level in range(last - 1, -1, -1):
            for dom in levels[level]:
                children = dom.children
                pods = 0
                for child in children:
                    pods += child.pod_count
                dom.pod_count = dom.pcwl = pods
                if level == slice_level:
                    slices = pods // size
                elif level < slice_level:
                    slices = 0
                    for child in children:
                        slices += child.slice_count
                else:
                    slices = 0
                dom.slice_count = dom.scwl = slices
        if changed is None:
            return []
        return [*changed, *(dom for bucket in levels for dom in bucket)]

    def _remaining(self, leaf_id: str, free: Mapping[str, int]) -> Requests:
        remaining = dict(free)
        sources = [self.assumed.get(leaf_id, {})]
        if not self.simulate_empty:
            sources.append(self.tas_usage.get(leaf_id, {}))
        for usage in sources:
            for res, amount in usage.items():
                remaining[res] = remaining.get(res, 0) - amount
        return remaining

    def _fill_leaves(
        self,
        requests: Requests,
        leader_requests: Requests | None,
        node_selector: Mapping[str, str],
        tolerations: Sequence[models.Toleration],
        affinity: Sequence[models.NodeSelectorTerm],
        leaves: Sequence[Domain],
        stats: Stats,
    ) -> None:
        """Phase 1 at ``leaves`` (A.3 filters, A.6.2 counts), exclusions counted in ``stats``
        (leaves fitting no pod also in ``self.limiting``); Kueue fillInCounts/fillLeafCounts.
        A leaf the filters exclude keeps its counts (0 after a reset).

        The hot loop of a placement (every leaf, every run): only the requested resources are
        looked at, and without a leader the count with the leader is the count itself."""
        all_tolerations = [*tolerations, *self.topology.tolerations]
        items = sorted(requests.items())
        assumed = self.assumed
        usage: Mapping[str, Mapping[str, int]] = {} if self.simulate_empty else self.tas_usage
        limited = self.limiting
        if leaves is self.leaves:
            stats.total += len(leaves)
        for dom in leaves:
            leaf = dom.leaf
            assert leaf is not None  # leaves only
            node = leaf.node
            if node is not None and (node.spec.taints or node_selector or affinity):
                untolerated = next(
                    (
                        t
                        for t in node.spec.taints
                        if t.effect in ("NoSchedule", "NoExecute")
                        and not any(_tolerates(x, t) for x in all_tolerations)
                    ),
                    None,
                )
                if untolerated is not None:
                    name = _taint_string(untolerated)
                    stats.taints[name] = stats.taints.get(name, 0) + 1
                    continue
                labels = node.metadata.labels
                if any(labels.get(k) != v for k, v in node_selector.items()):
                    stats.node_selector += 1
                    continue
                if affinity and not any(_matches_term(term, labels) for term in affinity):
                    stats.affinity += 1
                    continue
            if leader_requests is not None:
                remaining = self._remaining(leaf.id, leaf.free)
                dom.pod_count, limiting = count_in(requests, remaining)
                if dom.pod_count == 0 and limiting:
                    stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
                    limited[dom] = limiting
                dom.leader_count = 0
                if count_in(leader_requests, remaining)[0] > 0:
                    dom.leader_count = 1
                    for res, amount in leader_requests.items():
                        remaining[res] = remaining.get(res, 0) - amount
                dom.pcwl = count_in(requests, remaining)[0]
                continue
            free = leaf.free
            taken_a = assumed.get(leaf.id)
            taken_u = usage.get(leaf.id)
            best, limiting = -1, ""
            for res, value in items:
                if value == 0:
                    count = MAX_INT32
                else:
                    cap = free.get(res, 0)
                    if taken_a:
                        cap -= taken_a.get(res, 0)
                    if taken_u:
                        cap -= taken_u.get(res, 0)
                    count = min(cap // value, MAX_INT32) if cap > 0 else 0
                if best < 0 or count < best:
                    best, limiting = count, res
            if best < 0:
                best = MAX_INT32
            dom.pod_count = dom.pcwl = best
            dom.leader_count = 0
            if best == 0 and limiting:
                stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
                limited[dom] = limiting

    def _fill_affinity(
        self,
        node_selector: Mapping[str, str],
        tolerations: Sequence[models.Toleration],
        affinity: Sequence[models.NodeSelectorTerm],
        preferred: Sequence[models.PreferredSchedulingTerm],
    ) -> None:
        """Preferred node affinity scores (A.3.4, gate TASRespectNodeAffinityPreferred): a leaf
        whose node passes the filters scores the summed weights of the ``preferred`` terms its
        labels match, any other leaf 0; an inner domain scores the sum of its children. Kueue:
        scheduling_simulator_default.go (PreferredSchedulingTerms.Score of a matching node),
        tas_flavor_snapshot.go fillInCounts and fillInCountsHelper (summed up the tree). Apart from
        the counts because it does not depend on usage (so it needs no phase-1 cache)."""
        all_tolerations = [*tolerations, *self.topology.tolerations]
        for dom in self.domains:  # children before parents
            if dom.leaf is None:
                dom.affinity = sum(child.affinity for child in dom.children)
                continue
            node = dom.leaf.node
            dom.affinity = 0
            if node is None:
                continue  # a leaf above the hostname level: Kueue scores nodes only
            labels = node.metadata.labels
            if any(
                t.effect in ("NoSchedule", "NoExecute") and not any(_tolerates(x, t) for x in all_tolerations)
                for t in node.spec.taints
            ):
                continue
            if any(labels.get(k) != v for k, v in node_selector.items()):
                continue
            if affinity and not any(_matches_term(term, labels) for term in affinity):
                continue
            dom.affinity = sum(t.weight for t in preferred if t.weight and _matches_term(t.preference, labels))

    def _fill_inner(self, dom: Domain, level: int) -> None:
        """Phase 1 bottom-up (A.6.2); Kueue fillInCountsHelper."""
        if not dom.children:
            if level == self.slice_level:
                dom.slice_count = dom.pod_count // self.slice_size
                dom.scwl = dom.pcwl // self.slice_size
            return
        pods = slices = leader = 0
        contributor = False
        min_pod_diff = min_slice_diff = MAX_INT32
        inner = self.size_at_level.get(level + 1)
        for child in dom.children:
            self._fill_inner(child, level + 1)
            child_pods, child_pcwl = child.pod_count, child.pcwl
            if inner is not None:
                child_pods, child_pcwl = (child_pods // inner) * inner, (child_pcwl // inner) * inner
            pods += child_pods
            slices += child.slice_count
            if not self.leader_total or child.leader_count > 0:
                contributor = True
                min_pod_diff = min(child_pods - child_pcwl, min_pod_diff)
                min_slice_diff = min(child.slice_count - child.scwl, min_slice_diff)
            leader = max(leader, child.leader_count)
        dom.pod_count = pods
        scwl = 0
        if contributor:
            dom.pcwl = pods - min_pod_diff
            scwl = slices - min_slice_diff
        else:
            dom.pcwl = 0
        dom.leader_count = leader
        if level == self.slice_level:
            slices = dom.pod_count // self.slice_size
            scwl = dom.pcwl // self.slice_size
        dom.slice_count, dom.scwl = slices, scwl
