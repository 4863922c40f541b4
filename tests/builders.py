"""Test-data vocabulary: small builders for manifests and folded states."""

from __future__ import annotations

from typing import Any

import msgspec

from kueue_es.events import manifests, models, types
from kueue_es.events.bus.base import LogMessage, OutgoingMessage
from kueue_es.projections.batches import Orphan
from kueue_es.projections.cluster import ClusterState, apply
from kueue_es.services.runtime import fold_message
from kueue_es.services.watcher.convert import kueue_fact


def flavor(name: str, **labels: str) -> dict[str, Any]:
    """A ResourceFlavor manifest with optional node labels."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": labels} if labels else {},
    }


def cluster_queue(
    name: str, *, flavors: dict[str, dict[str, Any]], strategy: str = "BestEffortFIFO", selector: dict | None = None
) -> dict[str, Any]:
    """A ClusterQueue with one resource group; ``flavors`` maps flavor -> {resource: nominal}."""
    covered = sorted({r for quotas in flavors.values() for r in quotas})
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {} if selector is None else selector,
            "queueingStrategy": strategy,
            "resourceGroups": [
                {
                    "coveredResources": covered,
                    "flavors": [
                        {"name": f, "resources": [{"name": r, "nominalQuota": quotas[r]} for r in covered]}
                        for f, quotas in flavors.items()
                    ],
                }
            ],
        },
    }


def local_queue(name: str, cq: str, namespace: str = "default") -> dict[str, Any]:
    """A LocalQueue manifest."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def workload(
    name: str,
    *,
    queue: str = "lq",
    count: int = 1,
    created: int = 0,
    priority: int | None = None,
    namespace: str = "default",
    **requests: str,
) -> dict[str, Any]:
    """A Workload manifest of one pod set ``main``; ``created`` is seconds after 2026-01-01."""
    spec: dict[str, Any] = {
        "queueName": queue,
        "podSets": [
            {
                "name": "main",
                "count": count,
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": dict(requests)}}]}},
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-01-01T00:{created // 60:02d}:{created % 60:02d}Z",
        },
        "spec": spec,
    }


class Log:
    """An in-memory log folded as it grows: ``add`` facts or decisions, read ``state``."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.events: list[types.Event] = []

    def add(self, *events: types.Event) -> None:
        for event in events:
            self.events.append(event)
            apply(self.state, event, seq=len(self.events))

    def apply_manifests(self, *docs: dict[str, Any]) -> None:
        for doc in docs:
            fact = kueue_fact(doc)
            assert not isinstance(fact, types.ObjectRejected), fact
            self.add(fact)

    def cycle(self, now_ms: int) -> list[types.Decision]:
        """One admitter cycle; its decisions are folded into the log."""
        from kueue_es.services.admitter.core import decide

        out = decide(self.state, now_ms=now_ms)
        self.add(*out)
        return out

    def settle(self, now_ms: int, *, limit: int = 200) -> list[types.Decision]:
        """Admitter cycles until one decides nothing; all decisions, folded."""
        decided: list[types.Decision] = []
        for i in range(limit):
            out = self.cycle(now_ms + i)
            if not out:
                return decided
            decided.extend(out)
        raise AssertionError(f"no settle after {limit} cycles")

    def finish(self, key: str) -> None:
        namespace, name = key.split("/")
        self.add(types.WorkloadFinished(workload=types.WorkloadRef(namespace=namespace, name=name, uid=f"uid-{name}")))


def parse(doc: dict[str, Any]) -> Any:
    """Shorthand for manifests.parse_object."""
    return manifests.parse_object(doc)


def of_a_job(fact: types.Fact | None) -> types.Fact | None:
    """``fact`` as the watcher reports a Job's workload: a WorkloadObserved given a batch/v1 Job owner of the
    workload's name (UID ``job-<name>``), whose admission the dispatcher answers by starting the Job; any other
    fact as it is."""
    if not isinstance(fact, types.WorkloadObserved):
        return fact
    name = fact.workload.metadata.name
    owner = models.OwnerReference(api_version="batch/v1", kind="Job", name=name, uid=f"job-{name}")
    return types.WorkloadObserved(workload=msgspec.structs.replace(fact.workload, owner=owner))


class FoldedLog:
    """An in-memory log folded message by message as every service folds it (``runtime.fold_message``):
    ``messages`` as stored (sequence from 1, the Msg-Id in the headers), ``state`` the fold, ``orphans``
    what the batch verifier refused."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.messages: list[LogMessage] = []
        self.orphans: list[Orphan] = []

    def append(self, *messages: OutgoingMessage) -> int:
        """Store and fold ``messages``; the last sequence."""
        for message in messages:
            stored = LogMessage(
                seq=len(self.messages) + 1,
                subject=message.subject,
                data=message.data,
                headers={**message.headers, "Nats-Msg-Id": message.msg_id},
            )
            self.messages.append(stored)
            fold_message(self.state, stored, on_orphan=self.orphans.append)
        return len(self.messages)


def reservations(decisions: list[Any]) -> list[types.QuotaReserved]:
    """The reservations among one cycle's ``decisions``, in order: each QuotaReserved, and the reservation
    a WorkloadAdmitted stands for when it reserved and admitted at once (no QuotaReserved of its workload
    in the same cycle before it: ``types.reservation_of``, admitter logic version 13). For cycles without
    admission checks: a WorkloadAdmitted of a check turning Ready also comes without a QuotaReserved."""
    out: list[types.QuotaReserved] = []
    seen: set[str] = set()
    for d in decisions:
        if isinstance(d, types.QuotaReserved):
            out.append(d)
            seen.add(d.workload.key)
        elif isinstance(d, types.WorkloadAdmitted) and types.reserves(d, d.workload.key in seen):
            out.append(types.reservation_of(d))
    return out


def claim_workload(template: str, *, count: int = 1, name: str = "w") -> Any:
    """A parsed Workload (``models.Workload``) of one pod set ``main`` of ``count`` pods whose pods claim
    devices through ResourceClaimTemplate ``template`` (claim ``gpu``), in namespace ``default``."""
    return manifests.parse_object(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "queueName": "lq",
                "podSets": [
                    {
                        "name": "main",
                        "count": count,
                        "template": {
                            "spec": {
                                "containers": [{"name": "c"}],
                                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                            }
                        },
                    }
                ],
            },
        }
    )
