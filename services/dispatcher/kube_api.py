"""The dispatcher's seam to the Kubernetes API: what it may call, and how fast.

Why this module exists: every collaborator of the dispatcher (Job writes, Workload
objects, queue status, Kubernetes Events, the TAS ungater) talks to the API server
through the same handful of operations. :class:`KubeApi` names them (the functions of
:mod:`kueue_es.services.kube.client`, without their first argument), so a
collaborator's type says what it needs and a stand-in (the simulated API of
:mod:`.simulated`, a test double) is checked against it. :class:`KubeClient` is the
real one, over a kubernetes-asyncio ``ApiClient``.

Every write waits for a :class:`WriteLimiter` first (QPS and burst as client-go's).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiolimiter import AsyncLimiter
from kubernetes_asyncio import client as k8s_client

from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources

RawObject = dict[str, Any]
"""An object as JSON, as the server returned it (read it through :mod:`.objects`)."""


class KubeApi(Protocol):
    """The API operations the dispatcher uses; each raises ``kueue_es.services.kube.errors`` types
    (ApiError and its subclasses, ConnectionFailedError) as :mod:`kueue_es.services.kube.client` does."""

    async def get_object(self, ref: resources.ResourceRef, *, namespace: str | None, name: str) -> RawObject:
        """GET one object; NotFoundError if it does not exist."""
        ...

    async def list_objects(
        self, ref: resources.ResourceRef, *, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[RawObject], str]:
        """LIST objects (all namespaces for ``namespace`` None): (items, the list's resourceVersion)."""
        ...

    async def create_object(self, ref: resources.ResourceRef, *, namespace: str | None, body: RawObject) -> RawObject:
        """POST a new object; ConflictError if it exists."""
        ...

    async def patch_object(
        self, ref: resources.ResourceRef, *, namespace: str | None, name: str, patch: RawObject
    ) -> RawObject:
        """JSON merge patch; returns the stored object."""
        ...

    async def apply_object(
        self,
        ref: resources.ResourceRef,
        *,
        namespace: str | None,
        name: str,
        body: RawObject,
        field_manager: str,
        subresource: str | None = None,
    ) -> RawObject:
        """Server-side apply (forced) as ``field_manager``; returns the stored object."""
        ...

    async def delete_object(self, ref: resources.ResourceRef, *, namespace: str | None, name: str) -> RawObject:
        """DELETE an object; NotFoundError if it does not exist."""
        ...

    def watch_objects(
        self, ref: resources.ResourceRef, *, label_selector: str | None = None
    ) -> AsyncIterator[kube.WatchEvent | kube.Resynced]:
        """List, then watch, forever (``Resynced`` snapshots, then changes); cancel to stop."""
        ...


@dataclass(frozen=True)
class KubeClient:
    """:class:`KubeApi` over a kubernetes-asyncio client (a real or the emulated API server)."""

    client: k8s_client.ApiClient

    async def get_object(self, ref: resources.ResourceRef, *, namespace: str | None, name: str) -> RawObject:
        """See :class:`KubeApi`."""
        return await kube.get_object(self.client, ref, namespace=namespace, name=name)

    async def list_objects(
        self, ref: resources.ResourceRef, *, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[RawObject], str]:
        """See :class:`KubeApi`."""
        return await kube.list_objects(self.client, ref, namespace=namespace, label_selector=label_selector)

    async def create_object(self, ref: resources.ResourceRef, *, namespace: str | None, body: RawObject) -> RawObject:
        """See :class:`KubeApi`."""
        return await kube.create_object(self.client, ref, namespace=namespace, body=body)

    async def patch_object(
        self, ref: resources.ResourceRef, *, namespace: str | None, name: str, patch: RawObject
    ) -> RawObject:
        """See :class:`KubeApi`."""
        return await kube.patch_object(self.client, ref, namespace=namespace, name=name, patch=patch)

    async def apply_object(
        self,
        ref: resources.ResourceRef,
        *,
        namespace: str | None,
        name: str,
        body: RawObject,
        field_manager: str,
        subresource: str | None = None,
    ) -> RawObject:
        """See :class:`KubeApi`."""
        return await kube.apply_object(
            self.client,
            ref,
            namespace=namespace,
            name=name,
            body=body,
            field_manager=field_manager,
            subresource=subresource,
        )

    async def delete_object(self, ref: resources.ResourceRef, *, namespace: str | None, name: str) -> RawObject:
        """See :class:`KubeApi`."""
        return await kube.delete_object(self.client, ref, namespace=namespace, name=name)

    def watch_objects(
        self, ref: resources.ResourceRef, *, label_selector: str | None = None
    ) -> AsyncIterator[kube.WatchEvent | kube.Resynced]:
        """See :class:`KubeApi`."""
        return kube.watch_objects(self.client, ref, label_selector=label_selector)


def kube_api(api: KubeApi | k8s_client.ApiClient) -> KubeApi:
    """``api`` as a :class:`KubeApi`: a kubernetes-asyncio client is wrapped in :class:`KubeClient`."""
    return KubeClient(api) if isinstance(api, k8s_client.ApiClient) else api


# -- the write rate limit ---------------------------------------------------------------------
#
# Kueue's manager talks to the API server through client-go, whose client-side limiter
# is a token bucket: ``burst`` requests may go at once, then ``qps`` a second (Kueue's
# Configuration ``clientConnection`` defaults: QPS 50, burst 100). Every Kubernetes write
# of the dispatcher (Job patches, Workload objects and their status, ClusterQueue and
# LocalQueue status) first takes a token from one WriteLimiter: aiolimiter's leaky bucket
# with capacity ``burst`` draining at ``qps`` a second, which admits exactly what a token
# bucket of that size refilled at that rate admits, so N writes take at least
# ``(N - burst) / qps`` seconds. serve_dispatcher(qps=..., burst=...) sets it; without
# those, the environment variables KUEUE_ES_DISPATCHER_QPS and KUEUE_ES_DISPATCHER_BURST.

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
QPS_ENV = "KUEUE_ES_DISPATCHER_QPS"
BURST_ENV = "KUEUE_ES_DISPATCHER_BURST"


@dataclass
class WriteLimiter:
    """At most ``burst`` writes at once, then ``qps`` writes a second; ``await limiter.acquire()`` before each write.

    Raises ValueError for a ``qps`` or ``burst`` that is not positive.
    """

    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    writes: int = 0
    _bucket: AsyncLimiter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.qps > 0 or self.burst < 1:
            raise ValueError(
                f"the write rate limit needs qps > 0 and burst >= 1, not qps={self.qps} burst={self.burst}"
            )
        self._bucket = AsyncLimiter(max_rate=self.burst, time_period=self.burst / self.qps)

    async def acquire(self) -> None:
        """Wait for a token; counts the write."""
        await self._bucket.acquire()
        self.writes += 1


def limiter_from_env(
    environ: Mapping[str, str] = os.environ, *, qps: float | None = None, burst: int | None = None
) -> WriteLimiter:
    """The limiter for ``qps``/``burst``, each defaulting to its environment variable, then to Kueue's default.

    Raises ValueError naming the variable when one is not a number.
    """
    if qps is None:
        qps = _number(environ, QPS_ENV, float, DEFAULT_QPS)
    if burst is None:
        burst = int(_number(environ, BURST_ENV, int, DEFAULT_BURST))
    return WriteLimiter(qps=qps, burst=burst)


def _number(environ: Mapping[str, str], name: str, kind: type[float] | type[int], default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a valid {kind.__name__}") from None
