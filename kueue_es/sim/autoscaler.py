"""A fake cluster-autoscaler that answers ProvisioningRequests, for tests and the demo.

Why this module exists: Kueue's ProvisioningRequest admission check (services/provisioning)
needs someone to answer the requests it creates; in a cluster that is the
cluster-autoscaler, here it is this fake. For the classes
``check-capacity.autoscaling.x-k8s.io`` and ``best-effort-atomic-scale-up.autoscaling.x-k8s.io``
it does what the real one does, in two steps through the ``status`` subresource:

* a new request is Accepted (``Accepted`` True, ``Provisioned`` False "Provisioning");
* after ``delay`` seconds it is Provisioned (``Provisioned`` True, reason
  ``CapacityIsFound``, ``status.provisioningClassDetails`` from ``details``), or Failed
  (``Failed`` True, reason ``CapacityIsNotFound``) when the request asks for more than
  ``capacity`` (resource -> amount, Kueue's integer amounts: CPU millicores, memory
  bytes, summed over its pod sets' PodTemplates times their counts), or when it carries
  the parameter ``fakeAutoscalerOutcome: Failed`` (a Job annotation
  ``provreq.kueue.x-k8s.io/fakeAutoscalerOutcome: Failed`` becomes that parameter).

Requests of other classes are left alone, as the real autoscaler leaves them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import Mapping
from typing import Any

import structlog

from kueue_es.events import quantities
from kueue_es.services.kube import client, errors, resources

log = structlog.get_logger(__name__)

CLASSES = ("check-capacity.autoscaling.x-k8s.io", "best-effort-atomic-scale-up.autoscaling.x-k8s.io")
OUTCOME_PARAMETER = "fakeAutoscalerOutcome"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cond(kind: str, status: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now}


def requested(templates: Mapping[str, Mapping[str, Any]], request: Mapping[str, Any]) -> dict[str, int]:
    """What ``request`` asks for in all: per resource, its pod sets' per-pod requests times their counts
    (``templates``: PodTemplates by name; a missing one counts nothing)."""
    total: dict[str, int] = {}
    for ps in (request.get("spec") or {}).get("podSets") or []:
        template = templates.get(str((ps.get("podTemplateRef") or {}).get("name"))) or {}
        for container in ((template.get("template") or {}).get("spec") or {}).get("containers") or []:
            for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
                amount = quantities.to_amount(resource, value) * int(ps.get("count", 1))
                total[resource] = total.get(resource, 0) + amount
    return total


def outcome(request: Mapping[str, Any], asked: Mapping[str, int], capacity: Mapping[str, int] | None) -> str | None:
    """Why ``request`` fails (a message), or None when it is provisioned."""
    params = (request.get("spec") or {}).get("parameters") or {}
    if params.get(OUTCOME_PARAMETER) == "Failed":
        return f"the request asked to fail (parameter {OUTCOME_PARAMETER})"
    for resource, amount in sorted(asked.items()):
        if capacity is not None and resource in capacity and amount > capacity[resource]:
            return f"Capacity is not found: {resource} {amount} requested, {capacity[resource]} available"
    return None


class FakeAutoscaler:
    """Answers ProvisioningRequests as described in the module docstring; run with :meth:`run`."""

    def __init__(
        self,
        api: Any,
        *,
        delay: float = 1.0,
        capacity: Mapping[str, int] | None = None,
        details: Mapping[str, str] | None = None,
    ) -> None:
        self.api, self.delay, self.capacity = api, delay, capacity
        self.details = dict(details or {})
        self._pending: dict[str, asyncio.Task[None]] = {}

    async def run(self) -> None:
        """Watch ProvisioningRequests forever, answering each new one."""
        try:
            async for change in client.watch_objects(self.api, resources.PROVISIONING_REQUESTS):
                objs = change.objects if isinstance(change, client.Resynced) else (change.object,)
                if isinstance(change, client.WatchEvent) and change.type == "DELETED":
                    continue
                for obj in objs:
                    self._answer(obj)
        finally:
            for task in self._pending.values():
                task.cancel()

    def _answer(self, request: dict[str, Any]) -> None:
        spec = request.get("spec") or {}
        if spec.get("provisioningClassName") not in CLASSES:
            return
        conditions = (request.get("status") or {}).get("conditions") or []
        if any(c.get("type") in ("Provisioned", "Failed") and c.get("status") == "True" for c in conditions):
            return
        key = f"{request['metadata']['namespace']}/{request['metadata']['name']}"
        if key in self._pending and not self._pending[key].done():
            return
        self._pending[key] = asyncio.create_task(self._provision(request))

    async def _provision(self, request: dict[str, Any]) -> None:
        meta = request["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        try:
            if not any(c.get("type") == "Accepted" for c in (request.get("status") or {}).get("conditions") or []):
                now = _now()
                accepted = [
                    _cond("Accepted", "True", "Accepted", "ProvisioningRequest is accepted", now),
                    _cond("Provisioned", "False", "Provisioning", "Provisioning is in progress", now),
                ]
                await self._status(namespace, name, {"conditions": accepted})
            await asyncio.sleep(self.delay)
            templates, _ = await client.list_objects(self.api, resources.POD_TEMPLATES, namespace=namespace)
            asked = requested({t["metadata"]["name"]: t for t in templates}, request)
            failure = outcome(request, asked, self.capacity)
            now = _now()
            accepted_cond = _cond("Accepted", "True", "Accepted", "ProvisioningRequest is accepted", now)
            if failure is None:
                status = {
                    "conditions": [
                        accepted_cond,
                        _cond("Provisioned", "True", "CapacityIsFound", "Capacity is found in the cluster", now),
                    ],
                    "provisioningClassDetails": dict(self.details),
                }
            else:
                status = {
                    "conditions": [
                        accepted_cond,
                        _cond("Provisioned", "False", "CapacityIsNotFound", failure, now),
                        _cond("Failed", "True", "CapacityIsNotFound", failure, now),
                    ]
                }
            await self._status(namespace, name, status)
            log.info("fake_autoscaler_answered", request=f"{namespace}/{name}", failed=failure is not None)
        except errors.NotFoundError:
            pass  # deleted meanwhile

    async def _status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        with contextlib.suppress(errors.NotFoundError):
            await client.patch_object(
                self.api, resources.PROVISIONING_REQUESTS, namespace=namespace, name=name,
                patch={"status": status}, subresource="status",
            )  # fmt: skip
