"""CPU per message of the NATS bus's read paths, on a nats-server of its own (docs/benchmarks.md, issue 18).

Usage: ``.venv/bin/python scripts/bus_read_bench.py [N]`` (default 20,000). Publishes N decision-like
messages with four headers, then, twice: reads them through ``NatsBus.read`` with one filter and with
two (the whole log, filtered in the reader), and fetches them in batches of 100 through a durable,
acking each; prints the CPU microseconds of this process per message for each.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid

from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus import server


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


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000))
