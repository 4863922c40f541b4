"""Issue 21 point 1's done-when, as a user runs it: Kueue's DRA samples admitted with device quota charged.

``kueue-es demo --keep --duration 600 --config FILE`` (jobs run long enough to be seen holding quota) runs as its own process (nats-server, the services, the emulated
API server) with a manager Configuration that maps DeviceClass ``gpu.example.com`` to quota resource
``example.com/gpu`` (Kueue's site/.../tasks/setup_dra.md). The real kubectl applies Kueue's DRA samples
(../shared/kueue-examples/dra) as Kueue publishes them: the queues (``sample-dra-queues.yaml``), the
ResourceClaimTemplate and Job (``sample-dra-rct-job.yaml``), then the extended-resource Job
(``sample-dra-extended-resource-job.yaml``, its ``example.com/gpu`` backed by the DeviceClass's
``extendedResourceName``). Each Workload is admitted with ``example.com/gpu`` in its resourceUsage and the
ClusterQueue's flavorsUsage counts the devices; a template of an unmapped DeviceClass is refused with
Kueue's message (QuotaReserved=False, Misconfigured).
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
---
apiVersion: batch/v1
kind: Job
metadata:
  name: fpga-job
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
          - name: fpga
          requests:
            cpu: "1"
      resourceClaims:
      - name: fpga
        resourceClaimTemplateName: fpga
      restartPolicy: Never
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
        await kubectl.ok("apply", "-f", "-", stdin=UNMAPPED)

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
    finally:
        await demo.stop()
