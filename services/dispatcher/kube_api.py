"""The dispatcher's seam to the Kubernetes API: what it may call, and how fast.

Why this module exists: every collaborator of the dispatcher (Job writes, Workload
objects, queue status, Kubernetes Events, the TAS ungater) talks to the API server
through the same handful of operations. :class:`KubeApi` names them (the functions of
:mod:`kueue_es.services.kube.client`, without their first argument), so a
collaborator's type says what it needs and a stand-in (the simulated API of
:mod:`.simulated`, a test double) is checked against it. :class:`KubeClient` is the
real one, over a kubernetes-asyncio ``ApiClient``.

Every write waits for a :class:`WriteLimiter` first (QPS and burst as client-go's), in
its priority class (:mod:`.write_budget`).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from kueue_es.services.dispatcher.write_budget import (
    DEFAULT_SHARES,
    WriteBudget,
    WriteClass,
    normalised,
    parse_shares,
)
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources

if TYPE_CHECKING:
    from kubernetes_asyncio import client as k8s_client

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
        self,
        ref: resources.ResourceRef,
        *,
        namespace: str | None,
        name: str,
        patch: RawObject,
        subresource: str | None = None,
    ) -> RawObject:
        """JSON merge patch (of the object, or its ``subresource``: ``status``); returns the stored object."""
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

    async def delete_object(
        self, ref: resources.ResourceRef, *, namespace: str | None, name: str, options: RawObject | None = None
    ) -> RawObject:
        """DELETE an object (``options``: a DeleteOptions body, e.g. ``propagationPolicy``, ``preconditions``);
        NotFoundError if it does not exist, ConflictError if a precondition fails."""
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
        self,
        ref: resources.ResourceRef,
        *,
        namespace: str | None,
        name: str,
        patch: RawObject,
        subresource: str | None = None,
    ) -> RawObject:
        """See :class:`KubeApi`."""
        return await kube.patch_object(
            self.client, ref, namespace=namespace, name=name, patch=patch, subresource=subresource
        )

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

    async def delete_object(
        self, ref: resources.ResourceRef, *, namespace: str | None, name: str, options: RawObject | None = None
    ) -> RawObject:
        """See :class:`KubeApi`."""
        return await kube.delete_object(self.client, ref, namespace=namespace, name=name, options=options)

    def watch_objects(
        self, ref: resources.ResourceRef, *, label_selector: str | None = None
    ) -> AsyncIterator[kube.WatchEvent | kube.Resynced]:
        """See :class:`KubeApi`."""
        return kube.watch_objects(self.client, ref, label_selector=label_selector)


def kube_api(api: KubeApi | k8s_client.ApiClient) -> KubeApi:
    """``api`` as a :class:`KubeApi`: a kubernetes-asyncio client is wrapped in :class:`KubeClient`."""
    # a kubernetes-asyncio client exists only once the library is loaded: no need to import it to ask
    library = sys.modules.get("kubernetes_asyncio.client")
    if library is not None and isinstance(api, library.ApiClient):
        return KubeClient(api)
    return cast("KubeApi", api)


# -- the write rate limit ---------------------------------------------------------------------
#
# Kueue's manager talks to the API server through client-go, whose client-side limiter
# is a token bucket: ``burst`` requests may go at once, then ``qps`` a second (Kueue's
# Configuration ``clientConnection`` defaults: QPS 50, burst 100). Every Kubernetes write
# of the dispatcher first takes a token from one WriteLimiter of that size, so N writes
# take at least ``(N - burst) / qps`` seconds, whatever their kind. Inside that budget,
# writes are served by priority class (write_budget.WriteClass: Job starts and stops,
# then Workload objects and status, then queue status), each class with its own share
# of the rate and burst and the unused shares of the others (write_budget.WriteBudget),
# so a backlog of queue status never delays a Job write. serve_dispatcher(qps=...,
# burst=...) sets the budget; without those, the environment variables
# KUEUE_ES_DISPATCHER_QPS and KUEUE_ES_DISPATCHER_BURST, and KUEUE_ES_DISPATCHER_WRITE_SHARES
# for the shares (``jobs=0.5,workloads=0.3,queues=0.2``).

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
QPS_ENV = "KUEUE_ES_DISPATCHER_QPS"
BURST_ENV = "KUEUE_ES_DISPATCHER_BURST"
SHARES_ENV = "KUEUE_ES_DISPATCHER_WRITE_SHARES"
QUEUE_STATUS_INTERVAL_ENV = "KUEUE_ES_DISPATCHER_QUEUE_STATUS_INTERVAL"
DEFAULT_QUEUE_STATUS_INTERVAL = 1.0


class WriteLimiter:
    """At most ``burst`` writes at once, then ``qps`` writes a second, served by priority class:
    ``await limiter.acquire(WriteClass.QUEUES)`` before each write (default class: ``JOBS``).

    Waiting writes are granted in class order (the most urgent first), first come, first
    served within a class, each from its class's share (``shares``, see
    :class:`~kueue_es.services.dispatcher.write_budget.WriteBudget`) or from a share another
    class leaves unused. ``clock`` gives monotonic seconds (default: the event loop's
    clock). :attr:`writes` counts the writes, :attr:`writes_by_class` per class;
    :meth:`waiting` tells how many wait. Raises ValueError for a ``qps`` or ``burst`` that
    is not positive, or a share that is not.
    """

    def __init__(
        self,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        *,
        shares: Mapping[WriteClass, float] = DEFAULT_SHARES,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not qps > 0 or burst < 1:
            raise ValueError(f"the write rate limit needs qps > 0 and burst >= 1, not qps={qps} burst={burst}")
        self.qps, self.burst, self.shares = qps, burst, normalised(shares)
        self.writes = 0
        self.writes_by_class: dict[WriteClass, int] = dict.fromkeys(WriteClass, 0)
        self._clock = clock
        self._budget: WriteBudget | None = None  # made at the first write, on the clock then
        self._waiters: dict[WriteClass, deque[asyncio.Future[None]]] = {cls: deque() for cls in WriteClass}
        self._timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(qps={self.qps}, burst={self.burst}, writes={self.writes})"

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    def _budget_at(self, now: float) -> WriteBudget:
        if self._budget is None:
            self._budget = WriteBudget(qps=self.qps, burst=self.burst, shares=self.shares, now=now)
        return self._budget

    def waiting(self, write_class: WriteClass) -> int:
        """How many writes of ``write_class`` wait for a token now."""
        return sum(not f.done() for f in self._waiters[write_class])

    async def acquire(self, write_class: WriteClass = WriteClass.JOBS) -> None:
        """Wait for a token for a write of ``write_class``; counts the write."""
        now = self._now()
        budget = self._budget_at(now)
        queued = self._waiters[write_class]
        if not queued and budget.take(write_class, now, waiting=self._waiting_classes()) is not None:
            self._count(write_class)
            return
        granted = asyncio.get_running_loop().create_future()
        queued.append(granted)
        self.grant()
        try:
            await granted
        except asyncio.CancelledError:
            if granted in queued:
                queued.remove(granted)
            raise
        self._count(write_class)

    def _count(self, write_class: WriteClass) -> None:
        self.writes += 1
        self.writes_by_class[write_class] += 1

    def _waiting_classes(self) -> set[WriteClass]:
        for queued in self._waiters.values():
            while queued and queued[0].done():  # cancelled meanwhile
                queued.popleft()
        return {cls for cls, queued in self._waiters.items() if queued}

    def grant(self) -> None:
        """Give the tokens due by now to the waiting writes, the most urgent class first, and set a timer for
        the next one (called by :meth:`acquire`, and by the timer)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = self._now()
        budget = self._budget_at(now)
        for cls in WriteClass:
            queued = self._waiters[cls]
            while queued:
                waiting = self._waiting_classes()
                if not queued:
                    break
                if budget.take(cls, now, waiting=waiting - {cls}) is None:
                    break
                queued.popleft().set_result(None)
        waiting = self._waiting_classes()
        if waiting:
            delay = min(budget.seconds_until_token(cls, now, waiting=waiting - {cls}) for cls in waiting)
            self._timer = asyncio.get_running_loop().call_later(max(delay, 0.001), self.grant)


def limiter_from_env(
    environ: Mapping[str, str] = os.environ, *, qps: float | None = None, burst: int | None = None
) -> WriteLimiter:
    """The limiter for ``qps``/``burst``, each defaulting to its environment variable, then to Kueue's default;
    the class shares from KUEUE_ES_DISPATCHER_WRITE_SHARES (``jobs=0.5,workloads=0.3,queues=0.2``).

    Raises ValueError naming the variable when one is not a number (or, for the shares, not ``CLASS=SHARE``).
    """
    if qps is None:
        qps = _number(environ, QPS_ENV, float, DEFAULT_QPS)
    if burst is None:
        burst = int(_number(environ, BURST_ENV, int, DEFAULT_BURST))
    try:
        shares = parse_shares(environ.get(SHARES_ENV, ""))
    except ValueError as err:
        raise ValueError(f"{SHARES_ENV}: {err}") from None
    return WriteLimiter(qps=qps, burst=burst, shares=shares)


def queue_status_interval_from_env(environ: Mapping[str, str] = os.environ) -> float:
    """Seconds between two status writes of one ClusterQueue, LocalQueue or Cohort (KUEUE_ES_DISPATCHER_QUEUE_STATUS_INTERVAL,
    default 1). Raises ValueError naming the variable when it is not a number >= 0."""
    interval = _number(environ, QUEUE_STATUS_INTERVAL_ENV, float, DEFAULT_QUEUE_STATUS_INTERVAL)
    if interval < 0:
        raise ValueError(f"{QUEUE_STATUS_INTERVAL_ENV}={interval} is negative")
    return interval


def _number(environ: Mapping[str, str], name: str, kind: type[float] | type[int], default: float) -> float:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a valid {kind.__name__}") from None
