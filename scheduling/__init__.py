"""Kueue's rules as one pure library no service owns (``kueue_es.scheduling``).

Why this package exists: the admitter, the preemptor and the TAS placer decide
with the same rules (flavor assignment, queue order, preemption, fair sharing,
topology-aware placement, lifecycle); here they are plain functions over a
snapshot: no I/O, no clock, no randomness. Services call them; they never call
services.
"""
