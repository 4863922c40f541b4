"""The visibility service: Kueue's ``visibility.kueue.x-k8s.io`` API (pending workloads and their positions),
answered from the fold of the log. :mod:`.api` is the pure part (paths, query, JSON), :mod:`.server` the
runner (the fold, HTTPS, health)."""
