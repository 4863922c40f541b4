"""Builders for scenario documents in tests: a small cluster, workloads, a file writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.builders import cluster_queue, flavor, local_queue, workload


def scenario_doc(
    *, quota: dict[str, dict[str, Any]] | None = None, pending: list[dict] | None = None, **extra: Any
) -> dict[str, Any]:
    """A scenario: flavors and ClusterQueue ``cq`` with ``quota`` (flavor -> {resource: nominal}),
    LocalQueue ``default/lq``, the ``pending`` workloads and any other top-level keys."""
    quota = quota or {"default": {"cpu": 4}}
    doc: dict[str, Any] = {
        "name": "small",
        "source": "tests",
        "objects": [*(flavor(f) for f in quota), cluster_queue("cq", flavors=quota), local_queue("lq", "cq")],
        "pending": pending if pending is not None else [],
    }
    doc.update(extra)
    return doc


def cpu_workload(name: str, *, cpus: int, created: int = 1, **kwargs: Any) -> dict[str, Any]:
    """A Workload of ``cpus`` pods of 1 CPU each, created ``created`` s after 2026-01-01."""
    return workload(name, count=cpus, created=created, cpu="1", **kwargs)


def write(path: Path, doc: dict[str, Any] | str) -> Path:
    """Write ``doc`` (a dict, dumped as YAML, or raw text) to ``path`` and return it."""
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path
