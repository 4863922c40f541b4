"""What kube-apiserver's defaulting writes into a pod spec as it decodes a Pod, a Job or another kind with a pod
template (Kubernetes pkg/apis/core/v1/defaults.go), which ``kubectl get -o yaml`` then shows.

Why this module exists: users run the real kubectl against the emulated API server and compare with a real
cluster, where every pod spec reads back with ``restartPolicy``, ``dnsPolicy``, ``schedulerName``,
``terminationGracePeriodSeconds``, ``securityContext`` and each container's ``imagePullPolicy`` and
termination message fields filled in. Kueue's Workloads carry them too, as a Workload's pod sets are copied
from the job's stored (so defaulted) template.

Only built-in kinds are defaulted so: a pod template inside a custom resource (a JobSet's, a
LeaderWorkerSet's) is not, as kube-apiserver does not know its schema; the Jobs and pods made from it are.
Pure functions over plain dicts that only fill in what is absent, so defaulting again changes nothing (every
write is decoded, so defaulted, again). Quantities are the one rewrite: kube-apiserver decodes each into a
``resource.Quantity`` and encodes it back in its canonical form (``cpu: 0.5`` reads back ``500m``, ``cpu: 1``
``"1"``, ``1024Mi`` ``1Gi``), which is a fixed point too.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from kueue_es.events import quantities

#: SetDefaults_PodSpec's values (k8s.io/api core/v1 types.go: DNSClusterFirst, RestartPolicyAlways,
#: DefaultTerminationGracePeriodSeconds, DefaultSchedulerName).
_POD_SPEC_DEFAULTS: dict[str, Any] = {
    "dnsPolicy": "ClusterFirst",
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 30,
    "schedulerName": "default-scheduler",
}
#: SetDefaults_Container's termination message defaults (core/v1 TerminationMessagePathDefault,
#: TerminationMessageReadFile).
_CONTAINER_DEFAULTS = {"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
#: The container lists of a pod spec that SetObjectDefaults_* default container by container.
_CONTAINER_LISTS = ("initContainers", "containers")


def default_pod(pod: MutableMapping[str, Any]) -> None:
    """Default a v1 Pod: its spec as any pod spec (:func:`default_pod_spec`), and what SetDefaults_Pod adds for
    a Pod only, not a template: each container's requests from its limits where it requests nothing of a
    resource it limits, and ``enableServiceLinks`` true (core/v1 DefaultEnableServiceLinks)."""
    spec = _mapping_at(pod, "spec")
    if spec is None:
        return
    default_pod_spec(spec)
    for container in _containers(spec):
        resources = container.get("resources")
        if not isinstance(resources, MutableMapping):
            continue
        limits = resources.get("limits")
        if not isinstance(limits, MutableMapping) or not limits:
            continue
        requests = resources.get("requests")
        if not isinstance(requests, MutableMapping):
            requests = resources["requests"] = {}
        for name, amount in limits.items():
            requests.setdefault(name, amount)
    spec.setdefault("enableServiceLinks", True)


def default_pod_template(obj: MutableMapping[str, Any], *path: str) -> None:
    """Default the pod spec of the pod template at ``path`` (the keys down to the template) in ``obj``, if
    there is one: a Job's ``spec.template``, a CronJob's ``spec.jobTemplate.spec.template``, a PodTemplate's
    ``template`` (SetObjectDefaults_Job and the like call SetDefaults_PodSpec and SetDefaults_Container on
    it). A template without a spec is left alone: validation refuses it."""
    template: Any = obj
    for key in path:
        template = template.get(key) if isinstance(template, MutableMapping) else None
    spec = _mapping_at(template, "spec") if isinstance(template, MutableMapping) else None
    if spec is not None:
        default_pod_spec(spec)


def default_pod_spec(spec: MutableMapping[str, Any]) -> None:
    """SetDefaults_PodSpec and SetDefaults_Container (pkg/apis/core/v1/defaults.go): the pod spec's DNS and
    restart policies, termination grace period, scheduler name and an empty ``securityContext``; each
    container's (init containers' too) ``imagePullPolicy`` (:func:`image_pull_policy`), termination message
    path and policy, its ports' protocol TCP (SetDefaults_ContainerPort) and, as the API server encodes the
    struct even when empty, ``resources: {}``."""
    for field, value in _POD_SPEC_DEFAULTS.items():
        if spec.get(field) in (None, ""):
            spec[field] = value
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    for container in _containers(spec):
        if not container.get("imagePullPolicy"):
            container["imagePullPolicy"] = image_pull_policy(container.get("image"))
        for field, value in _CONTAINER_DEFAULTS.items():
            if not container.get(field):
                container[field] = value
        if container.get("resources") is None:
            container["resources"] = {}
        for port in container.get("ports") or []:
            if isinstance(port, MutableMapping) and not port.get("protocol"):
                port["protocol"] = "TCP"
    canonical_quantities(spec)


def canonical_quantities(spec: MutableMapping[str, Any]) -> None:
    """Write every quantity of a pod spec in the form kube-apiserver stores it
    (:func:`kueue_es.events.quantities.canonical_pod_spec`). A value that is not a quantity is left as sent, for
    validation to refuse by its field (kube-apiserver refuses it while decoding, 400 "quantities must match the
    regular expression ...")."""
    quantities.canonical_pod_spec(spec)


def image_pull_policy(image: Any) -> str:
    """``Always`` for an image tagged ``latest`` or not tagged at all (which means latest), else
    ``IfNotPresent`` (SetDefaults_Container). An image pinned by digest alone has no tag, so IfNotPresent, as
    parsers.ParseImageName reads it. A tag is what follows the last ``:`` after the last ``/`` (a registry's
    port comes before a ``/``)."""
    name = str(image or "")
    if "@" in name:
        name, _, _ = name.partition("@")
        last = name.rsplit("/", 1)[-1]
        return "Always" if last.rpartition(":")[2] == "latest" and ":" in last else "IfNotPresent"
    last = name.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def default_job(job: MutableMapping[str, Any]) -> None:
    """SetDefaults_Job (pkg/apis/batch/v1/defaults.go, Kubernetes 1.32) and its pod template: completions and
    parallelism 1 when both are unset, else parallelism 1 when unset; ``backoffLimit`` 6, or the int32 maximum
    with ``backoffLimitPerIndex``; ``completionMode`` NonIndexed; ``suspend`` false; ``podReplacementPolicy``
    Failed with a pod failure policy, else TerminatingOrFailed (feature JobPodReplacementPolicy, on since
    1.29); a pod failure policy's ``onPodConditions`` status True when unset; and, when the Job has no labels,
    its template's labels as its own (the template as sent: the selector labels come after, at create)."""
    spec = _mapping_at(job, "spec")
    if spec is None:
        spec = job["spec"] = {}
    if spec.get("parallelism") is None and spec.get("completions") is None:
        spec["completions"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2**31 - 1 if spec.get("backoffLimitPerIndex") is not None else 6
    if spec.get("completionMode") is None:
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    failure_policy = spec.get("podFailurePolicy")
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if failure_policy is not None else "TerminatingOrFailed"
    if isinstance(failure_policy, MutableMapping):
        for rule in failure_policy.get("rules") or []:
            for pattern in (rule.get("onPodConditions") or []) if isinstance(rule, MutableMapping) else []:
                if isinstance(pattern, MutableMapping) and not pattern.get("status"):
                    pattern["status"] = "True"
    metadata = job.get("metadata")
    template = spec.get("template")
    template_labels = (template.get("metadata") or {}).get("labels") if isinstance(template, MutableMapping) else None
    if isinstance(metadata, MutableMapping) and template_labels and not metadata.get("labels"):
        metadata["labels"] = dict(template_labels)
    default_pod_template(job, "spec", "template")


def default_jobset(jobset: MutableMapping[str, Any]) -> None:
    """What the JobSet controller's mutating webhook defaults (jobset's pkg/webhooks/jobset_webhook.go Default)
    that the simulation relies on: each replicated job's Job template is ``completionMode: Indexed`` unless it
    says otherwise, so its pods carry ``batch.kubernetes.io/job-completion-index`` (Kueue's TAS ranks a JobSet's
    pods by it and the ``jobset.sigs.k8s.io/job-index`` label). Entries that are not mappings are left to
    validation."""
    spec = _mapping_at(jobset, "spec")
    for rjob in (spec or {}).get("replicatedJobs") or []:
        template = _mapping_at(rjob, "template")
        job_spec = _mapping_at(template, "spec") if template is not None else None
        if job_spec is not None and job_spec.get("completionMode") is None:
            job_spec["completionMode"] = "Indexed"


def _mapping_at(obj: Any, key: str) -> MutableMapping[str, Any] | None:
    value = obj.get(key) if isinstance(obj, MutableMapping) else None
    return value if isinstance(value, MutableMapping) else None


def _containers(spec: MutableMapping[str, Any]) -> list[MutableMapping[str, Any]]:
    return [
        container
        for group in _CONTAINER_LISTS
        for container in spec.get(group) or []
        if isinstance(container, MutableMapping)
    ]
