"""Issue 14 point 1, live: the inputs the deciders read reach them from a running cluster.

nats-server, the five services as processes and the emulated API server, as in
``test_pipeline``; everything is created and changed through the Kubernetes API,
as a user or an outside controller would:

* an admission check: its controller marks the AdmissionCheck Active, a Job's
  Workload reserves quota and waits, the controller sets its
  ``status.admissionChecks`` entry Ready, and the Workload is admitted and the Job
  unsuspended, with the controller's entry kept;
* a ClusterQueue ``namespaceSelector`` on a custom label: a Job in a namespace with
  the label is admitted, one in a namespace without it waits with Kueue's message
  until the namespace gets the label;
* Kueue's manager configuration file (``--config``): read at start, then changed
  (a ConfigMap-style symlink swap) to turn fair sharing on; each version is one
  ConfigurationObserved, and the same contest between two ClusterQueues of a cohort
  goes to the higher-priority workload before and to the lower weighted share after
  (tests/scenarios/fairsharing/order-higher-weight-admitted-first.yaml).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kueue_es.events import codec, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.base import Bus
from kueue_es.events.bus.server import NatsServer
from kueue_es.events.manifests import format_time_ms
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from kueue_es.sim.emulator import serve_emulator
from kueue_es.supervisor import Supervisor

pytestmark = pytest.mark.slow
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE = "kueue.x-k8s.io/v1beta2"
#: Kueue's own config/components/manager/controller_manager_config.yaml, as Kueue ships it
KUEUE_CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 10
clientConnection:
  qps: 300
  burst: 500
integrations:
  frameworks:
  - "batch/job"
  - "kubeflow.org/mpijob"
  - "jobset.x-k8s.io/jobset"
  - "pod"
"""


@dataclass
class System:
    api: k8s_client.ApiClient
    bus: Bus
    logs: Path

    async def apply(self, *manifests: dict[str, Any]) -> list[dict[str, Any]]:
        return [await kube.apply_manifest(self.api, m) for m in manifests]

    async def facts(self, cls: type[types.Event]) -> list[Any]:
        """Every event of type ``cls`` on the log so far."""
        found = []
        last = await self.bus.last_seq()
        for seq in range(1, last + 1):
            event = codec.decode((await self.bus.get(seq)).data)
            if isinstance(event, cls):
                found.append(event)
        return found

    async def until(self, check: Callable[[], Awaitable[Any]], *, what: str, timeout: float = 45.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := await check():
                return found
            await asyncio.sleep(0.25)
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.logs.glob("*.log")))
        raise AssertionError(f"{what}: not within {timeout}s\n{logs}")

    async def workload_of(self, namespace: str, job: str) -> dict[str, Any] | None:
        items, _ = await kube.list_objects(self.api, resources.WORKLOADS, namespace=namespace)
        for wl in items:
            if any(ref.get("name") == job for ref in wl["metadata"].get("ownerReferences") or []):
                return wl
        return None

    async def job(self, namespace: str, name: str) -> dict[str, Any]:
        return await kube.get_object(self.api, resources.JOBS, namespace=namespace, name=name)


@contextlib.asynccontextmanager
async def live(tmp_path: Path, *, watcher_args: list[str] = ()) -> AsyncIterator[System]:  # type: ignore[assignment]
    async with NatsServer(store_dir=tmp_path / "nats") as server, serve_emulator() as emulator:
        supervisor = Supervisor(
            nats_url=server.url,
            log_dir=tmp_path / "logs",
            kube_args=["--kube-server", emulator.url],
            watcher_args=list(watcher_args),
        )
        await supervisor.start()
        api = await kube.make_api_client(server=emulator.url)
        bus = await nats_bus.connect(server.url)
        try:
            yield System(api=api, bus=bus, logs=tmp_path / "logs")
        finally:
            codes = await supervisor.stop()
            await api.close()
            await bus.close()
        assert codes == {name: 0 for name in codes}, codes


def conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def flavor(name: str = "default") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}}


def cluster_queue(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    groups = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
        }
    ]
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": groups, **spec},
    }


def local_queue(name: str, namespace: str, cq: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}


def job(name: str, namespace: str, queue: str, cpu: str, *, priority_class: str = "") -> dict[str, Any]:
    labels = {QUEUE_LABEL: queue} | ({"kueue.x-k8s.io/priority-class": priority_class} if priority_class else {})
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "suspend": True,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


async def test_an_outside_controller_sets_the_check_ready_and_the_job_is_admitted(tmp_path: Path) -> None:
    """(a) AdmissionCheck Active through its status, the Workload's check entry Ready through its status."""
    async with live(tmp_path) as system:
        check = {
            "apiVersion": KUEUE,
            "kind": "AdmissionCheck",
            "metadata": {"name": "prov"},
            "spec": {"controllerName": "example.com/prov"},
        }
        strategy = {"admissionChecks": [{"name": "prov"}]}
        await system.apply(flavor(), check, cluster_queue("cq", "4", admissionChecksStrategy=strategy))
        await system.apply(local_queue("lq", "default", "cq"))
        now = format_time_ms(int(time.time() * 1000))
        active = {"type": "Active", "status": "True", "reason": "Active", "message": "ok", "lastTransitionTime": now}
        await kube.patch_object(
            system.api, resources.ADMISSION_CHECKS, name="prov", patch={"status": {"conditions": [active]}},
            subresource="status",
        )  # fmt: skip

        async def check_active() -> bool:
            observed = await system.facts(types.AdmissionCheckObserved)
            return any(f.admission_check.metadata.name == "prov" and f.admission_check.active for f in observed)

        await system.until(check_active, what="AdmissionCheckObserved prov active")
        await system.apply(job("checked", "default", "lq", "1"))

        async def reserved() -> dict[str, Any] | None:
            wl = await system.workload_of("default", "checked")
            return wl if conditions(wl).get("QuotaReserved", {}).get("status") == "True" else None

        wl = await system.until(reserved, what="Workload QuotaReserved")
        assert [(c["name"], c["state"]) for c in wl["status"]["admissionChecks"]] == [("prov", "Pending")]
        assert conditions(wl)["Admitted"]["status"] == "False"
        assert (await system.job("default", "checked"))["spec"]["suspend"] is True

        # the check's controller: Ready, through the API, as a plain merge patch of the status
        ready = {"name": "prov", "state": "Ready", "message": "capacity found", "lastTransitionTime": now}
        await kube.patch_object(
            system.api, resources.WORKLOADS, namespace="default", name=wl["metadata"]["name"],
            patch={"metadata": {"resourceVersion": wl["metadata"]["resourceVersion"]},
                   "status": {"admissionChecks": [ready]}},
            subresource="status",
        )  # fmt: skip

        async def admitted() -> dict[str, Any] | None:
            wl = await system.workload_of("default", "checked")
            return wl if conditions(wl).get("Admitted", {}).get("status") == "True" else None

        wl = await system.until(admitted, what="Workload Admitted")
        assert [(c["name"], c["state"], c["message"]) for c in wl["status"]["admissionChecks"]] == [
            ("prov", "Ready", "capacity found")
        ]

        async def unsuspended() -> bool:
            return (await system.job("default", "checked"))["spec"]["suspend"] is False

        await system.until(unsuspended, what="Job unsuspended")
        changes = await system.facts(types.AdmissionCheckStateChanged)
        assert [(c.check, c.state) for c in changes] == [("prov", "Ready")]


async def test_a_namespace_selector_on_a_custom_label(tmp_path: Path) -> None:
    """(b) matchLabels team=a: the labelled namespace's Job is admitted; the other's waits with Kueue's
    message until its namespace is labelled too."""
    async with live(tmp_path) as system:
        await system.apply(namespace("team-a", {"team": "a"}), namespace("team-b"), flavor())
        await system.apply(cluster_queue("cq", "4", namespaceSelector={"matchLabels": {"team": "a"}}))
        await system.apply(local_queue("lq", "team-a", "cq"), local_queue("lq", "team-b", "cq"))
        await system.apply(job("ours", "team-a", "lq", "1"), job("theirs", "team-b", "lq", "1"))

        async def both_decided() -> tuple[dict[str, Any], dict[str, Any]] | None:
            ours, theirs = await system.workload_of("team-a", "ours"), await system.workload_of("team-b", "theirs")
            if conditions(ours).get("Admitted", {}).get("status") != "True":
                return None
            if conditions(theirs).get("QuotaReserved", {}).get("reason") != "Misconfigured":
                return None
            assert ours is not None and theirs is not None
            return ours, theirs

        ours, theirs = await system.until(both_decided, what="team-a admitted, team-b refused")
        assert ours["status"]["admission"]["clusterQueue"] == "cq"
        assert conditions(theirs)["QuotaReserved"]["status"] == "False"
        assert (
            conditions(theirs)["QuotaReserved"]["message"] == "workload namespace doesn't match ClusterQueue selector"
        )
        assert (await system.job("team-b", "theirs"))["spec"]["suspend"] is True
        observed = {
            f.namespace.metadata.name: f.namespace.metadata.labels for f in await system.facts(types.NamespaceObserved)
        }
        assert observed["team-a"]["team"] == "a" and "team" not in observed["team-b"]

        await kube.patch_object(
            system.api, resources.NAMESPACES, name="team-b", patch={"metadata": {"labels": {"team": "a"}}}
        )

        async def theirs_admitted() -> bool:
            wl = await system.workload_of("team-b", "theirs")
            return conditions(wl).get("Admitted", {}).get("status") == "True"

        await system.until(theirs_admitted, what="team-b admitted once labelled")


def write_config_map_volume(volume: Path, text: str, *, version: int) -> None:
    """Write ``controller_manager_config.yaml`` as the kubelet updates a ConfigMap volume: a new
    timestamped directory, then the ``..data`` symlink swapped to it in one rename."""
    data = volume / f"..2026_{version:04d}"
    data.mkdir(parents=True)
    (data / "controller_manager_config.yaml").write_text(text)
    link = volume / "..data_tmp"
    link.symlink_to(data.name)
    os.replace(link, volume / "..data")
    entry = volume / "controller_manager_config.yaml"
    if not entry.is_symlink():
        entry.symlink_to("..data/controller_manager_config.yaml")


async def test_fair_sharing_turned_on_by_the_config_file(tmp_path: Path) -> None:
    """(c), (d) Kueue's shipped file: one ConfigurationObserved at start, fair sharing off, the contest
    goes to the higher priority; the file changed to turn fair sharing on: a second ConfigurationObserved,
    and the same contest goes to the ClusterQueue with the lower weighted share."""
    volume = tmp_path / "config"
    write_config_map_volume(volume, KUEUE_CONFIG, version=1)
    path = volume / "controller_manager_config.yaml"
    async with live(tmp_path, watcher_args=["--config", str(path)]) as system:
        configs = await system.until(lambda: system.facts(types.ConfigurationObserved), what="ConfigurationObserved")
        assert len(configs) == 1 and configs[0].configuration.fair_sharing is None
        high = {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 10}
        await system.apply(flavor(), high)
        assert await contest(system, "off") == "b-next"

        write_config_map_volume(
            volume,
            KUEUE_CONFIG
            + "fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n",
            version=2,
        )

        async def second() -> list[Any] | None:
            found = await system.facts(types.ConfigurationObserved)
            return found if len(found) == 2 else None

        configs = await system.until(second, what="a second ConfigurationObserved")
        assert configs[1].configuration.fair_sharing is not None
        assert await contest(system, "on") == "a-next"
        await asyncio.sleep(3)  # a poll or two more: an unchanged file publishes nothing
        assert len(await system.facts(types.ConfigurationObserved)) == 2


async def contest(system: System, tag: str) -> str:
    """order-higher-weight-admitted-first, live: cohort-<tag> lends 7 CPU, a (weight 2) runs 4, b runs 3;
    a-next (priority 0) and b-next (priority 10, older) wait; one more CPU frees one place. Returns which
    of a-next and b-next was admitted."""
    cohort = {
        "apiVersion": KUEUE,
        "kind": "Cohort",
        "metadata": {"name": f"cohort-{tag}"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "7"}]}],
                }
            ]
        },
    }
    ns = f"fs-{tag}"
    await system.apply(namespace(ns), cohort)
    await system.apply(
        cluster_queue(f"a-{tag}", "0", cohortName=f"cohort-{tag}", fairSharing={"weight": "2"}),
        cluster_queue(f"b-{tag}", "0", cohortName=f"cohort-{tag}"),
    )
    await system.apply(local_queue("lq-a", ns, f"a-{tag}"), local_queue("lq-b", ns, f"b-{tag}"))
    await system.apply(job("a-run", ns, "lq-a", "4"), job("b-run", ns, "lq-b", "3"))

    async def running() -> bool:
        wls = [await system.workload_of(ns, name) for name in ("a-run", "b-run")]
        return all(conditions(wl).get("Admitted", {}).get("status") == "True" for wl in wls)

    await system.until(running, what=f"a-run and b-run admitted ({tag})")
    await system.apply(job("b-next", ns, "lq-b", "1", priority_class="high"))
    await asyncio.sleep(1.1)  # b-next is older by a second
    await system.apply(job("a-next", ns, "lq-a", "1"))

    async def both_waiting() -> bool:
        wls = [await system.workload_of(ns, name) for name in ("a-next", "b-next")]
        return all(
            "insufficient unused quota for cpu" in conditions(wl).get("QuotaReserved", {}).get("message", "")
            for wl in wls
        )

    await system.until(both_waiting, what=f"a-next and b-next waiting ({tag})")
    cohort["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "8"
    await system.apply(cohort)

    async def one_admitted() -> list[str]:
        return [
            name
            for name in ("a-next", "b-next")
            if conditions(await system.workload_of(ns, name)).get("QuotaReserved", {}).get("status") == "True"
        ]

    [winner] = await system.until(one_admitted, what=f"a-next or b-next admitted ({tag})")
    await asyncio.sleep(1.5)
    assert await one_admitted() == [winner]
    return winner
