"""Where pending workloads stand in their queues, for ``kubectl kueue list workload``'s POSITION IN QUEUE.

kueuectl asks the visibility API (``visibility.kueue.x-k8s.io/v1beta2``, ``clusterqueues/CQ/
pendingworkloads``) once per ClusterQueue and shows each pending workload's ``positionInLocalQueue``.
kueue-es does the same; when the API server does not serve that API (404: no aggregated visibility
server in this cluster), the positions come from the running system's log instead: its fold
(:func:`kueue_es.services.runtime.fold_message` over the whole log) and
:func:`kueue_es.scheduling.visibility.pending_in_cluster_queue`, the same order the visibility server
answers from. The log is read only when a running system belongs to this cluster
(:func:`kueue_es.kueuectl.connect.system_for`: the one whose recorded kubeconfig is the one in use, of
several running, not only the newest; or the one :func:`kueue_es.current.find` names when it recorded no
kubeconfig, ``up`` against a real cluster). Otherwise the
column stays empty, as kueuectl leaves it when the API answers NotFound (with a ``Warning:`` line on
stderr when that log exists but cannot be read).
"""

from __future__ import annotations

import sys
import time
import urllib.parse
from typing import Any

from kueue_es.kueuectl.connect import Cluster, Failure, system_for

VISIBILITY_PATH = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/{}/pendingworkloads"
LOG_IDLE_SECONDS = 5.0


async def from_visibility_api(cluster: Cluster, cluster_queue: str) -> dict[tuple[str, str], int] | None:
    """``(namespace, name) -> positionInLocalQueue`` for every pending workload of ``cluster_queue`` from the
    visibility API; None when the server answers 404 (the API is not served, or no such ClusterQueue)."""
    path = VISIBILITY_PATH.format(urllib.parse.quote(cluster_queue, safe=""))
    try:
        summary = await cluster.request("GET", path)
    except Failure as err:
        if err.status == 404:
            return None
        raise
    positions: dict[tuple[str, str], int] = {}
    for item in summary.get("items") or []:
        metadata = item.get("metadata") or item  # PendingWorkload embeds ObjectMeta
        key = (str(metadata.get("namespace", "")), str(metadata.get("name", "")))
        positions[key] = int(item.get("positionInLocalQueue", 0))
    return positions


def _note(why: str) -> None:
    sys.stderr.write(f"Warning: POSITION IN QUEUE left empty: no visibility API, and {why}\n")


async def from_log(cluster: Cluster, cluster_queues: set[str]) -> dict[str, dict[tuple[str, str], int]]:
    """``cluster queue -> (namespace, name) -> positionInLocalQueue`` folded from the running system's log
    (see the module for when it is read); {} when there is none for this cluster or it cannot be read."""
    system = system_for(cluster.kubeconfig)
    if system is None:
        return {}
    from kueue_es.events.bus import nats as nats_bus
    from kueue_es.events.bus.base import BusError
    from kueue_es.projections.cluster import ClusterState
    from kueue_es.replay import stream_log
    from kueue_es.scheduling import visibility
    from kueue_es.services.runtime import fold_message

    try:
        bus = await nats_bus.connect(system.nats_url, credentials=system.credentials, create_stream=False)
    except (BusError, OSError) as err:
        _note(f"the log of {system.origin} at {system.nats_url} could not be read ({err})")
        return {}
    try:
        state = ClusterState()
        last = await bus.last_seq()
        async for message in stream_log(bus, last=last, idle=LOG_IDLE_SECONDS):
            fold_message(state, message)
    except BusError as err:
        _note(f"the log of {system.origin} at {system.nats_url} could not be read ({err})")
        return {}
    finally:
        await bus.close()
    now_ms = int(time.time() * 1000)
    answer: dict[str, dict[tuple[str, str], int]] = {}
    for cq in cluster_queues:
        if cq not in state.cluster_queues:
            continue
        answer[cq] = {
            (p.namespace, p.name): p.position_in_local_queue
            for p in visibility.pending_in_cluster_queue(state, cq, now_ms=now_ms)
        }
    return answer


async def pending_positions(cluster: Cluster, wanted: dict[str, list[dict[str, Any]]]) -> dict[tuple[str, str], int]:
    """``(namespace, name) -> positionInLocalQueue`` of the pending workloads in ``wanted`` (ClusterQueue
    name -> its pending Workload objects): the visibility API first, the log for ClusterQueues it does not
    answer (see the module)."""
    positions: dict[tuple[str, str], int] = {}
    unanswered: set[str] = set()
    for cq in sorted(wanted):
        answer = await from_visibility_api(cluster, cq)
        if answer is None:
            unanswered.add(cq)
        else:
            positions.update(answer)
    if unanswered:
        for answer in (await from_log(cluster, unanswered)).values():
            positions.update(answer)
    keys = {(str(w["metadata"].get("namespace", "")), str(w["metadata"]["name"])) for ws in wanted.values() for w in ws}
    return {key: value for key, value in positions.items() if key in keys}
