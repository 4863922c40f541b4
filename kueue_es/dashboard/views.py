"""What the dashboard's JSON endpoints answer, built from a folded :class:`ClusterState` (no I/O, no clock).

- :func:`overview`: the cohort tree, each ClusterQueue's quota and usage per flavor and resource
  (nominal, used, borrowed, lent), the LocalQueues with their pending workloads and positions as
  Kueue's visibility API gives them (:func:`kueue_es.services.visibility.api.local_queue_pending`),
  and the workloads as ``kueue-es list workload`` shows them (:func:`kueue_es.explain.list_rows`).
- :func:`quota_rows`: one ClusterQueue's quota per flavor and resource, with :func:`lent_amounts`.

Amounts are integers in Kueue's units for the resource (CPU millicores, memory bytes, counts), with
the Kubernetes quantity beside them for people (``"9"``, ``"36Gi"``); times are ms since the epoch.
"""

from __future__ import annotations

from typing import Any

from kueue_es.events.quantities import format_amount
from kueue_es.projections import quota
from kueue_es.projections.cluster import ClusterState

Key = tuple[str, str, str]  # (cluster queue, flavor, resource)


def lent_amounts(state: ClusterState) -> dict[Key, int]:
    """Per ClusterQueue, flavor and resource, how much of its unused nominal quota others in its cohort
    tree use now (its "lent" quota), in the resource's units.

    Kueue pools a cohort's unused quota and records only what each ClusterQueue borrows
    (``status.flavorsUsage[].resources[].borrowed``, pkg/cache/clusterqueue.go), not who lent it. Here the
    amount a cohort's members borrow beyond the cohort's own borrowing from its parent, plus what the
    cohort lends to its parent, is shared among the members with unused lendable quota (unused nominal
    quota, capped by ``lendingLimit``) in proportion to that unused quota, top down (rounded down, the
    remainder to the first in name order). So a member's lent amount never exceeds its lendable unused
    quota, and the cohort tree's lent amounts add up to its borrowed amounts."""
    tree = quota.build(state)
    out: dict[Key, int] = {}

    def used(node: quota.Node, fr: quota.FR) -> int:
        if not node.is_cohort:
            return state.usage_of(node.name, fr[0], fr[1])
        return sum(used(child, fr) for child in node.children)

    def spare(node: quota.Node, fr: quota.FR) -> int:
        """Unused quota ``node`` can lend of ``fr``."""
        total = node.subtree.get(fr, 0)
        free = max(0, total - used(node, fr))
        limit = node.quotas.get(fr)
        if limit is not None and limit.lending_limit is not None:
            free = min(free, limit.lending_limit)
        return free

    def share(node: quota.Node, fr: quota.FR, lent_up: int) -> None:
        """Give ``node``'s children their part of what the cohort ``node`` lends (inside and to its parent)."""
        borrowed_inside = sum(max(0, used(c, fr) - c.subtree.get(fr, 0)) for c in node.children)
        own_borrowed = max(0, used(node, fr) - node.subtree.get(fr, 0)) if node.parent is not None else 0
        to_give = max(0, borrowed_inside - own_borrowed) + lent_up
        spares = [(c, spare(c, fr)) for c in sorted(node.children, key=lambda c: (c.is_cohort, c.name))]
        pool = sum(s for _, s in spares)
        to_give = min(to_give, pool)
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
            if child.is_cohort:
                share(child, fr, amount)
            elif amount:
                out[(child.name, fr[0], fr[1])] = amount

    for root in tree.cohorts.values():
        if root.parent is not None or root.in_cycle:
            continue
        for fr in sorted(root.subtree):
            share(root, fr, 0)
    return out


def quota_rows(state: ClusterState, name: str, lent: dict[Key, int]) -> list[dict[str, Any]]:
    """ClusterQueue ``name``'s quota per flavor and resource, in its resource groups' order: nominal, used,
    borrowed (used beyond nominal), lent (:func:`lent_amounts`), the limits (None: none), and each
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


def cohort_tree(state: ClusterState, queues: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The cohorts as a forest: each ``{"name", "implicit", "clusterQueues": [name...], "cohorts": [subtree...],
    "quota": [{"flavor", "resource", "nominal", "used", "borrowed", "lent", "display"}]}``, the quota summed
    over its ClusterQueues (``queues``: :func:`overview`'s ClusterQueue entries by name); roots in name
    order, then ``standalone``: the ClusterQueues in no cohort."""
    names = set(state.cohorts) | {cq.spec.cohort_name for cq in state.cluster_queues.values() if cq.spec.cohort_name}
    parents = {n: (state.cohorts[n].spec.parent_name or "") if n in state.cohorts else "" for n in names}
    names |= {p for p in parents.values() if p}
    parents.update({p: "" for p in names if p not in parents})

    def build(name: str, seen: frozenset[str]) -> dict[str, Any]:
        members = sorted(n for n, cq in state.cluster_queues.items() if cq.spec.cohort_name == name)
        children = sorted(n for n, p in parents.items() if p == name and n not in seen)
        subtrees = [build(child, seen | {child}) for child in children]
        totals: dict[tuple[str, str], dict[str, int]] = {}
        rows = [row for m in members for row in queues[m]["quota"]]
        rows += [row for sub in subtrees for row in sub["quota"]]
        for row in rows:
            slot = totals.setdefault(
                (row["flavor"], row["resource"]), {"nominal": 0, "used": 0, "borrowed": 0, "lent": 0}
            )
            for k in slot:
                slot[k] += row[k]
        return {
            "name": name,
            "implicit": name not in state.cohorts,
            "clusterQueues": members,
            "cohorts": subtrees,
            "quota": [
                {
                    "flavor": f,
                    "resource": r,
                    **v,
                    "display": {k: format_amount(r, x) for k, x in v.items()},
                }
                for (f, r), v in sorted(totals.items())
            ],
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

    lent = lent_amounts(state)
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
            "quota": quota_rows(state, name, lent),
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
        "cohorts": cohort_tree(state, queues),
        "standaloneClusterQueues": sorted(n for n, q in queues.items() if not q["cohort"]),
        "localQueues": local_queues,
        "workloads": workloads,
    }
