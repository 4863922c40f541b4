"""The MultiKueue edge: the manager's link to its worker clusters (``kueue-es service multikueue-edge``).

Why this module exists: the ``multikueue`` decider chooses on the log (which workers get a copy,
which one won); something must carry that to the workers and bring back what they do, as Kueue's
MultiKueue controllers do (SEMANTICS-ADVANCED E; Kueue pkg/controller/admissionchecks/multikueue).
This runner, as NATS user ``multikueue-edge``:

- follows every MultiKueueCluster on the manager's API server, reads its kubeconfig as Kueue does
  (the Secret key ``kubeconfig`` in the kueue-es namespace, or a Path), connects with
  kubernetes-asyncio, keeps the cluster's ``Active`` condition and publishes
  WorkerClusterConnectivity (``kq.in.worker.<cluster>``) when it changes; a failed connection is
  tried again after 5 s·2^(n−1) (7 steps, :func:`remote.reconnect_delay_seconds`);
- watches, on each connected worker, the Workloads with its origin label and publishes each change
  as RemoteWorkloadObserved (``kq.in.remote.<cluster>.<ns>.<name>``);
- folds the log (:class:`~kueue_es.projections.cluster.ClusterState`, the verified decisions only;
  from the newest verified snapshot when there is one, :meth:`Edge.adopt`, and never from a purged #1)
  and writes what :func:`core.plan` says: remote Workload copies on the nominated workers
  (WorkersNominated), the job on the winner and no copy elsewhere (RemoteAdmissionChosen), nothing
  left for a workload that finished, was evicted or deleted, and, every ``gcInterval``, no copy of
  this origin whose manager workload is gone. Each write is a DispatchApplied or DispatchFailed on
  ``kq.disp.<cluster>.wl.<ns>.<name>``;
- copies the remote job's status to the manager's job (:func:`remote.mirrored_job_status`).

Transient errors are retried (tenacity for single writes; every plan is recomputed each tick), never
fatal. The remote job names its copy as its prebuilt Workload (the job's label; past 63 characters, its
annotation): the worker's Kueue (or kueue-es) adopts the copy, admitted already, and starts the job; the edge
never unsuspends it itself.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import pathlib
from collections.abc import Mapping
from typing import Any

import msgspec
import structlog
import tenacity
import yaml
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from kueue_es.events import codec, models, subjects, types
from kueue_es.events.bus.base import Bus, LogMessage
from kueue_es.projections import afs, batches, multikueue
from kueue_es.projections.cluster import ClusterState, WorkloadState, priority_of
from kueue_es.services import runtime
from kueue_es.services.kube import client, errors, resources
from kueue_es.services.multikueue_edge import core, remote

log = structlog.get_logger(__name__)

USER = "multikueue-edge"
"""The edge's NATS user (events/bus/permissions.py)."""
MULTIKUEUE_CLUSTERS = resources.MULTIKUEUE_CLUSTERS
SECRETS = resources.SECRETS
DEFAULT_ORIGIN = "multikueue"
TICK_S = 0.5
PROBE_S = 2.0
ACTIVE_REASON = "Active"
INACTIVE_REASON = "ClientConnectionFailed"


def _retry() -> Any:
    """Retry a single remote write a few times on network errors and 5xx/429 (not on 4xx answers)."""
    return tenacity.retry(
        retry=tenacity.retry_if_exception(
            lambda e: (
                isinstance(e, (OSError, asyncio.TimeoutError))
                or (isinstance(e, errors.ApiError) and (e.status >= 500 or e.status == 429))
            )
        ),
        wait=tenacity.wait_exponential(multiplier=0.2, max=2.0),
        stop=tenacity.stop_after_attempt(4),
        reraise=True,
    )


def _read_kubeconfig_file(path: str, validate: bool) -> str:
    """The text of a Path kubeconfig; with ``validate`` (the MultiKueueKubeConfigPathValidation gate) only
    under /etc/multikueue/kubeconfigs, symlinks resolved. Raises :class:`remote.KubeconfigProblem`
    (``BadKubeConfig``) worded as Kueue's Go errors (multikueuecluster.go getKubeConfigFromPath)."""
    if validate:

        def real(p: str) -> str | None:
            try:
                return str(pathlib.Path(p).resolve(strict=True))
            except (OSError, RuntimeError):
                return None

        problem = remote.path_problem(path, resolved=real(path), prefix=real(remote.KUBECONFIG_DIR))
        if problem is not None:
            raise remote.KubeconfigProblem(remote.BAD_KUBECONFIG, problem)
    try:
        return pathlib.Path(path).read_text()
    except OSError as err:
        why = (err.strerror or type(err).__name__).lower()
        raise remote.KubeconfigProblem(remote.BAD_KUBECONFIG, f"open {path}: {why}") from err


def connection_failure(err: BaseException) -> str:
    """The Active=False message of a worker that cannot be reached: the root cause's own words (for
    example aiohttp's "Cannot connect to host 127.0.0.1:41525 ssl:default [Connect call failed ...]"),
    not the Python repr of the wrapping errors, at most 512 characters."""
    root = err
    while root.__cause__ is not None:
        root = root.__cause__
    text = str(root).strip() or type(root).__name__
    return f"cannot reach the worker's API server: {text}"[:512]


@dataclasses.dataclass(kw_only=True)
class Worker:
    """One MultiKueueCluster: where its kubeconfig is, its client, whether it is Active, what it holds."""

    name: str
    spec: dict[str, Any]
    api: k8s_client.ApiClient | None = None
    active: bool = False
    reported: tuple[bool, str, str] | None = None  # the last connectivity published
    failures: int = 0
    copies: dict[str, core.RemoteCopy] = dataclasses.field(default_factory=dict)
    raw: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    jobs: set[str] = dataclasses.field(default_factory=set)  # keys whose remote job exists
    observed: dict[str, types.RemoteWorkloadObserved] = dataclasses.field(default_factory=dict)
    task: asyncio.Task[None] | None = None


@dataclasses.dataclass(kw_only=True)
class Decided:
    """The verified MultiKueue decisions of one workload, since its last Retry (or reset)."""

    nominated: tuple[str, ...] = ()
    nominated_seq: int = 0
    chosen: str = ""
    chosen_seq: int = 0
    check: str = ""


def remote_observation(
    cluster: str, obj: Mapping[str, Any] | None, *, ref: types.WorkloadRef, now_ms: int
) -> types.RemoteWorkloadObserved:
    """The RemoteWorkloadObserved of the copy ``obj`` of ``ref`` on ``cluster`` (None: no copy):
    its QuotaReserved, Admitted, Evicted and Finished conditions (SEMANTICS-ADVANCED E.2 5-7, E.3), and the pod
    sets its ``status.admission`` gives a ``topologyAssignment`` (multikueue/workload.go needsDelayedTopologyUpdate)."""
    if obj is None:
        return types.RemoteWorkloadObserved(workload=ref, cluster=cluster, present=False, at_ms=now_ms)
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}

    def true(kind: str) -> Mapping[str, Any] | None:
        cond = conditions.get(kind)
        return cond if cond is not None and cond.get("status") == "True" else None

    admitted, evicted, finished = true("Admitted"), true("Evicted"), true("Finished")
    admission = (obj.get("status") or {}).get("admission")
    assignments = admission.get("podSetAssignments") if isinstance(admission, Mapping) else None
    placed = sorted(
        str(a.get("name") or "")
        for a in assignments or []
        if isinstance(a, Mapping) and isinstance(a.get("topologyAssignment"), Mapping)
    )
    return types.RemoteWorkloadObserved(
        workload=ref,
        cluster=cluster,
        present=True,
        quota_reserved=true("QuotaReserved") is not None,
        admitted=admitted is not None,
        admitted_at_ms=_time_ms(admitted.get("lastTransitionTime")) if admitted else 0,
        evicted=evicted is not None,
        eviction_reason=str(evicted.get("reason") or "") if evicted else "",
        finished=finished is not None,
        finish_reason=str(finished.get("reason") or "") if finished else "",
        finish_message=str(finished.get("message") or "") if finished else "",
        at_ms=now_ms,
        # the pod sets the worker placed: the manager marks only their delayed topology request Ready
        topology_assigned=placed or msgspec.UNSET,
    )


def _time_ms(text: Any) -> int:
    import datetime

    if not text:
        return 0
    try:
        return int(datetime.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


class Edge:
    """Folds the manager's log and keeps the workers in line with it (the module's docstring).

    ``bus``: the log, as NATS user ``multikueue-edge``; ``api``: the manager's API server;
    ``namespace``: where the kubeconfig Secrets are (kueue-es's namespace, Kueue's ``kueue-system``);
    ``start``: a snapshot's start point (:mod:`kueue_es.snapshots`) to fold on from, used when it is of this log.
    """

    def __init__(
        self,
        *,
        bus: Bus,
        api: k8s_client.ApiClient,
        namespace: str,
        clock: Any = None,
        start: runtime.StartPoint | None = None,
    ) -> None:
        self.bus, self.api, self.namespace, self.start = bus, api, namespace, start
        self.clock = clock or runtime.wall_clock_ms
        self.state = ClusterState()
        self.decided: dict[str, Decided] = {}
        # evicted workloads that had a MultiKueue decision, until their quota is released: the manager's Job
        # must come to show no pods (:meth:`_stopped`), however late the last mirrored status landed
        self.stopping: set[str] = set()
        # the copies (worker UIDs) a workload had when its nomination was reset (a Retry, an eviction, a release):
        # they go before any copy serves it again, however soon it is nominated anew (Kueue's reconcileGroup
        # deletes every copy while the workload holds no quota; a fold that takes the reset and the next
        # nomination at once would otherwise never see that moment)
        self.stale: dict[str, set[str]] = {}
        self.created: dict[str, dict[str, str]] = {}  # the copies this edge created: key -> worker -> UID
        self.workers: dict[str, Worker] = {}
        self.caught_up = False
        self.wake = asyncio.Event()
        self._last_gc = 0.0

    # -- configuration --------------------------------------------------------------------

    @property
    def settings(self) -> models.MultiKueueConfiguration:
        """The manager Configuration's ``multiKueue`` section (Kueue's defaults when absent)."""
        return self.state.configuration.multi_kueue or models.MultiKueueConfiguration()

    @property
    def origin(self) -> str:
        """``multiKueue.origin``: the value of the origin label on every remote object."""
        return self.settings.origin or DEFAULT_ORIGIN

    @property
    def gc_interval_s(self) -> float:
        """``multiKueue.gcInterval`` in seconds (0 turns GC off)."""
        return afs.go_duration_seconds(self.settings.gc_interval)

    # -- the log --------------------------------------------------------------------------

    def take(self, message: LogMessage) -> None:
        """Fold one log message; remember the verified MultiKueue decisions it carries."""
        try:
            event: types.Event | None = codec.decode(message.data)
        except codec.DecodeError as err:
            event = None
            if batches.partition_of(message.subject) is None:
                log.warning("event_undecodable", seq=message.seq, subject=message.subject, error=str(err))
            self.state.last_seq = max(self.state.last_seq, message.seq)
        runtime.fold_decoded(self.state, message, event, before_apply=self._accepted)
        if message.pending == 0:
            self.caught_up = True
        self.wake.set()

    def _accepted(self, seq: int, event: types.Event, _state: ClusterState) -> None:
        match event:
            case types.WorkersNominated(workload=ref, check=check, clusters=clusters):
                d = self.decided.setdefault(ref.key, Decided())
                d.nominated, d.nominated_seq, d.check = tuple(clusters), seq, check
            case types.RemoteAdmissionChosen(workload=ref, cluster=cluster):
                d = self.decided.setdefault(ref.key, Decided())
                d.chosen, d.chosen_seq = cluster, seq
            case types.MultiKueueCheckRetry(workload=ref) | types.MultiKueueCheckRejected(workload=ref):
                # nomination starts again after the eviction the check's state brings
                self._reset(ref.key)
                if self.decided.pop(ref.key, None) is not None:
                    self.stopping.add(ref.key)
            case types.EvictionRequested(workload=ref):
                self._reset(ref.key)
                if self.decided.pop(ref.key, None) is not None:
                    self.stopping.add(ref.key)
            case types.QuotaReleased(workload=ref):
                self._reset(ref.key)
                self.decided.pop(ref.key, None)
                self.stopping.discard(ref.key)
            case _:
                pass

    def adopt(self, state: ClusterState, seq: int) -> None:
        """Take ``state``, the fold of the log through ``seq`` (a snapshot's), as the edge's own, with the
        MultiKueue decisions it holds: each workload's nominated workers and winner (their log sequences are
        not in the fold: ``seq`` stands for both, so a result published for them is named after the snapshot),
        and the evicted workloads with a MultiKueue check that still hold quota (:attr:`stopping`)."""
        self.state = state
        self.decided.clear()
        self.stopping.clear()
        mk = state.multikueue
        for key, nomination in mk.nominations.items():
            self.decided[key] = Decided(nominated=tuple(nomination.clusters), nominated_seq=seq, check=nomination.check)
        for key, cluster in mk.cluster_names.items():
            d = self.decided.setdefault(key, Decided())
            d.chosen, d.chosen_seq = cluster, seq
            if not d.check:
                wl = state.workloads.get(key)
                d.check = next((c for c in (wl.checks if wl else ()) if c in mk.checks), "")
        for key, wl in state.workloads.items():
            if wl.eviction is not None and wl.reservation is not None and any(c in mk.checks for c in wl.checks):
                self.stopping.add(key)

    def _reset(self, key: str) -> None:
        """The nomination of ``key`` ends: every copy it has now, seen or just created, is stale."""
        uids = {w.copies[key].uid for w in self.workers.values() if key in w.copies and w.copies[key].uid}
        uids |= set(self.created.pop(key, {}).values())
        if uids:
            self.stale.setdefault(key, set()).update(uids)

    def locals(self) -> dict[str, core.LocalWorkload]:
        """The manager workloads the edge acts on: those with a MultiKueue decision, and whether they are live."""
        out: dict[str, core.LocalWorkload] = {}
        for key, d in self.decided.items():
            wl = self.state.workloads.get(key)
            out[key] = core.LocalWorkload(
                ref=_ref(key, wl),
                live=_live(wl),
                nominated=d.nominated,
                nominated_seq=d.nominated_seq,
                chosen=d.chosen,
                chosen_seq=d.chosen_seq,
                job=_job(wl),
                priority=_local_priority(wl, self.state),
                group=_group(self.state, d.check),
                stale_uids=frozenset(self.stale.get(key, ())),
            )
        # workloads whose decisions were reset but whose copies may remain: not live
        for worker in self.workers.values():
            for key in worker.copies:
                if key not in out and key in self.state.workloads:
                    wl = self.state.workloads[key]
                    out[key] = core.LocalWorkload(ref=_ref(key, wl), live=False, job=_job(wl))
        return out

    def prune(self) -> None:
        """Forget the decisions of workloads that are done (finished, deleted or gone from the fold) once no
        worker holds a copy of them, so the edge's memory follows the live workloads, not the history."""
        held = {key for worker in self.workers.values() for key in worker.copies}
        for key in list(self.decided):
            wl = self.state.workloads.get(key)
            done = wl is None or wl.finished is not None or bool(wl.deleted_seq)
            if done and key not in held:
                del self.decided[key]
        for key in list(self.stale):  # a stale copy no worker shows any more is gone for good
            copies = {w.copies[key].uid for w in self.workers.values() if key in w.copies}
            self.stale[key] &= copies
            if not self.stale[key]:
                del self.stale[key]
        for key in list(self.created):
            if key not in self.decided:
                del self.created[key]

    # -- running ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Follow the log, the MultiKueueClusters and the workers, and write the plans, for ever."""
        tasks = [
            asyncio.create_task(self._follow_log(), name="mk-log"),
            asyncio.create_task(self._follow_clusters(), name="mk-clusters"),
            asyncio.create_task(self._reconcile_loop(), name="mk-reconcile"),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            workers = [w.task for w in self.workers.values() if w.task is not None]
            await runtime.cancel_and_wait([*tasks, *workers])
            for worker in self.workers.values():
                if worker.api is not None:
                    with contextlib.suppress(Exception):
                        await worker.api.close()

    async def _resume(self) -> int:
        """Where the fold of the log starts: after the start point when it is of this log (:meth:`adopt`), else
        at #1; raises :class:`~kueue_es.services.runtime.LogPurgedError` when #1 was purged (a fold from what
        is left would miss every ClusterQueue and decision before it, and orphan every decision after)."""
        start, self.start = self.start, None
        if start is not None:
            problem = await runtime.log_mismatch(self.bus, start)
            if problem is None:
                self.adopt(start.state, start.seq)
                self.bus.folded_through(start.seq)
                log.info("started_from_checkpoint", checkpoint=start.origin, seq=start.seq)
                with contextlib.suppress(Exception):  # nothing follows the snapshot: caught up at once
                    self.caught_up = self.caught_up or await self.bus.last_seq() <= start.seq
                return start.seq + 1
            log.warning("checkpoint_not_used", checkpoint=start.origin, seq=start.seq, reason=problem)
        await runtime.require_from_start(self.bus, "multikueue edge")
        return 1

    async def _follow_log(self) -> None:
        filters = [subjects.FACTS, subjects.DISPATCH, subjects.DECISIONS]
        async for message in self.bus.read(subjects=filters, start_seq=await self._resume()):
            self.take(message)

    async def _follow_clusters(self) -> None:
        async for change in client.watch_objects(self.api, MULTIKUEUE_CLUSTERS, max_backoff_seconds=5.0):
            if isinstance(change, client.Resynced):
                seen = {str(o["metadata"]["name"]): o for o in change.objects}
                for name in list(self.workers):
                    if name not in seen:
                        await self._forget(name)
                for name, obj in seen.items():
                    self._upsert(name, obj)
            elif change.type == "DELETED":
                await self._forget(str(change.object["metadata"]["name"]))
            else:
                self._upsert(str(change.object["metadata"]["name"]), change.object)

    def _upsert(self, name: str, obj: dict[str, Any]) -> None:
        spec = dict(obj.get("spec") or {})
        worker = self.workers.get(name)
        if worker is not None and worker.spec == spec and worker.task is not None:
            return
        if worker is not None and worker.task is not None:
            worker.task.cancel()
        worker = worker or Worker(name=name, spec=spec)
        worker.spec = spec
        self.workers[name] = worker
        worker.task = asyncio.create_task(self._keep_connected(worker), name=f"mk-worker-{name}")

    async def _forget(self, name: str) -> None:
        worker = self.workers.pop(name, None)
        if worker is not None and worker.task is not None:
            await runtime.cancel_and_wait([worker.task])

    # -- one worker ------------------------------------------------------------------------

    async def _kubeconfig(self, worker: Worker) -> dict[str, Any]:
        """The worker's kubeconfig, read and checked as Kueue's loadClientConfig does (multikueuecluster.go);
        raises :class:`remote.KubeconfigProblem` with the cluster's ``Active=False`` reason."""
        cluster = {"metadata": {"name": worker.name}, "spec": worker.spec}
        gates = self.state.configuration.feature_gates
        problem = remote.cluster_source_problem(cluster, gates=gates)
        if problem is not None:
            raise problem
        try:
            source = remote.kubeconfig_source(cluster)
        except remote.RemoteCopyError as err:
            raise remote.KubeconfigProblem(remote.BAD_KUBECONFIG, str(err)) from err
        if source.path:
            text = await asyncio.to_thread(
                _read_kubeconfig_file, source.location, gates.get(remote.PATH_VALIDATION_GATE, True)
            )
        else:
            try:
                secret = await client.get_object(self.api, SECRETS, namespace=self.namespace, name=source.location)
            except errors.NotFoundError as err:
                raise remote.KubeconfigProblem(remote.BAD_KUBECONFIG, f'Secret "{source.location}" not found') from err
            data = (secret.get("data") or {}).get(remote.KUBECONFIG_KEY)
            if not data:
                raise remote.KubeconfigProblem(
                    remote.BAD_KUBECONFIG, f'key "{remote.KUBECONFIG_KEY}" not found in secret "{source.location}"'
                )
            text = base64.b64decode(data).decode(errors="replace")
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise remote.KubeconfigProblem(
                remote.INSECURE_KUBECONFIG, f"failed to parse kubeconfig(apiconfig): {err}"
            ) from err
        if not isinstance(config, dict):
            raise remote.KubeconfigProblem(
                remote.INSECURE_KUBECONFIG, "failed to parse kubeconfig(apiconfig): not a YAML mapping"
            )
        insecure = remote.insecure_kubeconfig(config)
        if insecure is not None:
            raise remote.KubeconfigProblem(remote.INSECURE_KUBECONFIG, insecure)
        return config

    async def _keep_connected(self, worker: Worker) -> None:
        """Connect, watch and probe ``worker`` until cancelled; back off after each failure."""
        while True:
            watch: asyncio.Task[None] | None = None
            try:
                config = await self._kubeconfig(worker)
                worker.api = await k8s_config.new_client_from_config_dict(config_dict=config)
                async with asyncio.timeout(5.0):
                    items, _ = await client.list_objects(
                        worker.api, resources.WORKLOADS, label_selector=f"{remote.ORIGIN_LABEL}={self.origin}"
                    )
                await self._resync(worker, items)
                worker.failures = 0
                await self._set_active(worker, True, ACTIVE_REASON, "Connected")
                watch = asyncio.create_task(self._watch(worker), name=f"mk-watch-{worker.name}")
                while True:  # a stopped worker is seen by the probe (the watch retries quietly)
                    await asyncio.sleep(PROBE_S)
                    if watch.done():
                        watch.result()
                    async with asyncio.timeout(5.0):
                        await client.list_objects(
                            worker.api, resources.NAMESPACES, field_selector="metadata.name=default"
                        )
            except asyncio.CancelledError:
                raise
            except remote.KubeconfigProblem as err:
                # read again soon, not after a growing backoff: Kueue reconnects as soon as the
                # Secret (or file) is fixed, and reading it costs the worker nothing
                worker.failures = 0
                await self._set_active(worker, False, err.reason, str(err))
            except (ValueError, k8s_config.ConfigException) as err:
                worker.failures = 0
                await self._set_active(worker, False, remote.INSECURE_KUBECONFIG, f"load client config failed: {err}")
            except Exception as err:  # unreachable: never fatal
                worker.failures += 1
                await self._set_active(worker, False, INACTIVE_REASON, connection_failure(err))
            finally:
                if watch is not None:
                    await runtime.cancel_and_wait([watch])
                if worker.api is not None:
                    with contextlib.suppress(Exception):
                        await worker.api.close()
                    worker.api = None
            delay = remote.reconnect_delay_seconds(worker.failures)
            log.info("worker_retry", cluster=worker.name, failures=worker.failures, after_s=delay)
            await asyncio.sleep(delay)

    async def _watch(self, worker: Worker) -> None:
        assert worker.api is not None
        selector = f"{remote.ORIGIN_LABEL}={self.origin}"
        async for change in client.watch_objects(
            worker.api, resources.WORKLOADS, label_selector=selector, max_backoff_seconds=2.0
        ):
            if isinstance(change, client.Resynced):
                await self._resync(worker, list(change.objects))
            else:
                await self._observe(worker, change.object, deleted=change.type == "DELETED")

    async def _resync(self, worker: Worker, items: list[dict[str, Any]]) -> None:
        seen = {f"{o['metadata'].get('namespace')}/{o['metadata']['name']}" for o in items}
        for key in list(worker.raw):
            if key not in seen:
                await self._observe(worker, worker.raw[key], deleted=True)
        for obj in items:
            await self._observe(worker, obj, deleted=False)

    async def _observe(self, worker: Worker, obj: dict[str, Any], *, deleted: bool) -> None:
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        key = f"{namespace}/{name}"
        local = self.state.workloads.get(key)
        ref = _ref(key, local)
        # a copy of an earlier nomination is no copy of this one: the decider must not choose it while the plan
        # removes it (a worker that dropped its Evicted condition would show it admitted again)
        stale = str(meta.get("uid") or "") in self.stale.get(key, ())
        fact = remote_observation(worker.name, None if deleted or stale else obj, ref=ref, now_ms=self.clock())
        if deleted:
            worker.raw.pop(key, None)
            worker.copies.pop(key, None)
            worker.jobs.discard(key)
        else:
            worker.raw[key] = obj
            worker.copies[key] = core.RemoteCopy(
                namespace=namespace,
                name=name,
                uid=str(meta.get("uid") or ""),
                admitted=fact.admitted,
                has_job=key in worker.jobs,
                priority=remote.copy_priority(obj),
            )
        previous = worker.observed.get(key)
        if (previous is not None and _same(previous, fact)) or (previous is None and deleted):
            return
        worker.observed[key] = fact
        await self._publish_fact(fact)
        if deleted:
            worker.observed.pop(key, None)  # said once; a new copy is a new first observation
        self.wake.set()

    async def _set_active(self, worker: Worker, active: bool, reason: str, message: str) -> None:
        worker.active = active
        same = worker.reported is not None and worker.reported[:2] == (active, reason)
        if same and (reason == INACTIVE_REASON or worker.reported == (active, reason, message)):
            return  # the same state again (a retry's connection error differs: not a new fact)
        worker.reported = (active, reason, message)
        log.info("worker_connectivity", cluster=worker.name, active=active, reason=reason, message=message)
        await self._publish_fact(
            types.WorkerClusterConnectivity(
                cluster=worker.name, active=active, reason=reason, message=message, at_ms=self.clock()
            )
        )
        now = _rfc3339(self.clock())
        condition = {
            "type": "Active",
            "status": "True" if active else "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": now,
            "observedGeneration": 0,
        }
        with contextlib.suppress(Exception):
            await client.patch_object(
                self.api,
                MULTIKUEUE_CLUSTERS,
                name=worker.name,
                subresource="status",
                patch={"status": {"conditions": [condition]}},
            )
        self.wake.set()

    async def _publish_fact(self, fact: types.Fact) -> None:
        while True:
            try:
                await self.bus.publish(subjects.fact_message(fact))
                return
            except Exception as err:  # the bus is back soon; never fatal
                log.warning("publish_failed", error=str(err), type=codec.type_name(fact))
                await asyncio.sleep(1.0)

    # -- writing the plans ----------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK_S):
                    await self.wake.wait()
            self.wake.clear()
            if not self.caught_up:
                continue
            gc_every = self.gc_interval_s
            collect = gc_every > 0 and loop.time() - self._last_gc >= gc_every
            if collect:
                self._last_gc = loop.time()
            try:
                await self._hide_stale()
                await self.reconcile(collect_garbage=collect)
                await self._mirror_jobs()
                self.prune()
            except Exception as err:  # a worker's client closed under a write, ...: the next tick tries again
                log.warning("reconcile_failed", error=f"{type(err).__name__}: {err}")

    async def reconcile(self, *, collect_garbage: bool = False) -> None:
        """Compute the plan (:func:`core.plan`) and write it; each write's result goes on the log."""
        connected = {name for name, w in self.workers.items() if w.active and w.api is not None}
        remote_view = {name: dict(w.copies) for name, w in self.workers.items() if name in connected}
        for name in connected:
            worker = self.workers[name]
            for key, copy in list(remote_view[name].items()):
                if copy.has_job != (key in worker.jobs):
                    remote_view[name][key] = dataclasses.replace(copy, has_job=key in worker.jobs)
        actions = core.plan(
            self.locals(),
            remote_view,
            connected=connected,
            collect_garbage=collect_garbage,
            known=self.state.workloads.keys(),
        )
        for action in actions:
            await self._write(action)

    async def _write(self, action: core.Action) -> None:
        worker = self.workers.get(action.cluster)
        if worker is None or worker.api is None:
            return
        api = worker.api
        ref = action.workload
        target = f"{action.cluster}/{ref.key}"
        try:
            if isinstance(action, core.CreateWorkload):
                try:
                    local = await client.get_object(
                        self.api, resources.WORKLOADS, namespace=ref.namespace, name=ref.name
                    )
                except errors.NotFoundError:
                    # the manager's dispatcher has not written its Workload object yet: not a failure of the
                    # remote write (no DispatchFailed on the log), tried again at the next tick
                    log.debug("manager_workload_not_yet_written", workload=ref.key, cluster=action.cluster)
                    return
                body = remote.remote_workload(local, origin=self.origin)
                made = await _retry()(client.create_object)(
                    api, resources.WORKLOADS, namespace=ref.namespace, body=body
                )
                uid = str((made.get("metadata") or {}).get("uid") or "")
                if uid:
                    self.created.setdefault(ref.key, {})[action.cluster] = uid
            elif isinstance(action, core.CreateJob):
                job_ref = resources.ref_for(action.job.api_version, action.job.kind)
                if action.job.kind == "Pod":
                    # a pod group runs whole on the winner: every Pod of it (pod_multikueue_adapter.go SyncJob)
                    local_jobs = await self._local_pods(ref.namespace, action.job.name)
                else:
                    local_jobs = [
                        await client.get_object(self.api, job_ref, namespace=ref.namespace, name=action.job.name)
                    ]
                for local_job in local_jobs:
                    await self._create_remote(api, job_ref, local_job, ref)
                worker.jobs.add(ref.key)  # the worker's Kueue adopts its admitted copy and starts it
            elif isinstance(action, core.UpdatePriority):
                patch = {"spec": remote.priority_patch(action.priority)}
                await _retry()(client.patch_object)(
                    api, resources.WORKLOADS, namespace=ref.namespace, name=ref.name, patch=patch
                )
            else:
                if action.job is not None:
                    await self._delete_job_if_owned(api, ref.namespace, action.job)
                else:
                    await self._delete_owned_jobs(api, ref)
                worker.jobs.discard(ref.key)
                with contextlib.suppress(errors.NotFoundError):
                    await _retry()(client.delete_object)(
                        api, resources.WORKLOADS, namespace=ref.namespace, name=ref.name
                    )
            result: types.Event = types.DispatchApplied(
                workload=ref, decision_seq=action.decision_seq, action=_action_name(action), target=target
            )
            log.info("remote_written", action=_action_name(action), target=target, seq=action.decision_seq)
        except errors.ConflictError:
            return  # the copy exists already; the watch shows it
        except errors.ApiError as err:
            result = types.DispatchFailed(
                workload=ref,
                decision_seq=action.decision_seq,
                action=_action_name(action),
                status=err.status,
                reason=err.reason,
                message=str(err),
                retryable=err.status >= 500 or err.status == 429,
            )
            log.warning("remote_write_failed", action=_action_name(action), target=target, error=str(err))
        except Exception as err:  # unreachable, closed client, bad copy: tried again at the next tick
            log.warning("remote_write_failed", action=_action_name(action), target=target, error=str(err))
            return  # tried again at the next tick
        await self._publish_result(action, result)

    async def _create_remote(
        self,
        api: k8s_client.ApiClient,
        job_ref: resources.ResourceRef,
        local_job: Mapping[str, Any],
        ref: types.WorkloadRef,
    ) -> None:
        """Create the worker's copy of the manager's job (or Pod) ``local_job`` for workload ``ref``."""
        body = remote.remote_job(local_job, workload_name=ref.name, origin=self.origin)
        with contextlib.suppress(errors.ConflictError):  # created before: the worker has it
            await _retry()(client.create_object)(api, job_ref, namespace=ref.namespace, body=body)

    async def _local_pods(self, namespace: str, owner: str) -> list[Mapping[str, Any]]:
        """The manager's Pods a workload owned by Pod ``owner`` runs on its worker (:func:`remote.pods_of_owner`)."""
        items, _ = await client.list_objects(self.api, resources.PODS, namespace=namespace)
        return remote.pods_of_owner(owner, items)

    async def _delete_job_if_owned(self, api: k8s_client.ApiClient, namespace: str, job: core.JobRef) -> None:
        """Delete the worker's job named as the manager's only when it carries this origin's label: a job of
        the same name the worker had of its own is not MultiKueue's (Kueue jobframework/utils.go
        DeleteRemoteObjectIfOwned, issue 11849). A Pod of a group goes with the rest of its group there
        (:func:`remote.remote_pods_of_group`)."""
        job_ref = resources.ref_for(job.api_version, job.kind)
        try:
            found = await _retry()(client.get_object)(api, job_ref, namespace=namespace, name=job.name)
        except errors.NotFoundError:
            return
        if not remote.owned_by_origin(found, self.origin):
            log.info("remote_job_not_ours", job=f"{namespace}/{job.name}", kind=job.kind)
            return
        names = [job.name]
        if job.kind == "Pod":
            pods, _ = await _retry()(client.list_objects)(api, resources.PODS, namespace=namespace)
            names = remote.remote_pods_of_group(found, pods, origin=self.origin)
        for name in names:
            with contextlib.suppress(errors.NotFoundError):
                await _retry()(client.delete_object)(api, job_ref, namespace=namespace, name=name)

    async def _delete_owned_jobs(self, api: k8s_client.ApiClient, ref: types.WorkloadRef) -> None:
        """GC: delete the remote Jobs, JobSets and Pods (a pod group's every Pod) that name ``ref`` as their
        prebuilt Workload (by label, or by annotation for a name longer than a label value: those of this origin
        listed, then :func:`remote.names_prebuilt` asked)."""
        selector = f"{remote.ORIGIN_LABEL}={self.origin}"
        for job_ref in (resources.JOBS, resources.JOBSETS, resources.PODS):
            with contextlib.suppress(errors.KubeError):
                jobs, _ = await client.list_objects(api, job_ref, namespace=ref.namespace, label_selector=selector)
                for job in jobs:
                    if not remote.names_prebuilt(job, ref.name):
                        continue
                    with contextlib.suppress(errors.NotFoundError):
                        await client.delete_object(api, job_ref, namespace=ref.namespace, name=job["metadata"]["name"])

    async def _publish_result(self, action: core.Action, result: types.Event) -> None:
        msg_id = f"disp:{action.cluster}:{_action_name(action)}:{action.workload.key}:{action.decision_seq}"
        if action.decision_seq == 0 or isinstance(action, core.UpdatePriority):
            msg_id += f":{self.clock()}"  # not one per decision: GC, and each priority change the manager makes
        message = subjects.message(
            result, subject=subjects.dispatch_subject(action.workload, action.cluster), msg_id=msg_id
        )
        while True:
            try:
                await self.bus.publish(message)
                return
            except Exception as err:
                log.warning("publish_failed", error=str(err), type=codec.type_name(result))
                await asyncio.sleep(1.0)

    async def _stopped(self, ref: types.WorkloadRef, job: core.JobRef) -> None:
        """An evicted workload's manager Job, suspended by the dispatcher, shows no pods once its remote
        copies are being removed (:func:`stopped_status`)."""
        if job.kind != "Job":
            return
        try:
            local_job = await client.get_object(self.api, resources.JOBS, namespace=ref.namespace, name=job.name)
            status = stopped_status(local_job)
            if status is not None:
                await client.patch_object(
                    self.api,
                    resources.JOBS,
                    namespace=ref.namespace,
                    name=job.name,
                    subresource="status",
                    patch=status_patch(local_job, status),
                )
                log.info("job_status_stopped", job=f"{ref.namespace}/{job.name}")
        except (TimeoutError, errors.KubeError, OSError) as err:
            log.info("job_status_not_stopped", workload=ref.key, error=str(err))

    async def _hide_stale(self) -> None:
        """Report each stale copy (:attr:`stale`) still reported present as absent, once (see :meth:`_observe`)."""
        for key, uids in list(self.stale.items()):
            for worker in self.workers.values():
                copy, seen = worker.copies.get(key), worker.observed.get(key)
                if copy is None or copy.uid not in uids or seen is None or not seen.present:
                    continue
                fact = remote_observation(worker.name, None, ref=seen.workload, now_ms=self.clock())
                worker.observed[key] = fact
                await self._publish_fact(fact)

    async def _stop_evicted(self) -> None:
        """Every evicted workload of :attr:`stopping` whose copies are gone from every connected worker gets its manager
        Job shown stopped (:meth:`_stopped`), every tick until its quota is released: a status mirrored from
        the worker just before the copy went must not leave the manager waiting for pods that are not there
        (Kueue syncs the remote Job's status once both are suspended, job_multikueue_adapter.go)."""
        # an unreachable worker's copies are not seen (Kueue reads the connected workers only): the Retry after
        # workerLostTimeout must not wait for them
        held = {key for worker in self.workers.values() if worker.active for key in worker.copies}
        for key in sorted(self.stopping):
            wl = self.state.workloads.get(key)
            if wl is None or wl.reservation is None or wl.finished is not None or wl.deleted_seq:
                self.stopping.discard(key)  # released, finished or gone: nothing to wait for
                continue
            job = _job(wl)
            if wl.eviction is not None and key not in held and job is not None:
                await self._stopped(_ref(key, wl), job)

    async def _mirror_jobs(self) -> None:
        """Copy each winning worker's job status to the manager's job (batch Job rules: remote.py)."""
        await self._stop_evicted()
        for key, local in self.locals().items():
            if not local.live or not local.chosen or local.job is None:
                continue
            worker = self.workers.get(local.chosen)
            if worker is None or worker.api is None or key not in worker.jobs:
                continue
            job_ref = resources.ref_for(local.job.api_version, local.job.kind)
            try:
                async with asyncio.timeout(5.0):
                    if local.job.kind == "Pod":
                        await self._sync_pods(worker, local)
                        continue
                    remote_job = await client.get_object(
                        worker.api, job_ref, namespace=local.ref.namespace, name=local.job.name
                    )
                    local_job = await client.get_object(
                        self.api, job_ref, namespace=local.ref.namespace, name=local.job.name
                    )
                    await self._mirror_status(job_ref, local_job, remote_job, cluster=local.chosen)
            except Exception as err:  # the worker went away meanwhile: the next tick tries again
                log.info("job_status_not_mirrored", workload=key, error=f"{type(err).__name__}: {err}")

    async def _sync_pods(self, worker: Worker, local: core.LocalWorkload) -> None:
        """Each manager Pod of a Pod-owned workload takes its worker copy's status; one without a copy there (a
        member that came later) gets one (Kueue pod_multikueue_adapter.go syncLocalPodWithRemote)."""
        assert worker.api is not None and local.job is not None
        namespace = local.ref.namespace
        for local_pod in await self._local_pods(namespace, local.job.name):
            name = str(local_pod["metadata"]["name"])
            try:
                remote_pod = await client.get_object(worker.api, resources.PODS, namespace=namespace, name=name)
            except errors.NotFoundError:
                await self._create_remote(worker.api, resources.PODS, local_pod, local.ref)
                continue
            if (local_pod.get("metadata") or {}).get("deletionTimestamp"):
                continue  # a terminating manager Pod keeps its status (syncLocalPodWithRemote)
            await self._mirror_status(resources.PODS, local_pod, remote_pod, cluster=local.chosen)

    async def _mirror_status(
        self,
        job_ref: resources.ResourceRef,
        local_job: Mapping[str, Any],
        remote_job: Mapping[str, Any],
        *,
        cluster: str,
    ) -> None:
        """Give the manager's ``local_job`` its worker copy's status, by :func:`remote.mirrored_job_status`."""
        status = remote.mirrored_job_status(local_job, remote_job)
        if status is None:
            return
        meta = local_job["metadata"]
        await client.patch_object(
            self.api,
            job_ref,
            namespace=meta["namespace"],
            name=meta["name"],
            subresource="status",
            patch=status_patch(local_job, status),
        )
        log.info(
            "job_status_mirrored",
            job=f"{meta['namespace']}/{meta['name']}",
            kind=local_job.get("kind"),
            cluster=cluster,
        )


def status_patch(job: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch that makes ``job``'s status exactly ``status`` (fields it lacks set to null)."""
    removed = {key: None for key in (job.get("status") or {}) if key not in status}
    return {"status": {**removed, **status}}


def stopped_status(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status an evicted (suspended) manager Job takes once nothing runs for it on a worker: no
    active or ready pods, so the manager's watcher sees the eviction done (Kueue's IsActive is
    ``status.active != 0``); None when it shows none already, or the Job is not suspended."""
    status = dict(job.get("status") or {})
    if not (job.get("spec") or {}).get("suspend") or not (status.get("active") or status.get("ready")):
        return None
    return {**status, "active": 0, "ready": 0}


def _same(a: types.RemoteWorkloadObserved, b: types.RemoteWorkloadObserved) -> bool:
    return msgspec.structs.replace(a, at_ms=0) == msgspec.structs.replace(b, at_ms=0)


def _action_name(action: core.Action) -> str:
    return action.action if not isinstance(action, core.DeleteRemote) else f"{action.action}:{action.why}"


def _rfc3339(ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ref(key: str, wl: WorkloadState | None) -> types.WorkloadRef:
    namespace, _, name = key.partition("/")
    uid = wl.workload.metadata.uid if wl is not None else ""
    return types.WorkloadRef(namespace=namespace, name=name, uid=uid)


def _live(wl: WorkloadState | None) -> bool:
    """A manager workload keeps its remote copies while it holds quota, unfinished, not evicted, not deleted."""
    return (
        wl is not None
        and wl.reservation is not None
        and wl.finished is None
        and not wl.deleted_seq
        and wl.eviction is None
    )


def _local_priority(wl: WorkloadState | None, state: ClusterState) -> core.Priority | None:
    """The manager workload's WorkloadPriorityClass and priority, None without one (Kueue
    IsWorkloadPriorityClass: only those are kept in line on the workers). The priority is the one its
    Workload object has (:func:`~kueue_es.projections.cluster.priority_of`: a job's workload takes its class's
    value; the log's ``spec.priority`` is unset for it, and the worker refuses a class without a priority)."""
    ref = wl.workload.spec.priority_class_ref if wl is not None else None
    if wl is None or ref is None or ref.kind != "WorkloadPriorityClass":
        return None
    return core.Priority(class_name=ref.name, value=priority_of(wl.workload, state))


def _group(state: ClusterState, check: str) -> frozenset[str] | None:
    """The workers of MultiKueue check ``check``'s MultiKueueConfig (Kueue workload.go remoteClientsForAC), None
    when the check or its config is not known (then every worker is the workload's, as before)."""
    ac = state.multikueue.checks.get(check)
    if ac is None:
        return None
    config, _ = multikueue.config_of(state.multikueue, ac)
    return frozenset(config.spec.clusters) if config is not None else None


def _job(wl: WorkloadState | None) -> core.JobRef | None:
    owner = wl.workload.owner if wl is not None else None
    if owner is None:
        return None
    return core.JobRef(api_version=owner.api_version, kind=owner.kind, name=owner.name)


async def serve_multikueue_edge(
    *,
    nats_url: str,
    api: k8s_client.ApiClient,
    namespace: str,
    stop: asyncio.Event,
    connect: Any,
    start: runtime.StartPoint | None = None,
) -> None:
    """Run the edge against ``nats_url`` and the manager ``api`` until ``stop`` is set (``start``: the newest
    snapshot's start point, see :meth:`Edge._resume`)."""
    bus = await connect(nats_url)
    try:
        edge = Edge(bus=bus, api=api, namespace=namespace, start=start)
        log.info("service_started", role=USER, namespace=namespace)
        try:
            await runtime.run_until_stopped(stop, edge.run())
        finally:
            log.info("service_stopped", role=USER)
    finally:
        await bus.close()
