"""API Priority and Fairness's objects, stored and inert: the emulated API server queues no request.

Why this module exists: the first step of Kueue's "Monitor pending workloads on demand" page installs its
visibility API's flow control (``kubectl apply --server-side -f .../visibility-apf.yaml``: a
``flowcontrol.apiserver.k8s.io/v1`` PriorityLevelConfiguration and FlowSchema named ``visibility``, from
Kueue's config/components/visibility-apf). A cluster stores them and limits the visibility requests with
them; the emulator, which serves one user at a time, stores them so the step applies as in a cluster, and
limits nothing. Both kinds are cluster-scoped and have a ``status`` subresource, as in Kubernetes.
"""

from __future__ import annotations

from kueue_es.services.kube import resources

GROUP = "flowcontrol.apiserver.k8s.io"


def _kind(plural: str, kind: str) -> resources.ResourceRef:
    """A cluster-scoped flowcontrol.apiserver.k8s.io/v1 kind with a status subresource."""
    return resources.ResourceRef(
        group=GROUP, version="v1", plural=plural, kind=kind, namespaced=False, status_subresource=True
    )


FLOW_SCHEMAS = _kind("flowschemas", "FlowSchema")
PRIORITY_LEVEL_CONFIGURATIONS = _kind("prioritylevelconfigurations", "PriorityLevelConfiguration")
#: The kinds served (and stored) for API Priority and Fairness.
KINDS = (FLOW_SCHEMAS, PRIORITY_LEVEL_CONFIGURATIONS)
