"""Leader election with a coordination.k8s.io/v1 Lease: one active replica of a service.

The watcher and the dispatcher must not run twice at once (two watchers publish
every fact twice with different resync ids; two dispatchers race on the same Job
and Workload writes), so with ``--leader-elect`` a replica runs its service only
while it holds the Lease ``kueue-es-<service>`` in its namespace; the other
replica waits as a standby and takes over when the lease is released (on a clean
stop) or expires (``lease_duration`` after the holder last renewed it).

The election itself is kubernetes-asyncio's ``leaderelection`` (the port of
client-go's): a candidate creates the Lease or takes it over once its record has
not changed for ``lease_duration``; the holder renews it every ``retry_period``
and gives up when it could not renew within ``renew_deadline``. Timings default to
controller-runtime's (Kueue's manager): 15 s, 10 s, 2 s. Around it, this module
adds what the library leaves out:

- network errors reaching the API server count as a failed attempt (the library
  only expects ``ApiException``), so a standby keeps trying and a leader that
  cannot reach the server loses the lease instead of crashing;
- the service runs with its own stop event, so SIGTERM stops it gracefully, and
  then the lease is released (holder cleared), so the standby takes over at its
  next retry instead of after ``lease_duration`` (client-go's ReleaseOnCancel);
- losing the lease ends the process with :class:`LeadershipLost` (exit code 1),
  as controller-runtime does ("leader election lost"): a fresh process folds the
  log again, no half-stopped state survives; Kubernetes restarts the pod, which
  becomes the standby;
- the service ending on its own (a crash) releases the lease too.

The deciders (admitter, preemptor, TAS placer) take no Lease here: their pods need
no Kubernetes token at all. Two replicas of a decider would be safe without any
lease (a commit whose head moved is rejected whole), but both would decide every
cycle and one commit of the two be refused; so they take turns through a lease on
the NATS key-value bucket ``KQ_LEASES`` instead (:mod:`kueue_es.services.standby`,
on by default: ``--standby-lease``), with a standby that keeps folding the log and
takes over 1.0-1.5 s after the holder's last renewal (at once after a clean stop).
Safety stays with the head check.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import structlog
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from kueue_es.services.health import Health
from kueue_es.services.runtime import cancel_and_wait

log = structlog.get_logger(__name__)

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_NETWORK_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


class LeadershipLost(RuntimeError):
    """This replica could not renew its lease: another may be running the service now."""


def default_namespace(environ: os._Environ[str] | dict[str, str] = os.environ) -> str:
    """Where the Lease lives by default: ``$POD_NAMESPACE``, else the pod's service account
    namespace (in a cluster), else ``default``."""
    if namespace := environ.get("POD_NAMESPACE", "").strip():
        return namespace
    with contextlib.suppress(OSError):
        if namespace := SERVICE_ACCOUNT_NAMESPACE.read_text().strip():
            return namespace
    return "default"


def default_identity() -> str:
    """A holder identity unique to this process: the host (pod) name and a random suffix, as client-go makes it."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True, kw_only=True)
class LeaseSettings:
    """The Lease a service holds and the election's timings (seconds; ``lease_duration`` whole
    seconds, as the Lease's ``leaseDurationSeconds``).

    Raises ValueError (from the library's checks) unless ``lease_duration >
    renew_deadline > 1.2 * retry_period`` and each is at least 1.
    """

    name: str
    namespace: str = "default"
    identity: str = field(default_factory=default_identity)
    lease_duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class _Lease(LeaseLock):
    """The library's LeaseLock, telling ``health`` when the API server answered, and turning
    network errors into failed attempts instead of exceptions that end the election."""

    def __init__(self, settings: LeaseSettings, api: k8s_client.ApiClient, health: Health) -> None:
        super().__init__(settings.name, settings.namespace, settings.identity, api)
        self.health = health

    async def get(self, name: str, namespace: str) -> Any:
        try:
            found, record = await super().get(name, namespace)
        except _NETWORK_ERRORS as err:
            log.warning("lease_unreachable", lease=f"{namespace}/{name}", error=repr(err))
            unreachable = ApiException(status=503, reason="ServiceUnavailable")
            unreachable.body = json.dumps({"code": 503, "message": repr(err)}).encode()
            return False, unreachable
        if found or (isinstance(record, ApiException) and record.status == 404):
            self.health.lease_contact()
        if isinstance(record, ApiException) and not record.body:
            record.body = json.dumps({"code": record.status}).encode()  # the library reads the code from the body
        return found, record

    async def create(self, name: str, namespace: str, election_record: Any) -> bool:
        try:
            return await super().create(name, namespace, election_record)
        except _NETWORK_ERRORS as err:
            log.warning("lease_unreachable", lease=f"{namespace}/{name}", error=repr(err))
            return False

    async def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        try:
            return await super().update(name, namespace, updated_record)
        except _NETWORK_ERRORS as err:
            log.warning("lease_unreachable", lease=f"{namespace}/{name}", error=repr(err))
            return False

    async def release(self) -> None:
        """Clear the holder if it is still us, so a standby takes over at once; errors are only logged."""
        try:
            lease = await self.api_instance.read_namespaced_lease(self.name, self.namespace)
            if lease.spec is None or lease.spec.holder_identity != self.identity:
                return
            now = datetime.datetime.now(datetime.UTC)
            lease.spec.holder_identity = None  # type: ignore[assignment]  # optional in the API, not in the model
            lease.spec.lease_duration_seconds = 1
            lease.spec.renew_time = now
            await self.api_instance.replace_namespaced_lease(self.name, self.namespace, lease)
            log.info("lease_released", lease=f"{self.namespace}/{self.name}", identity=self.identity)
        except (ApiException, *_NETWORK_ERRORS) as err:
            log.warning("lease_release_failed", lease=f"{self.namespace}/{self.name}", error=repr(err))


async def run_with_lease(
    main: Callable[[asyncio.Event], Awaitable[None]],
    *,
    api: k8s_client.ApiClient,
    settings: LeaseSettings,
    stop: asyncio.Event,
    health: Health,
) -> None:
    """Run ``main(service_stop)`` only while this replica holds the Lease ``settings.name``.

    Waits as a candidate (``health.role`` "candidate", then "standby" once another
    holder is seen) until it acquires the lease, then runs ``main`` ("leader").
    Returns after ``stop`` is set: ``main`` is stopped through its own event and
    the lease released. Raises LeadershipLost when the lease could not be renewed
    (``main`` is cancelled first), and whatever ``main`` raises.
    """
    lock = _Lease(settings, api, health)
    service_stop = asyncio.Event()
    outcome: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    lease_name = f"{settings.namespace}/{settings.name}"

    async def lead() -> None:
        health.role = "leader"
        log.info("lease_acquired", lease=lease_name, identity=settings.identity)
        try:
            await main(service_stop)
        except Exception as err:  # noqa: BLE001 -- handed to the waiter below
            if not outcome.done():
                outcome.set_exception(err)
            return
        if not outcome.done():
            outcome.set_result(None)

    async def lost() -> None:
        log.warning("lease_lost", lease=lease_name, identity=settings.identity)

    config = electionconfig.Config(
        lock,
        lease_duration=settings.lease_duration,
        renew_deadline=settings.renew_deadline,
        retry_period=settings.retry_period,
        onstarted_leading=lead,
        onstopped_leading=lost,
    )
    election = _Election(config, health=health)
    health.role = "candidate"
    log.info("lease_candidate", lease=lease_name, identity=settings.identity)
    electing = asyncio.create_task(election.run(), name="leader-election")
    stopping = asyncio.create_task(stop.wait(), name="stop")
    try:
        waiting: set[asyncio.Future[Any]] = {electing, stopping, outcome}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set() and health.role == "leader" and not outcome.done():
            service_stop.set()  # a graceful stop of the service, while we still hold the lease
            await asyncio.wait({outcome, electing}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        service_stop.set()
        await cancel_and_wait([electing, stopping])
    was_leader = health.role == "leader"
    if was_leader:
        await lock.release()
    if outcome.done():
        outcome.result()  # re-raise what main raised
        return
    if stop.is_set():
        return
    if electing.done() and not electing.cancelled() and electing.exception() is not None:
        raise LeadershipLost(f"leader election for {lease_name} failed: {electing.exception()!r}")
    raise LeadershipLost(f"lost the lease {lease_name}: could not renew it within {settings.renew_deadline}s")


class _Election(leaderelection.LeaderElection):
    """The library's election, keeping ``health.role`` as leader, standby or candidate."""

    def __init__(self, config: electionconfig.Config, *, health: Health) -> None:
        super().__init__(config)
        self.health = health

    async def try_acquire_or_renew(self) -> bool:
        succeeded = await super().try_acquire_or_renew()
        record = self.observed_record
        if not succeeded and self.health.role != "leader" and record is not None and record.holder_identity:
            self.health.role = "standby"
        return succeeded
