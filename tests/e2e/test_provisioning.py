"""Issue 21 point 2, live: a ProvisioningRequest admission check against the fake cluster-autoscaler.

nats-server, the five services and the provisioning controller as processes, the emulated API
server, the fake autoscaler (kueue_es/sim/autoscaler.py) in this process; Kueue's
provisioning-setup.yaml (../shared/kueue-examples/provisioning) applied unchanged, with
backoffLimitCount lowered to 1 for the failure case:

* an AdmissionCheck whose parameters name no config: Active False, BadParametersRef;
* a GPU Job: its Workload reserves quota, the check goes Pending, the request
  ``<wl>-sample-prov-1`` with its PodTemplate is created, Provisioned, the check goes Ready
  with Kueue's podSetUpdates, the Workload is admitted and the Job starts with the
  autoscaling annotations in its pod template;
* a Job whose requests the autoscaler fails: Retry (requeueAfterSeconds 0 = base 0), the
  Workload evicted and requeued, attempt 2 created and failed, Rejected: the Workload deactivated.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kueue_es.events import codec, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.server import NatsServer
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.sim.autoscaler import FakeAutoscaler
from kueue_es.sim.emulator import serve_emulator
from kueue_es.supervisor import PROVISIONING, SERVICES, Supervisor

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "kueue-examples" / "provisioning"


def setup_objects(limit: int | None = None) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "provisioning-setup.yaml").read_text()) if d]
    if limit is not None:
        for doc in docs:
            if doc["kind"] == "ProvisioningRequestConfig":
                doc["spec"]["retryStrategy"]["backoffLimitCount"] = limit
    return docs


def sample_job(name: str, *, fail: bool = False) -> dict[str, Any]:
    job = copy.deepcopy(yaml.safe_load((EXAMPLES / "sample-job.yaml").read_text()))
    job["metadata"].pop("generateName")
    job["metadata"]["name"] = name
    job["metadata"]["annotations"]["kueue-es.dev/sim-duration-seconds"] = "60"
    if fail:
        job["metadata"]["annotations"]["provreq.kueue.x-k8s.io/fakeAutoscalerOutcome"] = "Failed"
    return job


@contextlib.asynccontextmanager
async def live(tmp_path: Path) -> AsyncIterator[Any]:
    async with NatsServer(store_dir=tmp_path / "nats") as server, serve_emulator() as emulator:
        supervisor = Supervisor(
            nats_url=server.url, log_dir=tmp_path / "logs", kube_args=["--kube-server", emulator.url]
        )
        await supervisor.start((*SERVICES, PROVISIONING))
        api = await kube.make_api_client(server=emulator.url)
        bus = await nats_bus.connect(server.url)
        autoscaler = asyncio.create_task(FakeAutoscaler(api, delay=0.5, details={}).run())
        try:
            yield api, bus
        finally:
            autoscaler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await autoscaler
            codes = await supervisor.stop()
            await api.close()
            await bus.close()
        assert codes == {name: 0 for name in codes}, codes


async def until(check: Callable[[], Awaitable[Any]], *, what: str, logs: Path, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := await check():
            return found
        await asyncio.sleep(0.25)
    tails = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(logs.glob("*.log")))
    raise AssertionError(f"{what}: not within {timeout}s\n{tails}")


async def workload_of(api: Any, job: str) -> dict[str, Any] | None:
    items, _ = await kube.list_objects(api, resources.WORKLOADS, namespace="default")
    return next(
        (w for w in items if any(r.get("name") == job for r in w["metadata"].get("ownerReferences") or [])), None
    )


def state(wl: dict[str, Any] | None, check: str = "sample-prov") -> str | None:
    for entry in ((wl or {}).get("status") or {}).get("admissionChecks") or []:
        if entry["name"] == check:
            return str(entry["state"])
    return None


async def facts(bus: Any, cls: type[types.Event]) -> list[Any]:
    """The events of type ``cls`` on the log, in order: a message's own event, the facts of a FactBatch and the
    decisions a DecisionRecord carries (schema 17: a decider's decisions are in its record, no message each)."""
    found = []
    for seq in range(1, await bus.last_seq() + 1):
        for event in types.with_carried(codec.decode((await bus.get(seq)).data)):
            if isinstance(event, cls):
                found.append(event)
    return found


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="../shared/kueue-examples is not beside the repo")
async def test_pending_then_ready_and_the_job_starts_with_the_pod_set_updates(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    async with live(tmp_path) as (api, bus):
        for doc in setup_objects():
            await kube.apply_manifest(api, doc)

        async def active() -> bool:
            ac = await kube.get_object(api, resources.ADMISSION_CHECKS, name="sample-prov")
            return any(
                c["type"] == "Active" and c["status"] == "True" for c in ac.get("status", {}).get("conditions", [])
            )

        await until(active, what="AdmissionCheck Active", logs=logs)
        missing = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": "missing-prov"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/provisioning-request",
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "nope"},
            },
        }
        await kube.apply_manifest(api, missing)

        async def bad_parameters() -> dict[str, Any] | None:
            ac = await kube.get_object(api, resources.ADMISSION_CHECKS, name="missing-prov")
            conds = {c["type"]: c for c in ac.get("status", {}).get("conditions", [])}
            return conds.get("Active") if conds.get("Active", {}).get("status") == "False" else None

        cond = await until(bad_parameters, what="AdmissionCheck missing-prov Active False", logs=logs)
        assert cond["reason"] == "BadParametersRef"
        assert cond["message"] == 'provisioningrequestconfigs.kueue.x-k8s.io "nope" not found'
        await kube.apply_manifest(api, sample_job("gpu"))

        async def request() -> dict[str, Any] | None:
            wl = await workload_of(api, "gpu")
            if wl is None:
                return None
            with contextlib.suppress(Exception):
                return await kube.get_object(
                    api,
                    resources.PROVISIONING_REQUESTS,
                    namespace="default",
                    name=f"{wl['metadata']['name']}-sample-prov-1",
                )
            return None

        pr = await until(request, what="ProvisioningRequest attempt 1", logs=logs)
        assert pr["spec"]["provisioningClassName"] == "check-capacity.autoscaling.x-k8s.io"
        assert pr["spec"]["parameters"] == {"maxRunDurationSeconds": "600"}
        assert pr["metadata"]["ownerReferences"][0]["kind"] == "Workload"
        [ps] = pr["spec"]["podSets"]
        assert ps["count"] == 3

        async def pod_template() -> dict[str, Any] | None:
            # created right after its request (it names the request as its owner, as Kueue's does)
            with contextlib.suppress(Exception):
                return await kube.get_object(
                    api, resources.POD_TEMPLATES, namespace="default", name=ps["podTemplateRef"]["name"]
                )
            return None

        template = await until(pod_template, what="the request's PodTemplate", logs=logs)
        assert template["metadata"]["name"] == f"ppt-{pr['metadata']['name']}-main"
        [c] = template["template"]["spec"]["containers"]  # the Job's container, image and all
        assert (c["name"], c["image"]) == ("dummy-job", "registry.k8s.io/e2e-test-images/agnhost:2.53")
        assert c["resources"]["requests"]["nvidia.com/gpu"] == "1"  # stored as the API server writes a quantity

        async def started() -> dict[str, Any] | None:
            job = await kube.get_object(api, resources.JOBS, namespace="default", name="gpu")
            return job if job["spec"].get("suspend") is False else None

        job = await until(started, what="Job started", logs=logs)
        annotations = job["spec"]["template"]["metadata"]["annotations"]
        assert annotations["autoscaling.x-k8s.io/consume-provisioning-request"] == pr["metadata"]["name"]
        assert annotations["autoscaling.x-k8s.io/provisioning-class-name"] == "check-capacity.autoscaling.x-k8s.io"
        wl = await workload_of(api, "gpu")
        assert state(wl) == "Ready"
        changes = [(c.check, c.state) for c in await facts(bus, types.AdmissionCheckStateChanged)]
        assert changes[-1] == ("sample-prov", "Ready")

        # Kueue's provisioning controller records Events on the Workload (kubectl describe workload)
        async def recorded() -> list[tuple[str, str, str]] | None:
            listed, _ = await kube.list_objects(api, resources.EVENTS, namespace="default")
            mine = [
                (e["type"], e["reason"], e["message"])
                for e in listed
                if e["involvedObject"].get("name") == wl["metadata"]["name"]
                and e.get("reportingComponent") == "kueue-provisioning-request-controller"
            ]
            return mine if any(r == "AdmissionCheckUpdated" for _, r, _ in mine) else None

        events = await until(recorded, what="the provisioning controller's Events", logs=logs)
        assert (
            "Normal",
            "ProvisioningRequestCreated",
            f'Created ProvisioningRequest: "{pr["metadata"]["name"]}"',
        ) in events
        updated = [m for _, r, m in events if r == "AdmissionCheckUpdated"]
        assert any(m.startswith("Admission check sample-prov updated state from Pending to Ready") for m in updated)


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="../shared/kueue-examples is not beside the repo")
async def test_failed_then_retry_then_rejected(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    async with live(tmp_path) as (api, bus):
        for doc in setup_objects(limit=1):
            await kube.apply_manifest(api, doc)
        await kube.apply_manifest(api, sample_job("doomed", fail=True))

        async def deactivated() -> dict[str, Any] | None:
            wl = await workload_of(api, "doomed")
            if wl is None or wl["spec"].get("active") is not False:
                return None
            evicted = {c["type"]: c for c in wl["status"].get("conditions") or []}.get("Evicted", {})
            return wl if evicted.get("reason") == "DeactivatedDueToAdmissionCheck" else None  # spec, then status

        wl = await until(deactivated, what="Workload deactivated", logs=logs, timeout=90)
        evicted = {c["type"]: c for c in wl["status"]["conditions"]}["Evicted"]
        assert "the request asked to fail" in evicted["message"]
        # the deactivation's eviction reset the check, as Kueue resets every check on eviction, in the status write
        # that set Evicted (read here with it), and the provisioning controller leaves an evicted Workload's checks
        # alone: it wrote Rejected back over the reset, for good, when the eviction came in the second of the
        # reservation (a CI run under load; tests/integration/test_provisioning_eviction.py)
        reset = "Reset to Pending after eviction. Previously: Rejected"
        assert wl["status"]["admissionChecks"][0]["message"] == reset, wl["status"]["admissionChecks"]
        changes = [(c.state, c.requeue_after_seconds) for c in await facts(bus, types.AdmissionCheckStateChanged)]
        states = [s for s, _ in changes]
        assert states.index("Retry") < states.index("Rejected"), changes
        assert ("Retry", 0) in changes  # backoffBaseSeconds 0: requeue at once
        reasons = [e.reason for e in await facts(bus, types.EvictionRequested)]
        assert reasons[0] == "AdmissionCheck", reasons  # the Retry evicted it before the second attempt

        async def cleaned_up() -> bool:
            requests, _ = await kube.list_objects(api, resources.PROVISIONING_REQUESTS, namespace="default")
            templates, _ = await kube.list_objects(api, resources.POD_TEMPLATES, namespace="default")
            return not requests and not templates

        await until(cleaned_up, what="the evicted workload's requests and PodTemplates deleted", logs=logs)
        after = await workload_of(api, "doomed")
        assert after is not None and after["status"]["admissionChecks"][0]["message"] == reset  # and it stays
