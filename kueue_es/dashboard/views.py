"""What the dashboard's JSON endpoints answer, built from a folded :class:`ClusterState` (no I/O, no clock).

- :func:`overview`: the cohort tree, each ClusterQueue's quota and usage per flavor and resource
  (nominal, used, borrowed, lent), the LocalQueues with their pending workloads and positions as
  Kueue's visibility API gives them (:func:`kueue_es.services.visibility.api.local_queue_pending`),
  and the workloads as ``kueue-es list workload`` shows them (:func:`kueue_es.explain.list_rows`).
- :func:`quota_rows`: one ClusterQueue's quota per flavor and resource, with what it lends (:func:`lending`);
- :func:`cohort_rows`: one cohort's, its own quota counted in its subtree's, borrowed and lent towards its parent.

Amounts are integers in Kueue's units for the resource (CPU millicores, memory bytes, counts), with
the Kubernetes quantity beside them for people (``"9"``, ``"36Gi"``); times are ms since the epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kueue_es.events.quantities import format_amount
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState

Key = tuple[str, str, str]  # (cluster queue, flavor, resource)


@dataclass
class Lending:
    """Who lends the quota a cohort tree's members borrow, per flavor and resource (:func:`lending`), in the
    resource's units; an amount not listed is 0.

    ``queues[(cq, flavor, resource)]``: what others use of ClusterQueue ``cq``'s unused nominal quota;
    ``cohorts[(cohort, flavor, resource)]``: what the cohort's parent gives others of what the cohort's
    subtree leaves unused (0 for a root: it lends to no parent); ``own[(cohort, flavor, resource)]``: what
    is used of the cohort's own nominal quota (its ``resourceGroups``: a pool for its members, which it
    also lends up); ``borrowed[(cohort, flavor, resource)]``: what the cohort's subtree takes from its
    parent (0 for a root)."""

    queues: dict[Key, int] = field(default_factory=dict)
    cohorts: dict[Key, int] = field(default_factory=dict)
    own: dict[Key, int] = field(default_factory=dict)
    borrowed: dict[Key, int] = field(default_factory=dict)


def lending(state: ClusterState) -> Lending:
    """Who lends what in each cohort tree of ``state`` now (:class:`Lending`).

    Kueue pools a cohort's unused quota and records only what each ClusterQueue borrows
    (``status.flavorsUsage[].resources[].borrowed``, pkg/cache/clusterqueue.go), not who lent it. Here,
    with Kueue's figures of the quota tree (:mod:`kueue_es.projections.quota`: a cohort's subtree quota
    is its own nominal quota plus what its members may lend it, its usage what they use beyond what
    their ``lendingLimit`` keeps for them): a node borrows from its parent what it uses beyond its
    subtree quota (a root borrows from no one). What a cohort's members borrow beyond what the cohort
    itself borrows from its parent, plus what the cohort lends to its parent, comes first from the
    cohort's own nominal quota (the shared pool Kueue's Cohort ``resourceGroups`` describe), then from
    its members with unused lendable quota (unused subtree quota, capped by ``lendingLimit``), in
    proportion to that unused quota (rounded down, the remainder to the first in name order,
    ClusterQueues before cohorts), top down. So no member lends more than it leaves unused, and in a
    cohort tree the ClusterQueues' borrowed amounts add up to their lent amounts plus what is used of
    the cohorts' own quota."""
    tree = quota.build(state)
    out = Lending()

    def borrowed(node: quota.Node, fr: quota.FR) -> int:
        if node.parent is None:
            return 0
        return max(0, node.usage.get(fr, 0) - node.subtree.get(fr, 0))

    def spare(node: quota.Node, fr: quota.FR) -> int:
        """Unused quota ``node`` can lend of ``fr``."""
        free = max(0, node.subtree.get(fr, 0) - node.usage.get(fr, 0))
        limit = node.quotas.get(fr)
        if limit is not None and limit.lending_limit is not None:
            free = min(free, limit.lending_limit)
        return free

    def share(node: quota.Node, fr: quota.FR, lent_up: int) -> None:
        """Give the cohort ``node``'s own pool and children their part of what it lends (inside and to its parent)."""
        demand = sum(borrowed(c, fr) for c in node.children) - borrowed(node, fr) + lent_up
        own = node.quotas[fr].nominal if fr in node.quotas else 0
        from_own = min(max(0, demand), own)
        if from_own:
            out.own[(node.name, fr[0], fr[1])] = from_own
        spares = [(c, spare(c, fr)) for c in sorted(node.children, key=lambda c: (c.is_cohort, c.name))]
        pool = sum(s for _, s in spares)
        to_give = min(max(0, demand - from_own), pool)
        given = {c.name: (to_give * s // pool if pool else 0) for c, s in spares}
        remainder = to_give - sum(given.values())
        for c, s in spares:
            if remainder <= 0:
                break
            extra = min(remainder, s - given[c.name])
            given[c.name] += extra
            remainder -= extra
        for child, _ in spares:
            amount = given[child.name]
            key = (child.name, fr[0], fr[1])
            if child.is_cohort:
                if amount:
                    out.cohorts[key] = amount
                if took := borrowed(child, fr):
                    out.borrowed[key] = took
                share(child, fr, amount)
            elif amount:
                out.queues[key] = amount

    for root in tree.cohorts.values():
        if root.parent is not None or root.in_cycle:
            continue
        for fr in sorted(root.subtree):
            share(root, fr, 0)
    return out


def quota_rows(state: ClusterState, name: str, lent: dict[Key, int]) -> list[dict[str, Any]]:
    """ClusterQueue ``name``'s quota per flavor and resource, in its resource groups' order: nominal, used,
    borrowed (used beyond nominal), lent (``lent``: :attr:`Lending.queues`), the limits (None: none), and each
    amount as a Kubernetes quantity in ``display``. Raises KeyError when the state has no such ClusterQueue."""
    cq = state.cluster_queues[name]
    rows = []
    for group in cq.spec.resource_groups:
        for fq in group.flavors:
            for rq in fq.resources:
                used = state.usage_of(name, fq.name, rq.name)
                amounts = {
                    "nominal": rq.nominal_quota,
                    "used": used,
                    "borrowed": max(0, used - rq.nominal_quota),
                    "lent": lent.get((name, fq.name, rq.name), 0),
                    "borrowingLimit": rq.borrowing_limit,
                    "lendingLimit": rq.lending_limit,
                }
                rows.append(
                    {
                        "flavor": fq.name,
                        "resource": rq.name,
                        **amounts,
                        "display": {k: None if v is None else format_amount(rq.name, v) for k, v in amounts.items()},
                    }
                )
    return rows


def cohort_rows(state: ClusterState, name: str, members: list[dict[str, Any]], lent: Lending) -> list[dict[str, Any]]:
    """Cohort ``name``'s quota per flavor and resource, sorted: ``nominal`` (its own nominal quota plus its
    members', the whole subtree's, as Kueue's hierarchical cohorts count a Cohort's ``resourceGroups`` in
    its subtree), ``ownNominal`` (its own), ``used`` (what its subtree's ClusterQueues use), ``borrowed``
    (what the subtree takes from the parent cohort; 0 for a root), ``lent`` (what the parent gives others
    of what the subtree leaves unused; 0 for a root), ``ownLent`` (what is used of its own nominal quota),
    ``borrowingLimit``/``lendingLimit`` (its own, towards the parent; None: none) and ``display``.
    ``members``: the quota rows of its ClusterQueues and child cohorts (:func:`quota_rows`, this function)."""
    cohort = state.cohorts.get(name)
    own: dict[tuple[str, str], tuple[int, int | None, int | None]] = {}
    for group in cohort.spec.resource_groups if cohort is not None else []:
        for fq in group.flavors:
            for rq in fq.resources:
                own[(fq.name, rq.name)] = (rq.nominal_quota, rq.borrowing_limit, rq.lending_limit)
    sums: dict[tuple[str, str], dict[str, int]] = {fr: {"nominal": 0, "used": 0} for fr in own}
    for row in members:
        slot = sums.setdefault((row["flavor"], row["resource"]), {"nominal": 0, "used": 0})
        slot["nominal"] += row["nominal"]
        slot["used"] += row["used"]
    rows = []
    for (flavor, resource), slot in sorted(sums.items()):
        nominal, borrowing_limit, lending_limit = own.get((flavor, resource), (0, None, None))
        key = (name, flavor, resource)
        amounts = {
            "nominal": slot["nominal"] + nominal,
            "ownNominal": nominal,
            "used": slot["used"],
            "borrowed": lent.borrowed.get(key, 0),
            "lent": lent.cohorts.get(key, 0),
            "ownLent": lent.own.get(key, 0),
            "borrowingLimit": borrowing_limit,
            "lendingLimit": lending_limit,
        }
        rows.append(
            {
                "flavor": flavor,
                "resource": resource,
                **amounts,
                "display": {k: None if v is None else format_amount(resource, v) for k, v in amounts.items()},
            }
        )
    return rows


def cohort_tree(state: ClusterState, queues: dict[str, dict[str, Any]], lent: Lending) -> list[dict[str, Any]]:
    """The cohorts as a forest: each ``{"name", "implicit", "clusterQueues": [name...], "cohorts": [subtree...],
    "quota": [...]}``, the quota as :func:`cohort_rows` gives it (``queues``: :func:`overview`'s ClusterQueue
    entries by name; ``lent``: :func:`lending`); roots in name order."""
    names = set(state.cohorts) | {cq.spec.cohort_name for cq in state.cluster_queues.values() if cq.spec.cohort_name}
    parents = {n: (state.cohorts[n].spec.parent_name or "") if n in state.cohorts else "" for n in names}
    names |= {p for p in parents.values() if p}
    parents.update({p: "" for p in names if p not in parents})

    def build(name: str, seen: frozenset[str]) -> dict[str, Any]:
        members = sorted(n for n, cq in state.cluster_queues.items() if cq.spec.cohort_name == name)
        children = sorted(n for n, p in parents.items() if p == name and n not in seen)
        subtrees = [build(child, seen | {child}) for child in children]
        rows = [row for m in members for row in queues[m]["quota"]]
        rows += [row for sub in subtrees for row in sub["quota"]]
        return {
            "name": name,
            "implicit": name not in state.cohorts,
            "clusterQueues": members,
            "cohorts": subtrees,
            "quota": cohort_rows(state, name, rows, lent),
        }

    roots = sorted(n for n in names if not parents.get(n))
    return [build(root, frozenset({root})) for root in roots]


def _effective_priority(state: ClusterState, namespace: str, item: dict[str, Any]) -> int:
    """The effective priority of a visibility API item (the API shows the base one, as Kueue's): the
    workload's in ``state``, the item's own priority for one the fold does not hold."""
    from kueue_es.projections.cluster import effective_priority

    wl = state.workloads.get(f"{namespace}/{item['metadata']['name']}")
    return effective_priority(wl.workload, state) if wl is not None else int(item.get("priority", 0))


def overview(state: ClusterState, *, now_ms: int) -> dict[str, Any]:
    """Everything the main page shows, as of ``state`` at ``now_ms`` (ms since the epoch, the visibility
    order's clock): ``clusterQueues`` (name, cohort, strategy, stop policy, counts, ``quota``:
    :func:`quota_rows`), ``cohorts`` (:func:`cohort_tree`), ``standaloneClusterQueues``, ``localQueues``
    (namespace, name, ClusterQueue, ``pending``: the visibility API's items, ``admitted``) and
    ``workloads`` (kueuectl's list columns plus ``key``, ``jobKey`` and the ``reason`` it waits). Each
    pending item and workload carries its base ``priority`` (``spec.priority`` or its class's value, what
    the visibility API shows) and its ``effectivePriority``, the one the deciders order and preempt by
    (the priority boost added under the gate PriorityBoost)."""
    from kueue_es import explain
    from kueue_es.projections.cluster import effective_priority, priority_of
    from kueue_es.services.visibility import api

    lent = lending(state)
    queues: dict[str, dict[str, Any]] = {}
    for row in explain.status_report(state, now_ms=now_ms)["clusterQueues"]:
        name = row["name"]
        queues[name] = {
            "name": name,
            "cohort": row["cohort"],
            "queueingStrategy": row["queueingStrategy"],
            "stopPolicy": row["stopPolicy"],
            "pendingActive": row["pendingActive"],
            "pendingInadmissible": row["pendingInadmissible"],
            "quotaReserved": row["quotaReserved"],
            "admitted": row["admitted"],
            "quota": quota_rows(state, name, lent.queues),
        }
    local_queues = []
    for (ns, name), lq in sorted(state.local_queues.items()):
        reply = api.local_queue_pending(state, ns, name, {}, version=api.VERSIONS[0], now_ms=now_ms)
        items = reply.body.get("items", []) if reply.status == 200 else []
        local_queues.append(
            {
                "namespace": ns,
                "name": name,
                "clusterQueue": lq.spec.cluster_queue,
                "pending": [
                    {
                        "name": item["metadata"]["name"],
                        "priority": item.get("priority", 0),
                        "effectivePriority": _effective_priority(state, ns, item),
                        "positionInLocalQueue": item.get("positionInLocalQueue"),
                        "positionInClusterQueue": item.get("positionInClusterQueue"),
                    }
                    for item in items
                ],
                "admitted": sum(
                    1
                    for wl in state.workloads.values()
                    if wl.admitted
                    and wl.reservation is not None
                    and (wl.workload.metadata.namespace, wl.workload.spec.queue_name) == (ns, name)
                ),
            }
        )
    workloads = []
    for row in explain.list_rows(state, "workload", namespace=None, now_ms=now_ms):
        key = f"{row['NAMESPACE']}/{row['NAME']}"
        wl = state.workloads[key]
        waiting = row["STATUS"] == "PENDING"
        workloads.append(
            {
                "key": key,
                "namespace": row["NAMESPACE"],
                "name": row["NAME"],
                "jobType": row["JOB TYPE"],
                "jobName": row["JOB NAME"],
                "jobKey": f"{row['NAMESPACE']}/{row['JOB NAME']}" if row["JOB NAME"] else "",
                "localQueue": row["LOCALQUEUE"],
                "clusterQueue": row["CLUSTERQUEUE"],
                "status": row["STATUS"],
                "positionInLocalQueue": row["POSITION IN QUEUE"] if row["POSITION IN QUEUE"] != "" else None,
                "priority": priority_of(wl.workload, state),
                "effectivePriority": effective_priority(wl.workload, state),
                "age": row["AGE"],
                "reason": wl.pending_reason if waiting else "",
                "message": wl.pending_message if waiting else "",
            }
        )
    return {
        "clusterQueues": list(queues.values()),
        "cohorts": cohort_tree(state, queues, lent),
        "standaloneClusterQueues": sorted(n for n, q in queues.items() if not q["cohort"]),
        "localQueues": local_queues,
        "workloads": workloads,
    }
