"""A JobSet (jobset.x-k8s.io/v1alpha2) to the Workload Kueue creates for it: names and entry points.

Why this module exists: the JobSet is one of the table-driven integrations
(:mod:`kueue_es.jobframework.integrations.jobset` holds its pod sets, suspension
and status); callers that name JobSets directly (the pod integration, which leaves
a JobSet's pods to it, and tests) use the constants and functions here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueue_es.events import models, types
from kueue_es.jobframework import integrations, workloads
from kueue_es.jobframework.integrations import jobset

JOBSET_API = jobset.API_VERSION
JOBSET_GROUP = "jobset.x-k8s.io"
JOB_INDEX_LABEL = jobset.JOB_INDEX_LABEL
INTEGRATION = jobset.INTEGRATIONS[0]
reclaimable_pods = jobset.reclaimable_pods


def workload_name_for_jobset(name: str, uid: str) -> str:
    """``jobset-<name>-<5 hex>`` (jobset_controller.go GetWorkloadNameForJobSet)."""
    return INTEGRATION.workload_name(name, uid)


def jobset_facts(
    jobset_object: Mapping[str, Any], *, now_ms: int = 0, context: workloads.Context | None = None
) -> types.Fact | None:
    """The fact a JobSet stands for, or None when Kueue does not manage it
    (:func:`kueue_es.jobframework.integrations.facts`)."""
    return integrations.facts(INTEGRATION, jobset_object, now_ms=now_ms, context=context)


def jobset_to_workload(
    jobset_object: Mapping[str, Any], *, context: workloads.Context | None = None
) -> models.Workload:
    """The Workload of a JobSet (:func:`kueue_es.jobframework.integrations.to_workload`); raises ManifestError."""
    return integrations.to_workload(INTEGRATION, jobset_object, context=context)
