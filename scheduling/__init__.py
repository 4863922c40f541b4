"""Kueue's rules as one pure library no service owns (``kueue_es.scheduling``).

Why this package exists: the admitter, the preemptor and the TAS placer decide
with the same rules (flavor assignment, queue order, preemption, fair sharing,
topology-aware placement, lifecycle); here they are plain functions over a
snapshot: no I/O, no clock, no randomness. Services call them; they never call
services.

The modules, by Kueue's terms:

- the admission cycle: :mod:`.cycle` (phases, processEntry), :mod:`.search` (getAssignments
  with the preemption oracle), :mod:`.entries` (entries and their order), :mod:`.queues`
  (heads), :mod:`.flavors` (flavor assignment and fungibility), :mod:`.lifecycle` (admission
  checks, PodsReady, backoff);
- preemption: :mod:`.preemption` (classical targets), :mod:`.fairsharing` (DRS, tournament,
  fair targets), :mod:`.nominations` (a nomination checked against the log);
- Topology-Aware Scheduling: :mod:`.tas` (placement in phases, TAS in the cycle, node failures).
"""
