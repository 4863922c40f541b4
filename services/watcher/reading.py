"""The watcher's seam to the API server: it only lists and watches.

Why this module exists: the watcher needs two operations of the Kubernetes API --
list a kind (to learn whether the cluster serves it) and list+watch it forever --
and nothing else. :class:`KubeReader` names exactly those, so the runner is typed
against what it uses rather than ``Any``, and a test may hand it any reader. The
one over a kubernetes-asyncio client, through :mod:`kueue_es.services.kube.client`,
is :class:`kueue_es.services.watcher.service.ApiReader` (the only watcher module
that may import the client library).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from kueue_es.services.kube import client as kube
from kueue_es.services.kube import objects

Listed = tuple[list[objects.KubeObject], str]
"""A list: its objects and the list's resourceVersion."""


@runtime_checkable
class KubeReader(Protocol):
    """What the watcher calls of the API server (``list_objects`` and ``watch_objects`` of ``client.py``)."""

    async def list(
        self, ref: kube.ResourceRef, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> Listed:
        """LIST ``ref`` in all namespaces; raises ``errors.NotFoundError`` when the kind is not served."""
        ...

    def watch(
        self, ref: kube.ResourceRef, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> AsyncIterator[kube.WatchEvent | kube.Resynced]:
        """List, then watch, forever: a Resynced snapshot, then WatchEvents, a new Resynced after each relist."""
        ...
