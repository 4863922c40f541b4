"""CPU per message of the NATS bus's read paths, on a nats-server of its own (docs/benchmarks.md, issue 18).

Usage: ``.venv/bin/python scripts/bus_read_bench.py [N]`` (default 20,000). Publishes N decision-like
messages with four headers, then, twice: reads them through ``NatsBus.read`` with one filter and with
two (the whole log, filtered in the reader), and fetches them in batches of 100 through a durable,
acking each; prints the CPU microseconds of this process per message for each.

Then, on a second server, N/8 workloads' log shaped as a bench's: per workload a fact, a head, two
decisions, a dispatch result and a fact on its own subjects (``kq.in.wl.<ns>.<name>``,
``kq.dec.p0.wl...``, ``kq.disp.local.wl...``), then a fact and a decision each; read with the
deciders' and dispatcher's filters (``kq.in.>``, ``kq.dec.>``) as ``NatsBus.read`` does (a consumer
of ``kq.>``, filtered here) and with the two filters given to the server (``filter_subjects``),
twice each; prints this process's and nats-server's CPU seconds and the wall time of each read.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid

from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus import server


def server_cpu(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` (/proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def main(count: int) -> None:
    with server.NatsServer() as running:
        bus = await nats_bus.connect(running.url)
        payload = b'{"type":"QuotaReserved","workload":{"namespace":"ns-1","name":"wl"},"x":"' + b"y" * 300 + b'"}'
        for i in range(count):
            headers = {
                "Kq-Type": "QuotaReserved",
                "Nats-Msg-Id": f"dec:p0:{i}:QuotaReserved:ns-1/wl-{i:07d}",
                "Kq-Basis": uuid.uuid4().hex,
                "Kq-Cycle": str(i % 50 + 1),
            }
            await bus.nc.publish(f"kq.dec.p0.wl.ns-1.wl-{i:07d}", payload, headers=headers)
            if i % 1000 == 999:
                await bus.nc.flush()
        await bus.nc.flush()
        while await bus.last_seq() < count:
            await asyncio.sleep(0.1)
        for round_ in range(2):
            for filters in (("kq.dec.>",), ("kq.dec.>", "kq.disp.>")):
                started = time.process_time()
                async for message in bus.read(subjects=filters, start_seq=1):
                    if message.seq >= count:
                        break
                used = (time.process_time() - started) * 1e6 / count
                print(f"read, {len(filters)} filter(s): {used:.1f} us CPU per message")
            durable = await bus.durable(name=f"bench-{round_}", subjects=("kq.dec.>",))
            started, taken = time.process_time(), 0
            while taken < count:
                batch = await durable.fetch(batch=100, timeout=1.0)
                for delivery in batch:
                    await durable.ack(delivery)
                taken += len(batch)
            print(f"durable fetch + ack: {(time.process_time() - started) * 1e6 / count:.1f} us CPU per message")
        await bus.close()
    await shaped(max(1, count // 8))


async def shaped(workloads: int) -> None:
    """The bench-shaped log read with two filters, filtered here or by the server (see the module)."""
    with server.NatsServer() as running:
        bus = await nats_bus.connect(running.url)
        payload = b'{"type":"X","workload":{"namespace":"ns-1","name":"wl"},"x":"' + b"y" * 300 + b'"}'
        published = 0

        async def publish(subject: str) -> None:
            nonlocal published
            published += 1
            await bus.nc.publish(subject, payload, headers={"Kq-Type": "X", "Nats-Msg-Id": uuid.uuid4().hex})
            if published % 1000 == 0:
                await bus.nc.flush()

        for i in range(workloads):
            name = f"w{i:07d}"
            for subject in ("in", "head", "dec", "dec", "disp", "in"):
                await publish(_subject(subject, name))
        for i in range(workloads):
            for subject in ("in", "dec"):
                await publish(_subject(subject, f"w{i:07d}"))
        await bus.nc.flush()
        while await bus.last_seq() < published:
            await asyncio.sleep(0.1)
        wanted = workloads * 7
        print(f"bench-shaped log: {published} messages, {wanted} on kq.in.> or kq.dec.>")
        here = nats_bus._subject_test
        for _ in range(2):
            for where in ("reader", "server"):
                if where == "server":  # what read did before it filtered several filters itself
                    nats_bus._subject_test = lambda filters: None
                cpu, srv, wall, got = time.process_time(), server_cpu(running.pid), time.monotonic(), 0
                try:
                    async for message in bus.read(subjects=("kq.in.>", "kq.dec.>"), start_seq=1):
                        got += 1
                        if message.pending == 0:
                            break
                finally:
                    nats_bus._subject_test = here
                print(
                    f"two filters, filtered by the {where}: {got} messages, wall {time.monotonic() - wall:.2f} s,"
                    f" this process {time.process_time() - cpu:.2f} CPU s,"
                    f" nats-server {server_cpu(running.pid) - srv:.2f} CPU s"
                )
        await bus.close()


def _subject(kind: str, name: str) -> str:
    return {
        "in": f"kq.in.wl.ns-1.{name}",
        "head": "kq.dec.p0.head.admitter",
        "dec": f"kq.dec.p0.wl.ns-1.{name}",
        "disp": f"kq.disp.local.wl.ns-1.{name}",
    }[kind]


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000))
