"""Issue 21 point 1's done-when, as a user runs it: Kueue's DRA samples admitted with device quota charged.

``kueue-es demo --keep --duration 600 --config FILE`` (jobs run long enough to be seen holding quota) runs as its own process (nats-server, the services, the emulated
API server) with a manager Configuration that maps DeviceClass ``gpu.example.com`` to quota resource
``example.com/gpu`` (Kueue's site/.../tasks/setup_dra.md). The real kubectl applies Kueue's DRA samples
(../shared/kueue-examples/dra) as Kueue publishes them: the queues (``sample-dra-queues.yaml``), the
ResourceClaimTemplate and Job (``sample-dra-rct-job.yaml``), then the extended-resource Job
(``sample-dra-extended-resource-job.yaml``, its ``example.com/gpu`` backed by the DeviceClass's
``extendedResourceName``). Each Workload is admitted with ``example.com/gpu`` in its resourceUsage and the
ClusterQueue's flavorsUsage counts the devices; a template of an unmapped DeviceClass is refused with
Kueue's message (QuotaReserved=False, Misconfigured). Then CEL selectors: a template asking for two
``a100`` devices while the one ResourceSlice applied publishes one is refused with Kueue's
"insufficient matching devices" message; a second ResourceSlice applied with kubectl admits it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.demo_process import Demo, admitted, eventually, workloads
from tests.kube.examples import EXAMPLES
from tests.kube.test_kubectl import Kubectl

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: example.com/gpu
    deviceClassNames:
    - gpu.example.com
"""
DEVICE_CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
spec:
  extendedResourceName: example.com/gpu
  selectors:
  - cel:
      expression: device.driver == "gpu.example.com"
"""
UNMAPPED = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: default
  name: fpga
spec:
  spec:
    devices:
      requests:
      - name: fpga
        exactly:
          deviceClassName: fpga.example.com
"""


def claim_job(name: str, template: str) -> str:
    """A one-pod Job in user-queue whose pod claims devices through ResourceClaimTemplate ``template``."""
    return f"""---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: default
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  template:
    spec:
      containers:
      - name: c
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["pause"]
        resources:
          claims:
          - name: devices
          requests:
            cpu: "1"
      resourceClaims:
      - name: devices
        resourceClaimTemplateName: {template}
      restartPolicy: Never
"""


def resource_slice(node: str, *models: str) -> str:
    """A ResourceSlice of driver gpu.example.com on ``node`` with one device a model."""
    devices = "".join(
        f"""
  - name: gpu-{i}
    attributes:
      model: {{string: {model}}}
    capacity:
      memory: {{value: 80Gi}}"""
        for i, model in enumerate(models)
    )
    return f"""apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: {node}-gpu.example.com
spec:
  driver: gpu.example.com
  nodeName: {node}
  pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}
  devices:{devices}
"""


CEL_TEMPLATE = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  namespace: default
  name: two-a100
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          count: 2
          selectors:
          - cel:
              expression: device.attributes["gpu.example.com"].model == "a100"
"""


def _usage(cq: dict[str, Any], resource: str) -> str:
    for flavor in (cq.get("status") or {}).get("flavorsUsage") or []:
        for used in flavor["resources"]:
            if used["name"] == resource:
                return str(used["total"])
    return ""


async def _new_workload(kubectl: Kubectl, before: set[str], job_prefix: str) -> dict[str, Any] | None:
    for name, workload in (await workloads(kubectl)).items():
        if name not in before and name.startswith(f"job-{job_prefix}"):
            return workload
    return None


async def _refusal(kubectl: Kubectl, before: set[str], job_prefix: str) -> str | None:
    """The message of the new Workload's QuotaReserved=False Misconfigured condition, None before it has one."""
    found = await _new_workload(kubectl, before, job_prefix)
    for c in ((found or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == "QuotaReserved" and c["status"] == "False" and c.get("reason") == "Misconfigured":
            return str(c["message"])
    return None


async def test_kueues_dra_samples_are_admitted_with_device_quota_charged(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    demo = Demo(tmp_path / "demo", duration=600, config=config)
    kubectl = await demo.start()
    try:
        dra = EXAMPLES / "dra"
        await kubectl.ok("apply", "-f", str(dra / "sample-dra-queues.yaml"))
        assert "created" in await kubectl.ok("apply", "-f", "-", stdin=DEVICE_CLASS)
        devices = 0
        for sample, prefix in (
            ("sample-dra-rct-job.yaml", "sample-dra-rct-job-"),
            ("sample-dra-extended-resource-job.yaml", "sample-dra-extended-job-"),
        ):
            before = set(await workloads(kubectl))
            created = await kubectl.ok("create", "-f", str(dra / sample))
            assert "job.batch/" in created, created

            async def admitted_one(prefix: str = prefix, before: set[str] = before) -> dict[str, Any] | None:
                found = await _new_workload(kubectl, before, prefix)
                return found if found is not None and admitted(found) else None

            workload = await eventually(admitted_one, what=f"{sample}: its Workload admitted")
            [assignment] = workload["status"]["admission"]["podSetAssignments"]
            assert assignment["resourceUsage"]["example.com/gpu"] == "1", assignment
            devices += 1

            async def charged(want: str = str(devices)) -> bool:
                cq = json.loads(await kubectl.ok("get", "clusterqueue", "cluster-queue", "-o", "json"))
                return _usage(cq, "example.com/gpu") == want

            await eventually(charged, what=f"{sample}: flavorsUsage example.com/gpu {devices}")

        before = set(await workloads(kubectl))
        await kubectl.ok("apply", "-f", "-", stdin=UNMAPPED + claim_job("fpga-job", "fpga"))

        async def refused() -> dict[str, dict[str, Any]] | None:
            found = await _new_workload(kubectl, before, "fpga-job")
            conditions = {c["type"]: c for c in ((found or {}).get("status") or {}).get("conditions") or []}
            reserved, requeued = conditions.get("QuotaReserved") or {}, conditions.get("Requeued") or {}
            if reserved.get("status") == "False" and reserved.get("reason") == "Misconfigured" and requeued:
                return conditions
            return None

        conditions = await eventually(refused, what="the unmapped DeviceClass refused")
        message = (
            "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName: Not found: "
            '"DeviceClass fpga.example.com is not mapped in DRA configuration for podset main"'
        )
        assert conditions["QuotaReserved"]["message"] == message
        # Kueue's workload controller also writes Requeued=False Inadmissible (markDRAInadmissible)
        requeued = conditions["Requeued"]
        assert (requeued["status"], requeued["reason"], requeued["message"]) == ("False", "Inadmissible", message)

        # CEL selectors against the devices ResourceSlices publish
        await kubectl.ok("apply", "-f", "-", stdin=resource_slice("node-1", "a100", "t4"))
        before = set(await workloads(kubectl))
        await kubectl.ok("apply", "-f", "-", stdin=CEL_TEMPLATE + claim_job("a100-job", "two-a100"))

        message = await eventually(
            lambda: _refusal(kubectl, before, "a100-job"), what="two a100 asked, one published: refused"
        )
        assert message == (
            "spec.podSets[0].template.spec.resourceClaims[0].devices.requests[0].exactly.selectors: Internal error: "
            "ResourceClaimTemplate two-a100: insufficient matching devices for CEL selector in DeviceClass "
            "gpu.example.com: 1 device(s) match in the cluster but 2 requested"
        )
        await kubectl.ok("apply", "-f", "-", stdin=resource_slice("node-2", "a100"))

        async def admitted_a100() -> dict[str, Any] | None:
            found = await _new_workload(kubectl, before, "a100-job")
            return found if found is not None and admitted(found) else None

        workload = await eventually(admitted_a100, what="a second a100 published: admitted")
        [assignment] = workload["status"]["admission"]["podSetAssignments"]
        assert assignment["resourceUsage"]["example.com/gpu"] == "2", assignment
    finally:
        await demo.stop()


COUNTER_CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  deviceClassMappings:
  - name: gpu.memory
    deviceClassNames:
    - gpu.example.com
    sources:
    - counter:
        name: memory
        driver: gpu.example.com
        deviceSelector:
          cel:
            expression: "device.driver == 'gpu.example.com'"
"""
PARTITIONS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata:
  name: node-1-gpu.example.com
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0-1g
    consumesCounters:
    - counterSet: gpu-0-counter-set
      counters: {memory: {value: 40Gi}}
  - name: gpu-0-2g
    consumesCounters:
    - counterSet: gpu-0-counter-set
      counters: {memory: {value: 80Gi}}
"""


async def test_kueues_counter_sample_is_charged_the_consumed_counter(tmp_path: Path) -> None:
    """Kueue's counter-based quota sample (setup_dra.md, 'Set up counter-based quota'): the Configuration maps
    gpu.example.com to gpu.memory with counter source memory; the node publishes 40Gi and 80Gi partitions; the
    sample Job's one device is charged the largest, 80Gi (85899345920, as Kueue's docs show it)."""
    config = tmp_path / "config.yaml"
    config.write_text(COUNTER_CONFIG)
    demo = Demo(tmp_path / "demo", duration=600, config=config)
    kubectl = await demo.start()
    try:
        dra = EXAMPLES / "dra"
        await kubectl.ok("apply", "-f", str(dra / "sample-dra-counter-queues.yaml"))
        await kubectl.ok("apply", "-f", "-", stdin=PARTITIONS)
        before = set(await workloads(kubectl))
        assert "job.batch/" in await kubectl.ok("create", "-f", str(dra / "sample-dra-counter-job.yaml"))

        async def admitted_one() -> dict[str, Any] | None:
            found = await _new_workload(kubectl, before, "sample-dra-counter-job-")
            return found if found is not None and admitted(found) else None

        workload = await eventually(admitted_one, what="the counter sample admitted")
        [assignment] = workload["status"]["admission"]["podSetAssignments"]
        assert assignment["resourceUsage"]["gpu.memory"] == "85899345920", assignment

        async def charged() -> bool:
            cq = json.loads(await kubectl.ok("get", "clusterqueue", "cluster-queue", "-o", "json"))
            return _usage(cq, "gpu.memory") == "85899345920"

        await eventually(charged, what="flavorsUsage gpu.memory 85899345920")
    finally:
        await demo.stop()
