"""The cluster engine: a scenario run as a cluster admin and a user would, through the Kubernetes API.

Per scenario, the same system as the bus engine (a fresh nats-server, the emulated
API server, the five services as processes, the deciders stepped), but nothing of
the scenario goes on the log from the runner: every object is created through the
Kubernetes API (ResourceFlavors, Cohorts, ClusterQueues, LocalQueues, Namespaces,
AdmissionChecks, Nodes, Topologies, Pods; their ``status`` through the status
subresource, as their controllers would write it), the watcher reports them, and
the outcome is read back from the Workload objects the dispatcher keeps
(``status.admission`` and conditions). Workloads are Kueue Workload objects created by
the user, which Kueue admits as standalone workloads.

With no job behind a Workload, the runner plays the job's part on the Workload
object, as Kueue's own integration tests do (test/util): an eviction completes by
clearing ``QuotaReserved`` once the dispatcher has set ``Evicted``; ``finish`` sets
``Finished``; ``podsReady`` sets ``PodsReady``; ``check`` sets the admission check's
state in ``status.admissionChecks``. Each of those writes is followed by waiting
for the watcher's fact on the log, so a cycle never runs on a view older than the
cluster.

What still goes on the log from the runner: the SchedulingRequested facts that step
the deciders (a cycle at a time, as the other engines run them) and, for a
workload already admitted when the run starts (``admitted:``), its seed decisions,
as in the bus engine; kueue-es does not adopt admissions made before it ran.

A Workload's ``creationTimestamp`` and ``uid`` are the API server's; the emulated
server's clock is set to the scenario's creation time while the workload is
created, and a scenario's UID is given to the object as the server creates it, so
ordering by creation time and ties broken by UID are the scenario's.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import signal
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import nats
import nats.js.errors
import yaml

from kueue_es.events import codec, dra, manifests, models, subjects, types
from kueue_es.events.bus import base as bus_base
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.server import NatsServer
from kueue_es.events.tas import decode, domain_id
from kueue_es.scenarios.bus_engine import ANSWER_TIMEOUT, _BusRun
from kueue_es.scenarios.core_engine import cycle_deciders
from kueue_es.scenarios.engines import RunError
from kueue_es.scenarios.outcome import AdmittedOutcome, Outcome, PodSetOutcome
from kueue_es.scenarios.specs import (
    AdmittedWorkload,
    ApplyEvent,
    CheckEvent,
    DecideEvent,
    DeleteEvent,
    FinishEvent,
    PodsReadyEvent,
    Scenario,
    ScenarioEvent,
    ScenarioObject,
    WaitEvent,
)
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.kube import resources
from kueue_es.sim import store
from kueue_es.sim.emulator import KUEUE_WEBHOOKS, serve_emulator
from kueue_es.supervisor import Supervisor

#: How long a write is given to show up on the log as the watcher's fact, in seconds.
FACT_TIMEOUT = 30.0
#: How long an update that may change nothing (an ``apply`` of an existing object) is waited for.
UNCHANGED_TIMEOUT = 3.0
#: The job's message when the runner completes an eviction (Kueue's test util says "By test").
STOPPED_MESSAGE = "The workload's job stopped (the scenario runner plays the job)"

#: The message of a ``check`` event setting Pending without one (see _set_check).
PENDING_MESSAGE = "Set to Pending by the check's controller"
#: Seconds the services are given to stop on SIGTERM (a loaded machine is slow to stop five of them).
STOP_GRACE = 30.0
#: The watcher's configuration file of a scenario that gives its Configuration only later: Kueue's defaults.
DEFAULT_CONFIGURATION = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_SECOND = datetime.timedelta(seconds=1)
_STATUS_KINDS = frozenset({"AdmissionCheck", "Node", "Pod", "ClusterQueue", "LocalQueue", "Cohort"})


class ClusterEngine:
    """The ``cluster`` :class:`~kueue_es.scenarios.engines.Engine`; each run starts and stops its own system."""

    name = "cluster"

    def run(self, scenario: Scenario) -> Outcome:
        """Run ``scenario`` through the Kubernetes API and the services; raises RunError when it cannot finish."""
        return asyncio.run(_ClusterRun(scenario).execute())

    def close(self) -> None:
        """Nothing is kept between runs."""


class _ClusterRun(_BusRun):
    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.api: Any = None
        self.now: datetime.datetime | None = None  # the API server's clock while a workload is created
        self.uids: dict[tuple[str, str], str] = {}  # (namespace, name) -> the UID the scenario gives it
        self.preempted: set[str] = set()
        self.written: dict[str, datetime.datetime] = {}  # workload -> the last transition time the runner wrote
        self.nats_url = ""
        self.config_path: Path | None = None  # the watcher's --config file, rewritten by a Configuration event
        self.emulator: Any = None

    # -- the system ---------------------------------------------------------------------------

    async def execute(self) -> Outcome:
        with tempfile.TemporaryDirectory(prefix="kueue-es-cluster-") as tmp:
            run_dir = Path(tmp)
            async with (
                NatsServer(store_dir=run_dir / "nats") as server,
                serve_emulator(
                    clock=self._clock,
                    create_hooks=(*KUEUE_WEBHOOKS, self._identity),
                    feature_gates=self._feature_gates(),  # Kueue's Workload webhooks follow them, as the watcher
                ) as emulator,
            ):
                self.emulator = emulator
                supervisor = Supervisor(
                    nats_url=server.url,
                    log_dir=run_dir / "logs",
                    kube_args=["--kube-server", emulator.url],
                    watcher_args=self._config_file(run_dir),
                    decider_args=["--stepped"],
                )
                self.nats_url = server.url
                self.bus = await nats_bus.connect(server.url)
                self.api = await kube.make_api_client(server=emulator.url)
                await supervisor.start()
                try:
                    await self._watcher_started(run_dir / "logs" / "watcher.log")
                    await self._drive()
                    await self._dispatcher_caught_up()
                    outcome = await self._read_outcome()
                except RunError:
                    raise
                except Exception as err:  # a failed run names the scenario and what broke
                    raise RunError(self.scenario.path, f"the cluster run failed: {err!r}") from err
                finally:
                    codes = await supervisor.stop(grace=STOP_GRACE)
                    await self.bus.close()
                    await self.api.close()
                crashed = {name: code for name, code in codes.items() if code not in (0, None, -signal.SIGTERM)}
                if crashed:
                    raise RunError(self.scenario.path, f"services exited with errors: {crashed}")
        return outcome

    def _config_file(self, run_dir: Path) -> list[str]:
        """The scenario's Configuration as Kueue's manager configuration file (``--config`` of the watcher); a
        scenario that applies one later starts from Kueue's defaults if it gives none before (:meth:`_reconfigure`)."""
        configs = [o.manifest for o in self.scenario.objects if o.kind == "Configuration"]
        later = any(isinstance(e, ApplyEvent) and e.object.kind == "Configuration" for e in self.scenario.events)
        if not configs and not later:
            return []
        self.config_path = run_dir / "controller_manager_config.yaml"
        self.config_path.write_text(yaml.safe_dump(configs[-1] if configs else DEFAULT_CONFIGURATION, sort_keys=False))
        return ["--config", str(self.config_path)]

    def _feature_gates(self) -> dict[str, bool]:
        """The scenario's Configuration's ``featureGates`` (``{}`` without one), for the emulated API server's Kueue
        Workload webhooks (with PartialAdmission off, mworkload.kb.io drops ``minCount``)."""
        configs = [o.manifest for o in self.scenario.objects if o.kind == "Configuration"]
        gates = (configs[-1].get("featureGates") if configs else None) or {}
        return {str(k): bool(v) for k, v in gates.items()}

    def _clock(self) -> datetime.datetime:
        return self.now or store.utc_now()

    def _identity(self, ref: resources.ResourceRef, obj: dict[str, Any]) -> None:
        """A create hook: the scenario's UID for a Workload it names one for."""
        meta = obj.get("metadata") or {}
        uid = self.uids.get((str(meta.get("namespace") or ""), str(meta.get("name") or "")))
        if ref.kind == "Workload" and uid:
            meta["uid"] = uid

    # -- driving the run ----------------------------------------------------------------------

    async def _drive(self) -> None:
        scenario = self.scenario
        await self._namespaces()
        for obj in scenario.objects:
            if obj.kind == "Configuration":  # the watcher's --config file (see _config_file)
                continue
            await self._create(obj)
        for admitted in scenario.admitted:
            await self._create(admitted.workload)
            await self._seed_admitted(admitted)
        if scenario.admitted:
            await self._fence_seeded()  # as the bus engine: the first cycle does not wait for a handover
        for pending in scenario.pending:
            await self._create(pending)
        await self._phase()
        for event in scenario.events:
            await self._apply_event(event)
            await self._phase()

    async def _namespaces(self) -> None:
        """Create the namespaces the scenario's objects live in and does not create itself, as an admin would
        before applying them (the API server refuses objects in a namespace that does not exist)."""
        scenario = self.scenario
        events = [e.object for e in scenario.events if isinstance(e, ApplyEvent)]
        every = [*scenario.objects, *(a.workload for a in scenario.admitted), *scenario.pending, *events]
        declared = {o.name for o in every if o.kind == "Namespace"}
        used = {str((o.manifest.get("metadata") or {}).get("namespace") or "") for o in every} - {""}
        for namespace in sorted(used - declared - {"default"}):
            manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            with contextlib.suppress(kube_errors.ConflictError):
                await kube.create_object(self.api, resources.NAMESPACES, body=manifest)

    async def _create(self, obj: ScenarioObject) -> None:
        """Create one scenario object through the API (and its status), then wait for the watcher's fact."""
        manifest = obj.manifest
        kind, _ = manifests.describe(manifest)
        before = await self.bus.last_seq()  # type: ignore[union-attr]
        stored = await self._apply_manifest(obj)
        await self._write_status(kind, manifest, stored)
        if obj.fact is not None and _reported(manifest):
            await self._fact_after(before, _about(obj.fact), what=f"the watcher's fact for {kind} {obj.name}")

    async def _apply_manifest(self, obj: ScenarioObject) -> dict[str, Any]:
        """Create (or update) the object of ``obj`` through the API; a workload created now gets the
        scenario's creation time and UID from the server (see the module's docstring)."""
        workload = obj.workload
        if workload is not None:
            meta = workload.metadata
            self.uids[(meta.namespace, meta.name)] = meta.uid or ""
            if meta.creation_timestamp_ms:
                self.now = datetime.datetime.fromtimestamp(meta.creation_timestamp_ms / 1000, tz=datetime.UTC)
        try:
            return await kube.apply_manifest(self.api, self._as_v1beta2(_without_status(obj.manifest)))
        finally:
            self.now = None

    def _as_v1beta2(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """A Workload as a user of the v1beta2 API writes it: the v1beta1 ``priorityClassName`` (which
        the scenario format allows; a v1beta2 server drops it) becomes ``priorityClassRef``, and a reference to
        a WorkloadPriorityClass without ``spec.priority`` gets the class's value, which Kueue's API requires
        beside the reference (its job controller writes both)."""
        spec = manifest.get("spec")
        if manifest.get("kind") != "Workload" or not isinstance(spec, dict):
            return manifest
        if "priorityClassName" not in spec and ("priorityClassRef" not in spec or spec.get("priority") is not None):
            return manifest
        spec = dict(spec)
        manifests.priority_class_name_to_ref(spec)
        ref = spec.get("priorityClassRef") or {}
        if spec.get("priority") is None and ref.get("kind") == "WorkloadPriorityClass":
            values = {
                o.name: o.manifest.get("value") for o in self.scenario.objects if o.kind == "WorkloadPriorityClass"
            }
            value = values.get(str(ref.get("name") or ""))
            if value is not None:
                spec["priority"] = value
        return {**manifest, "spec": spec}

    async def _write_status(self, kind: str, manifest: Mapping[str, Any], stored: Mapping[str, Any]) -> None:
        """The status a manifest carries, written as its controller would (kinds with a status subresource)."""
        wanted = manifest.get("status")
        if kind == "Workload" and isinstance(wanted, Mapping) and "preemptionGates" in wanted:
            # A Workload's status is kueue-es's to write, but its preemption gates' states are their
            # controllers' (MultiKueue's, ConcurrentAdmission's): the runner stands in for them.
            meta = stored.get("metadata") or {}
            gates = wanted["preemptionGates"]

            def set_gates(status: dict[str, Any]) -> None:
                status["preemptionGates"] = gates

            await self._update_status(f"{meta.get('namespace')}/{meta.get('name')}", set_gates)
            return
        if not wanted or kind not in _STATUS_KINDS:
            return
        ref = kube.ref_for(str(manifest.get("apiVersion", "")), kind)
        meta = stored.get("metadata") or {}
        if ref.api_version == resources.KUEUE_V1BETA2:
            wanted = _as_controllers_write(wanted, now=_rfc3339(store.utc_now()))
        # Kueue's controllers put a finalizer on checks, flavors and topologies as they appear: the write
        # reads the object again when that lands between the create and this write (409)

        def replace(status: dict[str, Any]) -> None:
            status.clear()
            status.update(wanted)

        await self._update_status_of(ref, meta.get("namespace"), str(meta["name"]), replace)

    async def _seed_admitted(self, admitted: AdmittedWorkload) -> None:
        """A workload admitted before the run: its seed decisions (as the bus engine commits them), then its
        pods ready when the scenario has them so."""
        decided = await self._commit_seed(admitted)
        await self._jobs_report(decided)

    async def _apply_event(self, event: ScenarioEvent) -> None:
        match event:
            case FinishEvent(workload=key):
                before = await self.bus.last_seq()  # type: ignore[union-attr]
                await self._set_conditions(key, {"type": "Finished", "status": "True", "reason": "Succeeded"})
                await self._fact_after(before, _of_type(types.WorkloadFinished, key), what=f"{key} finished")
            case DeleteEvent():
                await self._delete(event)
            case ApplyEvent(object=obj):
                await self._apply(obj)
            case CheckEvent():
                await self._set_check(event)
            case PodsReadyEvent(workload=key, ready=ready):
                state, _ = await self._fold_all()
                known = state.workloads.get(key)
                before_reason = known.pods_ready.reason if known is not None and known.pods_ready else ""
                was_ready = known is not None and known.pods_ready is not None and known.pods_ready.ready
                if ready:
                    reason = "Recovered" if before_reason in ("WaitForRecovery", "Recovered") else "Started"
                else:
                    reason = "WaitForRecovery" if was_ready else "WaitForStart"
                await self._pods_ready(key, ready=ready, reason=reason)
            case WaitEvent(ms=ms):
                await self._sit_out(ms)
            case DecideEvent(role=role):
                await self._cycle(only=role)
            case _:
                pass

    async def _delete(self, event: DeleteEvent) -> None:
        kind = event.kind
        api_version = "v1" if kind in ("Namespace", "Node", "Pod") else manifests.KUEUE_API
        if kind == "Topology":
            api_version = "kueue.x-k8s.io/v1beta2"
        elif (dra.RESOURCE_API, kind) in dra.DRA_KINDS:
            api_version = dra.RESOURCE_API
        ref = kube.ref_for(api_version, kind)
        held = False  # a ClusterQueue some workload reserves quota in stays, terminating (engines.deletion_fact)
        if kind == "ClusterQueue" and event.modelled:
            state, _ = await self._fold_all()
            held = bool(state.reserved.get(event.name))
        before = await self.bus.last_seq()  # type: ignore[union-attr]
        namespace = (event.namespace or "default") if ref.namespaced else None
        try:
            await kube.delete_object(self.api, ref, namespace=namespace, name=event.name)
        except kube_errors.NotFoundError:
            return
        if event.modelled and kind not in ("ClusterQueue", "Workload"):
            # the other engines model it gone: one in use (a ResourceFlavor a workload was admitted with) stays under
            # Kueue's resource-in-use finalizer, which Kueue's own tests take off by hand to delete it (a
            # ClusterQueue's and a Workload's are the dispatcher's to take off, and the run waits for it)
            with contextlib.suppress(kube_errors.NotFoundError):
                await kube.patch_object(
                    self.api, ref, namespace=namespace, name=event.name, patch={"metadata": {"finalizers": None}}
                )
        if event.modelled:

            def deleted(e: types.Event) -> bool:
                if isinstance(e, types.ObjectDeleted):
                    return e.kind == kind and e.name == event.name
                # a ClusterQueue some workload holds quota in stays, terminating, under Kueue's finalizer
                # (engines.deletion_fact): the watcher's report of it marked is the deletion's fact then; an idle
                # one is marked too until the dispatcher takes the finalizer off, and only its deletion counts
                return (
                    held
                    and isinstance(e, types.ClusterQueueObserved)
                    and e.cluster_queue.metadata.name == event.name
                    and e.cluster_queue.terminating
                )

            await self._fact_after(before, deleted, what=f"the deletion of {kind} {event.key}")

    async def _apply(self, obj: ScenarioObject) -> None:
        """Create or update an object; an update that changes nothing gets no fact, so it is not waited for long."""
        if obj.kind == "Configuration":
            await self._reconfigure(obj)
            return
        kind, _ = manifests.describe(obj.manifest)
        before = await self.bus.last_seq()  # type: ignore[union-attr]
        try:
            stored = await self._apply_manifest(obj)
        except kube_errors.ApiError as err:
            if err.status == 422 and await self._exists(obj.manifest):
                return  # an update Kueue's API validation refuses: the object stays as it was, as on a cluster
            raise
        await self._write_status(kind, obj.manifest, stored)
        if obj.fact is None:
            return
        created = str((stored.get("metadata") or {}).get("generation", "1")) == "1"
        with contextlib.suppress(RunError):
            await self._fact_after(
                before,
                _about(obj.fact),
                what=f"the watcher's fact for {kind} {obj.name}",
                timeout=FACT_TIMEOUT if created else UNCHANGED_TIMEOUT,
            )

    async def _exists(self, manifest: Mapping[str, Any]) -> bool:
        """Whether the API server holds the object ``manifest`` names."""
        ref = kube.ref_for(str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")))
        meta = manifest.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default") if ref.namespaced else None
        try:
            await kube.get_object(self.api, ref, namespace=namespace, name=str(meta.get("name") or ""))
        except kube_errors.NotFoundError:
            return False
        return True

    async def _reconfigure(self, obj: ScenarioObject) -> None:
        """A new Configuration mid-run (Kueue: the manager restarted with a new configuration file): the watcher's
        ``--config`` file is rewritten, the watcher reads it again (it polls the file) and records it, and the
        emulated API server's Kueue webhooks follow its feature gates."""
        assert self.config_path is not None and self.bus is not None  # _config_file made one for this scenario
        before = await self.bus.last_seq()
        self.config_path.write_text(yaml.safe_dump(obj.manifest, sort_keys=False))
        gates = obj.manifest.get("featureGates") or {}
        self.emulator.feature_gates = {str(k): bool(v) for k, v in gates.items()}
        fact = obj.fact if obj.fact is not None else types.ConfigurationObserved(configuration=models.Configuration())
        await self._fact_after(before, _about(fact), what="the watcher's fact for the new Configuration")

    async def _set_check(self, event: CheckEvent) -> None:
        """An admission check controller sets the check's state in the Workload's status."""
        # A Pending entry without a message is what the dispatcher writes itself (added, not yet
        # answered), so the watcher does not report it; a controller's Pending says something.
        message = event.message or (PENDING_MESSAGE if event.state == "Pending" else "")
        entry: dict[str, Any] = {
            "name": event.check,
            "state": event.state,
            "message": message,
            "lastTransitionTime": _rfc3339(store.utc_now()),
        }
        if event.requeue_after_seconds is not None:
            entry["requeueAfterSeconds"] = event.requeue_after_seconds
        if event.pod_set_updates:
            entry["podSetUpdates"] = msgspec.to_builtins(list(event.pod_set_updates))

        def change(status: dict[str, Any]) -> None:
            checks = [c for c in status.get("admissionChecks") or [] if c.get("name") != event.check]
            status["admissionChecks"] = [*checks, entry]

        before = await self.bus.last_seq()  # type: ignore[union-attr]
        await self._update_status(event.workload, change)

        def reported(e: types.Event) -> bool:
            return (
                isinstance(e, types.AdmissionCheckStateChanged)
                and e.workload.key == event.workload
                and e.check == event.check
                and e.state == event.state
            )

        await self._fact_after(before, reported, what=f"check {event.check} of {event.workload}")

    # -- a cycle, and what the jobs report --------------------------------------------------

    async def _cycle(self, *, only: str = "") -> bool:
        changed = False
        decided: list[types.Decision] = []
        for decider in cycle_deciders():
            if only and decider.role != only:
                continue  # a decide event: that decider alone
            role_changed, outputs = await self._role_cycle(decider.role)
            changed = changed or role_changed
            decided.extend(o for o in outputs if isinstance(o, types.DECISION_TYPES))
        await self._jobs_report(decided)
        return changed

    async def _jobs_report(self, decided: list[types.Decision]) -> None:
        """The runner as the workloads' jobs: each eviction completes, admitted workloads get pods ready."""
        for decision in decided:
            if isinstance(decision, types.EvictionRequested):
                await self._complete_eviction(decision.workload.key)
            elif isinstance(decision, types.WorkloadAdmitted) and self.scenario.pods_ready == "auto":
                await self._pods_ready(decision.workload.key, ready=True, reason="Started")

    async def _complete_eviction(self, key: str) -> None:
        """Once the dispatcher set ``Evicted=True``, the job stops: ``QuotaReserved`` False (FinishEvictionForWorkloads)."""
        evicted = await self._until_condition(key, "Evicted")
        if evicted.get("reason") == "Preempted":
            self.preempted.add(key)
        before = await self.bus.last_seq()  # type: ignore[union-attr]
        await self._set_conditions(
            key, {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": STOPPED_MESSAGE}
        )
        await self._fact_after(before, _of_type(types.WorkloadStopped, key), what=f"the eviction of {key}")

    async def _pods_ready(self, key: str, *, ready: bool, reason: str) -> None:
        before = await self.bus.last_seq()  # type: ignore[union-attr]
        status = "True" if ready else "False"
        await self._set_conditions(key, {"type": "PodsReady", "status": status, "reason": reason})

        def reported(e: types.Event) -> bool:
            return isinstance(e, types.WorkloadPodsReady) and e.workload.key == key and e.ready == ready

        await self._fact_after(before, reported, what=f"PodsReady of {key}")

    # -- the Workload objects -----------------------------------------------------------------

    async def _get_workload(self, key: str) -> dict[str, Any]:
        namespace, name = key.split("/")
        return await kube.get_object(self.api, resources.WORKLOADS, namespace=namespace, name=name)

    async def _update_status(self, key: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Read, change and write back a Workload's status (see :meth:`_update_status_of`)."""
        namespace, name = key.split("/")
        await self._update_status_of(resources.WORKLOADS, namespace, name, change)

    async def _update_status_of(
        self, ref: resources.ResourceRef, namespace: str | None, name: str, change: Callable[[dict[str, Any]], None]
    ) -> None:
        """Read, change and write back an object's status with its resourceVersion, as a controller does: a
        write kueue-es made meanwhile (a status, a finalizer) is not overwritten (409: read again)."""
        for _ in range(20):
            obj = await kube.get_object(self.api, ref, namespace=namespace, name=name)
            status = dict(obj.get("status") or {})
            change(status)
            body = {**obj, "status": status}
            try:
                await kube.replace_object(
                    self.api, ref, namespace=namespace, name=name, body=body, subresource="status"
                )
                return
            except kube_errors.ConflictError:
                await asyncio.sleep(0.05)
        where = f"{namespace}/{name}" if namespace else name
        raise RunError(self.scenario.path, f"the status of {ref.kind} {where} kept changing under the runner")

    async def _set_conditions(self, key: str, condition: dict[str, Any]) -> None:
        # Each transition the runner writes on a workload has a later time than its last one (whole seconds,
        # as the API has them): the watcher tells a new PodsReady transition from an echo by its time.
        moment = max(store.utc_now().replace(microsecond=0), self.written.get(key, _EPOCH) + _SECOND)
        self.written[key] = moment
        now = _rfc3339(moment)

        def change(status: dict[str, Any]) -> None:
            others = [c for c in status.get("conditions") or [] if c.get("type") != condition["type"]]
            status["conditions"] = [*others, {"message": "", **condition, "lastTransitionTime": now}]

        await self._update_status(key, change)

    async def _until_condition(self, key: str, kind: str) -> dict[str, Any]:
        """Wait until the Workload's condition ``kind`` is True (the dispatcher wrote it); returns it."""
        try:
            async with asyncio.timeout(FACT_TIMEOUT):
                while True:
                    obj = await self._get_workload(key)
                    for condition in (obj.get("status") or {}).get("conditions") or []:
                        if condition.get("type") == kind and condition.get("status") == "True":
                            return dict(condition)
                    await asyncio.sleep(0.05)
        except TimeoutError:
            raise RunError(
                self.scenario.path, f"the dispatcher did not set {kind}=True on {key} within {FACT_TIMEOUT:g}s"
            ) from None

    # -- barriers -------------------------------------------------------------------------------

    async def _fact_after(
        self, after: int, wanted: Callable[[types.Event], bool], *, what: str, timeout: float = FACT_TIMEOUT
    ) -> None:
        """Wait until a fact after sequence ``after`` satisfies ``wanted``; RunError naming ``what`` if none comes."""
        assert self.bus is not None
        reader = self.bus.read(subjects=(subjects.FACTS,), start_seq=after + 1)
        try:
            async with asyncio.timeout(timeout), contextlib.aclosing(reader):
                async for message in reader:
                    try:
                        event = codec.decode(message.data)
                    except codec.DecodeError:
                        continue
                    if wanted(event):
                        return
        except TimeoutError:
            raise RunError(self.scenario.path, f"{what} did not reach the log within {timeout:g}s") from None
        raise RunError(self.scenario.path, f"the log ended before {what}")

    async def _dispatcher_caught_up(self) -> None:
        """Wait until the dispatcher has executed and acknowledged every decision (its Workload writes come first)."""
        connection = await nats.connect(self.nats_url)
        try:
            jsm = connection.jsm()
            async with asyncio.timeout(ANSWER_TIMEOUT):
                while True:
                    try:
                        info = await jsm.consumer_info(bus_base.STREAM_NAME, "dispatcher")
                    except nats.js.errors.NotFoundError:  # the dispatcher has not bound its consumer yet
                        info = None
                    if info is not None and info.num_pending == 0 and info.num_ack_pending == 0:
                        break
                    await asyncio.sleep(0.05)
        except TimeoutError:
            raise RunError(self.scenario.path, "the dispatcher did not catch up with the decisions") from None
        finally:
            await connection.close()
        await asyncio.sleep(0.2)  # the queues' status goes out after the batch's acks

    # -- the outcome, read back from the objects -------------------------------------------

    async def _read_outcome(self) -> Outcome:
        """The outcome from the Workload objects: ``status.admission`` and conditions (Kueue's meaning)."""
        live, _ = await kube.list_objects(self.api, resources.WORKLOADS)
        by_key = {f"{o['metadata'].get('namespace', 'default')}/{o['metadata']['name']}": o for o in live}
        admitted: dict[str, AdmittedOutcome] = {}
        reserved, pending, finished, deleted = [], [], [], []
        why: dict[str, str] = {}
        for key in dict.fromkeys(self.scenario.submitted):
            obj = by_key.get(key)
            if obj is None:
                deleted.append(key)
                continue
            status = obj.get("status") or {}
            conditions = {c.get("type"): c for c in status.get("conditions") or []}

            def true(kind: str, conditions: Mapping[Any, Any] = conditions) -> bool:
                return (conditions.get(kind) or {}).get("status") == "True"

            if true("Finished"):
                finished.append(key)
            elif true("QuotaReserved") and not true("Evicted") and status.get("admission"):
                if true("Admitted"):
                    admitted[key] = _admitted(status["admission"])
                else:
                    reserved.append(key)
            else:
                pending.append(key)
                message = (conditions.get("QuotaReserved") or {}).get("message")
                if message:
                    why[key] = str(message)
        return Outcome(
            admitted=dict(sorted(admitted.items())),
            reserved=tuple(sorted(reserved)),
            pending=tuple(sorted(pending)),
            preempted=tuple(sorted(self.preempted)),
            finished=tuple(sorted(finished)),
            deleted=tuple(sorted(deleted)),
            why=dict(sorted(why.items())),
        )


def _admitted(admission: Mapping[str, Any]) -> AdmittedOutcome:
    pod_sets: dict[str, PodSetOutcome] = {}
    for psa in admission.get("podSetAssignments") or []:
        topology = None
        if psa.get("topologyAssignment"):
            assignment = decode(msgspec.convert(psa["topologyAssignment"], models.TopologyAssignment))
            topology = dict(sorted((domain_id(d.values), d.count) for d in assignment.domains))
        pod_sets[psa["name"]] = PodSetOutcome(
            flavors=dict(sorted((psa.get("flavors") or {}).items())),
            count=int(psa.get("count") or 0),
            topology=topology,
        )
    return AdmittedOutcome(cluster_queue=str(admission.get("clusterQueue") or ""), pod_sets=pod_sets)


def _reported(manifest: Mapping[str, Any]) -> bool:
    """Whether the watcher reports this object: not a pod bound to no node (only bound pods take node
    capacity, so the watcher lists pods by ``spec.nodeName``)."""
    if manifest.get("kind") == "Pod":
        return bool((manifest.get("spec") or {}).get("nodeName"))
    return True


def _about(fact: types.Fact) -> Callable[[types.Event], bool]:
    """The same kind of fact about the same object as ``fact`` (its Observed), or its rejection."""
    kind, namespace, name = subjects.fact_identity(fact)

    def same(event: types.Event) -> bool:
        if isinstance(event, types.ObjectRejected):
            return event.kind == kind and event.name == name
        return type(event) is type(fact) and subjects.fact_identity(event) == (kind, namespace, name)

    return same


def _of_type(kind: type[types.Event], key: str) -> Callable[[types.Event], bool]:
    def matches(event: types.Event) -> bool:
        ref = getattr(event, "workload", None)
        return isinstance(event, kind) and isinstance(ref, types.WorkloadRef) and ref.key == key

    return matches


def _without_status(manifest: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in manifest.items() if k != "status"}


def _as_controllers_write(status: Mapping[str, Any], *, now: str) -> dict[str, Any]:
    """A Kueue object's ``status`` as a scenario gives it, with what a controller's metav1.Condition always
    carries and a scenario may leave out (``type: Active, status: "True"``): the reason (the type's name), an
    empty message and ``lastTransitionTime`` ``now``, so Kueue's status schema accepts it."""
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return dict(status)
    completed = [
        {"reason": c.get("type"), "message": "", "lastTransitionTime": now, **c} if isinstance(c, dict) else c
        for c in conditions
    ]
    return {**status, "conditions": completed}


def _rfc3339(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
