"""The messages of a stopped run's log by type and subject family (docs/benchmarks.md, issue 18).

    .venv/bin/python scripts/log_kinds.py RUN_DIR/nats [WORKLOADS]

Reads every message of ``KQ_LOG`` from a stopped system's nats store (its ``Kq-Type`` header, no
decoding) and prints the count per type, per subject family (facts ``kq.in``, decision records
``head``, per-workload decisions ``wl``, dispatch results ``kq.disp``), and, given ``WORKLOADS`` (the
run's workload count), each per workload.
"""

from __future__ import annotations

import asyncio
import collections
import sys
from pathlib import Path

from kueue_es.events.bus import nats as nats_bus
from kueue_es.events.bus.server import open_stopped_store
from kueue_es.replay import stream_log


def _family(subject: str) -> str:
    if subject.startswith("kq.in."):
        return "facts (kq.in)"
    if subject.startswith("kq.disp."):
        return "dispatch results (kq.disp)"
    if subject.startswith("kq.dec.") and ".head." in subject:
        return "decision records (kq.dec.*.head)"
    if subject.startswith("kq.dec."):
        return "workload decisions (kq.dec.*.wl)"
    return "other"


async def count(store: Path) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """Messages per ``Kq-Type`` and per subject family in the log of ``store``."""
    kinds: collections.Counter[str] = collections.Counter()
    families: collections.Counter[str] = collections.Counter()
    async with open_stopped_store(store) as server:
        bus = await nats_bus.connect(server.url, create_stream=False)
        try:
            last = await bus.last_seq()
            async for message in stream_log(bus, last=last):
                kinds[message.headers.get("Kq-Type", "?")] += 1
                families[_family(message.subject)] += 1
        finally:
            await bus.close()
    return kinds, families


def main(store: Path, workloads: int = 0) -> None:
    kinds, families = asyncio.run(count(store))
    total = sum(kinds.values())
    for name, counter in (("type", kinds), ("subjects", families)):
        print(f"{name:34} {'messages':>10} {'per workload':>13}")
        for key, n in counter.most_common():
            print(f"{key:34} {n:>10,} {n / workloads if workloads else 0:>13.2f}")
        print()
    print(f"{'total':34} {total:>10,} {total / workloads if workloads else 0:>13.2f}")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: log_kinds.py RUN_DIR/nats [WORKLOADS]")
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) == 3 else 0)
