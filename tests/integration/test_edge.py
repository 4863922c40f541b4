"""The watcher and `kueue-es apply` against the emulated API server, in one process on a MemoryBus.

Kubernetes objects in, facts on the log out: the right facts for Kueue objects and
queued Jobs, nothing for what Kueue does not manage or for status-only writes,
deletions seen live and across gaps (a restart, a 410 Gone), and bad input
recorded as ObjectRejected while the last valid version stays in force.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from kueue_es.events import types
from kueue_es.events.bus.memory import MemoryBus
from kueue_es.jobframework.jobs import workload_name_for_job
from kueue_es.services.kube import client as kube
from kueue_es.services.kube import errors as kube_errors
from kueue_es.services.watcher.service import Watcher
from kueue_es.sim.emulator import ClusterEmulator
from tests.integration.harness import (
    JOBS,
    cluster_queue,
    events_of,
    flavor,
    folded,
    job,
    local_queue,
    log_entries,
    running,
    wait_for,
    wait_until,
    watch_all,
)

pytestmark = pytest.mark.timeout(60)  # a guard against hangs; CLI subprocesses are slow on a loaded 2-core machine

CQ_QUOTA_FIELD = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
CLUSTER_QUEUES = kube.ref_for("kueue.x-k8s.io/v1beta2", "ClusterQueue")


class CountingWatcher(Watcher):
    """A Watcher that counts the relists (Resynced snapshots) it handles, per kind."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.resyncs: dict[str, int] = {}

    async def _resynced(self, kind, objects, **options) -> None:
        self.resyncs[kind] = self.resyncs.get(kind, 0) + 1
        await super()._resynced(kind, objects, **options)


# -- 1. facts from a live watch ----------------------------------------------------------------


async def test_kueue_objects_and_a_queued_job_become_facts(api, bus: MemoryBus) -> None:
    """ResourceFlavor, ClusterQueue, LocalQueue and a labelled Job give the right *Observed facts."""
    watcher = Watcher(bus=bus, api=api)
    async with running(*watch_all(watcher)):
        await kube.apply_manifest(api, flavor("default-flavor", node_labels={"instance-type": "spot"}))
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=9, memory="36Gi"))
        await kube.apply_manifest(api, local_queue("user-queue", "cluster-queue"))
        stored = await kube.apply_manifest(api, job("sample", parallelism=4, completions=2, cpu="500m", memory="256Mi"))

        [rf] = await wait_for(bus, types.ResourceFlavorObserved)
        [cq] = await wait_for(bus, types.ClusterQueueObserved)
        [lq] = await wait_for(bus, types.LocalQueueObserved)
        [wl] = await wait_for(bus, types.WorkloadObserved)

    assert rf.flavor.metadata.name == "default-flavor"
    assert rf.flavor.spec.node_labels == {"instance-type": "spot"}
    assert cq.cluster_queue.metadata.name == "cluster-queue"
    quotas = {q.name: q.nominal_quota for q in cq.cluster_queue.spec.resource_groups[0].flavors[0].resources}
    assert quotas == {"cpu": 9000, "memory": 36 * 2**30}
    assert (lq.local_queue.metadata.namespace, lq.local_queue.metadata.name) == ("default", "user-queue")
    assert lq.local_queue.spec.cluster_queue == "cluster-queue"

    meta = stored["metadata"]
    workload = wl.workload
    assert workload.metadata.name == workload_name_for_job("sample", meta["uid"])
    assert workload.metadata.name.startswith("job-sample-")
    assert workload.metadata.namespace == "default" and workload.metadata.uid == meta["uid"]
    assert workload.metadata.creation_timestamp_ms > 0
    assert workload.spec.queue_name == "user-queue"
    [pod_set] = workload.spec.pod_sets
    assert (pod_set.name, pod_set.count) == ("main", 2)  # min(parallelism 4, completions 2)
    assert pod_set.requests == {"cpu": 500, "memory": 256 * 2**20}
    assert workload.owner is not None
    assert (workload.owner.api_version, workload.owner.kind, workload.owner.name, workload.owner.uid) == (
        "batch/v1",
        "Job",
        "sample",
        meta["uid"],
    )
    assert stored["spec"]["suspend"] is True  # the emulated Kueue webhook suspended it


async def test_unmanaged_jobs_and_status_writes_give_no_fact(api, bus: MemoryBus) -> None:
    """A Job without the queue label, and status-only writes to a ClusterQueue or a Job, add nothing to the log."""
    watcher = Watcher(bus=bus, api=api)
    async with running(*watch_all(watcher)):
        await kube.apply_manifest(api, cluster_queue("cq-a"))
        await kube.apply_manifest(api, job("queued"))
        await wait_for(bus, types.ClusterQueueObserved, cluster_queue__metadata__name="cq-a")
        await wait_for(bus, types.WorkloadObserved)
        before = await bus.last_seq()

        await kube.apply_manifest(api, job("plain", queue=None))
        await kube.patch_object(
            api,
            CLUSTER_QUEUES,
            name="cq-a",
            subresource="status",
            patch={
                "status": {
                    "pendingWorkloads": 3,
                    "conditions": [
                        {
                            "type": "Active",
                            "status": "True",
                            "reason": "Ready",
                            "message": "ok",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ],
                }
            },
        )
        await kube.patch_object(
            api,
            JOBS,
            namespace="default",
            name="queued",
            subresource="status",
            patch={"status": {"active": 1, "ready": 1}},
        )
        # Sentinels on the same watch streams: once they are on the log, the writes above were seen too.
        await kube.apply_manifest(api, cluster_queue("cq-b"))
        await kube.apply_manifest(api, job("queued-2"))
        await wait_for(bus, types.ClusterQueueObserved, cluster_queue__metadata__name="cq-b")
        await wait_for(bus, types.WorkloadObserved, count=2)

    after = [event for message, event in await log_entries(bus) if message.seq > before]
    assert sorted(type(e).__name__ for e in after) == ["ClusterQueueObserved", "WorkloadObserved"], after
    assert all(w.workload.owner.name != "plain" for w in await events_of(bus, types.WorkloadObserved))
    assert (await kube.get_object(api, JOBS, namespace="default", name="plain"))["spec"].get("suspend") is not True


async def test_deleting_objects_gives_object_deleted(api, bus: MemoryBus) -> None:
    """Deleting a ClusterQueue or a queued Job while watched gives one ObjectDeleted each (the Job's as its Workload)."""
    watcher = Watcher(bus=bus, api=api)
    async with running(*watch_all(watcher)):
        await kube.apply_manifest(api, cluster_queue("doomed"))
        stored = await kube.apply_manifest(api, job("short-lived"))
        await wait_for(bus, types.ClusterQueueObserved)
        [observed] = await wait_for(bus, types.WorkloadObserved)

        await kube.delete_object(api, CLUSTER_QUEUES, name="doomed")
        await kube.delete_object(api, JOBS, namespace="default", name="short-lived")
        await wait_for(bus, types.ObjectDeleted, kind="ClusterQueue", name="doomed")
        await wait_for(bus, types.ObjectDeleted, kind="Workload", name=observed.workload.metadata.name)

    deleted = await events_of(bus, types.ObjectDeleted)
    assert len(deleted) == 2
    [wl_deleted] = [d for d in deleted if d.kind == "Workload"]
    assert (wl_deleted.namespace, wl_deleted.uid) == ("default", stored["metadata"]["uid"])
    state = await folded(bus)
    assert "doomed" not in state.cluster_queues and state.workloads == {}


async def test_completed_job_gives_workload_finished(api, bus: MemoryBus) -> None:
    """A Job whose Complete condition turns True (a status subresource write) gives WorkloadFinished."""
    watcher = Watcher(bus=bus, api=api)
    async with running(*watch_all(watcher)):
        stored = await kube.apply_manifest(api, job("runs-once"))
        [observed] = await wait_for(bus, types.WorkloadObserved)
        await kube.patch_object(
            api,
            JOBS,
            namespace="default",
            name="runs-once",
            subresource="status",
            patch={
                "status": {
                    "succeeded": 1,
                    "conditions": [
                        {
                            "type": "Complete",
                            "status": "True",
                            "lastTransitionTime": "2026-01-01T00:00:05Z",
                            "message": "Reached expected number of succeeded pods",
                        }
                    ],
                }
            },
        )
        [finished] = await wait_for(bus, types.WorkloadFinished)

    assert finished.workload == types.WorkloadRef(
        namespace="default", name=observed.workload.metadata.name, uid=stored["metadata"]["uid"]
    )
    assert finished.succeeded and finished.reason == "Succeeded"
    assert finished.message == "Reached expected number of succeeded pods"
    assert finished.at_ms == 1_767_225_605_000
    state = await folded(bus)
    assert state.workloads[observed.workload.key].finished == finished


# -- 2. deletions across gaps ------------------------------------------------------------------


async def test_restarted_watcher_sees_deletions_made_while_it_was_down(api, bus: MemoryBus) -> None:
    """A ClusterQueue deleted while no watcher ran gets ObjectDeleted from the next watcher's relist, every time."""
    first = Watcher(bus=bus, api=api)
    async with running(*watch_all(first)):
        await kube.apply_manifest(api, cluster_queue("stays"))
        await kube.apply_manifest(api, cluster_queue("vanishes"))
        await wait_for(bus, types.ClusterQueueObserved, count=2)

    await kube.delete_object(api, CLUSTER_QUEUES, name="vanishes")
    second = Watcher(bus=bus, api=api)
    await second.learn_from_log()
    assert second.publisher.known["ClusterQueue"] == {("", "stays"), ("", "vanishes")}
    async with running(*watch_all(second)):
        await wait_for(bus, types.ObjectDeleted, kind="ClusterQueue", name="vanishes")
        # Re-created, observed, then deleted during a second gap: it must be deleted on the log again.
        await kube.apply_manifest(api, cluster_queue("vanishes"))
        await wait_for(bus, types.ClusterQueueObserved, count=3)

    await kube.delete_object(api, CLUSTER_QUEUES, name="vanishes")
    third = Watcher(bus=bus, api=api)
    await third.learn_from_log()
    async with running(*watch_all(third)):
        await wait_for(bus, types.ObjectDeleted, kind="ClusterQueue", name="vanishes", count=2)

    assert [d.name for d in await events_of(bus, types.ObjectDeleted)] == ["vanishes", "vanishes"]
    assert set((await folded(bus)).cluster_queues) == {"stays"}


async def test_watch_expired_410_relists_and_finds_deletions(emu: ClusterEmulator, api, bus: MemoryBus) -> None:
    """After reset_history() (410 Gone for every open watch) the watcher relists and the log still ends up right."""
    watcher = CountingWatcher(bus=bus, api=api)
    async with running(*watch_all(watcher)) as tasks:
        await kube.apply_manifest(api, cluster_queue("keep"))
        await kube.apply_manifest(api, cluster_queue("drop"))
        await wait_for(bus, types.ClusterQueueObserved, count=2)
        assert watcher.resyncs["ClusterQueue"] == 1

        emu.reset_history()
        await kube.delete_object(api, CLUSTER_QUEUES, name="drop")
        await wait_until(lambda: watcher.resyncs["ClusterQueue"] >= 2, what="a relist after 410")
        await wait_for(bus, types.ObjectDeleted, kind="ClusterQueue", name="drop")
        await kube.apply_manifest(api, cluster_queue("after"))
        await wait_for(bus, types.ClusterQueueObserved, cluster_queue__metadata__name="after")
        assert not any(t.done() for t in tasks)

    assert len(await events_of(bus, types.ObjectDeleted)) == 1
    assert len(await events_of(bus, types.ClusterQueueObserved)) == 3  # the relist re-publishes nothing unchanged
    assert set((await folded(bus)).cluster_queues) == {"keep", "after"}


# -- 3. bad input in the cluster ---------------------------------------------------------------


@pytest.mark.parametrize("bad_quota", [-1, "nine"])
async def test_invalid_cluster_queue_is_rejected_and_the_valid_version_stays(
    emu: ClusterEmulator, api, bus: MemoryBus, bad_quota
) -> None:
    """A ClusterQueue edited to a negative or unparseable nominalQuota gives ObjectRejected; the last valid one stays."""
    emu.validate = False  # a cluster without kueue-es's CRDs stores it (with them, test_validation: 422)
    watcher = Watcher(bus=bus, api=api)
    async with running(*watch_all(watcher)) as tasks:
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=9))
        await wait_for(bus, types.ClusterQueueObserved)
        await kube.apply_manifest(api, cluster_queue("cluster-queue", cpu=bad_quota))
        [rejected] = await wait_for(bus, types.ObjectRejected)

        await kube.apply_manifest(api, cluster_queue("later-queue", cpu=2))
        await wait_for(bus, types.ClusterQueueObserved, cluster_queue__metadata__name="later-queue")
        assert not any(t.done() for t in tasks)

    assert (rejected.kind, rejected.namespace, rejected.name, rejected.field) == (
        "ClusterQueue",
        "",
        "cluster-queue",
        CQ_QUOTA_FIELD,
    )
    assert str(bad_quota) in rejected.problem
    state = await folded(bus)
    kept = state.cluster_queues["cluster-queue"].spec.resource_groups[0].flavors[0].resources[0]
    assert (kept.name, kept.nominal_quota) == ("cpu", 9000)
    assert state.rejections[("ClusterQueue", "", "cluster-queue")] == rejected
    assert set(state.cluster_queues) == {"cluster-queue", "later-queue"}


async def test_job_with_a_bad_cpu_request_is_rejected_and_the_watcher_goes_on(
    emu: ClusterEmulator, api, bus: MemoryBus
) -> None:
    """A queued Job requesting cpu "lots" gives ObjectRejected (kind Job); a later good Job still gives its Workload."""
    emu.validate = False  # a real API server refuses it (422); this plays one that let it through
    watcher = Watcher(bus=bus, api=api)
    async with running(*watch_all(watcher)) as tasks:
        await kube.apply_manifest(api, job("greedy", cpu="lots"))
        [rejected] = await wait_for(bus, types.ObjectRejected)
        await kube.apply_manifest(api, job("modest", cpu="250m"))
        [observed] = await wait_for(bus, types.WorkloadObserved)
        assert not any(t.done() for t in tasks)

    assert (rejected.kind, rejected.namespace, rejected.name) == ("Job", "default", "greedy")
    assert rejected.field == "spec.template.spec.containers[0].resources.cpu"
    assert "lots" in rejected.problem
    assert observed.workload.owner.name == "modest"
    assert observed.workload.spec.pod_sets[0].requests["cpu"] == 250
    state = await folded(bus)
    assert [w.workload.owner.name for w in state.workloads.values()] == ["modest"]


# -- 8. kueue-es apply with bad input ----------------------------------------------------------


async def kueue_es(*args: str) -> tuple[int, str, str]:
    """Run the CLI as a subprocess (without blocking the emulator's event loop): exit code, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kueue_es.cli",
        *args,
        cwd=Path(__file__).resolve().parents[2],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return process.returncode, out.decode(), err.decode()


async def test_cli_apply_reports_bad_files_and_applies_good_ones(emu: ClusterEmulator, api, tmp_path: Path) -> None:
    """`kueue-es apply`: bad YAML, a missing file and an undecodable file exit 1 naming the file, as kubectl apply
    exits (the README's exit codes); an unknown kind fails naming the kind; a valid file exits 0 and says what it
    applied."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: [unclosed\n")
    code, out, err = await kueue_es("apply", "-f", str(broken), "--kube-server", emu.url)
    assert code == 1 and str(broken) in err and out == "", (code, out, err)

    missing = tmp_path / "missing.yaml"
    code, out, err = await kueue_es("apply", "-f", str(missing), "--kube-server", emu.url)
    assert code == 1 and str(missing) in err, (code, out, err)

    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00kind: \x81\x82")
    code, out, err = await kueue_es("apply", "-f", str(binary), "--kube-server", emu.url)
    assert code == 1 and str(binary) in err and "Traceback" not in err, (code, out, err)

    widget = tmp_path / "widget.yaml"
    widget.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n")
    code, out, err = await kueue_es("apply", "-f", str(widget), "--kube-server", emu.url)
    assert code != 0 and "Widget" in err and "Traceback" not in err, (code, out, err)

    good = tmp_path / "setup.yaml"
    good.write_text(
        "\n---\n".join(
            [
                "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor",
                "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: cluster-queue\n"
                "spec:\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
                "    - name: default-flavor\n      resources:\n      - name: cpu\n        nominalQuota: 9",
                "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  namespace: default\n  name: user-queue\n"
                "spec:\n  clusterQueue: cluster-queue",
            ]
        )
    )
    code, out, err = await kueue_es("apply", "-f", str(good), "--kube-server", emu.url)
    assert code == 0, (code, out, err)
    assert out.splitlines() == [
        "resourceflavor.kueue.x-k8s.io/default-flavor created",
        "clusterqueue.kueue.x-k8s.io/cluster-queue created",
        "localqueue.kueue.x-k8s.io/user-queue created",
        "3 created, 0 configured, 0 unchanged",
    ]
    assert (await kube.get_object(api, CLUSTER_QUEUES, name="cluster-queue"))["spec"]["resourceGroups"][0]["flavors"][
        0
    ]["resources"][0]["nominalQuota"] == 9
    invalid = tmp_path / "invalid.yaml"  # Kueue's validation refuses it; the valid Job beside it is applied
    invalid.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: broken\nspec:\n"
        "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: default-flavor\n"
        "      resources:\n      - name: cpu\n        nominalQuota: lots\n---\n"
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: fine\n  namespace: default\nspec:\n  template:\n"
        "    spec:\n      containers: [{name: c, image: x}]\n      restartPolicy: Never\n"
    )
    code, out, err = await kueue_es("apply", "-f", str(invalid), "--kube-server", emu.url)
    assert code == 1 and out.splitlines() == [
        "job.batch/fine created",
        "1 created, 0 configured, 0 unchanged, 1 failed",
    ]
    assert f"{invalid} (document 1): ClusterQueue broken" in err and "nominalQuota" in err, err
    assert 'Invalid value: "lots"' in err and "in body should match" in err, err  # the quantity pattern
    with pytest.raises(kube_errors.NotFoundError):
        await kube.get_object(api, CLUSTER_QUEUES, name="broken")
    # nothing from the files that failed reached the cluster
    listed, _ = await kube.list_objects(api, kube.ref_for("v1", "Namespace"))
    assert "w" not in {o["metadata"]["name"] for o in listed}
