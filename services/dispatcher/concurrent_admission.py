"""Kueue's concurrent-admission controller, run by the dispatcher: parents' variants made, watched and synced.

Why this module exists: with the gate ConcurrentAdmission on, Kueue's controller
(pkg/controller/concurrentadmission) makes a variant Workload per flavor of a parent's ClusterQueue,
activates and deactivates them, opens their preemption gates one at a time and copies the admitted
variant's admission onto the parent. It creates and deletes Workload objects, so in kueue-es it lives on
the side that writes Workloads: the dispatcher runs it beside its decision consumer (while it leads), over
the Kubernetes API. The deciders admit the variants as ordinary Workloads (the watcher publishes them as
standalone ones; a parent that is a job's Workload is labelled from the log, and its job is started and stopped by
the admitted variant's decisions, :func:`kueue_es.services.dispatcher.core.job_owner`); every rule is in :mod:`kueue_es.scheduling.concurrent_admission`, this module lists,
watches and writes. A watch event on a Workload or ClusterQueue wakes one reconcile of every parent, and
so does a tick of ``resync`` seconds (the preemption gates' timeout); a write refused with 409 is tried
again at the next round.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from kueue_es.events import manifests
from kueue_es.scheduling import concurrent_admission as rules
from kueue_es.services.dispatcher.kube_api import KubeApi
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors, resources

log = structlog.get_logger(__name__)

RawObject = dict[str, Any]


class VariantController:
    """Reconciles every ConcurrentAdmission parent while ``enabled()`` (the Configuration's gate) says so.
    ``clock``: ms since the epoch (conditions' lastTransitionTime, the preemption gates' timeout)."""

    def __init__(
        self,
        api: KubeApi,
        *,
        enabled: Callable[[], bool],
        clock: Callable[[], int] | None = None,
        resync: float = 5.0,
    ) -> None:
        self.api, self.enabled = api, enabled
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.resync = resync
        self.wake = asyncio.Event()
        self.rounds = 0
        # the Workloads, ClusterQueues and LocalQueues as last seen, by kind, then (namespace, name)
        self.objects: dict[str, dict[tuple[str, str], RawObject]] = {}
        self.synced: set[str] = set()  # the kinds listed at least once

    async def run(self) -> None:
        """Reconcile on every Workload, ClusterQueue or LocalQueue change and every ``resync`` seconds (cancel to
        stop). The objects are kept from the watches (no list per round: the API server is shared with the rest)."""
        refs = (resources.WORKLOADS, resources.CLUSTER_QUEUES, resources.LOCAL_QUEUES)
        watches = [asyncio.create_task(self._watch(ref)) for ref in refs]
        try:
            while True:
                self.wake.clear()
                if self.enabled() and all(ref.kind in self.synced for ref in refs):
                    try:
                        await self.reconcile_all()
                        self.rounds += 1
                    except errors.KubeError as err:
                        log.warning("concurrent_admission_reconcile_failed", error=str(err))
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), timeout=self.resync)
                await asyncio.sleep(0.05)  # a burst of events settles into one round
        finally:
            for task in watches:
                task.cancel()
            for task in watches:
                with contextlib.suppress(asyncio.CancelledError, errors.KubeError):
                    await task

    async def _watch(self, ref: resources.ResourceRef) -> None:
        """Keep the objects of ``ref``'s kind in :attr:`objects` (by namespace and name) from a list+watch."""
        held = self.objects.setdefault(ref.kind, {})
        while True:
            try:
                async for item in self.api.watch_objects(ref):
                    if isinstance(item, kube.Resynced):
                        held.clear()
                        held.update({_key(obj): obj for obj in item.objects})
                        self.synced.add(ref.kind)
                    elif item.type == "DELETED":
                        held.pop(_key(item.object), None)
                    else:
                        held[_key(item.object)] = item.object
                    self.wake.set()
            except errors.KubeError as err:  # the kind not served yet, the API server away: again soon
                log.debug("concurrent_admission_watch_failed", kind=ref.kind, error=str(err))
            await asyncio.sleep(1.0)

    async def reconcile_all(self) -> None:
        """One round: unlabelled parents of opted-in ClusterQueues labelled, then each parent reconciled."""
        cqs = self.objects.get("ClusterQueue", {}).values()
        opted = {cq["metadata"]["name"]: cq for cq in cqs if rules.policy_of(cq) is not None}
        if not opted:
            return
        cq_of = {
            key: (lq.get("spec") or {}).get("clusterQueue") for key, lq in self.objects.get("LocalQueue", {}).items()
        }
        workloads = list(self.objects.get("Workload", {}).values())
        by_owner: dict[str, list[RawObject]] = {}
        for wl in workloads:
            for ref in wl["metadata"].get("ownerReferences") or []:
                if ref.get("kind") == "Workload":
                    by_owner.setdefault(str(ref.get("uid", "")), []).append(wl)
        for wl in workloads:
            meta = wl["metadata"]
            if meta.get("deletionTimestamp") or rules.is_variant(wl):
                continue
            if meta.get("ownerReferences") and (meta.get("labels") or {}).get(rules.PARENT_LABEL) != "true":
                continue  # a job's Workload is labelled from the log (the watcher's conversion), never here
            queue = (meta.get("namespace", ""), (wl.get("spec") or {}).get("queueName", ""))
            cq = opted.get(cq_of.get(queue) or "")
            if cq is None:
                continue
            try:
                await self.reconcile_parent(wl, by_owner.get(str(meta.get("uid", "")), []), cq)
            except errors.ConflictError:
                self.wake.set()  # changed under us: again at once
            except errors.NotFoundError:
                pass  # gone meanwhile
            except (errors.KubeError, ValueError) as err:
                log.warning("concurrent_admission_parent_failed", workload=f"{queue[0]}/{meta['name']}", error=str(err))

    async def _record(self, namespace: str, name: str, reason: str, message: str) -> None:
        """A Normal Event ``reason`` on Workload ``namespace/name``, as Kueue's controller records it (best effort)."""
        seen = self.objects.get("Workload", {}).get((namespace, name), {})
        involved = {"apiVersion": rules.API_VERSION, "kind": "Workload", "namespace": namespace, "name": name}
        if uid := (seen.get("metadata") or {}).get("uid"):
            involved["uid"] = uid
        at = manifests.format_time_ms(self.clock())
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": involved,
            "type": "Normal",
            "reason": reason,
            "message": message,
            "action": reason,
            "count": 1,
            "firstTimestamp": at,
            "lastTimestamp": at,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT,
        }
        try:
            await self.api.create_object(resources.EVENTS, namespace=namespace, body=body)
        except errors.KubeError as err:
            log.warning("concurrent_admission_event_failed", workload=f"{namespace}/{name}", error=str(err))

    async def reconcile_parent(self, parent: RawObject, variants: list[RawObject], cq: Mapping[str, Any]) -> None:
        """Label ``parent`` (Kueue's workload controller SetParentVariantLabel) or apply what
        :func:`rules.reconcile` says for it."""
        meta = parent["metadata"]
        namespace = meta.get("namespace", "")
        if (meta.get("labels") or {}).get(rules.PARENT_LABEL) != "true":
            await self.api.patch_object(
                resources.WORKLOADS,
                namespace=namespace,
                name=meta["name"],
                patch={
                    "metadata": {"labels": {rules.PARENT_LABEL: "true"}, "resourceVersion": meta.get("resourceVersion")}
                },
            )
            return
        now_ms = self.clock()
        actions = rules.reconcile(parent, variants, cq, now=manifests.format_time_ms(now_ms), now_ms=now_ms)
        for action in actions:
            await self._apply(namespace, action)

    async def _apply(self, namespace: str, action: rules.Action) -> None:
        ref = resources.WORKLOADS
        if action.kind == "create":
            assert action.body is not None
            try:
                await self.api.create_object(ref, namespace=namespace, body=action.body)
            except errors.ConflictError:
                return  # made already (a round before saw the list without it)
        elif action.kind == "delete":
            await self.api.delete_object(ref, namespace=namespace, name=action.name)
        elif action.kind in ("set-active", "status"):
            # the object's resourceVersion as the rules saw it: a write over a newer one (the dispatcher's status of
            # a variant) is refused 409 and the round is made again
            seen = self.objects.get("Workload", {}).get((namespace, action.name), {})
            version = (seen.get("metadata") or {}).get("resourceVersion")
            meta = {"resourceVersion": version} if version else {}
            patch: RawObject
            if action.kind == "set-active":
                patch = {"metadata": meta, "spec": {"active": action.active}}
                await self.api.patch_object(ref, namespace=namespace, name=action.name, patch=patch)
            else:
                patch = {"metadata": meta, "status": action.status or {}}
                await self.api.patch_object(
                    ref, namespace=namespace, name=action.name, patch=patch, subresource="status"
                )
        if action.event is not None:
            await self._record(namespace, action.event_on or action.name, *action.event)
            log.info(
                "concurrent_admission",
                workload=f"{namespace}/{action.name}",
                reason=action.event[0],
                message=action.event[1],
            )


COMPONENT = "concurrent-admission-controller"
"""Kueue's ConcurrentAdmissionController: the source of its Events."""


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
