"""Generator configurations for the bench tests: Kueue's baseline as shipped, and small hand-checked ones."""

from __future__ import annotations

# Kueue's test/performance/scheduler/configs/baseline/generator.yaml (shared/perf/baseline), as data.
BASELINE = """
cohorts:
  - className: cohort
    count: 5
    queuesSets:
    - className: cq
      count: 6
      nominalQuota: 20
      borrowingLimit: 100
      reclaimWithinCohort: Any
      withinClusterQueue: LowerPriority
      workloadsSets:
      - count: 350
        creationIntervalMs: 100
        workloads:
        - className: small
          runtimeMs: 200
          priority: 50
          request: 1
      - count: 100
        creationIntervalMs: 500
        workloads:
        - className: medium
          runtimeMs: 500
          priority: 100
          request: 5
      - count: 50
        creationIntervalMs: 1200
        workloads:
        - className: large
          runtimeMs: 1000
          priority: 200
          request: 20
"""

# The TAS parts of Kueue's configs/tas/generator.yaml, one workload set.
TAS = """
topology:
  name: "default-topology"
  levels:
    - name: block
      count: 1
      nodeLabel: "cloud.provider.com/topology-block"
    - name: rack
      count: 10
      nodeLabel: "cloud.provider.com/topology-rack"
    - name: node
      count: 64
      nodeLabel: "kubernetes.io/hostname"
      capacity:
        cpu: "96"
        memory: "256Gi"
resourceFlavor:
  name: "tas-flavor"
  nodeLabel: "tas-node-group"
  topologyName: "default-topology"
cohorts:
  - className: cohort
    count: 5
    queuesSets:
    - className: cq
      count: 6
      nominalQuota: "20"
      borrowingLimit: "100"
      reclaimWithinCohort: Any
      withinClusterQueue: LowerPriority
      workloadsSets:
      - count: 120
        creationIntervalMs: 100
        workloads:
        - className: small-required-rack
          runtimeMs: 200
          priority: 50
          request: "500m"
          podCount: 2
          tasConstraint: "required"
          tasLevel: "cloud.provider.com/topology-rack"
"""

# One cohort of one ClusterQueue with 2 CPU and no borrowing; two streams.
#   small: 1 CPU, 1000 ms, priority 1, created at 100, 200, 300 ms;
#   big:   2 CPU,  500 ms, priority 9, created at 250 ms.
TINY = """
cohorts:
  - className: co
    count: 1
    queuesSets:
    - className: q
      count: 1
      nominalQuota: 2
      borrowingLimit: 0
      workloadsSets:
      - count: 3
        creationIntervalMs: 100
        workloads:
        - {className: small, runtimeMs: 1000, priority: 1, request: 1}
      - count: 1
        creationIntervalMs: 250
        workloads:
        - {className: big, runtimeMs: 500, priority: 9, request: 2}
"""
