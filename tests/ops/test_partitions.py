"""Partitions as processes (issue 18): admitters on one nats-server share the partitions through slot leases.

Two ``kueue-es service admitter --partition-slots 2`` processes (each as NATS user ``admitter`` on a
server with the users of events/bus/permissions.py) take one slot each (``admitter.s0``,
``admitter.s1`` in KQ_LEASES) and each decides and commits the partitions of its slot; after a
SIGKILL of one, the other takes its slot over once the key stops moving and decides those
partitions too. A cohort merge moves a ClusterQueue from one process's partition to the other's:
the old partition commits a fence record first, and only then does the new one decide the moved
ClusterQueue's workloads. Every test folds the whole log at the end and checks that no workload
held quota twice and that no cohort tree (or lone ClusterQueue) used more than its nominal quota.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from kueue_es.events import codec, subjects, types
from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus import permissions
from kueue_es.events.bus.server import LocalAuth, NatsServer, free_ports
from kueue_es.projections.cluster import ClusterState
from kueue_es.services import runtime
from kueue_es.services.watcher.convert import kueue_fact
from tests.builders import cluster_queue, flavor, local_queue, workload

SLOTS = 2
TAKEOVER_BOUND_S = 8.0  # lease duration 1.5 s, then the share moves (a retry period or two) on a loaded machine


def slot(partition: str) -> int:
    return zlib.crc32(partition.encode()) % SLOTS


def names_in_slots(prefix: str, partition_prefix: str, per_slot: int) -> list[str]:
    """Object names whose partitions (``<partition_prefix><name>``) fill each of the SLOTS slots ``per_slot`` times."""
    found: dict[int, list[str]] = {k: [] for k in range(SLOTS)}
    i = 0
    while any(len(v) < per_slot for v in found.values()):
        name = f"{prefix}{i}"
        bucket = found[slot(partition_prefix + name)]
        if len(bucket) < per_slot:
            bucket.append(name)
        i += 1
    return [n for k in range(SLOTS) for n in found[k]]


def cohort_queue(name: str, cohort: str, cpu: int) -> dict:
    doc = cluster_queue(name, flavors={"f": {"cpu": cpu}})
    doc["spec"]["cohortName"] = cohort
    return doc


async def readyz(session: aiohttp.ClientSession, port: int) -> dict:
    try:
        async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
            return json.loads(await response.text())
    except aiohttp.ClientError:
        return {}


async def decided(bus: nats_bus.NatsBus, name: str, partition: str) -> str:
    """The type of the last decision about workload ``default/name`` in ``partition``, once there is one: the
    last that one of the partition's DecisionRecords carries (event schema 17: decisions ride in their record)."""
    key, heads = f"default/{name}", f"kq.dec.{partition}.head.*"
    while True:
        last = await bus.last_subject_seq(heads)
        found = ""
        if last:
            async for message in bus.read(subjects=[heads], start_seq=1):
                record = codec.decode(message.data)
                if isinstance(record, types.DecisionRecord):
                    found = next((codec.type_name(d) for d in reversed(record.carried) if d.workload.key == key), found)
                if message.seq >= last:
                    break
        if found:
            return found
        await asyncio.sleep(0.05)


@dataclass
class Admitters:
    bus: nats_bus.NatsBus
    processes: list[asyncio.subprocess.Process]
    ports: list[int]
    logs: list[Path]

    async def publish(self, *docs: dict) -> None:
        for doc in docs:
            await self.bus.publish(subjects.fact_message(kueue_fact(doc)))

    async def slots(self, session: aiohttp.ClientSession) -> list[list[int]]:
        return [(await readyz(session, port)).get("slots", []) for port in self.ports]

    def committed(self, index: int) -> list[dict]:
        """The ``committed`` log lines of admitter ``index``."""
        lines = self.logs[index].read_text(errors="replace").splitlines()
        return [json.loads(line) for line in lines if '"committed"' in line]


@asynccontextmanager
async def admitters(tmp_path: Path, *docs: dict, count: int = 2) -> AsyncIterator[Admitters]:
    """A nats-server with users, ``docs`` published, ``count`` admitter processes sharing SLOTS slots."""
    auth = LocalAuth.create(tmp_path / "creds")
    async with NatsServer(store_dir=tmp_path / "nats", auth=auth) as server:
        admin = auth.credentials(permissions.ADMIN)
        await nats_bus.ensure_log_stream(server.url, credentials=admin)  # and the lease bucket
        bus = await nats_bus.connect(server.url, credentials=admin)
        handle = Admitters(bus=bus, processes=[], ports=free_ports(count), logs=[])
        await handle.publish(*docs)
        credentials = auth.credentials("admitter")
        env = {
            **os.environ,
            "KUEUE_ES_NATS_USER": "admitter",
            "KUEUE_ES_NATS_PASSWORD_FILE": str(credentials.password_file),
        }
        for port in handle.ports:
            args = ["service", "admitter", "--nats", server.url, "--health-port", str(port)]
            args += ["--partition-slots", str(SLOTS), "--no-snapshots"]
            path = tmp_path / f"admitter-{port}.log"
            handle.logs.append(path)
            with path.open("wb") as sink:
                handle.processes.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "kueue_es.cli", *args, stdout=sink, stderr=sink, env=env
                    )
                )
        try:
            yield handle
        finally:
            for process in handle.processes:
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
            for process in handle.processes:
                await asyncio.wait_for(process.wait(), timeout=20)
            await bus.close()


async def split(handle: Admitters, session: aiohttp.ClientSession) -> list[list[int]]:
    """Wait until each admitter holds exactly one slot of the two; returns who holds which."""
    held: list[list[int]] = []
    async with asyncio.timeout(60):
        while sorted(map(tuple, held)) != [(0,), (1,)]:
            await asyncio.sleep(0.2)
            held = await handle.slots(session)
    return held


@dataclass
class Folded:
    state: ClusterState
    reserved_twice: list[str]
    overused: list[str]
    records: list[tuple[int, types.DecisionRecord]]
    decided_in: dict[str, list[tuple[int, str, str]]]  # workload key -> (seq, partition, decision type)


async def fold_all(bus: nats_bus.NatsBus, quota: dict[str, tuple[str, int]]) -> Folded:
    """Fold the whole log; ``quota`` maps each ClusterQueue to (its tree's name, nominal CPU millicores).
    Checks, after every folded event, that no workload got quota while it held quota and that no tree
    uses more than the nominal quota of its members."""
    state = ClusterState()
    twice: list[str] = []
    over: list[str] = []
    records: list[tuple[int, types.DecisionRecord]] = []
    decided_in: dict[str, list[tuple[int, str, str]]] = {}

    partition = [""]  # the partition of the record whose decisions are being folded

    def check(seq: int, event: types.Event, before: ClusterState) -> None:
        if isinstance(event, types.DecisionRecord):
            records.append((seq, event))
            partition[0] = event.partition
        elif isinstance(event, types.DECISION_TYPES) and (ref := getattr(event, "workload", None)) is not None:
            # a decision its record carries (schema 17), or an output after it: at its sequence, in its partition
            decided_in.setdefault(ref.key, []).append((seq, partition[0], codec.type_name(event)))
        if isinstance(event, types.QuotaReserved):
            held = before.workloads.get(event.workload.key)
            if held is not None and held.reservation is not None:
                twice.append(f"{event.workload.key} at #{seq}")

    last = await bus.last_seq()
    async for message in bus.read(subjects=[">"], start_seq=1):
        runtime.fold_decoded(state, message, codec.decode(message.data), before_apply=check)
        trees: dict[str, int] = {}
        nominal: dict[str, int] = {}
        for cq, (tree, cpu) in quota.items():
            nominal[tree] = nominal.get(tree, 0) + cpu
            used = sum(res.get("cpu", 0) for res in state.usage.get(cq, {}).values())
            trees[tree] = trees.get(tree, 0) + used
        over += [f"{t} uses {trees[t]}m of {nominal[t]}m at #{message.seq}" for t in trees if trees[t] > nominal[t]]
        if message.seq >= last:
            break
    return Folded(state=state, reserved_twice=twice, overused=over, records=records, decided_in=decided_in)


@pytest.mark.slow
async def test_two_admitters_split_the_partitions_and_one_takes_over_a_kill(tmp_path: Path) -> None:
    queues = names_in_slots("cq", "q-", per_slot=2)  # two lone ClusterQueues (partitions q-<name>) per slot
    docs: list[dict] = [flavor("f")]
    for cq in queues:
        docs += [cluster_queue(cq, flavors={"f": {"cpu": 2}}), local_queue(f"lq-{cq}", cq)]
    async with admitters(tmp_path, *docs) as handle, aiohttp.ClientSession() as session:
        held = await split(handle, session)
        # three 1-CPU workloads per 2-CPU ClusterQueue: two admitted, one left pending (quota is the limit)
        for cq in queues:
            await handle.publish(*(workload(f"{cq}-w{i}", queue=f"lq-{cq}", created=i, cpu="1") for i in range(3)))
        async with asyncio.timeout(60):
            for cq in queues:
                kinds = [await decided(handle.bus, f"{cq}-w{i}", f"q-{cq}") for i in range(3)]
                assert sorted(kinds) == ["WorkloadAdmitted", "WorkloadAdmitted", "WorkloadInadmissible"], cq

        # each committed only the partitions of its own slot, and both committed
        for index in range(2):
            partitions = {line["partition"] for line in handle.committed(index)}
            assert partitions, f"admitter {index} committed nothing"
            assert {slot(p) for p in partitions} == set(held[index]), (index, partitions, held)

        victim = 0
        survivor = 1 - victim
        handle.processes[victim].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        for cq in queues:  # one more, in a ClusterQueue of each slot: the victim's waits for the takeover
            await handle.publish(workload(f"{cq}-late", queue=f"lq-{cq}", created=9, cpu="1"))
        victims_queue = next(cq for cq in queues if slot(f"q-{cq}") in held[victim])
        async with asyncio.timeout(60):
            kind = await decided(handle.bus, f"{victims_queue}-late", f"q-{victims_queue}")
        took = time.monotonic() - killed
        assert kind == "WorkloadInadmissible"  # its ClusterQueue is full: decided (pending), not admitted
        async with asyncio.timeout(30):
            while sorted(map(tuple, [(await readyz(session, handle.ports[survivor])).get("slots", [])])) != [(0, 1)]:
                await asyncio.sleep(0.2)
        print(f"\nthe surviving admitter decided the killed one's partition {took:.2f} s after SIGKILL")
        assert took < TAKEOVER_BOUND_S
        log = handle.logs[survivor].read_text()
        assert '"lease_acquired"' in log and '"why": "expired"' in log
        assert any(line["partition"] == f"q-{victims_queue}" for line in handle.committed(survivor))

        quota = {cq: (cq, 2000) for cq in queues}
        folded = await fold_all(handle.bus, quota)
    assert folded.reserved_twice == []
    assert folded.overused == []
    admitted = [k for k, wl in folded.state.workloads.items() if wl.reservation is not None]
    assert len(admitted) == 2 * len(queues)  # two per ClusterQueue, never more
    assert {r.partition for _, r in folded.records} == {f"q-{cq}" for cq in queues}  # never p0


@pytest.mark.slow
async def test_a_cohort_merge_hands_the_moved_queue_over_through_a_fence(tmp_path: Path) -> None:
    # two cohort trees whose partitions are in different slots, so two processes decide them
    left, right = names_in_slots("tree", "c-", per_slot=1)
    docs = [
        flavor("f"),
        cohort_queue("a", left, cpu=2),
        local_queue("lq-a", "a"),
        cohort_queue("b", right, cpu=2),
        local_queue("lq-b", "b"),
    ]
    async with admitters(tmp_path, *docs) as handle, aiohttp.ClientSession() as session:
        await split(handle, session)
        await handle.publish(*(workload(f"b-w{i}", queue="lq-b", created=i, cpu="1") for i in range(2)))
        await handle.publish(workload("a-w0", queue="lq-a", created=0, cpu="1"))
        async with asyncio.timeout(60):
            assert await decided(handle.bus, "b-w1", f"c-{right}") == "WorkloadAdmitted"
            assert await decided(handle.bus, "a-w0", f"c-{left}") == "WorkloadAdmitted"

        # merge: b joins a's tree; b's partition c-<right> must fence before c-<left> decides b
        await handle.publish(cohort_queue("b", left, cpu=2))
        merged_at = await handle.bus.last_subject_seq("kq.in.cq._.b")  # the merge's own sequence
        # b's full (2 of 2 CPU held), a has 1 free: b's next workload borrows it, decided in the merged tree
        await handle.publish(workload("b-w2", queue="lq-b", created=5, cpu="1"))
        async with asyncio.timeout(60):
            assert await decided(handle.bus, "b-w2", f"c-{left}") == "WorkloadAdmitted"
        quota = {"a": (left, 2000), "b": (left, 2000)}
        folded = await fold_all(handle.bus, quota)
    assert folded.reserved_twice == []
    assert folded.overused == []
    fences = [seq for seq, r in folded.records if r.partition == f"c-{right}" and r.basis_seq >= merged_at]
    assert fences, "the partition b left committed no record after the merge"
    after = [(seq, p) for seq, p, _ in folded.decided_in["default/b-w2"]]
    assert after and all(p == f"c-{left}" for _, p in after)
    assert min(seq for seq, _ in after) > min(fences)  # the new partition decided b only after the fence
    assert sum(1 for wl in folded.state.workloads.values() if wl.reservation is not None) == 4
