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

# Kueue's test/performance/scheduler/configs/tas/generator.yaml (shared/perf/tas), as data (comments left out).
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

      - count: 120
        creationIntervalMs: 100
        workloads:
        - className: small-preferred-rack
          runtimeMs: 200
          priority: 50
          request: "500m"
          podCount: 2
          tasConstraint: "preferred"
          tasLevel: "cloud.provider.com/topology-rack"

      - count: 110
        creationIntervalMs: 100
        workloads:
        - className: small-balanced-rack
          runtimeMs: 200
          priority: 50
          request: "500m"
          podCount: 2
          tasConstraint: "balanced"
          tasLevel: "cloud.provider.com/topology-rack"
          sliceSize: 1

      - count: 34
        creationIntervalMs: 500
        workloads:
        - className: medium-required-rack
          runtimeMs: 500
          priority: 100
          request: "1250m"
          podCount: 4
          tasConstraint: "required"
          tasLevel: "cloud.provider.com/topology-rack"

      - count: 33
        creationIntervalMs: 500
        workloads:
        - className: medium-preferred-rack
          runtimeMs: 500
          priority: 100
          request: "1250m"
          podCount: 4
          tasConstraint: "preferred"
          tasLevel: "cloud.provider.com/topology-rack"

      - count: 33
        creationIntervalMs: 500
        workloads:
        - className: medium-balanced-rack
          runtimeMs: 500
          priority: 100
          request: "1250m"
          podCount: 4
          tasConstraint: "balanced"
          tasLevel: "cloud.provider.com/topology-rack"
          sliceSize: 2

      - count: 17
        creationIntervalMs: 1200
        workloads:
        - className: large-required-rack
          runtimeMs: 1000
          priority: 200
          request: "2500m"
          podCount: 8
          tasConstraint: "required"
          tasLevel: "cloud.provider.com/topology-rack"

      - count: 17
        creationIntervalMs: 1200
        workloads:
        - className: large-preferred-rack
          runtimeMs: 1000
          priority: 200
          request: "2500m"
          podCount: 8
          tasConstraint: "preferred"
          tasLevel: "cloud.provider.com/topology-rack"

      - count: 16
        creationIntervalMs: 1200
        workloads:
        - className: large-balanced-rack
          runtimeMs: 1000
          priority: 200
          request: "2500m"
          podCount: 8
          tasConstraint: "balanced"
          tasLevel: "cloud.provider.com/topology-rack"
          sliceSize: 4
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


def tas_small() -> dict[str, object]:
    """Kueue's TAS file shrunk for an end-to-end run (same classes, labels and constraints): one cohort of
    two ClusterQueues, 1 block x 2 racks x 4 nodes, about a twentieth of each workload set (58 workloads)."""
    import yaml

    config = yaml.safe_load(TAS)
    config["topology"]["levels"][1]["count"] = 2
    config["topology"]["levels"][2]["count"] = 4
    [cohort_set] = config["cohorts"]
    cohort_set["count"] = 1
    [queue_set] = cohort_set["queuesSets"]
    queue_set["count"] = 2
    for wl_set in queue_set["workloadsSets"]:
        wl_set["count"] = max(2, wl_set["count"] // 20)
    return config
