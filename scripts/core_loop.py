"""The loop of ``kueue-es bench core`` in CPU seconds, and a digest of every decision it makes.

Usage: ``python scripts/core_loop.py [COHORTS] [time|hash|setup]`` (default 10 cohorts of 100
ClusterQueues, ``time``). Runs ``kueue_es.bench._run_to_completion`` as the bench does, with its
clock replaced by ``time.process_time``, and prints decide and fold CPU seconds, decisions and
cycles. ``hash`` also prints a SHA-256 over every output of every cycle (its JSON encoding and
type name, then a cycle separator): two versions of the core that decide byte for byte the same
print the same digest (docs/benchmarks.md, issue 18). ``setup`` stops after folding the facts, to
subtract that part from an instruction count (``valgrind --tool=cachegrind --cache-sim=no``).
One cohort gives the same 379 cycles as ten, a tenth of the decisions.
"""

from __future__ import annotations

import hashlib
import sys
import time
import types
from typing import Any

import msgspec

from kueue_es import bench, deciders
from kueue_es.projections.cluster import ClusterState, apply


def main(argv: list[str]) -> None:
    """Run the loop as ``argv`` asks (see the module docstring) and print what it measured."""
    cohorts = int(argv[0]) if argv else 10
    mode = argv[1] if len(argv) > 1 else "time"
    if mode not in ("time", "hash", "setup"):
        raise SystemExit(f"mode {mode!r}: one of time, hash, setup")
    bench.time = types.SimpleNamespace(perf_counter=time.process_time)  # type: ignore[assignment]
    digest = hashlib.sha256()
    if mode == "hash":
        encoder = msgspec.json.Encoder()
        decide = deciders.ADMITTER.decide

        def hashed(state: ClusterState, *, now_ms: int) -> Any:
            out = decide(state, now_ms=now_ms)
            for event in out:
                digest.update(encoder.encode(event))
                digest.update(type(event).__name__.encode())
            digest.update(b"|cycle|")
            return out

        admitter = types.SimpleNamespace(decide=hashed)
        bench.deciders = types.SimpleNamespace(ADMITTER=admitter)  # type: ignore[assignment]
    state = ClusterState()
    seq = 0
    for fact in bench.large_scale_facts(cohorts=cohorts):
        seq += 1
        apply(state, fact, seq=seq)
    if mode == "setup":
        return
    decide_s, fold_s, decisions, cycles, _ = bench._run_to_completion(state, seq=seq)
    line = f"decide_cpu={decide_s:.3f} fold_cpu={fold_s:.3f} decisions={decisions} cycles={cycles}"
    print(line + (f" sha={digest.hexdigest()}" if mode == "hash" else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
