"""``kueue-es bench --config GENERATOR.yaml``: Kueue's scheduler scalability test on kueue-es.

- :mod:`.generator` reads Kueue's generator schema and makes the same objects and
  creation streams (test/performance/scheduler/runner/generator in Kueue);
- :mod:`.ideal` is the greedy ideal bound for the same configuration;
- :mod:`.metrics` computes Kueue's summary figures from what the log recorded;
- :mod:`.executor` runs admitted workloads for their ``runtimeMs``;
- :mod:`.driver` starts nats-server and the services, drives a run and reports it.

shared/PERFORMANCE.md and shared/research/kueue-perf.md describe the test.
"""
