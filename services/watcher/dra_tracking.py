"""The DRA objects device quota reads, as the watcher follows them: DeviceClasses,
ResourceClaimTemplates and ResourceSlices.

Why this module exists: Kueue charges the devices a workload's pods claim as quota
(SEMANTICS-ADVANCED F) and reads, to count them, each ResourceClaimTemplate a pod names,
the DeviceClasses (their ``spec.extendedResourceName`` and selectors) and the devices the
ResourceSlices publish (what CEL selectors are matched against). The admitter decides from the
log alone, so those objects go on the log as facts (DeviceClassObserved,
ResourceClaimTemplateObserved, ResourceSliceObserved, :func:`kueue_es.events.dra.dra_fact`), and their deletion
too, also one that happened while no watcher ran (a relist misses an object the log holds).
A fact is published only when its content changes (:meth:`Publisher.publish`), so a status
write publishes nothing. A cluster that serves no resource.k8s.io/v1 simply has none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from kueue_es.events import dra, manifests, types
from kueue_es.jobframework import workloads
from kueue_es.services.kube import objects
from kueue_es.services.watcher.kinds import Key
from kueue_es.services.watcher.publishing import Publisher, log_rejection


class DeviceTracker:
    """Publishes DeviceClassObserved, ResourceClaimTemplateObserved, ResourceSliceObserved and their
    ObjectDeleted through ``publisher``."""

    def __init__(self, *, publisher: Publisher, clock: Callable[[], int]) -> None:
        self.publisher, self.clock = publisher, clock

    async def resynced(self, kind: str, listed: list[objects.KubeObject], *, version: str) -> None:
        """A fresh list of one DRA kind: the objects the log holds and the list misses are deleted."""
        live = {_key(kind, obj) for obj in listed}
        for namespace, name in sorted(self.publisher.known[kind] - live):
            await self.publisher.publish(
                types.ObjectDeleted(kind=kind, namespace=namespace, name=name), version=version
            )
        for obj in listed:
            await self.changed(kind, "ADDED", obj)

    async def changed(self, kind: str, change: str, obj: objects.KubeObject) -> None:
        """One DeviceClass, ResourceClaimTemplate or ResourceSlice added, modified or deleted."""
        namespace, name = _key(kind, obj)
        version = objects.resource_version(obj)
        if change == "DELETED":
            await self.publisher.publish(
                types.ObjectDeleted(kind=kind, namespace=namespace, name=name, uid=objects.uid_of(obj)),
                version=version,
            )
            return
        manifest = cast(dict[str, Any], dict(obj))
        manifest.setdefault("apiVersion", dra.RESOURCE_API)
        manifest.setdefault("kind", kind)
        fact: types.Fact
        try:
            fact = dra.dra_fact(manifest)
        except manifests.ManifestError as err:
            fact = workloads.rejected(manifest, err, now_ms=self.clock())
        log_rejection(fact)
        await self.publisher.publish(fact, version=version)


def _key(kind: str, obj: objects.KubeObject) -> Key:
    """``(namespace, name)`` of a DRA object (namespace "" for the cluster-scoped DeviceClass and ResourceSlice)."""
    return (objects.namespace_of(obj) if kind == "ResourceClaimTemplate" else ""), objects.name_of(obj)
