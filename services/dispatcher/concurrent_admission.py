"""Kueue's concurrent-admission controller, run by the dispatcher: parents' variants made, watched and synced.

Why this module exists: with the gate ConcurrentAdmission on, Kueue's controller
(pkg/controller/concurrentadmission) makes a variant Workload per flavor of a parent's ClusterQueue,
activates and deactivates them, opens their preemption gates one at a time and copies the admitted
variant's admission onto the parent. It creates and deletes Workload objects, so in kueue-es it lives on
the side that writes Workloads: the dispatcher runs it beside its decision consumer (while it leads), over
the Kubernetes API. The deciders admit the variants as ordinary Workloads (the watcher publishes them as
standalone ones); every rule is in :mod:`kueue_es.scheduling.concurrent_admission`, this module lists,
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

    async def run(self) -> None:
        """Reconcile on every Workload or ClusterQueue change and every ``resync`` seconds (cancel to stop)."""
        watches = [asyncio.create_task(self._watch(ref)) for ref in (resources.WORKLOADS, resources.CLUSTER_QUEUES)]
        try:
            while True:
                self.wake.clear()
                if self.enabled():
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
        while True:
            try:
                async for _ in self.api.watch_objects(ref):
                    self.wake.set()
            except errors.KubeError as err:  # the kind not served yet, the API server away: again soon
                log.debug("concurrent_admission_watch_failed", kind=ref.kind, error=str(err))
            await asyncio.sleep(1.0)

    async def reconcile_all(self) -> None:
        """One round: unlabelled parents of opted-in ClusterQueues labelled, then each parent reconciled."""
        cqs, _ = await self.api.list_objects(resources.CLUSTER_QUEUES)
        opted = {cq["metadata"]["name"]: cq for cq in cqs if rules.policy_of(cq) is not None}
        if not opted:
            return
        lqs, _ = await self.api.list_objects(resources.LOCAL_QUEUES)
        cq_of = {
            (lq["metadata"].get("namespace", ""), lq["metadata"]["name"]): (lq.get("spec") or {}).get("clusterQueue")
            for lq in lqs
        }
        workloads, _ = await self.api.list_objects(resources.WORKLOADS)
        by_owner: dict[str, list[RawObject]] = {}
        for wl in workloads:
            for ref in wl["metadata"].get("ownerReferences") or []:
                if ref.get("kind") == "Workload":
                    by_owner.setdefault(str(ref.get("uid", "")), []).append(wl)
        for wl in workloads:
            meta = wl["metadata"]
            if meta.get("deletionTimestamp") or rules.is_variant(wl):
                continue
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
        elif action.kind == "set-active":
            await self.api.patch_object(
                ref, namespace=namespace, name=action.name, patch={"spec": {"active": action.active}}
            )
        elif action.kind == "status":
            await self.api.patch_object(
                ref, namespace=namespace, name=action.name, patch={"status": action.status}, subresource="status"
            )
        if action.event is not None:
            log.info(
                "concurrent_admission",
                workload=f"{namespace}/{action.name}",
                reason=action.event[0],
                message=action.event[1],
            )
