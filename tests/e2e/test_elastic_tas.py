"""Live, through real processes: a TAS elastic Job scaled from 2 to 4 pods keeps its first pods'
domains and gets only the new pods placed (issue 21, SEMANTICS-ADVANCED A.14).

nats-server, the five services with ElasticJobsViaWorkloadSlices and
ElasticJobsViaWorkloadSlicesWithTAS on, the emulated API server and its simulated controllers.
Three nodes x1..x3 of 2 CPU (one hostname level); Job ``elastic`` (2 pods of 1 CPU, unconstrained
topology) runs on x1; the real ``kubectl patch`` sets its parallelism to 4. The replacement slice's
topology assignment keeps x1: 2 and places the new pods on x2 (x1 is full); the first two pods keep
running with the same UIDs and their nodeSelector, the two new ones are ungated onto x2 (the
dispatcher finds them by the chain's name). Every decision replays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from kueue_es.events import models, slices, tas
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from tests.e2e.elastic_system import KUBECTL, elastic_system
from tests.e2e.test_elastic import condition, elastic_job, running_pods
from tests.e2e.waiting import eventually
from tests.integration.harness import cluster_queue, local_queue

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

HOSTNAME = "kubernetes.io/hostname"
GATES = f"{slices.GATE}=true,{slices.TAS_GATE}=true"


def node(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Node of the TAS flavor and the status its kubelet would write (2 CPU, Ready)."""
    manifest = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"tas": "yes", HOSTNAME: name}},
    }
    status = {
        "allocatable": {"cpu": "2", "memory": "8Gi", "pods": "10"},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    return manifest, status


def topology_counts(workload: dict[str, Any]) -> dict[str, int]:
    """Host -> pods of the workload's first pod set's topology assignment ({} when none)."""
    psas = ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or [{}]
    raw = psas[0].get("topologyAssignment")
    if not raw:
        return {}
    return tas.decode(msgspec.convert(raw, models.TopologyAssignment)).counts_by_domain()


@pytest.mark.skipif(KUBECTL is None, reason="the real kubectl is not on PATH")
async def test_tas_elastic_job_keeps_its_pods_and_places_the_delta_live(tmp_path: Path) -> None:
    assert KUBECTL is not None
    async with elastic_system(tmp_path, feature_gates=GATES) as system:
        topology = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": HOSTNAME}]},
        }
        tas_flavor = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "tas-flavor"},
            "spec": {"nodeLabels": {"tas": "yes"}, "topologyName": "default"},
        }
        for manifest in (topology, tas_flavor):
            await kube.apply_manifest(system.api, manifest)
        for name in ("x1", "x2", "x3"):
            manifest, status = node(name)
            stored = await kube.apply_manifest(system.api, manifest)
            body = {"apiVersion": "v1", "kind": "Node", "metadata": stored["metadata"], "status": status}
            await kube.replace_object(system.api, resources.NODES, name=name, body=body, subresource="status")
        for manifest in (cluster_queue("cq", flavor_name="tas-flavor", cpu=6), local_queue("user-queue", "cq")):
            await kube.apply_manifest(system.api, manifest)
        job = elastic_job("elastic", parallelism=2)
        template_meta = job["spec"]["template"].setdefault("metadata", {})
        template_meta["annotations"] = {"kueue.x-k8s.io/podset-unconstrained-topology": "true"}
        await kube.apply_manifest(system.api, job)

        listed = await eventually(
            system.pods, lambda ps: len(running_pods(ps, "elastic")) == 2, what="two pods running"
        )
        first_pods = running_pods(listed, "elastic")
        (first,) = await system.workloads()
        assert topology_counts(first) == {"x1": 2}

        await system.kubectl("patch", "job", "elastic", "--type=merge", "-p", '{"spec":{"parallelism":4}}')
        four = await eventually(system.pods, lambda ps: len(running_pods(ps, "elastic")) == 4, what="four pods running")
        now_running = running_pods(four, "elastic")
        assert first_pods.items() <= now_running.items()  # the first two kept running: same UIDs
        hosts = sorted(
            (p.get("spec") or {}).get("nodeSelector", {}).get(HOSTNAME, "")
            for p in four
            if p["metadata"]["name"] in now_running
        )
        assert hosts == ["x1", "x1", "x2", "x2"]  # the new pods ungated onto the delta's domain

        listed = await eventually(
            system.workloads,
            lambda ws: (
                any(condition(w, "Admitted").get("status") == "True" and topology_counts(w) for w in ws)
                and len(ws) == 2
            ),
            what="the replacement slice admitted",
        )
        by_name = {w["metadata"]["name"]: w for w in listed}
        old = by_name.pop(first["metadata"]["name"])
        assert condition(old, "Finished")["reason"] == slices.REPLACED_REASON
        ((_, new),) = by_name.items()
        assert topology_counts(new) == {"x1": 2, "x2": 2}
