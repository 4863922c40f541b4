"""``kueue-es bench --config GENERATOR.yaml``: Kueue's scheduler scalability test on kueue-es.

- :mod:`.generator` reads Kueue's generator schema and makes the same objects and
  creation streams (test/performance/scheduler/runner/generator in Kueue);
- :mod:`.ideal` is the greedy ideal bound for the same configuration;
- :mod:`.metrics` computes Kueue's summary figures from what the log recorded;
- :mod:`.executor` runs admitted workloads for their ``runtimeMs``;
- :mod:`.driver` starts nats-server and the services, drives a run and reports it.
- :mod:`.chaos` (``--chaos SEED``) kills and restarts services and nats-server during a run;
- :mod:`.invariants` checks the stopped run's log: every workload finished, no double
  reservation, quota within its limits at every batch end, no orphan decision.

shared/PERFORMANCE.md and shared/research/kueue-perf.md describe the test.
"""
