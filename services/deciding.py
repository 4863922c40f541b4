"""The runner shared by the three decider services (admitter, preemptor, TAS placer).

Connects to the bus and runs a :class:`kueue_es.services.runtime.DeciderLoop` with the
service's pure core until SIGTERM; with ``standby`` settings, only while this replica
holds the decider's lease (:mod:`kueue_es.services.standby`), folding the log meanwhile.
The admitter's ``/metrics`` also carries Kueue's metrics from its fold (:mod:`kueue_es.services.kueue_metrics`),
only while it holds that lease.
The cores live in ``services/<name>/core.py``; this is the only async code they need.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus
from kueue_es.projections.cluster import ADMITTER_ROLE
from kueue_es.services import standby as standby_lease
from kueue_es.services.health import ObservedBus
from kueue_es.services.kueue_metrics import KueueCollector
from kueue_es.services.runtime import Decider, DeciderLoop, StartPoint, run_until_stopped

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
) -> None:
    """Run ``decider`` against the log at ``nats_url`` until ``stop`` is set (``stepped``: see DeciderLoop;
    ``connect``: how to get the bus, e.g. ``kueue_es.services.health.Health.connect`` to observe it;
    ``start``: a checkpoint to fold on from, used only if it is of this log, see DeciderLoop).

    ``standby``: decide and commit only while holding the decider's lease (on a NATS bus), with
    these timings; on the way out the lease is released, after the loop stopped. None: always
    decide (every replica hot). Raises NotFoundError when the lease bucket is missing and this
    NATS user may not create it.
    """
    bus = await connect(nats_url)
    try:
        lease = None if standby is None else await standby_lease.open_lease(bus, role=decider.role, settings=standby)
    except BaseException:
        await bus.close()
        raise
    loop = DeciderLoop(bus=bus, decider=decider, wakeup=wakeup, stepped=stepped, start=start, gate=lease)
    if isinstance(bus, ObservedBus):  # the observed bus carries the Health it reports to
        loop.on_orphan = bus.health.orphaned
        bus.health.add_check(loop.readiness)
        if lease is not None:
            standby_lease.observe(lease, bus.health, role=decider.role)
        if decider.role == ADMITTER_ROLE:  # Kueue's metrics, from the admitter's fold, while it holds its lease
            bus.health.registry.register(
                KueueCollector(lambda: loop.state, active=lease.active if lease is not None else None)
            )
    log.info(
        "service_started",
        role=decider.role,
        logic_version=decider.logic_version,
        lease=lease.key if lease is not None else None,
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
            folded_seq=loop.state.last_seq,
            lease_transitions=lease.transitions if lease is not None else None,
        )
