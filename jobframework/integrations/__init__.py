"""Kueue's job integrations as data: one :class:`Integration` per kind, one module per family.

Why this package exists: Kueue's job framework (pkg/controller/jobframework,
GenericJob) lets every integration say the same few things -- where its pod
templates are and how many pods each stands for, how it is suspended, when it
has finished, whether pods still run, whether they are ready -- and does the rest
the same way for all: the Workload, its name, queue and priority, the start (the
templates get the flavors' node labels, tolerations and the checks'
podSetUpdates, then the job is unsuspended) and the stop (suspended, templates
given back). Here an integration is that data plus a few pure functions; the
watcher, the dispatcher and the webhook read this registry, so adding a kind is
one module in this package that lists its integrations in ``INTEGRATIONS``
(:func:`registry` finds it).

batch/v1 Job, JobSet and plain Pods keep their own modules
(:mod:`kueue_es.jobframework.jobs`, :mod:`~kueue_es.jobframework.jobsets`,
:mod:`~kueue_es.jobframework.pods`) because of what only they do (partial
admission, pod groups); the JobSet is registered here (:mod:`.jobset`) and served by
the generic path. Integrations started through their pods (Deployment,
StatefulSet, LeaderWorkerSet) have ``suspend_path`` None and are converted by the
pod integration.

Everything is pure; bad input raises :class:`kueue_es.events.manifests.ManifestError`
naming the object and the field, which callers turn into ObjectRejected.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import pkgutil
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from kueue_es.events import manifests, models, types
from kueue_es.jobframework import jobs, workloads

Path = tuple[str | int, ...]


class MapKey(str):
    """A path step that is a key of a map of the object's schema (an MPIJob's ``mpiReplicaSpecs``' ``Worker``), not
    a field: :func:`field_name` writes it ``[Worker]``, as Kueue's ``field.Path.Key`` does."""

    __slots__ = ()


JOB_ON_HOLD_MESSAGE = "Job is on hold"
"""The QuotaReserved message of a workload its job put on hold (Kueue reconciler.go, JobWithOnHold)."""
"""Where a field is in an object: map keys and list indexes from the object's root."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class InputKind:
    """A kind an integration's conversion reads besides the job (a TrainJob's TrainingRuntime): the watcher
    lists and watches it, keeps its objects in memory for :attr:`workloads.Context.objects` and converts
    the pending jobs again when one changes."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True


@dataclasses.dataclass(frozen=True, kw_only=True)
class PodSetSource:
    """One pod set of a job, and where its pod template is.

    ``name``: the pod set's name (Kueue lower-cases replica types: ``master``,
    ``worker``, ``head``). ``count``: pods it runs. ``template_path``: the path of
    its pod template (a PodTemplateSpec: ``metadata`` and ``spec``) in the job.
    ``min_count``: the fewest pods it may run with (partial admission), None when
    it may not. ``pod_index_label`` / ``sub_group_index_label`` /
    ``sub_group_count``: TAS rank hints (SEMANTICS-ADVANCED A.4.1).
    ``default_template``: the pod template when the job has none at ``template_path`` (a start
    writes it there, as Kueue does for a RayJob's submitter). ``workload_template``: the pod
    template the Workload counts when it is not the one at ``template_path`` as written: one
    Kueue builds (a SparkApplication's driver and executor fields, an AppWrapper's subset of a
    wrapped template), or the job's with containers its operator adds to every pod (a Ray
    head's autoscaler sidecar); None: the job's. ``template_path`` then names the field that
    errors point at.
    """

    name: str
    count: int
    template_path: Path
    min_count: int | None = None
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None
    default_template: Mapping[str, Any] | None = None
    workload_template: Mapping[str, Any] | None = None


def template_of(source: PodSetSource, job: Mapping[str, Any]) -> Any:
    """The job's pod template for ``source`` (at its ``template_path``), or its ``default_template``."""
    found = get_at(job, source.template_path)
    return copy.deepcopy(source.default_template) if found is None else found


@dataclasses.dataclass(frozen=True, kw_only=True)
class Finished:
    """A job that has finished: whether it ``succeeded``, its ``message`` and when (RFC 3339 or None).

    ``message`` is what the kind's Finished in Kueue returns, the Workload's Finished condition message: the
    job's own (a condition's, ``status.message``), empty when the job gives none, or Kueue's fixed text where
    it has one (an AppWrapper's); never one made up here."""

    succeeded: bool
    message: str
    at: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class PodSetView:
    """Where a start puts a pod set's PodSetInfo (flavor node labels, tolerations, the checks' labels,
    annotations and scheduling gates) for kinds whose start does not change the pod template at
    ``template_path`` (an AppWrapper's ``podSetInfos``, a SparkApplication's driver and executor fields).

    ``read(job, source)``: those fields as a pod template (``metadata.labels`` / ``annotations``,
    ``spec.nodeSelector`` / ``tolerations`` / ``schedulingGates``); ``write(job, source, template)``:
    the changed template written back into ``job``, in place. The start and the stop change the template
    as they change any other kind's.
    """

    read: Callable[[Mapping[str, Any], PodSetSource], dict[str, Any]]
    write: Callable[[dict[str, Any], PodSetSource, dict[str, Any]], None]


def _never(_: Mapping[str, Any]) -> bool:
    return False


def _none(_: Mapping[str, Any]) -> None:
    return None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Integration:
    """One kind of job Kueue integrates (Kueue jobframework.GenericJob and its IntegrationCallbacks).

    ``framework``: its name in the Configuration's ``integrations.frameworks``
    (``kubeflow.org/pytorchjob``). ``api_version`` / ``kind`` / ``plural``: the
    kind served by its CRD. ``suspend_path``: the boolean field that suspends it
    (``("spec", "runPolicy", "suspend")``); None for kinds run through their pods.
    ``pod_sets(ref, job)``: its pod sets in Kueue's order (raises ManifestError).
    ``finished(job)``: a :class:`Finished` or None. ``active(job)``: pods of it
    still run (IsActive: an evicted job's quota is released once this is false).
    ``pods_ready(job)``: Kueue's PodsReady. ``priority_class(job)``: (field path,
    PriorityClass name) the job names for all its pods, or None.
    ``reclaimable_pods(job)``: pods per pod set that finished and will not run
    again (dynamic reclaim), or None when the kind reports none. ``started(job,
    counts)``: changes a start makes besides the templates and the suspend field
    (``counts``: admitted pods per pod set), in place. ``owner_kinds``: kinds of
    managed jobs that may own this one (their child is part of them).
    ``pod_sets_field``: the field named when the pod sets as a whole are wrong (none, too
    many, a name twice). ``refused_at_create``: what ``pod_sets`` refuses is what Kueue's
    validating webhook for the kind refuses (its ValidateOnCreate / ValidateOnUpdate: a RayJob
    with autoscaling, a SparkApplication with dynamic allocation), so the webhook refuses it at
    create and update instead of the watcher reporting it afterwards. ``on_create(job)``: what Kueue's mutating webhook does to a managed
    job at creation besides suspending it (in place; for kinds run through their pods, the
    labels and annotations their pod templates get). ``pod_label_selector(job)``: the label
    selector of its pods ("" when not known yet; Kueue's PodLabelSelector, what ``kubectl
    kueue list pods --for`` lists). ``pod_set_view``: where the start writes
    when not into the templates (:class:`PodSetView`; None: the templates). ``stopped(job)``:
    changes a stop makes besides the templates and the suspend field, in place.
    ``owns_any_kind``: a wrapper (AppWrapper) whose controller creates objects of other kinds
    it owns; they are part of its workload, so every kind's conversion reads it first.
    ``skip(job)``: Kueue leaves this job alone (JobWithSkip: a RayJob running on an existing
    cluster), so it is no workload.


    For a kind whose pod templates are not in the job itself (a TrainJob: they are in the
    JobSet its runtime gives): ``inputs``, the kinds its conversion reads (in
    ``context.objects``); ``pod_set_object(ref, job, context)``, the object ``pod_sets``
    reads and the template paths point into (raises ManifestError); ``pods_ready_in(job,
    context)``, PodsReady when it needs those inputs too (used instead of ``pods_ready``), and
    ``reclaimable_pods_in(job, context)`` its reclaimable pods likewise;
    ``write_templates(job, templates, suspend)``, how a start or a stop writes the pod sets'
    template changes (by pod set name) into the job, in place, instead of at the templates'
    paths. All None or empty for the kinds that carry their templates.

    ``check_in(ref, job, context)``: rules of the kind's webhook that depend on the configuration (a Ray
    job's ``enableInTreeAutoscaling``, allowed only for an elastic job with ElasticJobsViaWorkloadSlices
    on: ``context.elastic_jobs``); raises ManifestError. None: no such rule.

    ``on_hold(job)``: the job asks for its workload to be put on hold (Kueue's JobWithOnHold, reconciler.go:
    a RayJob whose KubeRay validation failed): a workload holding quota gives it back, reason OnHold
    (:data:`JOB_ON_HOLD_MESSAGE`), and is not queued again. None: the kind never does.
    """

    framework: str
    api_version: str
    kind: str
    plural: str
    suspend_path: Path | None
    pod_sets: Callable[[workloads.JobRef, Mapping[str, Any]], list[PodSetSource]]
    finished: Callable[[Mapping[str, Any]], Finished | None]
    active: Callable[[Mapping[str, Any]], bool] = _never
    pods_ready: Callable[[Mapping[str, Any]], bool] = _never
    priority_class: Callable[[Mapping[str, Any]], tuple[str, str] | None] = _none
    reclaimable_pods: Callable[[Mapping[str, Any]], dict[str, int]] | None = None
    started: Callable[[dict[str, Any], Mapping[str, int]], None] | None = None
    owner_kinds: tuple[str, ...] = ()
    pod_sets_field: str = "spec"
    refused_at_create: bool = False
    on_create: Callable[[dict[str, Any]], None] | None = None
    pod_label_selector: Callable[[Mapping[str, Any]], str] | None = None
    namespaced: bool = True
    pod_set_view: PodSetView | None = None
    stopped: Callable[[dict[str, Any]], None] | None = None
    owns_any_kind: bool = False
    skip: Callable[[Mapping[str, Any]], bool] = _never
    inputs: tuple[InputKind, ...] = ()
    pod_set_object: Callable[[workloads.JobRef, Mapping[str, Any], workloads.Context], Mapping[str, Any]] | None = None
    pods_ready_in: Callable[[Mapping[str, Any], workloads.Context], bool] | None = None
    reclaimable_pods_in: Callable[[Mapping[str, Any], workloads.Context], dict[str, int]] | None = None
    write_templates: Callable[[dict[str, Any], Mapping[str, TemplateChange], bool], None] | None = None
    check_in: Callable[[workloads.JobRef, Mapping[str, Any], workloads.Context], None] | None = None
    on_hold: Callable[[Mapping[str, Any]], bool] | None = None

    @property
    def group(self) -> str:
        """The API group (``kubeflow.org``; "" for the core group)."""
        return self.api_version.rpartition("/")[0]

    def workload_name(self, name: str, uid: str) -> str:
        """``<kind lower-cased>-<name>-<5 hex>`` (jobframework GetWorkloadNameForOwnerWithGVK)."""
        return workloads.workload_name(owner_name=name, owner_uid=uid, kind=self.kind, group=self.group)

    def ref(self, job: Mapping[str, Any]) -> workloads.JobRef:
        """The :class:`~kueue_es.jobframework.workloads.JobRef` of one of its objects."""
        return workloads.job_ref(job, kind=self.kind, api_version=self.api_version)


# -- the registry ---------------------------------------------------------------------------------


@functools.cache
def registry() -> Mapping[str, Integration]:
    """Every integration of this package, by kind: each module's ``INTEGRATIONS`` tuple.

    Raises ValueError when two modules register the same kind or framework name.
    """
    found: dict[str, Integration] = {}
    frameworks: set[str] = set()
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        for integration in getattr(loaded, "INTEGRATIONS", ()):
            if integration.kind in found or integration.framework in frameworks:
                raise ValueError(f"integration {integration.framework} ({integration.kind}) is registered twice")
            found[integration.kind] = integration
            frameworks.add(integration.framework)
    return found


def by_kind(kind: str) -> Integration | None:
    """The integration of ``kind`` (``PyTorchJob``), or None."""
    return registry().get(kind)


def by_framework(framework: str) -> Integration | None:
    """The integration Kueue's ``integrations.frameworks`` names ``framework``, or None."""
    return next((i for i in registry().values() if i.framework == framework), None)


def kinds_of(frameworks: Collection[str] | None) -> tuple[str, ...]:
    """The kinds of the registered integrations among ``frameworks`` (None: all), in kind order."""
    return tuple(sorted(kind for kind, i in registry().items() if frameworks is None or i.framework in frameworks))


# -- fields by path -------------------------------------------------------------------------------


def get_at(obj: Any, path: Path) -> Any:
    """The value at ``path`` in ``obj``, or None when any step is missing."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(obj, list) or not -len(obj) <= step < len(obj):
                return None
        elif not isinstance(obj, dict):
            return None
        obj = obj[step] if isinstance(step, int) else obj.get(step)
    return obj


def set_at(obj: dict[str, Any], path: Path, value: Any) -> None:
    """Set ``path`` in ``obj`` to ``value``, creating the maps on the way; raises KeyError for a missing list item."""
    target: Any = obj
    for step in path[:-1]:
        if isinstance(step, int):
            target = target[step]
        else:
            target = target.setdefault(step, {})
    target[path[-1]] = value


def field_name(path: Path) -> str:
    """``spec.replicaSpecs[Worker].template``: a path as Kueue's field errors write it (a list index or a
    :class:`MapKey` in brackets, a field after a dot)."""
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int | MapKey) else (f".{step}" if out else step)
    return out


def pod_set_sources(
    integration: Integration, job: Mapping[str, Any], *, context: workloads.Context | None = None
) -> tuple[Mapping[str, Any], list[PodSetSource]]:
    """(the object holding the pod templates, the job's pod sets): the job itself, or what the integration's
    ``pod_set_object`` derives from it and ``context``. Raises ManifestError."""
    ref = integration.ref(job)
    holder = job
    if integration.pod_set_object is not None:
        holder = integration.pod_set_object(ref, job, context or workloads.Context())
    return holder, integration.pod_sets(ref, holder)


def job_pod_templates(api_version: str, kind: str, job: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The pod templates (PodTemplateSpec dicts: ``metadata`` and ``spec``, containers, images, env and all) of
    ``job``, an object of ``api_version``/``kind``, by pod set name, as Kueue's Workload carries them in
    ``spec.podSets[].template`` (jobframework ConstructWorkload: each pod set's template is the job's): a
    batch/v1 Job's ``main`` without the Job controller's labels (:func:`kueue_es.jobframework.jobs.
    workload_template`), an integration's pod sets (its ``workload_template`` when Kueue builds one).
    A single Pod's ``main`` is its spec (pod_controller.go constructPodSet: ``Template.Spec`` is the Pod's, no
    metadata): the worker of a MultiKueue copy compares the Pod it runs with it.
    Empty for any other kind. Raises ManifestError (a job its integration cannot read) or KeyError."""
    if (api_version, kind) == ("v1", "Pod"):
        spec = job["spec"]
        if not isinstance(spec, Mapping):
            raise workloads.job_ref(job, kind=kind, api_version=api_version).error(
                field="spec", problem="must be a mapping"
            )
        return {"main": {"spec": copy.deepcopy(dict(spec))}}
    if (api_version, kind) == ("batch/v1", "Job"):
        template = job["spec"]["template"]
        if not isinstance(template, Mapping):
            ref = workloads.job_ref(job, kind=kind, api_version=api_version)
            raise ref.error(field="spec.template", problem="must be a mapping")
        return {"main": jobs.workload_template(template)}
    integration = by_kind(kind)
    if integration is None or integration.api_version != api_version:
        return {}
    holder, sources = pod_set_sources(integration, job)
    return {s.name: s.workload_template if s.workload_template is not None else template_of(s, holder) for s in sources}


def pods_ready(integration: Integration, job: Mapping[str, Any], *, context: workloads.Context | None = None) -> bool:
    """Kueue's PodsReady of ``job``: ``pods_ready_in`` with ``context`` when the kind has it, else ``pods_ready``."""
    if integration.pods_ready_in is not None:
        return integration.pods_ready_in(job, context or workloads.Context())
    return integration.pods_ready(job)


def reclaimable_pods(
    integration: Integration, job: Mapping[str, Any], *, context: workloads.Context | None = None
) -> dict[str, int] | None:
    """The job's reclaimable pods by pod set (Kueue's JobWithReclaimablePods): ``reclaimable_pods_in`` with
    ``context`` when the kind has it, else ``reclaimable_pods``; None when the kind reports none."""
    if integration.reclaimable_pods_in is not None:
        return integration.reclaimable_pods_in(job, context or workloads.Context())
    if integration.reclaimable_pods is not None:
        return integration.reclaimable_pods(job)
    return None


def suspended(integration: Integration, job: Mapping[str, Any]) -> bool:
    """Whether the job is suspended (its ``suspend_path`` is true); False for kinds run through pods."""
    return integration.suspend_path is not None and get_at(job, integration.suspend_path) is True


# -- the Workload ---------------------------------------------------------------------------------


def to_workload(
    integration: Integration, job: Mapping[str, Any], *, context: workloads.Context | None = None
) -> models.Workload:
    """The Workload Kueue creates for ``job`` (jobframework ConstructWorkload): one pod set per
    :class:`PodSetSource`, in the integration's order, with per-pod requests from the template
    (SEMANTICS §2.3), its TAS request from the template's annotations, and the job's queue and
    priority. Raises ManifestError naming the object and the field."""
    context = context or workloads.Context()
    ref = integration.ref(job)
    if not isinstance(job.get("spec"), dict):
        raise ref.error(field="spec", problem="must be a mapping")
    if integration.check_in is not None:
        integration.check_in(ref, job, context)
    holder, sources = pod_set_sources(integration, job, context=context)
    pod_sets: list[models.PodSet] = []
    pod_specs: list[tuple[str, Mapping[str, Any]]] = []
    annotation_fields: list[str] = []
    for source in sources:
        where = field_name(source.template_path)
        template = source.workload_template if source.workload_template is not None else template_of(source, holder)
        pod_spec = workloads.pod_spec_at(ref, template, where=where)
        request = workloads.topology_request(
            ref,
            workloads.template_annotations(ref, template, where=where),
            where=f"{where}.metadata.annotations",
            count=source.count,
            pod_index_label=source.pod_index_label,
            sub_group_index_label=source.sub_group_index_label,
            sub_group_count=source.sub_group_count,
            context=context,
        )
        pod_sets.append(
            workloads.pod_set(
                ref,
                name=source.name,
                count=source.count,
                pod_spec=pod_spec,
                where=f"{where}.spec",
                min_count=source.min_count,
                context=context,
                topology_request=request,
                index=len(pod_sets),
            )
        )
        pod_specs.append((f"{where}.spec", pod_spec))
        annotation_fields.append(f"{where}.metadata.annotations")
    workloads.check_pod_sets(ref, pod_sets, field=integration.pod_sets_field)
    workloads.check_topology_groups(ref, pod_sets, where=annotation_fields)
    return workloads.new_workload(
        ref,
        name=integration.workload_name(ref.name, ref.uid),
        pod_sets=pod_sets,
        queue=workloads.queue_name(ref, context) or "",
        pod_specs=pod_specs,
        context=context,
        owner=workloads.owner_of(ref),
        job_priority_class=integration.priority_class(job),
    )


def facts(
    integration: Integration, job: Mapping[str, Any], *, now_ms: int = 0, context: workloads.Context | None = None
) -> types.Fact | None:
    """The fact a job of ``integration`` stands for, or None when Kueue does not manage it.

    Managed as a batch/v1 Job is: the queue-name label (or ``manageJobsWithoutQueueName``),
    and no managed ancestor (:func:`workloads.managed_ancestor`; a chain too deep: ObjectRejected). A kind run through its pods (``suspend_path`` None:
    Deployment, StatefulSet, LeaderWorkerSet) has no workload of its own: always None. Finished: WorkloadFinished
    with the :class:`Finished` message as it is (empty when the job gives none, as Kueue's Finished); otherwise
    WorkloadObserved; a job that cannot be converted: ObjectRejected. A job naming a prebuilt Workload
    (:func:`workloads.prebuilt_workload`) adopts it: no WorkloadObserved, its finish is that Workload's.
    """
    if integration.suspend_path is None:
        return None  # run through its pods: they are the workloads (pods.py)
    context = context or workloads.Context()
    ref = integration.ref(job)
    try:
        if (
            integration.skip(job)
            or not context.namespace_managed(ref.namespace)
            or workloads.managed_ancestor(ref, context)
            or workloads.queue_name(ref, context) is None
        ):
            return None
    except manifests.ManifestError as err:
        return workloads.rejected(job, err, now_ms=now_ms)
    finished = integration.finished(job)
    prebuilt = workloads.prebuilt_workload(job)
    if finished is not None:
        return workloads.finished_fact(
            ref,
            name=prebuilt or integration.workload_name(ref.name, ref.uid),
            succeeded=finished.succeeded,
            message=finished.message,
            at_ms=workloads.status_time_ms(finished.at, default=now_ms),
            uid="" if prebuilt else None,
        )
    if prebuilt:
        return None  # adopts the Workload that exists already (MultiKueue's copy on a worker)
    try:
        return types.WorkloadObserved(workload=to_workload(integration, job, context=context))
    except manifests.ManifestError as err:
        return workloads.rejected(job, err, now_ms=now_ms)


# -- start and stop -------------------------------------------------------------------------------

TemplateChange = Callable[[dict[str, Any]], dict[str, Any]]
"""A pod template (``metadata`` and ``spec``) in, the changed copy out."""


def changed_job(
    integration: Integration,
    job: Mapping[str, Any],
    *,
    templates: Mapping[str, TemplateChange],
    suspend: bool,
    counts: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A copy of ``job`` with each pod set's template changed by ``templates[pod set name]`` and its
    suspend field set to ``suspend`` (Kueue RunWithPodSetsInfo / Suspend + RestorePodSetsInfo).

    ``counts``: admitted pods per pod set, passed to the integration's ``started`` hook on a start;
    a stop runs its ``stopped`` hook. Kinds with a :class:`PodSetView` have that changed instead of
    the templates; a kind with ``write_templates`` writes the changes its own way. Raises
    ManifestError when the job no longer converts.
    """
    out = copy.deepcopy(dict(job))
    view = integration.pod_set_view
    if integration.write_templates is not None:
        integration.write_templates(out, templates, suspend)
    else:
        for source in integration.pod_sets(integration.ref(job), job):
            change = templates.get(source.name)
            if change is None:
                continue
            if view is None:
                set_at(out, source.template_path, change(template_of(source, out) or {}))
            else:
                view.write(out, source, change(view.read(out, source)))
    if integration.suspend_path is not None:
        set_at(out, integration.suspend_path, suspend)
    if not suspend and integration.started is not None:
        integration.started(out, counts or {})
    if suspend and integration.stopped is not None:
        integration.stopped(out)
    return out


def start_template(integration: Integration, job: Mapping[str, Any], source: PodSetSource) -> Any:
    """What a start changes for pod set ``source`` of ``job``, as a pod template: its :class:`PodSetView`
    when the integration has one, else the template at ``template_path`` (its ``default_template`` when
    absent)."""
    if integration.pod_set_view is not None:
        return integration.pod_set_view.read(job, source)
    return template_of(source, job)


def merge_patch(current: Any, desired: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns ``current`` into ``desired``: maps compared key by key
    (a key gone is null), anything else sent whole when it differs. Equal objects give ``{}``."""
    if not isinstance(current, dict) or not isinstance(desired, dict):
        return copy.deepcopy(desired)
    patch: dict[str, Any] = {}
    for key, value in desired.items():
        if key not in current:
            patch[key] = copy.deepcopy(value)
        elif current[key] != value:
            if isinstance(value, dict) and isinstance(current[key], dict):
                patch[key] = merge_patch(current[key], value)
            else:
                patch[key] = copy.deepcopy(value)
    for key in current:
        if key not in desired:
            patch[key] = None
    return patch


def count_of(value: Any, *, default: int = 1) -> int:
    """A replica count from a job's field: an int (or decimal string), ``default`` when absent or malformed.

    For status fields only; spec counts go through :func:`kueue_es.jobframework.workloads.count_field`.
    """
    number = workloads.parse_int(value)
    return default if number is None else number


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list (a JSON array), else an empty one: for status fields a controller may
    leave out or a user may write wrong."""
    return value if isinstance(value, list) else []


def condition_true(job: Mapping[str, Any], *condition_types: str) -> Mapping[str, Any] | None:
    """The first True ``status.conditions`` entry of one of ``condition_types``, or None."""
    return workloads.true_condition(job, condition_types)


def finished_by_conditions(
    job: Mapping[str, Any], *, succeeded: Sequence[str], failed: Sequence[str]
) -> Finished | None:
    """:class:`Finished` from the first True condition among ``succeeded`` + ``failed`` types, or None."""
    condition = workloads.true_condition(job, (*succeeded, *failed))
    if condition is None:
        return None
    return Finished(
        succeeded=condition.get("type") in succeeded,
        message=str(condition.get("message") or ""),
        at=condition.get("lastTransitionTime"),
    )
