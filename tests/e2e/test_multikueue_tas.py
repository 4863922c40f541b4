"""Kueue's MultiKueue + TAS sample (multikueue/tas/, dev/sample-tas-job.yaml) on ``kueue-es demo --multikueue``.

The walk-through of docs/multikueue.md with real processes, as a new user's trial ran it: on worker 2 the Nodes of
docs/examples/multikueue-tas-nodes.yaml and Kueue's worker-setup.yaml (its ClusterQueue renamed ``cluster-queue``,
the queue the demo's ``user-queue`` is bound to: a LocalQueue's ``spec.clusterQueue`` is immutable); on the manager
Kueue's manager-setup.yaml, then the sample's two Jobs. Worker 2 places each Job's pods (a topology assignment) and
its scheduler stand-in binds them to the Nodes it chose, so they run there and both Jobs complete on the manager.
The trial found the pods left Pending, gated, on the worker: a worker ran no simulated controllers (no scheduler
stand-in). Kueue's files are copied unchanged into tests/fixtures/kueue-multikueue-tas/.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from kueue_es.events.manifests import load_documents
from kueue_es.multikueue_demo import WORKERS, Cluster, manager_configuration, setup_manifests, start_system
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import resources
from tests.e2e.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "kueue_es" / "demo_manifests" / "multikueue-setup.yaml"
SAMPLE = ROOT / "tests" / "fixtures" / "kueue-multikueue-tas"
NODES = ROOT / "docs" / "examples" / "multikueue-tas-nodes.yaml"


def _documents(path: Path) -> list[dict[str, Any]]:
    return load_documents(path.read_text(), source=str(path))


def worker_setup() -> list[dict[str, Any]]:
    """Kueue's worker-setup.yaml with its ClusterQueue named ``cluster-queue``, as docs/multikueue.md has it typed."""
    text = (SAMPLE / "worker-setup.yaml").read_text().replace("worker-cluster-queue", "cluster-queue")
    return load_documents(text, source="worker-setup.yaml")


def _complete(job: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def test_kueues_multikueue_tas_sample_runs_on_a_worker(tmp_path: Path) -> None:
    config = tmp_path / "manager-config.yaml"
    config.write_text(manager_configuration(worker_lost_timeout="5s", gc_interval="10s"))
    manager = Cluster(name="manager", run_dir=tmp_path / "manager")
    workers = [Cluster(name=name, run_dir=tmp_path / name) for name in WORKERS]
    worker = workers[1]
    async with contextlib.AsyncExitStack() as stack:
        await start_system(
            stack, manager=manager, workers=workers, setup=setup_manifests(SETUP), duration=5.0, config_file=config
        )
        # as `demo --multikueue --keep` leaves it: worker 1 stopped (it has no TAS flavor: Kueue admits the implicit
        # TAS Job there without a topology, as any Job)
        await workers[0].stop()
        for doc in [*_documents(NODES), *worker_setup()]:
            await kube.apply_manifest(worker.api, doc)
        for doc in _documents(SAMPLE / "manager-setup.yaml"):
            await kube.apply_manifest(manager.api, doc)
        jobs = _documents(SAMPLE / "sample-tas-job.yaml")
        assert [j["metadata"]["name"] for j in jobs] == ["tas-sample-job", "implicit-tas-job"]
        for job in jobs:
            await kube.create_object(manager.api, resources.JOBS, namespace="default", body=job)

        async def running() -> dict[str, tuple[str, dict[str, str]]]:
            pods, _ = await kube.list_objects(worker.api, resources.PODS, namespace="default")
            return {
                p["metadata"]["name"]: (p["spec"].get("nodeName") or "", p["spec"].get("nodeSelector") or {})
                for p in pods
                if p["metadata"]["name"].startswith(("tas-sample-job-", "implicit-tas-job-"))
                and (p.get("status") or {}).get("phase") == "Running"
            }

        # the pods run on worker 2's Nodes, where its topology assignment put them (their hostname nodeSelector)
        placed = await eventually(running, lambda ps: len(ps) == 5, what="the sample's 5 pods Running on worker 2")
        for name, (node, selector) in placed.items():
            assert node in ("tas-node-1", "tas-node-2"), (name, node)
            assert selector.get("kubernetes.io/hostname") == node, (name, selector)
            assert selector.get("cloud.provider.com/node-group") == "tas-node", (name, selector)

        async def manager_jobs() -> dict[str, dict[str, Any]]:
            items, _ = await kube.list_objects(manager.api, resources.JOBS, namespace="default")
            return {item["metadata"]["name"]: item for item in items}

        done = await eventually(
            manager_jobs,
            lambda js: all(name in js and _complete(js[name]) for name in ("tas-sample-job", "implicit-tas-job")),
            what="both sample TAS Jobs Complete on the manager",
            timeout=120,
            shown=lambda js: {n: (j.get("status") or {}).get("conditions") for n, j in (js or {}).items()},
        )
        assert done["tas-sample-job"]["status"].get("succeeded") == 2
        assert done["implicit-tas-job"]["status"].get("succeeded") == 3
