"""The runner shared by the three decider services (admitter, preemptor, TAS placer).

Connects to the bus and runs a :class:`kueue_es.services.runtime.DeciderLoop` with the
service's pure core until SIGTERM; with ``standby`` settings, only while this replica
holds the decider's lease (:mod:`kueue_es.services.standby`), folding the log meanwhile.
The admitter's ``/metrics`` also carries Kueue's metrics from its fold (:mod:`kueue_es.services.kueue_metrics`),
only while it holds that lease.
:func:`serve_deciders` runs several roles in one process over one fold (``kueue-es service deciders``,
:class:`kueue_es.services.runtime.LogFold`), each role on its own connection as its own NATS user.
The cores live in ``services/<name>/core.py``; this is the only async code they need.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from typing import Any

import structlog
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from kueue_es.events import subjects
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus
from kueue_es.projections.cluster import ADMITTER_ROLE
from kueue_es.services import standby as standby_lease
from kueue_es.services.health import ObservedBus
from kueue_es.services.kueue_metrics import KueueCollector
from kueue_es.services.runtime import Decider, DeciderLoop, LogFold, StartPoint, run_until_stopped

log = structlog.get_logger(__name__)


async def serve_decider(
    decider: Decider,
    *,
    nats_url: str,
    stop: asyncio.Event,
    wakeup: float = 1.0,
    stepped: bool = False,
    connect: Callable[[str], Awaitable[Bus]] = nats_bus.connect,
    start: StartPoint | None = None,
    standby: standby_lease.StandbySettings | None = None,
    partitions: Collection[str] | None = None,
    slots: int = standby_lease.DEFAULT_SLOTS,
) -> None:
    """Run ``decider`` against the log at ``nats_url`` until ``stop`` is set (``stepped``: see DeciderLoop;
    ``connect``: how to get the bus, e.g. ``kueue_es.services.health.Health.connect`` to observe it;
    ``start``: a checkpoint to fold on from, used only if it is of this log, see DeciderLoop).

    ``partitions``: the partitions to decide (``--partitions LIST``: exactly these, no lease); None
    (``--partitions all``): every partition, spread over ``slots`` lease slots among the replicas when
    ``standby`` is given (:class:`standby_lease.SlotLeases`, with these timings; on a NATS bus), else
    every partition in this process (every replica hot). On the way out the slots are released, after
    the loop stopped. Raises NotFoundError when the lease bucket is missing and this NATS user may
    not create it, ValueError for ``slots`` < 1.
    """
    bus = await connect(nats_url)
    try:
        lease = (
            await standby_lease.open_slots(bus, role=decider.role, settings=standby, slots=slots)
            if standby is not None and partitions is None
            else None
        )
    except BaseException:
        await bus.close()
        raise
    loop = DeciderLoop(
        bus=bus, decider=decider, partitions=partitions, wakeup=wakeup, stepped=stepped, start=start, gate=lease
    )
    if isinstance(bus, ObservedBus):  # the observed bus carries the Health it reports to
        loop.on_orphan = bus.health.orphan_counter()
        bus.health.add_check(loop.readiness)
        bus.health.registry.register(PartitionCollector(loop, service=bus.health.service))
        if lease is not None:
            standby_lease.observe(lease, bus.health, role=decider.role)
        if decider.role == ADMITTER_ROLE:  # Kueue's metrics, from the admitter's fold, by the holder of slot 0
            bus.health.registry.register(
                KueueCollector(lambda: loop.state, active=(lambda: 0 in lease.held()) if lease else None)
            )
    log.info(
        "service_started",
        role=decider.role,
        logic_version=decider.logic_version,
        partitions="all" if partitions is None else sorted(partitions),
        lease=lease.key if lease is not None else None,
        slots=lease.count if lease is not None else None,
        identity=lease.identity if lease is not None else None,
    )
    try:
        await run_until_stopped(stop, loop.run(), *([lease.run()] if lease is not None else []))
    finally:
        if lease is not None:
            await lease.release()
        await bus.close()
        log.info(
            "service_stopped",
            role=decider.role,
            commits=loop.commits,
            conflicts=loop.conflicts,
            fence_conflicts=loop.fence_conflicts,
            partitions=len(loop.stats),
            folded_seq=loop.state.last_seq,
            lease_transitions=lease.transitions if lease is not None else None,
        )


COHOSTED_ROLES = ("admitter", "preemptor", "tas-placer")
"""The decider services ``kueue-es service deciders`` runs in one process, by NATS user, in the order their
cycles take turns (:meth:`LogFold.turns`)."""


def user_of(decider: Decider) -> str:
    """The NATS user decider ``decider`` commits as (and its head subject's last token): ``admitter``
    for the role ``admit``, ... (``subjects.HEAD_TOKENS``)."""
    return subjects.HEAD_TOKENS[decider.role]


async def serve_deciders(
    deciders: Sequence[Decider],
    *,
    nats_url: str,
    stop: asyncio.Event,
    connect: Callable[[str, str], Awaitable[Bus]],
    wakeup: float = 1.0,
    stepped: bool = False,
    start: StartPoint | None = None,
    standby: standby_lease.StandbySettings | None = None,
    partitions: Collection[str] | None = None,
    slots: int = standby_lease.DEFAULT_SLOTS,
) -> None:
    """Run the roles ``deciders`` in this process over one fold until ``stop`` is set
    (``kueue-es service deciders``; :class:`LogFold`): one reader of the log (on the first role's
    connection) and one :class:`ClusterState`, and per role what :func:`serve_decider` gives one: its
    own connection, ``connect(nats_url, user)`` as its own NATS user (:func:`user_of`), on which it
    commits its batches and holds its standby or slot leases (``standby``, ``partitions``, ``slots`` as
    :func:`serve_decider` takes them, per role), its own stats and DecisionRecord chain. ``start``: a
    checkpoint for the one fold.

    On an observed bus (``kueue_es.services.health.Health.connect``) /readyz is ready while every role
    is (its facts under ``deciders`` by user) and every role's connection is up; /metrics carries every
    role's partition metrics (``role`` label), leases (:func:`standby_lease.observe_roles`) and, from the
    admitter's role, Kueue's metrics. Raises ValueError for no deciders or one twice, NotFoundError /
    BusError as :func:`serve_decider`.
    """
    users = [user_of(d) for d in deciders]
    if not users or len(set(users)) != len(users):
        raise ValueError(f"co-hosted deciders must be distinct and at least one, got {users}")
    buses: dict[str, Bus] = {}
    leases: dict[str, standby_lease.SlotLeases | None] = {}
    try:
        for user in [*users[1:], users[0]]:  # the fold's (the first role's) last: /readyz follows the last observed
            buses[user] = await connect(nats_url, user)
        for decider, user in zip(deciders, users, strict=True):
            leases[user] = (
                await standby_lease.open_slots(buses[user], role=decider.role, settings=standby, slots=slots, user=user)
                if standby is not None and partitions is None
                else None
            )
    except BaseException:
        for bus in buses.values():
            await bus.close()
        raise
    fold = LogFold(bus=buses[users[0]], start=start)
    loops = [
        DeciderLoop(
            bus=buses[user],
            decider=decider,
            partitions=partitions,
            wakeup=wakeup,
            stepped=stepped,
            gate=leases[user],
            fold=fold,
        )
        for decider, user in zip(deciders, users, strict=True)
    ]
    reader = buses[users[0]]
    if isinstance(reader, ObservedBus):
        health = reader.health
        fold.on_orphan = health.orphan_counter()
        health.add_check(_cohosted_readiness(loops, [buses[u] for u in users]))
        health.registry.register(PartitionCollector(loops, service=health.service))
        held = {user: lease for user, lease in leases.items() if lease is not None}
        if held:
            standby_lease.observe_roles(dict(held), health)
        for loop, user in zip(loops, users, strict=True):
            if loop.decider.role == ADMITTER_ROLE:  # Kueue's metrics, from the fold, by the holder of slot 0
                health.registry.register(KueueCollector(lambda: fold.state, active=_holds_slot_0(leases[user])))
    for loop, user in zip(loops, users, strict=True):
        lease = leases[user]
        log.info(
            "service_started",
            role=loop.decider.role,
            user=user,
            cohosted=users,
            logic_version=loop.decider.logic_version,
            partitions="all" if partitions is None else sorted(partitions),
            lease=lease.key if lease is not None else None,
            slots=lease.count if lease is not None else None,
            identity=lease.identity if lease is not None else None,
        )
    try:
        await run_until_stopped(stop, fold.run(), *[lease.run() for lease in leases.values() if lease is not None])
    finally:
        for lease in leases.values():
            if lease is not None:
                await lease.release()
        for bus in buses.values():
            await bus.close()
        for loop, user in zip(loops, users, strict=True):
            lease = leases[user]
            log.info(
                "service_stopped",
                role=loop.decider.role,
                user=user,
                cohosted=users,
                commits=loop.commits,
                conflicts=loop.conflicts,
                fence_conflicts=loop.fence_conflicts,
                partitions=len(loop.stats),
                folded_seq=fold.state.last_seq,
                lease_transitions=lease.transitions if lease is not None else None,
            )


def _holds_slot_0(lease: standby_lease.SlotLeases | None) -> Callable[[], bool] | None:
    return (lambda: 0 in lease.held()) if lease is not None else None


def _cohosted_readiness(
    loops: Sequence[DeciderLoop], buses: Sequence[Bus]
) -> Callable[[], tuple[bool, dict[str, Any]]]:
    """/readyz of co-hosted roles: ready while every role's loop is and every role's connection is up."""

    def readiness() -> tuple[bool, dict[str, Any]]:
        ready, facts = True, {}
        for loop, bus in zip(loops, buses, strict=True):
            ok, more = loop.readiness()
            connected = getattr(bus, "inner", bus).status().connected
            facts[user_of(loop.decider)] = {**more, "nats_connected": connected}
            ready = ready and ok and connected
        return ready, {"deciders": facts}

    return readiness


class PartitionCollector(Collector):
    """The loop's per-partition metrics: ``kueue_es_decider_commits_total{service,role,partition}``,
    ``kueue_es_decider_conflicts_total{...}`` (commit attempts with decisions the head check refused: real
    contention), ``kueue_es_decider_fence_conflicts_total{...}`` (fence-only commits refused: harmless,
    another record of the partition came first), ``kueue_es_decider_partitions{service,role}``
    (partitions this replica decides now) and ``kueue_es_partitions_unowned{service,role}`` (partitions
    outside its static list showing no decider at work, ``DeciderLoop.unowned_partitions``)."""

    def __init__(self, loop: DeciderLoop | Sequence[DeciderLoop], *, service: str) -> None:
        self.loops = [loop] if isinstance(loop, DeciderLoop) else list(loop)
        self.service = service

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """One sample per partition each loop (role) has committed in or been refused in."""
        labels = ["service", "role", "partition"]
        commits = CounterMetricFamily(
            "kueue_es_decider_commits", "Batches this replica committed, by partition.", labels=labels
        )
        conflicts = CounterMetricFamily(
            "kueue_es_decider_conflicts",
            "Commits with decisions the head check refused (contention), by partition.",
            labels=labels,
        )
        fences = CounterMetricFamily(
            "kueue_es_decider_fence_conflicts",
            "Fence-only commits the head check refused (harmless: another record came first), by partition.",
            labels=labels,
        )
        owned = GaugeMetricFamily(
            "kueue_es_decider_partitions", "Partitions this replica decides now.", labels=["service", "role"]
        )
        unowned = GaugeMetricFamily(
            "kueue_es_partitions_unowned",
            "Partitions outside this replica's static --partitions list that show no decider at work"
            " (DeciderLoop.unowned_partitions): what waits on them waits for ever.",
            labels=["service", "role"],
        )
        for loop in self.loops:
            role = loop.decider.role
            for partition, stats in sorted(loop.stats.items()):
                commits.add_metric([self.service, role, partition], stats.commits)
                conflicts.add_metric([self.service, role, partition], stats.conflicts)
                fences.add_metric([self.service, role, partition], stats.fence_conflicts)
            owned.add_metric([self.service, role], len(loop.owned()))
            unowned.add_metric([self.service, role], len(loop.unowned))
        yield from (commits, conflicts, fences, owned, unowned)
