"""The ProvisioningRequest admission check controller: a thin runner over the Kubernetes API.

Why this module exists: Kueue's ``kueue.x-k8s.io/provisioning-request`` controller
(SEMANTICS-ADVANCED B.4) runs as its own small service. Like Kueue's, it talks only to
the API server: it marks its AdmissionChecks Active (or False, BadParametersRef), creates
a ProvisioningRequest (autoscaling.x-k8s.io/v1) and its PodTemplates for each workload
that holds quota with such a check, and writes the check's state into the Workload's
``status.admissionChecks``. The watcher reads that entry back and puts it on the log as
AdmissionCheckStateChanged (the path of every outside check controller, docs/design.md),
so the admitter's check rules apply (admit when all Ready, evict on Retry, deactivate
on Rejected) and replay sees exactly what the admitter saw. It holds no NATS credentials.

Every rule is in :mod:`kueue_es.scheduling.provisioning`; this module lists, watches and
writes. A watch event of any kind it reads (AdmissionCheck, ProvisioningRequestConfig,
Workload, ProvisioningRequest) wakes one reconcile of everything, and so does a 5 s
tick; a write refused with 409 (the Workload changed) is retried at the next round.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from kueue_es.events import manifests, models
from kueue_es.jobframework import integrations
from kueue_es.scheduling import provisioning as rules
from kueue_es.services import ports
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors, resources

log = structlog.get_logger(__name__)

WATCHED = (
    resources.ADMISSION_CHECKS,
    resources.PROVISIONING_REQUEST_CONFIGS,
    resources.WORKLOADS,
    resources.PROVISIONING_REQUESTS,
)


class ProvisioningController:
    """Reconciles every provisioning check. ``clock``: ms since the epoch (the entries' lastTransitionTime)."""

    def __init__(self, api: Any, *, clock: Callable[[], int] | None = None, resync: float = 5.0) -> None:
        self.api = api
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.resync = resync
        self.wake = asyncio.Event()
        self.rounds = 0  # reconcile rounds that went through (readiness: the last one did)
        self.events = 0  # Kubernetes Events recorded (their names end with the count)
        self.last_failed = False

    async def run(self, stop: asyncio.Event) -> None:
        """Reconcile on every watch event and every ``resync`` seconds until ``stop`` is set."""
        watches: list[asyncio.Task[None]] = [asyncio.create_task(self._watch(ref)) for ref in WATCHED]
        try:
            while not stop.is_set():
                self.wake.clear()
                try:
                    await self.reconcile_all()
                    self.rounds, self.last_failed = self.rounds + 1, False
                except errors.KubeError as err:
                    self.last_failed = True
                    log.warning("provisioning_reconcile_failed", error=str(err))
                stopping: asyncio.Task[bool] = asyncio.create_task(stop.wait())
                woken: asyncio.Task[bool] = asyncio.create_task(self.wake.wait())
                await asyncio.wait({stopping, woken}, timeout=self.resync, return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                woken.cancel()
                await asyncio.sleep(0.05)  # let a burst of events settle into one round
        finally:
            for task in watches:
                task.cancel()
            for task in watches:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _watch(self, ref: resources.ResourceRef) -> None:
        async for _ in kube.watch_objects(self.api, ref):
            self.wake.set()

    async def reconcile_all(self) -> None:
        """One round: the AdmissionChecks' Active condition, then every workload holding a provisioning check."""
        checks, _ = await kube.list_objects(self.api, resources.ADMISSION_CHECKS)
        ours = [c for c in checks if (c.get("spec") or {}).get("controllerName") == rules.CONTROLLER_NAME]
        if not ours:
            return
        config_objs, _ = await kube.list_objects(self.api, resources.PROVISIONING_REQUEST_CONFIGS)
        configs: dict[str, models.ProvisioningRequestConfig] = {}
        for obj in config_objs:
            try:
                parsed = manifests.parse_object(obj, strict=False)
            except manifests.ManifestError as err:
                log.warning("provisioning_config_invalid", config=obj["metadata"]["name"], error=str(err))
                continue
            assert isinstance(parsed, models.ProvisioningRequestConfig)
            configs[parsed.metadata.name] = parsed
        by_check: dict[str, models.ProvisioningRequestConfig | None] = {}
        for check in ours:
            problem = rules.parameters_problem(check, configs)
            await self._set_active(check, problem)
            ref = (check.get("spec") or {}).get("parameters") or {}
            by_check[check["metadata"]["name"]] = None if problem else configs[ref["name"]]
        workloads, _ = await kube.list_objects(self.api, resources.WORKLOADS)
        requests, _ = await kube.list_objects(self.api, resources.PROVISIONING_REQUESTS)
        flavor_objs, _ = await kube.list_objects(self.api, resources.RESOURCE_FLAVORS)
        flavors = {f["metadata"]["name"]: f for f in flavor_objs}
        for wl in workloads:
            owned = [r for r in requests if rules.owned_by(r, wl)]
            try:
                await self.reconcile_workload(wl, by_check, owned, flavors)
            except errors.ConflictError:
                self.wake.set()  # the Workload changed under us: again at once
            except (errors.KubeError, ValueError) as err:
                log.warning("provisioning_workload_failed", workload=_key(wl), error=str(err))

    async def _set_active(self, check: Mapping[str, Any], problem: str | None) -> None:
        wanted = rules.active_condition(problem)
        current = rules.condition(check, "Active")
        if current is not None and current.get("status") == wanted["status"]:
            return
        cond = {**wanted, "lastTransitionTime": manifests.format_time_ms(self.clock())}
        others = [c for c in (check.get("status") or {}).get("conditions") or [] if c.get("type") != "Active"]
        await kube.patch_object(
            self.api,
            resources.ADMISSION_CHECKS,
            name=check["metadata"]["name"],
            patch={"status": {"conditions": [*others, cond]}},
            subresource="status",
        )
        log.info(
            "admission_check_active", check=check["metadata"]["name"], status=cond["status"], reason=cond["reason"]
        )

    async def reconcile_workload(
        self,
        wl: dict[str, Any],
        checks: Mapping[str, models.ProvisioningRequestConfig | None],
        owned: list[dict[str, Any]],
        flavors: Mapping[str, Mapping[str, Any]],
    ) -> None:
        """One workload (Kueue Controller.Reconcile): clean up when finished or evicted, else sync each
        provisioning check's entry from its latest request and create the next request when due."""
        reserved = rules.is_true(wl, "QuotaReserved")
        if rules.is_true(wl, "Finished") or _evicted(wl):
            for req in owned:
                await self._delete_request(req)
            return
        if not reserved:
            return
        name = wl["metadata"]["name"]
        entries = [dict(e) for e in (wl.get("status") or {}).get("admissionChecks") or []]
        mine = [e for e in entries if e.get("name") in checks]
        if not mine:
            return
        latest: dict[str, Mapping[str, Any] | None] = {}
        changed = False
        updated: list[tuple[str, str, str, str]] = []  # AdmissionCheckUpdated Events, once the write went through
        for i, entry in enumerate(entries):
            check = str(entry.get("name"))
            if check not in checks:
                continue
            config = checks[check]
            request = rules.latest_request(owned, name, check, config) if config is not None else None
            latest[check] = request
            new = rules.next_entry(entry, wl, config, request)
            if new != entry:
                if new.get("state") != entry.get("state") or not entry.get("lastTransitionTime"):
                    new["lastTransitionTime"] = manifests.format_time_ms(self.clock())
                log.info("provisioning_check", workload=_key(wl), check=check, state=new.get("state"),
                         message=new.get("message"))  # fmt: skip
                entries[i] = new
                changed = True
                event = rules.check_updated_event(entry, new)
                if event is not None:
                    updated.append(event)
        if changed:
            patch = {"metadata": {"resourceVersion": wl["metadata"]["resourceVersion"]},
                     "status": {"admissionChecks": entries}}  # fmt: skip
            wl = await kube.patch_object(
                self.api, resources.WORKLOADS, namespace=wl["metadata"]["namespace"], name=name, patch=patch,
                subresource="status",
            )  # fmt: skip
            for event in updated:
                await self._record(wl, event)
        keep = {(r.get("metadata") or {}).get("name") for r in latest.values() if r is not None}
        for entry in entries:
            check = str(entry.get("name"))
            config = checks.get(check)
            if check not in checks or config is None:
                continue
            attempt = rules.attempt_to_create(entry, wl, config, latest.get(check))
            if attempt is not None:
                created = await self._create_request(wl, check, attempt, config, flavors)
                keep.add(created["metadata"]["name"])
        for req in owned:
            if req["metadata"]["name"] not in keep:
                await self._delete_request(req)

    async def _create_request(
        self,
        wl: dict[str, Any],
        check: str,
        attempt: int,
        config: models.ProvisioningRequestConfig,
        flavors: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        namespace = wl["metadata"]["namespace"]
        pod_sets = rules.merge_pod_sets(wl, config, await self._job_templates(wl))
        body = rules.provisioning_request(wl, check, attempt, config, pod_sets)
        try:
            created = await kube.create_object(
                self.api, resources.PROVISIONING_REQUESTS, namespace=namespace, body=body
            )
        except errors.ConflictError:
            return body  # created in an earlier round the list had not caught up with
        except errors.KubeError as err:
            await self._record(wl, rules.failed_create_event("ProvisioningRequest", body["metadata"]["name"], str(err)))
            raise
        await self._record(wl, rules.created_event(body["metadata"]["name"]))
        for pod_set in pod_sets:
            template = rules.pod_template(wl, body["metadata"]["name"], pod_set, flavors)
            template["metadata"]["ownerReferences"] = [rules.owner_reference(created)]
            try:
                await kube.create_object(self.api, resources.POD_TEMPLATES, namespace=namespace, body=template)
            except errors.ConflictError:
                pass
            except errors.KubeError as err:
                failed = rules.failed_create_event("PodTemplate", template["metadata"]["name"], str(err))
                await self._record(wl, failed)
                raise
        log.info("provisioning_request_created", workload=_key(wl), check=check, request=body["metadata"]["name"],
                 attempt=attempt)  # fmt: skip
        return created

    async def _record(self, wl: Mapping[str, Any], event: tuple[str, str, str, str]) -> None:
        """Record a Kubernetes Event about Workload ``wl`` (``kubectl describe workload``, ``kubectl get events``)
        as Kueue's provisioning controller records it; best effort, as Kueue's recorder: a failure is logged."""
        self.events += 1
        name = f"{wl['metadata']['name']}.{time.time_ns():x}{self.events:x}"
        body = rules.event_object(wl, event, name=name, at=manifests.format_time_ms(self.clock()))
        try:
            await kube.create_object(self.api, resources.EVENTS, namespace=wl["metadata"]["namespace"], body=body)
        except errors.KubeError as err:
            log.warning("provisioning_event_failed", workload=_key(wl), reason=event[1], error=str(err))

    async def _job_templates(self, wl: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        """The pod templates of the workload's job by pod set name (the job's containers, images and all,
        as Kueue's Workload carries them); empty when the job cannot be read or its kind's pod sets need
        more than the job (the Workload object's templates are used then)."""
        owner = next((o for o in (wl["metadata"].get("ownerReferences") or []) if o.get("controller")), None)
        if owner is None:
            return {}
        try:
            api_version, kind = str(owner.get("apiVersion")), str(owner.get("kind"))
            ref = resources.ref_for(api_version, kind)
            job = await kube.get_object(self.api, ref, namespace=wl["metadata"]["namespace"], name=owner["name"])
            return integrations.job_pod_templates(api_version, kind, job)
        except (errors.KubeError, manifests.ManifestError, KeyError) as err:
            log.info("provisioning_job_template_unread", workload=_key(wl), error=str(err))
            return {}

    async def _delete_request(self, req: Mapping[str, Any]) -> None:
        """Delete a request and its PodTemplates (the emulator has no garbage collector; a cluster's would)."""
        namespace = req["metadata"]["namespace"]
        for ps in (req.get("spec") or {}).get("podSets") or []:
            with contextlib.suppress(errors.NotFoundError):
                await kube.delete_object(
                    self.api, resources.POD_TEMPLATES, namespace=namespace, name=ps["podTemplateRef"]["name"]
                )
        with contextlib.suppress(errors.NotFoundError):
            await kube.delete_object(self.api, resources.PROVISIONING_REQUESTS, namespace=namespace,
                                     name=req["metadata"]["name"])  # fmt: skip
        log.info("provisioning_request_deleted", request=f"{namespace}/{req['metadata']['name']}")


def _key(obj: Mapping[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"


def _evicted(wl: Mapping[str, Any]) -> bool:
    """Whether ``wl``'s Evicted condition is True, as Kueue's controller asks (evict.IsEvicted): the eviction's
    status write reset every check, and the dispatcher sets Evicted False again once the workload reserves quota
    anew (SetQuotaReservation's resetActiveCondition), so nothing is written until then.

    Not a comparison of QuotaReserved's and Evicted's lastTransitionTimes: both have seconds precision, and an
    eviction in the second its workload reserved quota read as "reserved again since", so the check's state
    (the Rejected the eviction had just reset) was written back over the reset, for good."""
    return rules.is_true(wl, "Evicted")


async def serve(
    api: Any, stop: asyncio.Event, *, health_port: int | None = None, health_host: str = "127.0.0.1"
) -> None:
    """Run the controller until ``stop`` is set (``kueue-es service provisioning``); with ``health_port``,
    serve ``/healthz`` (the process answers) and ``/readyz`` (200 once the last reconcile round went through)."""
    controller = ProvisioningController(api)
    if health_port is None:
        await controller.run(stop)
        return
    import aiohttp.web

    async def healthz(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.json_response({"service": "provisioning", "alive": True})

    async def readyz(_: aiohttp.web.Request) -> aiohttp.web.Response:
        ready = controller.rounds > 0 and not controller.last_failed
        body = {"ready": ready, "rounds": controller.rounds, "last_failed": controller.last_failed}
        return aiohttp.web.json_response(body, status=200 if ready else 503)

    app = aiohttp.web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = aiohttp.web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await aiohttp.web.TCPSite(runner, host=health_host, port=health_port).start()
        if runner.addresses:  # port 0: tell the supervisor that asked which one (services/ports.py)
            ports.report(ports.HEALTH, int(runner.addresses[0][1]))
        await controller.run(stop)
    finally:
        await runner.cleanup()
