"""Topology-Aware Scheduling rules (SEMANTICS-ADVANCED A.*): placement on a topology tree,
TAS inside the admission cycle, and node-failure replacement. Pure, like the rest of
:mod:`kueue_es.scheduling`; Kueue: pkg/cache/scheduler/tas_*.go, pkg/scheduler/flavorassigner.
"""
